"""Multi-channel rings, as NCCL runs them: several rings at once, each carrying a share of the data.

The rings come from `synth.algorithms.engines.ring_channels.ring_channels`: rings over disjoint link capacity on
an NVLink box (six on a DGX-1, one per direction over each NVLink), one ring on an NVSwitch box or a
PCIe tree (more would only share the same links), rail-aligned rings across hosts (each host a chain
of its GPUs, entered and left through different NICs, one channel per NIC). Channel ``c`` carries
the chunks whose index inside their piece is ≡ c (mod channels); all channels run in the same steps.

allgather: on every ring, the classic ring allgather (R − 1 steps) on its chunks. reduce-scatter:
its dual. allreduce: reduce-scatter then allgather (2(R − 1) steps). broadcast: every ring, rotated
to start at the root, is a pipelined chain for its chunks (chunk j of a channel crosses hop h in step
j + h). reduce: its dual. The schedule's params record the rings, the channel count and the
bandwidth each channel sustains.

Chunks per piece default to the channel count (R × channels for allreduce, 4 × channels for
broadcast and reduce, so each chain pipelines four chunks); with fewer, some channels stay idle.
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.builders import dispatcher, with_reductions
from synth.algorithms.engines.lowering import LogicalStep, logical_step, lower_copies
from synth.algorithms.engines.ring_channels import RingChannels, ring_channels
from synth.collective import Collective, Kind
from synth.method import Method, one_chunk
from synth.routing import Router
from synth.schedule import OP_COPY, Schedule, ScheduleBuilder
from synth.topology import Topology

NAME = "multiring"
BROADCAST_CHUNKS_PER_CHANNEL = 4


def channel_chunks(k: int, channels: int) -> list[np.ndarray]:
    """Chunk indices (within a piece of k) carried by each channel: i ≡ c (mod channels)."""
    return [np.arange(c, k, channels, dtype=np.int64) for c in range(channels)]


def default_chunks(kind: Kind, topology: Topology) -> int:
    """Chunks per piece that give every channel work: the channel count (times R for allreduce,
    which splits every piece again over the ranks; times four for the pipelined chains)."""
    channels = ring_channels(topology).channels
    if kind is Kind.ALLREDUCE:
        return topology.num_ranks * channels
    if kind in (Kind.BROADCAST, Kind.REDUCE):
        return BROADCAST_CHUNKS_PER_CHANNEL * channels
    return channels


class _Steps:
    """Logical steps with, for every transfer, the ring hop it takes (channel, position)."""

    def __init__(self) -> None:
        self.steps: list[tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[np.ndarray], list[np.ndarray]]] = []

    def step(self) -> None:
        self.steps.append(([], [], [], [], []))

    def add(self, src, dst, chunk, channel: int, hop) -> None:
        cols = self.steps[-1]
        n = len(src)
        for col, values in zip(cols, (src, dst, chunk, np.full(n, channel), np.broadcast_to(hop, (n,)))):
            col.append(np.asarray(values, dtype=np.int64))

    def emit(self, topology: Topology, collective: Collective, plan: RingChannels, router: Router, params: dict) -> Schedule:
        cat = [[np.concatenate(c) if c else np.zeros(0, dtype=np.int64) for c in step] for step in self.steps]
        if plan.relayed:
            logical: list[LogicalStep] = [logical_step(s, d, c) for s, d, c, _, _ in cat]
            return lower_copies(topology, collective, logical, NAME, params, router)
        builder = ScheduleBuilder(collective, topology, NAME, params)
        route_ids = np.array([[builder.route_id(via) for via in hops] for hops in plan.routes], dtype=np.int64)
        for src, dst, chunk, channel, hop in cat:
            if src.size:
                builder.add_step_arrays(src, dst, chunk, OP_COPY, route_ids[channel, hop])
        return builder.build()


def allgather(topology: Topology, collective: Collective, router: Router) -> Schedule:
    plan = ring_channels(topology, router)
    r, k = collective.num_ranks, collective.chunks_per_piece
    shares = channel_chunks(k, plan.channels)
    pos = np.arange(r)
    steps = _Steps()
    for s in range(r - 1):
        steps.step()
        for c, ring in enumerate(plan.rings):
            idx = shares[c]
            if idx.size == 0:
                continue
            order = np.asarray(ring, dtype=np.int64)
            owners = order[(pos - s) % r]
            steps.add(
                np.repeat(order, idx.size),
                np.repeat(order[(pos + 1) % r], idx.size),
                (owners[:, None] * k + idx[None, :]).ravel(),
                c,
                np.repeat(pos, idx.size),
            )
    return steps.emit(topology, collective, plan, router, plan.params())


def broadcast(topology: Topology, collective: Collective, router: Router) -> Schedule:
    plan = ring_channels(topology, router)
    r, k, root = collective.num_ranks, collective.chunks_per_piece, collective.root
    shares = channel_chunks(k, plan.channels)
    longest = max(len(idx) for idx in shares)
    steps = _Steps()
    for s in range(longest + r - 2):
        steps.step()
        for c, ring in enumerate(plan.rings):
            idx = shares[c]
            start = ring.index(root)
            chain = np.roll(np.asarray(ring, dtype=np.int64), -start)
            hops = np.arange(r - 1)
            j = s - hops
            live = (j >= 0) & (j < idx.size)
            h = hops[live]
            steps.add(chain[h], chain[h + 1], idx[j[live]], c, (h + start) % r)
    return steps.emit(topology, collective, plan, router, plan.params())


BUILDERS = with_reductions(NAME, {Kind.ALLGATHER: allgather, Kind.BROADCAST: broadcast})

COLLECTIVES = frozenset(BUILDERS)
synthesize = dispatcher(NAME, BUILDERS)


METHOD = Method(
    name=NAME,
    summary="NCCL's multi-channel rings: several rings over disjoint link capacity, each a share of the data",
    family="nccl",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=one_chunk,
    topology_chunks=default_chunks,
)
