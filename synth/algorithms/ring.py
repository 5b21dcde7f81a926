"""Ring algorithms over a ring order that follows the topology's fastest links.

allgather: in step s, the rank at ring position p forwards the piece of position p − s to p + 1
(R − 1 steps, every link of the ring busy with one piece per step: bandwidth-optimal on a ring).
reduce-scatter: its dual (the same ring backwards, reducing). allreduce: reduce-scatter then
allgather (2(R − 1) steps, NCCL's ring). broadcast: a pipelined chain from the root, chunk i
crossing hop h in step i + h (k + R − 2 steps). reduce: its dual. gather/scatter: pipelined chains
toward/from the root (R − 1 steps). Hops between ring neighbours without a switch-only path are
relayed (`synth.algorithms.engines.lowering`).
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.builders import dispatcher, with_reductions
from synth.algorithms.engines.lowering import LogicalStep, logical_step, lower_copies
from synth.collective import Collective, Kind
from synth.method import Method, ranks_for_allreduce
from synth.routing import Router, ring_order
from synth.schedule import Schedule
from synth.topology import Topology

NAME = "ring"


def _order(topology: Topology, router: Router) -> tuple[np.ndarray, dict]:
    order, direct = ring_order(topology, router)
    return np.asarray(order, dtype=np.int64), {"ring": order, "relayed": not direct}


def _piece_chunks(owners: np.ndarray, k: int) -> np.ndarray:
    """Chunk ids of the pieces of ``owners`` (k per piece), owner-major."""
    return (owners[:, None] * k + np.arange(k)[None, :]).ravel()


def allgather(topology: Topology, collective: Collective, router: Router) -> Schedule:
    order, params = _order(topology, router)
    r, k = collective.num_ranks, collective.chunks_per_piece
    pos = np.arange(r)
    steps: list[LogicalStep] = []
    for s in range(r - 1):
        senders = order[pos]
        receivers = order[(pos + 1) % r]
        owners = order[(pos - s) % r]
        steps.append(logical_step(np.repeat(senders, k), np.repeat(receivers, k), _piece_chunks(owners, k)))
    return lower_copies(topology, collective, steps, NAME, params, router)


def _chain_from_root(order: np.ndarray, root: int) -> np.ndarray:
    """Ring order rotated to start at the root."""
    start = int(np.flatnonzero(order == root)[0])
    return np.roll(order, -start)


def broadcast(topology: Topology, collective: Collective, router: Router) -> Schedule:
    order, params = _order(topology, router)
    chain = _chain_from_root(order, collective.root)
    r, k = collective.num_ranks, collective.chunks_per_piece
    steps: list[LogicalStep] = []
    for s in range(k + r - 2):
        hops = np.arange(r - 1)
        chunk = s - hops
        live = (chunk >= 0) & (chunk < k)
        steps.append(logical_step(chain[hops[live]], chain[hops[live] + 1], chunk[live]))
    return lower_copies(topology, collective, steps, NAME, params, router)


def gather(topology: Topology, collective: Collective, router: Router) -> Schedule:
    order, params = _order(topology, router)
    r, k = collective.num_ranks, collective.chunks_per_piece
    chain = np.roll(_chain_from_root(order, collective.root), -1)  # ends at the root
    steps: list[LogicalStep] = []
    for s in range(r - 1):
        i = np.arange(s, r - 1)  # chain[i] forwards the piece of chain[i - s]
        steps.append(logical_step(np.repeat(chain[i], k), np.repeat(chain[i + 1], k), _piece_chunks(chain[i - s], k)))
    return lower_copies(topology, collective, steps, NAME, params, router)


def scatter(topology: Topology, collective: Collective, router: Router) -> Schedule:
    order, params = _order(topology, router)
    r, k = collective.num_ranks, collective.chunks_per_piece
    chain = _chain_from_root(order, collective.root)  # chain[0] is the root
    steps: list[LogicalStep] = []
    for s in range(r - 1):
        i = np.arange(0, s + 1)  # chain[i] forwards the piece of chain[r - 1 - s + i]
        target = r - 1 - s + i
        live = target >= i + 1
        i, target = i[live], target[live]
        steps.append(logical_step(np.repeat(chain[i], k), np.repeat(chain[i + 1], k), _piece_chunks(chain[target], k)))
    return lower_copies(topology, collective, steps, NAME, params, router)


BUILDERS = with_reductions(
    NAME,
    {Kind.ALLGATHER: allgather, Kind.BROADCAST: broadcast, Kind.GATHER: gather, Kind.SCATTER: scatter},
)


COLLECTIVES = frozenset(BUILDERS)
synthesize = dispatcher(NAME, BUILDERS)


METHOD = Method(
    name=NAME,
    summary="ring over the fastest links (allreduce = reduce-scatter + allgather, NCCL's ring)",
    family="classic",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=ranks_for_allreduce,
)
