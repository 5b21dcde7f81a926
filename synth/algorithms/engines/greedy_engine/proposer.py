"""The interface of a proposal mode: how channels choose the chunks they offer, and the state the
choice needs.

A step of the engine (`engine.Engine.step`) asks its proposer, in this order:

1. `Proposer.start_step`: which channels may propose in this step (and any per-step set-up);
2. in rounds, until nothing changes: `Proposer.propose` (up to ``room[i]`` chunks per channel,
   best first, with a score), then, for the proposals that won their contests,
   `Proposer.accept`;
3. `Proposer.deliver` once the step's transfers land.

The modes: `proposals_single_target.SingleTargetProposer` (gather, scatter, alltoall: each chunk
has one destination) and, for the collectives whose chunks go to many ranks, rarest first
(`RarestFirstProposer`) over every held chunk as bitsets (`proposals_bitset.BitsetProposer`) or
over a window of arrival lists (`proposals_window.WindowProposer`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, NamedTuple

import numpy as np

from synth.algorithms.engines.greedy_engine.options import EngineOptions
from synth.algorithms.engines.greedy_engine.state import SharedState
from synth.collective import Collective


class Proposals(NamedTuple):
    """One round's proposals of the channels ``chans`` asked (`Proposer.propose`)."""

    #: per proposal: index into ``chans`` of the proposing channel
    row: np.ndarray
    #: per proposal: the chunk
    chunk: np.ndarray
    #: per proposal: higher is better (settles conflicts between proposals)
    score: np.ndarray
    #: per proposal: the neighbourhood of the destination the chunk is new to, or -1
    into: np.ndarray
    #: per channel asked: it had anything to offer (one that had not stays out for the step)
    has: np.ndarray


class Proposer(ABC):
    """A proposal mode, over the run's `SharedState` (``shared``), which it reads and never
    writes (the step loop does)."""

    #: whether the channels taking part in a step are drawn by `offers.Offers` (else the proposer
    #: chooses them in `start_step`, and nothing is drawn)
    uses_offers: ClassVar[bool]
    #: whether one copy of each chunk moves at a time, so proposals of the same chunk compete
    #: whatever their destination (else one proposal wins per (destination, chunk))
    one_copy: ClassVar[bool] = False

    def __init__(self, shared: SharedState, collective: Collective, options: EngineOptions):
        self.shared = shared
        self.options = options

    @abstractmethod
    def start_step(self, chunk_noise: np.ndarray, offered: np.ndarray | None) -> np.ndarray:
        """Set up a step; returns the channels that may propose in it. ``chunk_noise``: the step's
        random tie-break per chunk; ``offered``: the channels `offers.Offers` drew (None unless
        ``uses_offers``)."""

    @abstractmethod
    def propose(self, chans: np.ndarray, room: np.ndarray, chunk_noise: np.ndarray) -> Proposals:
        """Up to ``room[i]`` chunks for channel ``chans[i]``, best first."""

    @abstractmethod
    def accept(self, dst: np.ndarray, chunks: np.ndarray, entered: tuple[np.ndarray, np.ndarray] | None) -> None:
        """Transfers won a round: ``dst[i]`` receives ``chunks[i]`` at the step's end. ``entered``:
        the (transfer, neighbourhood) pairs they reach (`SharedState.accept`)."""

    @abstractmethod
    def deliver(self, dst: np.ndarray, chunks: np.ndarray, needed: np.ndarray) -> None:
        """The step's transfers landed: ``dst[i]`` holds ``chunks[i]``; ``needed[i]``: it was
        one the destination lacked."""


def preference(at: np.ndarray, tier: np.ndarray, rungs: np.ndarray, depth: int, g: int) -> np.ndarray:
    """A candidate's score (higher is better) from its place ``at`` in rarity order and the
    ``tier`` of the largest neighbourhood of the destination it is new to (``depth``: none), for
    a channel with ``rungs`` neighbourhood tiers: new to its first tier costs nothing, each tier
    short of that costs a whole rarity order (g)."""
    return -(at + g * (tier - (depth - rungs)).clip(min=0)).astype(np.float64)


class RarestFirstProposer(Proposer):
    """The modes for chunks that many ranks need (allgather, broadcast): a channel proposes chunks
    its source holds and its destination lacks, new to the largest neighbourhood of the
    destination first, then the chunk the most ranks still lack (``want``), ties in the step's
    random order. Subclasses say how candidates are found (`prepare`, `propose`)."""

    uses_offers = True

    def __init__(self, shared: SharedState, collective: Collective, options: EngineOptions):
        super().__init__(shared, collective, options)
        #: ranks still lacking each chunk
        self.want = shared.lacking.sum(axis=0).astype(np.float64)

    def start_step(self, chunk_noise: np.ndarray, offered: np.ndarray | None) -> np.ndarray:
        assert offered is not None
        alive = offered[self.shared.lack_count[self.shared.ch.dst[offered]] > 0]
        self.prepare(alive, chunk_noise)
        return alive

    @abstractmethod
    def prepare(self, alive: np.ndarray, chunk_noise: np.ndarray) -> None:
        """Per-step set-up of the candidate search for the channels ``alive``."""

    def rank_rarity(self, chunk_noise: np.ndarray) -> None:
        """Every chunk's place in rarity order (most wanted first, ties in the step's random
        order): ``rarity[chunk]`` (g for the windowed scan's sentinel chunk) and its inverse
        ``rarity_order``."""
        g = self.shared.g
        self.rarity_order = np.argsort(-(self.want + chunk_noise), kind="stable")
        self.rarity = np.empty(g + 1, dtype=np.int64)
        self.rarity[self.rarity_order] = np.arange(g)
        self.rarity[g] = g

    def deliver(self, dst: np.ndarray, chunks: np.ndarray, needed: np.ndarray) -> None:
        self.want -= np.bincount(chunks[needed], minlength=self.shared.g)
