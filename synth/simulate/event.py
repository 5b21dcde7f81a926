"""The event-driven model: a fluid simulation of the schedule's transfers as flows on directed links.

Rules (docs/simulator.md has them with a worked example):

* **Data.** Transfers of the same step never wait for each other (each reads the state at the start
  of its step). A transfer at step s that reads (src, chunk) waits for the writes to (src, chunk)
  of the latest earlier step that wrote it (read after write). A transfer that writes (dst, chunk)
  waits for the writes to (dst, chunk) of the latest earlier step that wrote it (write after write)
  and for every earlier-step read of (dst, chunk) since that step, that step included (write after
  read). Earlier accesses are covered transitively.
* **Links.** A transfer holds every link of its path from its start to its completion, and a link
  serves the steps in order: a transfer waits until every transfer of an earlier step that crosses
  one of its links has completed (for each link, the latest earlier step that used it; earlier ones
  are covered transitively). Transfers of the same step share links concurrently.
* **Latency, then bytes.** A transfer starts when all of the above have completed. It first pays
  its path's latency Σα once (a pipelined cut-through: the head of the data crosses every hop),
  during which it uses no bandwidth; then its bytes flow, occupying every link of its path at once.
* **Bandwidth sharing.** Flows sharing directed links split them max-min fairly (progressive
  filling): every flow gets the largest rate such that no link is over its bandwidth and no flow
  could go faster without slowing one that is no faster. A flow is limited by its most contended
  link. Rates are recomputed whenever a flow starts or ends; between such events they are constant.
* **Completion.** A transfer completes when its last byte has flowed. The schedule takes the time
  of the last completion.

Events closer together than `TIME_TOLERANCE` (relative) are merged, so flows that finish "at the
same time" up to rounding finish together. Everything is deterministic: no choice depends on the
order of transfers within a step.

Dependencies are kept as *groups* so that their number stays linear in the number of transfers even
when one chunk is reduced into by many ranks and then read by many others: per key (rank, chunk),
``W(x, j)`` is the set of writes in the j-th step that writes x, and ``A(x, j)`` is those writes
plus every read of x in steps from that one up to (excluding) the next writing step (``A(x, -)``:
the reads before the first write). A reader waits for one W group, a writer for one A group. Per
directed link, ``L(ℓ, j)`` is the set of transfers crossing ℓ in the j-th step that uses it; a
transfer waits for one L group per link of its path.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from synth.schedule import Schedule
from synth.simulate.paths import TransferPaths
from synth.topology import Topology

#: events closer than this fraction of the current time (and at least 1e-9 µs) are merged
TIME_TOLERANCE = 1e-9

BYTES_PER_US_PER_GBPS = 1e3

#: below this many distinct paths in flight, rates are recomputed from scratch (cheaper than the
#: bookkeeping an incremental update needs)
PARTIAL_MIN_PATHS = 64


@dataclass(frozen=True, eq=False)
class DependencyGroups:
    """Who waits for whom, as groups (see the module docstring).

    Transfer t is a member of groups ``member[member_ptr[t]:member_ptr[t+1]]`` and waits for groups
    ``waits[waits_ptr[t]:waits_ptr[t+1]]``; ``dependents`` (CSR by group) inverts ``waits``;
    ``size[g]`` is the number of members of group g."""

    num_groups: int
    member_ptr: np.ndarray
    member: np.ndarray
    waits_ptr: np.ndarray
    waits: np.ndarray
    dependents_ptr: np.ndarray
    dependents: np.ndarray
    size: np.ndarray

    def predecessors(self, transfer: int) -> np.ndarray:
        """Transfers that ``transfer`` waits for (the members of its groups), sorted."""
        groups = self.waits[self.waits_ptr[transfer] : self.waits_ptr[transfer + 1]]
        inverse_ptr, inverse = _invert(self.member_ptr, self.member, self.num_groups)
        found = [inverse[inverse_ptr[g] : inverse_ptr[g + 1]] for g in groups]
        return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


def _csr(rows: np.ndarray, values: np.ndarray, num_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, values) from unsorted (row, value) pairs; values keep their order within a row."""
    order = np.argsort(rows, kind="stable")
    ptr = np.zeros(num_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=num_rows), out=ptr[1:])
    return ptr, values[order]


def _invert(ptr: np.ndarray, values: np.ndarray, num_values: int) -> tuple[np.ndarray, np.ndarray]:
    rows = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
    return _csr(values, rows, num_values)


def _gather(ptr: np.ndarray, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Concatenation of the CSR rows ``rows``."""
    lengths = ptr[rows + 1] - ptr[rows]
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=values.dtype)
    starts = np.repeat(ptr[rows] - (np.cumsum(lengths) - lengths), lengths)
    return values[starts + np.arange(total, dtype=np.int64)]


def _dense_ids(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(id of each code among the distinct codes in increasing order, the distinct codes); one
    sort, no search."""
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    new = np.empty(ordered.size, dtype=bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    ids = np.empty(codes.size, dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids, ordered[new]


def dependency_groups(schedule: Schedule, paths: TransferPaths) -> DependencyGroups:
    """The dependency groups of a schedule: data (read/write) and link order (see the module
    docstring)."""
    n = schedule.num_transfers
    g_chunks = schedule.collective.num_chunks
    step = schedule.step_of_transfer
    span = schedule.num_steps + 1
    read_key = schedule.src * g_chunks + schedule.chunk
    write_key = schedule.dst * g_chunks + schedule.chunk
    idx = np.arange(n, dtype=np.int64)

    # write groups W(j): the distinct (key, step) of writes, numbered in increasing order
    wcode_all = write_key * span + step
    j, wcode = _dense_ids(wcode_all)
    wkey, wstep = wcode // span, wcode % span
    nw = wcode.size
    # for each read, the latest write group at or before (key, step): sort reads and writes
    # together (a write before a read of the same code) and carry the last write group forward
    rcode = read_key * span + step
    both = np.concatenate((wcode_all * 2, rcode * 2 + 1))
    order = np.argsort(both, kind="stable")
    carried = np.maximum.accumulate(np.concatenate((j, np.full(n, -1, dtype=np.int64)))[order])
    upto = np.empty(2 * n, dtype=np.int64)
    upto[order] = carried
    upto = upto[n:]

    def same_key(pos: np.ndarray, key: np.ndarray) -> np.ndarray:
        ok = (pos >= 0) & (pos < nw)
        ok[ok] = wkey[pos[ok]] == key[ok]
        return ok

    # group ids: W(j) = j; A(after write group j) = nw + j; A(reads before the first write of the
    # key whose first write group is j) = 2·nw + j; link groups L from 3·nw on
    members_row: list[np.ndarray] = []
    members_val: list[np.ndarray] = []
    waits_row: list[np.ndarray] = []
    waits_val: list[np.ndarray] = []

    # readers wait for the writes of the latest earlier writing step of their key (read after
    # write), and belong to the access group of the latest writing step at or before theirs, or to
    # the "before the first write" group of their key (if the key is ever written)
    has = same_key(upto, read_key)
    same_step = has.copy()
    same_step[has] = wstep[upto[has]] == step[has]
    before = np.where(same_step, upto - 1, upto)
    ok = has & (~same_step | same_key(before, read_key))
    waits_row.append(idx[ok])
    waits_val.append(before[ok])
    members_row.append(idx[has])
    members_val.append(nw + upto[has])
    first_later = upto + 1
    ok2 = ~has & same_key(first_later, read_key)
    members_row.append(idx[ok2])
    members_val.append(2 * nw + first_later[ok2])

    # writers belong to their write group and its access group; they wait for the access group of
    # the previous writing step of their key, or for the reads before the key's first write
    members_row += [idx, idx]
    members_val += [j, nw + j]
    prev = j - 1
    ok = same_key(prev, write_key)
    waits_row.append(idx[ok])
    waits_val.append(nw + prev[ok])
    waits_row.append(idx[~ok])
    waits_val.append(2 * nw + j[~ok])

    # link order: per directed link, the transfers crossing it in the j-th step that uses it form
    # group L(link, j); a transfer waits for the previous such group of every link of its path
    entry_row = paths.entry_transfer()
    lpos, lcode = _dense_ids(paths.links * span + np.repeat(step, paths.lengths))
    members_row.append(entry_row)
    members_val.append(3 * nw + lpos)
    ok = lpos > 0
    ok[ok] = lcode[lpos[ok] - 1] // span == paths.links[ok]
    waits_row.append(entry_row[ok])
    waits_val.append(3 * nw + lpos[ok] - 1)

    num_groups = 3 * nw + lcode.size
    m_row, m_val = np.concatenate(members_row), np.concatenate(members_val)
    w_row, w_val = np.concatenate(waits_row), np.concatenate(waits_val)
    size = np.bincount(m_val, minlength=num_groups).astype(np.int64)
    # an empty group (reads before a first write that nobody made) is no wait at all
    keep = size[w_val] > 0
    w_row, w_val = w_row[keep], w_val[keep]
    member_ptr, member = _csr(m_row, m_val, n)
    waits_ptr, waits = _csr(w_row, w_val, n)
    dependents_ptr, dependents = _csr(w_val, w_row, num_groups)
    return DependencyGroups(num_groups, member_ptr, member, waits_ptr, waits, dependents_ptr, dependents, size)


# =============================================================================== bandwidth sharing
@dataclass(frozen=True, eq=False)
class SharingNetwork:
    """The links that can limit a flow, per distinct path, as a padded table: row p lists the
    links of path p, padded with ``pad`` (an extra link of infinite capacity); ``capacity`` is in
    bytes/µs and has that extra entry at the end.

    Links crossed by exactly the same set of the schedule's paths (a GPU's link to its NIC and the
    NIC's link to the top-of-rack switch, say) always carry the same flows, so only the one with the
    least capacity can limit them: the others are left out. This is exact for max-min sharing and
    makes every rate computation cheaper."""

    table: np.ndarray  # int64 [num_paths, width]
    capacity: np.ndarray  # float64 [num_links + 1]

    @property
    def pad(self) -> int:
        return self.capacity.size - 1


def sharing_network(paths: TransferPaths, topology: Topology) -> SharingNetwork:
    """Per distinct path, the links that can limit it (see `SharingNetwork`)."""
    capacity = np.append(topology.bandwidth_array * BYTES_PER_US_PER_GBPS, np.inf)
    pad = capacity.size - 1
    reps = paths.path_representatives()
    lengths = paths.ptr[reps + 1] - paths.ptr[reps]
    links = _gather(paths.ptr, paths.links, reps)
    entry_path = np.repeat(np.arange(reps.size, dtype=np.int64), lengths)
    drop = np.zeros(capacity.size, dtype=bool)
    if links.size:
        order = np.lexsort((entry_path, links))
        by_link, path_of = links[order], entry_path[order]
        cuts = np.flatnonzero(np.r_[True, by_link[1:] != by_link[:-1], True])
        keeper: dict[bytes, int] = {}
        for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            link = int(by_link[a])
            key = path_of[a:b].tobytes()
            other = keeper.get(key)
            if other is None:
                keeper[key] = link
            elif (capacity[link], link) < (capacity[other], other):
                drop[other] = True
                keeper[key] = link
            else:
                drop[link] = True
    keep = ~drop[links]
    links, entry_path = links[keep], entry_path[keep]
    lengths = np.bincount(entry_path, minlength=reps.size)
    width = int(lengths.max()) if lengths.size else 1
    table = np.full((reps.size, width), pad, dtype=np.int64)
    column = np.arange(links.size, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    table[entry_path, column] = links
    table.setflags(write=False)
    capacity.setflags(write=False)
    return SharingNetwork(table, capacity)


def max_min_rates(table: np.ndarray, weight: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rate of one flow on each path, when row p of ``table`` lists the link ids of
    path p (padded with links of infinite capacity), path p carries ``weight[p]`` identical flows,
    and link ℓ has ``capacity[ℓ]``.

    Progressive filling, several bottlenecks per round: the fair share of a link is its remaining
    capacity over its unfrozen flows; a link is a bottleneck when no unfrozen flow through it has a
    smaller share on another link of its path. The flows through bottlenecks are frozen at their
    path's smallest share (which is that bottleneck's share) and their rates leave the capacity of
    their links; the round repeats until every flow is frozen. The link with the globally smallest
    share is always a bottleneck, so each round freezes at least one path."""
    num_paths, width = table.shape
    rate = np.zeros(num_paths, dtype=np.float64)
    if num_paths == 0:
        return rate
    n_links = capacity.size
    w = np.asarray(weight, dtype=np.float64)
    remaining = capacity.astype(np.float64, copy=True)
    flows_on = np.bincount(table.ravel(), weights=np.repeat(w, width), minlength=n_links)
    live = np.arange(num_paths, dtype=np.int64)
    blocked = np.zeros(n_links, dtype=bool)
    t = table
    with np.errstate(divide="ignore", invalid="ignore"):
        while True:
            share = remaining / flows_on
            s = share[t]
            path_min = s.min(axis=1)
            # a link is blocked if some flow through it has a smaller share elsewhere on its path
            blocked[:] = False
            blocked[t[path_min[:, None] < s * (1.0 - 1e-12)]] = True
            frozen = ~blocked[t].all(axis=1)
            rate[live[frozen]] = path_min[frozen]
            if frozen.all():
                return rate
            gone = t[frozen].ravel()
            wf = np.repeat(w[frozen], width)
            remaining -= np.bincount(gone, weights=np.repeat(path_min[frozen], width) * wf, minlength=n_links)
            np.maximum(remaining, 0.0, out=remaining)
            flows_on -= np.bincount(gone, weights=wf, minlength=n_links)
            t, w, live = t[~frozen], w[~frozen], live[~frozen]


# =============================================================================== the simulation
@dataclass(frozen=True, eq=False)
class EventTimes:
    """When each transfer started (dependencies met), began moving bytes, and completed (µs)."""

    start_us: np.ndarray
    data_start_us: np.ndarray
    end_us: np.ndarray

    @property
    def time_us(self) -> float:
        return float(self.end_us.max()) if self.end_us.size else 0.0


class _FlowRates:
    """Max-min fair rates of the flows in flight, kept per distinct path ("class": all flows on one
    path share one rate), updated when flows start and end.

    Updating is incremental when it can be proven exact. Removing flows whose rate is at least λ
    changes no flow whose rate is below λ (progressive filling reaches level λ the same way with or
    without them: none of their links saturates below their own rate), and adding a flow changes
    no flow below the new flow's equal-share rate min_ℓ cap_ℓ/n_ℓ, a lower bound of its max-min
    rate. So with λ0 the least of those levels, classes below λ0 keep their rates, and the others
    are recomputed by progressive filling on the capacity the kept ones leave. The premise is
    checked: if a link of a recomputed class offers a share below λ0 (a new flow crosses a link
    saturated by kept flows), everything is recomputed from scratch instead."""

    def __init__(self, network: SharingNetwork, incremental: bool = True):
        self.network = network
        self.table = network.table
        self.width = network.table.shape[1]
        self.n_links = network.capacity.size
        self.incremental = incremental
        num_paths = network.table.shape[0]
        self.count = np.zeros(num_paths, dtype=np.int64)
        self.rate = np.zeros(num_paths, dtype=np.float64)
        self.flows_on = np.zeros(self.n_links, dtype=np.float64)  # flows in flight per link
        self.load = np.zeros(self.n_links, dtype=np.float64)  # Σ count·rate per link
        self.tracked = False  # flows_on and load are up to date
        self.backoff = 0  # full recomputes to do before the next incremental attempt, after a failure
        self.skip = 0
        self.full_recomputes = 0
        self.partial_recomputes = 0

    def _per_link(self, classes: np.ndarray, per_class: np.ndarray) -> np.ndarray:
        """Σ over the given classes of their value, on each link of their paths."""
        return np.bincount(
            self.table[classes].ravel(), weights=np.repeat(per_class.astype(np.float64), self.width), minlength=self.n_links
        )

    def update(self, finished_paths: np.ndarray, started_paths: np.ndarray) -> None:
        """Flows on ``finished_paths`` ended and flows on ``started_paths`` began (one entry per
        flow); bring every rate up to date."""
        # one entry per flow: repeated paths simply add up in the per-link sums below
        pf, fresh = finished_paths, started_paths
        level = float(self.rate[pf].min()) if pf.size else np.inf
        np.subtract.at(self.count, pf, 1)
        np.add.at(self.count, fresh, 1)
        active = np.flatnonzero(self.count > 0)
        if active.size == 0:
            self.tracked = False
            return
        if self.incremental and self.tracked and active.size >= PARTIAL_MIN_PATHS:
            cf = np.ones(pf.size, dtype=np.int64)
            new_in = np.ones(fresh.size, dtype=np.int64)
            self.load -= self._per_link(pf, cf * self.rate[pf])
            self.flows_on += self._per_link(fresh, new_in) - self._per_link(pf, cf)
            if fresh.size:
                rows = self.table[fresh]
                with np.errstate(divide="ignore"):
                    level = min(level, float((self.network.capacity[rows] / self.flows_on[rows]).min()))
            if self._partial(active, level, fresh, new_in):
                self.partial_recomputes += 1
                self.backoff = 0
                return
            # the premise failed: try again only after a while (doubling), as failures come in runs
            self.backoff = min(max(1, 2 * self.backoff), 256)
            self.skip = self.backoff
        elif self.skip:
            self.skip -= 1
        self.full_recomputes += 1
        counts = self.count[active]
        self.rate[active] = max_min_rates(self.table[active], counts, self.network.capacity)
        # per-link totals are kept only when the next update will try to be incremental
        self.tracked = self.incremental and active.size >= PARTIAL_MIN_PATHS and self.skip == 0
        if self.tracked:
            self.flows_on = self._per_link(active, counts)
            self.load = self._per_link(active, counts * self.rate[active])

    def _partial(self, active: np.ndarray, level: float, fresh: np.ndarray, new_in: np.ndarray) -> bool:
        """Recompute only the classes at or above ``level``; False if that is not provably exact."""
        if not np.isfinite(level):
            return False
        threshold = level * (1.0 - 1e-9)
        old_count = self.count[active]  # flows in flight before this event's starts
        if fresh.size:
            np.subtract.at(old_count, np.searchsorted(active, fresh), new_in)
        recompute = (self.rate[active] >= threshold) | (old_count == 0)
        live = active[recompute]
        if live.size == active.size:
            return False
        if live.size == 0:
            return True  # every class in flight is below the level: none changes
        counts = self.count[live]
        rows = self.table[live]
        live_old = self._per_link(live, old_count[recompute] * self.rate[live])
        residual = np.maximum(self.network.capacity - (self.load - live_old), 0.0)
        flows = self._per_link(live, counts)
        with np.errstate(divide="ignore", invalid="ignore"):
            if float((residual[rows] / flows[rows]).min()) < threshold:
                return False
        self.rate[live] = max_min_rates(rows, counts, residual)
        self.load += self._per_link(live, counts * self.rate[live]) - live_old
        return True


def simulate_events(
    schedule: Schedule,
    topology: Topology,
    paths: TransferPaths,
    groups: DependencyGroups,
    chunk_bytes: float,
    network: SharingNetwork | None = None,
    *,
    incremental: bool = True,
    on_finished: Callable[[int], None] | None = None,
) -> EventTimes:
    """Run the fluid simulation for one chunk size (bytes per transfer). ``network`` is
    `sharing_network(paths, topology)`, computed here unless given (pass it to reuse it).
    ``incremental=False`` recomputes every rate from scratch at every event (slower; the same
    result, kept to test the incremental update against). ``on_finished(k)`` is told each time
    ``k`` more transfers have ended (a progress bar: a schedule of millions of transfers on a
    switched network takes minutes)."""
    n = schedule.num_transfers
    start = np.full(n, np.nan)
    data_start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    if n == 0:
        return EventTimes(start, data_start, end)
    if network is None:
        network = sharing_network(paths, topology)
    latency = paths.latency_us
    path_id = paths.path_id
    rates = _FlowRates(network, incremental)

    pending = np.diff(groups.waits_ptr).astype(np.int64)
    group_left = groups.size.copy()
    # transfers paying their latency, as batches with one data-start time: (time, batch no, ids)
    heap: list[tuple[float, int, np.ndarray]] = []
    batches = 0
    # scratch for dropping repeated ids without sorting: stamp[x] = the position x was last written to
    group_stamp = np.zeros(groups.num_groups, dtype=np.int64)
    transfer_stamp = np.zeros(n, dtype=np.int64)

    def distinct(ids: np.ndarray, stamp: np.ndarray) -> np.ndarray:
        if ids.size < 2:
            return ids
        positions = np.arange(ids.size, dtype=np.int64)
        stamp[ids] = positions  # for a repeated id one of its positions wins, whichever
        return ids[stamp[ids] == positions]

    def release(ready: np.ndarray, now: float) -> None:
        nonlocal batches
        start[ready] = now
        ds = now + latency[ready]
        data_start[ready] = ds
        times, inverse = (ds, None) if ds.size == 1 else np.unique(ds, return_inverse=True)
        if times.size == 1:
            heapq.heappush(heap, (float(times[0]), batches, ready))
            batches += 1
            return
        order = np.argsort(inverse, kind="stable")
        cuts = np.searchsorted(inverse[order], np.arange(1, times.size))
        for t, ids in zip(times.tolist(), np.split(ready[order], cuts)):
            heapq.heappush(heap, (t, batches, ids))
            batches += 1

    release(np.flatnonzero(pending == 0), 0.0)
    act = np.zeros(0, dtype=np.int64)  # active transfers
    left = np.zeros(0, dtype=np.float64)  # bytes still to move
    rate = np.zeros(0, dtype=np.float64)
    no_flows = np.zeros(0, dtype=np.int64)
    now = 0.0
    done = 0
    while done < n:
        t_next = heap[0][0] if heap else np.inf
        if act.size:
            dt = left / rate
            dt_min = float(dt.min())
            t_next = min(t_next, now + dt_min)
        if not np.isfinite(t_next):
            raise RuntimeError("event simulation stalled: a dependency cycle (a bug)")
        step_dt = t_next - now
        now = t_next
        tol = TIME_TOLERANCE * max(now, 1.0)
        fin = no_flows
        if act.size:
            finished = dt <= step_dt + tol
            left = left - rate * step_dt
            if finished.any():
                fin = act[finished]
                end[fin] = now
                done += fin.size
                if on_finished is not None:
                    on_finished(int(fin.size))
                act, left = act[~finished], left[~finished]
                # groups whose last member just finished release their dependents
                member = _gather(groups.member_ptr, groups.member, fin)
                if member.size:
                    np.subtract.at(group_left, member, 1)
                    complete = distinct(member[group_left[member] == 0], group_stamp)
                    if complete.size:
                        deps = _gather(groups.dependents_ptr, groups.dependents, complete)
                        if deps.size:
                            np.subtract.at(pending, deps, 1)
                            ready = distinct(deps[pending[deps] == 0], transfer_stamp)
                            if ready.size:
                                release(ready, now)
        started = []
        while heap and heap[0][0] <= now + tol:
            started.append(heapq.heappop(heap)[2])
        new = (np.concatenate(started) if len(started) > 1 else started[0]) if started else no_flows
        if new.size:
            data_start[new] = now
            act = np.concatenate((act, new))
            left = np.concatenate((left, np.full(new.size, float(chunk_bytes))))
        if fin.size or new.size:
            rates.update(path_id[fin], path_id[new])
            rate = rates.rate[path_id[act]]
    return EventTimes(start, data_start, end)
