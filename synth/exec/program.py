"""A schedule compiled for execution: which buffer slot holds each (rank, chunk), and what each rank
sends and receives in each step. Both backends run this; only the transport differs.

Slots. Every (rank, chunk) a rank ever holds gets one slot (a synth schedule's rank may hold
partial values or chunks on their way elsewhere):

- a chunk the rank must end with lives at its place in the receive buffer (``RECV``);
- a chunk the rank starts with and never receives stays in the send buffer (``SEND``), read only;
- anything else (partial sums, chunks relayed through the rank) lives in a work buffer (``WORK``).

Lazy start. A rank's starting value of a chunk is read straight from its send buffer until the
step that first writes the chunk's slot, and that first write folds the starting value in (a
reduce computes ``op(send, incoming)`` into the slot; a copy just overwrites). So an out-of-place
call copies nothing up front except chunks that are never written but must appear in the receive
buffer (an allgather's own piece, an alltoall's block to itself, a broadcast root's data).

Conflicts. Every transfer reads the state at the start of its step, so a write into a slot that the
same rank also sends from in that step must wait until the send is done: the executor receives
such data into scratch and applies it after the step's transfers complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from synth.collective import Collective
from synth.exec.layout import Layout
from synth.schedule import OP_COPY, OP_REDUCE, Schedule

NONE, SEND, RECV, WORK = -1, 0, 1, 2
KIND_NAMES = {NONE: "none", SEND: "send", RECV: "recv", WORK: "work"}


@dataclass(frozen=True)
class Message:
    """The chunks one rank sends to (or receives from) one peer in one step, in chunk order;
    ``ops`` (receives only) says copy or reduce for each."""

    peer: int
    chunks: np.ndarray
    ops: np.ndarray | None = None


@dataclass(frozen=True)
class StepPlan:
    """What one rank does in one step."""

    step: int
    sends: tuple[Message, ...]
    recvs: tuple[Message, ...]


class Program:
    """Slot assignment and per-rank step plans for a schedule (independent of the message size).

    Arrays are [R, G]: ``initial`` (the rank starts with a value of the chunk), ``required`` (it
    must end with it), ``first_write`` (the first step whose transfer writes the slot; ``num_steps``
    if never), ``slot_kind`` (NONE, SEND, RECV or WORK).
    """

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        c: Collective = schedule.collective
        self.collective = c
        r, g, s = c.num_ranks, c.num_chunks, schedule.num_steps
        self.num_ranks, self.num_chunks, self.num_steps = r, g, s
        self.initial = np.ones((r, g), dtype=bool) if c.is_reduction else c.initial_holders()
        self.required = c.required()
        step_of = schedule.step_of_transfer
        first = np.full((r, g), s, dtype=np.int64)
        np.minimum.at(first, (schedule.dst, schedule.chunk), step_of)
        self.first_write = first
        written = first < s
        kind = np.full((r, g), NONE, dtype=np.int8)
        kind[self.initial | written] = WORK
        kind[self.initial & ~written] = SEND
        kind[self.required] = RECV
        self.slot_kind = kind
        # (dst, chunk, step) of every write that conflicts with a send of the same slot in that step
        key_send = (schedule.step_of_transfer * r + schedule.src) * g + schedule.chunk
        key_recv = (step_of * r + schedule.dst) * g + schedule.chunk
        also_sent = np.isin(key_recv, key_send)
        first_of = first[schedule.dst, schedule.chunk]
        self._conflict_keys = np.unique(key_recv[also_sent & (step_of > first_of)])
        self._conflict_keys_at_first = np.unique(key_recv[also_sent & (step_of == first_of)])

    # ---------------------------------------------------------------------------- locations
    def read_kind(self, rank: int, chunk: int, step: int) -> int:
        """Which buffer holds ``rank``'s start-of-``step`` value of ``chunk``."""
        if self.initial[rank, chunk] and step <= self.first_write[rank, chunk]:
            return SEND
        return int(self.slot_kind[rank, chunk])

    def conflicts(self, rank: int, chunk: int, step: int, *, in_place: bool = False) -> bool:
        """Whether a write into ``rank``'s slot of ``chunk`` in ``step`` must wait for the step's
        sends (the rank also sends that slot's contents in the step). With ``in_place`` the send
        and receive buffers are one, so the first write conflicts too when the slot is in RECV."""
        key = (step * self.num_ranks + rank) * self.num_chunks + chunk
        idx = np.searchsorted(self._conflict_keys, key)
        if idx < self._conflict_keys.size and self._conflict_keys[idx] == key:
            return True
        if in_place and self.slot_kind[rank, chunk] == RECV:
            idx = np.searchsorted(self._conflict_keys_at_first, key)
            return bool(idx < self._conflict_keys_at_first.size and self._conflict_keys_at_first[idx] == key)
        return False

    @cached_property
    def steps_with_conflicts(self) -> np.ndarray:
        """Steps in which some rank has a conflicting write (shared-memory runs need a second
        barrier there)."""
        return np.unique(self._conflict_keys // (self.num_ranks * self.num_chunks))

    def never_written_outputs(self, rank: int) -> np.ndarray:
        """Chunks ``rank`` starts with and must end with in its receive buffer but never receives:
        copied from the send buffer once per call."""
        mask = self.initial[rank] & self.required[rank] & (self.first_write[rank] == self.num_steps)
        return np.flatnonzero(mask)

    # ---------------------------------------------------------------------------- per-rank plans
    def rank_plan(self, rank: int) -> list[StepPlan]:
        """The steps in which ``rank`` sends or receives, with its messages grouped per peer."""
        sched = self.schedule
        mine = np.flatnonzero((sched.src == rank) | (sched.dst == rank))
        step_of = sched.step_of_transfer[mine]
        order = np.lexsort((sched.chunk[mine], step_of))
        mine, step_of = mine[order], step_of[order]
        plans: list[StepPlan] = []
        bounds = np.flatnonzero(np.diff(step_of)) + 1
        for part in np.split(np.arange(mine.size), bounds) if mine.size else []:
            idx = mine[part]
            step = int(step_of[part[0]])
            src, dst, chunk, op = sched.src[idx], sched.dst[idx], sched.chunk[idx], sched.op[idx]
            sends = []
            out = src == rank
            for peer in np.unique(dst[out]):
                sel = out & (dst == peer)
                sends.append(Message(int(peer), chunk[sel]))
            recvs = []
            into = dst == rank
            for peer in np.unique(src[into]):
                sel = into & (src == peer)
                recvs.append(Message(int(peer), chunk[sel], op[sel]))
            plans.append(StepPlan(step, tuple(sends), tuple(recvs)))
        return plans

    def work_offsets(self, rank: int, layout: Layout) -> tuple[np.ndarray, int]:
        """Element offset of each WORK slot of ``rank`` (−1 elsewhere) in its work buffer, chunks in
        order, and the work buffer's length."""
        lengths = layout.chunk_length
        is_work = self.slot_kind[rank] == WORK
        offsets = np.full(self.num_chunks, -1, dtype=np.int64)
        sizes = np.where(is_work, lengths, 0)
        starts = np.cumsum(sizes) - sizes
        offsets[is_work] = starts[is_work]
        return offsets, int(sizes.sum())


OPS_NAMES = {OP_COPY: "copy", OP_REDUCE: "reduce"}
