"""Paths between ranks: through switches (one transfer) or relayed by ranks (several steps).

A transfer in a schedule goes from rank to rank either over a direct link or through switches
(``via``). `Router.route` picks, for an ordered pair of ranks, the switch-only path with the widest
bottleneck, then the fewest hops, then the lowest total latency, then the smallest node names, so
routes are deterministic. Pairs with no switch-only path (ranks of a torus two hops apart, GPUs of a
DGX-1 without an NVLink between them) are served by relaying through ranks: `Router.relay_path`
gives the chain of ranks with the fewest relays (widest among those).

`ring_order` finds a cyclic order of the ranks whose consecutive pairs are joined by switch-only
paths, using the fastest links first: it searches for a Hamiltonian cycle among the rank pairs of
the highest bottleneck bandwidth, then lower ones.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from functools import cached_property

from synth.topology import Topology

#: stopped searches from one source before `Router.route` builds that source's whole table
PAIR_SEARCHES = 4


def tie_break_hash(a: int, b: int, depth: int) -> int:
    """A deterministic hash of (source, destination, hop) that spreads equal-cost choices."""
    x = (a * 0x9E3779B1 + b * 0x85EBCA77 + depth * 0xC2B2AE3D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x2C1B3C6D) & 0xFFFFFFFF
    x ^= x >> 12
    return x


@dataclass(frozen=True)
class Route:
    """A switch-only path between two ranks: switch node ids in order, bottleneck GB/s, hops,
    total latency µs."""

    via: tuple[int, ...]
    bottleneck: float
    hops: int
    latency: float


def router_for(topology: Topology) -> Router:
    """The shared `Router` of a topology object (routes are cached, so share it)."""
    router = topology.__dict__.get("_router")
    if router is None:
        router = topology.__dict__["_router"] = Router(topology)
    return router


class Router:
    """Route lookups over one topology (cached per source rank). Use `router_for` to share one."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self._from: dict[int, dict[int, Route]] = {}
        self._relay: dict[int, dict[int, tuple[int, ...]]] = {}
        self._pair: dict[tuple[int, int], Route | None] = {}
        self._pair_searches: dict[int, int] = {}
        self._rings: dict[int, tuple[list[int], bool]] = {}

    # ------------------------------------------------------------------ switch-only routes
    def routes_from(self, a: int) -> dict[int, Route]:
        """Best switch-only route from rank ``a`` to every rank it reaches that way."""
        found = self._from.get(a)
        if found is None:
            found = self._from[a] = self._search(a)
        return found

    def route(self, a: int, b: int) -> Route | None:
        """Best switch-only route a → b (None if there is none). Uses the per-source table when
        it exists, else a search that stops at b (same result, without all-pairs work); once
        `PAIR_SEARCHES` pairs from ``a`` were searched, the caller is going through many of its
        destinations (direct, alltoall), so the table from ``a`` is built instead: one search
        costs about what a few stopped ones do, and 127 stopped searches from every source of a
        128-rank fat-tree took most of a minute."""
        table = self._from.get(a)
        if table is not None:
            return table.get(b)
        key = (a, b)
        if key not in self._pair:
            searched = self._pair_searches.get(a, 0)
            if searched >= PAIR_SEARCHES:
                return self.routes_from(a).get(b)
            self._pair_searches[a] = searched + 1
            self._pair[key] = self._search(a, target=b).get(b)
        return self._pair[key]

    def via_names(self, a: int, b: int) -> tuple[str, ...] | None:
        """The ``via`` list (switch names) for a transfer a → b, or None if there is no
        switch-only path."""
        r = self.route(a, b)
        if r is None:
            return None
        return tuple(self.topology.node_name(n) for n in r.via)

    def _search(self, a: int, target: int | None = None) -> dict[int, Route]:
        topo = self.topology
        links = topo.links
        nranks = topo.num_ranks
        # 1. widest bottleneck to every node, expanding only through switches
        best = {a: float("inf")}
        heap = [(-float("inf"), a)]
        while heap:
            negw, node = heapq.heappop(heap)
            width = -negw
            if width < best.get(node, 0.0):
                continue
            if node == target:
                break
            if node != a and node < nranks:
                continue  # ranks end a switch-only path
            for li in topo.out_links[node]:
                link = links[li]
                w = min(width, link.bandwidth)
                if w > best.get(link.dst, 0.0):
                    best[link.dst] = w
                    heapq.heappush(heap, (-w, link.dst))
        if target is not None:
            targets = {target: best[target]} if target in best and target != a else {}
        else:
            targets = {n: w for n, w in best.items() if n < nranks and n != a}
        routes: dict[int, Route] = {}
        # 2. among paths at least that wide: fewest hops, then least latency; equal-cost paths
        #    are spread over source/destination pairs (deterministic ECMP)
        for theta in sorted(set(targets.values()), reverse=True):
            want = sorted(n for n, w in targets.items() if w == theta)
            dist: dict[int, tuple[int, float]] = {a: (0, 0.0)}
            preds: dict[int, list[int]] = {}
            heap2: list[tuple[int, float, int]] = [(0, 0.0, a)]
            done: set[int] = set()
            while heap2:
                hops, lat, node = heapq.heappop(heap2)
                if node in done:
                    continue
                done.add(node)
                if node == target:
                    break
                if node != a and node < nranks:
                    continue
                for li in topo.out_links[node]:
                    link = links[li]
                    if link.bandwidth < theta:
                        continue
                    nxt = link.dst
                    key = (hops + 1, round(lat + link.latency, 9))
                    cur = dist.get(nxt)
                    if cur is None or key < cur:
                        dist[nxt] = key
                        preds[nxt] = [node]
                        heapq.heappush(heap2, (*key, nxt))
                    elif key == cur and node not in preds[nxt]:
                        preds[nxt].append(node)
            for b in want:
                path = []
                node = b
                while True:
                    options = sorted(preds[node], key=topo.node_name)
                    node = options[tie_break_hash(a, b, len(path)) % len(options)] if len(options) > 1 else options[0]
                    if node == a:
                        break
                    path.append(node)
                hops, lat = dist[b]
                routes[b] = Route(tuple(reversed(path)), theta, hops, lat)
        return routes

    # ------------------------------------------------------------------ relays through ranks
    def relay_path(self, a: int, b: int) -> tuple[int, ...]:
        """Ranks ``a, r1, …, b`` such that each consecutive pair has a switch-only route, with the
        fewest relays and, among those, the widest bottleneck (then smallest rank ids)."""
        if self.route(a, b) is not None:
            return (a, b)
        table = self._relay.get(a)
        if table is None:
            table = self._relay[a] = self._relay_search(a)
        path = table.get(b)
        if path is None:
            raise ValueError(f"rank {b} is unreachable from rank {a}")
        return path

    def _relay_search(self, a: int) -> dict[int, tuple[int, ...]]:
        # BFS layers over ranks; keep per rank the best (bottleneck desc, path asc) among shortest
        best: dict[int, tuple[float, tuple[int, ...]]] = {a: (float("inf"), (a,))}
        frontier = [a]
        while frontier:
            layer: dict[int, tuple[float, tuple[int, ...]]] = {}
            for u in frontier:
                width, path = best[u]
                for v, route in sorted(self.routes_from(u).items()):
                    if v in best:
                        continue
                    cand = (min(width, route.bottleneck), (*path, v))
                    cur = layer.get(v)
                    if cur is None or (-cand[0], cand[1]) < (-cur[0], cur[1]):
                        layer[v] = cand
            best.update(layer)
            frontier = sorted(layer)
        return {v: p for v, (_, p) in best.items()}

    # ------------------------------------------------------------------ rank graph
    @cached_property
    def rank_bandwidth(self) -> dict[tuple[int, int], float]:
        """Bottleneck bandwidth of the best switch-only route for every connected rank pair."""
        out = {}
        for a in range(self.topology.num_ranks):
            for b, r in self.routes_from(a).items():
                out[(a, b)] = r.bottleneck
        return out

    def all_routable(self, pairs) -> bool:
        return all(self.route(a, b) is not None for a, b in pairs)


# ========================================================================================= rings
def _is_hamiltonian_cycle(order: list[int], ok) -> bool:
    n = len(order)
    return all(ok(order[i], order[(i + 1) % n]) for i in range(n))


def _bipartite_unbalanced(n: int, nbrs: list[list[int]]) -> bool:
    """True if the undirected rank graph is bipartite with unequal sides (no Hamiltonian cycle)."""
    color = [-1] * n
    sides = [0, 0]
    for s in range(n):
        if color[s] >= 0:
            continue
        color[s] = 0
        sides[0] += 1
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for v in nbrs[u]:
                if color[v] < 0:
                    color[v] = 1 - color[u]
                    sides[color[v]] += 1
                    queue.append(v)
                elif color[v] == color[u]:
                    return False
    return sides[0] != sides[1]


def hamiltonian_cycle(n: int, adj: list[dict[int, float]], budget: int) -> list[int] | None:
    """Depth-first search for a Hamiltonian cycle from rank 0 over directed adjacency ``adj``
    (neighbour → bandwidth); tries the widest edges first, then the neighbour with the fewest
    onward options (Warnsdorff), then the smallest id. Gives up after ``budget`` expansions."""
    if n == 1:
        return [0]
    visited = [False] * n
    visited[0] = True
    path = [0]
    expansions = 0
    warnsdorff = n <= 256  # counting onward options costs O(n) per candidate

    def ordered(u: int) -> list[int]:
        cands = [v for v in adj[u] if not visited[v]]
        if warnsdorff:
            return sorted(cands, key=lambda v: (-adj[u][v], sum(1 for w in adj[v] if not visited[w]), v))
        return sorted(cands, key=lambda v: (-adj[u][v], v))

    stack = [iter(ordered(0))]
    while stack:
        if len(path) == n and 0 in adj[path[-1]]:
            return path
        nxt = next(stack[-1], None) if len(path) < n else None
        if nxt is None:
            stack.pop()
            visited[path.pop()] = False
            continue
        expansions += 1
        if expansions > budget:
            return None
        visited[nxt] = True
        path.append(nxt)
        stack.append(iter(ordered(nxt)))
    return None


def ring_order(topology: Topology, router: Router | None = None, budget: int = 200_000) -> tuple[list[int], bool]:
    """A cyclic order of all ranks and whether every consecutive pair (including last → first) has
    a switch-only route. Prefers cycles whose narrowest hop is as wide as possible. When no such
    cycle is found, returns a depth-first order over the widest links; the caller relays the hops
    that lack a route."""
    router = router or router_for(topology)
    cached = router._rings.get(budget)
    if cached is None:
        cached = router._rings[budget] = _ring_order(topology, router, budget)
    return list(cached[0]), cached[1]


def _ring_order(topology: Topology, router: Router, budget: int) -> tuple[list[int], bool]:
    n = topology.num_ranks
    if n == 1:
        return [0], True
    if n == 2:
        ok = router.route(0, 1) is not None and router.route(1, 0) is not None
        return [0, 1], ok
    identity = list(range(n))
    if n > 256 and all(router.route(i, (i + 1) % n) is not None for i in range(n)):
        # large switched fabrics: keep the file's order (hosts are listed together) rather than
        # computing all R^2 routes for the search below
        return identity, True
    bw = router.rank_bandwidth
    for theta in sorted(set(bw.values()), reverse=True):
        adj: list[dict[int, float]] = [{} for _ in range(n)]
        for (u, v), w in bw.items():
            if w >= theta:
                adj[u][v] = w
        if any(not a for a in adj):
            continue
        und = [sorted(set(adj[u]) | {v for v in range(n) if u in adj[v]}) for u in range(n)]
        if _bipartite_unbalanced(n, und):
            continue
        cycle = hamiltonian_cycle(n, adj, budget)
        if cycle is not None:
            return cycle, True
        if _is_hamiltonian_cycle(identity, lambda u, v, adj=adj: v in adj[u]):
            return identity, True
    # fallback: depth-first preorder over the widest routes
    order: list[int] = []
    seen = [False] * n
    stack = [0]
    while stack:
        u = stack.pop()
        if seen[u]:
            continue
        seen[u] = True
        order.append(u)
        nbrs = sorted(router.routes_from(u).items(), key=lambda kv: (-kv[1].bottleneck, kv[0]))
        stack.extend(v for v, _ in reversed(nbrs) if not seen[v])
    for v in range(n):  # ranks reached only through relays
        if not seen[v]:
            order.append(v)
    ok = _is_hamiltonian_cycle(order, lambda u, v: router.route(u, v) is not None)
    return order, ok
