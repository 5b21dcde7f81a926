"""The MPI backend's launcher: ``synth run --backend mpi`` on this machine.

`run` starts the venv's own ``mpiexec -n R python -m synth.exec.mpi SCHEDULE …`` (the ranks of
`synth.exec.mpi.ranks`), passes the ranks' other output through, reads the rows rank 0 posts to
the board (`synth.exec.mpi.board`) and hands them to its caller, and turns a failure into one
`ExecutionError` naming the rank and the step, as the multiprocessing backend's parent does. It
never loads the MPI library itself (mpi4py's ``MPI`` module initialises MPI when imported), so
this process is no MPI process.

It supervises the job from the board, where every process posts what it knows first-hand:

- a rank that raises posts its error (one line) before it ends the job;
- a rank that dies (killed, or exiting from under us) is recorded by its keeper
  (`synth.exec.mpi.keeper`), its parent, with how it ended, before MPI's process manager learns
  of it and kills the others; the earliest record names the rank;
- a hang is judged here, like the multiprocessing parent does: when no rank's position has
  moved for ``--timeout`` seconds, the rank whose process is stopped, else the one that is not
  waiting for others, else the one that got least far, is named, at the position it posted.

Then it stops every rank (SIGKILL through pidfds: a stopped rank too), lets ``mpiexec`` end, and
removes the shared-memory files MPI's job left in /dev/shm (MPI removes them only at a clean
``MPI_Finalize``): the ``mpich_*`` files that appeared during the run and that no live process
holds open or mapped.
"""

from __future__ import annotations

import contextlib
import os
import re
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
from synth.exec import data
from synth.exec.faults import ExecutionError, describe_position, step_of
from synth.exec.layout import Layout
from synth.exec.mpi.board import CALL, ENDED, ENDED_AT, ERROR_AT, PHASE, PID, SIZE, Board
from synth.exec.mpi.keeper import wait_status_words
from synth.exec.program import Program
from synth.exec.report import Measurement, Row
from synth.exec.settings import MemoryNeed, RunSettings, check_memory

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


def memory_needed(program: Program, layouts: list[Layout]) -> MemoryNeed:
    """The memory an MPI run of these layouts (one after another) takes on this machine at its
    peak: every rank's send, receive, work and scratch buffers for the largest layout (a rank
    frees one layout's buffers before it makes the next one's), plus each rank's working memory
    for its inputs and its check."""
    peak = 0
    for layout in layouts:
        lengths = layout.chunk_length
        need = 0
        for rank in range(program.num_ranks):
            received = [sum(int(lengths[msg.chunks].sum()) for msg in plan.recvs) for plan in program.rank_plan(rank)]
            work = program.work_offsets(rank, layout)[1]
            need += layout.send_count + layout.recv_count + work + max(received, default=0)
        peak = max(peak, need * layout.itemsize)
    return MemoryNeed(total=peak + program.num_ranks * data.WORKING_BYTES)


#: while the ranks start (Python, imports, MPI's start-up), how long no rank may move before the
#: run counts as hung, unless a rank's process is stopped
STARTUP_ALLOWANCE = 60.0
#: how long after a rank's failure is on the board mpiexec may take to end the job by itself
_END_GRACE = 5.0
_POLL = 0.05

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
    way every process of the job is stopped and MPI's leftovers in /dev/shm are removed."""
    check_available()
    check_memory(settings, memory_needed(Program(settings.schedule), [case.layout for case in settings.cases]))
    r = settings.schedule.collective.num_ranks
    native_name = NATIVE_NAMES[settings.schedule.collective.kind] if settings.compare_native else None
    with tempfile.TemporaryDirectory(prefix="synth-exec-mpi-") as folder:
        path = os.path.join(folder, "board")
        board = Board(path, create=(r, len(settings.cases)))
        leftovers = _Leftovers()
        cmd = [str(mpiexec_path()), "-n", str(r), sys.executable, "-m", "synth.exec.mpi", settings.schedule_path]
        cmd += [*settings.pass_through(), "--progress-file", path]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # the ranks' own output appears as it comes
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
        output = _Output(proc)
        job = _Job(proc, board, settings, BoardRows(settings, board, native_name, on_start, on_result))
        try:
            failure = job.watch()
        except BaseException:
            output.mute()
            job.stop()
            leftovers.remove()
            raise
        if failure is None:
            output.join()
            job.close()
            return job.rows.done
        output.mute()
        job.stop()
        leftovers.remove()
        if isinstance(failure, int):  # nothing on the board: say what mpiexec said
            said = f": {output.lines[-1]}" if output.lines else ""
            failure = ExecutionError(f"mpiexec exited with code {proc.returncode}{said}")
        raise failure


class BoardRows:
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


class _Output:
    """mpiexec's stdout and stderr (the ranks' own output), passed through as they come, except
    MPI's termination banner and our ranks' error lines (the launcher reports failures); silent
    once the launcher stops the job."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: list[str] = []
        self._muted = threading.Event()
        self._readers = [
            threading.Thread(target=self._forward, args=(proc.stdout, sys.stdout), daemon=True),
            threading.Thread(target=self._forward, args=(proc.stderr, sys.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _forward(self, stream, out) -> None:
        closed = False
        for line in stream:
            self.lines.append(line.rstrip("\n"))
            if closed or self._muted.is_set() or _HELD_BACK.match(line.strip()):
                continue
            try:
                out.write(line)
                out.flush()
            except (BrokenPipeError, ValueError):  # the reader went away (| head): keep draining
                closed = True

    def mute(self) -> None:
        self._muted.set()

    def join(self) -> None:
        for reader in self._readers:
            reader.join(timeout=5)


class _Job:
    """The running job: mpiexec, the rank processes the keepers posted (as pidfds, so that a
    signal never reaches a process that reused a pid), and the board."""

    def __init__(self, proc: subprocess.Popen, board: Board, settings: RunSettings, rows: BoardRows):
        self.proc, self.board, self.settings, self.rows = proc, board, settings, rows
        self.ranks: dict[int, int] = {}  # rank -> pidfd of its process
        self.pids: dict[int, int] = {}

    def _track(self, cells: np.ndarray) -> None:
        for rank, pid in enumerate(cells[:, PID].tolist()):
            if pid > 0 and rank not in self.ranks:
                self.pids[rank] = pid
                try:
                    self.ranks[rank] = os.pidfd_open(pid)
                except ProcessLookupError:  # already gone: its keeper's record says how
                    self.ranks[rank] = -1
                except (AttributeError, OSError):  # no pidfds here: signal by pid
                    self.ranks[rank] = -2

    def watch(self) -> ExecutionError | int | None:
        """Follow the job until it ends; None if every case ran, else the failure to report (or
        mpiexec's exit code, if the board shows none)."""
        board, settings = self.board, self.settings
        last, since = board.positions(), time.monotonic()
        failed_since: float | None = None
        while True:
            code = self.proc.poll()  # first: once mpiexec is gone, the board is final
            cells = board.snapshot()
            self._track(cells)
            self.rows.take()
            if code is not None:
                if code == 0 and len(self.rows.done) == len(settings.cases):
                    return None
                return self._failure(board.snapshot()) or code
            now = time.monotonic()
            if np.any(cells[:, ERROR_AT]) or np.any(cells[:, ENDED]):
                failed_since = failed_since or now
                if now - failed_since > _END_GRACE:  # mpiexec did not end the job: we do
                    return self._failure(cells) or -1
            positions = cells[:, :PID]
            if not np.array_equal(positions, last):
                last, since = positions, now
            elif now - since > settings.timeout:
                stopped = stopped_ranks(sorted(self.pids.items()))
                starting = bool(np.any(cells[:, SIZE] < 0))
                if stopped or not starting or now - since > max(settings.timeout, STARTUP_ALLOWANCE):
                    return hang_error(cells, stopped, settings)
            time.sleep(_POLL)

    def _failure(self, cells: np.ndarray) -> ExecutionError | None:
        """The failure the board shows: the ranks' own reports (errors) first, then the keepers'
        records of ranks that died, each in the order they happened; one line per rank."""
        labels = self.settings.labels
        errors = sorted((int(cells[x, ERROR_AT]), x) for x in range(len(cells)) if cells[x, ERROR_AT])
        lines = [self.board.error(x) or f"rank {x} failed" for _, x in errors]
        if not lines:
            ended = sorted((int(cells[x, ENDED_AT]), x) for x in range(len(cells)) if cells[x, ENDED])
            lines = [
                f"rank {x} {wait_status_words(int(cells[x, ENDED]))} {describe_position(cells[x], labels)}" for _, x in ended
            ]
        if not lines:
            missing = [x for x in range(len(cells)) if cells[x, PID] <= 0]
            if len(missing) == 1 and len(cells) > 1:  # its keeper never started: it died first
                lines = [f"rank {missing[0]} died {describe_position(cells[missing[0]], labels)}"]
        if not lines:
            return None
        return ExecutionError(lines[0], others=tuple(lines[1:]))

    def stop(self) -> None:
        """Stop every process of the job: SIGKILL the ranks (stopped ones too), then mpiexec
        (SIGINT: it cleans up after its ranks; SIGKILL if it does not end in 5 s); wait for all."""
        self._track(self.board.snapshot())
        for rank, fd in self.ranks.items():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if fd >= 0:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                elif fd == -2:
                    os.kill(self.pids[rank], signal.SIGKILL)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + 5
        for fd in self.ranks.values():
            if fd >= 0:
                _wait_readable(fd, max(0.0, deadline - time.monotonic()))
        self.close()

    def close(self) -> None:
        for fd in self.ranks.values():
            if fd >= 0:
                os.close(fd)
        self.ranks = {rank: -1 for rank in self.ranks}


def stopped_ranks(pids: list[tuple[int, int]]) -> list[int]:
    """The ranks, of ``(rank, pid)`` pairs, whose process is stopped (SIGSTOP, a debugger): they
    make no progress, so a hang is theirs."""
    stopped = []
    for rank, pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state in ("T", "t"):
            stopped.append(rank)
    return stopped


def hang_error(cells: np.ndarray, stopped: list[int], settings: RunSettings) -> ExecutionError:
    """The rank(s) that held the others up, as both launchers judge it: stopped ones, else those
    not waiting for other ranks, else all; of those, the ones that got least far (as the
    multiprocessing parent names the rank with the fewest barriers)."""
    r = len(cells)
    waiting = [step_of(int(cells[x, PHASE]))[1] for x in range(r)]
    suspects = stopped or [x for x in range(r) if not waiting[x]] or list(range(r))
    least = min(rank_progress(cells[x]) for x in suspects)
    culprits = [x for x in suspects if rank_progress(cells[x]) == least]
    if len(culprits) == 1:
        who, them, state = f"rank {culprits[0]}", "it", ", its process stopped" if stopped else ""
    else:
        who, them, state = f"ranks {', '.join(map(str, culprits))}", "them", ", their processes stopped" if stopped else ""
    where = describe_position(cells[culprits[0]], settings.labels)
    timeout = settings.timeout
    return ExecutionError(f"{who} made no progress for {timeout:g} s {where}{state}; the other ranks were waiting for {them}")


def rank_progress(row: np.ndarray) -> tuple[int, int, int]:
    """How far a rank got: (case, call, phase); larger is further."""
    return int(row[SIZE]), int(row[CALL]), int(row[PHASE])


def _wait_readable(fd: int, timeout: float) -> None:
    import select

    select.select([fd], [], [], timeout)


class _Leftovers:
    """MPI's shared-memory files of this run, to remove if the job ends abnormally: the ``mpich_*``
    files in /dev/shm that were not there when the run started, are ours, and are neither open
    nor mapped by any live process (a file of another job that is running always is)."""

    def __init__(self, folder: str = "/dev/shm"):
        self.folder = folder
        self.before = set(self._names())
        self.started = time.time()

    def _names(self) -> list[str]:
        try:
            return [n for n in os.listdir(self.folder) if n.startswith("mpich_")]
        except OSError:
            return []

    def remove(self) -> None:
        candidates = {}
        for name in self._names():
            if name in self.before:
                continue
            path = os.path.join(self.folder, name)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            if stat.st_uid == os.getuid() and stat.st_ctime >= self.started - 2:
                candidates[path] = name
        if not candidates:
            return
        for path in sorted(set(candidates) - _in_use(set(candidates))):
            with contextlib.suppress(OSError):
                os.unlink(path)


def _in_use(paths: set[str]) -> set[str]:
    """Those of ``paths`` that some process has open or mapped (all processes we can see)."""
    used: set[str] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            with open(proc / "maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    name = line.rstrip("\n").split(maxsplit=5)[-1] if "/dev/shm/" in line else ""
                    if name.endswith(" (deleted)"):
                        continue
                    if name in paths:
                        used.add(name)
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target in paths:
                        used.add(target)
        except OSError:
            continue
    return used
