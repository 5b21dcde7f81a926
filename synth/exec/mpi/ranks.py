"""One rank of an MPI benchmark run: ``mpiexec -n R python -m synth.exec.mpi SCHEDULE [options]``.

Every rank parses the options of ``synth run`` (`synth.exec.settings`), checks the schedule, and
runs each case: one checked call, the warm-up calls, then the timed calls, of the schedule's
`BoundPlan` (and, with ``--compare-native``, of MPI's own collective on the same buffers).

Started by hand, rank 0 prints the nccl-tests style table. Started by ``synth run --backend
mpi`` (`synth.exec.mpi.launch`, which passes ``--progress-file``), the ranks post where they are
and rank 0 posts the rows to the launcher's board (`synth.exec.mpi.board`) instead, and the
launcher prints them.

A rank that fails reports one line naming it and the step (on stderr, or on the board) and ends
the job (``MPI_Abort``). Started by hand, its watchdog does the same for a rank that makes no
progress for ``--timeout`` seconds; under ``synth run`` the launcher judges hangs.
"""

from __future__ import annotations

import signal
import sys

import click
import numpy as np

from synth.errors import InputError
from synth.exec import data
from synth.exec.faults import describe_exception
from synth.exec.mpi.board import Board
from synth.exec.mpi.executor import MPI, BoundPlan, Progress, Watchdog, fail, native_call, native_supports, require_mpi
from synth.exec.mpi.launch import NATIVE_NAMES
from synth.exec.program import Program
from synth.exec.rank_zero import BoardPosts, PrintedTable
from synth.exec.report import Measurement
from synth.exec.settings import Case, RunSettings, run_options


@click.command("synth.exec.mpi", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@run_options
@click.option("--progress-file", default=None, hidden=True)
def rank_cmd(schedule, progress_file, **options):
    """One rank of an MPI run: mpiexec -n R python -m synth.exec.mpi SCHEDULE [options]."""
    # Ctrl-C (forwarded by mpiexec) ends a rank at once, even inside an MPI wait; the launcher
    # removes what MPI leaves behind.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    require_mpi()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    try:
        settings = RunSettings(schedule, **options)
    except InputError as exc:
        if rank == 0:
            click.echo(f"synth: error: {exc}", err=True)
        sys.exit(2)
    r = settings.schedule.collective.num_ranks
    if comm.Get_size() != r:
        if rank == 0:
            click.echo(f"synth: error: {schedule}: the schedule has {r} ranks but mpiexec started {comm.Get_size()}", err=True)
        sys.exit(2)
    violation = settings.violation()
    if violation is not None:
        if rank == 0:
            click.echo(settings.invalid_line(violation))
        sys.exit(1)
    board = Board(progress_file) if progress_file else None
    sys.exit(run_rank(settings, comm, board))


def run_rank(settings: RunSettings, comm, board: Board | None = None) -> int:
    """Run every case on this rank; returns the exit code (1 if a result was wrong, when started
    by hand; under ``synth run`` the launcher judges the posted rows, and this returns 0)."""
    rank = comm.Get_rank()
    coll = settings.schedule.collective
    labels = settings.labels
    progress = Progress(rank, board)
    progress.set(-1, -1, -1, blocked=True)  # the communicator's duplication waits for every rank
    own = comm.Dup()
    progress.set(-1, -1, -1)
    watchdog = Watchdog(comm, progress, settings.timeout, labels, board)
    native_name = NATIVE_NAMES[coll.kind] if settings.compare_native else None
    out = (BoardPosts(board) if board is not None else PrintedTable(settings, "MPI")) if rank == 0 else None
    if out is not None:
        library = " ".join(MPI.Get_library_version().split()[:3])
        out.start(f"mpi: {coll.num_ranks} processes, {library}", native_name)
    ours_rows: list[Measurement] = []
    native_rows: list[Measurement] = []
    try:
        program = Program(settings.schedule)
        for si, case in enumerate(settings.cases):
            layout, op = case.layout, case.op
            progress.set(si, -1, -1)
            send = recv = plan = None  # the last case's buffers go before this one's come
            send = data.send_data(layout, rank, op, settings.seed, tick=progress.beat)
            send = send if send is not None else np.empty(0, dtype=layout.dtype)
            recv = np.empty(layout.recv_count, dtype=layout.dtype)
            plan = BoundPlan(program, own, layout, op, send, recv, progress=progress)
            poison = data.poison_value(layout.dtype)
            for array in (recv, *plan.arrays[2:]):
                array.fill(poison)
            ours = _measure(settings, own, progress, si, case, plan, recv)
            plan.free()
            ours_rows.append(ours)
            native = None
            if native_name and native_supports(op, layout.dtype):
                recv.fill(poison)
                if coll.kind.value == "broadcast" and rank == coll.root:
                    recv[:] = send
                native = _measure(
                    settings, own, progress, si, case, _beating(native_call(layout, own, op, send, recv), progress), recv
                )
                native_rows.append(native)
            if out is not None:
                out.row(si, ours, native)
        watchdog.stop()
    except Exception as exc:  # one line naming the rank and step, then the whole job ends
        fail(comm, f"rank {rank} failed {progress.describe(labels)}: {describe_exception(exc)}", board=board)
    if out is not None:
        out.finish(ours_rows, native_rows)
    own.Free()
    if board is not None:
        return 0
    return 1 if any(m.wrong for m in ours_rows + native_rows) else 0


def _beating(call, progress: Progress):
    """``call`` (MPI's own collective), counting each call on the heartbeat as our plans do."""

    def beating() -> None:
        call()
        progress.beat()

    return beating


def _measure(settings: RunSettings, comm, progress: Progress, si: int, case: Case, call, recv: np.ndarray) -> Measurement:
    """One checked call, ``warmup`` calls, then ``iters`` timed calls of ``call`` on this rank;
    the slowest rank's mean time and the wrong elements over all ranks. Where the rank waits for
    the others (barriers, the sums), its phase says so."""
    rank, layout = comm.Get_rank(), case.layout
    progress.set(si, -1, -1, blocked=True)
    comm.Barrier()
    progress.set(si, 0, -1)
    call()
    wrong = data.check_rank(layout, rank, recv, case.op, settings.seed, tick=progress.beat)
    for i in range(settings.warmup):
        progress.set(si, 1 + i, -1)
        call()
    progress.set(si, 1 + settings.warmup, -1, blocked=True)
    comm.Barrier()
    progress.set(si, 1 + settings.warmup, -1)
    begin = MPI.Wtime()
    for _ in range(settings.iters):
        call()
    mean_us = (MPI.Wtime() - begin) / settings.iters * 1e6
    progress.set(si, 1 + settings.warmup + settings.iters, -1, blocked=True)
    return Measurement(layout, comm.allreduce(mean_us, op=MPI.MAX), comm.allreduce(wrong, op=MPI.SUM))


def main() -> None:
    """Entry point of ``python -m synth.exec.mpi``."""
    rank_cmd(prog_name="python -m synth.exec.mpi")
