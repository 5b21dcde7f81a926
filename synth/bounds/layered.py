"""The time-expanded LP bound of the step-synchronous model: for each step count T, a lower bound
on the time of any schedule with exactly T non-empty steps.

A schedule of T non-empty steps costs at least Σ_j (α_min + m_j), where m_j is the largest
B_ℓ/bw_ℓ of step j (the step lemma of docs/bounds.md). The LP below is a relaxation of "which
bytes cross which link in which step", laid out in T layers (steps), so its optimum β_T is a lower
bound on Σ_j m_j per byte of size, and

    time ≥ T·α_min + β_T·size       for every schedule of exactly T steps.

Everything is normalised to size = 1 byte; bandwidths are in GB/s, so the LP's objective is in
µs per kB and β_T (µs per byte) is the optimum divided by 10³.

Variables, per layer j = 1..T:

- ``G[u, v, j]``: bytes sent by rank u to rank v in step j (over any switch-only paths), for the
  ordered rank pairs joined by a switch-only path;
- ``φ[u, ℓ, j]``: how those bytes of rank u are routed: a flow out of u over u's own links and
  links leaving switches, arriving at each rank v as ``G[u, v, j]`` (a rank other than u only
  receives: switches forward, ranks do not, within one step);
- ``m[j]``: ``Σ_u φ[u, ℓ, j] ≤ bw_ℓ · m[j]`` on every link;
- ``f[k, ·]``: for each commodity k (below), a flow in the time-expanded rank graph: from a rank at
  time j−1 to a rank at time j along a pair (u, v) (a transfer of step j) or by staying (holding
  data costs nothing), from its supplies at time 0 to its demands at time T.

Commodities and how they share the pairs' bytes (size normalised to 1, c = 1/R):

- allgather: per destination d, c from every other rank to d; ``f[d] ≤ G`` for every d (the chains
  that bring d its chunks carry distinct chunks, but chains to different destinations may share
  transfers);
- broadcast: per destination d, 1 from the root to d; ``f[d] ≤ G``;
- gather, scatter, alltoall: the chunks of different destinations are different, so one commodity
  per destination with ``Σ_d f[d] ≤ G`` (gather and scatter need one commodity in all);
- reduce-scatter: per source s, c of s's contribution to the owner of every other piece;
  ``f[s] ≤ G`` (partial values carry several contributions at once: no sum over sources);
- reduce: per source s, 1 from s to the root; ``f[s] ≤ G``;
- allreduce: per ordered pair (s, d), 1 from s to d; ``f[s, d] ≤ G``; and every chunk needs at
  least 2(p−1) transfers between the parts of any partition of the ranks into p parts (2(R−1) for
  the partition into single ranks; docs/bounds.md), so ``Σ G`` over pairs in different parts is
  at least 2(p−1).

docs/bounds.md proves that every schedule of T steps gives a feasible point of this LP with
``Σ m[j]`` at most its Σ_j m_j.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from synth.bounds.lp import SparseLP
from synth.collective import Collective, Kind
from synth.topology import Topology

#: bytes per µs in one GB/s
_BYTES_PER_US = 1e3


@dataclass(frozen=True)
class Commodity:
    """Amounts (fractions of size) that must move from ``supply`` ranks at the start to ``demand``
    ranks at the end."""

    supply: tuple[tuple[int, float], ...]
    demand: tuple[tuple[int, float], ...]

    @property
    def total(self) -> float:
        return sum(a for _, a in self.supply)


@dataclass(frozen=True)
class FlowSpec:
    """The commodities of a collective; ``groups``: sets of commodities whose *sum* a pair's bytes
    must carry (every other commodity is alone in its group); ``volumes``: (part of each rank,
    least total bytes between different parts)."""

    commodities: tuple[Commodity, ...]
    groups: tuple[tuple[int, ...], ...]
    volumes: tuple[tuple[tuple[int, ...], float], ...] = ()


def flow_spec(c: Collective, partitions: Sequence[tuple[int, ...]] = ()) -> FlowSpec:
    """The LP's commodities for collective ``c`` (size normalised to 1). ``partitions`` (the part of
    each rank, for allreduce's volume rows) may be empty."""
    r, root, kind = c.num_ranks, c.root, c.kind
    piece = 1.0 / r
    every = range(r)
    if kind is Kind.ALLGATHER:
        ks = [Commodity(tuple((s, piece) for s in every if s != d), ((d, (r - 1) * piece),)) for d in every]
        return FlowSpec(tuple(ks), tuple((i,) for i in range(len(ks))))
    if kind is Kind.REDUCE_SCATTER:
        ks = [Commodity(((s, (r - 1) * piece),), tuple((p, piece) for p in every if p != s)) for s in every]
        return FlowSpec(tuple(ks), tuple((i,) for i in range(len(ks))))
    if kind is Kind.BROADCAST:
        ks = [Commodity(((root, 1.0),), ((d, 1.0),)) for d in every if d != root]
        return FlowSpec(tuple(ks), tuple((i,) for i in range(len(ks))))
    if kind is Kind.REDUCE:
        ks = [Commodity(((s, 1.0),), ((root, 1.0),)) for s in every if s != root]
        return FlowSpec(tuple(ks), tuple((i,) for i in range(len(ks))))
    if kind is Kind.GATHER:
        k = Commodity(tuple((s, piece) for s in every if s != root), ((root, (r - 1) * piece),))
        return FlowSpec((k,), ((0,),))
    if kind is Kind.SCATTER:
        k = Commodity(((root, (r - 1) * piece),), tuple((d, piece) for d in every if d != root))
        return FlowSpec((k,), ((0,),))
    if kind is Kind.ALLTOALL:
        ks = [Commodity(tuple((s, piece) for s in every if s != d), ((d, (r - 1) * piece),)) for d in every]
        return FlowSpec(tuple(ks), (tuple(range(len(ks))),))
    if kind is Kind.ALLREDUCE:
        ks = [Commodity(((s, 1.0),), ((d, 1.0),)) for s in every for d in every if s != d]
        volumes = [(tuple(range(r)), 2.0 * (r - 1))]
        for part in partitions:
            parts = len(set(part))
            if 1 < parts < r:
                volumes.append((tuple(part), 2.0 * (parts - 1)))
        return FlowSpec(tuple(ks), tuple((i,) for i in range(len(ks))), tuple(volumes))
    raise ValueError(kind)


@dataclass(frozen=True)
class Layout:
    """The size-independent structure the LPs share: rank pairs joined by a switch-only path,
    each source rank's routing arcs, and hop distances."""

    pairs: np.ndarray  # [P, 2] (u, v)
    pair_index: dict[tuple[int, int], int]
    route_src: np.ndarray  # [A] the source rank of each routing arc
    route_link: np.ndarray  # [A] the link id of each routing arc
    hops: np.ndarray  # [R, R] rank-graph hop distances


def layout(topology: Topology, direct: np.ndarray, hops: np.ndarray) -> Layout:
    """Pairs from the switch-only α matrix ``direct`` (finite off the diagonal); for each rank u,
    the links a transfer from u can use: u's own out-links, and links out of switches that u
    reaches through switches only, never into u."""
    r = topology.num_ranks
    pairs = np.argwhere(np.isfinite(direct))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    pair_index = {(int(u), int(v)): i for i, (u, v) in enumerate(pairs)}
    src, link_ids = [], []
    links, out_links = topology.links, topology.out_links
    for u in range(r):
        seen, stack = {u}, [u]
        while stack:  # switches reachable from u through switches only
            x = stack.pop()
            for i in out_links[x]:
                w = links[i].dst
                if w >= r and w not in seen:
                    seen.add(w)
                    stack.append(w)
        for x in sorted(seen):
            for i in out_links[x]:
                if links[i].dst != u:
                    src.append(u)
                    link_ids.append(i)
    return Layout(
        pairs.astype(np.int64),
        pair_index,
        np.array(src, dtype=np.int64),
        np.array(link_ids, dtype=np.int64),
        hops,
    )


def steps_needed(spec: FlowSpec, hops: np.ndarray) -> int:
    """The fewest layers in which every commodity can reach its demands (hop distances)."""
    need = 0
    for k in spec.commodities:
        sources = [s for s, _ in k.supply]
        sinks = [d for d, _ in k.demand]
        between = hops[np.ix_(sources, sinks)]
        need = max(need, int(between.min(axis=0).max()), int(between.min(axis=1).max()))
    return need


def lp_variables(spec: FlowSpec, lay: Layout, num_ranks: int, steps: int) -> int:
    """An upper bound on the LP's columns for ``steps`` layers (before pruning)."""
    p = len(lay.pairs)
    return steps * (1 + p + len(lay.route_src) + len(spec.commodities) * (p + num_ranks))


def _add_routing(lp: SparseLP, topology: Topology, lay: Layout, flow: np.ndarray, G_j: np.ndarray, which: np.ndarray) -> None:
    """Rows that make ``flow`` (one column per routing arc of ``lay``) a flow out of each source
    rank, conserved at switches, arriving at rank v as the bytes ``G_j`` of the pairs (u, v) in
    ``which``: +in at an arc's head, −out at its tail (the source u itself has no row)."""
    r, n = topology.num_ranks, topology.num_nodes
    arc_from = topology.link_src_array[lay.route_link]
    arc_to = topology.link_dst_array[lay.route_link]
    node_rows = lp.add_rows(r * n, 0.0, 0.0).reshape(r, n)  # unused rows stay empty (0 = 0)
    lp.add_entries(node_rows[lay.route_src, arc_to], flow, 1.0)
    keep = arc_from != lay.route_src
    lp.add_entries(node_rows[lay.route_src[keep], arc_from[keep]], flow[keep], -1.0)
    pairs = lay.pairs
    lp.add_entries(node_rows[pairs[which, 0], pairs[which, 1]], G_j[which], -1.0)


def _add_loads(lp: SparseLP, topology: Topology, lay: Layout, flow: np.ndarray, m_j: int, used: np.ndarray) -> None:
    """Σ_u flow[u, ℓ] − bw_ℓ·m_j ≤ 0 on every link ℓ of ``used``."""
    bw = topology.bandwidth_array
    load_rows = lp.add_rows(len(used), -np.inf, 0.0)
    row_of_link = np.full(len(topology.links), -1, dtype=np.int64)
    row_of_link[used] = load_rows
    counted = row_of_link[lay.route_link] >= 0
    lp.add_entries(row_of_link[lay.route_link][counted], flow[counted], 1.0)
    lp.add_entries(load_rows, np.full(len(used), m_j), -bw[used])


def _add_split_routing(
    lp: SparseLP,
    topology: Topology,
    lay: Layout,
    G: np.ndarray,
    phi: np.ndarray,
    m: np.ndarray,
    parts: np.ndarray,
    crossing: frozenset[int],
    route_cap: float,
) -> None:
    """The routing and load rows of `layered_bound` with ``parts``: in each layer, ``phi`` routes
    the pairs inside parts and m_j bounds its loads, except in crossing layers, where a second
    routing (new columns) carries the pairs between parts and m_j bounds only its loads; outside
    the crossing layers the pairs between parts carry nothing."""
    between = parts[lay.pairs[:, 0]] != parts[lay.pairs[:, 1]]
    used = np.unique(lay.route_link)
    for j in range(len(G)):
        _add_routing(lp, topology, lay, phi[j], G[j], ~between)
        if j in crossing:
            other = lp.add_cols(len(lay.route_src), hi=route_cap)
            _add_routing(lp, topology, lay, other, G[j], between)
            _add_loads(lp, topology, lay, other, m[j], used)
        else:
            _add_loads(lp, topology, lay, phi[j], m[j], used)
            lp.fix_zero(G[j][between])


def phases_variables(spec: FlowSpec, lay: Layout, num_ranks: int, kinds: str) -> int:
    """An upper bound on the LP's columns for the layers ``kinds`` of `layered_bound` with merged
    layers ("F", "E"): `lp_variables` (which assumes no pruning), one more arc per pair and
    commodity in each merged layer, and a second routing in each crossing layer ("C")."""
    merged = sum(kind in "FE" for kind in kinds)
    crossing = sum(kind == "C" for kind in kinds)  # a second routing each
    extra = merged * len(spec.commodities) * len(lay.pairs) + crossing * len(lay.route_src)
    return lp_variables(spec, lay, num_ranks, len(kinds)) + extra


@dataclass(frozen=True)
class LayeredBound:
    """β_T: a lower bound, in µs per byte of size, on Σ_j m_j of any schedule of ``steps`` steps
    (inf when no such schedule exists)."""

    steps: int
    us_per_byte: float
    variables: int
    #: the solver's own optimum (µs per byte); ``us_per_byte`` is its certified lower bound
    optimum: float = float("nan")
    #: columns of the symmetry quotient solved instead of the LP (``reduce``), else None
    reduced_variables: int | None = None


def layered_bound(
    topology: Topology,
    spec: FlowSpec,
    lay: Layout,
    steps: int,
    options: dict | None = None,
    cut: np.ndarray | None = None,
    crossing: frozenset[int] = frozenset(),
    merged: frozenset[int] = frozenset(),
    parts: np.ndarray | None = None,
    *,
    reduce: bool = False,
) -> LayeredBound | None:
    """Build and solve the T-layer LP (module docstring); None if the solver gives no optimum.

    With ``cut`` (a mask over the links: those entering a node set S) the layers are of two
    kinds: in the layers of ``crossing`` (0-based) m_j only bounds the cut's links (a step that
    crosses S is charged its crossing α elsewhere, plus the load of its cut links), in the others
    no byte may cross into S and m_j bounds every link (docs/bounds.md, "crossing steps").

    With ``parts`` (the part of each rank) instead, a layer of ``crossing`` may hold transfers
    between parts and m_j bounds only their load (each link's bytes of transfers between parts;
    the transfers inside parts are free there, as the step is charged α_P elsewhere), and the other
    layers hold no transfer between parts, m_j bounding every link. A layer of ``merged`` (not
    crossing; needs ``parts``) stands for a *phase*: any number of consecutive steps without a
    transfer between parts. Its G and φ are the sums over the phase's steps, so m_j bounds the
    phase's total load per link, and a commodity may move along several pairs in it (arcs inside
    time j as well as from j − 1 to j): docs/bounds.md, "crossing-phases".

    ``reduce`` solves the LP's symmetry quotient (`SparseLP.solve`): the same optimum, and still a
    bound certified on the full LP, in far fewer columns on machines of many identical ranks."""
    if merged and (parts is None or merged & crossing):
        raise ValueError("merged layers need parts and cannot be crossing layers")
    if parts is not None and cut is not None:
        raise ValueError("give a cut or parts, not both")
    r = topology.num_ranks
    T = steps
    pairs = lay.pairs
    num_pairs = len(pairs)
    bw = topology.bandwidth_array
    hops = lay.hops
    lp = SparseLP(options=dict(options or {}))

    # bounds on every variable that some optimal point respects (docs/bounds.md: they make the
    # dual certificate finite): a commodity's flow on an arc at most its total; a pair's bytes at
    # most the largest group total or volume; routing at most R times that; m accordingly
    flow_cap = max(k.total for k in spec.commodities)
    group_cap = max(sum(spec.commodities[i].total for i in g) for g in spec.groups)
    pair_cap = max([group_cap, flow_cap, *(v for _, v in spec.volumes)])
    route_cap = r * pair_cap
    m_cap = route_cap * r / float(bw.min())

    m = lp.add_cols(T, cost=1.0, hi=m_cap)
    G = lp.add_cols(T * num_pairs, hi=pair_cap).reshape(T, num_pairs)
    A = len(lay.route_src)
    phi = lp.add_cols(T * A, hi=route_cap).reshape(T, A)

    # routing: conservation at switches, arrival G at ranks, for each (layer, source rank)
    if parts is not None:
        _add_split_routing(lp, topology, lay, G, phi, m, np.asarray(parts), crossing, route_cap)
    for j in range(T if parts is None else 0):
        _add_routing(lp, topology, lay, phi[j], G[j], np.ones(num_pairs, dtype=bool))
        used = np.unique(lay.route_link)
        if cut is not None:
            if j in crossing:
                used = used[cut[used]]
            else:
                lp.fix_zero(phi[j][cut[lay.route_link]])
        _add_loads(lp, topology, lay, phi[j], m[j], used)

    # commodities in the time-expanded rank graph; arcs of layer j go from time j−1 to time j
    f_pair: list[np.ndarray] = []  # per commodity: [T, P] column ids (−1 = pruned)
    within: list[tuple[int, int, np.ndarray]] = []  # (commodity, merged layer, [P] arcs inside it)
    for k in spec.commodities:
        sources = [s for s, _ in k.supply]
        sinks = [d for d, _ in k.demand]
        earliest = hops[sources].min(axis=0)  # [R]: fewest steps to reach v from a supply
        to_sink = hops[:, sinks].min(axis=1)  # [R]: fewest steps from v to a demand
        # node (v, t) is useful when earliest[v] ≤ t and to_sink[v] ≤ T − t (a merged layer may
        # advance any number of hops, so with merged layers every node is kept)
        t = np.arange(T + 1)
        useful = (earliest[None, :] <= t[:, None]) & (to_sink[None, :] <= T - t[:, None])  # [T+1, R]
        if merged:
            useful[:] = True
        node_row = np.full((T + 1, r), -1, dtype=np.int64)
        node_row[useful] = lp.add_rows(int(useful.sum()), 0.0, 0.0)
        supply = np.zeros(r)
        demand = np.zeros(r)
        for s, a in k.supply:
            supply[s] += a
        for d, a in k.demand:
            demand[d] += a
        rlo = lp.rlo[-1]
        rhi = lp.rhi[-1]
        # row bounds: out − in = supply at t = 0, −demand at t = T
        b = np.zeros((T + 1, r))
        b[0] += supply
        b[T] -= demand
        if np.any((b != 0) & ~useful):
            return LayeredBound(steps, np.inf, 0)  # a supply cannot reach its demands in T steps
        rlo[:] = b[useful]
        rhi[:] = b[useful]
        ids = np.full((T, num_pairs), -1, dtype=np.int64)
        for j in range(1, T + 1):
            tail = node_row[j - 1, pairs[:, 0]]
            head = node_row[j, pairs[:, 1]]
            ok = (tail >= 0) & (head >= 0)
            cols = lp.add_cols(int(ok.sum()), hi=k.total)
            ids[j - 1, ok] = cols
            lp.add_entries(tail[ok], cols, 1.0)
            lp.add_entries(head[ok], cols, -1.0)
            stay_tail, stay_head = node_row[j - 1], node_row[j]
            ok = (stay_tail >= 0) & (stay_head >= 0)
            cols = lp.add_cols(int(ok.sum()), hi=k.total)
            lp.add_entries(stay_tail[ok], cols, 1.0)
            lp.add_entries(stay_head[ok], cols, -1.0)
            if j - 1 in merged:  # further pairs inside the phase: arcs within time j
                inner = node_row[j]
                cols = lp.add_cols(num_pairs, hi=k.total)
                lp.add_entries(inner[pairs[:, 0]], cols, 1.0)
                lp.add_entries(inner[pairs[:, 1]], cols, -1.0)
                within.append((len(f_pair), j - 1, cols))
        f_pair.append(ids)

    # sharing: Σ_{k ∈ group} f[k, pair, j] ≤ G[pair, j]
    for group in spec.groups:
        stacked = np.stack([f_pair[i] for i in group])  # [g, T, P]
        present = (stacked >= 0).any(axis=0)  # [T, P]
        rows = np.full((T, num_pairs), -1, dtype=np.int64)
        rows[present] = lp.add_rows(int(present.sum()), -np.inf, 0.0)
        lp.add_entries(rows[present], G[present], -1.0)
        for ids in stacked:
            ok = ids >= 0
            lp.add_entries(rows[ok], ids[ok], 1.0)
        members = set(group)
        for i, j, cols in within:
            if i in members:
                lp.add_entries(rows[j], cols, 1.0)

    # volumes between parts
    for part, least in spec.volumes:
        part_of = np.asarray(part)
        across = part_of[pairs[:, 0]] != part_of[pairs[:, 1]]
        row = lp.add_rows(1, least, np.inf)
        cols = G[:, across].ravel()
        lp.add_entries(np.full(len(cols), row[0]), cols, 1.0)

    result = lp.solve(reduce=reduce)
    if result is None:
        return None
    return LayeredBound(
        steps,
        result.value / _BYTES_PER_US,
        result.variables,
        result.optimum / _BYTES_PER_US,
        result.reduced_variables,
    )
