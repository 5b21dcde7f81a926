"""An MSCCL algorithm → a verified `synth` schedule.

The algorithm is executed symbolically, the way the MSCCL runtime runs it: one FIFO per (sender,
receiver, channel); a thread block runs its steps in order; a step with ``depid``/``deps`` waits
until thread block ``depid`` of the same GPU has finished a step numbered ``deps`` or later that
carries ``hasdep="1"`` (the runtime publishes progress only at such steps). The execution checks
what the runtime cannot: no thread block is left waiting (deadlock), no message is left over, no
step reads a buffer position that holds no data, no two unordered steps touch one position with
one of them writing (a race, found with vector clocks), and at the end every output position holds
what the collective requires.

Turning it into synth terms: synth holds one value per (rank, chunk). Every value an MSCCL buffer
position holds is a *version* of some rank's value, possibly with received data not yet combined
into it. A version is created when data crossing ranks is committed into a rank's value: a
received chunk that is stored or forwarded becomes a ``copy`` transfer; received partial sums
combined into a rank's own value (``rrc``/``rrs``/``rrcs``, or ``re`` from scratch) become
``reduce`` transfers, all those combined at once sharing one step. Each transfer reads a specific
version of its sender's value; synth steps are then assigned as early as the data flow allows
(a longest-path over "created before read" and, for reductions, "read before overwritten"
constraints), which keeps every transfer reading the very value it read in MSCCL. A data flow synth
cannot express (a rank forwarding someone else's partial sum untouched while keeping its own, two
diverging copies of one rank's value) is refused with the reason.

Routes come from `synth.routing`: a pair of ranks without a direct link goes through the
topology's switches; a pair without any switch path is refused.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from synth.collective import Kind
from synth.errors import InputError, SynthError
from synth.interop.msccl_xml import (
    COLL_NAMES,
    REDUCING,
    Algo,
    BufferLayout,
    Slot,
    Step,
    buffer_layout,
    chunks_per_piece,
    effective_waits,
    published_steps,
)
from synth.routing import router_for
from synth.schedule import Schedule, ScheduleBuilder
from synth.topology import Topology
from synth.verify import check

#: Above this many (thread blocks × messages), the race check is skipped: its vector clocks hold one
#: counter per thread block for every message in flight (5·10^7 is about 200 MB at worst).
RACE_CHECK_LIMIT = 50_000_000


class MscclInvalid(SynthError):
    """The algorithm does not run correctly (deadlock, race, wrong result): like a schedule that
    fails verification, exit code 1."""

    exit_code = 1


# ===================================================================================== values
@dataclass(frozen=True)
class VersionRef:
    """Version ``index`` of ``rank``'s value of ``chunk`` (0 is the initial value)."""

    rank: int
    chunk: int
    index: int


@dataclass
class Version:
    """How a version came to be: the transfers committed into it (none for the initial value)."""

    transfers: list[tuple[int, VersionRef, str, int | None]]  # (sender, version read, "copy"/"reduce", step hint)
    mask: int
    steps: list[int] = field(default_factory=list)  # the synth step of each transfer, once assigned


@dataclass(frozen=True)
class Token:
    """What a buffer position holds: a version of this rank's value (``base``) plus received data
    not yet committed into it (``pending``: sender, the sender's version, and the synth step the
    receiving step names, if any). ``mask`` is the set
    of contributions (reductions); ``consumed`` marks data that went into a value this position
    no longer equals."""

    chunk: int
    mask: int
    base: VersionRef | None
    pending: tuple[tuple[int, VersionRef, int | None], ...] = ()
    consumed: bool = False


@dataclass
class _Message:
    units: list[tuple[int, int, VersionRef]]  # (chunk, mask, version)
    clock: np.ndarray | None
    origin: tuple[int, int, int]  # (gpu, tb, step)


@dataclass
class ImportResult:
    """The imported schedule and what was learned on the way."""

    schedule: Schedule
    algo: Algo
    layout: BufferLayout
    inplace: bool
    warnings: list[str] = field(default_factory=list)
    race_checked: bool = True
    msccl_steps: int = 0
    threadblocks: int = 0
    messages: int = 0

    def summary(self) -> str:
        s = self.schedule
        mode = "in place" if self.inplace else "out of place"
        return (
            f"{self.algo.name or '(unnamed)'}: {s.collective.describe()}, {mode}, {self.algo.proto}, "
            f"{self.algo.nchannels} channel(s), {self.threadblocks} thread blocks, {self.msccl_steps} MSCCL steps, "
            f"{self.messages} messages -> {s.num_steps} steps, {s.num_transfers} transfers on {s.topology_name}"
        )


# ================================================================================== execution
class _Execution:
    """Runs an MSCCL algorithm symbolically for one buffer layout."""

    def __init__(self, algo: Algo, layout: BufferLayout, *, race_check: bool, fifo_capacity: int | None = None):
        self.algo = algo
        self.capacity = fifo_capacity
        self.layout = layout
        self.kind = layout.kind
        self.reduction = layout.collective.is_reduction
        self.full_mask = (1 << algo.ngpus) - 1
        self.slots: list[dict[Slot, Token]] = [{} for _ in range(algo.ngpus)]
        self.versions: dict[tuple[int, int], list[Version]] = {}
        self.fifos: dict[tuple[int, int, int], deque[_Message]] = {}
        self.dropped = 0
        self.messages = 0
        # thread ids for vector clocks
        self.tid: dict[tuple[int, int], int] = {}
        for gpu in algo.gpus:
            for tb in gpu.threadblocks:
                self.tid[(gpu.id, tb.id)] = len(self.tid)
        nthreads = len(self.tid)
        sends = sum(1 for g in algo.gpus for tb in g.threadblocks for st in tb.steps if st.type in ("s", "rcs", "rrs", "rrcs"))
        self.race_check = race_check and nthreads * max(sends, 1) <= RACE_CHECK_LIMIT
        self.clock: dict[int, np.ndarray] = (
            {t: np.zeros(nthreads, dtype=np.int32) for t in range(nthreads)} if self.race_check else {}
        )
        # clocks after the hasdep steps that some step waits for, kept until the last waiter joined them
        self.snapshots: dict[tuple[int, int], np.ndarray] = {}
        self.waiters: Counter = Counter()
        self.satisfier: dict[tuple[int, int, int], tuple[int, int]] = {}  # waiting (gpu, tb, step) -> (tid, step)
        # the runtime's step numbering and waits (nops: see msccl_xml.published_steps/effective_waits)
        # indexed [gpu][tb][step]
        self.published = [[published_steps(tb) for tb in g.threadblocks] for g in algo.gpus]
        self.waits = [[effective_waits(tb) for tb in g.threadblocks] for g in algo.gpus]
        if self.race_check:
            for gpu in algo.gpus:
                for tb in gpu.threadblocks:
                    for st, wait in zip(tb.steps, self.waits[gpu.id][tb.id]):
                        if wait is None:
                            continue
                        first = self._first_publishing(gpu.id, *wait)
                        if first is not None:
                            key = (self.tid[(gpu.id, wait[0])], first)
                            self.satisfier[(gpu.id, tb.id, st.s)] = key
                            self.waiters[key] += 1
        # per (rank, position): the last write and the reads since, as (thread, clock, gpu, tb, step)
        self.accesses: dict[tuple[int, Slot], tuple[tuple | None, list[tuple]]] = {}
        for rank in range(algo.ngpus):
            for slot, chunk in layout.initial(rank):
                mask = (1 << rank) if self.reduction else 0
                self.slots[rank][slot] = Token(chunk, mask, VersionRef(rank, chunk, 0))
                self.versions[(rank, chunk)] = [Version([], mask)]

    # ----------------------------------------------------------------------------- helpers
    def _first_publishing(self, g: int, tb: int, deps: int) -> int | None:
        """The first step of thread block ``tb`` of GPU ``g`` whose completion satisfies a wait for
        step ``deps``: it carries hasdep and the runtime counts it as ``deps`` or later."""
        numbers = self.published[g][tb]
        for step, number in zip(self.algo.gpus[g].threadblocks[tb].steps, numbers):
            if number >= deps and step.hasdep and step.type != "nop":
                return step.s
        return None

    def _fail(self, gpu: int, tb: int, step: Step, message: str) -> MscclInvalid:
        return MscclInvalid(f"{self.algo.source}: INVALID: gpu {gpu} tb {tb} step {step.s} ({step.type}): {message}")

    def _slot(self, gpu: int, buf: str, off: int) -> Slot:
        slot = self.layout.canonical(gpu, buf, off)
        i_size, o_size = self.layout.sizes(gpu)
        size = {"i": i_size, "o": o_size}.get(slot[0])
        if size is not None and not 0 <= slot[1] < size:
            what = "input" if slot[0] == "i" else "output"
            coll = COLL_NAMES[self.kind]
            raise InputError(
                self.algo.source,
                f"gpu[{gpu}]",
                f"{buf}[{off}]",
                f"position {slot[1]} is outside rank {gpu}'s {what} buffer of {size} chunk(s) in this {coll}",
            )
        return slot

    def _describe(self, token: Token | None) -> str:
        if token is None:
            return "no data"
        if not self.reduction:
            return f"chunk {token.chunk}"
        ranks = [r for r in range(self.algo.ngpus) if token.mask >> r & 1]
        return f"chunk {token.chunk} with contributions of rank(s) {', '.join(map(str, ranks))}"

    def _access(self, rank: int, slot: Slot, write: bool, event: tuple, where, buf: str, off: int) -> None:
        """Record a read or write of a position (``buf[off]`` as the file names it); with race
        checking, require that the last write (and for writes, every read since) happened before
        this access: in the same thread block, or ordered by a chain of dependencies and messages
        (vector clocks). ``event`` is (thread, clock, gpu, tb, step, step type)."""
        if not self.race_check:
            return
        tid = event[0]
        clock = self.clock[tid]
        last_write, reads = self.accesses.get((rank, slot), (None, []))
        others = [last_write] if last_write is not None else []
        if write:
            others += reads
        for other in others:
            if other[0] != tid and clock[other[0]] < other[1]:
                _, _, g, t, s, kind, other_writes, other_buf, other_off = other
                named, other_named = f"{buf}[{off}]", f"{other_buf}[{other_off}]"
                mine = "writes" if write else "reads"
                theirs = "writes" if other_writes else "reads"
                same = "" if other_named == named else f" (as {other_named})"
                raise where(
                    f"{mine} {named}, which gpu {g} tb {t} step {s} ({kind}) {theirs}{same}, and nothing orders the two: "
                    "a race between thread blocks (no dependency or message chain leads from one to the other)"
                )
        record = (*event, write, buf, off)
        if write:
            self.accesses[(rank, slot)] = (record, [])
        else:
            reads.append(record)
            self.accesses[(rank, slot)] = (last_write, reads)

    def _read(self, rank: int, slot: Slot, where) -> Token:
        token = self.slots[rank].get(slot)
        if token is None:
            raise where(f"reads {slot[0]}[{slot[1]}], which holds no data at that point")
        if token.consumed:
            raise where(
                f"reads {slot[0]}[{slot[1]}] after its data was combined into a value it does not hold; "
                "synth cannot express this data flow"
            )
        return token

    def _write(self, rank: int, slot: Slot, token: Token) -> None:
        """Store ``token``; received data the position held and the new value does not carry on is
        lost (counted in ``dropped``). A reduction into the same position (``rrc`` with src = dst)
        carries the pending data on, so nothing is lost there."""
        old = self.slots[rank].get(slot)
        if old is not None and old.pending and not old.consumed and old is not token:
            kept = set(token.pending)
            self.dropped += sum(1 for p in old.pending if p not in kept)
        self.slots[rank][slot] = token

    def _combine(self, a: Token, b: Token, where) -> Token:
        if a.chunk != b.chunk:
            raise where(f"combines chunk {a.chunk} with chunk {b.chunk}")
        if a.mask & b.mask:
            both = [r for r in range(self.algo.ngpus) if (a.mask & b.mask) >> r & 1]
            raise where(f"counts the contribution of rank(s) {', '.join(map(str, both))} twice in chunk {a.chunk}")
        if a.base is not None and b.base is not None:
            raise where(f"combines two values of rank {a.base.rank}'s own chunk {a.chunk}")
        return Token(a.chunk, a.mask | b.mask, a.base or b.base, a.pending + b.pending)

    def commit(self, rank: int, token: Token, where) -> tuple[VersionRef, Token]:
        """Turn received data held in a position into versions of ``rank``'s value (transfers)."""
        if not token.pending:
            assert token.base is not None
            return token.base, token
        chunk = token.chunk
        chain = self.versions.setdefault((rank, chunk), [])
        pending = list(token.pending)
        if token.base is None:
            sender, ref, hint = pending.pop(0)
            chain.append(Version([(sender, ref, "copy", hint)], self.versions[(ref.rank, ref.chunk)][ref.index].mask))
            base = VersionRef(rank, chunk, len(chain) - 1)
        else:
            base = token.base
            if base.index != len(chain) - 1:
                raise where(
                    f"combines data into an older value of rank {rank}'s chunk {chunk} while a newer one exists; "
                    "synth holds one value per rank and chunk"
                )
        if pending:
            chain.append(Version([(s, ref, "reduce", hint) for s, ref, hint in pending], token.mask))
            base = VersionRef(rank, chunk, len(chain) - 1)
        return base, Token(chunk, token.mask, base)

    # ----------------------------------------------------------------------------- execution
    def run(self) -> None:
        algo = self.algo
        pcs = {key: 0 for key in self.tid}
        flags = {key: -1 for key in self.tid}
        stalled: dict[tuple[int, int], _Message] = {}  # a fused step that received but cannot send yet
        remaining = sum(len(tb.steps) for g in algo.gpus for tb in g.threadblocks)
        order = sorted(self.tid)
        while remaining:
            progress = False
            for g, t in order:
                tb = algo.gpus[g].threadblocks[t]
                while pcs[(g, t)] < len(tb.steps):
                    step = tb.steps[pcs[(g, t)]]
                    message = stalled.pop((g, t), None)
                    if message is None:
                        if not self._ready(g, t, tb, step, flags):
                            break
                        message = self._execute(g, t, tb, step)
                    if message is not None:
                        fifo = self.fifos.setdefault((g, tb.send, tb.channel), deque())
                        if self.capacity is not None and len(fifo) >= self.capacity:
                            stalled[(g, t)] = message
                            progress = progress or step.type != "s"
                            break
                        fifo.append(message)
                        self.messages += 1
                    self._complete(g, t, step, flags)
                    pcs[(g, t)] += 1
                    remaining -= 1
                    progress = True
            if not progress:
                raise self._deadlock(pcs, flags, stalled)
        for (_src, dst, chan), fifo in sorted(self.fifos.items()):
            if fifo:
                g, t, s = fifo[0].origin
                raise MscclInvalid(
                    f"{algo.source}: INVALID: gpu {g} tb {t} step {s} sends to gpu {dst} on channel {chan}, "
                    "but no step receives it"
                )

    def _complete(self, g: int, t: int, step: Step, flags) -> None:
        if step.hasdep and step.type != "nop":
            flags[(g, t)] = self.published[g][t][step.s]
            if self.race_check:
                tid = self.tid[(g, t)]
                if self.waiters[(tid, step.s)]:
                    self.snapshots[(tid, step.s)] = self.clock[tid].copy()

    def _ready(self, g: int, t: int, tb, step: Step, flags) -> bool:
        wait = self.waits[g][t][step.s]
        if wait is not None and flags[(g, wait[0])] < wait[1]:
            return False
        if step.type == "s" and self.capacity is not None and len(self.fifos.get((g, tb.send, tb.channel), ())) >= self.capacity:
            return False
        if step.type in ("r", "rcs", "rrs", "rrc", "rrcs"):
            fifo = self.fifos.get((tb.recv, g, tb.channel))
            if not fifo:
                return False
            if len(fifo[0].units) != step.count:
                og, ot, os_ = fifo[0].origin
                raise self._fail(
                    g, t, step, f"receives {step.count} chunk(s) but gpu {og} tb {ot} step {os_} sent {len(fifo[0].units)}"
                )
        return True

    def _deadlock(self, pcs, flags, stalled) -> MscclInvalid:
        for (g, t), pc in sorted(pcs.items()):
            tb = self.algo.gpus[g].threadblocks[t]
            if pc >= len(tb.steps):
                continue
            step = tb.steps[pc]
            full = (g, t) in stalled or (
                step.type == "s" and len(self.fifos.get((g, tb.send, tb.channel), ())) >= (self.capacity or 1 << 62)
            )
            if full:
                reason = f"waits forever to send to gpu {tb.send} on channel {tb.channel} (its FIFO of {self.capacity} is full)"
            elif (wait := self.waits[g][t][pc]) is not None and flags[(g, wait[0])] < wait[1]:
                depid, deps = wait
                hint = (
                    ""
                    if self._first_publishing(g, depid, deps) is not None
                    else (f" (no step {deps} or later of tb {depid} has hasdep=1)")
                )
                reason = f"waits forever for tb {depid} step {deps}{hint}"
            else:
                reason = f"waits forever for a message from gpu {tb.recv} on channel {tb.channel}"
            return self._fail(g, t, step, f"deadlock: {reason}")
        raise AssertionError("no stuck thread block")

    def _execute(self, g: int, t: int, tb, step: Step) -> _Message | None:
        """Apply a step; returns the message it sends, if any."""
        tid = self.tid[(g, t)]
        where = lambda msg: self._fail(g, t, step, msg)  # noqa: E731
        clock = None
        if self.race_check:
            clock = self.clock[tid]
            if self.waits[g][t][step.s] is not None:
                key = self.satisfier[(g, t, step.s)]
                np.maximum(clock, self.snapshots[key], out=clock)
                self.waiters[key] -= 1
                if not self.waiters[key]:
                    del self.snapshots[key]
            clock[tid] += 1
        event = (tid, int(clock[tid]) if clock is not None else 0, g, t, step.s, step.type)
        kind = step.type
        if kind in REDUCING and not self.reduction:
            raise where(f"a reduction step in a {COLL_NAMES[self.kind]}")
        message = None
        if kind in ("r", "rcs", "rrs", "rrc", "rrcs"):
            message = self.fifos[(tb.recv, g, tb.channel)].popleft()
            if clock is not None and message.clock is not None:
                np.maximum(clock, message.clock, out=clock)
        out_units: list[tuple[int, int, VersionRef]] = []
        for u in range(step.count):
            if kind == "nop":
                break
            received = None
            if message is not None:
                chunk, mask, ref = message.units[u]
                received = Token(chunk, mask, None, ((tb.recv, ref, step.synth_step),))
            if kind == "s":
                src = self._slot(g, step.srcbuf, step.srcoff + u)
                self._access(g, src, False, event, where, step.srcbuf, step.srcoff + u)
                out_units.append(self._send_from(g, src, where))
            elif kind in ("r", "rcs"):
                dst = self._slot(g, step.dstbuf, step.dstoff + u)
                self._access(g, dst, True, event, where, step.dstbuf, step.dstoff + u)
                self._write(g, dst, received)
                if kind == "rcs":
                    out_units.append(self._send_from(g, dst, where))
            elif kind in ("rrc", "rrcs", "rrs"):
                src = self._slot(g, step.srcbuf, step.srcoff + u)
                self._access(g, src, False, event, where, step.srcbuf, step.srcoff + u)
                mine = self._read(g, src, where)
                if kind == "rrs":
                    result = self._combine(mine, received, where)
                    ref, _ = self.commit(g, result, where)
                    if mine.pending:
                        self.slots[g][src] = Token(mine.chunk, mine.mask, mine.base, mine.pending, consumed=True)
                    out_units.append((result.chunk, result.mask, ref))
                    continue
                dst = self._slot(g, step.dstbuf, step.dstoff + u)
                if dst != src and mine.pending:
                    _, mine = self.commit(g, mine, where)
                    self.slots[g][src] = mine
                self._access(g, dst, True, event, where, step.dstbuf, step.dstoff + u)
                self._write(g, dst, self._combine(mine, received, where))
                if kind == "rrcs":
                    out_units.append(self._send_from(g, dst, where))
            elif kind == "cpy":
                src = self._slot(g, step.srcbuf, step.srcoff + u)
                dst = self._slot(g, step.dstbuf, step.dstoff + u)
                self._access(g, src, False, event, where, step.srcbuf, step.srcoff + u)
                token = self._read(g, src, where)
                if token.pending:
                    _, token = self.commit(g, token, where)
                    self.slots[g][src] = token
                self._access(g, dst, True, event, where, step.dstbuf, step.dstoff + u)
                self._write(g, dst, token)
            elif kind == "re":
                src = self._slot(g, step.srcbuf, step.srcoff + u)
                dst = self._slot(g, step.dstbuf, step.dstoff + u)
                self._access(g, src, False, event, where, step.srcbuf, step.srcoff + u)
                self._access(g, dst, True, event, where, step.dstbuf, step.dstoff + u)
                theirs = self._read(g, src, where)
                mine = self._read(g, dst, where)
                result = self._combine(mine, theirs, where)
                if theirs.pending and src != dst:
                    self.slots[g][src] = Token(theirs.chunk, theirs.mask, theirs.base, theirs.pending, consumed=True)
                self.slots[g][dst] = result
        if out_units:
            snapshot = clock.copy() if clock is not None else None
            return _Message(out_units, snapshot, (g, t, step.s))
        return None

    def _send_from(self, g: int, slot: Slot, where) -> tuple[int, int, VersionRef]:
        token = self._read(g, slot, where)
        ref, committed = self.commit(g, token, where)
        self.slots[g][slot] = committed
        return (token.chunk, token.mask, ref)

    # ----------------------------------------------------------------------------- the end
    def finish(self) -> None:
        """Check the outputs and commit what they hold."""
        coll = COLL_NAMES[self.kind]
        for rank in range(self.algo.ngpus):
            for slot, chunk in self.layout.required(rank):
                token = self.slots[rank].get(slot)
                ok = token is not None and token.chunk == chunk and not token.consumed
                if ok and self.reduction:
                    ok = token.mask == self.full_mask
                if not ok:
                    want = f"chunk {chunk}" + (" fully reduced" if self.reduction else "")
                    raise MscclInvalid(
                        f"{self.algo.source}: INVALID: at the end rank {rank}'s {slot[0]}[{slot[1]}] holds "
                        f"{self._describe(token)}; a {coll} needs {want} there"
                    )
                ref, committed = self.commit(rank, token, lambda msg, r=rank: MscclInvalid(f"{self.algo.source}: {msg}"))
                self.slots[rank][slot] = committed
                if self.reduction and ref.index != len(self.versions[(rank, chunk)]) - 1:
                    raise InputError(
                        self.algo.source,
                        f"gpu[{rank}]",
                        f"{slot[0]}[{slot[1]}]",
                        f"ends with an older value of chunk {chunk} than rank {rank} computed later; "
                        "synth holds one value per rank and chunk",
                    )
        for rank in range(self.algo.ngpus):
            for token in self.slots[rank].values():
                if token.pending and not token.consumed:
                    self.dropped += len(token.pending)


# ============================================================================= step assignment
def _assign_steps(versions: dict[tuple[int, int], list[Version]], reduction: bool, source: str) -> tuple[int, bool]:
    """Give every transfer a synth step (stored in ``Version.steps``); returns (steps, whether the
    files' ``synth_step`` hints were used).

    Constraints (x = step): a version's transfers come after the previous version of that value is
    complete (x ≥ x_prev + 1), after the version each reads is complete (x ≥ x_read + 1), and, for
    reductions, no later than the first transfer of the version that overwrites what they read
    (a transfer reads the state at the start of its step). A longest path over these 0/1-weighted
    constraints places every transfer as early as its data allows. When every transfer carries a
    hint (files exported by synth name the step each receive came from) and the hints satisfy the
    constraints, they are kept, so an exported schedule comes back step for step."""
    # nodes: per version a start node S and a completion node C, per transfer a node X
    value: list[int] = []
    fixed: list[bool] = []
    hints: list[int | None] = []
    start: dict[tuple[int, int, int], int] = {}
    done: dict[tuple[int, int, int], int] = {}
    xnode: dict[tuple[int, int, int, int], int] = {}

    def node(initial: int, is_fixed: bool = False, hint: int | None = None) -> int:
        value.append(initial)
        fixed.append(is_fixed)
        hints.append(hint)
        return len(value) - 1

    for (rank, chunk), chain in sorted(versions.items()):
        for index, version in enumerate(chain):
            key = (rank, chunk, index)
            if not version.transfers:
                done[key] = start[key] = node(-1, True)
                continue
            start[key] = node(0)
            done[key] = node(0)
            for t, (_, _, _, hint) in enumerate(version.transfers):
                xnode[(*key, t)] = node(0, False, hint)
    out: list[list[tuple[int, int]]] = [[] for _ in value]
    for (rank, chunk), chain in sorted(versions.items()):
        for index, version in enumerate(chain):
            key = (rank, chunk, index)
            if not version.transfers:
                continue
            if index:
                out[done[(rank, chunk, index - 1)]].append((start[key], 1))
            for t, (_, ref, _, _) in enumerate(version.transfers):
                x = xnode[(*key, t)]
                out[start[key]].append((x, 0))
                out[x].append((done[key], 0))
                out[done[(ref.rank, ref.chunk, ref.index)]].append((x, 1))
                if reduction and ref.index + 1 < len(versions[(ref.rank, ref.chunk)]):
                    out[x].append((start[(ref.rank, ref.chunk, ref.index + 1)], 0))
    transfer_nodes = list(xnode.values())
    use_hints = bool(transfer_nodes) and all(hints[x] is not None for x in transfer_nodes)
    if use_hints:
        trial = [h if h is not None else v for h, v in zip(hints, value)]
        if _longest_paths(trial, fixed, out, source) and all(trial[x] == hints[x] for x in transfer_nodes):
            value = trial
        else:
            use_hints = False
    if not use_hints:
        _longest_paths(value, fixed, out, source, strict=True)
    for (rank, chunk), chain in versions.items():
        for index, version in enumerate(chain):
            version.steps = [value[xnode[(rank, chunk, index, t)]] for t in range(len(version.transfers))]
    used = [value[x] for x in transfer_nodes]
    # hints may leave gaps (steps whose transfers were dropped): close them up
    distinct = sorted(set(used))
    if distinct != list(range(len(distinct))):
        renumber = {s: i for i, s in enumerate(distinct)}
        for chain in versions.values():
            for version in chain:
                version.steps = [renumber[s] for s in version.steps]
    return len(distinct), use_hints


def _longest_paths(
    value: list[int], fixed: list[bool], out: list[list[tuple[int, int]]], source: str, strict: bool = False
) -> bool:
    """Raise ``value`` to satisfy every ``value[v] >= value[u] + w`` (in place). Returns False (or
    raises `InputError` when ``strict``) if the constraints cannot be met."""
    queue = deque(range(len(value)))
    queued = [True] * len(value)
    limit = len(value) + max((v for v in value), default=0) + 1
    while queue:
        u = queue.popleft()
        queued[u] = False
        for v, w in out[u]:
            if value[u] + w > value[v]:
                if fixed[v] or value[u] + w > limit:
                    if not strict:
                        return False
                    raise InputError(
                        source,
                        "(data flow)",
                        None,
                        "the data flow cannot be ordered into synth steps: a value would have to be read after it is overwritten",
                        show_value=False,
                    )
                value[v] = value[u] + w
                if not queued[v]:
                    queued[v] = True
                    queue.append(v)
    return True


# ================================================================================= entry points
def _mode(algo: Algo, inplace: bool | None) -> bool:
    if inplace is not None:
        return inplace
    return bool(algo.inplace and not algo.outofplace)


def _root_candidates(algo: Algo, kind: Kind) -> list[int]:
    """Ranks in the order to try as root: first those whose buffer use points at them (only the
    root of a broadcast/scatter has an input, only the root of a reduce/gather an output)."""
    likely = []
    for gpu in algo.gpus:
        for tb in gpu.threadblocks:
            for st in tb.steps:
                reads_input = st.type in ("s", "cpy", "re", "rrs", "rrc", "rrcs") and st.srcbuf == "i"
                writes_output = st.type in ("r", "rcs", "rrc", "rrcs", "cpy", "re") and st.dstbuf == "o"
                if (reads_input and kind in (Kind.BROADCAST, Kind.SCATTER)) or (
                    writes_output and kind in (Kind.REDUCE, Kind.GATHER)
                ):
                    likely.append(gpu.id)
    seen: list[int] = []
    for r in [*likely, *range(algo.ngpus)]:
        if r not in seen:
            seen.append(r)
    return seen


def execute(
    algo: Algo,
    *,
    inplace: bool | None = None,
    root: int | None = None,
    race_check: bool = True,
    fifo_capacity: int | None = None,
) -> tuple[_Execution, bool]:
    """Run the algorithm symbolically (see the module docstring); returns the finished execution and
    the mode used. ``fifo_capacity`` bounds the messages a connection buffers (None: unbounded;
    the runtime's FIFOs hold at least one). Raises `MscclInvalid` if it does not compute its
    collective, `InputError` if it cannot be read as one."""
    kind = algo.kind
    assert kind is not None
    mode = _mode(algo, inplace)
    try:
        chunks_per_piece(kind, algo.ngpus, algo.nchunksperloop)
    except ValueError as exc:
        raise InputError(algo.source, "algo.nchunksperloop", algo.nchunksperloop, str(exc)) from None
    rooted = kind in (Kind.BROADCAST, Kind.REDUCE, Kind.GATHER, Kind.SCATTER)
    if root is not None and not 0 <= root < algo.ngpus:
        raise InputError("--root", "root", root, f"not a rank of the algorithm (0 … {algo.ngpus - 1})")
    candidates = [root] if (root is not None or not rooted) else _root_candidates(algo, kind)
    first_error: SynthError | None = None
    for cand in candidates:
        layout = buffer_layout(kind, algo.ngpus, algo.nchunksperloop, inplace=mode, root=cand)
        run = _Execution(algo, layout, race_check=race_check, fifo_capacity=fifo_capacity)
        try:
            run.run()
            run.finish()
        except (MscclInvalid, InputError) as exc:
            if first_error is None:
                first_error = exc
            continue
        return run, mode
    assert first_error is not None
    raise first_error


def import_msccl(
    algo: Algo,
    topology: Topology,
    *,
    inplace: bool | None = None,
    root: int | None = None,
    race_check: bool = True,
    warnings: list[str] | None = None,
) -> ImportResult:
    """An MSCCL algorithm as a verified synth schedule on ``topology``.

    ``inplace`` chooses the buffer semantics (default: in place when the file says ``inplace="1"``
    and not ``outofplace="1"``); ``root`` is needed only when it cannot be inferred (rooted
    collectives carry no root in MSCCL files)."""
    if algo.ngpus != topology.num_ranks:
        raise InputError(
            algo.source,
            "algo.ngpus",
            algo.ngpus,
            f"topology {topology.name} has {topology.num_ranks} ranks; pick a matching --topology",
        )
    notes = list(warnings or [])
    both = inplace is None and bool(algo.inplace and algo.outofplace)
    try:
        run, mode = execute(algo, inplace=False if both else inplace, root=root, race_check=race_check)
    except (MscclInvalid, InputError) as exc:
        if not both:
            raise
        # declared correct both ways: in place then, and say why out of place was not used
        run, mode = execute(algo, inplace=True, root=root, race_check=race_check)
        notes.append(f"{algo.source}: declared out of place too, but fails that way: {exc}")
    else:
        if both:
            try:
                execute(algo, inplace=True, root=run.layout.collective.root, race_check=False)
            except (MscclInvalid, InputError) as exc:
                notes.append(f"{algo.source}: declared in place too, but fails that way: {exc}")
    if run.dropped:
        notes.append(
            f"{algo.source}: {run.dropped} received chunk(s) were never used (overwritten, or left where they landed, "
            "before being stored in an output, added into a value or sent on); they are left out of the schedule"
        )
    if not run.race_check and race_check:
        notes.append(f"{algo.source}: too large for the race check (vector clocks); it was skipped")
    schedule = schedule_from_execution(run, mode, topology)
    check(schedule, topology)
    nsteps = sum(len(tb.steps) for g in algo.gpus for tb in g.threadblocks)
    ntbs = sum(len(g.threadblocks) for g in algo.gpus)
    return ImportResult(schedule, algo, run.layout, mode, notes, run.race_check, nsteps, ntbs, run.messages)


def schedule_from_execution(run: _Execution, inplace: bool, topology: Topology | None) -> Schedule:
    """The synth schedule of a finished execution (not verified here). Without a topology the
    transfers get no routes (for comparisons only)."""
    algo = run.algo
    steps, _ = _assign_steps(run.versions, run.reduction, algo.source)
    router = router_for(topology) if topology is not None else None
    per_step: list[list[tuple[int, int, int, str, tuple[str, ...]]]] = [[] for _ in range(steps)]
    vias: dict[tuple[int, int], tuple[str, ...]] = {}
    for (rank, chunk), chain in sorted(run.versions.items()):
        for version in chain:
            for (sender, _, op, _), step in zip(version.transfers, version.steps):
                via = vias.get((sender, rank))
                if via is None:
                    found = router.via_names(sender, rank) if router is not None else ()
                    if found is None:
                        raise InputError(
                            algo.source,
                            f"gpu[{sender}]",
                            f"sends to gpu {rank}",
                            f"topology {topology.name} has no link or switch path from rank {sender} to rank {rank}; "
                            "choose another --topology",
                        )
                    via = vias[(sender, rank)] = found
                per_step[step].append((sender, rank, chunk, op, via))
    params: dict[str, Any] = {
        "msccl": {
            "file": Path(algo.source).name,
            "name": algo.name,
            "proto": algo.proto,
            "nchannels": algo.nchannels,
            "inplace": inplace,
        }
    }
    if topology is not None:
        builder = ScheduleBuilder(run.layout.collective, topology, "msccl-import", params)
    else:
        builder = ScheduleBuilder(run.layout.collective, None, "msccl-import", params, topology_name="", topology_sha256="")
    for transfers in per_step:
        builder.add_step(transfers)
    return builder.build()
