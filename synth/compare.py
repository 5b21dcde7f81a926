"""Every applicable method side by side: the question a user asks to choose an algorithm.

`compare` synthesizes (and so verifies) a schedule with each registered method that serves the
collective (methods that tune themselves for a message size, greedy and packing, once per size, at
most `TUNED_SIZES` of them, each size then taking the best of these), predicts its time at every
size with the simulator, and puts each time beside the physical lower bound (`synth.bounds`) and
NCCL's analytic model (a reference line, not a schedule). Rows are ordered best first per size.
`synth compare` prints it; the benchmark suite (`benchmarks/suite.py`) runs it over every built-in topology and collective.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from synth.algorithms import METHODS, make_collective, synthesize
from synth.bounds import BoundReport, bound_model
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.nccl_model import LABEL as NCCL_LABEL
from synth.nccl_model import nccl_model_best
from synth.schedule import Schedule, same_transfers
from synth.simulate import Simulator
from synth.topology import Topology
from synth.units import format_size

DEFAULT_SIZES = (1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30)
#: methods left out unless asked for by name: meta-methods and exhaustive searches
NOT_BY_DEFAULT = frozenset({"auto", "ilp"})
#: a method that tunes itself for a size is synthesized for at most this many of the sizes asked
TUNED_SIZES = 3
#: the bound model of each simulator model
BOUND_MODELS = {"sync": "step", "event": "event", "one-port": "one-port"}


@dataclass(frozen=True)
class MethodOutcome:
    """One method's schedule (or why there is none) and its predicted time at every size."""

    method: str
    times_us: tuple[float, ...] = ()
    steps: int = 0
    transfers: int = 0
    chunks: int = 0
    synth_seconds: float = 0.0
    note: str = ""
    schedule: Schedule | None = field(default=None, repr=False, compare=False)
    #: for a method that tunes itself for a size (greedy, packing): per size, the label of the
    #: schedule used there (e.g. "1GiB", the size it was tuned for) and its (steps, chunks)
    tuned: tuple[tuple[str, int, int], ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.times_us)

    def shape(self, size_index: int) -> tuple[int, int]:
        """(steps, chunks) of the schedule whose time is given at ``size_index``."""
        if self.tuned:
            return self.tuned[size_index][1], self.tuned[size_index][2]
        return self.steps, self.chunks


@dataclass(frozen=True)
class Row:
    """One method at one size."""

    method: str
    size: int
    time_us: float
    algbw: float
    busbw: float
    ratio: float  # predicted time / lower bound (>= 1 for every valid schedule)


@dataclass(frozen=True)
class NcclLine:
    """NCCL's analytic model at one size (labelled: a model, not a schedule)."""

    size: int
    algorithm: str
    protocol: str
    time_us: float


@dataclass(frozen=True)
class Comparison:
    """The result of `compare`."""

    topology: str
    kind: Kind
    root: int | None
    num_ranks: int
    model: str
    sizes: tuple[int, ...]
    bounds: tuple[BoundReport, ...]
    outcomes: tuple[MethodOutcome, ...]
    nccl: tuple[NcclLine, ...] = ()
    nccl_note: str = ""
    busbw_factor: float = 1.0

    def rows(self, size_index: int) -> list[Row]:
        """Methods at one size, fastest first (ties by name)."""
        size = self.sizes[size_index]
        bound = self.bounds[size_index].time_us
        out = []
        for o in self.outcomes:
            if not o.ok:
                continue
            t = o.times_us[size_index]
            algbw = size / (t * 1e3) if t > 0 else math.inf
            out.append(Row(o.method, size, t, algbw, algbw * self.busbw_factor, t / bound if bound > 0 else math.inf))
        return sorted(out, key=lambda r: (r.time_us, r.method))

    def best(self, size_index: int) -> Row | None:
        rows = self.rows(size_index)
        return rows[0] if rows else None

    @property
    def skipped(self) -> list[MethodOutcome]:
        return [o for o in self.outcomes if not o.ok]

    def to_dict(self) -> dict[str, Any]:
        return {
            "topology": self.topology,
            "collective": self.kind.value,
            "root": self.root,
            "num_ranks": self.num_ranks,
            "model": self.model,
            "sizes": [
                {
                    "size": size,
                    "bound": {
                        "time_us": self.bounds[i].time_us,
                        "binding": self.bounds[i].binding,
                        "algbw": self.bounds[i].algbw,
                        "busbw": self.bounds[i].busbw,
                    },
                    "methods": [
                        {
                            "method": r.method,
                            "time_us": r.time_us,
                            "algbw": r.algbw,
                            "busbw": r.busbw,
                            "ratio_to_bound": r.ratio,
                        }
                        for r in self.rows(i)
                    ],
                    "nccl_model": (
                        {
                            "label": NCCL_LABEL,
                            "algorithm": self.nccl[i].algorithm,
                            "protocol": self.nccl[i].protocol,
                            "time_us": self.nccl[i].time_us,
                        }
                        if self.nccl
                        else None
                    ),
                }
                for i, size in enumerate(self.sizes)
            ],
            "schedules": [
                {
                    "method": o.method,
                    "steps": o.steps,
                    "transfers": o.transfers,
                    "chunks": o.chunks,
                    "synth_seconds": round(o.synth_seconds, 3),
                    **({"tuned_for": {str(self.sizes[i]): t[0] for i, t in enumerate(o.tuned)}} if o.tuned else {}),
                }
                for o in self.outcomes
                if o.ok
            ],
            "not_applicable": {o.method: o.note for o in self.skipped},
        }


def tuning_sizes(sizes: Sequence[int]) -> list[int]:
    """The sizes a self-tuning method is synthesized for: all of them when there are at most
    `TUNED_SIZES`, else the smallest, the middle one and the largest (each size then gets the
    best of these schedules)."""
    distinct = sorted(set(sizes))
    if len(distinct) <= TUNED_SIZES:
        return distinct
    return [distinct[0], distinct[len(distinct) // 2], distinct[-1]]


def default_methods(kind: Kind) -> list[str]:
    """Registered methods that serve ``kind``, minus meta-methods and exhaustive searches."""
    return [name for name, m in METHODS.items() if m.serves(kind) and name not in NOT_BY_DEFAULT]


def compare(
    topology: Topology,
    kind: Kind | str,
    sizes: Sequence[int] = DEFAULT_SIZES,
    *,
    root: int | None = None,
    methods: Sequence[str] | None = None,
    model: str = "sync",
    progress: Callable[[str], None] | None = None,
) -> Comparison:
    """Synthesize, verify and simulate every applicable method at every size, beside the bound.

    ``methods`` defaults to `default_methods`; a method that cannot serve the case is listed with
    its reason. ``model`` is the simulator model ("sync", FORMATS.md's step-synchronous cost,
    "event", or "one-port", the textbook model with each message's α and β from its path); the
    bound is that model's (`BOUND_MODELS`)."""
    kind = Kind(kind)
    sizes = tuple(int(s) for s in sizes)
    names = list(methods) if methods is not None else default_methods(kind)
    bm = bound_model(topology, kind, root, model=BOUND_MODELS[model])
    bounds = tuple(bm.at(s) for s in sizes)
    outcomes = []
    collective_root = None
    for name in names:
        if progress:
            progress(name)
        method = METHODS.get(name)
        if method is None:
            outcomes.append(MethodOutcome(name, note=f"unknown method (known: {', '.join(METHODS)})"))
            continue
        if not method.serves(kind):
            outcomes.append(MethodOutcome(name, note=f"does not serve {kind.value}"))
            continue
        started = time.perf_counter()
        tuning = tuning_sizes(sizes) if "size" in method.options else [None]
        try:
            schedules = [synthesize(topology, kind, name, root=root, options=None if s is None else {"size": s}) for s in tuning]
        except NotApplicable as exc:
            outcomes.append(MethodOutcome(name, note=str(exc)))
            continue
        elapsed = time.perf_counter() - started
        times = [[r.time_us for r in Simulator(sch, topology).run(sizes, model, timeline=False)] for sch in schedules]
        # at each size, the best of the method's schedules (each tuned for one size)
        # (ties go to the schedule tuned for the size nearest this one)
        pick = [
            min(
                range(len(schedules)),
                key=lambda j, i=i: (times[j][i], abs(math.log(max(tuning[j] or 1, 1) / max(sizes[i], 1))), j),
            )
            for i in range(len(sizes))
        ]
        schedule = schedules[-1]  # tuned for the largest size: the one kept for timelines and reports
        collective_root = schedule.collective.root
        tuned = ()
        if tuning != [None] and not all(same_transfers(schedules[0], other) for other in schedules[1:]):
            tuned = tuple((format_size(tuning[j]), schedules[j].num_steps, schedules[j].collective.num_chunks) for j in pick)
        outcomes.append(
            MethodOutcome(
                name,
                tuple(times[j][i] for i, j in enumerate(pick)),
                schedule.num_steps,
                schedule.num_transfers,
                schedule.collective.num_chunks,
                elapsed,
                schedule=schedule,
                tuned=tuned,
            )
        )
    nccl: tuple[NcclLine, ...] = ()
    nccl_note = ""
    try:
        nccl = tuple(NcclLine(c.size, c.algorithm, c.protocol, c.time_us) for c in nccl_model_best(topology, kind, sizes))
    except NotApplicable as exc:
        nccl_note = str(exc)
    probe = make_collective(topology, kind, names[0] if names and names[0] in METHODS else "direct", root)
    return Comparison(
        topology=topology.name,
        kind=kind,
        root=collective_root if collective_root is not None else probe.root,
        num_ranks=topology.num_ranks,
        model=model,
        sizes=sizes,
        bounds=bounds,
        outcomes=tuple(outcomes),
        nccl=nccl,
        nccl_note=nccl_note,
        busbw_factor=probe.busbw_factor(),
    )
