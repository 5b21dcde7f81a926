"""The ILP over a time-expanded topology: which chunk crosses which route in which step.

For S steps, the model has one binary ``y[c, ρ, s]`` per chunk c, *route* ρ and step s: "chunk c
is sent along ρ in step s". A route is a rank-to-rank path whose interior nodes are switches (a
direct link is a route with no switch), so a transfer through a switch crosses its in-link and
out-link in the same step and no switch ever holds data: NVSwitch and PCIe-switch machines need no
special case. "Rank r holds chunk c after step s" is the expression
``h[c, r, s] = [r starts with c] + Σ_{s' ≤ s} Σ_{ρ into r} y[c, ρ, s']``, which is 0 or 1 because
every rank receives each chunk at most once (constraint 1 below); it replaces a variable per
(chunk, rank, step).

Constraints (docs/ilp.md gives the reasons):

1. *receive once*: for every chunk c and rank r that does not start with it,
   ``Σ_{s, ρ into r} y[c, ρ, s]`` is 1 where r needs c and at most 1 elsewhere (a relay);
2. *send only what is held*: ``y[c, ρ, s] ≤ h[c, src(ρ), s − 1]``;
3. *link load*: ``n[ℓ, s] = Σ_{c, ρ ∋ ℓ} y[c, ρ, s]`` chunks cross directed link ℓ in step s;
4. the objective's step costs (below).

Objectives (``objective``):

- ``"time"``: the step-synchronous time at ``size`` bytes. Step s costs ``L_s + m_s`` with
  ``m_s ≥ n[ℓ, s] · chunk_bytes / bw_ℓ`` for every link and ``L_s`` the largest α of a route used
  in the step (one binary per step and distinct route α). This is the step-synchronous cost
  (docs/formats.md, 'Step-synchronous cost') whenever the step's busiest link lies on one of its
  slowest-α routes, and never less than it.
- ``"rounds"``: SCCL's bandwidth cost. Step s lasts r_s rounds (an integer), in which a link of
  bandwidth bw carries at most ``bw / unit · r_s`` chunks (``unit``: the slowest link); minimise
  ``Σ r_s``, the rounds R; the schedule's bandwidth term is R · chunk_bytes / unit.
- ``"steps"`` is a search over S (`synth.ilp.search`) using the time objective.

Reductions of the model, each keeping every solution valid (docs/ilp.md):

- *reachability*: y[c, ρ, s] exists only if src(ρ) can hold c by step s − 1 (hop distance in the
  rank graph from c's sources), dst(ρ) does not start with c, and dst(ρ) either needs c or can
  still pass it to a rank that needs it within the remaining steps;
- *symmetry*: with a group G of automorphisms acting freely on ranks (`synth.ilp.symmetry`), only
  G-invariant schedules are searched: y is kept for one chunk per G-orbit, ``y[g c, g ρ, s] =
  y[c, ρ, s]``; the constraints of the other chunks are images of the kept ones, and each link
  orbit needs one load row (loads are invariant too);
- *interchangeable chunks*: chunks with the same sources and destinations (the k chunks of a
  piece) are ordered by a weighted count of their transfers, which removes relabellings of the
  same schedule;
- *bounds*: the objective is at least the lower bound of `synth.bounds` (a valid cut that lets the
  solver prove optimality as soon as a schedule meets it).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from synth.bounds import BoundModel
from synth.bounds.latency import latency_facts
from synth.collective import Collective, Kind
from synth.ilp.solve import LinearModel
from synth.ilp.symmetry import SymmetryGroup, trivial_group
from synth.schedule import Schedule
from synth.topology import Topology

OBJECTIVES = ("time", "steps", "rounds")

#: Routes kept per ordered rank pair (the ones of least α, then fewest hops). Every built-in
#: topology up to 16 ranks has at most this many switch-only paths per pair.
MAX_ROUTES_PER_PAIR = 8

#: Bytes per µs in one GB/s.
_BYTES_PER_US = 1e3


#: Largest number of quanta one chunk may take on a link for busy time to be counted in quanta.
MAX_QUANTA_PER_CHUNK = 10_000


def _quanta(bandwidth: np.ndarray) -> np.ndarray | None:
    """Per link, the time one chunk takes in units of the largest common quantum (an integer
    array), or None if the bandwidths have no reasonable common quantum."""
    from fractions import Fraction

    rates = [1 / Fraction(float(bw)).limit_denominator(1000) for bw in bandwidth]
    num = 0
    den = 1
    for rate in rates:
        num = math.gcd(num, rate.numerator)
        den = den * rate.denominator // math.gcd(den, rate.denominator)
    quantum = Fraction(num, den)
    counts = [rate / quantum for rate in rates]
    if any(c.denominator != 1 or c > MAX_QUANTA_PER_CHUNK for c in counts):
        return None
    if any(abs(float(1 / Fraction(float(bw)).limit_denominator(1000)) - 1 / bw) > 1e-12 / bw for bw in bandwidth):
        return None
    return np.array([int(c) for c in counts], dtype=np.int64)


class Infeasible(Exception):
    """The model has no solution for a reason found before solving (too few steps)."""


class TooLarge(Exception):
    """The model would have more variables than allowed (found before building its rows)."""

    def __init__(self, variables: int, limit: int):
        super().__init__(f"{variables} variables (limit {limit})")
        self.variables = variables
        self.limit = limit


@dataclass(frozen=True)
class Route:
    """A switch-only path between two ranks: ``src → via… → dst`` over ``links``; α summed."""

    src: int
    dst: int
    via: tuple[int, ...]
    links: tuple[int, ...]
    alpha: float


def enumerate_routes(topology: Topology, max_per_pair: int = MAX_ROUTES_PER_PAIR) -> tuple[Route, ...]:
    """Every simple path between two distinct ranks whose interior nodes are switches (at most
    ``max_per_pair`` per pair: least α, then fewest hops, then node ids), sorted by (src, dst, α,
    hops, via). `truncated_pairs` says which pairs lost paths to the limit."""
    return _enumerate_routes(topology, max_per_pair)[0]


def truncated_pairs(topology: Topology, max_per_pair: int = MAX_ROUTES_PER_PAIR) -> tuple[tuple[int, int], ...]:
    """Rank pairs with more than ``max_per_pair`` switch-only paths."""
    return _enumerate_routes(topology, max_per_pair)[1]


def _enumerate_routes(topology: Topology, max_per_pair: int) -> tuple[tuple[Route, ...], tuple[tuple[int, int], ...]]:
    cache = topology.__dict__.setdefault("_ilp_routes", {})
    if max_per_pair in cache:
        return cache[max_per_pair]
    r = topology.num_ranks
    links = topology.links
    found: dict[tuple[int, int], list[Route]] = {}
    for a in range(r):
        stack: list[tuple[int, tuple[int, ...], tuple[int, ...], float]] = [(a, (), (), 0.0)]
        while stack:
            node, via, used, alpha = stack.pop()
            for li in topology.out_links[node]:
                link = links[li]
                nxt = link.dst
                if nxt == a or nxt in via:
                    continue
                if nxt < r:
                    found.setdefault((a, nxt), []).append(Route(a, nxt, via, (*used, li), alpha + link.latency))
                else:
                    stack.append((nxt, (*via, nxt), (*used, li), alpha + link.latency))
    routes: list[Route] = []
    cut: list[tuple[int, int]] = []
    for key in sorted(found):
        options = sorted(found[key], key=lambda p: (round(p.alpha, 9), len(p.links), p.via))
        routes.extend(options[:max_per_pair])
        if len(options) > max_per_pair:
            cut.append(key)
    cache[max_per_pair] = (tuple(routes), tuple(cut))
    return cache[max_per_pair]


def chunk_action(collective: Collective, group: SymmetryGroup, num_ranks: int) -> np.ndarray | None:
    """``perm[g, c]``: the chunk that element g maps chunk c to, for collectives whose chunks
    follow their ranks (allgather, alltoall); None for the others (they get no symmetry)."""
    k, n = collective.chunks_per_piece, collective.num_chunks
    chunks = np.arange(n, dtype=np.int64)
    rank_perm = group.node_perms[:, :num_ranks]
    if collective.kind is Kind.ALLGATHER:
        owner, i = np.divmod(chunks, k)
        return rank_perm[:, owner] * k + i
    if collective.kind is Kind.ALLTOALL:
        pair, i = np.divmod(chunks, k)
        s, d = np.divmod(pair, num_ranks)
        return (rank_perm[:, s] * num_ranks + rank_perm[:, d]) * k + i
    return None


@dataclass(frozen=True)
class ModelSize:
    """What the formulation built: chunks kept (one per orbit), routes, variables, rows."""

    chunks: int
    routes: int
    variables: int
    rows: int
    group_order: int


class RouteModel:
    """What every route model shares: columns ``y`` (one per chunk, route and stage, described by
    ``col_p`` route and ``col_s`` stage), link loads, the objective's step costs and their
    evaluation. Subclasses set the attributes `_add_costs` reads and build their own rows."""

    topology: Topology
    routes: tuple[Route, ...]
    group: SymmetryGroup
    steps: int
    waves: int
    num_steps: int
    objective: str
    size: float
    unit: float
    chunk_bytes: float
    y: np.ndarray
    col_p: np.ndarray
    col_s: np.ndarray
    model: LinearModel

    def rounds_lower_bound(self, bounds: BoundModel) -> float:
        """The bandwidth bound of `synth.bounds` in rounds (of this model's unit and chunk size)."""
        return bounds.us_per_byte * self.size * _BYTES_PER_US * self.unit / self.chunk_bytes

    def _add_costs(self, model: LinearModel, bounds: BoundModel | None) -> None:
        """Link loads of the route columns (``self.y`` with ``self.col_p``, ``self.col_s``) and
        the objective: busy time and latency (time) or rounds, one cost column per interval of
        active stages, plus the bound cuts."""
        topo, S, routes, y = self.topology, self.steps, self.routes, self.y
        col_p, col_s = self.col_p, self.col_s
        # link loads per link orbit: coefficient |G| / |orbit| per crossing of a link of the orbit
        g_order = self.group.order
        link_perms = self.group.link_perms
        nl = len(topo.links)
        orbit_rep = link_perms.min(axis=0)  # smallest link id in each link's orbit
        orbit_size = np.array([np.unique(link_perms[:, li]).size for li in range(nl)])
        rep_links = np.unique(orbit_rep)
        self.rep_links = rep_links
        entries_col: list[int] = []
        entries_link: list[int] = []
        entries_coef: list[float] = []
        for j in range(col_p.size):
            for li in routes[col_p[j]].links:
                entries_col.append(j)
                entries_link.append(int(orbit_rep[li]))
                entries_coef.append(g_order / orbit_size[li])
        e_col = np.asarray(entries_col, dtype=np.int64)
        e_link = np.asarray(entries_link, dtype=np.int64)
        e_coef = np.asarray(entries_coef, dtype=float)
        e_step = col_s[e_col] if e_col.size else np.zeros(0, dtype=np.int64)
        self._load_entries = (e_col, e_link, e_coef, e_step)

        # steps of the schedule: step s runs stage t of wave s - t; steps with the same set of
        # active stages (an interval of stages) cost the same, so one cost column per interval
        intervals: dict[tuple[int, int], int] = {}
        for step in range(1, self.num_steps + 1):
            key = (max(1, step - self.waves + 1), min(S, step))
            intervals[key] = intervals.get(key, 0) + 1
        self.intervals = sorted(intervals)
        self.multiplicity = np.array([intervals[i] for i in self.intervals], dtype=float)
        n_int = len(self.intervals)
        in_interval = [(e_step >= lo) & (e_step <= hi) for lo, hi in self.intervals]
        by_link = {int(li): e_link == li for li in rep_links}

        bandwidth = topo.bandwidth_array
        if self.objective == "rounds":
            rounds = np.array([model.add_cols(1, cost=m, lo=0.0, hi=math.inf, integer=True)[0] for m in self.multiplicity])
            self.rounds = rounds
            for li in rep_links:
                cap = bandwidth[li] / self.unit
                for i in range(n_int):
                    sel = by_link[int(li)] & in_interval[i]
                    if sel.any():
                        model.add_row(np.append(y[e_col[sel]], rounds[i]), np.append(e_coef[sel], -cap), -math.inf, 0.0)
            if bounds is not None:
                model.add_row(rounds, self.multiplicity, math.ceil(self.rounds_lower_bound(bounds) - 1e-6), math.inf)
        else:
            per_chunk_us = self.chunk_bytes / (_BYTES_PER_US * bandwidth)
            # Busy time in whole quanta: every link's time per chunk is an integer number of
            # quanta (the gcd of the links' 1/bandwidth), so a step's busy time, the largest of
            # integers times the quantum, is an integer number of quanta too. Integral busy
            # columns cut off fractional loads in the relaxation without losing any schedule.
            steps_per_chunk = _quanta(bandwidth)
            if steps_per_chunk is not None:
                quantum_us = float(per_chunk_us[0] / steps_per_chunk[0])
                weight = steps_per_chunk.astype(float)
            else:
                quantum_us, weight = 1.0, per_chunk_us
            self.quantum_us = quantum_us
            self.model_integer_busy = steps_per_chunk is not None
            busy = np.array(
                [
                    model.add_cols(1, cost=m * quantum_us, lo=0.0, hi=math.inf, integer=steps_per_chunk is not None)[0]
                    for m in self.multiplicity
                ]
            )
            self.busy = busy
            for li in rep_links:
                for i in range(n_int):
                    sel = by_link[int(li)] & in_interval[i]
                    if sel.any():
                        model.add_row(
                            np.append(y[e_col[sel]], busy[i]), np.append(e_coef[sel] * weight[li], -1.0), -math.inf, 0.0
                        )
            # latency: one binary per (stage, distinct route α) saying the stage uses such a route;
            # a step costs at least the largest α of its active stages' routes
            alphas = np.array([round(p.alpha, 9) for p in routes])
            self.route_alpha = alphas
            classes = np.unique(alphas[col_p]) if col_p.size else np.zeros(0)
            self.alpha_classes = classes
            latency = np.array([model.add_cols(1, cost=m, lo=0.0, hi=math.inf, integer=False)[0] for m in self.multiplicity])
            self.latency = latency
            self.used = np.full((S, classes.size), -1, dtype=np.int64)
            for t in range(1, S + 1):
                for k, alpha in enumerate(classes):
                    sel = (col_s == t) & (alphas[col_p] == alpha)
                    if not sel.any():
                        continue
                    v = int(model.add_cols(1)[0])
                    self.used[t - 1, k] = v
                    model.add_row(np.append(y[sel], v), np.append(np.ones(int(sel.sum())), -float(sel.sum())), -math.inf, 0.0)
                    for i, (lo, hi) in enumerate(self.intervals):
                        if lo <= t <= hi:
                            model.add_row([latency[i], v], [1.0, -float(alpha)], 0.0, math.inf)
            if bounds is not None:
                # valid cuts: the whole time, its bandwidth part and its latency part each at
                # least their lower bound (docs/bounds.md: every step costs at least its α, and
                # the busy times add up to at least the bandwidth bound)
                scaled = self.multiplicity * quantum_us
                model.add_row(
                    np.concatenate((busy, latency)),
                    np.concatenate((scaled, self.multiplicity)),
                    bounds.time_us(self.size),
                    math.inf,
                )
                model.add_row(busy, scaled, bounds.us_per_byte * self.size, math.inf)
                model.add_row(latency, self.multiplicity, bounds.latency_us, math.inf)

    def _interval_loads(self, values: np.ndarray) -> np.ndarray:
        """Chunks on every link in every interval of stages: [links, intervals]."""
        e_col, e_link, e_coef, e_step = self._load_entries
        stage = np.zeros((len(self.topology.links), self.steps + 1))
        np.add.at(stage, (e_link, e_step), e_coef * values[self.y[e_col]])
        return np.stack([stage[:, lo : hi + 1].sum(axis=1) for lo, hi in self.intervals], axis=1)

    def complete(self, values: np.ndarray) -> None:
        """Fill the auxiliary columns (rounds, busy time, latency) from the y part."""
        load = self._interval_loads(values)
        bandwidth = self.topology.bandwidth_array
        if self.objective == "rounds":
            values[self.rounds] = np.ceil((load / (bandwidth[:, None] / self.unit)).max(axis=0) - 1e-9)
            return
        per_chunk_us = self.chunk_bytes / (_BYTES_PER_US * bandwidth)
        busy_us = (load * per_chunk_us[:, None]).max(axis=0)
        values[self.busy] = np.round(busy_us / self.quantum_us) if self.model_integer_busy else busy_us
        stage_alpha = np.zeros(self.steps + 1)
        for t in range(1, self.steps + 1):
            for k, alpha in enumerate(self.alpha_classes):
                v = self.used[t - 1, k]
                if v < 0:
                    continue
                sel = (self.col_s == t) & (self.route_alpha[self.col_p] == alpha)
                on = float(values[self.y[sel]].max() > 0.5)
                values[v] = on
                if on:
                    stage_alpha[t] = max(stage_alpha[t], float(alpha))
        values[self.latency] = [stage_alpha[lo : hi + 1].max() for lo, hi in self.intervals]

    def rounds_of(self, values: np.ndarray) -> int:
        """SCCL's rounds of a solution, whatever the objective: per step, the most loaded link in
        units of the slowest link, rounded up, summed over the schedule's steps."""
        load = self._interval_loads(values)
        per = np.ceil((load / (self.topology.bandwidth_array[:, None] / self.unit)).max(axis=0) - 1e-9)
        return round(float(np.dot(per, self.multiplicity)))


class Formulation(RouteModel):
    """The model for one (topology, collective, steps, objective, size, symmetry group)."""

    def __init__(
        self,
        topology: Topology,
        collective: Collective,
        steps: int,
        *,
        waves: int = 1,
        objective: str = "time",
        size: float = 1 << 20,
        group: SymmetryGroup | None = None,
        routes: tuple[Route, ...] | None = None,
        bounds: BoundModel | None = None,
        max_variables: int | None = None,
    ):
        if collective.is_reduction:
            raise ValueError("reductions are built by duality from their forward collective")
        if objective not in ("time", "rounds"):
            raise ValueError(f"the model's objective is 'time' or 'rounds', not {objective!r}")
        if steps < 1:
            raise ValueError("steps must be at least 1")
        if waves < 1 or collective.chunks_per_piece % waves:
            raise ValueError(f"waves ({waves}) must divide the chunks per piece ({collective.chunks_per_piece})")
        self.topology = topology
        self.collective = collective
        self.waves = waves
        #: the chunks of one wave: ``collective`` with k / waves chunks per piece
        self.template = collective.with_chunks(collective.chunks_per_piece // waves)
        #: stages of one wave (= the schedule's steps when there is one wave)
        self.steps = steps
        #: steps of the whole schedule: waves start one step apart
        self.num_steps = steps + waves - 1
        self.objective = objective
        self.size = float(size)
        self.routes = routes if routes is not None else enumerate_routes(topology)
        r = topology.num_ranks
        action = chunk_action(self.template, group, r) if group is not None and group.order > 1 else None
        if action is None:
            group = trivial_group(topology)
            action = np.arange(self.template.num_chunks, dtype=np.int64)[None, :]
        self.group = group
        self.chunk_perm = action
        self.unit = float(min(link.bandwidth for link in topology.links))
        self.chunk_bytes = collective.chunk_bytes(self.size)
        self.max_variables = max_variables
        self._build(bounds)

    # ================================================================================ building
    def _representatives(self) -> np.ndarray:
        """One template chunk per orbit: the smallest chunk id of each."""
        n = self.template.num_chunks
        seen = np.zeros(n, dtype=bool)
        reps = []
        for c in range(n):
            if not seen[c]:
                reps.append(c)
                seen[self.chunk_perm[:, c]] = True
        return np.array(reps, dtype=np.int64)

    def _build(self, bounds: BoundModel | None) -> None:
        topo, coll, S = self.topology, self.template, self.steps
        r = topo.num_ranks
        hops = latency_facts(topo).hops
        reps = self._representatives()
        self.reps = reps
        holders = coll.initial_holders(reps)  # [R, Q]
        needs = coll.required(reps) & ~holders
        q_count = reps.size
        routes = self.routes
        route_src = np.array([p.src for p in routes], dtype=np.int64)
        route_dst = np.array([p.dst for p in routes], dtype=np.int64)

        # earliest step after which each rank can hold each chunk, and the last step at which
        # receiving it is still useful
        big = 10**6
        earliest = np.full((q_count, r), big, dtype=np.int64)
        lastuse = np.full((q_count, r), -1, dtype=np.int64)
        for q in range(q_count):
            src = np.flatnonzero(holders[:, q])
            earliest[q] = hops[src].min(axis=0)
            dst = np.flatnonzero(needs[:, q])
            if dst.size:
                lastuse[q] = S - hops[:, dst].min(axis=1)  # through the nearest rank that needs it
                lastuse[q, dst] = S
        lastuse[holders.T] = -1
        unreachable = needs.T & (earliest > S)
        if unreachable.any():
            q, b = map(int, np.argwhere(unreachable)[0])
            raise Infeasible(f"chunk {int(reps[q])} cannot reach rank {b} in {S} step(s) (it needs {int(earliest[q, b])})")

        # columns y[q, route, step]: vectorized feasibility test
        qq, pp, ss = np.meshgrid(np.arange(q_count), np.arange(len(routes)), np.arange(1, S + 1), indexing="ij")
        ok = (earliest[qq, route_src[pp]] <= ss - 1) & (ss <= lastuse[qq, route_dst[pp]])
        col_q, col_p, col_s = qq[ok], pp[ok], ss[ok]
        if self.max_variables is not None and col_q.size > self.max_variables:
            raise TooLarge(int(col_q.size), self.max_variables)
        model = LinearModel()
        y = model.add_cols(col_q.size)
        self.col_q, self.col_p, self.col_s, self.y = col_q, col_p, col_s, y
        dst_of = route_dst[col_p]
        src_of = route_src[col_p]

        # 1. receive once
        order = np.lexsort((col_s, dst_of, col_q))
        key = col_q[order] * r + dst_of[order]
        for q in range(q_count):
            for b in range(r):
                if holders[b, q]:
                    continue
                lo_hi = np.searchsorted(key, [q * r + b, q * r + b + 1])
                cols = y[order[lo_hi[0] : lo_hi[1]]]
                if needs[b, q]:
                    model.add_row(cols, 1.0, 1.0, 1.0)
                elif cols.size > 1:
                    model.add_row(cols, 1.0, -math.inf, 1.0)

        # 2. send only what is held: y[q, ρ, s] ≤ Σ_{s' < s} (receipts of src(ρ))
        recv_sorted_steps = col_s[order]
        for j in np.flatnonzero(~holders[src_of, col_q]):
            q, a, s = int(col_q[j]), int(src_of[j]), int(col_s[j])
            lo, hi = np.searchsorted(key, [q * r + a, q * r + a + 1])
            cut = lo + int(np.searchsorted(recv_sorted_steps[lo:hi], s))  # receipts in steps < s
            model.add_row(np.concatenate(([y[j]], y[order[lo:cut]])), np.concatenate(([1.0], -np.ones(cut - lo))), -math.inf, 0.0)

        # 3. link loads and the objective's step costs
        self._add_costs(model, bounds)

        # interchangeable chunks: same sources and destinations → order by weighted transfer count
        weights = (S - col_s + 1).astype(float)
        signature: dict[tuple, list[int]] = {}
        for q in range(q_count):
            sig = (holders[:, q].tobytes(), needs[:, q].tobytes())
            signature.setdefault(sig, []).append(q)
        for members in signature.values():
            for q1, q2 in itertools.pairwise(members):
                s1, s2 = col_q == q1, col_q == q2
                model.add_row(np.concatenate((y[s1], y[s2])), np.concatenate((weights[s1], -weights[s2])), 0.0, math.inf)
        self.model = model
        self.size_info = ModelSize(int(q_count), len(routes), model.num_cols, model.num_rows, self.group.order)

    # ================================================================================ solutions
    def full_chunk(self, template_chunk: int, wave: int) -> int:
        """The schedule's chunk id of a template chunk in a wave: pieces keep their numbering,
        wave w takes chunks w·k_t … w·k_t + k_t − 1 of each piece (k_t chunks per piece per wave)."""
        kt = self.template.chunks_per_piece
        piece, i = divmod(template_chunk, kt)
        return piece * self.collective.chunks_per_piece + wave * kt + i

    def transfers(self, values: np.ndarray) -> list[tuple[int, int, int, int, tuple[int, ...]]]:
        """The schedule of a solution: (step 0-based, src, dst, chunk, via node ids), every
        chunk of every orbit (the kept chunk's routes mapped by each group element) of every
        wave (wave w runs the template w steps later)."""
        chosen = np.flatnonzero(values[self.y] > 0.5)
        node_perms = self.group.node_perms
        out = []
        for j in chosen:
            p = self.routes[self.col_p[j]]
            c = int(self.reps[self.col_q[j]])
            t = int(self.col_s[j]) - 1
            for g in range(self.group.order):
                perm = node_perms[g]
                src, dst, via = int(perm[p.src]), int(perm[p.dst]), tuple(int(perm[w]) for w in p.via)
                tc = int(self.chunk_perm[g, c])
                for w in range(self.waves):
                    out.append((t + w, src, dst, self.full_chunk(tc, w), via))
        return out

    def encode(self, schedule: Schedule) -> np.ndarray | None:
        """A complete solution vector for ``schedule`` (a warm start), or None if the schedule
        does not fit this model: more steps, a route or step the model left out, not invariant
        under the model's symmetry group, or (with several waves) not a repetition of one wave."""
        if schedule.num_steps > self.num_steps or schedule.collective != self.collective:
            return None
        topo = self.topology
        route_index = {(p.src, p.dst, p.via): i for i, p in enumerate(self.routes)}
        col_index = {(int(q), int(p), int(s)): j for j, (q, p, s) in enumerate(zip(self.col_q, self.col_p, self.col_s))}
        rep_pos = {self.full_chunk(int(c), 0): q for q, c in enumerate(self.reps)}
        values = np.zeros(self.model.num_cols)
        wanted = set()
        for s in range(schedule.num_steps):
            for t in schedule.step(s):
                via = tuple(topo.node_index[name] for name in t.via)
                wanted.add((s, t.src, t.dst, t.chunk, via))
                q = rep_pos.get(t.chunk)
                if q is None:
                    continue
                p = route_index.get((t.src, t.dst, via))
                j = col_index.get((q, p, s + 1)) if p is not None else None
                if j is None:
                    return None
                values[self.y[j]] = 1.0
        if set(self.transfers(values)) != wanted:
            return None  # not invariant under the group, not periodic, or repeated transfers
        self.complete(values)
        return values if self.model.violation(values) is None else None
