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
few tens of KiB (docs/algorithms.md has the crossover). It needs a switch-only route (or a direct
link) between every pair of ranks, since a relayed reduce would carry the relay's own contribution
twice; on other machines it is not applicable.
"""

from __future__ import annotations

import numpy as np

from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, one_chunk
from synth.routing import Router, router_for
from synth.schedule import OP_REDUCE, Schedule, ScheduleBuilder
from synth.topology import Topology

NAME = "one-shot"
COLLECTIVES = frozenset({Kind.ALLREDUCE})


def synthesize(topology: Topology, collective: Collective, router: Router | None = None) -> Schedule:
    """One-shot allreduce of ``collective`` on ``topology`` (see the module docstring)."""
    if collective.kind not in COLLECTIVES:
        raise NotApplicable(f"{NAME} does not serve {collective.kind.value} (it serves allreduce)")
    router = router or router_for(topology)
    r, g = collective.num_ranks, collective.num_chunks
    builder = ScheduleBuilder(collective, topology, NAME, {"steps": 1})
    if r > 1:
        src_l, dst_l, route_l = [], [], []
        for a in range(r):
            for b in range(r):
                if a == b:
                    continue
                via = router.via_names(a, b)
                if via is None:
                    raise NotApplicable(
                        f"{NAME} needs a direct link or a switch route between every pair of ranks; "
                        f"{topology.node_name(a)} reaches {topology.node_name(b)} only through other ranks"
                    )
                src_l.append(a)
                dst_l.append(b)
                route_l.append(builder.route_id(via))
        chunks = np.arange(g, dtype=np.int64)
        src = np.repeat(np.asarray(src_l, dtype=np.int64), g)
        dst = np.repeat(np.asarray(dst_l, dtype=np.int64), g)
        route = np.repeat(np.asarray(route_l, dtype=np.int64), g)
        builder.add_step_arrays(src, dst, np.tile(chunks, len(src_l)), OP_REDUCE, route)
    return builder.build()


METHOD = Method(
    name=NAME,
    summary="one-shot allreduce: every rank reduces its buffer into every other in one step (MSCCL allreduce_1step)",
    # not a baseline (family "classic" runs everywhere and is written to generated/): it serves
    # only machines where every pair has a route, and is a candidate of auto there
    family="scalable",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=one_chunk,
)
