"""Executors: run a schedule for real on numpy buffers and check the result.

- `synth.exec.mp`: one process per rank on this machine, buffers in shared memory (the default).
- `synth.exec.mpi`: one MPI process per rank through mpi4py, on one machine or many;
  `synth.exec.mpi.execute` runs a schedule inside your own mpi4py program.
- `synth.exec.layout`, `synth.exec.program`, `synth.exec.data`: where chunks live in the buffers,
  the schedule compiled per rank, and the inputs and numpy reference used to check results.

``synth.run(schedule, inputs)`` (`synth.exec.api.run`) is the short way from Python. See
docs/executors.md.
"""

from __future__ import annotations

from synth.exec.api import run, verified

__all__ = ["run", "verified"]
