"""The torch.distributed backend: a schedule as a collective over a process group, on tensors.

Each step, a rank posts one point-to-point message per piece it receives and per piece it sends
(`synth.exec.torch_backend.plan`), waits for them, then applies the step's copies and reductions
with torch's own elementwise operators (``torch.add``, ``torch.maximum``, ``torch.bitwise_and``, …,
``out=`` the slot). Messages carry raw bytes (a ``uint8`` view of the tensor), so every data type
travels the same way; with gloo they are the group's own ``send``/``recv`` (gloo does not batch
point-to-point operations, so posting them one by one is what ``batch_isend_irecv`` would do),
with a backend that coalesces (NCCL) they go through ``torch.distributed.batch_isend_irecv``, as
one group.

A call's shape (element count, data type, operator, in place or not) is compiled once per rank
(`RankPlan`) and bound to the call's tensors once per set of tensors (`BoundPlan`: the views of
every message and operand); a call then costs the communication, the reductions and a few Python
operations per step.

`Executor` is a verified schedule on a process group. Before its first call of a shape it checks
with the other ranks (one small ``all_gather_into_tensor``) that they all run the same schedule
on the same shape, so a mismatch is an error on every rank instead of a hang. A rank that fails
or waits past the timeout raises `synth.exec.faults.ExecutionError` naming itself, the step and
the rank it was waiting for.

The NCCL path (CUDA tensors, point-to-point through NCCL) is the same code with the coalescing
transport; this project has no GPU and tests it only on CPU with gloo.
"""

from __future__ import annotations

import datetime
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from synth.collective import Kind
from synth.exec import data
from synth.exec.api import verified
from synth.exec.faults import ExecutionError, Progress, describe_exception, fault_from_env, phase_of
from synth.exec.layout import Layout
from synth.exec.program import RECV, Program
from synth.exec.torch_backend.plan import IN_PLACE_KINDS, Piece, Positions, RankPlan, compile_rank, eager_for
from synth.schedule import Schedule

#: the tag of our point-to-point messages (gloo matches messages per tag, so a user's own messages
#: on the group never meet ours; NCCL ignores tags and matches in order)
TAG = 5307

# ====================================================================== data types and operators
#: numpy's type for each torch type that has one (the buffer contract's layout needs only the size)
NUMPY_TYPES = {
    torch.bool: np.bool_,
    torch.uint8: np.uint8,
    torch.int8: np.int8,
    torch.int16: np.int16,
    torch.uint16: np.uint16,
    torch.int32: np.int32,
    torch.uint32: np.uint32,
    torch.int64: np.int64,
    torch.uint64: np.uint64,
    torch.float16: np.float16,
    torch.float32: np.float32,
    torch.float64: np.float64,
    torch.complex64: np.complex64,
    torch.complex128: np.complex128,
}
TORCH_TYPES = {np.dtype(v): k for k, v in NUMPY_TYPES.items()}

#: PyTorch's ``ReduceOp`` names -> ours (PREMUL_SUM, an NCCL-only operator with a hidden factor, is not run)
REDUCE_OP_NAMES = {
    "SUM": "sum",
    "PRODUCT": "prod",
    "MIN": "min",
    "MAX": "max",
    "AVG": "avg",
    "BAND": "band",
    "BOR": "bor",
    "BXOR": "bxor",
}
#: our names -> PyTorch's ReduceOp (land and lor, MPI's, have none)
TORCH_REDUCE_OPS = {ours: getattr(dist.ReduceOp, theirs) for theirs, ours in REDUCE_OP_NAMES.items()}

_ELEMENTWISE = {
    "sum": torch.add,
    "avg": torch.add,
    "prod": torch.mul,
    "max": torch.maximum,
    "min": torch.minimum,
    "band": torch.bitwise_and,
    "bor": torch.bitwise_or,
    "bxor": torch.bitwise_xor,
    "land": torch.logical_and,
    "lor": torch.logical_or,
}
_SIGNED = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def layout_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy type a `Layout` is made with: numpy's own where there is one, else raw bytes of
    the same size (bfloat16)."""
    return np.dtype(NUMPY_TYPES.get(dtype, f"V{dtype.itemsize}"))


def op_name(op) -> str:
    """Our name for a reduction operator: a ``torch.distributed.ReduceOp`` (``ReduceOp.SUM`` …) or
    one of our names (``"sum"``, ``"land"``, …)."""
    if isinstance(op, str):
        return data.parse_op(op).name
    name = getattr(op, "name", None)  # ReduceOp.SUM & co. (RedOpType)
    if name is None:  # a ReduceOp object: ReduceOp(ReduceOp.MAX), a pre-multiplied sum
        name = getattr(getattr(op, "op", None), "name", None)
    if name == "PREMUL_SUM":
        raise ValueError("ReduceOp.PREMUL_SUM (NCCL's pre-multiplied sum) is not supported by synth; use SUM or AVG")
    if name not in REDUCE_OP_NAMES:
        raise ValueError(f"unknown reduction operator {op!r}")
    return REDUCE_OP_NAMES[name]


def check_op(name: str, dtype: torch.dtype) -> None:
    """Refuse what ``torch.distributed.all_reduce`` refuses (ValueError, saying why): AVG on
    integers and bool, the bitwise operators on floating point, anything but SUM and AVG on complex
    numbers; and our logical ones (land, lor) on anything but integers and bool."""
    if dtype.is_complex:
        if name not in ("sum", "avg"):
            raise ValueError(
                f"{name} does not apply to complex data ({dtype}); PyTorch reduces complex tensors with SUM and AVG only"
            )
        return
    kind = "f" if dtype.is_floating_point else "b" if dtype == torch.bool else "i"
    if kind not in data.OPS[name].kinds:
        words = (
            "AVG needs floating-point data (PyTorch refuses it on integers and bool)"
            if name == "avg"
            else f"{name} needs integer or bool data (PyTorch refuses bitwise operators on floating point)"
        )
        raise ValueError(f"{words}: got {dtype}")


def reducer(name: str, dtype: torch.dtype) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]:
    """``f(a, b, out)``: ``out ← a op b`` elementwise (``out`` may be ``a``). torch has no add,
    maximum, minimum or logical operators for uint16/32/64 on CPU: those run on the signed type of
    the same size (two's complement sums and zero tests are the same bits; maximum and minimum
    with the sign bit flipped)."""
    fn = _ELEMENTWISE[name]
    signed = _SIGNED.get(dtype)
    if signed is None or name in ("prod", "band", "bor", "bxor"):

        def apply(a, b, out):
            fn(a, b, out=out)

        return apply
    if name in ("sum", "avg", "land", "lor"):

        def apply_signed(a, b, out):
            fn(a.view(signed), b.view(signed), out=out.view(signed))

        return apply_signed
    flip = torch.iinfo(signed).min

    def apply_ordered(a, b, out):
        x = torch.bitwise_xor(a.view(signed), flip)
        y = torch.bitwise_xor(b.view(signed), flip)
        fn(x, y, out=x)
        torch.bitwise_xor(x, flip, out=out.view(signed))

    return apply_ordered


# ====================================================================== transports
class _Transport:
    """How a step's messages are posted: the group's own send/recv, one by one (gloo), or as one
    coalesced batch (``batch_isend_irecv``, backends that coalesce: NCCL)."""

    def __init__(self, group, device: torch.device):
        self.group = group
        self.pg = group if group is not None else dist.group.WORLD
        try:
            self.coalesce = bool(self.pg._get_backend(device).supports_coalescing)
        except (AttributeError, RuntimeError):
            self.coalesce = False

    def post(self, recvs: Sequence[tuple[int, torch.Tensor]], sends: Sequence[tuple[int, torch.Tensor]]) -> list:
        if self.coalesce:
            ops = [dist.P2POp(dist.irecv, t, group=self.group, tag=TAG, group_peer=p) for p, t in recvs]
            ops += [dist.P2POp(dist.isend, t, group=self.group, tag=TAG, group_peer=p) for p, t in sends]
            return dist.batch_isend_irecv(ops) if ops else []
        pg = self.pg
        works = [pg.recv([t], p, TAG) for p, t in recvs]
        works += [pg.send([t], p, TAG) for p, t in sends]
        return works


# ====================================================================== a bound plan
class PeerFailure(ExecutionError):
    """A wait for a message that failed (the peer died, or nothing came within the timeout): the
    rank, the step, the call, the message (``receiving from rank 2``) and what torch said."""

    def __init__(self, rank: int, step: int, call: str, message: str, reason: str):
        self.rank, self.step, self.call, self.message, self.reason = rank, step, call, message, reason
        super().__init__(f"rank {rank} failed in step {step} ({call}) {message}: {reason}")


@dataclass(frozen=True)
class CallShape:
    """What a call is: element count per part, data type, operator (None for data movement), and
    whether this rank runs it in place."""

    count: int
    dtype: torch.dtype
    op: str | None
    in_place: bool


class BoundPlan:
    """A rank's plan bound to one set of tensors: the views of every message and operand. Call it
    to run the collective once."""

    def __init__(
        self,
        plan: RankPlan,
        transport: _Transport,
        op: str | None,
        send: torch.Tensor | None,
        recv: torch.Tensor,
        *,
        progress: Progress,
        timeout: float | None,
        label: str,
        num_ranks: int,
    ):
        self.plan, self.transport, self.progress, self.label = plan, transport, progress, label
        self.rank = plan.rank
        dtype, device = recv.dtype, recv.device
        work = torch.empty(plan.work_length, dtype=dtype, device=device)
        scratch = torch.empty(plan.scratch_length, dtype=dtype, device=device)
        empty = torch.empty(0, dtype=dtype, device=device)
        self.arrays = [send if send is not None else empty, recv, work, scratch]
        raw = [a.view(torch.uint8) for a in self.arrays]
        item = dtype.itemsize
        fn = reducer(op, dtype) if op is not None else None

        def view(kind: int, offset: int, n: int) -> torch.Tensor:
            return self.arrays[kind].narrow(0, offset, n)

        def message(piece: Piece) -> torch.Tensor:
            return raw[piece.kind].narrow(0, piece.offset * item, piece.length * item)

        self.init_copies = [(view(*a.out, a.length), view(*a.a, a.length)) for a in plan.init_copies]
        self.steps = []
        self.peers: dict[int, tuple[int, ...]] = {}
        self.send_peers: list[int] = []
        for s in plan.steps:
            recvs = [(peer, message(p)) for peer, p in s.recvs]
            sends = [(peer, message(p)) for peer, p in s.sends]
            applies = [
                [
                    (fn if x.reduce else None, view(*x.a, x.length), view(*x.out, x.length), x.b and view(*x.b, x.length))
                    for x in group
                ]
                for group in s.after
            ]
            hot = (s.step, phase_of(s.step, blocked=True), recvs, sends, applies, s.wait_before_recvs, s.wait_before_applies)
            self.steps.append(hot)
            self.peers[s.step] = s.peers
            self.send_peers += [peer for peer, _ in s.sends]
        self.finish = recv if op == "avg" and plan.layout.has_output(self.rank) else None
        self.eager = plan.eager
        self.num_ranks = num_ranks
        self.timeout = datetime.timedelta(seconds=timeout) if timeout else None
        self.timeout_s = timeout
        self.fault = fault_from_env(self.rank)
        self.corrupt = self.fault is not None and self.fault.kind == "corrupt"
        if self.corrupt:
            self.fault = None
        self.calls = 0

    def __call__(self) -> None:
        """Run the collective once on the bound tensors."""
        for out, a in self.init_copies:
            out.copy_(a)
        progress = self.progress
        progress.peers = self.peers
        cells = progress.hot
        transport = self.transport
        post, wait = transport.post, self._wait
        if transport.coalesce:  # one batch of receives and sends per step, all waited for
            for step, waiting, recvs, sends, applies, _, _ in self.steps:
                self._fault(step, waiting, cells)
                cells[2] = waiting
                works = post(recvs, sends)
                for i, work in enumerate(works):
                    wait(work, step, recvs[i][0] if i < len(recvs) else sends[i - len(recvs)][0], i < len(recvs))
                for group in applies:
                    _apply(group)
        else:
            sent: list = []
            early = [post(recvs, ()) for _, _, recvs, _, _, _, _ in self.steps] if self.eager else None  # every receive, now
            for k, (step, waiting, recvs, sends, applies, before_recvs, before_applies) in enumerate(self.steps):
                self._fault(step, waiting, cells)
                cells[2] = waiting
                for i in before_recvs:  # (a work is waited for once: gloo counts completions down)
                    wait(sent[i], step, self.send_peers[i], False)
                    sent[i] = None
                works = early[k] if early is not None else post(recvs, ())
                sent += post((), sends)
                for i, (work, group) in enumerate(zip(works, applies)):
                    wait(work, step, recvs[i][0], True)
                    if group and before_applies:
                        for j in before_applies:
                            if sent[j] is not None:
                                wait(sent[j], step, self.send_peers[j], False)
                                sent[j] = None
                    _apply(group)
                for j in before_applies:
                    if sent[j] is not None:
                        wait(sent[j], step, self.send_peers[j], False)
                        sent[j] = None
            last = self.steps[-1][0] if self.steps else 0
            for i, work in enumerate(sent):  # the sends still in flight
                if work is not None:
                    wait(work, last, self.send_peers[i], False)
        if self.finish is not None:
            self.finish.div_(self.num_ranks)
        cells[3] += 1  # a call done
        self.calls += 1
        if self.corrupt and self.arrays[RECV].numel():  # the fault injection's wrong result
            out = self.arrays[RECV]
            if out.dtype == torch.bool:
                out[0] = not bool(out[0])
            else:
                out[0] = float("nan") if out.is_floating_point() or out.is_complex() else torch.iinfo(out.dtype).max

    def _fault(self, step: int, waiting: int, cells) -> None:
        if self.fault is not None and step >= self.fault.step:  # the first step it takes part in
            fault, self.fault = self.fault, None
            cells[2] = waiting + 1  # in the step, not waiting: the culprit
            fault.trigger()

    def _wait(self, work, step: int, peer: int, receiving: bool) -> None:
        """Wait for one message; a failure (the peer died, nothing came within the timeout)
        becomes one line naming this rank, the step and the peer."""
        try:
            if self.timeout is None:
                work.wait()
            else:
                work.wait(self.timeout)
        except RuntimeError as exc:
            said = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            if self.timeout_s and ("Timed out" in said or "timed out" in said):
                said = f"nothing for {self.timeout_s:g} s (timeout)"
            what = f"{'receiving from' if receiving else 'sending to'} rank {peer}"
            raise PeerFailure(self.rank, step, f"{self.label}, call {self.calls}", what, said) from None


def _apply(applies) -> None:
    for fn, a, out, b in applies:
        if fn is None:
            out.copy_(a)
        else:
            fn(a, b, out)


# ====================================================================== the executor
def schedule_digest(schedule: Schedule) -> bytes:
    """16 bytes that differ between schedules (collective, steps, transfers), for the ranks to
    check that they all run the same one."""
    h = hashlib.sha256()
    c = schedule.collective
    h.update(f"{c.kind.value}/{c.num_ranks}/{c.chunks_per_piece}/{c.root}".encode())
    for column in (schedule.step_starts, schedule.src, schedule.dst, schedule.chunk, schedule.op):
        h.update(np.ascontiguousarray(column, dtype=np.int64).tobytes())
    return h.digest()[:16]


class Executor:
    """A verified schedule on a process group: ``executor(send, recv, op)`` runs it as a collective
    (every rank of the group calls it, as any collective). Compiles each call shape once and keeps
    the bound tensors of the last few calls, so a training loop's repeated calls cost the
    communication only.

    ``group``: the process group (None: the default group); its size must be the schedule's rank
    count and its ranks are the schedule's ranks. ``timeout`` (seconds): how long a rank waits for
    a message before it raises `ExecutionError` (None: the group's own timeout)."""

    def __init__(
        self,
        schedule: Schedule,
        group=None,
        *,
        topology=None,
        timeout: float | None = None,
        program: Program | None = None,
        keep: int = 8,
        progress: Progress | None = None,
        check_peers: bool = True,
    ):
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialized: call torch.distributed.init_process_group first")
        size = dist.get_world_size(group)
        c = schedule.collective
        if c.num_ranks != size:
            raise ValueError(
                f"{schedule.source or 'the schedule'}: the schedule is for {c.num_ranks} ranks"
                f" ({c.describe()}, topology {schedule.topology_name}); this process group has {size}"
            )
        self.schedule = schedule
        self.program = program or _verified_program(schedule, topology)
        self.group = group
        self.rank = dist.get_rank(group)
        self.num_ranks = size
        self.timeout = timeout
        self.progress = progress or Progress(self.rank)
        self.check_peers = check_peers
        self.digest = schedule_digest(schedule)
        self._plans: dict[tuple, RankPlan] = {}
        self._positions: dict[tuple, Positions] = {}
        self._agreed: set[tuple] = set()
        self._bound: OrderedDict[tuple, BoundPlan] = OrderedDict()
        self._transports: dict[str, _Transport] = {}
        self._keep = keep
        self.broken: str | None = None

    @property
    def kind(self) -> Kind:
        return self.schedule.collective.kind

    @property
    def compiled(self) -> int:
        """How many call shapes (element count, data type, in place or not) this rank has compiled
        a plan for: each once, however many calls and tensors use it."""
        return len(self._plans)

    def layout(self, count: int, dtype: torch.dtype) -> Layout:
        return Layout(self.schedule.collective, layout_dtype(dtype), count)

    def rank_plan(self, shape: CallShape, *, eager: bool | None = None) -> RankPlan:
        """This rank's compiled plan for a call shape (compiled once). ``eager``: receive every
        message into scratch of its own, posted when the call starts (default: for small calls,
        `synth.exec.torch_backend.plan.eager_for`; never with a coalescing transport, NCCL, whose
        receives posted ahead would hold up its stream)."""
        layout = self.layout(shape.count, shape.dtype)
        eager = eager_for(layout) if eager is None else eager
        key = (shape.count, str(shape.dtype).removeprefix("torch."), shape.in_place, eager)
        plan = self._plans.get(key)
        if plan is None:
            pos_key = (shape.count, shape.dtype.itemsize, eager)
            pos = self._positions.get(pos_key) or Positions(self.program, layout, eager=eager)
            self._positions[pos_key] = pos
            plan = compile_rank(self.program, layout, self.rank, in_place=shape.in_place, pos=pos)
            self._plans[key] = plan
        return plan

    def label(self, shape: CallShape) -> str:
        dtype = str(shape.dtype).removeprefix("torch.")
        return f"{self.kind.value} of {shape.count} {dtype}" + (f" {shape.op}" if shape.op else "") + " per part"

    def _agree(self, shape: CallShape, device: torch.device) -> None:
        """Check, once per shape, that every rank of the group runs this schedule on this shape
        (a mismatch would hang or give wrong results): one small all_gather, and a ValueError on
        every rank if they differ."""
        key = (shape.count, shape.dtype, shape.op)
        if key in self._agreed or not self.check_peers:
            return
        h = hashlib.sha256(self.digest + repr(key).encode()).digest()[:16]
        mine = torch.tensor(np.frombuffer(h, dtype=np.int64).copy(), device=device)
        every = torch.empty(2 * self.num_ranks, dtype=torch.int64, device=device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # the new name (torch >= 2.12)
        gather(every, mine, group=self.group)
        rows = every.view(self.num_ranks, 2).cpu().tolist()
        others = [r for r, row in enumerate(rows) if row != rows[self.rank]]
        if others:
            raise ValueError(
                f"rank {self.rank}: ranks {', '.join(map(str, others))} of the group call a different schedule or shape than this"
                f" rank's {self.label(shape)} ({self.schedule.method} on {self.schedule.topology_name}); every rank must make"
                " the same call"
            )
        self._agreed.add(key)

    def _transport(self, device: torch.device) -> _Transport:
        transport = self._transports.get(str(device))
        if transport is None:
            transport = self._transports[str(device)] = _Transport(self.group, device)
        return transport

    def bind(self, shape: CallShape, send: torch.Tensor | None, recv: torch.Tensor) -> BoundPlan:
        """The bound plan for these tensors (made once per set of tensors, kept for the last few)."""
        key = (shape, _address(send), _address(recv))
        bound = self._bound.get(key)
        if bound is None:
            self._agree(shape, recv.device)
            transport = self._transport(recv.device)
            plan = self.rank_plan(shape, eager=False if transport.coalesce else None)
            bound = BoundPlan(
                plan,
                transport,
                shape.op,
                send,
                recv,
                progress=self.progress,
                timeout=self.timeout,
                label=self.label(shape),
                num_ranks=self.num_ranks,
            )
            self._bound[key] = bound
            if len(self._bound) > self._keep:
                self._bound.popitem(last=False)
        else:
            self._bound.move_to_end(key)
        return bound

    def __call__(
        self, send: torch.Tensor | None, recv: torch.Tensor | None, op=None, *, count: int | None = None
    ) -> torch.Tensor | None:
        """Run the collective on flat (1-D, contiguous) tensors of one data type: ``send`` None for
        in place (allreduce, reduce, broadcast; allgather with the rank's part already in place) or
        where the rank sends nothing (non-roots of broadcast and scatter); ``recv`` None where the
        rank gets no result (non-roots of gather); ``count`` is the elements per part (default:
        from the tensors, as in docs/executors.md). Returns ``recv``."""
        if self.broken is not None:
            raise ExecutionError(f"rank {self.rank}: this executor failed before ({self.broken}); its messages are out of step")
        c = self.schedule.collective
        ref = recv if recv is not None else send
        if ref is None:
            raise ValueError("give an input or an output tensor")
        name = None
        if c.is_reduction:
            name = op_name(op if op is not None else "sum")
            check_op(name, ref.dtype)
        if count is None:
            if recv is None and send is None:
                raise ValueError("give the count")
            count = _count(c.kind, c.num_ranks, send, recv) if recv is not None else send.numel()  # type: ignore[union-attr]
        layout = self.layout(count, ref.dtype)
        in_place = send is None and layout.sends_data(self.rank)
        if in_place and c.kind not in IN_PLACE_KINDS:
            raise ValueError(f"{c.kind.value} has no in-place form; pass separate input and output tensors")
        if recv is None:
            if layout.has_output(self.rank):
                raise ValueError(f"rank {self.rank} gets a result of the {c.kind.value}: give the output tensor")
            recv = torch.empty(0, dtype=ref.dtype, device=ref.device)
        else:
            self._check_tensor("output", recv, layout.recv_count, ref.dtype, layout)
        if send is not None:
            self._check_tensor("input", send, layout.send_count, ref.dtype, layout)
            if send.numel() and recv.numel() and _overlap(send, recv):
                raise ValueError("the input and output tensors overlap; for an in-place call pass the output only")
        shape = CallShape(count, ref.dtype, name, in_place)
        bound = self.bind(shape, send, recv)
        try:
            bound()
        except ExecutionError as exc:
            self.broken = str(exc)
            raise
        except Exception as exc:  # torch refused something mid-call: say where
            self.broken = describe_exception(exc)
            raise ExecutionError(f"rank {self.rank} failed in a call of {bound.label}: {describe_exception(exc)}") from exc
        return recv

    @staticmethod
    def _check_tensor(what: str, t: torch.Tensor, need: int, dtype: torch.dtype, layout: Layout) -> None:
        if t.dim() != 1 or not t.is_contiguous() or t.numel() != need or t.dtype != dtype:
            raise ValueError(f"the {what} must be a contiguous 1-D {dtype} tensor of {need} elements ({layout.describe()})")


def _count(kind: Kind, r: int, send: torch.Tensor | None, recv: torch.Tensor) -> int:
    """Elements per part from the tensors (docs/executors.md, "Buffer layout")."""
    if kind in (Kind.ALLREDUCE, Kind.REDUCE, Kind.BROADCAST, Kind.REDUCE_SCATTER, Kind.SCATTER):
        return recv.numel()
    if kind in (Kind.ALLGATHER, Kind.GATHER):
        return send.numel() if send is not None else recv.numel() // r
    return recv.numel() // r  # alltoall


def _address(t: torch.Tensor | None) -> tuple | None:
    return None if t is None else (t.device.type, t.device.index, t.data_ptr(), t.numel())


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device:
        return False
    a0, a1 = a.data_ptr(), a.data_ptr() + a.numel() * a.element_size()
    b0, b1 = b.data_ptr(), b.data_ptr() + b.numel() * b.element_size()
    return a0 < b1 and b0 < a1


def _verified_program(schedule: Schedule, topology=None) -> Program:
    """The schedule's `Program`, after checking it against its topology (refused if it is invalid
    or was made for another topology)."""
    return Program(verified(schedule, topology))


# ====================================================================== the native collectives
#: PyTorch's own collective for each kind (``--compare-native``), as the table's heading names it
NATIVE_NAMES = {
    Kind.ALLREDUCE: "dist.all_reduce",
    Kind.REDUCE: "dist.reduce",
    Kind.BROADCAST: "dist.broadcast",
    Kind.ALLGATHER: "dist.all_gather_into_tensor",
    Kind.GATHER: "dist.gather",
    Kind.SCATTER: "dist.scatter",
    Kind.REDUCE_SCATTER: "dist.reduce_scatter_tensor",
    Kind.ALLTOALL: "dist.all_to_all_single",
}


def native_supports(op: str | None, dtype: torch.dtype, backend: str = "gloo") -> bool:
    """Whether PyTorch's own collective takes this operator on this type (gloo, measured on torch
    2.13: no 16-bit integers or unsigned types wider than 8 bits; AVG only on floating point; the
    bitwise operators only on integers and bool; no logical AND/OR at all). Other backends: the
    operator rules alone."""
    if op is None:
        return True
    if op not in TORCH_REDUCE_OPS:
        return False
    try:
        check_op(op, dtype)
    except ValueError:
        return False
    return not (backend == "gloo" and dtype in (torch.int16, torch.uint16, torch.uint32, torch.uint64))


def native_call(layout: Layout, group, op: str | None, send: torch.Tensor, recv: torch.Tensor) -> Callable[[], None]:
    """A zero-argument function calling PyTorch's own collective for this layout on these tensors,
    as our benchmark runs it: allreduce, reduce and broadcast in place on ``recv`` (which must hold
    the input), the others from ``send`` into ``recv``."""
    kind, root = layout.kind, layout.collective.root
    rank = dist.get_rank(group)
    torch_op = TORCH_REDUCE_OPS[op] if op else None
    r = layout.num_ranks
    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # the new names (torch >= 2.12)
    reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    gather_list = list(recv.view(r, -1).unbind(0)) if kind is Kind.GATHER and rank == root else None
    scatter_list = list(send.view(r, -1).unbind(0)) if kind is Kind.SCATTER and rank == root else None
    calls = {
        Kind.ALLREDUCE: lambda: dist.all_reduce(recv, torch_op, group=group),
        Kind.REDUCE: lambda: dist.reduce(recv, _global(group, root), torch_op, group=group),
        Kind.BROADCAST: lambda: dist.broadcast(recv, _global(group, root), group=group),
        Kind.ALLGATHER: lambda: all_gather(recv, send, group=group),
        Kind.GATHER: lambda: dist.gather(send, gather_list, _global(group, root), group=group),
        Kind.SCATTER: lambda: dist.scatter(recv, scatter_list, _global(group, root), group=group),
        Kind.REDUCE_SCATTER: lambda: reduce_scatter(recv, send, torch_op, group=group),
        Kind.ALLTOALL: lambda: dist.all_to_all_single(recv, send, group=group),
    }
    return calls[kind]


def _global(group, rank: int) -> int:
    return rank if group is None else dist.get_global_rank(group, rank)


__all__ = [
    "NATIVE_NAMES",
    "NUMPY_TYPES",
    "REDUCE_OP_NAMES",
    "TAG",
    "TORCH_REDUCE_OPS",
    "TORCH_TYPES",
    "BoundPlan",
    "CallShape",
    "Executor",
    "PeerFailure",
    "check_op",
    "layout_dtype",
    "native_call",
    "native_supports",
    "op_name",
    "reducer",
    "schedule_digest",
]
