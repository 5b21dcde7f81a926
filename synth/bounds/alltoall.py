"""Alltoall bounds: a family of cuts, and the exact multicommodity-flow LP.

Every rank sends a = size/R bytes to every other rank. For a node set S with ranks A inside and
Ā outside, the a·|A|·|Ā| bytes from Ā to A must enter S, so time ≥ a·|A|·|Ā| / in(S). The best such
cut is a *sparsest cut*, NP-hard in general, so for any R we evaluate a deterministic family of
candidate sets (below), each with its switches placed optimally by a max-flow.

The exact bandwidth bound is the concurrent multicommodity-flow LP: route a units from every rank
to every other rank, splitting freely, with total flow on each link at most its bandwidth × τ, and
minimise τ. Any schedule gives such a routing (for each chunk, the chain of transfers that brought
it from its source to its destination is a path; see docs/bounds.md), so τ is a lower bound, and it
is at least every cut bound. Flows from one source are one commodity (a single-source flow to all
destinations splits into paths), so the LP has R·|links| variables.

The LP's optimum is not trusted as a float: the capacity rows' dual values are link lengths z ≥ 0,
and for *any* such lengths, weak duality gives

    τ ≥ Σ_{s≠d} dist_z(s, d) / Σ_ℓ bw_ℓ·z_ℓ,

which we recompute exactly from z with Dijkstra. The reported bound is that certificate, so a
solver tolerance can make it slightly smaller than the true optimum, never larger.
"""

from __future__ import annotations

import heapq
import warnings
from collections import deque
from dataclasses import dataclass

import numpy as np

from synth.bounds.cuts import Cut, min_cut_between
from synth.solver_output import native_stdout_to_stderr, seeded_highs_with_columns
from synth.topology import Topology

INF = float("inf")


# ============================================================================ cut family
@dataclass(frozen=True)
class AlltoallCut:
    """The best candidate cut: ratio |A|·|Ā| / in(S) (pairs per GB/s) and the cut."""

    ratio: float
    cut: Cut
    inside_ranks: int
    candidates: int  # distinct rank sets evaluated


def _undirected_hops(topology: Topology, start: int) -> list[int]:
    n = topology.num_nodes
    neighbours: list[set[int]] = topology.__dict__.get("_undirected_adjacency")  # type: ignore[assignment]
    if neighbours is None:
        neighbours = [set() for _ in range(n)]
        for link in topology.links:
            neighbours[link.src].add(link.dst)
            neighbours[link.dst].add(link.src)
        topology.__dict__["_undirected_adjacency"] = neighbours
    dist = [-1] * n
    dist[start] = 0
    queue = deque([start])
    while queue:
        u = queue.popleft()
        for v in sorted(neighbours[u]):
            if dist[v] < 0:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def candidate_rank_sets(topology: Topology) -> list[frozenset[int]]:
    """Rank sets A (2 ≤ |A| ≤ R−2) to try as the inside of an alltoall cut, in a fixed order:
    each host's ranks; for every node x and radius d, the ranks within d hops of x (a server, a
    rack, a rail, a ball of a torus); and, on topologies without switches, for every pair of
    ranks (u, v), the half of the ranks nearest u rather than v (ranks sorted by
    hops(u, ·) − hops(v, ·), then id: a torus's bisections). Each comes with its complement.
    Singletons and their complements are the per-rank bounds and are left out."""
    r = topology.num_ranks
    everyone = frozenset(range(r))
    seen: set[frozenset[int]] = set()
    ordered: list[frozenset[int]] = []

    def add(ranks: frozenset[int]) -> None:
        for a in (ranks, everyone - ranks):
            if 2 <= len(a) <= r - 2 and a not in seen:
                seen.add(a)
                ordered.append(a)

    groups = topology.host_groups
    if len(groups) > 1:
        for members in groups.values():
            add(frozenset(members))
    hops = [_undirected_hops(topology, x) for x in range(topology.num_nodes)]
    for x in range(topology.num_nodes):
        rank_dist = hops[x][:r]
        for radius in sorted(set(rank_dist)):
            add(frozenset(v for v in range(r) if rank_dist[v] <= radius))
    if not topology.switches and r <= BISECTOR_MAX_RANKS:
        dist = np.array([h[:r] for h in hops[:r]], dtype=np.int64)
        ids = np.arange(r)
        for u in range(r):
            for v in range(u + 1, r):
                order = np.lexsort((ids, dist[u] - dist[v]))
                add(frozenset(order[: r // 2].tolist()))
    return ordered


#: Bisector candidates cost R² sets; beyond this many ranks only the other candidates are tried.
BISECTOR_MAX_RANKS = 128


def _in_bandwidths(topology: Topology, sets: list[frozenset[int]]) -> np.ndarray:
    """in(A) for many rank sets of a topology without switches, vectorized."""
    member = np.zeros((len(sets), topology.num_ranks), dtype=bool)
    for i, ranks in enumerate(sets):
        member[i, list(ranks)] = True
    src, dst = topology.link_src_array, topology.link_dst_array
    entering = member[:, dst] & ~member[:, src]
    return entering.astype(np.float64) @ topology.bandwidth_array


def best_alltoall_cut(topology: Topology) -> AlltoallCut | None:
    """The candidate cut with the largest |A|·|Ā| / in(S); switches placed by a min cut (one
    max-flow per rank set) when the topology has any. None when there is no candidate (R < 4, or
    every ball is a single rank or everything, as on one switch)."""
    r = topology.num_ranks
    sets = candidate_rank_sets(topology)
    if not sets:
        return None
    if topology.switches:
        cuts = [min_cut_between(topology, outside=sorted(set(range(r)) - a), inside=sorted(a)) for a in sets]
    else:
        bandwidths = _in_bandwidths(topology, sets)
        cuts = [Cut(a, float(b)) for a, b in zip(sets, bandwidths)]
    best: AlltoallCut | None = None
    for ranks, cut in zip(sets, cuts):
        ratio = len(ranks) * (r - len(ranks)) / cut.bandwidth
        if best is None or ratio > best.ratio:
            best = AlltoallCut(ratio, cut, len(ranks), len(sets))
    return best


# ============================================================================ LP
@dataclass(frozen=True)
class FlowLP:
    """The multicommodity-flow bound: ``ratio`` is τ in pairs-of-a per GB/s (time = a·ratio/1e3
    µs), certified from the dual link lengths; ``optimum`` is the solver's own objective, for
    reference; ``solver`` names what solved it."""

    ratio: float
    optimum: float
    solver: str
    variables: int


def lp_size(topology: Topology) -> int:
    """Number of LP variables: one per (source rank, link not entering that rank)."""
    r = topology.num_ranks
    entering = np.bincount([link.dst for link in topology.links], minlength=topology.num_nodes)[:r]
    return r * len(topology.links) - int(entering.sum())


def _columns(topology: Topology):
    """Sparse column data of the LP: for source s and link ℓ = u→v (v ≠ s): +1 in row (s, v) if v
    is not s, −1 in row (s, u) if u is not s, +1 in capacity row ℓ."""
    r, n = topology.num_ranks, topology.num_nodes
    links = topology.links
    num_links = len(links)
    bw = np.array([link.bandwidth for link in links], dtype=np.float64)
    scale = float(bw.max())

    def cons_row(s: int, v: int) -> int:  # conservation rows for nodes v != s, (n-1) per source
        return s * (n - 1) + (v if v < s else v - 1)

    cap_row0 = r * (n - 1)
    starts, index, value, col_key = [0], [], [], []
    for s in range(r):
        for li, link in enumerate(links):
            if link.dst == s:
                continue
            rows = []
            if link.src != s:
                rows.append((cons_row(s, link.src), -1.0))
            rows.append((cons_row(s, link.dst), 1.0))
            rows.append((cap_row0 + li, 1.0))
            rows.sort()
            for row, val in rows:
                index.append(row)
                value.append(val)
            starts.append(len(index))
            col_key.append((s, li))
    # τ: −bw/scale in every capacity row
    for li in range(num_links):
        index.append(cap_row0 + li)
        value.append(-bw[li] / scale)
    starts.append(len(index))
    num_rows = cap_row0 + num_links
    row_lower = np.zeros(num_rows)
    row_upper = np.zeros(num_rows)
    for s in range(r):
        for v in range(n):
            if v == s:
                continue
            demand = 1.0 if v < r else 0.0
            row_lower[cons_row(s, v)] = row_upper[cons_row(s, v)] = demand
    row_lower[cap_row0:] = -np.inf
    return starts, index, value, row_lower, row_upper, num_rows, cap_row0, scale


def _certify(topology: Topology, lengths: np.ndarray) -> float:
    """Weak-duality bound Σ_{s≠d} dist(s, d) / Σ bw·z for link lengths z ≥ 0 (pairs per GB/s)."""
    z = np.maximum(lengths, 0.0)
    bw = np.array([link.bandwidth for link in topology.links], dtype=np.float64)
    volume = float(np.dot(bw, z))
    if volume <= 0:
        return 0.0
    r, n = topology.num_ranks, topology.num_nodes
    links, out_links = topology.links, topology.out_links
    total = 0.0
    for s in range(r):
        dist = [INF] * n
        dist[s] = 0.0
        heap = [(0.0, s)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            for i in out_links[u]:
                nd = d + float(z[i])
                v = links[i].dst
                if nd < dist[v]:
                    dist[v] = nd
                    heapq.heappush(heap, (nd, v))
        total += sum(dist[d] for d in range(r) if d != s)
    return total / volume


def _solve_highs(topology: Topology) -> tuple[float, np.ndarray] | None:
    import highspy

    starts, index, value, row_lower, row_upper, num_rows, cap_row0, scale = _columns(topology)
    num_cols = len(starts) - 1
    lp = highspy.HighsLp()
    lp.num_col_ = num_cols
    lp.num_row_ = num_rows
    cost = np.zeros(num_cols)
    cost[-1] = 1.0
    lp.col_cost_ = cost
    lp.col_lower_ = np.zeros(num_cols)
    lp.col_upper_ = np.full(num_cols, highspy.kHighsInf)
    lp.row_lower_ = np.where(np.isinf(row_lower), -highspy.kHighsInf, row_lower)
    lp.row_upper_ = row_upper
    h = seeded_highs_with_columns(lp, starts, index, value)
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    solution = h.getSolution()
    if not solution.dual_valid:
        return None
    objective = float(h.getInfo().objective_function_value)
    duals = np.abs(np.array(solution.row_dual[cap_row0:], dtype=np.float64))
    return objective / scale, duals


def _solve_cbc(topology: Topology) -> tuple[float, np.ndarray] | None:
    import pulp

    starts, index, value, row_lower, _, num_rows, cap_row0, scale = _columns(topology)
    num_cols = len(starts) - 1
    prob = pulp.LpProblem("alltoall_flow", pulp.LpMinimize)
    x = [prob.add_variable(f"x{j}", lowBound=0) for j in range(num_cols)]
    rows: list[list[tuple[pulp.LpVariable, float]]] = [[] for _ in range(num_rows)]
    for j in range(num_cols):
        for k in range(starts[j], starts[j + 1]):
            rows[index[k]].append((x[j], value[k]))
    prob += x[-1]
    constraints = []
    for i in range(num_rows):
        expr = pulp.LpAffineExpression(rows[i])
        c = (expr <= 0) if i >= cap_row0 else (expr == float(row_lower[i]))
        prob += c, f"r{i}"
        if i >= cap_row0:
            constraints.append(prob.get_constraint_by_name(f"r{i}"))
    with warnings.catch_warnings():
        # pulp 3.3 announces that its bundled CBC moves to an extra in pulp 4; it is still here
        warnings.simplefilter("ignore", DeprecationWarning)
        prob.solve(pulp.PULP_CBC_CMD(msg=False))
    if prob.sol_status != 1:  # 1 = proven optimal (pulp's LpStatus can say Optimal after a time limit)
        return None
    duals = np.array([abs(constraints[i - cap_row0].pi or 0.0) for i in range(cap_row0, num_rows)])
    return float(pulp.value(prob.objective)) / scale, duals


def alltoall_flow_lp(topology: Topology, solver: str = "highs") -> FlowLP | None:
    """Solve the multicommodity-flow LP (HiGHS through highspy; ``solver="cbc"`` uses CBC through
    pulp, and CBC is also the fallback when HiGHS fails) and certify its value from the duals.
    None if no solver reached an optimum."""
    order = {"highs": (_solve_highs, _solve_cbc), "cbc": (_solve_cbc,)}.get(solver)
    if order is None:
        raise ValueError(f"unknown LP solver {solver!r} (highs or cbc)")
    if topology.num_ranks < 2:
        return None
    for solve in order:
        try:
            # whatever a solver library prints is a diagnostic, never part of our stdout (--json)
            with native_stdout_to_stderr():
                result = solve(topology)
        except ImportError:
            continue
        if result is None:
            continue
        optimum, duals = result
        certified = _certify(topology, duals)
        name = "HiGHS" if solve is _solve_highs else "CBC"
        return FlowLP(min(certified, optimum), optimum, name, lp_size(topology) + 1)
    return None
