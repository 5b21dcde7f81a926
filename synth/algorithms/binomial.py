"""Binomial-tree algorithms for the rooted collectives (MPICH's), on ranks relabelled so that the
root is 0: v = (rank − root) mod R, L = ⌈log₂ R⌉ rounds.

broadcast: in round j (mask = 2^(L−1−j)), every v that is a multiple of 2·mask and holds the data
sends all k chunks to v + mask. scatter: the same tree, each sender passing on only the pieces of
the subtree below the receiver. gather: the tree upwards, round j (mask = 2^j), v ≡ mask (mod 2·mask)
sends everything it has gathered to v − mask. reduce: dual of broadcast. allreduce: reduce to rank 0
then broadcast (2L rounds; latency-optimal for small messages). allgather: gather to rank 0 then
broadcast; reduce-scatter: its dual.
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.builders import by_duality, dispatcher, with_reductions
from synth.algorithms.engines.lowering import LogicalStep, logical_step, lower_copies
from synth.collective import Collective, Kind
from synth.method import Method, one_chunk
from synth.routing import Router
from synth.schedule import Schedule
from synth.topology import Topology
from synth.transform import concat

NAME = "binomial"


def _rounds(r: int) -> int:
    return max(0, (r - 1).bit_length())


def _real(v, root: int, r: int):
    return (np.asarray(v, dtype=np.int64) + root) % r


def _broadcast_steps(r: int, root: int, chunks: np.ndarray) -> list[LogicalStep]:
    levels = _rounds(r)
    steps = []
    for j in range(levels):
        mask = 1 << (levels - 1 - j)
        v = np.arange(0, r, 2 * mask)
        v = v[v + mask < r]
        n = chunks.size
        steps.append(
            logical_step(np.repeat(_real(v, root, r), n), np.repeat(_real(v + mask, root, r), n), np.tile(chunks, v.size))
        )
    return steps


def broadcast(topology: Topology, collective: Collective, router: Router) -> Schedule:
    r, root = collective.num_ranks, collective.root
    steps = _broadcast_steps(r, root, np.arange(collective.num_chunks))
    return lower_copies(topology, collective, steps, NAME, {}, router)


def _subtree_pieces(v: int, mask: int, r: int, root: int, k: int) -> np.ndarray:
    members = _real(np.arange(v, min(v + mask, r)), root, r)
    return (members[:, None] * k + np.arange(k)).ravel()


def scatter(topology: Topology, collective: Collective, router: Router) -> Schedule:
    r, root, k = collective.num_ranks, collective.root, collective.chunks_per_piece
    levels = _rounds(r)
    steps = []
    for j in range(levels):
        mask = 1 << (levels - 1 - j)
        src, dst, chunk = [], [], []
        for v in range(0, r, 2 * mask):
            if v + mask < r:
                pieces = _subtree_pieces(v + mask, mask, r, root, k)
                src.append(np.full(pieces.size, (v + root) % r))
                dst.append(np.full(pieces.size, (v + mask + root) % r))
                chunk.append(pieces)
        steps.append(logical_step(np.concatenate(src), np.concatenate(dst), np.concatenate(chunk)))
    return lower_copies(topology, collective, steps, NAME, {}, router)


def gather(topology: Topology, collective: Collective, router: Router) -> Schedule:
    r, root, k = collective.num_ranks, collective.root, collective.chunks_per_piece
    steps = []
    for j in range(_rounds(r)):
        mask = 1 << j
        src, dst, chunk = [], [], []
        for v in range(mask, r, 2 * mask):
            pieces = _subtree_pieces(v, mask, r, root, k)
            src.append(np.full(pieces.size, (v + root) % r))
            dst.append(np.full(pieces.size, (v - mask + root) % r))
            chunk.append(pieces)
        steps.append(logical_step(np.concatenate(src), np.concatenate(dst), np.concatenate(chunk)))
    return lower_copies(topology, collective, steps, NAME, {}, router)


def allgather(topology: Topology, collective: Collective, router: Router) -> Schedule:
    r, k = collective.num_ranks, collective.chunks_per_piece
    steps = []
    for j in range(_rounds(r)):
        mask = 1 << j
        src, dst, chunk = [], [], []
        for v in range(mask, r, 2 * mask):
            pieces = _subtree_pieces(v, mask, r, 0, k)
            src.append(np.full(pieces.size, v))
            dst.append(np.full(pieces.size, v - mask))
            chunk.append(pieces)
        steps.append(logical_step(np.concatenate(src), np.concatenate(dst), np.concatenate(chunk)))
    steps += _broadcast_steps(r, 0, np.arange(collective.num_chunks))
    return lower_copies(topology, collective, steps, NAME, {"phases": ["gather", "broadcast"]}, router)


def allreduce(topology: Topology, collective: Collective, router: Router) -> Schedule:
    r, k = collective.num_ranks, collective.chunks_per_piece
    red = by_duality(broadcast, topology, Collective(Kind.REDUCE, r, k, 0), NAME)
    bc = broadcast(topology, Collective(Kind.BROADCAST, r, k, 0), router)
    return concat([red, bc], collective, NAME, {"phases": ["reduce", "broadcast"], "root": 0})


BUILDERS = with_reductions(
    NAME,
    {Kind.BROADCAST: broadcast, Kind.GATHER: gather, Kind.SCATTER: scatter, Kind.ALLGATHER: allgather, Kind.ALLREDUCE: allreduce},
    allreduce=False,
)


COLLECTIVES = frozenset(BUILDERS)
synthesize = dispatcher(NAME, BUILDERS)


METHOD = Method(
    name=NAME,
    summary="binomial tree for rooted collectives; allreduce = reduce + broadcast",
    family="classic",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=one_chunk,
)
