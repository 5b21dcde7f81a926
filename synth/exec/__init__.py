"""Executors: run a schedule for real on numpy buffers and check the result.

- `synth.exec.mp`: one process per rank on this machine, buffers in shared memory (the default).
- `synth.exec.mpi`: one MPI process per rank through mpi4py, on one machine or many;
  `synth.exec.mpi.execute` runs a schedule inside your own mpi4py program.
- `synth.exec.layout`, `synth.exec.program`, `synth.exec.data`: where chunks live in the buffers,
  the schedule compiled per rank, and the inputs and numpy reference used to check results.
- `synth.exec.settings`, `synth.exec.backends`: what ``synth run`` asks, and the backends that
  do it, all with one contract (docs/executors.md, "Backends").

``synth.run(schedule, inputs)`` (`synth.exec.api.run`) is the short way from Python. See
docs/executors.md. The names here are imported on first use, so that a rank of an MPI run can
start light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from synth.exec.api import run, verified

__all__ = ["run", "verified"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from synth.exec import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
