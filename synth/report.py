"""One self-contained HTML page about a machine: which method to use for each collective at each
size, and why.

For the topology, the page shows its picture (`synth.plot.topology`); then for each collective the
fastest method per range of sizes, the busbw curves of every method against the lower bound
(`synth.plot.curves`), the table of every method at every size (busbw and the ratio to the bound,
as `synth compare` prints it), and the event-driven timeline of the fastest schedule at a large
size (`synth.plot.timeline`), where idle links and waiting show. Images are PNGs embedded as
``data:`` URIs and the style sheet is inline: the page needs no network and no other file, and
the same inputs give the same bytes (no dates, no timings).
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from synth import __version__
from synth.collective import Kind
from synth.compare import Comparison, compare, default_methods
from synth.plot import best_ranges, plot_curves, plot_timeline, plot_topology, render, topology_layout
from synth.progress import Progress
from synth.registry import METHODS
from synth.selection import plan
from synth.simulate import MODEL_TITLES
from synth.topology import Topology
from synth.units import format_size, size_range

DEFAULT_KINDS: tuple[Kind, ...] = tuple(Kind)
DEFAULT_SIZES: tuple[int, ...] = tuple(size_range(8, 1 << 30, 2))
IMAGE_DPI = 100

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #1a1a1a; line-height: 1.45; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #555; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; } td.name, th.name { text-align: left; }
td.best { font-weight: bold; background: #e8f4e8; }
.scroll { overflow-x: auto; } figure img.wide { max-width: none; } .note { color: #555; font-size: 0.9em; }
nav a { margin-right: 1em; }
"""


@dataclass(frozen=True)
class Section:
    """One collective's part of the report."""

    kind: Kind
    comparison: Comparison
    curves_png: bytes
    timeline_png: bytes | None
    timeline_method: str
    timeline_size: int


def _png_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _img(data: bytes, alt: str, gid: str) -> str:
    return f'<img id="{gid}" src="{_png_uri(data)}" alt="{html.escape(alt)}">'


def _num(x: float) -> str:
    """Two decimals, or three significant digits below 1 (busbw of small messages)."""
    if x != x or x in (float("inf"), float("-inf")):
        return "-"
    return f"{x:,.2f}" if abs(x) >= 1 or x == 0 else f"{x:.3g}"


def report_sections(
    topology: Topology,
    kinds: Sequence[Kind | str] = DEFAULT_KINDS,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    methods: Sequence[str] | None = None,
    model: str = "sync",
    timeline_size: int | None = None,
    progress: Progress | None = None,
) -> list[Section]:
    """Compare every method on each collective and draw its pictures. ``timeline_size`` (default
    the largest size) is where the fastest method's schedule is drawn over time (event-driven
    model); ``progress`` advances once per candidate run (`synth.selection`) and once per picture.
    Every method runs to the end (no time budget) and the exact solver is left out (and listed so)
    unless named in ``methods``: its result depends on the time it gets, and the page is the same
    for the same inputs."""
    kinds = [Kind(k) for k in kinds]
    sizes = tuple(sorted(set(int(s) for s in sizes)))
    big = max(sizes) if timeline_size is None else int(timeline_size)
    names = {k: [m for m in methods if m in METHODS and METHODS[m].serves(k)] if methods else default_methods(k) for k in kinds}
    # the exact solver's result depends on the time it gets: the page keeps it out unless named
    exact = methods is not None
    runs = {k: len(plan([METHODS[m] for m in names[k]], topology, k, sizes, exact=exact)[0]) for k in kinds}
    if progress is not None:
        progress.set_total(1 + sum(runs[k] + 2 for k in kinds))
    out = []
    for kind in kinds:
        step = progress.count_callback(f"{kind.value}: ", own_total=False) if progress is not None else None
        c = compare(topology, kind, sizes, methods=names[kind], model=model, budget=math.inf, exact=exact, progress=step)
        if progress is not None:
            progress.note(f"{kind.value}: curves")
        curves = render(plot_curves(c), "png", dpi=IMAGE_DPI)
        if progress is not None:
            progress.advance()
            progress.note(f"{kind.value}: timeline")
        # the fastest schedule at the timeline size (simulated again in the event model for the chart)
        timings = {o.method: o for o in c.outcomes if o.ok}
        timeline_png, best_name = None, ""
        if timings:
            best = _fastest_at(c, big)
            best_name = best
            schedule = timings[best].schedule
            assert schedule is not None
            timeline_png = render(plot_timeline(schedule, topology, big, model="event"), "png", dpi=IMAGE_DPI)
        if progress is not None:
            progress.advance()
        out.append(Section(kind, c, curves, timeline_png, best_name, big))
    return out


def _fastest_at(c: Comparison, size: int) -> str:
    """The fastest method at ``size``: from the comparison when it has that size, else at the
    nearest size it has."""
    index = min(range(len(c.sizes)), key=lambda i: (abs(c.sizes[i] - size), i))
    best = c.best(index)
    assert best is not None
    return best.method


def build_report(
    topology: Topology,
    kinds: Sequence[Kind | str] = DEFAULT_KINDS,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    methods: Sequence[str] | None = None,
    model: str = "sync",
    timeline_size: int | None = None,
    progress: Progress | None = None,
) -> str:
    """The report as one HTML document (a string); see the module docstring."""
    if progress is not None:
        progress.note("topology")
    topo_png = render(plot_topology(topology), "png", dpi=IMAGE_DPI)
    if progress is not None:
        progress.advance()
    sections = report_sections(
        topology, kinds, sizes=sizes, methods=methods, model=model, timeline_size=timeline_size, progress=progress
    )
    return render_html(topology, topo_png, sections, model)


def render_html(topology: Topology, topo_png: bytes, sections: list[Section], model: str) -> str:
    """The HTML page for already computed sections (``topo_png``: the topology picture)."""
    if topology_layout(topology).collapsed:
        topo_caption = (
            "Each host collapsed into one box (its ranks and their bandwidth inside the host), switches above "
            "what they connect, racks side by side; link width and colour by bandwidth per direction, a host's "
            "links to one switch drawn as one line (count × bandwidth). Scroll sideways on a narrow screen."
        )
    else:
        topo_caption = (
            "Ranks (numbered squares) grouped by host, switches above the ranks they connect, a host's own "
            "switch as a bar under its ranks; link width and colour by bandwidth per direction."
        )
    e = html.escape
    sizes = sections[0].comparison.sizes if sections else ()
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>synth report: {e(topology.name)}</title>",
        f"<style>{STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{e(topology.name)}</h1>",
        f"<p>{e(topology.description)}</p>" if topology.description else "",
        (
            f'<p class="note">{topology.num_ranks} ranks, {len(topology.switches)} switches, '
            f"{len(topology.links)} directed links. "
            f"Times predicted by synth {e(__version__)}'s simulator, {MODEL_TITLES[model]} model"
            + (f", sizes {e(format_size(sizes[0]))} to {e(format_size(sizes[-1]))}" if sizes else "")
            + "; every schedule was verified before it was timed. busbw and algbw as nccl-tests defines them; "
            "× bound = predicted time / lower bound (1.00: no schedule can be faster).</p>"
        ),
        "<nav>" + "".join(f'<a href="#{s.kind.value}">{e(s.kind.value)}</a>' for s in sections) + "</nav>",
        "<h2>Topology</h2>",
        "<figure>",
        '<div class="scroll">'
        + _img(topo_png, f"{topology.name}: ranks, switches and links by bandwidth", "topology").replace(
            "<img ", '<img class="wide" '
        )
        + "</div>",
        f"<figcaption>{e(topo_caption)}</figcaption>",
        "</figure>",
    ]
    for s in sections:
        parts += _section_html(s)
    parts += ["</body>", "</html>", ""]
    return "\n".join(p for p in parts if p)


def _section_html(s: Section) -> list[str]:
    e = html.escape
    c = s.comparison
    root = f" (root {c.root})" if c.root is not None else ""
    out = [f'<h2 id="{e(s.kind.value)}">{e(s.kind.value)}{root}</h2>']
    ok = [o for o in c.outcomes if o.ok]
    if not ok:
        out.append("<p>No method serves this case.</p>")
    else:
        out += [
            "<h3>Chosen method per size range</h3>",
            '<table class="ranges"><tr><th class="name">sizes</th><th class="name">fastest method</th>'
            "<th>busbw GB/s</th><th>× bound</th></tr>",
        ]
        for r in best_ranges(c):
            first, last = c.best(r.first), c.best(r.last)
            assert first is not None and last is not None
            span = format_size(r.low) if r.low == r.high else f"{format_size(r.low)} – {format_size(r.high)}"
            busbw = _num(first.busbw) if r.first == r.last else f"{_num(first.busbw)} – {_num(last.busbw)}"
            ratio = _num(first.ratio) if r.first == r.last else f"{_num(first.ratio)} – {_num(last.ratio)}"
            out.append(
                f'<tr><td class="name">{e(span)}</td><td class="name">{e(r.method)}</td><td>{busbw}</td><td>{ratio}</td></tr>'
            )
        out.append("</table>")
        out += [
            "<h3>busbw against message size</h3>",
            "<figure>",
            _img(
                s.curves_png,
                f"{c.kind.value} on {c.topology}: busbw against size for every method and the lower bound",
                f"curves-{s.kind.value}",
            ),
            "<figcaption>One line per method, the lower bound dashed black, NCCL's analytic model dotted grey "
            "(a model, not a schedule); the strip on top names the fastest method per size range.</figcaption>",
            "</figure>",
            "<h3>Every method at every size</h3>",
            '<div class="scroll"><table class="methods">',
        ]
        order = sorted(ok, key=lambda o: (o.times_us[-1], o.method))
        out.append(
            '<tr><th class="name">size</th><th>lower bound<br>busbw</th>'
            + "".join(f"<th>{e(o.method)}<br>busbw (× bound)</th>" for o in order)
            + ("<th>NCCL model<br>busbw (× bound)</th>" if c.nccl else "")
            + "</tr>"
        )
        for i, size in enumerate(c.sizes):
            rows = {r.method: r for r in c.rows(i)}
            best = c.best(i)
            cells = []
            for o in order:
                r = rows[o.method]
                cls = ' class="best"' if best is not None and r.method == best.method else ""
                cells.append(f"<td{cls}>{_num(r.busbw)} ({_num(r.ratio)})</td>")
            if c.nccl:
                n = c.nccl[i]
                busbw = c.busbw_factor * size / (n.time_us * 1e3) if n.time_us > 0 else float("inf")
                ratio = n.time_us / c.bounds[i].time_us if c.bounds[i].time_us > 0 else float("inf")
                cells.append(f"<td>{_num(busbw)} ({_num(ratio)})</td>")
            out.append(f'<tr><td class="name">{e(format_size(size))}</td><td>{_num(c.bounds[i].busbw)}</td>{"".join(cells)}</tr>')
        out.append("</table></div>")
        shapes = ", ".join(f"{o.method} {o.steps} steps / {o.chunks} chunks / {o.transfers:,} transfers" for o in order)
        out.append(f'<p class="note">Schedules: {e(shapes)}.</p>')
    if c.skipped_runs:
        left_out = "; ".join(f"{e(label)}: {e(why)}" for label, why in c.skipped_runs)
        out.append(f'<p class="note">Left out or not applicable: {left_out}.</p>')
    if s.timeline_png is not None:
        out += [
            f"<h3>Timeline of the fastest schedule at {e(format_size(s.timeline_size))}: {e(s.timeline_method)}</h3>",
            "<figure>",
            _img(s.timeline_png, f"{c.kind.value} {s.timeline_method} over time on {c.topology}", f"timeline-{s.kind.value}"),
            "<figcaption>Event-driven simulation: one row per directed link that carries data, a bar per transfer "
            "while its bytes flow (coloured by step); white is idle time. The right column is each link's busy "
            "share; the red line the total time, the dashed line the lower bound.</figcaption>",
            "</figure>",
        ]
    return out
