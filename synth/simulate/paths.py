"""Each transfer's path as directed link ids, computed once for a whole schedule.

A transfer goes ``src → via[0] → … → via[-1] → dst``. Both cost models need, per transfer, the link
ids of that path and its latency Σα. Schedules hold up to millions of transfers but few distinct
routes, so the inner links (switch to switch) are looked up once per route and the first and last
links (rank to switch, switch to rank, or the direct rank-to-rank link) by a vectorized search over
the sorted link keys. The result is a CSR layout: transfer ``i`` crosses
``links[ptr[i]:ptr[i + 1]]``, in path order.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from synth.schedule import Schedule
from synth.topology import Topology


@dataclass(frozen=True, eq=False)
class TransferPaths:
    """Paths of a schedule's transfers on a topology (CSR), with their total latency.

    ``path_id`` numbers the distinct paths (same src, route and dst give the same id; the first
    occurrence in schedule order gets the next id), so that flows on one path can be handled
    together."""

    ptr: np.ndarray  # int64 [n + 1]
    links: np.ndarray  # int64 [ptr[-1]]: link ids in path order
    latency_us: np.ndarray  # float64 [n]: Σ α over the path, summed in path order
    path_id: np.ndarray  # int64 [n]: id of the transfer's distinct path
    num_paths: int

    @property
    def num_transfers(self) -> int:
        return len(self.ptr) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.ptr)

    def of(self, transfer: int) -> tuple[int, ...]:
        """Link ids of one transfer's path."""
        return tuple(int(x) for x in self.links[self.ptr[transfer] : self.ptr[transfer + 1]])

    def entry_transfer(self) -> np.ndarray:
        """For every entry of ``links``, the transfer it belongs to."""
        return np.repeat(np.arange(self.num_transfers, dtype=np.int64), self.lengths)

    def path_representatives(self) -> np.ndarray:
        """For each distinct path id, the first transfer that uses it."""
        first = np.full(self.num_paths, -1, dtype=np.int64)
        order = np.arange(self.num_transfers, dtype=np.int64)
        # the first occurrence wins: write in reverse so that the smallest index is written last
        first[self.path_id[::-1]] = order[::-1]
        return first


def _freeze(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.setflags(write=False)


class RouteLinks:
    """What finding paths needs, computed once per schedule and topology: every route's switch
    nodes, the links between consecutive switches, and a lookup of links by (a, b) node pair.
    `paths` then gives the link ids of any range of transfers (the whole schedule, or a block of
    steps: the step-synchronous model works a block at a time)."""

    def __init__(self, schedule: Schedule, topology: Topology):
        self.topology = topology
        self.schedule = schedule
        n_nodes = topology.num_nodes
        routes = schedule.routes
        # every route at once on its node ids (the verifier has asked the topology for the same)
        ptr, ids = topology.route_node_ids(routes)
        lengths = np.diff(ptr)
        route_of = np.repeat(np.arange(len(routes), dtype=np.int64), lengths)
        along = route_of[1:] == route_of[:-1]
        inner_links = topology.link_ids(ids[:-1][along], ids[1:][along])
        if (ids < 0).any() or (inner_links < 0).any():
            self._route_error(schedule, topology)
        self.num_via = lengths
        self.any_via = bool(self.num_via.any())
        has_via = lengths > 0
        self.first_via = np.full(len(routes), -1, dtype=np.int64)
        self.last_via = np.full(len(routes), -1, dtype=np.int64)
        self.first_via[has_via] = ids[ptr[:-1][has_via]]
        self.last_via[has_via] = ids[ptr[1:][has_via] - 1]
        self.inner_len = np.maximum(lengths - 1, 0)
        self.inner_ptr = np.concatenate(([0], np.cumsum(self.inner_len))).astype(np.int64)
        self.inner_links = inner_links.astype(np.int64)
        # link lookup by (a, b) key
        self.n_nodes = n_nodes
        self.pairs, self.pair_ids = topology.link_keys
        # every path starts with a link out of its source rank and ends with one into its
        # destination: with few links per rank, a table of each rank's neighbours finds them
        # faster than a search among all the links
        r = topology.num_ranks
        self.out_of_rank = _rank_neighbours([(a, b, i) for (a, b), i in topology.link_index.items() if a < r], r)
        self.into_rank = _rank_neighbours([(b, a, i) for (a, b), i in topology.link_index.items() if b < r], r)

    @staticmethod
    def _route_error(schedule: Schedule, topology: Topology) -> None:
        """Raise the ValueError of the first route that names no node or crosses no link."""
        names = topology.node_index
        route = schedule.route
        n = schedule.num_transfers
        for rid, via in enumerate(schedule.routes):
            ids = []
            for name in via:
                node = names.get(name)
                if node is None:
                    first = int(np.flatnonzero(route == rid)[0]) if n else 0
                    raise ValueError(f"transfer {first}: via {name!r} is not a node of topology {topology.name!r}")
                ids.append(node)
            for a, b in pairwise(ids):
                if topology.link_index.get((a, b)) is None:
                    first = int(np.flatnonzero(route == rid)[0]) if n else 0
                    raise ValueError(f"transfer {first}: no link {topology.node_name(a)} -> {topology.node_name(b)}")

    def lookup(self, a: np.ndarray, b: np.ndarray, offset: int = 0) -> np.ndarray:
        """Link ids of the (a[i], b[i]) pairs; ValueError naming transfer ``offset + i`` if one
        is not a link."""
        keys = a * self.n_nodes + b
        if self.pairs.size == 0:
            pos = np.zeros(keys.shape, dtype=np.int64)
            found = np.zeros(keys.shape, dtype=bool)
        else:
            pos = np.minimum(np.searchsorted(self.pairs, keys), self.pairs.size - 1)
            found = self.pairs[pos] == keys
        if not found.all():
            i = int(np.flatnonzero(~found)[0])
            name = self.topology.node_name
            raise ValueError(f"path of transfer {offset + i}: no link {name(int(a[i]))} -> {name(int(b[i]))}")
        return self.pair_ids[pos]

    def rank_lookup(self, a: np.ndarray, b: np.ndarray, offset: int, *, out: bool) -> np.ndarray:
        """`lookup` for pairs whose first node ``a`` is a rank (``out``) or whose second node
        ``b`` is one (not ``out``), through that rank's neighbour table when it has one."""
        table = self.out_of_rank if out else self.into_rank
        if table is None:
            return self.lookup(a, b, offset)
        rank, other = (a, b) if out else (b, a)
        neighbours, ids = table
        found = np.full(rank.shape, -1, dtype=np.int64)
        for near, link in zip(neighbours, ids):  # one link per (rank, node) pair
            hit = near[rank] == other
            found[hit] = link[rank[hit]]
        if (found < 0).any():
            return self.lookup(a, b, offset)  # names the first pair that is not a link
        return found

    def paths(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(ptr, links) of transfers ``lo … hi − 1``: transfer ``lo + i`` crosses
        ``links[ptr[i]:ptr[i + 1]]``, in path order."""
        schedule = self.schedule
        src, dst, route = schedule.src[lo:hi], schedule.dst[lo:hi], schedule.route[lo:hi]
        n = hi - lo
        ptr = np.zeros(n + 1, dtype=np.int64)
        if not self.any_via:  # every path is its one direct link
            ptr[1:] = np.arange(1, n + 1, dtype=np.int64)
            return ptr, self.rank_lookup(src, dst, lo, out=True)
        nv = self.num_via[route]
        has_via = nv > 0
        np.cumsum(nv + 1, out=ptr[1:])
        links = np.empty(int(ptr[-1]), dtype=np.int64)
        first_hop = np.where(has_via, self.first_via[route], dst)
        links[ptr[:-1]] = self.rank_lookup(src, first_hop, lo, out=True)
        if has_via.any():
            idx = np.flatnonzero(has_via)
            r = route[idx]
            links[ptr[idx] + nv[idx]] = self.rank_lookup(self.last_via[r], dst[idx], lo, out=False)
            m = self.inner_len[r]
            if m.sum():
                rep = np.repeat(idx, m)
                within = np.arange(int(m.sum()), dtype=np.int64) - np.repeat(np.cumsum(m) - m, m)
                links[ptr[rep] + 1 + within] = self.inner_links[self.inner_ptr[route[rep]] + within]
        return ptr, links


#: a rank's neighbour table is used while no rank has more links than this (out or in)
MAX_RANK_NEIGHBOURS = 8


def _rank_neighbours(links: list[tuple[int, int, int]], ranks: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Per rank, the nodes its links (rank, node, link id) join it to and those links' ids,
    padded with -1: (neighbours, ids) of shape (most links of a rank, ranks), the j-th link of
    every rank in one row; None when a rank has more than `MAX_RANK_NEIGHBOURS`."""
    degree = np.bincount(np.array([a for a, _, _ in links], dtype=np.int64), minlength=ranks)
    width = int(degree.max()) if ranks else 0
    if width > MAX_RANK_NEIGHBOURS or width == 0:
        return None
    neighbours = np.full((width, ranks), -1, dtype=np.int64)
    ids = np.full((width, ranks), -1, dtype=np.int64)
    used = np.zeros(ranks, dtype=np.int64)
    for a, b, i in links:
        neighbours[used[a], a] = b
        ids[used[a], a] = i
        used[a] += 1
    return neighbours, ids


def path_latency(topology: Topology, ptr: np.ndarray, links: np.ndarray) -> np.ndarray:
    """Σ α over each path (``ptr``/``links`` as `RouteLinks.paths` gives them), summed in path
    order."""
    if ptr.size <= 1:
        return np.zeros(0, dtype=np.float64)
    alpha = topology.latency_array[links]
    if links.size == ptr.size - 1:  # one link per path
        return np.asarray(alpha, dtype=np.float64)
    return np.asarray(np.add.reduceat(alpha, ptr[:-1]), dtype=np.float64)


def transfer_paths(schedule: Schedule, topology: Topology) -> TransferPaths:
    """Link ids along every transfer's path. Raises ValueError naming the first transfer whose path
    uses a node or link the topology lacks (verify the schedule first to get the full diagnosis)."""
    n = schedule.num_transfers
    ptr, links = RouteLinks(schedule, topology).paths(0, n)
    latency = path_latency(topology, ptr, links)
    src, dst, route = schedule.src, schedule.dst, schedule.route

    # distinct paths: (src, route, dst) determines the path
    if n:
        key = (route * topology.num_ranks + src) * topology.num_ranks + dst
        uniq, first_index, inverse = np.unique(key, return_index=True, return_inverse=True)
        # number paths by first occurrence in schedule order
        order = np.argsort(first_index, kind="stable")
        renumber = np.empty(uniq.size, dtype=np.int64)
        renumber[order] = np.arange(uniq.size, dtype=np.int64)
        path_id = renumber[inverse.reshape(-1)]
        num_paths = int(uniq.size)
    else:
        path_id = np.zeros(0, dtype=np.int64)
        num_paths = 0
    _freeze(ptr, links, latency, path_id)
    return TransferPaths(ptr=ptr, links=links, latency_us=latency, path_id=path_id, num_paths=num_paths)
