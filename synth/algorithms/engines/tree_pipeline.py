"""From trees to steps: a pipelined schedule over a `synth.algorithms.engines.tree_packing.Packing`.

Every root's data (its piece for allgather, the whole buffer for broadcast) is cut into P chunks,
shared among its trees in proportion to their multiplicities. A class of μ identical trees moves μ
of its chunks over each of its arcs per step: its q-th chunk crosses the arc into a rank at depth d
in step ⌊q/μ⌋ + d − 1, so a rank forwards a chunk in the step after it arrived (a step reads the
state at its start: docs/formats.md, 'Meaning of a step'). A packing puts at most ⌊bw/U⌋ trees on a
link, so every step puts at most that many chunks on it: a step lasts about (chunk bytes)/U plus its
latency, and the pipeline takes ⌈P/k⌉ + (height − 1) steps. More chunks shorten the fill and drain
relative to the whole but add a latency per step; the packing method picks P for the message size.
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.builders import largest_remainder
from synth.algorithms.engines.path_channels import PathChannels
from synth.algorithms.engines.tree_packing import Packing
from synth.collective import Collective, Kind
from synth.schedule import OP_COPY, Schedule, ScheduleBuilder
from synth.topology import Topology


def chunk_shares(packing: Packing, root: int, chunks: int) -> list[tuple[int, int]]:
    """(class index, chunks) for every class of ``root``: ``chunks`` split in proportion to the
    multiplicities (largest remainders first, then class order)."""
    classes = [i for i, c in enumerate(packing.classes) if c.root == root]
    weights = np.array([packing.classes[i].multiplicity for i in classes], dtype=np.float64)
    share = largest_remainder(chunks * weights / weights.sum(), chunks)
    return [(i, int(n)) for i, n in zip(classes, share.tolist())]


def tree_schedule(
    topology: Topology,
    channels: PathChannels,
    packing: Packing,
    collective: Collective,
    method: str,
    params: dict,
    slices: tuple[int, ...] = (),
) -> Schedule:
    """The pipelined schedule of ``collective`` (allgather or broadcast, P = its chunks per piece
    for allgather, its chunk count for broadcast) over the packing's trees.

    ``slices`` (ramped slices, `synth.algorithms.engines.slice_ramp`): rounds per slice, a round
    being what a class moves in one step of the equal pipeline (μ chunks); every round of slice s
    starts down the trees in step s, so a slice of k rounds puts k·μ chunks on each arc in one
    step. Empty: one round per step (the equal pipeline)."""
    kind = collective.kind
    if kind not in (Kind.ALLGATHER, Kind.BROADCAST):
        raise ValueError(f"trees carry allgather or broadcast, not {kind.value}")
    per_root = collective.chunks_per_piece
    steps_l: list[np.ndarray] = []
    chan_l: list[np.ndarray] = []
    chunk_l: list[np.ndarray] = []
    for root in packing.roots:
        base = root * per_root if kind is Kind.ALLGATHER else 0
        for index, count in chunk_shares(packing, root, per_root):
            if count == 0:
                continue
            cls = packing.classes[index]
            verts = np.flatnonzero(cls.parent >= 0)
            q = np.arange(count)
            start = q // cls.multiplicity
            if slices:
                start = np.searchsorted(np.cumsum(slices), start, side="right")
            steps_l.append((start[None, :] + cls.depth[verts][:, None] - 1).ravel())
            chan_l.append(np.repeat(cls.parent[verts], count))
            chunk_l.append(np.tile(base + q, verts.size))
            base += count
    builder = ScheduleBuilder(collective, topology, method, params)
    if steps_l:
        step = np.concatenate(steps_l)
        chan = np.concatenate(chan_l)
        chunk = np.concatenate(chunk_l)
        order = np.argsort(step, kind="stable")
        step, chan, chunk = step[order], chan[order], chunk[order]
        bounds = np.r_[0, np.flatnonzero(np.diff(step)) + 1, step.size]
        used = np.unique(chan)
        route = np.zeros(channels.count, dtype=np.int64)
        route[used] = [builder.route_id(channels.via_names(int(c))) for c in used.tolist()]
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            c = chan[a:b]
            builder.add_step_arrays(channels.src[c], channels.dst[c], chunk[a:b], OP_COPY, route[c])
    return builder.build()
