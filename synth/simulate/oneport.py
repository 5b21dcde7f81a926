"""The one-port α-β model of textbooks, for any schedule (docs/simulator.md).

Each rank sends at most one message at a time and receives at most one at a time (full duplex:
a send and a receive may overlap); a message of l bytes costs α + β·l. A schedule maps to it so:

- a **message** is everything one step moves from rank u to rank v: the step's transfers u → v,
  l = their number × the chunk's bytes;
- its **α and β**: given (``alpha`` µs, ``beta`` µs per byte, the same for every message), or by
  default from the topology: α the largest Σα of its transfers' paths, β the largest
  1/bottleneck bandwidth of those paths (µs per byte; the network itself is not modelled);
- **steps in order**, as the format says (a rank forwards only what it held when the step began):
  a step starts when the previous one has ended;
- **within a step**, each rank's sends are serialised and so are its receives; the step lasts
  the largest total cost of one rank's sends or of one rank's receives. That is the shortest
  possible with messages that may be paused and resumed (preemptive open shop; Gonzalez and
  Sahni), and, when the step's messages all cost the same (one α and β, equal lengths), the
  shortest without pausing any (its u → v pairs split into that many matchings, König).

Sizes are evaluated together: per (step, port) the load is A + c·B (A the α's, B the β × chunks
of its messages), a step's time the largest of its ports' lines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.schedule import Schedule
from synth.simulate.paths import TransferPaths
from synth.topology import Topology

#: bytes per µs in one GB/s
_BYTES_PER_US = 1e3


@dataclass(frozen=True, eq=False)
class Messages:
    """The one-port messages of a schedule: per message its step, ranks, α (µs) and β × chunks
    (µs per byte of chunk), in (step, src, dst) order."""

    step: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    alpha: np.ndarray
    beta_chunks: np.ndarray
    num_steps: int

    def step_times_us(self, chunk_bytes: np.ndarray | float) -> np.ndarray:
        """Time of every step (rows) for each chunk size (columns)."""
        c = np.atleast_1d(np.asarray(chunk_bytes, dtype=np.float64))
        out = np.zeros((self.num_steps, c.size))
        if self.step.size == 0:
            return out
        r = int(max(self.src.max(), self.dst.max())) + 1
        # ports: (step, rank, direction); loads are sums of lines a + c·b
        keys = np.concatenate([(self.step * r + self.src) * 2, (self.step * r + self.dst) * 2 + 1])
        alpha = np.concatenate([self.alpha, self.alpha])
        beta = np.concatenate([self.beta_chunks, self.beta_chunks])
        ports, inverse = np.unique(keys, return_inverse=True)
        a = np.bincount(inverse, weights=alpha, minlength=len(ports))
        b = np.bincount(inverse, weights=beta, minlength=len(ports))
        port_step = ports // (2 * r)
        starts = np.flatnonzero(np.r_[True, port_step[1:] != port_step[:-1]])
        loads = a[:, None] + b[:, None] * c[None, :]
        out[port_step[starts]] = np.maximum.reduceat(loads, starts, axis=0)
        return out

    def times_us(self, chunk_bytes: np.ndarray | float) -> np.ndarray:
        return self.step_times_us(chunk_bytes).sum(axis=0)


def one_port_messages(
    schedule: Schedule, topology: Topology, paths: TransferPaths, alpha: float | None = None, beta: float | None = None
) -> Messages:
    """Group a schedule's transfers into one-port messages (module docstring). ``alpha`` (µs) and
    ``beta`` (µs per byte) replace the path-derived figures when given."""
    n = schedule.num_transfers
    if n == 0:
        empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0)
        return Messages(empty_i, empty_i, empty_i, empty_f, empty_f, schedule.num_steps)
    step = schedule.step_of_transfer.astype(np.int64)
    src = schedule.src.astype(np.int64)
    dst = schedule.dst.astype(np.int64)
    r = topology.num_ranks
    if alpha is None:
        t_alpha = np.asarray(paths.latency_us, dtype=np.float64)
    else:
        t_alpha = np.full(n, float(alpha))
    if beta is None:
        bottleneck = np.minimum.reduceat(topology.bandwidth_array[paths.links], paths.ptr[:-1])
        t_beta = 1.0 / (bottleneck * _BYTES_PER_US)
    else:
        t_beta = np.full(n, float(beta))
    key = (step * r + src) * r + dst
    keys, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    m_alpha = np.full(len(keys), -np.inf)
    np.maximum.at(m_alpha, inverse, t_alpha)
    m_beta = np.full(len(keys), -np.inf)
    np.maximum.at(m_beta, inverse, t_beta)
    return Messages(
        step=keys // (r * r),
        src=(keys // r) % r,
        dst=keys % r,
        alpha=m_alpha,
        beta_chunks=m_beta * counts,
        num_steps=schedule.num_steps,
    )
