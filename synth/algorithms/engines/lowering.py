"""From logical transfers (rank to rank, anywhere) to a schedule that follows the links.

Classic algorithms are written for a machine where every rank reaches every other. `lower_copies`
maps each logical step of a non-reduction algorithm onto the topology: a pair with a switch-only
route becomes one transfer (``via`` the route's switches); a pair without one is relayed through
ranks along `Router.relay_path`, one hop per physical step, so a logical step takes as many physical
steps as its longest relay. A transfer to a rank that already holds the chunk is dropped (the chunk
is immutable), which also guarantees that every (rank, chunk) is received at most once, the
property that `synth.transform.dual_reduction` needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from synth.collective import Collective
from synth.routing import Router, router_for
from synth.schedule import OP_COPY, Schedule, ScheduleBuilder
from synth.topology import Topology

LogicalStep = tuple[np.ndarray, np.ndarray, np.ndarray]  # src, dst, chunk

_DENSE_LIMIT = 64 * 2**20  # holds-matrix entries before we stop tracking holders


def logical_step(src, dst, chunk) -> LogicalStep:
    return (np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64), np.asarray(chunk, dtype=np.int64))


class RouteTable:
    """Route ids (in a builder) for rank pairs, or -1 where only a relay reaches."""

    def __init__(self, topology: Topology, router: Router, builder: ScheduleBuilder):
        self.topology = topology
        self.router = router
        self.builder = builder
        self._ids: dict[int, int] = {}

    def ids(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        r = self.topology.num_ranks
        keys = src * r + dst
        uniq, inverse = np.unique(keys, return_inverse=True)
        out = np.empty(uniq.size, dtype=np.int64)
        for i, key in enumerate(uniq.tolist()):
            rid = self._ids.get(key)
            if rid is None:
                via = self.router.via_names(key // r, key % r)
                rid = self._ids[key] = -1 if via is None else self.builder.route_id(via)
            out[i] = rid
        return out[inverse]


def lower_copies(
    topology: Topology,
    collective: Collective,
    steps: Iterable[LogicalStep],
    method: str,
    params: Mapping[str, Any] | None = None,
    router: Router | None = None,
) -> Schedule:
    """Physical schedule for the logical steps of a non-reduction algorithm."""
    router = router or router_for(topology)
    builder = ScheduleBuilder(collective, topology, method, params)
    routes = RouteTable(topology, router, builder)
    r, g = collective.num_ranks, collective.num_chunks
    holds = collective.initial_holders() if r * g <= _DENSE_LIMIT else None
    for src, dst, chunk in steps:
        if src.size == 0:
            continue
        rid = routes.ids(src, dst)
        if holds is not None:
            fresh = ~holds[dst, chunk]
            key = dst * g + chunk
            _, first = np.unique(key, return_index=True)
            keep = np.zeros(src.size, dtype=bool)
            keep[first] = True
            keep &= fresh
            src, dst, chunk, rid = src[keep], dst[keep], chunk[keep], rid[keep]
        if np.all(rid >= 0):
            builder.add_step_arrays(src, dst, chunk, OP_COPY, rid)
            if holds is not None:
                holds[dst, chunk] = True
            continue
        if holds is None:
            raise ValueError("relaying needs holder tracking; this collective is too large for it")
        _relay_step(router, routes, builder, holds, src, dst, chunk)
    return builder.build()


def _relay_step(router, routes, builder, holds, src, dst, chunk) -> None:
    paths = [router.relay_path(int(a), int(b)) for a, b in zip(src.tolist(), dst.tolist())]
    chunks = chunk.tolist()
    depth = max(len(p) for p in paths) - 1
    for hop in range(depth):
        s_out: list[int] = []
        d_out: list[int] = []
        c_out: list[int] = []
        for path, c in zip(paths, chunks):
            if hop + 1 >= len(path):
                continue
            a, b = path[hop], path[hop + 1]
            if holds[b, c]:
                continue  # b has it already (or gets it in this step); the relay goes on from b
            holds[b, c] = True
            s_out.append(a)
            d_out.append(b)
            c_out.append(c)
        if s_out:
            s_arr = np.asarray(s_out, dtype=np.int64)
            d_arr = np.asarray(d_out, dtype=np.int64)
            builder.add_step_arrays(s_arr, d_arr, np.asarray(c_out, dtype=np.int64), OP_COPY, routes.ids(s_arr, d_arr))
