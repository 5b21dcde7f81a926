"""Lower bounds on the time of a collective on a topology, as a size-independent model.

Every bound has the form ``time(size) = us_per_byte × size + latency_us``. `bound_model` does the
expensive part (max-flows, the LP) once per (topology, collective, root); `BoundModel.at(size)`
then evaluates every bound for a size and names the largest. See docs/bounds.md for the formulas
and why each is a lower bound of the step-synchronous cost of any valid schedule
(docs/formats.md, 'Step-synchronous cost').

Two cost models:

- ``"step"`` (docs/formats.md, 'Step-synchronous cost'): every non-empty step costs at least the
  smallest α of any transfer on top of its largest bytes/bandwidth, so each bandwidth bound adds
  (fewest steps) × (smallest transfer α).
- ``"event"`` (transfers start when their data arrives and share link bandwidth): the bandwidth
  bounds without that step term, and the latency bound.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from synth.bounds import alltoall as a2a
from synth.bounds import layered, oneport, pipeline
from synth.bounds.contracted import contract, contract_spec
from synth.bounds.cuts import Cut, PairCut, RatioCut, max_ratio_cut, min_cut_between, min_pair_cut, rank_ingress_cuts
from synth.bounds.latency import LatencyFacts, latency_facts, through_alpha
from synth.collective import Collective, Kind, parse_kind
from synth.topology import Topology
from synth.units import bandwidth_gbps

MODELS = ("step", "event", "one-port")

#: Bytes per µs in one GB/s.
_BYTES_PER_US = 1e3

#: Largest alltoall LP (variables) solved by default: every built-in up to 64 ranks; the 128-rank
#: fat-tree (about 100k variables) is left to the cut bounds.
LP_MAX_VARIABLES = 30_000

#: The time-expanded LP bound (synth/bounds/layered.py) is built for machines of at most this many
#: ranks, for step counts from the fewest possible up to that many plus `LAYERED_EXTRA_STEPS`, and
#: only while one LP has at most `LAYERED_MAX_VARIABLES` columns.
LAYERED_MAX_RANKS = 16
#: step counts solved, as offsets from the fewest possible
LAYERED_STEPS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 13, 16)
LAYERED_MAX_VARIABLES = 12_000
LAYERED_BUDGET = 40_000
LAYERED_CLOSE = 0.02
#: the crossing-steps bound is built for a cut whose crossing α is at least this many × α_min
CROSSING_MIN_RATIO = 1.5
#: the crossing-phases bound (broadcast, reduce, scatter, gather): LPs of at most this many
#: columns, at most `PHASES_BUDGET` in all per model, for 1 .. `PHASES_MAX_CROSSINGS` crossing steps
PHASES_MAX_VARIABLES = 400_000
PHASES_BUDGET = 1_500_000
PHASES_MAX_CROSSINGS = 8
PHASES_MAX_PARTITIONS = 3
#: the collectives it is built for
PHASES_KINDS = (Kind.BROADCAST, Kind.REDUCE, Kind.SCATTER, Kind.GATHER, Kind.ALLGATHER, Kind.REDUCE_SCATTER)
#: ... and as many columns again for the LPs without a phase before the first crossing step (which
#: let a phase before it pay its α_min)
PHASES_OPENING_BUDGET = 1_500_000
#: the steps-volume bound solves the time-expanded LP of the contracted machine for partitions of
#: at most this many parts, for these counts of steps between parts, each LP of at most
#: `STEPS_LP_MAX_VARIABLES` columns and all of one model's at most `STEPS_LP_BUDGET` (three steps
#: between the 16 servers of fattree-4rack for broadcast: about 1 s of CPU in all)
STEPS_LP_MAX_PARTS = 16
STEPS_LP_COUNTS = (1, 2, 3, 4, 5, 6, 8, 10, 13, 16)
STEPS_LP_MAX_VARIABLES = 14_000
STEPS_LP_BUDGET = 60_000
#: ... and stops when one more step count gains less than this fraction
STEPS_LP_GAIN = 0.01


# ============================================================================ results
@dataclass(frozen=True)
class Line:
    """One line ``latency_us + us_per_byte × size`` of a piecewise bound, with what it stands for
    (e.g. "3 steps")."""

    latency_us: float
    us_per_byte: float
    note: str
    #: for ``combine`` "max-min": the group the line belongs to (the bound is the largest over the
    #: groups of the smallest line of each)
    group: int = 0
    #: for ``combine`` "max-min-max": the family of the group (the bound is the largest over the
    #: families of the smallest over their groups of each group's largest line)
    family: int = 0

    def time_us(self, size: float) -> float:
        return self.us_per_byte * size + self.latency_us


class LazyLines:
    """Lines computed on first use: the time-expanded LPs are solved only when a size is
    evaluated (the ILP and tree packing ask a model only for its linear terms)."""

    def __init__(self, compute: Callable[[], tuple[Line, ...]]):
        self._compute: Callable[[], tuple[Line, ...]] | None = compute
        self._lines: tuple[Line, ...] = ()

    def get(self) -> tuple[Line, ...]:
        if self._compute is not None:
            self._lines = tuple(self._compute())
            self._compute = None
        return self._lines


def _first_per_block(block: np.ndarray, keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per block (ascending block ids), the position of its element that sorts first by ``keys``
    (most significant first)."""
    order = np.lexsort((*reversed(keys), block))
    first = np.ones(order.size, dtype=bool)
    first[1:] = block[order[1:]] != block[order[:-1]]
    return order[first]


class _LineTable:
    """A piecewise bound's lines as arrays, so that evaluating it at a size costs a few array
    operations, not a Python pass over every line (`exit-pipeline` has two lines per crossing-step
    count up to `synth.bounds.pipeline.N_MAX` for every candidate region). `pick` returns the same
    line as the ``combine`` rule applied with Python's min and max over (time, latency) keys in the
    lines' order: ties go to the line, group or family that comes first."""

    def __init__(self, lines: tuple[Line, ...], combine: str):
        self.lines = lines
        self.combine = combine
        self.latency = np.array([line.latency_us for line in lines], dtype=np.float64)
        self.per_byte = np.array([line.us_per_byte for line in lines], dtype=np.float64)
        self.position = np.arange(len(lines), dtype=np.int64)
        if combine == "max-min-max":
            pairs = {}
            families: dict[int, int] = {}
            for line in lines:
                pairs.setdefault((line.family, line.group), len(pairs))
                families.setdefault(line.family, len(families))
            self.group = np.array([pairs[line.family, line.group] for line in lines], dtype=np.int64)
            self.group_family = np.array([families[family] for family, _ in pairs], dtype=np.int64)
        elif combine == "max-min":
            groups: dict[int, int] = {}
            for line in lines:
                groups.setdefault(line.group, len(groups))
            self.group = np.array([groups[line.group] for line in lines], dtype=np.int64)

    def pick(self, size: float) -> int:
        time = self.per_byte * size + self.latency
        if self.combine in ("min", "max"):
            sign = 1.0 if self.combine == "min" else -1.0
            one = np.zeros(time.size, dtype=np.int64)
            return int(_first_per_block(one, (sign * time, sign * self.latency, self.position))[0])
        if self.combine == "max-min":
            # the smallest line of each group, then the largest of those (groups in order)
            low = _first_per_block(self.group, (time, self.latency, self.position))
            top = _first_per_block(np.zeros(low.size, dtype=np.int64), (-time[low], -self.latency[low], self.group[low]))
            return int(low[top[0]])
        # max-min-max: each group's largest line, each family's smallest group, the largest family
        high = _first_per_block(self.group, (-time, -self.latency, self.position))
        family = self.group_family[self.group[high]]
        low = high[_first_per_block(family, (time[high], self.latency[high], self.group[high]))]
        order = self.group_family[self.group[low]]
        top = _first_per_block(np.zeros(low.size, dtype=np.int64), (-time[low], -self.latency[low], order))
        return int(low[top[0]])


@dataclass(frozen=True)
class BoundTerm:
    """One lower bound. Linear: ``time_us(size) = us_per_byte × size + latency_us``. With
    ``lines``, a piecewise-linear bound: the ``combine`` ("min", "max", "max-min": the largest
    over the lines' groups of each group's smallest line, or "max-min-max": the largest over the
    lines' families of the smallest over each family's groups of the group's largest line) of its
    lines, never below the linear form (which is then the bound's form for very small and very
    large sizes)."""

    name: str
    us_per_byte: float
    latency_us: float
    explanation: str
    lines: tuple[Line, ...] | LazyLines | None = field(default=None, compare=False)
    combine: str = "min"
    #: the lines as arrays (`_LineTable`), built on the first evaluation
    _table: dict[str, _LineTable] = field(default_factory=dict, compare=False, repr=False)

    def line_list(self) -> tuple[Line, ...]:
        if self.lines is None:
            return ()
        return self.lines.get() if isinstance(self.lines, LazyLines) else self.lines

    def _line_at(self, size: float) -> Line | None:
        lines = self.line_list()
        if not lines:
            return None
        table = self._table.get("lines")
        if table is None or table.lines is not lines:
            table = self._table["lines"] = _LineTable(lines, self.combine)
        return lines[table.pick(size)]

    def time_us(self, size: float) -> float:
        linear = self.us_per_byte * size + self.latency_us
        line = self._line_at(size)
        return linear if line is None else max(linear, line.time_us(size))

    def explain(self, size: float) -> str:
        """The explanation, with the line that gives the bound at ``size``."""
        line = self._line_at(size)
        if line is None or line.time_us(size) < self.us_per_byte * size + self.latency_us:
            return self.explanation
        return f"{self.explanation}; here: {line.note}"


@dataclass(frozen=True)
class NamedBound:
    """A bound evaluated at one size, also as the best algbw/busbw it allows (GB/s)."""

    name: str
    time_us: float
    explanation: str
    algbw: float
    busbw: float


@dataclass(frozen=True)
class BoundReport:
    """Every bound at one size; ``time_us`` is the largest and ``binding`` names it."""

    topology: str
    kind: Kind
    root: int | None
    num_ranks: int
    model: str
    size: int
    bounds: tuple[NamedBound, ...]
    time_us: float
    binding: str
    algbw: float
    busbw: float

    def bound(self, name: str) -> NamedBound:
        for b in self.bounds:
            if b.name == name:
                return b
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "time_us": self.time_us,
            "binding": self.binding,
            "algbw": _finite(self.algbw),
            "busbw": _finite(self.busbw),
            "bounds": [
                {
                    "name": b.name,
                    "time_us": b.time_us,
                    "algbw": _finite(b.algbw),
                    "busbw": _finite(b.busbw),
                    "explanation": b.explanation,
                }
                for b in self.bounds
            ],
        }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class BoundModel:
    """The lower bounds of one (topology, collective, root) for any size."""

    topology: str
    kind: Kind
    root: int | None
    num_ranks: int
    model: str
    terms: tuple[BoundTerm, ...]
    busbw_factor: float
    notes: tuple[str, ...] = field(default=())
    #: What the step-synchronous model adds to every bandwidth bound: (fewest steps) × (smallest
    #: transfer α); 0 in the event-driven model.
    step_floor_us: float = 0.0

    def term(self, name: str) -> BoundTerm:
        for t in self.terms:
            if t.name == name:
                return t
        raise KeyError(f"{self.kind.value} on {self.topology} has no bound named {name!r}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.terms)

    @property
    def us_per_byte(self) -> float:
        """The largest bandwidth coefficient: the bound for large sizes is about this × size."""
        return max((t.us_per_byte for t in self.terms), default=0.0)

    @property
    def latency_us(self) -> float:
        """The largest size-independent term: the bound as size → 0."""
        return max((t.latency_us for t in self.terms), default=0.0)

    @property
    def peak_algbw(self) -> float:
        """The algbw (GB/s) no schedule can beat at any size: size / (us_per_byte × size)."""
        return 1.0 / (self.us_per_byte * _BYTES_PER_US) if self.us_per_byte > 0 else math.inf

    def time_us(self, size: float) -> float:
        """The lower bound (µs) at ``size`` bytes: the largest of the terms."""
        return max((t.time_us(size) for t in self.terms), default=0.0)

    def at(self, size: int) -> BoundReport:
        """Every bound at ``size`` bytes (the nccl-tests size, docs/formats.md, 'Message size')."""
        if size < 0:
            raise ValueError(f"size {size} is negative")
        evaluated = []
        for t in self.terms:
            time = t.time_us(size)
            algbw = bandwidth_gbps(size, time)
            evaluated.append(NamedBound(t.name, time, t.explain(size), algbw, algbw * self.busbw_factor))
        binding = _binding(evaluated)
        if binding is None:
            time, name, algbw = 0.0, "none", math.inf
        else:
            time, name, algbw = binding.time_us, binding.name, binding.algbw
        return BoundReport(
            self.topology,
            self.kind,
            self.root,
            self.num_ranks,
            self.model,
            size,
            tuple(evaluated),
            time,
            name,
            algbw,
            algbw * self.busbw_factor,
        )


def _binding(bounds: list[NamedBound]) -> NamedBound | None:
    """The largest bound; among bounds equal up to float noise, the first listed (the simplest)."""
    best: NamedBound | None = None
    for b in bounds:
        if best is None or b.time_us > best.time_us * (1 + 1e-12) + 1e-15:
            best = b
    return best


# ============================================================================ per-topology facts
@dataclass(frozen=True)
class PartitionRegions:
    """A partition of the ranks (`rank_partitions`) with what the partition bounds need of it."""

    part: tuple[int, ...]
    name: str
    labels: np.ndarray
    #: the smallest α of a switch-only transfer between ranks of different parts (inf if none)
    alpha_p: float
    #: each part's ranks, region for data entering and region for data leaving; None when some
    #: part has no region
    parts: list[tuple[frozenset[int], Cut, Cut]] | None


def _region_volume(c: Collective, parts: list[tuple[frozenset[int], Cut, Cut]] | None) -> float:
    """The largest "D over C" (µs per byte) through the parts' regions: the bytes of ``c`` that
    must enter (leave) a part's region over its in- (out-) bandwidth; 0 without regions."""
    volume = 0.0
    for ranks, into, out_of in parts or ():
        for direction, cut in (("in", into), ("out", out_of)):
            if cut.bandwidth > 0:
                volume = max(volume, float(_crossing_need(c, ranks, direction)) / (cut.bandwidth * _BYTES_PER_US))
    return volume


class _Analysis:
    """Size-independent facts of one topology, computed on first use and shared by every
    collective's model (cached on the topology object)."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self._cache: dict[Any, Any] = {}

    def _get(self, key, compute):
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def ingress(self) -> list[Cut]:
        return self._get("ingress", lambda: rank_ingress_cuts(self.topology))

    def egress(self) -> list[Cut]:
        return self._get("egress", lambda: rank_ingress_cuts(self.topology.reversed()))

    def latency(self) -> LatencyFacts:
        return self._get("latency", lambda: latency_facts(self.topology))

    def ratio_cut(self, reverse: bool, root: int | None) -> RatioCut:
        """Allgather (root None) or gather-to-root cut; on the reversed topology for reduce-scatter
        and scatter."""

        def compute() -> RatioCut:
            topo = self.topology.reversed() if reverse else self.topology
            cuts = self.egress() if reverse else self.ingress()
            r = topo.num_ranks
            sinks = list(range(r)) if root is None else [root]
            start = cuts[root] if root is not None else max(cuts, key=lambda c: 1.0 / c.bandwidth)
            return max_ratio_cut(topo, sinks, start)

        return self._get(("ratio", reverse, root), compute)

    def pair_cut(self, pairs_key: tuple) -> PairCut | None:
        r = self.topology.num_ranks

        def compute():
            what, root = pairs_key
            if what == "from":
                pairs = [(root, v) for v in range(r) if v != root]
            elif what == "to":
                pairs = [(v, root) for v in range(r) if v != root]
            else:  # "both": the global min cut between ranks, both directions through rank 0
                pairs = [p for v in range(1, r) for p in ((0, v), (v, 0))]
            return min_pair_cut(self.topology, pairs)

        return self._get(("pair", pairs_key), compute)

    def alltoall_cut(self) -> a2a.AlltoallCut | None:
        return self._get("a2a-cut", lambda: a2a.best_alltoall_cut(self.topology))

    def alltoall_lp(self, solver: str) -> a2a.FlowLP | None:
        return self._get(("a2a-lp", solver), lambda: a2a.alltoall_flow_lp(self.topology, solver))

    def through_alpha(self) -> np.ndarray:
        return self._get("thru", lambda: through_alpha(self.topology))

    def layout(self) -> layered.Layout:
        facts = self.latency()
        return self._get("layout", lambda: layered.layout(self.topology, facts.direct, facts.hops))

    def partitions(self) -> list[tuple[tuple[int, ...], str]]:
        return self._get("partitions", lambda: rank_partitions(self.topology, self.latency().direct))

    def part_regions(self) -> list[tuple[frozenset[int], Cut, Cut]]:
        """Every part of every partition: its ranks, and the smallest node sets that hold them and
        no other rank, for data entering (on the topology) and leaving (on the reversed one)."""

        def compute():
            r = self.topology.num_ranks
            out, seen = [], set()
            for part, _ in self.partitions():
                for q in sorted(set(part)):
                    ranks = frozenset(v for v in range(r) if part[v] == q)
                    if ranks in seen:
                        continue
                    seen.add(ranks)
                    others = [v for v in range(r) if v not in ranks]
                    into = min_cut_between(self.topology, others, sorted(ranks))
                    out_of = min_cut_between(self.topology.reversed(), others, sorted(ranks))
                    out.append((ranks, into, out_of))
            return out

        return self._get("part-regions", compute)

    def partition_regions(self) -> list[PartitionRegions]:
        """Every partition with the smallest α of a transfer between its parts (α_P, inf if none)
        and each part's ranks and regions (`part_regions`), or None for the parts when a part
        has no region."""

        def compute():
            direct = self.latency().direct
            regions = {ranks: (into, out_of) for ranks, into, out_of in self.part_regions()}
            out = []
            for part, name in self.partitions():
                labels = np.asarray(part)
                alpha_p = float(direct[labels[:, None] != labels[None, :]].min())
                members = [frozenset(int(v) for v in np.flatnonzero(labels == q)) for q in range(int(labels.max()) + 1)]
                parts = [(ranks, *regions[ranks]) for ranks in members] if all(m in regions for m in members) else None
                out.append(PartitionRegions(part, name, labels, alpha_p, parts))
            return out

        return self._get("partition-regions", compute)

    def contracted(self) -> Contracted | None:
        return self._get("contracted", lambda: contracted_volume(self.topology, self.partitions(), self.through_alpha()))

    def contraction(self, part: tuple[int, ...]) -> tuple[Topology, layered.Layout] | None:
        """The machine with each part of ``part`` contracted to one rank (synth/bounds/contracted.py),
        and its LP layout."""

        def compute():
            topo = contract(self.topology, part)
            facts = latency_facts(topo)
            if (facts.hops < 0).any():
                return None
            return topo, layered.layout(topo, facts.direct, facts.hops)

        return self._get(("contraction", part), compute)

    def contracted_layered(
        self, key: tuple, topo: Topology, spec: layered.FlowSpec, lay: layered.Layout, steps: int
    ) -> layered.LayeredBound | None:
        return self._get(
            ("contracted-layered", key),
            lambda: layered.layered_bound(topo, spec, lay, steps, {"solver": "ipm"}),
        )

    def phases(self, key: tuple, spec: layered.FlowSpec, kinds: str, parts: np.ndarray) -> layered.LayeredBound | None:
        """The LP of layers ``kinds`` ("C" crossing, "F"/"E" merged phases) for `crossing-phases`."""
        crossing = frozenset(j for j, kind in enumerate(kinds) if kind == "C")
        merged = frozenset(j for j, kind in enumerate(kinds) if kind in "FE")
        return self._get(
            ("phases", key),
            lambda: layered.layered_bound(
                self.topology,
                spec,
                self.layout(),
                len(kinds),
                {"solver": "ipm"},
                crossing=crossing,
                merged=merged,
                parts=parts,
                reduce=True,
            ),
        )

    def layered(self, key: tuple, spec: layered.FlowSpec, steps: int, **kw) -> layered.LayeredBound | None:
        return self._get(
            ("layered", key, steps),
            lambda: layered.layered_bound(self.topology, spec, self.layout(), steps, {"solver": "ipm"}, **kw),
        )


def _analysis(topology: Topology) -> _Analysis:
    cached = topology.__dict__.get("_bounds_analysis")
    if cached is None:
        cached = topology.__dict__["_bounds_analysis"] = _Analysis(topology)
    return cached


# ============================================================================ wording
def _frac(f: Fraction) -> str:
    return "size" if f == 1 else f"{f.numerator}/{f.denominator} of size"


def _gbps(x: float) -> str:
    return f"{x:.6g} GB/s"


def describe_nodes(topology: Topology, nodes: frozenset[int]) -> str:
    """A short name for a set of nodes: its ranks (by host when they are whole hosts) and how
    many switches it holds."""
    r = topology.num_ranks
    ranks = sorted(v for v in nodes if v < r)
    switches = len(nodes) - len(ranks)
    hosts = [h for h, members in topology.host_groups.items() if h is not None and set(members) <= set(ranks)]
    covered = sorted(v for h in hosts for v in topology.host_groups[h])
    if hosts and covered == ranks and len(topology.host_groups) > 1:
        if len(hosts) == 1:
            text = f"host {hosts[0]}"
        elif len(hosts) <= 3:
            text = "hosts " + ", ".join(hosts)
        else:
            text = f"{len(hosts)} hosts ({', '.join(hosts[:2])}, ...)"
        text += f" ({len(ranks)} ranks)"
    elif len(ranks) <= 3:
        text = ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(topology.node_name(v) for v in ranks)
    else:
        shown = ", ".join(topology.node_name(v) for v in ranks[:3])
        text = f"{len(ranks)} ranks ({shown}, ...)"
    if switches:
        text += f" with {switches} switch{'es' if switches > 1 else ''}"
    return text


# ============================================================================ the bounds
@dataclass(frozen=True)
class _Need:
    """Bytes (as a fraction of size) each rank must receive and send, for the per-rank bounds."""

    receive: list[Fraction]
    send: list[Fraction]


def _needs(c: Collective) -> _Need:
    r, root = c.num_ranks, c.root
    one, piece, rest, zero = Fraction(1), Fraction(1, r), Fraction(r - 1, r), Fraction(0)
    every = range(r)
    kind = c.kind
    if kind is Kind.ALLGATHER:
        return _Need([rest] * r, [piece] * r)
    if kind is Kind.REDUCE_SCATTER:
        return _Need([piece] * r, [rest] * r)
    if kind is Kind.ALLTOALL:
        return _Need([rest] * r, [rest] * r)
    if kind is Kind.ALLREDUCE:
        return _Need([one] * r, [one] * r)
    if kind is Kind.GATHER:
        return _Need([rest if v == root else zero for v in every], [zero if v == root else piece for v in every])
    if kind is Kind.SCATTER:
        return _Need([zero if v == root else piece for v in every], [rest if v == root else zero for v in every])
    if kind is Kind.BROADCAST:
        return _Need([zero if v == root else one for v in every], [one if v == root else zero for v in every])
    if kind is Kind.REDUCE:
        return _Need([one if v == root else zero for v in every], [zero if v == root else one for v in every])
    raise ValueError(kind)


def _per_rank(topology: Topology, needs: list[Fraction], cuts: list[Cut], verb: str, prep: str):
    """max over ranks of need / effective bandwidth, as (us_per_byte, explanation) or None; and
    every rank's (us_per_byte, cut) for the cut-latency bound."""
    best = None
    every = []
    for v, (need, cut) in enumerate(zip(needs, cuts)):
        if need == 0:
            continue
        value = float(need) / (cut.bandwidth * _BYTES_PER_US)
        every.append((value, cut, f"rank {topology.node_name(v)}"))
        if best is None or value > best[0] * (1 + 1e-12):
            best = (value, v, need, cut)
    if best is None:
        return None
    value, v, need, cut = best
    own = topology.rank_ingress(v) if prep == "reach" else topology.rank_egress(v)
    where = "" if math.isclose(cut.bandwidth, own, rel_tol=1e-12) else f" (of its {_gbps(own)} links)"
    text = f"rank {topology.node_name(v)} must {verb} {_frac(need)}; at most {_gbps(cut.bandwidth)}{where} can {prep} it"
    return value, text, every


def _crossing_need(c: Collective, inside: frozenset[int], direction: str) -> Fraction:
    """The fraction of size that must enter (``"in"``) or leave (``"out"``) any node set holding
    exactly the ranks ``inside`` (each byte counted once; docs/bounds.md)."""
    r, root, kind = c.num_ranks, c.root, c.kind
    k = len(inside)
    if k == 0 or k == r:
        return Fraction(0)
    outside = Fraction(r - k, r)
    into = direction == "in"
    if kind is Kind.ALLGATHER:
        return outside if into else Fraction(k, r)
    if kind is Kind.REDUCE_SCATTER:
        return Fraction(k, r) if into else outside
    if kind is Kind.GATHER:
        return (outside if root in inside else Fraction(0)) if into else (Fraction(0) if root in inside else Fraction(k, r))
    if kind is Kind.SCATTER:
        return (Fraction(0) if root in inside else Fraction(k, r)) if into else (outside if root in inside else Fraction(0))
    if kind is Kind.BROADCAST:
        return Fraction(0 if root in inside else 1) if into else Fraction(1 if root in inside else 0)
    if kind is Kind.REDUCE:
        return Fraction(1 if root in inside else 0) if into else Fraction(0 if root in inside else 1)
    if kind is Kind.ALLREDUCE:
        return Fraction(1)
    if kind is Kind.ALLTOALL:
        return Fraction(k * (r - k), r)
    raise ValueError(kind)


def _sources_and_sinks(c: Collective) -> tuple[list[int], list[int]]:
    """Ranks data must travel from, and to, for the latency and step-count bounds."""
    r, every = c.num_ranks, list(range(c.num_ranks))
    if c.kind in (Kind.BROADCAST, Kind.SCATTER):
        return [c.root], [v for v in every if v != c.root]
    if c.kind in (Kind.GATHER, Kind.REDUCE):
        return [v for v in every if v != c.root], [c.root]
    return every, every if r > 1 else []


# ============================================================================ combined bounds
def _crossing_alpha(topology: Topology, thru: np.ndarray, nodes: frozenset[int], direction: str) -> float:
    """The smallest α of a transfer whose path enters (``"in"``) or leaves (``"out"``) ``nodes``."""
    best = math.inf
    for i, link in enumerate(topology.links):
        inside_src, inside_dst = link.src in nodes, link.dst in nodes
        if (direction == "in" and inside_dst and not inside_src) or (direction == "out" and inside_src and not inside_dst):
            best = min(best, float(thru[i]))
    return best


def _cut_mask(topology: Topology, nodes: frozenset[int], direction: str) -> np.ndarray:
    """The links that enter (``"in"``) or leave (``"out"``) ``nodes``, as a mask."""
    src = np.array([link.src in nodes for link in topology.links])
    dst = np.array([link.dst in nodes for link in topology.links])
    return (dst & ~src) if direction == "in" else (src & ~dst)


def _cut_latency_term(crossings: list, steps: int, alpha_min: float) -> BoundTerm | None:
    """For each "D over C" bound whose crossing transfers all last at least α_S > α_min: at least
    one step crosses, and it lasts α_S on top of its share of D/C, so time ≥ α_S + (H − 1)·α_min +
    D/C (docs/bounds.md). The largest of these lines."""
    lines = []
    for us_per_byte, alpha, what, _ in crossings:
        if not math.isfinite(alpha) or alpha <= alpha_min * (1 + 1e-12) + 1e-15:
            continue
        latency = alpha + (steps - 1) * alpha_min
        rest = f" + {steps - 1} more step{'s' if steps > 2 else ''} x {alpha_min:g} us" if steps > 1 else ""
        note = f"a step that crosses {what} lasts >= {alpha:g} us{rest}, + {us_per_byte * 1e6:.6g} us per MB of size"
        lines.append(Line(latency, us_per_byte, note))
    if not lines:
        return None
    lines.sort(key=lambda line: (line.us_per_byte, line.latency_us))
    # keep the lines that are the largest at some size (upper envelope)
    envelope: list[Line] = []
    for line in lines:
        while envelope and envelope[-1].latency_us <= line.latency_us:
            envelope.pop()
        envelope.append(line)
    first = max(envelope, key=lambda line: (line.us_per_byte, line.latency_us))
    return BoundTerm(
        "cut-latency",
        first.us_per_byte,
        first.latency_us,
        "a cut whose crossing transfers have a larger alpha: a step that crosses it pays that alpha on top of its bytes",
        tuple(envelope),
        "max",
    )


def _time_expanded_term(
    topology: Topology, c: Collective, an: _Analysis, steps: int, alpha_min: float, bandwidth: float
) -> BoundTerm:
    """The time-expanded LP bound (synth/bounds/layered.py), computed lazily. β_T, the LP bound on
    the bandwidth part of any T-step schedule, never grows with T (a T-step solution is a
    (T+1)-step one with an idle last layer), so solving it for some step counts T_1 < T_2 < ...
    gives, for the schedules of T_(i−1) < T ≤ T_i steps, the line
    (T_(i−1) + 1)·α_min + max(β_(T_i), bandwidth)·size; and for more steps than the last solved,
    (T_last + 1)·α_min + bandwidth·size. The step counts solved are the fewest possible and then
    `LAYERED_STEPS` more, until β_T is within `LAYERED_CLOSE` of the bandwidth bound (larger T
    could then gain no more than that fraction of the bandwidth part) or an LP would exceed
    `LAYERED_MAX_VARIABLES` columns or the total `LAYERED_BUDGET`."""
    key = (c.kind, c.root)

    def compute() -> tuple[Line, ...]:
        spec = layered.flow_spec(c, [part for part, _ in an.partitions()])
        lay = an.layout()
        first = max(steps, layered.steps_needed(spec, lay.hops))
        lines: list[Line] = []
        covered = first - 1  # every step count up to here has its line
        spent = 0
        close = False
        for extra in LAYERED_STEPS:
            t = first + extra
            size = layered.lp_variables(spec, lay, c.num_ranks, t)
            if size > LAYERED_MAX_VARIABLES or spent + size > LAYERED_BUDGET:
                break
            spent += size
            result = an.layered(key, spec, t)
            if result is None:
                break
            low = covered + 1
            covered = t
            if not math.isfinite(result.us_per_byte):
                continue  # no schedule of so few steps exists
            beta = max(result.us_per_byte, bandwidth)
            counts = f"{t}" if low == t else f"{low}..{t}"
            lines.append(
                Line(
                    low * alpha_min,
                    beta,
                    f"{counts} step{'s' if t > 1 else ''}: >= {low} x {alpha_min:g} us + {beta * 1e6:.6g} us per MB",
                )
            )
            if result.us_per_byte <= bandwidth * (1 + 1e-9):
                return tuple(lines)  # the LP met the bandwidth bound: more steps cannot help
            if result.us_per_byte <= bandwidth * (1 + LAYERED_CLOSE):
                close = True
                break
        more = covered + 1
        text = "the bandwidth bound" if not close else f"the bandwidth bound (the LP was within {LAYERED_CLOSE:.0%} of it)"
        lines.append(Line(more * alpha_min, bandwidth, f"{more} or more steps: >= {more} x {alpha_min:g} us + {text}"))
        return tuple(lines)

    return BoundTerm(
        "time-expanded",
        bandwidth,
        steps * alpha_min,
        "a schedule of T steps pays T x the smallest alpha plus the bandwidth a T-layer LP needs; the best T",
        LazyLines(compute),
        "min",
    )


def _crossing_steps_term(
    topology: Topology, c: Collective, an: _Analysis, steps: int, alpha_min: float, crossings: list
) -> BoundTerm | None:
    """The time-expanded LP with two kinds of steps (docs/bounds.md, "crossing steps"), for the
    cut whose crossing transfers have the largest α (at least `CROSSING_MIN_RATIO` × α_min): for
    T = H .. H + 2 steps and every choice of one or two crossing steps, the line
    k·α_S + (T − k)·α_min + β_(T, z)·size; with three or more crossing steps, or more than H + 2
    steps, closed-form lines. Computed lazily; the LPs only while they fit `LAYERED_BUDGET`."""
    usable = [x for x in crossings if x[3] is not None and math.isfinite(x[1]) and x[1] >= CROSSING_MIN_RATIO * alpha_min]
    if not usable or (alpha_min <= 0 and not usable):
        return None
    slope, alpha_s, what, mask = max(usable, key=lambda x: (x[1], x[0]))
    key = (c.kind, c.root, "crossing", what)

    def compute() -> tuple[Line, ...]:
        spec = layered.flow_spec(c, [part for part, _ in an.partitions()])
        lay = an.layout()
        first = max(steps, layered.steps_needed(spec, lay.hops))
        lines: list[Line] = []
        spent = 0
        last = first + 2
        for t in range(first, first + 3):
            patterns = [frozenset({j}) for j in range(t)] + [frozenset(p) for p in itertools.combinations(range(t), 2)]
            size = layered.lp_variables(spec, lay, c.num_ranks, t)
            if size > LAYERED_MAX_VARIABLES or spent + size * len(patterns) > LAYERED_BUDGET:
                last = t - 1
                break
            spent += size * len(patterns)
            for z in patterns:
                result = an.layered((*key, tuple(sorted(z))), spec, t, cut=mask, crossing=z)
                if result is None:
                    return ()  # no answer from the solver: leave the term out
                if not math.isfinite(result.us_per_byte):
                    continue
                k = len(z)
                where = ", ".join(str(j + 1) for j in sorted(z))
                lines.append(
                    Line(
                        k * alpha_s + (t - k) * alpha_min,
                        max(result.us_per_byte, 0.0),
                        f"{t} steps, crossing in step {where}: >= {k} x {alpha_s:g} + {t - k} x {alpha_min:g} us "
                        f"+ {result.us_per_byte * 1e6:.6g} us per MB",
                    )
                )
            if t >= 3:
                lines.append(Line(3 * alpha_s + (t - 3) * alpha_min, slope, f"{t} steps, 3 or more crossing"))
        if last < first:
            return ()
        more = last + 1
        lines.append(
            Line(alpha_s + (more - 1) * alpha_min, slope, f"{more} or more steps: >= {alpha_s:g} + {more - 1} x {alpha_min:g} us")
        )
        return tuple(lines)

    return BoundTerm(
        "crossing-steps",
        slope,
        alpha_s + (steps - 1) * alpha_min,
        f"steps that cross {what} last >= {alpha_s:g} us plus their bytes over it, the others {alpha_min:g} us "
        "plus theirs; LPs over which steps cross",
        LazyLines(compute),
        "min",
    )


def _phase_partitions(c: Collective, an: _Analysis, alpha_min: float) -> list[tuple[np.ndarray, float, float, str]]:
    """The partitions (hosts, groups behind slow links, groups by α) whose transfers between parts
    have a smallest α (α_P) of at least `CROSSING_MIN_RATIO` × α_min, largest α_P first, at most
    `PHASES_MAX_PARTITIONS`: the part of each rank, α_P, the largest "D over C" through a region
    that only transfers between parts cross (µs per byte: a part's region, or a region of a
    partition whose parts are unions of these parts) and the partition's name."""
    partitions = an.partition_regions()
    volumes = [(x.labels, _region_volume(c, x.parts)) for x in partitions]
    found = []
    for x, (_, own) in zip(partitions, volumes, strict=True):
        if own <= 0 or not math.isfinite(x.alpha_p) or x.alpha_p < CROSSING_MIN_RATIO * alpha_min:
            continue
        # a coarser partition's boundary is crossed only by transfers between these parts
        slope = max(v for other, v in volumes if _coarser(other, x.labels))
        found.append((x.labels, x.alpha_p, slope, x.name))
    found.sort(key=lambda x: -x[1])
    return found[:PHASES_MAX_PARTITIONS]


def _coarser(other: np.ndarray, labels: np.ndarray) -> bool:
    """Whether every part of ``labels`` lies inside one part of ``other``."""
    first = np.full(int(labels.max()) + 1, -1)
    first[labels] = other  # the last rank's label of ``other`` per part; compare with every rank
    return bool((first[labels] == other).all())


def _lowest(lines: list[Line]) -> list[Line]:
    """Lines that are the smallest at some size from 0 on (`_LineTable`'s "min" pick, which breaks
    ties by order): probed at 0, at every crossing of two lines, between them and beyond the last.
    A line tied with a picked one is found once the picked one has been raised."""
    points = {0.0}
    for i, a in enumerate(lines):
        for b in lines[i + 1 :]:
            if a.us_per_byte != b.us_per_byte:
                x = (b.latency_us - a.latency_us) / (a.us_per_byte - b.us_per_byte)
                if x > 0 and math.isfinite(x):
                    points.add(x)
    ordered = sorted(points)
    probes = ordered + [(p + q) / 2 for p, q in itertools.pairwise(ordered)] + [2 * ordered[-1] + 1.0]
    table = _LineTable(tuple(lines), "min")
    return [lines[i] for i in sorted({table.pick(size) for size in probes})]


def _refined_lines(coarse: dict[str, Line], refined: dict[str, list[Line]], tail: Line) -> list[Line]:
    """A partition's `crossing-phases` lines: each pattern's refined lines where it has them, else
    its line, then the tail line."""
    return [x for kinds in coarse for x in refined.get(kinds, [coarse[kinds]])] + [tail]


def _crossing_phases_term(c: Collective, an: _Analysis, alpha_min: float) -> BoundTerm | None:
    """The time-expanded LP in phases (docs/bounds.md, `crossing-phases`), for broadcast, reduce,
    scatter, gather, allgather and reduce-scatter, for each of the partitions of
    `_phase_partitions`. A schedule with k crossing steps (steps with a transfer between parts) is
    k crossing steps with phases of steps inside the parts between them; the LP with k crossing
    layers and one merged layer per phase bounds its bytes, for k = 1 .. `PHASES_MAX_CROSSINGS`,
    with the closing phase empty (k·α_P + β·size) or not (k·α_P + α_min + β·size); where the LP
    without an opening phase is solved too (its own budget), a schedule either has no step before
    the first crossing step (that LP's β) or pays α_min for one. More crossing steps: (K + 1)·α_P +
    D/C·size. A partition's bound is the smallest of its lines; the term is the largest over the
    partitions."""
    if c.kind not in PHASES_KINDS:
        return None
    found = _phase_partitions(c, an, alpha_min)
    if not found:
        return None
    spec = layered.flow_spec(c)
    pairs = int(np.isfinite(an.latency().direct).sum())
    if 5 * len(spec.commodities) * pairs > PHASES_MAX_VARIABLES:  # 3 layers, 2 of them merged
        return None  # not even one crossing step's LPs fit: the closed-form bounds stand
    if layered.phases_variables(spec, an.layout(), c.num_ranks, "FCE") > PHASES_MAX_VARIABLES:
        return None

    def compute() -> tuple[Line, ...]:
        lay = an.layout()
        lines: list[Line] = []
        spent = opening_spent = 0

        def line(k: int, alpha_p: float, name: str, kinds: str, beta: float, charged: bool, group: int) -> Line:
            ends = (charged and kinds.startswith("F")) + kinds.endswith("E")  # phases charged α_min
            before = (
                "" if not charged else ", steps inside the parts first" if kinds.startswith("F") else ", nothing before the first"
            )
            after = ", then steps inside the parts" if kinds.endswith("E") else ", nothing after the last"
            extra = f" + {ends} x {alpha_min:g}" if ends > 1 else f" + {alpha_min:g}" if ends else ""
            return Line(
                k * alpha_p + ends * alpha_min,
                beta,
                f"{name}, {k} crossing step{'s' if k > 1 else ''}{before}{after}: "
                f">= {k} x {alpha_p:g}{extra} us + {beta * 1e6:.6g} us per MB",
                group,
            )

        for group, (labels, alpha_p, slope, name) in enumerate(found):
            key = (c.kind, c.root, "phases", name)
            solved: dict[str, float] = {}  # pattern -> β (µs per byte), at least D/C
            last = 0
            for k in range(1, PHASES_MAX_CROSSINGS + 1):
                patterns = ("FC" * k, "FC" * k + "E")
                sizes = [layered.phases_variables(spec, lay, c.num_ranks, kinds) for kinds in patterns]
                if max(sizes) > PHASES_MAX_VARIABLES or spent + sum(sizes) > PHASES_BUDGET:
                    break
                spent += sum(sizes)
                met = True
                for kinds in patterns:
                    result = an.phases((*key, kinds), spec, kinds, labels)
                    if result is None:
                        return tuple(lines)  # no answer from the solver: this partition is left out
                    if math.isfinite(result.us_per_byte):
                        solved[kinds] = max(result.us_per_byte, slope)
                        met = met and result.us_per_byte <= slope * (1 + 1e-9)
                last = k
                if met:
                    break  # the bytes met the cut bound: more crossing steps only add α
            if last == 0:
                continue
            tail = Line(
                (last + 1) * alpha_p,
                slope,
                f"{name}, {last + 1} or more crossing steps: >= {last + 1} x {alpha_p:g} us + the cut bound",
                group,
            )
            # each solved pattern's line, refined where it is the partition's bound at some size:
            # solved once more without a phase before the first crossing step, a schedule either
            # has no step before it (that LP) or pays α_min for one; refining raises a line, which
            # may leave another one lowest, so this repeats until the lowest lines are refined
            coarse = {
                kinds: line(k, alpha_p, name, kinds, solved[kinds], False, group)
                for k in range(1, last + 1)
                for kinds in ("FC" * k, "FC" * k + "E")
                if kinds in solved
            }
            refined: dict[str, list[Line]] = {}
            while True:
                lowest = _lowest(_refined_lines(coarse, refined, tail))
                todo = [kinds for kinds in coarse if kinds not in refined and any(coarse[kinds] is x for x in lowest)]
                if not todo:
                    break
                for kinds in todo:
                    k, alone = kinds.count("C"), kinds[1:]
                    size = layered.phases_variables(spec, lay, c.num_ranks, alone)
                    refined[kinds] = [coarse[kinds]]  # unless solved below
                    if size > PHASES_MAX_VARIABLES or opening_spent + size > PHASES_OPENING_BUDGET:
                        continue
                    opening_spent += size
                    result = an.phases((*key, alone), spec, alone, labels)
                    if result is None:
                        continue
                    refined[kinds] = [line(k, alpha_p, name, kinds, solved[kinds], True, group)]
                    if math.isfinite(result.us_per_byte):
                        refined[kinds].insert(0, line(k, alpha_p, name, alone, max(result.us_per_byte, slope), True, group))
            lines.extend(_refined_lines(coarse, refined, tail))
        return tuple(lines)

    # the linear form: one partition's own line (one crossing step at least, and its D/C)
    _, alpha_p, slope, _ = max(found, key=lambda x: (x[2], x[1]))
    return BoundTerm(
        "crossing-phases",
        slope,
        alpha_p,
        "a step with a transfer between the parts of a partition lasts >= their smallest alpha plus those transfers' bytes; "
        "LPs over the number of such steps, with the steps inside the parts between them merged",
        LazyLines(compute),
        "max-min",
    )


def _as_broadcast_root(an: _Analysis) -> int:
    """The root whose broadcast bound the allreduce borrows: the rank with the least bandwidth out
    (its data must leave it), the lowest index on ties (rank 0 when every rank has the same)."""
    cuts = an.egress()
    return min(range(len(cuts)), key=lambda r: (cuts[r].bandwidth, r))


def _as_broadcast_term(topology: Topology, an: _Analysis, lp_max_variables: int, solver: str) -> BoundTerm:
    """The allreduce's bound borrowed from a broadcast (docs/bounds.md, `as-broadcast`): each
    rank's contribution reaches every rank, so the transfers that carry rank x's contribution, one
    per (step, destination, chunk), are a broadcast from x in the same steps with no more bytes on
    any link, no slower in the step-synchronous model; the allreduce takes at least the broadcast
    bound from every x, here from `_as_broadcast_root`. (An allreduce is also a reduce to every
    rank; docs/bounds.md says why that bound is not a term.) The term's lines are every line and
    linear form of the broadcast model's terms, each term's rule kept by the "max-min-max"
    combination, so it equals the broadcast bound at every size (that model is built on first
    use)."""
    root = _as_broadcast_root(an)
    head = f"broadcast from {topology.node_name(root)}"

    def compute() -> tuple[Line, ...]:
        lines: list[Line] = []
        ids = itertools.count(1)  # fresh family and group numbers (the table keys groups by family)
        inner = bound_model(topology, Kind.BROADCAST, root, model="step", lp_max_variables=lp_max_variables, solver=solver)
        for term in inner.terms:
            # the linear form: a family of its own
            lines.append(
                Line(term.latency_us, term.us_per_byte, f"{head}, its {term.name}: {term.explanation}", next(ids), next(ids))
            )
            one_family = next(ids)  # "min": the smallest of the lines, one group each
            families: dict[int, int] = {}  # the term's group ("max-min") or family ("max-min-max") -> ours
            groups: dict[tuple[int, int], int] = {}  # "max-min-max": the term's (family, group) -> ours
            for line in term.line_list():
                if term.combine == "min":
                    family = one_family
                elif term.combine == "max":  # the largest: a family per line
                    family = next(ids)
                elif term.combine == "max-min":  # the largest group's smallest: a family per group
                    family = families.setdefault(line.group, next(ids))
                else:  # max-min-max: its families and groups as they are
                    family = families.setdefault(line.family, next(ids))
                if term.combine == "max-min-max":
                    group = groups.setdefault((line.family, line.group), next(ids))
                else:
                    group = next(ids)
                lines.append(Line(line.latency_us, line.us_per_byte, f"{head}, its {term.name}: {line.note}", group, family))
        return tuple(lines)

    why = (
        "every rank's contribution reaches every rank: the transfers that carry one rank's contribution are a broadcast "
        "from it in the same steps, so the allreduce takes at least that broadcast's bound"
    )
    return BoundTerm("as-broadcast", 0.0, 0.0, f"{why} ({head})", LazyLines(compute), "max-min-max")


def _one_crossing_need(c: Collective, inside: frozenset[int], direction: str, parts: int) -> Fraction:
    """The fraction of size that must enter (``"in"``) or leave (``"out"``) any node set holding
    exactly the ranks ``inside`` (a part of a partition into ``parts`` parts) when a schedule moves
    data between parts in one step only: each chunk then travels straight from the part where it
    (or a contribution to it) starts to every part that needs it, one transfer per pair of parts
    (docs/bounds.md, `steps-volume`). Zero where this is no more than `_crossing_need`."""
    r, root, kind = c.num_ranks, c.root, c.kind
    others = parts - 1
    into = direction == "in"
    if kind is Kind.BROADCAST:
        return Fraction(others) if (not into and root in inside) else Fraction(0)
    if kind is Kind.REDUCE:
        return Fraction(others) if (into and root in inside) else Fraction(0)
    if kind is Kind.ALLREDUCE:
        return Fraction(others)
    if kind is Kind.ALLGATHER:
        return Fraction(others * len(inside), r) if not into else Fraction(0)
    if kind is Kind.REDUCE_SCATTER:
        return Fraction(others * len(inside), r) if into else Fraction(0)
    return Fraction(0)  # gather, scatter, alltoall: every chunk has one source and one destination


def _direct_need(c: Collective, inside: frozenset[int], direction: str) -> Fraction:
    """The fraction of size that must enter (``"in"``) or leave (``"out"``) any node set holding
    exactly the ranks ``inside`` when the whole schedule is one step: every transfer then starts
    from data a rank holds at the start (for reductions: its own contribution only), so every rank
    gets each chunk, or each contribution to it, straight from its source rank (docs/bounds.md,
    `steps-volume`, (c))."""
    r, kind = c.num_ranks, c.kind
    s = len(inside)
    out = r - s
    into = direction == "in"
    if kind is Kind.BROADCAST:
        holds_root = c.root in inside
        return Fraction(out) if (holds_root and not into) else Fraction(s) if (into and not holds_root) else Fraction(0)
    if kind is Kind.REDUCE:
        holds_root = c.root in inside
        return Fraction(out) if (holds_root and into) else Fraction(s) if (not into and not holds_root) else Fraction(0)
    if kind is Kind.ALLREDUCE:
        return Fraction(s * out)
    if kind in (Kind.ALLGATHER, Kind.REDUCE_SCATTER):
        return Fraction(s * out, r)
    return Fraction(0)  # gather, scatter, alltoall: every chunk has one source and one destination


def _steps_volume_term(topology: Topology, c: Collective, an: _Analysis, steps: int, alpha_min: float) -> BoundTerm | None:
    """For each partition of the ranks (hosts, groups behind slow links, groups by α): a step that
    moves data between parts lasts at least α_P (the smallest α of a transfer between parts) plus
    the crossing bytes of its most loaded link. With k such steps, time ≥ k·α_P + (H − k)⁺·α_min
    + (what k steps must carry between parts): with one, every part needs each chunk straight from
    its source part (a volume V₁); with any number, the cut volumes V of the parts' regions; and,
    for partitions of at most `STEPS_LP_MAX_PARTS` parts, the time-expanded LP of the machine with
    each part contracted to one rank (synth/bounds/contracted.py), for k = 1, 2, … The lines of a
    partition cover every k (the bound is the smallest of them); the term is the largest over the
    partitions (docs/bounds.md, `steps-volume`)."""
    found: list[tuple[int, tuple[int, ...], int, float, float, float, str]] = []
    linear: tuple[float, float] | None = None
    for group, x in enumerate(an.partition_regions()):
        part, name, labels, alpha_p = x.part, x.name, x.labels, x.alpha_p
        p = int(labels.max()) + 1
        if not math.isfinite(alpha_p) or x.parts is None:
            continue
        many = _region_volume(c, x.parts)  # µs per byte: crossing bytes over a part's region, any number of crossing steps
        one = 0.0  # the same with one crossing step
        direct = 0.0  # the same with one step in all
        totals = {"in": 0.0, "out": 0.0}
        for ranks, into, out_of in x.parts:
            for direction, cut in (("in", into), ("out", out_of)):
                totals[direction] += cut.bandwidth
                if cut.bandwidth > 0:
                    single = _one_crossing_need(c, ranks, direction, p)
                    one = max(one, float(single) / (cut.bandwidth * _BYTES_PER_US))
                    direct = max(direct, float(_direct_need(c, ranks, direction)) / (cut.bandwidth * _BYTES_PER_US))
        if c.kind is Kind.ALLREDUCE:  # 2(p − 1) crossing transfers per byte (`contracted`)
            for total in totals.values():
                if total > 0:
                    many = max(many, 2 * (p - 1) / (total * _BYTES_PER_US))
        one = max(one, many)
        found.append((group, part, p, alpha_p, one, many, direct, f"{p} parts ({name})"))
        latency = alpha_p + max(steps - 1, 0) * alpha_min
        if linear is None or (many, latency) > linear:
            linear = (many, latency)
    if linear is None:
        return None

    def floor(k: int, alpha_p: float) -> float:
        """k crossing steps of α_P and the other steps the H hops need, of α_min each."""
        return k * alpha_p + max(steps - k, 0) * alpha_min

    def one_crossing(alpha_p: float, slope: float, direct: float, what: str, group: int, suffix: str = "") -> list[Line]:
        """The line of one step between parts; where one step in all could be enough (H ≤ 1) and
        would carry more (``direct`` above ``slope``), two: that step alone (every chunk straight
        from its source rank), or with at least one more step of α_min."""
        if steps > 1 or alpha_min <= 0 or direct <= slope:
            return [
                Line(
                    floor(1, alpha_p),
                    slope,
                    f"{what}, one step between parts: >= {floor(1, alpha_p):g} us + {slope * 1e6:.6g} us per MB{suffix}",
                    group,
                )
            ]
        return [
            Line(alpha_p, direct, f"{what}, one step in all: >= {alpha_p:g} us + {direct * 1e6:.6g} us per MB", group),
            Line(
                alpha_p + alpha_min,
                slope,
                f"{what}, one step between parts and more in all: >= {alpha_p:g} + {alpha_min:g} us "
                f"+ {slope * 1e6:.6g} us per MB{suffix}",
                group,
            ),
        ]

    def compute() -> tuple[Line, ...]:
        lines: list[Line] = []
        spent = 0
        spec = None
        for group, part, p, alpha_p, one, many, direct, what in found:
            solved: list[tuple[int, float]] = []  # (k, β'_k) from the contracted LP
            if p <= STEPS_LP_MAX_PARTS:
                if spec is None:
                    spec = layered.flow_spec(c)
                solved, spent = _contracted_lps(an, (c.kind, c.root), part, spec, many, spent)
            if not solved:
                lines += one_crossing(alpha_p, one, direct, what, group)
                lines.append(
                    Line(
                        floor(2, alpha_p),
                        many,
                        f"{what}, two or more steps between parts: >= 2 x {alpha_p:g} us + {many * 1e6:.6g} us per MB",
                        group,
                    )
                )
                continue
            covered = 0
            for k, beta in solved:
                low = covered + 1
                covered = k
                if not math.isfinite(beta):
                    continue  # no schedule moves the data between parts in so few steps
                slope = max(beta, many, one if k == 1 else 0.0)
                counts = f"{k}" if low == k else f"{low}..{k}"
                if k == 1:
                    lines += one_crossing(alpha_p, slope, direct, what, group, " (LP)")
                    continue
                lines.append(
                    Line(
                        floor(low, alpha_p),
                        slope,
                        f"{what}, {counts} step(s) between parts: >= {low} x {alpha_p:g} us + {slope * 1e6:.6g} us per MB (LP)",
                        group,
                    )
                )
            more = covered + 1
            lines.append(
                Line(
                    floor(more, alpha_p),
                    many,
                    f"{what}, {more} or more steps between parts: >= {more} x {alpha_p:g} us + {many * 1e6:.6g} us per MB",
                    group,
                )
            )
        return tuple(lines)

    return BoundTerm(
        "steps-volume",
        linear[0],
        linear[1],
        "a step that moves data between the parts of a partition pays their smallest alpha; "
        "few such steps must carry more between parts (one: every part gets each chunk straight from its source)",
        LazyLines(compute),
        "max-min",
    )


def _root_pipeline_term(topology: Topology, c: Collective, an: _Analysis, steps: int, alpha_min: float) -> BoundTerm | None:
    """Broadcast: the root's data leaves the root's region U (egress C_U) in N ≥ 1 steps, x_j bytes
    in step j; the m = R − 1 other ranks' regions V_i (ingress C_i) hold after step k only what
    had left U before it or came from U in step k, so for every k the bandwidth part is at least
    (n + (m − 1)/m · x_k)/B with B = max(C_U, ΣC_i/m). The last step closes it: either U sends in
    it, and every rank then takes from U straight what had not left U before (x_last ≥ m·r with
    r = n − X_(last−1), so the largest x_k ≥ m·n/(m·(N − 1) + 1)), or it does not, and the schedule
    has at least N + 1 steps with some x_k ≥ n/N. Hence time ≥ the smaller of
    max(N, H)·α_min + (1 + (m − 1)/(m·(N − 1) + 1))·n/B and
    max(N + 1, H)·α_min + (1 + (m − 1)/(m·N))·n/B for some N (docs/bounds.md, `root-pipeline`)."""
    r, root = c.num_ranks, c.root
    if c.kind is not Kind.BROADCAST or r < 3:
        return None
    egress = an.egress()[root]
    others = [v for v in range(r) if v != root]
    regions = [an.ingress()[v] for v in others]
    disjoint = all(not (cut.nodes & egress.nodes) for cut in regions) and sum(len(cut.nodes) for cut in regions) == len(
        frozenset().union(*(cut.nodes for cut in regions))
    )
    total = sum(cut.bandwidth for cut in regions) if disjoint else sum(topology.rank_ingress(v) for v in others)
    m = r - 1
    rate = max(egress.bandwidth, total / m)
    if rate <= 0:
        return None
    per_byte = 1.0 / (rate * _BYTES_PER_US)
    counts = sorted({*range(1, 129), *(int(128 * 1.15**i) for i in range(1, 72))})
    lines = []
    previous = 0
    for n in counts:
        low = previous + 1
        previous = n
        span = f"{low if low == n else f'{low}..{n}'} step(s) out of the root's region"
        closing = (1 + (m - 1) / (m * (n - 1) + 1)) * per_byte
        lines.append(
            Line(
                max(low, steps) * alpha_min,
                closing,
                f"{span}, the last step among them: >= {max(low, steps)} x {alpha_min:g} us "
                f"+ (1 + {m - 1}/({m} x {n - 1} + 1)) x size over {_gbps(rate)}",
            )
        )
        lines.append(
            Line(
                max(low + 1, steps) * alpha_min,
                (1 + (m - 1) / (m * n)) * per_byte,
                f"{span}, then a step without it: >= {max(low + 1, steps)} x {alpha_min:g} us "
                f"+ (1 + {m - 1}/({m} x {n})) x size over {_gbps(rate)}",
            )
        )
    lines.append(Line(max(previous + 1, steps) * alpha_min, per_byte, f"more than {previous} steps: size over {_gbps(rate)}"))
    return BoundTerm(
        "root-pipeline",
        per_byte,
        steps * alpha_min,
        f"the root's data leaves it in N steps and every other rank still needs what had not left before the step that "
        f"sent it the most, and the last step either sends from the root to every rank what it still lacks or follows "
        f"the root's last: (1 + (R-2)/((R-1) N)) x size over {_gbps(rate)} and N + 1 steps, or "
        f"(1 + (R-2)/((R-1)(N-1) + 1)) x size and N steps",
        tuple(lines),
        "min",
    )


def _exit_pipeline_term(topology: Topology, c: Collective, an: _Analysis, alpha_min: float) -> BoundTerm | None:
    """Broadcast: for a node set U holding the root (the root's egress region, and the region of the
    root's part of every partition), the data leaves U in N crossing steps, each lasting at least
    α_U (the smallest α of a transfer through U's exit) plus its bytes over out(U), and the m groups
    outside (each other rank, or each other part of the partition) must each take in every byte
    over their regions' ingress K, a byte only after it crossed. Per N, a weighted sum of the two
    ways each block of steps is charged (`synth.bounds.pipeline`); the bound is the smallest over N
    and the largest over the sets U (docs/bounds.md, `exit-pipeline`). Reduce: the same on the
    reversed topology (a reduce schedule reversed is a broadcast no slower there), i.e. with every
    region's ingress and egress swapped and α_U that of the links entering U."""
    r, root = c.num_ranks, c.root
    if c.kind not in (Kind.BROADCAST, Kind.REDUCE) or r < 3:
        return None
    mirror = c.kind is Kind.REDUCE
    thru = an.through_alpha()
    ingress = an.egress() if mirror else an.ingress()
    into_part = {ranks: (out if mirror else into) for ranks, into, out in an.part_regions()}
    root_cut = an.ingress()[root] if mirror else an.egress()[root]
    sets: list[tuple[frozenset[int], Cut, str]] = [(frozenset({root}), root_cut, "the root's region")]
    for part, name in an.partitions():
        inside = frozenset(v for v in range(r) if part[v] == part[root])
        out_of = next((out if not mirror else into for ranks, into, out in an.part_regions() if ranks == inside), None)
        if out_of is None or len(inside) == r:
            continue
        groups = [frozenset(v for v in range(r) if part[v] == q) for q in sorted(set(part) - {part[root]})]
        sets.append((inside, out_of, f"the root's part of {len(groups) + 1} parts ({name})"))
    candidates: dict[tuple, str] = {}
    for inside, out_of, what in sets:
        if out_of.bandwidth <= 0:
            continue
        alpha_u = _crossing_alpha(topology, thru, out_of.nodes, "in" if mirror else "out")
        if not math.isfinite(alpha_u):
            continue
        outside = [v for v in range(r) if v not in inside]
        sides = [(len(outside), sum(ingress[v].bandwidth for v in outside), "every rank outside")]
        for part, name in an.partitions():  # groups: the parts outside U of any partition that U's ranks respect
            parts = [frozenset(v for v in range(r) if part[v] == q) for q in sorted(set(part))]
            if any(g & inside and not g <= inside for g in parts):
                continue
            groups = [g for g in parts if not g & inside]
            if len(groups) < len(outside) and all(g in into_part for g in groups):
                sides.append((len(groups), sum(into_part[g].bandwidth for g in groups), f"every part ({name}) outside"))
        for m, total, who in sides:
            if m < 2 or total <= 0 or total <= out_of.bandwidth:
                continue  # no geometric weights: the lines say no more than cut-latency
            key = (alpha_u, out_of.bandwidth, total, m)
            where = (
                f"{what} ({describe_nodes(topology, out_of.nodes)}, {_gbps(out_of.bandwidth)}, >= {alpha_u:g} us a crossing step)"
            )
            ends = f"{who} ({m}, {_gbps(total)} in all)"
            candidates.setdefault(key, f"from {ends} into {where}" if mirror else f"out of {where} into {ends}")
    if not candidates:
        return None
    found = list(candidates.items())

    def compute() -> tuple[Line, ...]:
        out = []
        for family, ((alpha_u, exit_bw, total, m), what) in enumerate(found):
            cu, k = 1.0 / (exit_bw * _BYTES_PER_US), 1.0 / (total * _BYTES_PER_US)
            for n_steps, latency, per_byte, note in pipeline.lines(alpha_u, alpha_min, cu, k, m):
                out.append(Line(latency, per_byte, f"{what}: {note}", n_steps, family))
        return tuple(out)

    slowest = max(found, key=lambda item: (1.0 / item[0][1], item[0][0]))[0]
    return BoundTerm(
        "exit-pipeline",
        1.0 / (slowest[1] * _BYTES_PER_US),
        slowest[0],
        (
            "the contributions enter a region holding the root in N steps that each pay the entry's alpha, and the "
            "ranks outside must have combined what enters before it enters (a broadcast reversed); the best N"
        )
        if mirror
        else (
            "the root's data leaves a region holding the root in N steps that each pay the exit's alpha, and the "
            "ranks outside spread what crossed only after it crossed; the best N"
        ),
        LazyLines(compute),
        "max-min-max",
    )


def _contracted_lps(
    an: _Analysis, key: tuple, part: tuple[int, ...], spec: layered.FlowSpec, many: float, spent: int
) -> tuple[list[tuple[int, float]], int]:
    """β'_k for k = 1, 2, … crossing steps (`STEPS_LP_COUNTS`): the time-expanded LP of the
    machine with each part contracted to one rank, while one LP has at most
    `STEPS_LP_MAX_VARIABLES` columns and all of a model's at most `STEPS_LP_BUDGET`; stops when
    β'_k comes within `LAYERED_CLOSE` of the partition's cut volumes or gains less than
    `STEPS_LP_GAIN` over the step count before (the tail line, with the cut volumes, covers the
    rest: stopping early only weakens the bound). Returns [(k, β'_k)] and the columns spent."""
    small = an.contraction(part)
    if small is None:
        return [], spent
    topo, lay = small
    cspec = contract_spec(spec, part)
    if not cspec.commodities:
        return [], spent
    out: list[tuple[int, float]] = []
    first = max(1, layered.steps_needed(cspec, lay.hops))
    for k in STEPS_LP_COUNTS:
        if k < first:
            out.append((k, math.inf))
            continue
        size = layered.lp_variables(cspec, lay, topo.num_ranks, k)
        if size > STEPS_LP_MAX_VARIABLES or spent + size > STEPS_LP_BUDGET:
            break
        spent += size
        result = an.contracted_layered((*key, part, k), topo, cspec, lay, k)
        if result is None:
            break
        previous = out[-1][1] if out else math.inf
        out.append((k, result.us_per_byte))
        if result.us_per_byte <= many * (1 + LAYERED_CLOSE):
            break  # more steps could gain at most that fraction over the cut volumes
        if result.us_per_byte >= previous * (1 - STEPS_LP_GAIN):
            break  # the LP has stopped gaining from more steps: leave the rest to the cut volumes
    return out, spent


@dataclass(frozen=True)
class Contracted:
    """The allreduce volume bound of a partition of the ranks (docs/bounds.md)."""

    us_per_byte: float
    explanation: str
    regions: tuple[Cut, ...]
    direction: str
    what: str


def rank_partitions(topology: Topology, direct: np.ndarray | None = None) -> list[tuple[tuple[int, ...], str]]:
    """Partitions of the ranks into 2 ≤ p < R parts, as (part of each rank, name): the hosts;
    for each link bandwidth b, the groups that links faster than b hold together (switches
    included): sockets behind a slow interconnect, boxes behind their NICs; and, given ``direct``
    (the smallest α of one transfer between two ranks, `LatencyFacts.direct`), for a few α
    thresholds a, the groups of ranks joined by transfers of α at most a (servers, racks,
    dragonfly groups: `ALPHA_PARTITIONS` of them, those whose transfers between groups are slowest
    against the ones inside)."""
    r = topology.num_ranks
    found: list[tuple[tuple[int, ...], str]] = []
    seen: set[tuple[int, ...]] = set()

    def add(labels: list, name: str) -> None:
        order: dict = {}
        part = tuple(order.setdefault(label, len(order)) for label in labels)
        if 1 < len(order) < r and part not in seen:
            seen.add(part)
            found.append((part, name))

    hosts = topology.hosts
    if all(h is not None for h in hosts):
        add(list(hosts), "hosts")
    for b in sorted({link.bandwidth for link in topology.links}):
        parent = list(range(topology.num_nodes))
        for link in topology.links:
            if link.bandwidth > b:
                parent[_find(parent, link.src)] = _find(parent, link.dst)
        add([_find(parent, v) for v in range(r)], f"groups joined by links faster than {b:g} GB/s")
    if direct is not None:
        for (_, labels), name in sorted(_alpha_groups(direct), key=lambda x: x[0])[:ALPHA_PARTITIONS]:
            add(list(labels), name)
    return found


#: at most this many partitions by α threshold (`rank_partitions`)
ALPHA_PARTITIONS = 4


def _alpha_groups(direct: np.ndarray) -> list[tuple[tuple[float, tuple[int, ...]], str]]:
    """Single-linkage groups of the ranks by the α of one transfer between them: for each α value
    a at which the groups change, the groups joined by transfers of α ≤ a, ranked by how much
    larger the next α value is than a (ascending key: the largest gap first)."""
    r = direct.shape[0]
    both = np.minimum(direct, direct.T)
    upper = np.triu_indices(r, 1)
    values = both[upper]
    order = np.argsort(values, kind="stable")
    parent = list(range(r))
    groups = r
    out = []
    i = 0
    while i < len(order):
        a = float(values[order[i]])
        if not math.isfinite(a):
            break
        while i < len(order) and values[order[i]] == a:
            u, v = int(upper[0][order[i]]), int(upper[1][order[i]])
            ru, rv = _find(parent, u), _find(parent, v)
            if ru != rv:
                parent[ru] = rv
                groups -= 1
            i += 1
        if groups <= 1:
            break
        if i < len(order) and 1 < groups < r:
            gap = float(values[order[i]])  # the next α value (at most the fastest between groups)
            if gap > 0:
                labels = tuple(_find(parent, v) for v in range(r))
                out.append(((-(gap / a) if a > 0 else -math.inf, labels), f"groups within {a:g} us of alpha"))
    return out


def _find(parent: list[int], x: int) -> int:
    """Union-find root, halving the path."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def contracted_volume(topology: Topology, partitions, thru: np.ndarray) -> Contracted | None:
    """The best partition volume bound of allreduce: with p parts, every byte needs at least
    2(p − 1) transfers between parts, and each enters (and leaves) the region of its receiving
    (sending) part: the smallest node set holding the part's ranks and no other rank."""
    r = topology.num_ranks
    best: Contracted | None = None
    for part, name in partitions:
        p = len(set(part))
        groups = [[v for v in range(r) if part[v] == q] for q in range(p)]
        for direction in ("in", "out"):
            topo = topology if direction == "in" else topology.reversed()
            regions = []
            for group in groups:
                others = [v for v in range(r) if part[v] != part[group[0]]]
                regions.append(min_cut_between(topo, others, group))
            total = sum(cut.bandwidth for cut in regions)
            if total <= 0:
                continue
            value = 2 * (p - 1) / (total * _BYTES_PER_US)
            if best is None or value > best.us_per_byte * (1 + 1e-12):
                verb = "receive" if direction == "in" else "send"
                explanation = (
                    f"every byte needs >= {2 * (p - 1)} transfers between the {p} parts, 2(p-1) ({name}: "
                    f"{_describe_parts(topology, groups)}); all parts together can {verb} {_gbps(total)}"
                )
                what = "between parts"
                best = Contracted(value, explanation, tuple(regions), direction, what)
    return best


def _describe_parts(topology: Topology, groups: list[list[int]]) -> str:
    shown = " | ".join(",".join(topology.node_name(v) for v in g[:2]) + (",..." if len(g) > 2 else "") for g in groups[:3])
    return shown + (" | ..." if len(groups) > 3 else "")


def bound_model(
    topology: Topology,
    kind: Kind | str,
    root: int | None = None,
    *,
    model: str = "step",
    lp_max_variables: int = LP_MAX_VARIABLES,
    solver: str = "highs",
    alpha: float | None = None,
    beta: float | None = None,
) -> BoundModel:
    """The lower bounds of ``kind`` (rooted at ``root``, default 0 for rooted collectives) on
    ``topology``, for any size; cached on the topology object.

    ``model`` is ``"step"`` (docs/formats.md, 'Step-synchronous cost'), ``"event"`` or
    ``"one-port"`` (the textbook model of synth.simulate.oneport, with ``alpha`` µs and ``beta`` µs
    per byte for every message, by default the smallest the topology allows; they apply to it
    only). The alltoall multicommodity-flow LP is solved when it has at most ``lp_max_variables``
    variables, with ``solver`` ``"highs"`` (default; CBC if HiGHS fails) or ``"cbc"``.
    """
    if model not in MODELS:
        raise ValueError(f"unknown cost model {model!r} (expected one of {', '.join(MODELS)})")
    for name, value in (("alpha", alpha), ("beta", beta)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    if model != "one-port":
        alpha = beta = None
    collective = Collective(parse_kind(kind) if isinstance(kind, str) else Kind(kind), topology.num_ranks, 1, root)
    key = (collective.kind, collective.root, model, lp_max_variables, solver, alpha, beta)
    cache = topology.__dict__.setdefault("_bound_models", {})
    if key not in cache:
        if model == "one-port":
            cache[key] = _build_one_port(topology, collective, alpha, beta)
        else:
            cache[key] = _build(topology, collective, model, lp_max_variables, solver)
    return cache[key]


def lower_bounds(
    topology: Topology,
    kind: Kind | str,
    size: int,
    root: int | None = None,
    **options: Any,
) -> BoundReport:
    """Every lower bound of ``kind`` on ``topology`` at ``size`` bytes (see `bound_model`)."""
    return bound_model(topology, kind, root, **options).at(size)


def _build_one_port(topology: Topology, c: Collective, alpha: float | None, beta: float | None) -> BoundModel:
    """The one-port model's bounds (synth/bounds/oneport.py, docs/bounds.md)."""
    r = c.num_ranks
    base = dict(
        topology=topology.name,
        kind=c.kind,
        root=c.root,
        num_ranks=r,
        model="one-port",
        busbw_factor=c.busbw_factor(),
    )
    if r < 2:
        return BoundModel(terms=(), notes=("a single rank needs no communication",), **base)
    an = _analysis(topology)
    facts = an.latency()
    sources, sinks = _sources_and_sinks(c)
    steps = int(facts.hops[sources][:, sinks].max())
    a = facts.min_transfer_alpha if alpha is None else float(alpha)
    floor = steps * a
    terms: list[BoundTerm] = []
    needs = _needs(c)
    receive_beta, send_beta = oneport.port_betas(topology, beta)
    for name, need, betas, verb in (
        ("ingress", needs.receive, receive_beta, "receive"),
        ("egress", needs.send, send_beta, "send"),
    ):
        term = oneport.port_term(topology, need, betas, steps, a, verb)
        if term is not None:
            terms.append(BoundTerm(name, term[0], floor, term[1]))
    if c.kind is Kind.ALLREDUCE:
        gossip = 2 * (r - 1)
        for name, betas, verb in (("total-ingress", receive_beta, "receive"), ("total-egress", send_beta, "send")):
            rate = float(np.sum(1.0 / betas))  # bytes per µs all ports together
            text = (
                f"every byte needs >= {gossip} rank-to-rank transfers, 2(R-1); all {r} {verb} ports together "
                f"move {rate / _BYTES_PER_US:.6g} GB/s (1/beta each)"
            )
            if floor > 0:
                text += f"; + {steps} step{'s' if steps > 1 else ''} x alpha {a:g} us"
            terms.append(BoundTerm(name, gossip / rate, floor, text))
    doubling = oneport.log2_ceil(r)
    latency = max(doubling, steps) * a
    why = (
        f"no rank's data grows more than (1 + K)-fold in a step whose ports handle K messages (K x alpha): "
        f">= ceil(log2 {r}) = {doubling} x alpha {a:g} us"
    )
    if steps > doubling:
        why += f"; and >= {steps} steps (hops) of alpha each"
    if alpha is None:
        chain = float(facts.alpha[sources][:, sinks].max())
        if chain > latency:
            far = divmod(int(facts.alpha[sources][:, sinks].argmax()), len(sinks))
            latency = chain
            why = (
                f"data from {topology.node_name(sources[far[0]])} reaches {topology.node_name(sinks[far[1]])} "
                f"only after >= {chain:g} us of link latency"
            )
    terms.append(BoundTerm("latency", 0.0, latency, why))
    notes = (
        f"one-port model: alpha {a:g} us"
        + (" (given)" if alpha is not None else " (the smallest of any message)")
        + (f", beta {beta:g} us/B (given)" if beta is not None else ", beta from each rank's widest path"),
    )
    return BoundModel(terms=tuple(terms), notes=notes, step_floor_us=floor, **base)


def _build(topology: Topology, c: Collective, model: str, lp_max_variables: int, solver: str) -> BoundModel:
    r = c.num_ranks
    base = dict(
        topology=topology.name,
        kind=c.kind,
        root=c.root,
        num_ranks=r,
        model=model,
        busbw_factor=c.busbw_factor(),
    )
    if r < 2:
        return BoundModel(terms=(), notes=("a single rank needs no communication",), **base)
    an = _analysis(topology)
    facts = an.latency()
    sources, sinks = _sources_and_sinks(c)

    # the latency bound, and the per-step floor the step-synchronous model adds to bandwidth bounds
    sub_alpha = facts.alpha[sources][:, sinks]
    far = divmod(int(sub_alpha.argmax()), len(sinks))
    latency = float(sub_alpha.max())
    lat_src, lat_dst = sources[far[0]], sinks[far[1]]
    steps = int(facts.hops[sources][:, sinks].max())
    floor = steps * facts.min_transfer_alpha if model == "step" else 0.0
    plural = "s" if steps > 1 else ""
    floor_text = f"; + {steps} step{plural} x {facts.min_transfer_alpha:g} us (smallest transfer alpha)" if floor > 0 else ""

    terms: list[BoundTerm] = []
    notes: list[str] = []
    #: (us_per_byte, smallest α of a transfer that crosses the cut, what the cut is, the cut's
    #: links) of every "D over C" bound through one cut, for the cut-latency and crossing-steps bounds
    crossings: list[tuple[float, float, str, np.ndarray | None]] = []
    thru = an.through_alpha()

    def add(name: str, us_per_byte: float, text: str) -> None:
        terms.append(BoundTerm(name, us_per_byte, floor, text + floor_text))

    def crossing(us_per_byte: float, cuts: list[Cut], direction: str, what: str) -> None:
        alpha = min(_crossing_alpha(topology, thru, cut.nodes, direction) for cut in cuts)
        mask = _cut_mask(topology, cuts[0].nodes, direction) if len(cuts) == 1 else None
        crossings.append((us_per_byte, alpha, what, mask))

    needs = _needs(c)
    ingress = _per_rank(topology, needs.receive, an.ingress(), "receive", "reach")
    if ingress:
        add("ingress", *ingress[:2])
        for value, cut, who in ingress[2]:
            crossing(value, [cut], "in", f"into {who}")
    egress = _per_rank(topology, needs.send, an.egress(), "send", "leave")
    if egress:
        add("egress", *egress[:2])
        for value, cut, who in egress[2]:
            crossing(value, [cut], "out", f"out of {who}")

    kind = c.kind
    if kind in (Kind.ALLGATHER, Kind.REDUCE_SCATTER, Kind.GATHER, Kind.SCATTER):
        reverse = kind in (Kind.REDUCE_SCATTER, Kind.SCATTER)
        rooted = c.root if kind in (Kind.GATHER, Kind.SCATTER) else None
        rc = an.ratio_cut(reverse, rooted)
        pieces = Fraction(rc.outside_ranks, r)
        where = describe_nodes(topology, rc.cut.nodes)
        if reverse:
            text = f"contributions for the {_frac(pieces)} owned outside {where} must leave it over {_gbps(rc.cut.bandwidth)}"
        else:
            text = f"the {_frac(pieces)} held outside {where} must enter it over {_gbps(rc.cut.bandwidth)}"
        add("cut", rc.ratio / (r * _BYTES_PER_US), text)
        side = ("out", "out of") if reverse else ("in", "into")
        crossing(rc.ratio / (r * _BYTES_PER_US), [rc.cut], side[0], f"{side[1]} {where}")
    elif kind in (Kind.BROADCAST, Kind.REDUCE):
        pc = an.pair_cut(("from" if kind is Kind.BROADCAST else "to", c.root))
        assert pc is not None
        a, b = topology.node_name(pc.source), topology.node_name(pc.sink)
        add(
            "flow", 1.0 / (pc.bandwidth * _BYTES_PER_US), f"all of size must flow from {a} to {b}; max-flow {_gbps(pc.bandwidth)}"
        )
        crossing(1.0 / (pc.bandwidth * _BYTES_PER_US), [pc.cut], "in", f"into {describe_nodes(topology, pc.cut.nodes)}")
    elif kind is Kind.ALLREDUCE:
        total_in = sum(cut.bandwidth for cut in an.ingress())
        total_out = sum(cut.bandwidth for cut in an.egress())
        gossip = 2 * (r - 1)
        add(
            "total-ingress",
            gossip / (total_in * _BYTES_PER_US),
            f"every byte needs >= {gossip} rank-to-rank transfers, 2(R-1); all ranks together can receive {_gbps(total_in)}",
        )
        crossing(gossip / (total_in * _BYTES_PER_US), list(an.ingress()), "in", "into the receiving ranks")
        add(
            "total-egress",
            gossip / (total_out * _BYTES_PER_US),
            f"every byte needs >= {gossip} rank-to-rank transfers, 2(R-1); all ranks together can send {_gbps(total_out)}",
        )
        crossing(gossip / (total_out * _BYTES_PER_US), list(an.egress()), "out", "out of the sending ranks")
        pc = an.pair_cut(("both", 0))
        assert pc is not None
        where = describe_nodes(topology, pc.cut.nodes)
        add(
            "cut",
            1.0 / (pc.bandwidth * _BYTES_PER_US),
            f"every byte must enter {where} over {_gbps(pc.bandwidth)} (a minimum cut between ranks, "
            f"from {topology.node_name(pc.source)} to {topology.node_name(pc.sink)})",
        )
        crossing(1.0 / (pc.bandwidth * _BYTES_PER_US), [pc.cut], "in", f"into {where}")
        contracted = an.contracted()
        if contracted is not None and contracted.us_per_byte > max(t.us_per_byte for t in terms) * (1 + 1e-12):
            add("contracted", contracted.us_per_byte, contracted.explanation)
            crossing(contracted.us_per_byte, list(contracted.regions), contracted.direction, contracted.what)
    elif kind is Kind.ALLTOALL:
        ac = an.alltoall_cut()
        if ac is not None:
            where = describe_nodes(topology, ac.cut.nodes)
            inside = ac.inside_ranks
            add(
                "cut",
                ac.ratio / (r * _BYTES_PER_US),
                f"{inside}x{r - inside} pieces of size/{r} must enter {where} over {_gbps(ac.cut.bandwidth)} "
                f"(best of {ac.candidates} candidate cuts)",
            )
            crossing(ac.ratio / (r * _BYTES_PER_US), [ac.cut], "in", f"into {where}")
        variables = a2a.lp_size(topology) + 1
        if variables <= lp_max_variables:
            lp = an.alltoall_lp(solver)
            if lp is not None:
                add(
                    "multicommodity-flow",
                    lp.ratio / (r * _BYTES_PER_US),
                    f"exact routing LP ({lp.solver}, {lp.variables} variables), certified by its dual",
                )
            else:
                notes.append("the alltoall multicommodity-flow LP did not solve to optimality; left out")
        else:
            notes.append(
                f"alltoall multicommodity-flow LP skipped: {variables} variables > {lp_max_variables} "
                "(lp_max_variables); the cut bounds stand"
            )

    if model == "step":
        for ranks, into, out_of in an.part_regions():
            where = describe_nodes(topology, into.nodes)
            for direction, cut in (("in", into), ("out", out_of)):
                need = _crossing_need(c, ranks, direction)
                if need > 0 and cut.bandwidth > 0:
                    crossing(
                        float(need) / (cut.bandwidth * _BYTES_PER_US),
                        [cut],
                        direction,
                        f"{'into' if direction == 'in' else 'out of'} {where}",
                    )
        bandwidth = max((t.us_per_byte for t in terms), default=0.0)
        cut_latency = _cut_latency_term(crossings, steps, facts.min_transfer_alpha)
        if cut_latency is not None:
            terms.append(cut_latency)
        steps_volume = _steps_volume_term(topology, c, an, steps, facts.min_transfer_alpha)
        if steps_volume is not None:
            terms.append(steps_volume)
        root_pipeline = _root_pipeline_term(topology, c, an, steps, facts.min_transfer_alpha)
        if root_pipeline is not None:
            terms.append(root_pipeline)
        exit_pipeline = _exit_pipeline_term(topology, c, an, facts.min_transfer_alpha)
        if exit_pipeline is not None:
            terms.append(exit_pipeline)
        crossing_phases = _crossing_phases_term(c, an, facts.min_transfer_alpha)
        if crossing_phases is not None:
            terms.append(crossing_phases)
        if r <= LAYERED_MAX_RANKS:
            terms.append(_time_expanded_term(topology, c, an, steps, facts.min_transfer_alpha, bandwidth))
            crossing_steps = _crossing_steps_term(topology, c, an, steps, facts.min_transfer_alpha, crossings)
            if crossing_steps is not None:
                terms.append(crossing_steps)
        else:
            notes.append(
                f"time-expanded and crossing-steps LPs skipped: {r} ranks > {LAYERED_MAX_RANKS} "
                "(their cost grows with ranks^2 x steps); the closed-form bounds stand"
            )
        # last, so that where they tie the allreduce's own bound is named; the reduce bound to a
        # rank holds as well (`_as_broadcast_term`) but is not computed: it bound no allreduce of
        # the midsize benchmark, and on machines whose links differ by direction it doubled the cost
        if kind is Kind.ALLREDUCE:
            terms.append(_as_broadcast_term(topology, an, lp_max_variables, solver))

    terms.append(
        BoundTerm(
            "latency",
            0.0,
            latency,
            f"data from {topology.node_name(lat_src)} reaches {topology.node_name(lat_dst)} "
            f"only after >= {latency:g} us of link latency (and at least {int(facts.hops[lat_src, lat_dst])} transfer(s))",
        )
    )
    return BoundModel(terms=tuple(terms), notes=tuple(notes), step_floor_us=floor, **base)


__all__ = [
    "LP_MAX_VARIABLES",
    "MODELS",
    "BoundModel",
    "BoundReport",
    "BoundTerm",
    "LazyLines",
    "Line",
    "NamedBound",
    "bound_model",
    "describe_nodes",
    "lower_bounds",
]
