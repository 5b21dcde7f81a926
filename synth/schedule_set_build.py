"""A schedule set made by auto: its best schedule at each sample size, one range of call sizes per
run of samples that chose the same schedule (`synth.exec.schedule_set` holds the set, reads and
writes it; this module asks the method registry for its schedules, so it sits above it).

Each sample serves the sizes nearest to it on a logarithmic scale (boundaries at the geometric
means of neighbours, the outer ends at the first and last sample: the rule of ``synth export
msccl-set``, `synth.interop.msccl_sizes.sample_ranges`), and neighbouring samples that chose the
same schedule are joined into one range. `synth.interop.msccl_set` builds its MSCCL folders from the
same two steps (`choose_per_size`, `same_schedule_runs`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from synth.collective import Kind
from synth.exec.schedule_set import ScheduleSet, SetEntry
from synth.interop.msccl_sizes import sample_ranges
from synth.registry import synthesize
from synth.schedule import Schedule, same_transfers
from synth.topology import Topology
from synth.units import format_size


def same_schedule_runs(schedules: Sequence[Schedule]) -> list[tuple[int, int]]:
    """(first, last) index of each run of neighbouring samples that chose the same schedule."""
    runs: list[tuple[int, int]] = []
    for i, schedule in enumerate(schedules):
        prev = schedules[runs[-1][0]] if runs else None
        if prev is not None and prev.collective == schedule.collective and same_transfers(prev, schedule):
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def choose_per_size(
    topology: Topology,
    kind: Kind,
    sizes: Sequence[int],
    *,
    root: int | None = None,
    budget: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Schedule]:
    """auto's schedule at each of ``sizes``, in order: one auto call per size (what a user gets with
    ``synth synthesize -m auto --size S``); ``progress(done, total)`` after each."""
    chosen = []
    for i, size in enumerate(sizes):
        options: dict = {"sizes": [size]}
        if budget is not None:
            options["budget"] = budget
        chosen.append(synthesize(topology, kind, "auto", root=root, options=options))
        if progress is not None:
            progress(i + 1, len(sizes))
    return chosen


def build_schedule_set(
    topology: Topology,
    kind: Kind,
    sizes: Iterable[int],
    *,
    root: int | None = None,
    budget: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ScheduleSet:
    """auto's schedule at each of ``sizes`` (bytes), as a set of ranges (see the module docstring)."""
    given = list(sizes)
    samples = sorted(set(given))
    if not samples or samples[0] < 1:
        raise ValueError(f"need at least one positive size, got {given!r}")
    chosen = choose_per_size(topology, kind, samples, root=root, budget=budget, progress=progress)
    bounds = [(lo, hi - 1) for lo, hi in sample_ranges(samples)]  # half-open there, both ends included here
    entries = []
    for first, last in same_schedule_runs(chosen):
        schedule = chosen[first]
        lo, hi = bounds[first][0], bounds[last][1]
        label = "".join(
            ch if ch.isalnum() or ch in "-_" else "-" for ch in str(schedule.params.get("chosen", "auto")).split("@")[0]
        )
        name = f"{kind.value}-{format_size(lo)}-{format_size(hi)}-{label}.json"
        entries.append(SetEntry(schedule, lo, hi, name, tuple(samples[first : last + 1])))
    return ScheduleSet(kind, topology.num_ranks, topology.name, tuple(entries))


__all__ = ["build_schedule_set", "choose_per_size", "same_schedule_runs"]
