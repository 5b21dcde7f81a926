"""Exact synthesis with integer linear programs, solved by open solvers (HiGHS, CBC).

The ``ilp`` method finds schedules that are optimal for a given number of steps and chunks, in
real units: the step-synchronous time at a message size, SCCL's rounds, or the fewest steps.

- `synth.ilp.formulation`: the model over the time-expanded topology (routes × steps).
- `synth.ilp.allreduce`: allreduce directly, as reduce and broadcast trees per chunk.
- `synth.ilp.symmetry`: automorphism groups acting freely on ranks, which shrink the model.
- `synth.ilp.solve`: the solver-independent model, HiGHS and CBC, progress and clean stops.
- `synth.ilp.search`: step search, warm starts, duality and composition, verified schedules.
- `synth.ilp.pareto`: the frontier of steps against bandwidth cost (SCCL's Pareto search).

docs/ilp.md describes the formulation and why each reduction of the model is sound.
"""

from __future__ import annotations

from typing import Any

from synth.collective import ALL_KINDS, Collective
from synth.ilp.search import DEFAULT_SIZE, DEFAULT_TIME_LIMIT, NAME, IlpOptions, Outcome, describe, solve_collective, sync_time_us
from synth.method import Method, ranks_for_allreduce
from synth.routing import Router
from synth.schedule import Schedule
from synth.topology import Topology

#: Keyword options `Method.synthesize` passes through to `synthesize` (see `IlpOptions`), plus
#: ``progress`` (a callback), ``stop`` (a threading.Event) and ``on_outcome`` (called with the
#: `Outcome`: what was proven, the gap, the predicted time).
OPTION_NAMES = frozenset(IlpOptions.__dataclass_fields__) | {"progress", "stop", "on_outcome"}

COLLECTIVES = frozenset(ALL_KINDS)


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options: Any) -> Schedule:
    """The ``ilp`` method's build: `solve_collective` with `IlpOptions` built from
    ``options``; the schedule's ``params`` record the objective, steps, status and rounds."""
    progress = options.pop("progress", None)
    stop = options.pop("stop", None)
    on_outcome = options.pop("on_outcome", None)
    outcome = solve_collective(topology, collective, IlpOptions(**options), progress=progress, stop=stop)
    if on_outcome is not None:
        on_outcome(outcome)
    return outcome.schedule


METHOD = Method(
    name=NAME,
    summary="exact ILP (HiGHS/CBC): optimal time, rounds or steps for given steps and chunks (synth ilp for options)",
    family="exact",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=ranks_for_allreduce,
    options=OPTION_NAMES,
)

__all__ = [
    "COLLECTIVES",
    "DEFAULT_SIZE",
    "DEFAULT_TIME_LIMIT",
    "METHOD",
    "NAME",
    "OPTION_NAMES",
    "IlpOptions",
    "Outcome",
    "describe",
    "solve_collective",
    "sync_time_us",
    "synthesize",
]
