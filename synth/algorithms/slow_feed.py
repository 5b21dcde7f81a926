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

How many chunks each slow rank gets from the root and from the carriers in each step is an
integer LP over the step-synchronous model (docs/formats.md, 'Step-synchronous cost'): with the
carriers' deal and allgather fixed, a step t lasts at least α(paths over ℓ) + bytes(ℓ, t)/bw(ℓ) for
every link ℓ, the bytes linear in the feeds (a carrier feed spread evenly over the carriers);
minimise Σ_t z_t with every slow rank getting all chunks, and the carriers feeding only chunks of
waves already dealt. On random-nvl72-2 at 1 GiB (root 0): one wave of 70 chunks, the root sends
the slow rank 8 chunks beside the deal (its step takes 8 chunks at 90 GB/s, 1 364 µs, the root's
78 at 900 1 302 µs), the carriers the other 62 while they share theirs: 1 364 + 10 568 = 11 932.46
µs, n/90 GB/s + 2α, 1 µs above the ingress bound (NCCL's analytic model 11 942.26, the best found
before 11 964.61).

Applies to broadcast (reduce: the broadcast of the reversed machine run backwards with reduces,
`engines.builders.by_duality`) on machines where at least one rank other than the root has less
than `SLOW_FRACTION` of the median ingress of the others, at most a quarter of the ranks are that
slow, and every pair the shape uses has a switch-only path. The number of waves (and chunks per
carrier) is chosen at the size (``size`` option, default `REFERENCE_SIZE`) by the step model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

import numpy as np

from synth.algorithms.engines.builders import by_duality
from synth.algorithms.engines.lowering import LogicalStep, logical_step, lower_copies
from synth.algorithms.engines.size_tuning import fastest, size_option, timed_sweep
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, one_chunk
from synth.routing import Router, router_for
from synth.schedule import Schedule
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


def feed_counts(
    topology: Topology, router: Router, root: int, carriers: list[int], slow: list[int], waves: int, per: int, chunk_bytes: float
) -> tuple[np.ndarray, np.ndarray]:
    """(root feeds [slow, step], carrier feeds [slow, step]) in whole chunks for ``waves`` waves of
    ``per`` chunks per carrier (module docstring: the integer LP). NotApplicable where HiGHS finds
    no solution."""
    import highspy

    paths = Paths(topology, router)
    steps = waves + 1
    width = len(carriers)
    chunks = waves * width * per
    inv_bw = chunk_bytes / (topology.bandwidth_array * BYTES_PER_US_PER_GBPS)  # µs per chunk per link
    deal_n, deal_lat = paths.load([(root, q) for q in carriers], per)
    gather_n, gather_lat = paths.load([(q, p) for q in carriers for p in carriers if p != q], per)
    root_feed = [paths.load([(root, s)], 1.0) for s in slow]
    carrier_feed = [paths.load([(q, s) for q in carriers], 1.0 / width) for s in slow]
    # columns: per slow rank r_0 … r_W (root), f_1 … f_W (carriers); then z_0 … z_W
    per_slow = 2 * steps - 1
    num_feed = per_slow * len(slow)
    num_cols = num_feed + steps
    rows_lo: list[float] = []
    entries: list[tuple[int, int, float]] = []  # (row, col, value)
    for t in range(steps):
        base = np.zeros(len(topology.links))
        lat = np.full(len(topology.links), -np.inf)
        if t < waves:
            base += deal_n
            lat = np.maximum(lat, deal_lat)
        if t > 0:
            base += gather_n
            lat = np.maximum(lat, gather_lat)
        terms: list[tuple[int, np.ndarray]] = []
        for i in range(len(slow)):
            col0 = i * per_slow
            terms.append((col0 + t, root_feed[i][0]))
            lat = np.maximum(lat, root_feed[i][1])
            if t > 0:
                terms.append((col0 + steps + t - 1, carrier_feed[i][0]))
                lat = np.maximum(lat, carrier_feed[i][1])
        for link in np.flatnonzero(np.isfinite(lat)).tolist():
            row = len(rows_lo)
            rows_lo.append(lat[link] + base[link] * inv_bw[link])
            entries.append((row, num_feed + t, 1.0))
            for col, coef in terms:
                if coef[link]:
                    entries.append((row, col, -coef[link] * inv_bw[link]))
    for i in range(len(slow)):
        col0 = i * per_slow
        row = len(rows_lo)  # every chunk, once
        rows_lo.append(float(chunks))
        entries += [(row, col0 + c, 1.0) for c in range(per_slow)]
        # the carriers feed only chunks of waves dealt before: Σ_{u ≤ t} f_u ≤ t·width·per
        for t in range(1, steps):
            row = len(rows_lo)
            rows_lo.append(-float(min(chunks, t * width * per)))
            entries += [(row, col0 + steps + u - 1, -1.0) for u in range(1, t + 1)]
    num_rows = len(rows_lo)
    upper = np.full(num_rows, highspy.kHighsInf)
    for i in range(len(slow)):  # the equality rows
        upper[num_rows - len(slow) * steps + i * steps] = float(chunks)
    row_i = np.array([e[0] for e in entries], dtype=np.int64)
    col_i = np.array([e[1] for e in entries], dtype=np.int64)
    val = np.array([e[2] for e in entries])
    order = np.lexsort((row_i, col_i))
    row_i, col_i, val = row_i[order], col_i[order], val[order]
    lp = highspy.HighsLp()
    lp.num_col_ = num_cols
    lp.num_row_ = num_rows
    # a tie-break of `ROOT_FEED_COST` µs per chunk the root feeds: of equally fast feeds, the
    # one that leaves the root's link most free (the root feeds just enough to keep a slow link busy)
    cost = np.zeros(num_feed)
    for i in range(len(slow)):
        cost[i * per_slow : i * per_slow + steps] = ROOT_FEED_COST
    lp.col_cost_ = np.r_[cost, np.ones(steps)]
    lp.col_lower_ = np.zeros(num_cols)
    lp.col_upper_ = np.full(num_cols, highspy.kHighsInf)
    lp.row_lower_ = np.array(rows_lo)
    lp.row_upper_ = upper
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
    root_counts = values[:, :steps]
    carrier_counts = np.zeros((len(slow), steps), dtype=np.int64)
    carrier_counts[:, 1:] = values[:, steps:]
    return root_counts, carrier_counts


def broadcast_steps(
    root: int,
    carriers: list[int],
    slow: list[int],
    waves: int,
    per: int,
    root_counts: np.ndarray,
    carrier_counts: np.ndarray,
) -> list[LogicalStep]:
    """The logical steps (module docstring) for the feeds of `feed_counts`."""
    width = len(carriers)
    chunks = waves * width * per
    fast = np.asarray(carriers, dtype=np.int64)
    ids = np.arange(chunks, dtype=np.int64)
    owner = fast[ids % width]
    wave = ids // (width * per)
    slot = {q: i for i, q in enumerate(carriers)}
    front = [0] * len(slow)  # next chunk a slow rank gets from the carriers
    back = [chunks] * len(slow)  # the root feeds chunks back[i] − 1, back[i] − 2, …
    steps: list[LogicalStep] = []
    for t in range(waves + 1):
        src: list[np.ndarray] = []
        dst: list[np.ndarray] = []
        chunk: list[np.ndarray] = []
        dealt = ids[wave == t]
        src.append(np.full(dealt.size, root))
        dst.append(owner[dealt])
        chunk.append(dealt)
        shared = ids[wave == t - 1]
        s = np.repeat(owner[shared], width)
        d = np.tile(fast, shared.size)
        keep = s != d
        src.append(s[keep])
        dst.append(d[keep])
        chunk.append(np.repeat(shared, width)[keep])
        sent = np.zeros(width, dtype=np.int64)  # carrier feeds in this step (the allgather is even)
        for i, v in enumerate(slow):
            got = int(root_counts[i, t])
            lo = max(back[i] - got, front[i])
            fed = np.arange(lo, back[i], dtype=np.int64)
            back[i] = lo
            src.append(np.full(fed.size, root))
            dst.append(np.full(fed.size, v))
            chunk.append(fed)
            want = min(int(carrier_counts[i, t]), back[i] - front[i])
            fs: list[int] = []
            for c in range(front[i], front[i] + want):
                if wave[c] >= t:
                    break  # not yet held by any carrier
                if wave[c] == t - 1:
                    q = slot[int(owner[c])]
                else:
                    q = int(np.argmin(sent))
                sent[q] += 1
                fs.append(carriers[q])
            src.append(np.asarray(fs, dtype=np.int64))
            dst.append(np.full(len(fs), v))
            chunk.append(np.arange(front[i], front[i] + len(fs), dtype=np.int64))
            front[i] += len(fs)
        steps.append(logical_step(np.concatenate(src), np.concatenate(dst), np.concatenate(chunk)))
    missing = [v for i, v in enumerate(slow) if front[i] < back[i]]
    if missing:  # (the LP gives every chunk; rounding could leave some: the last step takes them)
        raise NotApplicable(f"{NAME}: the feeds leave ranks {missing} short")
    return steps


def build(topology: Topology, collective: Collective, router: Router, waves: int, per: int, size: int) -> Schedule:
    """The schedule of ``waves`` waves of ``per`` chunks per carrier, fed for ``size`` bytes."""
    root = collective.root
    carriers, slow = slow_ranks(topology, root)
    chunks = waves * len(carriers) * per
    coll = Collective(Kind.BROADCAST, collective.num_ranks, chunks, root)
    root_counts, carrier_counts = feed_counts(topology, router, root, carriers, slow, waves, per, size / chunks)
    steps = broadcast_steps(root, carriers, slow, waves, per, root_counts, carrier_counts)
    params = {
        "waves": waves,
        "chunks_per_carrier": per,
        "slow_ranks": slow,
        "root_feeds": root_counts.tolist(),
        "carrier_feeds": carrier_counts.tolist(),
    }
    return lower_copies(topology, coll, steps, NAME, params, router)


def best_broadcast(topology: Topology, root: int | None, router: Router, size: int | None, requested: int | None) -> Schedule:
    """The fastest of the wave and chunk counts at ``size`` (default `REFERENCE_SIZE`)."""
    base = Collective(Kind.BROADCAST, topology.num_ranks, 1, root)
    carriers, _ = slow_ranks(topology, base.root)
    at = size if size is not None else REFERENCE_SIZE
    width = len(carriers)
    timed: list[tuple[float, Schedule]] = []
    for per in PER_CARRIER:
        shapes = [w for w in WAVES if w * width * per <= MAX_CHUNKS]
        if requested is not None:
            shapes = [w for w in shapes if w * width * per == requested]
        timed += timed_sweep(
            shapes, lambda w, per=per: build(topology, base, router, w, per, at), topology, at, patience=PATIENCE
        )
    if not timed:
        raise NotApplicable(f"{NAME}: no wave count fits (chunk counts are multiples of {width} up to {MAX_CHUNKS})")
    schedule = fastest(timed)
    if size is not None:
        schedule = replace(schedule, params={**schedule.params, "chosen_at_size": size})
    return schedule


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options: Any) -> Schedule:
    """The fastest shape at ``size``; a reduce is the fastest broadcast of the reversed machine
    run backwards with reduces."""
    size = size_option(NAME, options, OPTIONS)
    requested = options.get("requested_chunks")
    if collective.kind is Kind.REDUCE:
        return by_duality(
            lambda topo, coll, rtr: best_broadcast(topo, coll.root, rtr, size, requested), topology, collective, NAME
        )
    if collective.kind is not Kind.BROADCAST:
        raise NotApplicable(f"{NAME} does not serve {collective.kind.value} (it serves broadcast and reduce)")
    return best_broadcast(topology, collective.root, router or router_for(topology), size, requested)


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
