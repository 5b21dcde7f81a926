"""The eight collectives as pre/postconditions over chunks (docs/formats.md, 'Chunks of each
collective').

A collective over R ranks with k chunks per piece has G = `num_chunks` chunks. Non-reduction
collectives move immutable chunks: the state is "which rank holds which chunk". Reduction
collectives (reduce, reduce-scatter, allreduce) start with every rank holding its own contribution
to every chunk; the state is "which contributions does rank r's value of chunk c contain".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np


class Kind(StrEnum):
    """Collective primitive names as they appear in schedule files."""

    ALLGATHER = "allgather"
    GATHER = "gather"
    BROADCAST = "broadcast"
    SCATTER = "scatter"
    ALLTOALL = "alltoall"
    REDUCE = "reduce"
    REDUCE_SCATTER = "reduce-scatter"
    ALLREDUCE = "allreduce"


ALL_KINDS: tuple[Kind, ...] = tuple(Kind)
ROOTED: frozenset[Kind] = frozenset({Kind.GATHER, Kind.BROADCAST, Kind.SCATTER, Kind.REDUCE})
REDUCTIONS: frozenset[Kind] = frozenset({Kind.REDUCE, Kind.REDUCE_SCATTER, Kind.ALLREDUCE})

#: For each reduction, the non-reduction collective whose schedules, reversed in time and run on the
#: reversed topology, are schedules for it (SCCL's duality): every copy becomes a reduce.
DUAL: dict[Kind, Kind] = {
    Kind.REDUCE: Kind.BROADCAST,
    Kind.REDUCE_SCATTER: Kind.ALLGATHER,
}

#: nccl-tests bus-bandwidth factor as a function of R.
_BUSBW = {
    Kind.ALLREDUCE: lambda r: 2 * (r - 1) / r,
    Kind.ALLGATHER: lambda r: (r - 1) / r,
    Kind.REDUCE_SCATTER: lambda r: (r - 1) / r,
    Kind.ALLTOALL: lambda r: (r - 1) / r,
    Kind.GATHER: lambda r: (r - 1) / r,
    Kind.SCATTER: lambda r: (r - 1) / r,
    Kind.BROADCAST: lambda r: 1.0,
    Kind.REDUCE: lambda r: 1.0,
}


#: Every spelling users bring, with the separators (``-``, ``_``, space) taken out: ours, PyTorch's
#: (``all_reduce``, ``reduce_scatter``, ``all_gather``, ``all_to_all``), NCCL's and MSCCL's
#: (``allreduce``, ``reducescatter``, ``allgather``, ``alltoall``).
_SPELLINGS: dict[str, Kind] = {k.value.replace("-", ""): k for k in Kind}


def parse_kind(name: str) -> Kind:
    """Kind by name, in any case and with any separators: ``allreduce``, ``all_reduce``,
    ``all-reduce``, ``reduce_scatter``, ``ReduceScatter``, ``all_to_all``... Raises ValueError."""
    key = "".join(ch for ch in str(name).lower() if ch not in "-_ ")
    kind = _SPELLINGS.get(key)
    if kind is None:
        raise ValueError(f"{name!r} is not a collective (expected one of {', '.join(k.value for k in Kind)})")
    return kind


def chunks_per_unit(kind: Kind, num_ranks: int) -> int:
    """G / k: how many chunks one "chunk per piece" makes for this collective."""
    if kind in (Kind.ALLGATHER, Kind.GATHER, Kind.SCATTER, Kind.REDUCE_SCATTER):
        return num_ranks
    if kind is Kind.ALLTOALL:
        return num_ranks * num_ranks
    return 1


@dataclass(frozen=True)
class Collective:
    """A collective call: kind, R ranks, k chunks per piece, and the root for rooted kinds."""

    kind: Kind
    num_ranks: int
    chunks_per_piece: int = 1
    root: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind(self.kind))
        if self.num_ranks < 1:
            raise ValueError(f"a collective needs at least one rank, got {self.num_ranks}")
        if self.chunks_per_piece < 1:
            raise ValueError(f"chunks per piece must be at least 1, got {self.chunks_per_piece}")
        if self.kind in ROOTED:
            root = 0 if self.root is None else self.root
            if not 0 <= root < self.num_ranks:
                raise ValueError(f"root {root} is not a rank of {self.num_ranks}")
            object.__setattr__(self, "root", root)
        elif self.root is not None:
            raise ValueError(f"{self.kind.value} has no root")

    # --------------------------------------------------------------------------------- sizes
    @property
    def num_chunks(self) -> int:
        """G, the number of chunks the collective's data is split into."""
        return self.chunks_per_piece * chunks_per_unit(self.kind, self.num_ranks)

    @property
    def is_reduction(self) -> bool:
        return self.kind in REDUCTIONS

    @property
    def is_rooted(self) -> bool:
        return self.kind in ROOTED

    def chunk_bytes(self, size: float) -> float:
        """Bytes in one chunk for an nccl-tests ``size`` (docs/formats.md, 'Message size')."""
        if self.kind is Kind.ALLTOALL:
            return size * self.num_ranks / self.num_chunks
        return size / self.num_chunks

    def min_transfers(self) -> int:
        """A lower bound on the transfers of any valid schedule: every (rank, chunk) that must end
        holding a chunk it did not start with needs one transfer into it; for reductions, every
        rank's contribution to a chunk must leave it, so each of the R-1 ranks that do not end with
        the result (the other R-1 sources, for allreduce) sends the chunk at least once."""
        r, k, g = self.num_ranks, self.chunks_per_piece, self.num_chunks
        if r == 1:
            return 0
        if self.kind in (Kind.ALLGATHER, Kind.BROADCAST, Kind.REDUCE_SCATTER, Kind.ALLREDUCE):
            return g * (r - 1)
        if self.kind in (Kind.GATHER, Kind.SCATTER, Kind.REDUCE):
            return k * (r - 1)
        return r * (r - 1) * k  # alltoall: the off-diagonal pairs

    def busbw_factor(self) -> float:
        """nccl-tests factor turning algbw into busbw."""
        return _BUSBW[self.kind](self.num_ranks)

    def describe(self) -> str:
        root = f" root {self.root}" if self.is_rooted else ""
        return f"{self.kind.value}{root} on {self.num_ranks} ranks, {self.num_chunks} chunks"

    # --------------------------------------------------------------------------------- conditions
    def piece_owner(self, chunk: int) -> int:
        """For allgather/gather/scatter/reduce-scatter: the rank whose piece the chunk belongs to."""
        return chunk // self.chunks_per_piece

    def alltoall_endpoints(self, chunk: int) -> tuple[int, int]:
        """For alltoall: (source rank, destination rank) of a chunk."""
        pair = chunk // self.chunks_per_piece
        return divmod(pair, self.num_ranks)

    def _chunk_range(self, chunks: np.ndarray | None) -> np.ndarray:
        return np.arange(self.num_chunks, dtype=np.int64) if chunks is None else np.asarray(chunks, dtype=np.int64)

    def initial_holders(self, chunks: np.ndarray | None = None) -> np.ndarray:
        """Non-reduction precondition: boolean [R, len(chunks)] (all G chunks by default), True where
        a rank starts with the chunk."""
        r, k = self.num_ranks, self.chunks_per_piece
        chunks = self._chunk_range(chunks)
        cols = np.arange(chunks.size)
        holds = np.zeros((r, chunks.size), dtype=bool)
        if self.kind in (Kind.ALLGATHER, Kind.GATHER):
            holds[chunks // k, cols] = True
        elif self.kind in (Kind.BROADCAST, Kind.SCATTER):
            holds[self.root, :] = True
        elif self.kind is Kind.ALLTOALL:
            holds[(chunks // k) // r, cols] = True
        else:
            raise ValueError(f"{self.kind.value} is a reduction: every rank starts with its own contribution")
        return holds

    def required(self, chunks: np.ndarray | None = None) -> np.ndarray:
        """Postcondition mask: boolean [R, len(chunks)], True where a rank must end holding a chunk
        (for reductions: holding it fully reduced over all R contributions)."""
        r, k = self.num_ranks, self.chunks_per_piece
        chunks = self._chunk_range(chunks)
        cols = np.arange(chunks.size)
        need = np.zeros((r, chunks.size), dtype=bool)
        if self.kind in (Kind.ALLGATHER, Kind.BROADCAST, Kind.ALLREDUCE):
            need[:, :] = True
        elif self.kind in (Kind.GATHER, Kind.REDUCE):
            need[self.root, :] = True
        elif self.kind in (Kind.SCATTER, Kind.REDUCE_SCATTER):
            need[chunks // k, cols] = True
        elif self.kind is Kind.ALLTOALL:
            need[(chunks // k) % r, cols] = True
        return need

    def with_chunks(self, chunks_per_piece: int) -> Collective:
        return Collective(self.kind, self.num_ranks, chunks_per_piece, self.root)


def collective_from_counts(kind: Kind, num_ranks: int, num_chunks: int, root: int | None) -> Collective:
    """Build from the schedule file's ``num_chunks`` (G); raises ValueError if G is not a multiple
    of the collective's unit."""
    unit = chunks_per_unit(kind, num_ranks)
    if num_chunks < unit or num_chunks % unit:
        raise ValueError(f"num_chunks must be a positive multiple of {unit} for {kind.value} on {num_ranks} ranks")
    return Collective(kind, num_ranks, num_chunks // unit, root)
