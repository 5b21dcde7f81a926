"""Running a schedule from Python: ``synth.run(schedule, inputs)`` on local processes.

The schedule is verified against its topology first (an invalid one is refused before any process
starts), then every rank runs in its own process over shared memory (`synth.exec.mp`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from synth.builtin import get_topology, locate_schedule_topology
from synth.collective import Kind
from synth.exec import data, mp
from synth.exec.layout import Layout
from synth.exec.program import Program
from synth.schedule import Schedule, load_schedule
from synth.topology import Topology, load_topology
from synth.verify import check


def resolve_topology(schedule: Schedule, topology: Topology | str | os.PathLike | None = None) -> Topology:
    """The topology to check ``schedule`` against: the one given (object, file or built-in name),
    else the one the schedule records (`synth.builtin.locate_schedule_topology`)."""
    if isinstance(topology, Topology):
        return topology
    if topology is not None:
        return get_topology(topology)
    return load_topology(locate_schedule_topology(schedule).path)  # never a path built from a name


def verified(schedule: Schedule | str | os.PathLike, topology: Topology | str | os.PathLike | None = None) -> Schedule:
    """``schedule`` (or the schedule file) after `synth.verify.check` against its topology: raises
    `synth.verify.VerificationError` (first violation) if invalid, `InputError` for a topology
    that does not match."""
    if not isinstance(schedule, Schedule):
        schedule = load_schedule(schedule)
    check(schedule, resolve_topology(schedule, topology))
    return schedule


def layout_for_inputs(schedule: Schedule, inputs: Sequence[np.ndarray | None]) -> Layout:
    """The call's layout from the ranks' send buffers (one 1-D array per rank, equal lengths)."""
    c = schedule.collective
    if len(inputs) != c.num_ranks:
        raise ValueError(f"need one input per rank: the schedule has {c.num_ranks} ranks, got {len(inputs)} inputs")
    given = [np.asarray(x) for x in inputs if x is not None]
    if not given:
        raise ValueError("no inputs given")
    first = given[0]
    if any(x.ndim != 1 or x.size != first.size or x.dtype != first.dtype for x in given):
        raise ValueError("inputs must be 1-D arrays of one length and one data type")
    n = first.size
    if c.kind in (Kind.REDUCE_SCATTER, Kind.SCATTER, Kind.ALLTOALL):
        if n % c.num_ranks:
            raise ValueError(f"a {c.kind.value} input has one part per rank: {n} elements is not a multiple of {c.num_ranks}")
        n //= c.num_ranks
    return Layout(c, data.parse_dtype(first.dtype), n)


def run(
    schedule: Schedule | str | os.PathLike,
    inputs: Sequence[np.ndarray | None] | np.ndarray,
    op: str = "sum",
    *,
    topology: Topology | str | os.PathLike | None = None,
    timeout: float = 60.0,
) -> list[np.ndarray]:
    """Run ``schedule`` once on local processes (one per rank, shared memory) with ``inputs``, one
    send buffer per rank (a list, or a 2-D array with one row per rank; None where a rank's send
    buffer is not read: non-roots of broadcast and scatter). Returns each rank's receive buffer.

    Buffer shapes follow NCCL (docs/executors.md): allreduce n → n, allgather n → R·n,
    reduce-scatter R·n → n, alltoall R·n → R·n, and so on. Results at ranks without an output
    (non-roots of reduce and gather) are zero. Raises `synth.verify.VerificationError` for an
    invalid schedule and `synth.exec.faults.ExecutionError` if a rank fails or hangs.
    """
    schedule = verified(schedule, topology)
    rows = list(inputs)
    layout = layout_for_inputs(schedule, rows)
    reduce_op = data.parse_op(op) if schedule.collective.is_reduction else None
    return mp.call(Program(schedule), layout, reduce_op, rows, timeout=timeout)
