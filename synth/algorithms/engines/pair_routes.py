"""Switch-only routes for many rank pairs at once, fast enough for machines of thousands of ranks.

`synth.routing.Router` searches the whole machine from each source rank, which is right for a few
hundred ranks and far too slow for a 4,096-GPU fat-tree, where a composed schedule talks to a few
hundred thousand (source, destination) pairs. Here the search runs on the *core* of the switch
graph only. A switch whose only switch neighbour is one other switch, linked both ways (a NIC in
front of its top-of-rack switch, a PCIe switch under its root complex), is a *leaf*: a route can
start or end in it but never pass through it, so routes are found as

    rank → entry switch → leaves up to a core switch u → core path u … v → leaves down → exit switch → rank

and the core searches (widest bottleneck first, then fewest hops, then least latency, the order
`Router` uses) start only from the few core switches where leaves end: the 16 top-of-rack switches
of a 4,096-GPU fat-tree instead of its 4,626 switches. Among equally good core paths the choice is
spread over pairs by `synth.routing.tie_break_hash`, as ECMP does, so traffic uses every spine. A
pair joined by a direct link competes with its switch routes by the same order.

``local=True`` keeps only links that stay inside one host (both ends name the same ``host``): the
routes a phase inside a server takes over its own NVSwitch, PCIe switches or direct links, never
out over the network.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from synth.routing import tie_break_hash
from synth.topology import Topology

#: a route's quality, best first when sorted: (-bottleneck GB/s, switch hops, latency µs)
Label = tuple[float, int, float]


@dataclass(frozen=True)
class PairRoute:
    """A route from rank to rank: the switch node ids it passes (``via``; empty for a direct link),
    the directed link ids in order, its total latency (µs) and its narrowest bandwidth (GB/s)."""

    via: tuple[int, ...]
    links: tuple[int, ...]
    latency: float
    bottleneck: float


class PairRoutes:
    """Route lookups over one topology, cached per pair; `lookup` answers arrays of pairs with ids
    into `table` (-1 where a pair has no switch-only route and no direct link)."""

    def __init__(self, topology: Topology, *, local: bool = False):
        self.topology = topology
        self.local = local
        r = topology.num_ranks
        self._r = r
        host = [node.host for node in topology.nodes]
        bw, lat = topology.bandwidth_array, topology.latency_array
        self._bw, self._lat = bw, lat
        n = topology.num_nodes
        self._entries: list[list[tuple[int, int]]] = [[] for _ in range(r)]  # rank -> (switch, link)
        self._exits: list[list[tuple[int, int]]] = [[] for _ in range(r)]  # rank -> (switch, link)
        self._direct: dict[tuple[int, int], int] = {}
        self._succ: dict[int, list[tuple[int, int]]] = {v: [] for v in range(r, n)}
        self._pred: dict[int, list[tuple[int, int]]] = {v: [] for v in range(r, n)}
        for i, link in enumerate(topology.links):
            a, b = link.src, link.dst
            if local and (host[a] is None or host[a] != host[b]):
                continue
            if a < r and b < r:
                self._direct[(a, b)] = i
            elif a < r:
                self._entries[a].append((b, i))
            elif b < r:
                self._exits[b].append((a, i))
            else:
                self._succ[a].append((b, i))
                self._pred[b].append((a, i))
        # a leaf has one switch neighbour w, linked both ways: routes enter or leave through it only
        self._up: dict[int, tuple[int, int, int]] = {}  # leaf -> (w, link leaf->w, link w->leaf)
        for v in range(r, n):
            succ, pred = self._succ[v], self._pred[v]
            if len(succ) == 1 and len(pred) == 1 and succ[0][0] == pred[0][0]:
                self._up[v] = (succ[0][0], succ[0][1], pred[0][1])
        self._core_from: dict[tuple[int, float], dict[int, tuple[Label, list[tuple[int, int]]]]] = {}
        self._pairs: dict[int, int] = {}
        self._climbs: dict[int, tuple[int, list[int], list[int]]] = {}
        self._up_caps: dict[int, float] = {}
        self._downs: dict[int, tuple[int, list[int], list[int], float]] = {}
        self._bw_list: list[float] = [float(x) for x in bw]
        self._lat_list: list[float] = [float(x) for x in lat]
        self.table: list[PairRoute] = []

    # ------------------------------------------------------------------------------ searches
    def _climb(self, switch: int) -> tuple[int, list[int], list[int]]:
        """From a switch up through leaves to the first core switch: (core, nodes after ``switch``
        up to it, links up); memoized."""
        found = self._climbs.get(switch)
        if found is None:
            found = self._climbs[switch] = self._climb_from(switch)
        return found

    def _climb_from(self, switch: int) -> tuple[int, list[int], list[int]]:
        nodes: list[int] = []
        links: list[int] = []
        seen = {switch}
        v = switch
        while v in self._up:
            w, up, _ = self._up[v]
            if w in seen:
                break
            seen.add(w)
            nodes.append(w)
            links.append(up)
            v = w
        return v, nodes, links

    def _core(self, u: int, cap: float) -> dict[int, tuple[Label, list[tuple[int, int]]]]:
        """Best core paths from core switch ``u`` for a pair whose other links allow at most
        ``cap`` GB/s (a wider core path is no better than a shorter one at ``cap``): per reachable
        switch its label and every predecessor (switch, link) on an equally good path (leaves are
        not passed through)."""
        found = self._core_from.get((u, cap))
        if found is not None:
            return found
        start: Label = (-cap, 0, 0.0)
        best: dict[int, tuple[Label, list[tuple[int, int]]]] = {u: (start, [])}
        heap: list[tuple[Label, int]] = [(start, u)]
        done: set[int] = set()
        while heap:
            label, v = heapq.heappop(heap)
            if v in done:
                continue
            done.add(v)
            if v != u and v in self._up:
                continue  # a leaf ends a path
            for w, link in self._succ[v]:
                cand: Label = (max(label[0], -float(self._bw[link])), label[1] + 1, label[2] + float(self._lat[link]))
                old = best.get(w)
                if old is None or cand < old[0]:
                    best[w] = (cand, [(v, link)])
                    heapq.heappush(heap, (cand, w))
                elif cand == old[0] and w not in done:
                    old[1].append((v, link))
        self._core_from[(u, cap)] = best
        return best

    def _skeleton(self, e: int, x: int, cap: float):
        """What the route from entry ``e`` to exit ``x`` is made of, for any pair whose rank links
        allow ``cap`` GB/s (only the choice among equally good core paths depends on the pair):
        None if there is none, else (up nodes, up links, core table or None, core end v, core
        start u, leaves below v down to x, links down). Entries and exits are per rank on large
        machines (every GPU's NIC), so nothing is kept per (e, x): the parts are kept per switch
        (`_climb`, `_down`) and per core search (`_core`)."""
        if e == x:
            return ([e], [], None, e, e, [], [])
        u, up_nodes, up_links = self._climb(e)
        if x in up_nodes:  # the exit is on the way up
            k = up_nodes.index(x)
            return ([e, *up_nodes[: k + 1]], up_links[: k + 1], None, x, x, [], [])
        v, below, down_links, down_cap = self._down(x)
        if v != u and not self._pred[v]:
            return None  # nothing leads into v (an NVSwitch of another host): no core path
        table = self._core(u, min(cap, self._up_cap(e), down_cap))
        if v not in table:
            return None
        return ([e, *up_nodes], list(up_links), table, v, u, below, down_links)

    def _up_cap(self, e: int) -> float:
        """The narrowest link from ``e`` up to its core switch (inf if none); memoized."""
        found = self._up_caps.get(e)
        if found is None:
            found = self._up_caps[e] = min((float(self._bw[link]) for link in self._climb(e)[2]), default=float("inf"))
        return found

    def _down(self, x: int) -> tuple[int, list[int], list[int], float]:
        """From the core switch v above exit ``x`` down to it: (v, the leaves under v down to x
        from x up, the links down, the narrowest of them or inf); memoized."""
        found = self._downs.get(x)
        if found is None:
            v, down_nodes, _ = self._climb(x)
            below = [x, *down_nodes[:-1]] if down_nodes else []
            down_links = [self._up[w][2] for w in reversed(below)]
            cap = min((float(self._bw[link]) for link in down_links), default=float("inf"))
            found = self._downs[x] = (v, below, down_links, cap)
        return found

    def _switch_route(self, e: int, x: int, a: int, b: int, cap: float) -> tuple[Label, list[int], list[int]] | None:
        """The best switch path from entry ``e`` to exit ``x`` (both included) for the pair (a, b)
        whose rank links allow ``cap`` GB/s: its label and its nodes and links (ties among core
        paths spread by (a, b))."""
        skeleton = self._skeleton(e, x, cap)
        if skeleton is None:
            return None
        up_nodes, up_links, table, v, u, below, down_links = skeleton
        if e == x:
            return (-np.inf, 0, 0.0), [e], []
        if table is None:
            nodes, links = up_nodes, up_links
        else:
            back_nodes: list[int] = [v]
            back_links: list[int] = []
            node = v
            depth = 0
            while node != u:
                options = table[node][1]
                prev, link = options[tie_break_hash(a, b, depth) % len(options)] if len(options) > 1 else options[0]
                back_nodes.append(prev)
                back_links.append(link)
                node = prev
                depth += 1
            nodes = [*up_nodes, *reversed(back_nodes[:-1]), *reversed(below)]
            links = [*up_links, *reversed(back_links), *down_links]
        if len(set(nodes)) != len(nodes):
            return None
        bw = self._bw_list
        lat = self._lat_list
        label: Label = (-min(bw[link] for link in links) if links else -np.inf, len(links), sum(lat[link] for link in links))
        return label, nodes, links

    def _find(self, a: int, b: int) -> PairRoute | None:
        best: tuple[Label, tuple[int, ...], tuple[int, ...]] | None = None
        direct = self._direct.get((a, b))
        if direct is not None:
            best = ((-float(self._bw[direct]), 0, float(self._lat[direct])), (), (direct,))
        for e, into in self._entries[a]:
            sink = not self._succ[self._climb(e)[0]]  # e.g. an NVSwitch: it reaches no other switch
            for x, out in self._exits[b]:
                if sink and e != x:
                    continue
                found = self._switch_route(e, x, a, b, min(float(self._bw[into]), float(self._bw[out])))
                if found is None:
                    continue
                inner, nodes, links = found
                bottleneck = min(float(self._bw[into]), float(self._bw[out]), -inner[0])
                label: Label = (-bottleneck, inner[1] + 2, inner[2] + float(self._lat[into]) + float(self._lat[out]))
                cand = (label, tuple(nodes), (into, *links, out))
                if best is None or (cand[0], cand[1]) < (best[0], best[1]):
                    best = cand
        if best is None:
            return None
        label, via, links = best
        return PairRoute(via, links, label[2], -label[0])

    # ------------------------------------------------------------------------------ lookups
    def route_id(self, a: int, b: int) -> int:
        """The id in `table` of the route a → b, or -1."""
        key = a * self._r + b
        rid = self._pairs.get(key)
        if rid is None:
            found = self._find(a, b) if a != b else None
            if found is None:
                rid = -1
            else:
                rid = len(self.table)
                self.table.append(found)
            self._pairs[key] = rid
        return rid

    def lookup(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Route ids for arrays of pairs (-1 where there is none); each distinct pair is searched once."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if src.size == 0:
            return np.zeros(0, dtype=np.int64)
        keys = src * self._r + dst
        uniq, inverse = np.unique(keys, return_inverse=True)
        ids = np.fromiter((self.route_id(k // self._r, k % self._r) for k in uniq.tolist()), dtype=np.int64, count=uniq.size)
        return ids[inverse.reshape(-1)]

    def link_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The routes of `table` as arrays: (ptr, link ids, latency): route i crosses
        ``links[ptr[i]:ptr[i + 1]]`` and its latency is ``latency[i]``."""
        lengths = np.fromiter((len(p.links) for p in self.table), dtype=np.int64, count=len(self.table))
        ptr = np.zeros(len(self.table) + 1, dtype=np.int64)
        np.cumsum(lengths, out=ptr[1:])
        links = np.fromiter((link for p in self.table for link in p.links), dtype=np.int64, count=int(ptr[-1]))
        latency = np.fromiter((p.latency for p in self.table), dtype=np.float64, count=len(self.table))
        return ptr, links, latency

    def via_names(self, route: int) -> tuple[str, ...]:
        nodes = self.topology.nodes
        return tuple(nodes[v].name for v in self.table[route].via)
