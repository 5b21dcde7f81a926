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

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from synth.bounds import alltoall as a2a
from synth.bounds.cuts import Cut, PairCut, RatioCut, max_ratio_cut, min_pair_cut, rank_ingress_cuts
from synth.bounds.latency import LatencyFacts, latency_facts
from synth.collective import Collective, Kind, parse_kind
from synth.topology import Topology
from synth.units import bandwidth_gbps

MODELS = ("step", "event")

#: Bytes per µs in one GB/s.
_BYTES_PER_US = 1e3

#: Largest alltoall LP (variables) solved by default: every built-in up to 64 ranks; the 128-rank
#: fat-tree (about 100k variables) is left to the cut bounds.
LP_MAX_VARIABLES = 30_000


# ============================================================================ results
@dataclass(frozen=True)
class BoundTerm:
    """One lower bound: ``time_us(size) = us_per_byte × size + latency_us``."""

    name: str
    us_per_byte: float
    latency_us: float
    explanation: str

    def time_us(self, size: float) -> float:
        return self.us_per_byte * size + self.latency_us


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
            evaluated.append(NamedBound(t.name, time, t.explanation, algbw, algbw * self.busbw_factor))
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
    """max over ranks of need / effective bandwidth, as (us_per_byte, explanation) or None."""
    best = None
    for v, (need, cut) in enumerate(zip(needs, cuts)):
        if need == 0:
            continue
        value = float(need) / (cut.bandwidth * _BYTES_PER_US)
        if best is None or value > best[0] * (1 + 1e-12):
            best = (value, v, need, cut)
    if best is None:
        return None
    value, v, need, cut = best
    own = topology.rank_ingress(v) if prep == "reach" else topology.rank_egress(v)
    where = "" if math.isclose(cut.bandwidth, own, rel_tol=1e-12) else f" (of its {_gbps(own)} links)"
    text = f"rank {topology.node_name(v)} must {verb} {_frac(need)}; at most {_gbps(cut.bandwidth)}{where} can {prep} it"
    return value, text


def _sources_and_sinks(c: Collective) -> tuple[list[int], list[int]]:
    """Ranks data must travel from, and to, for the latency and step-count bounds."""
    r, every = c.num_ranks, list(range(c.num_ranks))
    if c.kind in (Kind.BROADCAST, Kind.SCATTER):
        return [c.root], [v for v in every if v != c.root]
    if c.kind in (Kind.GATHER, Kind.REDUCE):
        return [v for v in every if v != c.root], [c.root]
    return every, every if r > 1 else []


def bound_model(
    topology: Topology,
    kind: Kind | str,
    root: int | None = None,
    *,
    model: str = "step",
    lp_max_variables: int = LP_MAX_VARIABLES,
    solver: str = "highs",
) -> BoundModel:
    """The lower bounds of ``kind`` (rooted at ``root``, default 0 for rooted collectives) on
    ``topology``, for any size; cached on the topology object.

    ``model`` is ``"step"`` (docs/formats.md, 'Step-synchronous cost') or ``"event"``. The alltoall
    multicommodity-flow LP is solved when it has at most ``lp_max_variables`` variables, with
    ``solver`` ``"highs"`` (default; CBC if HiGHS fails) or ``"cbc"``.
    """
    if model not in MODELS:
        raise ValueError(f"unknown cost model {model!r} (expected one of {', '.join(MODELS)})")
    collective = Collective(parse_kind(kind) if isinstance(kind, str) else Kind(kind), topology.num_ranks, 1, root)
    key = (collective.kind, collective.root, model, lp_max_variables, solver)
    cache = topology.__dict__.setdefault("_bound_models", {})
    if key not in cache:
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

    def add(name: str, us_per_byte: float, text: str) -> None:
        terms.append(BoundTerm(name, us_per_byte, floor, text + floor_text))

    needs = _needs(c)
    ingress = _per_rank(topology, needs.receive, an.ingress(), "receive", "reach")
    if ingress:
        add("ingress", *ingress)
    egress = _per_rank(topology, needs.send, an.egress(), "send", "leave")
    if egress:
        add("egress", *egress)

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
    elif kind in (Kind.BROADCAST, Kind.REDUCE):
        pc = an.pair_cut(("from" if kind is Kind.BROADCAST else "to", c.root))
        assert pc is not None
        a, b = topology.node_name(pc.source), topology.node_name(pc.sink)
        add(
            "flow", 1.0 / (pc.bandwidth * _BYTES_PER_US), f"all of size must flow from {a} to {b}; max-flow {_gbps(pc.bandwidth)}"
        )
    elif kind is Kind.ALLREDUCE:
        total_in = sum(cut.bandwidth for cut in an.ingress())
        total_out = sum(cut.bandwidth for cut in an.egress())
        gossip = 2 * (r - 1)
        add(
            "total-ingress",
            gossip / (total_in * _BYTES_PER_US),
            f"every byte needs >= {gossip} rank-to-rank transfers, 2(R-1); all ranks together can receive {_gbps(total_in)}",
        )
        add(
            "total-egress",
            gossip / (total_out * _BYTES_PER_US),
            f"every byte needs >= {gossip} rank-to-rank transfers, 2(R-1); all ranks together can send {_gbps(total_out)}",
        )
        pc = an.pair_cut(("both", 0))
        assert pc is not None
        where = describe_nodes(topology, pc.cut.nodes)
        add(
            "cut",
            1.0 / (pc.bandwidth * _BYTES_PER_US),
            f"every byte must enter {where} over {_gbps(pc.bandwidth)} (a minimum cut between ranks, "
            f"from {topology.node_name(pc.source)} to {topology.node_name(pc.sink)})",
        )
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
    "NamedBound",
    "bound_model",
    "describe_nodes",
    "lower_bounds",
]
