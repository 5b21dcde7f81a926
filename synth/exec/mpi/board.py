"""The board: a small shared file through which the ranks of a ``synth run --backend mpi`` job
tell the launcher where they are and what they measured.

The launcher creates it before it starts ``mpiexec`` and passes its path to every rank
(``--progress-file``); each rank maps it and writes only its own cells, except that rank 0 also
posts the table's rows and the job's description. The launcher polls it: a row of results
becomes a line of the table, and when the job fails, the ranks' positions say which rank stopped
where.

Layout (little-endian int64 and float64, all at 8-byte offsets)::

    header       8 × int64    magic, ranks, cases, description length, 0 …
    rows         R × 8 int64  per rank: size index, call, phase, heartbeat, pid, 0 …
    results      C × 4 f64    per case: our time (µs), our wrong, native time, native wrong
    description  256 bytes    how the ranks run ("mpi: 8 processes, MPICH Version: 5.0.2")

A row's first four cells are the rank's `synth.exec.mpi.executor.Progress` (see
`synth.exec.faults.phase_of` for the phase). A result is complete once its time is not NaN
(rank 0 writes the wrong counts first, the time last).
"""

from __future__ import annotations

import os

import numpy as np

MAGIC = 0x73796E7468627264  # "synthbrd"
HEADER = 8
ROW = 8  # int64 cells per rank (one 64-byte line, written only by its rank)
RESULT = 4  # float64 cells per case
DESCRIPTION = 256  # bytes
_SIZE, _CALL, _PHASE, _BEAT, _PID = range(5)
_D_LEN = 3  # header cell: description length


def _size(ranks: int, cases: int) -> int:
    return 8 * (HEADER + ranks * ROW + cases * RESULT) + DESCRIPTION


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
            head[:] = [MAGIC, create[0], create[1], 0, 0, 0, 0, 0]
        elif head[0] != MAGIC:
            raise ValueError(f"{path} is not a synth run board")
        self.ranks, self.cases = int(head[1]), int(head[2])
        self.header = head
        offset = 8 * HEADER
        self.rows = np.memmap(path, dtype=np.int64, mode="r+", offset=offset, shape=(self.ranks, ROW))
        offset += 8 * self.ranks * ROW
        self.results = np.memmap(path, dtype=np.float64, mode="r+", offset=offset, shape=(max(1, self.cases), RESULT))
        offset += 8 * max(1, self.cases) * RESULT if self.cases else 0
        self.description_bytes = np.memmap(path, dtype=np.uint8, mode="r+", offset=offset, shape=(DESCRIPTION,))
        if create is not None:
            self.rows[:] = 0
            self.rows[:, :_BEAT] = -1
            self.results[:] = np.nan

    def row(self, rank: int) -> np.ndarray:
        """Rank ``rank``'s cells (a view: writes go to the file)."""
        return self.rows[rank]

    # ------------------------------------------------------------------ rank 0 posts
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
        return np.array(self.rows[:, :4])

    def pids(self) -> list[int]:
        return [int(p) for p in self.rows[:, _PID]]
