"""One rank of a torch.distributed benchmark run: ``python -m synth.exec.torch_backend SCHEDULE
[options of synth run]``, started by ``synth run --backend torch`` (`synth.exec.torch_backend.launch`)
or by hand under ``torchrun --nproc-per-node R -m synth.exec.torch_backend SCHEDULE …``.

Every rank joins a gloo process group on the CPU (``env://`` under torchrun; the launcher passes a
file to meet through), checks the schedule and runs each case: one checked call, the warm-up
calls, then the timed calls of the schedule, and with ``--compare-native`` the same of PyTorch's
own collective on the same tensors. Allreduce, reduce and broadcast run in place (as PyTorch's
do), the others from an input into an output tensor.

Under the launcher (``--progress-file``) the ranks post where they are, and rank 0 the rows, to
the launcher's board (`synth.exec.mpi.board`); a rank that fails posts one line and exits, and the
launcher judges hangs. Started by hand, rank 0 prints the table and each rank has a watchdog: a
rank that waits for a message longer than ``--timeout`` raises naming the peer, a rank stuck
elsewhere is reported and ends, and torchrun then stops the job.
"""

from __future__ import annotations

import datetime
import os
import signal
import sys
import threading
import time

import click
import numpy as np
import torch
import torch.distributed as dist

from synth.collective import Kind
from synth.errors import InputError
from synth.exec import data
from synth.exec.faults import ExecutionError, Progress, describe_exception
from synth.exec.mpi.board import Board
from synth.exec.program import Program
from synth.exec.rank_zero import BoardPosts, PrintedTable
from synth.exec.report import Measurement
from synth.exec.settings import Case, RunSettings, run_options
from synth.exec.torch_backend.executor import NATIVE_NAMES, TORCH_TYPES, Executor, PeerFailure, native_call, native_supports

#: collectives our benchmark (and PyTorch) runs in place
IN_PLACE = (Kind.ALLREDUCE, Kind.REDUCE, Kind.BROADCAST)


@click.command("synth.exec.torch_backend", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@run_options
@click.option("--progress-file", default=None, hidden=True)
@click.option("--init-method", default=None, hidden=True)
def rank_cmd(schedule, progress_file, init_method, **options):
    """One rank of a torch.distributed run: torchrun --nproc-per-node R -m synth.exec.torch_backend SCHEDULE [options]."""
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    board = Board(progress_file) if progress_file else None

    def refuse(line: str, code: int) -> None:
        if board is not None:
            board.post_error(rank, line)
        elif rank == 0:
            click.echo(f"synth: error: {line}" if code == 2 else line, err=code == 2)
        sys.exit(code)

    try:
        settings = RunSettings(schedule, **options)
    except InputError as exc:
        refuse(str(exc), 2)
    r = settings.schedule.collective.num_ranks
    if world != r:
        refuse(f"{schedule}: the schedule has {r} ranks but the job has {world} (WORLD_SIZE)", 2)
    violation = settings.violation()
    if violation is not None:
        refuse(settings.invalid_line(violation), 1)
    sys.exit(run_rank(settings, rank, board, init_method or "env://"))


def run_rank(settings: RunSettings, rank: int, board: Board | None, init_method: str) -> int:
    """Join the group, run every case, leave; returns the exit code (1 if a result was wrong,
    when started by hand; under the launcher, which judges the posted rows, 0; 3 if this rank
    failed)."""
    labels = settings.labels
    progress = Progress(rank, board)
    progress.set(-1, -1, -1, blocked=True)  # joining the group waits for every rank
    watchdog = _Watchdog(progress, settings.timeout, labels, board)
    r = settings.schedule.collective.num_ranks
    # gloo's own timeout stays above ours: the launcher (or our wait timeouts) name the culprit first
    timeout = datetime.timedelta(seconds=settings.timeout * 2 + 60)
    try:
        dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=r, timeout=timeout)
        progress.set(-1, -1, -1)
        code = _cases(settings, rank, board, progress)
    except ExecutionError as exc:
        where = progress.describe(labels)
        detail = f"{exc.message}: {exc.reason}" if isinstance(exc, PeerFailure) else str(exc)
        _fail(rank, board, f"rank {rank} failed {where}: {detail}")
        return 3
    except Exception as exc:  # one line naming the rank and step
        _fail(rank, board, f"rank {rank} failed {progress.describe(labels)}: {describe_exception(exc)}")
        return 3
    finally:
        watchdog.stop()
    dist.destroy_process_group()
    return code


def _fail(rank: int, board: Board | None, line: str) -> None:
    """Report this rank's failure: on the board (the launcher prints it), or on stderr in one write."""
    if board is not None:
        board.post_error(rank, line)
    else:
        say(f"synth: error: {line}")


def say(line: str) -> None:
    """One line to stderr in one write, so that lines of ranks failing at once never mix."""
    raw = (line + "\n").encode()
    while raw:
        raw = raw[os.write(2, raw) :]


def _cases(settings: RunSettings, rank: int, board: Board | None, progress: Progress) -> int:
    coll = settings.schedule.collective
    native_name = NATIVE_NAMES[coll.kind] if settings.compare_native else None
    out = (BoardPosts(board) if board is not None else PrintedTable(settings, "PyTorch")) if rank == 0 else None
    if out is not None:
        out.start(f"torch: {coll.num_ranks} processes, torch {torch.__version__} gloo on CPU", native_name)
    timeout = None if board is not None else settings.timeout  # under the launcher, it judges hangs
    ex = Executor(settings.schedule, program=Program(settings.schedule), progress=progress, timeout=timeout)
    ours_rows: list[Measurement] = []
    native_rows: list[Measurement] = []
    for si, case in enumerate(settings.cases):
        progress.set(si, -1, -1)
        send, recv = _tensors(settings, case, rank, progress)
        ours = _measure(settings, progress, si, case, send, recv, _ours(ex, case, send, recv))
        ours_rows.append(ours)
        native = None
        if native_name and native_supports(case.op.name if case.op else None, recv.dtype):
            call = native_call(case.layout, None, case.op.name if case.op else None, send, recv)
            native = _measure(settings, progress, si, case, send, recv, call)
            native_rows.append(native)
        if out is not None:
            out.row(si, ours, native)
    if out is not None:
        out.finish(ours_rows, native_rows)
    if board is not None:
        return 0
    return 1 if any(m.wrong for m in ours_rows + native_rows) else 0


def _tensors(settings: RunSettings, case: Case, rank: int, progress: Progress) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's input (its contents as data.send_data makes them) and output tensors."""
    layout = case.layout
    dtype = TORCH_TYPES[layout.dtype]
    values = data.send_data(layout, rank, case.op, settings.seed, tick=progress.beat)
    send = torch.from_numpy(values) if values is not None else torch.empty(0, dtype=dtype)
    recv = torch.empty(layout.recv_count, dtype=dtype)
    return send, recv


def _ours(ex: Executor, case: Case, send: torch.Tensor, recv: torch.Tensor):
    """A zero-argument function running our schedule on these tensors (in place for allreduce,
    reduce and broadcast, as PyTorch's own run)."""
    op = case.op.name if case.op else None
    if case.layout.kind in IN_PLACE:
        return lambda: ex(None, recv, op)
    given = send if case.layout.sends_data(ex.rank) else None
    return lambda: ex(given, recv, op, count=case.layout.count)


def _fresh(case: Case, rank: int, send: torch.Tensor, recv: torch.Tensor) -> None:
    """Before a checked call: the output poisoned (a value the call never wrote cannot pass for a
    result); in place, the input put back where the call reads it."""
    recv.fill_(data.poison_value(case.layout.dtype))
    if case.layout.kind in IN_PLACE and case.layout.sends_data(rank):
        recv.copy_(send)


def _measure(settings: RunSettings, progress: Progress, si: int, case: Case, send, recv, call) -> Measurement:
    """One checked call, ``warmup`` calls, then ``iters`` timed calls of ``call``; the slowest
    rank's mean time and the wrong elements over all ranks."""
    rank, layout = dist.get_rank(), case.layout
    _fresh(case, rank, send, recv)
    progress.set(si, -1, -1, blocked=True)
    dist.barrier()
    progress.set(si, 0, -1)
    call()
    progress.beat()
    wrong = data.check_rank(layout, rank, recv.numpy(), case.op, settings.seed, tick=progress.beat)
    for i in range(settings.warmup):
        progress.set(si, 1 + i, -1)
        call()
        progress.beat()
    progress.set(si, 1 + settings.warmup, -1, blocked=True)
    dist.barrier()
    progress.set(si, 1 + settings.warmup, -1)
    begin = time.perf_counter()
    for _ in range(settings.iters):
        call()
        progress.beat()
    mean_us = (time.perf_counter() - begin) / settings.iters * 1e6
    progress.set(si, 1 + settings.warmup + settings.iters, -1, blocked=True)
    figures = torch.tensor([mean_us], dtype=torch.float64)
    dist.all_reduce(figures, dist.ReduceOp.MAX)
    count = torch.tensor([wrong], dtype=torch.int64)
    dist.all_reduce(count, dist.ReduceOp.SUM)
    return Measurement(layout, float(figures.item()), int(count.item()))


class _Watchdog:
    """Under the launcher: ends this rank if the launcher goes away (nobody to report to). By
    hand: reports a rank that makes no progress outside waits for messages (those time out by
    themselves, naming the peer) for ``timeout`` seconds, and ends it (torchrun then stops the
    other ranks)."""

    def __init__(self, progress: Progress, timeout: float, labels: list[str], board: Board | None):
        self.progress, self.timeout, self.labels = progress, timeout, labels
        self.launcher = board.launcher_pid if board is not None else 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="synth-watchdog", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        cells = self.progress.cells
        last, since = cells.copy(), time.monotonic()
        while not self._stop.wait(0.25 if self.launcher else min(0.25, self.timeout / 10)):
            if self.launcher:
                try:
                    os.kill(self.launcher, 0)
                except ProcessLookupError:
                    os._exit(3)
                except PermissionError:
                    pass
                continue
            now = time.monotonic()
            if not np.array_equal(cells, last):
                last, since = cells.copy(), now
                continue
            blocked = self.progress.blocked
            # a rank waiting for messages times out by itself (naming the peer); give it the head start
            if now - since > self.timeout + (max(5.0, self.timeout) if blocked else 0.0):
                what = "waiting for the other ranks" if blocked else "not in communication"
                say(
                    f"synth: error: rank {self.progress.rank} made no progress for {now - since:.1f} s"
                    f" {self.progress.describe(self.labels)} ({what})"
                )
                os._exit(3)

    def stop(self) -> None:
        self._stop.set()


def main() -> None:
    """Entry point of ``python -m synth.exec.torch_backend``."""
    # Ctrl-C ends a rank at once, even inside a wait; the launcher or torchrun stops the others
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    rank_cmd(prog_name="python -m synth.exec.torch_backend")
