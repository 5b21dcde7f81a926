"""A lower bound on the step-synchronous time of every schedule the greedy engine can make for a
collective at a link-room multiplier, before making it: what lets `synth.algorithms.greedy` give
up on a time to beat without running the chunk counts and multipliers it has left.

The argument (also in docs/scalable.md, greedy, "Giving up on a time to beat"):

1. The engine's steps respect the links' room: in a step, a link carries at most ``cap`` transfers
   (`state.link_capacity`: ⌊b·quantum⌋ for a link b times the reference bandwidth, at least 1),
   since a transfer wins only while every link of its channel has room left, and takes one unit
   of room on each (`engine.Engine.step`). Every transfer moves one chunk of ``chunk_bytes``.
2. Take a set S of ranks, and a set of nodes holding S, no other rank, and any switches; its *cut*
   is the links from a node outside into a node inside. A chunk that some rank of S must end
   holding and that no rank of S starts with enters S at least once: some transfer of it goes
   over a channel from a rank outside S to a rank in S, and that channel's path crosses the cut.
   Distinct chunks are distinct transfers, so the D chunks S lacks take at least ⌈D / C⌉ steps
   with such a transfer, C the cut's room per step (the sum of its links' ``cap``).
3. In the step-synchronous cost (docs/formats.md) a transfer over path P takes Σ_{ℓ∈P} α_ℓ +
   max_{ℓ∈P} B_ℓ / bw_ℓ, and each link of its own path carries at least its bytes, so it takes at
   least its channel's α + chunk_bytes / its narrowest bandwidth; a step takes its slowest
   transfer. So each of those ⌈D / C⌉ steps takes at least τ, the least of that over the channels
   into S, and the schedule at least ⌈D / C⌉ · τ (its other steps take no less than nothing).
   Also, a step whose transfers load the cut takes at least α_cut + chunk_bytes · max_{ℓ∈cut}
   n_ℓ / bw_ℓ ≥ α_cut + chunk_bytes · Σ n_ℓ / Σ bw_ℓ (n_ℓ its transfers over ℓ, α_cut the least α
   of a channel crossing the cut), and the cut carries at least D transfers in all: the schedule
   takes at least ⌈D / C⌉ · α_cut + chunk_bytes · D / Σ_{ℓ∈cut} bw_ℓ. The bound of S is the larger.
4. The bound is the largest of these over a few sets: every rank, every rank's complement, the
   neighbourhoods of `PathChannels.neighbourhoods` (servers, racks) and theirs. Any node set
   gives a valid cut; each set's switches are chosen once per topology by a local search that
   adds a switch when the bandwidth it brings in from outside is at most what it sends into the
   set (a fat-tree's rack then cuts at its spine uplinks, not its GPUs' NIC links).

A reduction (reduce, reduce-scatter, allreduce) is built from forward runs on other machines
(duality); its bound here is 0 (none). So is that of a machine too large for the tables of sets
(`StepBound.fits`) and of a collective whose lacking chunks would take too long to count
(`LACKING_WORK`): the bound only ever saves work, and costs a fraction of a second where it is
built (0.05 s on `fattree-4rack`).
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.greedy_engine.state import link_capacity
from synth.algorithms.engines.path_channels import PathChannels
from synth.collective import Collective
from synth.simulate.sync import BYTES_PER_US_PER_GBPS
from synth.topology import Topology

#: at most this many cells in a [sets, channels] or [sets, links] table (`StepBound.fits`)
TABLE_CELLS = 1 << 24
#: at most this many multiply-adds to count the chunks each set lacks ([sets, ranks] @ [ranks, chunks])
LACKING_WORK = 1 << 30


def cut_links(topology: Topology, inside: np.ndarray) -> np.ndarray:
    """The cut of a node set grown from the ranks ``inside`` (bool per rank): ids of the links into
    it from outside. A switch joins while the bandwidth into it from outside is at most what it
    sends into the set (each pass adds every such switch; any set of switches gives a valid cut,
    this one a narrow one)."""
    r, n = topology.num_ranks, topology.num_nodes
    src, dst = topology.link_src_array, topology.link_dst_array
    bw = topology.bandwidth_array
    member = np.zeros(n, dtype=bool)
    member[:r] = inside
    switch = np.arange(n) >= r
    while True:
        into_set = np.bincount(src[member[dst] & ~member[src]], weights=bw[member[dst] & ~member[src]], minlength=n)
        from_out = np.bincount(dst[~member[src]], weights=bw[~member[src]], minlength=n)
        join = switch & ~member & (into_set > 0) & (from_out <= into_set)
        if not join.any():
            return np.flatnonzero(member[dst] & ~member[src])
        member |= join


class StepBound:
    """`time_us`: the lower bound of the module docstring, for one topology and its channels. The
    sets, their cuts and the channels into each are found once; a collective's lacking chunks per
    set once per collective kind and root (they grow with the chunks per piece: every chunk of a
    piece starts and must end where the piece does)."""

    @staticmethod
    def fits(topology: Topology, channels: PathChannels) -> bool:
        """Whether the tables of sets stay within `TABLE_CELLS` (a few thousand ranks would not)."""
        sets = 2 * (topology.num_ranks + len(channels.neighbourhoods().members))
        return sets * max(channels.count, len(topology.links), 1) <= TABLE_CELLS

    def __init__(self, topology: Topology, channels: PathChannels):
        self.topology = topology
        self.channels = channels
        r = topology.num_ranks
        sets = [np.eye(r, dtype=bool)] if r > 1 else []
        hoods = channels.neighbourhoods().members
        if hoods:
            rows = np.zeros((len(hoods), r), dtype=bool)
            for i, group in enumerate(hoods):
                rows[i, group] = True
            sets.append(rows)
        inside = np.concatenate(sets) if sets else np.zeros((0, r), dtype=bool)
        #: [sets, ranks] the rank sets S (each set and its complement)
        self.inside = np.concatenate([inside, ~inside])
        self.cuts = [cut_links(topology, row) for row in self.inside]
        bw = topology.bandwidth_array
        #: per set: its cut's bandwidth (GB/s), and the least α of a channel crossing it
        self.cut_bandwidth = np.array([float(bw[cut].sum()) for cut in self.cuts])
        # the least α of a channel crossing each link, then of each cut's links
        link_alpha = np.full(len(topology.links), np.inf)
        np.minimum.at(link_alpha, channels.link_ids, channels.alpha[channels.link_owner])
        self.cut_alpha = np.array([link_alpha[cut].min(initial=np.inf) for cut in self.cuts])
        # the channels into each set: their α and seconds per byte over their narrowest link
        entering = ~self.inside[:, channels.src] & self.inside[:, channels.dst]
        self.entering = entering
        self.any_entering = entering.any(axis=1)
        self.alpha = channels.alpha.astype(np.float64)
        self.us_per_byte = 1.0 / (channels.bottleneck.astype(np.float64) * BYTES_PER_US_PER_GBPS)
        self._lacking: dict[tuple, np.ndarray] = {}
        self._capacity: dict[int, np.ndarray] = {}
        self._least_step: dict[float, np.ndarray] = {}

    def lacking(self, collective: Collective) -> np.ndarray:
        """Per set, the chunks it must receive from outside: some rank of it must end holding the
        chunk and none starts with it (0 for a reduction, or beyond `LACKING_WORK`)."""
        sets, r = self.inside.shape
        if collective.is_reduction or sets * r * collective.with_chunks(1).num_chunks > LACKING_WORK:
            return np.zeros(sets, dtype=np.int64)
        key = (collective.kind, collective.root)
        unit = self._lacking.get(key)
        if unit is None:
            one = collective.with_chunks(1)
            weights = self.inside.astype(np.float32)
            needs = weights @ one.required().astype(np.float32) > 0
            holds = weights @ one.initial_holders().astype(np.float32) > 0
            unit = self._lacking[key] = (needs & ~holds).sum(axis=1).astype(np.int64)
        return unit * collective.chunks_per_piece

    def capacity(self, quantum: int) -> np.ndarray:
        """Per set, the transfers its cut carries per step at ``quantum``."""
        found = self._capacity.get(quantum)
        if found is None:
            cap, _ = link_capacity(self.topology, self.channels, quantum)
            found = self._capacity[quantum] = np.array([int(cap[cut].sum()) for cut in self.cuts], dtype=np.int64)
        return found

    def least_step_us(self, chunk_bytes: float) -> np.ndarray:
        """Per set, the least time of a step that carries a transfer into it (τ), at ``chunk_bytes``
        (inf for a set no channel enters)."""
        found = self._least_step.get(chunk_bytes)
        if found is None:
            step = self.alpha + chunk_bytes * self.us_per_byte
            found = np.array([step[row].min(initial=np.inf) for row in self.entering])
            self._least_step[chunk_bytes] = found
        return found

    def time_us(self, collective: Collective, quantum: int, size: int) -> float:
        """A lower bound (µs) on the step-synchronous time at ``size`` of every schedule the engine
        makes for ``collective`` at link-room multiplier ``quantum`` (0 for a reduction)."""
        lack = self.lacking(collective)
        capacity = self.capacity(quantum)
        chunk_bytes = collective.chunk_bytes(size)
        live = (lack > 0) & (capacity > 0) & self.any_entering
        if not live.any():
            return 0.0
        lack, capacity = lack[live], capacity[live]
        steps = -(-lack // capacity)
        least = self.least_step_us(chunk_bytes)[live]
        loaded = steps * self.cut_alpha[live] + chunk_bytes * lack / (self.cut_bandwidth[live] * BYTES_PER_US_PER_GBPS)
        return float(np.maximum(steps * least, loaded).max())
