"""What every method is built from: the dispatcher from a collective to its builder, and the
builders methods derive: reduce and reduce-scatter by duality, allreduce as reduce-scatter +
allgather."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from synth.collective import DUAL, Collective, Kind
from synth.errors import NotApplicable
from synth.routing import Router, router_for
from synth.schedule import Schedule
from synth.topology import Topology
from synth.transform import concat, dual_reduction

Builder = Callable[[Topology, Collective, Router], Schedule]
#: a size-tuned broadcast: (topology, root, router, size or None, requested chunks or None)
BestBroadcast = Callable[[Topology, "int | None", Router, "int | None", "int | None"], Schedule]


def largest_remainder(exact: np.ndarray, total: int) -> np.ndarray:
    """Whole counts summing to ``total`` nearest to the real targets ``exact`` (which sum to it):
    each target rounded down, then one more for the largest remainders, ties to the lower index
    (Hamilton's apportionment: chunks split among trees, ranks or rails in proportion)."""
    counts = np.floor(exact).astype(np.int64)
    left = total - int(counts.sum())
    if left > 0:
        order = np.lexsort((np.arange(exact.size), -(exact - counts)))
        counts[order[:left]] += 1
    return counts


def dispatcher(method: str, builders: dict[Kind, Builder]) -> Callable[..., Schedule]:
    """The module-level ``synthesize(topology, collective, router=None)`` of a method."""

    def synthesize(topology: Topology, collective: Collective, router: Router | None = None) -> Schedule:
        build = builders.get(collective.kind)
        if build is None:
            raise NotApplicable(f"{method} does not serve {collective.kind.value}")
        return build(topology, collective, router or router_for(topology))

    synthesize.__doc__ = (
        f"{method} schedule for ``collective`` on ``topology`` (serves {', '.join(sorted(k.value for k in builders))})."
    )
    return synthesize


def by_duality(build: Builder, topology: Topology, collective: Collective, method: str) -> Schedule:
    """Reduce / reduce-scatter as the time-reversed broadcast / allgather on the reversed topology,
    with the chunk count the forward schedule has (a size-tuned build chooses its own)."""
    forward_kind = DUAL[collective.kind]
    forward = Collective(forward_kind, collective.num_ranks, collective.chunks_per_piece, collective.root)
    reversed_topology = topology.reversed()
    schedule = build(reversed_topology, forward, router_for(reversed_topology))
    params = dict(schedule.params)
    params["dual_of"] = forward_kind.value
    reduction = Collective(collective.kind, collective.num_ranks, schedule.collective.chunks_per_piece, collective.root)
    return dual_reduction(schedule, reduction, method, params)


def broadcast_or_dual(
    method: str,
    best: BestBroadcast,
    topology: Topology,
    collective: Collective,
    router: Router | None,
    size: int | None,
    requested: int | None,
) -> Schedule:
    """The ``synthesize`` of a method that tunes a broadcast for a size: the broadcast ``best``
    builds, or for a reduce the best broadcast of the reversed machine run backwards with reduces
    (`by_duality`); NotApplicable for any other collective."""
    if collective.kind is Kind.REDUCE:
        return by_duality(lambda topo, coll, rtr: best(topo, coll.root, rtr, size, requested), topology, collective, method)
    if collective.kind is not Kind.BROADCAST:
        raise NotApplicable(f"{method} does not serve {collective.kind.value} (it serves broadcast and reduce)")
    return best(topology, collective.root, router or router_for(topology), size, requested)


def pieces_for_allreduce(collective: Collective, method: str) -> int:
    """k' such that allreduce with k chunks = reduce-scatter + allgather with k' chunks per piece."""
    r, k = collective.num_ranks, collective.chunks_per_piece
    if k % r:
        raise NotApplicable(
            f"{method} allreduce runs reduce-scatter then allgather, so --chunks must be a multiple of the "
            f"rank count {r} (got {k})"
        )
    return k // r


def allreduce_rs_ag(
    reduce_scatter: Builder, allgather: Builder, topology: Topology, collective: Collective, router: Router, method: str
) -> Schedule:
    """Allreduce as reduce-scatter followed by allgather (same chunk numbering)."""
    per_piece = pieces_for_allreduce(collective, method)
    rs = reduce_scatter(topology, Collective(Kind.REDUCE_SCATTER, collective.num_ranks, per_piece), router)
    ag = allgather(topology, Collective(Kind.ALLGATHER, collective.num_ranks, per_piece), router)
    params = {"phases": ["reduce-scatter", "allgather"], "reduce_scatter": dict(rs.params), "allgather": dict(ag.params)}
    return concat([rs, ag], collective, method, params)


def with_reductions(method: str, builders: dict[Kind, Builder], *, allreduce: bool = True) -> dict[Kind, Builder]:
    """Add the reductions that follow from a method's allgather and broadcast: reduce-scatter and
    reduce by duality, and (unless ``allreduce`` is False) allreduce as reduce-scatter + allgather."""
    out = dict(builders)
    allgather = builders.get(Kind.ALLGATHER)
    broadcast = builders.get(Kind.BROADCAST)
    if allgather is not None:

        def reduce_scatter(topology: Topology, collective: Collective, router: Router) -> Schedule:
            return by_duality(allgather, topology, collective, method)

        out[Kind.REDUCE_SCATTER] = reduce_scatter
        if allreduce:
            out[Kind.ALLREDUCE] = lambda topology, collective, router: allreduce_rs_ag(
                reduce_scatter, allgather, topology, collective, router, method
            )
    if broadcast is not None:
        out[Kind.REDUCE] = lambda topology, collective, router: by_duality(broadcast, topology, collective, method)
    return out
