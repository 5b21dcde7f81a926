"""The MPI backend: run a schedule with mpi4py, one MPI process per rank, on one machine or many.

Each step, a rank starts one receive per peer it gets data from and one send per peer it gives
data to (persistent requests made once per buffer set, each started and waited for in turn), waits for them,
and then applies the step's reductions with numpy ufuncs (``out=`` the slot). All chunks between
two ranks in a step travel as one message: a plain byte range when they are adjacent in memory,
otherwise an MPI derived datatype (``hindexed`` over absolute addresses) so MPI gathers or
scatters them without a copy. Data moves as raw bytes from numpy buffers: nothing is pickled.

A copy goes straight into its slot; a reduce, or a copy into a slot that the rank also sends from
in that step, lands in scratch and is applied once the step's messages are done, so every transfer
reads the state at the start of its step.

Use it from your own mpi4py program::

    from mpi4py import MPI
    from synth.exec.mpi import execute
    execute(schedule, MPI.COMM_WORLD, sendbuf, recvbuf, op="sum")

The nccl-tests style benchmark over these plans is `synth.exec.mpi.ranks` (``mpiexec -n R python
-m synth.exec.mpi SCHEDULE …``, the options of ``synth run``); `synth.exec.mpi.launch` starts it
for ``synth run --backend mpi`` and watches it.
"""

from __future__ import annotations

import os
import select
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from synth.collective import Kind
from synth.exec import data
from synth.exec.api import verified
from synth.exec.faults import ExecutionError, Progress, fault_from_env, phase_of
from synth.exec.layout import Layout
from synth.exec.program import RECV, SEND, Program
from synth.schedule import OP_COPY, Schedule

if TYPE_CHECKING:
    from synth.exec.mpi.board import Board

try:  # mpi4py is an optional dependency (the ``mpi`` extra)
    from mpi4py import MPI
except ImportError:  # pragma: no cover - exercised only without the extra
    MPI = None  # type: ignore[assignment]

_SCRATCH = 3
_TAG_LIMIT = 32767  # every MPI guarantees tags up to this


def require_mpi() -> None:
    if MPI is None:
        raise ImportError("the MPI backend needs mpi4py and an MPI library: pip install 'synth[mpi]' (mpi4py and mpich)")


# =========================================================================== binding
@dataclass
class _Step:
    step: int
    requests: list
    recv_peers: tuple[int, ...]
    applies: list[tuple]

    def hot(self) -> tuple:
        """What the step loop unpacks: (step, phase while waiting, requests, applies)."""
        return self.step, phase_of(self.step, blocked=True), tuple(self.requests), tuple(self.applies)


class BoundPlan:
    """A schedule bound to one communicator and one set of buffers: persistent requests and numpy
    views for every step of this rank. Call it to run the collective once; `free` it when done."""

    def __init__(
        self,
        program: Program,
        comm,
        layout: Layout,
        op: data.ReduceOp | None,
        sendbuf: np.ndarray | None,
        recvbuf: np.ndarray | None,
        *,
        in_place: bool = False,
        progress: Progress | None = None,
    ):
        require_mpi()
        self.program = program
        self.comm = comm
        self.layout = layout
        self.rank = rank = comm.Get_rank()
        self.progress = progress or Progress(rank)
        self.fault = fault_from_env(rank)
        self.corrupt = self.fault is not None and self.fault.kind == "corrupt"
        if self.corrupt:
            self.fault = None
        lengths = layout.chunk_length
        work_off, work_len = program.work_offsets(rank, layout)
        recv = recvbuf if recvbuf is not None else np.empty(layout.recv_count, dtype=layout.dtype)
        send_pos = layout.send_position[rank]
        if in_place:
            send = recv
            send_pos = np.where(send_pos >= 0, _in_place_position(layout, rank), -1)
        else:
            send = sendbuf if sendbuf is not None else np.empty(0, dtype=layout.dtype)
        self.arrays = [send, recv, np.empty(work_len, dtype=layout.dtype), None]
        where = [send_pos, layout.recv_position[rank], work_off]
        plans = program.rank_plan(rank)
        scratch_need = 0
        steps: list[_Step] = []
        self._types: list = []
        prepared = []
        for plan in plans:
            t = plan.step
            recv_msgs, applies, scratch, acc = [], [], 0, {}
            for msg in plan.recvs:
                segments = []
                for c, o in zip(msg.chunks.tolist(), msg.ops.tolist()):
                    n = int(lengths[c])
                    if n == 0:
                        continue
                    kind = int(program.slot_kind[rank, c])
                    slot = (kind, int(where[kind][c]))
                    if o == OP_COPY and not program.conflicts(rank, c, t, in_place=in_place):
                        segments.append((kind, slot[1], n))
                        continue
                    segments.append((_SCRATCH, scratch, n))
                    incoming = (_SCRATCH, scratch)
                    scratch += n
                    if o == OP_COPY:
                        applies.append((None, incoming, slot, None, n))
                    elif c in acc:
                        applies.append((op, slot, slot, incoming, n))
                    else:
                        base_kind = program.read_kind(rank, c, t)
                        base = (SEND, int(send_pos[c])) if base_kind == SEND else slot
                        applies.append((op, base, slot, incoming, n))
                        acc[c] = True
                recv_msgs.append((msg.peer, segments))
            send_msgs = []
            for msg in plan.sends:
                segments = []
                for c in msg.chunks.tolist():
                    n = int(lengths[c])
                    if n:
                        kind = program.read_kind(rank, c, t)
                        segments.append((kind, int(where[kind][c]) if kind != SEND else int(send_pos[c]), n))
                send_msgs.append((msg.peer, segments))
            scratch_need = max(scratch_need, scratch)
            prepared.append((t, recv_msgs, send_msgs, applies))
        self.arrays[_SCRATCH] = np.empty(scratch_need, dtype=layout.dtype)
        for t, recv_msgs, send_msgs, applies in prepared:
            requests, peers = [], []
            tag = t % _TAG_LIMIT
            for peer, segments in recv_msgs:
                spec = self._spec(segments)
                if spec is not None:
                    requests.append(comm.Recv_init(spec, source=peer, tag=tag))
                    peers.append(peer)
            for peer, segments in send_msgs:
                spec = self._spec(segments)
                if spec is not None:
                    requests.append(comm.Send_init(spec, dest=peer, tag=tag))
            views = [
                (None if o is None else o.ufunc, self._view(a, n), self._view(out, n), None if b is None else self._view(b, n))
                for o, a, out, b, n in applies
            ]
            if requests or views:
                steps.append(_Step(t, requests, tuple(peers), views))
        self.steps = steps
        self._hot = [st.hot() for st in steps]
        self._peers = {st.step: st.recv_peers for st in steps}
        #: avg: the result is divided by the rank count once every step is done (None otherwise)
        self.finish = recv if op is not None and op.divides and layout.has_output(rank) else None
        self.op = op
        self.init_copies = []
        for c in program.never_written_outputs(rank):
            n = int(lengths[c])
            a, out = self._view((SEND, int(send_pos[c])), n), self._view((RECV, int(where[RECV][c])), n)
            if n and not (in_place and np.shares_memory(a, out)):
                self.init_copies.append((out, a))

    def _view(self, loc: tuple[int, int], n: int) -> np.ndarray:
        kind, offset = loc
        return self.arrays[kind][offset : offset + n]

    def _spec(self, segments: list[tuple[int, int, int]]):
        """An MPI message for these (buffer, offset, length) pieces: a byte range, or a derived
        datatype over absolute addresses when they are not adjacent; None if empty."""
        merged: list[list[int]] = []
        for kind, offset, n in segments:
            if merged and merged[-1][0] == kind and merged[-1][1] + merged[-1][2] == offset:
                merged[-1][2] += n
            else:
                merged.append([kind, offset, n])
        if not merged:
            return None
        itemsize = self.layout.itemsize
        if len(merged) == 1:
            kind, offset, n = merged[0]
            return [self.arrays[kind][offset : offset + n], n * itemsize, MPI.BYTE]
        displacements = [MPI.Get_address(self.arrays[kind][offset : offset + n]) for kind, offset, n in merged]
        lengths = [n * itemsize for _, _, n in merged]
        datatype = MPI.BYTE.Create_hindexed(lengths, displacements).Commit()
        self._types.append(datatype)
        return [MPI.BOTTOM, 1, datatype]

    def __call__(self) -> None:
        """Run the collective once on the bound buffers."""
        copyto = np.copyto
        for out, a in self.init_copies:
            copyto(out, a)
        progress = self.progress
        progress.peers = self._peers
        cells = progress.hot  # one store per transition: small messages are latency-bound
        fault = self.fault
        for step, waiting, requests, applies in self._hot:
            if fault is not None and step >= fault.step:  # the first step this rank takes part in
                self.fault = None
                cells[2] = waiting + 1  # in the step, not waiting: the culprit
                fault.trigger()
                fault = None
            cells[2] = waiting  # (still so while it applies the step: one store per step)
            for req in requests:  # one call each is cheaper in mpi4py than Startall/Waitall on a list
                req.Start()
            for req in requests:
                req.Wait()
            for ufunc, a, out, b in applies:
                if ufunc is None:
                    copyto(out, a)
                else:
                    ufunc(a, b, out=out)
        if self.finish is not None:
            self.op.finish(self.finish, self.program.num_ranks)  # type: ignore[union-attr]
        cells[3] += 1  # a call done (a one-step schedule's phase never changes)
        if self.corrupt and self.arrays[RECV].size:
            self.arrays[RECV][0] = data.poison_value(self.layout.dtype)

    def free(self) -> None:
        for st in self.steps:
            for req in st.requests:
                req.Free()
        self.steps = []
        for datatype in self._types:
            datatype.Free()
        self._types = []


def _in_place_position(layout: Layout, rank: int) -> np.ndarray:
    """Where an in-place call finds rank's input chunks in its receive buffer."""
    if layout.kind in (Kind.ALLREDUCE, Kind.REDUCE, Kind.BROADCAST):
        return layout.send_position[rank]  # the same offsets in the one buffer
    if layout.kind is Kind.ALLGATHER:  # the rank's own piece already sits at its place
        return np.where(layout.send_position[rank] >= 0, layout.recv_position[rank], -1)
    raise ValueError(f"{layout.kind.value} has no in-place form here; pass separate send and receive buffers")


IN_PLACE_KINDS = (Kind.ALLREDUCE, Kind.REDUCE, Kind.BROADCAST, Kind.ALLGATHER)


# =========================================================================== user API
class Executor:
    """A verified schedule on a communicator (a private duplicate, so its messages never meet the
    caller's). Keeps bound plans for the last few buffer sets, so calling it again on the same
    buffers costs no set-up."""

    def __init__(self, schedule: Schedule, comm, *, topology=None, program: Program | None = None, keep: int = 4):
        require_mpi()
        if schedule.collective.num_ranks != comm.Get_size():
            raise ValueError(f"the schedule is for {schedule.collective.num_ranks} ranks; the communicator has {comm.Get_size()}")
        self.program = program or _verified_program(schedule, topology)
        self.schedule = schedule
        self.user_comm = comm  # held, so that its id cannot be reused while this executor is cached
        self.comm = comm.Dup()
        self._plans: OrderedDict[tuple, BoundPlan] = OrderedDict()
        self._keep = keep

    def layout_for(self, sendbuf: np.ndarray | None, recvbuf: np.ndarray | None) -> Layout:
        c = self.schedule.collective
        r, kind = c.num_ranks, c.kind
        ref = recvbuf if recvbuf is not None else sendbuf
        if ref is None:
            raise ValueError("need a send or a receive buffer")
        dtype = ref.dtype
        if kind in (Kind.ALLREDUCE, Kind.REDUCE, Kind.BROADCAST):
            count = ref.size
        elif kind in (Kind.ALLGATHER, Kind.GATHER):
            count = sendbuf.size if sendbuf is not None else recvbuf.size // r  # type: ignore[union-attr]
        elif kind in (Kind.REDUCE_SCATTER, Kind.SCATTER):
            count = recvbuf.size if recvbuf is not None else sendbuf.size // r  # type: ignore[union-attr]
        else:
            count = ref.size // r
        layout = Layout(c, data.parse_dtype(dtype), count)
        for name, buf, need in (("sendbuf", sendbuf, layout.send_count), ("recvbuf", recvbuf, layout.recv_count)):
            if buf is not None and (buf.ndim != 1 or buf.size != need or not buf.flags.c_contiguous or buf.dtype != dtype):
                raise ValueError(f"{name} must be a contiguous 1-D {dtype} array of {need} elements for {layout.describe()}")
        return layout

    def __call__(
        self, sendbuf, recvbuf, op: str | data.ReduceOp = "sum", *, progress: Progress | None = None
    ) -> np.ndarray | None:
        no_send = sendbuf is None or (MPI is not None and sendbuf is MPI.IN_PLACE)
        if no_send:
            sendbuf = None
        layout = self.layout_for(sendbuf, recvbuf)
        rank = self.comm.Get_rank()
        in_place = no_send and layout.sends_data(rank)
        if in_place and layout.kind not in IN_PLACE_KINDS:
            raise ValueError(f"in-place is supported for {', '.join(k.value for k in IN_PLACE_KINDS)}; pass a send buffer")
        if in_place and recvbuf is None:
            raise ValueError("an in-place call needs the receive buffer")
        if recvbuf is None and layout.has_output(rank):
            raise ValueError(f"rank {rank} gets a result of the {layout.kind.value}: pass a receive buffer")
        if sendbuf is not None and recvbuf is not None and np.shares_memory(sendbuf, recvbuf):
            raise ValueError("sendbuf and recvbuf overlap; for an in-place call pass sendbuf=None")
        reduce_op = data.parse_op(op) if isinstance(op, str) else op
        key = (layout.count, layout.dtype.str, reduce_op.name, _address(sendbuf), _address(recvbuf), in_place)
        plan = self._plans.get(key)
        if plan is None:
            plan = BoundPlan(self.program, self.comm, layout, reduce_op, sendbuf, recvbuf, in_place=in_place, progress=progress)
            self._plans[key] = plan
            if len(self._plans) > self._keep:
                self._plans.popitem(last=False)[1].free()
        else:
            self._plans.move_to_end(key)
        plan()
        return recvbuf

    def free(self) -> None:
        for plan in self._plans.values():
            plan.free()
        self._plans.clear()
        if self.comm is not None:
            self.comm.Free()
            self.comm = None


def _address(buf: np.ndarray | None) -> tuple[int, int] | None:
    return None if buf is None else (buf.__array_interface__["data"][0], buf.nbytes)


def _verified_program(schedule: Schedule, topology=None) -> Program:
    """The schedule's `Program`, after checking it against its topology (refused if invalid)."""
    return Program(verified(schedule, topology))


_EXECUTORS: dict[tuple[int, int], tuple[weakref.ref, Executor]] = {}


def execute(schedule: Schedule, comm, sendbuf, recvbuf, op: str = "sum", *, topology=None) -> np.ndarray | None:
    """Run ``schedule`` as a collective over ``comm`` on this rank's numpy buffers (every rank of
    ``comm`` calls it, like any MPI collective); returns ``recvbuf``.

    Buffers follow docs/executors.md: e.g. allreduce ``sendbuf``/``recvbuf`` of ``count``
    elements; allgather ``count`` in, ``R·count`` out. ``sendbuf=None`` (or ``MPI.IN_PLACE``) means
    in place for allreduce, reduce, broadcast and allgather. The schedule is verified against its
    topology (``topology``: a `Topology`, a file or a built-in name; default the built-in the
    schedule names) the first time; set-up is cached per schedule, communicator and buffers.
    """
    key = (id(schedule), id(comm))
    entry = _EXECUTORS.get(key)
    if entry is None or entry[0]() is not schedule:
        entry = (weakref.ref(schedule), Executor(schedule, comm, topology=topology))
        _EXECUTORS[key] = entry
    return entry[1](sendbuf, recvbuf, op)


# =========================================================================== native collectives
#: MPI's operator for each of ours (MPI has no average)
MPI_OP_NAMES = {
    "sum": "SUM",
    "prod": "PROD",
    "max": "MAX",
    "min": "MIN",
    "band": "BAND",
    "bor": "BOR",
    "bxor": "BXOR",
    "land": "LAND",
    "lor": "LOR",
}


def native_supports(op: data.ReduceOp | None, dtype: np.dtype) -> bool:
    """Whether MPI's own collective has this operator for this data type (the MPI standard's
    table: no average at all; bool, MPI's C_BOOL, only with the logical operators; floating point
    with neither the bitwise nor the logical ones)."""
    if op is None:
        return True
    kind = np.dtype(dtype).kind
    if op.name not in MPI_OP_NAMES:
        return False
    if kind == "b":
        return op.name in ("land", "lor")
    if kind == "f":
        return op.name in ("sum", "prod", "max", "min")
    return True


def native_call(layout: Layout, comm, op: data.ReduceOp | None, send: np.ndarray, recv: np.ndarray):
    """A zero-argument function calling MPI's own collective for this layout on these buffers
    (broadcast runs in ``recv``, whose root copy must hold the data); see `native_supports`."""
    kind, root = layout.kind, layout.collective.root
    mpi_op = getattr(MPI, MPI_OP_NAMES[op.name]) if op else None
    is_root = comm.Get_rank() == root
    calls = {
        Kind.ALLREDUCE: lambda: comm.Allreduce(send, recv, mpi_op),
        Kind.REDUCE: lambda: comm.Reduce(send, recv, mpi_op, root),
        Kind.BROADCAST: lambda: comm.Bcast(recv, root),
        Kind.ALLGATHER: lambda: comm.Allgather(send, recv),
        Kind.GATHER: lambda: comm.Gather(send, recv if is_root else None, root),
        Kind.SCATTER: lambda: comm.Scatter(send if is_root else None, recv, root),
        Kind.REDUCE_SCATTER: lambda: comm.Reduce_scatter_block(send, recv, mpi_op),
        Kind.ALLTOALL: lambda: comm.Alltoall(send, recv),
    }
    return calls[kind]


# =========================================================================== watchdog
class Watchdog:
    """A thread that ends the whole job (``MPI_Abort``) when this rank makes no progress, after
    printing which rank and step it was stuck in. A rank stuck outside communication (the likely
    culprit) reports after ``timeout`` seconds; a rank waiting for other ranks gives the culprit's
    report a head start (``grace``, at most 2 s) before reporting whom it waits for.

    Under ``synth run`` (a ``board``), the launcher watches every rank and judges a hang itself
    (from outside it sees all ranks, and which of them is stopped); the watchdog then only ends
    the job if the launcher goes away."""

    def __init__(self, comm, progress: Progress, timeout: float, labels: list[str], board: Board | None = None):
        self.comm, self.progress, self.timeout, self.labels = comm, progress, timeout, labels
        self.grace = min(2.0, timeout / 2)
        self._stop = threading.Event()
        target = self._watch_launcher if board is not None else self._watch
        self._launcher = board.launcher_pid if board is not None else 0
        self._thread = threading.Thread(target=target, name="synth-watchdog", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        cells = self.progress.cells
        last, since = cells.copy(), time.monotonic()
        while not self._stop.wait(min(0.1, self.timeout / 10)):
            now = time.monotonic()
            if not np.array_equal(cells, last):
                last, since = cells.copy(), now
                continue
            blocked, peers = self.progress.blocked, self.progress.waiting_for
            if now - since <= self.timeout + (self.grace if blocked else 0.0):
                continue
            where = self.progress.describe(self.labels)
            if peers:
                what = f"waiting for rank{'s' if len(peers) > 1 else ''} {', '.join(map(str, peers))}"
            else:
                what = "waiting for the other ranks" if blocked else "not in communication"
            stuck = now - since
            say(f"synth: error: rank {self.progress.rank} made no progress for {stuck:.1f} s {where} ({what})")
            self.comm.Abort(3)
            os._exit(3)

    def _watch_launcher(self) -> None:
        try:
            launcher = os.pidfd_open(self._launcher)
        except (OSError, AttributeError):
            launcher = None
        while not self._stop.wait(0.25):
            if launcher is not None:
                gone = bool(select.select([launcher], [], [], 0)[0])
            else:
                try:
                    os.kill(self._launcher, 0)
                    gone = False
                except ProcessLookupError:
                    gone = True
                except PermissionError:
                    gone = False
            if gone:  # nobody to report to: end the job rather than run on unwatched
                self.comm.Abort(3)
                os._exit(3)

    def stop(self) -> None:
        self._stop.set()


def say(line: str) -> None:
    """Write one line to stderr in one write, so that lines of ranks writing at once never mix."""
    data = (line + "\n").encode()
    while data:
        data = data[os.write(2, data) :]


def fail(comm, message: str, code: int = 3, board: Board | None = None) -> None:
    """Report this rank's failure in one line (to the launcher's board under ``synth run``, else
    to stderr) and end the whole MPI job."""
    if board is not None:
        board.post_error(comm.Get_rank(), message)
    else:
        say(f"synth: error: {message}")
    comm.Abort(code)
    os._exit(code)


__all__ = ["BoundPlan", "ExecutionError", "Executor", "Progress", "execute", "native_call"]
