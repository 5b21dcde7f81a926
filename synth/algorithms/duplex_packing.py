"""Allreduce over one set of spanning trees, run forward (allgather) and backward (reduce-scatter) at
once, each link's two directions one budget.

`packing`'s allreduce packs the reduce-scatter's in-trees and the allgather's out-trees each for
its own phase, at the full capacity of every link, and overlaps the two phases per chunk
(`synth.algorithms.engines.composition.aligned_overlap`). Overlapped, a link direction then
carries what both packings put on it, up to twice what either planned for. Where the binding cut
is a single link (two CPU sockets joined by one UPI link, two GPUs behind one PCIe uplink), every
tree has to cross it anyway, but packing's two sets of trees relay through the slow GPUs of a
switch pair in both phases and those GPUs' links carry both.

Here one set of trees serves both phases: the allgather sends every root's piece down its trees,
and the reduce-scatter is the same trees run backwards with reduces (`synth.transform.dual_reduction`),
so a tree arc that carries a chunk from u to v in the allgather carries v's partial sum of another
chunk from v to u in the reduce-scatter. A tree using a link in either direction therefore loads
both directions of it once, and the trees are packed with one budget per link pair (a link pair of
``b`` and ``b'`` GB/s carries ⌊min(b, b')/U⌋ trees of U GB/s: `synth.algorithms.engines.tree_packing.grow`
with ``mirror``). In steady state every step moves one chunk of the reduce-scatter and one of the
allgather over every tree arc, in opposite directions, and no link direction carries more than its
budget.

The trees. Every root sends one unit over a mix of its spanning trees, and an LP minimises the
busiest link pair's load (`lp_packing`, column generation: the pricing problem of a root is a
minimum spanning arborescence over the rank-to-rank channels priced by the pairs' duals,
`min_arborescence`). Its weights are rounded to k whole trees per root. If HiGHS fails, greedy growth
with the paired budget is the fallback (`greedy_packing`). The chunk count per piece (multiples of k)
is then chosen for the size as packing does: estimated for every count, the best `EXACT_CANDIDATES`
built and timed exactly.

On random-pcie-asym-1 (sockets of 3 and 7 GPUs joined at 10 GB/s; gpu7 and gpu8 behind one 12 GB/s
uplink) the allreduce of 1 GiB takes 125.6 ms against packing's 153.3 ms (bound 114.2 ms); on machines
whose link pairs are equally busy both ways it is not better than packing (docs/algorithms.md).

Allreduce only, on up to `MAX_RANKS` ranks; every link must have a link in the other direction (the
reduce-scatter runs the trees backwards). Options:
``size`` (bytes, default 1 GiB): the size the chunk count is chosen for.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from synth.algorithms.engines.builders import largest_remainder
from synth.algorithms.engines.composition import aligned_overlap
from synth.algorithms.engines.path_channels import PathChannels, channels_for
from synth.algorithms.engines.size_tuning import predicted_us, size_option
from synth.algorithms.engines.tree_packing import (
    Packing,
    TreeClass,
    count_change_units,
    grow,
    optimal_rate,
    shallow_trees,
    tree_counts,
)
from synth.algorithms.engines.tree_pipeline import tree_schedule
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, ranks_for_allreduce
from synth.routing import Router
from synth.schedule import Schedule
from synth.solver_output import native_stdout_to_stderr, seeded_highs_with_columns
from synth.topology import Topology
from synth.transform import dual_reduction

NAME = "duplex-packing"
OPTIONS = frozenset({"size"})
REFERENCE_SIZE = 1 << 30
#: trees per root tried
MAX_TREES = 4
#: the smallest rate tried, as a share of the allgather optimum
FLOOR = 0.4
#: (chunk count) candidates built and timed exactly, the best estimated ones
EXACT_CANDIDATES = 3
#: chunk counts are not tried beyond schedules of this many transfers
TRANSFER_BUDGET = 3_000_000
#: ranks beyond which the method does not try: on the larger machines measured it never beat packing
#: (docs/algorithms.md) and auto would pay its seconds there
MAX_RANKS = 16
#: machines of up to this many ranks get the tree weights from the LP (column generation)
LP_RANKS = 16
#: column generation rounds at most, and seconds at most (the LP of the columns so far is kept)
LP_ROUNDS = 200
LP_SECONDS = 2.0
#: trees per root tried when the LP's weights are rounded to whole trees
ROUNDINGS = (1, 2, 3, 4, 6, 8, 12, 16)
#: the first rounding within this share of the LP's rate is kept
ROUNDING_SLACK = 0.02


def mirror_links(topology: Topology) -> np.ndarray:
    """The id of the link in the other direction of every link; NotApplicable if one has none."""
    index = topology.link_index
    out = np.empty(len(topology.links), dtype=np.int64)
    for i, link in enumerate(topology.links):
        back = index.get((link.dst, link.src))
        if back is None:
            raise NotApplicable(
                f"{NAME} runs its trees backwards for the reduce-scatter, but the link "
                f"{topology.node_name(link.src)} -> {topology.node_name(link.dst)} has no link back"
            )
        out[i] = back
    return out


def duplex_packing(topology: Topology) -> Packing:
    """Allgather trees from every rank within one budget per link pair (module docstring): from the
    LP on up to `LP_RANKS` ranks, else (or if the LP fails) by greedy growth; cached on the topology."""
    cache = topology.__dict__.setdefault("_packings", {})
    key = ("duplex", Kind.ALLGATHER)
    if key not in cache:
        found = lp_packing(topology) if topology.num_ranks <= LP_RANKS else None
        cache[key] = found if found is not None else greedy_packing(topology)
    return cache[key]


def greedy_packing(topology: Topology) -> Packing:
    """The fallback: for k = 1 … `MAX_TREES` trees per root, the largest unit U at which greedy growth
    with one budget per link pair succeeds, by bisection over the units at which some pair's tree
    count changes (between the allgather optimum and `FLOOR` of it); the largest rate k·U is kept
    (fewest trees on ties)."""
    mirror = mirror_links(topology)
    bw = topology.bandwidth_array
    pair_bw = np.minimum(bw, bw[mirror])
    channels = channels_for(topology)
    r = topology.num_ranks
    roots = tuple(range(r))
    optimum = optimal_rate(topology, Kind.ALLGATHER)
    best: Packing | None = None
    for k in range(1, MAX_TREES + 1):
        hi = optimum / k
        lo = max(FLOOR * optimum, best.rate_gbps if best is not None else 0.0) / k
        if lo > hi:
            break
        units = count_change_units(pair_bw, hi, lo)
        # bisection for the largest unit that grows (growth is close to monotone in the unit)
        good: tuple[float, list] | None = None
        a, b = 0, len(units) - 1
        while a <= b:
            mid = (a + b) // 2
            classes = grow(channels, tree_counts(pair_bw, units[mid]), roots, k, False, mirror)
            if classes is not None:
                good = (units[mid], classes)
                b = mid - 1
            else:
                a = mid + 1
        if good is not None and (best is None or k * good[0] > best.rate_gbps * (1 + 1e-9)):
            best = Packing(Kind.ALLGATHER, roots, tuple(good[1]), k, good[0], optimum, "duplex")
    if best is None:
        raise NotApplicable(f"{NAME} found no trees within {FLOOR:.0%} of the allgather optimum on {topology.name}")
    return best


# ============================================================================ the LP
def _pair_matrix(topology: Topology, mirror: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pair id of every link, capacity of every pair): a link and its mirror form one pair."""
    rep = np.minimum(np.arange(mirror.size), mirror)
    ids, pair = np.unique(rep, return_inverse=True)
    bw = topology.bandwidth_array
    return pair, np.minimum(bw[ids], bw[mirror[ids]])


def lp_packing(topology: Topology) -> Packing | None:
    """Trees from the LP that minimises the busiest link pair's load when every root sends one unit
    over a mix of its spanning trees (each tree loads every link pair its arcs cross, once per
    crossing), by column generation: the pricing problem for a root is a minimum spanning
    arborescence over the rank-to-rank channels priced by the pairs' duals (`min_arborescence`),
    for at most `LP_ROUNDS` rounds and `LP_SECONDS`. The weights are rounded to k whole trees per root for the smallest k of
    `ROUNDINGS` within `ROUNDING_SLACK` of the LP's rate. None if HiGHS does not reach an optimum."""
    import highspy

    mirror = mirror_links(topology)
    channels = channels_for(topology)
    r = topology.num_ranks
    pair_of_link, cap = _pair_matrix(topology, mirror)
    npairs = cap.size
    chan_pairs = [pair_of_link[channels.links(c)] for c in range(channels.count)]
    length = channels.path_length.astype(np.float64)

    columns: list[tuple[int, np.ndarray]] = []  # (root, parent channel per rank)
    loads: list[np.ndarray] = []

    def add(root: int, parent: np.ndarray) -> None:
        load = np.zeros(npairs)
        for c in parent[parent >= 0].tolist():
            np.add.at(load, chan_pairs[c], 1.0)
        columns.append((root, parent))
        loads.append(load)

    for cls in shallow_trees(channels, tuple(range(r))):
        add(cls.root, cls.parent)

    def solve():
        n = len(columns)
        lp = highspy.HighsLp()
        lp.num_col_ = n + 1
        lp.num_row_ = r + npairs
        cost = np.zeros(n + 1)
        cost[-1] = 1.0
        lp.col_cost_ = cost
        lp.col_lower_ = np.zeros(n + 1)
        lp.col_upper_ = np.full(n + 1, highspy.kHighsInf)
        lp.row_lower_ = np.r_[np.ones(r), np.full(npairs, -highspy.kHighsInf)]
        lp.row_upper_ = np.r_[np.ones(r), np.zeros(npairs)]
        starts, index, value = [0], [], []
        scale = float(cap.max())
        for (root, _), load in zip(columns, loads):
            nz = np.flatnonzero(load)
            index += [root, *(r + nz).tolist()]
            value += [1.0, *load[nz].tolist()]
            starts.append(len(index))
        index += (r + np.arange(npairs)).tolist()
        value += (-cap / scale).tolist()
        starts.append(len(index))
        h = seeded_highs_with_columns(lp, starts, index, value)
        with native_stdout_to_stderr():
            h.passModel(lp)
            h.run()
            if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                return None
            sol = h.getSolution()
            return np.array(sol.col_value), np.array(sol.row_dual)

    link_pairs = pair_of_link[channels.link_ids]
    src, dst = channels.src, channels.dst
    started = time.monotonic()
    result = None
    for _ in range(LP_ROUNDS):
        result = solve()
        if result is None:
            return None
        x, dual = result
        price = np.maximum(-dual[r:], 0.0)  # what one more tree on a pair costs
        chan_cost = np.add.reduceat(price[link_pairs], channels.link_ptr[:-1]) + 1e-7 * length
        # the cheapest channel of every rank pair, as a dense arc cost matrix
        cost = np.full((r, r), np.inf)
        np.minimum.at(cost, (src, dst), chan_cost)
        best_chan = np.full((r, r), -1, dtype=np.int64)
        hit = chan_cost <= cost[src, dst]
        best_chan[src[hit], dst[hit]] = np.flatnonzero(hit)
        added = 0
        for root in range(r):
            pred = min_arborescence(cost, root)
            if pred is None:
                return None
            others = np.flatnonzero(pred >= 0)
            parent = np.full(r, -1, dtype=np.int64)
            parent[others] = best_chan[pred[others], others]
            if float(cost[pred[others], others].sum()) - float(dual[root]) < -1e-9:
                add(root, parent)
                added += 1
        if not added or time.monotonic() - started > LP_SECONDS:
            break
    assert result is not None
    x = np.zeros(len(columns))
    x[: result[0].size - 1] = result[0][:-1]  # columns added after the last solve get no weight
    return _rounded(topology, channels, columns, np.array(loads), x, cap)


def min_arborescence(cost: np.ndarray, root: int) -> np.ndarray | None:
    """The cheapest spanning arborescence from ``root`` of the dense digraph ``cost`` (cost[u, v]
    of the arc u -> v, inf where there is none), as the parent of every node (-1 at the root);
    None if some node cannot be reached. Chu–Liu/Edmonds with cycle contraction, O(V³)."""
    n = cost.shape[0]
    c = cost.astype(np.float64, copy=True)
    np.fill_diagonal(c, np.inf)
    c[:, root] = np.inf
    pred = np.argmin(c, axis=0)
    pred[root] = -1
    others = np.arange(n) != root
    if not np.all(np.isfinite(c[pred[others], np.flatnonzero(others)])):
        return None
    # find the cycles of the cheapest-in-arc graph
    comp = np.full(n, -1, dtype=np.int64)
    state = np.zeros(n, dtype=np.int64)  # 0 new, 1 on the current walk, 2 done
    cycle_of = np.full(n, -1, dtype=np.int64)
    cycles = 0
    for start in range(n):
        walk = []
        v = start
        while v != -1 and state[v] == 0:
            state[v] = 1
            walk.append(v)
            v = int(pred[v])
        if v != -1 and state[v] == 1:  # closed a cycle at v
            u = v
            while True:
                cycle_of[u] = cycles
                u = int(pred[u])
                if u == v:
                    break
            cycles += 1
        for w in walk:
            state[w] = 2
    if cycles == 0:
        return pred
    # contract every cycle to one node
    count = 0
    for v in range(n):
        if cycle_of[v] < 0:
            comp[v] = count
            count += 1
    base = count
    comp[cycle_of >= 0] = base + cycle_of[cycle_of >= 0]
    count += cycles
    in_cost = np.where(cycle_of >= 0, c[np.maximum(pred, 0), np.arange(n)], 0.0)
    adjusted = c - in_cost[None, :]
    small = np.full((count, count), np.inf)
    np.minimum.at(small, (comp[:, None].repeat(n, 1), comp[None, :].repeat(n, 0)), adjusted)
    np.fill_diagonal(small, np.inf)
    sub = min_arborescence(small, int(comp[root]))
    if sub is None:
        return None
    parent = np.where(cycle_of >= 0, pred, -1)
    for cv in range(count):
        cu = int(sub[cv])
        if cu < 0:
            continue
        members_u = np.flatnonzero(comp == cu)
        members_v = np.flatnonzero(comp == cv)
        block = adjusted[np.ix_(members_u, members_v)]
        i, j = np.unravel_index(int(np.argmin(block)), block.shape)
        parent[members_v[j]] = members_u[i]  # the arc into the cycle replaces that node's cycle arc
    parent[root] = -1
    return parent


def _depths(channels: PathChannels, root: int, parent: np.ndarray) -> np.ndarray:
    depth = np.full(parent.size, -1, dtype=np.int64)
    depth[root] = 0

    def walk(v: int) -> int:
        if depth[v] < 0:
            depth[v] = walk(int(channels.src[parent[v]])) + 1
        return int(depth[v])

    for v in range(parent.size):
        walk(v)
    return depth


def _rounded(topology, channels, columns, loads: np.ndarray, x: np.ndarray, cap: np.ndarray) -> Packing:
    """The LP's weights as k whole trees per root (see `lp_packing`)."""
    r = topology.num_ranks
    by_root = [[i for i, (root, _) in enumerate(columns) if root == v and x[i] > 1e-9] for v in range(r)]
    lp_rate = 1.0 / float((x @ loads / cap).max())
    optimum = optimal_rate(topology, Kind.ALLGATHER)
    best: tuple[float, int, np.ndarray] | None = None
    for k in ROUNDINGS:
        mult = np.zeros(len(columns), dtype=np.int64)
        for ids in by_root:
            w = x[ids] / x[ids].sum()
            mult[ids] = largest_remainder(k * w, k)
        load = mult @ loads
        unit = float((cap[load > 0] / load[load > 0]).min())
        if best is None or k * unit > best[0] * (1 + 1e-9):
            best = (k * unit, k, mult)
        if k * unit >= lp_rate * (1 - ROUNDING_SLACK):
            break
    assert best is not None
    rate, k, mult = best
    classes = tuple(
        TreeClass(root, int(mult[i]), parent, _depths(channels, root, parent))
        for i, (root, parent) in enumerate(columns)
        if mult[i] > 0
    )
    return Packing(Kind.ALLGATHER, tuple(range(r)), classes, k, rate / k, optimum, "duplex")


def _estimate_us(channels: PathChannels, packing: Packing, per_piece: int, size: int) -> float:
    """A quick estimate of the overlapped schedule: about P/k + 2·height steps, each moving at most
    a chunk per tree on every link pair (a chunk of size/(R·P) at U GB/s) plus the latency."""
    alpha = max(float(channels.alpha[c.parent[c.parent >= 0]].max(initial=0.0)) for c in packing.classes)
    chunk_bytes = size / (packing.roots.__len__() * per_piece)
    steps = math.ceil(per_piece / packing.trees_per_root) + 2 * packing.height
    return steps * (alpha + chunk_bytes / (packing.unit_gbps * 1e3))


def synthesize(
    topology: Topology,
    collective: Collective,
    router: Router | None = None,
    **options: Any,
) -> Schedule:
    """The allreduce over duplex-packed trees (module docstring)."""
    size = size_option(NAME, options, OPTIONS)
    if collective.kind is not Kind.ALLREDUCE:
        raise NotApplicable(f"{NAME} serves allreduce only")
    r = topology.num_ranks
    if r < 2:
        raise NotApplicable(f"{NAME} needs at least two ranks")
    if r > MAX_RANKS:
        raise NotApplicable(f"{NAME} runs on machines of up to {MAX_RANKS} ranks ({topology.name} has {r})")
    at = size if size is not None else REFERENCE_SIZE
    requested = options.get("requested_chunks", collective.chunks_per_piece)
    packing = duplex_packing(topology)
    channels = channels_for(topology)
    k = packing.trees_per_root
    if requested is not None:
        if collective.num_chunks % r:
            raise NotApplicable(f"{NAME} runs reduce-scatter and allgather, so --chunks must be a multiple of the rank count {r}")
        counts = [collective.num_chunks // r]
    else:
        counts = []
        m = 1
        while m <= 256 and (not counts or 2 * (r - 1) * r * k * m <= TRANSFER_BUDGET):
            counts.append(k * m)
            m *= 2
    ranked = sorted(counts, key=lambda p: (_estimate_us(channels, packing, p, at), p))
    best: tuple[float, int, Schedule] | None = None
    for per_piece in ranked[:EXACT_CANDIDATES]:
        schedule = _build(topology, channels, packing, per_piece, at)
        time = predicted_us(schedule, topology, [at])[0]
        if best is None or (time, schedule.num_transfers) < best[:2]:
            best = (time, schedule.num_transfers, schedule)
    assert best is not None
    return best[2]


def _build(topology: Topology, channels: PathChannels, packing: Packing, per_piece: int, size: int) -> Schedule:
    r = topology.num_ranks
    trees = {**packing.summary(), "chunks_per_root": per_piece, "chosen_at_size": size}
    ag = tree_schedule(topology, channels, packing, Collective(Kind.ALLGATHER, r, per_piece), NAME, trees)
    rs = dual_reduction(ag, Collective(Kind.REDUCE_SCATTER, r, per_piece), NAME, trees)
    whole = Collective(Kind.ALLREDUCE, r, r * per_piece)
    params = {"phases": ["reduce-scatter", "allgather"], "trees": trees, "overlapped": True}
    return aligned_overlap(rs, ag, topology, whole, NAME, params)


METHOD = Method(
    name=NAME,
    summary="allreduce over one set of spanning trees run both ways at once, a link's two directions one budget",
    family="scalable",
    collectives=frozenset({Kind.ALLREDUCE}),
    build=synthesize,
    default_chunks=ranks_for_allreduce,
    options=OPTIONS,
    chooses_chunks=True,
)
