"""Routing every (source, destination) demand by the machine's capacities: the paths an alltoall
should split its data over.

An alltoall moves a = size/R bytes from every rank to every other. On a machine whose links are
not all alike (a GPU whose NIC runs at a tenth of its rate, a torus with one slow link, two GCDs
joined by one xGMI link where others have four), sending each piece along its one shortest path
leaves the slow links the busiest. The best split is the concurrent multicommodity flow: route one
unit from every rank to every other, splitting freely over paths that may pass through switches
and through other ranks (which then store and forward), so that the busiest link, relative to its
bandwidth, carries as little as possible. Its optimum τ is the ``multicommodity-flow`` lower bound
(`synth.bounds.alltoall`): a schedule that follows the flow and keeps every step's load in
proportion to it runs at that bound.

How: the LP itself (HiGHS), flows aggregated per source (R·links variables), solved twice: first
for τ, then, with τ held within `LP_SLACK` of its optimum, for the fewest link crossings (so the
flow takes no detour it does not need and has no cycles). Each source's flow is then split into
paths (flow decomposition: walk back from a destination along arcs that still carry flow, take the
narrowest amount, repeat). On a machine whose pairs are best served by their own paths the flow
is the direct routing; where a GPU's NIC is slow, the flow relays its traffic over NVSwitch to the
neighbours' NICs (what NCCL's PXN does by rule), and on a torus with a slow link it spreads the
traffic that would cross it over the detours. Machines whose LP has more than `LP_MAX_VARIABLES`
variables get no routing (`lp_routing` returns None).

A path is a chain of *segments*: rank to rank over links and switches (a switch holds nothing), so
a path through a rank is two transfers, the second at least one step after the first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.solver_output import native_stdout_to_stderr, seeded_highs_with_columns
from synth.topology import Topology

#: the LP is solved on machines with at most this many variables (R × links)
LP_MAX_VARIABLES = 60_000
#: larger LPs are solved by the interior point method rather than the simplex
SIMPLEX_MAX_VARIABLES = 15_000
#: the second solve keeps τ within this relative slack of the first one's optimum
LP_SLACK = 1e-4
#: flows below this (in units of one pair's demand) are solver noise
FLOW_EPS = 1e-6


@dataclass(frozen=True, eq=False)
class Segment:
    """One transfer's path: rank ``src`` to rank ``dst`` through the switches ``via`` (node ids),
    crossing the link ids ``links``; ``alpha`` its total latency (µs)."""

    src: int
    dst: int
    via: tuple[int, ...]
    links: tuple[int, ...]
    alpha: float


@dataclass(frozen=True, eq=False)
class Routing:
    """Paths for every ordered pair of distinct ranks: ``paths[(s, d)]`` is a tuple of
    (weight, segment ids), weights summing to 1. ``tau`` is the flow's congestion (pairs' demand
    per GB/s on the busiest link: an alltoall of pieces of a bytes then needs a·tau/1e3 µs);
    ``how`` says which routine made it."""

    topology: Topology
    segments: tuple[Segment, ...]
    paths: dict[tuple[int, int], tuple[tuple[float, tuple[int, ...]], ...]]
    tau: float
    how: str

    @property
    def longest(self) -> int:
        """The most segments on any path (the pipeline's depth)."""
        return max((len(p) for options in self.paths.values() for _, p in options), default=1)


class _SegmentTable:
    """Segments by their links, so a path found twice shares its segment ids."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.segments: list[Segment] = []
        self.index: dict[tuple[int, ...], int] = {}

    def add(self, links: tuple[int, ...]) -> int:
        found = self.index.get(links)
        if found is None:
            topo = self.topology
            first, last = topo.links[links[0]], topo.links[links[-1]]
            via = tuple(topo.links[i].dst for i in links[:-1])
            alpha = float(sum(topo.links[i].latency for i in links))
            found = self.index[links] = len(self.segments)
            self.segments.append(Segment(first.src, last.dst, via, links, alpha))
        return found

    def split(self, links: list[int]) -> tuple[int, ...]:
        """A path (link ids, source to destination) as segments cut at the ranks it passes."""
        r = self.topology.num_ranks
        out, start = [], 0
        for i, link in enumerate(links):
            if self.topology.links[link].dst < r:
                out.append(self.add(tuple(links[start : i + 1])))
                start = i + 1
        return tuple(out)


# ============================================================================ exact: the LP
def lp_variables(topology: Topology) -> int:
    """Variables of the routing LP: one per (source rank, link not entering it), and τ."""
    r = topology.num_ranks
    entering = np.bincount([link.dst for link in topology.links], minlength=topology.num_nodes)[:r]
    return r * len(topology.links) - int(entering.sum()) + 1


def _solve_flows(topology: Topology) -> tuple[float, np.ndarray] | None:
    """(τ, flows [R, links]) of the concurrent flow LP with the fewest link crossings among the
    routings within `LP_SLACK` of the optimal τ; None if HiGHS does not reach an optimum."""
    import highspy

    r, n = topology.num_ranks, topology.num_nodes
    links = topology.links
    num_links = len(links)
    src, dst = topology.link_src_array, topology.link_dst_array
    bw = topology.bandwidth_array
    scale = float(bw.max())
    # columns: (s, l) for every source s and link l not entering s, then tau
    s_of, l_of = np.nonzero(dst[None, :] != np.arange(r)[:, None])
    cols = s_of.size

    # conservation row of (s, v), v != s: index s*(n-1) + (v if v < s else v-1)
    def row(s: np.ndarray, v: np.ndarray) -> np.ndarray:
        return s * (n - 1) + np.where(v < s, v, v - 1)

    cap0 = r * (n - 1)
    entries_idx, entries_val, entries_col = [], [], []
    into = row(s_of, dst[l_of])  # +1 where the link enters v (v != s by construction)
    entries_idx.append(into)
    entries_val.append(np.ones(cols))
    entries_col.append(np.arange(cols))
    out_mask = src[l_of] != s_of
    entries_idx.append(row(s_of[out_mask], src[l_of[out_mask]]))
    entries_val.append(-np.ones(int(out_mask.sum())))
    entries_col.append(np.flatnonzero(out_mask))
    entries_idx.append(cap0 + l_of)
    entries_val.append(np.ones(cols))
    entries_col.append(np.arange(cols))
    entries_idx.append(cap0 + np.arange(num_links))
    entries_val.append(-bw / scale)
    entries_col.append(np.full(num_links, cols))
    idx = np.concatenate(entries_idx)
    val = np.concatenate(entries_val)
    col = np.concatenate(entries_col)
    order = np.lexsort((idx, col))
    idx, val, col = idx[order], val[order], col[order]
    starts = np.searchsorted(col, np.arange(cols + 2))
    num_rows = cap0 + num_links
    lower = np.zeros(num_rows)
    upper = np.zeros(num_rows)
    sv = np.arange(r * (n - 1))
    s_row, v_rel = np.divmod(sv, n - 1)
    v_row = np.where(v_rel < s_row, v_rel, v_rel + 1)
    demand = (v_row < r).astype(np.float64)
    lower[:cap0] = upper[:cap0] = demand
    lower[cap0:] = -highspy.kHighsInf

    lp = highspy.HighsLp()
    lp.num_col_ = cols + 1
    lp.num_row_ = num_rows
    cost = np.zeros(cols + 1)
    cost[-1] = 1.0
    lp.col_cost_ = cost
    lp.col_lower_ = np.zeros(cols + 1)
    lp.col_upper_ = np.full(cols + 1, highspy.kHighsInf)
    lp.row_lower_ = lower
    lp.row_upper_ = upper
    h = seeded_highs_with_columns(lp, starts, idx, val)
    # these LPs are degenerate: the dual simplex crawls on the large ones, the interior point
    # method (with its crossover to a vertex) does not (90-rank torus: 25 s against 220 s)
    h.setOptionValue("solver", "ipm" if cols > SIMPLEX_MAX_VARIABLES else "simplex")
    with native_stdout_to_stderr():
        h.passModel(lp)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        tau = float(h.getSolution().col_value[cols])
        # second solve: the fewest link crossings (each crossing also costs its latency share)
        h.changeColBounds(cols, 0.0, tau * (1 + LP_SLACK))
        lat = topology.latency_array
        crossing = 1.0 + lat / max(float(lat.max()), 1e-9) * 1e-3
        second = np.append(crossing[l_of], 0.0)
        h.changeColsCost(cols + 1, np.arange(cols + 1, dtype=np.int32), second)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        values = np.array(h.getSolution().col_value, dtype=np.float64)
    flows = np.zeros((r, num_links))
    flows[s_of, l_of] = np.maximum(values[:cols], 0.0)
    return float(values[cols]) / scale, flows


def decompose(topology: Topology, source: int, flow: np.ndarray) -> dict[int, list[tuple[float, list[int]]]]:
    """Paths (weight, link ids) from ``source`` to every other rank carrying its single-source flow
    (one unit to every rank): repeatedly walk back from a destination that still lacks some of its
    unit along the in-arc with the most flow left, and take the narrowest amount on the walk."""
    topo = topology
    r = topo.num_ranks
    left = np.where(flow > FLOW_EPS, flow, 0.0)
    need = np.ones(r)
    need[source] = 0.0
    out: dict[int, list[tuple[float, list[int]]]] = {d: [] for d in range(r) if d != source}
    in_links = topo.in_links
    for d in range(r):
        if d == source:
            continue
        guard = 0
        while need[d] > FLOW_EPS and guard < 10_000:
            guard += 1
            walk: list[int] = []
            v, seen = d, {d}
            while v != source:
                cands = in_links[v]
                best = max(cands, key=lambda i: left[i]) if cands else None
                if best is None or left[best] <= FLOW_EPS:
                    walk = []
                    break
                walk.append(best)
                v = topo.links[best].src
                if v in seen:  # a cycle left by the solver's tolerance: give up on this walk
                    walk = []
                    break
                seen.add(v)
            if not walk:
                break
            amount = min(float(need[d]), float(left[walk].min()))
            left[walk] -= amount
            need[d] -= amount
            out[d].append((amount, walk[::-1]))
    return out


def lp_routing(topology: Topology) -> Routing | None:
    """The exact routing (module docstring), or None when the LP is too large or does not solve,
    or a pair got no path. Cached on the topology (a method tuned for several sizes asks again)."""
    cache = topology.__dict__.setdefault("_flow_routing", {})
    if "lp" not in cache:
        cache["lp"] = _lp_routing(topology)
    return cache["lp"]


def _lp_routing(topology: Topology) -> Routing | None:
    if topology.num_ranks < 2 or lp_variables(topology) > LP_MAX_VARIABLES:
        return None
    solved = _solve_flows(topology)
    if solved is None:
        return None
    tau, flows = solved
    table = _SegmentTable(topology)
    paths: dict[tuple[int, int], tuple[tuple[float, tuple[int, ...]], ...]] = {}
    for s in range(topology.num_ranks):
        for d, found in decompose(topology, s, flows[s]).items():
            total = sum(w for w, _ in found)
            if total < 0.99:
                return None
            merged: dict[tuple[int, ...], float] = {}
            for w, links in found:
                key = table.split(links)
                merged[key] = merged.get(key, 0.0) + w / total
            paths[(s, d)] = tuple(sorted(((w, p) for p, w in merged.items()), key=lambda x: (-x[0], x[1])))
    return Routing(topology, tuple(table.segments), paths, tau, "lp")
