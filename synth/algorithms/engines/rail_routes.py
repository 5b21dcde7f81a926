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

from synth.algorithms.engines.lowering import RouteTable
from synth.collective import Collective
from synth.routing import Router
from synth.schedule import OP_COPY, Schedule, ScheduleBuilder
from synth.topology import Topology

#: paths kept per rank pair
MAX_PATHS = 16
#: (rank, chunk) holder entries tracked at most (beyond, the caller lowers without named paths)
DENSE_LIMIT = 64 * 2**20

RoutedStep = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # src, dst, chunk, via index (-1: router)


class PathFinder:
    """Fewest-hop switch paths between ranks, with one breadth-first search per source rank and
    the paths read backwards from the destination along the search's layers."""

    def __init__(self, topology: Topology):
        self.topology = topology
        incoming: list[list[int]] = [[] for _ in range(topology.num_nodes)]
        for lid, link in enumerate(topology.links):
            incoming[link.dst].append(lid)
        self.in_links = incoming
        self._dist: dict[int, dict[int, int]] = {}
        self._paths: dict[tuple[int, int], list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}

    def distances(self, a: int) -> dict[int, int]:
        """Hops from rank ``a`` to every node it reaches through switches only (ranks are ends)."""
        found = self._dist.get(a)
        if found is not None:
            return found
        topology, links = self.topology, self.topology.links
        dist = {a: 0}
        frontier = [a]
        while frontier:
            following = []
            for node in frontier:
                if node != a and not topology.is_switch(node):
                    continue
                for lid in topology.out_links[node]:
                    nxt = links[lid].dst
                    if nxt not in dist:
                        dist[nxt] = dist[node] + 1
                        following.append(nxt)
            frontier = following
        self._dist[a] = dist
        return dist

    def paths(self, a: int, b: int, limit: int = MAX_PATHS) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """(switch node ids, link ids) of the fewest-hop paths from rank ``a`` to rank ``b``
        through switches only, the least-latency ones among them (at most ``limit``, in a fixed
        order); none when ``b`` is a direct neighbour or out of reach."""
        key = (a, b)
        found = self._paths.get(key)
        if found is None:
            found = self._paths[key] = self._find(a, b, limit)
        return found

    def _find(self, a: int, b: int, limit: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        topology, links = self.topology, self.topology.links
        dist = self.distances(a)
        if dist.get(b, 0) < 2:
            return []
        paths: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        # backwards from b: every step goes one layer closer to a, so every walk ends at a
        stack: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = [(b, (), ())]
        budget = 64 * limit
        while stack and budget > 0 and len(paths) < 4 * limit:
            node, via, used = stack.pop()
            budget -= 1
            for lid in sorted(self.in_links[node], reverse=True):
                prev = links[lid].src
                if dist.get(prev) != dist[node] - 1:
                    continue
                if prev == a:
                    paths.append((via, (lid, *used)))
                elif topology.is_switch(prev):
                    stack.append((prev, (prev, *via), (lid, *used)))
        if not paths:
            return []
        paths.sort()
        latency = [sum(links[lid].latency for lid in used) for _, used in paths]
        least = min(latency)
        return [p for p, lat in zip(paths, latency) if lat <= least + 1e-9][:limit]


def switch_paths(topology: Topology, a: int, b: int, limit: int = MAX_PATHS) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """`PathFinder.paths` for one pair."""
    return PathFinder(topology).paths(a, b, limit)


class RouteBalancer:
    """Least-loaded choice among a pair's parallel paths (see the module docstring)."""

    def __init__(self, topology: Topology, finder: PathFinder | None = None):
        """``finder``: the paths, shared between balancers of one topology (each balancer counts
        its own load)."""
        self.topology = topology
        self.load = np.zeros(len(topology.links))
        self.bandwidth = np.asarray([link.bandwidth for link in topology.links], dtype=np.float64)
        self.finder = finder or PathFinder(topology)
        self.vias: list[tuple[str, ...]] = []
        self._via_index: dict[tuple[int, ...], int] = {}

    def paths(self, a: int, b: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        return self.finder.paths(a, b)

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
    ids = np.asarray([builder.route_id(v) for v in vias] or [0], dtype=np.int64)
    pair_routes = RouteTable(topology, router, builder)
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
        named = via >= 0
        rid[named] = ids[via[named]]
        if not named.all():
            found = pair_routes.ids(src[~named], dst[~named])
            if (found < 0).any():
                return None
            rid[~named] = found
        builder.add_step_arrays(src, dst, chunk, OP_COPY, rid)
        holds[dst, chunk] = True
    return builder.build()
