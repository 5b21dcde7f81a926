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

from synth.algorithms.engines.greedy_engine.bitwords import first_true
from synth.algorithms.engines.greedy_engine.options import EngineOptions
from synth.algorithms.engines.greedy_engine.proposer import Proposals, RarestFirstProposer, preference
from synth.algorithms.engines.greedy_engine.state import SharedState
from synth.collective import Collective


class ChunkState(IntFlag):
    """What the windowed scan knows of one (rank, chunk), one byte each (`WindowProposer.flags`).
    A chunk can be proposed to a rank exactly when its flags are ``LACKING`` alone."""

    #: The rank holds the chunk: it started with it, or the chunk landed at the end of an earlier
    #: step. Set alone when a transfer lands (it clears the other two).
    HELD = 1
    #: A transfer bringing the chunk to the rank was accepted in this step; it lands at the step's
    #: end. Only set together with LACKING (every proposal is for a chunk the rank lacks).
    ARRIVING = 2
    #: The rank must end holding the chunk and does not hold it yet.
    LACKING = 4


# numpy takes an IntFlag for an int64 array scalar and compares or stores a uint8 array through
# int64 (several times slower): the hot paths use these plain ints
_HELD = int(ChunkState.HELD)
_LACKING = int(ChunkState.LACKING)
_LACKING_ARRIVING = int(ChunkState.LACKING | ChunkState.ARRIVING)


class WindowProposer(RarestFirstProposer):
    """The windowed scan's state (r ranks, g chunks, every row padded with the sentinel g):

    - ``arrivals``: [r, g + pad] each rank's chunks in arrival order (the ones it starts with
      first), then g; ``count``: how many each rank holds.
    - ``ptr``: per channel, the oldest arrival of its source that its destination may still lack
      (moved forward by `prepare`).
    - ``missing``: [r, g + 1] the rank does not hold the chunk (what the pointers skip over).
    - ``flags``: [r, g + 1] `ChunkState` bytes (0 for the sentinel).
    - ``window``/``newest``: oldest-first and newest-first arrivals looked at per channel; with at
      most ``exact_chunks`` chunks, every one (``window`` = g, ``newest`` = 0).

    Flat indices into these arrays fit in 32 bits unless the collective is huge: ``arrival_stride``
    and ``flag_stride`` are the row lengths, ``src_index``/``dst_index`` the channels' ends in the
    same integer type.
    """

    def __init__(self, shared: SharedState, collective: Collective, options: EngineOptions):
        super().__init__(shared, collective, options)
        ch, r, g = shared.ch, shared.r, shared.g
        window = options.sampled_window if options.samples_offers(ch.count) else options.window
        self.window = g if g <= options.exact_chunks else window
        self.newest = 0 if g <= options.exact_chunks else window
        pad = max(options.advance_span, self.window + self.newest)
        self.arrival_stride, self.flag_stride = g + pad, g + 1
        index = np.int32 if r * (g + pad) < 2**31 else np.int64
        self.src_index, self.dst_index = ch.src.astype(index), ch.dst.astype(index)
        self.ptr = np.zeros(ch.count, dtype=index)
        holds = shared.holds
        self.count = holds.sum(axis=1).astype(index)
        self.arrivals = np.full((r, g + pad), g, dtype=np.int32)
        rows, cols = np.nonzero(holds)
        self.arrivals[rows, np.arange(rows.size) - np.searchsorted(rows, rows)] = cols
        self.missing = np.ones((r, g + 1), dtype=bool)
        self.missing[:, :g] = ~holds
        self.flags = np.zeros((r, g + 1), dtype=np.uint8)
        self.flags[:, :g] = holds.astype(np.uint8) * _HELD | shared.lacking.astype(np.uint8) * _LACKING

    def prepare(self, alive: np.ndarray, chunk_noise: np.ndarray) -> None:
        self._advance(alive)
        self.rank_rarity(chunk_noise)

    def _advance(self, chans: np.ndarray) -> None:
        """Move the oldest-first pointers of ``chans`` past the chunks their destinations hold."""
        src, dst = self.src_index[chans], self.dst_index[chans]
        head = np.take(self.arrivals, src * self.arrival_stride + self.ptr[chans])
        todo = chans[~np.take(self.missing, dst * self.flag_stride + head)]
        width = 8  # most pointers move a few places: look a little ahead first, then further
        while todo.size:
            src, dst = self.src_index[todo], self.dst_index[todo]
            at = self.ptr[todo]
            pos = (src * self.arrival_stride + at)[:, None] + np.arange(width, dtype=at.dtype)[None, :]
            # the sentinel after a rank's last arrival is missing everywhere: every row stops there
            fresh = np.take(self.missing, dst[:, None] * self.flag_stride + np.take(self.arrivals, pos))
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
        ok = np.take(self.flags, dst[None, :] * self.flag_stride + chunk) == _LACKING  # nothing on its way
        # the same choice as `BitsetProposer._best_bits`: the largest neighbourhood the chunk is
        # new to (its tier; depth: none), then rarity. A channel without a neighbourhood at some
        # tier looks at the extra row of `SharedState.cluster_hold`, which holds everything.
        depth = shared.tiers.shape[1]
        tiers = shared.tiers[chans]
        g1 = g + 1
        invalid = (depth + 1) * g1
        cost_type = np.int32 if invalid < 2**31 else np.int64
        tier = np.full(chunk.shape, depth, dtype=cost_type)
        for t in range(depth - 1, -1, -1):  # from the smallest neighbourhood out: the last hit is the largest
            cl = tiers[:, t]
            if shared.num_clusters == 0 or cl.max() < 0:
                continue
            cl = np.where(cl >= 0, cl, shared.num_clusters)[None, :]
            np.putmask(tier, ~np.take(shared.cluster_hold, cl * self.flag_stride + chunk), t)
        cost = tier * g1 + np.take(self.rarity, chunk)
        cost[~ok] = invalid
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

    def accept(self, dst: np.ndarray, chunks: np.ndarray, entered: tuple[np.ndarray, np.ndarray] | None) -> None:
        self.flags[dst, chunks] = _LACKING_ARRIVING  # every proposal was for a chunk lacking, now arriving

    def deliver(self, dst: np.ndarray, chunks: np.ndarray, needed: np.ndarray) -> None:
        g = self.shared.g
        self.flags[dst, chunks] = _HELD
        self.missing[dst, chunks] = False
        order = np.argsort(dst * g + chunks)  # a rank's new chunks arrive in chunk order
        d, c = dst[order], chunks[order]
        self.arrivals[d, self.count[d] + (np.arange(d.size) - np.searchsorted(d, d))] = c
        self.count += np.bincount(d, minlength=self.shared.r).astype(self.count.dtype)
        super().deliver(dst, chunks, needed)
