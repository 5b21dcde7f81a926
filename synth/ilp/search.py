"""Solving collectives with the ILP: step search, warm starts, duality, composition, schedules.

`solve_collective` is the entry point behind the ``ilp`` method: it picks the step counts to try,
builds `synth.ilp.formulation.Formulation` models, starts the solver from the best schedule that
fits (a previous step count's solution or a classic baseline), turns the solution into a verified
`Schedule`, and reports what was proven. Reductions are built by SCCL's duality (reduce and
reduce-scatter are broadcast and allgather on the reversed topology, run backwards with copies
turned into reduces); allreduce is reduce-scatter then allgather.

Every search ends: the step counts tried are bounded (``max_steps``) and the whole call shares
one work budget (``work_limit``, `synth.ilp.solve.WORK_UNITS`) and one time budget (``time_limit``); a
stop request (Ctrl-C, or a progress callback returning True) ends the current solve and keeps the
best schedule found so far. The work budget is what makes a cut search reproducible: work is
counted by the single-threaded solver, so the same inputs cut at the same point on any machine
and give the same schedule bytes; the time budget is a safety net whose cut depends on timing
(docs/ilp.md, "Limits").
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from synth.algorithms import binomial, direct, recursive_doubling, recursive_halving, ring, scatter_allgather
from synth.bounds import BoundModel, bound_model
from synth.bounds.latency import latency_facts
from synth.collective import DUAL, Collective, Kind
from synth.errors import NotApplicable
from synth.ilp.allreduce import AllreduceFormulation, minimum_allreduce_steps
from synth.ilp.formulation import (
    MAX_ROUTES_PER_PAIR,
    OBJECTIVES,
    Formulation,
    Infeasible,
    ModelSize,
    RouteModel,
    TooLarge,
    enumerate_routes,
    truncated_pairs,
)
from synth.ilp.solve import SOLVERS, Progress, SolveResult, solve
from synth.ilp.symmetry import SymmetryGroup, find_symmetry
from synth.schedule import OP_COPY, OP_NAMES, Schedule, ScheduleBuilder
from synth.simulate import simulate
from synth.topology import Topology, topologies_equal
from synth.transform import concat, dual_reduction
from synth.verify import check

NAME = "ilp"

#: The classic methods (the registry's ``classic`` family, in its order): warm starts of the
#: solver and the baselines of the Pareto walk.
CLASSIC_BASELINES = (
    ring.METHOD,
    direct.METHOD,
    binomial.METHOD,
    recursive_doubling.METHOD,
    recursive_halving.METHOD,
    scatter_allgather.METHOD,
)

#: The size the time objective optimizes for when none is given (nccl-tests bytes).
DEFAULT_SIZE = 1 << 20

#: The whole call's time budget (s) when none is given.
DEFAULT_TIME_LIMIT = 60.0

#: With the time objective and no ``steps``, step counts from the latency bound up to this many
#: more are tried (fewer when more steps cannot beat the best schedule found).
EXTRA_STEPS = 3

#: Largest model (variables) built; beyond it the call refuses with a hint instead of grinding.
MAX_VARIABLES = 200_000

#: With ``allreduce="auto"``, the direct allreduce model is tried after reduce-scatter +
#: allgather only when it has at most about this many variables.
DIRECT_ALLREDUCE_MAX_VARIABLES = 40_000

#: ... and, under a work limit, only when it has at most this many nonzeros. Larger direct models
#: spend their work in HiGHS's root node (cut rounds, and sub-MIP heuristics that the work count
#: cannot see or stop): on pcie-2socket (71,000 nonzeros) 133 steps of work took 56 s and kept the
#: composed warm start, so the work limit would not bound the time, and the time limit that would
#: cut it instead depends on the machine's speed.
DIRECT_ALLREDUCE_MAX_NONZEROS_UNDER_WORK_LIMIT = 20_000

ALLREDUCE_MODES = ("auto", "composed", "direct")


@dataclass(frozen=True)
class IlpOptions:
    """How to search. ``steps`` None: a search over step counts (see `solve_collective`)."""

    steps: int | None = None
    objective: str = "time"
    size: int = DEFAULT_SIZE
    time_limit: float | None = DEFAULT_TIME_LIMIT
    #: solver work for the whole call (`synth.ilp.solve.WORK_UNITS`; None: no limit), shared by
    #: its solves like the time limit; unlike it, where it cuts is the same on any machine
    work_limit: int | None = None
    solver: str = "highs"
    symmetry: bool = True
    max_steps: int | None = None
    warm_start: bool = True
    #: Pipelined schedules: every chunk of a piece is its own *wave*, all waves follow one
    #: template of ``pipeline`` stages, wave w starting at step w (so k chunks per piece give
    #: pipeline + k − 1 steps). The model then has the size of one wave whatever k is.
    pipeline: int | None = None
    #: chunks per piece in each wave of a pipelined schedule (k must be a multiple): more than one
    #: lets a wave spread a piece over several paths (a broadcast over several trees)
    wave_chunks: int = 1
    #: allreduce: "composed" (reduce-scatter then allgather; steps and pipelining per phase),
    #: "direct" (`synth.ilp.allreduce`: steps are the whole schedule's), or "auto" (composed, then
    #: direct from it when small; the faster is kept)
    allreduce: str = "auto"

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, got {self.solver!r}")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be at least 1, got {self.steps}")
        if self.size <= 0:
            raise ValueError(f"size must be positive, got {self.size}")
        if self.time_limit is not None and self.time_limit <= 0:
            raise ValueError(f"time limit must be positive, got {self.time_limit}")
        if self.work_limit is not None and self.work_limit < 1:
            raise ValueError(f"work limit must be at least 1, got {self.work_limit}")
        if self.pipeline is not None and self.pipeline < 1:
            raise ValueError(f"pipeline stages must be at least 1, got {self.pipeline}")
        if self.allreduce not in ALLREDUCE_MODES:
            raise ValueError(f"allreduce must be one of {', '.join(ALLREDUCE_MODES)}, got {self.allreduce!r}")
        if self.wave_chunks < 1:
            raise ValueError(f"chunks per wave must be at least 1, got {self.wave_chunks}")
        if self.pipeline is not None and self.steps is not None:
            raise ValueError("give either steps or pipeline stages, not both")


@dataclass(frozen=True)
class Tried:
    """One step count a search solved: steps, what was proven, objective, predicted time (µs)."""

    steps: int
    status: str
    objective: float | None
    time_us: float | None


@dataclass
class Outcome:
    """A solved collective: the verified schedule and what the solver proved about it.

    ``status``: "optimal" (proven for this step count and chunking, within the solver's relative
    gap of 10⁻⁴, among the schedules the model admits: see `symmetry_order`) or "feasible" (the
    search was cut: ``stopped_by`` says by what, ``gap`` how far from proven). ``objective`` and
    ``bound`` are in the objective's units (µs for time, rounds for rounds).
    """

    schedule: Schedule
    steps: int
    status: str
    stopped_by: str | None
    objective: float
    bound: float | None
    rounds: int
    time_us: float
    elapsed: float
    model: ModelSize | None
    symmetry_order: int
    meets_lower_bound: bool
    #: what the model assumed (symmetry, pipelining, route limits): "optimal" means optimal among
    #: such schedules, unless ``meets_lower_bound`` (then optimal among all schedules)
    restrictions: tuple[str, ...] = ()
    phases: list[Outcome] = field(default_factory=list)
    #: every step count the search solved, in order (the outcome is the best of them)
    tried: list[Tried] = field(default_factory=list)

    @property
    def gap(self) -> float | None:
        if self.bound is None:
            return None
        return max(0.0, self.objective - self.bound) / max(abs(self.objective), 1e-12)


class Budget:
    """The call's shared deadline, work budget (`synth.ilp.solve.WORK_UNITS`) and stop flag.

    The work budget is spent by what each solve reports it explored (`SolveResult.work`), a count
    that does not depend on timing, so how it is shared out, and when it runs out, is the same on
    any machine; the deadline is the safety net."""

    def __init__(self, time_limit: float | None, stop: threading.Event | None, work_limit: int | None = None):
        self.start = time.perf_counter()
        self.deadline = None if time_limit is None else self.start + time_limit
        self.stop = stop or threading.Event()
        self.work_left = work_limit

    def remaining(self) -> float | None:
        if self.deadline is None:
            return None
        return max(0.01, self.deadline - time.perf_counter())

    def spend(self, work: int) -> None:
        """Subtract a solve's work from the work budget."""
        if self.work_left is not None:
            self.work_left = max(0, self.work_left - work)

    def exhausted(self) -> bool:
        return (
            self.stop.is_set()
            or (self.work_left is not None and self.work_left <= 0)
            or (self.deadline is not None and time.perf_counter() >= self.deadline)
        )


# ============================================================================= step-synchronous cost
def sync_time_us(schedule: Schedule, topology: Topology, size: float) -> float:
    """Step-synchronous time (µs; docs/formats.md, 'Step-synchronous cost') of ``schedule`` at
    ``size`` bytes (synth.simulate)."""
    return simulate(schedule, topology, [int(size)], "sync")[0].time_us


# ============================================================================= forward solves
def minimum_steps(topology: Topology, collective: Collective) -> int:
    """The fewest steps any schedule needs: the largest hop distance, in the rank graph, from a
    chunk's holders to a rank that needs it."""
    hops = latency_facts(topology).hops
    holders = collective.initial_holders()
    needs = collective.required() & ~holders
    best = 0
    for c in np.unique(np.flatnonzero(needs.any(axis=0))):
        src = np.flatnonzero(holders[:, c])
        dst = np.flatnonzero(needs[:, c])
        best = max(best, int(hops[np.ix_(src, dst)].min(axis=0).max()))
    return best


def _cleanup(transfers: list[tuple[int, int, int, int, tuple[int, ...]]], collective: Collective) -> list:
    """Drop transfers into ranks that neither need the chunk nor pass it on later (the solver may
    leave such relays where they cost nothing). Removing a transfer only lowers link loads, so
    the cost never rises; repeated until no relay is useless."""
    need = collective.required()
    while True:
        last_send: dict[tuple[int, int], int] = {}
        for s, src, _dst, c, _via in transfers:
            last_send[(src, c)] = max(s, last_send.get((src, c), -1))
        kept = [t for t in transfers if need[t[2], t[3]] or last_send.get((t[2], t[3]), -1) > t[0]]
        if len(kept) == len(transfers):
            return kept
        transfers = kept


def _build_schedule(topology: Topology, collective: Collective, steps: list, num_steps: int, params: dict[str, Any]) -> Schedule:
    builder = ScheduleBuilder(collective, topology, NAME, params)
    names = topology.node_name
    per_step: list[list] = [[] for _ in range(num_steps)]
    for s, src, dst, c, via, op in steps:
        per_step[s].append((src, dst, c, OP_NAMES[op], tuple(names(w) for w in via)))
    for transfers in per_step:
        if transfers:
            builder.add_step(transfers)
    return builder.build()


def _baselines(topology: Topology, collective: Collective) -> list[Schedule]:
    """Classic schedules of the same collective and chunking (warm-start candidates)."""
    out = []
    for method in CLASSIC_BASELINES:
        if not method.serves(collective.kind):
            continue
        try:
            out.append(method.synthesize(topology, collective.kind, root=collective.root, chunks=collective.chunks_per_piece))
        except (NotApplicable, ValueError):
            continue
    return out


def solve_forward(
    topology: Topology,
    collective: Collective,
    options: IlpOptions,
    *,
    progress: Callable[[Progress], bool | None] | None = None,
    budget: Budget | None = None,
    group: SymmetryGroup | None = None,
    warm: list[Schedule] | None = None,
) -> Outcome:
    """A non-reduction collective solved directly (see `solve_collective`)."""
    budget = budget or Budget(options.time_limit, None, options.work_limit)
    if topology.num_ranks < 2:
        raise NotApplicable("the ilp method needs at least 2 ranks")
    if group is None:
        group = find_symmetry(topology) if options.symmetry else None
    routes = enumerate_routes(topology)
    waves = 1
    if options.pipeline is not None:
        if collective.chunks_per_piece % options.wave_chunks:
            raise NotApplicable(
                f"a pipelined schedule needs the chunks per piece ({collective.chunks_per_piece}) to be a multiple of "
                f"the chunks per wave ({options.wave_chunks})"
            )
        waves = collective.chunks_per_piece // options.wave_chunks
    bm = bound_model(topology, collective.kind, collective.root)
    objective = "time" if options.objective == "steps" else options.objective

    def build(steps: int) -> Formulation:
        return Formulation(
            topology,
            collective,
            steps,
            waves=waves,
            objective=objective,
            size=options.size,
            group=group,
            routes=routes,
            bounds=bm,
            max_variables=MAX_VARIABLES,
        )

    starts = list(warm or [])
    if options.warm_start:
        starts += _baselines(topology, collective)
    s_min = max(1, minimum_steps(topology, collective))
    return _search(topology, collective, options, s_min, build, starts, waves, bm, budget, progress)


def _candidates(options: IlpOptions, s_min: int) -> list[int]:
    """Step counts (stages, when pipelined) to try, in order."""
    if options.pipeline is not None:
        return [options.pipeline]
    if options.steps is not None:
        return [options.steps]
    if options.objective == "time":
        top = options.max_steps if options.max_steps is not None else s_min + EXTRA_STEPS
        return list(range(s_min, max(s_min, top) + 1))
    # rounds: the latency bound; steps: the fewest steps, which is always the latency bound here
    # (a step may carry any number of chunks, so the hop distances are reachable)
    return [s_min]


def _search(
    topology: Topology,
    collective: Collective,
    options: IlpOptions,
    s_min: int,
    build: Callable[[int], RouteModel],
    starts: list[Schedule],
    waves: int,
    bm: BoundModel,
    budget: Budget,
    progress: Callable[[Progress], bool | None] | None,
) -> Outcome:
    """Solve the models ``build(steps)`` for the step counts to try and keep the best outcome."""
    candidates = _candidates(options, s_min)
    objective = "time" if options.objective == "steps" else options.objective
    facts = latency_facts(topology)
    best: Outcome | None = None
    infeasible_reasons = []
    tried: list[Tried] = []
    for position, steps in enumerate(candidates):
        if best is not None and budget.exhausted():
            break
        if best is not None and objective == "time" and options.steps is None:
            # more steps cost at least their α floor on top of the bandwidth bound
            floor = (steps + waves - 1) * facts.min_transfer_alpha + bm.us_per_byte * options.size
            if floor >= best.time_us:
                break
        try:
            form = build(steps)
        except TooLarge as exc:
            raise NotApplicable(
                f"the ILP for {collective.describe()} in {steps} steps would have {exc.variables} route variables "
                f"(limit {exc.limit}); use fewer --chunks or --steps, or --pipeline"
            ) from None
        except Infeasible as exc:
            infeasible_reasons.append(str(exc))
            tried.append(Tried(steps + waves - 1, "infeasible", None, None))
            continue
        start = None
        if starts:
            encoded = [v for v in (form.encode(s) for s in starts) if v is not None]
            if encoded:
                start = min(encoded, key=form.model.objective)
        result = solve(
            form.model,
            solver=options.solver,
            time_limit=_share(budget, len(candidates) - position, best is not None),
            work_limit=_work_share(budget, len(candidates) - position, best is not None),
            warm_start=start,
            progress=progress,
            stop=budget.stop,
        )
        budget.spend(result.work)
        if result.status == "infeasible":
            infeasible_reasons.append(f"no schedule in {steps} step(s) (proven by the solver)")
            tried.append(Tried(form.num_steps, "infeasible", None, None))
            continue
        if not result.has_solution:
            tried.append(Tried(form.num_steps, "no schedule (" + (result.stopped_by or "stopped") + ")", None, None))
            if budget.exhausted():
                break
            continue
        outcome = _outcome(topology, collective, form, result, options, bm)
        tried.append(Tried(form.num_steps, _status_text(outcome), outcome.objective, outcome.time_us))
        starts.insert(0, outcome.schedule)
        if best is None or _better(outcome, best, objective):
            best = outcome
        if options.objective == "steps":
            break
        if outcome.meets_lower_bound:
            break
    if best is not None:
        best.tried = tried
    if best is None:
        if budget.stop.is_set():
            raise NotApplicable(f"interrupted before the ILP found a schedule for {collective.describe()}")
        if budget.exhausted():
            raise NotApplicable(
                f"the ILP found no schedule for {collective.describe()} within its limits; raise --work-limit or --time-limit"
            )
        why = "; ".join(infeasible_reasons[-2:]) or "no step count tried"
        raise NotApplicable(f"no schedule for {collective.describe()} with the steps tried ({why})")
    return best


def _share(budget: Budget, left: int, have_schedule: bool) -> float | None:
    """The time a solve may take: once a schedule is in hand, the rest of the budget is shared
    evenly by the step counts still to try, so a hard one cannot starve the others; before
    that, all of it."""
    remaining = budget.remaining()
    if remaining is None or not have_schedule:
        return remaining
    return max(0.01, remaining / max(1, left))


def _work_share(budget: Budget, left: int, have_schedule: bool) -> int | None:
    """The work a solve may do, shared like `_share`'s time: all that is left until a
    schedule is in hand, then an even share for each step count still to try. Integer
    arithmetic on counts the solver reports, so the shares are the same on any machine; at least
    1, so a solve can always take in its warm start."""
    if budget.work_left is None:
        return None
    if not have_schedule:
        return max(1, budget.work_left)
    return max(1, budget.work_left // max(1, left))


def _better(a: Outcome, b: Outcome, objective: str) -> bool:
    if objective == "rounds":
        return (a.rounds, a.time_us) < (b.rounds, b.time_us)
    return a.time_us < b.time_us - 1e-9


def _outcome(
    topology: Topology,
    collective: Collective,
    form: RouteModel,
    result: SolveResult,
    options: IlpOptions,
    bounds: BoundModel,
) -> Outcome:
    assert result.values is not None
    if isinstance(form, Formulation):
        transfers = [(*t, OP_COPY) for t in _cleanup(form.transfers(result.values), collective)]
    else:
        transfers = form.transfers(result.values)  # every transfer of a tree allreduce is needed
    rounds = form.rounds_of(result.values)
    params: dict[str, Any] = {
        "objective": options.objective,
        "steps_searched": form.num_steps,
        "status": result.status,
        "rounds": rounds,
        "solver": result.solver,
        "symmetry": form.group.order,
    }
    if options.objective in ("time", "steps"):
        params["size"] = int(options.size)
    if form.waves > 1:
        params["pipeline"] = {"stages": form.steps, "waves": form.waves}
    if result.status != "optimal":
        params["stopped_by"] = result.stopped_by
        if result.gap is not None:
            params["gap"] = round(result.gap, 6)
    schedule = _build_schedule(topology, collective, transfers, form.num_steps, params)
    check(schedule, topology)
    time_us = sync_time_us(schedule, topology, options.size)
    return Outcome(
        schedule=schedule,
        steps=schedule.num_steps,
        status=result.status,
        stopped_by=result.stopped_by,
        objective=float(result.objective if result.objective is not None else math.nan),
        bound=_known_bound(form, result, bounds, options),
        rounds=rounds,
        time_us=time_us,
        elapsed=result.elapsed,
        model=form.size_info,
        symmetry_order=form.group.order,
        meets_lower_bound=(
            rounds <= math.ceil(form.rounds_lower_bound(bounds) - 1e-6)
            if form.objective == "rounds"
            else time_us <= bounds.time_us(options.size) * (1 + 1e-6)
        ),
        restrictions=_restrictions(form),
    )


def _known_bound(form: RouteModel, result: SolveResult, bounds: BoundModel, options: IlpOptions) -> float | None:
    """The best lower bound known on the model's optimum: the solver's, or synth.bounds' when
    that is larger (a solve stopped early may not have one)."""
    physical = math.ceil(form.rounds_lower_bound(bounds) - 1e-6) if form.objective == "rounds" else bounds.time_us(options.size)
    if result.bound is None:
        return float(physical)
    return max(float(result.bound), float(physical))


def _restrictions(form: RouteModel) -> tuple[str, ...]:
    """What the model assumed beyond the collective's rules (an optimum is optimal among these)."""
    out = []
    if form.group.order > 1:
        out.append(f"invariant under {form.group.order} automorphisms")
    if isinstance(form, AllreduceFormulation):
        out.append("reducing each chunk along a tree into one root, then broadcasting it")
    if isinstance(form, Formulation) and form.waves > 1:
        per = f" of {form.template.chunks_per_piece} chunks" if form.template.chunks_per_piece > 1 else ""
        out.append(f"pipelined ({form.waves} waves{per}, one {form.steps}-stage template)")
    if truncated_pairs(form.topology):
        out.append(f"at most {MAX_ROUTES_PER_PAIR} routes per rank pair")
    return tuple(out)


# ============================================================================= every collective
def solve_collective(
    topology: Topology,
    collective: Collective,
    options: IlpOptions | None = None,
    *,
    progress: Callable[[Progress], bool | None] | None = None,
    stop: threading.Event | None = None,
) -> Outcome:
    """Solve any collective with the ILP and return the verified schedule with its proof status.

    allgather, gather, broadcast, scatter and alltoall are solved directly; reduce and
    reduce-scatter as the duals of broadcast and allgather on the reversed topology; allreduce as
    reduce-scatter then allgather, with k (chunks per piece) a multiple of the rank count.
    Step counts: ``options.steps`` if given; else for the time objective the latency bound up to
    `EXTRA_STEPS` more (stopping when more steps cannot help); for rounds and steps the latency
    bound (the fewest steps any schedule needs, always reachable since a step may carry any number
    of chunks), the steps objective then minimising time.
    """
    options = options or IlpOptions()
    budget = Budget(options.time_limit, stop, options.work_limit)
    kind = collective.kind
    if kind in DUAL:
        forward = solve_forward(
            topology.reversed(),
            Collective(DUAL[kind], collective.num_ranks, collective.chunks_per_piece, collective.root),
            options,
            progress=progress,
            budget=budget,
        )
        return dual_outcome(forward, collective, topology)
    if kind is Kind.ALLREDUCE:
        return _allreduce(topology, collective, options, budget, progress)
    return solve_forward(topology, collective, options, progress=progress, budget=budget)


def _allreduce(
    topology: Topology,
    collective: Collective,
    options: IlpOptions,
    budget: Budget,
    progress: Callable[[Progress], bool | None] | None,
) -> Outcome:
    """Allreduce as reduce-scatter then allgather ("composed", k a multiple of R), with the direct
    tree model (`synth.ilp.allreduce`), or ("auto") composed first, then the direct model started
    from it when that model is small, keeping the faster."""
    r, k = collective.num_ranks, collective.chunks_per_piece
    mode = options.allreduce
    composed = None
    if mode in ("auto", "composed"):
        if k % r == 0:
            composed = _composed_allreduce(topology, collective, options, budget, progress)
        elif mode == "composed":
            raise NotApplicable(
                "ilp allreduce runs reduce-scatter then allgather, so --chunks must be a multiple of the rank count "
                f"{r} (got {k}); or use the direct allreduce model"
            )
    fewest_steps = options.objective == "steps"
    if mode == "composed" or (composed is not None and (budget.exhausted() or composed.meets_lower_bound)):
        return composed  # type: ignore[return-value]
    routes = enumerate_routes(topology)
    if composed is not None and not fewest_steps:
        # start from the composed schedule: same number of steps, so it is a warm start
        steps = composed.steps
        if 2 * k * len(routes) * steps > DIRECT_ALLREDUCE_MAX_VARIABLES and mode == "auto":
            return composed
        direct_options = replace(options, steps=steps, pipeline=None)
    else:
        direct_options = replace(options, pipeline=None)
    group = find_symmetry(topology) if options.symmetry else None
    bm = bound_model(topology, Kind.ALLREDUCE)
    objective = "time" if options.objective == "steps" else options.objective

    def build(steps: int) -> AllreduceFormulation:
        form = AllreduceFormulation(
            topology,
            collective,
            steps,
            objective=objective,
            size=options.size,
            routes=routes,
            bounds=bm,
            max_variables=MAX_VARIABLES,
            group=group,
        )
        too_big = form.model.num_nonzeros > DIRECT_ALLREDUCE_MAX_NONZEROS_UNDER_WORK_LIMIT
        if mode == "auto" and composed is not None and options.work_limit is not None and too_big:
            raise NotApplicable("the direct allreduce model is too large for a work-limited search; kept the composed one")
        return form

    starts = [composed.schedule] if composed is not None else []
    try:
        direct = _search(
            topology, collective, direct_options, minimum_allreduce_steps(topology), build, starts, 1, bm, budget, progress
        )
    except NotApplicable:
        if composed is None:
            raise
        return composed
    if composed is None:
        return direct
    if fewest_steps:
        return direct if (direct.steps, direct.time_us) < (composed.steps, composed.time_us) else composed
    return direct if _better(direct, composed, objective) else composed


def _composed_allreduce(
    topology: Topology,
    collective: Collective,
    options: IlpOptions,
    budget: Budget,
    progress: Callable[[Progress], bool | None] | None,
) -> Outcome:
    """Reduce-scatter then allgather, each solved with ``options`` (steps per phase)."""
    r, k = collective.num_ranks, collective.chunks_per_piece
    per_piece = k // r
    allgather = Collective(Kind.ALLGATHER, r, per_piece)
    ag = solve_forward(topology, allgather, options, progress=progress, budget=budget)
    if topologies_equal(topology, topology.reversed()):
        rs = dual_outcome(ag, Collective(Kind.REDUCE_SCATTER, r, per_piece), topology)  # same machine both ways
    else:
        rs = dual_outcome(
            solve_forward(topology.reversed(), allgather, options, progress=progress, budget=budget),
            Collective(Kind.REDUCE_SCATTER, r, per_piece),
            topology,
        )
    params = {
        "phases": ["reduce-scatter", "allgather"],
        "reduce_scatter": dict(rs.schedule.params),
        "allgather": dict(ag.schedule.params),
    }
    schedule = concat([rs.schedule, ag.schedule], collective, NAME, params)
    check(schedule, topology)
    status = "optimal" if rs.status == ag.status == "optimal" else "feasible"
    time_us = sync_time_us(schedule, topology, options.size)
    return Outcome(
        schedule=schedule,
        steps=schedule.num_steps,
        status=status,
        stopped_by=ag.stopped_by or rs.stopped_by,
        objective=rs.objective + ag.objective,
        bound=None if rs.bound is None or ag.bound is None else rs.bound + ag.bound,
        rounds=rs.rounds + ag.rounds,
        time_us=time_us,
        elapsed=time.perf_counter() - budget.start,
        model=ag.model,
        symmetry_order=ag.symmetry_order,
        meets_lower_bound=time_us <= bound_model(topology, Kind.ALLREDUCE).time_us(options.size) * (1 + 1e-6),
        restrictions=tuple(dict.fromkeys(("composed as reduce-scatter then allgather", *rs.restrictions, *ag.restrictions))),
        phases=[rs, ag],
    )


def dual_outcome(forward: Outcome, reduction: Collective, topology: Topology) -> Outcome:
    """The reduction dual to a forward schedule solved on the reversed topology; it costs the
    same (every link's load moves to its reverse, which has the same bandwidth and α)."""
    params = dict(forward.schedule.params)
    params["dual_of"] = forward.schedule.collective.kind.value
    schedule = dual_reduction(forward.schedule, reduction, NAME, params)
    check(schedule, topology)
    return replace(forward, schedule=schedule)


def _status_text(outcome: Outcome) -> str:
    if outcome.status != "optimal":
        gap = outcome.gap
        return f"not proven optimal ({outcome.stopped_by or 'stopped'}{f', gap {100 * gap:.2f}%' if gap is not None else ''})"
    if outcome.meets_lower_bound:
        return "proven optimal (meets the lower bound)"
    if outcome.restrictions:
        return f"proven optimal among schedules {' and '.join(outcome.restrictions)}"
    return "proven optimal"


def describe(outcome: Outcome) -> str:
    """One line: steps, rounds, status (with gap and what cut the search); for a search over
    step counts, the status is for the step count of the schedule (see ``Outcome.tried``)."""
    steps = f"{outcome.steps} step" + ("s" if outcome.steps != 1 else "")
    text = f"{steps}, {outcome.rounds} rounds, {_status_text(outcome)}"
    if len(outcome.tried) > 1:
        text += f" for {steps}"
    return text


__all__ = [
    "DEFAULT_SIZE",
    "DEFAULT_TIME_LIMIT",
    "IlpOptions",
    "Outcome",
    "Tried",
    "describe",
    "minimum_steps",
    "solve_collective",
    "solve_forward",
    "sync_time_us",
]
