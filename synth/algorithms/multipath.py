"""Multipath alltoall: every pair's data split over the paths of the multicommodity flow, placed
in time so that every step loads the links alike.

Why. An alltoall sends a = size/R bytes from every rank to every other. Sent straight (`direct`),
each pair's data takes its one shortest path, so a slow link stays the busiest: on three DGX A100
boxes where one GPU's NIC runs at 2.5 GB/s instead of 25, that GPU's 16 off-box pieces all squeeze
through it (8.9 × the bound). The concurrent multicommodity flow (`synth.algorithms.engines.
flow_routing`; the same LP whose optimum τ is the ``multicommodity-flow`` bound of docs/bounds.md)
says how to split each pair's data over paths, relaying through other ranks, so that the busiest
link, relative to its bandwidth, carries as little as possible: the slow GPU hands its data over
NVSwitch to its neighbours, whose NICs carry it (NCCL's PXN, found here by the LP rather than by
rule); on a torus with a slow link the traffic that would cross it goes round it.

How. A path is a chain of segments (rank to rank over links and switches), so a relayed piece
takes one step per segment, its segments in increasing steps. Each pair's data is cut into k
chunks (the chunks per piece); the schedule has T steps. Every chunk is placed, one at a time and
round-robin over the pairs, on one of its pair's flow paths with a start step (its segments at
start, start + 1, …), the placement that adds the least to the schedule's step-synchronous cost
Σ_t max_ℓ load(t, ℓ)/bw(ℓ) (a chunk placed under every step's current maximum adds nothing);
ties go to the path furthest behind its share of the flow, then to the least loaded start. This
is a time-expanded version of the flow: with T steps and k chunks large enough every step carries
about 1/T of the flow, so the bandwidth term approaches a·τ (the LP optimum, the bound) and the
latency term is T steps of α. T and k are chosen for the ``size`` option: few steps at small sizes
(where α dominates), more at large ones; each (T, k) is built and timed with the step-synchronous
model and the fastest kept (its ``params`` record the routing's τ, T, k and ``chosen_at_size``).

Sources: the concurrent multicommodity-flow formulation of alltoall routing is classic (Shahrokhi
and Matula, "The maximum concurrent flow problem", J. ACM 37(2), 1990); relaying through a
neighbour's NIC is NCCL's PXN (PCI × NVLink, NCCL 2.12 release notes, 2022); TE-CCL (Liu et al.,
SIGCOMM 2024) schedules collectives by time-expanded multicommodity flow, whose idea the
placement follows greedily. Serves alltoall on machines whose flow LP has at most
`flow_routing.LP_MAX_VARIABLES` variables (every built-in up to 64 ranks; a 90-rank 3-D torus).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from synth.algorithms.engines.flow_routing import LP_MAX_VARIABLES as FLOW_LP_MAX_VARIABLES
from synth.algorithms.engines.flow_routing import Routing, lp_routing, lp_variables
from synth.algorithms.engines.size_tuning import predicted_us, size_option
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, one_chunk
from synth.routing import Router
from synth.schedule import OP_COPY, Schedule, ScheduleBuilder
from synth.topology import Topology

NAME = "multipath"
OPTIONS = frozenset({"size"})
REFERENCE_SIZE = 1 << 30
COLLECTIVES = frozenset({Kind.ALLTOALL})
#: steps per schedule tried (those at least the longest path's segments)
STEP_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
#: chunks per pair placed in a schedule of T steps: at least this many (so the flow's shares can
#: be followed), and at least T (so every step can carry some of every pair)
MIN_CHUNKS = 8
#: at most this many chunk placements (pairs × chunks) per schedule: bounds the synthesis time
PLACEMENT_BUDGET = 120_000
#: step counts placed beside the fewest: the best ones by `model_us`
SHORTLIST = 2
#: candidate (T, k) built and timed exactly, the best by the placement's own cost estimate
EXACT_CANDIDATES = 3


def routing_for(topology: Topology) -> Routing:
    """The flow routing, or NotApplicable saying why there is none."""
    if topology.num_ranks < 2:
        raise NotApplicable(f"{NAME} needs at least 2 ranks")
    variables = lp_variables(topology)
    if variables > FLOW_LP_MAX_VARIABLES:
        raise NotApplicable(
            f"{NAME}: the routing LP of {topology.name} has {variables} variables, more than {FLOW_LP_MAX_VARIABLES}"
        )
    routing = lp_routing(topology)
    if routing is None:
        raise NotApplicable(f"{NAME}: the routing LP of {topology.name} did not solve to optimality")
    return routing


class Placement:
    """Chunks of every pair placed on (path, start step) in a T-step schedule (module docstring).

    ``load[t, ℓ]`` counts the chunks crossing link ℓ in step t; ``chosen[(s, d)]`` lists, per
    chunk, (segment ids, start step)."""

    def __init__(self, routing: Routing, steps: int, chunks: int):
        topo = routing.topology
        self.routing = routing
        self.steps = steps
        self.chunks = chunks
        num_links = len(topo.links)
        dummy = steps * num_links  # a resource nothing loads (padding)
        inv_bw = np.append(np.tile(1.0 / topo.bandwidth_array, steps), 0.0)
        load = np.zeros(dummy + 1)
        step_max = np.zeros(steps + 1)  # the last entry: padding's step, never raised
        seg_links = [np.asarray(seg.links, dtype=np.int64) for seg in routing.segments]
        pairs = sorted(routing.paths)
        # per pair: candidate (path, start) as padded [C, S, Lm] resource ids and [C, S] step ids
        tables = []
        for pair in pairs:
            options = routing.paths[pair]
            cands: list[tuple[int, int]] = []
            for index, (_, path) in enumerate(options):
                cands += [(index, start) for start in range(steps - len(path) + 1)]
            longest_seg = max(len(seg_links[i]) for _, path in options for i in path)
            segs = max(len(path) for _, path in options)
            res = np.full((len(cands), segs, longest_seg), dummy, dtype=np.int64)
            at = np.full((len(cands), segs), steps, dtype=np.int64)
            for c, (index, start) in enumerate(cands):
                for j, seg in enumerate(options[index][1]):
                    links = seg_links[seg]
                    res[c, j, : links.size] = (start + j) * num_links + links
                    at[c, j] = start + j
            share = np.array([options[i][0] for i, _ in cands])
            path_of = np.array([i for i, _ in cands], dtype=np.int64)
            tables.append((cands, res, at, share, path_of))
        taken = [np.zeros(len(routing.paths[pair])) for pair in pairs]
        chosen: dict[tuple[int, int], list[tuple[tuple[int, ...], int]]] = {pair: [] for pair in pairs}
        for j in range(chunks):
            for p, pair in enumerate(pairs):
                cands, res, at, share, path_of = tables[p]
                if len(cands) == 1:
                    best = 0
                    seg_max = ((load[res[0]] + 1.0) * inv_bw[res[0]]).max(axis=1)[None, :]
                else:
                    seg_max = ((load[res] + 1.0) * inv_bw[res]).max(axis=2)
                    delta = np.maximum(seg_max - step_max[at], 0.0).sum(axis=1)
                    behind = taken[p][path_of] - share * (j + 1)
                    busiest = seg_max.max(axis=1)
                    # lexicographic (delta, behind, busiest, index), without sorting
                    tied = delta <= delta.min() + 1e-12
                    key = behind + 1e-6 * busiest / (float(busiest.max()) + 1e-12)
                    best = int(np.argmin(np.where(tied, key, np.inf)))
                idx = res[best].ravel()
                idx = idx[idx != dummy]
                load[idx] += 1.0  # a candidate's resources are distinct (its segments in distinct steps)
                np.maximum.at(step_max, at[best], seg_max[min(best, seg_max.shape[0] - 1)])
                step_max[steps] = 0.0
                index, start = cands[best]
                taken[p][index] += 1
                chosen[pair].append((routing.paths[pair][index][1], start))
        self.load = load[:dummy].reshape(steps, num_links)
        self.chosen = chosen
        self.inv_bw = inv_bw[:num_links]

    def estimate_us(self, size: int) -> float:
        """Step-synchronous time at ``size`` if every step's transfers each paid the largest
        segment latency: Σ_t (max α + max_ℓ load(t, ℓ)·chunk/bw(ℓ))."""
        topo = self.routing.topology
        r = topo.num_ranks
        chunk_bytes = size / (r * self.chunks)
        alpha = max(seg.alpha for seg in self.routing.segments)
        per_step = (self.load * self.inv_bw[None, :]).max(axis=1) * chunk_bytes / 1e3
        used = per_step > 0
        return float(per_step.sum() + alpha * used.sum())


def build_schedule(topology: Topology, routing: Routing, placement: Placement, collective: Collective, params: dict) -> Schedule:
    """The schedule of a placement: chunk i of pair (s, d) is chunk (s·R + d)·k + i; each of its
    segments is one transfer, in the step of its start plus its position on the path."""
    r, k = collective.num_ranks, collective.chunks_per_piece
    builder = ScheduleBuilder(collective, topology, NAME, params)
    segs = routing.segments
    route_ids = [builder.route_id(tuple(topology.node_name(v) for v in seg.via)) for seg in segs]
    cols: list[list[list[int]]] = [[[], [], [], []] for _ in range(placement.steps)]
    for (s, d), picks in sorted(placement.chosen.items()):
        base = (s * r + d) * k
        for i, (path, start) in enumerate(picks):
            for j, seg in enumerate(path):
                col = cols[start + j]
                col[0].append(segs[seg].src)
                col[1].append(segs[seg].dst)
                col[2].append(base + i)
                col[3].append(route_ids[seg])
    for src, dst, chunk, route in cols:
        if src:
            builder.add_step_arrays(np.asarray(src), np.asarray(dst), np.asarray(chunk), OP_COPY, np.asarray(route))
    return builder.build()


def configurations(routing: Routing, chunks: int | None) -> list[tuple[int, int]]:
    """(T, k) pairs to try: every step count in `STEP_COUNTS` from the longest path on, with
    max(T, `MIN_CHUNKS`) chunks per pair (or the caller's k, when T ≤ k), within the budget."""
    pairs = len(routing.paths)
    out = []
    for steps in STEP_COUNTS:
        if steps < routing.longest:
            continue
        if chunks is not None:
            if steps <= chunks:
                out.append((steps, chunks))
            continue
        k = max(steps, MIN_CHUNKS)
        if pairs * k <= PLACEMENT_BUDGET or not out:
            out.append((steps, k))
    if not out:  # the caller's k is smaller than the longest path: as many steps as it needs
        out.append((routing.longest, chunks if chunks is not None else MIN_CHUNKS))
    return out


def model_us(routing: Routing, steps: int, size: int) -> float:
    """A rough step-synchronous time of a T-step placement, to shortlist step counts before
    placing any chunk: T steps of the largest segment latency, and the flow's bandwidth time a·τ
    stretched by the pipeline's fill, (longest − 1)/T of it (an overestimate: the placement fills
    the first and last steps with unrelayed chunks)."""
    alpha = max(seg.alpha for seg in routing.segments)
    bandwidth = size / routing.topology.num_ranks * routing.tau / 1e3
    return steps * alpha + bandwidth * (1 + (routing.longest - 1) / steps)


def shortlist(routing: Routing, configs: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """The configurations worth placing: the fewest steps (fewest chunks, often as good: the
    placement fills the fill and drain steps), and the `SHORTLIST` best others by `model_us`."""
    rest = sorted(configs[1:], key=lambda c: (model_us(routing, c[0], size), c[0]))[:SHORTLIST]
    return configs[:1] + sorted(rest)


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options: Any) -> Schedule:
    """Multipath alltoall (module docstring) tuned for the ``size`` option (default 1 GiB);
    ``requested_chunks`` None lets it choose the chunks per piece."""
    size = size_option(NAME, options, OPTIONS)
    if collective.kind not in COLLECTIVES:
        raise NotApplicable(f"{NAME} serves alltoall only, not {collective.kind.value}")
    at = size if size is not None else REFERENCE_SIZE
    requested = options.get("requested_chunks", collective.chunks_per_piece)
    routing = routing_for(topology)
    r = topology.num_ranks
    placements: list[tuple[float, int, Placement]] = []
    for steps, k in shortlist(routing, configurations(routing, requested), at):
        placement = Placement(routing, steps, k)
        placements.append((placement.estimate_us(at), steps, placement))
    placements.sort(key=lambda p: p[:2])
    best: tuple[float, int, Schedule] | None = None
    for _, _, placement in placements[:EXACT_CANDIDATES]:
        params = {
            "routing": routing.how,
            "tau_pairs_per_gbps": round(routing.tau, 9),
            "paths_per_pair_max": max(len(v) for v in routing.paths.values()),
            "steps_planned": placement.steps,
            "chunks_per_pair": placement.chunks,
            "chosen_at_size": at,
        }
        schedule = build_schedule(topology, routing, placement, Collective(Kind.ALLTOALL, r, placement.chunks), params)
        time = predicted_us(schedule, topology, [at])[0]
        if best is None or (time, schedule.num_transfers) < best[:2]:
            best = (time, schedule.num_transfers, schedule)
    assert best is not None
    return best[2]


METHOD = Method(
    name=NAME,
    summary="alltoall split over the multicommodity-flow paths (relays through neighbours, PXN-like), placed step by step",
    family="scalable",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=one_chunk,
    options=OPTIONS,
    chooses_chunks=True,
)
