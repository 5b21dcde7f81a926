"""Independent reference semantics for tests: a deliberately naive checker written straight from
docs/formats.md, 'Meaning of a step', with Python sets, and a numeric replay with real values.

The production verifier (synth.verify) is vectorized and block-structured; these are the slow,
obvious versions it is tested against.
"""

from __future__ import annotations

import random
from itertools import pairwise

from synth.collective import Collective, Kind
from synth.schedule import Schedule
from synth.topology import Topology

RULE_ORDER = ("rank", "chunk", "op", "route", "unheld", "conflict", "double", "post")


def initial_state(c: Collective) -> dict[tuple[int, int], frozenset[int] | bool]:
    r, g, k = c.num_ranks, c.num_chunks, c.chunks_per_piece
    state: dict = {}
    for rank in range(r):
        for chunk in range(g):
            if c.is_reduction:
                state[(rank, chunk)] = frozenset({rank})
            elif c.kind in (Kind.ALLGATHER, Kind.GATHER):
                state[(rank, chunk)] = chunk // k == rank
            elif c.kind in (Kind.BROADCAST, Kind.SCATTER):
                state[(rank, chunk)] = rank == c.root
            elif c.kind is Kind.ALLTOALL:
                state[(rank, chunk)] = (chunk // k) // r == rank
    return state


def required(c: Collective, rank: int, chunk: int) -> bool:
    r, k = c.num_ranks, c.chunks_per_piece
    if c.kind in (Kind.ALLGATHER, Kind.BROADCAST, Kind.ALLREDUCE):
        return True
    if c.kind in (Kind.GATHER, Kind.REDUCE):
        return rank == c.root
    if c.kind in (Kind.SCATTER, Kind.REDUCE_SCATTER):
        return chunk // k == rank
    return (chunk // k) % r == rank  # alltoall


def reference_check(schedule: Schedule, topology: Topology) -> tuple[str, int | None, int | None] | None:
    """None if valid, else (rule, step, transfer) of the first violation (step None: final state)."""
    c = schedule.collective
    r, g = c.num_ranks, c.num_chunks
    state = initial_state(c)
    names = topology.node_index
    links = set(topology.link_index)
    for si, step in enumerate(schedule.steps):
        start = dict(state)
        writes: dict[tuple[int, int], list[tuple[str, frozenset | bool]]] = {}
        for ti, t in enumerate(step):
            if not (0 <= t.src < r and 0 <= t.dst < r) or t.src == t.dst:
                return ("rank", si, ti)
            if not 0 <= t.chunk < g:
                return ("chunk", si, ti)
            if t.op not in ("copy", "reduce") or (t.op == "reduce" and not c.is_reduction):
                return ("op", si, ti)
            path = [t.src]
            for name in t.via:
                node = names.get(name)
                if node is None or node < r or node in path:
                    return ("route", si, ti)
                path.append(node)
            path.append(t.dst)
            if any((a, b) not in links for a, b in pairwise(path)):
                return ("route", si, ti)
            value = start[(t.src, t.chunk)]
            if not value:
                return ("unheld", si, ti)
            key = (t.dst, t.chunk)
            prior = writes.setdefault(key, [])
            if prior and (t.op == "copy" or any(op == "copy" for op, _ in prior)):
                return ("conflict", si, ti)
            if t.op == "reduce":
                seen = set(start[key])
                for _, v in prior:
                    seen |= v
                if seen & value:
                    return ("double", si, ti)
            prior.append((t.op, value))
        for key, ws in writes.items():
            if ws[0][0] == "copy":
                state[key] = ws[0][1]
            else:
                merged = set(start[key])
                for _, v in ws:
                    merged |= v
                state[key] = frozenset(merged)
    full = frozenset(range(r))
    for rank in range(r):
        for chunk in range(g):
            if required(c, rank, chunk):
                ok = state[(rank, chunk)] == full if c.is_reduction else state[(rank, chunk)]
                if not ok:
                    return ("post", None, None)
    return None


def numeric_replay(schedule: Schedule, seed: int = 0) -> bool:
    """Run the schedule on real values (big integers, sum) and check the collective's result.

    Non-reduction chunks carry a random payload; reductions sum random contributions, so a
    contribution counted twice or missed changes the value. Returns True if every required
    (rank, chunk) ends with the right value."""
    c = schedule.collective
    r, g = c.num_ranks, c.num_chunks
    rng = random.Random(seed)
    if c.is_reduction:
        contrib = {(rank, chunk): rng.getrandbits(64) + 1 for rank in range(r) for chunk in range(g)}
        value = dict(contrib)
        truth = {chunk: sum(contrib[(rank, chunk)] for rank in range(r)) for chunk in range(g)}
    else:
        payload = {chunk: rng.getrandbits(64) + 1 for chunk in range(g)}
        init = initial_state(c)
        value = {key: (payload[key[1]] if held else None) for key, held in init.items()}
        truth = payload
    for step in schedule.steps:
        start = dict(value)
        for t in step:
            if t.op == "copy":
                value[(t.dst, t.chunk)] = start[(t.src, t.chunk)]
        for t in step:
            if t.op == "reduce":
                value[(t.dst, t.chunk)] = value[(t.dst, t.chunk)] + start[(t.src, t.chunk)]
    return all(value[(rank, chunk)] == truth[chunk] for rank in range(r) for chunk in range(g) if required(c, rank, chunk))
