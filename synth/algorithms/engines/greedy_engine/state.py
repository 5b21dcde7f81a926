"""What every proposal mode of one greedy run reads and the step loop updates: who holds and who
still lacks each chunk, what each neighbourhood holds, and the room of the links.

The state of a mode's own candidate search (bitsets, arrival lists and their pointers, the queues
of chunks with one destination) lives in its proposer (`synth.algorithms.engines.greedy_engine.
proposer`); the step loop (`engine.Engine`) changes this state only through `SharedState.accept`
(a transfer won a round) and `SharedState.deliver` (the step's transfers land).
"""

from __future__ import annotations

import numpy as np

from synth.algorithms.engines.path_channels import PathChannels
from synth.collective import Collective
from synth.topology import Topology


def link_capacity(topology: Topology, channels: PathChannels, quantum: int) -> tuple[np.ndarray, float]:
    """Chunks each link may carry per step, and the reference bandwidth (GB/s): the narrowest link
    any channel uses carries ``quantum`` chunks, a link b times wider ⌊b·quantum⌋."""
    bw = topology.bandwidth_array
    used = channels.used_links
    ref = float(bw[used].min()) if used.size else 1.0
    cap = np.floor(bw * quantum / ref + 1e-9).astype(np.int64)
    return np.maximum(cap, 1), ref


def expand(ptr: np.ndarray, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR rows ``rows`` of (ptr, values), concatenated: (index into ``rows``, value)."""
    lo = ptr[rows]
    lens = ptr[rows + 1] - lo
    owner = np.repeat(np.arange(rows.size), lens)
    offset = np.arange(owner.size) - np.repeat(np.cumsum(lens) - lens, lens)
    return owner, values[lo[owner] + offset]


def rank_in_runs(keys: np.ndarray) -> np.ndarray:
    """Each entry's place in its run of equal ``keys`` (sorted, or at least grouped): 0 for the
    first of a run, 1 for the next, ... (the start of each run carried forward by a running
    maximum: a few passes, where finding the runs and repeating their starts took several more)."""
    n = keys.size
    place = np.arange(n)
    if n == 0:
        return place
    start = np.empty(n, dtype=place.dtype)
    start[0] = 0
    np.multiply(keys[1:] != keys[:-1], place[1:], out=start[1:])
    np.maximum.accumulate(start, out=start)
    return place - start


class LinkRoom:
    """The links' room per step, and every channel's links laid out for per-channel gathers.

    - ``cap``: chunks each link may carry per step (`link_capacity`).
    - ``room_start``: ``cap`` and one more entry, a sentinel link (id = number of links) that
      always has room; a step starts with a copy of it and takes room off as transfers win.
    - ``link_table``: [channels, longest path] the link ids of each channel's path, padded with
      the sentinel link, so per-channel link work is a dense gather; ``link_columns`` is its
      transpose, contiguous (the fast layout for a minimum over each channel's links).
    - ``channel_room``: room of each channel's narrowest link at the start of a step.
    - ``last_link``: each channel's link into its destination.
    - ``private_links``: every channel is a direct link of its own; a channel never proposes more
      than its room, so room never binds and the link contest is skipped.
    """

    def __init__(self, channels: PathChannels, cap: np.ndarray):
        self.cap = cap
        width = int(channels.path_length.max()) if channels.count else 1
        self.room_start = np.append(cap, np.int64(1) << 40)
        self.link_table = np.full((channels.count, width), cap.size, dtype=np.int64)
        along = np.arange(channels.link_ids.size) - channels.link_ptr[channels.link_owner]
        self.link_table[channels.link_owner, along] = channels.link_ids
        self.channel_room = self.room_start[self.link_table].min(axis=1)
        self.link_columns = np.ascontiguousarray(self.link_table.T)
        self.last_link = channels.link_ids[channels.link_ptr[1:] - 1] if channels.count else np.zeros(0, dtype=np.int64)
        direct_only = bool(channels.count == 0 or channels.path_length.max() == 1)
        self.private_links = direct_only and np.unique(channels.link_ids).size == channels.count


class SharedState:
    """Who holds what in one greedy run, what is still needed, and the links' room.

    Holdings (r ranks, g chunks):

    - ``holds``: [r, g] the rank holds the chunk (it started with it, or the chunk landed at the
      end of an earlier step). A chunk accepted in this step is not held until the step ends.
    - ``lacking``: [r, g] the rank must end holding the chunk and does not hold it yet;
      ``lack_count`` per rank, ``remaining`` in all (the run ends at 0).

    Neighbourhoods (`PathChannels.neighbourhoods`: the ranks a channel's destination reaches over
    more local channels, e.g. its server, its rack):

    - ``tiers``: [channels, depth] each channel's destination neighbourhoods, largest first (-1
      padded); ``rungs``: how many each channel has.
    - ``num_clusters``: neighbourhoods in all; ``rank_cluster_ptr``/``rank_cluster``: those each
      rank belongs to (CSR).
    - ``cluster_hold``: [num_clusters + 1, g + 1] a member of the neighbourhood holds the chunk or
      has it on its way (set when a transfer is accepted, not when it lands). Row num_clusters is
      a neighbourhood that holds every chunk (a channel without a neighbourhood at some tier looks
      there, and finds nothing new); column g is the windowed scan's sentinel chunk, which no real
      neighbourhood holds.

    Links: ``links`` (`LinkRoom`).
    """

    def __init__(self, topology: Topology, collective: Collective, channels: PathChannels, quantum: int):
        self.ch = channels
        r, g = collective.num_ranks, collective.num_chunks
        self.r, self.g = r, g
        self.holds = np.ascontiguousarray(collective.initial_holders())
        self.lacking = np.ascontiguousarray(collective.required() & ~self.holds)
        self.lack_count = self.lacking.sum(axis=1)
        self.remaining = int(self.lack_count.sum())
        cap, _ = link_capacity(topology, channels, quantum)
        self.links = LinkRoom(channels, cap)
        hood = channels.neighbourhoods()
        self.tiers = hood.tiers
        self.rungs = (self.tiers >= 0).sum(axis=1)
        self.num_clusters = len(hood.members)
        self.rank_cluster_ptr = hood.rank_ptr
        self.rank_cluster = hood.rank_cluster
        self.cluster_hold = np.zeros((self.num_clusters + 1, g + 1), dtype=bool)
        for i, members in enumerate(hood.members):
            self.cluster_hold[i, :g] = self.holds[members].any(axis=0)
        self.cluster_hold[self.num_clusters] = True

    def accept(self, dst: np.ndarray, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Record transfers accepted in this step (``dst[i]`` receives ``chunks[i]`` at the step's
        end) in the neighbourhoods' holdings. Returns the (transfer, neighbourhood) pairs they
        reach, as (index into ``dst``, neighbourhood), or None without neighbourhoods."""
        if not self.num_clusters:
            return None
        owner, cl = expand(self.rank_cluster_ptr, self.rank_cluster, dst)
        self.cluster_hold[cl, chunks[owner]] = True
        return owner, cl

    def deliver(self, dst: np.ndarray, chunks: np.ndarray) -> np.ndarray:
        """Land the step's transfers: ``dst[i]`` now holds ``chunks[i]``. Returns which of them
        the destination needed."""
        flat = dst * self.g + chunks  # one flat index for both (rank, chunk) matrices
        np.put(self.holds, flat, True)
        needed = np.take(self.lacking, flat)
        np.put(self.lacking, flat, False)
        self.remaining -= int(needed.sum())
        self.lack_count -= np.bincount(dst[needed], minlength=self.r)
        return needed
