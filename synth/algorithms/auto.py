"""``auto``: run every method that applies and keep the schedule with the best predicted time.

For a size (or a list or range of sizes), auto asks every registered method that serves the
collective for a schedule: the baselines (classic and NCCL-style) as they are; methods that tune
themselves for a size (greedy, packing) once per size asked, at most `TUNED_SIZES` of them; the
exact ILP only on machines of up to 8 ranks, for 10 s per size. Each schedule is verified by the
registry and its time predicted with the step-synchronous model (`synth.simulate`; docs/formats.md,
'Step-synchronous cost').
For one size auto keeps the fastest; for several, the one whose time relative to the fastest
candidate at each size has the smallest geometric mean (so no single size dominates). Ties go to
fewer transfers. Once ``budget`` seconds are spent, only the baselines still run, so auto is never
slower than the best of them. The schedule's ``params`` record what was chosen, every candidate's
predicted times, the lower bound, what was skipped and why; ``params["explanation"]`` says it in a
few lines (the command line prints them).

Options: ``size`` or ``sizes`` (bytes; default 1 GiB), ``budget`` (seconds, default 120),
``progress`` (a callable ``(done, total)`` called after each candidate run; library only).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from synth.algorithms.engines.size_tuning import check_options, predicted_us
from synth.bounds import bound_model
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.routing import Router
from synth.schedule import Schedule, same_transfers
from synth.topology import Topology
from synth.units import format_size

METHOD = "auto"
OPTIONS = frozenset({"size", "sizes", "budget", "progress"})
COLLECTIVES = frozenset(Kind)
REFERENCE_SIZE = 1 << 30
#: a self-tuning method is run for at most this many of the sizes asked (smallest, middle, largest)
TUNED_SIZES = 3
DEFAULT_BUDGET = 120.0
#: exact solvers: auto runs them on machines of at most this many ranks, for at most this many
#: seconds per size
EXACT = {"ilp": (8, 10.0)}
#: at the largest size asked, if at least this big, auto also asks the exact solver for a pipelined
#: schedule: `PIPELINE_WAVES` waves of w chunks per piece following one `PIPELINE_STAGES`-step
#: template (docs/ilp.md), w from `wave_chunks`
PIPELINE_FROM = 1 << 20
PIPELINE_STAGES = 3
PIPELINE_WAVES = 8


def wave_chunks(topology: Topology) -> int:
    """Chunks per wave for a pipelined exact schedule: as many as the slowest link's share of the
    busiest rank's ingress (a DGX-1: 150 GB/s over 25 GB/s links = 6, so its four NVLink
    neighbours can each carry a whole number of chunks per step in proportion to their
    bandwidth), between 1 and 8."""
    slowest = min(link.bandwidth for link in topology.links)
    ingress = max(topology.rank_ingress(v) for v in range(topology.num_ranks))
    return max(1, min(8, round(ingress / slowest)))


def _sizes(options: Mapping[str, Any]) -> list[int]:
    if options.get("sizes") is not None and options.get("size") is not None:
        raise ValueError("give auto either size or sizes, not both")
    sizes = options.get("sizes")
    if sizes is None:
        sizes = [options["size"]] if options.get("size") is not None else [REFERENCE_SIZE]
    sizes = sorted(set(sizes))
    if not sizes or any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in sizes):
        raise ValueError(f"auto sizes must be positive integers, got {sizes!r}")
    return sizes


def _tuning_sizes(sizes: list[int]) -> list[int]:
    if len(sizes) <= TUNED_SIZES:
        return sizes
    return sorted({sizes[0], sizes[len(sizes) // 2], sizes[-1]})


def synthesize(
    topology: Topology,
    collective: Collective,
    router: Router | None = None,
    **options: Any,
) -> Schedule:
    """The best of every applicable method's schedule for ``collective`` at the size(s) asked."""
    from synth.algorithms import CLASSIC_METHODS, METHODS, NCCL_METHODS
    from synth.algorithms import synthesize as run

    BASELINES = set(CLASSIC_METHODS) | set(NCCL_METHODS)

    check_options(METHOD, options, OPTIONS)
    sizes = _sizes(options)
    budget = float(options.get("budget", DEFAULT_BUDGET))
    chunks = options.get("requested_chunks", collective.chunks_per_piece)
    kind, r, root = collective.kind, collective.num_ranks, collective.root
    progress = options.get("progress")
    started = time.monotonic()
    candidates: list[tuple[str, Schedule, list[float]]] = []
    skipped: dict[str, str] = {}
    planned = sum(
        len(_tuning_sizes(sizes)) if "size" in m.options else 1 for n, m in METHODS.items() if n != METHOD and m.serves(kind)
    )
    done = 0
    for name, method in METHODS.items():
        if name == METHOD or not method.serves(kind):
            continue
        if name in EXACT and r > EXACT[name][0]:
            skipped[name] = f"an exact solver, run by auto on up to {EXACT[name][0]} ranks"
            continue
        spent = time.monotonic() - started
        if name not in BASELINES and spent > budget:
            skipped[name] = f"time budget of {budget:g} s spent"
            continue
        runs: list[tuple[str, dict[str, Any], int | None]] = (
            [(f"{name}@{format_size(s)}", {"size": s}, chunks) for s in _tuning_sizes(sizes)]
            if "size" in method.options
            else [(name, {}, chunks)]
        )
        if name in EXACT:
            if chunks is None and sizes[-1] >= PIPELINE_FROM:
                w = wave_chunks(topology)
                k = w * PIPELINE_WAVES * (r if kind is Kind.ALLREDUCE else 1)
                extra = {"size": sizes[-1], "pipeline": PIPELINE_STAGES, "wave_chunks": w}
                runs.append((f"{name}@{format_size(sizes[-1])}/pipelined", extra, k))
                planned += 1
            share = max(1.0, min(EXACT[name][1], (budget - spent) / len(runs)))
            runs = [(label, {**extra, "time_limit": share}, k) for label, extra, k in runs]
        for label, extra, k in runs:
            try:
                schedule = run(topology, kind, name, root=root, chunks=k, router=router, options=extra or None)
            except NotApplicable as exc:
                skipped[label] = str(exc)
                continue
            finally:
                done += 1
                if progress is not None:
                    progress(min(done, planned), planned)
            if any(other.method == schedule.method and same_transfers(other, schedule) for _, other, _ in candidates):
                continue  # a method that ignores the size here (hierarchical allreduce) gave the same again
            candidates.append((label, schedule, predicted_us(schedule, topology, sizes)))
    if not candidates:
        raise NotApplicable(f"no method serves {kind.value} here ({'; '.join(f'{k}: {v}' for k, v in skipped.items())})")
    best_at = [min(c[2][i] for c in candidates) for i in range(len(sizes))]

    def merit(entry: tuple[str, Schedule, list[float]]) -> tuple[float, int, str]:
        label, schedule, times = entry
        ratios = [t / b if b > 0 else 1.0 for t, b in zip(times, best_at)]
        return (math.exp(sum(math.log(x) for x in ratios) / len(ratios)), schedule.num_transfers, label)

    ranked = sorted(candidates, key=merit)
    label, chosen, _ = ranked[0]
    bounds = [bound_model(topology, kind, root).time_us(s) for s in sizes]
    params = {
        "chosen": label,
        "chosen_method": chosen.method,
        "chosen_params": dict(chosen.params),
        "sizes": sizes,
        "predicted_us": {lab: [round(t, 3) for t in ts] for lab, _, ts in ranked},
        "lower_bound_us": [round(b, 3) for b in bounds],
        "skipped": dict(sorted(skipped.items())),
        "explanation": _explain(ranked, sizes, bounds),
    }
    return replace(chosen, method=METHOD, params=params)


def _explain(ranked: list[tuple[str, Schedule, list[float]]], sizes: list[int], bounds: list[float]) -> list[str]:
    """A few lines: what was chosen, how far from the bound, and how the runners-up compare (at the
    smallest, middle and largest size when more were asked; ``params`` hold every size)."""
    label, _, times = ranked[0]
    shown = sorted({0, len(sizes) // 2, len(sizes) - 1})
    lines = []
    where = ", ".join(
        f"{format_size(sizes[i])}: {times[i]:.3f} us ({times[i] / bounds[i]:.3f}x the lower bound {bounds[i]:.3f} us)"
        for i in shown
    )
    why = "the fastest" if len(sizes) == 1 else f"over {len(sizes)} sizes the best geometric mean relative to the fastest"
    lines.append(f"auto chose {label}, {why} of {len(ranked)} candidates: {where}")
    for other, _, other_times in ranked[1:4]:
        rel = ", ".join(f"{format_size(sizes[i])} {other_times[i] / times[i]:.3f}x" for i in shown)
        lines.append(f"  then {other}: {rel} of the chosen time")
    return lines
