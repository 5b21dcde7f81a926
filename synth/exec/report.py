"""Measurements and the nccl-tests style table that ``synth run`` prints.

``time`` is the mean time of one call in µs: each rank times ``iters`` back-to-back calls and
the slowest rank counts. ``algbw`` is size / time and ``busbw`` is algbw times the collective's
nccl-tests factor (docs/formats.md, 'Bandwidth figures'). ``#wrong`` counts result elements that
differ from the numpy reference, over all ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from synth.exec.layout import Layout


@dataclass(frozen=True)
class Measurement:
    """One size of one run: the call's layout, mean time per call (µs, slowest rank) and the
    number of wrong result elements over all ranks."""

    layout: Layout
    time_us: float
    wrong: int

    @property
    def algbw(self) -> float:
        """GB/s: effective size over time."""
        return self.layout.size / (self.time_us * 1e3) if self.time_us > 0 else 0.0

    @property
    def busbw(self) -> float:
        return self.algbw * self.layout.collective.busbw_factor()


@dataclass(frozen=True)
class Row:
    """One row of the table: the schedule's measurement and, when the backend ran it too, the
    backend's own collective on the same buffers (``--compare-native``)."""

    ours: Measurement
    native: Measurement | None = None


_COLS = "  {:>7}  {:>6}  {:>6}  {:>6}"


def table_header(second: str | None = None) -> list[str]:
    """Column headings; ``second`` names a second group of time/algbw/busbw/#wrong columns (the
    native MPI collective)."""
    lead = f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}"
    names = f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
    units = f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}"
    group = _COLS.format("time", "algbw", "busbw", "#wrong")
    group_units = _COLS.format("(us)", "(GB/s)", "(GB/s)", "")
    if second is None:
        return [names + group, units + group_units]
    width = len(group)
    return [
        lead + f"{'synth schedule':^{width}}" + f"{second:^{width}}",
        names + group + group,
        units + group_units + group_units,
    ]


def _group(m: Measurement | None) -> str:
    if m is None:
        return _COLS.format("n/a", "n/a", "n/a", "n/a")
    return _COLS.format(_time(m.time_us), f"{m.algbw:.2f}", f"{m.busbw:.2f}", m.wrong)


def _time(us: float) -> str:
    return f"{us:.1f}" if us < 1e4 else f"{us:.0f}"


def table_row(ours: Measurement, op_name: str | None, native: Measurement | None = None, *, with_native: bool = False) -> str:
    layout = ours.layout
    coll = layout.collective
    redop = op_name if coll.is_reduction and op_name else "none"
    root = coll.root if coll.is_rooted else -1
    head = f"  {layout.size:>10}  {layout.count:>12}  {layout.dtype.name:>8}  {redop:>6}  {root:>6}"
    return head + _group(ours) + (_group(native) if with_native else "")


def average_busbw(rows: list[Measurement]) -> float:
    return sum(m.busbw for m in rows) / len(rows) if rows else 0.0


def table_footer(rows: list[Measurement], native: list[Measurement] | None = None) -> list[str]:
    """The lines under the table: average bus bandwidth (also of MPI's own collective, if it ran)
    and the wrong elements over every row."""
    wrong = sum(m.wrong for m in rows) + sum(m.wrong for m in native or [])
    lines = [f"# Avg bus bandwidth    : {average_busbw(rows):.3f} GB/s"]
    if native:
        lines.append(f"# Avg bus bandwidth, MPI's own collective : {average_busbw(native):.3f} GB/s")
    lines.append(f"# Wrong elements       : {wrong}{'' if wrong else ' (all results checked: OK)'}")
    return lines
