"""Recursive doubling, for any number of ranks.

With P the largest power of two ≤ R and E = R − P, the E extra ranks P + i first hand their data to
partner i (one step), the P ranks then exchange with the partner at distance 1, 2, 4, … (log₂ P
steps, the data doubling each time), and finally partner i hands the result to P + i.

allgather: the exchanged data is every piece a rank has so far. allreduce: every step exchanges the
whole buffer with ``reduce`` (MPICH's latency-optimal allreduce; each pair's values are disjoint
because they cover disjoint blocks of ranks). That needs a switch-only path between partners; with
only relays it does not apply (use recursive-halving, whose reduce-scatter is built by duality).
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.builders import dispatcher
from synth.algorithms.engines.lowering import LogicalStep, RouteTable, logical_step, lower_copies
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, one_chunk
from synth.routing import Router
from synth.schedule import OP_COPY, OP_REDUCE, Schedule, ScheduleBuilder
from synth.topology import Topology

NAME = "recursive-doubling"


def split(r: int) -> tuple[int, int]:
    """(P, E): the power-of-two core and the number of extra ranks folded onto it."""
    p = 1 << (r.bit_length() - 1)
    return p, r - p


def allgather(topology: Topology, collective: Collective, router: Router) -> Schedule:
    r, k = collective.num_ranks, collective.chunks_per_piece
    p, e = split(r)
    held: list[set[int]] = [{v} for v in range(r)]  # pieces (owner ranks) each rank holds
    steps: list[LogicalStep] = []

    def pieces(owners) -> np.ndarray:
        owners = np.array(sorted(owners), dtype=np.int64)
        return (owners[:, None] * k + np.arange(k)).ravel()

    if e:
        extra = np.arange(p, r)
        steps.append(logical_step(np.repeat(extra, k), np.repeat(extra - p, k), pieces(range(p, r))))
        for i in range(e):
            held[i].add(p + i)
    dist = 1
    while dist < p:
        src, dst, chunk = [], [], []
        for v in range(p):
            c = pieces(held[v])
            src.append(np.full(c.size, v))
            dst.append(np.full(c.size, v ^ dist))
            chunk.append(c)
        steps.append(logical_step(np.concatenate(src), np.concatenate(dst), np.concatenate(chunk)))
        new = [held[v] | held[v ^ dist] for v in range(p)]
        held[:p] = new
        dist <<= 1
    if e:
        src, dst, chunk = [], [], []
        for i in range(e):
            c = pieces(set(range(r)) - {p + i})
            src.append(np.full(c.size, i))
            dst.append(np.full(c.size, p + i))
            chunk.append(c)
        steps.append(logical_step(np.concatenate(src), np.concatenate(dst), np.concatenate(chunk)))
    return lower_copies(topology, collective, steps, NAME, {"core": p, "extra": e}, router)


def allreduce(topology: Topology, collective: Collective, router: Router) -> Schedule:
    r, g = collective.num_ranks, collective.num_chunks
    p, e = split(r)
    builder = ScheduleBuilder(collective, topology, NAME, {"core": p, "extra": e})
    routes = RouteTable(topology, router, builder)
    chunks = np.arange(g, dtype=np.int64)

    def add(src: np.ndarray, dst: np.ndarray, op: int) -> None:
        s, d = np.repeat(src, g), np.repeat(dst, g)
        rid = routes.ids(s, d)
        if np.any(rid < 0):
            i = int(np.flatnonzero(rid < 0)[0])
            raise NotApplicable(
                f"recursive-doubling allreduce exchanges whole buffers between ranks {int(s[i])} and {int(d[i])}, "
                "which have no direct or switch-only path; use recursive-halving or ring"
            )
        builder.add_step_arrays(s, d, np.tile(chunks, src.size), op, rid)

    if e:
        add(np.arange(p, r), np.arange(e), OP_REDUCE)
    dist = 1
    while dist < p:
        v = np.arange(p)
        add(v, v ^ dist, OP_REDUCE)
        dist <<= 1
    if e:
        add(np.arange(e), np.arange(p, r), OP_COPY)
    return builder.build()


BUILDERS = {Kind.ALLGATHER: allgather, Kind.ALLREDUCE: allreduce}


COLLECTIVES = frozenset(BUILDERS)
synthesize = dispatcher(NAME, BUILDERS)


METHOD = Method(
    name=NAME,
    summary="recursive doubling, any rank count (allgather; allreduce by whole-buffer exchange)",
    family="classic",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=one_chunk,
)
