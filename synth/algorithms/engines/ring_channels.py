"""Ring channels: several rings over all ranks that share the machine's links, as NCCL builds them.

NCCL runs a collective on several *channels* at once, each a ring (a cyclic order of all ranks)
carrying its own share of the data. On a DGX-1 it finds rings over NVLinks that together use every
NVLink; on an NVSwitch box any order works and the channels share the switch links; across hosts it
builds *rail-aligned* rings: each host contributes a chain of its GPUs, entered from the network at
one GPU and left at another, so different channels use different NICs.

`ring_channels` computes such a set for a topology. Its yardstick is the one that matters when every
channel carries the same amount of data: if a channel's hop a → b loads every link of its route with
one unit, the channels together sustain ``channels × min over links (bandwidth / load)`` GB/s. Among
the sets it tries it keeps the one with the highest total, and the fewest channels on ties (more
channels on the same bandwidth only cut the data into smaller chunks).

- One host (or hosts of unequal size): NCCL's search, simplified. For a per-channel speed s (each
  distinct route bandwidth divided by 1…4), rings are packed greedily: a ring may use a hop only if
  every link of its route still has s GB/s left, and each ring found takes s from them. The
  Hamiltonian-cycle search (`synth.routing`) tries the widest remaining hops first. On a DGX-1 this
  finds the six rings over single NVLinks (150 GB/s, every NVLink used once in each direction).
- Several hosts of equal size: every channel is a chain of local ranks, the same in every host,
  visited host after host; the hop from the last GPU of the chain in one host to the first GPU in
  the next host crosses the network. Candidate chains are the host's own rings cut open at any hop
  and, where every pair of local ranks has a switch-only route (NVSwitch, PCIe), any (entry, exit)
  pair; channels are added greedily, each time the candidate whose loads leave the smallest
  bottleneck (then the most even spread), as long as the total grows.

Searches stop at `MAX_CHANNELS` channels, and rank counts above `PACK_LIMIT` on one host fall back to
one ring (`synth.routing.ring_order`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from synth.routing import Router, hamiltonian_cycle, ring_order, router_for
from synth.schedule import Schedule, ScheduleBuilder
from synth.topology import Topology

MAX_CHANNELS = 8
PACK_LIMIT = 64
_SPEED_DIVISORS = (1, 2, 3, 4)
_PACK_BUDGET = 20_000
_EPS = 1e-9


@dataclass(frozen=True)
class RingChannels:
    """Rings (cyclic orders of all ranks), one per channel, and what they sustain together."""

    rings: tuple[tuple[int, ...], ...]
    channel_bandwidth: float  # GB/s each channel sustains when all carry equal shares
    relayed: bool  # some hop has no switch-only route and is relayed through ranks
    layout: str  # "single-host", "multi-host" or "fallback"
    #: per ring, per hop ``ring[i] → ring[i+1]``: the switch names to go through (None: relayed)
    routes: tuple[tuple[tuple[str, ...] | None, ...], ...] = ()

    @property
    def channels(self) -> int:
        return len(self.rings)

    @property
    def total_bandwidth(self) -> float:
        return self.channels * self.channel_bandwidth

    @property
    def same_order(self) -> bool:
        """True when every channel uses the same ring (NCCL's ``sameChannels``)."""
        return all(r == self.rings[0] for r in self.rings)

    def params(self) -> dict:
        return {
            "channels": self.channels,
            "rings": [list(r) for r in self.rings],
            "channel_bandwidth": round(self.channel_bandwidth, 6) if np.isfinite(self.channel_bandwidth) else None,
            "relayed": self.relayed,
            "layout": self.layout,
        }


class _Paths:
    """Link ids along the path of a hop between two ranks (its switch route, or the routes of a relay)."""

    def __init__(self, topology: Topology, router: Router):
        self.topology = topology
        self.router = router
        self._cache: dict[tuple[int, int], np.ndarray | None] = {}
        self._alternatives: dict[tuple[int, int], list[np.ndarray]] = {}

    def alternatives(self, a: int, b: int, limit: int = 8) -> list[np.ndarray]:
        """Up to ``limit`` switch-only paths a → b as good as the router's (same bottleneck and hop
        count), as link-id arrays, the router's own first. A fat-tree's spines give several."""
        key = (a, b)
        found = self._alternatives.get(key)
        if found is not None:
            return found
        best = self.route_links(a, b)
        if best is None:
            self._alternatives[key] = []
            return []
        route = self.router.route(a, b)
        topo = self.topology
        links = topo.links
        nranks = topo.num_ranks
        paths: list[np.ndarray] = [best]
        stack: list[tuple[int, list[int], frozenset[int]]] = [(a, [], frozenset({a}))]
        while stack and len(paths) < limit:
            node, used, visited = stack.pop()
            if len(used) >= route.hops:
                continue
            for li in reversed(topo.out_links[node]):
                link = links[li]
                nxt = link.dst
                if link.bandwidth < route.bottleneck or nxt in visited:
                    continue
                if nxt == b:
                    if len(used) + 1 == route.hops:
                        cand = np.array([*used, li], dtype=np.int64)
                        if not any(np.array_equal(cand, p) for p in paths):
                            paths.append(cand)
                elif nxt >= nranks:
                    stack.append((nxt, [*used, li], visited | {nxt}))
        self._alternatives[key] = paths
        return paths

    def via_names(self, links: np.ndarray) -> tuple[str, ...]:
        topo = self.topology
        return tuple(topo.node_name(topo.links[li].dst) for li in links[:-1])

    def route_links(self, a: int, b: int) -> np.ndarray | None:
        key = (a, b)
        if key not in self._cache:
            route = self.router.route(a, b)
            if route is None:
                self._cache[key] = None
            else:
                nodes = [a, *route.via, b]
                index = self.topology.link_index
                self._cache[key] = np.array([index[(u, v)] for u, v in itertools.pairwise(nodes)], dtype=np.int64)
        return self._cache[key]

    def hop_links(self, a: int, b: int) -> np.ndarray:
        links = self.route_links(a, b)
        if links is not None:
            return links
        relay = self.router.relay_path(a, b)
        return np.concatenate([self.route_links(u, v) for u, v in itertools.pairwise(relay)])

    def ring_load(self, ring) -> np.ndarray:
        load = np.zeros(len(self.topology.links), dtype=np.float64)
        n = len(ring)
        for i in range(n):
            np.add.at(load, self.hop_links(ring[i], ring[(i + 1) % n]), 1.0)
        return load


def channel_bandwidth(topology: Topology, load: np.ndarray) -> float:
    """GB/s per channel when the channels' hops put ``load`` units on each link."""
    used = load > 0
    if not np.any(used):
        return float("inf")
    return float(np.min(topology.bandwidth_array[used] / load[used]))


def ring_channels(topology: Topology, router: Router | None = None, max_channels: int = MAX_CHANNELS) -> RingChannels:
    """The ring channels for ``topology`` (cached on its router)."""
    router = router or router_for(topology)
    cache = router.__dict__.setdefault("_ring_channels", {})
    plan = cache.get(max_channels)
    if plan is None:
        plan = cache[max_channels] = _plan(topology, router, max_channels)
    return plan


def _channels_of(topology: Topology, paths: _Paths, rings, layout: str, chosen=None) -> RingChannels:
    """Package rings with their hop paths (``chosen[c][i]``: link ids, else the router's route or a
    relay) and the bandwidth they sustain together."""
    load = np.zeros(len(topology.links), dtype=np.float64)
    all_routes = []
    relayed = False
    for c, ring in enumerate(rings):
        n = len(ring)
        hops = []
        for i in range(n):
            a, b = ring[i], ring[(i + 1) % n]
            links = chosen[c][i] if chosen is not None else paths.route_links(a, b)
            if links is None:
                relayed = True
                hops.append(None)
                links = paths.hop_links(a, b)
            else:
                hops.append(paths.via_names(links))
            np.add.at(load, links, 1.0)
        all_routes.append(tuple(hops))
    return RingChannels(tuple(tuple(r) for r in rings), channel_bandwidth(topology, load), relayed, layout, tuple(all_routes))


def _plan(topology: Topology, router: Router, max_channels: int) -> RingChannels:
    paths = _Paths(topology, router)
    n = topology.num_ranks
    if n == 1:
        return RingChannels(((0,),), float("inf"), False, "single-host", ((),))
    groups = list(topology.host_groups.items())
    sizes = {len(ranks) for _, ranks in groups}
    if n > 2 and len(groups) > 1 and None not in dict(groups) and len(sizes) == 1:
        plan = _multi_host(topology, router, paths, [list(r) for _, r in groups], max_channels)
        if plan is not None:
            return plan
    if 2 < n <= PACK_LIMIT:
        rings = pack_rings(topology, router, list(range(n)), max_channels, paths)
        if rings:
            return _channels_of(topology, paths, rings, "single-host")
    order, _ = ring_order(topology, router)
    return _channels_of(topology, paths, [order], "single-host" if n <= 2 else "fallback")


def pack_rings(
    topology: Topology, router: Router, ranks: list[int], max_channels: int, paths: _Paths | None = None
) -> list[list[int]]:
    """Cyclic orders of ``ranks`` (each hop with a switch-only route) packed as NCCL packs channels:
    the set with the highest total bandwidth over per-channel speeds, fewest rings on ties. Empty
    if no such cycle is found."""
    paths = paths or _Paths(topology, router)
    n = len(ranks)
    if n == 1:
        return [list(ranks)]
    hops: list[tuple[int, int, np.ndarray]] = []
    widths: set[float] = set()
    bw = topology.bandwidth_array
    for i, a in enumerate(ranks):
        for j, b in enumerate(ranks):
            if i != j:
                links = paths.route_links(a, b)
                if links is not None:
                    hops.append((i, j, links))
                    widths.add(float(np.min(bw[links])))
    speeds = sorted({w / m for w in widths for m in _SPEED_DIVISORS}, reverse=True)
    best: tuple[float, int] | None = None
    best_rings: list[list[int]] = []
    for speed in speeds:
        if best is not None and speed * max_channels <= best[0] * (1 + _EPS):
            break
        residual = bw.astype(np.float64).copy()
        rings: list[list[int]] = []
        while len(rings) < max_channels:
            adj: list[dict[int, float]] = [{} for _ in range(n)]
            for i, j, links in hops:
                width = float(np.min(residual[links]))
                if width >= speed * (1 - _EPS):
                    # widest remaining first; among equals, the hop of the wider links (so a DGX-1
                    # fills its double NVLinks with whole rings before the single ones)
                    adj[i][j] = width + float(np.min(bw[links])) * 1e-6
            if any(not a for a in adj):
                break
            cycle = hamiltonian_cycle(n, adj, _PACK_BUDGET)
            if cycle is None:
                break
            ring = [ranks[i] for i in cycle]
            # the ring, then (if it still fits) the same ring backwards: on symmetric machines
            # rings come in pairs that load the two directions of the same links
            for candidate in (ring, ring[:1] + ring[1:][::-1]):
                hop_links = [paths.route_links(u, v) for u, v in zip(candidate, candidate[1:] + candidate[:1])]
                if len(rings) >= max_channels or any(
                    links is None or float(np.min(residual[links])) < speed * (1 - _EPS) for links in hop_links
                ):
                    continue
                for links in hop_links:
                    np.subtract.at(residual, links, speed)
                rings.append(candidate)
        if not rings:
            continue
        load = sum(paths.ring_load(r) for r in rings)
        total = len(rings) * channel_bandwidth(topology, load)
        if best is None or total > best[0] * (1 + _EPS) or (abs(total - best[0]) <= best[0] * _EPS and -len(rings) > best[1]):
            best = (total, -len(rings))
            best_rings = rings
    return best_rings


def _chain_candidates(router: Router, paths: _Paths, hosts: list[list[int]], max_channels: int) -> list[tuple[int, ...]]:
    """Chains of local indices (entry first, exit last) a channel may take through every host."""
    local = len(hosts[0])
    first = hosts[0]
    if local == 1:
        return [(0,)]
    intra = pack_rings(paths.topology, router, first, max_channels, paths)
    position = {rank: i for i, rank in enumerate(first)}
    chains: list[tuple[int, ...]] = []
    for ring in intra:
        idx = [position[r] for r in ring]
        for cut in range(len(idx)):
            chains.append(tuple(idx[cut + 1 :] + idx[: cut + 1]))
    if all(router.route(a, b) is not None for a in first for b in first if a != b):
        base = [position[r] for r in intra[0]] if intra else list(range(local))
        for e in range(local):
            for x in range(local):
                if e != x:
                    start = base.index(e)
                    middle = [v for v in base[start:] + base[:start] if v not in (e, x)]
                    chains.append((e, *middle, x))
    return list(dict.fromkeys(chains))


def _multi_host(
    topology: Topology, router: Router, paths: _Paths, hosts: list[list[int]], max_channels: int
) -> RingChannels | None:
    # candidate rings: one chain of local indices, the same in every host, hosts in file order
    candidates = []
    for chain in _chain_candidates(router, paths, hosts, max_channels):
        ring = [host[i] for host in hosts for i in chain]
        hops = list(zip(ring, ring[1:] + ring[:1]))
        options = [paths.alternatives(u, v) for u, v in hops]
        if any(not o for o in options):
            continue
        fixed = np.zeros(len(topology.links), dtype=np.float64)
        free = []  # hops with a choice of equal paths, chosen against the load when added
        for i, opts in enumerate(options):
            if len(opts) == 1:
                np.add.at(fixed, opts[0], 1.0)
            else:
                free.append(i)
        candidates.append((ring, options, fixed, free))
    if not candidates:
        return None
    bw = topology.bandwidth_array

    def place(load: np.ndarray, options, fixed, free) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        total = load + fixed
        picks: dict[int, np.ndarray] = {}
        for i in free:
            best = min(
                options[i],
                key=lambda links: (float(np.max((total[links] + 1.0) / bw[links])), float(np.sum(total[links]))),
            )
            picks[i] = best
            np.add.at(total, best, 1.0)
        return total, picks

    load = np.zeros(len(topology.links), dtype=np.float64)
    chosen: list[tuple[list[int], list[np.ndarray]]] = []
    best_total, best_count = 0.0, 0
    for _ in range(max_channels):
        scored = []
        for index, (_, options, fixed, free) in enumerate(candidates):
            total, picks = place(load, options, fixed, free)
            ratio = total / bw
            scored.append((float(np.max(ratio)), float(np.sum(ratio * ratio)), index, total, picks))
        _, _, index, total, picks = min(scored, key=lambda x: x[:3])
        ring, options, _, _ = candidates[index]
        load = total
        chosen.append((ring, [picks.get(i, opts[0]) for i, opts in enumerate(options)]))
        channels = len(chosen) * channel_bandwidth(topology, load)
        if channels > best_total * (1 + _EPS):
            best_total, best_count = channels, len(chosen)
    kept = chosen[:best_count]
    return _channels_of(topology, paths, [r for r, _ in kept], "multi-host", [h for _, h in kept])


def spread_routes(schedule: Schedule, topology: Topology, router: Router | None = None) -> Schedule:
    """The same transfers, each moved (where the machine offers several equally good switch paths,
    e.g. a fat-tree's spines) to the path its step loads least, like an adaptive ECMP.

    Schedules assembled from parts built separately (one per host or rail) inherit the same
    hash-based route choices in every part; spreading them restores balance. Only transfers whose
    current path is one of the best paths are moved, and only to another best path."""
    router = router or router_for(topology)
    paths = router.__dict__.get("_spread_paths")
    if paths is None or paths.topology is not topology:  # kept with the router: tuners spread many schedules
        paths = router.__dict__["_spread_paths"] = _Paths(topology, router)
    index = topology.node_index
    bw = topology.bandwidth_array
    builder = ScheduleBuilder.like(schedule)
    remap = np.array([builder.route_id(r) for r in schedule.routes], dtype=np.int64)
    # per (src, dst, route id): the links it uses, and the equally good paths it may move to
    current: dict[tuple[int, int, int], np.ndarray] = {}
    options: dict[tuple[int, int, int], list[np.ndarray] | None] = {}

    def classify(a: int, b: int, r: int) -> None:
        nodes = [a, *(index[name] for name in schedule.routes[r]), b]
        links = np.array([topology.link_index[(u, v)] for u, v in itertools.pairwise(nodes)], dtype=np.int64)
        best = paths.alternatives(a, b)
        current[(a, b, r)] = links
        options[(a, b, r)] = best if len(best) > 1 and any(np.array_equal(links, o) for o in best) else None

    for s in range(schedule.num_steps):
        sl = schedule.step_slice(s)
        src, dst, route = schedule.src[sl], schedule.dst[sl], schedule.route[sl]
        load = np.zeros(len(topology.links), dtype=np.float64)
        final = remap[route]
        movable: list[tuple[int, list[np.ndarray]]] = []
        for i, key in enumerate(zip(src.tolist(), dst.tolist(), route.tolist())):
            if key not in current:
                classify(*key)
            choice = options[key]
            if choice is None:
                np.add.at(load, current[key], 1.0)
            else:
                movable.append((i, choice))
        for i, choice in movable:
            best = min(choice, key=lambda links: (float(np.max((load[links] + 1.0) / bw[links])), float(np.sum(load[links]))))
            np.add.at(load, best, 1.0)
            final[i] = builder.route_id(paths.via_names(best))
        builder.add_step_arrays(src, dst, schedule.chunk[sl], schedule.op[sl], final)
    return builder.build()
