"""Slow, obvious versions of the simulator's parts, written straight from the rules in
docs/simulator.md (dicts and loops, no numpy), for differential tests."""

from __future__ import annotations

from itertools import pairwise

from synth.schedule import Schedule
from synth.topology import Topology


def path_links(topology: Topology, src: int, dst: int, via: tuple[str, ...]) -> list[int]:
    nodes = [src, *(topology.node_index[name] for name in via), dst]
    return [topology.link_index[(a, b)] for a, b in pairwise(nodes)]


def sync_time(schedule: Schedule, topology: Topology, size: int) -> float:
    """docs/formats.md, 'Step-synchronous cost', read literally: a step takes its longest transfer;
    a transfer takes Σα over its path plus the largest B_ℓ/bw_ℓ on it, B_ℓ the bytes the whole step
    sends over ℓ."""
    chunk = schedule.collective.chunk_bytes(size)
    total = 0.0
    for step in schedule.steps:
        paths = [path_links(topology, t.src, t.dst, t.via) for t in step]
        sent: dict[int, float] = {}
        for path in paths:
            for link in path:
                sent[link] = sent.get(link, 0.0) + chunk
        longest = 0.0
        for path in paths:
            alpha = sum(topology.links[link].latency for link in path)
            beta = max(sent[link] / (topology.links[link].bandwidth * 1e3) for link in path)
            longest = max(longest, alpha + beta)
        total += longest
    return total


def must_follow(schedule: Schedule, topology: Topology) -> list[set[int]]:
    """For each transfer (schedule order), every transfer of an earlier step it must wait for,
    pairwise: u writes what t reads (read after write), u writes what t writes (write after
    write), u reads what t writes (write after read), or u crosses a link t crosses (link order).
    The simulator keeps only the latest of these; since each of them waited for the earlier
    ones, the latest completion over this whole set is the same."""
    flat = []
    for s, step in enumerate(schedule.steps):
        for t in step:
            flat.append((s, t, set(path_links(topology, t.src, t.dst, t.via))))
    out: list[set[int]] = []
    for _i, (s, t, links) in enumerate(flat):
        deps = set()
        for j, (su, u, ulinks) in enumerate(flat):
            if su >= s:
                continue
            u_writes = (u.dst, u.chunk)
            u_reads = (u.src, u.chunk)
            if u_writes in ((t.src, t.chunk), (t.dst, t.chunk)) or u_reads == (t.dst, t.chunk) or links & ulinks:
                deps.add(j)
        out.append(deps)
    return out


def max_min(paths: list[list[int]], capacity: dict[int, float]) -> list[float]:
    """Textbook progressive filling, one bottleneck level at a time: raise every unfrozen flow's
    rate together until a link is full; freeze the flows on the fullest links; repeat."""
    rate = [0.0] * len(paths)
    frozen = [False] * len(paths)
    remaining = dict(capacity)
    while not all(frozen):
        count: dict[int, int] = {}
        for p, path in enumerate(paths):
            if not frozen[p]:
                for link in path:
                    count[link] = count.get(link, 0) + 1
        level = min(remaining[link] / n for link, n in count.items())
        full = {link for link, n in count.items() if remaining[link] / n <= level * (1 + 1e-12)}
        for p, path in enumerate(paths):
            if not frozen[p] and full & set(path):
                frozen[p] = True
                rate[p] = level
                for link in path:
                    remaining[link] -= level
    return rate
