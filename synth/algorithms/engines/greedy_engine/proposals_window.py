"""Rarest-first proposals over a window of the source's arrivals: the mode of thousands of ranks.

Beyond ``exact_bytes`` (`EngineOptions`) the bitsets would not fit; a channel then looks at its
source's chunks in the order they arrived: the oldest its destination still lacks (a pointer per
channel that only moves forward) and the newest, ``window`` of each. Within the window the choice
and the score are the bitsets' (`proposals_bitset`): the largest neighbourhood the chunk is new to,
then rarity, so a window as wide as the collective (up to ``exact_chunks`` chunks it is) makes the
bitsets' choices exactly.

Every array the scan gathers from is padded past column g with a *sentinel chunk* g that nobody
holds, lacks or receives, so a scan running past a rank's last arrival needs no bounds checks.
"""

from __future__ import annotations

from enum import IntFlag

import numpy as np

from synth.algorithms.engines.greedy_engine.bitwords import bit_plane, first_true, read_bits, write_bits
from synth.algorithms.engines.greedy_engine.options import EngineOptions
from synth.algorithms.engines.greedy_engine.proposer import Proposals, RarestFirstProposer, preference
from synth.algorithms.engines.greedy_engine.state import SharedState
from synth.collective import Collective


class ChunkState(IntFlag):
    """What the windowed scan knows of one (rank, chunk). A chunk can be proposed to a rank
    exactly when its state is ``LACKING`` alone. `WindowProposer` stores the two questions it asks
    as bit planes (`bitwords.bit_plane`), a bit per (rank, chunk): ``proposable`` (``LACKING``
    alone) and ``held`` (``HELD``); ``LACKING | ARRIVING`` is neither."""

    #: The rank holds the chunk: it started with it, or the chunk landed at the end of an earlier
    #: step. Set alone when a transfer lands (it clears the other two).
    HELD = 1
    #: A transfer bringing the chunk to the rank was accepted in this step; it lands at the step's
    #: end. Only set together with LACKING (every proposal is for a chunk the rank lacks).
    ARRIVING = 2
    #: The rank must end holding the chunk and does not hold it yet.
    LACKING = 4


class WindowProposer(RarestFirstProposer):
    """The windowed scan's state (r ranks, g chunks, every row padded with the sentinel g):

    - ``arrivals``: [r, g + pad] each rank's chunks in arrival order (the ones it starts with
      first), then g; ``count``: how many each rank holds.
    - ``ptr``: per channel, the oldest arrival of its source that its destination may still lack
      (moved forward by `prepare`).
    - ``held`` and ``proposable``: `ChunkState` as two bit planes of ``row_bits`` bits per rank
      (`bitwords.bit_plane`; the sentinel is neither): the rank holds the chunk (the pointers
      skip what a destination holds), or lacks it with nothing on its way (what may be
      proposed). At 4,096 ranks a byte per (rank, chunk) is 16.8 MB, which scattered reads
      take from memory; a bit is 2.1 MB, which they mostly find in the cache.
    - ``window``/``newest``: oldest-first and newest-first arrivals looked at per channel; with at
      most ``exact_chunks`` chunks, every one (``window`` = g, ``newest`` = 0).

    Flat indices into these arrays fit in 32 bits unless the collective is huge: ``arrival_stride``,
    ``row_bits`` and ``flag_stride`` (`SharedState.cluster_hold`'s) are the row lengths,
    ``src_index``/``dst_index`` the channels' ends in the same integer type.
    """

    def __init__(self, shared: SharedState, collective: Collective, options: EngineOptions):
        super().__init__(shared, collective, options)
        ch, r, g = shared.ch, shared.r, shared.g
        window = options.sampled_window if options.samples_offers(ch.count) else options.window
        self.window = g if g <= options.exact_chunks else window
        self.newest = 0 if g <= options.exact_chunks else window
        pad = max(options.advance_span, self.window + self.newest)
        self.arrival_stride, self.flag_stride = g + pad, g + 1
        self.row_bits = -(-(g + 1) // 8) * 8
        index = np.int32 if r * (g + pad) < 2**31 else np.int64
        self.src_index, self.dst_index = ch.src.astype(index), ch.dst.astype(index)
        self.ptr = np.zeros(ch.count, dtype=index)
        holds = shared.holds
        self.count = holds.sum(axis=1).astype(index)
        self.arrivals = np.full((r, g + pad), g, dtype=np.int32)
        rows, cols = np.nonzero(holds)
        self.arrivals[rows, np.arange(rows.size) - np.searchsorted(rows, rows)] = cols
        self.held = bit_plane(holds, self.row_bits)
        self.proposable = bit_plane(shared.lacking, self.row_bits)
        self._step_cost_key: tuple[int, type] | None = None
        self._step_cost = np.zeros(0, dtype=np.int64)

    def prepare(self, alive: np.ndarray, chunk_noise: np.ndarray) -> None:
        self._advance(alive)
        self.rank_rarity(chunk_noise)

    def _advance(self, chans: np.ndarray) -> None:
        """Move the oldest-first pointers of ``chans`` past the chunks their destinations hold."""
        src, dst = self.src_index[chans], self.dst_index[chans]
        head = np.take(self.arrivals, src * self.arrival_stride + self.ptr[chans])
        todo = chans[read_bits(self.held, dst * self.row_bits + head)]
        width = 8  # most pointers move a few places: look a little ahead first, then further
        while todo.size:
            src, dst = self.src_index[todo], self.dst_index[todo]
            at = self.ptr[todo]
            pos = (src * self.arrival_stride + at)[:, None] + np.arange(width, dtype=at.dtype)[None, :]
            # the sentinel after a rank's last arrival is missing everywhere: every row stops there
            fresh = read_bits(self.held, dst[:, None] * self.row_bits + np.take(self.arrivals, pos), invert=True)
            found, first = first_true(fresh)
            self.ptr[todo] = at + np.where(found, first, width)
            todo = todo[~found]
            width = min(2 * width, self.options.advance_span)

    def propose(self, chans: np.ndarray, room: np.ndarray, chunk_noise: np.ndarray) -> Proposals:
        """Windowed (or, for few chunks, exact) choice over the source's arrivals: among the
        window's chunks, the choice and score of `BitsetProposer.propose` (the same schedule when
        the window holds every chunk)."""
        shared = self.shared
        g = shared.g
        src, dst = self.src_index[chans], self.dst_index[chans]
        ptr = self.ptr[chans]
        row_start = src * self.arrival_stride
        # one column per channel, one row per window position: the per-channel choices below are
        # then reductions across a few rows, which numpy does at full speed
        pos = np.empty((self.window + self.newest, chans.size), dtype=ptr.dtype)
        pos[: self.window] = (row_start + ptr)[None, :] + np.arange(self.window, dtype=ptr.dtype)[:, None]
        if self.newest:
            tail = np.maximum(self.count[src] - self.newest, ptr + self.window)
            pos[self.window :] = (row_start + tail)[None, :] + np.arange(self.newest, dtype=ptr.dtype)[:, None]
        # past a rank's arrivals is the sentinel chunk g, whose flags are 0
        chunk = np.take(self.arrivals, pos)
        ok = read_bits(self.proposable, dst[None, :] * self.row_bits + chunk)  # lacking, nothing on its way
        # the same choice as `BitsetProposer._best_bits`: the largest neighbourhood the chunk is
        # new to (its tier; depth: none), then rarity. A channel without a neighbourhood at some
        # tier looks at the extra row of `SharedState.cluster_hold`, which holds everything.
        depth = shared.tiers.shape[1]
        tiers = shared.tiers[chans]
        g1 = g + 1
        invalid = (depth + 1) * g1
        cost_type = np.int32 if invalid < 2**31 else np.int64
        # the tier of every chunk is `depth` (new to no neighbourhood) unless a neighbourhood of
        # the destination lacks it: then the cost is that tier's place plus its rarity
        cost = np.take(self._rarity_cost(depth * g1, cost_type), chunk)
        tier: np.ndarray | None = None
        for t in range(depth - 1, -1, -1):  # from the smallest neighbourhood out: the last hit is the largest
            cl = tiers[:, t]
            if shared.num_clusters == 0 or cl.max() < 0:
                continue
            if tier is None:
                tier = np.full(chunk.shape, depth, dtype=cost_type)
            cl = np.where(cl >= 0, cl, shared.num_clusters)[None, :]
            np.putmask(tier, ~np.take(shared.cluster_hold, cl * self.flag_stride + chunk), t)
        if tier is not None:
            cost = (tier - depth) * g1 + cost
        np.putmask(cost, ~ok, invalid)
        # a window holds each chunk once, so a channel's valid costs differ: the j-th smallest
        # value says which chunk it is (rarity place and tier), and removing it by value is exact
        rows, costs = [], []
        for j in range(min(int(room.max()), cost.shape[0])):
            best = cost.min(axis=0)
            take = best < invalid
            if j == 0:
                has = take
            take &= room > j
            rows.append(np.flatnonzero(take))
            costs.append(best[take])
            if j + 1 < room.max():
                np.putmask(cost, cost == best[None, :], invalid)
        row, best = np.concatenate(rows), np.concatenate(costs).astype(np.int64)
        tier, at = best // g1, best % g1
        into = np.where(tier < depth, tiers[row, np.minimum(tier, depth - 1)], -1)
        score = preference(at, tier, shared.rungs[chans[row]], depth, g)
        return Proposals(row, self.rarity_order[at], score, into, has)

    def _rarity_cost(self, base: int, cost_type: type) -> np.ndarray:
        """``base`` plus every chunk's place in rarity order (the sentinel's: g), in the cost
        type, for this step (the order changes once per step, proposals many times)."""
        key = (base, cost_type)
        if self._step_cost_key != key:
            self._step_cost = (self.rarity + base).astype(cost_type)
            self._step_cost_key = key
        return self._step_cost

    def rank_rarity(self, chunk_noise: np.ndarray) -> None:
        super().rank_rarity(chunk_noise)
        self._step_cost_key = None

    def accept(self, dst: np.ndarray, chunks: np.ndarray, entered: tuple[np.ndarray, np.ndarray] | None) -> None:
        # every proposal was for a chunk lacking, now arriving
        write_bits(self.proposable, dst * self.row_bits + chunks, False)

    def deliver(self, dst: np.ndarray, chunks: np.ndarray, needed: np.ndarray) -> None:
        g = self.shared.g
        write_bits(self.held, dst * self.row_bits + chunks, True)  # no longer proposable since accepted
        # a rank's new chunks arrive in chunk order: (rank, chunk) pairs are distinct, so sorting
        # their keys orders them as sorting the pairs would
        key = np.sort((dst * g + chunks).astype(self.src_index.dtype))
        d = key // g
        c = (key - d * g).astype(self.arrivals.dtype)
        self.arrivals[d, self.count[d] + (np.arange(d.size, dtype=d.dtype) - np.searchsorted(d, d).astype(d.dtype))] = c
        self.count += np.bincount(d, minlength=self.shared.r).astype(self.count.dtype)
        super().deliver(dst, chunks, needed)
