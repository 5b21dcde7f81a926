"""Options and size tuning of self-tuning methods: a method tuned for a message size builds its
candidates (chunk counts, tree shapes, waves), times each with the step-synchronous model
(docs/formats.md, 'Step-synchronous cost'; `synth.simulate`) and keeps the fastest."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from synth.errors import CannotBeat
from synth.schedule import Schedule
from synth.simulate import simulate
from synth.topology import Topology


def predicted_us(schedule: Schedule, topology: Topology, sizes) -> list[float]:
    """Step-synchronous time (µs; docs/formats.md, 'Step-synchronous cost') of ``schedule`` at each
    size, by `synth.simulate`: what self-tuning methods compare their candidates with."""
    return [result.time_us for result in simulate(schedule, topology, list(sizes), "sync", timeline=False)]


def check_options(method: str, options: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """A TypeError for an option the method does not take (``requested_chunks``, from
    `synth.method.Method.synthesize`, is always allowed)."""
    unknown = sorted(set(options) - allowed - {"requested_chunks"})
    if unknown:
        raise TypeError(f"{method} takes no option(s) {', '.join(unknown)}")


def size_option(method: str, options: Mapping[str, Any], allowed: frozenset[str]) -> int | None:
    """The ``size`` option (bytes) of a self-tuning method, or None, after `check_options`; a
    ValueError for a size that is not a positive integer."""
    check_options(method, options, allowed)
    size = options.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        raise ValueError(f"{method} option size must be a positive integer, got {size!r}")
    return size


def beat_option(method: str, options: Mapping[str, Any]) -> float:
    """The ``beat_us`` option (µs) of a method that can stop building a schedule slower than it
    (`TimeLimit`), or inf; a ValueError for a value that is not a positive number."""
    beat = options.get("beat_us")
    if beat is None:
        return math.inf
    if not isinstance(beat, (int, float)) or isinstance(beat, bool) or not beat > 0:
        raise ValueError(f"{method} option beat_us must be a positive number, got {beat!r}")
    return float(beat)


class TimeLimit:
    """The step-synchronous time (docs/formats.md, 'Step-synchronous cost') that a schedule being
    built may take at one size, and what its steps built so far take.

    A schedule takes the sum of its steps' times, so once the steps built so far take longer than
    ``limit_us`` the whole schedule will too: `add` raises `CannotBeat` then, and the builder
    stops. Every step added must be a step of the final schedule with its own transfers (phases
    run one after the other, a dual's steps in reverse order: a sum does not mind the order), each
    carrying ``chunk_bytes``. A relative slack of `SLACK` keeps rounding (the simulator sums in
    another order) from stopping a schedule that ties."""

    SLACK = 1e-9

    def __init__(self, limit_us: float, chunk_bytes: float, size: int):
        self.limit_us = limit_us
        self.chunk_bytes = chunk_bytes
        self.size = size
        self.spent_us = 0.0
        self.steps = 0

    def add(self, step_us: float) -> None:
        self.spent_us += step_us
        self.steps += 1
        if self.spent_us > self.limit_us * (1 + self.SLACK):
            raise CannotBeat(
                f"cannot beat {self.limit_us:.3f} us at {self.size} B: its first {self.steps} steps already "
                f"take {self.spent_us:.3f} us"
            )


Candidate = TypeVar("Candidate")


def timed_sweep(
    candidates: Iterable[Candidate],
    build: Callable[[Candidate], Schedule | list[Schedule]],
    topology: Topology,
    size: int,
    *,
    patience: int | None = None,
) -> list[tuple[float, Schedule]]:
    """Each candidate's schedule with its time at ``size`` (`predicted_us`), in order; ``build``
    may give a candidate several variants (a list), each timed and kept, the candidate's time
    their fastest. With ``patience``, the sweep stops after that many candidates in a row, each
    slower than the one before: for chunk counts tried in increasing order, the time falls while
    the pipeline fill dominates and rises once the α of the extra steps does."""
    out: list[tuple[float, Schedule]] = []
    previous, worse = None, 0
    for candidate in candidates:
        built = build(candidate)
        variants = built if isinstance(built, list) else [built]
        times = [predicted_us(schedule, topology, [size])[0] for schedule in variants]
        out += zip(times, variants)
        time = min(times)
        if patience is not None:
            worse = worse + 1 if previous is not None and time > previous else 0
            if worse == patience:
                break
            previous = time
    return out


def fastest(timed: Iterable[tuple[float, Schedule]]) -> Schedule:
    """The first schedule of the fastest ones (a later one must be faster by more than rounding)."""
    best: tuple[float, Schedule] | None = None
    for time, schedule in timed:
        if best is None or time < best[0] * (1 - 1e-9):
            best = (time, schedule)
    if best is None:
        raise ValueError("no candidate schedules")
    return best[1]


def fastest_at(timed: Iterable[tuple[float, Schedule]], size: int | None) -> Schedule:
    """`fastest`, with ``chosen_at_size`` in its params when it was chosen for a size."""
    schedule = fastest(timed)
    if size is None:
        return schedule
    return replace(schedule, params={**schedule.params, "chosen_at_size": size})
