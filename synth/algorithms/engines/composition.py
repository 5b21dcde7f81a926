"""Composing schedules built separately: side by side, one after another with per-chunk overlap, and
embedded from a sub-topology into the whole machine.

All three rest on one property of the schedule semantics: chunks never interact. Every rule of the
verifier (a sender holds the chunk, one copy per (dst, chunk) per step, disjoint reduces, the final
state) is a statement about one (rank, chunk) at a time. So transfers on disjoint chunk sets (or on
disjoint rank sets) can share steps freely, and a second phase may start on a chunk as soon as the
first phase is done with that chunk, whatever the first phase still does with other chunks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from synth.collective import Collective
from synth.schedule import Schedule, ScheduleBuilder
from synth.topology import Link, Topology


def _builder(collective: Collective, like: Schedule, method: str, params: Mapping[str, Any] | None) -> ScheduleBuilder:
    return ScheduleBuilder(
        collective,
        method=method,
        params=params,
        topology_name=like.topology_name,
        topology_sha256=like.topology_sha256,
    )


def merge_at(
    placed: Sequence[tuple[Schedule, int]],
    collective: Collective,
    method: str,
    params: Mapping[str, Any] | None = None,
) -> Schedule:
    """One schedule whose step ``s`` holds step ``s - offset`` of every ``(schedule, offset)``.

    The caller guarantees that the merged transfers do not interfere (disjoint chunks or ranks, or a
    per-chunk order that `overlap` computed)."""
    if not placed:
        raise ValueError("nothing to merge")
    total = max(offset + s.num_steps for s, offset in placed)
    builder = _builder(collective, placed[0][0], method, params)
    remaps = [np.array([builder.route_id(r) for r in s.routes], dtype=np.int64) for s, _ in placed]
    for step in range(total):
        cols: list[list[np.ndarray]] = [[], [], [], [], []]
        for (schedule, offset), remap in zip(placed, remaps):
            local = step - offset
            if 0 <= local < schedule.num_steps:
                sl = schedule.step_slice(local)
                cols[0].append(schedule.src[sl])
                cols[1].append(schedule.dst[sl])
                cols[2].append(schedule.chunk[sl])
                cols[3].append(schedule.op[sl])
                cols[4].append(remap[schedule.route[sl]])
        if cols[0]:
            builder.add_step_arrays(*(np.concatenate(c) for c in cols))
    return builder.build()


def parallel(
    schedules: Sequence[Schedule],
    collective: Collective,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    align_end: bool = False,
) -> Schedule:
    """Schedules on disjoint chunks (or disjoint ranks) run side by side, all starting in step 0 (or,
    with ``align_end``, all finishing in the same last step)."""
    longest = max(s.num_steps for s in schedules)
    placed = [(s, longest - s.num_steps if align_end else 0) for s in schedules]
    return merge_at(placed, collective, method, params)


def _chunk_span(schedule: Schedule, num_chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """First and last step in which each chunk moves (-1 where it never does)."""
    first = np.full(num_chunks, -1, dtype=np.int64)
    last = np.full(num_chunks, -1, dtype=np.int64)
    if schedule.num_transfers:
        steps = schedule.step_of_transfer
        np.maximum.at(last, schedule.chunk, steps)
        rev_first = np.full(num_chunks, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(rev_first, schedule.chunk, steps)
        moved = rev_first != np.iinfo(np.int64).max
        first[moved] = rev_first[moved]
    return first, last


def overlap_offset(first: Schedule, second: Schedule, num_chunks: int) -> int:
    """The earliest step at which ``second`` can start so that, for every chunk, its transfers in
    ``second`` come strictly after its last transfer in ``first``."""
    _, last_first = _chunk_span(first, num_chunks)
    first_second, _ = _chunk_span(second, num_chunks)
    both = (last_first >= 0) & (first_second >= 0)
    if not np.any(both):
        return 0
    return int(max(0, np.max(last_first[both] - first_second[both] + 1)))


def overlap(
    first: Schedule,
    second: Schedule,
    collective: Collective,
    method: str,
    params: Mapping[str, Any] | None = None,
) -> Schedule:
    """``second`` after ``first``, started as early as the per-chunk order allows (a pipeline
    between phases: a chunk that ``first`` has finished may already move in ``second``)."""
    offset = overlap_offset(first, second, collective.num_chunks)
    return merge_at([(first, 0), (second, offset)], collective, method, params)


def aligned_overlap(
    reduce_scatter: Schedule,
    allgather: Schedule,
    topology: Topology,
    collective: Collective,
    method: str,
    params: Mapping[str, Any] | None = None,
) -> Schedule:
    """Allreduce as ``reduce_scatter`` then ``allgather`` (k chunks per piece each, numbered as the
    allreduce's R·k), the allgather started as early as the per-chunk order allows (`overlap`)
    after renaming the chunks of every piece so that the one the reduce-scatter finishes first is
    the one the allgather sends first.

    Within a piece the chunks are interchangeable: the owner holds all of them reduced when the
    reduce-scatter is done, and the allgather only spreads them, so any permutation of a piece's
    chunk ids gives a valid allgather. A pipelined reduce-scatter built by duality finishes its
    chunks in the reverse of the order its forward allgather starts them, so without the renaming
    the allgather's first chunk is the reduce-scatter's last and `overlap` can start nothing early.
    Overlapped, a link that the reduce-scatter loads in one direction and the allgather in the
    other (a slow link between two unequal halves of a machine) carries both at once."""
    g = collective.num_chunks
    r = collective.num_ranks
    k = g // r
    _, rs_last = _chunk_span(reduce_scatter, g)
    ag_first, _ = _chunk_span(allgather, g)
    chunk_map = np.arange(g, dtype=np.int64)
    for piece in range(r):
        base = piece * k
        finish = np.argsort(rs_last[base : base + k], kind="stable")
        start = np.argsort(ag_first[base : base + k], kind="stable")
        chunk_map[base + start] = base + finish
    renamed = embed(allgather, topology, allgather.collective, range(r), chunk_map, method)
    return overlap(reduce_scatter, renamed, collective, method, params)


# ================================================================================ sub-topologies
def induced_topology(topology: Topology, ranks: Sequence[int], name: str) -> Topology:
    """The machine as seen by a subset of its ranks: those ranks (renumbered 0…n−1 in the given
    order), every switch, and every link that touches no other rank. Routes found in it are routes
    of the whole machine, and nothing built on it can pass through (or relay via) another rank."""
    keep = list(ranks)
    r = topology.num_ranks
    new_id = {old: i for i, old in enumerate(keep)}
    for s in range(len(topology.switches)):
        new_id[r + s] = len(keep) + s
    links = tuple(
        Link(new_id[link.src], new_id[link.dst], link.bandwidth, link.latency)
        for link in topology.links
        if link.src in new_id and link.dst in new_id
    )
    links = tuple(sorted(links, key=lambda lk: (lk.src, lk.dst)))
    return Topology(
        name=name,
        ranks=tuple(topology.ranks[i] for i in keep),
        switches=topology.switches,
        links=links,
        description=f"ranks {list(keep)} of {topology.name}",
    )


def connected(topology: Topology) -> bool:
    """True if every rank reaches every other rank over the directed links (through switches or
    other ranks), the condition every algorithm here relies on."""
    n = topology.num_nodes
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for link in topology.links:
        succ[link.src].append(link.dst)
        pred[link.dst].append(link.src)
    for adj in (succ, pred):
        seen = [False] * n
        seen[0] = True
        stack = [0]
        while stack:
            u = stack.pop()
            for v in adj[u]:
                if not seen[v]:
                    seen[v] = True
                    stack.append(v)
        if not all(seen[: topology.num_ranks]):
            return False
    return True


def embed(
    schedule: Schedule,
    topology: Topology,
    collective: Collective,
    rank_map: Sequence[int],
    chunk_map: Sequence[int] | np.ndarray,
    method: str,
) -> Schedule:
    """A schedule made on an `induced_topology` rewritten for the whole machine: rank ``i`` becomes
    ``rank_map[i]``, chunk ``c`` becomes ``chunk_map[c]``; switch names are shared, so routes carry
    over unchanged."""
    ranks = np.asarray(rank_map, dtype=np.int64)
    chunks = np.asarray(chunk_map, dtype=np.int64)
    builder = ScheduleBuilder(collective, topology, method)
    remap = np.array([builder.route_id(r) for r in schedule.routes], dtype=np.int64)
    for s in range(schedule.num_steps):
        sl = schedule.step_slice(s)
        builder.add_step_arrays(
            ranks[schedule.src[sl]],
            ranks[schedule.dst[sl]],
            chunks[schedule.chunk[sl]],
            schedule.op[sl],
            remap[schedule.route[sl]],
        )
    return builder.build()
