"""Proposals for collectives whose chunks each have one destination (gather, scatter, alltoall).

Each chunk travels as one copy, held last by its *carrier*; every step, a carrier's channels look
at the chunks it carries, farthest from their destination first (by fewest channels), and offer
those the channel brings closer. Proposals of the same chunk compete whatever their destination,
so a chunk moves along one channel per step.
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.greedy_engine.options import EngineOptions
from synth.algorithms.engines.greedy_engine.proposer import Proposals, Proposer
from synth.algorithms.engines.greedy_engine.state import SharedState, expand, rank_in_runs
from synth.collective import Collective, Kind

#: the collectives whose chunks each have one destination
SINGLE_TARGET_KINDS = (Kind.GATHER, Kind.SCATTER, Kind.ALLTOALL)
#: `SingleTargetProposer` lists the channels that bring a chunk nearer each rank (one entry per
#: channel and rank it helps) while channels × ranks is at most this; beyond, it tests every
#: channel against every chunk it looks at (`SingleTargetProposer.propose_dense`)
NEARER_TABLE_CELLS = 1 << 22


def first_valid(ok: np.ndarray, room: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The columns of the first ``room[i]`` True entries of each row ``i`` of ``ok``, as (row,
    column) pairs in row-major order."""
    take = ok & (np.cumsum(ok, axis=1, dtype=np.int32) <= room[:, None])
    return np.nonzero(take)


def stable_argsort(key: np.ndarray) -> np.ndarray:
    """``np.argsort(key, kind="stable")``, by the several times faster unstable sort when no two
    keys are equal (the sorting order is then unique, so both sorts give it), which a random
    float64 tie-break makes the rule; the stable sort only when some are equal."""
    order = np.argsort(key)
    ranked = key[order]
    if ranked.size > 1 and bool((ranked[1:] == ranked[:-1]).any()):
        return np.argsort(key, kind="stable")
    return order


def nearer_channels(src: np.ndarray, dst: np.ndarray, dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The channels (``src[c]`` to ``dst[c]``) that bring a chunk nearer each rank, by source and
    rank (CSR: key source × r + rank, channel ids ascending within a key): those whose destination
    is fewer channels (``dist``, [r, r]) from the rank than their source. One source at a time: its
    channels against every rank, read rank by rank, come out in key order."""
    r = dist.shape[0]
    by_src = np.argsort(src, kind="stable")
    bounds = np.searchsorted(src[by_src], np.arange(r + 1))
    keys, chans = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for s in np.flatnonzero(np.diff(bounds)).tolist():
        mine = by_src[bounds[s] : bounds[s + 1]]
        rank, at = np.nonzero((dist[dst[mine]] < dist[s]).T)
        keys.append(s * r + rank)
        chans.append(mine[at])
    key = np.concatenate(keys)
    ptr = np.zeros(r * r + 1, dtype=np.int64)
    np.cumsum(np.bincount(key, minlength=r * r), out=ptr[1:])
    return ptr, np.concatenate(chans)


def in_reach(here: np.ndarray, hops: np.ndarray, far: np.ndarray, ranks: int, scan: int) -> np.ndarray | None:
    """Which queued chunks `SingleTargetProposer` must sort, as their sorted indices (None: all),
    of the chunks on ``here`` (their carrier), ``hops`` channels from their rank, keyed ``far`` =
    hops + noise in [0, 1), farthest first. `SingleTargetProposer.propose` looks at the first ``scan`` chunks of a carrier's queue
    only, and any chunk whose key is below a carrier's threshold comes after every chunk at or
    above it: per carrier, a threshold below which at least ``scan`` of its chunks stay (or all of
    them) keeps those first ``scan``. The first ``scan`` of every carrier's queue are then the same,
    in the same order (the sort is stable, and keeping preserves the order), and so is every
    carrier's having a queue.

    The threshold: ``b`` + ``x``, ``b`` the most hops at which at least ``scan`` of the carrier's
    chunks are that far or farther (a chunk fewer hops away has a key below ``b``), and ``x`` a
    noise level that about twice the ``m`` places left at hops ``b`` (and 8 more) clear: the noise
    is uniform, so 1 - 2(m + 8) / (chunks at hops b). A carrier for which fewer than ``scan`` clear
    it (the noise is random) keeps its whole level ``b``. An alltoall's chunks are mostly one hop
    from their rank, hundreds per carrier: the level alone kept all of them for the sort."""
    if here.size <= scan:
        return None
    levels = int(hops.max()) + 1
    # chunks per (carrier, hops), farthest first, and how many are at least that far
    per_level = np.bincount(here * levels + (levels - 1 - hops), minlength=ranks * levels).reshape(ranks, levels)
    at_least = np.cumsum(per_level, axis=1)
    enough = at_least[:, -1] > scan
    if not enough.any():
        return None
    level = np.argmax(at_least >= scan, axis=1)
    bound = np.where(enough, (levels - 1 - level).astype(np.float64), -np.inf)
    carriers = np.arange(ranks)
    at_bound = per_level[carriers, level]
    left = scan - (at_least[carriers, level] - at_bound)  # places left at hops b
    noise = np.where(enough, 1.0 - 2.0 * (left + 8) / np.maximum(at_bound, 1), 0.0).clip(min=0.0)
    threshold = bound + noise
    keep = np.flatnonzero(far >= threshold[here])
    short = enough & (np.bincount(here[keep], minlength=ranks) < scan)
    if short.any():
        threshold[short] = bound[short]
        keep = np.flatnonzero(far >= threshold[here])
    return keep


class SingleTargetProposer(Proposer):
    """Chunks with one destination, moved one copy each, farthest first.

    - ``target``: each chunk's destination; ``carrier``: the rank holding its copy;
      ``dist``: [r, r] fewest channels from a rank to another; ``hops``: each chunk's from its
      carrier to its destination.
    - ``moving``: the chunk moves in this step (its carrier changes at the step's end).
    - ``queue`` with ``queue_ptr`` (CSR by carrier): the chunks still on their way at the start
      of the step, each carrier's farthest from their destination first; ``queue_target`` and
      ``queue_hops``: each queued chunk's destination and its hops from its carrier to it (what
      every round of `propose` would otherwise gather again per cell).
    - ``nearer`` with ``nearer_ptr`` (CSR by source × r + rank, channel ids ascending): the
      channels out of a rank that bring a chunk nearer a rank, fixed for the run; None beyond
      `NEARER_TABLE_CELLS`.
    """

    uses_offers = False
    one_copy = True

    def __init__(self, shared: SharedState, collective: Collective, options: EngineOptions):
        super().__init__(shared, collective, options)
        r, g = shared.r, shared.g
        # one rank needs each chunk; the chunk travels as one copy, held last by its carrier
        self.target = collective.required().argmax(axis=0)
        self.carrier = shared.holds.argmax(axis=0)
        self.dist = shared.ch.hop_distances()
        self.hops = self.dist[self.carrier, self.target]  # kept up to date in `deliver`
        self.moving = np.zeros(g, dtype=bool)
        # the chunk's rank still lacks it (``shared.lacking`` at the target, kept up to date in
        # `deliver`, so that a step does not gather it from the [r, g] matrix)
        self.pending = shared.lacking[self.target, np.arange(g)]
        self.carrier_type = np.int16 if r <= np.iinfo(np.int16).max else np.int64
        ch = shared.ch
        self.nearer: np.ndarray | None = None
        if ch.count * r <= NEARER_TABLE_CELLS:
            self.nearer_ptr, self.nearer = nearer_channels(ch.src, ch.dst, self.dist)
            self.row_of = np.full(ch.count, -1, dtype=np.int64)

    def start_step(self, chunk_noise: np.ndarray, offered: np.ndarray | None) -> np.ndarray:
        """Queue the chunks still on their way; the channels whose source carries any propose."""
        self._queue(chunk_noise)
        src = self.shared.ch.src
        return np.flatnonzero(self.queue_ptr[src + 1] > self.queue_ptr[src])

    def _queue(self, chunk_noise: np.ndarray) -> None:
        """Chunks still on their way, grouped by carrier, farthest from their rank first: of a
        carrier with more than ``single_scan`` of them, only those `propose` can look at and the
        ones as far (`in_reach`), since sorting all of them every step took half the run."""
        active = np.flatnonzero(self.pending)
        here = self.carrier[active]
        hops = self.hops[active]
        far = hops + chunk_noise[active]
        keep = in_reach(here, hops, far, self.shared.r, self.options.single_scan)
        if keep is not None:
            active, far = active[keep], far[keep]
        # np.lexsort((-far, here)), as two stable sorts: the second, of small integers, is a
        # radix sort; the first is `stable_argsort`
        by_far = active[stable_argsort(-far)]
        self.queue = queue = by_far[np.argsort(self.carrier[by_far].astype(self.carrier_type), kind="stable")]
        self.queue_target = self.target[queue]
        self.queue_hops = self.hops[queue]
        self.queue_ptr = np.searchsorted(self.carrier[queue], np.arange(self.shared.r + 1))
        self.moving.fill(False)

    def propose(self, chans: np.ndarray, room: np.ndarray, chunk_noise: np.ndarray) -> Proposals:
        """The source's queued chunks that the channel brings closer to their rank, farthest
        first (among the first ``single_scan`` of its queue): `propose_dense`'s proposals, found
        from the other side. Each source's first ``single_scan`` queued chunks that are not
        moving are looked at once, and each lists the channels out of the source that bring it
        nearer its rank (``nearer``); those of ``chans`` are the channels it is usable by. Sorted
        by (channel's row, place in the queue), the first ``room`` of each row are the dense
        choice, in its order. On a fat-tree, where every pair of ranks has a channel, a chunk is
        usable by the one or two channels into its rank, where the dense test looked at every
        chunk for every channel."""
        if self.nearer is None:
            return self.propose_dense(chans, room, chunk_noise)
        ch, r = self.shared.ch, self.shared.r
        scan = self.options.single_scan
        sources = np.unique(ch.src[chans])
        lo = self.queue_ptr[sources]
        n = np.minimum(self.queue_ptr[sources + 1] - lo, scan)
        # every (source, place) looked at: its chunk, unless it is moving in this step
        place = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        at = np.repeat(lo, n) + place
        still = np.flatnonzero(~self.moving[self.queue[at]])
        at, place = at[still], place[still]
        key = self.carrier[self.queue[at]] * r + self.queue_target[at]
        cell, chan = expand(self.nearer_ptr, self.nearer, key)
        self.row_of[chans] = np.arange(chans.size)
        row = self.row_of[chan]
        self.row_of[chans] = -1
        usable = np.flatnonzero(row >= 0)
        row, cell = row[usable], cell[usable]
        has = np.zeros(chans.size, dtype=bool)
        has[row] = True
        order = np.argsort(row * scan + place[cell])  # distinct keys: any sort gives this order
        row, cell = row[order], cell[order]
        pick = np.flatnonzero(rank_in_runs(row) < room[row])
        row, at = row[pick], at[cell[pick]]
        chosen = self.queue[at]
        score = (self.queue_hops[at] + chunk_noise[chosen]).astype(np.float32)
        return Proposals(row, chosen, score, np.full(row.size, -1, dtype=np.int64), has)

    def propose_dense(self, chans: np.ndarray, room: np.ndarray, chunk_noise: np.ndarray) -> Proposals:
        """`propose` by testing every channel against the first ``single_scan`` chunks of its
        source's queue, as a [channels, scan] matrix.

        A channel's row is a stretch of its source's queue, which `_queue` sorted by hops + noise
        (float64), farthest first; a proposal's score is that key as float32 (rounding keeps the
        order), so the best ``room`` chunks of a row are its first ``room`` usable ones and no
        sort is needed (`first_valid`).

        Whether the destination holds the chunk or has it on its way need not be asked: a chunk
        moves only to ranks nearer its rank (this condition), so every rank that held it is
        farther than its carrier, and one it is on its way to in this step is ``moving``."""
        ch = self.shared.ch
        src, dst = ch.src[chans], ch.dst[chans]
        lo = self.queue_ptr[src]
        n = self.queue_ptr[src + 1] - lo
        width = int(min(n.max(), self.options.single_scan))
        cols = np.arange(width)[None, :]
        ok = cols < n[:, None]
        at = np.minimum(lo[:, None] + cols, self.queue.size - 1)
        chunk = self.queue[at]
        here = self.queue_hops[at]
        ok &= ~self.moving[chunk]
        ok &= np.take(self.dist, dst[:, None] * self.shared.r + self.queue_target[at]) < here
        row, pick = first_valid(ok, room)
        chosen = chunk[row, pick]
        score = (here[row, pick] + chunk_noise[chosen]).astype(np.float32)
        return Proposals(row, chosen, score, np.full(row.size, -1, dtype=np.int64), ok.any(axis=1))

    def accept(self, dst: np.ndarray, chunks: np.ndarray, entered: tuple[np.ndarray, np.ndarray] | None) -> None:
        self.moving[chunks] = True

    def deliver(self, dst: np.ndarray, chunks: np.ndarray, needed: np.ndarray) -> None:
        self.carrier[chunks] = dst
        self.hops[chunks] = self.dist[dst, self.target[chunks]]
        self.pending[chunks[dst == self.target[chunks]]] = False
