"""The step-synchronous α-β model (docs/formats.md, 'Step-synchronous cost'), evaluated for many
sizes at once.

A step takes the longest of its transfers; a transfer over path P takes

    T(t) = Σ_{ℓ∈P} α_ℓ + max_{ℓ∈P} B_ℓ / bw_ℓ,

where B_ℓ is the bytes all transfers of the step send over directed link ℓ; the schedule takes the
sum of its steps (an empty step takes 0). Every transfer carries one chunk of c bytes
(`Collective.chunk_bytes(size)`), so B_ℓ = c · n_ℓ with n_ℓ the number of the step's transfers
crossing ℓ, and

    T(t) = A_t + c · M_t,   A_t = Σ_{ℓ∈P} α_ℓ,   M_t = max_{ℓ∈P} n_ℓ / bw_ℓ.

Each step's time is the upper envelope of the lines c ↦ A_t + c·M_t. `StepLines` keeps, per step,
only the lines not dominated by another line of the step (another with both A and M at least as
large), computed once per schedule; evaluating any number of sizes is then a small matrix product.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from synth.schedule import Schedule
from synth.simulate.paths import RouteLinks, TransferPaths, path_latency
from synth.topology import Topology

#: bytes per µs in one GB/s (10^9 bytes/s = 10^3 bytes/µs)
BYTES_PER_US_PER_GBPS = 1e3

_EVAL_BLOCK = 1 << 22  # lines × sizes evaluated per block (bounds memory)


#: Transfers the model works on at once (whole steps): its temporaries stay a few MB whatever the
#: schedule's size, which also keeps them in the cache and out of fresh pages (blocks of 2^17
#: transfers took a fifth of the time of one pass over the 16.7 million of a 4,096-rank allgather).
LINES_BLOCK = 1 << 17


@dataclass(frozen=True, eq=False)
class StepLines:
    """Per step, the non-dominated lines of the step-synchronous model, and (when asked for, for
    timelines) every transfer's coefficients.

    ``line_step``/``line_latency``/``line_slope`` are the lines that can be a step's longest
    transfer, grouped by step in increasing step order. ``transfer_latency[t]`` is A_t (µs) and
    ``transfer_slope[t]`` is M_t (µs per byte of chunk), or None when not computed."""

    num_steps: int
    transfer_latency: np.ndarray | None  # A_t, µs
    transfer_slope: np.ndarray | None  # M_t, µs per chunk byte
    line_step: np.ndarray
    line_latency: np.ndarray
    line_slope: np.ndarray

    def step_times_us(self, chunk_bytes: np.ndarray | float) -> np.ndarray:
        """Time of every step (rows) for each chunk size (columns); empty steps take 0."""
        c = np.atleast_1d(np.asarray(chunk_bytes, dtype=np.float64))
        out = np.zeros((self.num_steps, c.size), dtype=np.float64)
        if self.line_step.size == 0:
            return out
        starts = np.flatnonzero(np.r_[True, self.line_step[1:] != self.line_step[:-1]])
        steps = self.line_step[starts]
        block = max(1, _EVAL_BLOCK // max(1, self.line_step.size))
        for k0 in range(0, c.size, block):
            cb = c[k0 : k0 + block]
            values = self.line_latency[:, None] + self.line_slope[:, None] * cb[None, :]
            out[steps, k0 : k0 + block] = np.maximum.reduceat(values, starts, axis=0)
        return out

    def times_us(self, chunk_bytes: np.ndarray | float) -> np.ndarray:
        """Schedule time (sum of step times) for each chunk size."""
        return self.step_times_us(chunk_bytes).sum(axis=0)

    def transfer_times_us(self, chunk_bytes: float) -> np.ndarray:
        """Each transfer's own time A_t + c·M_t for one chunk size (needs the per-transfer
        coefficients: `step_lines` with ``per_transfer``)."""
        if self.transfer_latency is None or self.transfer_slope is None:
            raise ValueError("these lines were computed without the per-transfer coefficients")
        return self.transfer_latency + self.transfer_slope * float(chunk_bytes)


def _step_blocks(step_starts: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Consecutive ranges of whole steps (first step, end step), each with at most ``limit``
    transfers unless one step alone has more."""
    starts = step_starts.tolist()
    blocks = []
    first, last = 0, len(starts) - 1
    while first < last:
        end = bisect.bisect_right(starts, starts[first] + limit, first + 1, last + 1) - 1
        end = max(end, first + 1)
        blocks.append((first, end))
        first = end
    return blocks


def step_lines(
    schedule: Schedule, topology: Topology, paths: TransferPaths | None = None, *, per_transfer: bool = False
) -> StepLines:
    """Precompute the step-synchronous model's lines for a schedule (see the module docstring),
    a block of whole steps at a time. ``paths``: the schedule's paths if already computed (else
    each block finds its own); ``per_transfer`` keeps every transfer's A_t and M_t (for
    timelines: 16 bytes per transfer)."""
    n = schedule.num_transfers
    if n == 0:
        empty_f = np.zeros(0, dtype=np.float64)
        return StepLines(schedule.num_steps, empty_f, empty_f, np.zeros(0, dtype=np.int64), empty_f, empty_f)
    routes = RouteLinks(schedule, topology) if paths is None else None
    lines: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    latencies: list[np.ndarray] = []
    slopes: list[np.ndarray] = []
    for first, end in _step_blocks(schedule.step_starts, LINES_BLOCK):
        lo, hi = int(schedule.step_starts[first]), int(schedule.step_starts[end])
        if lo == hi:
            continue
        if routes is not None:
            ptr, links = routes.paths(lo, hi)
            latency = path_latency(topology, ptr, links)
        else:
            assert paths is not None
            ptr = paths.ptr[lo : hi + 1] - paths.ptr[lo]
            links = paths.links[paths.ptr[lo] : paths.ptr[hi]]
            latency = np.asarray(paths.latency_us[lo:hi], dtype=np.float64)
        step_starts = schedule.step_starts[first : end + 1] - lo
        latency, slope, block_lines = _block_lines(topology, step_starts, ptr, links, latency)
        lines.append((block_lines[0] + first, block_lines[1], block_lines[2]))
        if per_transfer:
            latencies.append(latency)
            slopes.append(slope)
    line_step, line_latency, line_slope = (np.concatenate([b[i] for b in lines]) for i in range(3))
    transfer_latency = transfer_slope = None
    if per_transfer:
        transfer_latency, transfer_slope = np.concatenate(latencies), np.concatenate(slopes)
        for arr in (transfer_latency, transfer_slope):
            arr.setflags(write=False)
    return StepLines(
        num_steps=schedule.num_steps,
        transfer_latency=transfer_latency,
        transfer_slope=transfer_slope,
        line_step=line_step,
        line_latency=line_latency,
        line_slope=line_slope,
    )


def _block_lines(
    topology: Topology, step_starts: np.ndarray, ptr: np.ndarray, links: np.ndarray, latency: np.ndarray
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """A_t and M_t of a block of whole steps (``step_starts`` relative to the block, which
    starts with a non-empty step or ends with one), and its non-dominated lines (step relative
    to the block, latency, slope)."""
    n = int(step_starts[-1])
    num_steps = step_starts.size - 1
    num_links = len(topology.links)
    step = np.repeat(np.arange(num_steps, dtype=np.int64), np.diff(step_starts))
    lengths = np.diff(ptr)
    if num_steps == 1:  # a block of one step (a large step is a block of its own): the link is the key
        key = links
    else:
        entry_step = step if links.size == n else np.repeat(step, lengths)
        key = entry_step * num_links + links
    # n_ℓ / bw_ℓ per (step, link), read back per path entry
    if num_steps * num_links <= 1 << 25:
        per_link = np.bincount(key, minlength=num_steps * num_links) / np.tile(
            topology.bandwidth_array * BYTES_PER_US_PER_GBPS, num_steps
        )
        per_byte = per_link[key]
    else:
        _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
        per_byte = counts[inverse.reshape(-1)] / (topology.bandwidth_array[links] * BYTES_PER_US_PER_GBPS)
    slope = per_byte if links.size == n else np.maximum.reduceat(per_byte, ptr[:-1])

    # Only lines not dominated by a step's two corner lines can be on its envelope: the steepest
    # line with the highest latency among the steepest (it dominates every line of no more
    # latency), and the highest-latency line with the steepest slope among those (it dominates
    # every line of no more slope). Sorting is left to those candidates, usually a handful.
    nonempty = np.flatnonzero(np.diff(step_starts) > 0)
    seg = step_starts[nonempty]
    seg_of = np.repeat(np.arange(nonempty.size), np.diff(np.append(seg, n)))
    m_max = np.maximum.reduceat(slope, seg)[seg_of]
    a_max = np.maximum.reduceat(latency, seg)[seg_of]
    steepest = slope == m_max
    slowest = latency == a_max
    a_at_m = np.maximum.reduceat(np.where(steepest, latency, -np.inf), seg)[seg_of]
    m_at_a = np.maximum.reduceat(np.where(slowest, slope, -np.inf), seg)[seg_of]
    parts = [np.flatnonzero((latency > a_at_m) & (slope > m_at_a))]
    for corner in (steepest & (latency == a_at_m), slowest & (slope == m_at_a)):
        at = np.flatnonzero(corner)  # often many equal lines: the first of each step is enough
        if at.size:
            parts.append(at[np.r_[True, seg_of[at][1:] != seg_of[at][:-1]]])
    cand = np.unique(np.concatenate(parts))
    # non-dominated lines per step: order by (step, slope desc, latency desc); a line survives if
    # its latency exceeds every latency seen before it in its step
    c_step, c_a, c_m = step[cand], latency[cand], slope[cand]
    order = np.lexsort((-c_a, -c_m, c_step))
    s, a, m = c_step[order], c_a[order], c_m[order]
    _, a_rank = np.unique(a, return_inverse=True)
    a_rank = a_rank.reshape(-1).astype(np.int64)
    code = s * (int(a_rank.max()) + 1) + a_rank  # integer, so the running maximum resets per step
    running = np.maximum.accumulate(code)
    keep = np.ones(s.size, dtype=bool)
    keep[1:] = code[1:] > running[:-1]
    return latency, slope, (s[keep], a[keep], m[keep])
