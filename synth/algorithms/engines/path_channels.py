"""Path channels: the rank-to-rank paths a scalable synthesizer may put a transfer on, with their links.

(Not NCCL's ring channels, which are `synth.algorithms.engines.ring_channels`: here a channel is one path from
a rank to a rank, as the greedy and packing synthesizers use them.)

A transfer goes from a rank to a rank over a direct link or through switches only (a switch holds
nothing). The greedy and packing synthesizers think in *channels*: one channel per direct link
between ranks, and, for every group of switches joined to each other (a *switch component*: one
NVSwitch, or a whole network of NICs, top-of-rack and spine switches), channels between the ranks
attached to it, each along a fixed switch path. A channel knows the physical links it crosses, so
synthesizers can respect every link's bandwidth (several channels share a rank's link to a switch,
or an oversubscribed uplink) and the schedule's ``via`` comes from the path.

Paths are the fewest switch hops inside the component; among equally short ones the choice is spread
over (source, destination) pairs by a deterministic hash, as ECMP does, so a fat-tree's traffic
uses every spine. Finding them is cheap even for thousands of ranks: a switch whose only way on is
one other switch (a NIC in front of its top-of-rack switch) is walked through, and breadth-first
searches start only from the switches where such walks end.

Small components give a channel for every ordered pair of attached ranks. A component with more
pairs than ``full_pairs`` (a 4096-GPU fat-tree's network has 16.8 million) gives each rank a few
partners instead: the ranks 1, 2, 4, … hosts further on and back in rank order, at the same
position in their host (a rail; without hosts, 1, 2, 4, … ranks on), so every rank is a few
channels from every other. `channels_for`
checks that the channels join every rank to every other.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

import networkx as nx
import numpy as np

from synth.bounds.latency import hop_distances
from synth.routing import tie_break_hash
from synth.topology import Topology

#: A switch component with at most this many (sender, receiver) rank pairs gets every pair.
FULL_PAIRS = 20_000


@dataclass(frozen=True, eq=False)
class PathChannels:
    """Rank-to-rank channels of a topology: channel i goes from ``src[i]`` to ``dst[i]`` through the
    switches ``via[i]`` (node ids; empty for a direct link) and crosses the link ids
    ``link_ids[link_ptr[i]:link_ptr[i + 1]]``. ``alpha`` is the path's total latency (µs) and
    ``bottleneck`` its narrowest bandwidth (GB/s). ``complete`` is False when some large switch
    component got partners rather than every pair."""

    topology: Topology
    src: np.ndarray
    dst: np.ndarray
    via: tuple[tuple[int, ...], ...]
    link_ptr: np.ndarray
    link_ids: np.ndarray
    alpha: np.ndarray
    bottleneck: np.ndarray
    complete: bool

    @property
    def count(self) -> int:
        return int(self.src.size)

    def links(self, channel: int) -> np.ndarray:
        return self.link_ids[self.link_ptr[channel] : self.link_ptr[channel + 1]]

    def via_names(self, channel: int) -> tuple[str, ...]:
        return tuple(self.topology.node_name(v) for v in self.via[channel])

    @cached_property
    def link_owner(self) -> np.ndarray:
        """Channel of every entry of ``link_ids`` (CSR row ids)."""
        return np.repeat(np.arange(self.count, dtype=np.int64), np.diff(self.link_ptr))

    @cached_property
    def path_length(self) -> np.ndarray:
        return np.diff(self.link_ptr)

    @cached_property
    def used_links(self) -> np.ndarray:
        """Sorted ids of the links some channel crosses."""
        return np.unique(self.link_ids)

    def out_of(self, rank: int) -> np.ndarray:
        """Ids of the channels leaving ``rank``."""
        lo, hi = np.searchsorted(self.src_sorted, [rank, rank + 1])
        return self.by_src[lo:hi]

    @cached_property
    def by_src(self) -> np.ndarray:
        return np.argsort(self.src, kind="stable")

    @cached_property
    def src_sorted(self) -> np.ndarray:
        return self.src[self.by_src]

    def neighbourhoods(self) -> Neighbourhoods:
        """Nested neighbourhoods of every channel's destination (cached)."""
        cached = self.__dict__.get("_hoods")
        if cached is None:
            cached = self.__dict__["_hoods"] = _neighbourhoods(self)
        return cached

    def hop_distances(self) -> np.ndarray:
        """[R, R] fewest channels from a rank to another (0 on the diagonal)."""
        cached = self.__dict__.get("_hops")
        if cached is not None:
            return cached
        r = self.topology.num_ranks
        adjacency = np.zeros((r, r), dtype=bool)
        adjacency[self.src, self.dst] = True
        hops = hop_distances(adjacency).astype(np.int32)
        hops.setflags(write=False)
        self.__dict__["_hops"] = hops
        return hops


@dataclass(frozen=True, eq=False)
class Neighbourhoods:
    """Where a channel leads, seen from afar. Channels are ordered by locality (fewer links first,
    then faster); the neighbourhood of a rank at level L is its component over the channels of the
    levels below L (a NIC channel into a server: the server's GPUs; a channel through a spine:
    the destination's rack). ``tiers[c]`` lists channel c's destination neighbourhoods, largest
    first, as indices into ``members`` (-1 padded; a most-local channel has none); ``rank_ptr``/
    ``rank_cluster`` give, as CSR, the neighbourhoods each rank belongs to."""

    tiers: np.ndarray
    members: tuple[np.ndarray, ...]
    rank_ptr: np.ndarray
    rank_cluster: np.ndarray


def components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Component label (smallest member) of each of n nodes joined by the undirected edges (a, b)."""
    label = np.arange(n)
    while True:
        lo = np.minimum(label[a], label[b])
        new = label.copy()
        np.minimum.at(new, a, lo)
        np.minimum.at(new, b, lo)
        new = new[new]
        if np.array_equal(new, label):
            return label
        label = new


def _neighbourhoods(ch: PathChannels) -> Neighbourhoods:
    r = ch.topology.num_ranks
    members: dict[tuple[int, ...], int] = {}
    rank_clusters: list[list[int]] = [[] for _ in range(r)]
    if ch.count:
        _, level = np.unique(np.stack([ch.path_length, -ch.bottleneck], axis=1), axis=0, return_inverse=True)
        level = level.ravel()
        levels = int(level.max()) + 1
    else:
        level = np.zeros(0, dtype=np.int64)
        levels = 0
    # neighbourhood id of each rank's component over the channels below level lv (-1: alone, or all)
    below: list[np.ndarray] = [np.full(r, -1, dtype=np.int64)]
    for lv in range(1, levels):
        label = components(r, ch.src[level < lv], ch.dst[level < lv])
        ids = np.full(r, -1, dtype=np.int64)
        for comp in np.unique(label).tolist():
            group = np.flatnonzero(label == comp)
            if 1 < group.size < r:
                key = tuple(group.tolist())
                if key not in members:
                    members[key] = len(members)
                    for v in group.tolist():
                        rank_clusters[v].append(members[key])
                ids[group] = members[key]
        below.append(ids)
    tiers = np.full((ch.count, max(1, levels)), -1, dtype=np.int64)
    for lv in range(levels):
        these = np.flatnonzero(level == lv)
        col = 0
        for lower in range(lv, 0, -1):  # largest neighbourhood first
            ids = below[lower][ch.dst[these]]
            if col and np.array_equal(ids, tiers[these, col - 1]):
                continue
            tiers[these, col] = ids
            col += 1
    lens = [len(x) for x in rank_clusters]
    return Neighbourhoods(
        tiers=tiers,
        members=tuple(np.asarray(key, dtype=np.int64) for key, _ in sorted(members.items(), key=lambda kv: kv[1])),
        rank_ptr=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
        rank_cluster=np.asarray([c for x in rank_clusters for c in x], dtype=np.int64),
    )


def channels_for(topology: Topology, *, full_pairs: int = FULL_PAIRS) -> PathChannels:
    """The channels of ``topology`` (cached on it for the default ``full_pairs``)."""
    cache = topology.__dict__.setdefault("_channels", {})
    found = cache.get(full_pairs)
    if found is None:
        found = cache[full_pairs] = _build(topology, full_pairs)
    return found


# ============================================================================ construction
def _switch_components(topology: Topology) -> list[list[int]]:
    """Switch node ids grouped by (undirected) connectivity over switch-to-switch links, each group
    sorted, groups by their smallest id."""
    r, n = topology.num_ranks, topology.num_nodes
    graph = nx.Graph()
    graph.add_nodes_from(range(r, n))
    graph.add_edges_from((link.src, link.dst) for link in topology.links if link.src >= r and link.dst >= r)
    return sorted(sorted(component) for component in nx.connected_components(graph))


class _Component:
    """Fewest-hop paths between the switches of one component."""

    def __init__(self, topology: Topology, nodes: list[int], inner: list[tuple[int, int]]):
        """``inner``: the (src, dst) of the links between the component's switches."""
        self.topology = topology
        self.nodes = nodes
        r = topology.num_ranks
        self.succ: dict[int, list[int]] = {v: [] for v in nodes}
        self.pred: dict[int, list[int]] = {v: [] for v in nodes}
        for a, b in inner:
            self.succ[a].append(b)
            self.pred[b].append(a)
        for v in nodes:
            self.succ[v].sort()
            self.pred[v].sort(key=topology.node_name)
        self.r = r
        self._dist: dict[int, dict[int, int]] = {}
        self._chain: dict[int, tuple[int, ...]] = {}
        self._steps: dict[tuple[int, int], list[int]] = {}

    def chain(self, start: int) -> tuple[int, ...]:
        """``start`` and the switches after it while each has exactly one switch to go on to."""
        found = self._chain.get(start)
        if found is None:
            path = [start]
            seen = {start}
            while len(self.succ[path[-1]]) == 1 and self.succ[path[-1]][0] not in seen:
                path.append(self.succ[path[-1]][0])
                seen.add(path[-1])
            found = self._chain[start] = tuple(path)
        return found

    def dist_from(self, base: int) -> dict[int, int]:
        found = self._dist.get(base)
        if found is None:
            found = {base: 0}
            queue = deque([base])
            while queue:
                u = queue.popleft()
                for w in self.succ[u]:
                    if w not in found:
                        found[w] = found[u] + 1
                        queue.append(w)
            self._dist[base] = found
        return found

    def hops(self, entry: int, exit_: int) -> int | None:
        chain = self.chain(entry)
        if exit_ in chain:
            return chain.index(exit_)
        d = self.dist_from(chain[-1]).get(exit_)
        return None if d is None else len(chain) - 1 + d

    def path(self, entry: int, exit_: int, a: int, b: int) -> tuple[int, ...]:
        """Switches from ``entry`` to ``exit_`` (both included), spreading ties by (a, b)."""
        chain = self.chain(entry)
        if exit_ in chain:
            return chain[: chain.index(exit_) + 1]
        base = chain[-1]
        back = [exit_]
        node = exit_
        while node != base:
            options = self._closer(base, node)
            node = options[tie_break_hash(a, b, len(back)) % len(options)] if len(options) > 1 else options[0]
            back.append(node)
        return chain[:-1] + tuple(reversed(back))

    def _closer(self, base: int, node: int) -> list[int]:
        """The switches one hop closer to ``base`` than ``node`` that lead to it (cached)."""
        key = (base, node)
        found = self._steps.get(key)
        if found is None:
            dist = self.dist_from(base)
            want = dist[node] - 1
            found = self._steps[key] = [p for p in self.pred[node] if dist.get(p) == want]
        return found


def _host_stride(topology: Topology, members: list[int]) -> int:
    """Ranks per host among ``members`` (the most common host size; 1 without hosts)."""
    hosts = [topology.ranks[v].host for v in members]
    if any(h is None for h in hosts):
        return 1
    size, _ = Counter(Counter(hosts).values()).most_common(1)[0]
    return max(1, size)


def _partners(
    topology: Topology, senders: list[int], receivers: list[int], full_pairs: int
) -> tuple[list[tuple[int, int]], bool]:
    """Rank pairs (a, b) of one component to give channels, and whether that is every pair."""
    if len(senders) * len(receivers) <= full_pairs:
        return [(a, b) for a in senders for b in receivers if a != b], True
    n = len(receivers)
    stride = _host_stride(topology, receivers)
    offsets = {1} if stride == 1 else set()
    step = stride
    while step < n:
        offsets.update((step % n, -step % n))
        step *= 2
    position = {v: i for i, v in enumerate(receivers)}
    pairs = []
    for a in senders:
        p = position[a] if a in position else int(np.searchsorted(np.asarray(receivers), a))
        for off in sorted(offsets):
            b = receivers[(p + off) % n]
            if b != a:
                pairs.append((a, b))
    return pairs, False


def _build(topology: Topology, full_pairs: int) -> PathChannels:
    r = topology.num_ranks
    link_index = topology.link_index
    src: list[int] = []
    dst: list[int] = []
    via: list[tuple[int, ...]] = []
    # direct links between ranks
    for link in topology.links:
        if link.src < r and link.dst < r:
            src.append(link.src)
            dst.append(link.dst)
            via.append(())
    complete = True
    components = _switch_components(topology)
    # one pass over the links sorts them by component: inside it, into it from a rank, out of it
    # to a rank (each in the topology's link order)
    component_of = {v: i for i, nodes in enumerate(components) for v in nodes}
    inner: list[list[tuple[int, int]]] = [[] for _ in components]
    into: list[dict[int, list[int]]] = [{} for _ in components]
    out_of: list[dict[int, list[int]]] = [{} for _ in components]
    for link in topology.links:
        at_src, at_dst = component_of.get(link.src), component_of.get(link.dst)
        if at_src is not None and at_src == at_dst:
            inner[at_src].append((link.src, link.dst))
        elif link.src < r and at_dst is not None:
            into[at_dst].setdefault(link.src, []).append(link.dst)
        elif link.dst < r and at_src is not None:
            out_of[at_src].setdefault(link.dst, []).append(link.src)
    for nodes, inside, entries, exits in zip(components, inner, into, out_of):
        comp = _Component(topology, nodes, inside)
        senders, receivers = sorted(entries), sorted(exits)
        if not senders or not receivers:
            continue
        pairs, full = _partners(topology, senders, receivers, full_pairs)
        complete &= full
        for a, b in pairs:
            ins, outs = entries[a], exits[b]
            if len(ins) == 1 and len(outs) == 1:
                best = (0, ins[0], outs[0]) if comp.hops(ins[0], outs[0]) is not None else None
            else:
                best = None
                for e in ins:
                    for x in outs:
                        h = comp.hops(e, x)
                        if h is not None and (best is None or (h, e, x) < best):
                            best = (h, e, x)
            if best is None:
                continue
            src.append(a)
            dst.append(b)
            via.append(comp.path(best[1], best[2], a, b))
    count = len(src)
    ptr = [0]
    ids: list[int] = []
    hop_ids: dict[tuple[int, ...], list[int]] = {}  # link ids of a via, shared by the pairs using it
    for a, b, v in zip(src, dst, via):
        if not v:
            ids.append(link_index[(a, b)])
        else:
            inner = hop_ids.get(v)
            if inner is None:
                inner = hop_ids[v] = [link_index[(u, w)] for u, w in pairwise(v)]
            ids.append(link_index[(a, v[0])])
            ids.extend(inner)
            ids.append(link_index[(v[-1], b)])
        ptr.append(len(ids))
    link_ptr = np.asarray(ptr, dtype=np.int64)
    link_ids = np.asarray(ids, dtype=np.int64)
    starts = link_ptr[:-1]
    if count:
        alpha = np.add.reduceat(topology.latency_array[link_ids], starts)
        bottleneck = np.minimum.reduceat(topology.bandwidth_array[link_ids], starts)
    else:
        alpha = bottleneck = np.zeros(0)
    channels = PathChannels(
        topology=topology,
        src=np.asarray(src, dtype=np.int64),
        dst=np.asarray(dst, dtype=np.int64),
        via=tuple(via),
        link_ptr=link_ptr,
        link_ids=link_ids,
        alpha=alpha,
        bottleneck=bottleneck,
        complete=complete,
    )
    _check_connected(channels)
    return channels


def _check_connected(channels: PathChannels) -> None:
    """Every rank reaches every other rank over channels (both ways from rank 0)."""
    r = channels.topology.num_ranks
    if r < 2:
        return
    for a, b in ((channels.src, channels.dst), (channels.dst, channels.src)):
        order = np.argsort(a, kind="stable")
        heads = b[order]
        starts = np.searchsorted(a[order], np.arange(r + 1))
        seen = np.zeros(r, dtype=bool)
        seen[0] = True
        frontier = np.array([0])
        while frontier.size:
            nxt = np.concatenate([heads[starts[v] : starts[v + 1]] for v in frontier.tolist()])
            nxt = np.unique(nxt[~seen[nxt]])
            seen[nxt] = True
            frontier = nxt
        if not seen.all():
            raise ValueError(f"channels of {channels.topology.name} do not join every rank (rank {int(np.argmin(seen))})")
