"""Run failures and the test-only fault-injection hook.

`ExecutionError` is a run that could not finish: a rank crashed, was killed, hung past the timeout,
or the run was interrupted. Its message names the rank and the step; the CLI prints it as one line
and exits with code 3 (with one line before it for each other rank that reported a failure).

Fault injection (for tests of exactly that): the environment variable ``SYNTH_EXEC_FAULT`` set to
``RANKS:STEP:KIND`` makes the ranks RANKS (one rank, a comma-separated list, or ``all``) misbehave
the first time they reach step STEP, where KIND is ``crash`` (raise an exception), ``hang`` (stop
making progress) or ``kill`` (SIGKILL itself); ``corrupt`` instead spoils the first element of the
rank's receive buffer after each call (STEP is ignored), to test that wrong results are caught.
Both backends honour it; it costs one comparison per step when unset.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from synth.errors import SynthError

if TYPE_CHECKING:
    from synth.exec.mpi.board import Board

FAULT_ENV = "SYNTH_EXEC_FAULT"
FAULT_KINDS = ("crash", "hang", "kill", "corrupt")


class ExecutionError(SynthError):
    """A run that could not finish (a rank failed, was killed or hung; or it was interrupted).
    ``others``: the reports of other ranks that failed too, one line each (the message is the
    first failure's)."""

    exit_code = 3

    def __init__(self, message: str, others: tuple[str, ...] = ()):
        super().__init__(message)
        self.others = tuple(others)


class InjectedFault(RuntimeError):
    """The exception a ``crash`` fault raises."""


@dataclass(frozen=True)
class Fault:
    rank: int
    step: int
    kind: str

    def trigger(self) -> None:
        """Misbehave as asked (called by the rank, at the step)."""
        if self.kind == "crash":
            raise InjectedFault(f"injected crash at step {self.step}")
        if self.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "corrupt":
            return  # the backend spoils its result after the call
        while True:  # hang
            time.sleep(3600)


def fault_from_env(rank: int) -> Fault | None:
    """The fault ``SYNTH_EXEC_FAULT`` asks of ``rank``, or None. A malformed value is an error
    (a test that means to inject a fault must not silently run clean)."""
    text = os.environ.get(FAULT_ENV, "").strip()
    if not text:
        return None
    parts = text.split(":")
    ranks = parts[0].split(",") if parts[0] != "all" else []
    if len(parts) != 3 or parts[2] not in FAULT_KINDS or not all(x.isdigit() for x in ranks) or not parts[1].isdigit():
        raise ValueError(f"{FAULT_ENV}={text!r}: expected RANKS:STEP:KIND with KIND one of {', '.join(FAULT_KINDS)}")
    if parts[0] != "all" and rank not in {int(x) for x in ranks}:
        return None
    return Fault(rank, int(parts[1]), parts[2])


class sigterm_as_interrupt:
    """Within it, SIGTERM ends a run like Ctrl-C: the backend stops its processes and removes its
    shared memory on the way out (a `KeyboardInterrupt`). Only in the main thread."""

    def __enter__(self):
        self._old = None
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGTERM, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        raise KeyboardInterrupt

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
        return False


def describe_exception(exc: BaseException) -> str:
    """``InjectedFault: injected crash at step 3 (faults.py:46)``: the exception and where it was
    raised, for a rank's one-line report."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" ({os.path.basename(frame.filename)}:{frame.lineno})" if frame else ""
    return f"{type(exc).__name__}: {exc}{where}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# The position a rank reports while it runs (one row of int64 cells per rank: size index, call,
# phase, heartbeat, pid), shared by the MPI ranks, their watchdogs and the launcher.
def phase_of(step: int, blocked: bool = False) -> int:
    """The phase cell's value for a rank in ``step`` (-1: before step 0), waiting for other ranks
    or not: -1 before step 0, 0 before step 0 waiting for the other ranks (a barrier of the
    benchmark), ``2s+1`` in step s waiting for its messages, ``2s+2`` in step s otherwise."""
    if step < 0:
        return 0 if blocked else -1
    return 2 * step + (1 if blocked else 2)


def step_of(phase: int) -> tuple[int, bool]:
    """(step, blocked) of a phase cell's value; step -1 before step 0."""
    if phase < 1:
        return -1, phase == 0
    return (phase - 1) // 2, phase % 2 == 1


def describe_position(cells, labels: list[str] | None = None) -> str:
    """Where a progress row (size, call, phase) says its rank is, in words."""
    si, call, phase = (int(x) for x in cells[:3])
    step = step_of(phase)[0]
    size = labels[si] if labels and 0 <= si < len(labels) else "set-up"
    if call < 0:
        return f"while preparing ({size})"
    what = "checked call" if call == 0 else f"call {call}"
    return f"in step {step} ({size}, {what})" if step >= 0 else f"before step 0 ({size}, {what})"


class Progress:
    """Where a rank is (size index, call, phase, heartbeat), for fault messages and watchdogs.

    The phase cell says both the step and whether the rank may be blocked in it, so that the step
    loop stores one integer per step (see `phase_of` and `step_of`; at 8 bytes a store per step
    is measurable): -1 before step 0, ``2s+1`` in step s (waiting for its messages, then applying
    them), ``2s+2`` in step s outside communication (a fault injected there); 0 before step 0
    waiting for the other ranks (the benchmark's barriers). The heartbeat counts calls (and
    blocks of the check), so that a run of a one-step schedule shows progress too.

    With a ``board`` (``synth run --backend mpi`` or ``torch``) the figures live in the rank's row of
    the board (`synth.exec.mpi.board`), which the launcher reads to tell which rank stopped where.
    Both the MPI and the torch.distributed executors keep one."""

    def __init__(self, rank: int, board: Board | None = None):
        self.rank = rank
        if board is not None:
            row = board.row(rank)
            row[4] = os.getpid()
            self.cells = row[:4]
        else:
            self.cells = np.zeros(4, dtype=np.int64)
        self.cells[:] = [-1, -1, -1, 0]
        #: the same cells as a memoryview: a store from Python costs half of numpy's
        self.hot = memoryview(self.cells)
        #: step -> the ranks a step waits for, set by the plan that runs (for the watchdog's message)
        self.peers: dict[int, tuple[int, ...]] = {}

    @property
    def waiting_for(self) -> tuple[int, ...]:
        """The ranks this rank waits for now (empty when it is not blocked in a step)."""
        step, blocked = step_of(int(self.cells[2]))
        return self.peers.get(step, ()) if blocked else ()

    @property
    def blocked(self) -> bool:
        """Whether the rank is waiting for other ranks (in a step's messages or a barrier)."""
        return step_of(int(self.cells[2]))[1]

    def set(self, size: int, call: int, step: int, *, blocked: bool = False) -> None:
        self.cells[0], self.cells[1], self.cells[2] = size, call, phase_of(step, blocked)

    def beat(self) -> None:
        self.cells[3] += 1

    def describe(self, labels: list[str] | None = None) -> str:
        """``in step 3 (size 1024 B, float32 sum, checked call)``; ``labels`` name the cases."""
        return describe_position(self.cells, labels)
