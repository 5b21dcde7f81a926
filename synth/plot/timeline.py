"""A schedule over time: a Gantt chart of its simulation, one row per directed link that carries
data.

Each bar is one transfer on one link of its path, from the moment its bytes start to flow
(``data_start``) to its last byte (``end``), coloured by step or by chunk. A transfer whose path
crosses three links is three bars, one per row. The path's latency (α) comes before the bar and
uses no bandwidth, so it shows as white, like any other time the link is idle. The right-hand
column says how busy each link is (the part of the total time during which at least one transfer
flows over it); the vertical lines mark the schedule's total time and the lower bound of the
collective on this machine in the same cost model (`synth.bounds`).

By default the event-driven model is drawn (transfers start as soon as their data is there and
share links max-min fairly); the step-synchronous model (``model="sync"``) shows the steps as
columns separated by barriers. A large machine has hundreds of links: beyond ``max_rows`` only the
busiest links of each kind are drawn (GPU→NVSwitch, GPU→NIC, NIC→ToR, ToR→spine, …; the title
says how many of how many).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from synth.bounds import BoundReport, bound_model
from synth.plot._common import new_figure, size_label
from synth.schedule import Schedule
from synth.simulate import MODEL_TITLES, Simulator, Timeline
from synth.topology import Topology

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLOR_BY = ("step", "chunk")
MAX_ROWS = 64
BOUND_MODEL = {"sync": "step", "event": "event"}  # simulator model → bound model


@dataclass(frozen=True)
class GanttRows:
    """What the chart draws: the links shown (top to bottom), and per bar its row, transfer, start
    and end (µs); ``busy_us`` is each shown link's time with at least one transfer flowing."""

    links: np.ndarray
    bar_row: np.ndarray
    bar_transfer: np.ndarray
    bar_start: np.ndarray
    bar_end: np.ndarray
    busy_us: np.ndarray
    links_with_data: int


def busy_time(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of the intervals [start, end)."""
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    # a new busy stretch starts where a start is past every earlier end
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return float(np.sum(e[last] - s[first]))


def link_kinds(topology: Topology) -> np.ndarray:
    """A kind number per directed link: links with the same bandwidth, latency and ends of the
    same sort (rank or switch) are of one kind (GPU→NVSwitch, NIC→ToR, ToR→spine, …); kinds are
    numbered in order of their first link."""
    keys: dict[tuple, int] = {}
    out = np.empty(len(topology.links), dtype=np.int64)
    for i, link in enumerate(topology.links):
        key = (link.bandwidth, link.latency, topology.is_switch(link.src), topology.is_switch(link.dst))
        out[i] = keys.setdefault(key, len(keys))
    return out


def gantt_rows(timeline: Timeline, num_links: int, max_rows: int = MAX_ROWS, kinds: np.ndarray | None = None) -> GanttRows:
    """The rows and bars of the chart: every directed link that carries data, or, when there are
    more than ``max_rows``, the busiest links of each kind in turn (``kinds`` from `link_kinds`;
    without it all links are of one kind), so that every kind of link shows; ties by link id.
    Rows are ordered by kind, then link id; one bar per (link, transfer)."""
    ptr, transfers = timeline.by_link(num_links)
    counts = np.diff(ptr)
    carrying = np.flatnonzero(counts)
    busy = np.array(
        [
            busy_time(
                timeline.data_start_us[transfers[ptr[ell] : ptr[ell + 1]]], timeline.end_us[transfers[ptr[ell] : ptr[ell + 1]]]
            )
            for ell in carrying
        ],
        dtype=np.float64,
    )
    kind = kinds[carrying] if kinds is not None else np.zeros(len(carrying), dtype=np.int64)
    shown = np.arange(len(carrying))
    if len(carrying) > max_rows:
        # rank of each link within its kind (busiest first), then take rank 0 of every kind, rank 1, …
        order = np.lexsort((carrying, -busy, kind))
        rank_in_kind = np.empty(len(carrying), dtype=np.int64)
        starts = np.flatnonzero(np.r_[True, kind[order][1:] != kind[order][:-1]])
        rank_in_kind[order] = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        shown = np.lexsort((carrying, kind, rank_in_kind))[:max_rows]
    shown = shown[np.lexsort((carrying[shown], kind[shown]))]
    links = carrying[shown]
    rows, bars = [], []
    for row, ell in enumerate(links):
        t = transfers[ptr[ell] : ptr[ell + 1]]
        rows.append(np.full(len(t), row, dtype=np.int64))
        bars.append(t)
    bar_row = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    bar_transfer = np.concatenate(bars) if bars else np.zeros(0, dtype=np.int64)
    return GanttRows(
        links,
        bar_row,
        bar_transfer,
        timeline.data_start_us[bar_transfer],
        timeline.end_us[bar_transfer],
        busy[shown],
        len(carrying),
    )


def plot_timeline(
    schedule: Schedule,
    topology: Topology,
    size: int,
    *,
    model: str = "event",
    color_by: str = "step",
    max_rows: int = MAX_ROWS,
    bound: BoundReport | None = None,
    title: str | None = None,
) -> Figure:
    """A Gantt chart of ``schedule`` simulated on ``topology`` at ``size`` bytes (the schedule must
    be valid there: verify it first). ``model`` "event" (default) or "sync"; ``color_by`` "step"
    or "chunk"; ``bound`` defaults to the collective's lower bound in the same model. Returns the
    matplotlib Figure."""
    from matplotlib import colormaps
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import Normalize

    if color_by not in COLOR_BY:
        raise ValueError(f"color_by must be one of {', '.join(COLOR_BY)}, not {color_by!r}")
    if model not in BOUND_MODEL:
        raise ValueError(f"unknown model {model!r}")
    result = Simulator(schedule, topology).run([size], model, timeline=True)[0]
    timeline = result.timeline
    assert timeline is not None
    c = schedule.collective
    if bound is None:
        bound = bound_model(topology, c.kind, c.root, model=BOUND_MODEL[model]).at(size)
    g = gantt_rows(timeline, len(topology.links), max_rows, link_kinds(topology))
    num_rows = len(g.links)

    height = min(2.3 + 0.19 * max(num_rows, 4), 16.0)
    fig = new_figure(11.0, height)
    ax = fig.add_subplot()
    values = timeline.step[g.bar_transfer] if color_by == "step" else timeline.chunk[g.bar_transfer]
    top = (c.num_chunks if color_by == "chunk" else schedule.num_steps) - 1
    cmap = colormaps["viridis" if color_by == "step" else "turbo"]
    norm = Normalize(vmin=0, vmax=max(top, 1))
    half = 0.4
    verts = np.stack(
        [
            np.stack([g.bar_start, g.bar_row - half], axis=1),
            np.stack([g.bar_end, g.bar_row - half], axis=1),
            np.stack([g.bar_end, g.bar_row + half], axis=1),
            np.stack([g.bar_start, g.bar_row + half], axis=1),
        ],
        axis=1,
    )
    bars = PolyCollection(verts, array=values.astype(np.float64), cmap=cmap, norm=norm, edgecolors="face", linewidths=0.3)
    bars.set_gid("transfers")
    ax.add_collection(bars)
    colorbar = fig.colorbar(bars, ax=ax, pad=0.04, fraction=0.03)
    colorbar.set_label(color_by)
    if top < 12:
        colorbar.set_ticks(list(range(top + 1)))

    total = result.time_us
    ax.axvline(total, color="#c00000", linewidth=1.5, label=f"total {total:,.1f} µs", gid="total")
    ax.axvline(
        bound.time_us,
        color="black",
        linewidth=1.5,
        linestyle="--",
        label=f"lower bound {bound.time_us:,.1f} µs ({bound.binding})",
        gid="bound",
    )
    ax.set_xlim(0, max(total, bound.time_us) * 1.02 or 1.0)
    ax.set_ylim(num_rows - 0.5, -0.5)
    names = [f"{topology.node_name(topology.links[ell].src)}→{topology.node_name(topology.links[ell].dst)}" for ell in g.links]
    fontsize = 8 if num_rows <= 40 else 6
    ax.set_yticks(range(num_rows), names, fontsize=fontsize)
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("directed link")
    for row, busy in enumerate(g.busy_us):
        share = busy / total if total > 0 else 0.0
        ax.annotate(
            f"{share:.0%}",
            xy=(1.0, row),
            xycoords=("axes fraction", "data"),
            xytext=(3, 0),
            textcoords="offset points",
            fontsize=fontsize,
            va="center",
            ha="left",
            color="#404040",
        )
    ax.annotate(
        "busy", xy=(1.0, 1.0), xycoords="axes fraction", xytext=(3, 2), textcoords="offset points", fontsize=fontsize, va="bottom"
    )
    ax.grid(axis="x", color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    shown = f"{g.links_with_data} links"
    idle = len(topology.links) - g.links_with_data
    if idle:
        shown += f" ({idle} of {len(topology.links)} links idle)"
    if num_rows < g.links_with_data:
        shown += f"; {num_rows} rows: the busiest links of each kind"
    ax.set_title(
        title
        if title is not None
        else (
            f"{c.kind.value} ({schedule.method}) on {topology.name}, {size_label(size)}, {MODEL_TITLES[model]} model\n"
            f"{schedule.num_transfers:,} transfers on {shown}"
        ),
        fontsize=10,
    )
    return fig
