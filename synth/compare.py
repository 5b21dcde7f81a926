"""Every candidate side by side: the question a user asks to choose an algorithm.

`compare` runs the candidates of `synth.selection` for the collective and sizes: every registered
method that serves it (or those named), each verified; those that tune themselves for a message
size (greedy, packing, ...) once per size, at most `synth.selection.TUNED_SIZES` of them, each size
then taking the best of these; the exact ILP on machines of up to `synth.selection.EXACT_RANKS`
ranks, as ``-m auto`` runs them. It predicts every schedule's time at every size with the
simulator and puts each beside the physical lower bound (`synth.bounds`) and NCCL's analytic model
(a reference line, not a schedule). Rows (one per method, its best candidate at that size) are
ordered as `synth.selection` ranks candidates at one size, so the first row is what ``-m auto``
picks for that size alone; over all the sizes, `Comparison.chosen` is what ``-m auto --size``
with the same sizes picks. What was left out is listed with why (`Comparison.skipped_runs`), and
how long each candidate took (`Comparison.seconds`).

`synth compare` prints it; the benchmark suite (`benchmarks/suite.py`) and the report
(`synth.report`) run it too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from synth.bounds import BoundReport, bound_model
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.nccl_model import LABEL as NCCL_LABEL
from synth.nccl_model import nccl_model_best
from synth.registry import METHODS, make_collective
from synth.schedule import Schedule
from synth.selection import DEFAULT_BUDGET, Candidate, ProgressCallback, Selection, select
from synth.topology import Topology
from synth.units import format_size

DEFAULT_SIZES = (1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30)


@dataclass(frozen=True)
class MethodOutcome:
    """One method's schedules (or why there is none) and its predicted time at every size: at each
    size the best of its candidates there."""

    method: str
    times_us: tuple[float, ...] = ()
    steps: int = 0
    transfers: int = 0
    chunks: int = 0
    synth_seconds: float = 0.0
    note: str = ""
    schedule: Schedule | None = field(default=None, repr=False, compare=False)
    #: for a method with several distinct schedules (tuned for several sizes): per size, the label
    #: of the schedule used there (e.g. "1GiB", the size it was tuned for) and its (steps, chunks)
    tuned: tuple[tuple[str, int, int], ...] = ()
    #: the method's distinct candidates (run order) and, per size, the index of the one used there
    candidates: tuple[Candidate, ...] = field(default=(), repr=False, compare=False)
    picks: tuple[int, ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.times_us)

    def shape(self, size_index: int) -> tuple[int, int]:
        """(steps, chunks) of the schedule whose time is given at ``size_index``."""
        if self.tuned:
            return self.tuned[size_index][1], self.tuned[size_index][2]
        return self.steps, self.chunks

    def used(self, size_index: int) -> Candidate:
        """The candidate whose time is given at ``size_index``."""
        return self.candidates[self.picks[size_index]]


@dataclass(frozen=True)
class Row:
    """One method at one size."""

    method: str
    size: int
    time_us: float
    algbw: float
    busbw: float
    ratio: float  # predicted time / lower bound (>= 1 for every valid schedule)
    #: the candidate used (e.g. "greedy@1MiB")
    candidate: str = ""


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
    #: every run left out or not applicable, with why (label, reason), in run order
    skipped_runs: tuple[tuple[str, str], ...] = ()
    #: wall seconds to synthesize and verify, per candidate run (label, seconds)
    seconds: tuple[tuple[str, float], ...] = ()
    #: the best candidate over all sizes (what ``-m auto`` picks at these sizes) and, in the
    #: step-synchronous model (auto's), auto's explanation of it
    chosen: str = ""
    explanation: tuple[str, ...] = ()
    selection: Selection | None = field(default=None, repr=False, compare=False)

    def rows(self, size_index: int) -> list[Row]:
        """Methods at one size, fastest first (ties: fewer transfers, then the candidate's label)."""
        size = self.sizes[size_index]
        bound = self.bounds[size_index].time_us
        keyed = []
        for o in self.outcomes:
            if not o.ok:
                continue
            t = o.times_us[size_index]
            algbw = size / (t * 1e3) if t > 0 else math.inf
            used = o.used(size_index)
            ratio = t / bound if bound > 0 else math.inf
            keyed.append((used.key_at(size_index), Row(o.method, size, t, algbw, algbw * self.busbw_factor, ratio, used.label)))
        return [row for _, row in sorted(keyed, key=lambda kr: kr[0])]

    def best(self, size_index: int) -> Row | None:
        rows = self.rows(size_index)
        return rows[0] if rows else None

    @property
    def skipped(self) -> list[MethodOutcome]:
        """The methods that gave no schedule (their ``note`` says why)."""
        return [o for o in self.outcomes if not o.ok]

    def to_dict(self) -> dict[str, Any]:
        ranked = self.selection.ranked if self.selection is not None else ()
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
                            "candidate": r.candidate,
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
            "candidates": [
                {
                    "label": c.label,
                    "method": c.method,
                    "times_us": list(c.times_us),
                    "steps": c.schedule.num_steps,
                    "transfers": c.schedule.num_transfers,
                    "chunks": c.schedule.collective.num_chunks,
                    "synth_seconds": round(c.seconds, 3),
                    "tuned_for": list(c.tuned_for),
                }
                for c in ranked
            ],
            "chosen": self.chosen or None,
            "seconds": {label: round(s, 3) for label, s in self.seconds},
            "skipped": dict(self.skipped_runs),
            "not_applicable": {o.method: o.note for o in self.skipped},
        }


def default_methods(kind: Kind) -> list[str]:
    """The registered methods that serve ``kind``, but the ``meta`` family (``auto``, itself a
    choice among these): the candidates ``-m auto`` considers."""
    return [name for name, m in METHODS.items() if m.serves(kind) and m.family != "meta"]


def compare(
    topology: Topology,
    kind: Kind | str,
    sizes: Sequence[int] = DEFAULT_SIZES,
    *,
    root: int | None = None,
    methods: Sequence[str] | None = None,
    model: str = "sync",
    budget: float = DEFAULT_BUDGET,
    exact: bool = True,
    progress: ProgressCallback | None = None,
) -> Comparison:
    """Synthesize, verify and simulate every candidate at every size, beside the bound.

    ``methods`` defaults to `default_methods`; a method that is unknown or cannot serve the case is
    listed with its reason. ``model`` is the simulator model ("sync", docs/formats.md,
    'Step-synchronous cost', or "event"). ``budget`` and ``exact`` are `synth.selection.select`'s
    (``exact`` False leaves the exact solver out, saying so). ``progress(done, total, label)`` is
    called after each candidate run."""
    kind = Kind(kind)
    sizes = tuple(int(s) for s in sizes)
    names = list(dict.fromkeys(methods)) if methods is not None else default_methods(kind)
    bm = bound_model(topology, kind, root, model="event" if model == "event" else "step")
    bounds = tuple(bm.at(s) for s in sizes)
    early: dict[str, str] = {}
    chosen_methods = []
    for name in names:
        method = METHODS.get(name)
        if method is None:
            early[name] = f"unknown method (known: {', '.join(METHODS)})"
        elif not method.serves(kind):
            early[name] = f"does not serve {kind.value}"
        else:
            chosen_methods.append(method)
    sel = select(chosen_methods, topology, kind, sizes, root=root, model=model, budget=budget, exact=exact, progress=progress)
    run_seconds: dict[str, float] = {}
    for label, s in sel.seconds:
        method_name = label.split("@", 1)[0]
        run_seconds[method_name] = run_seconds.get(method_name, 0.0) + s
    reasons: dict[str, list[str]] = {}
    for label, why in sel.skipped:
        reasons.setdefault(label.split("@", 1)[0], []).append(why)
    in_run_order = sorted(sel.ranked, key=lambda c: [label for label, _ in sel.seconds].index(c.label))
    outcomes = []
    for name in names:
        if name in early:
            outcomes.append(MethodOutcome(name, note=early[name]))
            continue
        own = tuple(c for c in in_run_order if c.method == name)
        if not own:
            outcomes.append(MethodOutcome(name, note="; ".join(dict.fromkeys(reasons.get(name, ["no schedule"])))))
            continue
        picks = tuple(min(range(len(own)), key=lambda j, i=i: own[j].key_at(i)) for i in range(len(sizes)))
        # the schedule tuned for the largest size (the last such run): the one kept for timelines and reports
        kept = max(enumerate(own), key=lambda jc: (max(jc[1].tuned_for, default=0), jc[0]))[1]
        tuned = ()
        if len(own) > 1:
            tuned = tuple(
                (_tuned_label(own[j], sizes[i]), own[j].schedule.num_steps, own[j].schedule.collective.num_chunks)
                for i, j in enumerate(picks)
            )
        outcomes.append(
            MethodOutcome(
                name,
                tuple(own[j].times_us[i] for i, j in enumerate(picks)),
                kept.schedule.num_steps,
                kept.schedule.num_transfers,
                kept.schedule.collective.num_chunks,
                run_seconds.get(name, 0.0),
                schedule=kept.schedule,
                tuned=tuned,
                candidates=own,
                picks=picks,
            )
        )
    nccl: tuple[NcclLine, ...] = ()
    nccl_note = ""
    try:
        nccl = tuple(NcclLine(c.size, c.algorithm, c.protocol, c.time_us) for c in nccl_model_best(topology, kind, sizes))
    except NotApplicable as exc:
        nccl_note = str(exc)
    probe = make_collective(topology, kind, chosen_methods[0].name if chosen_methods else "direct", root)
    chosen, explanation = "", ()
    if sel.ranked:
        chosen = sel.chosen.label
        if model == "sync":
            explanation = tuple(sel.explanation([b.time_us for b in bounds]))
    return Comparison(
        topology=topology.name,
        kind=kind,
        root=sel.ranked[0].schedule.collective.root if sel.ranked else probe.root,
        num_ranks=topology.num_ranks,
        model=model,
        sizes=sizes,
        bounds=bounds,
        outcomes=tuple(outcomes),
        nccl=nccl,
        nccl_note=nccl_note,
        busbw_factor=probe.busbw_factor(),
        skipped_runs=tuple(early.items()) + sel.skipped,
        seconds=sel.seconds,
        chosen=chosen,
        explanation=explanation,
        selection=sel,
    )


def _tuned_label(candidate: Candidate, size: int) -> str:
    """The size ``candidate`` was tuned for nearest to ``size`` ("1GiB"; "1GiB/pipelined" for a
    pipelined exact schedule)."""
    if not candidate.tuned_for:
        return candidate.label
    nearest = min(candidate.tuned_for, key=lambda s: (abs(math.log(s / size)) if size > 0 else s, s))
    variant = candidate.label.partition("/")[2]
    return format_size(nearest) + (f"/{variant}" if variant else "")
