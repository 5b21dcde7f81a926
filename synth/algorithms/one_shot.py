"""One-shot allreduce: every rank reduces its whole buffer into every other rank in a single step.

MSCCL's ``allreduce_1step`` / all-pairs LL algorithm (Cowan et al., "MSCCLang: Microsoft Collective
Communication Language", ASPLOS 2023; the same idea as the one-shot allreduce of NCCL's and
TensorRT-LLM's custom all-reduce kernels): in one step every rank sends each chunk of its
contribution to every other rank as a ``reduce``. The reduces into one (rank, chunk) combine
(docs/formats.md, 'Meaning of a step': several reduces into the same (dst, chunk) in one step
combine when pairwise disjoint, and here each carries one rank's own contribution), so after the
step every rank holds the sum of all R contributions.

Cost in the step-synchronous model: one α (the slowest pair's path latency) plus (R − 1)·size over
each rank's ingress, against two α and 2(R − 1)/R·size for the two-shot (direct reduce-scatter then
direct allgather, the ``direct`` method). It wins when α dominates: on an 8-GPU NVSwitch box up to a
few tens of KiB (docs/algorithms.md has the crossover). A relayed reduce would carry the relay's
own contribution twice, so the flat variant needs a direct link or a switch route between every
pair of ranks.

On a machine of hosts of equal size there is a second variant, ``hosts``: one-shot inside every
host (each rank then holds its host's sum), then one-shot along every rail (the ranks with the same
local index, one per host, whose sums are disjoint). Two steps, and it needs routes only inside
hosts and along rails, so it also serves rail-only networks and machines whose NIC paths make the
flat exchange crowd the network (each rank sends H − 1 copies across it instead of R − L). With the
``size`` option the faster variant at that size is kept (``chosen_at_size`` in params); without
it, the flat one where it applies.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from synth.algorithms.engines.size_tuning import fastest, size_option, timed_sweep
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, one_chunk
from synth.routing import Router, router_for
from synth.schedule import OP_REDUCE, Schedule, ScheduleBuilder
from synth.topology import Topology

NAME = "one-shot"
OPTIONS = frozenset({"size"})
COLLECTIVES = frozenset({Kind.ALLREDUCE})


def _exchange_step(topology: Topology, router: Router, builder: ScheduleBuilder, groups: list[list[int]], g: int) -> None:
    """One step in which every rank reduces all ``g`` chunks into every other rank of its group."""
    src_l, dst_l, route_l = [], [], []
    for group in groups:
        for a in group:
            for b in group:
                if a == b:
                    continue
                via = router.via_names(a, b)
                if via is None:
                    raise NotApplicable(
                        f"{NAME} needs a direct link or a switch route between the ranks it exchanges between; "
                        f"{topology.node_name(a)} reaches {topology.node_name(b)} only through other ranks"
                    )
                src_l.append(a)
                dst_l.append(b)
                route_l.append(builder.route_id(via))
    if not src_l:
        return
    chunks = np.arange(g, dtype=np.int64)
    src = np.repeat(np.asarray(src_l, dtype=np.int64), g)
    dst = np.repeat(np.asarray(dst_l, dtype=np.int64), g)
    route = np.repeat(np.asarray(route_l, dtype=np.int64), g)
    builder.add_step_arrays(src, dst, np.tile(chunks, len(src_l)), OP_REDUCE, route)


def host_rails(topology: Topology) -> tuple[list[list[int]], list[list[int]]] | None:
    """The hosts and the rails (ranks with the same local index, one per host), or None without
    two or more hosts of equal size."""
    groups = topology.host_groups
    if None in groups or len(groups) < 2 or len({len(g) for g in groups.values()}) > 1:
        return None
    hosts = [list(g) for g in groups.values()]
    rails = [[h[i] for h in hosts] for i in range(len(hosts[0]))]
    return hosts, rails


def flat(topology: Topology, collective: Collective, router: Router, size: int | None = None) -> Schedule:
    params: dict[str, Any] = {"variant": "flat"}
    if size is not None:
        params["chosen_at_size"] = size
    builder = ScheduleBuilder(collective, topology, NAME, params)
    _exchange_step(topology, router, builder, [list(range(collective.num_ranks))], collective.num_chunks)
    return builder.build()


def by_hosts(topology: Topology, collective: Collective, router: Router, size: int | None = None) -> Schedule:
    layout = host_rails(topology)
    if layout is None:
        raise NotApplicable(f"{NAME} by hosts needs two or more hosts of equal size (ranks[].host)")
    hosts, rails = layout
    params: dict[str, Any] = {"variant": "hosts", "hosts": len(hosts)}
    if size is not None:
        params["chosen_at_size"] = size
    builder = ScheduleBuilder(collective, topology, NAME, params)
    _exchange_step(topology, router, builder, hosts, collective.num_chunks)
    _exchange_step(topology, router, builder, rails, collective.num_chunks)
    return builder.build()


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options: Any) -> Schedule:
    """One-shot allreduce of ``collective`` on ``topology`` (see the module docstring)."""
    size = size_option(NAME, options, OPTIONS)
    if collective.kind not in COLLECTIVES:
        raise NotApplicable(f"{NAME} does not serve {collective.kind.value} (it serves allreduce)")
    router = router or router_for(topology)
    variants = [flat, by_hosts] if host_rails(topology) is not None else [flat]
    built: list[Schedule] = []
    reasons: list[str] = []
    for variant in variants:
        try:
            built.append(variant(topology, collective, router, size))
        except NotApplicable as err:
            reasons.append(str(err))
        if built and size is None:
            break
    if not built:
        raise NotApplicable("; ".join(reasons))
    if size is None or len(built) == 1:
        return built[0]
    return fastest(timed_sweep(built, lambda s: s, topology, size))


METHOD = Method(
    name=NAME,
    summary="one-shot allreduce: every rank reduces into every other in one step (MSCCL allreduce_1step); by hosts then rails",
    # not a baseline (family "classic" runs everywhere and is written to generated/): it serves
    # only machines where the exchanged pairs have routes, and is a candidate of auto there
    family="scalable",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=one_chunk,
    options=OPTIONS,
)
