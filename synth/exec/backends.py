"""The backends ``synth run --backend`` chooses from, by name (docs/executors.md, "Backends").

Each is a module with the same entry points: ``NAME``, ``check_available()`` and
``run(settings, *, on_start, on_result) -> list[Row]`` (raising `ExecutionError` naming the rank
and step of a failure). A new backend adds one line here.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: backend name -> module; the first is the default
BACKENDS = {
    "mp": "synth.exec.mp",
    "mpi": "synth.exec.mpi.launch",
    "torch": "synth.exec.torch_backend.launch",
}


def backend(name: str) -> ModuleType:
    """The module of backend ``name`` (imported on first use: the MPI one needs mpi4py; the torch
    one's launcher imports no torch, its ranks do)."""
    return importlib.import_module(BACKENDS[name])
