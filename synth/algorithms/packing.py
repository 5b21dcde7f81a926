"""Tree-packing synthesizer: the optimal allgather throughput, reached by spanning trees, pipelined.

The optimum is exact: size/R · max over node sets S of |ranks outside S| / in(S), computed by
parametric max-flow (`synth.bounds`). Trees reach it (Edmonds' branching theorem):
`synth.algorithms._trees` packs k spanning out-trees from every rank, as few as keep the rate
within 1% of the optimum, through switches by pairing a unit into a switch with one out of it
(edge splitting), and `synth.algorithms._pipeline` turns them into steps, each root's piece cut
into P chunks that follow each other down the trees.

P comes from the message size: more chunks shorten the pipeline's fill and drain but pay a
latency per step. The breadth-first trees (one per root, fewest hops, every link shared as it
comes) are the other candidate: at small sizes their few steps beat the deep throughput trees.
The schedule with the smallest step-synchronous time at the size is kept; its ``params`` say
which trees, how many per root, their rate against the optimum, and P.

allgather and broadcast (from the root) are packed directly; reduce-scatter and reduce are their
duals (in-trees on the reversed topology, run backwards with reduces); allreduce is
reduce-scatter then allgather, with the chunk count chosen for the two together.

Options: ``size`` (bytes, default 1 GiB): the size the chunk count and trees are chosen for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from synth.algorithms._channels import channels_for
from synth.algorithms._pipeline import tree_schedule
from synth.algorithms._timing import sync_time_us
from synth.algorithms._trees import Packing, shallow
from synth.algorithms._trees import packings as tree_packings
from synth.collective import DUAL, Collective, Kind
from synth.errors import NotApplicable
from synth.routing import Router, router_for
from synth.schedule import Schedule
from synth.topology import Topology
from synth.transform import concat, dual_reduction

METHOD = "packing"
OPTIONS = ("size",)
REFERENCE_SIZE = 1 << 30
#: chunk counts are not tried beyond schedules of this many transfers
TRANSFER_BUDGET = 3_000_000
COLLECTIVES = frozenset({Kind.ALLGATHER, Kind.BROADCAST, Kind.REDUCE_SCATTER, Kind.REDUCE, Kind.ALLREDUCE})


def packings(topology: Topology, kind: Kind, root: int | None) -> list[Packing]:
    """The candidate trees: the throughput packings (fewest trees; shallower variants on up to
    64 ranks, where growing them is cheap) and the breadth-first trees."""
    found = tree_packings(topology, kind, root, variants=topology.num_ranks <= 64 or kind is Kind.BROADCAST)
    out = list(found)
    if found[0].shape != "shallow":
        out.append(shallow(topology, kind, root))
    return out


def chunk_counts(packing: Packing, kind: Kind, ranks: int) -> list[int]:
    """Chunks per root worth trying: multiples of the trees per root, doubling."""
    k = packing.trees_per_root
    per_chunk = (ranks - 1) * (ranks if kind is Kind.ALLGATHER else 1)
    out = []
    m = 1
    while m <= 256 and (not out or per_chunk * k * m <= TRANSFER_BUDGET):
        out.append(k * m)
        m *= 2
    return out


def _params(packing: Packing, size: int | None, collective: Collective) -> dict:
    params = packing.summary()
    params["chunks_per_root"] = collective.chunks_per_piece if collective.kind is Kind.ALLGATHER else collective.num_chunks
    if size is not None:
        params["chosen_at_size"] = size
    return params


def _best_tree_schedule(topology: Topology, kind: Kind, root: int | None, chunks: int | None, size: int) -> Schedule:
    """The fastest pipelined schedule at ``size`` over the candidate trees (``chunks`` fixed, or
    tried from `chunk_counts`)."""
    channels = channels_for(topology)
    r = topology.num_ranks
    best: tuple[float, int, Schedule] | None = None
    for packing in packings(topology, kind, root):
        counts = [chunks] if chunks is not None else chunk_counts(packing, kind, r)
        own = float("inf")  # this packing's best so far: stop once more chunks stop helping it
        misses = 0
        for count in counts:
            collective = Collective(kind, r, count, root)
            schedule = tree_schedule(topology, channels, packing, collective, METHOD, _params(packing, size, collective))
            time = sync_time_us(schedule, topology, [size])[0]
            if best is None or (time, schedule.num_transfers) < best[:2]:
                best = (time, schedule.num_transfers, schedule)
            if time < own:
                own, misses = time, 0
            else:
                misses += 1
                if misses == 2:
                    break
    assert best is not None
    return best[2]


def synthesize(
    topology: Topology,
    collective: Collective,
    router: Router | None = None,
    options: Mapping[str, Any] | None = None,
) -> Schedule:
    """Packed-tree schedule for ``collective`` (see the module docstring)."""
    options = dict(options or {})
    kind = collective.kind
    if kind not in COLLECTIVES:
        raise NotApplicable(f"{METHOD} does not serve {kind.value} (it serves {', '.join(sorted(k.value for k in COLLECTIVES))})")
    size = options.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        raise ValueError(f"packing option size must be a positive integer, got {size!r}")
    at = size if size is not None else REFERENCE_SIZE
    chunks = None if options.get("chunks", collective.chunks_per_piece) is None else collective.chunks_per_piece
    router = router or router_for(topology)

    def forward(chosen: int | None):
        def build(topo: Topology, coll: Collective, _router: Router) -> Schedule:
            return _best_tree_schedule(topo, coll.kind, coll.root, chosen, at)

        return build

    if kind in (Kind.ALLGATHER, Kind.BROADCAST):
        return forward(chunks)(topology, collective, router)
    if kind in (Kind.REDUCE_SCATTER, Kind.REDUCE):
        return _dual(topology, kind, collective.root, forward(chunks))
    return _allreduce(topology, collective, router, chunks, at, forward)


def _dual(topology: Topology, kind: Kind, root: int | None, build) -> Schedule:
    """Reduce-scatter / reduce: in-trees, as the allgather / broadcast of the reversed topology
    run backwards with reduces (its chunk count is whatever the forward schedule chose)."""
    reversed_topology = topology.reversed()
    r = topology.num_ranks
    forward = build(reversed_topology, Collective(DUAL[kind], r, 1, root), router_for(reversed_topology))
    reduction = Collective(kind, r, forward.collective.chunks_per_piece, root)
    params = dict(forward.params)
    params["dual_of"] = DUAL[kind].value
    return dual_reduction(forward, reduction, METHOD, params)


def _allreduce(topology: Topology, collective: Collective, router: Router, chunks: int | None, at: int, forward) -> Schedule:
    """Reduce-scatter then allgather with the same chunks per piece: the given one, or the one
    whose two phases together are fastest at the size."""
    r = topology.num_ranks
    if chunks is not None:
        if chunks % r:
            raise NotApplicable(
                f"{METHOD} allreduce runs reduce-scatter then allgather, so --chunks must be a multiple of the rank count {r}"
            )
        phases = {chunks // r: (None, None)}
    else:
        # each phase's own best chunk count, and the other phase at the same count
        ag = forward(None)(topology, Collective(Kind.ALLGATHER, r, 1), router)
        rs = _dual(topology, Kind.REDUCE_SCATTER, None, forward(None))
        phases = {ag.collective.chunks_per_piece: (None, ag)}
        phases.setdefault(rs.collective.chunks_per_piece, (rs, None))
        if rs.collective.chunks_per_piece == ag.collective.chunks_per_piece:
            phases[ag.collective.chunks_per_piece] = (rs, ag)
    best: tuple[float, int, Schedule] | None = None
    for per_piece, (rs, ag) in sorted(phases.items()):
        rs = rs or _dual(topology, Kind.REDUCE_SCATTER, None, forward(per_piece))
        ag = ag or forward(per_piece)(topology, Collective(Kind.ALLGATHER, r, per_piece), router)
        params = {"phases": ["reduce-scatter", "allgather"], "reduce_scatter": dict(rs.params), "allgather": dict(ag.params)}
        schedule = concat([rs, ag], Collective(Kind.ALLREDUCE, r, r * per_piece), METHOD, params)
        time = sync_time_us(schedule, topology, [at])[0]
        if best is None or (time, schedule.num_transfers) < best[:2]:
            best = (time, schedule.num_transfers, schedule)
    assert best is not None
    return best[2]
