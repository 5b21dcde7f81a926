"""Schedule transformations used to build schedules from other schedules.

`dual_reduction` is SCCL's duality: a schedule for broadcast (or allgather) on the reversed
topology, with every (rank, chunk) received at most once, run backwards in time with every copy
turned into a reduce, is a schedule for reduce (or reduce-scatter) on the original topology. Each
chunk's transfers form a tree rooted at its initial holder; reversed, every rank sends its partial
value to its parent after all its children have reduced into it, so every contribution reaches the
root exactly once. `concat` joins phases (allreduce = reduce-scatter then allgather).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from synth.collective import DUAL, Collective
from synth.schedule import OP_COPY, OP_REDUCE, Schedule, ScheduleBuilder


def dual_reduction(forward: Schedule, reduction: Collective, method: str, params: Mapping[str, Any] | None = None) -> Schedule:
    """The reduction schedule dual to ``forward`` (made on the reversed topology)."""
    expected = DUAL.get(reduction.kind)
    if expected is None or forward.collective.kind is not expected:
        raise ValueError(f"{forward.collective.kind.value} is not the dual of {reduction.kind.value}")
    if forward.collective.num_chunks != reduction.num_chunks or forward.collective.root != reduction.root:
        raise ValueError("the dual schedule must have the same chunks and root")
    if np.any(forward.op != OP_COPY):
        raise ValueError("the forward schedule must contain copies only")
    builder = ScheduleBuilder(
        reduction,
        method=method,
        params=params if params is not None else forward.params,
        topology_name=forward.topology_name,
        topology_sha256=forward.topology_sha256,
    )
    reversed_route = np.array([builder.route_id(tuple(reversed(r))) for r in forward.routes], dtype=np.int64)
    for s in reversed(range(forward.num_steps)):
        sl = forward.step_slice(s)
        builder.add_step_arrays(forward.dst[sl], forward.src[sl], forward.chunk[sl], OP_REDUCE, reversed_route[forward.route[sl]])
    return builder.build()


def concat(phases: Sequence[Schedule], collective: Collective, method: str, params: Mapping[str, Any] | None = None) -> Schedule:
    """Run ``phases`` one after another as one schedule of ``collective`` (same chunk ids)."""
    first = phases[0]
    builder = ScheduleBuilder(
        collective,
        method=method,
        params=params,
        topology_name=first.topology_name,
        topology_sha256=first.topology_sha256,
    )
    for phase in phases:
        if phase.collective.num_chunks != collective.num_chunks:
            raise ValueError("phases must number chunks like the whole collective")
        builder.extend(phase)
    return builder.build()
