"""Symbolic verifier: replays a schedule on who-holds-what and checks every rule of
docs/formats.md, 'Meaning of a step', and the final state against docs/formats.md, 'Chunks of each
collective'.

State. For a non-reduction collective, a boolean "rank r holds chunk c". For a reduction, the set of
contributions in rank r's value of chunk c, as a packed bitset of R bits (uint64 words), so that
"never count a contribution twice" is an exact check (popcount of the union equals the sum of the
popcounts) and 1024-rank schedules verify in seconds. Chunks never interact, so the chunks are
processed in blocks that fit a memory budget; each block replays the steps on its own transfers.

Rules, in the order they are reported when one transfer breaks several (see docs/verifier.md):
  ``rank``      src and dst are ranks of the collective, and differ
  ``chunk``     the chunk id is in range
  ``op``        ``reduce`` only in reduction collectives
  ``route``     src → via… → dst follows existing directed links, through switches only, no repeats
  ``unheld``    the sender holds the chunk (for reductions: a non-empty value) at the start of the step
  ``conflict``  a ``copy`` into (dst, chunk) is the only write to it in that step
  ``double``    reduces into (dst, chunk) are pairwise disjoint and disjoint from dst's value
  ``post``      after the last step every required (rank, chunk) holds the chunk / its full reduction

The first violation in (step, transfer) order is reported; the postcondition is checked only when
every step is clean.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from synth.collective import Collective
from synth.schedule import OP_COPY, OP_REDUCE, Schedule, check_topology_match
from synth.text import printable
from synth.topology import Topology

#: Bytes of verifier state per chunk block: this, or one int64 column of the schedule's size when
#: that is more (a schedule of millions of transfers then replays in one block).
DEFAULT_MEMORY_BUDGET = 256 * 2**20

RULES = ("rank", "chunk", "op", "route", "unheld", "conflict", "double", "post")


@dataclass(frozen=True)
class Violation:
    """The first thing wrong with a schedule. ``step``/``transfer`` are None for the final state."""

    rule: str
    step: int | None
    transfer: int | None
    rank: int | None
    chunk: int | None
    message: str

    def __str__(self) -> str:
        where = "final state" if self.step is None else f"step {self.step}, transfer {self.transfer}"
        rank = "" if self.rank is None else f", rank {self.rank}"
        chunk = "" if self.chunk is None else f", chunk {self.chunk}"
        return f"{where}{rank}{chunk}: {printable(self.message)} [{self.rule}]"


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of `verify`: ``ok`` and, if not, the first `Violation`."""

    schedule: Schedule
    violation: Violation | None

    @property
    def ok(self) -> bool:
        return self.violation is None

    def summary(self) -> str:
        s = self.schedule
        head = (
            f"{s.collective.describe()}; {s.num_steps} steps, {s.num_transfers} transfers"
            f" on {printable(s.topology_name)} (method {printable(s.method)})"
        )
        return f"OK {head}" if self.ok else f"INVALID {head}: {self.violation}"


class VerificationError(Exception):
    """Raised by `check` when a schedule is invalid; carries the `VerifyResult`."""

    exit_code = 1

    def __init__(self, result: VerifyResult):
        self.result = result
        super().__init__(str(result.violation))


def verify(
    schedule: Schedule,
    topology: Topology,
    *,
    check_hash: bool = True,
    memory_budget: int | None = None,
) -> VerifyResult:
    """Check ``schedule`` against ``topology``; returns the first violation, if any.

    Raises `TopologyMismatch` if the schedule names another topology (unless ``check_hash`` is
    False, which still requires the rank counts to agree).
    """
    if check_hash or schedule.collective.num_ranks != topology.num_ranks:
        check_topology_match(schedule, topology)
    budget = memory_budget if memory_budget is not None else max(DEFAULT_MEMORY_BUDGET, 8 * schedule.num_transfers)
    short = _too_few_transfers(schedule, budget)
    if short is not None:
        return VerifyResult(schedule, short)
    structural = _structural_violation(schedule, topology)
    limit = schedule.num_transfers if structural is None else structural[0]
    semantic = _replay(schedule, limit, budget, topology)
    if semantic is not None:
        return VerifyResult(schedule, semantic)
    if structural is not None:
        return VerifyResult(schedule, structural[1])
    return VerifyResult(schedule, None)


def check(schedule: Schedule, topology: Topology, **kwargs) -> VerifyResult:
    """`verify`, raising `VerificationError` if the schedule is invalid (for synthesizers that must
    never emit an unverified schedule)."""
    result = verify(schedule, topology, **kwargs)
    if not result.ok:
        raise VerificationError(result)
    return result


def _too_few_transfers(schedule: Schedule, budget: int) -> Violation | None:
    """A schedule with fewer transfers than its chunk count needs (`Collective.min_transfers`) is
    invalid whatever they are; when its chunks fill more than one replay block (a header claiming
    10**12 chunks), say so at once instead of replaying millions of empty blocks. Smaller cases are
    replayed as usual, so their first violation names a rank and a chunk."""
    coll = schedule.collective
    need = coll.min_transfers()
    per_chunk = coll.num_ranks * ((coll.num_ranks + 63) // 64) * 8 if coll.is_reduction else coll.num_ranks
    if schedule.num_transfers >= need or coll.num_chunks * per_chunk <= budget:
        return None
    return Violation(
        "post",
        None,
        None,
        None,
        None,
        f"{coll.describe()} needs at least {need:,} transfers; the schedule has {schedule.num_transfers:,}",
    )


# ===================================================================================== structure
#: Transfers the structural checks look at together (their temporaries stay a few MB whatever
#: the schedule's size; the first block with a violation ends the search).
STRUCTURE_BLOCK = 1 << 18


def _position(schedule: Schedule, index: int) -> tuple[int, int]:
    step = int(np.searchsorted(schedule.step_starts, index, side="right") - 1)
    return step, index - int(schedule.step_starts[step])


def _structural_violation(schedule: Schedule, topology: Topology) -> tuple[int, Violation] | None:
    """First transfer (global index) with a bad rank, chunk, op or route, and its violation."""
    n = schedule.num_transfers
    if n == 0:
        return None
    routes = _RouteTable(schedule, topology)
    for lo in range(0, n, STRUCTURE_BLOCK):
        found = _structural_in(schedule, routes, lo, min(n, lo + STRUCTURE_BLOCK))
        if found is not None:
            return found
    return None


def _structural_in(schedule: Schedule, routes: _RouteTable, lo: int, hi: int) -> tuple[int, Violation] | None:
    """`_structural_violation` within transfers ``lo`` … ``hi - 1``."""
    coll = schedule.collective
    r, g = coll.num_ranks, coll.num_chunks
    src, dst, chunk, op = (a[lo:hi] for a in (schedule.src, schedule.dst, schedule.chunk, schedule.op))
    candidates: list[tuple[int, int, Violation]] = []  # (index, rule order, violation)

    def first(mask: np.ndarray) -> int | None:
        hits = np.flatnonzero(mask)
        return int(hits[0]) if hits.size else None

    def add(i: int | None, rule: str, rank: int | None, message: str) -> None:
        if i is None:
            return
        step, t = _position(schedule, lo + i)
        ch = int(chunk[i])
        candidates.append((lo + i, RULES.index(rule), Violation(rule, step, t, rank, ch, message)))

    i = first((src < 0) | (src >= r))
    add(i, "rank", None, f"src {int(src[i])} is not a rank (0..{r - 1})" if i is not None else "")
    i = first((dst < 0) | (dst >= r))
    add(i, "rank", None, f"dst {int(dst[i])} is not a rank (0..{r - 1})" if i is not None else "")
    i = first(src == dst)
    add(i, "rank", int(src[i]) if i is not None else None, "a rank sends to itself")
    i = first((chunk < 0) | (chunk >= g))
    add(i, "chunk", None, f"chunk {int(chunk[i])} is out of range (0..{g - 1})" if i is not None else "")
    bad_op = op > OP_REDUCE if coll.is_reduction else op != OP_COPY
    i = first(bad_op)
    add(
        i,
        "op",
        int(dst[i]) if i is not None else None,
        f"op 'reduce' is not allowed in {coll.kind.value} (only in reductions)" if i is not None else "",
    )
    route_bad = routes.first_violation(src, dst, schedule.route[lo:hi])
    if route_bad is not None:
        i, message = route_bad
        add(i, "route", int(src[i]), message)
    if not candidates:
        return None
    index, _, violation = min(candidates, key=lambda c: (c[0], c[1]))
    return index, violation


class _LinkPairs:
    """Membership of (a, b) node pairs in a set of directed links, for ``a`` in ``0 … rows − 1``:
    a table with a byte per (row, node) up to `MAX_TABLE_BYTES`, else a bit per pair up to
    `MAX_PAIR_BITS` (a lookup per transfer either way), else a binary search in the sorted keys."""

    MAX_TABLE_BYTES = 1 << 26
    MAX_PAIR_BITS = 1 << 31

    def __init__(self, pairs: list[tuple[int, int]], rows: int, columns: int):
        self.columns = columns
        keys = np.array(sorted(a * columns + b for a, b in pairs), dtype=np.int64)
        self.keys = keys
        self.table: np.ndarray | None = None
        self.bits: np.ndarray | None = None
        if rows * columns <= self.MAX_TABLE_BYTES:
            self.table = np.zeros(rows * columns, dtype=bool)
            self.table[keys] = True
        elif rows * columns <= self.MAX_PAIR_BITS:
            self.bits = np.zeros((rows * columns + 7) // 8, dtype=np.uint8)
            np.bitwise_or.at(self.bits, keys >> 3, (np.uint8(1) << (keys & 7).astype(np.uint8)).astype(np.uint8))

    def contains(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether each (a[i], b[i]) is a link (``a`` within the rows, ``b`` a node)."""
        keys = a * self.columns + b
        if self.table is not None:
            return self.table[keys]
        if self.bits is not None:
            return ((self.bits[keys >> 3] >> (keys & 7).astype(np.uint8)) & 1).astype(bool)
        if self.keys.size == 0:
            return np.zeros(keys.shape, dtype=bool)
        pos = np.minimum(np.searchsorted(self.keys, keys), self.keys.size - 1)
        return self.keys[pos] == keys


def _route_error(via: tuple[str, ...], topology: Topology) -> str | None:
    """What is wrong with one route (switch names in order) on the topology, or None."""
    r = topology.num_ranks
    names = topology.node_index
    ids: list[int] = []
    for pos, name in enumerate(via):
        node = names.get(name)
        if node is None:
            return f"via[{pos}] {name!r} is not a node of topology {topology.name!r}"
        if node < r:
            return f"via[{pos}] {name!r} is a rank, not a switch (ranks relay only by receiving and sending)"
        if node in ids:
            return f"via[{pos}] {name!r} appears twice in the route"
        ids.append(node)
    for a, b in pairwise(ids):
        if (a, b) not in topology.link_index:
            return f"no link {topology.node_name(a)} -> {topology.node_name(b)}"
    return None


class _RouteTable:
    """What the route check needs, computed once per schedule: every route's switches (or what is
    wrong with it), its first and last switch, and the links out of and into ranks."""

    def __init__(self, schedule: Schedule, topology: Topology):
        self.schedule = schedule
        self.topology = topology
        r = topology.num_ranks
        n_nodes = topology.num_nodes
        routes = schedule.routes
        # every route checked at once on its node ids (a large machine's schedule has hundreds of
        # thousands); the few with an error are walked again one by one for its message
        ptr, ids = topology.route_node_ids(routes)
        lengths = np.diff(ptr)
        route_of = np.repeat(np.arange(len(routes), dtype=np.int64), lengths)
        wrong = np.zeros(len(routes), dtype=bool)
        wrong[route_of[ids < r]] = True  # not a node (-1), or a rank
        twice = np.sort(route_of * n_nodes + ids)
        wrong[(twice[1:][twice[1:] == twice[:-1]]) // max(n_nodes, 1)] = True
        along = route_of[1:] == route_of[:-1]
        wrong[route_of[1:][along & (topology.link_ids(ids[:-1], ids[1:]) < 0)]] = True
        self.route_error: list[str | None] = [None] * len(routes)
        ok = ~wrong
        for rid in np.flatnonzero(wrong).tolist():
            self.route_error[rid] = _route_error(routes[rid], topology)
            ok[rid] = self.route_error[rid] is None
        has_via = lengths > 0
        usable = has_via & ok
        self.first_hop = np.full(len(routes), -1, dtype=np.int64)
        self.last_hop = np.full(len(routes), -1, dtype=np.int64)
        self.first_hop[usable] = ids[ptr[:-1][usable]]
        self.last_hop[usable] = ids[ptr[1:][usable] - 1]
        self.has_via = has_via
        self.route_ok = ok
        # links out of a rank, keyed (rank, node); links into a rank, keyed (rank, node) as well
        self.out_of_rank = _LinkPairs([(a, b) for a, b in topology.link_index if a < r], r, n_nodes)
        self.into_rank = _LinkPairs([(b, a) for a, b in topology.link_index if b < r], r, n_nodes)

    def first_violation(self, src: np.ndarray, dst: np.ndarray, route: np.ndarray) -> tuple[int, str] | None:
        """First transfer (index into these columns) whose path does not follow links through
        switches, with a message. Ranks out of range are the rank rule's business (clipped)."""
        topology = self.topology
        r = topology.num_ranks
        top = max(r - 1, 0)
        if src.size and (int(src.min()) < 0 or int(src.max()) > top):
            src = np.clip(src, 0, top)
        if dst.size and (int(dst.min()) < 0 or int(dst.max()) > top):
            dst = np.clip(dst, 0, top)
        if not self.has_via.any():  # every transfer is direct: its one link is src -> dst
            ok_first = ok_last = self.out_of_rank.contains(src, dst)
            bad = ~ok_first
        else:
            hv = self.has_via[route]
            first_dst = np.where(hv, self.first_hop[route], dst)
            last_src = np.where(hv, self.last_hop[route], src)
            first_dst[first_dst < 0] = 0  # routes with an error: reported by route_ok
            last_src[last_src < 0] = 0
            ok_first = self.out_of_rank.contains(src, first_dst)
            ok_last = self.into_rank.contains(dst, last_src)
            bad = ~self.route_ok[route] | ~ok_first | ~ok_last
        hits = np.flatnonzero(bad)
        if not hits.size:
            return None
        i = int(hits[0])
        rid = int(route[i])
        s, d = int(src[i]), int(dst[i])
        if self.route_error[rid] is not None:
            return i, str(self.route_error[rid])
        if not ok_first[i]:
            a, b = s, int(first_dst[i]) if self.has_via.any() else d
        else:
            a, b = int(last_src[i]), d
        path = " -> ".join([topology.node_name(s), *self.schedule.routes[rid], topology.node_name(d)])
        return i, f"no link {topology.node_name(a)} -> {topology.node_name(b)} on path {path}"


# ===================================================================================== replay
def _replay(schedule: Schedule, limit: int, budget: int, topology: Topology) -> Violation | None:
    """Replay transfers [0, limit) on the symbolic state, chunk block by chunk block; returns the
    first step violation, else (if limit covers everything) the first postcondition failure."""
    coll = schedule.collective
    r, g = coll.num_ranks, coll.num_chunks
    words = (r + 63) // 64
    per_chunk = r * words * 8 if coll.is_reduction else r * _CopyReplay.BYTES_PER_ENTRY
    block = max(1, min(g, budget // max(per_chunk, 1)))
    replay = _ReductionReplay if coll.is_reduction else _CopyReplay
    if block >= g:  # one block: the steps' own slices, in order, no sorting by block
        state = replay(schedule, coll, np.arange(g, dtype=np.int64))
        found = state.run_steps(limit)
        if found is not None or limit < schedule.num_transfers:
            return found
        return state.postcondition()
    chunk = schedule.chunk[:limit]
    block_of = chunk // block
    order = np.lexsort((np.arange(limit), block_of)) if limit else np.zeros(0, dtype=np.int64)
    sorted_blocks = block_of[order]
    best_step: Violation | None = None
    best_key = (np.iinfo(np.int64).max, 0)
    best_post: Violation | None = None
    step_of = schedule.step_of_transfer
    for b in range((g + block - 1) // block):
        lo = int(np.searchsorted(sorted_blocks, b, side="left"))
        hi = int(np.searchsorted(sorted_blocks, b, side="right"))
        if lo == hi and r == 1:
            continue  # one rank already holds every chunk, fully reduced: nothing to replay
        idx = order[lo:hi]
        base = b * block
        width = min(block, g - base)
        chunks = np.arange(base, base + width, dtype=np.int64)
        state = replay(schedule, coll, chunks)
        found = state.run(idx, step_of, stop_key=best_key)
        if found is not None:
            key = (found.step, found.transfer)
            if key < best_key:
                best_key, best_step = key, found
            continue
        if best_step is None and limit == schedule.num_transfers:
            post = state.postcondition()
            if post is not None and (best_post is None or (post.rank, post.chunk) < (best_post.rank, best_post.chunk)):
                best_post = post
    return best_step if best_step is not None else best_post


class _Replay:
    """Replays one block of chunks step by step; subclasses define the state and `_step`."""

    def __init__(self, schedule: Schedule, coll: Collective, chunks: np.ndarray):
        self.schedule = schedule
        self.coll = coll
        self.chunks = chunks
        self.base = int(chunks[0])
        self.width = chunks.size

    def run(self, idx: np.ndarray, step_of: np.ndarray, stop_key: tuple[int, int]) -> Violation | None:
        """Replay the transfers ``idx`` (in order); stop after step ``stop_key[0]``."""
        steps = step_of[idx]
        bounds = np.flatnonzero(np.diff(steps)) + 1
        for part in np.split(idx, bounds) if idx.size else []:
            step = int(step_of[part[0]])
            if step > stop_key[0]:
                return None
            found = self._step(part, step)
            if found is not None:
                return found
        return None

    def run_steps(self, limit: int) -> Violation | None:
        """Replay every transfer before ``limit``, step by step (the whole collective is one block)."""
        starts = self.schedule.step_starts.tolist()
        for step in range(self.schedule.num_steps):
            lo, hi = starts[step], min(starts[step + 1], limit)
            if lo >= limit:
                break
            if hi > lo:
                found = self._step(slice(lo, hi), step)
                if found is not None:
                    return found
        return None

    def _step(self, part: np.ndarray | slice, step: int) -> Violation | None:
        """Check and apply the transfers ``part`` (indexes or a slice of the columns) of ``step``."""
        raise NotImplementedError


def _index(part: np.ndarray | slice, j: int) -> int:
    """The schedule's index of the ``j``-th transfer of ``part``."""
    return part.start + j if isinstance(part, slice) else int(part[j])


class _CopyReplay(_Replay):
    """Holds-matrix replay for non-reduction collectives (one block of chunks).

    State: ``holds`` [ranks, chunks] and ``mark``, an int32 per (rank, chunk) that tells repeated
    writes apart without sorting: each transfer of a step writes its position in the step into
    ``mark`` at its (dst, chunk) and reads it back; a (dst, chunk) written twice keeps one value,
    so some transfer reads another's. Both are indexed flat (row × width + column), which numpy
    gathers and scatters several times faster than a pair of index arrays."""

    BYTES_PER_ENTRY = 1 + 4  # holds, mark

    def __init__(self, schedule: Schedule, coll: Collective, chunks: np.ndarray):
        super().__init__(schedule, coll, chunks)
        self.holds = coll.initial_holders(chunks)
        self.flat = self.holds.reshape(-1)
        self.mark = np.zeros(self.flat.size, dtype=np.int32)
        longest = int(np.diff(schedule.step_starts).max()) if schedule.num_steps else 0
        self.positions = np.arange(longest, dtype=np.int32)

    def _step(self, part: np.ndarray | slice, step: int) -> Violation | None:
        sched = self.schedule
        s, d = sched.src[part], sched.dst[part]
        lc = sched.chunk[part] - self.base if self.base else sched.chunk[part]
        start = int(sched.step_starts[step])
        bad: list[tuple[int, int, Violation]] = []
        held = self.flat[s * self.width + lc]
        if not held.all():
            j = int(np.flatnonzero(~held)[0])
            i = _index(part, j)
            message = f"rank {int(s[j])} sends chunk {int(sched.chunk[i])} to rank {int(d[j])} but does not hold it"
            bad.append(_flag("unheld", i, step, start, int(s[j]), int(sched.chunk[i]), message))
        keys = d * self.width + lc
        positions = self.positions[: keys.size]
        self.mark[keys] = positions
        if not np.array_equal(self.mark[keys], positions):  # some (dst, chunk) is written twice
            perm = np.argsort(keys, kind="stable")
            ks = keys[perm]
            dup = np.flatnonzero(ks[1:] == ks[:-1]) + 1
            j = int(perm[dup].min())
            i = _index(part, j)
            message = f"rank {int(d[j])} receives chunk {int(sched.chunk[i])} twice in one step (a copy must be the only write)"
            bad.append(_flag("conflict", i, step, start, int(d[j]), int(sched.chunk[i]), message))
        if bad:
            return min(bad, key=lambda x: (x[0], x[1]))[2]
        self.flat[keys] = True
        return None

    def postcondition(self) -> Violation | None:
        missing = self.coll.required(self.chunks) & ~self.holds
        if not missing.any():
            return None
        rank, col = (int(x) for x in np.argwhere(missing)[0])
        chunk = self.base + col
        return Violation("post", None, None, rank, chunk, f"rank {rank} does not hold chunk {chunk} at the end")


def _flag(rule: str, index: int, step: int, start: int, rank: int, chunk: int, message: str) -> tuple[int, int, Violation]:
    """A candidate violation at global transfer ``index``, sortable by (index, rule order)."""
    return (index, RULES.index(rule), Violation(rule, step, index - start, rank, chunk, message))


def _popcount(words: np.ndarray) -> np.ndarray:
    return np.bitwise_count(words).sum(axis=-1, dtype=np.int64)


class _ReductionReplay(_Replay):
    """Contribution-bitset replay for reduction collectives (one block of chunks)."""

    def __init__(self, schedule: Schedule, coll: Collective, chunks: np.ndarray):
        super().__init__(schedule, coll, chunks)
        r = coll.num_ranks
        self.words = (r + 63) // 64
        self.state = np.zeros((r, self.width, self.words), dtype=np.uint64)
        ranks = np.arange(r)
        self.state[ranks, :, ranks // 64] = (np.uint64(1) << (ranks % 64).astype(np.uint64))[:, None]
        full = np.zeros(self.words, dtype=np.uint64)
        for w in range(self.words):
            bits = min(64, r - 64 * w)
            full[w] = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
        self.full = full

    def _step(self, part: np.ndarray | slice, step: int) -> Violation | None:
        if isinstance(part, slice):
            part = np.arange(part.start, part.stop, dtype=np.int64)
        sched = self.schedule
        start = int(sched.step_starts[step])
        s, d, op = sched.src[part], sched.dst[part], sched.op[part]
        lc = sched.chunk[part] - self.base
        sv = self.state[s, lc]  # (m, words): values read at the start of the step
        bad: list[tuple[int, int, Violation]] = []
        sent = _popcount(sv)
        if not sent.all():
            j = int(np.flatnonzero(sent == 0)[0])
            i = int(part[j])
            message = f"rank {int(s[j])} sends an empty value of chunk {int(sched.chunk[i])}"
            bad.append(_flag("unheld", i, step, start, int(s[j]), int(sched.chunk[i]), message))
        keys = d * self.width + lc
        perm = np.lexsort((np.arange(part.size), keys))
        ks = keys[perm]
        new_group = np.ones(ks.size, dtype=bool)
        new_group[1:] = ks[1:] != ks[:-1]
        starts = np.flatnonzero(new_group)
        sizes = np.diff(np.append(starts, ks.size))
        group_of = np.cumsum(new_group) - 1
        is_copy_sorted = op[perm] == OP_COPY
        copies_in_group = np.bincount(group_of, weights=is_copy_sorted, minlength=starts.size)
        conflict_groups = np.flatnonzero((sizes > 1) & (copies_in_group > 0))
        if conflict_groups.size:
            bad.append(self._first_in_groups(part, perm, starts, sizes, conflict_groups, op, sv, step, start))
        # reduce groups: union must have as many contributions as the parts together
        red_groups = np.flatnonzero(copies_in_group == 0)
        if red_groups.size:
            gs = starts[red_groups]
            first = perm[gs]
            old = self.state[d[first], lc[first]]
            red_sorted = sv[perm]
            union_src = np.bitwise_or.reduceat(red_sorted, starts, axis=0)[red_groups]
            count_src = np.add.reduceat(sent[perm], starts)[red_groups]
            union = union_src | old
            overlap = _popcount(union) != count_src + _popcount(old)
            if overlap.any():
                bad.append(self._first_in_groups(part, perm, starts, sizes, red_groups[overlap], op, sv, step, start))
        if bad:
            return min(bad, key=lambda x: (x[0], x[1]))[2]
        # apply: copies then reduces (disjoint targets, guaranteed by the conflict rule)
        copy_groups = np.flatnonzero(copies_in_group > 0)
        if copy_groups.size:
            j = perm[starts[copy_groups]]
            self.state[d[j], lc[j]] = sv[j]
        if red_groups.size:
            self.state[d[first], lc[first]] = union
        return None

    def _first_in_groups(self, part, perm, starts, sizes, groups, op, sv, step, start):
        """Exact first violation, in transfer order, among failing groups of writes to one
        (dst, chunk): a reduce that counts a contribution twice, or the write that makes a copy
        share its target (the copy itself if it comes later, else the next write)."""
        sched = self.schedule
        best = None
        for grp in groups:
            members = sorted(int(perm[p]) for p in range(starts[grp], starts[grp] + sizes[grp]))
            j0 = members[0]
            acc = self.state[sched.dst[part[j0]], sched.chunk[part[j0]] - self.base].copy()
            seen_copy = False
            for n, j in enumerate(members):
                is_copy = int(op[j]) == OP_COPY
                if n > 0 and (is_copy or seen_copy):
                    found = (int(part[j]), RULES.index("conflict"), j, None)
                    break
                seen_copy |= is_copy
                if not is_copy:
                    both = acc & sv[j]
                    if both.any():
                        found = (int(part[j]), RULES.index("double"), j, both)
                        break
                    acc |= sv[j]
            else:
                continue
            if best is None or found[:2] < best[:2]:
                best = found
        i, rule, j, both = best
        dst, chunk = int(sched.dst[i]), int(sched.chunk[i])
        if both is None:
            message = f"rank {dst}'s chunk {chunk} is written by a copy and another transfer in one step"
            return _flag("conflict", i, step, start, dst, chunk, message)
        return (i, rule, self._double_violation(i, both, step, start))

    def _double_violation(self, i, both, step, start) -> Violation:
        sched = self.schedule
        dup = _bits(both)
        dst = int(sched.dst[i])
        shown = ", ".join(str(x) for x in dup[:5]) + (", ..." if len(dup) > 5 else "")
        message = f"reduce from rank {int(sched.src[i])} into rank {dst} would count contribution(s) of rank(s) {shown} twice"
        return Violation("double", step, i - start, dst, int(sched.chunk[i]), message)

    def postcondition(self) -> Violation | None:
        need = self.coll.required(self.chunks)
        complete = (self.state == self.full).all(axis=-1)
        missing = need & ~complete
        if not missing.any():
            return None
        rank, col = (int(x) for x in np.argwhere(missing)[0])
        chunk = self.base + col
        lacking = _bits(self.full & ~self.state[rank, col])
        shown = ", ".join(str(x) for x in lacking[:5]) + (", ..." if len(lacking) > 5 else "")
        return Violation(
            "post",
            None,
            None,
            rank,
            chunk,
            f"rank {rank}'s chunk {chunk} is not fully reduced: missing contributions of {len(lacking)} rank(s) ({shown})",
        )


def _bits(words: np.ndarray) -> list[int]:
    out = []
    for w, word in enumerate(words.tolist()):
        while word:
            low = word & -word
            out.append(64 * w + low.bit_length() - 1)
            word ^= low
    return out
