"""The step-synchronous time of a schedule (FORMATS.md), for choosing between candidate schedules.

A step lasts its longest transfer; a transfer over path P lasts Σ_{ℓ∈P} α_ℓ + max_{ℓ∈P} B_ℓ/bw_ℓ,
B_ℓ being the bytes all transfers of the step send over ℓ; the schedule lasts the sum of its steps.
With c bytes per chunk and n_ℓ transfers of the step on ℓ, transfer t lasts A_t + c·M_t with
A_t = Σα and M_t = max_ℓ n_ℓ/bw_ℓ, so one pass over the transfers gives every size at once.

This private function stands in for the project's simulator (``synth.simulate``) until that lands;
it implements the same model and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise

import numpy as np

from synth.schedule import Schedule
from synth.topology import Topology

#: bytes per µs in one GB/s
_BYTES_PER_US = 1e3
#: transfers handled per block (bounds the memory of the link expansion)
_BLOCK = 1 << 21


def transfer_links(schedule: Schedule, topology: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct (src, route, dst) of the schedule: the CSR list of the link ids of its path.

    Returns (inverse, ptr, links): transfer i uses ``links[ptr[inverse[i]]:ptr[inverse[i] + 1]]``."""
    r = topology.num_ranks
    nroutes = len(schedule.routes)
    key = (schedule.src * r + schedule.dst) * nroutes + schedule.route
    uniq, inverse = np.unique(key, return_inverse=True)
    index = topology.node_index
    link_index = topology.link_index
    route_nodes = [tuple(index[name] for name in via) for via in schedule.routes]
    ptr = [0]
    links: list[int] = []
    for k in uniq.tolist():
        pair, rid = divmod(k, nroutes)
        a, b = divmod(pair, r)
        path = (a, *route_nodes[rid], b)
        for u, v in pairwise(path):
            links.append(link_index[(u, v)])
        ptr.append(len(links))
    return inverse, np.asarray(ptr, dtype=np.int64), np.asarray(links, dtype=np.int64)


def step_lines(schedule: Schedule, topology: Topology) -> tuple[np.ndarray, np.ndarray]:
    """(A, M) per step: the largest Σα and the largest max_ℓ n_ℓ/bw_ℓ (µs per chunk byte) over the
    transfers of each step that can be its longest one, as a list of candidate lines per step.

    Returned as two [S, W] arrays padded with -inf latency (W = the most lines any step keeps)."""
    n = schedule.num_transfers
    steps = schedule.num_steps
    if n == 0:
        return np.zeros((steps, 1)), np.zeros((steps, 1))
    inverse, ptr, links = transfer_links(schedule, topology)
    bw = topology.bandwidth_array * _BYTES_PER_US
    lat = topology.latency_array
    path_alpha = np.add.reduceat(lat[links], ptr[:-1]) if links.size else np.zeros(ptr.size - 1)
    path_len = np.diff(ptr)
    step_of = schedule.step_of_transfer
    num_links = len(topology.links)
    lines_a: list[list[float]] = [[] for _ in range(steps)]
    lines_m: list[list[float]] = [[] for _ in range(steps)]
    starts = schedule.step_starts
    s0 = 0
    while s0 < steps:
        s1 = s0 + 1  # a block of whole steps with at most _BLOCK transfers (at least one step)
        while s1 < steps and starts[s1 + 1] - starts[s0] <= _BLOCK:
            s1 += 1
        lo, hi = int(starts[s0]), int(starts[s1])
        if hi > lo:
            inv = inverse[lo:hi]
            lens = path_len[inv]
            first = ptr[inv]
            owner = np.repeat(np.arange(hi - lo), lens)
            offset = np.arange(owner.size) - np.repeat(np.cumsum(lens) - lens, lens)
            link = links[first[owner] + offset]
            key = step_of[lo:hi][owner] * num_links + link
            _, kinv, counts = np.unique(key, return_inverse=True, return_counts=True)
            per = counts[kinv] / bw[link]
            m = np.maximum.reduceat(per, np.concatenate(([0], np.cumsum(lens)[:-1])))
            a = path_alpha[inv]
            st = step_of[lo:hi]
            # keep per step the transfers not dominated in both A and M (at most a handful): sorted
            # by step, then A descending, a transfer stays if its M beats every earlier one's
            _, m_rank = np.unique(m, return_inverse=True)
            order = np.lexsort((-m_rank, -a, st))
            st_o, a_o, m_o, r_o = st[order], a[order], m[order], m_rank[order]
            span = int(r_o.max()) + 2
            running = np.maximum.accumulate(st_o * span + r_o + 1)
            before = np.r_[-1, running[:-1]]
            new_step = np.r_[True, st_o[1:] != st_o[:-1]]
            keep = new_step | (st_o * span + r_o + 1 > before)
            for s, av, mv in zip(st_o[keep].tolist(), a_o[keep].tolist(), m_o[keep].tolist()):
                lines_a[s].append(av)
                lines_m[s].append(mv)
        s0 = s1
    width = max(1, max(len(x) for x in lines_a))
    a_arr = np.full((steps, width), -np.inf)
    m_arr = np.zeros((steps, width))
    for s in range(steps):
        if lines_a[s]:
            a_arr[s, : len(lines_a[s])] = lines_a[s]
            m_arr[s, : len(lines_m[s])] = lines_m[s]
    return a_arr, m_arr


def lines_time_us(a: np.ndarray, m: np.ndarray, chunk_bytes: float) -> float:
    """Total time (µs) of steps given as candidate lines (see `step_lines`) at ``chunk_bytes``."""
    t = a + chunk_bytes * m
    best = t.max(axis=1)
    return float(np.where(np.isfinite(best), best, 0.0).sum())


def sync_time_us(schedule: Schedule, topology: Topology, sizes: Iterable[int]) -> list[float]:
    """Step-synchronous time (µs) of ``schedule`` at each nccl-tests size."""
    a, m = step_lines(schedule, topology)
    coll = schedule.collective
    return [lines_time_us(a, m, coll.chunk_bytes(size)) for size in sizes]
