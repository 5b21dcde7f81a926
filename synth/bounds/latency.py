"""Latency facts of a topology for the bounds: α-distances between ranks, the rank graph's hop
distances, and the smallest α any single transfer can have.

- ``alpha[a][b]``: the smallest total α (µs) of any walk from rank a to rank b through the
  network, through switches *and* ranks. A chunk that reaches b from a is carried by a chain of
  transfers in strictly later and later steps (a rank forwards only what it held at the start of
  a step), each over a switch-only path; the chain's paths join into such a walk, and each step
  lasts at least the α of its path, so the chain costs at least ``alpha[a][b]``.
- ``hops[a][b]``: the fewest transfers such a chain needs: the hop distance in the *rank graph*,
  where a → b is an edge when a switch-only path (a direct link, or a path through switches only)
  leads from a to b.
- ``min_transfer_alpha``: the smallest α of any switch-only path between two distinct ranks; every
  non-empty step lasts at least this long.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from synth.topology import Topology

INF = float("inf")


@dataclass(frozen=True)
class LatencyFacts:
    alpha: np.ndarray  # [R, R] µs, 0 on the diagonal
    hops: np.ndarray  # [R, R] transfers (int), 0 on the diagonal; -1 never occurs (ranks reach each other)
    min_transfer_alpha: float
    #: [R, R] µs: the smallest α of one transfer from a to b (a switch-only path); inf where no
    #: switch-only path exists and on the diagonal
    direct: np.ndarray


def _dijkstra(topology: Topology, source: int, through_ranks: bool) -> list[float]:
    """Smallest total α from ``source`` to every node; with ``through_ranks`` False, paths may
    pass only through switches (ranks other than the source are end points)."""
    n, r = topology.num_nodes, topology.num_ranks
    dist = [INF] * n
    dist[source] = 0.0
    heap = [(0.0, source)]
    links, out_links = topology.links, topology.out_links
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        if u != source and u < r and not through_ranks:
            continue
        for i in out_links[u]:
            link = links[i]
            nd = d + link.latency
            if nd < dist[link.dst]:
                dist[link.dst] = nd
                heapq.heappush(heap, (nd, link.dst))
    return dist


#: Up to this many nodes the distances come from a vectorized Floyd–Warshall (O(N³) in numpy);
#: beyond it, from a Dijkstra per rank (O(R·E log N) in Python).
FLOYD_MAX_NODES = 700


def _floyd(topology: Topology) -> tuple[np.ndarray, np.ndarray]:
    """(switch-only, any-path) α-distances between all nodes: Floyd–Warshall with the switches
    as intermediates first, then the ranks."""
    n, r = topology.num_nodes, topology.num_ranks
    dist = np.full((n, n), INF)
    for link in topology.links:
        dist[link.src, link.dst] = min(dist[link.src, link.dst], link.latency)
    np.fill_diagonal(dist, 0.0)
    for k in range(r, n):
        np.minimum(dist, dist[:, k : k + 1] + dist[k : k + 1, :], out=dist)
    switch_only = dist.copy()
    for k in range(r):
        np.minimum(dist, dist[:, k : k + 1] + dist[k : k + 1, :], out=dist)
    return switch_only[:r, :r], dist[:r, :r]


def hop_distances(adjacency: np.ndarray) -> np.ndarray:
    """BFS distances in a directed graph given as a boolean matrix, all sources at once (one
    matrix product per level)."""
    r = adjacency.shape[0]
    hops = np.full((r, r), -1, dtype=np.int64)
    frontier = np.eye(r, dtype=bool)
    reached = frontier.copy()
    hops[frontier] = 0
    step = adjacency.astype(np.float32)
    level = 0
    while frontier.any():
        level += 1
        frontier = ((frontier.astype(np.float32) @ step) > 0) & ~reached
        hops[frontier] = level
        reached |= frontier
    return hops


def latency_facts(topology: Topology) -> LatencyFacts:
    """α-distances and hop distances between all ranks."""
    r = topology.num_ranks
    if topology.num_nodes <= FLOYD_MAX_NODES:
        direct, alpha = _floyd(topology)
        direct = direct.copy()
    else:
        alpha = np.zeros((r, r))
        direct = np.full((r, r), INF)
        for a in range(r):
            alpha[a] = _dijkstra(topology, a, through_ranks=True)[:r]
            direct[a] = _dijkstra(topology, a, through_ranks=False)[:r]
    np.fill_diagonal(direct, INF)
    min_alpha = float(direct.min()) if r > 1 else 0.0
    hops = hop_distances(np.isfinite(direct))
    alpha = np.ascontiguousarray(alpha)
    direct = np.ascontiguousarray(direct)
    for array in (alpha, hops, direct):
        array.setflags(write=False)
    return LatencyFacts(alpha, hops, min_alpha, direct)


def through_alpha(topology: Topology) -> np.ndarray:
    """For every directed link ℓ = x → y, the smallest α of a single transfer whose path crosses
    it: a switch-only path from a rank a to x (empty when x is a rank: then a = x), ℓ, and a
    switch-only path from y to a rank b ≠ a (empty when y is a rank: then b = y). A transfer that
    crosses a set of links lasts at least the smallest of their values (on top of its bytes)."""
    r = topology.num_ranks
    to_node = _two_nearest(topology, reverse=False)  # per node: the 2 nearest ranks a (α(a → x), a)
    from_node = _two_nearest(topology, reverse=True)  # per node: the 2 nearest ranks b (α(x → b), b)
    out = np.full(len(topology.links), INF)
    for i, link in enumerate(topology.links):
        heads = [(0.0, link.src)] if link.src < r else to_node[link.src]
        tails = [(0.0, link.dst)] if link.dst < r else from_node[link.dst]
        out[i] = min((h + link.latency + t for h, a in heads for t, b in tails if a != b), default=INF)
    out.setflags(write=False)
    return out


def _two_nearest(topology: Topology, reverse: bool) -> list[list[tuple[float, int]]]:
    """For every node, the (α, rank) of the two nearest distinct ranks that reach it through
    switches only (with ``reverse``: that it reaches). Ranks are only end points."""
    n, r = topology.num_nodes, topology.num_ranks
    found: list[list[tuple[float, int]]] = [[] for _ in range(n)]
    heap = [(0.0, v, v) for v in range(r)]
    heapq.heapify(heap)
    links = topology.links
    adjacency = topology.in_links if reverse else topology.out_links
    while heap:
        d, u, origin = heapq.heappop(heap)
        labels = found[u]
        if len(labels) >= 2 or any(o == origin for _, o in labels):
            continue
        labels.append((d, origin))
        if u < r and u != origin:
            continue  # a rank reached through the network ends a transfer
        for i in adjacency[u]:
            link = links[i]
            v = link.src if reverse else link.dst
            if len(found[v]) < 2:
                heapq.heappush(heap, (d + link.latency, v, origin))
    return found
