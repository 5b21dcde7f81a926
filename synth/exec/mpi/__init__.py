"""The MPI backend: run a schedule with mpi4py, one MPI process per rank, on one machine or many.

- `synth.exec.mpi.executor`: the schedule as a collective over an MPI communicator
  (`execute`, `Executor`, `BoundPlan`), what you call inside your own mpi4py program;
- `synth.exec.mpi.ranks`: one rank of the nccl-tests style benchmark,
  ``mpiexec -n R python -m synth.exec.mpi SCHEDULE [options of synth run]`` (`__main__`);
- `synth.exec.mpi.launch`: ``synth run --backend mpi``: starts that job on this machine,
  watches it and reports (the backend contract of docs/executors.md);
- `synth.exec.mpi.board`: the shared file between the launcher and its ranks.

The names of `executor` are available here (``from synth.exec.mpi import execute``). They are
imported on first use, because importing mpi4py's ``MPI`` module initialises MPI: the launcher
must not be an MPI process, and a rank must be able to prepare before MPI starts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from synth.exec.mpi.executor import MPI, BoundPlan, Executor, Progress, Watchdog, execute, native_call, require_mpi
    from synth.exec.mpi.launch import NATIVE_NAMES

_EXPORTS = {
    "MPI": "executor",
    "BoundPlan": "executor",
    "Executor": "executor",
    "Progress": "executor",
    "Watchdog": "executor",
    "execute": "executor",
    "native_call": "executor",
    "require_mpi": "executor",
    "NATIVE_NAMES": "launch",
}

__all__ = ["MPI", "NATIVE_NAMES", "BoundPlan", "Executor", "Progress", "Watchdog", "execute", "native_call", "require_mpi"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
