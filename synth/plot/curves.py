"""Every method against the bound: busbw against message size, the picture nccl-tests users draw.

One line per method that serves the collective (from a `synth.compare.Comparison`), the lower
bound as a thick dashed black line (no schedule can be above it: busbw is size over time), and
NCCL's analytic model as a dotted grey line (a model of what NCCL would take, not a schedule).
Both axes are logarithmic: sizes run over eight orders of magnitude and the bandwidth of small
messages is latency-bound, so a linear axis would flatten everything below a megabyte into zero.
A strip above the chart names the fastest method over each range of sizes, so crossovers
(where ring and tree trade places) can be read directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from synth.compare import Comparison
from synth.plot._common import new_figure, size_label
from synth.simulate import MODEL_TITLES

if TYPE_CHECKING:
    from matplotlib.figure import Figure

BOUND_LABEL = "lower bound"
NCCL_LABEL = "NCCL model (analytic)"
MARKERS = "osD^vP*Xph<>"


@dataclass(frozen=True)
class SizeRange:
    """Sizes ``sizes[first..last]`` (inclusive) over which ``method`` is the fastest."""

    method: str
    first: int
    last: int
    low: int
    high: int


def best_ranges(comparison: Comparison) -> list[SizeRange]:
    """Contiguous runs of sizes with the same fastest method (ties broken by name, as
    `Comparison.rows` does)."""
    out: list[SizeRange] = []
    for i, size in enumerate(comparison.sizes):
        best = comparison.best(i)
        if best is None:
            continue
        if out and out[-1].method == best.method and out[-1].last == i - 1:
            prev = out[-1]
            out[-1] = SizeRange(prev.method, prev.first, i, prev.low, size)
        else:
            out.append(SizeRange(best.method, i, i, size, size))
    return out


def method_colors(methods: list[str]) -> dict[str, tuple[float, float, float, float]]:
    """A fixed colour per method name (tab10 in sorted order), so every picture of a report agrees."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {m: cmap(k % 10) for k, m in enumerate(sorted(methods))}


def plot_curves(comparison: Comparison, *, nccl: bool = True, title: str | None = None) -> Figure:
    """busbw (GB/s) against size (bytes), log-log, for every method of ``comparison`` that has a
    schedule, with the lower bound (and NCCL's model unless ``nccl`` is False). Returns the
    matplotlib Figure; its main axes hold exactly one line per method, then the bound, then NCCL."""
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    c = comparison
    sizes = list(c.sizes)
    # legend order: fastest at the largest size first (ties by name)
    ok = sorted((o for o in c.outcomes if o.ok), key=lambda o: (o.times_us[-1], o.method))
    colors = method_colors([o.method for o in ok])
    fig = new_figure(9.5, 6.0)
    strip, ax = fig.subplots(2, 1, sharex=True, height_ratios=[1, 12])
    fig.get_layout_engine().set(h_pad=0.02, hspace=0.0)
    for k, o in enumerate(ok):
        busbw = [c.busbw_factor * s / (t * 1e3) if t > 0 else float("nan") for s, t in zip(sizes, o.times_us)]
        ax.plot(
            sizes, busbw, marker=MARKERS[k % len(MARKERS)], markersize=3.5, linewidth=1.4, color=colors[o.method], label=o.method
        )
    ax.plot(sizes, [b.busbw for b in c.bounds], color="black", linestyle="--", linewidth=2.2, label=BOUND_LABEL, zorder=5)
    if nccl and c.nccl:
        ax.plot(
            sizes,
            [c.busbw_factor * n.size / (n.time_us * 1e3) for n in c.nccl],
            color="#808080",
            linestyle=":",
            linewidth=2.0,
            label=NCCL_LABEL,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sizes if len(sizes) <= 12 else sizes[:: max(1, round(len(sizes) / 10))]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(ticks, [size_label(s) for s in ticks], rotation=45, ha="right")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("message size (bytes, nccl-tests)")
    ax.set_ylabel("busbw (GB/s)")
    ax.grid(True, which="major", color="#e0e0e0", linewidth=0.6)
    ax.grid(True, which="minor", axis="y", color="#f0f0f0", linewidth=0.4)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    root = f" root {c.root}" if c.root is not None else ""
    ax.set_xlim(sizes[0] / 1.3, sizes[-1] * 1.3)

    # the fastest method over each range of sizes, as coloured spans (geometric midpoints between sizes)
    strip.set_ylim(0, 1)
    strip.yaxis.set_major_locator(NullLocator())
    strip.tick_params(axis="x", which="both", length=0, labelbottom=False)
    for spine in strip.spines.values():
        spine.set_visible(False)

    def edge(i: int) -> float:
        if i <= 0:
            return sizes[0] / 1.3
        if i >= len(sizes):
            return sizes[-1] * 1.3
        return (sizes[i - 1] * sizes[i]) ** 0.5

    for r in best_ranges(c):
        lo, hi = edge(r.first), edge(r.last + 1)
        strip.add_patch(
            Rectangle((lo, 0), hi - lo, 1, facecolor=colors[r.method], alpha=0.35, edgecolor="white", gid=f"best-{r.method}")
        )
        strip.text((lo * hi) ** 0.5, 0.5, r.method, ha="center", va="center", fontsize=7, clip_on=True)
    strip.set_ylabel("best", rotation=0, ha="right", va="center", fontsize=8)
    strip.set_title(
        title
        if title is not None
        else f"{c.kind.value}{root} on {c.topology} ({c.num_ranks} ranks), {MODEL_TITLES[c.model]} model",
        fontsize=10,
    )
    return fig
