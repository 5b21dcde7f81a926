"""The multiprocessing backend: one process per rank on this machine, buffers in shared memory.

Every rank's send, receive, work and scratch buffers live in one POSIX shared-memory segment, so a
transfer is done by its destination: it reads the source rank's slot and copies it (or reduces it
into its own slot with a numpy ufunc, ``out=`` the slot) with no copy in between. Steps are
separated by a barrier; a step in which some rank writes a slot that it also sends from in that
step has two phases (those writes go to scratch first, then are applied after a second barrier),
so every transfer reads the state at the start of its step.

The barrier watches one shared counter per rank (each rank writes only its own): a waiting rank
yields the CPU a few times, then sleeps with exponential back-off (20 µs up to 1 ms), so that 64
ranks on 2 cores still progress (spinning without yielding is a thousand times slower there). It relies on
x86-64's ordering of stores; on other processors a lock round trip fences each barrier.

The parent process forks the ranks, watches them and cleans up: a rank that raises, is killed or
makes no progress for ``timeout`` seconds ends the run with an `ExecutionError` naming the rank
and the step; Ctrl-C stops everything; no process or shared-memory segment outlives the call.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import platform
import secrets
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from synth.exec import data
from synth.exec.faults import ExecutionError, Fault, describe_exception, fault_from_env, signal_name
from synth.exec.layout import Layout
from synth.exec.program import NONE, RECV, SEND, WORK, Program
from synth.exec.report import Measurement, Row
from synth.exec.settings import MemoryNeed, RunSettings, check_memory
from synth.schedule import OP_COPY

NAME = "mp"

SHM_PREFIX = "synth-exec-"
SCRATCH = 3

# One 64-byte line of int64 per rank in the control segment (each written only by its rank).
_LINE = 8
_ARRIVE, _SIZE, _ITER, _STEP, _BEAT, _STATUS = range(6)
_RUNNING, _DONE, _FAILED = 0, 1, 2
_ERR_BYTES = 1024
_ALIGN = 64  # bytes

_TSO = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


# ====================================================================================== plans
@dataclass(frozen=True)
class Job:
    """What the ranks run: one layout (message size) after another. ``user_inputs``: the parent
    has filled the send buffers and reads the receive buffers itself (one call, no check)."""

    program: Program
    layouts: tuple[Layout, ...]
    op: data.ReduceOp | None
    warmup: int = 5
    iters: int = 20
    seed: int = 0
    user_inputs: bool = False


def _round_up(elements: int, itemsize: int) -> int:
    per = max(1, _ALIGN // itemsize)
    return -(-elements // per) * per


def _scratch_need(program: Program, layout: Layout) -> np.ndarray:
    """Per rank, the most scratch elements any step needs for conflicting writes."""
    r, g = program.num_ranks, program.num_chunks
    keys = program._conflict_keys
    need = np.zeros((program.num_steps, r), dtype=np.int64)
    if keys.size:
        step, rest = divmod(keys, r * g)
        rank, chunk = divmod(rest, g)
        np.add.at(need, (step, rank), layout.chunk_length[chunk])
    return need.max(axis=0) if program.num_steps else np.zeros(r, dtype=np.int64)


class _Arena:
    """Element offsets of every rank's four buffers in the data segment (sized for the largest
    layout of the job)."""

    def __init__(self, job: Job):
        prog, itemsize = job.program, job.layouts[0].itemsize
        r = prog.num_ranks
        caps = np.zeros((4,), dtype=np.int64)
        for layout in job.layouts:
            work = max(prog.work_offsets(rank, layout)[1] for rank in range(r))
            scratch = int(_scratch_need(prog, layout).max()) if r else 0
            caps = np.maximum(caps, [layout.send_count, layout.recv_count, work, scratch])
        self.caps = [_round_up(int(c), itemsize) for c in caps]
        self.stride = sum(self.caps)
        self.bases = np.zeros((r, 4), dtype=np.int64)
        for rank in range(r):
            base = rank * self.stride
            for kind in (SEND, RECV, WORK, SCRATCH):
                self.bases[rank, kind] = base
                base += self.caps[kind]
        self.elements = r * self.stride

    def region(self, arena: np.ndarray, rank: int, kind: int, length: int) -> np.ndarray:
        start = int(self.bases[rank, kind])
        return arena[start : start + length]


# ============================================================================= shared state
def _check_room(needed: int) -> None:
    """Refuse a run whose buffers do not fit in /dev/shm (touching a page beyond it would kill the
    rank with SIGBUS halfway through)."""
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return
    free = stat.f_bavail * stat.f_frsize
    if needed > free:
        raise ExecutionError(
            f"the buffers need {needed / 2**30:.2f} GiB of shared memory but /dev/shm has {free / 2**30:.2f} GiB free;"
            " run smaller sizes or fewer at a time"
        )


class _Shared:
    """The two shared-memory segments (data and control) and the numpy views on them."""

    def __init__(self, job: Job, arena: _Arena):
        r = job.program.num_ranks
        dtype = job.layouts[0].dtype
        _check_room(arena.elements * dtype.itemsize)
        token = secrets.token_hex(6)
        self.data_shm = shared_memory.SharedMemory(
            name=f"{SHM_PREFIX}{os.getpid()}-{token}-d", create=True, size=max(1, arena.elements * dtype.itemsize)
        )
        n_sizes = len(job.layouts)
        ctrl_bytes = (r + 1) * _LINE * 8 + n_sizes * r * 16 + r * _ERR_BYTES
        try:
            self.ctrl_shm = shared_memory.SharedMemory(name=f"{SHM_PREFIX}{os.getpid()}-{token}-c", create=True, size=ctrl_bytes)
        except BaseException:
            self._unlink(self.data_shm)
            raise
        self.arena = np.ndarray((arena.elements,), dtype=dtype, buffer=self.data_shm.buf)
        buf = self.ctrl_shm.buf
        self.lines = np.ndarray((r + 1, _LINE), dtype=np.int64, buffer=buf)
        self.lines[:] = 0
        offset = (r + 1) * _LINE * 8
        self.times = np.ndarray((n_sizes, r), dtype=np.float64, buffer=buf, offset=offset)
        self.wrong = np.ndarray((n_sizes, r), dtype=np.int64, buffer=buf, offset=offset + n_sizes * r * 8)
        self.errors = np.ndarray((r, _ERR_BYTES), dtype=np.uint8, buffer=buf, offset=offset + n_sizes * r * 16)
        self.times[:] = np.nan
        self.wrong[:] = 0
        self.errors[:] = 0

    @property
    def abort(self) -> np.ndarray:
        return self.lines[-1, 0:1]

    def error_text(self, rank: int) -> str:
        raw = bytes(self.errors[rank])
        return raw.split(b"\0", 1)[0].decode("utf-8", "replace")

    @staticmethod
    def _unlink(shm: shared_memory.SharedMemory) -> None:
        with contextlib.suppress(FileNotFoundError):
            shm.unlink()
        with contextlib.suppress(BufferError):  # a view still alive somewhere: the mapping goes with the process
            shm.close()

    def release(self) -> None:
        """Drop the views and remove both segments (idempotent)."""
        for name in ("arena", "lines", "times", "wrong", "errors"):
            self.__dict__.pop(name, None)
        self._unlink(self.data_shm)
        self._unlink(self.ctrl_shm)


# ============================================================================== the rank
class _Rank:
    """One rank's side of the run (in its own process)."""

    def __init__(self, rank: int, job: Job, shared: _Shared, arena: _Arena, parent: int):
        self.rank = rank
        self.job = job
        self.prog = job.program
        self.shared = shared
        self.layout_arena = arena
        self.arena = shared.arena
        self.line = shared.lines[rank]
        self.arrive = shared.lines[: job.program.num_ranks, _ARRIVE]
        self.abort = shared.abort
        self.parent = parent
        self.epoch = 0
        self.fault: Fault | None = fault_from_env(rank)
        self.corrupt = self.fault is not None and self.fault.kind == "corrupt"
        if self.corrupt:
            self.fault = None
        self._lock = None if _TSO else _FENCE_LOCK

    # ---------------------------------------------------------------------------- barrier
    def _fence(self) -> None:
        if self._lock is not None:
            self._lock.acquire()
            self._lock.release()

    def barrier(self) -> None:
        self.epoch += 1
        epoch = self.epoch
        self._fence()
        self.line[_ARRIVE] = epoch
        arrive = self.arrive
        spins = 0
        pause = 20e-6
        while arrive.min() < epoch:
            spins += 1
            if spins < 20:
                os.sched_yield()
                continue
            if self.abort[0] or os.getppid() != self.parent:
                raise SystemExit(4)
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
        self._fence()

    # ---------------------------------------------------------------------------- binding
    def bind(self, layout: Layout):
        """Numpy views for every copy and reduce this rank does, per step."""
        prog, rank, ar = self.prog, self.rank, self.layout_arena
        r = prog.num_ranks
        lengths = layout.chunk_length
        work = np.stack([prog.work_offsets(x, layout)[0] for x in range(r)])
        local = np.stack([layout.send_position, layout.recv_position, work])
        bases = ar.bases
        op = self.job.op

        def pos(x: int, kind: int, c: int) -> int:
            return int(bases[x, kind] + local[kind, x, c])

        init = [(None, pos(rank, SEND, c), pos(rank, RECV, c), None, int(lengths[c])) for c in prog.never_written_outputs(rank)]
        two_phase = set(prog.steps_with_conflicts.tolist())
        steps: list[tuple[list, list | None]] = [([], [] if s in two_phase else None) for s in range(prog.num_steps)]
        scratch_base = int(bases[rank, SCRATCH])
        for plan in prog.rank_plan(rank):
            t = plan.step
            phase_a, phase_b = steps[t]
            scratch = scratch_base
            acc: dict[int, int] = {}
            for msg in plan.recvs:
                for c, o in zip(msg.chunks.tolist(), msg.ops.tolist()):
                    n = int(lengths[c])
                    if n == 0:
                        continue
                    src = pos(msg.peer, prog.read_kind(msg.peer, c, t), c)
                    slot = pos(rank, int(prog.slot_kind[rank, c]), c)
                    if prog.conflicts(rank, c, t):
                        if c in acc:
                            phase_a.append((op.ufunc, acc[c], acc[c], src, n))
                            continue
                        target, acc[c] = scratch, scratch
                        scratch += n
                        phase_b.append((None, target, slot, None, n))  # type: ignore[union-attr]
                    else:
                        target = slot
                        if o != OP_COPY and c in acc:
                            phase_a.append((op.ufunc, slot, slot, src, n))
                            continue
                        acc[c] = slot
                    if o == OP_COPY:
                        phase_a.append((None, src, target, None, n))
                    else:
                        phase_a.append((op.ufunc, pos(rank, prog.read_kind(rank, c, t), c), target, src, n))
        arena = self.arena

        def views(ops: list[tuple]) -> list[tuple]:
            return _views(arena, _merge(ops))

        finish = None  # avg: the rank's result, divided by the rank count once the steps are done
        if op is not None and op.divides and layout.has_output(rank):
            finish = ar.region(arena, rank, RECV, layout.recv_count)
        return views(init), [(views(a), None if b is None else views(b)) for a, b in steps], finish

    # ---------------------------------------------------------------------------- running
    def call(self, bound) -> None:
        """One collective call: this rank's copies and reduces, step by step, with barriers."""
        init, steps, finish = bound
        line, fault = self.line, self.fault
        _apply(init)
        for t, (phase_a, phase_b) in enumerate(steps):
            line[_STEP] = t
            if fault is not None and t == fault.step:
                self.fault = None
                fault.trigger()
            _apply(phase_a)
            self.barrier()
            if phase_b is not None:
                _apply(phase_b)
                self.barrier()
        if finish is not None:  # after the last barrier: no rank reads this rank's slots any more
            self.job.op.finish(finish, self.prog.num_ranks)  # type: ignore[union-attr]

    def run(self) -> None:
        job, rank, ar, line = self.job, self.rank, self.layout_arena, self.line
        for si, layout in enumerate(job.layouts):
            line[_SIZE], line[_ITER], line[_STEP] = si, -1, -1
            bound = self.bind(layout)
            if job.user_inputs:
                line[_ITER] = 0
                self.barrier()
                self.call(bound)
                continue
            send = ar.region(self.arena, rank, SEND, layout.send_count)
            data.send_data(layout, rank, job.op, job.seed, out=send, tick=self._beat)
            poison = data.poison_value(layout.dtype)
            start, stop = int(ar.bases[rank, RECV]), int(ar.bases[rank, SCRATCH]) + ar.caps[SCRATCH]
            self.arena[start:stop] = poison
            self.barrier()
            line[_ITER] = 0
            self.call(bound)
            recv = ar.region(self.arena, rank, RECV, layout.recv_count)
            if self.corrupt and recv.size:
                recv[0] = poison
            self.shared.wrong[si, rank] = data.check_rank(layout, rank, recv, job.op, job.seed, tick=self._beat)
            for i in range(job.warmup):
                line[_ITER] = 1 + i
                self.call(bound)
            self.barrier()
            line[_ITER] = 1 + job.warmup
            begin = time.perf_counter()
            for _ in range(job.iters):
                self.call(bound)
            self.shared.times[si, rank] = (time.perf_counter() - begin) / max(1, job.iters) * 1e6
            line[_ITER] = 1 + job.warmup + job.iters

    def _beat(self) -> None:
        self.line[_BEAT] += 1


def _merge(ops: list[tuple]) -> list[list]:
    """Join consecutive operations of the same kind on adjacent elements into one (a chunk range
    that is contiguous in every operand becomes one numpy call)."""
    merged: list[list] = []
    for fn, a, out, b, n in ops:
        if merged:
            last = merged[-1]
            lfn, la, lout, lb, ln = last
            if lfn is fn and la + ln == a and lout + ln == out and ((lb is None) == (b is None)) and (b is None or lb + ln == b):
                last[4] += n
                continue
        merged.append([fn, a, out, b, n])
    return merged


def _views(arena: np.ndarray, ops: list[list]) -> list[tuple]:
    views = []
    for fn, a, out, b, n in ops:
        av, ov = arena[a : a + n], arena[out : out + n]
        views.append((fn, av, ov, None if b is None else arena[b : b + n]))
    return views


def _apply(ops: list[tuple]) -> None:
    copyto = np.copyto
    for fn, a, out, b in ops:
        if fn is None:
            copyto(out, a)
        else:
            fn(a, b, out=out)


_FENCE_LOCK = None


def _rank_main(rank: int, job: Job, shared: _Shared, arena: _Arena, parent: int) -> None:
    """Process entry point of one rank: run, record a failure, never print a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when everyone stops
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})  # blocked by the parent around fork
    line = shared.lines[rank]
    code = 0
    try:
        _Rank(rank, job, shared, arena, parent).run()
        line[_STATUS] = _DONE
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 4
    except BaseException as exc:  # reported to the parent, which names the rank
        text = describe_exception(exc).encode()[: _ERR_BYTES - 1]
        shared.errors[rank, : len(text)] = np.frombuffer(text, dtype=np.uint8)
        line[_STATUS] = _FAILED
        code = 1
    os._exit(code)


# ============================================================================== the parent
def _describe_position(job: Job, line: np.ndarray) -> str:
    si, it, step = int(line[_SIZE]), int(line[_ITER]), int(line[_STEP])
    if 0 <= si < len(job.layouts):
        layout = job.layouts[si]
        size = f"size {layout.size} B, {layout.dtype.name}" + (f" {job.op.name}" if job.op else "")
    else:
        size = "start-up"
    if it < 0:
        return f"while preparing ({size})"
    phase = "checked call" if it == 0 else f"call {it}"
    return f"in step {step} ({size}, {phase})" if step >= 0 else f"before step 0 ({size}, {phase})"


def execute(
    job: Job,
    *,
    timeout: float = 60.0,
    on_result: Callable[[int, Measurement], None] | None = None,
    fill: Callable[[Callable[[int, int, int], np.ndarray]], None] | None = None,
    collect: Callable[[Callable[[int, int, int], np.ndarray]], None] | None = None,
) -> list[Measurement]:
    """Run ``job`` on one process per rank; returns one `Measurement` per layout.

    ``fill``/``collect`` (for ``user_inputs`` jobs) are called in this process with a function
    ``region(rank, kind, length)`` giving views of the shared buffers (kind 0 send, 1 receive),
    before the ranks start and after they finish. ``timeout`` is how long the run may go without
    any rank making progress before it is ended as hung.
    """
    global _FENCE_LOCK
    prog = job.program
    r = prog.num_ranks
    arena = _Arena(job)
    ctx = multiprocessing.get_context("fork")
    if not _TSO and _FENCE_LOCK is None:
        _FENCE_LOCK = ctx.Lock()
    procs: list = []
    shared: _Shared | None = None
    # A Ctrl-C (or a SIGTERM, which ``synth run`` turns into one) while the segments are made and
    # the ranks start waits until they all are, and listed, so that the ``finally`` below removes
    # and stops them all; and a Ctrl-C never reaches a rank before it ignores it. (Python's
    # resource tracker, which every segment registers with, unblocks both signals when it starts
    # its process: so it is started first.)
    resource_tracker.ensure_running()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        shared = _Shared(job, arena)
        if fill is not None:
            fill(lambda rank, kind, n: arena.region(shared.arena, rank, kind, n))
        parent = os.getpid()
        for rank in range(r):
            args = (rank, job, shared, arena, parent)
            proc = ctx.Process(target=_rank_main, args=args, name=f"synth-rank-{rank}", daemon=True)
            proc.start()
            procs.append(proc)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # an interrupt that came meanwhile lands here
        results = _watch(job, shared, procs, timeout, on_result)
        if collect is not None:
            collect(lambda rank, kind, n: arena.region(shared.arena, rank, kind, n))
        return results
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for proc in procs:
            if proc.exitcode is None:
                proc.kill()
        for proc in procs:
            proc.join()
            proc.close()
        if shared is not None:
            shared.release()


def _watch(job: Job, shared: _Shared, procs: list, timeout: float, on_result) -> list[Measurement]:
    r = job.program.num_ranks
    lines = shared.lines
    alive = {proc.sentinel: rank for rank, proc in enumerate(procs)}
    reported = 0
    results: list[Measurement] = []
    last_state = lines[:r, [_ARRIVE, _SIZE, _ITER, _STEP, _BEAT]].copy()
    last_change = time.monotonic()
    while True:
        ready = multiprocessing.connection.wait(list(alive), timeout=0.05)
        for sentinel in ready:
            rank = alive.pop(sentinel)
            proc = procs[rank]
            proc.join()
            if lines[rank, _STATUS] == _DONE and proc.exitcode == 0:
                continue
            where = _describe_position(job, lines[rank])
            shared.abort[0] = 1
            if lines[rank, _STATUS] == _FAILED:
                raise ExecutionError(f"rank {rank} failed {where}: {shared.error_text(rank)}")
            code = proc.exitcode
            how = f"was killed by {signal_name(-code)}" if code is not None and code < 0 else f"exited with code {code}"
            raise ExecutionError(f"rank {rank} {how} {where}")
        while reported < len(job.layouts) and not job.user_inputs and not np.isnan(shared.times[reported]).any():
            m = Measurement(job.layouts[reported], float(shared.times[reported].max()), int(shared.wrong[reported].sum()))
            results.append(m)
            if on_result is not None:
                on_result(reported, m)
            reported += 1
        if not alive:
            return results
        state = lines[:r, [_ARRIVE, _SIZE, _ITER, _STEP, _BEAT]]
        now = time.monotonic()
        if not np.array_equal(state, last_state):
            last_state, last_change = state.copy(), now
        elif now - last_change > timeout:
            shared.abort[0] = 1
            arrive = lines[:r, _ARRIVE]
            laggards = [x for x in range(r) if arrive[x] == arrive.min() and lines[x, _STATUS] == _RUNNING]
            x = laggards[0] if laggards else 0
            if len(laggards) <= 1:
                who, them = f"rank {x}", "it"
            else:
                who, them = f"ranks {', '.join(map(str, laggards))}", "them"
            where = _describe_position(job, lines[x])
            raise ExecutionError(f"{who} made no progress for {timeout:g} s {where}; the other ranks were waiting for {them}")


# ============================================================================== public API
def run_sizes(
    program: Program,
    layouts: Sequence[Layout],
    op: data.ReduceOp | None,
    *,
    warmup: int = 5,
    iters: int = 20,
    seed: int = 0,
    timeout: float = 60.0,
    on_result: Callable[[int, Measurement], None] | None = None,
) -> list[Measurement]:
    """Run a verified schedule's `Program` at each layout with generated inputs; check every
    result against the numpy reference; time ``iters`` calls after ``warmup``."""
    if iters < 1 or warmup < 0:
        raise ValueError("need iters >= 1 and warmup >= 0")
    job = Job(program, tuple(layouts), op, warmup, iters, seed)
    return execute(job, timeout=timeout, on_result=on_result)


def call(
    program: Program,
    layout: Layout,
    op: data.ReduceOp | None,
    inputs: Sequence[np.ndarray | None],
    *,
    timeout: float = 60.0,
) -> list[np.ndarray]:
    """One call with the caller's inputs (one send buffer per rank, None where it is not read);
    returns every rank's receive buffer (a copy)."""
    job = Job(program, (layout,), op, 0, 1, 0, user_inputs=True)
    outputs: list[np.ndarray] = []

    def fill(region) -> None:
        for rank, values in enumerate(inputs):
            if values is not None and layout.sends_data(rank):
                region(rank, SEND, layout.send_count)[:] = values

    def collect(region) -> None:
        outputs.extend(region(rank, RECV, layout.recv_count).copy() for rank in range(program.num_ranks))

    execute(job, timeout=timeout, fill=fill, collect=collect)
    return outputs


def memory_needed(program: Program, jobs: Sequence[Sequence[Layout]]) -> MemoryNeed:
    """The memory runs of these jobs (one after another; each a list of layouts of one data type)
    take at their peak: the job's shared segment (every rank's buffers, sized for its largest
    layout), plus each rank's working memory for its inputs and its check."""
    shared = 0
    for layouts in jobs:
        if layouts:
            arena = _Arena(Job(program, tuple(layouts), None))
            shared = max(shared, arena.elements * layouts[0].itemsize)
    return MemoryNeed(total=shared + program.num_ranks * data.WORKING_BYTES, shared=shared)


def check_available() -> None:
    """Nothing to check: the backend needs only this package (and fork, as every POSIX system)."""


def run(
    settings: RunSettings,
    *,
    on_start: Callable[[str, str | None], None] | None = None,
    on_result: Callable[[int, Row], None] | None = None,
) -> list[Row]:
    """The backend contract (docs/executors.md, "Backends"): run ``settings`` (a verified
    schedule) on one process per rank, one job per data type and operator; returns one `Row` per
    case, handing each to ``on_result(index, row)`` as it finishes (``on_start(description,
    None)`` first). Refuses a run whose buffers do not fit in memory (`InputError`, before
    anything starts). Raises `ExecutionError` (rank and step) or `KeyboardInterrupt`, with every
    process stopped and every segment removed."""
    program = Program(settings.schedule)
    groups: dict[tuple, list[int]] = {}
    for index, case in enumerate(settings.cases):
        groups.setdefault((case.layout.dtype.str, case.op.name if case.op else None), []).append(index)
    check_memory(settings, memory_needed(program, [[settings.cases[i].layout for i in indices] for indices in groups.values()]))
    if on_start is not None:
        on_start(f"mp: {program.num_ranks} processes on this machine, shared memory", None)
    rows: dict[int, Row] = {}
    for indices in groups.values():

        def show(i: int, m: Measurement, indices=indices) -> None:
            rows[indices[i]] = Row(m)
            if on_result is not None:
                on_result(indices[i], rows[indices[i]])

        layouts = [settings.cases[i].layout for i in indices]
        run_sizes(
            program,
            layouts,
            settings.cases[indices[0]].op,
            warmup=settings.warmup,
            iters=settings.iters,
            seed=settings.seed,
            timeout=settings.timeout,
            on_result=show,
        )
    return [rows[i] for i in range(len(settings.cases))]


__all__ = ["NAME", "NONE", "SHM_PREFIX", "Job", "call", "check_available", "execute", "memory_needed", "run", "run_sizes"]
