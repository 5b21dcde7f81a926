"""Greedy synthesizer: event-driven link–chunk matching over the topology's real links, step by step.

Every step, every channel (a direct link, or a path through switches) with room on its links
carries a chunk that its source holds and that its destination, or a rank beyond it, still needs:
the chunk the most ranks still lack, or, for chunks with one destination, the one farthest from it
(`synth.algorithms.engines.greedy_engine`). A link b times faster than the slowest carries b chunks per
step, so one step lasts about one chunk over the slowest link and every link stays busy: this is
TACOS's greedy on a time-expanded network, in the step-synchronous cost
(docs/formats.md, 'Step-synchronous cost').

allgather, broadcast, gather, scatter and alltoall run the engine directly; reduce-scatter and
reduce are the duals of allgather and broadcast on the reversed topology; allreduce is
reduce-scatter followed by allgather. Heterogeneous links, switches and oversubscribed uplinks are
all just link capacities.

Options (``synth synthesize -m greedy``): ``seed`` (default 0; ties are broken by a random order
from it, so a seed always gives the same schedule), ``seeds`` (try that many seeds from ``seed``
on and keep the fastest), ``size`` (bytes; without ``--chunks``, try chunk counts and link-room
multipliers and keep the fastest at that size; seeds are compared at ``size``, or 1 GiB without it),
``progress`` (a callable ``(done, total)``, library only), ``engine`` (an `EngineOptions`: the engine's
mode thresholds and knobs, library only; tests use it to reach the modes of thousands of ranks),
``beat_us`` (library only, what `synth.selection` passes: the best time found so far at ``size``,
or 1 GiB without it; `synth.errors.CannotBeat` when greedy's schedule is slower, and a single run
stops as soon as its steps so far take longer; the search stops before a run when the fastest run
so far and a lower bound on every run it may still make are slower, `_Hopeless`). Within the
search of chunk counts, link-room multipliers and seeds, every run after the first stops as soon
as its steps so far take longer than the fastest run so far
(`synth.algorithms.engines.size_tuning.TimeLimit`): it would not have been kept, so the search
chooses exactly as it would without stopping it, and the runs that lose cost a part of a run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from synth.algorithms.engines.builders import dispatcher, with_reductions
from synth.algorithms.engines.greedy_engine import EngineOptions, Plan, disseminate, link_capacity
from synth.algorithms.engines.greedy_engine.step_bound import StepBound
from synth.algorithms.engines.path_channels import channels_for
from synth.algorithms.engines.size_tuning import TimeLimit, beat_option, check_options, predicted_us
from synth.collective import Collective, Kind
from synth.errors import CannotBeat
from synth.method import Method, ranks_for_allreduce
from synth.routing import Router, router_for
from synth.schedule import Schedule
from synth.topology import Topology

NAME = "greedy"
OPTIONS = frozenset({"seed", "seeds", "size", "progress", "engine", "beat_us"})

#: size at which seeds are compared when no size is given
REFERENCE_SIZE = 1 << 30
#: a chunk-count search stops before schedules of more transfers than this
TRANSFER_BUDGET = 4_000_000
#: the link-room multipliers a size search tries: 1 with every chunk count, the others with the
#: chunk count it chose
QUANTUMS = (1, 2, 4, 8, 16, 32, 64)
#: a lower bound must exceed the time to beat by this much more (relative) than a run's own time
#: must (`TimeLimit.SLACK`) to give up on it: the simulator adds a step's α and bytes in another order
BOUND_MARGIN = 1e-6

Progress = Callable[[int, int], None]


def _forward(plan: Plan, progress: Progress | None, limit: TimeLimit | None):
    def build(topology: Topology, collective: Collective, router: Router) -> Schedule:
        channels = channels_for(topology)
        _, ref = link_capacity(topology, channels, plan.quantum)
        params = {
            "seed": plan.seed,
            "quantum": plan.quantum,
            "reference_gbps": ref,
            "channels": channels.count,
            "all_pairs": channels.complete,
        }
        return disseminate(topology, collective, channels, plan, NAME, params, progress, limit=limit)

    return build


def builders(plan: Plan, progress: Progress | None = None, limit: TimeLimit | None = None) -> dict[Kind, Callable[..., Schedule]]:
    """The builder of every collective for one greedy set-up; with ``limit``, every step of the
    schedule (of both phases of an allreduce, of the dual's forward run) is added to it."""
    forward = _forward(plan, progress, limit)
    return with_reductions(
        NAME,
        {kind: forward for kind in (Kind.ALLGATHER, Kind.BROADCAST, Kind.GATHER, Kind.SCATTER, Kind.ALLTOALL)},
    )


COLLECTIVES = frozenset(builders(Plan()))


def _option_int(options: Mapping[str, Any], name: str, default: int | None, minimum: int) -> int | None:
    value = options.get(name, default)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"greedy option {name} must be an integer >= {minimum}, got {value!r}")
    return value


def chunk_candidates(kind: Kind, ranks: int) -> list[int]:
    """Chunks per piece tried for a size, smallest first (a collective's transfers grow with it)."""
    if kind in (Kind.BROADCAST, Kind.REDUCE):
        return [1, 2, 4, 8, 16, 32, 64, 128]
    per_unit = ranks * (ranks - 1) if kind is not Kind.ALLTOALL else ranks * ranks * max(ranks - 1, 1)
    out = []
    for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32):
        if k > 1 and per_unit * k * (2 if kind is Kind.ALLREDUCE else 1) > TRANSFER_BUDGET:
            break
        out.append(k)
    return out


def _collective(kind: Kind, ranks: int, k: int, root: int | None) -> Collective:
    return Collective(kind, ranks, ranks * k if kind is Kind.ALLREDUCE else k, root)


def synthesize(topology: Topology, collective: Collective, router: Router | None = None, **options: Any) -> Schedule:
    """Greedy schedule for ``collective`` on ``topology`` (see the module docstring for options;
    ``requested_chunks`` None lets it choose the chunk count for ``size``)."""
    check_options(NAME, options, OPTIONS)
    seed = _option_int(options, "seed", 0, 0)
    seeds = _option_int(options, "seeds", 1, 1)
    size = _option_int(options, "size", None, 1)
    progress = options.get("progress")
    engine = options.get("engine", EngineOptions())
    if not isinstance(engine, EngineOptions):
        raise ValueError(f"greedy option engine must be an EngineOptions, got {engine!r}")
    beat = beat_option(NAME, options)
    router = router or router_for(topology)
    choose = size is not None and options.get("requested_chunks", collective.chunks_per_piece) is None
    kind, r = collective.kind, collective.num_ranks
    measure_at = size if size is not None else REFERENCE_SIZE

    def build(coll: Collective, plan: Plan, limit: TimeLimit | None) -> Schedule:
        return dispatcher(NAME, builders(plan, progress, limit))(topology, coll, router)

    best: tuple[float, int, Schedule, Collective, Plan] | None = None
    stopped: list[str] = []
    hopeless = _Hopeless(topology, collective, beat, measure_at)

    compare = choose or seeds > 1
    alone = not compare

    def consider(coll: Collective, plan: Plan) -> bool:
        nonlocal best
        # A run stops once it is slower than the fastest run so far: it would not have been kept,
        # so the search goes on as it would have. Before any run finished, a run slower than
        # ``beat_us`` may still be the search's first best, which decides the chunk count the
        # link-room multipliers are tried at: only a run that is all the search makes may stop
        # at ``beat_us`` then.
        to_beat = best[0] if best is not None else (beat if alone else math.inf)
        limit = None if to_beat == math.inf else TimeLimit(to_beat, coll.chunk_bytes(measure_at), measure_at)
        try:
            schedule = build(coll, plan, limit)
        except CannotBeat as exc:
            stopped.append(str(exc))
            return False
        time = predicted_us(schedule, topology, [measure_at])[0] if compare else 0.0
        better = best is None or (time, schedule.num_transfers) < (best[0], best[1])
        if better:
            best = (time, schedule.num_transfers, schedule, coll, plan)
        return better

    def give_up(left: list[tuple[Collective, int]]) -> None:
        """CannotBeat when the fastest schedule so far and every run ``left`` (the runs the search
        may still make, or more) are certainly slower than ``beat_us`` (`_Hopeless`)."""
        so_far = None if best is None else best[0]
        reason = hopeless.reason(so_far, left)
        if reason is not None:
            raise CannotBeat(f"greedy: {reason}")

    base = Plan(seed=seed, engine=engine)
    if choose:
        candidates = [_collective(kind, r, k, collective.root) for k in chunk_candidates(kind, r)]
        later = [(coll, q) for coll in candidates for q in QUANTUMS[1:]]  # whichever count is chosen
        misses = 0
        for i, coll in enumerate(candidates):
            give_up([(c, 1) for c in candidates[i:]] + later)
            misses = 0 if consider(coll, base) else misses + 1
            if misses == 2:
                break
        assert best is not None  # the first run has no time to beat
        k_best = best[3]
        misses = 0
        for i, quantum in enumerate(QUANTUMS[1:], start=1):
            if misses == 2:
                break
            give_up([(k_best, q) for q in QUANTUMS[i:]])
            misses = 0 if consider(k_best, replace(base, quantum=quantum)) else misses + 1
    else:
        give_up([(collective, 1)])
        consider(collective, base)
    if best is None:
        raise CannotBeat(f"greedy: {stopped[0]}")
    if best[0] > beat * (1 + TimeLimit.SLACK):
        raise CannotBeat(f"greedy: cannot beat {beat:.3f} us at {measure_at} B: its fastest schedule takes {best[0]:.3f} us")
    for extra in range(seed + 1, seed + seeds):
        consider(best[3], replace(best[4], seed=extra))
    schedule = best[2]
    if choose or seeds > 1:
        params = dict(schedule.params)
        params["chosen_at_size"] = measure_at
        params["seeds_tried"] = seeds
        schedule = replace(schedule, params=params)
    return schedule


class _Hopeless:
    """Whether greedy can still beat ``beat_us`` at ``size``, from `StepBound`: a lower bound on
    the step-synchronous time of every schedule the engine makes for a collective at a link-room
    multiplier, known before making it (its module docstring and docs/scalable.md, greedy's
    "Giving up on a time to beat", give the argument).
    The search's result is the fastest of its runs, and CannotBeat when that is slower than
    ``beat_us`` (by more than `TimeLimit.SLACK`); so when the fastest run so far and the bound of
    every run the search may still make are all slower, the result is CannotBeat whatever those
    runs would give, and the search gives up before making them. Only with a time to beat, for
    the collectives the engine makes directly (a reduction's bound is 0) on machines whose tables
    fit (`StepBound.fits`); the bound is built on first use and kept per (chunks per piece,
    multiplier)."""

    def __init__(self, topology: Topology, collective: Collective, beat_us: float, size: int):
        self.topology = topology
        self.beat_us = beat_us
        self.size = size
        self.active = beat_us < math.inf and not collective.is_reduction
        self.bound: StepBound | None = None
        self.known: dict[tuple[int, int], float] = {}
        self.threshold = beat_us * (1 + TimeLimit.SLACK)

    def time_us(self, collective: Collective, quantum: int) -> float:
        key = (collective.chunks_per_piece, quantum)
        found = self.known.get(key)
        if found is None:
            if self.bound is None:
                channels = channels_for(self.topology)
                if not StepBound.fits(self.topology, channels):
                    self.active = False  # no bound on a machine this large: the search as before
                    return 0.0
                self.bound = StepBound(self.topology, channels)
            found = self.known[key] = self.bound.time_us(collective, quantum, self.size)
        return found

    def reason(self, so_far: float | None, left: list[tuple[Collective, int]]) -> str | None:
        """Why greedy cannot beat the time, when the fastest run so far (``so_far``, None before
        the first) and the lower bound of every run in ``left`` are slower; else None."""
        if not self.active or (so_far is not None and not so_far > self.threshold):
            return None
        least = math.inf
        for collective, quantum in left:
            bound = self.time_us(collective, quantum)
            if not bound * (1 - BOUND_MARGIN) > self.threshold:
                return None
            least = min(least, bound)
        done = [] if so_far is None else [f"its fastest schedule so far takes {so_far:.3f} us"]
        if left:
            done.append(f"every run it has left takes at least {least:.3f} us (a lower bound on its steps)")
        return f"cannot beat {self.beat_us:.3f} us at {self.size} B: {' and '.join(done)}"


METHOD = Method(
    name=NAME,
    summary="event-driven link-chunk matching over the real links, rarest chunk first (scales to thousands of ranks)",
    family="scalable",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=ranks_for_allreduce,
    options=OPTIONS,
    chooses_chunks=True,
    # whole `synth synthesize` processes of 4,096-rank allgathers peak at 62-64 bytes per
    # transfer (engine state, columns, verifier: benchmarks/scale.py)
    memory_per_transfer=64,
)
