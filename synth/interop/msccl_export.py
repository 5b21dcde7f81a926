"""A `synth` schedule → an MSCCL algorithm (XML) that the MSCCL runtime and RCCL can load.

How a schedule becomes thread blocks (``docs/interop.md`` has the full account):

- **Buffers.** Every chunk a rank holds lives in a buffer position: where the collective starts it
  (the input, or in place the output it aliases), where the collective wants it (the output), or a
  scratch position. A transfer's receiver writes the chunk's output position when the rank has one,
  else a scratch position of its own. Synth steps read the state at the start of the step, so a
  write never lands on a position that is read in the same step, nor on one holding another
  chunk's value that is still needed (in-place alltoall): it is redirected to another scratch
  position. Whatever is not where the collective wants it at the end is moved by local copies.
- **Operations.** A copy transfer is ``s`` at the sender and ``r`` at the receiver; a reduce is
  ``rrc`` (receive, add the rank's current value, store). When the value a receive produces is
  next read by a send on the same channel, the two fuse: a relay becomes ``rcs``, a reduction
  ``rrcs``, or ``rrs`` when the stored sum would never be read.
- **Thread blocks and channels.** A transfer's channel is ``chunk mod channels`` (chunks are spread
  over channels, as MSCCL's ring allreduce spreads them), shifted into a further group of channels
  by the distance between the two ranks when one channel would need more than 32 thread blocks.
  Per rank and channel, a fused relay gets a thread block receiving from its source and sending to
  its destination; the other receives and sends get a thread block per peer, a receive and a send
  with the same peer sharing one when that connection carries at most one message per step.
- **Order and dependencies.** Every thread block runs its operations in (step, sends before
  receives, transfer) order, and where two operations of different thread blocks touch the same
  position (a write after a read or a write, a read after a write), the later one waits for the
  earlier one (``depid``/``deps``, extra waits as ``nop`` steps). Everything waited for comes
  earlier in that order, and a thread block that sends and receives carries at most one message
  per step on its send connection, so the algorithm cannot deadlock as long as each connection
  can buffer one message.
- **Routes.** MSCCL knows peers, not paths: a transfer's ``via`` switches are the network's
  business and are dropped.

Every algorithm written is executed symbolically before it is returned (`synth.interop.msccl_import`:
no deadlock, no race, the collective's result in the outputs) and its data flow is compared with
the schedule's (`synth.interop.equivalence`).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from synth.errors import InputError
from synth.interop.equivalence import compare
from synth.interop.msccl_import import execute, schedule_from_execution
from synth.interop.msccl_sizes import ANY_SIZE_MAX, tuned_range
from synth.interop.msccl_xml import (
    COLL_NAMES,
    MAX_CHANNELS,
    MAX_STEPS_PER_THREADBLOCK,
    MAX_THREADBLOCKS_PER_CHANNEL,
    PROTOCOLS,
    Algo,
    BufferLayout,
    Gpu,
    Slot,
    Step,
    Threadblock,
    buffer_layout,
    nchunks_for,
)
from synth.limits import available_memory, format_bytes
from synth.schedule import OP_REDUCE, Schedule
from synth.units import format_size

#: ``maxBytes`` for a schedule not tuned for a size: the largest value the runtime's int64 parser takes.
DEFAULT_MAX_BYTES = ANY_SIZE_MAX


class LimitExceeded(InputError):
    """The schedule cannot be expressed within the runtime's limits (exit code 2)."""


@dataclass
class ExportResult:
    """The algorithm and how it was laid out."""

    algo: Algo
    channels: int
    groups: int
    notes: list[str] = field(default_factory=list)
    op_counts: Counter = field(default_factory=Counter)
    #: where ``minBytes``/``maxBytes`` came from when the schedule's tuning chose them ("" otherwise)
    size_note: str = ""

    def summary(self) -> str:
        a = self.algo
        ntbs = sum(len(g.threadblocks) for g in a.gpus)
        nsteps = sum(len(tb.steps) for g in a.gpus for tb in g.threadblocks)
        ops = ", ".join(f"{k} {v}" for k, v in sorted(self.op_counts.items()))
        mode = "in place" if a.inplace else "out of place"
        sizes = f"; sizes {self.size_note}" if self.size_note else ""
        return (
            f"{a.name}: {a.coll} on {a.ngpus} GPUs, {mode}, {a.proto}, {a.nchannels} channel(s), "
            f"{ntbs} thread blocks, {nsteps} steps ({ops}){sizes}"
        )


#: Memory the layout takes per transfer (its positions, operations, thread blocks and checks are
#: Python objects): 2.8-2.9 kB measured on greedy allgathers of 16,256 and 65,280 transfers.
EXPORT_BYTES_PER_TRANSFER = 3000


def check_export_memory(schedule: Schedule) -> None:
    """Refuse, before laying anything out, a schedule whose layout would not fit in memory (a
    4,096-rank allgather's 16.7 million transfers would need about 50 GB)."""
    check_export_transfers(schedule.num_transfers, schedule.source)


def check_export_transfers(num_transfers: int, source: str) -> None:
    """`check_export_memory` from the count alone (a ``.npz`` file's, before its columns are read)."""
    need = num_transfers * EXPORT_BYTES_PER_TRANSFER
    have = available_memory()
    if need > have:
        raise LimitExceeded(
            source,
            "(MSCCL export)",
            None,
            f"laying out {num_transfers:,} transfers as MSCCL thread blocks would need about "
            f"{format_bytes(need)} ({EXPORT_BYTES_PER_TRANSFER} bytes per transfer); {format_bytes(have)} is available",
            show_value=False,
        )


# ===================================================================================== planning
@dataclass(eq=False)
class _Op:
    rank: int
    kind: str
    key: tuple
    end_key: tuple
    channel: int = 0
    send_peer: int = -1
    recv_peer: int = -1
    src: Slot | None = None
    dst: Slot | None = None
    remote: Slot | None = None  # the peer's position (informational in the XML)
    peer_slot: Slot | None = None  # the sender's position, for receives
    transfers: tuple[int, ...] = ()  # schedule transfers this operation carries (receive first)
    deps: set = field(default_factory=set)
    tb: Any = None
    position: int = -1


@dataclass
class _Plan:
    """Slots chosen for every transfer, and what fusion could use."""

    read_slot: list[Slot]  # per transfer: the sender's position
    write_slot: list[Slot]  # per transfer: the receiver's position
    chain_src: list[Slot | None]  # per reduce transfer: the position its sum starts from
    recv_kind: list[str]  # "r" or "rrc"
    last_in_group: list[bool]  # the last write of (dst, chunk) in its step
    first_reader: dict[int, int]  # write transfer -> the first transfer sending that value
    readers: Counter  # write transfer -> how many transfers send that value
    reduced_into: set[int]  # write transfers whose value a later reduce adds to (it is read there)
    needed_at_end: set[int]  # write transfers whose value is a final output
    postcopies: list[tuple[int, Slot, Slot]]  # (rank, from, to)
    scratch: list[int]  # scratch positions per rank


def _plan(schedule: Schedule, layout: BufferLayout) -> _Plan:
    coll = schedule.collective
    nranks = coll.num_ranks
    src, dst, chunk, op = (a.tolist() for a in (schedule.src, schedule.dst, schedule.chunk, schedule.op))
    n = schedule.num_transfers
    reads_at: dict[tuple[int, int], list[int]] = defaultdict(list)
    writes_at: dict[tuple[int, int], list[int]] = defaultdict(list)
    for s in range(schedule.num_steps):
        sl = schedule.step_slice(s)
        for i in range(sl.start, sl.stop):
            for table, key in ((reads_at, (src[i], chunk[i])), (writes_at, (dst[i], chunk[i]))):
                lst = table[key]
                if not lst or lst[-1] != s:
                    lst.append(s)
    required: set[tuple[int, int]] = set()
    out_slot_of: dict[tuple[int, int], Slot] = {}
    cur: dict[tuple[int, int], Slot] = {}
    occupant: dict[tuple[int, Slot], int] = {}
    for r in range(nranks):
        for _slot, c in layout.required(r):
            required.add((r, c))
        for slot, c in layout.initial(r):
            cur[(r, c)] = slot
            occupant[(r, slot)] = c
    scratch = [0] * nranks
    alts: dict[tuple[int, int], list[Slot]] = defaultdict(list)

    def output_slot(r: int, c: int) -> Slot | None:
        key = (r, c)
        if key not in out_slot_of:
            slot = layout.output_slot(r, c)
            out_slot_of[key] = layout.canonical(r, *slot) if slot is not None else None  # type: ignore[assignment]
        return out_slot_of[key]

    def live_after(r: int, c: int, s: int) -> bool:
        """Is the value (r, c) holds after step s needed later?"""
        ws = writes_at.get((r, c), [])
        nxt = bisect.bisect_right(ws, s)
        next_write = ws[nxt] if nxt < len(ws) else None
        rs = reads_at.get((r, c), [])
        k = bisect.bisect_right(rs, s)
        if k < len(rs) and (next_write is None or rs[k] <= next_write):
            return True
        return next_write is None and (r, c) in required

    read_slot: list[Slot] = [("", 0)] * n
    write_slot: list[Slot] = [("", 0)] * n
    chain_src: list[Slot | None] = [None] * n
    recv_kind = ["r"] * n
    last_in_group = [False] * n
    writer: dict[tuple[int, int], int] = {}
    first_reader: dict[int, int] = {}
    readers: Counter = Counter()
    reduced_into: set[int] = set()
    for s in range(schedule.num_steps):
        sl = schedule.step_slice(s)
        read_now: set[tuple[int, Slot]] = set()
        for i in range(sl.start, sl.stop):
            slot = cur[(src[i], chunk[i])]
            read_slot[i] = slot
            read_now.add((src[i], slot))
            w = writer.get((src[i], chunk[i]))
            if w is not None:
                first_reader.setdefault(w, i)
                readers[w] += 1
        groups: dict[tuple[int, int], list[int]] = {}
        for i in range(sl.start, sl.stop):
            groups.setdefault((dst[i], chunk[i]), []).append(i)
        written = {(r, c) for (r, c) in groups}

        def free(r: int, slot: Slot, c: int, s: int = s, read_now=read_now, written=written) -> bool:
            if (r, slot) in read_now:
                return False
            occ = occupant.get((r, slot))
            if occ is None or occ == c or cur.get((r, occ)) != slot or (r, occ) in written:
                return True
            return not live_after(r, occ, s)

        for (r, c), members in groups.items():
            target = None
            home = output_slot(r, c)
            if home is not None and free(r, home, c):
                target = home
            else:
                for alt in alts[(r, c)]:
                    if free(r, alt, c):
                        target = alt
                        break
                if target is None:
                    target = ("s", scratch[r])
                    scratch[r] += 1
                    alts[(r, c)].append(target)
            before = cur.get((r, c))
            for j, i in enumerate(members):
                write_slot[i] = target
                if op[i] == OP_REDUCE:
                    recv_kind[i] = "rrc"
                    chain_src[i] = before if j == 0 else target
            last_in_group[members[-1]] = True
            previous = writer.get((r, c))
            if previous is not None and op[members[0]] == OP_REDUCE:
                reduced_into.add(previous)
            writer[(r, c)] = members[-1]
        for (r, c), members in groups.items():
            cur[(r, c)] = write_slot[members[0]]
            occupant[(r, write_slot[members[0]])] = c
    needed_at_end = {writer[key] for key in required if key in writer}
    postcopies: list[tuple[int, Slot, Slot]] = []
    for r in range(nranks):
        for slot, c in layout.required(r):
            if cur[(r, c)] != slot:
                postcopies.append((r, cur[(r, c)], slot))
    # a copy that overwrites another copy's source must come after it
    sources = {(r, a) for r, a, _ in postcopies}
    postcopies.sort(key=lambda p: ((p[0], p[2]) in sources, p))
    return _Plan(
        read_slot,
        write_slot,
        chain_src,
        recv_kind,
        last_in_group,
        first_reader,
        readers,
        reduced_into,
        needed_at_end,
        postcopies,
        scratch,
    )


# ===================================================================================== building
def _channel_of(src: int, dst: int, chunk: int, nranks: int, channels: int, groups: int) -> int:
    if groups == 1:
        return chunk % channels
    delta = min((dst - src) % nranks, (src - dst) % nranks)
    group = (delta - 1) * groups // max(1, nranks // 2)
    return chunk % channels + channels * group


class _Build:
    """One attempt at laying a planned schedule out with ``channels`` × ``groups`` channels."""

    def __init__(self, schedule: Schedule, layout: BufferLayout, plan: _Plan, channels: int, groups: int):
        self.schedule = schedule
        self.layout = layout
        self.plan = plan
        self.channels = channels
        self.groups = groups
        self.nranks = schedule.collective.num_ranks
        self.src, self.dst, self.chunk = (a.tolist() for a in (schedule.src, schedule.dst, schedule.chunk))
        self.step_of = schedule.step_of_transfer.tolist()
        self.index_in_step = [i - int(schedule.step_starts[s]) for i, s in enumerate(self.step_of)]
        self.chan = [
            _channel_of(self.src[i], self.dst[i], self.chunk[i], self.nranks, channels, groups)
            for i in range(schedule.num_transfers)
        ]

    def send_key(self, i: int) -> tuple:
        return (self.step_of[i], 0, self.index_in_step[i])

    def recv_key(self, i: int) -> tuple:
        return (self.step_of[i], 1, self.index_in_step[i])

    def build(self, unfusable: set[int]) -> tuple[list[list[dict]], list[tuple[_Op, _Op]]]:
        """Thread blocks per rank (each a dict with peers, channel and ops) and the dependency
        violations of the key discipline (fused ops to undo)."""
        plan = self.plan
        n = self.schedule.num_transfers
        # --- fusion candidates: a receive whose value is next sent on the same channel
        fuse_with: dict[int, int] = {}
        for w, first in plan.first_reader.items():
            if w in unfusable or not plan.last_in_group[w] or self.chan[w] != self.chan[first]:
                continue
            fuse_with[w] = first
        # --- messages per (sender, receiver, channel, step)
        per_step = Counter((self.src[i], self.dst[i], self.chan[i], self.step_of[i]) for i in range(n))
        busiest: dict[tuple[int, int, int], int] = {}
        for (a, b, ch, _), count in per_step.items():
            busiest[(a, b, ch)] = max(busiest.get((a, b, ch), 0), count)
        # --- thread blocks per rank: owners of (recv peer, channel) and (send peer, channel)
        recv_owner: dict[tuple[int, int, int], dict] = {}
        send_owner: dict[tuple[int, int, int], dict] = {}
        tbs: list[list[dict]] = [[] for _ in range(self.nranks)]

        def new_tb(rank: int, send: int, recv: int, ch: int) -> dict:
            tb = {"send": send, "recv": recv, "chan": ch, "events": [], "ops": []}
            tbs[rank].append(tb)
            if send >= 0:
                send_owner[(rank, send, ch)] = tb
            if recv >= 0:
                recv_owner[(rank, recv, ch)] = tb
            return tb

        pairs = Counter()
        for w, s_ in fuse_with.items():
            pairs[(self.dst[w], self.src[w], self.dst[s_], self.chan[w])] += 1
        for (rank, p, q, ch), _count in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0])):
            if (rank, p, ch) in recv_owner or (rank, q, ch) in send_owner:
                continue
            if busiest.get((rank, q, ch), 0) > 1:
                continue
            new_tb(rank, q, p, ch)
        recv_needs = sorted({(self.dst[i], self.src[i], self.chan[i]) for i in range(n)})
        send_needs = sorted({(self.src[i], self.dst[i], self.chan[i]) for i in range(n)})
        send_set = set(send_needs)
        for rank, p, ch in recv_needs:
            if (rank, p, ch) in recv_owner:
                continue
            if (rank, p, ch) in send_set and (rank, p, ch) not in send_owner and busiest.get((rank, p, ch), 0) <= 1:
                new_tb(rank, p, p, ch)
            else:
                new_tb(rank, -1, p, ch)
        for rank, q, ch in send_needs:
            if (rank, q, ch) not in send_owner:
                new_tb(rank, q, -1, ch)
        # --- events into thread blocks
        for i in range(n):
            recv_owner[(self.dst[i], self.src[i], self.chan[i])]["events"].append((self.recv_key(i), "recv", i))
            send_owner[(self.src[i], self.dst[i], self.chan[i])]["events"].append((self.send_key(i), "send", i))
        # --- operations, fusing where nothing else of the thread block falls in between
        ops_by_rank: list[list[_Op]] = [[] for _ in range(self.nranks)]
        end = self.schedule.num_steps
        for rank in range(self.nranks):
            for tb in tbs[rank]:
                events = sorted(tb["events"])
                keys = [e[0] for e in events]
                fused_sends: set[int] = set()
                for key, what, i in events:
                    if what == "send" and i in fused_sends:
                        continue
                    if what == "send":
                        op = _Op(rank, "s", key, key, tb["chan"], send_peer=self.dst[i], src=plan.read_slot[i])
                        op.remote = plan.write_slot[i]
                        op.transfers = (i,)
                    else:
                        op = self._recv_op(rank, i, key, tb, keys, fuse_with, fused_sends)
                    op.tb = tb
                    tb["ops"].append(op)
                    ops_by_rank[rank].append(op)
            if any(p[0] == rank for p in self.plan.postcopies):
                copies = [p for p in self.plan.postcopies if p[0] == rank]
                for start in range(0, len(copies), MAX_STEPS_PER_THREADBLOCK):
                    tb = {"send": -1, "recv": -1, "chan": 0, "events": [], "ops": []}
                    tbs[rank].append(tb)
                    for j, (_, a, b) in enumerate(copies[start : start + MAX_STEPS_PER_THREADBLOCK]):
                        key = (end, 2, start + j)
                        op = _Op(rank, "cpy", key, key, 0, src=a, dst=b)
                        op.tb = tb
                        tb["ops"].append(op)
                        ops_by_rank[rank].append(op)
        violations = self._dependencies(ops_by_rank)
        return tbs, violations

    def _recv_op(self, rank: int, i: int, key: tuple, tb: dict, keys: list, fuse_with, fused_sends) -> _Op:
        plan = self.plan
        kind = plan.recv_kind[i]
        s_ = fuse_with.get(i)
        if s_ is not None and tb["send"] == self.dst[s_] and tb["recv"] == self.src[i]:
            k2 = self.send_key(s_)
            lo = bisect.bisect_right(keys, key)
            hi = bisect.bisect_left(keys, k2)
            if hi == lo and hi < len(keys) and keys[hi] == k2:
                fused_sends.add(s_)
                if kind == "r":
                    fused = "rcs"
                elif plan.readers[i] == 1 and i not in plan.needed_at_end and i not in plan.reduced_into:
                    fused = "rrs"
                else:
                    fused = "rrcs"
                op = _Op(rank, fused, key, k2, tb["chan"], send_peer=self.dst[s_], recv_peer=self.src[i])
                op.src = plan.chain_src[i] if fused != "rcs" else plan.write_slot[i]
                op.dst = plan.write_slot[i] if fused != "rrs" else None
                op.remote = plan.write_slot[s_]
                op.peer_slot = plan.read_slot[i]
                op.transfers = (i, s_)
                return op
        op = _Op(rank, kind, key, key, tb["chan"], recv_peer=self.src[i], dst=plan.write_slot[i])
        op.src = plan.chain_src[i] if kind == "rrc" else None
        op.peer_slot = plan.read_slot[i]
        op.transfers = (i,)
        return op

    @staticmethod
    def _accesses(op: _Op) -> list[tuple[tuple, Slot, str]]:
        k = op.kind
        if k == "s":
            return [(op.key, op.src, "R")]
        if k == "r":
            return [(op.key, op.dst, "W")]
        if k in ("rrc", "rrcs"):
            out = [(op.key, op.dst, "RW")] if op.src == op.dst else [(op.key, op.src, "R"), (op.key, op.dst, "W")]
            if k == "rrcs":
                out.append((op.end_key, op.dst, "R"))
            return out
        if k == "rcs":
            return [(op.key, op.dst, "W"), (op.end_key, op.dst, "R")]
        if k == "rrs":
            return [(op.key, op.src, "R")]
        if k == "cpy":
            return [(op.key, op.src, "R"), (op.key, op.dst, "W")]
        raise AssertionError(k)

    def _dependencies(self, ops_by_rank: list[list[_Op]]) -> list[tuple[_Op, _Op]]:
        violations: list[tuple[_Op, _Op]] = []
        for ops in ops_by_rank:
            by_slot: dict[Slot, list[tuple[tuple, int, _Op, str]]] = defaultdict(list)
            for n, op in enumerate(ops):
                for key, slot, mode in self._accesses(op):
                    by_slot[slot].append((key, n, op, mode))
            for slot in sorted(by_slot):
                last_writer: _Op | None = None
                readers: list[_Op] = []
                for _key, _, op, mode in sorted(by_slot[slot], key=lambda a: (a[0], a[1])):
                    preds = []
                    if last_writer is not None:
                        preds.append(last_writer)
                    if "W" in mode:
                        preds.extend(readers)
                    for pred in preds:
                        if pred is op:
                            continue
                        op.deps.add(pred)
                        if not pred.end_key < op.key and pred.tb is not op.tb:
                            violations.append((pred, op))
                    if "W" in mode:
                        last_writer, readers = op, []
                    else:
                        readers.append(op)
        return violations


def _threadblocks(tbs: list[dict]) -> list[Threadblock]:
    """Order thread blocks, turn dependencies into depid/deps (extra ones into nops), number steps."""
    tbs.sort(key=lambda tb: (tb["send"], tb["recv"], tb["chan"], tb["ops"][0].key if tb["ops"] else ()))
    for tid, tb in enumerate(tbs):
        tb["id"] = tid
        tb["ops"].sort(key=lambda op: op.key)
        for pos, op in enumerate(tb["ops"]):
            op.position = pos
    # waits per op: the latest op of each other thread block, minus what earlier ops already waited for
    waits: dict[int, list[tuple[int, _Op]]] = {}
    for tb in tbs:
        running: dict[int, int] = {}
        for op in tb["ops"]:
            latest: dict[int, _Op] = {}
            for pred in op.deps:
                other = pred.tb["id"]
                if other == tb["id"]:
                    continue
                if other not in latest or pred.position > latest[other].position:
                    latest[other] = pred
            needed = [(t, p) for t, p in sorted(latest.items()) if running.get(t, -1) < p.position]
            for t, p in needed:
                running[t] = p.position
            waits[id(op)] = needed
    # step numbers with nops in front of ops that wait for several thread blocks
    index: dict[int, int] = {}
    layout: list[list[tuple[str, Any]]] = []
    for tb in tbs:
        seq: list[tuple[str, Any]] = []
        for op in tb["ops"]:
            needed = waits[id(op)]
            for t, p in needed[1:]:
                seq.append(("nop", (t, p)))
            index[id(op)] = len(seq)
            seq.append(("op", op))
        layout.append(seq)
    targets: set[int] = set()
    resolved: list[list[tuple[str, Any, int, int]]] = []
    for seq in layout:
        out = []
        for what, item in seq:
            if what == "nop":
                t, p = item
                out.append(("nop", None, t, index[id(p)]))
                targets.add(id(p))
            else:
                needed = waits[id(item)]
                if needed:
                    t, p = needed[0]
                    out.append(("op", item, t, index[id(p)]))
                    targets.add(id(p))
                else:
                    out.append(("op", item, -1, -1))
        resolved.append(out)
    result = []
    for tb, seq in zip(tbs, resolved):
        steps = []
        for s, (what, op, depid, deps) in enumerate(seq):
            if what == "nop":
                steps.append(Step(s, "nop", "i", -1, "o", -1, 1, depid, deps, False))
                continue
            srcbuf, srcoff, dstbuf, dstoff = _step_buffers(op)
            hint = op.key[0] if op.kind in ("r", "rrc", "rcs", "rrcs", "rrs") else None
            steps.append(Step(s, op.kind, srcbuf, srcoff, dstbuf, dstoff, 1, depid, deps, id(op) in targets, hint))
        result.append(Threadblock(tb["id"], tb["send"], tb["recv"], tb["chan"], tuple(steps)))
    return result


def _step_buffers(op: _Op) -> tuple[str, int, str, int]:
    """srcbuf, srcoff, dstbuf, dstoff of an operation; the side that is not local names the peer's
    position (informational, as msccl-tools writes it)."""
    k = op.kind
    if k == "s":
        a, b = op.src, op.remote
    elif k == "r":
        a, b = op.peer_slot, op.dst
    elif k == "rcs":
        a, b = op.dst, op.dst
    elif k == "rrs":
        a, b = op.src, op.remote
    else:  # rrc, rrcs, cpy
        a, b = op.src, op.dst
    return a[0], a[1], b[0], b[1]


# ================================================================================= entry point
def export_msccl(
    schedule: Schedule,
    *,
    channels: int = 1,
    proto: str = "Simple",
    min_bytes: int | None = None,
    max_bytes: int | None = None,
    inplace: bool = False,
    name: str | None = None,
    self_check: bool = True,
) -> ExportResult:
    """Lay ``schedule`` (already verified) out as an MSCCL algorithm (see the module docstring).

    ``channels`` is the number of channels chunks are spread over; when the runtime's limits (256
    steps per thread block, 32 thread blocks per channel, 32 channels) are exceeded the layout is
    split over more channels, and refused with `LimitExceeded` when no split fits.

    ``min_bytes``/``max_bytes`` (the runtime's ``minBytes``/``maxBytes``, both included) left None
    come from the sizes the schedule was tuned for (`synth.interop.msccl_sizes`), or else allow
    every size (0 and 2^63 - 1)."""
    where = schedule.source
    tuned = tuned_range(schedule)
    size_note = ""
    if min_bytes is None or max_bytes is None:
        lo, hi = (tuned[0], tuned[1]) if tuned is not None else (0, DEFAULT_MAX_BYTES)
        min_bytes = lo if min_bytes is None else min_bytes
        max_bytes = hi if max_bytes is None else max_bytes
        if tuned is not None:
            size_note = f"{min_bytes} … {max_bytes} bytes (tuned for {', '.join(format_size(x) for x in tuned[2])})"
    if proto not in PROTOCOLS:
        raise InputError("--proto", "proto", proto, f"expected one of {', '.join(PROTOCOLS)}")
    if not 1 <= channels <= MAX_CHANNELS:
        raise InputError("--channels", "channels", channels, f"must be 1 … {MAX_CHANNELS}")
    if min_bytes < 0 or max_bytes < min_bytes:
        raise InputError("--min-bytes/--max-bytes", "bytes", [min_bytes, max_bytes], "need 0 <= min-bytes <= max-bytes")
    check_export_memory(schedule)
    coll = schedule.collective
    nchunks = nchunks_for(coll)
    layout = buffer_layout(coll.kind, coll.num_ranks, nchunks, inplace=inplace, root=coll.root)
    plan = _plan(schedule, layout)
    notes: list[str] = []
    base, groups = channels, 1
    while True:
        attempt = _layout(schedule, layout, plan, base, groups)
        problem = _limit_problem(attempt)
        if problem is None:
            break
        what, detail = problem
        if what == "tbs" and base * groups * 2 <= MAX_CHANNELS:
            groups *= 2
        elif what == "steps" and base * 2 * groups <= MAX_CHANNELS:
            base *= 2
        else:
            raise LimitExceeded(
                where,
                "(MSCCL limits)",
                None,
                f"{detail}, and no split over at most {MAX_CHANNELS} channels fits",
                show_value=False,
            )
    if (base, groups) != (channels, 1):
        notes.append(
            f"split over {base * groups} channels (chunks over {base}, peers by distance into {groups} group(s)) "
            f"to stay within {MAX_STEPS_PER_THREADBLOCK} steps per thread block and {MAX_THREADBLOCKS_PER_CHANNEL} "
            "thread blocks per channel"
        )
    gpus = []
    for rank, tbs in enumerate(attempt):
        i_size, o_size = layout.declared_sizes(rank)
        gpus.append(Gpu(rank, i_size, o_size, plan.scratch[rank], tuple(tbs)))
    nchannels = 1 + max((tb.channel for tbs in attempt for tb in tbs), default=0)
    method = schedule.method
    algo = Algo(
        name=name or f"synth {coll.kind.value} {method}" + (f" on {schedule.topology_name}" if schedule.topology_name else ""),
        proto=proto,
        nchannels=nchannels,
        nchunksperloop=nchunks,
        ngpus=coll.num_ranks,
        coll=COLL_NAMES[coll.kind],
        inplace=inplace,
        outofplace=not inplace,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        gpus=tuple(gpus),
        source=f"<export of {where}>",
    )
    counts = Counter(st.type for g in algo.gpus for tb in g.threadblocks for st in tb.steps)
    if self_check:
        run, mode = execute(algo, inplace=inplace, root=coll.root, fifo_capacity=1)
        if not run.race_check:
            notes.append("too large for the race check of the symbolic run (vector clocks); it was skipped")
        back = schedule_from_execution(run, mode, None)
        result = compare(schedule, back)
        if not result.equivalent:
            raise AssertionError(f"exported MSCCL algorithm does not reproduce the schedule's data flow: {result.difference}")
    return ExportResult(algo, base, groups, notes, counts, size_note)


def _layout(schedule: Schedule, layout: BufferLayout, plan: _Plan, channels: int, groups: int) -> list[list[Threadblock]]:
    build = _Build(schedule, layout, plan, channels, groups)
    unfusable: set[int] = set()
    while True:
        tbs, violations = build.build(unfusable)
        undo = {pred.transfers[0] for pred, _ in violations if pred.kind in ("rcs", "rrcs", "rrs")}
        if not violations:
            break
        if not undo - unfusable:
            raise AssertionError("dependency order violated by an unfused operation")
        unfusable |= undo
    return [_threadblocks(rank_tbs) for rank_tbs in tbs]


def _limit_problem(tbs_by_rank: list[list[Threadblock]]) -> tuple[str, str] | None:
    for rank, tbs in enumerate(tbs_by_rank):
        per_channel = Counter(tb.channel for tb in tbs)
        for ch, count in sorted(per_channel.items()):
            if count > MAX_THREADBLOCKS_PER_CHANNEL:
                return (
                    "tbs",
                    f"rank {rank} needs {count} thread blocks on channel {ch} (MSCCL allows {MAX_THREADBLOCKS_PER_CHANNEL})",
                )
        for tb in tbs:
            if len(tb.steps) > MAX_STEPS_PER_THREADBLOCK:
                return "steps", (
                    f"rank {rank} thread block {tb.id} (send {tb.send}, recv {tb.recv}, channel {tb.channel}) needs "
                    f"{len(tb.steps)} steps (MSCCL allows {MAX_STEPS_PER_THREADBLOCK})"
                )
    return None


__all__ = ["DEFAULT_MAX_BYTES", "ExportResult", "LimitExceeded", "export_msccl"]
