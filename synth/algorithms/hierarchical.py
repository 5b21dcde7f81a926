"""Hierarchical collectives for machines of several hosts.

Allreduce (Horovod's and NCCL's two-level scheme): reduce-scatter inside every host, allreduce
across hosts among the ranks with the same local index, allgather inside every host. Scatter and
gather (`scatter`, `gather`): through the root's host, one rail per local index, pipelined.
Alltoall (`alltoall`): to the right local index inside the host, then along the rails, pipelined.
Broadcast (`broadcast`): the data dealt to the other ranks of the root's host (the carriers), each
part sent along its carrier's rail by a pipelined tree, and shared inside every host (van de
Geijn's scatter-allgather broadcast, `scatter_allgather`, with the network phase on all NICs at
once); with a size also the two-level scatter followed by the pipelined allgather over the levels
(`scatter_level_broadcast`: van de Geijn's broadcast with each phase made for the racks, hosts
and NICs); reduce is its dual.

After the first phase, local rank ℓ of every host holds piece ℓ of the data reduced over its host;
the second phase runs H-rank allreduces (one per local index, over that "rail" of the network) on
those pieces, so each rank sends only 1/L of the data across the network; the third phase spreads
the result inside the hosts again. With L ranks per host and H hosts the network carries
2(H − 1)/H of a 1/L share per rank, the fast links inside the hosts the rest.

Each phase is built by a registered method on the part of the machine it runs on
(`engines.composition.induced_topology`: a host's ranks, or a rail's ranks, with every switch and no other
rank, so nothing relays through another host's GPU), verified there, and placed into the whole
schedule (`engines.composition.embed`); phases overlap per chunk (`engines.composition.overlap`).

Inner algorithms: inside a host, ``direct`` when every pair of its ranks has a switch route and the
direct exchange loads no link more than a ring would over its R − 1 steps (an NVSwitch box: one
step instead of L − 1), else ``ring`` (a DGX-1 box: its NVLink ring). Across hosts the same test
picks ``direct`` or ``ring`` on the rail. Both choices are recorded in the schedule's params.

Hosts come from the topology file (``ranks[].host``); a single host, ranks without a host or hosts
of unequal sizes are not served (NotApplicable says which).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

from synth.algorithms import direct, greedy, one_shot, ring
from synth.algorithms.engines import host_levels
from synth.algorithms.engines.builders import by_duality, dispatcher, largest_remainder, pieces_for_allreduce
from synth.algorithms.engines.composition import connected, embed, induced_topology, merge_at, overlap, parallel
from synth.algorithms.engines.lowering import logical_step, lower_copies
from synth.algorithms.engines.pair_routes import PairRoutes
from synth.algorithms.engines.ring_channels import spread_routes
from synth.algorithms.engines.size_tuning import fastest, predicted_us, size_option, timed_sweep
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, ranks_for_allreduce
from synth.routing import Router, ring_order, router_for
from synth.schedule import OP_COPY, Schedule, ScheduleBuilder
from synth.topology import Topology
from synth.transform import dual_reduction

NAME = "hierarchical"
#: the size allgather and reduce-scatter choose their host schedules for when given none
REFERENCE_SIZE = 1 << 30
_EPS = 1e-9
#: the methods `inner_method` chooses between, run (and verified) on a host or a rail
INNER = {direct.NAME: direct.METHOD, ring.NAME: ring.METHOD}
#: the allreduces across hosts (along every rail) the size-tuned allreduce also tries: the inner
#: methods and one-shot (one crossing of the network instead of two, for small sizes)
ACROSS = {**INNER, one_shot.NAME: one_shot.METHOD}


def host_ranks(topology: Topology) -> list[list[int]]:
    """The ranks of every host, in file order; NotApplicable unless there are at least two hosts of
    equal size."""
    groups = topology.host_groups
    if None in groups:
        raise NotApplicable(f"hierarchical needs the host of every rank (ranks[].host) in {topology.name}")
    if len(groups) < 2:
        raise NotApplicable(f"hierarchical needs ranks on at least two hosts; {topology.name} has one")
    sizes = sorted({len(r) for r in groups.values()})
    if len(sizes) > 1:
        raise NotApplicable(f"hierarchical needs hosts of equal size; {topology.name} has hosts of {sizes} ranks")
    return [list(r) for r in groups.values()]


def _load_ratio(topology: Topology, router: Router, pairs: list[tuple[int, int]]) -> float | None:
    """Max over links of (transfers on it / bandwidth) when every pair moves one unit at once;
    None if a pair has no switch route."""
    load = np.zeros(len(topology.links), dtype=np.float64)
    index = topology.link_index
    for a, b in pairs:
        route = router.routes_from(a).get(b)  # one search per source serves all its pairs
        if route is None:
            return None
        nodes = [a, *route.via, b]
        for u, v in itertools.pairwise(nodes):
            load[index[(u, v)]] += 1.0
    return float(np.max(load / topology.bandwidth_array)) if pairs else 0.0


def inner_method(topology: Topology, groups: list[list[int]], parts: list[Topology]) -> str:
    """``direct`` if the all-pairs exchange inside every group at once loads no link of
    ``topology`` more (per byte) than the groups' rings do over their R − 1 steps, else ``ring``.
    All groups are counted together: rails of a fat-tree share its spine links."""
    n = len(groups[0])
    if n == 1:
        return direct.NAME
    router = router_for(topology)
    direct_load = _load_ratio(topology, router, [(a, b) for g in groups for a in g for b in g if a != b])
    if direct_load is None:
        return ring.NAME
    hops = []
    for group, part in zip(groups, parts):
        order, linked = ring_order(part, router_for(part))
        if not linked:
            return direct.NAME
        ranks = [group[i] for i in order]
        hops.extend(zip(ranks, ranks[1:] + ranks[:1]))
    ring_load = _load_ratio(topology, router, hops)
    if ring_load is None:
        return direct.NAME
    return direct.NAME if direct_load <= (n - 1) * ring_load * (1 + _EPS) else ring.NAME


def _part(topology: Topology, ranks: list[int], label: str) -> Topology:
    sub = induced_topology(topology, ranks, f"{topology.name}/{label}")
    if not connected(sub):
        raise NotApplicable(f"hierarchical: the ranks of {label} ({ranks}) cannot reach each other without other ranks")
    return sub


def allreduce(
    topology: Topology, collective: Collective, router: Router, intra: str | None = None, inter: str | None = None
) -> Schedule:
    """The two-level allreduce; ``intra`` / ``inter`` name the method inside the hosts (`INNER`) /
    across them (`ACROSS`) (default: `inner_method`'s choice, which looks at link loads only, i.e. at
    large sizes; `_tuned_allreduce` also tries the other one)."""
    hosts = host_ranks(topology)
    h_count, local = len(hosts), len(hosts[0])
    k = collective.chunks_per_piece
    if k % (h_count * local):
        raise NotApplicable(
            f"hierarchical allreduce splits the data over the {local} ranks of a host and again over the {h_count} "
            f"hosts, so --chunks must be a multiple of the rank count {h_count * local} (got {k})"
        )
    share = k // local  # chunks that local rank ℓ owns after the first phase: ℓ·share … ℓ·share + share − 1
    host_parts = [_part(topology, ranks, f"host{h}") for h, ranks in enumerate(hosts)]
    rails = [[ranks[i] for ranks in hosts] for i in range(local)]
    rail_parts = [_part(topology, ranks, f"rail{i}") for i, ranks in enumerate(rails)]
    intra = intra or inner_method(topology, hosts, host_parts)
    inter = inter or inner_method(topology, rails, rail_parts)
    everything = np.arange(k, dtype=np.int64)

    def in_hosts(kind: Kind) -> Schedule:
        pieces = [
            embed(INNER[intra].synthesize(part, kind, chunks=share), topology, collective, ranks, everything, NAME)
            for part, ranks in zip(host_parts, hosts)
        ]
        return parallel(pieces, collective, NAME)

    across = parallel(
        [
            embed(
                ACROSS[inter].synthesize(part, Kind.ALLREDUCE, chunks=share),
                topology,
                collective,
                ranks,
                i * share + np.arange(share, dtype=np.int64),
                NAME,
            )
            for i, (part, ranks) in enumerate(zip(rail_parts, rails))
        ],
        collective,
        NAME,
    )
    params = {
        "phases": ["reduce-scatter in hosts", "allreduce across hosts", "allgather in hosts"],
        "hosts": h_count,
        "ranks_per_host": local,
        "intra": intra,
        "inter": inter,
        "host_ranks": hosts,
    }
    first = overlap(in_hosts(Kind.REDUCE_SCATTER), across, collective, NAME)
    # the rails were routed separately, each with the same hash-based choice of spine: spread them
    return spread_routes(overlap(first, in_hosts(Kind.ALLGATHER), collective, NAME, params), topology, router)


def network_carriers(topology: Topology, router: Router, hosts: list[list[int]]) -> list[list[int]]:
    """The ranks of every host that reach another host over switches only (their own NIC), in host
    order."""
    owner = {r: h for h, ranks in enumerate(hosts) for r in ranks}
    others = [next(x for x in range(topology.num_ranks) if owner[x] != h) for h in range(len(hosts))]
    return [[r for r in ranks if router.via_names(r, others[owner[r]]) is not None] for ranks in hosts]


def _hand_off_step(topology: Topology, collective: Collective, moves: list[tuple[int, int, np.ndarray]]) -> Schedule:
    """One step of copies: for every (src, dst, chunks), ``src`` sends those chunks to ``dst`` over
    the route the host's own part of the machine offers (NotApplicable where it needs a relay)."""
    builder = ScheduleBuilder(collective, topology, NAME)
    hosts = host_ranks(topology)
    host_of = {r: h for h, ranks in enumerate(hosts) for r in ranks}
    routers = {}
    columns: list[tuple[np.ndarray, ...]] = []
    for src, dst, chunks in moves:
        h = host_of[src]
        if h not in routers:
            part = host_levels.host_topology(topology, tuple(hosts[h]), f"{topology.name}/host{h}")
            routers[h] = (router_for(part), {r: i for i, r in enumerate(hosts[h])})
        part_router, local = routers[h]
        via = part_router.via_names(local[src], local[dst])
        if via is None:
            raise NotApplicable(
                f"hierarchical by carriers: {topology.node_name(src)} reaches its carrier "
                f"{topology.node_name(dst)} only through other ranks"
            )
        columns.append(
            (np.full(chunks.size, src), np.full(chunks.size, dst), chunks, np.full(chunks.size, builder.route_id(via)))
        )
    if columns:
        src_a, dst_a, chunk_a, route_a = (np.concatenate([c[i] for c in columns]) for i in range(4))
        builder.add_step_arrays(src_a, dst_a, chunk_a, OP_COPY, route_a)
    return builder.build()


def rail_bandwidths(router: Router, rails: list[list[int]]) -> np.ndarray:
    """Every rail's bandwidth: the narrowest bottleneck of the switch routes between its members
    (both ways, consecutive hosts), e.g. a degraded NIC's rate."""
    out = []
    for rail in rails:
        widths = []
        for a, b in itertools.pairwise([*rail, rail[0]]):
            for u, v in ((a, b), (b, a)):
                route = router.route(u, v)
                if route is not None:
                    widths.append(route.bottleneck)
        out.append(min(widths) if widths else 0.0)
    return np.asarray(out, dtype=np.float64)


def _rail_chunks(
    owner_local: np.ndarray, carrier_local: list[int], quotas: np.ndarray, reach: np.ndarray
) -> list[list[int]] | None:
    """Chunks for every carrier's rail: ``quotas[j]`` chunks each, every chunk at a carrier that
    its owner (local index ``owner_local[chunk]``) is or reaches directly (``reach[ell, j]``),
    a carrier's own chunks first; None if they cannot all be placed (a bipartite assignment with
    capacities, by augmenting paths)."""
    c_count = len(carrier_local)
    at: list[int] = [-1] * owner_local.size
    members: list[list[int]] = [[] for _ in range(c_count)]

    def options(chunk: int) -> list[int]:
        ell = int(owner_local[chunk])
        own = [carrier_local.index(ell)] if ell in carrier_local else []
        return own + [j for j in range(c_count) if reach[ell, j] and j not in own]

    def place(chunk: int, visited: set[int]) -> bool:
        for j in options(chunk):
            if j in visited:
                continue
            visited.add(j)
            if len(members[j]) < quotas[j]:
                members[j].append(chunk)
                at[chunk] = j
                return True
            for other in list(members[j]):
                if place_elsewhere(other, j, visited):
                    members[j].append(chunk)
                    at[chunk] = j
                    return True
        return False

    def place_elsewhere(chunk: int, leaving: int, visited: set[int]) -> bool:
        members[leaving].remove(chunk)
        if place(chunk, visited):
            return True
        members[leaving].append(chunk)
        at[chunk] = leaving
        return False

    for chunk in range(owner_local.size):
        if not place(chunk, set()):
            return None
    return [sorted(m) for m in members]


def carrier_allreduce(
    topology: Topology,
    collective: Collective,
    router: Router,
    intra: str,
    inter: str,
    weighted: bool = False,
    cache: dict | None = None,
) -> Schedule:
    """The two-level allreduce on a machine whose hosts reach the network from some of their ranks
    only (a MI250 node: one NIC per package of two GCDs), or whose NICs differ: reduce-scatter
    inside every host, every rank hands the reduced chunks its carrier will take across to that
    carrier (a rank with a NIC that it reaches directly), the carriers allreduce their chunks along
    the rails (carrier j of every host) with ``inter``, hand the results back, and the hosts
    allgather; phases overlap per chunk. Each rail takes an equal part of the data, or, with
    ``weighted``, a part in proportion to its bandwidth (`rail_bandwidths`: a rail behind a
    degraded NIC takes less). ``cache`` (a dict the caller keeps between calls on the same
    machine) keeps the parts and the phases inside the hosts."""
    cache = {} if cache is None else cache
    hosts = host_ranks(topology)
    h_count, local = len(hosts), len(hosts[0])
    k = collective.chunks_per_piece
    carriers = network_carriers(topology, router, hosts)
    c_count = len(carriers[0])
    if any(len(c) != c_count for c in carriers) or c_count == 0 or k % local:
        raise NotApplicable("hierarchical by carriers needs hosts with the same number of ranks with a NIC")
    carrier_local = [hosts[0].index(c) for c in carriers[0]]
    if any([ranks.index(c) for c in cs] != carrier_local for ranks, cs in zip(hosts, carriers)):
        raise NotApplicable("hierarchical by carriers needs the NIC ranks at the same places in every host")
    share = k // local
    rails = [[c[j] for c in carriers] for j in range(c_count)]
    if "parts" not in cache:
        # inside a host only the host's own links and switches (no detour through the NICs)
        host_parts = [
            host_levels.host_topology(topology, tuple(ranks), f"{topology.name}/host{h}") for h, ranks in enumerate(hosts)
        ]
        if not all(connected(part) for part in host_parts):
            raise NotApplicable("hierarchical by carriers: the ranks of a host cannot reach each other over the host's own links")
        cache["parts"] = (host_parts, [_part(topology, ranks, f"rail{j}") for j, ranks in enumerate(rails)])
    host_parts, rail_parts = cache["parts"]
    everything = np.arange(k, dtype=np.int64)
    # quotas: chunks per rail, in whole rounds of H (equal, or in proportion to the rail's bandwidth)
    if k % h_count:
        raise NotApplicable("hierarchical by carriers needs a chunk count that is a multiple of the host count")
    weights = rail_bandwidths(router, rails) if weighted else np.ones(c_count)
    if not np.all(weights > 0):
        raise NotApplicable("hierarchical by carriers: a rail has no route")
    weights = weights / weights.sum()
    units = k // h_count
    quotas = largest_remainder(weights * units, units) * h_count
    part_router = router_for(host_parts[0])
    reach = np.array([[ell == c or part_router.via_names(ell, c) is not None for c in carrier_local] for ell in range(local)])
    owner_local = np.repeat(np.arange(local, dtype=np.int64), share)
    placed = _rail_chunks(owner_local, carrier_local, quotas, reach)
    if placed is None:
        raise NotApplicable("hierarchical by carriers: a rank does not reach a NIC rank of its host directly")

    def in_hosts(kind: Kind) -> Schedule:
        key = (kind, intra, k)
        if key not in cache:
            pieces = [
                embed(INNER[intra].synthesize(part, kind, chunks=share), topology, collective, ranks, everything, NAME)
                for part, ranks in zip(host_parts, hosts)
            ]
            cache[key] = parallel(pieces, collective, NAME)
        return cache[key]

    to_carriers = []
    for ranks in hosts:
        for j, chunks in enumerate(placed):
            arr = np.asarray(chunks, dtype=np.int64)
            for ell in np.unique(owner_local[arr]).tolist():
                if ell != carrier_local[j]:
                    to_carriers.append((ranks[ell], ranks[carrier_local[j]], arr[owner_local[arr] == ell]))
    back = [(dst, src, chunks) for src, dst, chunks in to_carriers]
    across = parallel(
        [
            embed(
                ACROSS[inter].synthesize(part, Kind.ALLREDUCE, chunks=len(chunks)),
                topology,
                collective,
                ranks,
                np.asarray(chunks, dtype=np.int64),
                NAME,
            )
            for part, ranks, chunks in zip(rail_parts, rails, placed)
            if chunks
        ],
        collective,
        NAME,
    )
    params = {
        "phases": [
            "reduce-scatter in hosts",
            "to the NIC ranks",
            "allreduce across hosts",
            "back from the NIC ranks",
            "allgather in hosts",
        ],
        "hosts": h_count,
        "ranks_per_host": local,
        "carriers_per_host": c_count,
        "rail_chunks": [len(c) for c in placed],
        "intra": intra,
        "inter": inter,
        "host_ranks": hosts,
    }
    schedule = in_hosts(Kind.REDUCE_SCATTER)
    phases = [across]
    if to_carriers:
        phases = [_hand_off_step(topology, collective, to_carriers), across, _hand_off_step(topology, collective, back)]
    for phase in phases:
        schedule = overlap(schedule, phase, collective, NAME)
    return spread_routes(overlap(schedule, in_hosts(Kind.ALLGATHER), collective, NAME, params), topology, router)


def _root_host(topology: Topology, root: int) -> tuple[list[list[int]], int]:
    """The hosts' ranks and the index of the root's host."""
    hosts = host_ranks(topology)
    for h, ranks in enumerate(hosts):
        if root in ranks:
            return hosts, h
    raise AssertionError("every rank is on a host")  # host_ranks covers every rank


def _scatter_steps(topology: Topology, collective: Collective) -> list:
    """The logical steps of a pipelined two-level scatter (see `scatter`)."""
    r, k, root = collective.num_ranks, collective.chunks_per_piece, collective.root
    hosts, h0 = _root_host(topology, root)
    local = len(hosts[0])
    # stage 1 (chunk i in step i): root -> its host's rank at local index g, the pieces of rank g of every host
    hand_src, hand_dst, hand_piece = [], [], []
    for g in range(local):
        relay = hosts[h0][g]
        if relay == root:
            continue
        for ranks in hosts:
            hand_src.append(root)
            hand_dst.append(relay)
            hand_piece.append(ranks[g])
    # stage 2 (chunk i in step i + 1): rank g of the root's host -> rank g of every other host (a rail)
    rail_src, rail_dst = [], []
    for h, ranks in enumerate(hosts):
        if h == h0:
            continue
        for g in range(local):
            rail_src.append(hosts[h0][g])
            rail_dst.append(ranks[g])
    hand = (np.array(hand_src, dtype=np.int64), np.array(hand_dst, dtype=np.int64), np.array(hand_piece, dtype=np.int64))
    rail = (np.array(rail_src, dtype=np.int64), np.array(rail_dst, dtype=np.int64))
    assert len(hand[0]) + len(rail[0]) >= r - 1
    steps = []
    for t in range(k + 1):
        src, dst, chunk = [], [], []
        if t < k:
            src.append(hand[0])
            dst.append(hand[1])
            chunk.append(hand[2] * k + t)
        if t > 0:
            src.append(rail[0])
            dst.append(rail[1])
            chunk.append(rail[1] * k + t - 1)
        steps.append(logical_step(np.concatenate(src), np.concatenate(dst), np.concatenate(chunk)))
    return steps


def scatter(topology: Topology, collective: Collective, router: Router) -> Schedule:
    """Two-level scatter, pipelined over the k chunks of every piece: in step i the root hands
    chunk i of the pieces of local rank g of every host to its own host's rank g (fast links
    inside the host), which in step i + 1 sends each on along its rail to rank g of every other
    host (one NIC per rank, all of them busy, instead of the root's NIC carrying everything).
    k + 1 steps; with many chunks the time approaches the root's outgoing bandwidth limit."""
    hosts, _ = _root_host(topology, collective.root)
    params = {"phases": ["root to its host, per local index", "along the rails"], "hosts": len(hosts)}
    return lower_copies(topology, collective, _scatter_steps(topology, collective), NAME, params, router)


def gather(topology: Topology, collective: Collective, router: Router) -> Schedule:
    """Two-level gather: the scatter's steps reversed (rails first, then into the root)."""
    hosts, _ = _root_host(topology, collective.root)
    steps = [(dst, src, chunk) for src, dst, chunk in reversed(_scatter_steps(topology, collective))]
    params = {"phases": ["along the rails", "into the root, per local index"], "hosts": len(hosts)}
    return lower_copies(topology, collective, steps, NAME, params, router)


def alltoall(topology: Topology, collective: Collective, router: Router) -> Schedule:
    """Two-level alltoall (as NCCL's PXN and MoE all-to-alls across nodes do it), pipelined over
    the k chunks of every piece: in step i, rank g of each host hands chunk i of everything bound
    for local index g' of any host to its host's rank g' (fast links inside the host; for its own
    host that is the delivery); in step i + 1 rank g' sends along its rail to rank g' of every
    other host. Every byte then crosses the network between ranks of the same local index, one
    NIC each, with no detour through another rail. k + 1 steps."""
    r, k = collective.num_ranks, collective.chunks_per_piece
    hosts = host_ranks(topology)
    local = len(hosts[0])
    hand_src, hand_dst, hand_piece, rail_src, rail_dst, rail_piece = [], [], [], [], [], []
    for h, ranks in enumerate(hosts):
        for g in range(local):
            for g2 in range(local):
                for h2, other in enumerate(hosts):
                    piece = ranks[g] * r + other[g2]  # from (h, g) to (h2, g2)
                    if g2 != g:
                        hand_src.append(ranks[g])
                        hand_dst.append(ranks[g2])
                        hand_piece.append(piece)
                    if h2 != h:
                        rail_src.append(ranks[g2])
                        rail_dst.append(other[g2])
                        rail_piece.append(piece)
    hand = [np.array(x, dtype=np.int64) for x in (hand_src, hand_dst, hand_piece)]
    rail = [np.array(x, dtype=np.int64) for x in (rail_src, rail_dst, rail_piece)]
    steps = []
    for t in range(k + 1):
        parts = []
        if t < k:
            parts.append((hand[0], hand[1], hand[2] * k + t))
        if t > 0:
            parts.append((rail[0], rail[1], rail[2] * k + t - 1))
        steps.append(logical_step(*(np.concatenate([p[i] for p in parts]) for i in range(3))))
    params = {"phases": ["to the rank of the destination's local index, in the host", "along the rails"], "hosts": len(hosts)}
    return lower_copies(topology, collective, steps, NAME, params, router)


def fanout_choices(hosts: int) -> tuple[int, ...]:
    """Rail trees tried with the ``size`` option: a chain (one NIC send per step, H − 1 deep), a
    binary tree (two sends, log₂ H deep) and direct from the root's host (H − 1 sends, one deep)."""
    return tuple(sorted({f for f in (1, 2, hosts - 1) if 1 <= f <= max(1, hosts - 1)}))


def _rail_order(topology: Topology, hosts: list[list[int]], g: int, h0: int) -> list[int]:
    """The hosts in the order of rail ``g``'s ring (the topology's own order of its ranks, e.g.
    servers of one rack together), starting at the root's host ``h0``."""
    rail = [ranks[g] for ranks in hosts]
    part = _part(topology, rail, f"rail{g}")
    order, _ = ring_order(part, router_for(part))
    start = order.index(h0)
    return order[start:] + order[:start]


def _carriers(hosts: list[list[int]], g0: int, root_carries: bool) -> list[int]:
    """The local indices whose rails carry the data: every one, or (``root_carries`` False) every
    one but the root's own: then the root's links inside its host carry one copy of everything
    (the hand-out) and no more, at the price of one idle rail."""
    local = len(hosts[0])
    return [g for g in range(local) if root_carries or g != g0] or [g0]


def _broadcast_steps(
    topology: Topology, collective: Collective, fanout: int, root_carries: bool, rail_orders: dict[int, list[int]]
) -> list:
    """The logical steps of the two-level broadcast (see `broadcast`); ``rail_orders`` memoizes
    `_rail_order` by rail for this topology and root's host."""
    k, root = collective.chunks_per_piece, collective.root
    hosts, h0 = _root_host(topology, root)
    g0 = hosts[h0].index(root)
    carriers = _carriers(hosts, g0, root_carries)
    steps: dict[int, list[tuple[int, int, int]]] = {}

    def send(t: int, a: int, b: int, c: int) -> None:
        steps.setdefault(t, []).append((a, b, c))

    for c in range(k):
        g, wave = carriers[c % len(carriers)], c // len(carriers)
        carrier = hosts[h0][g]
        if carrier == root:
            ready = wave - 1  # held from the start; one wave per step
        else:
            ready = wave
            send(wave, root, carrier, c)  # hand-out inside the root's host
        order = rail_orders.get(g)
        if order is None:
            order = rail_orders[g] = _rail_order(topology, hosts, g, h0)
        depth = [0] * len(order)
        for p in range(1, len(order)):
            parent = (p - 1) // fanout
            depth[p] = depth[parent] + 1
            send(ready + depth[p], hosts[order[parent]][g], hosts[order[p]][g], c)
        for p, h in enumerate(order):  # share inside every host, one step after the part arrived
            have = ready + depth[p]
            for other in hosts[h]:
                if other != hosts[h][g] and other != root:
                    send(have + 1, hosts[h][g], other, c)
    out = []
    for t in range(min(steps), max(steps) + 1):
        moves = steps.get(t, [])
        out.append(logical_step([m[0] for m in moves], [m[1] for m in moves], [m[2] for m in moves]))
    return out


@dataclass(frozen=True)
class TreeShape:
    """How `broadcast` and `reduce` use the rails: ``fanout`` children per rank in the tree along a
    rail (1: a chain), and whether the root's own rail carries a part (``root_carries``)."""

    fanout: int = 2
    root_carries: bool = False


def broadcast(
    topology: Topology,
    collective: Collective,
    router: Router,
    shape: TreeShape = TreeShape(),
    *,
    rail_orders: dict[int, list[int]] | None = None,
    spread: bool = True,
) -> Schedule:
    """Two-level broadcast, pipelined over the k chunks. The chunks are dealt round-robin to the
    carriers, the other L − 1 ranks of the root's host (with ``shape.root_carries``, the root too;
    chunk c to the ``c mod n``-th of the n carriers, in wave ``c // n``): in step ``wave`` the root
    hands the chunk to that rank g (fast links inside the host), which starts it along rail g
    (rank g of every host) by a tree with ``shape.fanout`` children per rank, one tree level per
    step; a rank that has received it shares it with the other ranks of its host in the next step.
    So n NICs carry a 1/n share each (instead of one NIC carrying everything) and the links inside
    the hosts carry the rest; with many chunks the phases overlap and the time approaches that of
    the slowest of these loads: the NICs' share, or the switch inside a host, where every rank
    takes (L − 1)/n of the data from its host and the root hands out all of it (twice as much when
    it carries a part too, as it shares that part itself). k ≥ n puts every carrier to work.

    ``rail_orders`` (rail -> hosts in tree order, filled on demand) lets several calls on the same
    topology and root share that work; ``spread`` False keeps the router's choice among equally
    good switch paths instead of balancing them (`spread_routes`), which is faster to build."""
    hosts, _ = _root_host(topology, collective.root)
    params = {
        "phases": ["root to the carriers of its host, one part each", "along the rails (tree)", "inside every host"],
        "hosts": len(hosts),
        "rail_fanout": shape.fanout,
        "root_carries": shape.root_carries,
    }
    orders = {} if rail_orders is None else rail_orders
    steps = _broadcast_steps(topology, collective, shape.fanout, shape.root_carries, orders)
    schedule = lower_copies(topology, collective, steps, NAME, params, router)
    return spread_routes(schedule, topology, router) if spread else schedule


def reduce(
    topology: Topology,
    collective: Collective,
    router: Router,
    shape: TreeShape = TreeShape(),
    *,
    rail_orders: dict[int, list[int]] | None = None,
    spread: bool = True,
) -> Schedule:
    """Two-level reduce: the broadcast's dual (inside the hosts, down the rail trees, into the root);
    the options as for `broadcast` (``rail_orders`` on the reversed topology)."""

    def forward(t: Topology, c: Collective, r: Router) -> Schedule:
        return broadcast(t, c, r, shape, rail_orders=rail_orders, spread=spread)

    return by_duality(forward, topology, collective, NAME)


# ============================================================================ pipelined allgather
#: methods tried inside a host for the pipelined allgather (one chunk per piece, made on the host alone)
HOST_METHODS = {direct.NAME: direct.METHOD, ring.NAME: ring.METHOD, greedy.NAME: greedy.METHOD}
#: waves (`host_levels.caps_for`) and chunks per piece tried for allgather with the ``size`` option
AG_WAVES = (1, 2, 4, 8, 16, 32, 64)
AG_CHUNKS = (1, 2, 4, 8, 16)
#: allgather candidates are built whole and timed while they have at most this many transfers; on
#: larger machines the waves are chosen by `_estimate` and only the chosen schedule is built
FULL_TIMING_TRANSFERS = 600_000
#: on those larger machines, chunks per piece are tried (by estimate) while the schedule has at most
#: this many transfers (1,024 ranks: up to 4 chunks; 4,096 ranks: one)
ESTIMATED_TRANSFERS = 5_000_000
#: waves used without a size
DEFAULT_WAVES = 8
#: rails whose rates (`host_levels.rail_shares`) differ by more than this fraction also get the
#: allgather that sends each its share across (`LevelSetup.build_weighted`)
RAIL_SPREAD = 0.05
#: the fastest allgather candidates also timed with their routes spread over equally good paths
SPREAD_BEST = 4
#: the allgather with the racks merged into the hosts (`LevelSetup.flat`) is built and timed where
#: its best estimate is within this factor of the racks' best
FLAT_MARGIN = 1.1


class LevelSetup:
    """What every pipelined allgather candidate on one machine shares: the levels, the switch
    routes, the kinds of host (equal `host_levels.host_signature`) and the inner schedules made so far."""

    def __init__(self, topology: Topology, *, racks: bool = True):
        hosts = host_ranks(topology)
        if len(hosts[0]) == 1:
            raise NotApplicable(f"hierarchical allgather needs several ranks per host; {topology.name} has one")
        self.topology = topology
        self.routes = PairRoutes(topology)
        # local ranks that reach the same local rank of the other hosts over switches
        reach = [
            all(self.routes.route_id(hosts[a][i], hosts[b][i]) >= 0 for a, b in ((0, 1), (1, 0), (0, len(hosts) - 1)))
            for i in range(len(hosts[0]))
        ]
        self.levels = host_levels.machine_levels(topology, hosts, self.routes, racks=racks and all(reach))
        #: False when the rack level was merged into the host level (`flat`)
        self.racks = racks
        self._flat: LevelSetup | None = None
        kinds: dict[tuple, int] = {}
        self.parts: list[Topology] = []
        self.made_on: list[tuple[str, ...]] = []
        host_kind, names = [], []
        for h, ranks in enumerate(self.levels.hosts):
            part = host_levels.host_topology(topology, ranks, f"{topology.name}/host{h}")
            signature = host_levels.host_signature(part)
            switch_names = tuple(s.name for s in part.switches)
            if signature not in kinds:
                if not connected(part):
                    raise NotApplicable(f"hierarchical: the ranks of host {h} ({list(ranks)}) cannot reach each other inside it")
                kinds[signature] = len(self.parts)
                self.parts.append(part)
                self.made_on.append(switch_names)
            host_kind.append(kinds[signature])
            names.append(switch_names)
        self.host_kind = np.array(host_kind, dtype=np.int64)
        self.switch_names = tuple(names)
        #: None when every rank reaches the network, else the carriers (`host_levels.carrier_allgather`)
        self.carriers: host_levels.Carriers | None = None
        if not all(reach):
            self.carriers = host_levels.carriers_of(self.parts[0], reach)
            if self.carriers is None or len(self.parts) > 1:
                bad = reach.index(False)
                raise NotApplicable(
                    f"hierarchical: rank {hosts[0][bad]} of {topology.name} has no switch-only route to the same rank of the "
                    f"other hosts, and its host's ranks that do cannot carry the others' pieces evenly"
                )
        self._rail_rates: np.ndarray | bool | None = False  # not computed yet
        self._inner: dict[tuple[int, str], Schedule | None] = {}
        self._probes: dict[tuple[int, int], Schedule] = {}
        self._probe_times: dict[tuple[int, int, int], tuple[float, float]] = {}

    def flat(self) -> LevelSetup | None:
        """The same machine with its racks merged into one level of hosts (every host sends to
        every other directly), or None where there are no racks. Where latency dominates it wins:
        a 64 KiB allgather on four racks of four 8-GPU servers crosses the network in one step of
        the ToR-spine path (5.37 µs) instead of one across the racks and one inside a rack
        (8.02 µs); with bandwidth the racks win (each piece crosses the uplinks once per rack)."""
        if self.levels.num_levels < 3:
            return None
        if self._flat is None:
            self._flat = LevelSetup(self.topology, racks=False)
        return self._flat

    def inner_schedule(self, kind: int, name: str) -> Schedule | None:
        key = (kind, name)
        if key not in self._inner:
            try:
                self._inner[key] = HOST_METHODS[name].synthesize(self.parts[kind], Kind.ALLGATHER, chunks=1)
            except NotApplicable:
                self._inner[key] = None
        return self._inner[key]

    def inner(self, size: int) -> tuple[host_levels.InnerSchedules, list[str]]:
        """Per kind of host the fastest of `HOST_METHODS` for a host allgather of ``size`` bytes."""
        chosen, names = [], []
        for kind, part in enumerate(self.parts):
            best: tuple[float, int, str, Schedule] | None = None
            for order, name in enumerate(HOST_METHODS):
                schedule = self.inner_schedule(kind, name)
                if schedule is None:
                    continue
                key = (predicted_us(schedule, part, [max(1, size)])[0], order, name, schedule)
                if best is None or key[:2] < best[:2]:
                    best = key
            if best is None:
                raise NotApplicable(f"hierarchical: no method makes an allgather inside host kind {kind} of {self.topology.name}")
            chosen.append(best[3])
            names.append(best[2])
        inner = host_levels.InnerSchedules(tuple(chosen), self.host_kind, self.switch_names, tuple(self.made_on))
        return inner, names

    def build(self, collective: Collective, waves: int, size: int, *, patient: bool = False) -> Schedule:
        """The pipelined allgather with ``waves`` waves, its host schedules chosen for ``size``;
        ``patient``: where carriers cross for the other ranks, in whole batches
        (`host_levels.carrier_allgather`)."""
        levels = self.levels
        k = collective.chunks_per_piece
        caps = host_levels.caps_for(levels.dims, k, waves)
        block = levels.dims[-1] * caps[-1] * size // (collective.num_ranks * k)
        inner, names = self.inner(block)
        params = {
            "phases": [f"allgather across {name}" for name in levels.names[:-1]] + ["allgather in hosts (pipelined)"],
            "dims": list(levels.dims),
            "inside": names[0] if len(set(names)) == 1 else names,
            "chosen_at_size": size,
        }
        if not self.racks:
            params["racks"] = "merged into hosts"
        if self.carriers is not None:
            params["phases"] = ["allgather in hosts", "carriers across hosts", "from the carriers in hosts (pipelined)"]
            return host_levels.carrier_allgather(
                self.topology, collective, levels, inner, self.routes, self.carriers, waves, NAME, params, patient=patient
            )
        return host_levels.allgather(self.topology, collective, levels, inner, self.routes, waves, NAME, params)

    def rail_chunks(self, k: int) -> np.ndarray | None:
        """Chunks of a host's L·k that each local rank's rail carries across when the rails cross
        the network at unequal rates (`host_levels.rail_shares`: two ranks behind one NIC, a degraded
        NIC), in proportion to those rates (the ranks that reach the network, or the carriers where
        only some do); None where they are equal (the plain build already balances them) or the
        machine is not hosts of ranks (two levels)."""
        rails = self.carriers.carriers if self.carriers is not None else tuple(range(len(self.levels.hosts[0])))
        if self._rail_rates is False:
            self._rail_rates = host_levels.rail_shares(self.topology, self.levels, self.routes, rails)
        rates = self._rail_rates
        if rates is None:
            return None
        used = rates[list(rails)]
        if not np.all(used > 0) or used.max() <= used.min() * (1 + RAIL_SPREAD):
            return None
        total = len(self.levels.hosts[0]) * k
        return largest_remainder(rates / rates.sum() * total, total)

    def build_weighted(self, collective: Collective, waves: int, size: int, *, patient: bool = False) -> Schedule:
        """The allgather with every rail carrying its share (`rail_chunks`) across, in ``waves``
        waves (``patient``: whole batches), the host schedules chosen for one piece of ``size``
        (`host_levels.weighted_carrier_allgather`)."""
        shares = self.rail_chunks(collective.chunks_per_piece)
        if shares is None:
            raise NotApplicable(f"hierarchical: the rails of {self.topology.name} cross the network at equal rates")
        inner, names = self.inner(max(1, size // collective.num_ranks))
        params = {
            "phases": ["allgather in hosts", "every rail its share across hosts", "from the rails in hosts (pipelined)"],
            "rails": "weighted",
            "inside": names[0] if len(set(names)) == 1 else names,
            "chosen_at_size": size,
        }
        if not self.racks:
            params["racks"] = "merged into hosts"
        return host_levels.weighted_carrier_allgather(
            self.topology, collective, self.levels, inner, self.routes, shares, waves, NAME, params, patient=patient
        )

    def estimate(self, collective: Collective, waves: int, size: int) -> float:
        """The step-synchronous time (µs) of `build`'s schedule at ``size``, estimated without
        building it: per level a one-step probe (every rank sends one item to every peer of its
        group; inside a host, the host schedule) gives the step's fixed and per-item time, and a
        step of the plan lasts as long as its slowest level. Links shared by two levels in the
        same step are not counted twice, so it is optimistic there; it ranks the waves of one
        machine, and large machines only use it to choose them."""
        levels = self.levels
        r, k = collective.num_ranks, collective.chunks_per_piece
        caps = host_levels.caps_for(levels.dims, k, waves)
        item = max(1, size // (r * k))
        block = levels.dims[-1] * caps[-1] * item
        inner, _ = self.inner(block)
        fixed, per_item = [], []
        for j in range(levels.num_levels - 1):
            key = (k, j, size)
            if key not in self._probe_times:
                tiny, full = predicted_us(self.probe(collective, j), self.topology, [r * k, size])
                self._probe_times[key] = (tiny, max(0.0, full - tiny))
            fixed.append(self._probe_times[key][0])
            per_item.append(self._probe_times[key][1])
        worst_in, worst_fixed = 0.0, 0.0
        for kind, schedule in enumerate(inner.schedules):
            part = self.parts[kind]
            tiny, full = predicted_us(schedule, part, [part.num_ranks, part.num_ranks * item])
            worst_fixed = max(worst_fixed, tiny)
            worst_in = max(worst_in, full - tiny)
        fixed.append(worst_fixed)
        per_item.append(max(0.0, worst_in))
        total = 0.0
        for step in host_levels.plan_batches(levels.dims, k, caps):
            total += max((fixed[j] + len(items) * per_item[j] for j, items in enumerate(step) if items), default=0.0)
        return total

    def probe(self, collective: Collective, level: int) -> Schedule:
        key = (collective.chunks_per_piece, level)
        if key not in self._probes:
            self._probes[key] = host_levels.probe(self.topology, self.levels, collective, self.routes, level, NAME)
        return self._probes[key]


def allgather(
    topology: Topology,
    collective: Collective,
    router: Router,
    *,
    waves: int = DEFAULT_WAVES,
    size: int | None = None,
    setup: LevelSetup | None = None,
) -> Schedule:
    """Pipelined allgather over the machine's levels (`host_levels`): across racks and hosts over
    the NICs, then inside every host with the fastest host schedule; ``waves`` as there."""
    setup = setup or LevelSetup(topology)
    return setup.build(collective, waves, size or REFERENCE_SIZE)


def tuned_allgather(
    topology: Topology, collective: Collective, size: int, requested: int | None, setup: LevelSetup | None = None
) -> Schedule:
    """The fastest pipelined allgather at ``size`` over `AG_WAVES` and (unless the caller fixed the
    chunks) `AG_CHUNKS`, on the machine's levels and, where it has racks, also with the racks
    merged into the hosts (`LevelSetup.flat`, where its estimate is within `FLAT_MARGIN` of the
    racks'), and where carriers cross for other ranks, with eager and with patient batches.
    Candidates are built and timed while they have at most `FULL_TIMING_TRANSFERS` transfers
    (the waves swept in increasing order, given up after two slower ones in a row); on larger
    machines the levels, chunks and waves with the best `LevelSetup.estimate` are built, the
    chunks limited by `ESTIMATED_TRANSFERS`."""
    setup = setup or LevelSetup(topology)
    setups = [s for s in (setup, setup.flat()) if s is not None]
    r = collective.num_ranks
    kind = collective.kind
    if requested is not None:
        counts = [requested]
    else:
        counts = [k for k in AG_CHUNKS if r * (r - 1) * k <= FULL_TIMING_TRANSFERS] or [1]
    if r * (r - 1) * counts[0] > FULL_TIMING_TRANSFERS and setup.carriers is None:
        if requested is None:
            counts = [k for k in AG_CHUNKS if r * (r - 1) * k <= ESTIMATED_TRANSFERS] or [1]
        estimates = [
            (s.estimate(Collective(kind, r, k), w, size), i, k, w) for i, s in enumerate(setups) for k in counts for w in AG_WAVES
        ]
        _, i, k, waves = min(estimates)
        return setups[i].build(Collective(kind, r, k), waves, size)
    if len(setups) > 1:
        # the merged racks are built only where their estimate comes near the racks' (the
        # estimates rank them as the built schedules do; a 1 GiB candidate costs seconds)
        best = [min(s.estimate(Collective(kind, r, k), w, size) for k in counts for w in AG_WAVES) for s in setups]
        if best[1] > FLAT_MARGIN * best[0]:
            setups = setups[:1]
    timed = []
    for s in setups:
        # batches that wait for whole waves only differ where carriers cross for other ranks
        for patient in (False, True) if s.carriers is not None else (False,):
            for k in counts:
                one = Collective(kind, r, k)
                timed += timed_sweep(
                    AG_WAVES, lambda w, one=one, s=s, p=patient: s.build(one, w, size, patient=p), topology, size, patience=2
                )
        for patient in (False, True):
            for k in counts:
                if s.rail_chunks(k) is not None:
                    one = Collective(kind, r, k)
                    timed += timed_sweep(
                        AG_WAVES,
                        lambda w, one=one, s=s, p=patient: s.build_weighted(one, w, size, patient=p),
                        topology,
                        size,
                        patience=2,
                    )
    return fastest(timed + _spread_fastest(timed, topology, size))


def _spread_fastest(timed: list[tuple[float, Schedule]], topology: Topology, size: int) -> list[tuple[float, Schedule]]:
    """The `SPREAD_BEST` fastest of ``timed`` again, each transfer moved to the equally good switch
    path its step loads least (`spread_routes`), timed at ``size``. The levels send over one route
    per pair of ranks (`PairRoutes`), so a rank's sends to its peers in the other hosts all leave by
    the same port where it has several (a Gaudi box's three scale-out ports: 9.18 µs of a 1 MiB
    allgather's first step through one 12.5 GB/s port instead of 3.06 through three)."""
    router = router_for(topology)
    out = []
    for i in sorted(range(len(timed)), key=lambda i: (timed[i][0], i))[:SPREAD_BEST]:
        spread = spread_routes(timed[i][1], topology, router)
        spread = replace(spread, params={**spread.params, "routes": "spread"})
        out.append((predicted_us(spread, topology, [size])[0], spread))
    return out


def reduce_scatter(
    topology: Topology, collective: Collective, router: Router, *, size: int | None = None, requested: int | None = None
) -> Schedule:
    """The allgather's dual (time reversed on the reversed machine): reduce inside every host
    first, then across the hosts and racks. With ``size`` the allgather is tuned there, and the
    reduce-scatter takes its chunk count."""
    if size is None:
        return by_duality(allgather, topology, collective, NAME)
    reversed_topology = topology.reversed()
    forward = Collective(Kind.ALLGATHER, collective.num_ranks, collective.chunks_per_piece)
    ag = tuned_allgather(reversed_topology, forward, size, requested)
    chosen = Collective(Kind.REDUCE_SCATTER, collective.num_ranks, ag.collective.chunks_per_piece)
    return dual_reduction(ag, chosen, NAME, {**ag.params, "dual_of": Kind.ALLGATHER.value})


def pipelined_allreduce(
    topology: Topology, collective: Collective, router: Router, size: int, waves: int | None = None
) -> Schedule:
    """Allreduce as the pipelined reduce-scatter (inside the hosts, then across) followed by the
    pipelined allgather (across, then inside), overlapped per chunk: the allgather's shape is
    tuned for ``size`` (or built with ``waves``) and the reduce-scatter is its dual with the same
    one."""
    per_piece = pieces_for_allreduce(collective, NAME)
    forward_ag = Collective(Kind.ALLGATHER, collective.num_ranks, per_piece)
    if waves is None:
        ag = tuned_allgather(topology, forward_ag, size, per_piece)
        waves = int(ag.params["waves"])
    else:
        ag = LevelSetup(topology).build(forward_ag, waves, size)

    weighted = ag.params.get("rails") == "weighted"
    spread = ag.params.get("routes") == "spread"
    racks = "racks" not in ag.params
    patient = ag.params.get("batches") == "whole"

    def forward(t: Topology, c: Collective, r: Router) -> Schedule:
        setup = LevelSetup(t, racks=racks)
        if weighted:
            built = setup.build_weighted(c, waves, size, patient=patient)
        else:
            built = setup.build(c, waves, size, patient=patient)
        return spread_routes(built, t, router_for(t)) if spread else built

    rs = by_duality(forward, topology, Collective(Kind.REDUCE_SCATTER, collective.num_ranks, per_piece), NAME)
    params = {
        "phases": ["reduce-scatter: in hosts, then across", "allgather: across, then in hosts"],
        "allgather": dict(ag.params),
        "chosen_at_size": size,
    }
    return overlap(rs, ag, collective, NAME, params)


def default_allreduce(topology: Topology, collective: Collective, router: Router) -> Schedule:
    """Allreduce without a size: the two-level `allreduce`, or, where its rails cannot be built
    (hosts whose ranks do not all reach the network), the pipelined one with `DEFAULT_WAVES`."""
    try:
        return allreduce(topology, collective, router)
    except NotApplicable as exc:
        try:
            return pipelined_allreduce(topology, collective, router, REFERENCE_SIZE, DEFAULT_WAVES)
        except NotApplicable:
            raise exc from None


BUILDERS = {
    Kind.ALLGATHER: allgather,
    Kind.REDUCE_SCATTER: reduce_scatter,
    Kind.ALLREDUCE: default_allreduce,
    Kind.SCATTER: scatter,
    Kind.GATHER: gather,
    Kind.ALLTOALL: alltoall,
    Kind.BROADCAST: broadcast,
    Kind.REDUCE: reduce,
}
COLLECTIVES = frozenset(BUILDERS)
_dispatch = dispatcher(NAME, BUILDERS)
OPTIONS = frozenset({"size"})
#: the collectives whose chunk count the ``size`` option chooses
TUNED = frozenset(
    {Kind.GATHER, Kind.SCATTER, Kind.ALLTOALL, Kind.BROADCAST, Kind.REDUCE, Kind.ALLGATHER, Kind.REDUCE_SCATTER, Kind.ALLREDUCE}
)
#: chunks per piece tried for gather, scatter and alltoall with the ``size`` option
CHUNK_CHOICES = (1, 2, 4, 8, 16, 32, 64)
#: waves of L − 1 chunks (one per carrier) tried for broadcast and reduce: a chain along a rail of
#: H hosts fills in H + 1 steps, so large sizes want many waves
WAVE_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128)
#: broadcast / reduce candidates rebuilt with balanced switch paths when tuning for a size
FINALISTS = 3
_TREES = frozenset({Kind.BROADCAST, Kind.REDUCE})


def default_chunks(kind: Kind, topology: Topology) -> int:
    """Chunks per piece without a size: R for allreduce (one share per rank); for broadcast and
    reduce one per carrier, the other L − 1 ranks of the root's host (every carrier's rail busy);
    else 1."""
    if kind is Kind.ALLREDUCE:
        return topology.num_ranks
    if kind in _TREES:
        try:
            return max(1, len(host_ranks(topology)[0]) - 1)
        except NotApplicable:
            return 1
    return 1


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options) -> Schedule:
    """The hierarchical schedule for ``collective``. With ``size`` (bytes) and no chunk count from
    the caller, gather, scatter and alltoall take the chunks per piece among `CHUNK_CHOICES` whose schedule
    is fastest at that size (step-synchronous model): one chunk for small messages (two steps),
    many for large ones (the pipeline fill costs one step in k + 1). Broadcast and reduce take the
    fastest rail tree, carriers and number of waves (`_tuned_tree`; the caller's chunk count, if
    given, is kept)."""
    size = size_option(NAME, options, OPTIONS)
    router = router or router_for(topology)
    kind = collective.kind
    if size is None or kind not in TUNED:
        return _dispatch(topology, collective, router)
    requested = options.get("requested_chunks")
    if kind is Kind.ALLGATHER:
        return tuned_allgather(topology, collective, size, requested)
    if kind is Kind.REDUCE_SCATTER:
        return reduce_scatter(topology, collective, router, size=size, requested=requested)
    if kind is Kind.ALLREDUCE:
        return _tuned_allreduce(topology, collective, router, size, requested)
    if kind in _TREES:
        return _tuned_tree(topology, collective, router, size, requested)
    if requested is not None:
        return _dispatch(topology, collective, router)

    def build(k: int) -> Schedule:
        return _dispatch(topology, Collective(kind, collective.num_ranks, k, collective.root), router)

    return fastest(timed_sweep(CHUNK_CHOICES, build, topology, size))


#: chunks per share (allreduce's chunks per piece over the rank count) tried for the pipelined allreduce
AR_SHARES = (1, 2, 4, 8)


def _tuned_allreduce(topology: Topology, collective: Collective, router: Router, size: int, requested: int | None) -> Schedule:
    """The faster at ``size`` of the two-level allreduce (`allreduce`: whole phases overlapped per
    chunk, rings or direct inside) and the pipelined one (`pipelined_allreduce`), over the chunk
    counts of `AR_SHARES` unless the caller fixed them."""
    r = collective.num_ranks
    counts = (
        [requested] if requested is not None else [r * s for s in AR_SHARES if r * (r - 1) * s <= FULL_TIMING_TRANSFERS] or [r]
    )
    candidates: list[Schedule] = []
    carrier_cache: dict = {}
    for k in counts:
        one = Collective(Kind.ALLREDUCE, r, k, collective.root)
        for build in (allreduce, lambda t, c, rt: pipelined_allreduce(t, c, rt, size)):
            try:
                candidates.append(build(topology, one, router))
            except NotApplicable:
                continue
        candidates.extend(_other_inner_choices(topology, one, router, candidates))
        candidates.extend(_carrier_choices(topology, one, router, carrier_cache))
    if not candidates:
        return allreduce(topology, collective, router)
    return fastest((predicted_us(s, topology, [size])[0], s) for s in candidates)


def _other_inner_choices(topology: Topology, collective: Collective, router: Router, built: list[Schedule]) -> list[Schedule]:
    """The two-level allreduce with the inner methods `inner_method` did not choose: its choice
    compares link loads (what counts at large sizes), but at small sizes a ring's R − 1 steps of
    latency across hosts cost more than the direct exchange's crowding of an oversubscribed
    network. Only for the default chunk
    count of one share per rank (more chunks only pipeline the same phases). Inside the hosts only
    ``direct`` is added (one step; a ring's L − 1 steps never won at the sizes where this matters),
    which keeps the extra candidates to two or three."""
    if collective.chunks_per_piece != collective.num_ranks:
        return []
    chosen = [(s.params.get("intra"), s.params.get("inter")) for s in built if "inter" in s.params]
    if not chosen:
        return []
    out: list[Schedule] = []
    # inside the hosts: the chosen method and direct (one step); across: every method of ACROSS
    intras = sorted({intra for intra, _ in chosen} | {direct.NAME})
    for intra, inter in itertools.product(intras, ACROSS):
        if (intra, inter) in chosen:
            continue
        try:
            out.append(allreduce(topology, collective, router, intra, inter))
        except NotApplicable:
            continue
    return out


def _carrier_choices(topology: Topology, collective: Collective, router: Router, cache: dict) -> list[Schedule]:
    """`carrier_allreduce` where it differs from `allreduce` (some ranks of a host have no NIC, or
    the rails' bandwidths differ): direct inside the hosts (ring where direct does not apply),
    direct or one-shot across, equal rails with one share per rank, rails weighted by bandwidth
    with one or four."""
    if collective.chunks_per_piece not in (collective.num_ranks, 4 * collective.num_ranks):
        return []
    hosts = host_ranks(topology)
    carriers = network_carriers(topology, router, hosts)
    if "rails_differ" not in cache:
        rails = [[c[j] for c in carriers] for j in range(min(len(c) for c in carriers))] if all(carriers) else []
        widths = rail_bandwidths(router, rails) if rails else np.zeros(0)
        cache["rails_differ"] = bool(widths.size and np.ptp(widths) > 0)
    all_carry = all(len(c) == len(h) for c, h in zip(carriers, hosts))
    weightings = ([] if all_carry or collective.chunks_per_piece != collective.num_ranks else [False]) + (
        [True] if cache["rails_differ"] else []
    )
    out: list[Schedule] = []
    for weighted in weightings:
        for inter in (direct.NAME, one_shot.NAME):
            for intra in INNER:
                try:
                    out.append(carrier_allreduce(topology, collective, router, intra, inter, weighted, cache))
                    break
                except NotApplicable:
                    continue
    return out


def _tuned_tree(topology: Topology, collective: Collective, router: Router, size: int, requested: int | None) -> Schedule:
    """The fastest broadcast / reduce at ``size`` over rail trees (`fanout_choices`), with or
    without the root carrying, and waves (`WAVE_CHOICES`, unless the caller fixed the chunks).
    Waves are tried in increasing order and given up after two in a row that are slower: the time
    falls with the waves while the pipeline fill dominates and rises once the α of the extra
    steps does. Candidates are compared with the router's paths; the `FINALISTS` best are built
    again with their paths balanced (`spread_routes`, the slow part) and the fastest of those kept."""
    hosts = host_ranks(topology)
    build = BUILDERS[collective.kind]
    rail_orders: dict[int, list[int]] = {}

    def one(k: int) -> Collective:
        return Collective(collective.kind, collective.num_ranks, k, collective.root)

    tried: list[tuple[float, int, TreeShape, int]] = []
    for root_carries in (False, True):
        carriers = len(_carriers(hosts, 0, root_carries))
        if root_carries and carriers == len(_carriers(hosts, 0, False)):
            continue  # hosts of one rank: the same schedules again
        counts = [requested] if requested is not None else [carriers * waves for waves in WAVE_CHOICES]
        for fanout in fanout_choices(len(hosts)):
            shape = TreeShape(fanout, root_carries)

            def quick(k: int, shape: TreeShape = shape) -> Schedule:
                return build(topology, one(k), router, shape, rail_orders=rail_orders, spread=False)

            for (time, _), k in zip(timed_sweep(counts, quick, topology, size, patience=2), counts):
                tried.append((time, len(tried), shape, k))

    def balanced(finalist: tuple[float, int, TreeShape, int]) -> Schedule:
        _, _, shape, k = finalist
        return build(topology, one(k), router, shape, rail_orders=rail_orders)

    timed = timed_sweep(sorted(tried)[:FINALISTS], balanced, topology, size)
    return fastest(timed + _scatter_level_candidates(topology, collective, router, size, requested))


def _scatter_level_candidates(
    topology: Topology, collective: Collective, router: Router, size: int, requested: int | None
) -> list[tuple[float, Schedule]]:
    """The scatter + level allgather broadcast (`scatter_level_broadcast`; reduce: its dual) at
    ``size`` over `SCATTER_AG_CHUNKS` chunks per piece (or the caller's count, if a multiple of
    R), each timed; none where the level allgather does not apply or would be too large to time."""
    r = collective.num_ranks
    if requested is not None:
        counts = [requested // r] if requested % r == 0 else []
    else:
        counts = [k for k in SCATTER_AG_CHUNKS if r * (r - 1) * k <= FULL_TIMING_TRANSFERS]
    if not counts:
        return []
    try:
        setup = LevelSetup(topology) if collective.kind is Kind.BROADCAST else LevelSetup(topology.reversed())
    except NotApplicable:
        return []

    out: list[tuple[float, Schedule]] = []
    for layered in (False, True):

        def forward(t: Topology, c: Collective, rt: Router, layered: bool = layered) -> Schedule:
            return scatter_level_broadcast(t, c, rt, size, setup, layered=layered)

        def one(k: int, forward=forward) -> Schedule:
            c = Collective(collective.kind, r, r * k, collective.root)
            return forward(topology, c, router) if c.kind is Kind.BROADCAST else by_duality(forward, topology, c, NAME)

        out += timed_sweep([k for k in counts if k > 1 or not layered], one, topology, size, patience=2)
    return out


#: chunks per piece tried for the scatter + level allgather broadcast
SCATTER_AG_CHUNKS = (1, 2, 4, 8)


def without_held(schedule: Schedule, held: np.ndarray) -> Schedule:
    """``schedule`` without its transfers of a chunk into a rank that ``held`` (ranks × chunks)
    says holds it already (steps left empty are dropped): for a phase that follows another, whose
    receivers then get every chunk once (what `synth.transform.dual_reduction` needs)."""
    builder = ScheduleBuilder.like(schedule)
    remap = np.array([builder.route_id(r) for r in schedule.routes], dtype=np.int64)
    for step in range(schedule.num_steps):
        sl = schedule.step_slice(step)
        keep = ~held[schedule.dst[sl], schedule.chunk[sl]]
        if keep.any():
            src, dst, chunk = schedule.src[sl][keep], schedule.dst[sl][keep], schedule.chunk[sl][keep]
            builder.add_step_arrays(src, dst, chunk, schedule.op[sl][keep], remap[schedule.route[sl][keep]])
    return builder.build()


def scatter_level_broadcast(
    topology: Topology,
    collective: Collective,
    router: Router,
    size: int,
    setup: LevelSetup | None = None,
    *,
    layered: bool = False,
) -> Schedule:
    """Broadcast as a scatter followed by an allgather (van de Geijn's broadcast, as
    `scatter-allgather` does it over ranks), each made for the machine's levels: the two-level
    `scatter` (the root hands every local index its pieces inside its host, which go on along the
    rails: every NIC of the root's host busy) and the pipelined allgather over racks, hosts and
    the ranks of a host (`tuned_allgather` at ``size``, with the scatter's chunks per piece), which
    crosses each rack's uplinks and each host's NICs once per piece where a tree or a flat
    allgather across hosts crosses the oversubscribed uplinks many times. Chunk r·k + i (piece r)
    is scattered to rank r in steps i and i + 1. The allgather starts on a chunk as soon as the
    scatter is done with it (`overlap`); ``layered``: one allgather of one chunk per piece for
    each layer i of chunks (tuned at size / k), started right after the scatter has delivered that
    layer, so the scatter's later layers (the root's host links) and the allgathers of the earlier
    ones (the NICs and the network) run in the same steps. No rank is sent a chunk it holds
    already (the root holds everything from the start, the relays of the root's host the pieces
    they passed on)."""
    r, root = collective.num_ranks, collective.root
    if collective.num_chunks % r:
        raise NotApplicable(f"{NAME}: the scatter + allgather broadcast needs a multiple of {r} chunks")
    k = collective.num_chunks // r
    spread = scatter(topology, Collective(Kind.SCATTER, r, k, root), router)
    # what each rank holds once the scatter is done (its piece; the root's host's relays more; the
    # root everything): the allgather sends none of it again
    held = np.zeros((r, r * k), dtype=bool)
    held[root] = True
    held[spread.dst, spread.chunk] = True
    params: dict = {
        "phases": ["two-level scatter from the root", "pipelined allgather over the levels"],
        "hosts": len(host_ranks(topology)),
    }
    if not layered or k == 1:
        gathered = tuned_allgather(topology, Collective(Kind.ALLGATHER, r, k), size, k, setup)
        params["allgather"] = dict(gathered.params)
        return overlap(spread, without_held(gathered, held), collective, NAME, params)
    layer = tuned_allgather(topology, Collective(Kind.ALLGATHER, r, 1), max(1, size // k), 1, setup)
    params["allgather"] = dict(layer.params)
    params["layered"] = True
    last = np.full(k, -1, dtype=np.int64)
    steps = np.repeat(np.arange(spread.num_steps), np.diff(spread.step_starts))
    np.maximum.at(last, spread.chunk % k, steps)
    placed = [(spread, 0)]
    for i in range(k):
        relabelled = replace(layer, chunk=layer.chunk * k + i, collective=Collective(Kind.ALLGATHER, r, k))
        placed.append((without_held(relabelled, held), int(last[i]) + 1))
    return merge_at(placed, collective, NAME, params)


METHOD = Method(
    name=NAME,
    summary="multi-host: allreduce = reduce-scatter in hosts, allreduce across, allgather in hosts; others over the rails",
    family="nccl",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=ranks_for_allreduce,
    topology_chunks=default_chunks,
    options=OPTIONS,
    chooses_chunks=True,
    # the pipelined allgather is built in columns: whole `synth synthesize` processes peak at 53-73
    # bytes per transfer on fat-trees of 4,096 to 16,384 GPUs (benchmarks/scale.py); the other
    # collectives keep the default figure
    memory_per_transfer_of=((Kind.ALLGATHER, 64),),
)
