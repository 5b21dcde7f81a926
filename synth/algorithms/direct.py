"""Direct (all-pairs) algorithms: every piece goes straight from where it is to where it is needed,
in one logical step (more physical steps only where a pair has no switch-only path and is relayed).

allgather, gather, broadcast, scatter and alltoall are one step; reduce and reduce-scatter are
their duals (every rank reduces straight into the root / the piece's owner); allreduce is direct
reduce-scatter then direct allgather (two steps). Latency-optimal on switched machines; on
link-limited ones the contention shows in the cost model.
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.builders import dispatcher, with_reductions
from synth.algorithms.engines.lowering import logical_step, lower_copies
from synth.collective import Collective, Kind
from synth.method import Method, ranks_for_allreduce
from synth.routing import Router
from synth.schedule import Schedule
from synth.topology import Topology

NAME = "direct"


def _all_pairs(r: int) -> tuple[np.ndarray, np.ndarray]:
    src, dst = np.divmod(np.arange(r * r, dtype=np.int64), r)
    keep = src != dst
    return src[keep], dst[keep]


def allgather(topology: Topology, collective: Collective, router: Router) -> Schedule:
    r, k = collective.num_ranks, collective.chunks_per_piece
    src, dst = _all_pairs(r)
    chunk = (src[:, None] * k + np.arange(k)).ravel()
    step = logical_step(np.repeat(src, k), np.repeat(dst, k), chunk)
    return lower_copies(topology, collective, [step], NAME, {}, router)


def _from_root(collective: Collective, chunk_of_dst) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r, root = collective.num_ranks, collective.root
    dst = np.array([d for d in range(r) if d != root], dtype=np.int64)
    chunks = [chunk_of_dst(int(d)) for d in dst]
    counts = [len(c) for c in chunks]
    return (
        np.full(sum(counts), root, dtype=np.int64),
        np.repeat(dst, counts),
        np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64),
    )


def broadcast(topology: Topology, collective: Collective, router: Router) -> Schedule:
    k = collective.chunks_per_piece
    step = logical_step(*_from_root(collective, lambda d: np.arange(k)))
    return lower_copies(topology, collective, [step], NAME, {}, router)


def scatter(topology: Topology, collective: Collective, router: Router) -> Schedule:
    k = collective.chunks_per_piece
    step = logical_step(*_from_root(collective, lambda d: d * k + np.arange(k)))
    return lower_copies(topology, collective, [step], NAME, {}, router)


def gather(topology: Topology, collective: Collective, router: Router) -> Schedule:
    r, k, root = collective.num_ranks, collective.chunks_per_piece, collective.root
    src = np.array([s for s in range(r) if s != root], dtype=np.int64)
    chunk = (src[:, None] * k + np.arange(k)).ravel()
    step = logical_step(np.repeat(src, k), np.full(chunk.size, root, dtype=np.int64), chunk)
    return lower_copies(topology, collective, [step], NAME, {}, router)


def alltoall(topology: Topology, collective: Collective, router: Router) -> Schedule:
    r, k = collective.num_ranks, collective.chunks_per_piece
    src, dst = _all_pairs(r)
    chunk = ((src * r + dst)[:, None] * k + np.arange(k)).ravel()
    step = logical_step(np.repeat(src, k), np.repeat(dst, k), chunk)
    return lower_copies(topology, collective, [step], NAME, {}, router)


BUILDERS = with_reductions(
    NAME,
    {Kind.ALLGATHER: allgather, Kind.GATHER: gather, Kind.BROADCAST: broadcast, Kind.SCATTER: scatter, Kind.ALLTOALL: alltoall},
)


COLLECTIVES = frozenset(BUILDERS)
synthesize = dispatcher(NAME, BUILDERS)


METHOD = Method(
    name=NAME,
    summary="all-pairs: every piece straight to where it is needed (relayed where no switch path exists)",
    family="classic",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=ranks_for_allreduce,
)
