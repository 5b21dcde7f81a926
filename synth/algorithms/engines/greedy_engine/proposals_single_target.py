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
from synth.algorithms.engines.greedy_engine.state import SharedState
from synth.collective import Collective, Kind

#: the collectives whose chunks each have one destination
SINGLE_TARGET_KINDS = (Kind.GATHER, Kind.SCATTER, Kind.ALLTOALL)


def smallest(cost: np.ndarray, room: np.ndarray, invalid: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The columns of the up to ``room[i]`` lowest costs below ``invalid`` in each row ``i``
    (ties: leftmost first), as (row, column) pairs, and whether each row had any. ``cost`` is
    overwritten."""
    width = min(int(room.max()), cost.shape[1])
    if width == 1:
        order = cost.argmin(axis=1)[:, None]
        top = np.take_along_axis(cost, order, axis=1)
    elif width == 2:
        rows = np.arange(cost.shape[0])
        order = np.empty((rows.size, 2), dtype=np.intp)
        top = np.empty((rows.size, 2), dtype=cost.dtype)
        order[:, 0] = first = cost.argmin(axis=1)
        top[:, 0] = cost[rows, first]
        cost[rows, first] = invalid
        order[:, 1] = second = cost.argmin(axis=1)
        top[:, 1] = cost[rows, second]
    else:
        order = np.argsort(cost, axis=1, kind="stable")[:, :width]
        top = np.take_along_axis(cost, order, axis=1)
    row, col = np.nonzero((top < invalid) & (np.arange(width)[None, :] < room[:, None]))
    return row, order[row, col], top[:, 0] < invalid


class SingleTargetProposer(Proposer):
    """Chunks with one destination, moved one copy each, farthest first.

    - ``target``: each chunk's destination; ``carrier``: the rank holding its copy;
      ``dist``: [r, r] fewest channels from a rank to another.
    - ``incoming``: [r, g] the chunk is on its way to the rank in this step; ``moving``: the
      chunk moves in this step (its carrier changes at the step's end).
    - ``queue`` with ``queue_ptr`` (CSR by carrier): the chunks still on their way at the start
      of the step, each carrier's farthest from their destination first.
    """

    uses_offers = False
    one_copy = True

    def __init__(self, shared: SharedState, collective: Collective, options: EngineOptions):
        super().__init__(shared, collective, options)
        r, g = shared.r, shared.g
        self.incoming = np.zeros((r, g), dtype=bool)
        # one rank needs each chunk; the chunk travels as one copy, held last by its carrier
        self.target = collective.required().argmax(axis=0)
        self.carrier = shared.holds.argmax(axis=0)
        self.dist = shared.ch.hop_distances()
        self.moving = np.zeros(g, dtype=bool)

    def start_step(self, chunk_noise: np.ndarray, offered: np.ndarray | None) -> np.ndarray:
        """Queue the chunks still on their way; the channels whose source carries any propose."""
        self._queue(chunk_noise)
        src = self.shared.ch.src
        return np.flatnonzero(self.queue_ptr[src + 1] > self.queue_ptr[src])

    def _queue(self, chunk_noise: np.ndarray) -> None:
        """Chunks still on their way, grouped by carrier, farthest from their rank first."""
        g = self.shared.g
        active = np.flatnonzero(self.shared.lacking[self.target, np.arange(g)])
        here = self.carrier[active]
        far = self.dist[here, self.target[active]] + chunk_noise[active]
        order = np.lexsort((-far, here))
        self.queue = active[order]
        self.queue_ptr = np.searchsorted(here[order], np.arange(self.shared.r + 1))
        self.moving.fill(False)

    def propose(self, chans: np.ndarray, room: np.ndarray, chunk_noise: np.ndarray) -> Proposals:
        """The source's queued chunks that the channel brings closer to their rank, farthest
        first (among the first ``single_scan`` of its queue)."""
        ch = self.shared.ch
        src, dst = ch.src[chans], ch.dst[chans]
        lo = self.queue_ptr[src]
        n = self.queue_ptr[src + 1] - lo
        width = int(min(n.max(), self.options.single_scan))
        cols = np.arange(width)[None, :]
        ok = cols < n[:, None]
        chunk = self.queue[np.minimum(lo[:, None] + cols, self.queue.size - 1)]
        tgt = self.target[chunk]
        here = self.dist[src[:, None], tgt]
        flat = dst[:, None] * self.shared.g + chunk
        ok &= ~np.take(self.shared.holds, flat) & ~np.take(self.incoming, flat) & ~self.moving[chunk]
        ok &= self.dist[dst[:, None], tgt] < here
        score = (here + chunk_noise[chunk]).astype(np.float32)
        row, pick, has = smallest(np.where(ok, -score, np.inf), room, np.inf)
        return Proposals(row, chunk[row, pick], score[row, pick], np.full(row.size, -1, dtype=np.int64), has)

    def accept(self, dst: np.ndarray, chunks: np.ndarray, entered: tuple[np.ndarray, np.ndarray] | None) -> None:
        self.incoming[dst, chunks] = True
        self.moving[chunks] = True

    def deliver(self, dst: np.ndarray, chunks: np.ndarray, needed: np.ndarray) -> None:
        self.incoming[dst, chunks] = False
        self.carrier[chunks] = dst
