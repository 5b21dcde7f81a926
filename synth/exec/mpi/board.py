"""The board: a small shared file through which the ranks of a ``synth run --backend mpi`` job
tell the launcher where they are, what they measured, and how they failed.

The launcher creates it before it starts ``mpiexec`` and passes its path to every rank
(``--progress-file``); each process maps it and writes only its own cells: a rank its row's
position and its error, the rank's keeper (`synth.exec.mpi.keeper`) the rank's pid and how it
ended, rank 0 also the table's rows and the job's description. The launcher polls it: a row of
results becomes a line of the table; when the job fails, the errors, the keepers' records and the
ranks' positions say which rank stopped where.

Layout (native int64 and float64, all at 8-byte offsets)::

    header       8 × int64    magic, ranks, cases, description length, launcher pid, 0 …
    rows         R × 8 int64  per rank: size index, call, phase, heartbeat, pid, how it ended
                              (0 running; 1 + the wait status), when (monotonic ns), when it
                              posted its error (monotonic ns; 0 none)
    errors       R × 512 B    per rank: its error, one line of UTF-8
    results      C × 4 f64    per case: our time (µs), our wrong, native time, native wrong
    description  256 bytes    how the ranks run ("mpi: 8 processes, MPICH Version: 5.0.2")

A row's first four cells are the rank's `synth.exec.mpi.executor.Progress` (see
`synth.exec.faults.phase_of` for the phase). A result is complete once its time is not NaN
(rank 0 writes the wrong counts first, the time last); an error once its time is not 0.
"""

from __future__ import annotations

import os
import time

import numpy as np

MAGIC = 0x73796E7468627264  # "synthbrd"
HEADER = 8
ROW = 8  # int64 cells per rank (one 64-byte line)
ERROR = 512  # bytes per rank
RESULT = 4  # float64 cells per case
DESCRIPTION = 256  # bytes
SIZE, CALL, PHASE, BEAT, PID, ENDED, ENDED_AT, ERROR_AT = range(ROW)
_D_LEN, _LAUNCHER = 3, 4  # header cells


def row_offset(rank: int) -> int:
    """Where rank ``rank``'s row starts in the file (bytes)."""
    return 8 * (HEADER + rank * ROW)


def _size(ranks: int, cases: int) -> int:
    return 8 * (HEADER + ranks * ROW) + ranks * ERROR + 8 * max(1, cases) * RESULT + DESCRIPTION


class Board:
    """The mapped board file (see the module docstring for its layout)."""

    def __init__(self, path: str, *, create: tuple[int, int] | None = None):
        """Map the board at ``path``; with ``create=(ranks, cases)`` make it first (the launcher)."""
        self.path = path
        if create is not None:
            ranks, cases = create
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.ftruncate(fd, _size(ranks, cases))
            finally:
                os.close(fd)
        head = np.memmap(path, dtype=np.int64, mode="r+", shape=(HEADER,))
        if create is not None:
            head[:] = [MAGIC, create[0], create[1], 0, os.getpid(), 0, 0, 0]
        elif head[0] != MAGIC:
            raise ValueError(f"{path} is not a synth run board")
        self.ranks, self.cases = int(head[1]), int(head[2])
        self.header = head
        offset = 8 * HEADER
        self.rows = np.memmap(path, dtype=np.int64, mode="r+", offset=offset, shape=(self.ranks, ROW))
        offset += 8 * self.ranks * ROW
        self.errors = np.memmap(path, dtype=np.uint8, mode="r+", offset=offset, shape=(self.ranks, ERROR))
        offset += self.ranks * ERROR
        self.results = np.memmap(path, dtype=np.float64, mode="r+", offset=offset, shape=(max(1, self.cases), RESULT))
        offset += 8 * max(1, self.cases) * RESULT
        self.description_bytes = np.memmap(path, dtype=np.uint8, mode="r+", offset=offset, shape=(DESCRIPTION,))
        if create is not None:
            self.rows[:] = 0
            self.rows[:, :BEAT] = -1
            self.results[:] = np.nan

    @property
    def launcher_pid(self) -> int:
        return int(self.header[_LAUNCHER])

    def row(self, rank: int) -> np.ndarray:
        """Rank ``rank``'s cells (a view: writes go to the file)."""
        return self.rows[rank]

    # ------------------------------------------------------------------ the ranks post
    def post_error(self, rank: int, line: str) -> None:
        """Rank ``rank``'s failure, one line (cut to fit)."""
        raw = line.replace("\n", " ").encode()[: ERROR - 1]
        self.errors[rank, : len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        self.errors[rank, len(raw)] = 0
        self.rows[rank, ERROR_AT] = time.monotonic_ns()  # last: the error is complete

    def post_description(self, text: str) -> None:
        raw = text.encode()[:DESCRIPTION]
        self.description_bytes[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        self.header[_D_LEN] = len(raw)

    def post_result(self, index: int, ours: tuple[float, int], native: tuple[float, int] | None) -> None:
        cells = self.results[index]
        cells[1] = ours[1]
        if native is not None:
            cells[3], cells[2] = native[1], native[0]
        cells[0] = ours[0]  # last: the result is complete once its time is there

    # ------------------------------------------------------------------ the launcher reads
    def description(self) -> str | None:
        n = int(self.header[_D_LEN])
        return bytes(self.description_bytes[:n]).decode("utf-8", "replace") if n else None

    def result(self, index: int) -> tuple[tuple[float, int], tuple[float, int] | None] | None:
        """(time, wrong) of ours and of the native collective (None if it did not run), or None
        while the case is not finished."""
        cells = np.array(self.results[index])
        if np.isnan(cells[0]):
            return None
        native = None if np.isnan(cells[2]) else (float(cells[2]), int(cells[3]))
        return (float(cells[0]), int(cells[1])), native

    def positions(self) -> np.ndarray:
        """A copy of every rank's (size, call, phase, heartbeat)."""
        return np.array(self.rows[:, :PID])

    def snapshot(self) -> np.ndarray:
        """A copy of every rank's whole row."""
        return np.array(self.rows)

    def error(self, rank: int) -> str | None:
        """Rank ``rank``'s posted error, or None."""
        if not self.rows[rank, ERROR_AT]:
            return None
        raw = bytes(self.errors[rank])
        return raw.split(b"\0", 1)[0].decode("utf-8", "replace")
