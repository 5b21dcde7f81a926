"""A DDP communication hook that averages every gradient bucket with a synthesized allreduce.

    model = DistributedDataParallel(net)
    model.register_comm_hook(None, synth.torch.allreduce_hook("schedules/"))

``schedules`` is a schedule set (`synth.exec.schedule_set`: a folder written by ``synth
synthesize MACHINE -c allreduce -m auto --sizes 64KiB..32MiB -o schedules/``, or a `ScheduleSet`),
or one allreduce schedule (file or `Schedule`) for every bucket. Each bucket, the hook takes the
schedule for the bucket's size in bytes; for a size no schedule covers it runs PyTorch's own
``all_reduce`` (as DDP would), saying so once. As PyTorch's default hook does, it divides the
bucket by the group's size first and then sums, so the parameters match plain DDP's up to the
order of the floating-point sums.

The state DDP passes the hook (``register_comm_hook(state, hook)``) is the process group to
reduce over, as for PyTorch's own hooks: None for the default group. The schedule runs on the
thread DDP calls the hook from (the autograd thread), and the hook returns a completed future.
"""

# No ``from __future__ import annotations`` here: DDP compares the hook's annotations with the
# objects themselves (dist.GradBucket, torch.futures.Future[torch.Tensor]), not with strings.
import warnings
from collections import Counter

import torch
import torch.distributed as dist

from synth.collective import Kind
from synth.torch.collectives import executor, schedule_set


class AllreduceHook:
    """The hook (a callable ``hook(state, bucket) -> Future[Tensor]``), with what it did:
    ``calls`` per schedule entry (by file name) and ``fallback_sizes``, the bucket sizes that ran
    PyTorch's own allreduce."""

    def __init__(self, schedules, *, topology=None, timeout: float | None = None):
        self.schedules = schedule_set(schedules)
        if self.schedules.kind is not Kind.ALLREDUCE:
            raise ValueError(f"the DDP hook needs allreduce schedules; {self.schedules.source} holds {self.schedules.kind.value}")
        self.topology, self.timeout = topology, timeout
        self.calls: Counter[str] = Counter()
        self.fallback_sizes: set[int] = set()
        # DDP reads the hook's name (logging) and checks its signature: look like a function
        self.__name__ = self.__qualname__ = "synth_allreduce_hook"

    def __call__(self, state, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        group = state
        tensor = bucket.buffer()
        size = dist.get_world_size(group)
        tensor.div_(size)  # first, as PyTorch's allreduce hook does (no overflow in half precision)
        nbytes = tensor.numel() * tensor.element_size()
        entry = next((e for e in self.schedules.entries if e.lo <= nbytes <= e.hi), None)
        if entry is None:
            self._fallback(nbytes, group)
            work = dist.all_reduce(tensor, group=group, async_op=True)
            return work.get_future().then(lambda fut: fut.value()[0])
        ex = executor(entry.schedule, group, topology=self.topology, timeout=self.timeout)
        ex(None, tensor.view(-1), "sum")
        self.calls[entry.file] += 1
        fut = torch.futures.Future()
        fut.set_result(tensor)
        return fut

    def _fallback(self, nbytes: int, group) -> None:
        if not self.fallback_sizes and dist.get_rank(group) == 0:
            warnings.warn(
                f"synth: no allreduce schedule for {nbytes} B gradient buckets in {self.schedules.describe()}; buckets of"
                " this size, and of any other size the set does not cover, are averaged by torch.distributed.all_reduce"
                " (said once)",
                stacklevel=2,
            )
        self.fallback_sizes.add(nbytes)


def allreduce_hook(schedules, *, topology=None, timeout: float | None = None) -> AllreduceHook:
    """A DDP communication hook averaging each gradient bucket with the synthesized allreduce for
    its size (see the module docstring): ``model.register_comm_hook(group_or_None, hook)``.
    ``topology``: what the schedules are verified against (default: the built-in they name);
    ``timeout`` (seconds): how long a rank waits for a message before it raises."""
    return AllreduceHook(schedules, topology=topology, timeout=timeout)


__all__ = ["AllreduceHook", "allreduce_hook"]
