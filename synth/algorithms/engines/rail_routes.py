"""Network routes chosen per transfer, so parallel transfers spread over parallel paths.

The router (`synth.routing.Router`) gives every rank pair one route: the widest, ties broken by a
hash as ECMP does. That is right for one transfer, not for many that cross the network together:
the eight rails of a host sending to the next host of a broadcast tree all hash onto one route of
the same pair of top-of-rack switches on some fat-trees (a spine uplink then carries eight rails'
chunks while the other idles), and an accelerator with three scale-out ports on three leaf switches
(a Gaudi box) reaches its peer over three routes of which the router uses one, a third of its
bandwidth.

`RouteBalancer` knows, for a pair of ranks, every fewest-hop path of least latency whose inner
nodes are switches (up to `MAX_PATHS`), and hands each transfer the path whose busiest link would
carry the least after it, counting the transfers it already placed (greedy least-loaded
assignment, in link time: load / bandwidth). `ports` counts how many such paths leave a rank over
different links: a transfer cut into that many pieces uses every port.

`lower_routed` turns logical steps whose transfers carry a route id (or -1: the router's route)
into a schedule, dropping a transfer to a rank that already holds the chunk, as
`synth.algorithms.engines.lowering.lower_copies` does (it needs every pair to have a switch-only
route: no relays).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from synth.collective import Collective
from synth.routing import Router
from synth.schedule import OP_COPY, Schedule, ScheduleBuilder
from synth.topology import Topology

#: paths kept per rank pair
MAX_PATHS = 16
#: (rank, chunk) holder entries tracked at most (beyond, the caller lowers without named paths)
DENSE_LIMIT = 64 * 2**20

RoutedStep = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # src, dst, chunk, via index (-1: router)


def switch_paths(topology: Topology, a: int, b: int, limit: int = MAX_PATHS) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(switch node ids, link ids) of the fewest-hop paths from rank ``a`` to rank ``b`` through
    switches only, the least-latency ones among them (at most ``limit``, in a fixed order)."""
    links = topology.links
    out_links = topology.out_links
    dist = {a: 0}
    frontier = [a]
    while frontier and b not in dist:
        following = []
        for node in frontier:
            if node != a and not topology.is_switch(node):
                continue
            for lid in out_links[node]:
                nxt = links[lid].dst
                if nxt not in dist and (topology.is_switch(nxt) or nxt == b):
                    dist[nxt] = dist[node] + 1
                    following.append(nxt)
        frontier = following
    if b not in dist or dist[b] < 2:
        return []
    # walk forward along the distance layers (only nodes on some shortest path to b: checked at the end)
    paths: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    stack: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = [(a, (), ())]
    budget = 64 * limit
    while stack and budget > 0:
        node, via, used = stack.pop()
        budget -= 1
        if node == b:
            paths.append((via, used))
            continue
        for lid in reversed(out_links[node]):
            nxt = links[lid].dst
            if dist.get(nxt) != dist[node] + 1 or nxt in via:
                continue
            if nxt == b:
                stack.append((b, via, (*used, lid)))
            elif topology.is_switch(nxt) and dist[nxt] < dist[b]:
                stack.append((nxt, (*via, nxt), (*used, lid)))
    if not paths:
        return []
    latency = [sum(links[lid].latency for lid in used) for _, used in paths]
    least = min(latency)
    return [p for p, lat in zip(paths, latency) if lat <= least + 1e-9][:limit]


class RouteBalancer:
    """Least-loaded choice among a pair's parallel paths (see the module docstring)."""

    def __init__(self, topology: Topology, paths: dict | None = None):
        """``paths``: a cache of pair paths shared between balancers of one topology (each
        balancer counts its own load)."""
        self.topology = topology
        self.load = np.zeros(len(topology.links))
        self.bandwidth = np.asarray([link.bandwidth for link in topology.links], dtype=np.float64)
        self._paths: dict[tuple[int, int], list[tuple[tuple[int, ...], tuple[int, ...]]]] = {} if paths is None else paths
        self.vias: list[tuple[str, ...]] = []
        self._via_index: dict[tuple[int, ...], int] = {}

    def paths(self, a: int, b: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        key = (a, b)
        found = self._paths.get(key)
        if found is None:
            found = self._paths[key] = switch_paths(self.topology, a, b)
        return found

    def ports(self, a: int, b: int) -> int:
        """How many of the pair's paths leave ``a`` over different links."""
        return len({used[0] for _, used in self.paths(a, b)})

    def choose(self, a: int, b: int, weight: float = 1.0) -> int:
        """Index (in ``vias``) of the path for one more transfer a → b of ``weight``, or -1 when
        the pair has no switch path (the router decides: a direct link or a relay)."""
        paths = self.paths(a, b)
        if not paths:
            return -1
        best, best_cost = 0, float("inf")
        for i, (_, used) in enumerate(paths):
            idx = np.asarray(used)
            cost = float(((self.load[idx] + weight) / self.bandwidth[idx]).max())
            if cost < best_cost - 1e-12:
                best, best_cost = i, cost
        via, used = paths[best]
        self.load[np.asarray(used)] += weight
        index = self._via_index.get(via)
        if index is None:
            index = self._via_index[via] = len(self.vias)
            self.vias.append(tuple(self.topology.node_name(n) for n in via))
        return index


def lower_routed(
    topology: Topology,
    collective: Collective,
    steps: Iterable[RoutedStep],
    vias: list[tuple[str, ...]],
    method: str,
    params: Mapping[str, Any] | None,
    router: Router,
) -> Schedule | None:
    """The schedule of logical steps whose transfers name their path (an index into ``vias``, or
    -1 for the router's route); None when some pair without a named path has no switch-only route
    (the caller lowers with relays instead)."""
    if collective.num_ranks * collective.num_chunks > DENSE_LIMIT:
        return None
    builder = ScheduleBuilder(collective, topology, method, params)
    ids = [builder.route_id(v) for v in vias]
    pair_ids: dict[tuple[int, int], int] = {}
    holds = collective.initial_holders()
    for src, dst, chunk, via in steps:
        if src.size == 0:
            continue
        fresh = ~holds[dst, chunk]
        _, first = np.unique(dst * collective.num_chunks + chunk, return_index=True)
        keep = np.zeros(src.size, dtype=bool)
        keep[first] = True
        keep &= fresh
        src, dst, chunk, via = src[keep], dst[keep], chunk[keep], via[keep]
        if src.size == 0:
            continue
        rid = np.empty(src.size, dtype=np.int64)
        for i, (a, b, v) in enumerate(zip(src.tolist(), dst.tolist(), via.tolist())):
            if v >= 0:
                rid[i] = ids[v]
                continue
            key = (a, b)
            if key not in pair_ids:
                names = router.via_names(a, b)
                if names is None:
                    return None
                pair_ids[key] = builder.route_id(names)
            rid[i] = pair_ids[key]
        builder.add_step_arrays(src, dst, chunk, OP_COPY, rid)
        holds[dst, chunk] = True
    return builder.build()
