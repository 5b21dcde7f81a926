"""The Pareto frontier of steps against bandwidth cost (SCCL's question, answered with the ILP).

A schedule of S steps whose steps last r_1 … r_S rounds (SCCL's bandwidth unit: one chunk over
the slowest link) takes about S·α + R·chunk_bytes/unit with R = Σ r_s. With k chunks per piece,
chunk_bytes shrinks as k grows, so what matters for large messages is R/k, the *rounds per
chunk*, and for small ones S. The frontier lists, for each step count S, the best rounds per
chunk (smallest k reaching it) when that beats every smaller step count.

The walk (`pareto_frontier`):

- S runs up from the latency bound (the fewest steps any schedule needs);
- for each S, chunk counts k = 1 … ``max_chunks`` are tried in order of their best possible
  rounds per chunk, ⌈LB·k⌉ / k with LB the bandwidth lower bound of `synth.bounds` in rounds per
  chunk; a k is skipped when even that cannot beat the best rounds per chunk already found (at
  this S or a smaller one), and each tried (S, k) minimises the rounds exactly;
- the walk stops when the best rounds per chunk meets LB (no more steps can help), when S steps
  (beyond the first S tried) can no longer beat the best known schedule (classic baselines and
  frontier points) at any size of ``sizes`` (every S-step schedule takes at least S·α_min + the
  bandwidth bound), at ``max_steps``, or when the time budget runs out.

Each point says whether its rounds were proven optimal (or the time limit cut the solve, with the
gap) and its predicted step-synchronous time at the sizes.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from synth.bounds import bound_model
from synth.bounds.latency import latency_facts
from synth.collective import DUAL, Collective, Kind
from synth.errors import NotApplicable
from synth.ilp.search import CLASSIC_BASELINES, Budget, IlpOptions, Outcome, dual_outcome, minimum_steps, solve_forward
from synth.ilp.solve import Progress
from synth.ilp.symmetry import find_symmetry
from synth.schedule import Schedule
from synth.simulate import simulate
from synth.topology import Topology

#: Sizes at which frontier points are compared and reported (bytes): small and large messages.
DEFAULT_SIZES = (1 << 10, 1 << 30)


@dataclass
class ParetoPoint:
    """A frontier point: ``steps``, ``chunks`` per piece, ``rounds`` (Σ r_s) and what the solver
    proved; ``times_us`` maps each size to the predicted step-synchronous time."""

    steps: int
    chunks: int
    rounds: int
    outcome: Outcome
    times_us: dict[int, float]

    @property
    def rounds_per_chunk(self) -> Fraction:
        return Fraction(self.rounds, self.chunks)

    @property
    def schedule(self) -> Schedule:
        return self.outcome.schedule

    @property
    def proven(self) -> bool:
        return self.outcome.status == "optimal"


@dataclass
class Attempt:
    """One (steps, chunks) solve of the walk: its rounds (None: no schedule) and status."""

    steps: int
    chunks: int
    rounds: int | None
    status: str
    gap: float | None
    elapsed: float
    #: the optimum holds only among the model's restricted schedules (symmetric ones): it was not
    #: at the lower bound and the model was restricted
    restricted: bool = False


@dataclass
class ParetoResult:
    """The frontier, every solve of the walk, the bandwidth lower bound (rounds per chunk), the
    best baseline's times and why the walk stopped."""

    kind: Kind
    points: list[ParetoPoint]
    attempts: list[Attempt]
    lower_bound: Fraction
    unit_gbps: float
    sizes: tuple[int, ...]
    baseline: dict[int, tuple[str, float]]
    stopped: str
    elapsed: float
    restrictions: tuple[str, ...] = field(default=())

    @property
    def proof(self) -> str:
        """What the walk proved: every (steps, chunks) it tried solved to optimality over all
        schedules, only among symmetric ones, or some solves cut by the time limit."""
        cut = [a for a in self.attempts if a.status not in ("optimal", "infeasible")]
        if cut:
            return f"not proven: {len(cut)} of {len(self.attempts)} solves were cut before optimality"
        if any(a.restricted for a in self.attempts):
            return (
                "every solve optimal, some only among schedules "
                + " and ".join(self.restrictions)
                + " (--no-symmetry proves over all schedules)"
            )
        return "every solve optimal over all schedules"


def _rounds_bound(topology: Topology, collective: Collective, unit: float) -> float:
    """The bandwidth lower bound in rounds per chunk (k = 1 chunk per piece)."""
    model = bound_model(topology, collective.kind, collective.root)
    size = float(1 << 30)
    one = collective.with_chunks(1)
    return model.us_per_byte * size * 1e3 * unit / one.chunk_bytes(size)


def _as_fraction(x: float) -> Fraction:
    return Fraction(x).limit_denominator(10_000)


def _baseline_times(topology: Topology, collective: Collective, sizes: tuple[int, ...]) -> dict[int, tuple[str, float]]:
    """The best classic schedule's time at each size (method name, µs)."""
    best: dict[int, tuple[str, float]] = {}
    for method in CLASSIC_BASELINES:
        if not method.serves(collective.kind):
            continue
        for chunks in sorted({1, method.default_chunks(collective.kind, topology.num_ranks)}):
            try:
                schedule = method.synthesize(topology, collective.kind, root=collective.root, chunks=chunks)
            except (NotApplicable, ValueError):
                continue
            for result in simulate(schedule, topology, sizes, "sync"):
                if result.size not in best or result.time_us < best[result.size][1]:
                    best[result.size] = (method.name, result.time_us)
    return best


def pareto_frontier(
    topology: Topology,
    kind: Kind | str,
    root: int | None = None,
    *,
    max_chunks: int = 8,
    max_steps: int | None = None,
    time_limit: float | None = 60.0,
    solver: str = "highs",
    symmetry: bool = True,
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    progress: Callable[[Progress], bool | None] | None = None,
    on_attempt: Callable[[Attempt], None] | None = None,
    stop: threading.Event | None = None,
) -> ParetoResult:
    """Walk steps and chunks as the module says; reductions walk their forward collective on the
    reversed topology and return the dual schedules. Allreduce is not walked (it composes two
    frontiers); ask for reduce-scatter and allgather."""
    kind = Kind(kind)
    if kind is Kind.ALLREDUCE:
        raise NotApplicable("the Pareto walk serves every collective but allreduce (walk reduce-scatter and allgather)")
    if max_chunks < 1:
        raise ValueError("max_chunks must be at least 1")
    reduction = Collective(kind, topology.num_ranks, 1, root)
    forward_kind = DUAL.get(kind, kind)
    topo = topology.reversed() if kind in DUAL else topology
    collective = Collective(forward_kind, topology.num_ranks, 1, reduction.root)
    budget = Budget(time_limit, stop)
    group = find_symmetry(topo) if symmetry else None
    unit = float(min(link.bandwidth for link in topo.links))
    lb = _rounds_bound(topo, collective, unit)
    lb_frac = _as_fraction(lb)
    facts = latency_facts(topo)
    bm = bound_model(topo, collective.kind, collective.root)
    sizes = tuple(sorted(sizes))
    baseline = _baseline_times(topo, collective, sizes)
    s = max(1, minimum_steps(topo, collective))
    top = max_steps if max_steps is not None else s + 2 * topo.num_ranks
    points: list[ParetoPoint] = []
    attempts: list[Attempt] = []
    best_rpc = math.inf
    stopped = f"reached max_steps {top}"
    eps = 1e-9
    warm: dict[int, list[Schedule]] = {}
    restrictions: set[str] = set()
    while s <= top:
        if budget.exhausted():
            stopped = "time limit" if not budget.stop.is_set() else "interrupted"
            break
        # every S-step schedule takes at least S·α_min plus the bandwidth bound
        known = {size: min([baseline[size][1]] if size in baseline else [math.inf]) for size in sizes}
        for p in points:
            for size in sizes:
                known[size] = min(known[size], p.times_us[size])
        first = s == max(1, minimum_steps(topo, collective))
        if not first and all(s * facts.min_transfer_alpha + bm.us_per_byte * size >= known[size] for size in sizes):
            stopped = f"{s} steps cannot beat the best known schedule at any size"
            break
        order = sorted(range(1, max_chunks + 1), key=lambda k: (math.ceil(lb * k - 1e-6) / k, k))
        best_here: ParetoPoint | None = None
        for k in order:
            possible = math.ceil(lb * k - 1e-6) / k
            if possible >= best_rpc - eps:
                continue  # cannot beat a smaller step count
            target = best_here.rounds / best_here.chunks if best_here is not None else math.inf
            if best_here is not None and (possible > target + eps or (possible >= target - eps and k >= best_here.chunks)):
                continue  # cannot beat this step count's best, nor reach it with fewer chunks
            if budget.exhausted():
                break
            options = IlpOptions(steps=s, objective="rounds", time_limit=budget.remaining(), solver=solver, symmetry=symmetry)
            t0 = time.perf_counter()
            try:
                outcome = solve_forward(
                    topo, collective.with_chunks(k), options, progress=progress, budget=budget, group=group, warm=warm.get(k)
                )
            except NotApplicable as exc:
                attempt = Attempt(
                    s, k, None, "infeasible" if "no schedule" in str(exc) else "no schedule", None, time.perf_counter() - t0
                )
                attempts.append(attempt)
                if on_attempt:
                    on_attempt(attempt)
                continue
            attempt = Attempt(
                s,
                k,
                outcome.rounds,
                outcome.status,
                outcome.gap,
                time.perf_counter() - t0,
                restricted=bool(outcome.restrictions) and not outcome.meets_lower_bound,
            )
            attempts.append(attempt)
            if on_attempt:
                on_attempt(attempt)
            warm.setdefault(k, []).insert(0, outcome.schedule)
            restrictions.update(outcome.restrictions)
            rpc = outcome.rounds / k
            if rpc < target - eps or (best_here is not None and abs(rpc - target) <= eps and k < best_here.chunks):
                times = {r.size: r.time_us for r in simulate(outcome.schedule, topo, sizes, "sync")}
                best_here = ParetoPoint(s, k, outcome.rounds, outcome, times)
            if best_here is not None and best_here.rounds / best_here.chunks <= lb + eps:
                break
        if best_here is not None and best_here.rounds / best_here.chunks < best_rpc - eps:
            if kind in DUAL:
                best_here.outcome = dual_outcome(best_here.outcome, reduction.with_chunks(best_here.chunks), topology)
            points.append(best_here)
            best_rpc = best_here.rounds / best_here.chunks
        if best_rpc <= lb + eps:
            stopped = "the rounds per chunk met the bandwidth lower bound"
            break
        s += 1
    return ParetoResult(
        kind=kind,
        points=points,
        attempts=attempts,
        lower_bound=lb_frac,
        unit_gbps=unit,
        sizes=sizes,
        baseline=baseline,
        stopped=stopped,
        elapsed=time.perf_counter() - budget.start,
        restrictions=tuple(sorted(restrictions)),
    )
