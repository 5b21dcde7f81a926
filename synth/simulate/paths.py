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
        names = topology.node_index
        route = schedule.route
        n = schedule.num_transfers
        via_nodes: list[list[int]] = []
        inner: list[list[int]] = []
        for rid, via in enumerate(schedule.routes):
            ids = []
            for name in via:
                node = names.get(name)
                if node is None:
                    first = int(np.flatnonzero(route == rid)[0]) if n else 0
                    raise ValueError(f"transfer {first}: via {name!r} is not a node of topology {topology.name!r}")
                ids.append(node)
            links = []
            for a, b in pairwise(ids):
                lid = topology.link_index.get((a, b))
                if lid is None:
                    first = int(np.flatnonzero(route == rid)[0]) if n else 0
                    raise ValueError(f"transfer {first}: no link {topology.node_name(a)} -> {topology.node_name(b)}")
                links.append(lid)
            via_nodes.append(ids)
            inner.append(links)
        self.num_via = np.array([len(v) for v in via_nodes], dtype=np.int64)
        self.any_via = bool(self.num_via.any())
        self.first_via = np.array([v[0] if v else -1 for v in via_nodes], dtype=np.int64)
        self.last_via = np.array([v[-1] if v else -1 for v in via_nodes], dtype=np.int64)
        self.inner_len = np.array([len(x) for x in inner], dtype=np.int64)
        self.inner_ptr = np.concatenate(([0], np.cumsum(self.inner_len))).astype(np.int64)
        self.inner_links = np.array([lid for x in inner for lid in x], dtype=np.int64)
        # link lookup by (a, b) key
        self.n_nodes = n_nodes
        self.pairs = np.array(sorted(a * n_nodes + b for a, b in topology.link_index), dtype=np.int64)
        self.pair_ids = np.array([topology.link_index[(int(k) // n_nodes, int(k) % n_nodes)] for k in self.pairs], dtype=np.int64)

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

    def paths(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(ptr, links) of transfers ``lo … hi − 1``: transfer ``lo + i`` crosses
        ``links[ptr[i]:ptr[i + 1]]``, in path order."""
        schedule = self.schedule
        src, dst, route = schedule.src[lo:hi], schedule.dst[lo:hi], schedule.route[lo:hi]
        n = hi - lo
        ptr = np.zeros(n + 1, dtype=np.int64)
        if not self.any_via:  # every path is its one direct link
            ptr[1:] = np.arange(1, n + 1, dtype=np.int64)
            return ptr, self.lookup(src, dst, lo)
        nv = self.num_via[route]
        has_via = nv > 0
        np.cumsum(nv + 1, out=ptr[1:])
        links = np.empty(int(ptr[-1]), dtype=np.int64)
        first_hop = np.where(has_via, self.first_via[route], dst)
        links[ptr[:-1]] = self.lookup(src, first_hop, lo)
        if has_via.any():
            idx = np.flatnonzero(has_via)
            r = route[idx]
            links[ptr[idx] + nv[idx]] = self.lookup(self.last_via[r], dst[idx], lo)
            m = self.inner_len[r]
            if m.sum():
                rep = np.repeat(idx, m)
                within = np.arange(int(m.sum()), dtype=np.int64) - np.repeat(np.cumsum(m) - m, m)
                links[ptr[rep] + 1 + within] = self.inner_links[self.inner_ptr[route[rep]] + within]
        return ptr, links


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
