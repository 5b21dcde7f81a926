"""Which channels take part in a step of the rarest-first modes.

Up to ``offer_all_up_to`` channels (`EngineOptions`), every channel does. Beyond that (a 4,096-GPU
fat-tree has more), offers are *sampled*: each link out of a rank offers its room to a random
cyclic run of at most max(``offer_min``, ``sampled_offer`` × room) of the channels that start with
it, a fresh draw each step, so a step's work follows the links' room rather than the channels.
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.greedy_engine.options import EngineOptions
from synth.algorithms.engines.path_channels import PathChannels


class Offers:
    """Channels grouped by their first link, in a random order fixed for the run (drawn from
    ``rng`` when the run is set up, whether or not offers are sampled: the draws that follow
    depend on it): ``group_channels`` with ``group_ptr`` (CSR), ``group_limit`` channels of each
    group taking part per step; ``all`` when every group fits its limit, so every channel takes
    part and nothing is drawn per step."""

    def __init__(self, channels: PathChannels, cap: np.ndarray, options: EngineOptions, rng: np.random.Generator):
        first = channels.link_ids[channels.link_ptr[:-1]] if channels.count else np.zeros(0, dtype=np.int64)
        shuffle = rng.permutation(channels.count)
        order = shuffle[np.argsort(first[shuffle], kind="stable")]
        self.group_channels = order
        breaks = np.flatnonzero(np.diff(first[order])) + 1
        self.group_ptr = np.r_[0, breaks, order.size] if order.size else np.zeros(1, dtype=np.int64)
        group_link = first[order[self.group_ptr[:-1]]] if order.size else np.zeros(0, dtype=np.int64)
        offer = options.sampled_offer if options.samples_offers(channels.count) else None
        self.group_limit = np.maximum(options.offer_min, (offer or 0) * cap[group_link])
        self.all = offer is None or bool(np.all(np.diff(self.group_ptr) <= self.group_limit))
        self.count = channels.count

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """The channels taking part in this step (sorted): for each link out of a rank, a random
        cyclic run of at most ``group_limit`` of the channels starting with it."""
        if self.all:
            return np.arange(self.count)
        size = np.diff(self.group_ptr)
        start = (rng.random(size.size) * size).astype(np.int64)
        take = np.minimum(size, self.group_limit)
        owner = np.repeat(np.arange(size.size), take)
        offset = np.arange(owner.size) - np.repeat(np.cumsum(take) - take, take)
        pos = self.group_ptr[owner] + (start[owner] + offset) % size[owner]
        return np.sort(self.group_channels[pos])
