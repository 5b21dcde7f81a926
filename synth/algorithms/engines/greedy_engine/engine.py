"""The greedy engine's step loop: one `Engine` per run, over the `SharedState` and the proposer
of its mode (see the package docstring for what a step does)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from synth.algorithms.engines.greedy_engine.offers import Offers
from synth.algorithms.engines.greedy_engine.options import EngineOptions, Plan
from synth.algorithms.engines.greedy_engine.proposals_bitset import BitsetProposer
from synth.algorithms.engines.greedy_engine.proposals_single_target import SINGLE_TARGET_KINDS, SingleTargetProposer
from synth.algorithms.engines.greedy_engine.proposals_window import WindowProposer
from synth.algorithms.engines.greedy_engine.proposer import Proposals, Proposer
from synth.algorithms.engines.greedy_engine.state import SharedState, rank_in_runs
from synth.algorithms.engines.path_channels import PathChannels
from synth.algorithms.engines.size_tuning import TimeLimit
from synth.collective import Collective
from synth.schedule import OP_COPY, Schedule, ScheduleBuilder
from synth.simulate.sync import BYTES_PER_US_PER_GBPS
from synth.topology import Topology


def proposer_class(collective: Collective, channels: PathChannels, options: EngineOptions) -> type[Proposer]:
    """The proposal mode of a run: chunks with one destination have theirs; the others go rarest
    first, over bitsets while a candidate matrix (channels × chunks / 8 bytes) stays at most
    ``exact_bytes``, else over windows of arrival lists."""
    if collective.kind in SINGLE_TARGET_KINDS:
        return SingleTargetProposer
    if channels.count * ((collective.num_chunks + 7) // 8) <= options.exact_bytes:
        return BitsetProposer
    return WindowProposer


def disseminate(
    topology: Topology,
    collective: Collective,
    channels: PathChannels,
    plan: Plan,
    method: str,
    params: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
    proposer: type[Proposer] | None = None,
    limit: TimeLimit | None = None,
) -> Schedule:
    """A greedy schedule for a non-reduction collective (allgather, broadcast, gather, scatter,
    alltoall). ``progress(done, total)`` is called after every step with the (rank, chunk) pairs
    delivered so far and in all. ``proposer``: the proposal mode (default: `proposer_class`).
    ``limit``: every step's step-synchronous time is added to it (`step_time_us`), which raises
    `synth.errors.CannotBeat` once the steps so far take longer than it allows."""
    engine = Engine(topology, collective, channels, plan, proposer)
    shared = engine.shared
    builder = ScheduleBuilder(collective, topology, method, params)
    route_ids = np.array([builder.route_id(channels.via_names(i)) for i in range(channels.count)], dtype=np.int64)
    clock = None if limit is None else StepClock(topology, channels, shared.links.link_table)
    # a step's transfers in canonical order, (src, dst, chunk), which is unique in a step (no
    # rank receives a chunk twice): sorting keys that carry the channel in their lowest digits
    # gives that order without an argsort, when the keys fit 63 bits
    r, g, count = shared.r, shared.g, max(channels.count, 1)
    packed = r * r * g * count < 2**62
    total = shared.remaining
    # rarest first, every transfer is a delivery: the builder then holds the columns in one
    # block and hands it to the schedule without a copy (chunks with one destination may take
    # more transfers than deliveries; the builder then grows as without the hint)
    builder.reserve(total)
    while shared.remaining:
        chans, chunks = engine.step()
        if chans.size == 0:
            raise RuntimeError(f"greedy made no progress on {topology.name} ({shared.remaining} deliveries left)")
        if clock is not None and limit is not None:
            limit.add(clock.step_time_us(chans, limit.chunk_bytes))
        if packed:
            key = np.sort(((channels.src[chans] * r + channels.dst[chans]) * g + chunks) * count + chans)
            chans, chunks = key % count, key // count % g
        else:
            chans, chunks = _canonical(channels, chans, chunks, r, g)
        builder.add_step_arrays(channels.src[chans], channels.dst[chans], chunks, OP_COPY, route_ids[chans])
        if progress is not None:
            progress(total - shared.remaining, total)
    del engine, shared  # a few bytes per (rank, chunk): gone before the columns are handed over
    return builder.build()


def _canonical(channels: PathChannels, chans: np.ndarray, chunks: np.ndarray, r: int, g: int) -> tuple[np.ndarray, np.ndarray]:
    """A step's (channel, chunk) pairs in canonical order, (src, dst, chunk), by an argsort."""
    order = np.argsort((channels.src[chans] * r + channels.dst[chans]) * g + chunks)
    return chans[order], chunks[order]


class StepClock:
    """The step-synchronous time of one step of channel transfers (docs/formats.md,
    'Step-synchronous cost'), as `synth.simulate` computes it for the schedule: a transfer takes
    the latency of its path plus its chunk over the most loaded link of the path (the bytes all the
    step's transfers send over the link, over its bandwidth); the step takes its longest transfer.
    A channel's path is its transfer's path (the route its ``via`` names)."""

    def __init__(self, topology: Topology, channels: PathChannels, link_table: np.ndarray):
        self.link_table = link_table  # [channels, longest path], padded with the sentinel link
        sentinel = len(topology.links)
        self.us_per_byte = np.zeros(sentinel + 1, dtype=np.float64)  # per transfer on the link
        self.us_per_byte[:sentinel] = 1.0 / (topology.bandwidth_array * BYTES_PER_US_PER_GBPS)
        self.latency = np.zeros(channels.count, dtype=np.float64)
        np.add.at(self.latency, channels.link_owner, topology.latency_array[channels.link_ids])

    def step_time_us(self, chans: np.ndarray, chunk_bytes: float) -> float:
        """The time of a step whose transfers go over the channels ``chans`` (one per transfer)."""
        if chans.size == 0:
            return 0.0
        table = self.link_table[chans]
        count = np.bincount(table.ravel(), minlength=self.us_per_byte.size)
        load = count * self.us_per_byte  # µs per chunk byte on each link (sentinel: 0)
        return float((self.latency[chans] + chunk_bytes * load[table].max(axis=1)).max())


class Engine:
    """One greedy run: the `SharedState`, the proposer of its mode, the offers, and the run's one
    random generator. Its draws come in a fixed order, which the schedule depends on: the offer
    groups' shuffle when the run is set up; in every step, a tie-break per chunk, one per channel,
    then (rarest-first modes with sampled offers) the offers."""

    def __init__(
        self,
        topology: Topology,
        collective: Collective,
        channels: PathChannels,
        plan: Plan,
        proposer: type[Proposer] | None = None,
    ):
        self.options = options = plan.engine
        self.rng = np.random.default_rng(plan.seed)
        self.shared = SharedState(topology, collective, channels, plan.quantum)
        cls = proposer or proposer_class(collective, channels, options)
        self.proposer = cls(self.shared, collective, options)
        self.offers = Offers(channels, self.shared.links.cap, options, self.rng)

    def step(self) -> tuple[np.ndarray, np.ndarray]:
        """Run one step; returns the channels used and the chunk each carried."""
        shared, links, proposer, options = self.shared, self.shared.links, self.proposer, self.options
        ch = shared.ch
        room = links.room_start.copy()
        chunk_noise = self.rng.random(shared.g)
        channel_noise = self.rng.random(ch.count)
        offered = self.offers.draw(self.rng) if proposer.uses_offers else None
        alive = proposer.start_step(chunk_noise, offered)
        taken_ch: list[np.ndarray] = []
        taken_c: list[np.ndarray] = []
        for round_ in range(options.max_rounds):
            if alive.size == 0:
                break
            # room left on the fullest link of each channel (before the first round: all of it)
            free = links.channel_room[alive] if round_ == 0 else room[links.link_columns[:, alive]].min(axis=0)
            open_ = free > 0
            alive, free = alive[open_], free[open_]
            if alive.size == 0:
                break
            # a channel offers about its share of the room into its destination (plus one), so the
            # channels into one rank do not all offer the same chunks
            last = links.last_link[alive]
            sharing = np.bincount(last, minlength=room.size)[last]
            share = -(-room[last] // sharing) + options.share_extra
            offer = np.minimum(np.minimum(free, share), options.multi)
            proposals = proposer.propose(alive, offer, chunk_noise)
            props = alive[proposals.row]
            alive = alive[proposals.has]  # a channel with nothing to offer stays out for this step
            if props.size == 0:
                break
            win = self._settle(props, proposals, channel_noise, room)
            if not win.any():
                break
            wc, wk = props[win], proposals.chunk[win]
            dst = ch.dst[wc]
            entered = shared.accept(dst, wk)  # the neighbourhoods' holdings, then the mode's own state
            proposer.accept(dst, wk, entered)
            room -= np.bincount(links.link_table[wc].ravel(), minlength=room.size)
            taken_ch.append(wc)
            taken_c.append(wk)
        if not taken_ch:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        chans = np.concatenate(taken_ch)
        chunks = np.concatenate(taken_c)
        dst = ch.dst[chans]
        needed = shared.deliver(dst, chunks)
        proposer.deliver(dst, chunks, needed)
        return chans, chunks

    def _settle(self, props: np.ndarray, proposals: Proposals, channel_noise: np.ndarray, room: np.ndarray) -> np.ndarray:
        """Which proposals (of the channels ``props``) win: one per (destination, chunk), or per
        chunk when one copy moves at a time, and one per (neighbourhood, chunk) among those
        bringing a chunk new to a neighbourhood; then the best up to every link's room."""
        shared, links = self.shared, self.shared.links
        chunks, score, into = proposals.chunk, proposals.score, proposals.into
        # every proposal's priority, as one rank: best score first, ties by the channel's draw
        prio = np.empty(props.size, dtype=np.int64)
        prio[np.argsort(channel_noise[props] * 1e-6 - score.astype(np.float64))] = np.arange(props.size)
        win = np.zeros(props.size, dtype=bool)
        key = chunks if self.proposer.one_copy else shared.ch.dst[props] * shared.g + chunks
        order = np.argsort(key * props.size + prio)
        win[order[np.r_[True, key[order][1:] != key[order][:-1]]]] = True
        rows = np.flatnonzero(win & (into >= 0))
        if rows.size:
            key = into[rows] * shared.g + chunks[rows]
            order = np.argsort(key * props.size + prio[rows])
            win[rows[order[np.r_[False, key[order][1:] == key[order][:-1]]]]] = False
        if links.private_links:
            return win
        # link room: on every link, the best proposals up to its room. A proposal that is among
        # the first (room) on each of its links is safe; accepting the safe ones and dropping
        # those whose link is then full lets others move up; repeat until nothing changes.
        cand = np.flatnonzero(win)
        link = links.link_columns[:, props[cand]].ravel()
        owner = np.tile(np.arange(cand.size), links.link_columns.shape[0])
        # only links asked for more than their room can refuse anyone (never the padding link):
        # a proposal on none of them is safe, and the rest compete on those links alone
        contested = np.bincount(link, minlength=room.size)[link] > room[link]
        owner, link = owner[contested], link[contested]
        if link.size == 0:
            return win
        order = np.argsort(link * props.size + prio[cand][owner])
        s_link, s_owner = link[order], owner[order]  # pairs by link, best proposal first
        left = room.copy()
        pending = np.ones(cand.size, dtype=bool)
        accepted = np.zeros(cand.size, dtype=bool)
        for _ in range(self.options.link_passes):
            rank = rank_in_runs(s_link)
            blocked = np.zeros(cand.size, dtype=bool)
            blocked[s_owner[rank >= left[s_link]]] = True
            safe = pending & ~blocked
            if not safe.any():
                break
            accepted |= safe
            pending &= ~safe
            taken = safe[s_owner]
            left -= np.bincount(s_link[taken], minlength=left.size)
            full = np.zeros(cand.size, dtype=bool)
            full[s_owner[left[s_link] <= 0]] = True
            pending &= ~full
            keep = pending[s_owner]
            s_link, s_owner = s_link[keep], s_owner[keep]
            if s_link.size == 0:
                break
        win[cand] = accepted
        return win
