"""Tree-packing synthesizer: the optimal allgather throughput, reached by spanning trees, pipelined.

The optimum is exact: size/R · max over node sets S of |ranks outside S| / in(S), computed by
parametric max-flow (`synth.bounds`). Trees reach it (Edmonds' branching theorem):
`synth.algorithms.engines.tree_packing` packs k spanning out-trees from every rank, as few as keep the rate
within 1% of the optimum, through switches by pairing a unit into a switch with one out of it
(edge splitting), and `synth.algorithms.engines.tree_pipeline` turns them into steps, each root's piece cut
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

import math
from typing import Any

import numpy as np

from synth.algorithms.engines.composition import aligned_overlap
from synth.algorithms.engines.path_channels import channels_for
from synth.algorithms.engines.size_tuning import predicted_us, size_option
from synth.algorithms.engines.slice_ramp import StageLoads, lower_bound_us, ramps, stage_loads
from synth.algorithms.engines.tree_packing import Packing, disjoint, shallow
from synth.algorithms.engines.tree_packing import packings as tree_packings
from synth.algorithms.engines.tree_pipeline import chunk_shares, tree_schedule
from synth.collective import DUAL, Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, ranks_for_allreduce
from synth.routing import Router, router_for
from synth.schedule import Schedule
from synth.topology import Topology
from synth.transform import concat, dual_reduction

NAME = "packing"
OPTIONS = frozenset({"size"})
REFERENCE_SIZE = 1 << 30
#: (trees, chunk count) pairs built and timed exactly, the best estimated ones
EXACT_CANDIDATES = 4
#: chunk counts are not tried beyond schedules of this many transfers
TRANSFER_BUDGET = 3_000_000
#: rounds (one step's chunks of the equal pipeline) of a ramped candidate: fine enough that the
#: first slices of a ramp are a small share of the middle ones
RAMP_ROUNDS = 1024
#: a ramp is skipped when its lower bound exceeds the time to beat by more than this relative
#: rounding (the bound sums the same terms as the simulator in another order)
RAMP_SLACK = 1e-9
#: equal pipelines of fewer transfers are built and timed rather than bounded first (`equal_bound_us`)
BOUND_FROM_TRANSFERS = 1 << 17
COLLECTIVES = frozenset({Kind.ALLGATHER, Kind.BROADCAST, Kind.REDUCE_SCATTER, Kind.REDUCE, Kind.ALLREDUCE})


def packings(topology: Topology, kind: Kind, root: int | None) -> list[Packing]:
    """The candidate trees: the throughput packings (fewest trees; shallower variants on up to
    64 ranks, where growing them is cheap), the breadth-first trees and, for broadcasts on machines
    without switches, a few arc-disjoint shallow trees (`disjoint`)."""
    found = tree_packings(topology, kind, root, variants=topology.num_ranks <= 64 or kind is Kind.BROADCAST)
    out = list(found)
    if found[0].shape != "shallow":
        out.append(shallow(topology, kind, root))
    return out + list(disjoint(topology, kind, root))


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


def estimate_us(topology: Topology, channels, packing: Packing, kind: Kind, chunks: int, size: int) -> float:
    """A quick upper estimate of the pipelined schedule's time: every step as long as a full one
    (each tree carrying a chunk on every arc), times the number of steps."""
    loads = _loads(topology, channels, packing)
    r = topology.num_ranks
    chunk_bytes = size / (r * chunks) if kind is Kind.ALLGATHER else size / chunks
    per_step = loads["alpha"] + chunk_bytes * loads["us_per_byte"]
    steps = max(
        -(-count // packing.classes[index].multiplicity) + packing.classes[index].height - 1
        for root in packing.roots
        for index, count in chunk_shares(packing, root, chunks)
        if count
    )
    return steps * per_step


def _loads(topology: Topology, channels, packing: Packing) -> dict:
    """The busiest link's µs per chunk byte when every tree carries a chunk on every arc, and the
    largest latency of a channel the trees use (cached on the packing object)."""
    cached = packing.__dict__.get("_loads")
    if cached is None:
        load = np.zeros(len(topology.links))
        alpha = 0.0
        for cls in packing.classes:
            arcs = cls.parent[cls.parent >= 0]
            if arcs.size:
                _, links = _links(channels, arcs)
                np.add.at(load, links, cls.multiplicity)
                alpha = max(alpha, float(channels.alpha[arcs].max()))
        us_per_byte = float((load / (topology.bandwidth_array * 1e3)).max()) if load.size else 0.0
        cached = packing.__dict__["_loads"] = {"alpha": alpha, "us_per_byte": us_per_byte}
    return cached


def _links(channels, chans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo = channels.link_ptr[chans]
    lens = channels.link_ptr[chans + 1] - lo
    owner = np.repeat(np.arange(chans.size), lens)
    offset = np.arange(owner.size) - np.repeat(np.cumsum(lens) - lens, lens)
    return owner, channels.link_ids[lo[owner] + offset]


def _best_tree_schedule(
    topology: Topology, kind: Kind, root: int | None, chunks: int | None, size: int, ramp: bool = True
) -> Schedule:
    """The fastest pipelined schedule at ``size`` over the candidate trees: every (trees, chunk
    count) pair is estimated (`estimate_us`), and the few best are built and timed exactly (the
    first of the fastest, fewest transfers breaking ties); the best one's trees then get ramped
    slices too (`ramped`), kept only if faster still.

    A candidate that certainly takes longer than another is not built: the one with the least
    lower bound (`equal_bound_us`) is built first, and a candidate whose bound exceeds its time
    by more than rounding (`RAMP_SLACK`) could not be the fastest. Same choice as building all."""
    channels = channels_for(topology)
    r = topology.num_ranks
    options = []
    for packing in packings(topology, kind, root):
        counts = [chunks] if chunks is not None else chunk_counts(packing, kind, r)
        options += [(estimate_us(topology, channels, packing, kind, c, size), i, packing, c) for i, c in enumerate(counts)]
    options.sort(key=lambda o: (o[0], o[1]))
    chosen = [(packing, count) for _, _, packing, count in options[:EXACT_CANDIDATES]]
    bounds = [equal_bound_us(topology, channels, packing, kind, root, count, size) for packing, count in chosen]
    first = min(range(len(chosen)), key=lambda j: (bounds[j], j))
    best: tuple[float, int, int, Schedule, Packing] | None = None  # time, transfers, candidate, ...
    limit = math.inf
    for j in [first] + [j for j in range(len(chosen)) if j != first]:
        if bounds[j] > limit:
            continue  # slower than the first one built: it could not be chosen
        packing, count = chosen[j]
        collective = Collective(kind, r, count, root)
        schedule = tree_schedule(topology, channels, packing, collective, NAME, _params(packing, size, collective))
        time = predicted_us(schedule, topology, [size])[0]
        if j == first:
            limit = time * (1 + RAMP_SLACK)
        if best is None or (time, schedule.num_transfers, j) < best[:3]:
            best = (time, schedule.num_transfers, j, schedule, packing)
    assert best is not None
    best = (best[0], best[1], best[3], best[4])
    for schedule in ramped(topology, channels, best[3], kind, root, chunks, size, best[0]) if ramp else []:
        time = predicted_us(schedule, topology, [size])[0]
        if (time, schedule.num_transfers) < best[:2]:
            best = (time, schedule.num_transfers, schedule, best[3])
    return best[2]


def _template_loads(
    topology: Topology, channels, packing: Packing, kind: Kind, root: int | None
) -> tuple[int, StageLoads] | None:
    """The trees' pattern for one round (μ chunks per class, k per root) and its per-step link
    loads (`stage_loads`), cached on the packing; None unless every root's classes hold the
    same μ total (the round is then the same for all roots)."""
    cached = packing.__dict__.get("_template_loads")
    if cached is None:
        per_round = {sum(c.multiplicity for c in packing.classes if c.root == x) for x in packing.roots}
        if len(per_round) != 1:
            cached = (0, None)
        else:
            k = per_round.pop()
            template = tree_schedule(topology, channels, packing, Collective(kind, topology.num_ranks, k, root), NAME, {})
            cached = (k, stage_loads(template, topology))
        packing.__dict__["_template_loads"] = cached
    return None if cached[1] is None else cached


def equal_bound_us(topology: Topology, channels, packing: Packing, kind: Kind, root: int | None, count: int, size: int) -> float:
    """A lower bound of the time at ``size`` of the packing's equal pipeline of ``count`` chunks
    per root, without building it (0 where none is known). Where every root's classes hold k
    trees and k divides ``count``, that pipeline is the one-round pattern repeated in count/k
    slices of one round each (`tree_schedule` with those slices gives the same transfers), so
    `lower_bound_us` of the pattern's loads applies (see `ramped`). Only for pipelines of at least
    `BOUND_FROM_TRANSFERS` transfers: smaller ones are built faster than the pattern's loads."""
    r = topology.num_ranks
    if count * (r - 1) * (r if kind is Kind.ALLGATHER else 1) < BOUND_FROM_TRANSFERS:
        return 0.0
    found = _template_loads(topology, channels, packing, kind, root)
    if found is None or count % found[0]:
        return 0.0
    k, loads = found
    chunk_bytes = size / (count * (r if kind is Kind.ALLGATHER else 1))
    return lower_bound_us(loads, (1,) * (count // k), chunk_bytes)


def ramped(
    topology: Topology,
    channels,
    packing: Packing,
    kind: Kind,
    root: int | None,
    chunks: int | None,
    size: int,
    beat_us: float = math.inf,
) -> list[Schedule]:
    """The packing's pipelined schedules with ramped slices (`synth.algorithms.engines.slice_ramp`):
    the trees' pattern for one round (μ chunks per class) is the template, an LP over its per-step
    link loads sizes the slices in whole rounds of `RAMP_ROUNDS` (fewer where `TRANSFER_BUDGET`
    asks; the rounds of the chunks asked for, if any). Where the trees' first and last arcs are
    faster than their bottleneck (the NVSwitch deal and sharing around a box's NICs), the fill
    and drain shrink to a few short steps. Only where every root's classes hold the same μ total
    (the round is then the same for all roots).

    A ramp is not built when it certainly takes longer than ``beat_us`` at ``size`` (the best
    time the caller has, which it keeps on a tie only for fewer transfers): its time is at least
    the LP's objective at its whole slice sizes (`lower_bound_us`: every transfer over a link in
    a step takes at least the largest latency of the paths over it there plus the link's bytes
    over its bandwidth), so a ramp whose objective exceeds ``beat_us`` by more than rounding
    (`RAMP_SLACK`) could not be kept. Those schedules were the largest the method built (a
    128-rank allgather's ramp: 4 million transfers)."""
    r = topology.num_ranks
    found = _template_loads(topology, channels, packing, kind, root)
    if found is None:
        return []
    k, loads = found
    per_chunk = (r - 1) * (r if kind is Kind.ALLGATHER else 1)
    if chunks is not None:
        if chunks % k:
            return []
        rounds = chunks // k
    else:
        rounds = RAMP_ROUNDS
        while rounds > 1 and per_chunk * k * rounds > TRANSFER_BUDGET:
            rounds //= 2
    if rounds < 2:
        return []
    chunk_bytes = size / (k * rounds * (r if kind is Kind.ALLGATHER else 1))
    collective = Collective(kind, r, k * rounds, root)
    out = []
    for slices in ramps(loads, rounds, chunk_bytes):
        if lower_bound_us(loads, slices, chunk_bytes) > beat_us * (1 + RAMP_SLACK):
            continue
        params = {**_params(packing, size, collective), "slices": list(slices)}
        out.append(tree_schedule(topology, channels, packing, collective, NAME, params, slices))
    return out


def synthesize(
    topology: Topology,
    collective: Collective,
    router: Router | None = None,
    **options: Any,
) -> Schedule:
    """Packed-tree schedule for ``collective`` (see the module docstring; ``requested_chunks``
    None lets it choose the chunk count for ``size``)."""
    size = size_option(NAME, options, OPTIONS)
    kind = collective.kind
    if kind not in COLLECTIVES:
        raise NotApplicable(f"{NAME} does not serve {kind.value} (it serves {', '.join(sorted(k.value for k in COLLECTIVES))})")
    at = size if size is not None else REFERENCE_SIZE
    chunks = None if options.get("requested_chunks", collective.chunks_per_piece) is None else collective.chunks_per_piece
    router = router or router_for(topology)
    # forward schedules built in this call, by (topology object, collective, chunks, ramp): on a
    # machine that is its own reversal (`_reversal`) allreduce's reduce-scatter phase is the dual
    # of the very allgather schedule its allgather phase chose, built once
    built: dict[tuple, Schedule] = {}

    def forward(chosen: int | None, ramp: bool = True):
        def build(topo: Topology, coll: Collective, _router: Router) -> Schedule:
            key = (id(topo), coll.kind, coll.root, chosen, ramp)
            if key not in built:
                built[key] = _best_tree_schedule(topo, coll.kind, coll.root, chosen, at, ramp)
            return built[key]

        return build

    if kind in (Kind.ALLGATHER, Kind.BROADCAST):
        return forward(chunks)(topology, collective, router)
    if kind in (Kind.REDUCE_SCATTER, Kind.REDUCE):
        return _dual(topology, kind, collective.root, forward(chunks))
    # allreduce without ramped slices: its phases share one chunk count, and a ramp that wins a
    # phase alone at its own count can leave the overlapped pair slower (pcie-asym 6 GPUs 1 GiB:
    # 108.8 -> 127.2 ms)
    return _allreduce(topology, collective, router, chunks, at, lambda chosen: forward(chosen, ramp=False))


def _dual(topology: Topology, kind: Kind, root: int | None, build) -> Schedule:
    """Reduce-scatter / reduce: in-trees, as the allgather / broadcast of the reversed topology
    run backwards with reduces (its chunk count is whatever the forward schedule chose)."""
    reversed_topology = _reversal(topology)
    r = topology.num_ranks
    forward = build(reversed_topology, Collective(DUAL[kind], r, 1, root), router_for(reversed_topology))
    reduction = Collective(kind, r, forward.collective.chunks_per_piece, root)
    params = dict(forward.params)
    params["dual_of"] = DUAL[kind].value
    return dual_reduction(forward, reduction, NAME, params)


def _reversal(topology: Topology) -> Topology:
    """The reversed topology, or ``topology`` itself where reversing changes nothing (every link's
    reverse is a link of the same bandwidth and latency, as on most machines: `Topology.reversed`
    keeps the name and sorts the links, so the two compare equal field by field). Everything the
    duals build depends only on those fields, so the schedules are the same either way; on the
    topology itself the trees already packed for its allgather or broadcast (cached on it) and the
    forward schedules built in the same call are used again instead of being grown a second time."""
    reversed_topology = topology.reversed()
    return topology if reversed_topology == topology else reversed_topology


def _allreduce(topology: Topology, collective: Collective, router: Router, chunks: int | None, at: int, forward) -> Schedule:
    """Reduce-scatter then allgather with the same chunks per piece: the given one, or the one
    whose two phases together are fastest at the size."""
    r = topology.num_ranks
    if chunks is not None:
        if chunks % r:
            raise NotApplicable(
                f"{NAME} allreduce runs reduce-scatter then allgather, so --chunks must be a multiple of the rank count {r}"
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
        whole = Collective(Kind.ALLREDUCE, r, r * per_piece)
        params = {"phases": ["reduce-scatter", "allgather"], "reduce_scatter": dict(rs.params), "allgather": dict(ag.params)}
        for schedule in (
            concat([rs, ag], whole, NAME, params),
            aligned_overlap(rs, ag, topology, whole, NAME, {**params, "overlapped": True}),
        ):
            time = predicted_us(schedule, topology, [at])[0]
            if best is None or (time, schedule.num_transfers) < best[:2]:
                best = (time, schedule.num_transfers, schedule)
    assert best is not None
    return best[2]


METHOD = Method(
    name=NAME,
    summary="spanning trees at the optimal allgather/broadcast throughput (exact max-flow bound), pipelined for the size",
    family="scalable",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=ranks_for_allreduce,
    options=OPTIONS,
    chooses_chunks=True,
)
