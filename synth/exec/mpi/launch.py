"""The MPI backend's launcher: ``synth run --backend mpi`` on this machine.

`run` starts the venv's own ``mpiexec -n R python -m synth.exec.mpi SCHEDULE …`` (the ranks of
`synth.exec.mpi.ranks`), passes the ranks' other output through, reads the rows rank 0 posts to
the board (`synth.exec.mpi.board`) and hands them to its caller, and turns a failure into one
`ExecutionError` naming the rank and the step. It never loads the MPI library itself (mpi4py's
``MPI`` module initialises MPI when imported), so this process is no MPI process.

The launcher watches the rank processes (Linux pidfds) and the ranks' positions on the board, so
it names a rank that was killed and its step, and removes the shared-memory files MPI leaves in
/dev/shm when its job ends abnormally.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from synth.collective import Kind
from synth.errors import InputError
from synth.exec.faults import ExecutionError, describe_position, signal_name, step_of
from synth.exec.mpi.board import Board
from synth.exec.report import Measurement, Row
from synth.exec.settings import RunSettings

NAME = "mpi"

#: MPI's own collective for each kind (``--compare-native``), as the table's heading names it.
NATIVE_NAMES = {
    Kind.ALLREDUCE: "MPI_Allreduce",
    Kind.REDUCE: "MPI_Reduce",
    Kind.BROADCAST: "MPI_Bcast",
    Kind.ALLGATHER: "MPI_Allgather",
    Kind.GATHER: "MPI_Gather",
    Kind.SCATTER: "MPI_Scatter",
    Kind.REDUCE_SCATTER: "MPI_Reduce_scatter_block",
    Kind.ALLTOALL: "MPI_Alltoall",
}


def mpiexec_path() -> Path:
    """The venv's own mpiexec, next to this Python (a system launcher of another MPI fails)."""
    return Path(sys.executable).parent / "mpiexec"


def check_available() -> None:
    """Refuse (bad input: ``--backend mpi``) when mpi4py or the venv's mpiexec is missing."""
    try:
        import mpi4py  # noqa: F401  (the package only: its MPI module would initialise MPI here)
    except ImportError:
        raise InputError("synth run", "--backend", "mpi", "needs mpi4py and mpich: pip install 'synth[mpi]'") from None
    if not mpiexec_path().is_file():
        raise InputError("synth run", "--backend", "mpi", f"no mpiexec next to {sys.executable}; pip install mpich")


_BANNER_PID = re.compile(r"PID (\d+) RUNNING AT")
_BANNER_SIGNAL = re.compile(r"\(signal (\d+)\)|KILLED BY SIGNAL: (\d+)")
_BANNER_EXIT = re.compile(r"EXIT CODE: (\d+)")
_HELD_BACK = re.compile(
    r"^(=|YOUR APPLICATION TERMINATED|This typically refers|Please see the FAQ|Abort\(\d+\) on node|synth: error:|$)"
)


def run(
    settings: RunSettings,
    *,
    on_start: Callable[[str, str | None], None] | None = None,
    on_result: Callable[[int, Row], None] | None = None,
) -> list[Row]:
    """Run ``settings`` (a verified schedule) as an MPI job of one process per rank on this
    machine; returns one `Row` per case. ``on_start(description, native_name)`` is called once
    the ranks are up, ``on_result(index, row)`` as each case finishes. Raises `ExecutionError`
    (rank and step) if a rank fails, is killed or hangs, `KeyboardInterrupt` if interrupted; either
    way the job is stopped and MPI's leftovers in /dev/shm are removed."""
    check_available()
    r = settings.schedule.collective.num_ranks
    native_name = NATIVE_NAMES[settings.schedule.collective.kind] if settings.compare_native else None
    with tempfile.TemporaryDirectory(prefix="synth-exec-mpi-") as folder:
        progress_path = os.path.join(folder, "board")
        board = Board(progress_path, create=(r, len(settings.cases)))
        cmd = [str(mpiexec_path()), "-n", str(r), sys.executable, "-m", "synth.exec.mpi", settings.schedule_path]
        cmd += [*settings.pass_through(), "--progress-file", progress_path]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # the ranks' own output appears as it comes
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
        lines: list[str] = []
        readers = [
            threading.Thread(target=_forward, args=(proc.stdout, sys.stdout, lines), daemon=True),
            threading.Thread(target=_forward, args=(proc.stderr, sys.stderr, lines), daemon=True),
        ]
        for reader in readers:
            reader.start()
        rows = _Rows(settings, board, native_name, on_start, on_result)
        try:
            code, first_dead = _wait_mpiexec(proc, board, settings, rows)
        except BaseException:
            _stop_mpiexec(proc)
            _remove_mpi_leftovers(progress_path)
            raise
        for reader in readers:
            reader.join(timeout=5)
        rows.take()
        if code == 0 and len(rows.done) == len(settings.cases):
            return rows.done
        _remove_mpi_leftovers(progress_path)
        raise ExecutionError(_failure_message(lines, board, settings, code, first_dead))


class _Rows:
    """The rows rank 0 posted, handed on in order as they complete."""

    def __init__(self, settings: RunSettings, board: Board, native_name: str | None, on_start, on_result):
        self.settings, self.board, self.native_name = settings, board, native_name
        self.on_start, self.on_result = on_start, on_result
        self.started = False
        self.done: list[Row] = []

    def take(self) -> None:
        if not self.started:
            description = self.board.description()
            if description is None:
                return
            self.started = True
            if self.on_start is not None:
                self.on_start(description, self.native_name)
        while len(self.done) < len(self.settings.cases):
            posted = self.board.result(len(self.done))
            if posted is None:
                return
            layout = self.settings.cases[len(self.done)].layout
            (time_us, wrong), native = posted
            row = Row(Measurement(layout, time_us, wrong), None if native is None else Measurement(layout, *native))
            self.done.append(row)
            if self.on_result is not None:
                self.on_result(len(self.done) - 1, row)


def _forward(stream, out, lines: list[str]) -> None:
    """Pass the ranks' output through as it comes, holding back MPI's termination banner and
    our ranks' error lines (summarised at the end)."""
    closed = False
    for line in stream:
        lines.append(line.rstrip("\n"))
        if not closed and not _HELD_BACK.match(line.strip()):
            try:
                out.write(line)
                out.flush()
            except (BrokenPipeError, ValueError):  # the reader went away (| head): keep draining
                closed = True


def _remove_mpi_leftovers(progress_path: str) -> None:
    """Unlink the shared-memory files the ranks reported mapping (MPI unlinks them at
    MPI_Finalize, so an aborted or killed job leaves them behind)."""
    try:
        with open(progress_path + ".shm", encoding="utf-8") as fh:
            names = {line.strip() for line in fh if line.strip().startswith("/dev/shm/")}
    except OSError:
        return
    for name in sorted(names):
        with contextlib.suppress(OSError):
            os.unlink(name)


class _Deaths:
    """Which rank processes ended first: a pidfd per rank (Linux), so that when a rank is killed
    the launcher can name it even though MPI's launcher then kills all the others."""

    def __init__(self, board: Board):
        self.board = board
        self.fds: dict[int, int] = {}
        self.first: list[int] | None = None
        self.usable = hasattr(os, "pidfd_open")

    def open(self) -> None:
        pids = self.board.pids()
        if self.fds or not self.usable or not all(pid > 0 for pid in pids):
            return
        gone = []
        for rank, pid in enumerate(pids):
            try:
                self.fds[os.pidfd_open(pid)] = rank
            except ProcessLookupError:
                gone.append(rank)
            except OSError:
                self.usable = False
        # a process that ended but was not yet reaped still opens; its pidfd is readable at once
        ended, _, _ = select.select(list(self.fds), [], [], 0) if self.fds else ([], [], [])
        gone = sorted(gone + [self.fds[fd] for fd in ended])
        if gone and self.first is None:
            self.first = gone  # several when they ended before the launcher looked: not ordered

    def wait(self, timeout: float) -> None:
        if not self.fds:
            time.sleep(timeout)
            return
        ready, _, _ = select.select(list(self.fds), [], [], timeout)
        if ready and self.first is None:
            self.first = sorted(self.fds[fd] for fd in ready)
        for fd in ready:
            os.close(fd)
            del self.fds[fd]

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = {}


def _wait_mpiexec(proc: subprocess.Popen, board: Board, settings: RunSettings, rows: _Rows) -> tuple[int, list[int] | None]:
    """Wait for mpiexec, handing on rows as they come; returns its exit code and the rank(s)
    whose process ended first. If no rank moves for the timeout (plus grace for the ranks' own
    watchdogs), stop it and report the laggard."""
    last, since = board.positions(), time.monotonic()
    grace = settings.timeout + 10.0
    deaths = _Deaths(board)
    try:
        while True:
            deaths.open()
            deaths.wait(0.05)
            code = proc.poll()
            rows.take()
            if code is not None:
                return code, deaths.first
            now = time.monotonic()
            state = board.positions()
            if not np.array_equal(state, last):
                last, since = state, now
            elif now - since > grace:
                _stop_mpiexec(proc)
                x = int(np.lexsort(state[:, 2::-1].T)[0])
                where = describe_position(state[x], settings.labels)
                raise ExecutionError(f"rank {x} made no progress for {settings.timeout:g} s {where}; run stopped")
    finally:
        deaths.close()


def _stop_mpiexec(proc: subprocess.Popen) -> None:
    """Stop mpiexec and its ranks: SIGINT (it forwards and cleans up), then SIGKILL the group."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _failure_message(lines: list[str], board: Board, settings: RunSettings, code: int, first_dead: list[int] | None) -> str:
    """One line naming the rank and step: the ranks' own report if any (a crash or a hang), else
    the rank whose process ended first (killed), with the cause MPI's launcher gives for it."""
    ours = list(dict.fromkeys(line[len("synth: error: ") :] for line in lines if line.startswith("synth: error:")))
    if ours:
        for extra in ours[1:]:
            print(f"synth: {extra}", file=sys.stderr, flush=True)
        return ours[0]
    r = board.ranks
    text = "\n".join(lines)
    cells = np.array(board.rows)
    pid = _BANNER_PID.search(text)
    reported = [x for x in range(r) if pid and cells[x, 4] == int(pid.group(1))]
    culprits = first_dead or reported
    # A killed rank's peers see its connections close before the kernel reports it ended, and
    # may end first (MPI then kills the rest): a rank that was only waiting for messages is a
    # victim. Of the ranks that were not waiting, the one that got least far ended first.
    working = [x for x in range(r) if cells[x, 1] >= 0 and not step_of(int(cells[x, 2]))[1]]
    if working:
        culprits = [x for x in culprits if x in working] or working
    if len(culprits) > 1:
        least = min(tuple(cells[x, :3]) for x in culprits)
        culprits = [x for x in culprits if tuple(cells[x, :3]) == least]
    if not culprits:
        return f"mpiexec exited with code {code}" + (f": {lines[-1]}" if lines else "")
    rank = culprits[0]
    how = "died"
    if reported == [rank]:
        sig = _BANNER_SIGNAL.search(text)
        exit_match = _BANNER_EXIT.search(text)
        if sig:
            how = f"was killed by {signal_name(int(sig.group(1) or sig.group(2)))}"
        elif exit_match:
            how = f"exited with code {exit_match.group(1)}"
    who = f"rank {rank}" if len(culprits) == 1 else f"ranks {', '.join(map(str, culprits))} (first to end)"
    return f"{who} {how} {describe_position(cells[rank], settings.labels)}"
