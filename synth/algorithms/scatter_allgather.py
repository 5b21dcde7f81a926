"""Broadcast as scatter + allgather (van de Geijn's; MPICH's and Open MPI's long-message
broadcast), pipelined in waves; reduce is its dual (reduce-scatter + gather, Rabenseifner's reduce).

The root deals the k chunks round-robin to the other R − 1 ranks, the carriers (chunk c to the
``c mod (R − 1)``-th, in wave ``c // (R − 1)``) and hands wave w out in step w; a carrier gives each
chunk it received to every other non-root rank in the next step. The root sends every byte once
and every rank receives every byte once, where a binomial tree sends the whole message ⌈log₂R⌉
times one after the other: on a switch this takes about 2·size/B for any R, against ⌈log₂R⌉·size/B.
Waves overlap the two phases: W waves take W + 1 steps and about (1 + 1/W)·size/B.

A closing chunk: with k = W·(R − 1) + 1 chunks (W ≥ 1), the last chunk is not dealt but sent by the
root straight to every other rank in the last step, beside the carriers' sharing of wave W − 1. On
a switch every step then moves R − 1 chunks out of the root and at most R − 1 into each rank, and
W + 1 steps take (W + 1)·(α + (R − 1)·size/(k·B)) = (W + 1)·α + (1 + (R − 2)/((R − 1)·W + 1))·size/B:
the `root-pipeline` bound with N = W + 1 steps out of the root, the last of them among them
(docs/bounds.md), so with the best W it is the fastest broadcast out of a root behind one link to a
switch whose ranks take in as fast (dgx-a100, 16 MiB: 68.11 µs against 68.22 without it).

One wave (k = R − 1, two steps) by default; with the ``size`` option the number of waves (1 … 128)
is chosen by predicted time. A pair of ranks without a switch path between them is relayed
(`lower_copies`), so this is for switched machines (NVSwitch boxes, PCIe trees); elsewhere the
other methods are faster, and ``compare`` and ``auto`` show it.
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.builders import dispatcher, with_reductions
from synth.algorithms.engines.lowering import LogicalStep, logical_step, lower_copies
from synth.algorithms.engines.size_tuning import fastest, size_option, timed_sweep
from synth.collective import Collective, Kind
from synth.method import Method, one_chunk
from synth.routing import Router, router_for
from synth.schedule import Schedule
from synth.topology import Topology

NAME = "scatter-allgather"
#: waves tried with the ``size`` option
WAVE_CHOICES = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128)
#: the sweep tries waves only up to about this many transfers per schedule (W·(R − 1)²): on 128
#: ranks 64 waves, as many as a fine pipeline there needs; on a box of 8, every choice
SWEEP_TRANSFERS = 1_100_000
#: above this many transfers per schedule only powers of two are tried (the sweep's cost grows
#: with the transfers; on machines of more than 40 ranks the fine steps between them matter little)
FINE_TRANSFERS = 100_000
OPTIONS = frozenset({"size"})


def carriers(num_ranks: int, root: int) -> np.ndarray:
    """The ranks the root deals the chunks to: every other one (the root alone if it is alone)."""
    others = np.array([v for v in range(num_ranks) if v != root], dtype=np.int64)
    return others if others.size else np.array([root], dtype=np.int64)


def closes(num_chunks: int, num_carriers: int) -> bool:
    """Whether a broadcast of ``num_chunks`` chunks ends with a closing chunk (the module's
    docstring): one chunk beyond whole waves of at least one, with at least two carriers."""
    return num_carriers > 1 and num_chunks > num_carriers and num_chunks % num_carriers == 1


def _broadcast_steps(num_ranks: int, root: int, k: int) -> list[LogicalStep]:
    dealt = carriers(num_ranks, root)
    n = dealt.size
    closing = closes(k, n)
    waved = k - 1 if closing else k
    chunk = np.arange(waved, dtype=np.int64)
    owner, wave = dealt[chunk % n], chunk // n
    waves = int(wave.max()) + 1 if waved else 0
    steps = []
    for t in range(waves + 1):
        handed = chunk[(wave == t) & (owner != root)]
        shared = chunk[wave == t - 1]
        # every carrier but the chunk's own owner gets it from that owner
        src = np.repeat(owner[shared], n)
        dst = np.tile(dealt, shared.size)
        keep = dst != src
        # the closing chunk: from the root to every carrier in the last step
        direct = dealt if closing and t == waves else np.empty(0, dtype=np.int64)
        steps.append(
            logical_step(
                np.concatenate([np.full(handed.size + direct.size, root, dtype=np.int64), src[keep]]),
                np.concatenate([owner[handed], direct, dst[keep]]),
                np.concatenate([handed, np.full(direct.size, k - 1, dtype=np.int64), np.repeat(shared, n)[keep]]),
            )
        )
    return steps


def broadcast(topology: Topology, collective: Collective, router: Router) -> Schedule:
    """Scatter to the other ranks, then everyone shares its part (see the module's docstring)."""
    r, k, root = collective.num_ranks, collective.chunks_per_piece, collective.root
    params = {"phases": ["root deals the chunks to the other ranks", "each shares its chunks with the rest"]}
    return lower_copies(topology, collective, _broadcast_steps(r, root, k), NAME, params, router)


BUILDERS = with_reductions(NAME, {Kind.BROADCAST: broadcast})
COLLECTIVES = frozenset(BUILDERS)
_dispatch = dispatcher(NAME, BUILDERS)


def default_chunks(kind: Kind, topology: Topology) -> int:
    """One chunk per carrier: a single wave."""
    return max(1, topology.num_ranks - 1)


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options) -> Schedule:
    """The scatter-allgather broadcast or reduce. With ``size`` (bytes) and no chunk count from the
    caller, the number of waves among `WAVE_CHOICES` (up to `SWEEP_TRANSFERS`), each with and without a closing chunk, whose
    schedule is fastest at that size (step-synchronous model), tried in increasing order until two
    in a row are slower."""
    size = size_option(NAME, options, OPTIONS)
    router = router or router_for(topology)
    if size is None or options.get("requested_chunks") is not None:
        return _dispatch(topology, collective, router)
    n = carriers(collective.num_ranks, collective.root or 0).size

    def chunks(k: int) -> Schedule:
        return _dispatch(topology, Collective(collective.kind, collective.num_ranks, k, collective.root), router)

    def build(waves: int) -> list[Schedule]:
        closing = [chunks(n * waves + 1)] if closes(n * waves + 1, n) else []
        return [chunks(n * waves), *closing]

    choices = [
        w for w in WAVE_CHOICES if w == 1 or w * n * n <= FINE_TRANSFERS or (w & (w - 1) == 0 and w * n * n <= SWEEP_TRANSFERS)
    ]
    return fastest(timed_sweep(choices, build, topology, size, patience=2))


METHOD = Method(
    name=NAME,
    summary="broadcast = scatter + allgather (van de Geijn, MPICH's long messages), pipelined; reduce = its dual",
    family="classic",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=one_chunk,
    topology_chunks=default_chunks,
    options=OPTIONS,
    chooses_chunks=True,
)
