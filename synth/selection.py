"""Choosing among methods, written once: which candidates to run for a collective and sizes, run
them (verified), time them, rank them, explain the choice, and say what was left out and why.

`synth compare` (`synth.compare`), the ``auto`` method (`auto_method`), the report and the
benchmark suite all go through `select`, so `synth compare` and ``-m auto`` rank the same
candidates the same way. This module takes the candidate `Method` objects as a parameter; it never
looks methods up (the registry, `synth.registry`, sits above it and builds ``auto`` with
`auto_method` over its own table).

The candidates for a collective and a list of sizes (`plan`), in the order of the methods given:

- the baselines (families ``classic`` and ``nccl``) once each: cheap, and always run, so the
  choice is never worse than the best of them;
- methods that tune themselves for a size (those with a ``size`` option: greedy, packing,
  scatter-allgather, hierarchical) once per size asked, at most `TUNED_SIZES` of them (the
  smallest, the middle one and the largest), labelled ``greedy@1MiB``;
- exact solvers (family ``exact``: the ILP) only on machines of at most `EXACT_RANKS` ranks, once
  per tuned size with a fixed work limit (`EXACT_WORK` each, counted by the solver, so the same
  inputs give the same schedule on a quiet or a loaded machine) and a share of the time left as a
  safety net (at most `EXACT_SECONDS` each), plus, when the
  largest size is at least `PIPELINE_FROM` and the caller left the chunk count free, a pipelined
  schedule (``ilp@1GiB/pipelined``: `PIPELINE_WAVES` waves of `wave_chunks` chunks following one
  `PIPELINE_STAGES`-step template, docs/ilp.md).

`plan` puts them in the order of what they cost (`COST_ORDER`, by family, whatever the methods
are: the baselines first, then the self-tuning synthesizers, then exact solvers), so that the
expensive ones run when a good time is already known. With ``prune`` (auto at one size, in the
step-synchronous model) that time is used twice, both ways exact: once the best time found meets
the lower bound (`synth.bounds`) no schedule can be faster, and the runs left are skipped, saying
so; and a method that takes the option `BEAT_OPTION` is given the best time so far, which it may
use to stop building a schedule that is already slower (`synth.errors.CannotBeat`: it is
skipped, saying so, with the seconds it took).

`select` runs them through `Method.synthesize` (so every schedule is verified), times each run
(wall seconds), predicts every schedule's time at every size with the simulator (the
step-synchronous model of docs/formats.md, 'Step-synchronous cost', unless asked otherwise) and drops a schedule that repeats an
earlier one of the same method (a method that ignores the size here). Once ``budget`` seconds are
spent only the baselines still run. Ranking (`Selection.ranked`): for one size the fastest; for
several, the smallest geometric mean of the time relative to the fastest candidate at each size
(so no single size dominates); ties go to fewer transfers, then the label. At one size
(`Selection.ranked_at`) the fastest, ties alike.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from synth.bounds import bound_model
from synth.collective import Collective, Kind
from synth.errors import CannotBeat, NotApplicable
from synth.method import Method, ranks_for_allreduce
from synth.routing import Router
from synth.schedule import Schedule, same_transfers
from synth.simulate import Simulator
from synth.topology import Topology
from synth.units import format_size

#: a self-tuning method is run for at most this many of the sizes asked (smallest, middle, largest)
TUNED_SIZES = 3
#: seconds after which only the baselines still run
DEFAULT_BUDGET = 120.0
#: the families that always run (cheap, and the floor of every choice)
BASELINE_FAMILIES = frozenset({"classic", "nccl"})
#: exact solvers run on machines of at most this many ranks
EXACT_RANKS = 8
#: an exact run's work limit (`synth.ilp.solve.WORK_UNITS`, shared by its solves): what
#: normally ends a run that is not proven optimal first. A count, not seconds, so where it cuts
#: the search does not depend on the machine's speed or load and auto's output is reproducible
EXACT_WORK = 2000
#: an exact run's time limit: only a safety net (a run whose root node alone is very slow), far
#: above what `EXACT_WORK` normally takes, since a run it cuts may give another schedule on
#: another run; a run gets at most this, and at least `EXACT_MIN_SECONDS`, of the budget left
EXACT_SECONDS = 60.0
EXACT_MIN_SECONDS = 10.0
#: at the largest size asked, if at least this big, an exact solver is also asked for a pipelined
#: schedule: `PIPELINE_WAVES` waves of w chunks per piece following one `PIPELINE_STAGES`-step
#: template (docs/ilp.md), w from `wave_chunks`
PIPELINE_FROM = 1 << 20
PIPELINE_STAGES = 3
PIPELINE_WAVES = 8

#: the order runs go in, by the method's family (`synth.method.FAMILIES`): what a run costs
#: grows along it (baselines: a fraction of a second; self-tuning synthesizers: seconds; exact
#: solvers: their time limit), so the cheap runs give a time to beat before the costly ones run
COST_ORDER = ("classic", "nccl", "scalable", "exact")
#: the option through which `select` (with ``prune``) gives a method the time to beat (µs, at the
#: one size asked); a method takes it by listing it in its options
BEAT_OPTION = "beat_us"
#: the best time counts as meeting the lower bound within this relative tolerance
BOUND_TOLERANCE = 1e-9

#: the ``auto`` method: its name, its options, and the size it is for when given none
AUTO = "auto"
AUTO_OPTIONS = frozenset({"size", "sizes", "budget", "progress", "timings"})
REFERENCE_SIZE = 1 << 30

#: ``progress(done, total, label)``: called after each run (``label`` the run just finished)
ProgressCallback = Callable[[int, int, str], None]


def tuning_sizes(sizes: Sequence[int]) -> list[int]:
    """The sizes a self-tuning method is synthesized for: all of them when there are at most
    `TUNED_SIZES`, else the smallest, the middle one and the largest (each size then gets the
    best of these schedules)."""
    distinct = sorted(set(sizes))
    if len(distinct) <= TUNED_SIZES:
        return distinct
    return [distinct[0], distinct[len(distinct) // 2], distinct[-1]]


def wave_chunks(topology: Topology) -> int:
    """Chunks per wave for a pipelined exact schedule: as many as the slowest link's share of the
    busiest rank's ingress (a DGX-1: 150 GB/s over 25 GB/s links = 6, so its four NVLink
    neighbours can each carry a whole number of chunks per step in proportion to their
    bandwidth), between 1 and 8."""
    slowest = min(link.bandwidth for link in topology.links)
    ingress = max(topology.rank_ingress(v) for v in range(topology.num_ranks))
    return max(1, min(8, round(ingress / slowest)))


@dataclass(frozen=True)
class Run:
    """One planned synthesis: ``method`` with ``options`` (``size`` for a tuned run) and ``chunks``
    per piece (None: the method's default or choice)."""

    label: str
    method: Method
    options: Mapping[str, Any] = field(default_factory=dict)
    chunks: int | None = None
    #: the size the run is tuned for, if any
    size: int | None = None

    @property
    def exact(self) -> bool:
        return self.method.family == "exact"


@dataclass(frozen=True)
class Candidate:
    """A verified schedule and its predicted time at every size of the selection."""

    label: str
    #: the name of the method that made it
    method: str
    schedule: Schedule = field(repr=False)
    times_us: tuple[float, ...]
    #: wall seconds to synthesize and verify it
    seconds: float
    #: the sizes it was synthesized for (several when runs for several sizes gave this schedule);
    #: empty for a method that does not tune itself
    tuned_for: tuple[int, ...] = ()

    def key_at(self, index: int) -> tuple[float, int, str]:
        """The order at one size: fastest, then fewer transfers, then the label."""
        return (self.times_us[index], self.schedule.num_transfers, self.label)


@dataclass(frozen=True)
class Selection:
    """What `select` ran and found: the candidates best first, the wall seconds of every run that
    gave a schedule (a repeated schedule too) or stopped because it could not beat the best time
    (`synth.errors.CannotBeat`), and what was left out, with why, in run order."""

    kind: Kind
    sizes: tuple[int, ...]
    model: str
    ranked: tuple[Candidate, ...]
    seconds: tuple[tuple[str, float], ...]
    skipped: tuple[tuple[str, str], ...]

    @property
    def chosen(self) -> Candidate:
        if not self.ranked:
            raise NotApplicable(f"no method serves {self.kind.value} here ({'; '.join(f'{k}: {v}' for k, v in self.skipped)})")
        return self.ranked[0]

    def ranked_at(self, index: int) -> list[Candidate]:
        """The candidates at size ``sizes[index]``, fastest first (ties: fewer transfers, label)."""
        return sorted(self.ranked, key=lambda c: c.key_at(index))

    def explanation(self, bounds_us: Sequence[float]) -> list[str]:
        """A few lines: what was chosen, how far from the bound, and how the runners-up compare (at
        the smallest, middle and largest size when more were asked)."""
        sizes = self.sizes
        chosen = self.chosen
        times = chosen.times_us
        shown = sorted({0, len(sizes) // 2, len(sizes) - 1})
        where = ", ".join(
            f"{format_size(sizes[i])}: {times[i]:.3f} us ({times[i] / bounds_us[i]:.3f}x the lower bound {bounds_us[i]:.3f} us)"
            for i in shown
        )
        why = "the fastest" if len(sizes) == 1 else f"over {len(sizes)} sizes the best geometric mean relative to the fastest"
        lines = [f"auto chose {chosen.label}, {why} of {len(self.ranked)} candidates: {where}"]
        for other in self.ranked[1:4]:
            rel = ", ".join(f"{format_size(sizes[i])} {other.times_us[i] / times[i]:.3f}x" for i in shown)
            lines.append(f"  then {other.label}: {rel} of the chosen time")
        return lines


def plan(
    methods: Sequence[Method],
    topology: Topology,
    kind: Kind,
    sizes: Sequence[int],
    *,
    chunks: int | None = None,
    exact: bool = True,
) -> tuple[list[Run], list[tuple[str, str]]]:
    """The runs `select` makes for ``methods`` (in their order; a method that does not serve
    ``kind`` is no candidate), and what is left out before running, with why. ``exact`` False
    leaves exact solvers out."""
    runs: list[Run] = []
    skipped: list[tuple[str, str]] = []
    r = topology.num_ranks
    tuned = tuning_sizes(sizes)
    for method in methods:
        if not method.serves(kind):
            continue
        if method.family == "exact":
            if not exact:
                skipped.append(
                    (method.name, "an exact solver with a time limit, left out here (its result depends on the time it gets)")
                )
                continue
            if r > EXACT_RANKS:
                skipped.append((method.name, f"an exact solver, run on machines of up to {EXACT_RANKS} ranks (this one has {r})"))
                continue
        if method.tunes_for_size:
            runs += [Run(f"{method.name}@{format_size(s)}", method, {"size": s}, chunks, s) for s in tuned]
        else:
            runs.append(Run(method.name, method, {}, chunks))
        if method.family == "exact" and chunks is None and max(sizes) >= PIPELINE_FROM:
            w = wave_chunks(topology)
            k = w * PIPELINE_WAVES * (r if kind is Kind.ALLREDUCE else 1)
            largest = max(sizes)
            options = {"size": largest, "pipeline": PIPELINE_STAGES, "wave_chunks": w}
            runs.append(Run(f"{method.name}@{format_size(largest)}/pipelined", method, options, k, largest))
    runs.sort(key=lambda run: cost_rank(run.method))  # stable: the methods' order within a family
    return runs, skipped


def cost_rank(method: Method) -> int:
    """Where a method's runs go in `plan`'s order (`COST_ORDER`; a family not listed goes last)."""
    family = method.family
    return COST_ORDER.index(family) if family in COST_ORDER else len(COST_ORDER)


def select(
    methods: Sequence[Method],
    topology: Topology,
    kind: Kind | str,
    sizes: Sequence[int],
    *,
    root: int | None = None,
    chunks: int | None = None,
    router: Router | None = None,
    model: str = "sync",
    budget: float = DEFAULT_BUDGET,
    exact: bool = True,
    progress: ProgressCallback | None = None,
    prune: bool = False,
) -> Selection:
    """Run the candidates of `plan`, verified, predict their times at ``sizes`` with the simulator
    (``model``), and rank them (the module says how). Once ``budget`` seconds are spent only the
    baselines run; an exact solver's runs each get `EXACT_WORK` of work and, as a safety net,
    a share of the time left (at most `EXACT_SECONDS` each, at least `EXACT_MIN_SECONDS`).
    ``progress(done, total, label)`` is called after each run. ``prune`` (used at one size in the
    step-synchronous model, else ignored): skip what cannot beat the best time found
    (the module says how); the chosen time is the same as without it."""
    kind = Kind(kind)
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise ValueError("select needs at least one size")
    runs, skipped = plan(methods, topology, kind, sizes, chunks=chunks, exact=exact)
    prune = prune and len(sizes) == 1 and model == "sync"
    floor_us = bound_model(topology, kind, root).time_us(sizes[0]) if prune else 0.0
    started = time.monotonic()
    found: list[Candidate] = []
    seconds: list[tuple[str, float]] = []
    by_method: dict[str, list[Run]] = {}
    for run in runs:
        by_method.setdefault(run.method.name, []).append(run)
    done = 0
    for name, method_runs in by_method.items():
        method = method_runs[0].method
        spent = time.monotonic() - started
        best_us = min((c.times_us[0] for c in found), default=math.inf)
        if prune and best_us <= floor_us * (1 + BOUND_TOLERANCE):
            skipped.append((name, f"not run: the best time found, {best_us:.3f} us, meets the lower bound"))
            done += len(method_runs)
            if progress is not None:
                progress(done, len(runs), name)
            continue
        if method.family not in BASELINE_FAMILIES and spent > budget:
            skipped.append((name, f"time budget of {budget:g} s spent"))
            done += len(method_runs)
            if progress is not None:
                progress(done, len(runs), name)
            continue
        if method.family == "exact":
            # the work limit decides where a run stops; the time share (which depends on the
            # time spent so far) only bounds a run the work limit does not
            share = max(EXACT_MIN_SECONDS, min(EXACT_SECONDS, (budget - spent) / len(method_runs)))
            limits = {"time_limit": share, "work_limit": EXACT_WORK}
            method_runs = [replace(run, options={**run.options, **limits}) for run in method_runs]
        for run in method_runs:
            options = dict(run.options)
            best_us = min((c.times_us[0] for c in found), default=math.inf)
            if prune and BEAT_OPTION in method.options and best_us < math.inf:
                options[BEAT_OPTION] = best_us
            t0 = time.perf_counter()
            try:
                schedule = method.synthesize(topology, kind, root=root, chunks=run.chunks, router=router, options=options or None)
                elapsed = time.perf_counter() - t0
            except CannotBeat as exc:
                seconds.append((run.label, time.perf_counter() - t0))
                skipped.append((run.label, str(exc)))
                continue
            except NotApplicable as exc:
                skipped.append((run.label, str(exc)))
                continue
            finally:
                done += 1
                if progress is not None:
                    progress(done, len(runs), run.label)
            seconds.append((run.label, elapsed))
            tuned = () if run.size is None else (run.size,)
            same = [
                j for j, c in enumerate(found) if c.schedule.method == schedule.method and same_transfers(c.schedule, schedule)
            ]
            if same:  # a method that ignores the size here gave the same again
                found[same[0]] = replace(found[same[0]], tuned_for=found[same[0]].tuned_for + tuned)
                continue
            times = tuple(r.time_us for r in Simulator(schedule, topology).run(list(sizes), model, timeline=False))
            found.append(Candidate(run.label, method.name, schedule, times, elapsed, tuned))
    return Selection(kind, sizes, model, tuple(_rank(found, sizes)), tuple(seconds), tuple(skipped))


def _rank(candidates: list[Candidate], sizes: tuple[int, ...]) -> list[Candidate]:
    if not candidates:
        return []
    best_at = [min(c.times_us[i] for c in candidates) for i in range(len(sizes))]

    def merit(c: Candidate) -> tuple[float, int, str]:
        ratios = [t / b if b > 0 else 1.0 for t, b in zip(c.times_us, best_at)]
        return (math.exp(sum(math.log(x) for x in ratios) / len(ratios)), c.schedule.num_transfers, c.label)

    return sorted(candidates, key=merit)


# ============================================================================= the auto method
def auto_sizes(options: Mapping[str, Any]) -> list[int]:
    """The sizes auto chooses for: ``size`` or ``sizes`` (bytes), sorted, default `REFERENCE_SIZE`."""
    if options.get("sizes") is not None and options.get("size") is not None:
        raise ValueError("give auto either size or sizes, not both")
    sizes = options.get("sizes")
    if sizes is None:
        sizes = [options["size"]] if options.get("size") is not None else [REFERENCE_SIZE]
    sizes = sorted(set(sizes))
    if not sizes or any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in sizes):
        raise ValueError(f"auto sizes must be positive integers, got {sizes!r}")
    return sizes


def auto_method(candidates: Sequence[Method]) -> Method:
    """The ``auto`` method over ``candidates``: `select` at the size(s) asked, the best schedule,
    and in its ``params`` what was chosen, every candidate's predicted times, the lower bound, what
    was skipped and why, and ``explanation`` (a few lines; the command line prints them). The wall
    seconds of each candidate run go to the ``timings`` callable, not into the schedule: the same
    inputs give a byte-identical file.

    Options: ``size`` or ``sizes`` (bytes; default 1 GiB), ``budget`` (seconds, default
    `DEFAULT_BUDGET`), ``progress`` (a callable ``(done, total)`` called after each candidate run;
    library only), ``timings`` (a callable given ``{run label: wall seconds}`` once the runs are
    done; library only)."""
    table = tuple(m for m in candidates if m.name != AUTO)

    def build(topology: Topology, collective: Collective, router: Router | None = None, **options: Any) -> Schedule:
        unknown = sorted(set(options) - AUTO_OPTIONS - {"requested_chunks"})
        if unknown:
            raise TypeError(f"{AUTO} takes no option(s) {', '.join(unknown)}")
        sizes = auto_sizes(options)
        user_progress = options.get("progress")
        selection = select(
            table,
            topology,
            collective.kind,
            sizes,
            root=collective.root,
            chunks=options.get("requested_chunks", collective.chunks_per_piece),
            router=router,
            budget=float(options.get("budget", DEFAULT_BUDGET)),
            progress=None if user_progress is None else (lambda done, total, _label: user_progress(done, total)),
            prune=True,
        )
        if options.get("timings") is not None:
            options["timings"](dict(selection.seconds))
        chosen = selection.chosen
        bounds = [bound_model(topology, collective.kind, collective.root).time_us(s) for s in sizes]
        params = {
            "chosen": chosen.label,
            "chosen_method": chosen.schedule.method,
            "chosen_params": dict(chosen.schedule.params),
            "sizes": sizes,
            "predicted_us": {c.label: [round(t, 3) for t in c.times_us] for c in selection.ranked},
            "lower_bound_us": [round(b, 3) for b in bounds],
            "skipped": dict(sorted(selection.skipped)),
            "explanation": selection.explanation(bounds),
        }
        return replace(chosen.schedule, method=AUTO, params=params)

    return Method(
        name=AUTO,
        summary="every applicable method, verified; keeps the best predicted time at the size(s) and says why",
        family="meta",
        collectives=frozenset(Kind),
        build=build,
        default_chunks=ranks_for_allreduce,
        options=AUTO_OPTIONS,
        chooses_chunks=True,
    )
