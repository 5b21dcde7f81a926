"""What a benchmark run is asked to do: the options of ``synth run`` and ``python -m synth.exec.mpi``.

Both command lines take the same options (`run_options`) and turn them into one `RunSettings`:
the schedule and the topology it is checked against, the cases to run (one per size, data type
and operator, in nccl-tests' order), and how to time them. The backends take a `RunSettings`
(docs/executors.md, "Backends"), so a run means the same thing whichever backend carries it out.

Bad values are `InputError`s naming the option (exit code 2), as are runs whose buffers would
not fit in this machine's memory (`check_memory`, which every backend calls before it starts).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import click

from synth.builtin import schedule_topology as builtin_schedule_topology
from synth.errors import InputError
from synth.exec import data
from synth.exec.layout import Layout
from synth.schedule import Schedule, load_schedule
from synth.text import printable
from synth.topology import Topology
from synth.units import check_factor, parse_size, parse_sizes, size_range
from synth.verify import verify

DEFAULT_MIN, DEFAULT_MAX, DEFAULT_FACTOR = "8", "8M", 4.0


def run_options(f):
    """The options of a run, shared by ``synth run`` and ``python -m synth.exec.mpi``; the command
    gets them as the keyword arguments of `RunSettings`."""
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
            help="Reduction operator(s), comma-separated or all: " + ", ".join(data.OPS) + " (avg on floating point only;"
            " band, bor, bxor, land, lor on integers and bool).",
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
        click.option(
            "--compare-native",
            is_flag=True,
            help="Also run the backend's own collective on the same buffers (mpi: MPI's; torch: PyTorch's).",
        ),
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
        self.topology, self.topology_path = schedule_topology(self.schedule, schedule, topology)
        self.sizes = parse_run_sizes(sizes, minbytes, maxbytes, stepfactor)
        #: the option the largest size came from, and its value as given (for messages about it)
        self.size_option = _size_source(sizes, minbytes, maxbytes)
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
        if coll.is_reduction:  # each operator on the data types it applies to (-d all -o all: every pair that makes sense)
            for o in self.ops:
                if not any(o.takes(dt) for dt in self.dtypes):
                    try:
                        o.check(self.dtypes[0])
                    except ValueError as exc:
                        raise InputError("synth run", "--op", op, f"{exc}; -d names no such type") from None
        self.cases = [
            Case(Layout.for_size(coll, size, dt), o)
            for dt in self.dtypes
            for o in ops
            if o is None or o.takes(dt)
            for size in self.sizes
        ]

    @property
    def labels(self) -> list[str]:
        """How fault messages name each case (``size 1024 B, float32 sum``)."""
        return [case.describe() for case in self.cases]

    def violation(self) -> str | None:
        """The schedule's first violation against its topology, or None if it is valid."""
        result = verify(self.schedule, self.topology)
        return None if result.ok else result.violation

    def invalid_line(self, violation: str) -> str:
        """The line that reports an invalid schedule (as ``synth verify`` prints it)."""
        return f"{self.schedule_path}: INVALID {self.schedule.collective.describe()}: {violation}"

    def header(self, backend: str) -> list[str]:
        """The comment lines above the table; ``backend`` says what runs the ranks."""
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
        """The options for ``python -m synth.exec.mpi`` that give the same settings (sizes resolved)."""
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


def schedule_topology(schedule: Schedule, schedule_path: str, topology: str | None) -> tuple[Topology, str]:
    """The topology given with ``--topology``, or else the one the schedule records
    (`synth.builtin.schedule_topology`); and the path it came from (the ranks of an MPI run load
    it again). Which file a recorded source led to is said on stderr."""
    topo, location = builtin_schedule_topology(schedule, schedule_path, topology)
    if location.note:
        print(f"synth: note: {printable(location.note)}", file=sys.stderr)
    return topo, str(location.path)


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


def _size_source(sizes: str | None, minbytes: str | None, maxbytes: str | None) -> tuple[str, str]:
    """The option that set the largest size and its text: ``--size``, ``-e`` or ``-b`` (a ``-b``
    above the default largest size runs alone)."""
    if sizes is not None:
        return "--size", sizes
    if maxbytes:
        return "--maxbytes", maxbytes
    if minbytes and parse_size(minbytes) > parse_size(DEFAULT_MAX):
        return "--minbytes", minbytes
    return "--maxbytes", DEFAULT_MAX


# ====================================================================== memory
@dataclass(frozen=True)
class MemoryNeed:
    """What a run's buffers take at their peak, in bytes: ``total`` of memory, of which ``shared``
    in POSIX shared memory (/dev/shm)."""

    total: int
    shared: int = 0


def available_memory() -> int | None:
    """Bytes of memory this machine can give without swapping (``MemAvailable``); None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def shared_memory_free() -> int | None:
    """Bytes free in /dev/shm (where POSIX shared memory lives); None if there is no /dev/shm."""
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def check_memory(settings: RunSettings, need: MemoryNeed) -> None:
    """Refuse, before anything starts, a run whose buffers do not fit in this machine's memory
    (the kernel would kill a rank halfway through, or, in /dev/shm, a rank would die of SIGBUS):
    an `InputError` naming the size option, with the memory needed against what is available."""
    option, value = settings.size_option
    free = shared_memory_free() if need.shared else None
    if free is not None and need.shared > free:
        raise InputError(
            "synth run",
            option,
            value,
            f"the buffers need {_gib(need.shared)} of shared memory but /dev/shm has {_gib(free)} free;"
            " run smaller sizes or fewer at a time",
        )
    available = available_memory()
    if available is not None and need.total > available:
        raise InputError(
            "synth run",
            option,
            value,
            f"the buffers need {_gib(need.total)} of memory but {_gib(available)} is available;"
            " run smaller sizes or fewer at a time",
        )
