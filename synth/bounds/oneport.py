"""Lower bounds in the one-port model (synth.simulate.oneport, docs/simulator.md): a rank sends one
message and receives one at a time, a message of l bytes costs α + β·l, steps run in order and a
step lasts its busiest port's total. docs/bounds.md proves each bound.

- **latency**: ⌈log₂ R⌉·α for every collective: in a step in which no port handles more than K
  messages, no rank's data (or set of contributions, or set of holders) can grow more than
  (1 + K)-fold, and the step lasts at least K·α; since 1 + K ≤ 2^K, reaching R takes
  Σ K ≥ ⌈log₂ R⌉. Also the fewest steps H (rank-graph hops) × α, and with the topology's own α,
  the α-distance of the farthest pair the collective connects.
- **per port**: a rank that must receive B bytes spends at least β·B on its receive port, and
  every step lasts at least α: time ≥ H·α + β·B (likewise for sends).
- **allreduce, all ports**: every byte needs 2(R − 1) transfers (docs/bounds.md), so the ranks
  receive 2(R − 1)·size bytes in all; with one β this is the textbook 2(R − 1)/R·size·β.

α and β are the given ones, or the smallest any message can have on the topology: α the smallest
switch-only path latency between two ranks, β (per receiving or sending rank) 1/the widest
switch-only path's bottleneck into or out of it.
"""

from __future__ import annotations

import heapq
import math
from fractions import Fraction

import numpy as np

from synth.topology import Topology

_BYTES_PER_US = 1e3


def widest_direct(topology: Topology) -> np.ndarray:
    """[R, R]: the largest bottleneck bandwidth (GB/s) of a switch-only path from rank a to rank b
    (0 where there is none, and on the diagonal)."""
    r, n = topology.num_ranks, topology.num_nodes
    links, out_links = topology.links, topology.out_links
    out = np.zeros((r, r))
    for a in range(r):
        best = [0.0] * n
        best[a] = math.inf
        heap = [(-math.inf, a)]
        while heap:
            neg, u = heapq.heappop(heap)
            width = -neg
            if width < best[u]:
                continue
            if u != a and u < r:
                continue  # ranks end a transfer
            for i in out_links[u]:
                link = links[i]
                w = min(width, link.bandwidth)
                if w > best[link.dst]:
                    best[link.dst] = w
                    heapq.heappush(heap, (-w, link.dst))
        out[a] = best[:r]
        out[a, a] = 0.0
    return out


def port_betas(topology: Topology, beta: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per rank, the smallest β (µs per byte) of a message it receives, and of one it sends."""
    r = topology.num_ranks
    if beta is not None:
        return np.full(r, float(beta)), np.full(r, float(beta))
    widest = widest_direct(topology)
    with np.errstate(divide="ignore"):
        receive = 1.0 / (widest.max(axis=0) * _BYTES_PER_US)
        send = 1.0 / (widest.max(axis=1) * _BYTES_PER_US)
    return receive, send


def log2_ceil(r: int) -> int:
    return max(0, (r - 1).bit_length())


def port_term(
    topology: Topology, needs: list[Fraction], betas: np.ndarray, steps: int, alpha: float, verb: str
) -> tuple[float, str] | None:
    """max over ranks of need × β: (us_per_byte, explanation) or None."""
    best = None
    for v, need in enumerate(needs):
        if need == 0:
            continue
        value = float(need) * float(betas[v])
        if best is None or value > best[0] * (1 + 1e-12):
            best = (value, v, need)
    if best is None:
        return None
    value, v, need = best
    what = "size" if need == 1 else f"{need.numerator}/{need.denominator} of size"
    port = "receive" if verb == "receive" else "send"
    text = (
        f"rank {topology.node_name(v)} must {verb} {what} through its one {port} port at "
        f"beta {float(betas[v]):.6g} us/B (= {1 / (float(betas[v]) * _BYTES_PER_US):.6g} GB/s)"
    )
    if steps * alpha > 0:
        text += f"; + {steps} step{'s' if steps > 1 else ''} x alpha {alpha:g} us"
    return value, text
