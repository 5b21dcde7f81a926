"""Spanning trees that reach the optimal allgather (and broadcast) throughput.

The optimum. Every rank must receive the pieces held outside any node set S through the links
entering S, so an allgather of ``size`` takes at least size/R · max_S |V_r∖S| / in(S); the maximum
over every S is computed exactly by parametric max-flow (`synth.bounds`, the ``cut`` bound).
Edmonds' branching theorem says why it is also reachable: k arc-disjoint spanning arborescences
from every rank exist exactly when every S is entered by at least k·|V_r∖S| arcs, so with link
capacities in units of U GB/s (a link of bw carries ⌊bw/U⌋ trees), trees at U each give every root
k·U GB/s. `best_unit` finds the largest U for which the integer capacities still pass that test
(the same max-flow test with integer capacities), for k = 1, 2, 3, … trees per root, and the
packer stops at the first k whose k·U is within ``tolerance`` of the optimum: few trees.

Switches. A tree arc is a channel (`synth.algorithms.engines.path_channels`): rank to rank over a direct link
or through switches, using a unit on every link of its path. Two arcs of one tree through the same
switch are two transfers, as a switch cannot copy: that is the edge splitting of ForestColl, done
arc by arc as trees grow (a unit into a switch paired with a unit out of it).

Growing the trees (`grow`). Classes of identical trees (a root, a multiplicity, the vertices
reached) grow one arc at a time, the smallest class first, so all trees advance together. A class
takes the channel from its vertices to a new rank that (1) does not bring it into a neighbourhood
(`PathChannels.neighbourhoods`: a server, a box, a rack) it has already entered, when it can avoid
it: a tight cut such as four boxes behind their NICs is entered exactly once by every tree; (2) has
the most room left on its path; (3) starts nearest the root; (4) crosses the fewest links. When a
channel has room for fewer trees than the class holds, the class splits. Growth is greedy: it is not
guaranteed to succeed at the optimum (Lovász's exact construction needs a max-flow per arc), so the
packer tries the next smaller unit or more trees when it gets stuck; for a broadcast through
switches, then growth that takes an arc only if Edmonds' cut condition still holds after it (a
max-flow per rank, within a work budget: where every rank's ingress is tight, as on PCIe hosts
with a NIC per GPU, the greedy choice spends a unit a later tree needs); and then, only if nothing
within the tolerance grows, larger rate losses. Every packing it returns is valid (every link
within its capacity) and its rate is reported against the exact optimum.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from synth.algorithms.engines.path_channels import PathChannels, channels_for
from synth.bounds import bound_model
from synth.bounds.maxflow import FlowNetwork
from synth.collective import Kind
from synth.topology import Topology

#: bytes per µs in one GB/s
_BYTES_PER_US = 1e3
#: when growth fails within the tolerance, the rate losses tried next (a rate is reported)
FALLBACK_SLACK = (0.05, 0.15, 0.3, 0.5)
#: switchless broadcasts of at most this many ranks get the exact growth when the greedy one fails
EXACT_MAX_RANKS = 96
#: arc-disjoint shallow trees tried for small broadcasts (`disjoint`)
DISJOINT_MAX_TREES = 4
#: work that checked growth may do for one broadcast's packings (`CheckBudget`): max-flow calls
#: times the arcs of their network (about 0.7 s of CPU a million; 9 hosts x 4 GPUs use 5 million
#: for three packings)
CHECK_WORK = 8_000_000
#: checked growth only on machines of at most this many ranks (its max-flows grow with ranks^2:
#: a 128-rank fat-tree spent 20 s on it for nothing)
CHECK_MAX_RANKS = 64


@dataclass(frozen=True, eq=False)
class TreeClass:
    """``multiplicity`` identical spanning trees from ``root``: ``parent[v]`` is the channel into
    rank v (-1 at the root), ``depth[v]`` its depth."""

    root: int
    multiplicity: int
    parent: np.ndarray
    depth: np.ndarray

    @property
    def height(self) -> int:
        return int(self.depth.max())


@dataclass(frozen=True, eq=False)
class Packing:
    """Trees for a collective: ``trees_per_root`` (k) trees of ``unit_gbps`` (U) each from every
    root, grouped in ``classes``; the rate each root reaches is k·U (GB/s), against
    ``optimum_gbps``, the exact optimum for the topology."""

    kind: Kind
    roots: tuple[int, ...]
    classes: tuple[TreeClass, ...]
    trees_per_root: int
    unit_gbps: float
    optimum_gbps: float
    shape: str  # "throughput" (packed at a unit) or "shallow" (breadth-first, one per root)

    @property
    def rate_gbps(self) -> float:
        return self.trees_per_root * self.unit_gbps

    @property
    def height(self) -> int:
        return max(c.height for c in self.classes)

    def summary(self) -> dict:
        """What a schedule's params record about its trees."""
        return {
            "shape": self.shape,
            "trees_per_root": self.trees_per_root,
            "distinct_trees": len(self.classes),
            "height": self.height,
            "unit_gbps": round(self.unit_gbps, 6),
            "rate_gbps": round(self.rate_gbps, 6),
            "optimum_gbps": round(self.optimum_gbps, 6),
            "rate_over_optimum": round(self.rate_gbps / self.optimum_gbps, 6) if self.optimum_gbps else None,
        }


# ============================================================================ the optimum
def optimal_rate(topology: Topology, kind: Kind, root: int | None = None) -> float:
    """The exact optimal rate (GB/s) at which every root's data can reach every rank: for
    allgather, piece bytes per µs·10³ (size/R over the cut bound's time); for broadcast, the
    root's smallest max-flow to a rank."""
    if kind is Kind.ALLGATHER:
        term = bound_model(topology, "allgather").term("cut")
        return 1.0 / (topology.num_ranks * term.us_per_byte * _BYTES_PER_US)
    term = bound_model(topology, "broadcast", root).term("flow")
    return 1.0 / (term.us_per_byte * _BYTES_PER_US)


def tree_counts(bandwidths: np.ndarray, unit: float) -> np.ndarray:
    """Trees of ``unit`` GB/s a link of each bandwidth carries: ⌊bw/unit⌋."""
    return np.floor(bandwidths / unit + 1e-9).astype(np.int64)


def link_units(topology: Topology, unit: float) -> np.ndarray:
    """Trees of ``unit`` GB/s each link carries: ⌊bw/unit⌋."""
    return tree_counts(topology.bandwidth_array, unit)


def feasible(topology: Topology, units: np.ndarray, k: int, roots: tuple[int, ...]) -> bool:
    """Edmonds' condition with integer link capacities: can k trees from each root reach every
    rank? (Every node set S holding a rank but not every root is entered by k·(roots outside S)
    units.) One max-flow per rank, each stopped once it reaches its target; a rank that passed
    feeds the later ones without limit (its cuts are cleared: Hao and Orlin's sink sequence)."""
    r, n = topology.num_ranks, topology.num_nodes
    source = n
    arcs = [(link.src, link.dst) for link in topology.links] + [(source, v) for v in range(r)]
    net = FlowNetwork(n + 1, arcs)
    caps = [float(u) for u in units.tolist()]
    supply = [0.0] * r
    for v in roots:
        supply[v] = float(k)
    total = float(k * len(roots))
    for v in _near_first(topology, roots):
        need = total - supply[v] if math.isfinite(supply[v]) else total - k
        if need > 0:
            arc_caps = caps + [0.0 if u == v else s for u, s in enumerate(supply)]
            result = net.max_flow(arc_caps, source, v, limit=need - 0.5)
            if result.value < need - 0.5:
                return False
        supply[v] = math.inf  # every cut holding v is cleared: v may feed the later ranks freely
    return True


def _near_first(topology: Topology, roots: tuple[int, ...]) -> list[int]:
    """Every rank, breadth-first from the first root (neighbours are checked one after another)."""
    r = topology.num_ranks
    neighbours: list[list[int]] = [[] for _ in range(topology.num_nodes)]
    for link in topology.links:
        neighbours[link.src].append(link.dst)
        neighbours[link.dst].append(link.src)
    seen, queue = {roots[0]}, [roots[0]]
    for v in queue:
        for w in sorted(neighbours[v]):
            if w not in seen:
                seen.add(w)
                queue.append(w)
    return [v for v in queue if v < r]


def candidate_units(topology: Topology, optimum: float, k: int, tolerance: float) -> list[float]:
    """Units U in [optimum·(1 - tolerance)/k, optimum/k] at which some link's tree count changes
    (bw/j), and the top of the range; largest first."""
    return count_change_units(topology.bandwidth_array, optimum / k, optimum * (1 - tolerance) / k)


def count_change_units(bandwidths: np.ndarray, hi: float, lo: float) -> list[float]:
    """Units in [lo, hi] at which the tree count of a link of one of ``bandwidths`` changes
    (bw/j for a whole j), and ``hi``; largest first."""
    found = {hi}
    for bw in np.unique(bandwidths).tolist():
        j = max(1, math.ceil(bw / hi - 1e-9))
        while bw / j >= lo:
            if bw / j <= hi * (1 + 1e-12):
                found.add(bw / j)
            j += 1
    return sorted(found, reverse=True)


# ============================================================================ growing trees
def grow(
    channels: PathChannels,
    units: np.ndarray,
    roots: tuple[int, ...],
    k: int,
    shallow_first: bool = False,
    mirror: np.ndarray | None = None,
    checked: CheckBudget | None = None,
) -> list[TreeClass] | None:
    """Greedy tree growth (module docstring): k trees from every root within the link ``units``;
    None if some class cannot reach every rank. ``shallow_first`` puts nearness to the root before
    room and lets the trees of a class part ways at every arc (shallower trees, for broadcasts and
    small messages). With ``mirror`` (the link in the other direction of every link, ``units``
    equal on both), an arc takes its room on both directions of every link of its path: one budget
    per link pair, for trees that a reduction also runs backwards at the same time. With
    ``checked`` (one root only), an arc is taken only if the trees can still be completed as far
    as Edmonds' cut condition says (`_Completion`): the best-scored arc that keeps it, so growth
    does not spend a unit that a tight cut further on needs; None if no arc keeps it or the
    check's max-flows exceed the budget (which they draw from)."""
    topo = channels.topology
    r = topo.num_ranks
    if r == 1:
        return [TreeClass(roots[0], k, np.full(1, -1), np.zeros(1, dtype=np.int64))]
    ptr, ids = channels.link_ptr, channels.link_ids
    room = units.copy()
    pathmin = np.minimum.reduceat(room[ids], ptr[:-1])
    order = np.argsort(ids, kind="stable")
    link_ptr = np.searchsorted(ids[order], np.arange(room.size + 1))
    link_channels = channels.link_owner[order]
    hood = channels.neighbourhoods()
    top = hood.tiers[:, 0]
    clusters = max(1, len(hood.members))
    src, dst, length = channels.src, channels.dst, channels.path_length
    # channels by source and by destination (CSR), to keep each class's frontier up to date
    by_src = np.argsort(src, kind="stable")
    src_ptr = np.searchsorted(src[by_src], np.arange(r + 1))
    dst_by_src, top_by_src = dst[by_src], top[by_src] + 1
    by_dst = np.argsort(dst, kind="stable")
    dst_ptr = np.searchsorted(dst[by_dst], np.arange(r + 1))
    by_top = np.argsort(top, kind="stable")  # channels by the neighbourhood they enter (CSR)
    top_ptr = np.searchsorted(top[by_top], np.arange(clusters + 1))
    scale_len = int(length.max()) + 1
    scale_room = int(units.max()) + 2

    inside: list[np.ndarray] = []
    depth: list[np.ndarray] = []
    parent: list[np.ndarray] = []
    entered: list[np.ndarray] = []
    frontier: list[np.ndarray] = []  # per class: channels from a rank inside to a rank outside
    first: list[np.ndarray] = []  # per class: those of its frontier that enter no neighbourhood it entered
    mult: list[int] = []
    root_of: list[int] = []

    def add_class(root: int, m: int, ins, dep, par, ent, front, fresh) -> int:
        inside.append(ins)
        frontier.append(front)
        first.append(fresh)
        depth.append(dep)
        parent.append(par)
        entered.append(ent)
        mult.append(m)
        root_of.append(root)
        return len(mult) - 1

    for v in roots:
        ins = np.zeros(r, dtype=bool)
        ins[v] = True
        dep = np.full(r, -1, dtype=np.int64)
        dep[v] = 0
        ent = np.zeros(clusters + 1, dtype=bool)  # entered neighbourhoods, at their index + 1
        ent[hood.rank_cluster[hood.rank_ptr[v] : hood.rank_ptr[v + 1]] + 1] = True
        front = ins[src] & ~ins[dst]
        add_class(v, k, ins, dep, np.full(r, -1, dtype=np.int64), ent, front, front & ~ent[top + 1])
    heap = [(1, i) for i in range(len(mult))]
    heapq.heapify(heap)
    completion = _Completion(topo, roots[0], k, checked) if checked is not None and len(roots) == 1 else None
    score_of = _Scores(channels, top, clusters, r, scale_room, scale_len, shallow_first)
    usable = pathmin > 0  # channels with room on every link (for good once they have none)
    for index, v in enumerate(roots):
        score_of.add_class()
        for t in hood.rank_cluster[hood.rank_ptr[v] : hood.rank_ptr[v + 1]].tolist():
            score_of.entered(index, t)
    while heap:
        size, i = heapq.heappop(heap)
        ins = inside[i]
        # ``again`` weighs more than the rest of the score together: a candidate entering no
        # neighbourhood entered yet, if there is one, beats every other
        cand = (first[i] & usable).nonzero()[0] if completion is None else np.zeros(0, dtype=np.int64)
        fresh_only = cand.size > 0
        if not fresh_only:
            cand = (frontier[i] & usable).nonzero()[0]
            if cand.size == 0:
                return None
        score = score_of(i, cand, pathmin, room, fresh_only)
        if completion is None:
            c = int(cand[score.argmin()])
        else:
            for c in cand[np.argsort(score, kind="stable")].tolist():
                amount = 1 if shallow_first else min(mult[i], int(pathmin[c]))
                path = ids[ptr[c] : ptr[c + 1]]
                kept = completion.keeps(room, path, amount, i, int(dst[c]), inside, mult)
                if kept is None:
                    return None  # out of budget
                if kept:
                    break
            else:
                return None
        amount = 1 if shallow_first else min(mult[i], int(pathmin[c]))  # shallow: trees part ways
        if amount < mult[i]:  # the channel has room for only some of the class: split it
            j = add_class(
                root_of[i],
                mult[i] - amount,
                ins.copy(),
                depth[i].copy(),
                parent[i].copy(),
                entered[i].copy(),
                frontier[i].copy(),
                first[i].copy(),
            )
            score_of.add_class(i)
            heapq.heappush(heap, (size, j))
            mult[i] = amount
        v = int(dst[c])
        ins[v] = True
        front, fresh = frontier[i], first[i]
        into = by_dst[dst_ptr[v] : dst_ptr[v + 1]]
        front[into] = False
        fresh[into] = False
        depth[i][v] = depth[i][src[c]] + 1
        parent[i][v] = c
        reached = hood.rank_cluster[hood.rank_ptr[v] : hood.rank_ptr[v + 1]]
        ent = entered[i]
        score_of.arrived(i, v, int(depth[i][v]))
        for t in reached.tolist():
            if not ent[t + 1]:  # its channels now enter a neighbourhood entered
                ent[t + 1] = True
                fresh[by_top[top_ptr[t] : top_ptr[t + 1]]] = False
                score_of.entered(i, t)
        lo, hi = src_ptr[v], src_ptr[v + 1]
        out = by_src[lo:hi]
        outside = ~ins[dst_by_src[lo:hi]]
        front[out] = outside
        fresh[out] = outside & ~ent[top_by_src[lo:hi]]
        path = ids[ptr[c] : ptr[c + 1]]
        if mirror is not None:
            path = np.concatenate((path, mirror[path]))
        room[path] -= amount
        for x in path.tolist():  # room only shrinks: a channel's narrowest is at most this link's
            users = link_channels[link_ptr[x] : link_ptr[x + 1]]
            pathmin[users] = np.minimum(pathmin[users], room[x])
            if room[x] <= 0:
                usable[users] = False
        if size + 1 < r:
            heapq.heappush(heap, (size + 1, i))
    return [TreeClass(root_of[i], mult[i], parent[i], depth[i]) for i in range(len(mult))]


class _Scores:
    """The scores `grow` ranks a class's candidate channels by, lowest best, as whole numbers:
    with ``again`` (the channel enters a neighbourhood the class has entered: 0 or 1), ``near``
    (its source's depth in the class), ``tight`` (S − 1 − the room left on its path, S = the most
    room + 2), ``crowded`` (S − 1 − the room left on its last link) and its ``length`` (links;
    L = the longest + 1): ((again·S + tight)·R + near)·L + length, or, ``shallow``,
    (((again·R + near)·S + tight)·S + crowded)·L + length. Expanded, each is again·A + near·B −
    room·P − last room·Q + a constant per channel, so a class keeps again·A per neighbourhood and
    near·B per rank in two small tables and a scan is a few gathers and sums; the same integers."""

    def __init__(
        self, channels: PathChannels, top: np.ndarray, clusters: int, r: int, scale_room: int, scale_len: int, shallow: bool
    ):
        s, el = scale_room, scale_len
        if shallow:
            self.w_again, self.w_near, self.w_room, self.w_last = r * s * s * el, s * s * el, s * el, el
            self.base = (s - 1) * s * el + (s - 1) * el + channels.path_length
        else:
            self.w_again, self.w_near, self.w_room, self.w_last = s * r * el, el, r * el, 0
            self.base = (s - 1) * r * el + channels.path_length
        if (2 * r * s * s * el + 1) >= 1 << 62:
            raise ValueError("tree growth scores would overflow 64-bit integers")
        self.top = top + 1  # 0: no neighbourhood
        self.src = channels.src
        self.last = channels.link_ids[channels.link_ptr[1:] - 1]
        self.clusters = clusters + 1
        self.r = r
        self.near_terms: list[np.ndarray] = []  # per class: near·B of every rank inside
        self.again_terms: list[np.ndarray] = []  # per class: again·A of every neighbourhood (+1)

    def add_class(self, like: int | None = None) -> None:
        """A new class: empty, or a copy of class ``like`` (split off it)."""
        if like is None:
            self.near_terms.append(np.zeros(self.r, dtype=np.int64))
            self.again_terms.append(np.zeros(self.clusters, dtype=np.int64))
        else:
            self.near_terms.append(self.near_terms[like].copy())
            self.again_terms.append(self.again_terms[like].copy())

    def arrived(self, i: int, v: int, depth: int) -> None:
        """Class i reached rank v at ``depth``."""
        self.near_terms[i][v] = depth * self.w_near

    def entered(self, i: int, t: int) -> None:
        """Class i entered neighbourhood t."""
        self.again_terms[i][t + 1] = self.w_again

    def __call__(self, i: int, cand: np.ndarray, pathmin: np.ndarray, room: np.ndarray, fresh: bool = False) -> np.ndarray:
        """Class i's scores of the channels ``cand`` (``fresh``: all of them enter no neighbourhood
        the class entered, so their again term is 0)."""
        score = self.near_terms[i][self.src[cand]] + self.base[cand]
        if not fresh:
            score += self.again_terms[i][self.top[cand]]
        score -= pathmin[cand] * self.w_room
        if self.w_last:
            score -= room[self.last[cand]] * self.w_last
        return score


@dataclass
class CheckBudget:
    """Work that checked growth (`grow` with ``checked``) may still do: every max-flow call costs
    the arcs of its network. A cap in work, not seconds, so the trees found are the same on every
    machine."""

    work: int


class _Completion:
    """Edmonds' cut condition for completing a root's partly grown trees (`grow` with
    ``checked``), as in `grow_exact` but through switches: with R_j the ranks class j (μ_j trees)
    reaches and the units left on every link, every node set X holding a rank but not the root
    must be entered by at least Σ μ_j over the classes with X ∩ R_j = ∅ units. In the network with
    a node per class (root → class μ_j, class → every rank of R_j unbounded) that is a max-flow of
    k from the root to every rank; ranks that every class reaches need no flow, and a rank that
    passed clears the sets holding it for the later ones (Hao and Orlin's sink sequence). A
    necessary condition (trees through a switch cannot copy there), so growth checked by it can
    still get stuck, but it never spends the last unit a tight cut needs."""

    def __init__(self, topology: Topology, root: int, k: int, budget: CheckBudget):
        self.budget = budget
        r, n = topology.num_ranks, topology.num_nodes
        self.r, self.n, self.k, self.root = r, n, k, root
        self.num_links = len(topology.links)
        arcs = [(link.src, link.dst) for link in topology.links]
        arcs += [(root, n + j) for j in range(k)]  # a class has at least one tree: at most k
        arcs += [(n + j, v) for j in range(k) for v in range(r)]
        arcs += [(root, v) for v in range(r)]
        self.net = FlowNetwork(n + k, arcs)
        self.order = [v for v in _near_first(topology, (root,)) if v != root]
        self.big = float(k * (r + 1) + int(topology.bandwidth_array.size) * k)

    def keeps(self, room: np.ndarray, path: np.ndarray, amount: int, i: int, v: int, inside: list, mult: list) -> bool | None:
        """Whether class ``i`` taking ``amount`` of its trees over ``path`` into rank ``v`` (the
        rest of the class, if any, parting from it) keeps the condition; None when the budget
        ran out."""
        caps_room = room.astype(np.float64)
        caps_room[path] -= amount
        sets = [(mult[j], inside[j]) for j in range(len(mult)) if j != i]
        grown = inside[i].copy()
        grown[v] = True
        sets.append((amount, grown))
        if amount < mult[i]:
            sets.append((mult[i] - amount, inside[i]))
        if len(sets) > self.k:
            return True  # not reached: a class holds at least one tree
        r, big = self.r, self.big
        class_caps = [0.0] * self.k
        member = [0.0] * (self.k * r)
        everywhere = np.ones(r, dtype=bool)
        for j, (m, ins) in enumerate(sets):
            class_caps[j] = float(m)
            member[j * r : (j + 1) * r] = np.where(ins, big, 0.0).tolist()
            everywhere &= ins
        clear = [big if everywhere[w] else 0.0 for w in range(r)]
        caps = caps_room.tolist() + class_caps + member
        need = self.k - 0.5
        for w in self.order:
            if everywhere[w]:
                continue
            if self.budget.work <= 0:
                return None
            self.budget.work -= len(self.net.arcs)
            if self.net.max_flow(caps + clear, self.root, w, limit=need).value < need:
                return False
            clear[w] = big
        return True


def shallow_trees(channels: PathChannels, roots: tuple[int, ...]) -> list[TreeClass]:
    """One breadth-first tree per root over the channels, fewest hops first (ties: the widest,
    then the fewest links): what small messages want, regardless of how links are shared. A level
    at a time: the ranks of the level in the order they were reached, each one's channels in that
    order, and a rank not reached yet takes the first channel into it."""
    topo = channels.topology
    r = topo.num_ranks
    order = np.lexsort((channels.path_length, -channels.bottleneck, channels.src))
    src_sorted = channels.src[order]
    dst_sorted = channels.dst[order]
    starts = np.searchsorted(src_sorted, np.arange(r + 1))
    out = []
    for root in roots:
        parent = np.full(r, -1, dtype=np.int64)
        depth = np.full(r, -1, dtype=np.int64)
        depth[root] = 0
        frontier = np.array([root], dtype=np.int64)
        level = 0
        while frontier.size:
            lo, lens = starts[frontier], starts[frontier + 1] - starts[frontier]
            at = np.repeat(lo - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
            reached = dst_sorted[at]
            new = depth[reached] < 0
            at, reached = at[new], reached[new]
            _, first = np.unique(reached, return_index=True)
            first.sort()
            frontier = reached[first]
            level += 1
            depth[frontier] = level
            parent[frontier] = order[at[first]]
        out.append(TreeClass(root, 1, parent, depth))
    return out


# ============================================================================ the packer
def pack(
    topology: Topology,
    kind: Kind,
    root: int | None = None,
    *,
    tolerance: float = 0.01,
    max_trees: int = 16,
) -> Packing:
    """Trees reaching the optimal rate of ``kind`` (allgather or broadcast from ``root``) within
    ``tolerance``, with as few trees per root as possible (cached on the topology)."""
    return packings(topology, kind, root, tolerance=tolerance, max_trees=max_trees)[0]


def packings(
    topology: Topology,
    kind: Kind,
    root: int | None = None,
    *,
    tolerance: float = 0.01,
    max_trees: int = 16,
    variants: bool = True,
) -> tuple[Packing, ...]:
    """Packings within ``tolerance`` of the optimal rate: first the one with the fewest trees per
    root (most room first), then, with ``variants``, shallower ones (nearest the root first, with
    as many and twice as many trees) where they succeed. When growth fails within the tolerance,
    a broadcast through switches on at most `CHECK_MAX_RANKS` ranks tries growth checked by the
    cut condition (`grow` with ``checked``, within `CHECK_WORK`), then the rate losses of
    `FALLBACK_SLACK` are tried in turn (the packing says what rate it reaches); empty-handed, the
    breadth-first trees. Cached on the topology."""
    key = ("packings", kind, root, tolerance, max_trees, variants)
    cache = topology.__dict__.setdefault("_packings", {})
    if key in cache:
        return cache[key]
    channels = channels_for(topology)
    roots = tuple(range(topology.num_ranks)) if kind is Kind.ALLGATHER else (int(root or 0),)
    optimum = optimal_rate(topology, kind, root)
    found: list[Packing] = []
    if topology.num_ranks == 1:
        classes = grow(channels, np.zeros(0, dtype=np.int64), roots, 1) or []
        found.append(Packing(kind, roots, tuple(classes), 1, 1.0, 1.0, "throughput"))

    def attempt(k: int, shallow_first: bool, slack: float, checked: CheckBudget | None = None) -> Packing | None:
        for unit in candidate_units(topology, optimum, k, slack):
            units = link_units(topology, unit)
            if not feasible(topology, units, k, roots):
                continue
            if checked is None:
                classes = grow(channels, units, roots, k, shallow_first)
                if classes is None and kind is Kind.BROADCAST and topology.num_ranks <= EXACT_MAX_RANKS:
                    classes = grow_exact(topology, units, roots[0], k)  # switchless: exact where greedy is stuck
            else:
                classes = grow(channels, units, roots, k, shallow_first, checked=checked)
            if classes is not None:
                return Packing(kind, roots, tuple(classes), k, unit, optimum, "throughput")
        return None

    # within tolerance if growth succeeds there; else, for a broadcast through switches, growth
    # checked by the cut condition (within a budget of max-flows); else with more and more slack
    checks = kind is Kind.BROADCAST and topology.num_ranks < topology.num_nodes and topology.num_ranks <= CHECK_MAX_RANKS
    budget = CheckBudget(CHECK_WORK) if checks else None
    first_k, first_checked = None, None
    for slack in sorted({tolerance, *FALLBACK_SLACK}):
        if found or slack < tolerance:
            continue
        for checked in (None, budget) if budget is not None else (None,):
            for k in range(1, max_trees + 1):
                result = attempt(k, False, slack, checked)
                if result is not None:
                    found.append(result)
                    first_k, first_checked = k, checked
                    break
            if found or (budget is not None and budget.work <= 0):
                break
    if variants and first_k is not None:
        slack = 1 - found[0].rate_gbps / optimum + 1e-12
        for k in sorted({first_k, min(max_trees, 2 * first_k)}):
            result = attempt(k, True, max(tolerance, slack))
            if result is None and first_checked is not None:
                result = attempt(k, True, max(tolerance, slack), first_checked)
            if result is not None and result.height < min(p.height for p in found):
                found.append(result)
    if not found:
        # nothing within tolerance: the breadth-first trees, at the rate their sharing allows
        found.append(shallow_packing(topology, kind, roots, shallow_trees(channels, roots), optimum))
    cache[key] = tuple(found)
    return cache[key]


def shallow_packing(topology: Topology, kind: Kind, roots: tuple[int, ...], classes: list[TreeClass], optimum: float) -> Packing:
    """A packing of the breadth-first trees: the unit is what the most shared link allows."""
    channels = channels_for(topology)
    load = np.zeros(len(topology.links), dtype=np.int64)
    for cls in classes:
        used = cls.parent[cls.parent >= 0]
        for c in used.tolist():
            load[channels.links(c)] += cls.multiplicity
    used = load > 0
    unit = float((topology.bandwidth_array[used] / load[used]).min()) if used.any() else optimum
    return Packing(kind, roots, tuple(classes), 1, unit, optimum, "shallow")


def shallow(topology: Topology, kind: Kind, root: int | None = None) -> Packing:
    """The breadth-first trees (one per root) as a packing (cached on the topology)."""
    key = ("shallow", kind, root)
    cache = topology.__dict__.setdefault("_packings", {})
    if key not in cache:
        channels = channels_for(topology)
        roots = tuple(range(topology.num_ranks)) if kind is Kind.ALLGATHER else (int(root or 0),)
        cache[key] = shallow_packing(topology, kind, roots, shallow_trees(channels, roots), optimal_rate(topology, kind, root))
    return cache[key]


# ============================================================================ exact growth
#: switchless broadcasts of at most this many ranks get the exact growth when the greedy one fails
EXACT_MAX_RANKS = 96
#: arc-disjoint shallow trees tried for small broadcasts (`disjoint`)
DISJOINT_MAX_TREES = 4


def grow_exact(topology: Topology, units: np.ndarray, root: int, k: int) -> list[TreeClass] | None:
    """k arc-disjoint spanning arborescences from ``root`` within the link ``units`` on a machine
    without switches (every channel a direct link), by Lovász's construction: the trees grow one
    arc at a time, breadth-first and round-robin, and an arc is kept only if the trees can still be
    completed, which Edmonds' theorem with root sets decides: with R_i the ranks tree i reaches and
    the used arcs' units taken away, every set X of ranks without the root must still be entered by
    at least |{i : X ∩ R_i = ∅}| units. In the network with a node s_i per tree (root → s_i one
    unit, s_i → every rank of R_i unbounded) that is a max-flow of k from the root to every rank.
    Exact where the units pass `feasible`, so it succeeds where the greedy `grow` gets stuck; None
    where the machine has switches or the units do not pass."""
    r = topology.num_ranks
    if topology.num_nodes != r or r < 2:
        return None
    channels = channels_for(topology)
    chan_of = {(int(s), int(d)): i for i, (s, d) in enumerate(zip(channels.src.tolist(), channels.dst.tolist(), strict=True))}
    links = topology.links
    # aux network: ranks 0..r-1, tree nodes r..r+k-1
    arcs = [(link.src, link.dst) for link in links]
    arcs += [(root, r + i) for i in range(k)]
    arcs += [(r + i, v) for i in range(k) for v in range(r)]
    arcs += [(root, v) for v in range(r)]
    net = FlowNetwork(r + k, arcs)
    big = float(k * r + 1)
    room = [float(u) for u in units.tolist()]
    inside = [np.zeros(r, dtype=bool) for _ in range(k)]
    parent = [np.full(r, -1, dtype=np.int64) for _ in range(k)]
    depth = [np.full(r, -1, dtype=np.int64) for _ in range(k)]
    for i in range(k):
        inside[i][root] = True
        depth[i][root] = 0

    def enough(sinks) -> bool:
        """Every set of ranks without the root holding one of ``sinks`` is entered by enough units
        (a sink that passed clears the sets holding it for the later ones)."""
        caps = room + [1.0] * k
        caps += [big if inside[i][v] else 0.0 for i in range(k) for v in range(r)]
        clear = [0.0] * r
        for v in sinks:
            result = net.max_flow(caps + clear, root, v, limit=k - 0.5)
            if result.value < k - 0.5:
                return False
            clear[v] = big
        return True

    if not enough([v for v in _near_first(topology, (root,)) if v != root]):
        return None
    out_of = [[(link.dst, j) for j, link in enumerate(links) if link.src == u] for u in range(r)]
    reached = [1] * k
    while min(reached) < r:
        i = int(np.argmin(reached))
        # arcs out of tree i, shallowest source first, then the most room, then the lowest ids
        cands = sorted(
            (int(depth[i][u]), -room[j], u, v, j)
            for u in np.flatnonzero(inside[i]).tolist()
            for v, j in out_of[u]
            if not inside[i][v] and room[j] >= 1
        )
        for d, _, u, v, j in cands:
            room[j] -= 1
            inside[i][v] = True
            if enough([v]):  # only sets holding v lost a unit without losing a tree's demand
                parent[i][v] = chan_of[(u, v)]
                depth[i][v] = d + 1
                reached[i] += 1
                break
            room[j] += 1
            inside[i][v] = False
        else:
            return None
    return [TreeClass(root, 1, parent[i], depth[i]) for i in range(k)]


def disjoint(topology: Topology, kind: Kind, root: int | None = None) -> tuple[Packing, ...]:
    """Arc-disjoint shallow trees for small broadcasts on a machine without switches: for k = 2 …
    `DISJOINT_MAX_TREES` (at most the root's links), k trees from the root, each link of the
    widest rate carrying at most one (narrower links none), grown exactly (`grow_exact`,
    breadth-first). With one chunk per tree each step moves k chunks over k different links, so
    the message crosses the diameter in about as many steps as one breadth-first tree takes, but
    each step carries 1/k of it: two trees of height 6 on a 6 × 5 × 3 torus take 6 (α + n/2B)
    where one takes 6 (α + n/B). Empty elsewhere. Cached on the topology."""
    key = ("disjoint", kind, root)
    cache = topology.__dict__.setdefault("_packings", {})
    if key in cache:
        return cache[key]
    found: list[Packing] = []
    r = topology.num_ranks
    if kind is Kind.BROADCAST and topology.num_nodes == r and 2 < r <= EXACT_MAX_RANKS:
        root = int(root or 0)
        unit = float(topology.bandwidth_array.max())
        units = link_units(topology, unit)
        degree = sum(1 for link in topology.links if link.src == root and units[topology.link_index[(link.src, link.dst)]] > 0)
        optimum = optimal_rate(topology, kind, root)
        for k in range(2, min(degree, DISJOINT_MAX_TREES) + 1):
            classes = grow_exact(topology, units, root, k)
            if classes is None:
                break
            found.append(Packing(kind, (root,), tuple(classes), k, unit, optimum, "disjoint"))
    cache[key] = tuple(found)
    return cache[key]
