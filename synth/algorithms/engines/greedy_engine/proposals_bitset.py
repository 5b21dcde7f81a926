"""Rarest-first proposals over every held chunk, as bitsets: the exact choice.

Who holds what is kept as bits in 64-bit words, with the chunks in rarity order (most wanted
first), so a channel's best chunk is the first bit of (source holds) & ~(destination holds) &
~(on its way to the destination), and, to prefer a chunk new to a neighbourhood, the first bit of
that & ~(the neighbourhood holds). Used while one candidate matrix, channels × chunks / 8 bytes,
stays at most ``exact_bytes`` (`EngineOptions`).
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.greedy_engine.bitwords import bit_masks, first_bits, pack_words
from synth.algorithms.engines.greedy_engine.options import EngineOptions
from synth.algorithms.engines.greedy_engine.proposer import Proposals, RarestFirstProposer, preference
from synth.algorithms.engines.greedy_engine.state import SharedState
from synth.collective import Collective


class BitsetProposer(RarestFirstProposer):
    """Bitsets in rarity order (`bitwords.pack_words` layout), rebuilt every ``reorder_every``
    steps with a fresh rarity order and kept up to date in between:

    - ``hold_bits``: [r, words] the rank holds the chunk;
    - ``incoming_bits``: [r, words] the chunk is on its way to the rank in this step;
    - ``cluster_bits``: [neighbourhoods, words] a member holds the chunk or has it on its way
      (`SharedState.cluster_hold`).
    """

    def __init__(self, shared: SharedState, collective: Collective, options: EngineOptions):
        super().__init__(shared, collective, options)
        self.steps_packed = -1

    def prepare(self, alive: np.ndarray, chunk_noise: np.ndarray) -> None:
        """Bitsets of who holds what, with the chunks in rarity order (most wanted first, ties in
        a random order), so a channel's best chunk is its first candidate bit. The order is
        recomputed every ``reorder_every`` steps; in between, deliveries are set in place."""
        self.steps_packed += 1
        if self.steps_packed % self.options.reorder_every:
            self.incoming_bits.fill(0)
            return
        shared = self.shared
        self.rank_rarity(chunk_noise)
        self.hold_bits = pack_words(shared.holds[:, self.rarity_order])
        self.incoming_bits = np.zeros_like(self.hold_bits)
        if shared.num_clusters:
            self.cluster_bits = pack_words(shared.cluster_hold[: shared.num_clusters, self.rarity_order])

    def propose(self, chans: np.ndarray, room: np.ndarray, chunk_noise: np.ndarray) -> Proposals:
        """Exact choice of up to ``room[i]`` chunks for channel ``chans[i]``: the first ones, in
        rarity order, that the source holds, that the destination neither holds nor receives in
        this step, and that the largest possible neighbourhood of the destination lacks."""
        ch = self.shared.ch
        src, dst = ch.src[chans], ch.dst[chans]
        cand = self.hold_bits[src] & ~self.hold_bits[dst] & ~self.incoming_bits[dst]
        rows = np.arange(chans.size)
        out: list[tuple[np.ndarray, ...]] = []
        has_any = None
        for j in range(int(room.max())):
            has, at, score, into = self._best_bits(chans[rows], cand[rows])
            if has_any is None:
                has_any = has
            rows, at, score, into = rows[has], at[has], score[has], into[has]
            out.append((rows, self.rarity_order[at], score, into))
            keep = room[rows] > j + 1
            rows, at = rows[keep], at[keep]
            if rows.size == 0:
                break
            word, mask = bit_masks(at)
            cand[rows, word] &= ~mask
        row, chunk, score, into = (np.concatenate(x) for x in zip(*out))
        return Proposals(row, chunk, score, into, has_any)

    def _best_bits(self, chans: np.ndarray, cand: np.ndarray):
        """(has, position in rarity order, score, neighbourhood) of each row's best candidate."""
        shared = self.shared
        g = shared.g
        has, at = first_bits(cand)
        depth = shared.tiers.shape[1]
        tiers = shared.tiers[chans]
        tier = np.full(chans.size, depth)  # which preference was met (depth: the destination only)
        into = np.full(chans.size, -1, dtype=np.int64)
        if shared.num_clusters:
            for t in range(depth):
                rows = np.flatnonzero((tier == depth) & (tiers[:, t] >= 0) & has)
                if rows.size == 0:
                    continue
                found, at_t = first_bits(cand[rows] & ~self.cluster_bits[tiers[rows, t]])
                rows, at_t = rows[found], at_t[found]
                at[rows] = at_t
                tier[rows] = t
                into[rows] = tiers[rows, t]
        return has, np.minimum(at, g - 1), preference(at, tier, shared.rungs[chans], depth, g), into

    def accept(self, dst: np.ndarray, chunks: np.ndarray, entered: tuple[np.ndarray, np.ndarray] | None) -> None:
        at = self.rarity[chunks]
        word, mask = bit_masks(at)
        np.bitwise_or.at(self.incoming_bits, (dst, word), mask)
        if entered is not None and entered[0].size:
            owner, cl = entered
            word, mask = bit_masks(at[owner])
            np.bitwise_or.at(self.cluster_bits, (cl, word), mask)

    def deliver(self, dst: np.ndarray, chunks: np.ndarray, needed: np.ndarray) -> None:
        at = self.rarity[chunks]
        word, mask = bit_masks(at)
        np.bitwise_or.at(self.hold_bits, (dst, word), mask)
        super().deliver(dst, chunks, needed)
