"""How long a schedule takes on a topology: three cost models over the same paths.

* ``"sync"``, the step-synchronous α-β model of docs/formats.md, 'Step-synchronous cost'
  (`synth.simulate.sync`): steps run one after another, a step takes its longest transfer, and a
  transfer pays its path's latency plus the time its most loaded link needs for all the bytes the
  step sends over it. Linear in the size per step, so any number of sizes costs about one.
* ``"event"``, an event-driven fluid model (`synth.simulate.event`): each transfer starts as soon as
  the data it reads has arrived and the place it writes is free, pays its path's latency once, then
  shares the bandwidth of the links it crosses max-min fairly with the other flows in flight.
* ``"one-port"``, the textbook model (`synth.simulate.oneport`): a rank sends one message and
  receives one at a time, a message of l bytes costs α + β·l; a message is everything a step
  moves from one rank to another.

`simulate` is the entry point; results are plain frozen dataclasses. The schedule must be valid on
the topology (run `synth.verify.verify` first); `simulate` only checks that its paths exist.
See docs/simulator.md for the formulas, the rules and worked examples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from synth.schedule import Schedule
from synth.simulate.event import (
    DependencyGroups,
    EventTimes,
    SharingNetwork,
    dependency_groups,
    max_min_rates,
    sharing_network,
    simulate_events,
)
from synth.simulate.oneport import Messages, one_port_messages
from synth.simulate.paths import TransferPaths, transfer_paths
from synth.simulate.sync import StepLines, step_lines
from synth.topology import Topology
from synth.units import bandwidth_gbps

MODELS: tuple[str, ...] = ("sync", "event")
#: the textbook model (synth.simulate.oneport); not part of MODELS, which are the network models
ONE_PORT = "one-port"
ALL_MODELS: tuple[str, ...] = (*MODELS, ONE_PORT)
MODEL_TITLES = {"sync": "step-synchronous", "event": "event-driven", ONE_PORT: "one-port"}
#: the most transfers for which ``synth simulate`` runs the event-driven model without being asked
#: (``-m both``, the default): its max-min sharing grows faster than the transfers on a switched
#: network (a 1,024-GPU fat-tree allgather of 4.2 million transfers takes about 35 s, the 4,096-GPU
#: one of 16.8 million over ten minutes), where the step-synchronous model takes seconds
EVENT_BY_DEFAULT_MAX_TRANSFERS = 2_000_000


def default_models(schedule: Schedule) -> tuple[list[str], str | None]:
    """The models ``-m both`` runs on ``schedule``, and why the event-driven one was left out (None
    when it was not): it is left out above `EVENT_BY_DEFAULT_MAX_TRANSFERS` transfers."""
    n = schedule.num_transfers
    if n <= EVENT_BY_DEFAULT_MAX_TRANSFERS:
        return list(MODELS), None
    return ["sync"], (
        f"the event-driven model is left out for {n:,} transfers (by default it runs up to "
        f"{EVENT_BY_DEFAULT_MAX_TRANSFERS:,}; -m event runs it, which can take many minutes)"
    )


@dataclass(frozen=True)
class TimelineEntry:
    """One transfer in a timeline: step, position in the step, ranks, chunk, the directed link ids
    of its path, and its times (µs): ``start`` (may begin; pays latency from here), ``data_start``
    (its bytes begin to flow on every link of the path) and ``end`` (last byte delivered)."""

    step: int
    index: int
    src: int
    dst: int
    chunk: int
    links: tuple[int, ...]
    start: float
    data_start: float
    end: float


@dataclass(frozen=True, eq=False)
class Timeline:
    """Per-transfer times of one simulated size, as columns in schedule order (row i is the
    schedule's transfer i). A transfer occupies every link of its path from ``data_start_us`` to
    ``end_us``; `link_intervals` lists them per directed link (for a Gantt chart)."""

    step: np.ndarray
    index: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    chunk: np.ndarray
    link_ptr: np.ndarray
    link_ids: np.ndarray
    start_us: np.ndarray
    data_start_us: np.ndarray
    end_us: np.ndarray

    def __len__(self) -> int:
        return len(self.step)

    def links(self, i: int) -> tuple[int, ...]:
        return tuple(int(x) for x in self.link_ids[self.link_ptr[i] : self.link_ptr[i + 1]])

    def entry(self, i: int) -> TimelineEntry:
        return TimelineEntry(
            int(self.step[i]),
            int(self.index[i]),
            int(self.src[i]),
            int(self.dst[i]),
            int(self.chunk[i]),
            self.links(i),
            float(self.start_us[i]),
            float(self.data_start_us[i]),
            float(self.end_us[i]),
        )

    def __iter__(self) -> Iterator[TimelineEntry]:
        return (self.entry(i) for i in range(len(self)))

    def link_intervals(self, link: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(transfer indices, data_start_us, end_us) of the transfers crossing directed ``link``,
        ordered by data start then index."""
        entry_transfer = np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.link_ptr))
        t = entry_transfer[self.link_ids == link]
        order = np.lexsort((t, self.data_start_us[t]))
        t = t[order]
        return t, self.data_start_us[t], self.end_us[t]

    def by_link(self, num_links: int) -> tuple[np.ndarray, np.ndarray]:
        """Every directed link's transfers at once, as CSR ``(ptr, transfers)``: link ℓ carries
        ``transfers[ptr[ℓ]:ptr[ℓ + 1]]``, ordered by data start then index (``num_links`` is
        ``len(topology.links)``)."""
        entry_transfer = np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.link_ptr))
        order = np.lexsort((entry_transfer, self.data_start_us[entry_transfer], self.link_ids))
        ptr = np.zeros(num_links + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.link_ids, minlength=num_links), out=ptr[1:])
        return ptr, entry_transfer[order]


@dataclass(frozen=True)
class SimResult:
    """Time of one schedule at one size in one model. ``size`` is the nccl-tests size in bytes;
    ``algbw = size / time`` and ``busbw = algbw × the collective's nccl-tests factor``, in GB/s
    (inf for a schedule that takes no time). ``timeline`` is set when asked for."""

    model: str
    size: int
    time_us: float
    algbw: float
    busbw: float
    timeline: Timeline | None = None


class Simulator:
    """A schedule prepared for simulation on a topology: paths, the step-synchronous lines and the
    dependency groups are computed once (each on first use) and reused for every size and model."""

    def __init__(self, schedule: Schedule, topology: Topology):
        self.schedule = schedule
        self.topology = topology
        self._paths: TransferPaths | None = None
        self._lines: StepLines | None = None
        self._groups: DependencyGroups | None = None
        self._network: SharingNetwork | None = None
        self._messages: dict[tuple[float | None, float | None], Messages] = {}

    @property
    def paths(self) -> TransferPaths:
        """Every transfer's path (the event model and timelines need them; the step-synchronous
        times alone are computed a block of steps at a time without them)."""
        if self._paths is None:
            self._paths = transfer_paths(self.schedule, self.topology)
        return self._paths

    @property
    def lines(self) -> StepLines:
        if self._lines is None:
            self._lines = step_lines(self.schedule, self.topology, self._paths)
        return self._lines

    def _lines_per_transfer(self) -> StepLines:
        if self._lines is None or self._lines.transfer_latency is None:
            self._lines = step_lines(self.schedule, self.topology, self._paths, per_transfer=True)
        return self._lines

    @property
    def groups(self) -> DependencyGroups:
        if self._groups is None:
            self._groups = dependency_groups(self.schedule, self.paths)
        return self._groups

    @property
    def network(self) -> SharingNetwork:
        if self._network is None:
            self._network = sharing_network(self.paths, self.topology)
        return self._network

    def chunk_bytes(self, size: int) -> float:
        return float(self.schedule.collective.chunk_bytes(size))

    def _result(self, model: str, size: int, time_us: float, timeline: Timeline | None) -> SimResult:
        algbw = bandwidth_gbps(size, time_us) if size else 0.0
        factor = self.schedule.collective.busbw_factor()
        busbw = algbw * factor if factor else 0.0  # one rank: no bus traffic (not inf × 0)
        return SimResult(model, int(size), float(time_us), float(algbw), float(busbw), timeline)

    def _timeline(self, start: np.ndarray, data_start: np.ndarray, end: np.ndarray) -> Timeline:
        s = self.schedule
        step = s.step_of_transfer
        index = np.arange(s.num_transfers, dtype=np.int64) - s.step_starts[step]
        for a in (start, data_start, end, index):
            a.setflags(write=False)
        return Timeline(step, index, s.src, s.dst, s.chunk, self.paths.ptr, self.paths.links, start, data_start, end)

    def sync(self, sizes: Iterable[int], *, timeline: bool = False) -> list[SimResult]:
        """Step-synchronous time of each size (all sizes evaluated together)."""
        sizes = [int(x) for x in sizes]
        chunk = np.array([self.chunk_bytes(x) for x in sizes], dtype=np.float64)
        step_times = self.lines.step_times_us(chunk)
        totals = step_times.sum(axis=0)
        results = []
        for k, size in enumerate(sizes):
            tl = None
            if timeline:
                lines = self._lines_per_transfer()
                step_start = np.concatenate(([0.0], np.cumsum(step_times[:, k])[:-1]))
                start = step_start[self.schedule.step_of_transfer]
                data_start = start + lines.transfer_latency
                end = start + lines.transfer_times_us(chunk[k])
                tl = self._timeline(start, data_start, end)
            results.append(self._result("sync", size, float(totals[k]), tl))
        return results

    def event(
        self, sizes: Iterable[int], *, timeline: bool = True, on_finished: Callable[[int], None] | None = None
    ) -> list[SimResult]:
        """Event-driven time of each size (one fluid simulation per size); ``on_finished(k)`` is
        told as each simulation ends ``k`` more transfers (for a progress bar)."""
        results = []
        for size in (int(x) for x in sizes):
            times: EventTimes = simulate_events(
                self.schedule,
                self.topology,
                self.paths,
                self.groups,
                self.chunk_bytes(size),
                self.network,
                on_finished=on_finished,
            )
            tl = self._timeline(times.start_us, times.data_start_us, times.end_us) if timeline else None
            results.append(self._result("event", size, times.time_us, tl))
        return results

    def messages(self, alpha: float | None = None, beta: float | None = None) -> Messages:
        """The one-port messages (cached per α, β)."""
        key = (alpha, beta)
        if key not in self._messages:
            self._messages[key] = one_port_messages(self.schedule, self.topology, self.paths, alpha, beta)
        return self._messages[key]

    def one_port(self, sizes: Iterable[int], *, alpha: float | None = None, beta: float | None = None) -> list[SimResult]:
        """The one-port model's time of each size (synth.simulate.oneport): α in µs and β in µs
        per byte for every message, or by default from each message's path. No timeline."""
        sizes = [int(x) for x in sizes]
        chunk = np.array([self.chunk_bytes(x) for x in sizes], dtype=np.float64)
        totals = self.messages(alpha, beta).times_us(chunk)
        return [self._result(ONE_PORT, size, float(totals[k]), None) for k, size in enumerate(sizes)]

    def run(
        self,
        sizes: Iterable[int],
        model: str = "sync",
        *,
        timeline: bool | None = None,
        alpha: float | None = None,
        beta: float | None = None,
        on_finished: Callable[[int], None] | None = None,
    ) -> list[SimResult]:
        """``model`` "sync", "event" or "one-port" (``alpha``/``beta`` apply to one-port only;
        ``on_finished``, the event model's progress, to event only)."""
        if model == "sync":
            return self.sync(sizes, timeline=bool(timeline))
        if model == "event":
            return self.event(sizes, timeline=True if timeline is None else timeline, on_finished=on_finished)
        if model == ONE_PORT:
            return self.one_port(sizes, alpha=alpha, beta=beta)
        raise ValueError(f"unknown model {model!r} (expected one of {', '.join(ALL_MODELS)})")


def simulate(
    schedule: Schedule,
    topology: Topology,
    sizes: int | Iterable[int],
    model: str = "sync",
    *,
    timeline: bool | None = None,
    alpha: float | None = None,
    beta: float | None = None,
) -> list[SimResult]:
    """Time of ``schedule`` on ``topology`` for each size (bytes, nccl-tests meaning), one
    `SimResult` per size in the given order.

    ``model`` is ``"sync"`` (docs/formats.md, 'Step-synchronous cost'), ``"event"`` (event-driven
    fluid model) or ``"one-port"`` (the textbook model: one message sent and one received at a time,
    α + β·bytes each; ``alpha`` µs and ``beta`` µs per byte, by default from each message's path).
    ``timeline`` attaches each transfer's start/data-start/end times; by default it is on for the
    event model and off for the sync model (where it is cheap but large); the one-port model has
    none. To run several models or calls on one schedule, build a `Simulator` once."""
    if isinstance(sizes, (int, np.integer)):
        sizes = [int(sizes)]
    sizes = list(sizes)
    for size in sizes:
        if size < 0:
            raise ValueError(f"size {size} is negative")
    return Simulator(schedule, topology).run(sizes, model, timeline=timeline, alpha=alpha, beta=beta)


__all__ = [
    "ALL_MODELS",
    "EVENT_BY_DEFAULT_MAX_TRANSFERS",
    "MODELS",
    "MODEL_TITLES",
    "ONE_PORT",
    "DependencyGroups",
    "Messages",
    "SimResult",
    "Simulator",
    "StepLines",
    "Timeline",
    "TimelineEntry",
    "TransferPaths",
    "default_models",
    "dependency_groups",
    "max_min_rates",
    "one_port_messages",
    "simulate",
    "step_lines",
    "transfer_paths",
]
