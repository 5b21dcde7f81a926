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

from dataclasses import dataclass

import numpy as np

from synth.schedule import Schedule
from synth.simulate.paths import TransferPaths
from synth.topology import Topology

#: bytes per µs in one GB/s (10^9 bytes/s = 10^3 bytes/µs)
BYTES_PER_US_PER_GBPS = 1e3

_EVAL_BLOCK = 1 << 22  # lines × sizes evaluated per block (bounds memory)


@dataclass(frozen=True, eq=False)
class StepLines:
    """Per-transfer coefficients and, per step, the non-dominated lines of the step-synchronous model.

    ``transfer_latency[t]`` is A_t (µs) and ``transfer_slope[t]`` is M_t (µs per byte of chunk);
    ``line_step``/``line_latency``/``line_slope`` are the lines that can be a step's longest
    transfer, grouped by step in increasing step order."""

    num_steps: int
    transfer_latency: np.ndarray  # A_t, µs
    transfer_slope: np.ndarray  # M_t, µs per chunk byte
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
        """Each transfer's own time A_t + c·M_t for one chunk size."""
        return self.transfer_latency + self.transfer_slope * float(chunk_bytes)


def step_lines(schedule: Schedule, topology: Topology, paths: TransferPaths) -> StepLines:
    """Precompute the step-synchronous model's lines for a schedule (see the module docstring)."""
    n = schedule.num_transfers
    num_links = len(topology.links)
    if n == 0:
        empty_f = np.zeros(0, dtype=np.float64)
        return StepLines(schedule.num_steps, empty_f, empty_f, np.zeros(0, dtype=np.int64), empty_f, empty_f)
    entry_step = np.repeat(schedule.step_of_transfer, paths.lengths)
    key = entry_step * num_links + paths.links
    # n_ℓ per (step, link), read back per path entry
    if schedule.num_steps * num_links <= 1 << 25:
        per_key = np.bincount(key, minlength=schedule.num_steps * num_links)
        count = per_key[key]
    else:
        _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
        count = counts[inverse.reshape(-1)]
    per_byte = count / (topology.bandwidth_array[paths.links] * BYTES_PER_US_PER_GBPS)
    slope = np.maximum.reduceat(per_byte, paths.ptr[:-1])
    latency = np.asarray(paths.latency_us, dtype=np.float64)

    # non-dominated lines per step: order by (step, slope desc, latency desc); a line survives if
    # its latency exceeds every latency seen before it in its step
    step = schedule.step_of_transfer
    order = np.lexsort((-latency, -slope, step))
    s, a, m = step[order], latency[order], slope[order]
    _, a_rank = np.unique(a, return_inverse=True)
    a_rank = a_rank.reshape(-1).astype(np.int64)
    code = s * (int(a_rank.max()) + 1) + a_rank  # integer, so the running maximum resets per step
    running = np.maximum.accumulate(code)
    keep = np.ones(n, dtype=bool)
    keep[1:] = code[1:] > running[:-1]
    for arr in (latency, slope):
        arr.setflags(write=False)
    return StepLines(
        num_steps=schedule.num_steps,
        transfer_latency=latency,
        transfer_slope=slope,
        line_step=s[keep],
        line_latency=a[keep],
        line_slope=m[keep],
    )
