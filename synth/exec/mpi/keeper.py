"""A rank's keeper: the process MPI's launcher started for the rank, which forks the rank itself
and stays behind to record, on the launcher's board, how the rank ended.

Why: when one rank of an MPI job dies, MPICH's process manager kills all the others at once, so
the launcher of ``synth run --backend mpi``, watching from outside, often finds several ranks gone
by the time it looks, and cannot tell which one went first (they all die of SIGKILL, and the kernel
keeps no time of death). The keeper is the rank's parent: ``waitpid`` gives it the exact status,
and it records that before it ends itself the same way, which is what makes MPI's process manager
kill the other ranks, so the first record on the board is the rank that went first.

`keep` runs first thing in a rank started with ``--progress-file`` (by the launcher), before MPI
starts (MPI must not be started in a process that then forks). The rank (the child) dies with
its keeper (``PR_SET_PDEATHSIG``); the keeper forwards the signals MPI's process manager sends it
(Ctrl-C, SIGTERM) to the rank. Linux only; elsewhere the rank runs without a keeper.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import struct
import sys
import time

from synth.exec.faults import signal_name
from synth.exec.mpi.board import ENDED, ENDED_AT, PID, row_offset

_PR_SET_PDEATHSIG = 1
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def board_path(argv: list[str]) -> str | None:
    """The value of ``--progress-file`` in a rank's command line, if any."""
    for i, arg in enumerate(argv):
        if arg == "--progress-file" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--progress-file="):
            return arg.split("=", 1)[1]
    return None


def _die_with_parent() -> bool:
    """Ask the kernel to SIGKILL this process when its parent ends; False if it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def keep(path: str) -> None:
    """Fork this rank: return in the child (the rank goes on), and in the parent wait for it,
    record how it ended in its row of the board at ``path`` and end the same way (never
    returns). Does nothing where it cannot keep the rank (not Linux, no rank number)."""
    rank_text = os.environ.get("PMI_RANK", "")  # set by MPICH's process manager
    if not rank_text.isdigit() or not sys.platform.startswith("linux"):
        return
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return
    base = row_offset(int(rank_text))
    keeper = os.getpid()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)  # until the keeper forwards them
    child = os.fork()
    if child == 0:
        os.close(fd)
        if not _die_with_parent() or os.getppid() != keeper:
            os._exit(1)  # never run a rank that would outlive its keeper
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    _keep(child, fd, base, mask)


def _keep(child: int, fd: int, base: int, mask) -> None:
    # The keeper keeps its copy of the rank's connection to MPI's process manager (PMI_FD) open,
    # never using it: the process manager takes the connection's end for the rank's death, and
    # must learn of it only from the keeper's end, after the record.
    os.pwrite(fd, struct.pack("=q", child), base + 8 * PID)

    def forward(signum, frame) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            status = 0
            break
    if status:
        os.pwrite(fd, struct.pack("=q", time.monotonic_ns()), base + 8 * ENDED_AT)
        os.pwrite(fd, struct.pack("=q", 1 + status), base + 8 * ENDED)  # last: the record is complete
    os.close(fd)
    _end_like(status)


def _end_like(status: int) -> None:
    """End this process as the rank ended: by the same signal, or with the same exit code (so that
    MPI's process manager sees what happened to the rank)."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL keeps its default anyway
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def wait_status_words(ended: int) -> str:
    """How a rank ended, from its keeper's record (1 + the wait status): "was killed by SIGKILL",
    "exited with code 3"."""
    status = ended - 1
    if os.WIFSIGNALED(status):
        return f"was killed by {signal_name(os.WTERMSIG(status))}"
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    return "died"
