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


def transfer_paths(schedule: Schedule, topology: Topology) -> TransferPaths:
    """Link ids along every transfer's path. Raises ValueError naming the first transfer whose path
    uses a node or link the topology lacks (verify the schedule first to get the full diagnosis)."""
    n = schedule.num_transfers
    n_nodes = topology.num_nodes
    names = topology.node_index
    src, dst, route = schedule.src, schedule.dst, schedule.route

    # per route: node ids of the switches and the ids of the links between consecutive switches
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

    num_via = np.array([len(v) for v in via_nodes], dtype=np.int64)
    first_via = np.array([v[0] if v else -1 for v in via_nodes], dtype=np.int64)
    last_via = np.array([v[-1] if v else -1 for v in via_nodes], dtype=np.int64)
    inner_len = np.array([len(x) for x in inner], dtype=np.int64)
    inner_ptr = np.concatenate(([0], np.cumsum(inner_len))).astype(np.int64)
    inner_links = np.array([lid for x in inner for lid in x], dtype=np.int64)

    # link lookup by (a, b) key
    pairs = np.array(sorted(a * n_nodes + b for a, b in topology.link_index), dtype=np.int64)
    pair_ids = np.array([topology.link_index[(int(k) // n_nodes, int(k) % n_nodes)] for k in pairs], dtype=np.int64)

    def lookup(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        keys = a * n_nodes + b
        if pairs.size == 0:
            pos = np.zeros(keys.shape, dtype=np.int64)
            found = np.zeros(keys.shape, dtype=bool)
        else:
            pos = np.minimum(np.searchsorted(pairs, keys), pairs.size - 1)
            found = pairs[pos] == keys
        if not found.all():
            i = int(np.flatnonzero(~found)[0])
            raise ValueError(f"path of transfer {i}: no link {topology.node_name(int(a[i]))} -> {topology.node_name(int(b[i]))}")
        return pair_ids[pos]

    nv = num_via[route]
    has_via = nv > 0
    lengths = nv + 1
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    links = np.empty(int(ptr[-1]), dtype=np.int64)
    first_hop = np.where(has_via, first_via[route], dst)
    links[ptr[:-1]] = lookup(src, first_hop)
    if has_via.any():
        idx = np.flatnonzero(has_via)
        r = route[idx]
        links[ptr[idx] + nv[idx]] = lookup(last_via[r], dst[idx])
        m = inner_len[r]
        if m.sum():
            rep = np.repeat(idx, m)
            within = np.arange(int(m.sum()), dtype=np.int64) - np.repeat(np.cumsum(m) - m, m)
            links[ptr[rep] + 1 + within] = inner_links[inner_ptr[route[rep]] + within]

    latency = np.add.reduceat(topology.latency_array[links], ptr[:-1]) if n else np.zeros(0)
    latency = np.asarray(latency, dtype=np.float64)

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
