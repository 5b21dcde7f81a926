"""``synth run``: execute a schedule for real, check its results, print an nccl-tests style table.

The multiprocessing backend (default) runs the ranks as local processes over shared memory. The
MPI backend starts the venv's own ``mpiexec`` with ``python -m synth.exec.mpi``; that module is
also what you start yourself to run across machines (`rank_main` below parses the same options).

Exit codes: 0 all results right; 1 a wrong result, or a schedule that fails verification (refused
before anything starts); 2 bad input; 3 a rank failed, was killed or hung; 130 interrupted.
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
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

from synth.cli._util import schedule_topology_arg, verify_or_exit
from synth.errors import InputError
from synth.exec import data
from synth.exec.faults import ExecutionError, describe_position, signal_name, step_of
from synth.exec.layout import Layout
from synth.exec.report import Measurement, average_busbw, table_header, table_row
from synth.schedule import Schedule, load_schedule
from synth.units import check_factor, parse_size, parse_sizes, size_range

DEFAULT_MIN, DEFAULT_MAX, DEFAULT_FACTOR = "8", "8M", 4.0


# ====================================================================== options (shared)
def _options(f):
    decorators = [
        click.argument("schedule"),
        click.option(
            "-t", "--topology", default=None, help="Topology file or built-in name (default: the built-in the schedule names)."
        ),
        click.option(
            "--size", "sizes", default=None, help="Sizes: a list and/or ranges, e.g. 8B..1GiB or 1K,1M (ranges step by -f)."
        ),
        click.option("-b", "--minbytes", default=None, help=f"Smallest size (nccl-tests -b) [default: {DEFAULT_MIN}]."),
        click.option(
            "-e", "--maxbytes", default=None, help=f"Largest size (nccl-tests -e) [default: {DEFAULT_MAX}, or -b if larger]."
        ),
        click.option(
            "-f", "--stepfactor", type=float, default=None, help=f"Size multiplier (nccl-tests -f) [default: {DEFAULT_FACTOR:g}]."
        ),
        click.option(
            "-d",
            "--dtype",
            default="float32",
            show_default=True,
            help="Data type(s), comma-separated or all: " + ", ".join(data.DTYPES) + ".",
        ),
        click.option(
            "-o",
            "--op",
            default="sum",
            show_default=True,
            help="Reduction operator(s), comma-separated or all: sum, prod, max, min.",
        ),
        click.option("-n", "--iters", type=int, default=20, show_default=True, help="Timed calls per size."),
        click.option("-w", "--warmup", type=int, default=5, show_default=True, help="Untimed calls before timing."),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of the generated inputs."),
        click.option(
            "--timeout",
            type=float,
            default=60.0,
            show_default=True,
            help="End the run if a rank makes no progress for this long (s).",
        ),
        click.option("--compare-native", is_flag=True, help="Also run MPI's own collective on the same buffers (mpi backend)."),
    ]
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


@dataclass(frozen=True)
class Case:
    """One row of the table: a message size in one data type, with one operator (reductions)."""

    layout: Layout
    op: data.ReduceOp | None

    def describe(self) -> str:
        return f"size {self.layout.size} B, {self.layout.dtype.name}" + (f" {self.op.name}" if self.op else "")


class RunSettings:
    """The parsed options of a run (shared by ``synth run`` and ``python -m synth.exec.mpi``)."""

    def __init__(
        self, schedule, topology, sizes, minbytes, maxbytes, stepfactor, dtype, op, iters, warmup, seed, timeout, compare_native
    ):
        self.schedule_path = schedule
        self.schedule: Schedule = load_schedule(schedule)
        self.topology_spec = topology
        self.topology, self.topology_path = schedule_topology_arg(self.schedule, schedule, topology)
        self.sizes = parse_run_sizes(sizes, minbytes, maxbytes, stepfactor)
        check_run_memory(self.sizes, self.schedule.collective.num_ranks)
        self.dtypes = _parse_list("--dtype", dtype, data.DTYPES, data.parse_dtype)
        self.ops = _parse_list("--op", op, data.OPS, data.parse_op)
        for name, value, low in (("--iters", iters, 1), ("--warmup", warmup, 0)):
            if value < low:
                raise InputError("synth run", name, value, f"must be at least {low}")
        if not timeout > 0:
            raise InputError("synth run", "--timeout", timeout, "must be positive")
        self.iters, self.warmup, self.seed, self.timeout = iters, warmup, seed, timeout
        self.compare_native = compare_native
        coll = self.schedule.collective
        ops: list[data.ReduceOp | None] = list(self.ops) if coll.is_reduction else [None]
        self.cases = [Case(Layout.for_size(coll, size, dt), o) for dt in self.dtypes for o in ops for size in self.sizes]

    def verify_or_exit(self, *, quiet: bool = False) -> None:
        """Check the schedule against its topology; print the first violation and exit 1."""
        verify_or_exit(self.schedule, self.topology, self.schedule_path, quiet=quiet)

    def header(self, backend: str) -> list[str]:
        s = self.schedule
        op = f"; {','.join(o.name for o in self.ops)}" if s.collective.is_reduction else ""
        return [
            f"# synth run {self.schedule_path}: {s.collective.describe()}, {s.num_steps} steps, {s.num_transfers} transfers"
            f" (method {s.method}, topology {s.topology_name})",
            f"# backend {backend}; {','.join(d.name for d in self.dtypes)}{op};"
            f" warmup {self.warmup}, iters {self.iters}, seed {self.seed}; time = mean per call, slowest rank",
            "#",
        ]

    def pass_through(self) -> list[str]:
        """The options for ``python -m synth.exec.mpi`` (sizes resolved)."""
        args = ["--topology", self.topology_path, "--size", ",".join(str(s) for s in self.sizes)]
        args += [
            "--dtype",
            ",".join(d.name for d in self.dtypes),
            "--op",
            ",".join(o.name for o in self.ops),
            "--iters",
            str(self.iters),
            "--warmup",
            str(self.warmup),
        ]
        args += ["--seed", str(self.seed), "--timeout", f"{self.timeout:g}"]
        return args + (["--compare-native"] if self.compare_native else [])


def _parse_list(option: str, text: str, known: dict, parse) -> list:
    """``all``, one name, or a comma-separated list (nccl-tests' ``-d all``/``-o all``)."""
    names = list(known) if text.strip().lower() == "all" else [part for part in text.split(",") if part.strip()]
    out = []
    for name in names:
        try:
            value = parse(name)
        except ValueError as exc:
            raise InputError("synth run", option, text, str(exc)) from None
        if value not in out:
            out.append(value)
    if not out:
        raise InputError("synth run", option, text, "names nothing")
    return out


def parse_run_sizes(sizes: str | None, minbytes: str | None, maxbytes: str | None, factor: float | None) -> list[int]:
    """``--size LIST`` or nccl-tests' ``-b/-e/-f``; ranges in ``--size`` step by ``-f`` too."""
    factor = DEFAULT_FACTOR if factor is None else factor
    try:
        check_factor(factor)
    except ValueError as exc:
        raise InputError("synth run", "--stepfactor", factor, str(exc)) from None
    if sizes is not None and (minbytes is not None or maxbytes is not None):
        raise InputError("synth run", "--size", sizes, "give either --size or -b/-e, not both")
    try:
        if sizes is None:
            lo = parse_size(minbytes or DEFAULT_MIN, minimum=1)
            hi = parse_size(maxbytes, minimum=1) if maxbytes else max(lo, parse_size(DEFAULT_MAX))
            if hi < lo:
                raise ValueError(f"the largest size {hi} is below the smallest {lo}")
            return size_range(lo, hi, factor)
        return parse_sizes(sizes, factor)
    except ValueError as exc:
        option = "--size" if sizes is not None else "-b/-e"
        raise InputError("synth run", option, sizes if sizes is not None else f"{minbytes}..{maxbytes}", str(exc)) from None


#: Bytes a run holds per byte of size and rank: send and receive buffers, the chunk slots, and
#: the numpy reference (an upper estimate across the collectives' buffer layouts).
RUN_BYTES_PER_SIZE_AND_RANK = 6


def check_run_memory(sizes: list[int], num_ranks: int) -> None:
    """Refuse sizes whose buffers cannot fit in memory (all ranks run on this machine)."""
    from synth.limits import require_memory

    largest = max(sizes)
    require_memory(
        largest * num_ranks * RUN_BYTES_PER_SIZE_AND_RANK, "synth run", "--size", largest, f"the buffers of {num_ranks} ranks"
    )


# ====================================================================== synth run
@click.command("run", short_help="Run a schedule for real (processes or MPI), check it, time it.")
@click.option("--backend", type=click.Choice(["mp", "mpi"]), default="mp", show_default=True, help="Local processes, or MPI.")
@_options
def run_cmd(backend, schedule, **options):
    """Run SCHEDULE on real numpy buffers, check every result against numpy, and print times and
    bandwidths as nccl-tests does. Exit 1 if a result is wrong (or the schedule is invalid)."""
    settings = RunSettings(schedule, **options)
    if settings.compare_native and backend != "mpi":
        raise InputError("synth run", "--compare-native", True, "needs --backend mpi")
    settings.verify_or_exit()
    if backend == "mpi":
        sys.exit(_launch_mpi(settings))
    with _sigterm_as_interrupt():
        _run_mp(settings)


def _run_mp(settings: RunSettings) -> None:
    from synth.exec import mp
    from synth.exec.program import Program

    r = settings.schedule.collective.num_ranks
    for line in settings.header(f"mp: {r} processes on this machine, shared memory"):
        click.echo(line)
    for line in table_header():
        click.echo(line)
    rows: list[Measurement] = []
    program = Program(settings.schedule)
    groups: dict[tuple, list[Case]] = {}
    for case in settings.cases:
        groups.setdefault((case.layout.dtype.str, case.op.name if case.op else None), []).append(case)
    for cases in groups.values():
        op = cases[0].op

        def show(_: int, m: Measurement, op=op) -> None:
            rows.append(m)
            click.echo(table_row(m, op.name if op else None))

        layouts = [case.layout for case in cases]
        mp.run_sizes(
            program,
            layouts,
            op,
            warmup=settings.warmup,
            iters=settings.iters,
            seed=settings.seed,
            timeout=settings.timeout,
            on_result=show,
        )
    _footer(rows)
    if any(m.wrong for m in rows):
        sys.exit(1)


def _footer(rows: list[Measurement], native: list[Measurement] | None = None) -> None:
    wrong = sum(m.wrong for m in rows) + sum(m.wrong for m in native or [])
    click.echo(f"# Avg bus bandwidth    : {average_busbw(rows):.3f} GB/s")
    if native:
        click.echo(f"# Avg bus bandwidth, MPI's own collective : {average_busbw(native):.3f} GB/s")
    click.echo(f"# Wrong elements       : {wrong}{'' if wrong else ' (all results checked: OK)'}")


class _sigterm_as_interrupt:
    """SIGTERM ends the run like Ctrl-C (processes stopped, shared memory removed)."""

    def __enter__(self):
        self._old = None
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGTERM, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        raise KeyboardInterrupt

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
        return False


# ====================================================================== the MPI launcher
def mpiexec_path() -> Path:
    """The venv's own mpiexec, next to this Python (a system launcher of another MPI fails)."""
    return Path(sys.executable).parent / "mpiexec"


_BANNER_PID = re.compile(r"PID (\d+) RUNNING AT")
_BANNER_SIGNAL = re.compile(r"\(signal (\d+)\)|KILLED BY SIGNAL: (\d+)")
_BANNER_EXIT = re.compile(r"EXIT CODE: (\d+)")
_HELD_BACK = re.compile(
    r"^(=|YOUR APPLICATION TERMINATED|This typically refers|Please see the FAQ|Abort\(\d+\) on node|synth: error:|$)"
)


def _launch_mpi(settings: RunSettings) -> int:
    """Start ``mpiexec -n R python -m synth.exec.mpi …``, pass its output through, and turn a
    failure into one line naming the rank and step; remove what MPI leaves in /dev/shm when its
    job ends abnormally. Returns the exit code."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise InputError("synth run", "--backend", "mpi", "needs mpi4py and mpich: pip install 'synth[mpi]'") from None
    launcher = mpiexec_path()
    if not launcher.is_file():
        raise InputError("synth run", "--backend", "mpi", f"no mpiexec next to {sys.executable}; pip install mpich")
    r = settings.schedule.collective.num_ranks
    fd, progress_path = tempfile.mkstemp(prefix="synth-exec-progress-")
    try:
        os.write(fd, bytes(64 * r))
        os.close(fd)
        cmd = [str(launcher), "-n", str(r), sys.executable, "-m", "synth.exec.mpi", settings.schedule_path]
        cmd += [*settings.pass_through(), "--progress-file", progress_path]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # rows appear as each size finishes
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
        lines: list[str] = []
        readers = [
            threading.Thread(target=_forward, args=(proc.stdout, sys.stdout, lines), daemon=True),
            threading.Thread(target=_forward, args=(proc.stderr, sys.stderr, lines), daemon=True),
        ]
        for reader in readers:
            reader.start()
        try:
            with _sigterm_as_interrupt():
                code, first_dead = _wait_mpiexec(proc, progress_path, r, settings)
        except BaseException:
            _stop_mpiexec(proc)
            _remove_mpi_leftovers(progress_path)
            raise
        for reader in readers:
            reader.join(timeout=5)
        if code == 0:
            return 0
        _remove_mpi_leftovers(progress_path)
        if code == 1 and not any(line.startswith("synth: error:") for line in lines):
            return 1  # wrong results: the table says so
        raise ExecutionError(_failure_message(lines, progress_path, r, settings, code, first_dead))
    finally:
        for path in (progress_path, progress_path + ".shm"):
            if os.path.exists(path):
                os.unlink(path)


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

    def __init__(self, cells: np.ndarray):
        self.cells = cells
        self.fds: dict[int, int] = {}
        self.first: list[int] | None = None
        self.usable = hasattr(os, "pidfd_open")

    def open(self) -> None:
        if self.fds or not self.usable or not np.all(self.cells[:, 4] > 0):
            return
        gone = []
        for rank, pid in enumerate(self.cells[:, 4].tolist()):
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


def _wait_mpiexec(proc: subprocess.Popen, progress_path: str, r: int, settings: RunSettings) -> tuple[int, list[int] | None]:
    """Wait for mpiexec; returns its exit code and the rank(s) whose process ended first. If no
    rank moves for the timeout (plus grace for the ranks' own watchdogs), stop it and report the
    laggard."""
    cells = np.memmap(progress_path, dtype=np.int64, mode="r", shape=(r, 8))
    last, since = np.array(cells[:, :4]), time.monotonic()
    grace = settings.timeout + 10.0
    deaths = _Deaths(cells)
    try:
        while True:
            deaths.open()
            deaths.wait(0.05)
            code = proc.poll()
            if code is not None:
                return code, deaths.first
            now = time.monotonic()
            state = np.array(cells[:, :4])
            if not np.array_equal(state, last):
                last, since = state, now
            elif now - since > grace:
                _stop_mpiexec(proc)
                x = int(np.lexsort(state[:, 2::-1].T)[0])
                where = _position(state[x], settings)
                raise ExecutionError(f"rank {x} made no progress for {settings.timeout:g} s {where}; run stopped")
    finally:
        deaths.close()


def _stop_mpiexec(proc: subprocess.Popen) -> None:
    """Stop mpiexec and its ranks: SIGINT (it forwards and cleans up), then SIGKILL the group."""
    if proc.poll() is None:
        with _suppress_lookup():
            os.killpg(proc.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    with _suppress_lookup():
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class _suppress_lookup:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is not None and issubclass(kind, ProcessLookupError | PermissionError)


def _position(cells: np.ndarray, settings: RunSettings) -> str:
    return describe_position(cells, [case.describe() for case in settings.cases])


def _failure_message(
    lines: list[str], progress_path: str, r: int, settings: RunSettings, code: int, first_dead: list[int] | None
) -> str:
    """One line naming the rank and step: the ranks' own report if any (a crash or a hang), else
    the rank whose process ended first (killed), with the cause MPI's launcher gives for it."""
    ours = list(dict.fromkeys(line[len("synth: error: ") :] for line in lines if line.startswith("synth: error:")))
    if ours:
        for extra in ours[1:]:
            click.echo(f"synth: {extra}", err=True)
        return ours[0]
    text = "\n".join(lines)
    cells = np.fromfile(progress_path, dtype=np.int64).reshape(r, 8)
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
    return f"{who} {how} {_position(cells[rank], settings)}"


# ====================================================================== one MPI rank
@click.command("synth.exec.mpi", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@_options
@click.option("--progress-file", default=None, hidden=True)
def _rank_cmd(schedule, progress_file, **options):
    """One rank of an MPI run: mpiexec -n R python -m synth.exec.mpi SCHEDULE [options]."""
    from synth.exec.mpi import MPI, require_mpi

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
    settings.verify_or_exit(quiet=rank != 0)
    sys.exit(_rank_run(settings, comm, progress_file))


def _rank_run(settings: RunSettings, comm, progress_file: str | None) -> int:
    from synth.exec.mpi import MPI, NATIVE_NAMES, BoundPlan, Progress, Watchdog, fail, native_call
    from synth.exec.program import Program

    rank = comm.Get_rank()
    coll = settings.schedule.collective
    labels = [case.describe() for case in settings.cases]
    progress = Progress(rank, progress_file)
    progress.record_shared_memory()
    own = comm.Dup()
    watchdog = Watchdog(comm, progress, settings.timeout, labels)
    native_name = NATIVE_NAMES[coll.kind] if settings.compare_native else None
    if rank == 0:
        library = " ".join(MPI.Get_library_version().split()[:3])
        for line in settings.header(f"mpi: {coll.num_ranks} processes, {library}"):
            click.echo(line)
        for line in table_header(native_name):
            click.echo(line)
    ours_rows: list[Measurement] = []
    native_rows: list[Measurement] = []
    program = Program(settings.schedule)
    try:
        for si, case in enumerate(settings.cases):
            layout, op = case.layout, case.op
            progress.set(si, -1, -1)
            send = data.send_data(layout, rank, op, settings.seed)
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
            if native_name:
                recv.fill(poison)
                if coll.kind.value == "broadcast" and rank == coll.root:
                    recv[:] = send
                native = _measure(settings, own, progress, si, case, native_call(layout, own, op, send, recv), recv)
                native_rows.append(native)
            if rank == 0:
                click.echo(table_row(ours, op.name if op else None, native, with_native=native_name is not None))
            if si == 0:
                progress.record_shared_memory()
        watchdog.stop()
    except Exception as exc:  # one line naming the rank and step, then the whole job ends
        fail(comm, f"rank {rank} failed {progress.describe(labels)}: {type(exc).__name__}: {exc}")
    if rank == 0:
        _footer(ours_rows, native_rows or None)
    own.Free()
    return 1 if any(m.wrong for m in ours_rows + native_rows) else 0


def _measure(settings: RunSettings, comm, progress, si: int, case: Case, call, recv: np.ndarray) -> Measurement:
    """One checked call, ``warmup`` calls, then ``iters`` timed calls of ``call`` on this rank;
    the slowest rank's mean time and the wrong elements over all ranks."""
    from synth.exec.mpi import MPI

    rank, layout = comm.Get_rank(), case.layout
    comm.Barrier()
    progress.set(si, 0, -1)
    call()
    wrong = data.check_rank(layout, rank, recv, case.op, settings.seed, tick=progress.beat)
    for i in range(settings.warmup):
        progress.set(si, 1 + i, -1)
        call()
    comm.Barrier()
    progress.set(si, 1 + settings.warmup, -1)
    begin = MPI.Wtime()
    for _ in range(settings.iters):
        call()
    mean_us = (MPI.Wtime() - begin) / settings.iters * 1e6
    return Measurement(layout, comm.allreduce(mean_us, op=MPI.MAX), comm.allreduce(wrong, op=MPI.SUM))


def rank_main() -> None:
    """Entry point of ``python -m synth.exec.mpi``."""
    _rank_cmd(prog_name="python -m synth.exec.mpi")


COMMANDS = [run_cmd]
