"""A pipelined allgather over the levels of a machine's host structure: racks, hosts, the ranks of a host.

Every rank gets coordinates, one per level, outermost first: (rack, host in the rack, rank in the
host) on a fat-tree whose hosts hang under several top-of-rack switches, (host, rank in the host)
elsewhere. The ranks that differ only in the coordinate of level j form a level-j *group*: the
ranks of one rail of one rack-to-rack cut, the same local rank of the hosts of one rack, the ranks
of one host. This is the multi-dimensional allgather of meshes and tori (each dimension in turn),
with the dimensions taken from the network's cuts, outermost (slowest, most oversubscribed) first:
a rank's piece crosses the rack's uplinks once per rack, each host's NICs once per host, and the
fast links inside a host carry everything else. Every rank forwards an item it holds at every
level below the one it arrived by (its own piece at every level), so each item reaches each rank
exactly once: R − 1 receptions per chunk, as few as any allgather has.

Network levels (all but the last) send directly to every peer of the group over switch-only routes
(`PairRoutes`: every GPU's NIC in parallel, the rails); the last level, inside a host, runs an
allgather schedule made for the host alone (`host_topology`: its ranks and its own switches) by
another method, chosen by the caller (direct over an NVSwitch, a ring, greedy on an xGMI mesh).

The levels overlap as a pipeline: items are forwarded in batches as soon as they arrive, at most
``cap[j]`` items per rank and step at level j. With ``waves`` W the caps are a W-th of each level's
items, so every level is busy in about W consecutive steps and the slowest level's bandwidth sets
the pace, at the price of about W + levels steps of latency; splitting every piece into k chunks
gives the pipeline more items when a level has few (two hosts: one item per rank to cross). The
caller picks W and k per message size. Transfers: R (R − 1) k, whatever W.

As a data-flow it is symmetric: every rank does the same thing in the same step relative to its
coordinates, so the batches are planned once for a rank (`plan_batches`, on *relative* items: an
offset per level and a chunk) and then written out for all ranks at once with numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from synth.algorithms.engines.pair_routes import PairRoutes
from synth.collective import Collective
from synth.errors import NotApplicable
from synth.schedule import OP_COPY, Schedule, ScheduleBuilder
from synth.topology import Link, Topology

#: a relative item: the origin's offset per level (its coordinate minus the holder's, modulo the
#: level's size) and the chunk of the origin's piece
Item = tuple[tuple[int, ...], int]


@dataclass(frozen=True)
class Levels:
    """The machine's ranks as a grid: ``dims`` per level, outermost first (the last is the rank in
    its host), ``rank_at`` the rank at each coordinate, ``coords`` every rank's coordinates, and
    ``hosts`` the ranks of every host in the order of the last coordinate."""

    dims: tuple[int, ...]
    rank_at: np.ndarray
    coords: np.ndarray
    hosts: tuple[tuple[int, ...], ...]
    names: tuple[str, ...]

    @property
    def num_levels(self) -> int:
        return len(self.dims)


def _rack_key(topology: Topology, routes: PairRoutes, a: int, b: int, host: str | None) -> int | None:
    """The first switch outside ``a``'s host on its switch route to ``b`` (its top-of-rack switch),
    or None."""
    rid = routes.route_id(a, b)
    if rid < 0:
        return None
    for v in routes.table[rid].via:
        if topology.nodes[v].host != host:
            return v
    return None


def machine_levels(topology: Topology, hosts: list[list[int]], routes: PairRoutes, *, racks: bool = True) -> Levels:
    """The levels of a machine of equal hosts (``hosts`` from `hierarchical.host_ranks`): (rack,
    host, rank) when the hosts' first rank reaches the other hosts through several top-of-rack
    switches with as many hosts under each (and ``racks``), else (host, rank)."""
    nodes = topology.nodes
    h_count, local = len(hosts), len(hosts[0])
    keys: list[int | None] = []
    for h, ranks in enumerate(hosts):
        other = hosts[(h + 1) % h_count][0]
        keys.append(_rack_key(topology, routes, ranks[0], other, nodes[ranks[0]].host) if racks else None)
    racks: dict[int | None, list[int]] = {}
    for h, key in enumerate(keys):
        racks.setdefault(key, []).append(h)
    sizes = {len(v) for v in racks.values()}
    if None not in racks and len(racks) > 1 and len(sizes) == 1 and len(racks) < h_count:
        groups = list(racks.values())
        dims = (len(groups), len(groups[0]), local)
        rank_at = np.array([[hosts[h] for h in group] for group in groups], dtype=np.int64)
        names = ("racks", "hosts in a rack", "ranks in a host")
    else:
        dims = (h_count, local)
        rank_at = np.array(hosts, dtype=np.int64)
        names = ("hosts", "ranks in a host")
    coords = np.zeros((topology.num_ranks, len(dims)), dtype=np.int64)
    for index in np.ndindex(*dims):
        coords[rank_at[index]] = index
    return Levels(dims, rank_at, coords, tuple(tuple(int(r) for r in row) for row in rank_at.reshape(-1, local)), names)


def host_topology(topology: Topology, ranks: tuple[int, ...], name: str) -> Topology:
    """One host alone: its ranks (renumbered 0…L−1 in the given order), the switches of the same
    host and the links among them. Schedules made on it stay inside the host."""
    host = topology.nodes[ranks[0]].host
    r = topology.num_ranks
    switches = [s for s in range(len(topology.switches)) if topology.switches[s].host == host and host is not None]
    new_id = {old: i for i, old in enumerate(ranks)}
    for j, s in enumerate(switches):
        new_id[r + s] = len(ranks) + j
    links = tuple(
        sorted(
            (
                Link(new_id[link.src], new_id[link.dst], link.bandwidth, link.latency)
                for link in topology.links
                if link.src in new_id and link.dst in new_id
            ),
            key=lambda lk: (lk.src, lk.dst),
        )
    )
    return Topology(
        name=name,
        ranks=tuple(topology.ranks[i] for i in ranks),
        switches=tuple(topology.switches[s] for s in switches),
        links=links,
        description=f"ranks {list(ranks)} of {topology.name}",
    )


def host_signature(part: Topology) -> tuple:
    """What a schedule made on a `host_topology` depends on: its links in local numbering."""
    return (part.num_ranks, len(part.switches), tuple((k.src, k.dst, k.bandwidth, k.latency) for k in part.links))


def plan_batches(dims: tuple[int, ...], chunks: int, caps: tuple[int, ...]) -> list[list[list[Item]]]:
    """``batches[t][j]``: the relative items every rank forwards at level j in step t.

    An item a rank holds is forwarded at every level below the one it arrived by (its own chunks
    at every level), first come first served, at most ``caps[j]`` per step; an item sent at level
    j in step t is held by the receivers from step t + 1 (the last level's sends, made by the
    host's schedule in the steps from t on, are never forwarded)."""
    n = len(dims)
    queues: list[list[tuple[int, Item]]] = [[] for _ in range(n)]
    own: tuple[int, ...] = (0,) * n
    for j in range(n):
        queues[j] = [(0, (own, c)) for c in range(chunks)]
    heads = [0] * n
    batches: list[list[list[Item]]] = []
    t = 0
    while any(heads[j] < len(queues[j]) for j in range(n)):
        step: list[list[Item]] = []
        arrivals: list[tuple[int, Item]] = []
        for j in range(n):
            out: list[Item] = []
            queue = queues[j]
            while heads[j] < len(queue) and len(out) < caps[j] and queue[heads[j]][0] <= t:
                out.append(queue[heads[j]][1])
                heads[j] += 1
            step.append(out)
            if j < n - 1:
                for offsets, c in out:
                    for d in range(1, dims[j]):
                        moved = (*offsets[:j], d, *offsets[j + 1 :])
                        arrivals.append((j, (moved, c)))
        for j, item in arrivals:
            for below in range(j + 1, n):
                queues[below].append((t + 1, item))
        batches.append(step)
        t += 1
        if t > 10 * (sum(len(q) for q in queues) + 10):
            raise AssertionError("plan_batches does not progress")  # every cap is at least 1
    return batches


def caps_for(dims: tuple[int, ...], chunks: int, waves: int) -> tuple[int, ...]:
    """Items per rank and step at each level for ``waves`` waves: a ``waves``-th of what the
    level forwards in all (k times the product of the sizes of the levels above it)."""
    caps = []
    total = chunks
    for d in dims:
        caps.append(max(1, math.ceil(total / waves)))
        total *= d
    return tuple(caps)


class _Writer:
    """Writes planned batches as transfers of the whole machine (all ranks at once)."""

    def __init__(self, topology: Topology, levels: Levels, collective: Collective, builder: ScheduleBuilder, routes: PairRoutes):
        self.topology = topology
        self.levels = levels
        self.k = collective.chunks_per_piece
        self.builder = builder
        self.routes = routes
        self.route_map = np.zeros(0, dtype=np.int64)  # PairRoutes id -> builder id
        self.steps: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = {}
        self._peers: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}

    def origin(self, holders: np.ndarray, offsets: tuple[int, ...]) -> np.ndarray:
        """The rank whose piece a relative item with ``offsets`` is, for each holder."""
        dims = np.array(self.levels.dims, dtype=np.int64)
        c = (self.levels.coords[holders] + np.array(offsets, dtype=np.int64)) % dims
        return self.levels.rank_at[tuple(c.T)]

    def route_ids(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        ids = self.routes.lookup(src, dst)
        if np.any(ids < 0):
            bad = int(np.argmax(ids < 0))
            raise NotApplicable(
                f"hierarchical: rank {int(src[bad])} has no switch-only route to rank {int(dst[bad])} "
                f"in {self.topology.name}, and the levels between hosts send over switch routes"
            )
        if len(self.routes.table) > self.route_map.size:
            names = self.topology.nodes
            extra = [self.builder.route_id(tuple(names[v].name for v in p.via)) for p in self.routes.table[self.route_map.size :]]
            self.route_map = np.concatenate([self.route_map, np.array(extra, dtype=np.int64)])
        return self.route_map[ids]

    def add(self, t: int, src: np.ndarray, dst: np.ndarray, chunk: np.ndarray, route: np.ndarray) -> None:
        self.steps.setdefault(t, []).append((src.ravel(), dst.ravel(), chunk.ravel(), np.broadcast_to(route, src.shape).ravel()))

    def network(self, t: int, j: int, items: list[Item]) -> None:
        """Level j (a network level): every rank sends each item to every peer of its group."""
        if not items:
            return
        ranks = np.arange(self.topology.num_ranks, dtype=np.int64)
        peers, routes = self.peers(j)
        src_all, dst_all, chunk_all, route_all = [], [], [], []
        for offsets, c in items:
            piece = self.origin(ranks, offsets) * self.k + c
            for peer, route in zip(peers, routes):
                src_all.append(ranks)
                dst_all.append(peer)
                chunk_all.append(piece)
                route_all.append(route)
        self.add(t, np.concatenate(src_all), np.concatenate(dst_all), np.concatenate(chunk_all), np.concatenate(route_all))

    def peers(self, j: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per offset d = 1 … n_j − 1 of level j: every rank's peer d places down the level, and
        the route id to it (found once per level)."""
        found = self._peers.get(j)
        if found is None:
            levels = self.levels
            ranks = np.arange(self.topology.num_ranks, dtype=np.int64)
            dim = levels.dims[j]
            peers, routes = [], []
            for d in range(1, dim):
                coords = levels.coords.copy()
                coords[:, j] = (coords[:, j] - d) % dim
                peer = levels.rank_at[tuple(coords.T)]
                peers.append(peer)
                routes.append(self.route_ids(ranks, peer))
            found = self._peers[j] = (peers, routes)
        return found

    def inside(self, t: int, items: list[Item], inner: list[tuple[Schedule, list[np.ndarray]]], host_of: np.ndarray) -> None:
        """The last level: every host runs its own allgather schedule (one chunk per piece) on the
        batch, local rank ℓ's piece standing for the items ℓ forwards. ``inner`` holds, per kind of
        host, its schedule and the route ids of its routes in every host of that kind."""
        if not items:
            return
        hosts = np.array(self.levels.hosts, dtype=np.int64)  # (H, L)
        pieces = np.stack([self.origin(hosts.ravel(), offsets).reshape(hosts.shape) for offsets, _ in items], axis=-1)
        extra = np.array([c for _, c in items], dtype=np.int64)
        self.inside_chunks(t, pieces * self.k + extra[None, None, :], inner, host_of)

    def inside_chunks(
        self,
        t: int,
        chunks: np.ndarray,
        inner: list[tuple[Schedule, list[np.ndarray]]],
        host_of: np.ndarray,
        sources: np.ndarray | None = None,
    ) -> None:
        """Every host runs its allgather schedule from step t, local rank ℓ of host h standing for
        the chunks ``chunks[h, ℓ, :]``; with ``sources`` (local ranks), only the pieces of those
        ranks are spread (the other ranks have nothing to share: the transfers of their pieces are
        left out, which leaves every other piece's tree whole)."""
        if chunks.shape[2] == 0:
            return
        hosts = np.array(self.levels.hosts, dtype=np.int64)  # (H, L)
        n = chunks.shape[2]
        for kind, (schedule, route_ids) in enumerate(inner):
            chosen = np.flatnonzero(host_of == kind)
            if chosen.size == 0:
                continue
            members = hosts[chosen]  # (h, L)
            held = chunks[chosen]  # (h, L, n)
            routes = np.stack([route_ids[i] for i in chosen])  # (h, routes of the inner schedule)
            for s in range(schedule.num_steps):
                sl = schedule.step_slice(s)
                a, b, p, rt = schedule.src[sl], schedule.dst[sl], schedule.chunk[sl], schedule.route[sl]
                if sources is not None:
                    keep = np.isin(p, sources)
                    a, b, p, rt = a[keep], b[keep], p[keep], rt[keep]
                    if a.size == 0:
                        continue
                shape = (chosen.size, a.size, n)
                src = np.broadcast_to(members[:, a][:, :, None], shape)
                dst = np.broadcast_to(members[:, b][:, :, None], shape)
                route = np.broadcast_to(routes[:, rt][:, :, None], shape)
                self.add(t + s, src, dst, held[:, p, :], route)

    def flush(self, before: int | None = None) -> None:
        """Every step (before step ``before``, when given: those no later batch adds to) to the
        builder, its rows already in the builder's canonical order (by source, destination,
        chunk: one sort on a single key instead of its five-column sort). Steps are handed over
        as soon as they are complete, so the transfers are held once (in the builder), not in
        the writer as well."""
        r = self.topology.num_ranks
        g = r * self.k
        for t in sorted(self.steps):
            if before is not None and t >= before:
                break
            cols = self.steps.pop(t)
            src = np.concatenate([c[0] for c in cols])
            dst = np.concatenate([c[1] for c in cols])
            chunk = np.concatenate([c[2] for c in cols])
            route = np.concatenate([c[3] for c in cols])
            del cols
            order = np.argsort((src * r + dst) * g + chunk, kind="stable")
            self.builder.add_step_arrays(src[order], dst[order], chunk[order], OP_COPY, route[order])


@dataclass(frozen=True)
class InnerSchedules:
    """The last level's schedules: per kind of host (`host_signature`) an allgather with one chunk
    per piece made on its `host_topology`, and which kind every host is."""

    schedules: tuple[Schedule, ...]
    host_kind: np.ndarray
    #: per host: the switch names of its `host_topology` in local order (to rename routes)
    switch_names: tuple[tuple[str, ...], ...]
    #: per kind: the switch names of the host the schedule was made on
    made_on: tuple[tuple[str, ...], ...]


def _inner_routes(builder: ScheduleBuilder, levels: Levels, inner: InnerSchedules) -> list[tuple[Schedule, list[np.ndarray]]]:
    """Per kind of host its schedule and, per host, the builder's ids of its routes (the switch
    names renamed from the host it was made on to each host of its kind)."""
    per_kind: list[tuple[Schedule, list[np.ndarray]]] = []
    for kind, schedule in enumerate(inner.schedules):
        rename_from = inner.made_on[kind]
        ids = []
        for h in range(len(levels.hosts)):
            if inner.host_kind[h] != kind:
                ids.append(np.zeros(len(schedule.routes), dtype=np.int64))
                continue
            rename = dict(zip(rename_from, inner.switch_names[h]))
            ids.append(np.array([builder.route_id(tuple(rename[v] for v in via)) for via in schedule.routes], dtype=np.int64))
        per_kind.append((schedule, ids))
    return per_kind


def allgather(
    topology: Topology,
    collective: Collective,
    levels: Levels,
    inner: InnerSchedules,
    routes: PairRoutes,
    waves: int,
    method: str,
    params: dict,
) -> Schedule:
    """The pipelined allgather of the module docstring with ``waves`` waves and the collective's
    chunks per piece; ``inner`` gives the schedule inside each host."""
    k = collective.chunks_per_piece
    caps = caps_for(levels.dims, k, waves)
    batches = plan_batches(levels.dims, k, caps)
    builder = ScheduleBuilder(
        collective, topology, method, {**params, "waves": waves, "caps": list(caps), "levels": list(levels.names)}
    )
    writer = _Writer(topology, levels, collective, builder, routes)
    per_kind = _inner_routes(builder, levels, inner)
    last = levels.num_levels - 1
    for t, step in enumerate(batches):
        for j, items in enumerate(step):
            if j < last:
                writer.network(t, j, items)
            else:
                writer.inside(t, items, per_kind, inner.host_kind)
        writer.flush(before=t + 1)  # later batches add to steps t + 1 on
    writer.flush()
    return builder.build()


@dataclass(frozen=True)
class Carriers:
    """Hosts where only some ranks reach the network (an MI250 node: one NIC per package, on its
    GCD 0): ``carriers`` are the local ranks that do, ``owner[ℓ]`` the carrier whose rail carries
    local rank ℓ's piece (itself for a carrier; each carrier owns as many pieces)."""

    carriers: tuple[int, ...]
    owner: tuple[int, ...]

    def owned(self, carrier: int) -> list[int]:
        """The local pieces a carrier sends across, its own first."""
        return [carrier] + [i for i, c in enumerate(self.owner) if c == carrier and i != carrier]


def carriers_of(part: Topology, reach: list[bool]) -> Carriers | None:
    """The carriers of a host (``reach[ℓ]``: local rank ℓ reaches the other hosts over switches)
    and an owner for every other rank: the carrier it has the widest direct link to, each carrier
    owning the same number of pieces. None if that cannot be balanced."""
    local = part.num_ranks
    carriers = [i for i in range(local) if reach[i]]
    if not carriers or local % len(carriers):
        return None
    room = {c: local // len(carriers) - 1 for c in carriers}
    width: dict[tuple[int, int], float] = {}
    for link in part.links:
        if link.src < local and link.dst < local:
            width[(link.src, link.dst)] = width.get((link.src, link.dst), 0.0) + link.bandwidth
    owner = list(range(local))
    others = [i for i in range(local) if not reach[i]]
    for i in sorted(others, key=lambda i: (-max((width.get((i, c), 0.0) for c in carriers), default=0.0), i)):
        free = [c for c in carriers if room[c] > 0]
        if not free:
            return None
        best = max(free, key=lambda c: (width.get((i, c), 0.0), -c))
        owner[i] = best
        room[best] -= 1
    return Carriers(tuple(carriers), tuple(owner))


def _held_from(inner: InnerSchedules, local: int) -> np.ndarray:
    """[rank, piece]: the step from which local rank ℓ holds local piece p when the host schedules
    start in step 0 (the latest over the kinds of host; 0 for its own piece)."""
    ready = np.zeros((local, local), dtype=np.int64)
    for schedule in inner.schedules:
        arrived = np.zeros((local, local), dtype=np.int64)
        np.maximum.at(arrived, (schedule.dst, schedule.chunk), schedule.step_of_transfer + 1)
        ready = np.maximum(ready, arrived)
    return ready


def _send_across(
    writer: _Writer,
    t: int,
    hosts: np.ndarray,
    rails: np.ndarray,
    sent: np.ndarray,
    inner: list[tuple[Schedule, list[np.ndarray]]],
    host_of: np.ndarray,
) -> None:
    """Step t: local rank ``rails[n]`` of every host h sends the chunks ``sent[h, n, :]`` to local
    rank ``rails[n]`` of every other host; from step t + 1 each receiving rank spreads what it got
    inside its host (the host schedule restricted to its pieces)."""
    h_count, local = hosts.shape
    src_all, dst_all = [], []
    for d in range(1, h_count):
        other = (np.arange(h_count) + d) % h_count
        src_all.append(np.broadcast_to(hosts[:, rails][:, :, None], sent.shape).ravel())
        dst_all.append(np.broadcast_to(hosts[other][:, rails][:, :, None], sent.shape).ravel())
    src, dst = np.concatenate(src_all), np.concatenate(dst_all)
    writer.add(t, src, dst, np.tile(sent.ravel(), h_count - 1), writer.route_ids(src, dst))
    # what rank rails[n] of host g received: the same rail's chunks of every other host
    received = np.zeros((h_count, local, (h_count - 1) * sent.shape[2]), dtype=np.int64)
    for g in range(h_count):
        received[g][rails] = np.concatenate([sent[(g - d) % h_count] for d in range(1, h_count)], axis=1)
    writer.inside_chunks(t + 1, received, inner, host_of, sources=rails)


def _batch_end(ready: list[int], head: int, cap: int, t: int, patient: bool) -> int:
    """Where the batch sent across in step ``t`` ends among items ``ready`` at these steps (in
    increasing order) of which those before ``head`` were sent: up to ``cap`` items ready by
    ``t``. ``patient``: none (``head``) until a whole batch (``cap`` items, or all that are left)
    is ready. Eager batches cross the network in every step in which the host schedule brings a
    piece; on hosts where the network's latency is several host steps' (an MI250 node: 3.6 µs
    across, 0.7 µs inside) one patient crossing after the host steps is faster at small sizes."""
    end = head
    while end < len(ready) and end - head < cap and ready[end] <= t:
        end += 1
    if patient and end - head < min(cap, len(ready) - head):
        return head
    return end


def carrier_allgather(
    topology: Topology,
    collective: Collective,
    levels: Levels,
    inner: InnerSchedules,
    routes: PairRoutes,
    carriers: Carriers,
    waves: int,
    method: str,
    params: dict,
    *,
    patient: bool = False,
) -> Schedule:
    """Allgather on hosts where only the carriers reach the network: (1) the host's schedule
    shares every rank's own piece inside its host; (2) each carrier sends the pieces it owns to
    the same carrier of every other host, in ``waves`` batches, a batch as soon as the host
    schedule has brought its pieces (``patient``: as soon as it has brought a whole batch, so
    one wave crosses the network once, not once per step of the host schedule; `_batch_end`);
    (3) a batch that arrived is spread inside the host from the next step by the host's
    schedule restricted to the carriers' pieces. Every chunk reaches every rank once.
    ``levels`` must be (hosts, ranks in a host)."""
    k = collective.chunks_per_piece
    hosts = np.array(levels.hosts, dtype=np.int64)  # (H, L)
    h_count, local = hosts.shape
    builder = ScheduleBuilder(
        collective,
        topology,
        method,
        {**params, "waves": waves, "carriers": list(carriers.carriers), "levels": list(levels.names)}
        | ({"batches": "whole"} if patient else {}),
    )
    writer = _Writer(topology, levels, collective, builder, routes)
    per_kind = _inner_routes(builder, levels, inner)
    own = hosts[:, :, None] * k + np.arange(k, dtype=np.int64)[None, None, :]
    writer.inside_chunks(0, own, per_kind, inner.host_kind)
    ready = _held_from(inner, local)  # [carrier, piece]
    owned = [carriers.owned(c) for c in carriers.carriers]
    per_carrier = len(owned[0])
    # item i = (position in the owned list, chunk): ready when every carrier has its piece
    items = [(pos, j) for pos in range(per_carrier) for j in range(k)]
    item_ready = [max(int(ready[c, owned[n][pos]]) for n, c in enumerate(carriers.carriers)) for pos, _ in items]
    order = sorted(range(len(items)), key=lambda i: (item_ready[i], i))
    ready_in_order = [item_ready[i] for i in order]
    cap = max(1, -(-len(items) // waves))
    carrier_ids = np.array(carriers.carriers, dtype=np.int64)
    t, head = 0, 0
    while head < len(order):
        end = _batch_end(ready_in_order, head, cap, t, patient)
        batch = [items[i] for i in order[head:end]]
        head = end
        if batch:
            # chunk sent by carrier n of host h for item (pos, j): piece hosts[h, owned[n][pos]], chunk j
            sent = np.array(
                [[[hosts[h, owned[n][pos]] * k + j for pos, j in batch] for n in range(len(owned))] for h in range(h_count)],
                dtype=np.int64,
            )  # (H, C, b)
            _send_across(writer, t, hosts, carrier_ids, sent, per_kind, inner.host_kind)
        t += 1
    writer.flush()
    return builder.build()


def probe(topology: Topology, levels: Levels, collective: Collective, routes: PairRoutes, level: int, method: str) -> Schedule:
    """One step in which every rank sends its first chunk to every peer of its group at network
    level ``level``: not an allgather, only timed, to estimate what a step of that level costs."""
    builder = ScheduleBuilder(collective, topology, method)
    writer = _Writer(topology, levels, collective, builder, routes)
    writer.network(0, level, [((0,) * levels.num_levels, 0)])
    writer.flush()
    return builder.build()


def rail_shares(topology: Topology, levels: Levels, routes: PairRoutes, rails: tuple[int, ...]) -> np.ndarray | None:
    """Per local rank ℓ, the rate (GB/s) of each of its rail's routes when the local ranks ``rails`` each send to
    the same local rank of every other host at once, over their switch routes: max-min fair by
    progressive filling (all rails grow together; a rail stops when a link it crosses is full), 0
    for the other local ranks. Two ranks behind one NIC split it; a rank behind a degraded NIC gets
    what that NIC gives. None unless the machine is hosts of ranks (two levels) whose ``rails``
    reach their peers over switches."""
    if levels.num_levels != 2:
        return None
    hosts = np.array(levels.hosts, dtype=np.int64)  # (H, L)
    h_count, local = hosts.shape
    uses = np.zeros((len(topology.links), local), dtype=np.float64)  # routes of rail ℓ over each link
    for h in range(h_count):
        for g in range(h_count):
            if g == h:
                continue
            for ell in rails:
                rid = routes.route_id(int(hosts[h, ell]), int(hosts[g, ell]))
                if rid < 0:
                    return None
                for link in routes.table[rid].links:
                    uses[link, ell] += 1.0
    bandwidth = topology.bandwidth_array
    rate = np.zeros(local, dtype=np.float64)
    growing = np.zeros(local, dtype=bool)
    growing[list(rails)] = True
    while growing.any():
        load = uses @ rate
        slope = uses[:, growing].sum(axis=1)
        busy = slope > 0
        room = (bandwidth[busy] - load[busy]) / slope[busy]
        step = max(0.0, float(room.min()))
        rate[growing] += step
        full = np.flatnonzero(busy)[room <= step * (1 + 1e-12) + 1e-12]
        stopped = (uses[full] > 0).any(axis=0)
        growing &= ~stopped
    return rate


def weighted_carrier_allgather(
    topology: Topology,
    collective: Collective,
    levels: Levels,
    inner: InnerSchedules,
    routes: PairRoutes,
    shares: np.ndarray,
    waves: int,
    method: str,
    params: dict,
    *,
    patient: bool = False,
) -> Schedule:
    """Allgather on hosts whose rails cross the network at unequal rates (`rail_shares`: two GCDs
    behind one NIC, a degraded NIC): (1) the host's schedule shares every rank's own piece inside
    its host; (2) local rank ℓ of every host sends ``shares[ℓ]`` of the host's L·k chunks (its own
    piece's first, then others' as the host schedule brings them) to local rank ℓ of every other
    host, in ``waves`` batches (``patient``: each sent once the host schedule has brought all of
    it, `_batch_end`), so a rail's bytes follow its rate; (3) what a rank received is
    spread inside its host from the next step by the host's schedule restricted to that rank's
    piece. Every chunk crosses to each other host once and reaches every rank once. ``levels``
    must be (hosts, ranks in a host); ``shares`` are whole chunk counts summing to L·k."""
    k = collective.chunks_per_piece
    hosts = np.array(levels.hosts, dtype=np.int64)  # (H, L)
    h_count, local = hosts.shape
    if int(np.sum(shares)) != local * k:
        raise ValueError(f"the shares must sum to {local * k} chunks, got {int(np.sum(shares))}")
    builder = ScheduleBuilder(
        collective,
        topology,
        method,
        {**params, "waves": waves, "rail_chunks": [int(s) for s in shares], "levels": list(levels.names)}
        | ({"batches": "whole"} if patient else {}),
    )
    writer = _Writer(topology, levels, collective, builder, routes)
    per_kind = _inner_routes(builder, levels, inner)
    own = hosts[:, :, None] * k + np.arange(k, dtype=np.int64)[None, None, :]
    writer.inside_chunks(0, own, per_kind, inner.host_kind)
    ready = _held_from(inner, local)
    # items (piece p, chunk j) per rail: its own piece first, then the rest, each to the rail with
    # room where it is ready first (ties: the lower rail)
    room = np.asarray(shares, dtype=np.int64).copy()
    items: list[list[tuple[int, int]]] = [[] for _ in range(local)]
    left: list[tuple[int, int]] = []
    for p in range(local):
        mine = min(k, int(room[p]))
        items[p] += [(p, j) for j in range(mine)]
        room[p] -= mine
        left += [(p, j) for j in range(mine, k)]
    for p, j in left:
        open_rails = np.flatnonzero(room > 0)
        ell = int(open_rails[np.argmin(ready[open_rails, p])])
        items[ell].append((p, j))
        room[ell] -= 1
    for ell in range(local):
        items[ell].sort(key=lambda item: (int(ready[ell, item[0]]), item))
    ready_in_order = [[int(ready[ell, p]) for p, _ in mine] for ell, mine in enumerate(items)]
    caps = [max(1, -(-len(mine) // waves)) for mine in items]
    heads = [0] * local
    t = 0
    last = int(ready.max()) + sum(len(mine) for mine in items)  # every item is ready by ready.max()
    while any(heads[ell] < len(items[ell]) for ell in range(local)):
        if t > last:
            raise RuntimeError("weighted_carrier_allgather: an item never became ready (the host schedule is no allgather)")
        for ell in range(local):
            head = heads[ell]
            heads[ell] = _batch_end(ready_in_order[ell], head, caps[ell], t, patient)
            batch = items[ell][head : heads[ell]]
            if not batch:
                continue
            sent = np.array([[[hosts[h, p] * k + j for p, j in batch]] for h in range(h_count)], dtype=np.int64)  # (H, 1, b)
            _send_across(writer, t, hosts, np.array([ell], dtype=np.int64), sent, per_kind, inner.host_kind)
        t += 1
    writer.flush()
    return builder.build()
