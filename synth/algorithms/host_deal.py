"""Broadcast over several hosts whose network access is one narrow link each: the root deals the
data straight over the ranks of the other hosts, they swap it across hosts and share it inside,
while the root's own host is dealt and shares; three steps, the network crossed twice.

Where every host reaches the network through one link no wider than a GPU's (a NIC behind one
12 GB/s PCIe link, as on the random multi-host machines), every byte leaves the root's host over
that link, and a step that crosses the network pays its latency (4.3 µs there, against 0.7 µs
inside a host). The other multi-host broadcasts spend it differently: ``hierarchical`` deals the
data over the root's host first and sends every byte once per other host (the root host's link
carries it H − 1 times), ``pipelined-tree`` pays the network's latency in every step of its
pipeline. Here the root's host link carries every byte once, in one step, and the network is
crossed only once more:

1. the root sends chunk c to its owner, a rank of another host (the chunks dealt round the ranks
   of the other hosts, host by host, so every host takes an equal share over its ranks);
2. every owner sends its chunks to the rank of the same local index on every other remote host
   (the swap across hosts: each remote host's link carries (H − 2)/(H − 1) of the data each way),
   and, in the shape that shares early, to the other ranks of its own host as well; the root
   deals the data over the other ranks of its own host (its link is free again);
3. every host shares inside what its ranks still lack (each missing chunk from the holder in the
   host that has sent least so far).

The shape is van de Geijn's scatter-allgather broadcast with the scatter made over the other
hosts' ranks and the allgather in two levels (across hosts by local index, then inside): the
two-level allgather is NCCL's and Horovod's hierarchical scheme; dealing straight from the root
over the remote ranks, so that the root's host link carries each byte once and the network is
crossed twice, is ours. On random-multihost-1 (4 hosts × 8 GPUs) at 64 KiB it takes
9.76 + 7.94 + 5.48 = 23.18 µs where ``hierarchical`` took 26.55 (NCCL's analytic ring 20.22, which
streams; the lower bound is 16.79: docs/algorithms.md has the figures). Also tried: the root sends
extra copies to its own host in step 2 while its link has room under the swap's step, so the
share in step 3 is smaller; or the root's host is fed by the owners over its network ingress
(idle otherwise) while the root deals the next wave: for larger sizes the data goes in waves,
wave w running its three steps in steps w, w + 1, w + 2, so every step moves one wave over each
host's link whatever it does (on random-multihost-1 1 MiB: six waves, 145.49 µs where
``pipelined-tree`` took 163.89; 16 MiB: 24 waves, 1615.5 µs where it took 1761.1).

Applies to broadcast (and reduce, as the broadcast of the reversed machine run backwards with
reduces: `synth.transform.dual_reduction`) on machines of at least two hosts; the chunk count is
chosen at the size (``size`` option, default 64 KiB: a small-message shape) from multiples of the
remote ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from synth.algorithms.engines.builders import broadcast_or_dual
from synth.algorithms.engines.lowering import LogicalStep, logical_step, lower_copies
from synth.algorithms.engines.size_tuning import fastest_at, size_option, timed_sweep
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, one_chunk
from synth.routing import Router
from synth.schedule import Schedule
from synth.topology import Topology

NAME = "host-deal"
OPTIONS = frozenset({"size"})
REFERENCE_SIZE = 64 << 10
#: chunks per remote rank tried (a chunk count is this times the number of remote ranks)
PER_REMOTE = (1, 2)
#: wave counts tried for the pipelined shape (one chunk per remote rank per wave)
WAVES = (2, 3, 4, 6, 8, 12, 16, 24, 32)
#: machines of more ranks are left to the other methods (the shares are chosen chunk by chunk, so
#: building a candidate grows with ranks × chunks; auto on 128 ranks spends ~3.5 s CPU here)
MAX_RANKS = 256
#: the largest chunk count built (the candidates' size grows with ranks × chunks)
MAX_CHUNKS = 1024


def hosts_of(topology: Topology, root: int) -> tuple[list[int], list[list[int]]]:
    """(the root's host's other ranks, the other hosts' ranks in file order); NotApplicable for a
    single host, ranks without a host or too many ranks."""
    groups = topology.host_groups
    if None in groups:
        raise NotApplicable(f"{NAME} needs the host of every rank (ranks[].host) in {topology.name}")
    if len(groups) < 2:
        raise NotApplicable(f"{NAME} needs ranks on at least two hosts; {topology.name} has one")
    if topology.num_ranks > MAX_RANKS:
        raise NotApplicable(f"{NAME} is for machines of up to {MAX_RANKS} ranks; {topology.name} has {topology.num_ranks}")
    home = next(list(r) for r in groups.values() if root in r)
    return [r for r in home if r != root], [list(r) for r in groups.values() if root not in r]


def owners(remote: list[list[int]], chunks: int) -> np.ndarray:
    """The remote rank each chunk is dealt to: round the hosts first (chunk c to host c mod H'),
    then round each host's ranks, so every host and every rank of it takes an equal share."""
    out = np.empty(chunks, dtype=np.int64)
    for c in range(chunks):
        host = remote[c % len(remote)]
        out[c] = host[(c // len(remote)) % len(host)]
    return out


def _share(ranks: list[int], held: np.ndarray, sent: np.ndarray, ids: np.ndarray) -> LogicalStep:
    """Every rank of ``ranks`` gets every chunk of ``ids`` another of them holds and it lacks, each
    from the holder that has sent least so far (``sent`` counts per rank, updated), ties to the
    lower id."""
    src, dst, chunk = [], [], []
    group = np.asarray(ranks)
    for c in ids.tolist():
        holders = group[held[group, c]]
        if holders.size == 0:
            continue
        for r in group[~held[group, c]]:
            s = int(holders[np.argmin(sent[holders])])
            sent[s] += 1
            src.append(s)
            dst.append(int(r))
            chunk.append(c)
    return logical_step(src, dst, chunk)


def _merge(*steps: LogicalStep) -> LogicalStep:
    """One logical step of all these moves (they run in the same step)."""
    return logical_step(*(np.concatenate([s[i] for s in steps]) for i in range(3)))


def _apply(held: np.ndarray, step: LogicalStep) -> None:
    """Mark what ``step`` delivers as held (read by the shares chosen after it)."""
    held[step[1], step[2]] = True


@dataclass(frozen=True)
class Shape:
    """One candidate: ``waves`` runs of the three steps, each a step behind the one before (1: no
    pipeline); ``early`` shares the dealt chunks inside the remote hosts in step 2 (else step 3);
    the root's host gets each chunk from the root in step 2 (``home_from_root``, with ``extra``
    chunks sent to a second rank of it as well) or from its owner, over the root host's idle
    ingress, in step 2 (dealt round the root host's other ranks)."""

    waves: int = 1
    early: bool = True
    extra: int = 0
    home_from_root: bool = True


def broadcast_steps(root: int, home: list[int], remote: list[list[int]], chunks: int, shape: Shape) -> list[LogicalStep]:
    """The logical steps (module docstring) for ``chunks`` chunks in ``shape``: wave w (every
    ``shape.waves``-th chunk) runs its three steps in steps w, w + 1 and w + 2."""
    num_ranks = 1 + len(home) + sum(len(h) for h in remote)
    held = np.zeros((num_ranks, chunks), dtype=bool)
    held[root] = True
    local = {r: (i, h) for h, ranks in enumerate(remote) for i, r in enumerate(ranks)}
    near = np.asarray(home, dtype=np.int64)
    steps: list[list[LogicalStep]] = [[] for _ in range(shape.waves + 2)]
    # what every rank sends per step, so the shares go to the holders with the most room: the
    # fixed moves (deals, swaps) of every wave are counted before any share is chosen
    sent = np.zeros((shape.waves + 2, num_ranks), dtype=np.int64)
    waves = [ids for w in range(shape.waves) if (ids := np.arange(w, chunks, shape.waves, dtype=np.int64)).size]
    moves: list[LogicalStep] = []
    for w, ids in enumerate(waves):
        own = owners(remote, ids.size)
        deal = logical_step(np.full(ids.size, root), own, ids)
        # step 2: the swap across hosts by local index, and the root host's share from the
        # owners or the root
        swap_src, swap_dst, swap_chunk = [], [], []
        for j, (c, q) in enumerate(zip(ids.tolist(), own.tolist(), strict=True)):
            i, h = local[q]
            for other, ranks in enumerate(remote):
                if other != h:
                    swap_src.append(q)
                    swap_dst.append(ranks[i % len(ranks)])
                    swap_chunk.append(c)
            if home and not shape.home_from_root:
                swap_src.append(q)
                swap_dst.append(home[j % len(home)])
                swap_chunk.append(c)
        parts = [logical_step(swap_src, swap_dst, swap_chunk)]
        if home and shape.home_from_root:
            parts.append(logical_step(np.full(ids.size, root), near[np.arange(ids.size) % len(home)], ids))
            if shape.extra and len(home) > 1:
                more = np.arange(min(shape.extra, ids.size))
                parts.append(logical_step(np.full(more.size, root), near[(more + 1) % len(home)], ids[more]))
        moves.append(_merge(*parts))
        for s, step in ((w, deal), (w + 1, moves[-1])):
            np.add.at(sent[s], step[0], 1)
            steps[s].append(step)
        _apply(held, deal)
    for w, ids in enumerate(waves):
        if shape.early:  # step 2: the dealt chunks (held since step 1) shared inside the remote hosts
            early = _merge(*(_share(ranks, held, sent[w + 1], ids) for ranks in remote))
            steps[w + 1].append(early)
            _apply(held, early)
        _apply(held, moves[w])
        # step 3: every host shares inside what its ranks still lack
        third = _merge(*(_share(ranks, held, sent[w + 2], ids) for ranks in [[root, *home], *remote]))
        _apply(held, third)
        steps[w + 2].append(third)
    return [_merge(*parts) for parts in steps if parts]


def build(topology: Topology, collective: Collective, router: Router, shape: Shape) -> Schedule:
    """The schedule for ``collective`` (its chunks per piece, its root) in one shape."""
    home, remote = hosts_of(topology, collective.root)
    steps = broadcast_steps(collective.root, home, remote, collective.chunks_per_piece, shape)
    params = {
        "waves": shape.waves,
        "share": "early" if shape.early else "late",
        "home_from": "root" if shape.home_from_root else "owners",
        "extra_to_home": shape.extra,
    }
    return lower_copies(topology, collective, steps, NAME, params, router)


def shapes_for(width: int, requested: int | None) -> list[tuple[int, Shape]]:
    """(chunk count, shape) candidates for ``width`` remote ranks: one wave at 1 or 2 chunks per
    remote rank, early or late share, the root host from the root (0, 1/8, …, 1/2 of the chunks
    twice) or from the owners; and 2 … 32 waves of one chunk per remote rank each, early share,
    the root host from the owners or the root (``requested``: that chunk count only)."""
    out: list[tuple[int, Shape]] = []
    for k in [requested] if requested is not None else [t * width for t in PER_REMOTE]:
        if k is None or k > MAX_CHUNKS:
            continue
        out += [(k, Shape(1, early, j * k // 8)) for early in (True, False) for j in range(5)]
        out.append((k, Shape(1, True, 0, False)))
    for waves in WAVES:
        k = requested if requested is not None else waves * width
        if k <= MAX_CHUNKS and k >= waves:
            out += [(k, Shape(waves, True, 0, False)), (k, Shape(waves, True, 0, True))]
    return list(dict.fromkeys(out))


def best_broadcast(topology: Topology, root: int | None, router: Router, size: int | None, requested: int | None) -> Schedule:
    """The fastest of `shapes_for` at ``size`` (default `REFERENCE_SIZE`)."""
    base = Collective(Kind.BROADCAST, topology.num_ranks, 1, root)
    _, remote = hosts_of(topology, base.root)
    width = sum(len(h) for h in remote)
    shapes = shapes_for(width, requested)
    if not shapes:
        raise NotApplicable(f"{NAME}: {width} remote ranks need more than {MAX_CHUNKS} chunks")
    timed = timed_sweep(
        shapes,
        lambda s: build(topology, Collective(Kind.BROADCAST, topology.num_ranks, s[0], base.root), router, s[1]),
        topology,
        size if size is not None else REFERENCE_SIZE,
    )
    return fastest_at(timed, size)


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options: Any) -> Schedule:
    """The fastest shape at ``size``; a reduce is the fastest broadcast of the reversed machine
    run backwards with reduces."""
    size = size_option(NAME, options, OPTIONS)
    return broadcast_or_dual(NAME, best_broadcast, topology, collective, router, size, options.get("requested_chunks"))


METHOD = Method(
    name=NAME,
    summary=(
        "broadcast (and reduce, reversed) over hosts with narrow network links: dealt straight over"
        " the other hosts' ranks, swapped across hosts, shared inside; three steps"
    ),
    family="scalable",
    collectives=frozenset({Kind.BROADCAST, Kind.REDUCE}),
    build=synthesize,
    default_chunks=one_chunk,
    options=OPTIONS,
    chooses_chunks=True,
)
