"""Broadcast across one slow cut of a single host (two CPU sockets, a PCIe root link), pipelined in
shrinking groups, each side spreading what it has by scatter-allgather.

On a PCIe server the ranks on the root's side of the inter-socket link reach each other at PCIe
speed, the ranks beyond it only through that one slower link (10 GB/s UPI against 24 GB/s PCIe,
and its latency: 3 µs for the crossing against 1 µs inside a switch). Every byte has to cross it
once, so the data should stream over it without pause, while both sides pass on what they already
have. A pipelined chain (NCCL's ring) does stream it, but in the step-synchronous model
(docs/formats.md, 'Step-synchronous cost') every one of its k + R − 2 steps pays the crossing's
latency, and all its hops move a whole chunk per step.

Here the root sends the data across in m groups of chunks, group j in step j, and the groups
shrink geometrically (ratio ρ): only the crossing steps pay the slow latency, and the last group,
which the far side still has to spread after the crossing is done, is small. Two shapes:

- *dealt*: the root deals each group over the ranks of the far side itself (rank i of them gets
  every i-th chunk; the slow link still carries each byte once), and they swap their parts in the
  next step, while the next group crosses: m + 1 steps;
- *through an entry*: the root sends each group whole to one far rank (the entry: fewest hops,
  then least latency), which deals it over the others one step later; they swap one step after
  that: m + 2 steps.

On the root's side the root deals each group over its own side in the step it sends it across,
and those ranks swap the parts in the next. Scatter-allgather loads every rank's link with a group
once on the way in and (n − 1)/n of it on the way out, so a side spreads a group faster than the
slow link delivers it; the ratio ρ is how much each group may shrink while the swap of the one
before still hides under its crossing (on pcie-2socket: 24 GB/s against 10, so about 2.4). The
tuning (`synth.algorithms.engines.size_tuning`) tries the shape, m, ρ and the chunk count at the
size and keeps the fastest; ``chosen_at_size``, the groups and the entry (None: dealt) go into the
schedule's params.

On pcie-2socket at 1 MiB this takes 118.4 µs (dealt, three groups of 483, 201 and 84 of 768
chunks) where the pipelined chain at its best chunk count takes 168 µs, auto took 138 µs before
this method and NCCL's analytic model says 119.0 µs; the lower bound is 110.9 µs (docs/bounds.md,
'Streaming versus steps', works the case through). Crossing the slow level once and spreading
inside is the hierarchical broadcast of Karonis et al. ("Exploiting hierarchy in parallel computer
networks to optimize collective operation performance", IPDPS 2000), each side's spreading van de
Geijn's scatter-allgather broadcast (`scatter-allgather`); pipelining the crossing in shrinking
groups so that only the crossing steps pay its latency, and the last group is small, is ours.

Where a side's ranks sit behind several PCIe switches (the asymmetric servers of the random family,
with 12 GB/s uplinks) the flat swap would send each byte over an uplink once per rank behind it.
More shapes are then tried (`grouped_steps`): that side spreads switch by switch (a share to every
rank of every other switch, then a swap inside each switch: each uplink carries each byte once);
the root deals the far side in proportion to the switches' uplinks (`uplink_weights`); and the near
side may be fed back from the far one over the slow link's other direction, for a root whose own
link cannot carry a group across and over its own socket in one step.

Applies to one host of at most `MAX_RANKS` ranks where some routes from the root are narrower than
others (the far side: the ranks behind the narrowest); broadcast, and reduce as the broadcast of
the reversed machine run backwards with reduces (`synth.transform.dual_reduction`; multi-host
machines: ``pipelined-tree``, ``hierarchical``; an NVSwitch box has no slower cut:
``scatter-allgather``).
Options: ``size`` (bytes, default 1 MiB).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from synth.algorithms.engines.builders import broadcast_or_dual
from synth.algorithms.engines.lowering import LogicalStep, logical_step, lower_copies
from synth.algorithms.engines.size_tuning import fastest_at, size_option, timed_sweep
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method, one_chunk
from synth.routing import Router
from synth.schedule import Schedule
from synth.topology import Topology

NAME = "socket-pipeline"
OPTIONS = frozenset({"size"})
REFERENCE_SIZE = 1 << 20
#: chunks per piece tried (the groups are whole chunks), group counts m and shrink ratios ρ
CHUNK_COUNTS = (48, 192, 768)
GROUP_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16)
RATIOS = (1.0, 1.4, 1.8, 2.4, 3.0)
#: hosts of more ranks are left to the other methods (the candidates' size grows with R × chunks)
MAX_RANKS = 32
_EPS = 1e-9


def sides(topology: Topology, root: int, router: Router) -> tuple[list[int], list[int]]:
    """(near, far): the ranks other than the root whose route from it is wider than the narrowest
    such route, and those behind the narrowest. NotApplicable where the machine has several hosts,
    or a rank without a switch route from the root."""
    if len(topology.host_groups) > 1:
        raise NotApplicable(f"{NAME} is for one host; {topology.name} has {len(topology.host_groups)}")
    if topology.num_ranks > MAX_RANKS:
        raise NotApplicable(f"{NAME} is for hosts of up to {MAX_RANKS} ranks; {topology.name} has {topology.num_ranks}")
    width: dict[int, float] = {}
    for v in range(topology.num_ranks):
        if v == root:
            continue
        route = router.route(root, v)
        if route is None:
            raise NotApplicable(f"{NAME} needs a switch route from the root to every rank (none to rank {v})")
        width[v] = route.bottleneck
    slow = min(width.values())
    if max(width.values()) <= slow * (1 + _EPS):
        raise NotApplicable(f"{NAME} needs a slower cut from the root; every route from rank {root} is {slow:g} GB/s wide")
    far = sorted(v for v, w in width.items() if w <= slow * (1 + _EPS))
    return sorted(v for v in width if v not in far), far


def entry_rank(far: list[int], root: int, router: Router) -> int:
    """The far rank the root sends to: the fewest hops, then the least latency, then the lowest id."""
    return min(far, key=lambda v: (router.route(root, v).hops, router.route(root, v).latency, v))


def shrinking_groups(chunks: int, groups: int, ratio: float) -> list[np.ndarray] | None:
    """``groups`` runs of consecutive chunk ids covering 0 … chunks − 1, sized in proportion to
    ratio^(m − 1), …, ratio, 1 (each at least one chunk); None if they do not fit."""
    weights = np.array([ratio ** (groups - 1 - j) for j in range(groups)])
    sizes = np.maximum(1, np.round(weights / weights.sum() * chunks)).astype(np.int64)
    sizes[0] += chunks - int(sizes.sum())
    if sizes[0] < 1:
        return None
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [np.arange(bounds[j], bounds[j + 1], dtype=np.int64) for j in range(groups)]


def _deal(src: int, ranks: list[int], group: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Scatter: part i of ``group`` (every len(ranks)-th chunk) from ``src`` to ranks[i]."""
    out = []
    for i, r in enumerate(ranks):
        part = group[i :: len(ranks)]
        out.append((np.full(part.size, src), np.full(part.size, r), part))
    return out


def _swap(ranks: list[int], group: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Allgather of the parts `_deal` gave: ranks[i] sends its part to every other rank."""
    out = []
    for i, r in enumerate(ranks):
        part = group[i :: len(ranks)]
        for q in ranks:
            if q != r and part.size:
                out.append((np.full(part.size, r), np.full(part.size, q), part))
    return out


def broadcast_steps(root: int, entry: int | None, near: list[int], far: list[int], groups: list[np.ndarray]) -> list[LogicalStep]:
    """The logical steps (the module docstring says what each does): m + 2 through an entry rank,
    m + 1 when the root deals each group over the far side itself (``entry`` None)."""
    m = len(groups)
    steps: list[LogicalStep] = []
    for s in range(m + 2):
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        if s < m:
            g = groups[s]
            if entry is None:
                parts += _deal(root, far, g)
            else:
                parts.append((np.full(g.size, root), np.full(g.size, entry), g))
            if near:
                parts += _deal(root, near, g)
        if 1 <= s <= m:
            if near:
                parts += _swap(near, groups[s - 1])
            if entry is None:
                parts += _swap(far, groups[s - 1])
            elif len(far) > 1:
                parts += _deal(entry, [v for v in far if v != entry], groups[s - 1])
        if 2 <= s <= m + 1 and entry is not None and len(far) > 2:
            parts += _swap([v for v in far if v != entry], groups[s - 2])
        parts = [p for p in parts if p[0].size]
        if parts:
            steps.append(logical_step(*(np.concatenate([p[i] for p in parts]) for i in range(3))))
    return steps


def switch_groups(ranks: list[int], root: int, router: Router) -> list[list[int]]:
    """``ranks`` grouped by the switch their route from the root ends at (a PCIe switch; a rank
    with a direct link from the root is a group of its own), groups in order of their first rank."""
    groups: dict[object, list[int]] = {}
    for v in ranks:
        via = router.route(root, v).via
        groups.setdefault(via[-1] if via else ("rank", v), []).append(v)
    return list(groups.values())


def grouped(groups: list[list[int]]) -> bool:
    """Whether spreading switch by switch differs from the flat swap: two groups or more, one of
    them of two ranks or more."""
    return len(groups) > 1 and max(len(g) for g in groups) > 1


Parts = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


def _spread(holdings: dict[int, np.ndarray], groups: list[list[int]] | None) -> list[Parts]:
    """The stages that give every rank of ``holdings`` what the others hold: the flat swap (one
    stage: each rank sends its part to every other), or, with ``groups``, switch by switch (each
    rank sends a 1/|S'| share of its part to every rank of every other group S', so each switch's
    uplink carries each byte once; then each rank shares what it holds inside its own group)."""
    if groups is None:
        ranks = list(holdings)
        flat = [(r, q) for r in ranks for q in ranks if q != r]
        return [[(np.full(holdings[r].size, r), np.full(holdings[r].size, q), holdings[r]) for r, q in flat]]
    exchange: Parts = []
    held = {r: [c] for r, c in holdings.items()}
    for group in groups:
        for r in group:
            for other in groups:
                if other is group:
                    continue
                for j, q in enumerate(other):
                    part = holdings[r][j :: len(other)]
                    exchange.append((np.full(part.size, r), np.full(part.size, q), part))
                    held[q].append(part)
    share: Parts = []
    for group in groups:
        for r in group:
            mine = np.concatenate(held[r])
            share += [(np.full(mine.size, r), np.full(mine.size, q), mine) for q in group if q != r]
    return [exchange, share]


def uplink_weights(groups: list[list[int]], root: int, topology: Topology, router: Router) -> dict[int, float]:
    """A deal weight per rank: its switch's uplink bandwidth (the link into the last switch of the
    route from the root) shared among the switch's ranks, so each switch takes a share of a group
    in proportion to what its uplink carries back out."""
    weights = {}
    for group in groups:
        via = router.route(root, group[0]).via
        if len(via) >= 2:
            bw = topology.links[topology.link_index[(via[-2], via[-1])]].bandwidth
        else:
            bw = router.route(root, group[0]).bottleneck
        weights.update({v: bw / len(group) for v in group})
    return weights


def _weighted_parts(g: np.ndarray, ranks: list[int], weights: dict[int, float] | None) -> dict[int, np.ndarray]:
    """``g`` dealt over ``ranks``: every len(ranks)-th chunk each, or in proportion to ``weights``
    (a repeating pattern of whole chunks)."""
    if weights is None:
        return {r: g[i :: len(ranks)] for i, r in enumerate(ranks)}
    w = np.array([weights[r] for r in ranks], dtype=np.float64)
    share = np.maximum(1, np.round(w / w.min())).astype(np.int64)
    pattern = np.repeat(np.arange(len(ranks)), share)
    owner = pattern[np.arange(g.size) % pattern.size]
    return {r: g[owner == i] for i, r in enumerate(ranks)}


def grouped_steps(
    root: int,
    entry: int | None,
    near: list[int],
    far: list[int],
    groups: list[np.ndarray],
    near_groups: list[list[int]] | None,
    far_groups: list[list[int]] | None,
    near_from_far: bool = False,
    far_weights: dict[int, float] | None = None,
    last_from_root: bool = False,
) -> list[LogicalStep]:
    """`broadcast_steps` with each side spread switch by switch where its groups are given (None:
    the flat swap): group j's stages run in steps j, j + 1, …, so the crossing of group j + 1
    overlaps the spreading of the groups before it. With ``near_from_far`` (dealt shape only) the
    root sends each group across only, and the far ranks deal it back over the near side in the
    next step, over the slow link's other direction: for a root whose own link is barely wider
    than the slow one, which could not carry both copies. ``last_from_root`` (with it): the root
    itself deals the last group over the near side in that next step instead. Its own link is
    idle once the last group has crossed, and its route to the near side is a switch hop (1 µs on
    the random PCIe servers) where the way back pays the slow link's latency (3 µs), so the step
    after the last crossing, in which the far side still spreads inside its socket, no longer
    pays the crossing's latency. ``far_weights``: the root's deal over the far side in proportion
    to these (`uplink_weights`) instead of evenly."""
    per_group: list[list[Parts]] = []
    for j, g in enumerate(groups):
        stages: list[Parts] = [[]]
        if near:
            first = 1
            if near_from_far and entry is None and last_from_root and j == len(groups) - 1:
                stages.append(_deal(root, near, g))
                first = 2
            elif near_from_far and entry is None:
                dealt = _weighted_parts(g, far, far_weights)
                back = [(np.full(c.size, v), np.full(c.size, -1), c) for v, c in dealt.items()]
                src, chunk = np.concatenate([b[0] for b in back]), np.concatenate([b[2] for b in back])
                order = np.argsort(chunk, kind="stable")
                src, chunk = src[order], chunk[order]
                pos = np.searchsorted(g, chunk)
                stages.append([(src, np.asarray(near)[pos % len(near)], chunk)])
                first = 2
            else:
                stages[0] += _deal(root, near, g)
            spread = _spread({r: g[i :: len(near)] for i, r in enumerate(near)}, near_groups)
            for k, parts in enumerate(spread, start=first):
                stages += [[] for _ in range(k + 1 - len(stages))]
                stages[k] += parts
        if entry is None:
            dealt = _weighted_parts(g, far, far_weights)
            stages[0] += [(np.full(c.size, root), np.full(c.size, v), c) for v, c in dealt.items()]
            start, ranks, fgroups = 1, far, far_groups
        else:
            stages[0].append((np.full(g.size, root), np.full(g.size, entry), g))
            ranks = [v for v in far if v != entry]
            fgroups = None if far_groups is None else [[v for v in grp if v != entry] for grp in far_groups]
            fgroups = None if fgroups is None else [grp for grp in fgroups if grp]
            start = 2
            if ranks:
                stages += [[] for _ in range(2 - len(stages))]
                stages[1] += _deal(entry, ranks, g)
        if ranks:
            holdings = dealt if entry is None else {r: g[i :: len(ranks)] for i, r in enumerate(ranks)}
            spread = _spread(holdings, fgroups)
            for k, parts in enumerate(spread, start=start):
                stages += [[] for _ in range(k + 1 - len(stages))]
                stages[k] += parts
        per_group.append(stages)
    total = max(j + len(st) for j, st in enumerate(per_group))
    steps: list[LogicalStep] = []
    for s in range(total):
        parts = [p for j, st in enumerate(per_group) if 0 <= s - j < len(st) for p in st[s - j] if p[0].size]
        if parts:
            steps.append(logical_step(*(np.concatenate([p[i] for p in parts]) for i in range(3))))
    return steps


def build(
    topology: Topology,
    collective: Collective,
    router: Router,
    shape: tuple,
    near: list[int],
    far: list[int],
    entry: int,
) -> Schedule | None:
    """The schedule for ``collective`` (its chunks per piece) with m groups shrinking by ρ, through
    the ``entry`` rank or dealt by the root over the far side (``shape`` = (m, ρ, through the
    entry), optionally followed by the near and far sides' switch groups, None for the flat swap);
    ``near``, ``far`` and ``entry`` as `sides` and `entry_rank` give them for the root."""
    m, ratio, through_entry = shape[:3]
    near_groups, far_groups, near_from_far, weighted, last_from_root = (
        (*shape[3:8], False, False, False)[:5] if len(shape) > 3 else (None, None, False, False, False)
    )
    groups = shrinking_groups(collective.chunks_per_piece, m, ratio)
    if groups is None:
        return None
    root = collective.root
    entry = entry if through_entry else None
    params = {
        "near": near,
        "far": far,
        "entry": entry,
        "groups": [int(g.size) for g in groups],
        "ratio": ratio,
    }
    if near_groups is None and far_groups is None:
        steps = broadcast_steps(root, entry, near, far, groups)
    else:
        params["spread"] = {"near": "switches" if near_groups else "flat", "far": "switches" if far_groups else "flat"}
        if near_from_far:
            params["near_from"] = "far, the last group from the root" if last_from_root else "far"
        weights = None
        if weighted and far_groups:
            weights = uplink_weights(far_groups, root, topology, router)
            params["far_deal"] = "by uplink"
        steps = grouped_steps(root, entry, near, far, groups, near_groups, far_groups, near_from_far, weights, last_from_root)
    return lower_copies(topology, collective, steps, NAME, params, router)


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options: Any) -> Schedule:
    """The fastest shrinking-group pipeline at ``size`` (default 1 MiB) over the chunk counts,
    group counts and ratios of this module (with ``requested_chunks``, that chunk count only);
    a reduce is the fastest broadcast of the reversed machine run backwards with reduces."""
    size = size_option(NAME, options, OPTIONS)
    return broadcast_or_dual(NAME, best_broadcast, topology, collective, router, size, options.get("requested_chunks"))


def best_broadcast(topology: Topology, root: int | None, router: Router, size: int | None, requested: int | None) -> Schedule:
    """The fastest broadcast from ``root`` of this module's shapes at ``size`` (see `synthesize`)."""
    collective = Collective(Kind.BROADCAST, topology.num_ranks, 1, root)
    near, far = sides(topology, collective.root, router)  # NotApplicable early
    entry = entry_rank(far, collective.root, router)
    near_groups, far_groups = switch_groups(near, collective.root, router), switch_groups(far, collective.root, router)
    spreads: list[tuple] = [()]  # the flat swaps; switch by switch where a side has switches to go by
    spreads += [(None, far_groups)] if grouped(far_groups) else []
    spreads += [(near_groups, None)] if grouped(near_groups) else []
    spreads += [(near_groups, far_groups)] if grouped(near_groups) and grouped(far_groups) else []
    if near:  # the near side fed back from the far one (dealt shapes), the last group also from the root
        fed = far_groups if grouped(far_groups) else None
        spreads += [(None, fed, True), (None, fed, True, False, True)]
    if grouped(far_groups):  # the root's deal over the far side by the switches' uplinks
        spreads += [(None, far_groups, False, True)]
        spreads += [(None, far_groups, True, True), (None, far_groups, True, True, True)] if near else []
    at = size if size is not None else REFERENCE_SIZE
    timed = []
    for k in (requested,) if requested is not None else CHUNK_COUNTS:
        target = Collective(Kind.BROADCAST, collective.num_ranks, k, collective.root)
        shapes = [
            (m, rho, through, *spread)
            for through in (True, False)
            for m in GROUP_COUNTS
            if m <= k
            for rho in (RATIOS if m > 1 else (1.0,))
            for spread in spreads
            if through is False or len(spread) < 3 or not any(spread[2:])
        ]
        built = (build(topology, target, router, shape, near, far, entry) for shape in shapes)
        usable = [s for s in built if s is not None]
        timed += timed_sweep(usable, lambda s: s, topology, at)
    return fastest_at(timed, size)


METHOD = Method(
    name=NAME,
    summary=(
        "broadcast (and reduce, reversed) over a host's slow socket link in shrinking groups,"
        " each side spreading by scatter-allgather"
    ),
    family="scalable",
    collectives=frozenset({Kind.BROADCAST, Kind.REDUCE}),
    build=synthesize,
    default_chunks=one_chunk,
    options=OPTIONS,
    chooses_chunks=True,
)
