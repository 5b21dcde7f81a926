"""Cut bounds computed with max-flows: per-rank effective ingress, the exact allgather cut bound
(maximum over every cut, by parametric max-flow), and pairwise minimum cuts.

Notation (docs/bounds.md): V is every node (ranks and switches), V_r the ranks, R = |V_r|. For a
set S of nodes, in(S) is the total bandwidth (GB/s) of the links entering S. Switches forward data
but neither hold nor produce it, so only ranks are sources and destinations; a set S may contain
switches as well as ranks.

Everything here works on one orientation of the topology; the egress and reduce-scatter versions
are the same computations on `Topology.reversed()`, where in(S) becomes out(S).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from synth.bounds.maxflow import FlowNetwork
from synth.topology import Topology

INF = float("inf")

#: Relative slack when deciding that a flow reached its target: a float round-off never makes a
#: satisfied cut condition look violated (which would only cost an extra iteration) and never the
#: other way round by more than this (which could only make the bound smaller, never larger).
FLOW_SLACK = 1e-9


@dataclass(frozen=True)
class Cut:
    """A set of nodes (the side that data must enter) and the bandwidth of the links entering it."""

    nodes: frozenset[int]
    bandwidth: float

    def ranks(self, num_ranks: int) -> list[int]:
        return sorted(v for v in self.nodes if v < num_ranks)


def in_bandwidth(topology: Topology, nodes: Iterable[int]) -> float:
    """Total bandwidth (GB/s) of the links entering ``nodes`` from outside."""
    inside = set(nodes)
    return float(sum(link.bandwidth for link in topology.links if link.dst in inside and link.src not in inside))


def _link_arcs(topology: Topology) -> list[tuple[int, int]]:
    return [(link.src, link.dst) for link in topology.links]


def _bandwidths(topology: Topology) -> list[float]:
    return [float(link.bandwidth) for link in topology.links]


# ============================================================================ per-rank ingress
def rank_ingress_cuts(topology: Topology) -> list[Cut]:
    """For each rank r, the smallest cut separating r from every other rank: the most bandwidth
    through which data from the other ranks can reach r (the max-flow from all other ranks to r).

    It is at most the bandwidth of r's own in-links, and smaller when some of them lead from a part
    of the machine no other rank's data can reach faster (a NIC that leads off the box, a slow
    shared uplink)."""
    r_count, n = topology.num_ranks, topology.num_nodes
    if r_count < 2:
        return [Cut(frozenset({r}), INF) for r in range(r_count)]
    source = n
    arcs = _link_arcs(topology) + [(source, v) for v in range(r_count)]
    net = FlowNetwork(n + 1, arcs)
    bw = _bandwidths(topology)
    cuts = []
    for r in range(r_count):
        caps = bw + [0.0 if v == r else INF for v in range(r_count)]
        own = topology.rank_ingress(r)
        # the flow cannot exceed r's own links; once it reaches them, {r} is a minimum cut (a
        # flow short of them by 1e-12 relative reports a bandwidth larger by as much: a bound
        # smaller by as much, never larger)
        result = net.max_flow(caps, source, r, limit=own * (1.0 - FLOW_SLACK * 1e-3))
        if result.source_side is None:
            cuts.append(Cut(frozenset({r}), own))
            continue
        sink_side = frozenset(range(n)) - result.source_side
        cuts.append(Cut(sink_side, result.value))
    return cuts


# ============================================================================ exact allgather cut
@dataclass(frozen=True)
class RatioCut:
    """The largest ratio |V_r \\ S| / in(S) over the cuts S that contain one of the given sink
    ranks (and leave a rank outside), with the cut that attains it."""

    ratio: float  # pieces per GB/s
    cut: Cut
    outside_ranks: int
    max_flows: int  # how many max-flow problems were solved


def _ratio(topology: Topology, nodes: frozenset[int], bandwidth: float) -> tuple[float, int]:
    outside = topology.num_ranks - sum(1 for v in nodes if v < topology.num_ranks)
    return (outside / bandwidth if bandwidth > 0 else INF), outside


def max_ratio_cut(topology: Topology, sinks: Sequence[int], start: Cut) -> RatioCut:
    """Maximise ρ(S) = |V_r \\ S| / in(S) over node sets S containing at least one rank of ``sinks``
    and not every rank, without enumerating the sets.

    For a trial value λ, give every rank an arc of capacity 1 from a super-source and every link a
    capacity of λ × its bandwidth. A cut separating the super-source from a rank u then costs
    |V_r ∩ S| + λ·in(S), where S is its sink side (S ∋ u), so

        every S ∋ u has ρ(S) ≤ λ   ⟺   max-flow(super-source → u) ≥ R.

    (This is ForestColl's test.) Rather than bisect on λ, each failing test yields a minimum cut S
    whose ratio is larger than λ; λ jumps to it (a Dinkelbach step, which converges in a few
    steps). The max-flow is nondecreasing in λ, so a rank that passed stays passed when λ grows:
    one pass over the sinks suffices, about |sinks| + (number of jumps) max-flows in all. And a
    sink that passed covers every cut holding it, so it then feeds later sinks without limit.

    ``start`` is any valid cut (its ratio is the first λ); the result's cut is the binding one.
    """
    r_count, n = topology.num_ranks, topology.num_nodes
    start_ratio, start_outside = _ratio(topology, start.nodes, start.bandwidth)
    best = RatioCut(start_ratio, start, start_outside, 0)
    if r_count < 2:
        return best
    source = n
    arcs = _link_arcs(topology) + [(source, v) for v in range(r_count)]
    net = FlowNetwork(n + 1, arcs)
    bw = _bandwidths(topology)
    unit = [1.0] * r_count
    target = r_count * (1.0 - FLOW_SLACK)
    lam = start_ratio
    flows = 0
    for u in _near_first(topology, sinks):
        while True:
            caps = [lam * b for b in bw] + unit
            result = net.max_flow(caps, source, u, limit=target)
            flows += 1
            if result.source_side is None or result.value >= target:
                break
            sink_side = frozenset(range(n)) - result.source_side
            bandwidth = in_bandwidth(topology, sink_side)
            ratio, outside = _ratio(topology, sink_side, bandwidth)
            if ratio <= lam * (1.0 + 1e-12):
                break  # a float tie: this cut is no better than the one we have
            lam = ratio
            best = RatioCut(ratio, Cut(sink_side, bandwidth), outside, flows)
        # every cut holding u is now known to be no worse than λ (and stays so as λ grows), so
        # later sinks need only the cuts without u: u joins the source with unlimited supply,
        # which gives their flows short, wide augmenting paths (Hao and Orlin's sink sequence)
        unit[u] = INF
    return RatioCut(best.ratio, best.cut, best.outside_ranks, flows)


def _near_first(topology: Topology, sinks: Sequence[int]) -> list[int]:
    """The sinks in breadth-first order over the (undirected) links from the first one, so each
    sink is close to those already checked."""
    wanted = set(sinks)
    if len(wanted) <= 1:
        return list(sinks)
    neighbours: list[list[int]] = [[] for _ in range(topology.num_nodes)]
    for link in topology.links:
        neighbours[link.src].append(link.dst)
        neighbours[link.dst].append(link.src)
    first = sinks[0]
    seen, order, queue = {first}, [], [first]
    for v in queue:
        if v in wanted:
            order.append(v)
        for w in sorted(neighbours[v]):
            if w not in seen:
                seen.add(w)
                queue.append(w)
    order += [v for v in sinks if v not in seen]  # unreachable ones (not in a valid topology)
    return order


# ============================================================================ pairwise min cuts
@dataclass(frozen=True)
class PairCut:
    """The smallest max-flow between a source rank and a sink rank, over the pairs asked for."""

    bandwidth: float
    source: int
    sink: int
    cut: Cut  # the sink side of a minimum cut of that pair
    max_flows: int


def min_pair_cut(topology: Topology, pairs: Iterable[tuple[int, int]]) -> PairCut | None:
    """The pair (a, b) with the smallest max-flow from rank a to rank b, and its minimum cut.
    None when there are no pairs."""
    n = topology.num_nodes
    net = FlowNetwork(n, _link_arcs(topology))
    bw = _bandwidths(topology)
    best: PairCut | None = None
    count = 0
    for a, b in pairs:
        limit = best.bandwidth if best is not None else None
        result = net.max_flow(bw, a, b, limit=limit)
        count += 1
        if result.source_side is None:
            continue  # at least as large as the best so far
        if best is None or result.value < best.bandwidth:
            sink_side = frozenset(range(n)) - result.source_side
            best = PairCut(result.value, a, b, Cut(sink_side, result.value), count)
    if best is None:
        return None
    return PairCut(best.bandwidth, best.source, best.sink, best.cut, count)


def min_cut_between(topology: Topology, outside: Iterable[int], inside: Iterable[int]) -> Cut:
    """The set S with the smallest in(S) that contains every node of ``inside`` and none of
    ``outside`` (one max-flow from a super-source over ``outside`` to a super-sink over ``inside``)."""
    n = topology.num_nodes
    source, sink = n, n + 1
    outside, inside = list(outside), list(inside)
    arcs = _link_arcs(topology) + [(source, v) for v in outside] + [(v, sink) for v in inside]
    caps = _bandwidths(topology) + [INF] * (len(outside) + len(inside))
    result = FlowNetwork(n + 2, arcs).max_flow(caps, source, sink)
    assert result.source_side is not None
    nodes = frozenset(range(n)) - result.source_side
    return Cut(nodes, result.value)
