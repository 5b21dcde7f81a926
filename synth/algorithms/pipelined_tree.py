"""Latency-aware trees for broadcast, reduce and allreduce, shaped for the message size.

Small and mid-size broadcasts are a trade between α and β (Sanders, Speck and Träff, "Two-tree
algorithms for full bandwidth broadcast, reduction and scan", Parallel Computing 2009; Träff,
"A simple work-optimal broadcast algorithm for message-passing parallel systems", 2004): a deep
tree pipelined over many chunks reaches the bandwidth of its slowest link but pays a latency per
step of its fill; a shallow tree with a large fan-out pays few latencies but loads each sender's
links with one copy per child. This method builds both kinds on the machine's structure and keeps,
for the message size, the one the step-synchronous model (docs/formats.md, 'Step-synchronous
cost') says is fastest:

- Hosts (``ranks[].host``): the tree is built over hosts, with the root's host first, so the
  expensive network hops happen between hosts and the cheap links inside a host finish the job. The
  data is cut into ``parts`` (1, or one per rank of a host, the rails): the root deals part j to
  the j-th rank of its host (its carrier), every part travels across hosts from carrier to carrier
  along the same host tree (rail j), and each carrier shares its part with the other ranks of its
  host as soon as it has it, in the next step, overlapping the rest of the tree (a host's links and
  its NICs are different links, so these steps cost little extra). With one part per rank every
  NIC of a host carries its share, as in NCCL's rail-aligned trees; with one part only the root's
  rail does. A machine without hosts is a tree over its ranks (one part).
- Network paths and ports: every hop between hosts names its path
  (`synth.algorithms.engines.rail_routes`): among a pair's fewest-hop, least-latency paths the one
  whose busiest link carries least, counting the other parts' hops, so eight rails crossing a
  fat-tree's spines split over them instead of hashing onto one. A GPU with several scale-out
  ports on different switches (a Gaudi box: three leaves) reaches its peer over one path per port:
  the data may be cut into one part per carrier *and port*, so every port carries a share.
- The root's rail may be left out (layout ``hosts-off-root-rail``): with it, the root sends every
  other part once over its host links and its own part to every GPU of its host, twice the load
  of the others; without it only the deal. ``bounce`` (chain shape) keeps the root's rail but
  sends its own part back to the root's host from the last host of the chain, whose NICs are idle,
  rank k there to rank k of the root's host: the root's host links carry each part once and the
  root's NIC carries a share too (MI300X-, Gaudi- and fat-tree nodes, whose GPUs reach the
  network each over their own NIC).
- ``knomial`` shape (generalized binomial tree): in every round each host that already has the
  data sends it to ``fanout`` hosts that do not, so ⌈log_{fanout+1} H⌉ rounds reach H hosts; the
  whole part moves at once. fanout 1 is the binomial tree, fanout H − 1 the flat one-step tree.
  Best at small sizes: fewest steps.
- ``kary`` shape (pipelined k-ary tree, ``fanout`` 1 is the pipelined chain): each part is cut
  into ``chunks_per_part`` chunks that follow each other down a tree of fan-out k in breadth-first
  host order, one tree level per step, so the schedule takes (chunks + depth − 1) steps each
  carrying k chunks per sender. Best at mid sizes, where the fill of a deep pipeline costs less
  than the bandwidth a shallow tree wastes.
- ``scatter-allgather`` shape (van de Geijn's broadcast: Barnett, Gupta, Payne, Shuler, van de
  Geijn and Watts, "Interprocessor collective communication library (InterCom)", SHPCC 1994; run
  on every rail at once): each part is cut into one piece per host; after the deal the root
  host's carrier sends piece h to host h in one network step, then every host's carrier sends its
  piece to every other host in the next, and every piece is shared inside its host as soon as it
  arrives. Two network latencies in all, each carrier sending (H − 1)/H of its part twice: best at
  mid sizes on switched networks, where a tree needs log H network steps. In ``waves`` (W): the
  part is cut W times as fine and wave w runs the same pattern w steps after wave 0, so the deal,
  the scatter, the allgather and the sharing inside the hosts of consecutive waves overlap
  (van de Geijn's pipelined scatter-allgather, as `scatter-allgather` pipelines it over ranks).
  Without the root host's piece (``root_piece`` False) the pieces go to the H − 1 other hosts
  only and they allgather among themselves: the root host's network links carry each byte once
  instead of (H − 1)/H of it twice, which is what the pipeline's steady state needs where they
  are the bottleneck (one NIC per host: random-multihost-1 at 1 MiB 189.5 → 163.9 µs).
  On a fat-tree with oversubscribed racks (`host_racks`) the allgather may be rack-aware
  (`rack_plan`): each piece goes to the other hosts of its rack and crosses into every other rack
  once, to one host there that passes it on inside its rack in the next step, instead of crossing
  a rack's uplink once per destination host.

- Ramped slices (`synth.algorithms.engines.slice_ramp`, ``slices``): for the fastest ``kary`` and
  ``scatter-allgather`` series, slices of unequal whole chunks (waves), sized by an LP over the
  step model, slice s entering the pattern in step s: where the stages around the network (the
  deal, the sharing inside hosts) are faster than it, slices grow while the fast stage keeps up
  and shrink at the end, so the fill is paid at the fast stages' speed. A second slow stage would
  spoil that, so the root's part then returns split (``bounce_split``: each rank of the far host
  returns a share of its chunks, the rank it lands on shares them inside the root's host).

The candidates (shape, fan-out, parts, chunks per part) are built and timed at the size
(`synth.algorithms.engines.size_tuning`); the fastest is kept and its choice recorded in the
schedule's params with ``chosen_at_size``. Pairs of ranks without a switch route are relayed
through ranks (`synth.algorithms.engines.lowering.lower_copies`). Reduce is the dual (the same
trees, reversed, with reduces: `synth.transform.dual_reduction`); allreduce is that reduce to the
root followed by this broadcast from it (latency-optimal at small sizes: 2·⌈log_{k+1} H⌉ rounds).

Options: ``size`` (bytes, default 1 MiB): the size the shape and chunk count are chosen for.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from synth.algorithms.engines.lowering import logical_step, lower_copies
from synth.algorithms.engines.path_channels import components
from synth.algorithms.engines.rail_routes import PathFinder, RouteBalancer, RoutedStep, lower_routed
from synth.algorithms.engines.size_tuning import predicted_us, size_option
from synth.algorithms.engines.slice_ramp import ramp_lp, ramps, stage_loads
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, one_chunk
from synth.routing import Router, router_for
from synth.schedule import Schedule
from synth.topology import Topology
from synth.transform import concat, dual_reduction

NAME = "pipelined-tree"
OPTIONS = frozenset({"size"})
REFERENCE_SIZE = 1 << 20
COLLECTIVES = frozenset({Kind.BROADCAST, Kind.REDUCE, Kind.ALLREDUCE})
#: fan-outs tried for the pipelined k-ary shape (1 is the chain)
KARY_FANOUTS = (1, 2, 3, 4)
#: chunks per part tried for the pipelined shape: doubling up to this many
MAX_CHUNKS_PER_PART = 256
#: waves tried for the scatter-allgather shape (each one piece per group of every part)
SA_WAVES = (1, 2, 3, 4, 6, 8, 12, 16)
#: waves tried for the rack-aware scatter-allgather (`rack_plan`) with equal slices: its fill is
#: paid at the network's pace in every stage, so it wins with ramped slices of many waves
#: (`ramped_shapes`); a few equal ones rank the series for them at little cost
RACK_WAVES = (1, 2, 4)
#: logical transfers of the one finer rack-aware ramp built after the others (`broadcast_candidates`)
RACK_BUDGET = 4 * 400_000
#: slice counts of the LPs that pick the series and return variant of the rack-aware ramp
#: (`rack_ramp`: the least optimum of these)
ALONE_SLICES = (8, 32)
#: rack-aware series whose equal waves take more than this times the fastest one's get no ramp
RACK_SPREAD = 2.0
#: stop doubling the chunks after this many slower results in a row
PATIENCE = 2
#: machines without hosts are ordered by route latency up to this many ranks (rank order beyond)
NEAR_ORDER_RANKS = 256
#: a route inside a group narrower than this share of the sender's widest one is "slow"
SLOW = 0.75
#: parts per carrier offered where a group has a slow link inside (`Layout.split`)
SPLIT_PARTS = 4
#: no candidate beyond this many logical transfers
TRANSFER_BUDGET = 400_000
#: the fastest pipelined series (layout, fan-out, parts, deal) of each pipelined kind (kary,
#: scatter-allgather) that also get ramped slices
RAMP_SERIES = 3
#: chunks per part of a ramped candidate (fewer where `TRANSFER_BUDGET` asks): fine enough that
#: the first slices of a ramp can be a small share of the middle ones
RAMP_CHUNKS = 2048


@dataclass(frozen=True)
class Shape:
    """One candidate: ``kind`` "knomial" or "kary", its fan-out, the parts the data is cut into
    (each across hosts on its own rail) and the chunks of each part."""

    kind: str
    fanout: int
    parts: int
    chunks_per_part: int
    #: how the root hands parts to its host's carriers: over the host's nearest links ("links"),
    #: or straight along the router's route ("route": one step, maybe through a NIC)
    deal: str = "links"
    #: the parts the root carries itself come back to the root's host from the deepest host
    #: over its idle NICs instead of being shared by the root over its host links (`bounce_ok`)
    bounce: bool = False
    #: with ``bounce``: the deepest host's ranks hand back the root's parts split by chunk (chunk
    #: q by the rank at place q mod (ranks − 1) of the root's host), which the rank it lands on shares
    #: with the root's host in the next step: the returning NICs then carry 1/(ranks − 1) of the
    #: part each and the return is a fast stage, not a second network stage (ramped slices only)
    bounce_split: bool = False
    #: with ``bounce_split`` (scatter-allgather): every rank of the root's group takes every
    #: returning chunk over its own NIC, nothing shared inside the group (`split_return_events`):
    #: the group's links then carry only the other parts, where they, not the NICs, are tight
    bounce_whole: bool = False
    #: scatter-allgather only: the root group keeps a piece of every part and sends it in the
    #: allgather (`scatter_allgather_events`)
    root_piece: bool = True
    #: kary only: ramped slices (`synth.algorithms.engines.slice_ramp`), the chunks of each part
    #: that move together, slice s starting s steps after slice 0; () is one chunk per step
    slices: tuple[int, ...] = ()
    #: scatter-allgather only: the rack of every group; non-empty: the allgather is rack-aware
    #: (`rack_plan`: each piece crosses into every other rack once, then goes on inside it)
    racks: tuple[int, ...] = ()
    #: with ``racks``: a piece of the root's rack leaves it once (`rack_plan`)
    rack_once: bool = False

    @property
    def num_chunks(self) -> int:
        return self.parts * self.chunks_per_part


@dataclass(frozen=True)
class Layout:
    """The groups a tree is built over (hosts, or every rank alone), the root's group first and
    near groups contiguous, and each group's carriers: its ranks that reach other groups without a
    relay (the GPUs with a NIC), the root's rail first."""

    groups: tuple[tuple[int, ...], ...]
    carriers: tuple[tuple[int, ...], ...]
    name: str
    #: parallel network paths leaving a carrier over different links (scale-out ports)
    ports: int = 1
    #: parts per carrier offered where a group has a slow link inside (`slow_inside`): each of a
    #: carrier's parts is spread inside its group by another variant of the spread tree
    split: int = 1

    @property
    def max_parts(self) -> int:
        return min(len(c) for c in self.carriers)

    def part_counts(self) -> list[int]:
        """Parts the data may be cut into: 1, one per carrier, one per carrier port (or split)."""
        return sorted({1, self.max_parts, self.max_parts * self.ports, self.max_parts * self.split})

    def carrier_of(self, part: int, parts: int) -> int:
        """The carrier index that takes ``part`` of ``parts`` across the network."""
        return part * self.max_parts // parts if parts >= self.max_parts else part


def near_order(reps: list[int], first: int, router: Router) -> list[int]:
    """Indices of ``reps`` (one rank per group) ordered so that ``first`` comes first and groups
    near each other (by the latency of the route between them: a rack, a dragonfly group) are
    contiguous: at every latency threshold, largest first, the groups joined by routes at most that
    slow form clusters, the root's cluster sorts first, the others by their smallest member."""
    n = len(reps)
    dist = np.full((n, n), 1e9)
    for i, a in enumerate(reps):
        routes = router.routes_from(a)
        for j, b in enumerate(reps):
            route = routes.get(b)
            if i == j:
                dist[i, j] = 0.0
            elif route is not None:
                dist[i, j] = route.latency
    dist = np.maximum(dist, dist.T)
    keys: list[list[int]] = [[] for _ in range(n)]
    for threshold in sorted(set(dist.ravel().tolist()), reverse=True):
        near_i, near_j = np.nonzero(dist <= threshold)
        label = components(n, near_i, near_j).tolist()
        for h in range(n):
            keys[h].append(0 if label[h] == label[first] else label[h] + 1)
    return sorted(range(n), key=lambda h: (keys[h], h != first, h))


def layouts(topology: Topology, root: int, router: Router, finder: PathFinder | None = None) -> list[Layout]:
    """The layouts tried: the hosts when the machine has two or more; otherwise every rank alone
    (a tree over ranks, for switched machines) and the whole machine as one group (the data spread
    over the links from the root: `group_spread`, for machines of direct links such as a DGX-1 or a
    torus)."""
    groups = topology.host_groups
    if None in groups or len(groups) < 2:
        r = topology.num_ranks
        singles = [(v,) for v in range(r)]
        # (ordering by latency needs a route search from every rank: done up to NEAR_ORDER_RANKS)
        order = near_order(list(range(r)), root, router) if r <= NEAR_ORDER_RANKS else [root] + [v for v in range(r) if v != root]
        whole = (tuple([root] + [v for v in range(r) if v != root]),)
        return [
            Layout(tuple(singles[i] for i in order), tuple(singles[i] for i in order), "ranks"),
            Layout(whole, ((root,),), "machine"),
        ]
    hosts = [tuple(ranks) for ranks in groups.values()]
    owner = {v: h for h, ranks in enumerate(hosts) for v in ranks}
    # a carrier reaches, without a relay, its peer in the next host (the rank at the same local
    # index): one targeted route search per rank, not a search of the whole machine
    peer = {}
    for h, ranks in enumerate(hosts):
        following = hosts[(h + 1) % len(hosts)]
        peer.update({v: following[i % len(following)] for i, v in enumerate(ranks)})
    carriers = []
    for ranks in hosts:
        out = [v for v in ranks if router.route(v, peer[v]) is not None]
        carriers.append(out or list(ranks))
    first = owner[root]
    # the rail of the root: its position among its host's carriers (or the first carrier)
    start = carriers[first].index(root) if root in carriers[first] else 0
    rails = tuple(tuple(c[(start + j) % len(c)] for j in range(len(c))) for c in carriers)
    order = near_order([c[0] for c in rails], first, router)
    groups_in_order = tuple(hosts[h] for h in order)
    count = min(len(c) for c in rails)
    # scale-out ports: the parallel paths from the root's host's carriers to their peers
    balancer = RouteBalancer(topology, finder)
    ports = min(balancer.ports(rails[order[0]][j], rails[order[1]][j]) for j in range(count))
    ordered_rails = tuple(rails[h] for h in order)
    split = SPLIT_PARTS if any(slow_inside(ranks, router) for ranks in hosts) else 1
    out = [Layout(groups_in_order, ordered_rails, "hosts", max(1, ports), split)]
    if count >= 2 and root == ordered_rails[0][0]:
        # the root's own rail left out: the root then spends its host links on dealing only
        # (with its rail in, it sends its own part over them too, twice the load of the others)
        out.append(Layout(groups_in_order, tuple(c[1:] for c in ordered_rails), "hosts-off-root-rail", max(1, ports), split))
    # a rail as slow as its slowest carrier's network path (a degraded NIC): the rails at full
    # speed alone are a candidate too
    following = [rails[(h + 1) % len(hosts)] for h in range(len(hosts))]
    speed = [min(network_bandwidth(rails[h][j], following[h][j], router) for h in range(len(hosts))) for j in range(count)]
    fast = [j for j in range(count) if speed[j] >= 0.99 * max(speed)]
    if len(fast) < count:
        out.append(
            Layout(groups_in_order, tuple(tuple(rails[h][j] for j in fast) for h in order), "hosts-fast-rails", max(1, ports))
        )
    return out


def slow_inside(group: tuple[int, ...] | list[int], router: Router) -> bool:
    """Whether some rank a of ``group`` reaches a group mate b over a route narrower than `SLOW` of
    a's widest route to a mate while a third rank c has fast routes a → c and c → b (a degraded
    NVLink or xGMI link among full-speed ones, which a detour through c avoids; not a GPU whose
    own link is slow, which every route to it crosses)."""
    width: dict[tuple[int, int], float] = {}
    for a in group:
        routes = router.routes_from(a)
        width.update({(a, b): routes[b].bottleneck for b in group if b != a and b in routes})
    for a in group:
        mates = [b for b in group if (a, b) in width]
        if not mates:
            continue
        widest = max(width[a, b] for b in mates)
        for b in mates:
            if width[a, b] < SLOW * widest and any(
                width.get((a, c), 0.0) >= SLOW * widest and width.get((c, b), 0.0) >= SLOW * widest for c in mates if c != b
            ):
                return True
    return False


def network_bandwidth(rank: int, peer: int, router: Router) -> float:
    """The narrower of the routes (GB/s) from ``rank`` to its rail peer in another host and back:
    its NIC's rate (0 when there is no such route)."""
    there, back = router.route(rank, peer), router.route(peer, rank)
    return min(there.bottleneck, back.bottleneck) if there is not None and back is not None else 0.0


def split_tree(hosts: int, fanout: int, shape: str) -> tuple[list[int], list[int]]:
    """Parent and level of every host (host 0 the root, level 0) in a tree whose subtrees are
    ranges of hosts. ``knomial``: a range rooted at its first host is cut into fanout + 1 nearly
    equal ranges, the root sends to the first host of each other one in this round and every range
    goes on alone in the next (⌈log_{fanout+1} H⌉ rounds). ``kary``: the hosts after the root are
    cut into ``fanout`` ranges whose first hosts are its children, one level down."""
    parent = [-1] * hosts
    level = [0] * hosts
    stack = [(0, hosts, 0)]
    while stack:
        a, b, t = stack.pop()
        n = b - a
        if n <= 1:
            continue
        if shape == "knomial":
            parts = min(fanout + 1, n)
            cuts = [a + (n * i + parts - 1) // parts for i in range(parts)] + [b]
            for i in range(1, parts):
                parent[cuts[i]] = a
                level[cuts[i]] = t + 1
                stack.append((cuts[i], cuts[i + 1], t + 1))
            stack.append((a, cuts[1], t + 1))
        else:
            parts = min(fanout, n - 1)
            rest = n - 1
            cuts = [a + 1 + (rest * i + parts - 1) // parts for i in range(parts)] + [b]
            for i in range(parts):
                parent[cuts[i]] = a
                level[cuts[i]] = t + 1
                stack.append((cuts[i], cuts[i + 1], t + 1))
    return parent, level


def knomial_fanouts(hosts: int) -> list[int]:
    """For every round count T from 1 to ⌈log₂ H⌉, the smallest fan-out that reaches H hosts in T
    rounds (a larger one only loads the senders more)."""
    out: list[int] = []
    if hosts < 2:
        return [1]
    rounds = 1
    while True:
        k = max(1, int(np.ceil(hosts ** (1.0 / rounds) - 1e-9)) - 1)
        while (k + 1) ** rounds < hosts:
            k += 1
        if k not in out:
            out.append(k)
        if k == 1:
            return out
        rounds += 1


class Spreads:
    """`group_spread` trees, each computed once per (group, source) for all the candidate shapes
    of one synthesis (a 512-rank machine has thousands of them)."""

    def __init__(self, router: Router):
        self.router = router
        #: pair paths through switches, shared by the candidates' route balancers
        self.finder = PathFinder(router.topology)
        self._trees: dict[tuple[tuple[int, ...], int], list[tuple[int, int, int]]] = {}

    def tree(self, group: tuple[int, ...], source: int, variant: int = 0) -> list[tuple[int, int, int]]:
        """The spread tree from ``source``; ``variant`` v > 0: the ranks the source reaches only
        over a slow link (`SLOW`) get the part one step later through the v-th of its fast
        neighbours instead (`detour_slow`), so a carrier's parts reach such a rank over several
        links."""
        key = (group, source, variant)
        found = self._trees.get(key)
        if found is None:
            base = self.tree(group, source) if variant else group_spread(group, source, self.router)
            found = self._trees[key] = detour_slow(base, source, variant, self.router) if variant else base
        return found

    def deal_path(self, group: tuple[int, ...], source: int, target: int) -> list[int]:
        """The ranks from ``source`` to ``target`` in the spread tree from ``source``: how the
        root hands a part to a carrier of its own host over the host's links (a MI250 node's
        xGMI, not a detour through the network)."""
        parent = {dst: src for _, src, dst in self.tree(group, source)}
        path = [target]
        while path[-1] != source:
            path.append(parent[path[-1]])
        return path[::-1]


def detour_slow(tree: list[tuple[int, int, int]], source: int, variant: int, router: Router) -> list[tuple[int, int, int]]:
    """``tree`` with every rank that the source feeds directly over a slow route (narrower than
    `SLOW` of its widest one) fed instead, one step later, by the source's ``variant``-th fast
    child (cyclically) that reaches it over a fast route; unchanged where there is none."""
    routes = router.routes_from(source)
    children = [b for _, p, b in tree if p == source and b in routes]
    if not children:
        return tree
    widest = max(routes[b].bottleneck for b in children)
    fast = [b for b in children if routes[b].bottleneck >= SLOW * widest]
    out = []
    for depth, parent, rank in tree:
        if parent == source and rank in routes and routes[rank].bottleneck < SLOW * widest:
            relays = [x for x in fast if (r := router.route(x, rank)) is not None and r.bottleneck >= SLOW * widest]
            if relays:
                out.append((depth + 1, relays[(variant - 1) % len(relays)], rank))
                continue
        out.append((depth, parent, rank))
    return out


def group_spread(group: tuple[int, ...], source: int, router: Router) -> list[tuple[int, int, int]]:
    """(depth, parent, rank) for every other rank of a group: the breadth-first tree from
    ``source`` over the group's nearest pairs (from each rank, the other ranks of the group it
    reaches in the fewest hops without a relay: every GPU of an NVSwitch box, the xGMI or NVLink
    neighbours of a mesh, never a detour through a NIC), so no rank relays for another."""
    depth = {source: 0}
    frontier = [source]
    out: list[tuple[int, int, int]] = []
    while frontier:
        following = []
        for a in frontier:
            routes = router.routes_from(a)
            reach = {b: routes[b].hops for b in group if b != a and b in routes}
            if not reach:
                continue
            nearest = min(reach.values())
            for b in group:
                if b not in depth and reach.get(b) == nearest:
                    depth[b] = depth[a] + 1
                    out.append((depth[b], a, b))
                    following.append(b)
        frontier = following
    # ranks the group's nearest pairs cannot reach are served from the source (lowering relays them)
    out += [(1, source, b) for b in group if b not in depth]
    return out


def broadcast_steps(layout: Layout, root: int, shape: Shape, spreads: Spreads, balancer: RouteBalancer) -> list[RoutedStep]:
    """The logical steps of the broadcast (see the module docstring). Chunk j·c + q is chunk q of
    part j; part j's carrier in a group is its carrier `Layout.carrier_of` (the root's rail is
    part 0). Every hop between groups names its network path (``balancer``: parallel parts over
    parallel paths); the hops inside a group take the router's route (-1)."""
    groups = layout.groups
    hosts = len(groups)
    c = shape.chunks_per_part
    rails = [tuple(layout.carriers[h][layout.carrier_of(j, shape.parts)] for j in range(shape.parts)) for h in range(hosts)]
    parent, level = split_tree(hosts, shape.fanout, shape.kind)
    # several parts per carrier (ports, or a split for a slow link inside a group): each its
    # own variant of the spread tree
    per_carrier = max(1, shape.parts // layout.max_parts) if layout.split > 1 else 1
    trees = [[spreads.tree(groups[h], rails[h][j], j % per_carrier) for j in range(shape.parts)] for h in range(hosts)]
    if shape.deal == "links":
        dealing = [spreads.deal_path(groups[0], root, rails[0][j]) for j in range(shape.parts)]
    else:
        dealing = [[root] if rails[0][j] == root else [root, rails[0][j]] for j in range(shape.parts)]
    deal_steps = max(len(path) - 1 for path in dealing)
    events: dict[int, tuple[list[int], list[int], list[int], list[int]]] = {}

    def send(step: int, src: int, dst: int, chunk: int, via: int = -1) -> None:
        cols = events.setdefault(step, ([], [], [], []))
        cols[0].append(src)
        cols[1].append(dst)
        cols[2].append(chunk)
        cols[3].append(via)

    if shape.kind == "scatter-allgather":
        # one wave's events, chosen once; wave w repeats them w steps later on its own chunks
        wave_events: list[tuple[int, ...]] = []
        scatter_allgather_events(shape, rails, trees, dealing, deal_steps, balancer, lambda *e: wave_events.append(e), root)
        pieces = hosts if shape.root_piece else hosts - 1
        per_wave = shape.parts * pieces
        units = shape.chunks_per_part // pieces
        # ramped: slice s is shape.slices[s] waves' chunks moving together, s steps after slice 0
        start = np.repeat(np.arange(len(shape.slices)), shape.slices).tolist() if shape.slices else list(range(units))
        returns = split_return_events(shape, groups, root, rails, trees, deal_steps, balancer) if shape.bounce_split else []
        modulus = max(1, len(groups[0]) - 1)
        return wave_steps(wave_events, returns, np.asarray(start, dtype=np.int64), per_wave, pieces, modulus)
    # every part's network path on every tree edge, chosen once (a pipeline repeats the pattern)
    network = [
        [balancer.choose(rails[parent[h]][j], rails[h][j]) if h > 0 else -1 for j in range(shape.parts)] for h in range(hosts)
    ]
    deepest = max(range(hosts), key=lambda h: (level[h], h))
    held: list[dict[int, int]] = []
    back: list[list[int]] = []
    for j in range(shape.parts):
        held.append({rails[deepest][j]: 0, **{dst: depth for depth, _, dst in trees[deepest][j]}})
        bouncing = shape.bounce and rails[0][j] == root
        back.append([balancer.choose(groups[deepest][k], v) if bouncing and v != root else -1 for k, v in enumerate(groups[0])])

    # the events of chunk 0 of every part (its first step 0): chunk q of a pipelined part
    # follows the same pattern q steps later, every chunk of a k-nomial part at once
    # (``residue`` r ≥ 0: an event of the chunks q with q mod ``modulus`` = r only)
    template: tuple[list[int], ...] = ([], [], [], [], [], [])
    others = [v for v in groups[0] if v != root]
    modulus = len(others) if shape.bounce_split else 1

    def event(j: int, step: int, src: int, dst: int, via: int = -1, residue: int = -1) -> None:
        for col, value in zip(template, (j, step, src, dst, via, residue)):
            col.append(value)

    for j in range(shape.parts):
        # the root deals the part to its carrier along the root group's own links; ``base``
        # is the step at whose end the carrier holds the chunk
        # (every part starts across the network when the slowest dealing is done, so no
        # network step is spent on the root's own part alone)
        path = dealing[j]
        for hop in range(len(path) - 1):
            event(j, hop, path[hop], path[hop + 1])
        base = deal_steps - 1
        returned = shape.bounce and rails[0][j] == root
        for h in range(hosts):
            ready = base + level[h]
            if h > 0:
                event(j, ready, rails[parent[h]][j], rails[h][j], network[h][j])
            if h > 0 or not returned:
                for depth, src, dst in trees[h][j]:
                    event(j, ready + depth, src, dst)
        if returned:
            # the deepest host's NICs send nothing on: each of its ranks hands the chunk to the
            # rank at the same place in the root's host, one step after it has it
            ready = base + level[deepest]
            for k, v in enumerate(groups[0]):
                if v == root:
                    continue
                sender = groups[deepest][k]
                at = ready + held[j][sender] + 1
                if not shape.bounce_split:
                    event(j, at, sender, v, back[j][k])
                    continue
                residue = others.index(v)
                event(j, at, sender, v, back[j][k], residue)
                for w in others:
                    if w != v:
                        event(j, at + 1, v, w, -1, residue)
    part, step0, src0, dst0, via0, residue0 = (np.asarray(col, dtype=np.int64) for col in template)
    q = np.arange(c, dtype=np.int64)
    if shape.slices:
        # a ramped slice s: its chunks all follow the pattern s steps after slice 0
        shift = np.repeat(np.arange(len(shape.slices), dtype=np.int64), shape.slices)
    else:
        shift = q if shape.kind == "kary" else np.zeros(c, dtype=np.int64)
    step = (step0[None, :] + shift[:, None]).ravel()
    chunk = (part[None, :] * c + q[:, None]).ravel()
    src, dst, via = (np.tile(col, c) for col in (src0, dst0, via0))
    residue = np.tile(residue0, c)
    keep = (residue < 0) | (residue == np.repeat(q % modulus, step0.size))
    step, chunk, src, dst, via = step[keep], chunk[keep], src[keep], dst[keep], via[keep]
    pattern = np.tile(np.arange(step0.size), c)[keep]
    # in step order; inside a step by part, chunk, then the pattern's order
    order = np.lexsort((pattern, chunk, step))
    step, src, dst, chunk, via = step[order], src[order], dst[order], chunk[order], via[order]
    cuts = np.flatnonzero(np.diff(step)) + 1
    return [
        (a, b, g, v)
        for a, b, g, v in zip(np.split(src, cuts), np.split(dst, cuts), np.split(chunk, cuts), np.split(via, cuts))
        if a.size
    ]


def bounce_ok(layout: Layout, root: int, router: Router) -> bool:
    """Whether the ``bounce`` variant applies: the root carries a rail, and every rank of the
    root's host reaches the rank at the same place in every other host without a relay (a NIC per
    GPU), so the deepest host can hand the root's own part back over the network."""
    first = layout.groups[0]
    if len(layout.groups) < 2 or layout.carriers[0][0] != root or len(layout.carriers[0]) < 2:
        return False
    if any(len(g) != len(first) for g in layout.groups):
        return False
    other = layout.groups[-1]
    return all(router.route(other[k], v) is not None for k, v in enumerate(first) if v != root)


def wave_steps(wave_events, returns, start: np.ndarray, per_wave: int, pieces: int, modulus: int) -> list[RoutedStep]:
    """The steps of the ``scatter-allgather`` waves: wave w repeats ``wave_events`` (step, src,
    dst, chunk[, via]) ``start[w]`` steps later on its own chunks (w · ``per_wave`` on), and the
    ``returns`` (`split_return_events`) whose residue is −1 or (w · pieces + piece) mod
    ``modulus``; inside a step by wave, the wave's events before its returns, each in its order."""
    units = start.size
    cols = np.array([(*e[:4], e[4] if len(e) > 4 else -1) for e in wave_events], dtype=np.int64).reshape(-1, 5)
    w = np.repeat(np.arange(units, dtype=np.int64), len(cols))
    tiled = np.tile(cols, (units, 1))
    parts = [(tiled[:, 0] + start[w], tiled[:, 1], tiled[:, 2], tiled[:, 3] + w * per_wave, tiled[:, 4], w, np.zeros_like(w))]
    parts[0] += (np.tile(np.arange(len(cols), dtype=np.int64), units),)
    if returns:
        back = np.array(returns, dtype=np.int64).reshape(-1, 7)
        w = np.repeat(np.arange(units, dtype=np.int64), len(back))
        tiled = np.tile(back, (units, 1))
        keep = (tiled[:, 6] < 0) | ((w * pieces + tiled[:, 5]) % modulus == tiled[:, 6])
        tiled, w = tiled[keep], w[keep]
        index = np.tile(np.arange(len(back), dtype=np.int64), units)[keep]
        parts.append(
            (tiled[:, 0] + start[w], tiled[:, 1], tiled[:, 2], tiled[:, 3] + w * per_wave, tiled[:, 4], w, np.ones_like(w), index)
        )
    step, src, dst, chunk, via, wave, tag, index = (np.concatenate(col) for col in zip(*parts))
    order = np.lexsort((index, tag, wave, step))
    step, src, dst, chunk, via = step[order], src[order], dst[order], chunk[order], via[order]
    cuts = np.flatnonzero(np.diff(step)) + 1
    return [
        (*logical_step(a, b, g), v)
        for a, b, g, v in zip(np.split(src, cuts), np.split(dst, cuts), np.split(chunk, cuts), np.split(via, cuts))
        if a.size
    ]


def _routed_steps(events: dict[int, tuple[list[int], list[int], list[int], list[int]]]) -> list[RoutedStep]:
    steps = []
    for step in sorted(events):
        src, dst, chunk, via = events[step]
        steps.append((*logical_step(src, dst, chunk), np.asarray(via, dtype=np.int64)))
    return steps


def split_return_events(
    shape: Shape, groups, root: int, rails, trees, deal_steps: int, balancer: RouteBalancer
) -> list[tuple[int, int, int, int, int, int, int]]:
    """``scatter-allgather`` without the root group's piece, ``bounce_split``: the root group's
    ranks get the root's own part back from the other groups instead of from the root, whose
    links then only deal. Piece g of the root's part sits in group g + 1 after the scatter and is
    shared there; its rank at the place of the root group's rank v hands it to v over its NIC one
    step after it has it, and v shares it with the root group's other ranks in the next step.
    Which v takes a chunk goes round the root group's ranks (the wave loop keeps an event where
    (wave · pieces + g) mod (ranks − 1) is its residue), so every returning NIC carries a share.
    With ``shape.bounce_whole`` every v takes every piece over its own NIC (residue −1: every
    wave) and shares nothing. Events: (step, src, dst, chunk of the wave, via, piece g, residue)."""
    out: list[tuple[int, int, int, int, int, int, int]] = []
    pieces = len(groups) - 1
    others = [v for v in groups[0] if v != root]
    scatter = deal_steps
    for j in range(shape.parts):
        if rails[0][j] != root:
            continue
        for g in range(pieces):
            h, arrives = returner(shape, g)
            held = {rails[h][j]: 0, **{dst: depth for depth, _, dst in trees[h][j]}}
            for residue, v in enumerate(others):
                sender = groups[h][groups[0].index(v)]
                at = scatter + arrives + held[sender] + 1
                if shape.bounce_whole:
                    out.append((at, sender, v, j * pieces + g, balancer.choose(sender, v), g, -1))
                    continue
                out.append((at, sender, v, j * pieces + g, balancer.choose(sender, v), g, residue))
                out += [(at + 1, v, w, j * pieces + g, -1, g, residue) for w in others if w != v]
    return out


def returner(shape: Shape, piece: int) -> tuple[int, int]:
    """The group that returns ``piece`` of the root's part to the root's group (`split_return_events`)
    and the step, after the scatter's, at whose end its carrier holds it: the group it was
    scattered to, or with ``shape.racks`` a group of the root's rack other than the root's (in
    turn by piece, once `rack_plan` has brought it there), so the return stays under the rack's
    switch instead of crossing its uplink."""
    home = [h for h in range(1, len(shape.racks)) if shape.racks[h] == shape.racks[0]]
    if not home:
        return piece + 1, 0
    h = home[piece % len(home)]
    if h == piece + 1:
        return h, 0
    hops = rack_plan(shape.racks, 1, shape.rack_once)[piece]
    return h, next(o for o, _, b in hops if b == h)


def scatter_allgather_events(
    shape: Shape, rails, trees, dealing, deal_steps: int, balancer: RouteBalancer, send, root: int = -1
) -> None:
    """One wave of the ``scatter-allgather`` shape (van de Geijn's broadcast, run on every rail
    at once): part j is cut into one piece per group (chunk j·P + q, P pieces per part); after the
    deal, the root group's carrier j sends piece q to its group's carrier j in one network step
    (the scatter), then every carrier j sends its piece to every other group's carrier j in the
    next (the allgather): two network latencies in all. With ``shape.root_piece`` the root group
    keeps a piece too and sends it in the allgather (P = H: each carrier of the root group sends
    (H − 1)/H of its part twice, fewest bytes in one wave); without, the pieces go to the other
    groups only (P = H − 1) and the root group sits the allgather out: its carriers send each
    byte once, what a pipeline of waves needs where the root group's network links are the
    bottleneck (a NIC shared by the host). Each piece is shared inside its group along the spread
    tree as soon as it arrives, overlapping the network steps."""
    hosts = len(rails)
    first = 0 if shape.root_piece else 1
    pieces = hosts - first
    for j in range(shape.parts):
        for q in range(pieces):
            path = dealing[j]
            for hop in range(len(path) - 1):
                send(hop, path[hop], path[hop + 1], j * pieces + q)
    scatter = deal_steps
    base = deal_steps - 1
    for j in range(shape.parts):
        # (the root's own part comes back from the other groups with `split_return_events`)
        returned = shape.bounce_split and rails[0][j] == root
        for q in range(pieces) if not returned else []:
            for depth, src, dst in trees[0][j]:
                send(base + depth, src, dst, j * pieces + q)
        for h in range(1, hosts):
            send(scatter, rails[0][j], rails[h][j], j * pieces + h - first, balancer.choose(rails[0][j], rails[h][j]))
    if shape.racks:
        rack_gather_events(shape, rails, trees, scatter, balancer, send)
        return
    # the allgather step's paths balanced on their own (the scatter's transfers are over by then)
    balancer.load[:] = 0.0
    for j in range(shape.parts):
        for g in range(first, hosts):
            chunk = j * pieces + g - first
            if g > 0:
                for depth, src, dst in trees[g][j]:
                    send(scatter + depth, src, dst, chunk)
            for h in range(1, hosts):
                if h != g:
                    send(scatter + 1, rails[g][j], rails[h][j], chunk, balancer.choose(rails[g][j], rails[h][j]))
                    for depth, src, dst in trees[h][j]:
                        send(scatter + 1 + depth, src, dst, chunk)


def rack_plan(racks: tuple[int, ...], first: int, once: bool) -> list[list[tuple[int, int, int]]]:
    """The rack-aware allgather of the ``scatter-allgather`` shape: for the piece of every group
    g ≥ ``first`` (hosts, group 0 the root's, ``racks[h]`` the rack of host h), its hops
    (offset, sender, receiver) between hosts, offset 1 the step after the scatter. The piece goes
    to every other host of its own rack (the ToR does not block) and crosses into every other rack
    once, to one host there (the *ambassador*: among the rack's hosts other than the root's, the
    one forwarding least so far), which passes it on to its rack mates in the next step; a flat
    allgather would cross an oversubscribed rack uplink once per destination host. ``once``: a
    piece of the root's rack leaves it once, to one other rack (in turn), whose ambassador sends
    it on to the remaining racks, so the root rack's uplink carries every byte once in all (the
    scatter already sends the other racks' pieces over it)."""
    hosts = len(racks)
    members: dict[int, list[int]] = {}
    for h in range(hosts):
        members.setdefault(racks[h], []).append(h)
    forwards = [0] * hosts
    home = racks[0]
    plan: list[list[tuple[int, int, int]]] = []
    turn = 0

    def ambassador(rack: int) -> int:
        best = min((h for h in members[rack] if h != 0), key=lambda h: (forwards[h], h))
        return best

    def spread(offset: int, sender: int, rack: int, hops: list[tuple[int, int, int]]) -> None:
        mates = [h for h in members[rack] if h not in (0, sender)]
        forwards[sender] += len(mates)
        hops += [(offset, sender, h) for h in mates]

    for g in range(first, hosts):
        hops: list[tuple[int, int, int]] = []
        mates = [h for h in members[racks[g]] if h not in (0, g)]
        hops += [(1, g, h) for h in mates]
        targets = [r for r in members if r != racks[g] and any(h != 0 for h in members[r])]
        if once and racks[g] == home and len(targets) > 1:
            entry = targets[turn % len(targets)]
            turn += 1
            a = ambassador(entry)
            hops.append((1, g, a))
            spread(2, a, entry, hops)
            for r in targets:
                if r != entry:
                    b = ambassador(r)
                    forwards[a] += 1
                    hops.append((2, a, b))
                    spread(3, b, r, hops)
        else:
            for r in targets:
                a = ambassador(r)
                hops.append((1, g, a))
                spread(2, a, r, hops)
        plan.append(hops)
    return plan


def rack_gather_events(shape: Shape, rails, trees, scatter: int, balancer: RouteBalancer, send) -> None:
    """The allgather of one wave along `rack_plan` (``shape.racks``: the rack of every group, and
    ``shape.rack_once``), every piece shared inside a host as soon as it arrives; each step's
    network paths balanced together with the scatter's."""
    first = 0 if shape.root_piece else 1
    pieces = len(rails) - first
    plan = rack_plan(shape.racks, first, shape.rack_once)
    # (the paths balanced over the whole wave, the scatter's included: in a pipeline of waves
    # every stage runs at once, on consecutive waves)
    for offset in sorted({o for hops in plan for o, _, _ in hops}):
        for j in range(shape.parts):
            for g, hops in zip(range(first, len(rails)), plan):
                chunk = j * pieces + g - first
                if offset == 1 and g > 0:
                    for depth, src, dst in trees[g][j]:
                        send(scatter + depth, src, dst, chunk)
                for o, a, b in hops:
                    if o != offset:
                        continue
                    send(scatter + o, rails[a][j], rails[b][j], chunk, balancer.choose(rails[a][j], rails[b][j]))
                    for depth, src, dst in trees[b][j]:
                        send(scatter + o + depth, src, dst, chunk)


def host_racks(layout: Layout, router: Router) -> tuple[int, ...]:
    """The rack of every group of ``layout`` (() where there are no racks): groups whose carriers
    reach each other in the fewest switch hops found between groups share a rack (a fat-tree's
    ToR), provided that makes two or more racks, one with two or more groups."""
    reps = [c[0] for c in layout.carriers]
    n = len(reps)
    hops = np.full((n, n), 10**9)
    for i, a in enumerate(reps):
        routes = router.routes_from(a)
        for j, b in enumerate(reps):
            if i != j and b in routes:
                hops[i, j] = routes[b].hops
    hops = np.maximum(hops, hops.T)
    np.fill_diagonal(hops, 10**9)
    if n < 3:
        return ()
    near_i, near_j = np.nonzero(hops <= hops.min())
    label = components(n, near_i, near_j).tolist()
    count = len(set(label))
    if count < 2 or count == n:
        return ()
    # racks numbered in order of first appearance
    names: dict[int, int] = {}
    return tuple(names.setdefault(x, len(names)) for x in label)


def shapes(
    layout: Layout, requested: int | None, deals: tuple[str, ...] = ("links",), bounce: bool = False, racks: tuple[int, ...] = ()
) -> list[Shape]:
    """The candidate shapes for a layout (and the chunk count asked for, if any), in the order
    they are tried: k-nomial ones first (with every way of dealing in ``deals``), then the
    pipelined ones by fan-out and chunks; with ``racks`` (`host_racks`) the scatter-allgather
    waves without the root group's piece are offered with the rack-aware allgather too
    (`rack_plan`, the root rack's pieces crossing its uplink once or once per rack)."""
    hosts = len(layout.groups)
    ranks = sum(len(g) for g in layout.groups)
    out: list[Shape] = []
    for p in layout.part_counts():
        if requested is not None and requested % p:
            continue
        fixed = None if requested is None else requested // p
        if hosts > 1:
            out += [Shape("knomial", k, p, fixed or 1, deal) for deal in deals for k in knomial_fanouts(hosts)]
        if hosts > 2:
            # W waves of one piece per group each, wave w starting w steps after wave 0
            for pieces in (hosts, hosts - 1):
                if fixed is None:
                    # the root host's piece only in one wave (in waves its links carry it twice)
                    waves: tuple[int, ...] = SA_WAVES if pieces < hosts else (1,)
                else:
                    waves = (fixed // pieces,) if fixed % pieces == 0 else ()
                out += [
                    Shape("scatter-allgather", hosts - 1, p, pieces * w, root_piece=pieces == hosts)
                    for w in waves
                    if (ranks - 1) * p * pieces * w <= TRANSFER_BUDGET
                ]
                if racks and pieces < hosts:
                    out += [
                        Shape("scatter-allgather", hosts - 1, p, pieces * w, root_piece=False, racks=racks, rack_once=once)
                        for once in (False, True)
                        for w in waves
                        if (w in RACK_WAVES or fixed is not None) and (ranks - 1) * p * pieces * w <= TRANSFER_BUDGET
                    ]
        for k in KARY_FANOUTS:
            if k >= hosts and k > 1:
                break
            counts = [fixed] if fixed is not None else []
            m = 1
            while fixed is None and m <= MAX_CHUNKS_PER_PART and (ranks - 1) * p * m <= TRANSFER_BUDGET:
                counts.append(m)
                m *= 2
            out += [Shape("kary", k, p, m) for m in counts]
            if bounce and k == 1 and p > 1:
                out += [Shape("kary", k, p, m, bounce=True) for m in counts]
    return out


def build_broadcast(topology: Topology, layout: Layout, root: int, shape: Shape, size: int | None, spreads: Spreads) -> Schedule:
    collective = Collective(Kind.BROADCAST, topology.num_ranks, shape.num_chunks, root)
    params: dict[str, Any] = {
        "layout": layout.name,
        "groups": len(layout.groups),
        "shape": shape.kind,
        "fanout": shape.fanout,
        "parts": shape.parts,
        "chunks_per_part": shape.chunks_per_part,
        "deal": shape.deal,
    }
    if shape.bounce:
        params["bounce"] = True
    if shape.bounce_split:
        params["bounce_split"] = True  # (scatter-allgather: the root's part returns split, `split_return_events`)
    if shape.bounce_whole:
        params["bounce_whole"] = True
    if shape.slices:
        params["slices"] = list(shape.slices)
    if shape.kind == "scatter-allgather" and not shape.root_piece:
        params["root_piece"] = False
    if shape.racks:
        params["racks"] = list(shape.racks)
        params["rack_once"] = shape.rack_once
    if size is not None:
        params["chosen_at_size"] = size
    balancer = RouteBalancer(topology, spreads.finder)
    steps = broadcast_steps(layout, root, shape, spreads, balancer)
    routed = lower_routed(topology, collective, steps, balancer.vias, NAME, params, spreads.router)
    if routed is not None:
        return routed
    # some pair inside a group needs a relay: the router's routes, relayed where needed
    return lower_copies(topology, collective, [step[:3] for step in steps], NAME, params, spreads.router)


def best_broadcast(
    topology: Topology, root: int, requested: int | None, size: int, router: Router, ramp: bool = True
) -> Schedule:
    """The fastest candidate at ``size`` over every layout and shape (`broadcast_candidates`)."""
    return broadcast_candidates(topology, root, requested, size, router, ramp)[1]


def broadcast_candidates(
    topology: Topology, root: int, requested: int | None, size: int, router: Router, ramp: bool = True
) -> tuple[Schedule, Schedule]:
    """(the fastest with equal slices, the fastest of all) at ``size`` over every layout and shape
    (ties: fewer transfers, then the order tried). For the pipelined shape the chunk counts of one
    fan-out are tried in increasing order and the sweep stops after `PATIENCE` slower ones in a
    row (the time falls while the fill dominates and rises once the latencies of the extra steps
    do). The `RAMP_SERIES` fastest series of each pipelined kind then get ramped slices too
    (`ramped_shapes`): candidates beside the equal slices, so the fastest still wins. Both are
    returned so that allreduce can pair either with its reduce without sweeping twice."""
    best: tuple[float, int, Schedule] | None = None
    spreads = Spreads(router)
    #: the fastest time of every pipelined (kary) series: (time, order found, layout, shape)
    pipelined: dict[tuple, tuple[float, int, Layout, Shape]] = {}
    for layout in layouts(topology, root, router, spreads.finder):
        previous: tuple | None = None
        last, worse = None, 0
        # dealing along the route is a candidate too when some carrier is more than a link away
        relayed = any(len(spreads.deal_path(layout.groups[0], root, c)) > 2 for c in layout.carriers[0])
        deals = ("links", "route") if relayed else ("links",)
        for shape in shapes(layout, requested, deals, bounce_ok(layout, root, router), host_racks(layout, router)):
            series = (
                shape.kind,
                shape.fanout,
                shape.parts,
                shape.deal,
                shape.bounce,
                shape.root_piece,
                shape.racks,
                shape.rack_once,
            )
            if series != previous:
                previous, last, worse = series, None, 0
            elif worse >= PATIENCE:
                continue
            schedule = build_broadcast(topology, layout, root, shape, size, spreads)
            time = predicted_us(schedule, topology, [size])[0]
            worse = worse + 1 if last is not None and time > last else 0
            last = time
            if best is None or (time, schedule.num_transfers) < best[:2]:
                best = (time, schedule.num_transfers, schedule)
            key = (layout.name, *series)
            if shape.kind != "knomial" and (key not in pipelined or time < pipelined[key][0]):
                pipelined[key] = (time, pipelined[key][1] if key in pipelined else len(pipelined), layout, shape)
    if best is None:
        raise NotApplicable(f"{NAME}: no tree shape divides {requested} chunks")
    equal = best[2]
    ranked = sorted(pipelined.values(), key=lambda v: v[:2])
    chosen = [
        v
        for kind in ("kary", "scatter-allgather")
        for v in [v for v in ranked if v[3].kind == kind and not v[3].racks][:RAMP_SERIES]
    ]
    racked = [v for v in ranked if v[3].racks] if ramp and requested is None else []
    # (series whose equal waves are more than `RACK_SPREAD` times the fastest one's are left out)
    racked = [v for v in racked if v[0] <= RACK_SPREAD * racked[0][0]]
    for _, _, layout, shape in sorted(chosen, key=lambda v: v[:2]) if ramp else []:
        for ramped in ramped_shapes(topology, layout, root, shape, requested, size, spreads):
            schedule = build_broadcast(topology, layout, root, ramped, size, spreads)
            time = predicted_us(schedule, topology, [size])[0]
            if (time, schedule.num_transfers) < best[:2]:
                best = (time, schedule.num_transfers, schedule)
    found = rack_ramp(topology, root, [(v[2], v[3]) for v in racked], size, spreads) if racked else None
    if found is not None:
        schedule = build_broadcast(topology, found[0], root, found[1], size, spreads)
        time = predicted_us(schedule, topology, [size])[0]
        if (time, schedule.num_transfers) < best[:2]:
            best = (time, schedule.num_transfers, schedule)
    return equal, best[2]


@dataclass(frozen=True)
class RampSetup:
    """What the ramps of one pipelined shape are sized over (`ramp_setup`): the chunks per part,
    the units (waves) they make, the bytes of a chunk and every return variant's template loads."""

    chunks: int
    units: int
    chunk_bytes: float
    templates: tuple[tuple[Shape, Any], ...]


def ramp_setup(
    topology: Topology,
    layout: Layout,
    root: int,
    shape: Shape,
    requested: int | None,
    size: int,
    spreads: Spreads,
    budget: int = TRANSFER_BUDGET,
) -> RampSetup | None:
    """The chunks of the ramped variants of ``shape`` (``RAMP_CHUNKS`` per part, or the chunks
    asked for, at most ``budget`` logical transfers) and the per-step link loads of every return
    variant's one-unit pattern; None where fewer than two units fit."""
    # a unit: what one step of the equal pipeline moves of a part (one chunk; a wave of one
    # piece per group for scatter-allgather)
    unit = len(layout.groups) - (0 if shape.root_piece else 1) if shape.kind == "scatter-allgather" else 1
    chunks = requested // shape.parts if requested is not None else RAMP_CHUNKS
    ranks = sum(len(g) for g in layout.groups)
    if requested is None and shape.racks:
        # (rack-aware waves: every stage is a network stage, so the fill falls only with more
        # waves; as many as the budget allows)
        chunks = min(chunks, budget // max(1, (ranks - 1) * shape.parts))
    while requested is None and chunks > 1 and (ranks - 1) * shape.parts * chunks > budget:
        chunks //= 2
    if requested is None:
        chunks -= chunks % unit
    if chunks % unit or chunks // unit < 2:
        return None
    units = chunks // unit
    variants = [shape]
    if shape.bounce or (shape.kind == "scatter-allgather" and not shape.root_piece and bounce_ok(layout, root, spreads.router)):
        variants.append(replace(shape, bounce_split=True))
        if shape.kind == "scatter-allgather":
            variants.append(replace(shape, bounce_split=True, bounce_whole=True))
    templates = []
    for variant in variants:
        # the template: one slice of one unit per part, or, where the return is split among
        # the root host's ranks, one slice of one chunk per returning rank (loads averaged)
        group = len(layout.groups[0]) - 1 if variant.bounce_split and not variant.bounce_whole else 1
        if group > units:
            continue
        one = replace(variant, chunks_per_part=group * unit, slices=(group,) if group > 1 else ())
        templates.append((variant, stage_loads(build_broadcast(topology, layout, root, one, None, spreads), topology, group)))
    return RampSetup(chunks, units, size / (shape.parts * chunks), tuple(templates))


def ramped_shapes(
    topology: Topology, layout: Layout, root: int, shape: Shape, requested: int | None, size: int, spreads: Spreads
) -> list[Shape]:
    """Ramped-slice variants of a pipelined shape (`synth.algorithms.engines.slice_ramp`): the
    pattern of one chunk per part is the template (`ramp_setup`), an LP over its per-step link
    loads sizes the slices, in whole chunks. The fast stages of a rails pipeline (the deal and the
    sharing inside a host) then carry the fill in small steps instead of whole slices of the
    network's pace."""
    setup = ramp_setup(topology, layout, root, shape, requested, size, spreads)
    if setup is None:
        return []
    return [
        replace(variant, chunks_per_part=setup.chunks, slices=slices)
        for variant, loads in setup.templates
        for slices in ramps(loads, setup.units, setup.chunk_bytes)
    ]


def rack_ramp(
    topology: Topology, root: int, series: list[tuple[Layout, Shape]], size: int, spreads: Spreads
) -> tuple[Layout, Shape] | None:
    """The one ramped rack-aware candidate built (`rack_plan`): every stage of its waves is
    network-paced, so its fill falls with the wave count only and its equal waves say little of
    its ramps. Over the rack-aware series (`RACK_SPREAD`) and their return variants, the one whose
    ramp LP optimum at `ALONE_SLICES` slices is least (templates of one wave: cheap), ramped with as many waves as
    `RACK_BUDGET` allows (the best ramp alone)."""
    scored: list[tuple[float, int, Layout, Shape, Any, RampSetup]] = []
    for layout, shape in series:
        setup = ramp_setup(topology, layout, root, shape, None, size, spreads, RACK_BUDGET)
        for variant, loads in setup.templates if setup is not None else ():
            found = [ramp_lp(loads, min(k, setup.units), setup.units, setup.chunk_bytes) for k in ALONE_SLICES]
            optima = [f[0] for f in found if f is not None]
            if optima:
                scored.append((min(optima), len(scored), layout, variant, loads, setup))
    if not scored:
        return None
    _, _, layout, variant, loads, setup = min(scored, key=lambda v: v[:2])
    sized = ramps(loads, setup.units, setup.chunk_bytes, keep=1)
    return (layout, replace(variant, chunks_per_part=setup.chunks, slices=sized[0])) if sized else None


def reduce_schedule(topology: Topology, root: int, requested: int | None, size: int, ramp: bool = True) -> Schedule:
    """Reduce: the best broadcast of the reversed topology, run backwards with reduces."""
    reversed_topology = topology.reversed()
    forward = best_broadcast(reversed_topology, root, requested, size, router_for(reversed_topology), ramp)
    params = dict(forward.params)
    params["dual_of"] = Kind.BROADCAST.value
    reduction = Collective(Kind.REDUCE, topology.num_ranks, forward.collective.num_chunks, root)
    return dual_reduction(forward, reduction, NAME, params)


def mirrored_reduce(topology: Topology, root: int, params: dict, size: int) -> Schedule | None:
    """The reduce whose forward broadcast is the broadcast of ``params`` (its layout by name and
    its shape) built on the reversed topology, run backwards with reduces; None where that layout
    or shape does not exist there."""
    reversed_topology = topology.reversed()
    spreads = Spreads(router_for(reversed_topology))
    found = [lay for lay in layouts(reversed_topology, root, spreads.router, spreads.finder) if lay.name == params["layout"]]
    if not found:
        return None
    layout = found[0]
    shape = Shape(
        kind=params["shape"],
        fanout=params["fanout"],
        parts=params["parts"],
        chunks_per_part=params["chunks_per_part"],
        deal=params["deal"],
        bounce=bool(params.get("bounce")),
        bounce_split=bool(params.get("bounce_split")),
        bounce_whole=bool(params.get("bounce_whole")),
        root_piece=params.get("root_piece", True),
        slices=tuple(params.get("slices", ())),
        racks=tuple(params.get("racks", ())),
        rack_once=bool(params.get("rack_once")),
    )
    if shape.parts > layout.max_parts * max(layout.ports, layout.split) or (
        (shape.bounce or shape.bounce_split) and not bounce_ok(layout, root, spreads.router)
    ):
        return None
    forward = build_broadcast(reversed_topology, layout, root, shape, size, spreads)
    reduction = Collective(Kind.REDUCE, topology.num_ranks, forward.collective.num_chunks, root)
    return dual_reduction(forward, reduction, NAME, {**forward.params, "dual_of": Kind.BROADCAST.value})


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options: Any) -> Schedule:
    """Tree schedule for ``collective`` (see the module docstring; ``requested_chunks`` None lets
    it choose the chunk count for ``size``)."""
    size = size_option(NAME, options, OPTIONS)
    kind = collective.kind
    if kind not in COLLECTIVES:
        raise NotApplicable(f"{NAME} does not serve {kind.value} (it serves {', '.join(sorted(k.value for k in COLLECTIVES))})")
    at = size if size is not None else REFERENCE_SIZE
    requested = None if options.get("requested_chunks", collective.chunks_per_piece) is None else collective.num_chunks
    router = router or router_for(topology)
    if kind is Kind.BROADCAST:
        return best_broadcast(topology, collective.root, requested, at, router)
    if kind is Kind.REDUCE:
        return reduce_schedule(topology, collective.root, requested, at)
    # allreduce: reduce to rank 0, then broadcast from it, with the same chunks; with and without
    # ramped slices (the broadcast's best chunk count fixes the reduce's: a ramp that wins the
    # broadcast alone may leave the pair slower than the equal slices' count)
    best: tuple[float, Schedule] | None = None
    equal, fastest = broadcast_candidates(topology, 0, requested, at, router)
    for ramp, bcast in ((True, fastest), (False, equal)):
        if ramp and not bcast.params.get("slices"):
            continue  # no ramp won: the fastest is the equal slices' one
        chunks = bcast.collective.num_chunks
        # a ramped broadcast's reduce is its own shape on the reversed machine (a sweep of every
        # shape at the ramp's fine chunk count would cost seconds), else the best one there
        red = (mirrored_reduce(topology, 0, bcast.params, at) if ramp else None) or reduce_schedule(topology, 0, chunks, at, ramp)
        params = {"phases": ["reduce", "broadcast"], "root": 0, "reduce": dict(red.params), "broadcast": dict(bcast.params)}
        if size is not None:
            params["chosen_at_size"] = size
        schedule = concat([red, bcast], Collective(Kind.ALLREDUCE, topology.num_ranks, chunks), NAME, params)
        time = predicted_us(schedule, topology, [at])[0]
        if best is None or time < best[0] * (1 - 1e-9):
            best = (time, schedule)
    assert best is not None
    return best[1]


METHOD = Method(
    name=NAME,
    summary="host-aware k-nomial and pipelined k-ary trees for broadcast and reduce (allreduce = both), shaped for the size",
    family="scalable",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=one_chunk,
    options=OPTIONS,
    chooses_chunks=True,
)
