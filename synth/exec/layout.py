"""Where each chunk of a collective lives in real buffers (docs/executors.md, "Buffer layout").

Every rank has a send buffer and a receive buffer, as in NCCL and MPI. The buffers are split into
*parts* of ``m`` elements (``m`` is the ``count`` nccl-tests prints): one part for allreduce,
reduce and broadcast; one part per rank for allgather, gather, reduce-scatter and scatter; one part
per peer for alltoall. Each part is split into the schedule's ``k`` chunks per piece as evenly as
whole elements allow: sub-chunk ``i`` covers elements ``⌊i·m/k⌋ … ⌊(i+1)·m/k⌋ − 1``, so when ``m``
is not a multiple of ``k`` some chunks are one element longer, and chunks may be empty when
``m < k`` (a transfer of an empty chunk moves nothing).

A size in bytes (nccl-tests' ``size``) becomes ``m`` by rounding down to whole elements per part:
``m = ⌊size / itemsize / parts⌋`` where ``parts`` is how many parts the sized buffer has; the
effective size (``Layout.size``) is what the run reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from synth.collective import Collective, Kind

_PIECED = (Kind.ALLGATHER, Kind.GATHER, Kind.REDUCE_SCATTER, Kind.SCATTER)
_WHOLE = (Kind.ALLREDUCE, Kind.REDUCE, Kind.BROADCAST)


def parts_in_size(kind: Kind, num_ranks: int) -> int:
    """How many parts the buffer that nccl-tests' ``size`` measures has (docs/formats.md, 'Message
    size': the output of allgather/gather, the input of reduce-scatter/scatter, the per-rank send
    buffer of alltoall, the one buffer of allreduce/broadcast/reduce)."""
    return 1 if kind in _WHOLE else num_ranks


def count_for_size(collective: Collective, size: int, itemsize: int) -> int:
    """``m``, the elements per part, for an nccl-tests size in bytes (rounded down)."""
    return (size // itemsize) // parts_in_size(collective.kind, collective.num_ranks)


@dataclass(frozen=True)
class Layout:
    """Chunk positions in every rank's send and receive buffers for one call.

    ``count`` is ``m``, the elements of one part. Positions are element offsets; ``-1`` means the
    rank has no such position (it does not start with the chunk / is not required to end with it).
    """

    collective: Collective
    dtype: np.dtype
    count: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if self.count < 0:
            raise ValueError(f"count must not be negative, got {self.count}")

    @classmethod
    def for_size(cls, collective: Collective, size: int, dtype) -> Layout:
        dtype = np.dtype(dtype)
        return cls(collective, dtype, count_for_size(collective, size, dtype.itemsize))

    # ------------------------------------------------------------------------------ sizes
    @property
    def kind(self) -> Kind:
        return self.collective.kind

    @property
    def num_ranks(self) -> int:
        return self.collective.num_ranks

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def size(self) -> int:
        """Effective nccl-tests size in bytes (after rounding to whole elements per part)."""
        return self.count * parts_in_size(self.kind, self.num_ranks) * self.itemsize

    @property
    def send_count(self) -> int:
        """Elements in each rank's send buffer."""
        if self.kind in (Kind.ALLGATHER, Kind.GATHER) or self.kind in _WHOLE:
            return self.count
        return self.count * self.num_ranks  # reduce-scatter, scatter, alltoall

    @property
    def recv_count(self) -> int:
        """Elements in each rank's receive buffer."""
        if self.kind in (Kind.REDUCE_SCATTER, Kind.SCATTER) or self.kind in _WHOLE:
            return self.count
        return self.count * self.num_ranks  # allgather, gather, alltoall

    def sends_data(self, rank: int) -> bool:
        """Whether ``rank``'s send buffer is read (not at non-roots of broadcast and scatter)."""
        return not (self.kind in (Kind.BROADCAST, Kind.SCATTER) and rank != self.collective.root)

    def has_output(self, rank: int) -> bool:
        """Whether ``rank``'s receive buffer gets a result (not at non-roots of reduce and gather)."""
        return not (self.kind in (Kind.REDUCE, Kind.GATHER) and rank != self.collective.root)

    # ------------------------------------------------------------------------------ chunks
    @cached_property
    def _sub(self) -> tuple[np.ndarray, np.ndarray]:
        k, m = self.collective.chunks_per_piece, self.count
        bounds = (np.arange(k + 1, dtype=np.int64) * m) // k
        return bounds[:-1], np.diff(bounds)

    @cached_property
    def chunk_length(self) -> np.ndarray:
        """Elements in each of the G chunks."""
        k = self.collective.chunks_per_piece
        lengths = np.tile(self._sub[1], self.collective.num_chunks // k)
        lengths.setflags(write=False)
        return lengths

    @cached_property
    def _positions(self) -> tuple[np.ndarray, np.ndarray]:
        c = self.collective
        r, k, m = c.num_ranks, c.chunks_per_piece, self.count
        chunks = np.arange(c.num_chunks, dtype=np.int64)
        part, sub = divmod(chunks, k)
        offset = self._sub[0][sub]
        send = np.full((r, c.num_chunks), -1, dtype=np.int64)
        recv = np.full((r, c.num_chunks), -1, dtype=np.int64)
        kind = self.kind
        if kind in _WHOLE:
            holders = range(r) if c.is_reduction else [c.root]
            for rank in holders:
                send[rank] = offset
            recv[:] = offset
            if kind is Kind.REDUCE:
                recv[np.arange(r) != c.root] = -1
        elif kind in (Kind.ALLGATHER, Kind.GATHER):
            send[part, chunks] = offset
            recv[:] = part * m + offset
            if kind is Kind.GATHER:
                recv[np.arange(r) != c.root] = -1
        elif kind is Kind.REDUCE_SCATTER:
            send[:] = part * m + offset
            recv[part, chunks] = offset
        elif kind is Kind.SCATTER:
            send[c.root] = part * m + offset
            recv[part, chunks] = offset
        else:  # alltoall: chunk (s·R+d)·k+i goes from part d of s's send buffer to part s of d's
            src, dst = divmod(part, r)
            send[src, chunks] = dst * m + offset
            recv[dst, chunks] = src * m + offset
        send.setflags(write=False)
        recv.setflags(write=False)
        return send, recv

    @property
    def send_position(self) -> np.ndarray:
        """[R, G] element offset of each chunk in each rank's send buffer, -1 where it has none
        (the rank does not start with that chunk)."""
        return self._positions[0]

    @property
    def recv_position(self) -> np.ndarray:
        """[R, G] element offset of each chunk in each rank's receive buffer, -1 where the rank is
        not required to end with it."""
        return self._positions[1]

    def describe(self) -> str:
        return f"{self.collective.describe()}, count {self.count} {self.dtype.name}, size {self.size} B"
