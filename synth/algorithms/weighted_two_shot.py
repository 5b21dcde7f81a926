"""Weighted, pipelined two-shot allreduce: reduce-scatter shares that follow each rank's bandwidth.

The two-shot allreduce (``direct``: every rank reduces each share straight into its owner, then
every owner sends its reduced share straight to every rank; Cowan et al., "MSCCLang", ASPLOS 2023,
the all-pairs two-step algorithm; the same idea as the two-shot kernels of TensorRT-LLM's custom
all-reduce) gives every rank an equal share, so every rank sends and receives 2(R − 1)/R of the
data: on a machine with one slow rank (a degraded NVLink or NIC, a GPU with fewer links) the slow
rank sets the pace of both steps. But an allreduce's shares are the algorithm's choice, not the
collective's (unlike reduce-scatter's): a rank that owns a share w_r of the data sends (1 − w_r)
of it in the reduce-scatter and receives (R − 1)·w_r, then the reverse in the allgather. A rank
that owns nothing sends its contribution out once and receives the result once.

This method gives rank r the share w_r that balances the per-rank traffic against its bandwidth
B_r = min(ingress, egress): in a pipelined step every rank carries 1 + (R − 2)·w_r units, so
(1 + (R − 2)·w_r)/B_r is made equal for every rank that owns something (water-filling; ranks too
slow for any share own none). The data is cut into M blocks of c chunks each; step t reduces block
t into its owners (the reduce-scatter of block t) while the owners of block t − 1 send it out (its
allgather), so the two directions of every link work at once and the schedule takes M + 1 steps
(M = 1 is the plain two-shot). On a 72-GPU NVLink domain with one GPU at 90 GB/s instead of 900,
the slow GPU then sends and receives the data once, overlapped, instead of twice in turn: about
half the time of every equal-share method.

Both the equal and the weighted shares are tried; the block count M for the size is found from the
step-synchronous model (docs/formats.md, 'Step-synchronous cost') without building every
candidate: a schedule's first step (a reduce-scatter), its middle steps (reduce-scatter plus
allgather, all alike) and its last step (an allgather) have the same link loads for every M, so
the time of M blocks is T_first + (M − 1)·T_middle + T_last at chunk size n/(M·c), read off one
three-step schedule (`synth.simulate.step_lines`). Every pair of ranks needs a direct link or a
switch route (a relayed reduce would carry the relay's own contribution twice).

Options: ``size`` (bytes, default 1 MiB): the size the shares and M are chosen for (recorded as
``chosen_at_size``). With a chunk count from the caller, the schedule is one block of that many
chunks (the plain two-shot with weighted shares).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from synth.algorithms.engines.builders import largest_remainder
from synth.algorithms.engines.size_tuning import fastest, size_option, timed_sweep
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, ranks_for_allreduce
from synth.routing import Router, router_for
from synth.schedule import OP_COPY, OP_REDUCE, Schedule, ScheduleBuilder
from synth.simulate import step_lines
from synth.topology import Topology

NAME = "weighted-two-shot"
OPTIONS = frozenset({"size"})
COLLECTIVES = frozenset({Kind.ALLREDUCE})
#: the size the schedule is chosen for when the caller names none
DEFAULT_SIZE = 1 << 20
#: at most this many transfers in a schedule (M is capped so building and verifying stay cheap)
MAX_TRANSFERS = 400_000
#: at most this many blocks
MAX_BLOCKS = 256


def rank_bandwidths(topology: Topology) -> np.ndarray:
    """Each rank's bandwidth to the rest of the machine: the smaller of its links' total ingress
    and egress (GB/s)."""
    return np.array([min(topology.rank_ingress(r), topology.rank_egress(r)) for r in range(topology.num_ranks)])


def balanced_weights(bandwidth: np.ndarray) -> np.ndarray:
    """Shares w (summing to 1) with (1 + (R − 2)·w_r)/B_r equal for every rank with w_r > 0 and
    no larger for the others (water-filling on the pipelined step's per-rank load)."""
    r = bandwidth.size
    if r <= 2 or np.ptp(bandwidth) == 0:
        return np.full(r, 1.0 / r)

    def shares(level: float) -> np.ndarray:
        return np.maximum(0.0, (level * bandwidth - 1.0) / (r - 2))

    lo, hi = 0.0, (1.0 + (r - 2)) / float(bandwidth.min()) + 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if shares(mid).sum() < 1.0:
            lo = mid
        else:
            hi = mid
    w = shares(hi)
    return w / w.sum()


def integer_shares(weights: np.ndarray, chunks: int) -> np.ndarray:
    """Chunks per rank, summing to ``chunks``, closest to ``weights``·chunks (largest remainder;
    ties to the lower rank)."""
    return largest_remainder(weights * chunks, chunks)


def _routes(topology: Topology, router: Router, builder: ScheduleBuilder) -> np.ndarray:
    """Route id of every ordered pair (a, b), a ≠ b; NotApplicable for a pair with no switch-only path."""
    r = topology.num_ranks
    routes = np.zeros((r, r), dtype=np.int64)
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
            routes[a, b] = builder.route_id(via)
    return routes


def build(
    topology: Topology,
    owners: np.ndarray,
    blocks: int,
    router: Router,
    params: dict[str, Any],
) -> Schedule:
    """The schedule: ``blocks`` blocks of ``owners.size`` chunks each, chunk j of a block owned by
    rank ``owners[j]``; step t is block t's reduce-scatter and block t − 1's allgather."""
    r, c = topology.num_ranks, owners.size
    collective = Collective(Kind.ALLREDUCE, r, blocks * c)
    builder = ScheduleBuilder(collective, topology, NAME, params)
    routes = _routes(topology, router, builder)
    ranks = np.arange(r, dtype=np.int64)
    # reduce-scatter of one block: every rank reduces every chunk it does not own into its owner
    rs_src = np.repeat(ranks, c)
    rs_chunk = np.tile(np.arange(c, dtype=np.int64), r)
    rs_dst = owners[rs_chunk]
    keep = rs_src != rs_dst
    rs_src, rs_dst, rs_chunk = rs_src[keep], rs_dst[keep], rs_chunk[keep]
    # allgather of one block: the owner of every chunk sends it to every other rank
    ag_chunk = np.repeat(np.arange(c, dtype=np.int64), r)
    ag_src = owners[ag_chunk]
    ag_dst = np.tile(ranks, c)
    keep = ag_src != ag_dst
    ag_src, ag_dst, ag_chunk = ag_src[keep], ag_dst[keep], ag_chunk[keep]
    for t in range(blocks + 1):
        parts = []
        if t < blocks:
            parts.append((rs_src, rs_dst, rs_chunk + t * c, OP_REDUCE))
        if t > 0:
            parts.append((ag_src, ag_dst, ag_chunk + (t - 1) * c, OP_COPY))
        src = np.concatenate([p[0] for p in parts])
        dst = np.concatenate([p[1] for p in parts])
        chunk = np.concatenate([p[2] for p in parts])
        op = np.concatenate([np.full(p[0].size, p[3], dtype=np.uint8) for p in parts])
        builder.add_step_arrays(src, dst, chunk, op, routes[src, dst])
    return builder.build()


def best_blocks(topology: Topology, owners: np.ndarray, router: Router, size: int) -> int:
    """The block count M with the least step-synchronous time at ``size`` (see the module
    docstring), within `MAX_BLOCKS` and `MAX_TRANSFERS`."""
    r, c = topology.num_ranks, owners.size
    per_step = 2 * c * (r - 1)
    limit = max(1, min(MAX_BLOCKS, MAX_TRANSFERS // max(1, per_step) - 1, size // max(1, c)))
    if limit == 1:
        return 1
    probe = build(topology, owners, 2, router, {})
    m = np.arange(1, limit + 1, dtype=np.float64)
    t = step_lines(probe, topology).step_times_us(size / (m * c))
    total = t[0] + (m - 1) * t[1] + t[2]
    return int(np.argmin(total)) + 1


def owners_of(shares: np.ndarray) -> np.ndarray:
    """Chunk owners in rank order: rank r owns ``shares[r]`` consecutive chunks."""
    return np.repeat(np.arange(shares.size, dtype=np.int64), shares)


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options: Any) -> Schedule:
    """Weighted two-shot allreduce (see the module docstring)."""
    size = size_option(NAME, options, OPTIONS)
    if collective.kind not in COLLECTIVES:
        raise NotApplicable(f"{NAME} does not serve {collective.kind.value} (it serves allreduce)")
    r = collective.num_ranks
    if r < 2:
        raise NotApplicable(f"{NAME} needs at least two ranks")
    router = router or router_for(topology)
    at = DEFAULT_SIZE if size is None else size
    requested = options.get("requested_chunks", collective.chunks_per_piece)
    weights = {"equal": np.full(r, 1.0 / r), "bandwidth": balanced_weights(rank_bandwidths(topology))}
    candidates: list[tuple[str, np.ndarray, int]] = []
    for label, w in weights.items():
        if requested is not None:
            shares = integer_shares(w, collective.num_chunks)
            if shares.max() == 0:
                continue
            candidates.append((label, owners_of(shares), 1))
            continue
        owning = int(np.count_nonzero(w * r >= 0.5))
        shares = integer_shares(w, r if label == "equal" else max(1, owning))
        owners = owners_of(shares)
        candidates.append((label, owners, best_blocks(topology, owners, router, at)))
    seen: set[tuple[bytes, int]] = set()
    unique = []
    for label, owners, blocks in candidates:
        key = (owners.tobytes(), blocks)
        if key not in seen:
            seen.add(key)
            unique.append((label, owners, blocks))

    def make(candidate: tuple[str, np.ndarray, int]) -> Schedule:
        label, owners, blocks = candidate
        params: dict[str, Any] = {"shares": label, "blocks": blocks, "chunks_per_block": int(owners.size)}
        params["owners_with_no_share"] = int(r - np.unique(owners).size)
        if size is not None:
            params["chosen_at_size"] = size
        return build(topology, owners, blocks, router, params)

    if len(unique) == 1:
        return make(unique[0])
    return fastest(timed_sweep(unique, make, topology, at))


METHOD = Method(
    name=NAME,
    summary="two-shot allreduce with reduce-scatter shares weighted by each rank's bandwidth, pipelined over blocks",
    family="scalable",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=ranks_for_allreduce,
    options=OPTIONS,
    chooses_chunks=True,
)
