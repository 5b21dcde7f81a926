"""torch.distributed's collectives, run by a synthesized schedule: the same call shapes, in place
where PyTorch is, on any data type, with a ``schedule=`` keyword.

Every rank of the group makes the same call with the same schedule, as with any collective. The
schedule is verified against its topology on first use (``topology=``: a `Topology`, a file or a
built-in name; default: the built-in the schedule names); one made for another rank count or
topology is refused before any communication. ``schedule`` may be a `Schedule`, a schedule file,
a schedule set (`synth.exec.schedule_set`: a folder, or a `ScheduleSet`), from which each call
takes the schedule for its size; a size the set does not cover runs PyTorch's own collective
(saying so once).

``async_op=True`` returns a handle like PyTorch's, already complete: the schedule runs on the
calling thread. ``timeout`` (seconds) bounds each wait for a message (default: the group's own
timeout); a rank that fails or waits too long raises `synth.exec.faults.ExecutionError` naming
itself, the step and the rank it was waiting for.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch
import torch.distributed as dist

from synth.collective import Kind
from synth.exec.layout import parts_in_size
from synth.exec.schedule_set import ANY_SIZE, ScheduleSet, SetEntry, load_schedule_set
from synth.exec.torch_backend.executor import Executor, op_name
from synth.schedule import Schedule

SUM = dist.ReduceOp.SUM
#: PyTorch's function for each collective (for messages, and the fallback)
NATIVE = {
    Kind.ALLREDUCE: "all_reduce",
    Kind.BROADCAST: "broadcast",
    Kind.REDUCE: "reduce",
    Kind.ALLGATHER: "all_gather_into_tensor",
    Kind.REDUCE_SCATTER: "reduce_scatter_tensor",
    Kind.GATHER: "gather",
    Kind.SCATTER: "scatter",
    Kind.ALLTOALL: "all_to_all_single",
}


class Completed:
    """What an ``async_op=True`` call returns: a handle like PyTorch's ``Work``, already complete
    (the schedule ran on the calling thread)."""

    def __init__(self, result):
        self._result = result
        self._future: torch.futures.Future = torch.futures.Future()
        self._future.set_result(result)

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def get_future(self) -> torch.futures.Future:
        return self._future

    def result(self):
        return self._result


# ======================================================================= schedules and executors
_SETS: dict[tuple[str, float], ScheduleSet] = {}
_EXECUTORS: dict[tuple, tuple[object, Executor]] = {}
_WARNED: set[int] = set()


def schedule_set(schedule) -> ScheduleSet:
    """``schedule`` as a set: a `ScheduleSet` as it is; a `Schedule` serving every size; a file or
    folder loaded once (reloaded if it changes)."""
    if isinstance(schedule, ScheduleSet):
        return schedule
    if isinstance(schedule, Schedule):
        c = schedule.collective
        return ScheduleSet(c.kind, c.num_ranks, schedule.topology_name, (SetEntry(schedule, 0, ANY_SIZE, schedule.source),))
    if isinstance(schedule, str | os.PathLike):
        path = Path(schedule).resolve()
        index = path / "index.json" if path.is_dir() else path
        key = (str(path), index.stat().st_mtime if index.exists() else 0.0)
        if key not in _SETS:
            _SETS[key] = load_schedule_set(path)
        return _SETS[key]
    raise TypeError(f"schedule must be a Schedule, a ScheduleSet, or a schedule file or folder; got {type(schedule).__name__}")


def executor(schedule: Schedule, group=None, *, topology=None, timeout: float | None = None) -> Executor:
    """The cached `Executor` of ``schedule`` on ``group`` (made, and the schedule verified, on
    first use)."""
    key = (id(schedule), id(group), id(topology) if topology is not None and not isinstance(topology, str) else topology, timeout)
    entry = _EXECUTORS.get(key)
    if entry is None or entry[0] is not schedule:
        ex = Executor(schedule, group, topology=topology, timeout=timeout)
        _EXECUTORS[key] = (schedule, ex)  # holds the schedule, so its id is not reused
        return ex
    return entry[1]


def _pick(schedule, kind: Kind, count: int, itemsize: int, group, topology, timeout) -> Executor | None:
    """The executor for a call of ``count`` elements per part, or None: fall back to PyTorch's
    own collective (saying so once per set, on the group's rank 0)."""
    native = NATIVE[kind]
    nbytes = count * parts_in_size(kind, dist.get_world_size(group)) * itemsize  # nccl-tests' size
    chosen = schedule_set(schedule)
    if chosen.kind is not kind:
        raise ValueError(f"{native} needs a {kind.value} schedule; {chosen.source or 'the schedule'} is of {chosen.kind.value}")
    picked = chosen.choose(nbytes)
    if picked is None:
        if id(chosen) not in _WARNED:  # once per set
            _WARNED.add(id(chosen))
            if dist.get_rank(group) != 0:
                return None
            warnings.warn(
                f"synth: no {kind.value} schedule for {nbytes} B calls in {chosen.describe()}; using torch.distributed.{native}"
                " for every size the set does not cover (said once)",
                stacklevel=3,
            )
        return None
    return executor(picked, group, topology=topology, timeout=timeout)


def _not_member(group) -> bool:
    return group is not None and dist.get_rank(group) < 0


def _flat(t: torch.Tensor, name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous (as torch.distributed requires)")
    return t.view(-1)


def _done(result, async_op: bool):
    return Completed(result) if async_op else None


def _group_rank(group, rank: int | None, group_rank: int | None, what: str) -> int:
    """The group rank of a root given as a global rank (``src``/``dst``) or a group rank."""
    if group_rank is not None:
        return group_rank
    if rank is None:
        raise ValueError(f"give {what}")
    return rank if group is None else dist.get_group_rank(group, rank)


def _check_root(ex: Executor, root: int, what: str) -> None:
    if ex.schedule.collective.root != root:
        raise ValueError(
            f"the schedule's root is rank {ex.schedule.collective.root}; this call's {what} is rank {root}"
            f" (synthesize one with --root {root})"
        )


# ======================================================================= the collectives
def all_reduce(tensor, op=SUM, group=None, async_op=False, *, schedule, topology=None, timeout=None):
    """``dist.all_reduce(tensor, op)`` by ``schedule`` (an allreduce schedule): in place."""
    if _not_member(group):
        return None
    flat = _flat(tensor, "tensor")
    ex = _pick(schedule, Kind.ALLREDUCE, flat.numel(), flat.element_size(), group, topology, timeout)
    if ex is None:
        return dist.all_reduce(tensor, op, group=group, async_op=async_op)
    ex(None, flat, op_name(op))
    return _done(tensor, async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None, *, schedule, topology=None, timeout=None):
    """``dist.broadcast(tensor, src)`` by a broadcast schedule whose root is ``src``: in place."""
    if _not_member(group):
        return None
    flat = _flat(tensor, "tensor")
    root = _group_rank(group, src, group_src, "src")
    ex = _pick(schedule, Kind.BROADCAST, flat.numel(), flat.element_size(), group, topology, timeout)
    if ex is None:
        return dist.broadcast(tensor, group_src=root, group=group, async_op=async_op)
    _check_root(ex, root, "src")
    ex(None, flat)
    return _done(tensor, async_op)


def reduce(tensor, dst=None, op=SUM, group=None, async_op=False, group_dst=None, *, schedule, topology=None, timeout=None):
    """``dist.reduce(tensor, dst, op)`` by a reduce schedule whose root is ``dst``: the result in
    place at ``dst``; the other ranks' tensors are left as they were."""
    if _not_member(group):
        return None
    flat = _flat(tensor, "tensor")
    root = _group_rank(group, dst, group_dst, "dst")
    ex = _pick(schedule, Kind.REDUCE, flat.numel(), flat.element_size(), group, topology, timeout)
    if ex is None:
        return dist.reduce(tensor, op=op, group=group, async_op=async_op, group_dst=root)
    _check_root(ex, root, "dst")
    ex(None, flat, op_name(op))
    return _done(tensor, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False, *, schedule, topology=None, timeout=None):
    """``dist.all_gather_into_tensor(output, input)`` by an allgather schedule: ``output`` holds
    every rank's ``input`` in rank order (concatenated or stacked along dimension 0); in place when
    ``input`` is this rank's part of ``output``."""
    if _not_member(group):
        return None
    out, inp = _flat(output_tensor, "output_tensor"), _flat(input_tensor, "input_tensor")
    r, rank = dist.get_world_size(group), dist.get_rank(group)
    if out.numel() != r * inp.numel() or out.dtype != inp.dtype:
        raise ValueError(
            f"output_tensor must hold {r} x {inp.numel()} elements of {inp.dtype}; it has {out.numel()} of {out.dtype}"
        )
    ex = _pick(schedule, Kind.ALLGATHER, inp.numel(), inp.element_size(), group, topology, timeout)
    if ex is None:
        return _native_all_gather(output_tensor, input_tensor, group, async_op)
    own = out.narrow(0, rank * inp.numel(), inp.numel())
    in_place = inp.numel() > 0 and inp.data_ptr() == own.data_ptr() and inp.device == out.device
    ex(None if in_place else inp, out, count=inp.numel())
    return _done(output_tensor, async_op)


all_gather_single = all_gather_into_tensor


def reduce_scatter_tensor(output, input, op=SUM, group=None, async_op=False, *, schedule, topology=None, timeout=None):
    """``dist.reduce_scatter_tensor(output, input, op)`` by a reduce-scatter schedule: ``input``
    holds one part per rank; rank i's ``output`` gets part i reduced over every rank."""
    if _not_member(group):
        return None
    out, inp = _flat(output, "output"), _flat(input, "input")
    r = dist.get_world_size(group)
    if inp.numel() != r * out.numel():
        raise ValueError(f"input must hold {r} x {out.numel()} elements; it has {inp.numel()}")
    ex = _pick(schedule, Kind.REDUCE_SCATTER, out.numel(), out.element_size(), group, topology, timeout)
    if ex is None:
        return _native_reduce_scatter(output, input, op, group, async_op)
    ex(inp, out, op_name(op))
    return _done(output, async_op)


reduce_scatter_single = reduce_scatter_tensor


def gather(
    tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None, *, schedule, topology=None, timeout=None
):
    """``dist.gather(tensor, gather_list, dst)`` by a gather schedule whose root is ``dst``. When
    ``gather_list`` lies end to end in one tensor's memory (``list(out.view(R, -1))``), the result
    goes straight there; otherwise it is copied into the list."""
    if _not_member(group):
        return None
    inp = _flat(tensor, "tensor")
    r, rank = dist.get_world_size(group), dist.get_rank(group)
    root = _group_rank(group, dst, group_dst, "dst")
    ex = _pick(schedule, Kind.GATHER, inp.numel(), inp.element_size(), group, topology, timeout)
    if ex is None:
        return dist.gather(tensor, gather_list, group=group, async_op=async_op, group_dst=root)
    _check_root(ex, root, "dst")
    if rank != root:
        ex(inp, None, count=inp.numel())
        return _done(None, async_op)
    out, copy_back = _joined(gather_list, r, inp, "gather_list")
    ex(inp, out, count=inp.numel())
    if copy_back:
        for i, part in enumerate(gather_list):
            part.copy_(out.narrow(0, i * inp.numel(), inp.numel()).view_as(part))
    return _done(gather_list, async_op)


def scatter(
    tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None, *, schedule, topology=None, timeout=None
):
    """``dist.scatter(tensor, scatter_list, src)`` by a scatter schedule whose root is ``src``
    (``scatter_list`` end to end in one tensor's memory is read in place; else joined first)."""
    if _not_member(group):
        return None
    out = _flat(tensor, "tensor")
    r, rank = dist.get_world_size(group), dist.get_rank(group)
    root = _group_rank(group, src, group_src, "src")
    ex = _pick(schedule, Kind.SCATTER, out.numel(), out.element_size(), group, topology, timeout)
    if ex is None:
        return dist.scatter(tensor, scatter_list, group=group, async_op=async_op, group_src=root)
    _check_root(ex, root, "src")
    if rank != root:
        ex(None, out)
        return _done(tensor, async_op)
    send, _ = _joined(scatter_list, r, out, "scatter_list", read_only=True)
    ex(send, out)
    return _done(tensor, async_op)


def all_to_all_single(
    output,
    input,
    output_split_sizes=None,
    input_split_sizes=None,
    group=None,
    async_op=False,
    *,
    schedule,
    topology=None,
    timeout=None,
):
    """``dist.all_to_all_single(output, input)`` by an alltoall schedule: block i of ``input``
    goes to rank i, block j of ``output`` comes from rank j. Equal blocks only (a schedule's
    chunks are equal parts): split sizes, if given, must all be equal."""
    if _not_member(group):
        return None
    out, inp = _flat(output, "output"), _flat(input, "input")
    r = dist.get_world_size(group)
    for name, splits in (("output_split_sizes", output_split_sizes), ("input_split_sizes", input_split_sizes)):
        if splits is not None and (len(splits) != r or len(set(splits)) > 1):
            raise ValueError(f"{name} = {list(splits)}: a schedule's alltoall moves equal blocks; give equal splits or none")
    if out.numel() != inp.numel() or inp.numel() % r:
        raise ValueError(f"input and output must have the same number of elements, a multiple of {r}")
    count = inp.numel() // r
    ex = _pick(schedule, Kind.ALLTOALL, count, inp.element_size(), group, topology, timeout)
    if ex is None:
        return dist.all_to_all_single(output, input, output_split_sizes, input_split_sizes, group=group, async_op=async_op)
    ex(inp, out, count=count)
    return _done(output, async_op)


def _joined(parts, r: int, like: torch.Tensor, name: str, *, read_only: bool = False) -> tuple[torch.Tensor, bool]:
    """The ``r`` tensors of ``parts`` as one flat tensor: a view when they lie end to end in one
    storage (nothing to copy), else a new tensor (filled from them when ``read_only``); and
    whether results must be copied back."""
    n = like.numel()
    if parts is None or len(parts) != r:
        raise ValueError(f"{name} must hold {r} tensors at the root")
    for t in parts:
        if t.numel() != n or t.dtype != like.dtype or t.device != like.device:
            raise ValueError(f"{name}: every tensor must have {n} elements of {like.dtype} on {like.device}")
    first = parts[0]
    step = n * first.element_size()
    if all(t.is_contiguous() for t in parts) and all(
        t.untyped_storage().data_ptr() == first.untyped_storage().data_ptr() and t.data_ptr() == first.data_ptr() + i * step
        for i, t in enumerate(parts)
    ):
        whole = torch.empty(0, dtype=first.dtype, device=first.device)
        whole.set_(first.untyped_storage(), first.storage_offset(), (r * n,))
        return whole, False
    if read_only:
        return torch.cat([t.reshape(-1) for t in parts]), False
    return torch.empty(r * n, dtype=like.dtype, device=like.device), True


def _native_all_gather(output, input, group, async_op):
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return fn(output, input, group=group, async_op=async_op)


def _native_reduce_scatter(output, input, op, group, async_op):
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return fn(output, input, op, group=group, async_op=async_op)


__all__ = [
    "Completed",
    "all_gather_into_tensor",
    "all_gather_single",
    "all_reduce",
    "all_to_all_single",
    "broadcast",
    "executor",
    "gather",
    "reduce",
    "reduce_scatter_single",
    "reduce_scatter_tensor",
    "scatter",
    "schedule_set",
]
