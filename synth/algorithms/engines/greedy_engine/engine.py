"""The greedy engine's step loop (see the package docstring for what it does)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from synth.algorithms.engines.greedy_engine.bitwords import bit_masks, first_bits, first_true, pack_words
from synth.algorithms.engines.greedy_engine.options import Plan
from synth.algorithms.engines.path_channels import PathChannels
from synth.collective import Collective, Kind
from synth.schedule import OP_COPY, Schedule, ScheduleBuilder
from synth.topology import Topology

_SINGLE_TARGET = (Kind.GATHER, Kind.SCATTER, Kind.ALLTOALL)


def link_capacity(topology: Topology, channels: PathChannels, quantum: int) -> tuple[np.ndarray, float]:
    """Chunks each link may carry per step, and the reference bandwidth (GB/s): the narrowest link
    any channel uses carries ``quantum`` chunks, a link b times wider ⌊b·quantum⌋."""
    bw = topology.bandwidth_array
    used = channels.used_links
    ref = float(bw[used].min()) if used.size else 1.0
    cap = np.floor(bw * quantum / ref + 1e-9).astype(np.int64)
    return np.maximum(cap, 1), ref


def disseminate(
    topology: Topology,
    collective: Collective,
    channels: PathChannels,
    plan: Plan,
    method: str,
    params: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Schedule:
    """A greedy schedule for a non-reduction collective (allgather, broadcast, gather, scatter,
    alltoall). ``progress(done, total)`` is called after every step with the (rank, chunk) pairs
    delivered so far and in all."""
    engine = _Engine(topology, collective, channels, plan)
    builder = ScheduleBuilder(collective, topology, method, params)
    route_ids = np.array([builder.route_id(channels.via_names(i)) for i in range(channels.count)], dtype=np.int64)
    total = engine.remaining
    while engine.remaining:
        chans, chunks = engine.step()
        if chans.size == 0:
            raise RuntimeError(f"greedy made no progress on {topology.name} ({engine.remaining} deliveries left)")
        src, dst = channels.src[chans], channels.dst[chans]
        order = np.argsort((src * engine.r + dst) * engine.g + chunks)  # the canonical order
        builder.add_step_arrays(src[order], dst[order], chunks[order], OP_COPY, route_ids[chans[order]])
        if progress is not None:
            progress(total - engine.remaining, total)
    return builder.build()


def _expand(ptr: np.ndarray, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR rows ``rows`` of (ptr, values), concatenated: (index into ``rows``, value)."""
    lo = ptr[rows]
    lens = ptr[rows + 1] - lo
    owner = np.repeat(np.arange(rows.size), lens)
    offset = np.arange(owner.size) - np.repeat(np.cumsum(lens) - lens, lens)
    return owner, values[lo[owner] + offset]


def _preference(at: np.ndarray, tier: np.ndarray, rungs: np.ndarray, depth: int, g: int) -> np.ndarray:
    """A candidate's score (higher is better) from its place ``at`` in rarity order and the
    ``tier`` of the largest neighbourhood of the destination it is new to (``depth``: none), for
    a channel with ``rungs`` neighbourhood tiers: new to its first tier costs nothing, each tier
    short of that costs a whole rarity order (g)."""
    return -(at + g * (tier - (depth - rungs)).clip(min=0)).astype(np.float64)


def _smallest(cost: np.ndarray, room: np.ndarray, invalid: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


class _Engine:
    """State of one greedy run: who holds what, in which order it arrived, what is still needed."""

    def __init__(self, topology: Topology, collective: Collective, channels: PathChannels, plan: Plan):
        self.ch = channels
        self.rng = np.random.default_rng(plan.seed)
        r, g = collective.num_ranks, collective.num_chunks
        self.r, self.g = r, g
        self.holds = collective.initial_holders()
        required = collective.required()
        self.lacking = required & ~self.holds
        self.lack_count = self.lacking.sum(axis=1)
        self.remaining = int(self.lack_count.sum())
        self.cap, _ = link_capacity(topology, channels, plan.quantum)
        self.single = collective.kind in _SINGLE_TARGET
        if self.single:
            self.incoming = np.zeros((r, g), dtype=bool)
            # one rank needs each chunk; the chunk travels as one copy, held last by its carrier
            self.target = required.argmax(axis=0)
            self.carrier = self.holds.argmax(axis=0)
            self.dist = channels.hop_distances()
            self.moving = np.zeros(g, dtype=bool)
        else:
            self.want = self.lacking.sum(axis=0).astype(np.float64)
        self.options = options = plan.engine
        sampled = options.samples_offers(channels.count)
        window = options.sampled_window if sampled else options.window
        self.window = g if g <= options.exact_chunks else window
        self.newest = 0 if g <= options.exact_chunks else window
        self.packed = not self.single and channels.count * ((g + 7) // 8) <= options.exact_bytes
        self.windowed = not self.single and not self.packed
        # every channel's links as one row, padded with a sentinel link (id = number of links)
        # that always has room: per-channel link work is then a dense gather
        width = int(channels.path_length.max()) if channels.count else 1
        self.room_start = np.append(self.cap, np.int64(1) << 40)
        self.link_table = np.full((channels.count, width), self.cap.size, dtype=np.int64)
        along = np.arange(channels.link_ids.size) - channels.link_ptr[channels.link_owner]
        self.link_table[channels.link_owner, along] = channels.link_ids
        self.channel_room = self.room_start[self.link_table].min(axis=1)
        self.link_columns = np.ascontiguousarray(self.link_table.T)  # (the fast layout for minima)
        self.last_link = channels.link_ids[channels.link_ptr[1:] - 1] if channels.count else np.zeros(0, dtype=np.int64)
        self.direct_only = bool(channels.count == 0 or channels.path_length.max() == 1)
        # one channel per link: a channel never proposes more than its room, so room never binds
        self.private_links = self.direct_only and np.unique(channels.link_ids).size == channels.count
        self._neighbourhoods()
        self.rungs = (self.tiers >= 0).sum(axis=1)  # neighbourhood tiers of each channel
        if self.windowed:
            self._windowed_state()
        # channels grouped by their first link, in a random order fixed for the run
        first = channels.link_ids[channels.link_ptr[:-1]] if channels.count else np.zeros(0, dtype=np.int64)
        shuffle = self.rng.permutation(channels.count)
        order = shuffle[np.argsort(first[shuffle], kind="stable")]
        self.group_channels = order
        breaks = np.flatnonzero(np.diff(first[order])) + 1
        self.group_ptr = np.r_[0, breaks, order.size] if order.size else np.zeros(1, dtype=np.int64)
        group_link = first[order[self.group_ptr[:-1]]] if order.size else np.zeros(0, dtype=np.int64)
        offer = options.sampled_offer if sampled else None
        self.group_limit = np.maximum(options.offer_min, (offer or 0) * self.cap[group_link])
        self.offer_all = offer is None or bool(np.all(np.diff(self.group_ptr) <= self.group_limit))

    # ------------------------------------------------------------------------------- set-up
    def _windowed_state(self) -> None:
        """The windowed scan's arrays. Each is padded past column g with a sentinel chunk g that
        nobody holds, lacks or receives, so a scan running past a rank's arrivals needs no bounds
        checks: ``arrivals`` (every rank's chunks in arrival order, the ones it starts with first,
        then g), ``missing`` (the rank does not hold the chunk) and ``state`` (one byte per
        (rank, chunk): held 1, arriving this step 2, lacking 4)."""
        r, g = self.r, self.g
        pad = max(self.options.advance_span, self.window + self.newest)
        self.arrival_stride, self.state_stride = g + pad, g + 1
        # flat indices into these arrays fit in 32 bits unless the collective is huge
        index = np.int32 if r * (g + pad) < 2**31 else np.int64
        self.src_index, self.dst_index = self.ch.src.astype(index), self.ch.dst.astype(index)
        self.ptr = np.zeros(self.ch.count, dtype=index)
        self.count = self.holds.sum(axis=1).astype(index)
        self.arrivals = np.full((r, g + pad), g, dtype=np.int32)
        rows, cols = np.nonzero(self.holds)
        self.arrivals[rows, np.arange(rows.size) - np.searchsorted(rows, rows)] = cols
        self.missing = np.ones((r, g + 1), dtype=bool)
        self.missing[:, :g] = ~self.holds
        self.state = np.zeros((r, g + 1), dtype=np.uint8)
        self.state[:, :g] = self.holds.astype(np.uint8) | (self.lacking.astype(np.uint8) << 2)
        if self.num_clusters:
            # the sentinel chunk's column, and an extra cluster that holds every chunk
            padded = np.zeros((self.num_clusters + 1, g + 1), dtype=bool)
            padded[: self.num_clusters, :g] = self.cluster_hold
            padded[self.num_clusters] = True
            self.cluster_hold = padded

    def _neighbourhoods(self) -> None:
        """Nested neighbourhoods of every channel's destination (`PathChannels.neighbourhoods`), and
        which chunks each neighbourhood holds."""
        hood = self.ch.neighbourhoods()
        self.tiers = hood.tiers
        self.num_clusters = len(hood.members)
        if self.num_clusters:
            self.cluster_hold = np.stack([self.holds[m].any(axis=0) for m in hood.members])
            self.rank_cluster_ptr = hood.rank_ptr
            self.rank_cluster = hood.rank_cluster

    # ------------------------------------------------------------------------------- one step
    def step(self) -> tuple[np.ndarray, np.ndarray]:
        """Run one step; returns the channels used and the chunk each carried."""
        ch = self.ch
        room = self.room_start.copy()
        chunk_noise = self.rng.random(self.g)
        channel_noise = self.rng.random(ch.count)
        if self.single:
            self._queue(chunk_noise)
            alive = np.flatnonzero(self.queue_ptr[ch.src + 1] > self.queue_ptr[ch.src])
            propose = self._propose_single
        else:
            alive = self._offered()
            alive = alive[self.lack_count[ch.dst[alive]] > 0]
            self._advance(alive)
            if self.packed:
                self._pack(chunk_noise)
            else:
                self._rarity_ranks(chunk_noise)
            propose = self._propose_packed if self.packed else self._propose_window
        taken_ch: list[np.ndarray] = []
        taken_c: list[np.ndarray] = []
        for round_ in range(self.options.max_rounds):
            if alive.size == 0:
                break
            # room left on the fullest link of each channel (before the first round: all of it)
            free = self.channel_room[alive] if round_ == 0 else room[self.link_columns[:, alive]].min(axis=0)
            open_ = free > 0
            alive, free = alive[open_], free[open_]
            if alive.size == 0:
                break
            # a channel offers about its share of the room into its destination (plus one), so the
            # channels into one rank do not all offer the same chunks
            last = self.last_link[alive]
            sharing = np.bincount(last, minlength=room.size)[last]
            share = -(-room[last] // sharing) + self.options.share_extra
            offer = np.minimum(np.minimum(free, share), self.options.multi)
            row, chunk, score, into, has = propose(alive, offer, chunk_noise)
            props = alive[row]
            alive = alive[has]  # a channel with nothing to offer stays out for this step
            if props.size == 0:
                break
            win = self._resolve(props, chunk, score, into, channel_noise, room)
            if not win.any():
                break
            wc, wk = props[win], chunk[win]
            self._accept(wc, wk)
            room -= np.bincount(self.link_table[wc].ravel(), minlength=room.size)
            taken_ch.append(wc)
            taken_c.append(wk)
        if not taken_ch:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        chans = np.concatenate(taken_ch)
        chunks = np.concatenate(taken_c)
        self._deliver(ch.dst[chans], chunks)
        return chans, chunks

    def _offered(self) -> np.ndarray:
        """The channels taking part in this step: for each link out of a rank, a random cyclic run
        of at most max(offer_min, sampled_offer·room) of the channels starting with it."""
        if self.offer_all:
            return np.arange(self.ch.count)
        size = np.diff(self.group_ptr)
        start = (self.rng.random(size.size) * size).astype(np.int64)
        take = np.minimum(size, self.group_limit)
        owner = np.repeat(np.arange(size.size), take)
        offset = np.arange(owner.size) - np.repeat(np.cumsum(take) - take, take)
        pos = self.group_ptr[owner] + (start[owner] + offset) % size[owner]
        return np.sort(self.group_channels[pos])

    def _advance(self, chans: np.ndarray) -> None:
        """Move the oldest-first pointers of ``chans`` past the chunks their destinations hold."""
        if not self.windowed:
            return
        src, dst = self.src_index[chans], self.dst_index[chans]
        head = np.take(self.arrivals, src * self.arrival_stride + self.ptr[chans])
        todo = chans[~np.take(self.missing, dst * self.state_stride + head)]
        width = 8  # most pointers move a few places: look a little ahead first, then further
        while todo.size:
            src, dst = self.src_index[todo], self.dst_index[todo]
            at = self.ptr[todo]
            pos = (src * self.arrival_stride + at)[:, None] + np.arange(width, dtype=at.dtype)[None, :]
            # the sentinel after a rank's last arrival is missing everywhere: every row stops there
            fresh = np.take(self.missing, dst[:, None] * self.state_stride + np.take(self.arrivals, pos))
            found, first = first_true(fresh)
            self.ptr[todo] = at + np.where(found, first, width)
            todo = todo[~found]
            width = min(2 * width, self.options.advance_span)

    def _pack(self, chunk_noise: np.ndarray) -> None:
        """Bitsets of who holds what, with the chunks in rarity order (most wanted first, ties in
        a random order), so a channel's best chunk is its first candidate bit. The order is
        recomputed every ``reorder_every`` steps (`EngineOptions`); in between, deliveries are set in place."""
        self.steps_packed = getattr(self, "steps_packed", -1) + 1
        if self.steps_packed % self.options.reorder_every:
            self.incoming_bits.fill(0)
            return
        self._rarity_ranks(chunk_noise)
        self.hold_bits = pack_words(self.holds[:, self.rarity_order])
        self.incoming_bits = np.zeros_like(self.hold_bits)
        if self.num_clusters:
            self.cluster_bits = pack_words(self.cluster_hold[:, self.rarity_order])

    def _propose_packed(self, chans: np.ndarray, room: np.ndarray, chunk_noise: np.ndarray):
        """Exact choice of up to ``room[i]`` chunks for channel ``chans[i]``: the first ones, in
        rarity order, that the source holds, that the destination neither holds nor receives in
        this step, and that the largest possible neighbourhood of the destination lacks.

        Returns (channel row, chunk, score, neighbourhood the chunk is new to or -1) per proposal,
        and whether each channel had anything to offer."""
        ch = self.ch
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
        parts = [np.concatenate(x) for x in zip(*out)]
        return (*parts, has_any)

    def _best_bits(self, chans: np.ndarray, cand: np.ndarray):
        """(has, position in rarity order, score, neighbourhood) of each row's best candidate."""
        has, at = first_bits(cand)
        depth = self.tiers.shape[1]
        tiers = self.tiers[chans]
        tier = np.full(chans.size, depth)  # which preference was met (depth: the destination only)
        into = np.full(chans.size, -1, dtype=np.int64)
        if self.num_clusters:
            for t in range(depth):
                rows = np.flatnonzero((tier == depth) & (tiers[:, t] >= 0) & has)
                if rows.size == 0:
                    continue
                found, at_t = first_bits(cand[rows] & ~self.cluster_bits[tiers[rows, t]])
                rows, at_t = rows[found], at_t[found]
                at[rows] = at_t
                tier[rows] = t
                into[rows] = tiers[rows, t]
        return has, np.minimum(at, self.g - 1), _preference(at, tier, self.rungs[chans], depth, self.g), into

    def _propose_window(self, chans: np.ndarray, room: np.ndarray, chunk_noise: np.ndarray):
        """Windowed (or, for few chunks, exact) choice over the source's arrivals: among the
        window's chunks, the choice and score of `_propose_packed` (the same schedule when the
        window holds every chunk)."""
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
        # past a rank's arrivals is the sentinel chunk g, whose state is 0
        chunk = np.take(self.arrivals, pos)
        ok = np.take(self.state, dst[None, :] * self.state_stride + chunk) == 4  # lacking, nothing on its way
        # the same choice as `_best_bits`: the largest neighbourhood the chunk is new to (its tier;
        # depth: none), then rarity. A channel without a neighbourhood at some tier looks at the
        # extra cluster row, which holds everything.
        depth = self.tiers.shape[1]
        tiers = self.tiers[chans]
        g1 = self.g + 1
        invalid = (depth + 1) * g1
        cost_type = np.int32 if invalid < 2**31 else np.int64
        tier = np.full(chunk.shape, depth, dtype=cost_type)
        for t in range(depth - 1, -1, -1):  # from the smallest neighbourhood out: the last hit is the largest
            cl = tiers[:, t]
            if self.num_clusters == 0 or cl.max() < 0:
                continue
            cl = np.where(cl >= 0, cl, self.num_clusters)[None, :]
            np.putmask(tier, ~np.take(self.cluster_hold, cl * self.state_stride + chunk), t)
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
        score = _preference(at, tier, self.rungs[chans[row]], depth, self.g)
        return row, self.rarity_order[at], score, into, has

    def _rarity_ranks(self, chunk_noise: np.ndarray) -> None:
        """Every chunk's place in rarity order (most wanted first, ties in the step's random order),
        the order of the bitsets (`_pack`) and of the windowed costs: ``rarity[chunk]`` (g for the
        windowed scan's sentinel chunk) and its inverse ``rarity_order``."""
        self.rarity_order = np.argsort(-(self.want + chunk_noise), kind="stable")
        self.rarity = np.empty(self.g + 1, dtype=np.int64)
        self.rarity[self.rarity_order] = np.arange(self.g)
        self.rarity[self.g] = self.g

    def _queue(self, chunk_noise: np.ndarray) -> None:
        """Chunks still on their way, grouped by carrier, farthest from their rank first."""
        g = self.g
        active = np.flatnonzero(self.lacking[self.target, np.arange(g)])
        here = self.carrier[active]
        far = self.dist[here, self.target[active]] + chunk_noise[active]
        order = np.lexsort((-far, here))
        self.queue = active[order]
        self.queue_ptr = np.searchsorted(here[order], np.arange(self.r + 1))
        self.moving.fill(False)

    def _propose_single(self, chans: np.ndarray, room: np.ndarray, chunk_noise: np.ndarray):
        """For chunks with one destination: the source's queued chunks that the channel brings
        closer to their rank, farthest first."""
        ch = self.ch
        src, dst = ch.src[chans], ch.dst[chans]
        lo = self.queue_ptr[src]
        n = self.queue_ptr[src + 1] - lo
        width = int(min(n.max(), self.options.single_scan))
        cols = np.arange(width)[None, :]
        ok = cols < n[:, None]
        chunk = self.queue[np.minimum(lo[:, None] + cols, self.queue.size - 1)]
        tgt = self.target[chunk]
        here = self.dist[src[:, None], tgt]
        flat = dst[:, None] * self.g + chunk
        ok &= ~np.take(self.holds, flat) & ~np.take(self.incoming, flat) & ~self.moving[chunk]
        ok &= self.dist[dst[:, None], tgt] < here
        score = (here + chunk_noise[chunk]).astype(np.float32)
        row, pick, has = _smallest(np.where(ok, -score, np.inf), room, np.inf)
        return row, chunk[row, pick], score[row, pick], np.full(row.size, -1, dtype=np.int64), has

    def _resolve(self, props, chunks, score, into, channel_noise, room) -> np.ndarray:
        """Which proposals win: one per (destination, chunk) and one per (neighbourhood, chunk)
        for those bringing a chunk new to a neighbourhood; then the best up to every link's room."""
        ch = self.ch
        # every proposal's priority, as one rank: best score first, ties by the channel's draw
        prio = np.empty(props.size, dtype=np.int64)
        prio[np.argsort(channel_noise[props] * 1e-6 - score.astype(np.float64))] = np.arange(props.size)
        win = np.zeros(props.size, dtype=bool)
        key = chunks if self.single else ch.dst[props] * self.g + chunks  # one copy moves at a time
        order = np.argsort(key * props.size + prio)
        win[order[np.r_[True, key[order][1:] != key[order][:-1]]]] = True
        rows = np.flatnonzero(win & (into >= 0))
        if rows.size:
            key = into[rows] * self.g + chunks[rows]
            order = np.argsort(key * props.size + prio[rows])
            win[rows[order[np.r_[False, key[order][1:] == key[order][:-1]]]]] = False
        if self.private_links:
            return win
        # link room: on every link, the best proposals up to its room. A proposal that is among
        # the first (room) on each of its links is safe; accepting the safe ones and dropping
        # those whose link is then full lets others move up; repeat until nothing changes.
        cand = np.flatnonzero(win)
        link = self.link_columns[:, props[cand]].ravel()
        owner = np.tile(np.arange(cand.size), self.link_columns.shape[0])
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
            first = np.flatnonzero(np.r_[True, s_link[1:] != s_link[:-1]])
            rank = np.arange(s_link.size) - np.repeat(first, np.diff(np.r_[first, s_link.size]))
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

    def _accept(self, chans: np.ndarray, chunks: np.ndarray) -> None:
        """Record accepted transfers of the current step (their data lands at its end)."""
        dst = self.ch.dst[chans]
        if self.windowed:
            self.state[dst, chunks] = 6  # every proposal was for a chunk lacking (4), now arriving (2)
        if self.single:
            self.incoming[dst, chunks] = True
            self.moving[chunks] = True
        owner = cl = None
        if self.num_clusters:
            owner, cl = _expand(self.rank_cluster_ptr, self.rank_cluster, dst)
            self.cluster_hold[cl, chunks[owner]] = True
        if self.packed:
            at = self.rarity[chunks]
            word, mask = bit_masks(at)
            np.bitwise_or.at(self.incoming_bits, (dst, word), mask)
            if owner is not None and owner.size:
                at = at[owner]
                word, mask = bit_masks(at)
                np.bitwise_or.at(self.cluster_bits, (cl, word), mask)

    def _deliver(self, dst: np.ndarray, chunks: np.ndarray) -> None:
        """Land the step's transfers: ``dst[i]`` now holds ``chunks[i]``."""
        self.holds[dst, chunks] = True
        if self.single:
            self.incoming[dst, chunks] = False
            self.carrier[chunks] = dst
        if self.windowed:
            self.state[dst, chunks] = 1
            self.missing[dst, chunks] = False
            order = np.argsort(dst * self.g + chunks)  # a rank's new chunks arrive in chunk order
            d, c = dst[order], chunks[order]
            self.arrivals[d, self.count[d] + (np.arange(d.size) - np.searchsorted(d, d))] = c
            self.count += np.bincount(d, minlength=self.r).astype(self.count.dtype)
        if self.packed:
            at = self.rarity[chunks]
            word, mask = bit_masks(at)
            np.bitwise_or.at(self.hold_bits, (dst, word), mask)
        needed = self.lacking[dst, chunks]
        self.lacking[dst, chunks] = False
        self.remaining -= int(needed.sum())
        self.lack_count -= np.bincount(dst[needed], minlength=self.r)
        if not self.single:
            self.want -= np.bincount(chunks[needed], minlength=self.g)
