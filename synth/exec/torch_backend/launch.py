"""The torch.distributed backend's launcher: ``synth run --backend torch`` on this machine.

`run` starts one process per rank, ``python -m synth.exec.torch_backend SCHEDULE …`` (the ranks of
`synth.exec.torch_backend.ranks`), as torchrun would (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
one OpenMP thread each unless ``OMP_NUM_THREADS`` says otherwise), meeting through a file in a
private folder (no port to pick); it reads the rows rank 0 posts to the board
(`synth.exec.mpi.board`) and hands them to its caller, passes the ranks' other output through,
and turns a failure into one `ExecutionError` naming the rank and the step, as the other backends
do. It never imports torch itself.

It is every rank's parent, so it sees how each ended (``waitpid``), and every rank dies with it
(``PR_SET_PDEATHSIG``). A failure is judged once the job has had a moment to show it: a rank that
died without reporting (killed, or exited) is the cause, and the ranks that then failed waiting
for it are listed after it; otherwise the earliest report. A hang is judged as the MPI launcher
does: when no rank's position has moved for ``--timeout`` seconds, the rank whose process is
stopped, else the one not waiting for others, else the one that got least far. Then every rank
is killed and waited for; nothing of the run is left.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import numpy as np

from synth.collective import Kind
from synth.errors import InputError
from synth.exec import data
from synth.exec.faults import ExecutionError, describe_position, signal_name
from synth.exec.layout import Layout
from synth.exec.mpi.board import ERROR_AT, SIZE, Board
from synth.exec.mpi.launch import BoardRows, hang_error, stopped_ranks
from synth.exec.program import Program
from synth.exec.report import Row
from synth.exec.settings import MemoryNeed, RunSettings, check_memory

NAME = "torch"

#: PyTorch's own collective for each kind (``--compare-native``), as the table's heading names it
NATIVE_NAMES = {
    Kind.ALLREDUCE: "dist.all_reduce",
    Kind.REDUCE: "dist.reduce",
    Kind.BROADCAST: "dist.broadcast",
    Kind.ALLGATHER: "dist.all_gather_into_tensor",
    Kind.GATHER: "dist.gather",
    Kind.SCATTER: "dist.scatter",
    Kind.REDUCE_SCATTER: "dist.reduce_scatter_tensor",
    Kind.ALLTOALL: "dist.all_to_all_single",
}

#: while the ranks start (Python, importing torch, joining the group), how long no rank may move
#: before the run counts as hung, unless a rank's process is stopped
STARTUP_ALLOWANCE = 90.0
#: after the first sign of a failure, how long the other ranks get to show theirs (they fail
#: waiting for the one that went first)
_SETTLE = 1.0
_POLL = 0.05
#: lines of the ranks' output held back (our own error lines: the launcher reports failures)
_HELD_BACK = re.compile(r"^(synth: error:|$)")
_PR_SET_PDEATHSIG = 1


def check_available() -> None:
    """Refuse (bad input: ``--backend torch``) when PyTorch is not installed."""
    if importlib.util.find_spec("torch") is None:
        raise InputError("synth run", "--backend", "torch", "needs PyTorch: pip install 'synth[torch]' (make setup installs it)")


def memory_needed(program: Program, layouts: list[Layout]) -> MemoryNeed:
    """The memory a run of these layouts (one after another) takes at its peak: every rank's
    input, output, work and scratch tensors for the largest layout (a rank frees one layout's
    tensors before it makes the next one's), plus each rank's working memory for its inputs and
    its check."""
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


def run(
    settings: RunSettings,
    *,
    on_start: Callable[[str, str | None], None] | None = None,
    on_result: Callable[[int, Row], None] | None = None,
) -> list[Row]:
    """Run ``settings`` (a verified schedule) as a torch.distributed job of one process per rank
    on this machine (gloo, CPU); returns one `Row` per case. Raises `ExecutionError` (rank and
    step) if a rank fails, is killed or hangs, `KeyboardInterrupt` if interrupted; either way
    every rank is stopped and waited for."""
    check_available()
    check_memory(settings, memory_needed(Program(settings.schedule), [case.layout for case in settings.cases]))
    r = settings.schedule.collective.num_ranks
    native_name = NATIVE_NAMES[settings.schedule.collective.kind] if settings.compare_native else None
    with tempfile.TemporaryDirectory(prefix="synth-exec-torch-") as folder:
        path = os.path.join(folder, "board")
        board = Board(path, create=(r, len(settings.cases)))
        cmd = [sys.executable, "-m", "synth.exec.torch_backend", settings.schedule_path, *settings.pass_through()]
        cmd += ["--progress-file", path, "--init-method", "file://" + os.path.join(folder, "rendezvous")]
        base = {**os.environ, "PYTHONUNBUFFERED": "1", "WORLD_SIZE": str(r), "LOCAL_WORLD_SIZE": str(r)}
        base.setdefault("OMP_NUM_THREADS", "1")  # as torchrun does with several processes per machine
        job = _Job(settings, board, native_name, on_start, on_result)
        try:
            for rank in range(r):
                env = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}
                job.start(rank, cmd, env)
            failure = job.watch()
        finally:
            job.stop()
        if failure is not None:
            raise failure
        return job.rows.done


class _Job:
    """The ranks' processes, their output, and the board."""

    def __init__(self, settings: RunSettings, board: Board, native_name: str | None, on_start, on_result):
        self.settings, self.board = settings, board
        self.procs: list[subprocess.Popen] = []
        self.readers: list[threading.Thread] = []
        self.muted = threading.Event()
        self.ended: dict[int, tuple[int, float]] = {}  # rank -> (exit status, when seen)
        self.rows = BoardRows(settings, board, native_name, on_start, on_result)

    # ------------------------------------------------------------------ starting
    def start(self, rank: int, cmd: list[str], env: dict[str, str]) -> None:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,  # Ctrl-C reaches the launcher alone, which stops the ranks
            preexec_fn=_die_with_parent,
        )
        self.procs.append(proc)
        for stream, out in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
            reader = threading.Thread(target=self._forward, args=(stream, out), daemon=True)
            reader.start()
            self.readers.append(reader)

    def _forward(self, stream, out) -> None:
        closed = False
        for line in stream:
            if closed or self.muted.is_set() or _HELD_BACK.match(line.strip()):
                continue
            try:
                out.write(line)
                out.flush()
            except (BrokenPipeError, ValueError):  # the reader went away (| head): keep draining
                closed = True

    # ------------------------------------------------------------------ watching
    def watch(self) -> ExecutionError | None:
        """Follow the job until every rank has ended; None if every case ran, else the failure."""
        settings, board = self.settings, self.board
        last, since = board.positions(), time.monotonic()
        failed_at: float | None = None
        while True:
            now = time.monotonic()
            for rank, proc in enumerate(self.procs):
                code = proc.poll()
                if code is not None and rank not in self.ended:
                    self.ended[rank] = (code, now)
            self.rows.take()
            cells = board.snapshot()
            if len(self.ended) == len(self.procs) and all(code == 0 for code, _ in self.ended.values()):
                if len(self.rows.done) == len(settings.cases):
                    return None
                return ExecutionError("the ranks ended before every case ran")
            failing = any(code != 0 for code, _ in self.ended.values()) or bool(np.any(cells[:, ERROR_AT]))
            if failing:
                failed_at = failed_at or now
                everyone_ended = len(self.ended) == len(self.procs)
                if everyone_ended or now - failed_at > _SETTLE:
                    return self._failure(board.snapshot())
            positions = cells[:, :4]
            if not np.array_equal(positions, last):
                last, since = positions, now
            elif not failing and now - since > settings.timeout:
                stopped = stopped_ranks([(rank, proc.pid) for rank, proc in enumerate(self.procs)])
                starting = bool(np.any(cells[:, SIZE] < 0))
                if stopped or not starting or now - since > max(settings.timeout, STARTUP_ALLOWANCE):
                    return hang_error(cells, stopped, settings)
            time.sleep(_POLL)

    def _failure(self, cells: np.ndarray) -> ExecutionError:
        """The ranks that died without a report (killed, or exited) first, in the order they were
        seen to end; then the reports, earliest first; one line per rank."""
        labels = self.settings.labels
        silent = sorted(
            (when, rank)
            for rank, (code, when) in self.ended.items()
            if code != 0 and not cells[rank, ERROR_AT]
        )  # fmt: skip
        lines = []
        for _, rank in silent:
            code = self.ended[rank][0]
            how = f"was killed by {signal_name(-code)}" if code < 0 else f"exited with code {code}"
            lines.append(f"rank {rank} {how} {describe_position(cells[rank], labels)}")
        reports = sorted((int(cells[x, ERROR_AT]), x) for x in range(len(cells)) if cells[x, ERROR_AT])
        lines += [self.board.error(x) or f"rank {x} failed" for _, x in reports]
        return ExecutionError(lines[0], others=tuple(lines[1:]))

    # ------------------------------------------------------------------ stopping
    def stop(self) -> None:
        """Kill every rank still running (stopped ones too) and wait for all of them."""
        self.muted.set()
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    proc.kill()
        for proc in self.procs:
            proc.wait()
        for reader in self.readers:
            reader.join(timeout=5)
        for proc in self.procs:
            for stream in (proc.stdout, proc.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.close()  # type: ignore[union-attr]


def _die_with_parent() -> None:
    """In a rank's process before it runs: die with the launcher (Linux)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


__all__ = ["NAME", "NATIVE_NAMES", "check_available", "memory_needed", "run"]
