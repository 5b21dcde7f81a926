"""Which call sizes an exported MSCCL algorithm is declared for (``minBytes``/``maxBytes``).

The runtime (msccl-executor-nccl, RCCL) loads every algorithm file of its folder and, for a call,
takes the first whose collective, rank count and buffer mode fit and whose size range holds the
call's byte count: ``minBytes <= nBytes <= maxBytes`` (both ends included; ``maxBytes`` 0 means no
limit). ``nBytes`` is the count the call was given times the element size times a multiplier: the
rank count for allgather, reduce-scatter and alltoall, 1 otherwise. That is synth's (nccl-tests')
size for every collective but gather and scatter, whose count is one rank's piece, so there
``nBytes`` = size / ranks (`call_bytes`).

**The rule for a tuned schedule.** A schedule chosen or tuned for sizes s₁ … sₙ (auto's ``sizes``;
greedy's and packing's ``chosen_at_size``; the ILP's ``size``) is declared for the sizes whose
nearest tuned size, on a logarithmic scale, it is, out to half a factor of two past either end:
[s₁/√2, sₙ·√2). Schedules tuned at neighbouring powers of two thus tile the size axis without gaps
or overlaps, each boundary at the geometric mean of its two sizes (`boundary`); a schedule that names
no size was not tuned for one and is declared for every size. `synth.interop.msccl_set` uses the
same boundaries between the sizes it samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from synth.collective import Kind
from synth.schedule import Schedule

#: ``maxBytes`` for "no limit": the largest value the runtime's int64 parser takes.
ANY_SIZE_MAX = 2**63 - 1


def boundary(a: int, b: int) -> int:
    """The first size of the upper side when sizes a < b divide the axis between them: their
    geometric mean, rounded up (exact integers, no floating point)."""
    product = a * b
    root = math.isqrt(product)
    return root if root * root == product else root + 1


def lower_edge(size: int) -> int:
    """The smallest size a schedule tuned for ``size`` is declared for: the boundary with size / 2."""
    half_square = size * size
    root = math.isqrt(half_square // 2)
    while root * root * 2 < half_square:
        root += 1
    return max(1, root)


def upper_edge(size: int) -> int:
    """The first size past those a schedule tuned for ``size`` is declared for: the boundary with
    2 · size."""
    return boundary(size, 2 * size)


def tuned_sizes(schedule: Schedule) -> list[int] | None:
    """The sizes (nccl-tests bytes) the schedule was chosen or tuned for, as its params record them;
    None when it names none (a method that does not depend on the size)."""
    params = schedule.params or {}
    for key in ("sizes", "chosen_at_size", "size"):
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return [value]
        if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
            return sorted(set(value))
    return None


def call_bytes(kind: Kind, num_ranks: int, size: int) -> int:
    """The runtime's ``nBytes`` for a call of nccl-tests ``size`` (rounded up for gather/scatter,
    whose ``nBytes`` is one rank's piece)."""
    if kind in (Kind.GATHER, Kind.SCATTER):
        return -(-size // num_ranks)
    return size


def declared_range(kind: Kind, num_ranks: int, lo: int, hi: int | None) -> tuple[int, int]:
    """(minBytes, maxBytes) for the synth sizes [lo, hi) (``hi`` None: no upper limit). The runtime
    includes ``maxBytes``, so it is the last byte count below ``hi``."""
    low = call_bytes(kind, num_ranks, lo)
    if hi is None:
        return low, ANY_SIZE_MAX
    return low, max(low, call_bytes(kind, num_ranks, hi) - 1)


def tuned_range(schedule: Schedule) -> tuple[int, int, list[int]] | None:
    """(minBytes, maxBytes, tuned sizes) the rule above gives ``schedule``; None when it names no size."""
    sizes = tuned_sizes(schedule)
    if sizes is None:
        return None
    coll = schedule.collective
    lo, hi = declared_range(coll.kind, coll.num_ranks, lower_edge(sizes[0]), upper_edge(sizes[-1]))
    return lo, hi, sizes


def sample_ranges(sizes: Sequence[int]) -> list[tuple[int, int]]:
    """Half-open ranges [lo, hi) of synth sizes, one per sample size (sorted, distinct), that tile
    [sizes[0], sizes[-1] + 1) with boundaries at the geometric means of neighbours."""
    out = []
    for i, size in enumerate(sizes):
        lo = sizes[0] if i == 0 else boundary(sizes[i - 1], size)
        hi = sizes[-1] + 1 if i == len(sizes) - 1 else boundary(size, sizes[i + 1])
        out.append((lo, hi))
    return out


__all__ = [
    "ANY_SIZE_MAX",
    "boundary",
    "call_bytes",
    "declared_range",
    "lower_edge",
    "sample_ranges",
    "tuned_range",
    "tuned_sizes",
    "upper_edge",
]
