"""Symmetries of a topology that shrink the ILP: groups of automorphisms acting freely on ranks.

An *automorphism* of a topology is a permutation of its nodes that maps ranks to ranks, switches to
switches and every directed link onto a link with the same bandwidth and latency. If a collective
is invariant under a group G of automorphisms (allgather: rank r's piece goes where r goes), then
for any valid schedule its image under g ∈ G is valid and costs the same. Restricting the ILP to
*G-invariant* schedules (the routing of one chunk determines the routing of its whole orbit) keeps
every solution valid and divides the number of variables by |G|.

We look for groups that act **freely** on ranks (no element other than the identity fixes a rank):
then every chunk of an allgather or alltoall lies in an orbit of exactly |G| chunks, one routing
per orbit is a free choice, and nothing forces a chunk to be routed "symmetrically to itself" (which
a stabilizer would do, e.g. force a chunk to be sent to all of a box at once). The search is
deterministic:

1. candidate automorphisms from the machine's structure: the rotation along the file's rank order
   (NVSwitch boxes), the rotation along the ring order, the rotation of each host's ranks (the same
   in every host) and the rotation of identical hosts, each completed to the switches by a VF2
   search with the ranks fixed;
2. when those do not already give a group with a single rank orbit, the first automorphisms of a
   bounded VF2 enumeration on small machines (the DGX-1, whose weighted hybrid cube-mesh has 4;
   two DGX-1 boxes, 32);
3. a greedy closure: starting from each free candidate, add candidates while the generated group
   still acts freely on the ranks; keep the largest group found.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import networkx as nx
import numpy as np
from networkx.algorithms.isomorphism import DiGraphMatcher

from synth.routing import ring_order
from synth.topology import Topology

#: How many automorphisms the VF2 enumeration looks at (deterministic order), and the largest
#: machine (nodes) it is tried on: VF2 on big symmetric fabrics spends its time on near-identity
#: permutations that fix ranks, which the structural candidates already cover.
ENUMERATION_LIMIT = 2000
ENUMERATION_MAX_NODES = 40


@dataclass(frozen=True)
class SymmetryGroup:
    """A group of topology automorphisms acting freely on the ranks.

    ``node_perms[g]`` maps node ids (ranks then switches); ``link_perms[g]`` maps link ids
    (link ℓ = (u, v) goes to the link (g u, g v)). Element 0 is the identity.
    """

    node_perms: np.ndarray
    link_perms: np.ndarray

    @property
    def order(self) -> int:
        return int(self.node_perms.shape[0])

    @cached_property
    def num_ranks(self) -> int:
        # ranks are mapped among themselves; the caller knows the count, but keep the group
        # self-contained for orbit queries
        return int(self.node_perms.shape[1])

    def rank_orbit_representatives(self, num_ranks: int) -> list[int]:
        """The smallest rank of each orbit, ascending."""
        seen = np.zeros(num_ranks, dtype=bool)
        reps = []
        for r in range(num_ranks):
            if not seen[r]:
                reps.append(r)
                seen[self.node_perms[:, r]] = True
        return reps

    def element_mapping(self, rep: int, rank: int) -> int:
        """The unique element g with g(rep) = rank (the action is free)."""
        hits = np.flatnonzero(self.node_perms[:, rep] == rank)
        if hits.size != 1:
            raise ValueError(f"rank {rank} is not in the orbit of {rep}")
        return int(hits[0])

    def describe(self, topology: Topology) -> str:
        if self.order == 1:
            return "none"
        reps = self.rank_orbit_representatives(topology.num_ranks)
        return f"order {self.order}, {len(reps)} rank orbit(s)"


def trivial_group(topology: Topology) -> SymmetryGroup:
    return SymmetryGroup(
        np.arange(topology.num_nodes, dtype=np.int64)[None, :], np.arange(len(topology.links), dtype=np.int64)[None, :]
    )


def _colored_graph(topology: Topology) -> nx.DiGraph:
    g = nx.DiGraph()
    for i in range(topology.num_nodes):
        g.add_node(i, kind="switch" if topology.is_switch(i) else "rank", pin=None)
    for link in topology.links:
        g.add_edge(link.src, link.dst, w=(link.bandwidth, link.latency))
    return g


def _edge_match(a: dict, b: dict) -> bool:
    return a["w"] == b["w"]


def _extend(topology: Topology, rank_perm: Sequence[int]) -> np.ndarray | None:
    """Complete a permutation of the ranks to an automorphism (switch images found by VF2), or
    None if there is none."""
    n, r = topology.num_nodes, topology.num_ranks
    g1 = _colored_graph(topology)
    g2 = _colored_graph(topology)
    for i in range(r):
        g1.nodes[i]["pin"] = i
        g2.nodes[rank_perm[i]]["pin"] = i
    # cheap necessary check on rank-to-rank links before the search
    index = topology.link_index
    for link in topology.links:
        if link.src < r and link.dst < r:
            other = index.get((rank_perm[link.src], rank_perm[link.dst]))
            if (
                other is None
                or topology.links[other].bandwidth != link.bandwidth
                or topology.links[other].latency != link.latency
            ):
                return None
    matcher = DiGraphMatcher(
        g1, g2, node_match=lambda a, b: a["kind"] == b["kind"] and a["pin"] == b["pin"], edge_match=_edge_match
    )
    for mapping in matcher.isomorphisms_iter():
        perm = np.empty(n, dtype=np.int64)
        for u, v in mapping.items():
            perm[u] = v
        return perm
    return None


def _rotation(order: Sequence[int], shift: int, num_ranks: int) -> list[int]:
    perm = list(range(num_ranks))
    m = len(order)
    for i, rank in enumerate(order):
        perm[rank] = order[(i + shift) % m]
    return perm


def _structural_candidates(topology: Topology) -> Iterable[list[int]]:
    """Rank permutations suggested by the machine's structure (rotations of orders, hosts)."""
    r = topology.num_ranks
    orders = [list(range(r))]
    ring, ok = ring_order(topology)
    if ok and ring not in orders:
        orders.append(ring)
    for order in orders:
        yield _rotation(order, 1, r)
    groups = [g for g in topology.host_groups.values()]
    if len(groups) > 1 and len({len(g) for g in groups}) == 1:
        size = len(groups[0])
        # rotate identical hosts: the i-th rank of host h goes to the i-th rank of host h + 1
        perm = list(range(r))
        for h, group in enumerate(groups):
            nxt = groups[(h + 1) % len(groups)]
            for i in range(size):
                perm[group[i]] = nxt[i]
        yield perm
        # rotate every host's ranks by one, in file order, the same in every host
        perm = list(range(r))
        for group in groups:
            for i in range(size):
                perm[group[i]] = group[(i + 1) % size]
        yield perm


def _enumerated(topology: Topology, limit: int) -> Iterable[np.ndarray]:
    g = _colored_graph(topology)
    matcher = DiGraphMatcher(g, g, node_match=lambda a, b: a["kind"] == b["kind"], edge_match=_edge_match)
    n = topology.num_nodes
    for count, mapping in enumerate(matcher.isomorphisms_iter()):
        if count >= limit:
            return
        perm = np.empty(n, dtype=np.int64)
        for u, v in mapping.items():
            perm[u] = v
        yield perm


def _closure(generators: list[np.ndarray], num_ranks: int, limit: int) -> list[np.ndarray] | None:
    """All products of the generators, or None if some non-identity element fixes a rank or the
    group grows beyond ``limit`` elements."""
    n = generators[0].size
    identity = np.arange(n, dtype=np.int64)
    elements = {identity.tobytes(): identity}
    frontier = [identity]
    while frontier:
        nxt = []
        for e in frontier:
            for gen in generators:
                prod = gen[e]
                key = prod.tobytes()
                if key in elements:
                    continue
                if np.any(prod[:num_ranks] == np.arange(num_ranks)):
                    return None
                elements[key] = prod
                if len(elements) > limit:
                    return None
                nxt.append(prod)
        frontier = nxt
    return sorted(elements.values(), key=lambda p: tuple(p))


def _is_free(perm: np.ndarray, num_ranks: int) -> bool:
    """The cyclic group of ``perm`` acts freely on ranks: every rank cycle has the same length."""
    seen = np.zeros(num_ranks, dtype=bool)
    lengths = set()
    for r in range(num_ranks):
        if seen[r]:
            continue
        length, x = 0, r
        while not seen[x]:
            seen[x] = True
            x = int(perm[x])
            length += 1
        lengths.add(length)
    return len(lengths) == 1 and lengths != {1}


def _greedy_group(candidates: list[np.ndarray], num_nodes: int, num_ranks: int) -> list[np.ndarray]:
    """From each candidate in turn, add the others while the group stays free on ranks; the
    largest group found (the identity alone if there is no candidate)."""
    best: list[np.ndarray] = [np.arange(num_nodes, dtype=np.int64)]
    for start in range(len(candidates)):
        gens = [candidates[start]]
        group = _closure(gens, num_ranks, num_ranks)
        if group is None:
            continue
        for other in candidates:
            if any(np.array_equal(other, e) for e in group):
                continue
            bigger = _closure([*gens, other], num_ranks, num_ranks)
            if bigger is not None:
                gens.append(other)
                group = bigger
        if len(group) > len(best):
            best = group
        if len(best) == num_ranks:
            break
    return best


def find_symmetry(topology: Topology, *, enumeration_limit: int = ENUMERATION_LIMIT) -> SymmetryGroup:
    """The largest group acting freely on the ranks that the search above finds (deterministic)."""
    r = topology.num_ranks
    if r < 2:
        return trivial_group(topology)
    candidates: list[np.ndarray] = []
    keys: set[bytes] = set()

    def add(perm: np.ndarray | None) -> None:
        if perm is not None and _is_free(perm, r) and perm.tobytes() not in keys:
            keys.add(perm.tobytes())
            candidates.append(perm)

    for rank_perm in _structural_candidates(topology):
        add(_extend(topology, rank_perm))
    best = _greedy_group(candidates, topology.num_nodes, r)
    if len(best) < r and topology.num_nodes <= ENUMERATION_MAX_NODES:
        for perm in _enumerated(topology, enumeration_limit):
            add(perm)
        best = _greedy_group(candidates, topology.num_nodes, r)
    node_perms = np.array(best, dtype=np.int64)
    index = topology.link_index
    link_perms = np.array(
        [[index[(int(p[link.src]), int(p[link.dst]))] for link in topology.links] for p in node_perms], dtype=np.int64
    )
    return SymmetryGroup(node_perms, link_perms)
