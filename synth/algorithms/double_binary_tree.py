"""NCCL's double binary tree allreduce (NCCL 2.4): two binary trees in which every interior node of
one is a leaf of the other, each carrying half of the data, pipelined over chunks.

Why two trees: in one binary tree the leaves (half the ranks) only send, and the interior ranks
carry twice the traffic. In the complementary tree the roles swap, so every rank sends and receives
about the same amount and the logarithmic depth keeps the latency low.

The trees are NCCL's in-order binary trees: over a sequence of n items, position q (1-based) with
lowest set bit b hangs below (q xor b) | 2b, or q xor b when that falls off the end; the root is the
largest power of two ≤ n. Interior positions are exactly the even ones. The second tree is the same
construction over the sequence rotated by one, whose interior positions are odd positions of the
first: no item is interior in both. (NCCL mirrors the tree for even n and shifts it for odd n; with
the shift its rank 0 is interior in both trees for odd n, which the rotation avoids.)

Layout, following NCCL where the machine allows:

- Several hosts: the trees are built over the hosts, and inside each host the ranks form a chain
  (a ring of the host's fastest links cut open), as NCCL does. The chain's first rank (its *head*)
  is where the host hangs in the inter-host tree. With one NIC per GPU, channels multiply the
  trees: channel c's two trees use heads at local positions 2c and 2c + 1 of the host's ring (the
  second tree walks the ring backwards), so the heads, and their NICs, differ. Channels: half the
  GPUs of a host, at most the number of ring channels (`engines.ring_channels.ring_channels`).
- One host: NCCL would run a chain there; this method builds the double binary tree over the ranks,
  in an order that puts as many tree edges as possible on direct links or switch routes (every order
  for up to 8 ranks, else the ring orders and their rotations). Edges without a route are relayed.

allreduce: each tree reduces its chunks to its root (the dual of a pipelined broadcast on the
reversed machine, `synth.transform.dual_reduction`) and broadcasts them back down, pipelined; the
broadcast of a chunk starts as soon as its reduction is complete (`engines.composition.overlap`). Chunk i goes
to tree i mod T; the default gives each tree `CHUNKS_PER_TREE` chunks.
"""

from __future__ import annotations

import itertools

import numpy as np

from synth.algorithms.engines.builders import dispatcher
from synth.algorithms.engines.composition import overlap, parallel
from synth.algorithms.engines.lowering import LogicalStep, logical_step, lower_copies
from synth.algorithms.engines.ring_channels import pack_rings, ring_channels, spread_routes
from synth.collective import Collective, Kind
from synth.method import Method, one_chunk
from synth.routing import Router, ring_order, router_for
from synth.schedule import Schedule
from synth.topology import Topology
from synth.transform import dual_reduction

NAME = "double-binary-tree"
CHUNKS_PER_TREE = 4
_EXHAUSTIVE = 8


# ================================================================================== tree shapes
def in_order_parents(n: int) -> list[int]:
    """Parent position (0-based, -1 for the root) of each of n positions in NCCL's in-order
    binary tree; interior positions are the odd 0-based ones (even 1-based)."""
    parents = [-1] * n
    for q in range(1, n + 1):
        bit = q & -q
        up = (q ^ bit) | (bit << 1)
        if up > n:
            up = q ^ bit
        if up:
            parents[q - 1] = up - 1
    return parents


def double_tree(sequence: list) -> tuple[dict, dict]:
    """The two trees over ``sequence`` as child → parent maps (root → None): the in-order tree,
    and the in-order tree over the sequence rotated by one."""
    n = len(sequence)
    parents = in_order_parents(n)
    rotated = sequence[1:] + sequence[:1]
    first = {sequence[i]: (sequence[p] if p >= 0 else None) for i, p in enumerate(parents)}
    second = {rotated[i]: (rotated[p] if p >= 0 else None) for i, p in enumerate(parents)}
    return first, second


def interior(tree: dict) -> set:
    """Items with at least one child."""
    return {p for p in tree.values() if p is not None}


# ================================================================================== rank trees
def _edge_positions(n: int) -> np.ndarray:
    """(parent, child) position pairs of both trees over a sequence of n items."""
    parents = in_order_parents(n)
    pairs = [(p, c) for c, p in enumerate(parents) if p >= 0]
    pairs += [((p + 1) % n, (c + 1) % n) for c, p in enumerate(parents) if p >= 0]  # rotated by one
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def _best_sequence(sequences: np.ndarray, width: np.ndarray) -> list[int]:
    """Among candidate sequences (one per row), the one whose double tree has the fewest edges
    without a route, then the widest narrowest edge, then the most bandwidth, then the smallest."""
    pos = _edge_positions(sequences.shape[1])
    parent, child = sequences[:, pos[:, 0]], sequences[:, pos[:, 1]]
    widths = np.minimum(width[parent, child], width[child, parent])  # both directions are used
    keys = [sequences[:, i] for i in range(sequences.shape[1] - 1, -1, -1)]
    keys += [-widths.sum(axis=1), -widths.min(axis=1), (widths == 0).sum(axis=1)]
    return sequences[np.lexsort(keys)[0]].tolist()


def _single_host_sequence(topology: Topology, router: Router) -> list[int]:
    """An order of all ranks for the two trees: the best rotation or reversal of a ring order, or,
    when some tree edge would still lack a route and there are at most 8 ranks, of every order."""
    n = topology.num_ranks
    width = np.zeros((n, n), dtype=np.float64)
    for (a, b), w in router.rank_bandwidth.items():
        width[a, b] = w
    rings = [list(r) for r in ring_channels(topology, router).rings] + [ring_order(topology, router)[0]]
    candidates = []
    for ring in rings:
        for shift in range(n):
            rotated = ring[shift:] + ring[:shift]
            candidates.extend([rotated, rotated[::-1]])
    best = _best_sequence(np.array(candidates, dtype=np.int64), width)
    pos = _edge_positions(n)
    parent, child = np.array(best)[pos[:, 0]], np.array(best)[pos[:, 1]]
    if 2 < n <= _EXHAUSTIVE and np.any(np.minimum(width[parent, child], width[child, parent]) == 0):
        # some tree edge lacks a route (a DGX-1): small machines try every order
        everything = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
        best = _best_sequence(everything, width)
    return best


def _host_chains(topology: Topology, router: Router, hosts: list[list[int]]) -> list[list[int]]:
    """A cyclic order of each host's ranks over its fastest links (a ring cut open later)."""
    orders = []
    for ranks in hosts:
        rings = pack_rings(topology, router, list(ranks), 1) if len(ranks) > 2 else [list(ranks)]
        orders.append(rings[0] if rings else list(ranks))
    return orders


def _chain(order: list[int], head: int, backwards: bool, router: Router) -> list[int]:
    start = order.index(head)
    forward = order[start:] + order[:start]
    if backwards:
        back = [forward[0], *forward[1:][::-1]]
        if all(router.route(a, b) is not None and router.route(b, a) is not None for a, b in itertools.pairwise(back)):
            return back
    return forward


def rank_trees(topology: Topology, router: Router | None = None) -> tuple[list[dict[int, int | None]], dict]:
    """The trees (child → parent over ranks) this method runs on ``topology``, and a description for
    the schedule's params."""
    router = router or router_for(topology)
    cache = router.__dict__.setdefault("_double_binary_trees", {})
    if "trees" in cache:
        return cache["trees"], cache["params"]
    groups = list(topology.host_groups.items())
    hosts = [list(r) for _, r in groups]
    multi = len(hosts) > 1 and None not in dict(groups) and topology.num_ranks > len(hosts)
    trees: list[dict[int, int | None]] = []
    params: dict = {}
    if multi:
        orders = _host_chains(topology, router, hosts)
        smallest = min(len(h) for h in hosts)
        channels = max(1, min(smallest // 2, ring_channels(topology, router).channels))
        host_trees = double_tree(list(range(len(hosts))))
        for c in range(channels):
            for which in (0, 1):
                j = 2 * c + which
                heads = [order[j % len(order)] for order in orders]
                tree: dict[int, int | None] = {}
                for h, order in enumerate(orders):
                    chain = _chain(order, heads[h], which == 1, router)
                    parent_host = host_trees[which][h]
                    tree[chain[0]] = heads[parent_host] if parent_host is not None else None
                    for a, b in itertools.pairwise(chain):
                        tree[b] = a
                trees.append(tree)
        params = {
            "layout": "trees across hosts, chains inside hosts",
            "channels": channels,
            "host_trees": [{str(h): p for h, p in t.items()} for t in host_trees],
            "chains": [list(o) for o in orders],
        }
    else:
        sequence = _single_host_sequence(topology, router) if topology.num_ranks > 1 else [0]
        trees = list(double_tree(sequence))
        params = {"layout": "trees over the ranks", "channels": 1, "sequence": sequence}
    params["trees"] = [
        {"root": next(c for c, p in t.items() if p is None), "parent": [t[r] for r in range(topology.num_ranks)]} for t in trees
    ]
    params["relayed"] = any(p is not None and router.route(p, c) is None for t in trees for c, p in t.items())
    cache["trees"], cache["params"] = trees, params
    return trees, params


# ================================================================================== schedules
def _broadcast_steps(tree: dict[int, int | None], chunks: np.ndarray) -> list[LogicalStep]:
    """Pipelined broadcast down ``tree``: a rank at depth d forwards the j-th chunk to its children
    in step j + d."""
    children: dict[int, list[int]] = {}
    root = None
    for c, p in sorted(tree.items()):
        if p is None:
            root = c
        else:
            children.setdefault(p, []).append(c)
    depth = {root: 0}
    frontier = [root]
    while frontier:
        nxt = []
        for u in frontier:
            for v in children.get(u, []):
                depth[v] = depth[u] + 1
                nxt.append(v)
        frontier = nxt
    src = np.array([p for c, p in sorted(tree.items()) if p is not None], dtype=np.int64)
    dst = np.array([c for c, p in sorted(tree.items()) if p is not None], dtype=np.int64)
    level = np.array([depth[p] for p in src.tolist()], dtype=np.int64)
    steps: list[LogicalStep] = []
    if src.size == 0:
        return steps
    for s in range(len(chunks) + int(level.max())):
        j = s - level
        live = (j >= 0) & (j < len(chunks))
        steps.append(logical_step(src[live], dst[live], chunks[j[live]]))
    return steps


def _root(tree: dict[int, int | None]) -> int:
    return next(c for c, p in tree.items() if p is None)


def allreduce(topology: Topology, collective: Collective, router: Router) -> Schedule:
    trees, params = rank_trees(topology, router)
    r, k = collective.num_ranks, collective.chunks_per_piece
    shares = [np.arange(t, k, len(trees), dtype=np.int64) for t in range(len(trees))]
    reversed_topology = topology.reversed()
    reversed_router = router_for(reversed_topology)
    reduces, broadcasts = [], []
    for tree, chunks in zip(trees, shares):
        if chunks.size == 0:
            continue
        root = _root(tree)
        # reduce: the dual of a pipelined broadcast on the reversed machine (chunks finish at the
        # root in reverse order), then broadcast them down in that order
        forward = lower_copies(
            reversed_topology, Collective(Kind.BROADCAST, r, k, root), _broadcast_steps(tree, chunks), NAME, {}, reversed_router
        )
        reduces.append(dual_reduction(forward, Collective(Kind.REDUCE, r, k, root), NAME, {}))
        broadcasts.append(
            lower_copies(topology, Collective(Kind.BROADCAST, r, k, root), _broadcast_steps(tree, chunks[::-1]), NAME, {}, router)
        )
    up = parallel(reduces, collective, NAME, align_end=True)
    down = parallel(broadcasts, collective, NAME)
    params = dict(params, chunks_per_tree=[int(s.size) for s in shares])
    return spread_routes(overlap(up, down, collective, NAME, params), topology, router)


def default_chunks(kind: Kind, topology: Topology) -> int:
    """`CHUNKS_PER_TREE` chunks for each tree."""
    trees, _ = rank_trees(topology)
    return CHUNKS_PER_TREE * len(trees)


BUILDERS = {Kind.ALLREDUCE: allreduce}
COLLECTIVES = frozenset(BUILDERS)
synthesize = dispatcher(NAME, BUILDERS)


METHOD = Method(
    name=NAME,
    summary="NCCL's double binary tree allreduce: two complementary trees, half the data each, pipelined",
    family="nccl",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=one_chunk,
    topology_chunks=default_chunks,
)
