"""A schedule compiled for a point-to-point transport (torch.distributed): for one rank and one call
shape, the messages it posts in each step and the copies and reductions it applies after them, as
pieces of its buffers. Pure Python and numpy (no torch): `synth.exec.torch_backend.executor` binds
it to tensors.

Built on `synth.exec.program.Program` (slots, lazy start, conflicts; docs/executors.md, "What each
step does"), with the rules of the MPI backend: a copy goes straight into its slot; a reduce, or a
copy into a slot the rank also sends from in that step, lands in scratch and is applied once the
step's messages are done, so every transfer reads the state at the start of its step.

Messages. All chunks one rank sends another in a step travel as few messages as possible, without
a copy: a run of chunks that is contiguous in the sender's buffer and lands contiguously at the
receiver (its slots, or its scratch) is one message. Point-to-point messages between two ranks
are matched in the order they are posted (PyTorch's rule for ``batch_isend_irecv``, and gloo's and
NCCL's), so both sides must cut a step's chunks into the same messages: `message_groups` decides
from what both ranks know (the schedule, the call's layout), reading each side's positions in the
logical buffers, never whether the other side runs in place.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.collective import Kind
from synth.exec.layout import Layout
from synth.exec.program import RECV, SEND, WORK, Program
from synth.schedule import OP_COPY, OP_REDUCE

SCRATCH = 3
BUFFER_KINDS = (SEND, RECV, WORK, SCRATCH)
KIND_NAMES = {SEND: "send", RECV: "recv", WORK: "work", SCRATCH: "scratch"}

#: collectives that run in place (the send buffer is the receive buffer): PyTorch's ``all_reduce``,
#: ``broadcast`` and ``reduce`` always do; ``all_gather_into_tensor`` does when the input is the
#: rank's own part of the output
IN_PLACE_KINDS = (Kind.ALLREDUCE, Kind.REDUCE, Kind.BROADCAST, Kind.ALLGATHER)


@dataclass(frozen=True)
class Piece:
    """``length`` elements at ``offset`` of one of the rank's buffers (SEND, RECV, WORK, SCRATCH)."""

    kind: int
    offset: int
    length: int


@dataclass(frozen=True)
class Apply:
    """After a step's messages: ``out ← a`` (a copy, ``reduce`` False) or ``out ← op(a, b)``; each
    operand a (kind, offset) of the rank's buffers, over ``length`` elements."""

    reduce: bool
    a: tuple[int, int]
    out: tuple[int, int]
    b: tuple[int, int] | None
    length: int


@dataclass(frozen=True)
class StepIO:
    """What one rank does in one step: receive each piece from its peer and send each piece to its
    peer (in this order per peer, as posted); as each receive completes, apply what reads it.

    Sends are waited for only when something is about to write what they read: before posting
    this step's receives, the earlier sends in ``wait_before_recvs``; before the applies, those in
    ``wait_before_applies`` (indices count the call's sends from 0, in order); the rest at the end
    of the call. A send that has not finished by then costs nothing on the way (a wait for it
    would cost a wake-up on a busy machine)."""

    step: int
    recvs: tuple[tuple[int, Piece], ...]
    sends: tuple[tuple[int, Piece], ...]
    #: per receive, the copies and reductions that read it (done once it has arrived, in order)
    after: tuple[tuple[Apply, ...], ...]
    wait_before_recvs: tuple[int, ...] = ()
    wait_before_applies: tuple[int, ...] = ()

    @property
    def applies(self) -> tuple[Apply, ...]:
        """Every copy and reduction of the step, in order."""
        return tuple(a for group in self.after for a in group)

    @property
    def peers(self) -> tuple[int, ...]:
        """The ranks this step receives from (whom the rank waits for)."""
        return tuple(sorted({peer for peer, _ in self.recvs}))


@dataclass(frozen=True)
class RankPlan:
    """One rank's part of a call: copies before step 0 (outputs never received), the steps it
    takes part in, and the lengths of its work and scratch buffers. With ``in_place`` the send
    buffer is the receive buffer (no SEND pieces: they read the receive buffer at ``send_shift``
    plus the offset)."""

    rank: int
    layout: Layout
    in_place: bool
    send_shift: int
    init_copies: tuple[Apply, ...]
    steps: tuple[StepIO, ...]
    work_length: int
    scratch_length: int
    eager: bool = False

    @property
    def messages(self) -> int:
        return sum(len(s.recvs) + len(s.sends) for s in self.steps)


class Positions:
    """Where every rank keeps every chunk in its logical buffers for one layout (send, receive,
    work), so that a rank can work out its peers' side of a message too. ``eager``: every message
    is received into scratch of its own (see `compile_rank`)."""

    def __init__(self, program: Program, layout: Layout, *, eager: bool = False):
        self.program, self.layout, self.eager = program, layout, eager
        self.lengths = layout.chunk_length
        self._work: dict[int, np.ndarray] = {}

    def work(self, rank: int) -> np.ndarray:
        if rank not in self._work:
            self._work[rank] = self.program.work_offsets(rank, self.layout)[0]
        return self._work[rank]

    def at(self, rank: int, kind: int, chunk: int) -> int:
        """Element offset of ``chunk`` in ``rank``'s logical buffer ``kind``."""
        if kind == SEND:
            return int(self.layout.send_position[rank, chunk])
        if kind == RECV:
            return int(self.layout.recv_position[rank, chunk])
        return int(self.work(rank)[chunk])

    def read(self, rank: int, chunk: int, step: int) -> tuple[int, int]:
        """(kind, offset) holding ``rank``'s start-of-``step`` value of ``chunk``."""
        kind = self.program.read_kind(rank, chunk, step)
        return kind, self.at(rank, kind, chunk)

    def slot(self, rank: int, chunk: int) -> tuple[int, int]:
        kind = int(self.program.slot_kind[rank, chunk])
        return kind, self.at(rank, kind, chunk)

    def via_scratch(self, rank: int, chunk: int, step: int, op: int) -> bool:
        """Whether ``rank`` receives ``chunk`` in ``step`` into scratch: every reduce, and a copy
        into a slot the rank also sends from in the step (counted as if in place, whether or not it
        is, so that both sides of the message agree without knowing); everything when eager."""
        return self.eager or op == OP_REDUCE or self.program.conflicts(rank, chunk, step, in_place=True)


def message_groups(pos: Positions, step: int, src: int, dst: int, chunks, ops) -> list[list[tuple[int, int]]]:
    """The messages of one step from ``src`` to ``dst``: runs of (chunk, op), in chunk order, each
    contiguous in ``src``'s buffer and landing contiguously at ``dst`` (in its slots, or in its
    scratch), empty chunks left out. Both ranks compute the same from the schedule and layout."""
    groups: list[list[tuple[int, int]]] = []
    last = None  # (send kind, send end, scratch?, slot kind, slot end) of the run so far
    for c, o in zip(np.asarray(chunks).tolist(), np.asarray(ops).tolist()):
        n = int(pos.lengths[c])
        if n == 0:
            continue
        s_kind, s_off = pos.read(src, c, step)
        scratch = pos.via_scratch(dst, c, step, o)
        d_kind, d_off = pos.slot(dst, c)
        if (
            last is not None
            and last[0] == s_kind
            and last[1] == s_off
            and last[2] == scratch
            and (scratch or (last[3] == d_kind and last[4] == d_off))
        ):
            groups[-1].append((c, o))
        else:
            groups.append([(c, o)])
        last = (s_kind, s_off + n, scratch, d_kind, d_off + n)
    return groups


def in_place_shift(layout: Layout, rank: int) -> int:
    """In place, the receive-buffer offset of the send buffer's element 0: 0 for allreduce, reduce
    and broadcast (one buffer), the rank's own part for allgather."""
    if layout.kind in (Kind.ALLREDUCE, Kind.REDUCE, Kind.BROADCAST):
        return 0
    if layout.kind is Kind.ALLGATHER:
        return rank * layout.count
    raise ValueError(f"{layout.kind.value} has no in-place form; pass separate input and output tensors")


#: calls up to this size (nccl-tests' size, bytes) run eagerly (see `compile_rank`): the same for
#: every rank, since every rank must cut the messages the same way
EAGER_LIMIT = 1 << 20


def eager_for(layout: Layout) -> bool:
    """Whether a call of ``layout`` runs eagerly (small calls: latency counts, not copies)."""
    return layout.size <= EAGER_LIMIT


#: messages are cut into segments of at most this many bytes (both sides cut them the same way):
#: a rank reduces one segment while the next ones arrive, on data still in its cache
SEGMENT_BYTES = 1 << 20


def compile_rank(
    program: Program, layout: Layout, rank: int, *, in_place: bool = False, pos: Positions | None = None
) -> RankPlan:
    """``rank``'s plan for one call of ``layout`` (see the module docstring).

    Eager (``pos.eager``, small calls): every message lands in scratch of its own for the whole
    call, so that a rank can post all its receives when the call starts. A point-to-point message
    between two ranks (gloo's, over TCP) travels as soon as the receiver has posted its receive;
    posted late, it costs another round trip between them, which is most of a small step's time.
    The price is a copy of what is received into its slot, which only large calls notice.

    Segments: a message longer than `SEGMENT_BYTES` travels as several, and the copies and
    reductions of each follow it as soon as it has arrived (gloo's own ring does the same)."""
    pos = pos or Positions(program, layout, eager=eager_for(layout))
    shift = in_place_shift(layout, rank) if in_place else 0
    seg = max(1, SEGMENT_BYTES // layout.itemsize)

    def physical(kind: int, offset: int) -> tuple[int, int]:
        return (RECV, offset + shift) if in_place and kind == SEND else (kind, offset)

    steps: list[StepIO] = []
    scratch_need = 0
    for plan in program.rank_plan(rank):
        t = plan.step
        recvs: list[tuple[int, Piece]] = []
        after: list[tuple[Apply, ...]] = []
        scratch = scratch_need if pos.eager else 0  # eager: scratch of its own for every message of the call
        reduced: set[int] = set()
        for msg in plan.recvs:
            for group in message_groups(pos, t, msg.peer, rank, msg.chunks, msg.ops):
                total = sum(int(pos.lengths[c]) for c, _ in group)
                c0, o0 = group[0]
                if not pos.via_scratch(rank, c0, t, o0):
                    kind, offset = pos.slot(rank, c0)
                    for lo in range(0, total, seg):
                        recvs.append((msg.peer, Piece(kind, offset + lo, min(seg, total - lo))))
                        after.append(())
                    continue
                start, applies = scratch, []
                for c, o in group:
                    n = int(pos.lengths[c])
                    slot = pos.slot(rank, c)
                    incoming = (SCRATCH, scratch)
                    scratch += n
                    if o == OP_COPY:
                        applies.append(Apply(False, incoming, slot, None, n))
                        continue
                    base = slot if c in reduced else physical(*pos.read(rank, c, t))
                    reduced.add(c)
                    applies.append(Apply(True, base, slot, incoming, n))
                for lo in range(0, total, seg):
                    piece = Piece(SCRATCH, start + lo, min(seg, total - lo))
                    recvs.append((msg.peer, piece))
                    after.append(tuple(merge_applies([x for a in applies if (x := _within(a, piece)) is not None])))
        sends: list[tuple[int, Piece]] = []
        for msg in plan.sends:
            ops = _receiver_ops(program, t, rank, msg.peer, msg.chunks)
            for group in message_groups(pos, t, rank, msg.peer, msg.chunks, ops):
                total = sum(int(pos.lengths[c]) for c, _ in group)
                kind, offset = physical(*pos.read(rank, group[0][0], t))
                for lo in range(0, total, seg):
                    sends.append((msg.peer, Piece(kind, offset + lo, min(seg, total - lo))))
        scratch_need = max(scratch_need, scratch)
        if recvs or sends:
            steps.append(StepIO(t, tuple(recvs), tuple(sends), tuple(after)))
    steps = _send_waits(steps)
    init = []
    for c in program.never_written_outputs(rank).tolist():
        n = int(pos.lengths[c])
        a = physical(SEND, pos.at(rank, SEND, c))
        out = (RECV, pos.at(rank, RECV, c))
        if n and a != out:
            init.append(Apply(False, a, out, None, n))
    work_length = program.work_offsets(rank, layout)[1]
    return RankPlan(rank, layout, in_place, shift, tuple(merge_applies(init)), tuple(steps), work_length, scratch_need, pos.eager)


def _within(a: Apply, piece: Piece) -> Apply | None:
    """The part of ``a`` (whose ``b``, or ``a`` for a copy, reads scratch) that reads ``piece``."""
    incoming = a.b if a.reduce else a.a
    assert incoming is not None and incoming[0] == SCRATCH
    lo = max(incoming[1], piece.offset)
    hi = min(incoming[1] + a.length, piece.offset + piece.length)
    if hi <= lo:
        return None
    d = lo - incoming[1]

    def moved(x: tuple[int, int] | None) -> tuple[int, int] | None:
        return None if x is None else (x[0], x[1] + d)

    return Apply(a.reduce, moved(a.a), moved(a.out), moved(a.b), hi - lo)  # type: ignore[arg-type]


def _overlaps(a: Piece, kind: int, offset: int, length: int) -> bool:
    return a.kind == kind and a.offset < offset + length and offset < a.offset + a.length


def _send_waits(steps: list[StepIO]) -> list[StepIO]:
    """Each step's send waits (see `StepIO`): a send still in flight must end before a receive
    lands on, or an apply writes, what it reads."""
    pending: list[tuple[int, Piece]] = []
    out = []
    first = 0
    for s in steps:
        writes = [(p.kind, p.offset, p.length) for _, p in s.recvs if p.kind != SCRATCH]
        before_recvs = tuple(i for i, p in pending if any(_overlaps(p, *w) for w in writes))
        pending = [(i, p) for i, p in pending if i not in before_recvs]
        for _, p in s.sends:  # a step never receives into what it sends (that goes through scratch)
            assert not any(_overlaps(p, *w) for w in writes), "a receive lands on what the same step sends"
        pending += [(first + j, p) for j, (_, p) in enumerate(s.sends)]
        first += len(s.sends)
        writes = [(a.out[0], a.out[1], a.length) for a in s.applies]
        before_applies = tuple(i for i, p in pending if any(_overlaps(p, *w) for w in writes))
        pending = [(i, p) for i, p in pending if i not in before_applies]
        out.append(StepIO(s.step, s.recvs, s.sends, s.after, before_recvs, before_applies))
    return out


def _receiver_ops(program: Program, step: int, src: int, dst: int, chunks) -> np.ndarray:
    """The op (copy or reduce) of each transfer of ``chunks`` from ``src`` to ``dst`` in ``step``
    (a send message carries no ops; the receiver's choice of scratch depends on them)."""
    sched = program.schedule
    part = sched.step_slice(step)
    sel = (sched.src[part] == src) & (sched.dst[part] == dst)
    chunk_of, op_of = sched.chunk[part][sel], sched.op[part][sel]
    order = np.argsort(chunk_of, kind="stable")
    chunk_of, op_of = chunk_of[order], op_of[order]
    return op_of[np.searchsorted(chunk_of, np.asarray(chunks))]


def merge_applies(applies: list[Apply]) -> list[Apply]:
    """Join consecutive applies of the same kind whose operands are adjacent in every buffer into
    one (fewer, longer tensor operations)."""
    merged: list[Apply] = []
    for x in applies:
        if merged:
            last = merged[-1]
            n = last.length
            if (
                last.reduce == x.reduce
                and _follows(last.a, x.a, n)
                and _follows(last.out, x.out, n)
                and ((last.b is None) == (x.b is None))
                and (x.b is None or _follows(last.b, x.b, n))  # type: ignore[arg-type]
            ):
                merged[-1] = Apply(last.reduce, last.a, last.out, last.b, n + x.length)
                continue
        merged.append(x)
    return merged


def _follows(first: tuple[int, int], second: tuple[int, int], length: int) -> bool:
    return first[0] == second[0] and first[1] + length == second[1]


def describe_plan(plan: RankPlan) -> list[str]:
    """One line per step (for debugging and tests): what the rank receives, sends and applies."""

    def piece(p: Piece) -> str:
        return f"{KIND_NAMES[p.kind]}[{p.offset}:{p.offset + p.length}]"

    lines = []
    for s in plan.steps:
        recvs = ", ".join(f"{piece(p)}<-{peer}" for peer, p in s.recvs)
        sends = ", ".join(f"{piece(p)}->{peer}" for peer, p in s.sends)
        lines.append(f"step {s.step}: recv {recvs or '-'}; send {sends or '-'}; {len(s.applies)} applies")
    return lines


__all__ = [
    "IN_PLACE_KINDS",
    "SCRATCH",
    "Apply",
    "Piece",
    "Positions",
    "RankPlan",
    "StepIO",
    "compile_rank",
    "describe_plan",
    "in_place_shift",
    "merge_applies",
    "message_groups",
]
