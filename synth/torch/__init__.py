"""Synthesized schedules inside PyTorch jobs (the ``torch`` extra: ``pip install 'synth[torch]'``).

- the collectives of ``torch.distributed`` with the same call shapes, run by a schedule:
  ``synth.torch.all_reduce(tensor, op, schedule=...)``, ``all_gather_into_tensor``,
  ``reduce_scatter_tensor``, ``broadcast``, ``reduce``, ``gather``, ``scatter``,
  ``all_to_all_single`` (`synth.torch.collectives`);
- a DDP communication hook that averages every gradient bucket with a synthesized allreduce,
  picking per bucket size from a schedule set: ``model.register_comm_hook(None,
  synth.torch.allreduce_hook("schedules/"))`` (`synth.torch.hook`).

The executor underneath is `synth.exec.torch_backend` (also ``synth run --backend torch``).
Importing ``synth`` never imports torch; importing this package does. See docs/torch.md.
"""

from __future__ import annotations

from synth.exec.schedule_set import ScheduleSet, load_schedule_set, save_schedule_set
from synth.exec.torch_backend.executor import Executor
from synth.schedule_set_build import build_schedule_set
from synth.torch.collectives import (
    Completed,
    all_gather_into_tensor,
    all_gather_single,
    all_reduce,
    all_to_all_single,
    broadcast,
    executor,
    gather,
    reduce,
    reduce_scatter_single,
    reduce_scatter_tensor,
    scatter,
    schedule_set,
)
from synth.torch.hook import AllreduceHook, allreduce_hook

__all__ = [
    "AllreduceHook",
    "Completed",
    "Executor",
    "ScheduleSet",
    "all_gather_into_tensor",
    "all_gather_single",
    "all_reduce",
    "all_to_all_single",
    "allreduce_hook",
    "broadcast",
    "build_schedule_set",
    "executor",
    "gather",
    "load_schedule_set",
    "reduce",
    "reduce_scatter_single",
    "reduce_scatter_tensor",
    "save_schedule_set",
    "scatter",
    "schedule_set",
]
