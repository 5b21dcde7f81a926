"""Broadcast on a machine where a few ranks take data in much more slowly than the rest: a
scatter-allgather over the fast ranks, with every slow rank fed directly in every step, by the root
and by the fast ranks, its share per step sized by a small integer LP so that its link is busy
the whole time.

In van de Geijn's scatter-allgather (`scatter_allgather`, and the scatter-allgather shapes of
``pipelined-tree``) a rank receives nothing while the root deals and everything during the
allgather. On a switch where one rank's link runs at a tenth of the others' (random-nvl72-2: 71
GPUs at 900 GB/s, one at 90), that rank's ingress alone takes n/90 GB/s, and every step in which it
receives nothing is added to it: the best pipelines found (19 steps of ``pipelined-tree``) ended
33 µs above the ingress bound at 1 GiB. Here the slow ranks are not carriers:

1. step t < W: the root deals wave t of the data round the fast ranks (the carriers, W waves of
   j chunks per carrier) and sends some chunks straight to each slow rank (taken from the end of the
   data, which the carriers get last);
2. step t ≥ 1: the carriers share wave t − 1 among themselves (each chunk from its owner to every
   other carrier) and send each slow rank some of the chunks they hold (from the start of the
   data, each chunk from the carrier holding it that has sent least in that step), the root
   sending it more where its link is free (in the last step it is idle).

The feeds are laid over a base schedule that leaves the slow ranks out (`overlay`): the flat
base above (`flat_base`), or, where ranks sit in boxes or a pair has no switch-only path,
``packing``'s trees over the machine as the fast ranks see it (`tree_base`). A slow rank is fed by
the root and by its nearest fast ranks (`nearest`: fewest switch hops; every rank on one switch,
its own box in a fat-tree). How many chunks it gets from each side in each step is an integer LP
over the step-synchronous model (docs/formats.md, 'Step-synchronous cost'): with the base fixed,
a step t lasts at least α(paths over ℓ) + bytes(ℓ, t)/bw(ℓ) for every link ℓ, the bytes linear
in the feeds (a feed from the fast ranks spread evenly over those that hold something then);
minimise Σ_t z_t with every slow rank getting every chunk once and its feeders feeding only
chunks they hold (a tie-break leaves the root's link as free as it can). On random-nvl72-2 at
1 GiB (root 0): one wave of 70 chunks, the root sends the slow rank 8 chunks beside the deal (its
step takes 8 chunks at 90 GB/s, 1 364 µs, the root's 78 at 900 1 302 µs), the carriers the other
62 while they share theirs: 1 364 + 10 568 = 11 932.46 µs, n/90 GB/s + 2α, 1 µs above the ingress
bound (NCCL's analytic model 11 942.26, the best found before 11 964.61).

Applies to broadcast (reduce: the broadcast of the reversed machine run backwards with reduces,
`engines.builders.by_duality`) on machines where at least one rank other than the root has less
than `SLOW_FRACTION` of the median ingress of the others, at most a quarter of the ranks are that
slow, and the root and some fast rank reach each slow one by switches alone. The shape (flat with
its number of waves and chunks per carrier, or trees) is chosen at the size (``size`` option,
default `REFERENCE_SIZE`) by the step model.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from synth.algorithms import packing
from synth.algorithms.engines.builders import broadcast_or_dual
from synth.algorithms.engines.composition import induced_topology
from synth.algorithms.engines.lowering import LogicalStep, logical_step, lower_copies
from synth.algorithms.engines.size_tuning import fastest_at, size_option, timed_sweep
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, one_chunk
from synth.routing import Router
from synth.schedule import OP_COPY, Schedule, ScheduleBuilder
from synth.simulate.paths import transfer_paths
from synth.simulate.sync import BYTES_PER_US_PER_GBPS
from synth.solver_output import native_stdout_to_stderr, seeded_highs_with_columns
from synth.topology import Topology

NAME = "slow-feed"
OPTIONS = frozenset({"size"})
REFERENCE_SIZE = 16 << 20
#: a rank is slow when its ingress is below this fraction of the median ingress of the non-root
#: ranks. Under 1/2 such a rank alone outlasts a scatter-allgather (n/b against the ≈ 2n/B of the
#: deal and the allgather); up to here feeding it in every step still beats treating it as a
#: carrier (random-nvl72-2 with its slow link at 650 of 900 GB/s, 1 GiB: 1667.10 µs against
#: 1721.47 for the best of scatter-allgather, pipelined-tree and packing; docs/algorithms.md)
SLOW_FRACTION = 0.8
#: waves tried, in increasing order (stopping after `PATIENCE` slower ones in a row)
WAVES = (1, 2, 3, 4, 6, 8, 12, 16)
#: chunks per carrier per wave tried
PER_CARRIER = (1, 2)
PATIENCE = 2
#: the largest chunk count built (a schedule has about chunks × ranks transfers)
MAX_CHUNKS = 1024
#: machines of more ranks are left to the other methods
MAX_RANKS = 256
#: the most holdings (steps × ranks × chunks) tracked for a base schedule
MAX_HOLDINGS = 64 << 20
#: branch-and-bound nodes of the feed MIP: a cap in work, not seconds (same answer on any machine)
MIP_NODES = 50
#: the cost (µs per chunk) that breaks ties between equally fast feeds towards fewer from the root
ROOT_FEED_COST = 1e-4


def slow_ranks(topology: Topology, root: int) -> tuple[list[int], list[int]]:
    """(carriers, slow ranks): the non-root ranks split by ingress (`SLOW_FRACTION` of the median);
    NotApplicable when none or more than a quarter of the ranks are slow."""
    r = topology.num_ranks
    if r > MAX_RANKS:
        raise NotApplicable(f"{NAME} is for machines of up to {MAX_RANKS} ranks; {topology.name} has {r}")
    others = [v for v in range(r) if v != root]
    if len(others) < 3:
        raise NotApplicable(f"{NAME} needs at least 4 ranks; {topology.name} has {r}")
    ingress = np.array([topology.rank_ingress(v) for v in others])
    slow_mask = ingress < SLOW_FRACTION * float(np.median(ingress))
    slow = [v for v, s in zip(others, slow_mask.tolist(), strict=True) if s]
    if not slow:
        raise NotApplicable(f"{NAME}: no rank of {topology.name} takes data in at under {SLOW_FRACTION} of the median")
    if 4 * len(slow) > r:
        raise NotApplicable(f"{NAME}: {len(slow)} of {r} ranks are slow (it is for a few)")
    return [v for v in others if v not in slow], slow


@dataclass(frozen=True)
class Paths:
    """Per rank pair the link ids of its switch-only path and its latency (µs)."""

    topology: Topology
    router: Router

    def links(self, a: int, b: int) -> tuple[np.ndarray, float]:
        route = self.router.route(a, b)
        if route is None:
            raise NotApplicable(f"{NAME}: no switch-only path from rank {a} to rank {b} in {self.topology.name}")
        nodes = [a, *route.via, b]
        ids = np.array([self.topology.link_index[(u, v)] for u, v in pairwise(nodes)], dtype=np.int64)
        return ids, float(route.latency)

    def load(self, pairs: list[tuple[int, int]], weight: float) -> tuple[np.ndarray, np.ndarray]:
        """(chunks per link, largest path latency per link, −inf where none) of one chunk over
        each pair, times ``weight``."""
        num_links = len(self.topology.links)
        count = np.zeros(num_links)
        latency = np.full(num_links, -np.inf)
        for a, b in pairs:
            ids, lat = self.links(a, b)
            np.add.at(count, ids, weight)
            latency[ids] = np.maximum(latency[ids], lat)
        return count, latency


def flat_base(topology: Topology, router: Router, root: int, carriers: list[int], waves: int, per: int) -> Schedule:
    """The fast ranks' scatter-allgather, the slow ranks left out: in step t < W the root deals
    wave t round the carriers (chunk c to carrier c mod |carriers|), in step t ≥ 1 each chunk of
    wave t − 1 goes from its owner to every other carrier (not a whole broadcast: `overlay` adds
    the slow ranks' feeds)."""
    width = len(carriers)
    chunks = waves * width * per
    fast = np.asarray(carriers, dtype=np.int64)
    ids = np.arange(chunks, dtype=np.int64)
    owner = fast[ids % width]
    wave = ids // (width * per)
    steps: list[LogicalStep] = []
    for t in range(waves + 1):
        dealt = ids[wave == t]
        shared = ids[wave == t - 1]
        src = np.repeat(owner[shared], width)
        dst = np.tile(fast, shared.size)
        keep = src != dst
        steps.append(
            logical_step(
                np.concatenate([np.full(dealt.size, root), src[keep]]),
                np.concatenate([owner[dealt], dst[keep]]),
                np.concatenate([dealt, np.repeat(shared, width)[keep]]),
            )
        )
    coll = Collective(Kind.BROADCAST, topology.num_ranks, chunks, root)
    return lower_copies(
        topology, coll, steps, NAME, {"base": "scatter-allgather", "waves": waves, "chunks_per_carrier": per}, router
    )


def tree_base(topology: Topology, root: int, carriers: list[int], size: int) -> Schedule:
    """``packing``'s broadcast (tuned for ``size``) on the machine as the root and the carriers
    see it (`engines.composition.induced_topology`: no path through a slow rank), its ranks
    mapped back."""
    keep = np.asarray([root, *carriers], dtype=np.int64)
    sub = induced_topology(topology, keep.tolist(), f"{topology.name}-fast")
    schedule = packing.METHOD.synthesize(sub, Kind.BROADCAST, root=0, options={"size": size})
    coll = Collective(Kind.BROADCAST, topology.num_ranks, schedule.collective.chunks_per_piece, root)
    builder = ScheduleBuilder(coll, topology, NAME, {"base": "packing", **schedule.params})
    routes = np.array([builder.route_id(r) for r in schedule.routes], dtype=np.int64)
    for t in range(schedule.num_steps):
        sl = schedule.step_slice(t)
        builder.add_step_arrays(
            keep[schedule.src[sl]], keep[schedule.dst[sl]], schedule.chunk[sl], OP_COPY, routes[schedule.route[sl]]
        )
    return builder.build()


def base_loads(topology: Topology, base: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """(chunks per [step, link], largest path latency per [step, link], −inf where none) of
    ``base``."""
    paths = transfer_paths(base, topology)
    lengths = np.diff(paths.ptr)
    step = np.repeat(base.step_of_transfer, lengths)
    load = np.zeros((base.num_steps, len(topology.links)))
    latency = np.full(load.shape, -np.inf)
    np.add.at(load, (step, paths.links), 1.0)
    np.maximum.at(latency, (step, paths.links), np.repeat(paths.latency_us, lengths))
    return load, latency


def nearest(router: Router, fast: list[int], root: int, v: int) -> np.ndarray:
    """The non-root fast ranks that feed slow rank ``v``: those of fewest hops to it by switches
    (on one switch every rank; in a fat-tree the ranks of its own box, so the feeds do not cross
    the network)."""
    hops = {h: r.hops for h in fast if h != root and (r := router.route(h, v)) is not None}
    if not hops:
        raise NotApplicable(f"{NAME}: no fast rank reaches rank {v} by switches alone")
    least = min(hops.values())
    return np.asarray(sorted(h for h, n in hops.items() if n == least), dtype=np.int64)


@dataclass(frozen=True)
class Holdings:
    """What a slow rank's feeders (`nearest`) hold as ``base`` runs: ``feeders[t]`` those that
    hold something at the start of step t, ``available[t]`` how many distinct chunks they hold
    then, ``order`` the chunks in the order they first reach one of them, ``held[t]`` every
    rank's holdings at the start of step t (ranks × chunks, shared by the slow ranks)."""

    feeders: list[np.ndarray]
    available: np.ndarray
    order: np.ndarray
    held: list[np.ndarray]


def snapshots(base: Schedule, root: int) -> list[np.ndarray]:
    """Every rank's holdings at the start of each step of ``base`` (ranks × chunks)."""
    r, k = base.collective.num_ranks, base.collective.num_chunks
    if base.num_steps * r * k > MAX_HOLDINGS:
        raise NotApplicable(f"{NAME}: {base.num_steps} steps x {r} ranks x {k} chunks of holdings is too many")
    held = np.zeros((r, k), dtype=bool)
    held[root] = True
    out = []
    for t in range(base.num_steps):
        out.append(held.copy())
        sl = base.step_slice(t)
        held[base.dst[sl], base.chunk[sl]] = True
    return out


def holdings(held: list[np.ndarray], near: np.ndarray) -> Holdings:
    k = held[0].shape[1]
    first = np.full(k, len(held))
    feeders, available = [], []
    for t, now in enumerate(held):
        have = now[near]
        feeders.append(near[have.any(axis=1)])
        got = have.any(axis=0)
        available.append(int(got.sum()))
        first[got & (first == len(held))] = t
    order = np.lexsort((np.arange(k), first))
    return Holdings(feeders, np.asarray(available, dtype=np.int64), order, held)


def feed_counts(
    topology: Topology, router: Router, base: Schedule, holds: list[Holdings], root: int, slow: list[int], chunk_bytes: float
) -> tuple[np.ndarray, np.ndarray]:
    """(root feeds [slow, step], feeds from the other fast ranks [slow, step]) in whole chunks
    (module docstring: the integer LP; a feed from the others spread evenly over the ranks that
    hold something then). NotApplicable where HiGHS finds no solution."""
    import highspy

    paths = Paths(topology, router)
    steps = base.num_steps
    chunks = base.collective.num_chunks
    inv_bw = chunk_bytes / (topology.bandwidth_array * BYTES_PER_US_PER_GBPS)  # µs per chunk per link
    load, latency = base_loads(topology, base)
    root_feed = [paths.load([(root, v)], 1.0) for v in slow]
    # per slow rank and step: the others' feed, spread over the feeders that reach it by switches
    spread: list[list[tuple[np.ndarray, np.ndarray] | None]] = []
    for v, hold in zip(slow, holds, strict=True):
        per_step: list[tuple[np.ndarray, np.ndarray] | None] = []
        for t in range(steps):
            ranks = hold.feeders[t].tolist()
            per_step.append(paths.load([(h, v) for h in ranks], 1.0 / len(ranks)) if ranks else None)
        spread.append(per_step)
    # columns: per slow rank r_0 … r_{T−1} (root), f_0 … f_{T−1} (the others); then z_0 … z_{T−1}
    per_slow = 2 * steps
    num_feed = per_slow * len(slow)
    num_cols = num_feed + steps
    rows_lo: list[float] = []
    rows_hi: list[float] = []
    entries: list[tuple[int, int, float]] = []  # (row, col, value)
    for t in range(steps):
        lat = latency[t].copy()
        terms: list[tuple[int, np.ndarray]] = []
        for i in range(len(slow)):
            terms.append((i * per_slow + t, root_feed[i][0]))
            lat = np.maximum(lat, root_feed[i][1])
            if spread[i][t] is not None:
                terms.append((i * per_slow + steps + t, spread[i][t][0]))
                lat = np.maximum(lat, spread[i][t][1])
        for link in np.flatnonzero(np.isfinite(lat)).tolist():
            row = len(rows_lo)
            rows_lo.append(lat[link] + load[t, link] * inv_bw[link])
            rows_hi.append(np.inf)
            entries.append((row, num_feed + t, 1.0))
            for col, coef in terms:
                if coef[link]:
                    entries.append((row, col, -coef[link] * inv_bw[link]))
    upper_cols = np.full(num_cols, np.inf)
    for i in range(len(slow)):
        col0 = i * per_slow
        row = len(rows_lo)  # every chunk, once
        rows_lo.append(float(chunks))
        rows_hi.append(float(chunks))
        entries += [(row, col0 + c, 1.0) for c in range(per_slow)]
        for t in range(steps):
            if spread[i][t] is None:
                upper_cols[col0 + steps + t] = 0.0
            # the others feed only chunks they hold: Σ_{u ≤ t} f_u ≤ what they hold at step t
            row = len(rows_lo)
            rows_lo.append(-float(holds[i].available[t]))
            rows_hi.append(np.inf)
            entries += [(row, col0 + steps + u, -1.0) for u in range(t + 1)]
    row_i = np.array([e[0] for e in entries], dtype=np.int64)
    col_i = np.array([e[1] for e in entries], dtype=np.int64)
    val = np.array([e[2] for e in entries])
    order = np.lexsort((row_i, col_i))
    row_i, col_i, val = row_i[order], col_i[order], val[order]
    lp = highspy.HighsLp()
    lp.num_col_ = num_cols
    lp.num_row_ = len(rows_lo)
    # a tie-break of `ROOT_FEED_COST` µs per chunk the root feeds: of equally fast feeds, the
    # one that leaves the root's link most free (the root feeds just enough to keep a slow link busy)
    cost = np.zeros(num_feed)
    for i in range(len(slow)):
        cost[i * per_slow : i * per_slow + steps] = ROOT_FEED_COST
    lp.col_cost_ = np.r_[cost, np.ones(steps)]
    lp.col_lower_ = np.zeros(num_cols)
    lp.col_upper_ = np.where(np.isinf(upper_cols), highspy.kHighsInf, upper_cols)
    lp.row_lower_ = np.array(rows_lo)
    lp.row_upper_ = np.where(np.isinf(rows_hi), highspy.kHighsInf, rows_hi)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * num_feed + [highspy.HighsVarType.kContinuous] * steps
    h = seeded_highs_with_columns(lp, np.searchsorted(col_i, np.arange(num_cols + 1)), row_i, val)
    h.setOptionValue("mip_max_nodes", MIP_NODES)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-6)
    with native_stdout_to_stderr():
        h.passModel(lp)
        h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal and h.getInfo().primal_solution_status != 2:
        raise NotApplicable(f"{NAME}: the feed LP found no solution ({h.modelStatusToString(h.getModelStatus())})")
    values = np.round(np.array(h.getSolution().col_value[:num_feed])).astype(np.int64).reshape(len(slow), per_slow)
    return values[:, :steps], values[:, steps:]


def overlay(
    topology: Topology, router: Router, base: Schedule, root: int, slow: list[int], size: int, params: dict[str, Any]
) -> Schedule:
    """``base`` (a broadcast over the root and the fast ranks) with every slow rank fed in its
    steps as `feed_counts` sizes it: the root's chunks from the end of ``order``, the others'
    from its start, each from the holder that has sent least in that step."""
    fast = [v for v in range(topology.num_ranks) if v not in slow]
    held = snapshots(base, root)
    holds = [holdings(held, nearest(router, fast, root, v)) for v in slow]
    chunks = base.collective.num_chunks
    root_counts, other_counts = feed_counts(topology, router, base, holds, root, slow, size / chunks)
    coll = Collective(Kind.BROADCAST, topology.num_ranks, base.collective.chunks_per_piece, root)
    builder = ScheduleBuilder(coll, topology, NAME, {**params, "slow_ranks": slow})
    routes = np.array([builder.route_id(r) for r in base.routes], dtype=np.int64)
    front = [0] * len(slow)  # next position in ``order`` a slow rank gets from the others
    back = [chunks] * len(slow)  # the root feeds order[back − 1], order[back − 2], …
    fed_root = np.zeros_like(root_counts)
    fed_other = np.zeros_like(other_counts)
    for t in range(base.num_steps):
        sl = base.step_slice(t)
        parts = [(base.src[sl], base.dst[sl], base.chunk[sl], routes[base.route[sl]])]
        now = held[t]
        sent = np.bincount(base.src[sl], minlength=topology.num_ranks)  # sends per rank in this step
        for i, v in enumerate(slow):
            order, feeders = holds[i].order, holds[i].feeders[t]
            src: list[int] = []
            got: list[int] = []
            lo = max(back[i] - int(root_counts[i, t]), front[i])
            got += order[lo : back[i]].tolist()
            src += [root] * (back[i] - lo)
            fed_root[i, t] = back[i] - lo
            back[i] = lo
            while fed_other[i, t] < other_counts[i, t] and front[i] < back[i] and feeders.size:
                c = int(order[front[i]])
                holders = feeders[now[feeders, c]]
                if holders.size == 0:
                    break  # not yet held by any feeder
                q = int(holders[np.argmin(sent[holders])])
                sent[q] += 1
                src.append(q)
                got.append(c)
                front[i] += 1
                fed_other[i, t] += 1
            if src:
                a = np.asarray(src, dtype=np.int64)
                rid = np.asarray([builder.route_id(router.via_names(int(x), v)) for x in a.tolist()], dtype=np.int64)
                parts.append((a, np.full(a.size, v), np.asarray(got, dtype=np.int64), rid))
        builder.add_step_arrays(
            *(np.concatenate([p[j] for p in parts]) for j in range(3)), OP_COPY, np.concatenate([p[3] for p in parts])
        )
    missing = [v for i, v in enumerate(slow) if front[i] < back[i]]
    if missing:  # (the LP gives every chunk; a feed from the others may find fewer held than it counts)
        raise NotApplicable(f"{NAME}: the feeds leave ranks {missing} short")
    builder.params.update({"root_feeds": fed_root.tolist(), "carrier_feeds": fed_other.tolist()})
    return builder.build()


def build(topology: Topology, collective: Collective, router: Router, waves: int, per: int, size: int) -> Schedule:
    """The flat shape: ``waves`` waves of ``per`` chunks per carrier, fed for ``size`` bytes."""
    root = collective.root
    carriers, slow = slow_ranks(topology, root)
    base = flat_base(topology, router, root, carriers, waves, per)
    return overlay(
        topology, router, base, root, slow, size, {"base": "scatter-allgather", "waves": waves, "chunks_per_carrier": per}
    )


def build_tree(topology: Topology, collective: Collective, router: Router, size: int) -> Schedule:
    """The tree shape: ``packing``'s broadcast over the fast ranks (`tree_base`), fed for ``size``
    bytes."""
    root = collective.root
    carriers, slow = slow_ranks(topology, root)
    base = tree_base(topology, root, carriers, size)
    return overlay(topology, router, base, root, slow, size, dict(base.params))


def best_broadcast(topology: Topology, root: int | None, router: Router, size: int | None, requested: int | None) -> Schedule:
    """The fastest of the flat shapes (wave and chunk counts) and the tree shape at ``size``
    (default `REFERENCE_SIZE`)."""
    base = Collective(Kind.BROADCAST, topology.num_ranks, 1, root)
    carriers, _ = slow_ranks(topology, base.root)
    at = size if size is not None else REFERENCE_SIZE
    width = len(carriers)
    timed: list[tuple[float, Schedule]] = []
    for per in PER_CARRIER:
        shapes = [w for w in WAVES if w * width * per <= MAX_CHUNKS]
        if requested is not None:
            shapes = [w for w in shapes if w * width * per == requested]
        with suppress(NotApplicable):  # (a pair without a switch-only path: only the tree shape)
            timed += timed_sweep(
                shapes, lambda w, per=per: build(topology, base, router, w, per, at), topology, at, patience=PATIENCE
            )
    if requested is None:
        with suppress(NotApplicable):
            timed += timed_sweep([None], lambda _: build_tree(topology, base, router, at), topology, at)
    if not timed:
        raise NotApplicable(f"{NAME}: no shape fits {topology.name} (chunk counts are multiples of {width} up to {MAX_CHUNKS})")
    return fastest_at(timed, size)


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options: Any) -> Schedule:
    """The fastest shape at ``size``; a reduce is the fastest broadcast of the reversed machine
    run backwards with reduces."""
    size = size_option(NAME, options, OPTIONS)
    return broadcast_or_dual(NAME, best_broadcast, topology, collective, router, size, options.get("requested_chunks"))


METHOD = Method(
    name=NAME,
    summary=(
        "broadcast (and reduce, reversed) where a few ranks take data in slowly: scatter-allgather over"
        " the fast ranks, the slow ones fed in every step (sizes from an integer LP)"
    ),
    family="scalable",
    collectives=frozenset({Kind.BROADCAST, Kind.REDUCE}),
    build=synthesize,
    default_chunks=one_chunk,
    options=OPTIONS,
    chooses_chunks=True,
)
