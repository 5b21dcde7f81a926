"""``synth plot topo|schedule|compare`` and ``synth report``: pictures and a one-page HTML report
(library: `synth.plot`, `synth.report`). matplotlib is imported only when one of them runs."""

from __future__ import annotations

import click

import synth.plot
from synth.cli._util import (
    COLLECTIVE_CHOICE,
    load_topology_arg,
    method_list_arg,
    schedule_topology_arg,
    sweep_options,
    verify_or_exit,
)
from synth.cli.simulate_cmd import sizes_from_options
from synth.collective import Kind, parse_kind
from synth.compare import compare
from synth.errors import InputError
from synth.fileio import write_text_atomic
from synth.progress import Progress
from synth.report import DEFAULT_KINDS, build_report
from synth.schedule import load_schedule
from synth.units import parse_size, size_range

#: nccl-tests' usual sweep, 8 B to 1 GiB doubling (28 sizes)
CURVE_SIZES = tuple(size_range(8, 1 << 30, 2))


def _plotting():
    """synth.plot, or a one-line error when matplotlib is missing."""
    synth.plot.require_matplotlib()
    return synth.plot


def _output(path: str, where: str) -> str:
    try:
        synth.plot.image_format(path)
    except InputError as exc:
        raise InputError(where, "-o", path, exc.reason) from None
    return path


def _sizes(size_list, begin, end, factor, step) -> list[int]:
    if size_list is None and all(x is None for x in (begin, end, factor, step)):
        return list(CURVE_SIZES)
    return sizes_from_options(size_list, begin, end, factor, step)


def _methods(text: str | None, command: str) -> list[str] | None:
    return method_list_arg(text, command)


@click.group("plot", short_help="Pictures: a topology, a schedule over time, every method against the bound.")
def plot_group() -> None:
    """Draw a topology, a schedule's simulation over time, or every method's busbw against the
    lower bound. Each writes a PNG or an SVG (chosen by the -o file's extension)."""


@plot_group.command("topo", short_help="Ranks, switches and links by structure, links by bandwidth.")
@click.argument("topology")
@click.option("-o", "--output", required=True, help="Image file (.png or .svg).")
@click.option(
    "--collapse/--no-collapse", default=None, help="Draw each host as one box (default: above 32 ranks with several hosts)."
)
def plot_topo_cmd(topology, output, collapse):
    """Draw TOPOLOGY (file or built-in name): ranks grouped by host, switches above the ranks they
    connect, racks side by side, link width and colour by bandwidth with a legend in GB/s."""
    plot = _plotting()
    _output(output, "synth plot topo")
    topo, source = load_topology_arg(topology)
    fig = plot.plot_topology(topo, collapse=collapse)
    written = plot.save(fig, output, protect=[source])
    click.echo(f"{written.verb} {output}")


@plot_group.command("schedule", short_help="Gantt chart of a schedule's simulation, one row per link.")
@click.argument("schedule")
@click.option("-t", "--topology", default=None, help="Topology file or built-in name (default: the built-in the schedule names).")
@click.option("-s", "--size", "size_text", required=True, help="Message size (nccl-tests meaning), e.g. 1GiB.")
@click.option("-o", "--output", required=True, help="Image file (.png or .svg).")
@click.option("-m", "--model", type=click.Choice(["event", "sync"]), default="event", show_default=True, help="Cost model.")
@click.option("--color-by", type=click.Choice(["step", "chunk"]), default="step", show_default=True, help="Colour of the bars.")
@click.option(
    "--max-rows", type=click.IntRange(1), default=64, show_default=True, help="Draw at most this many links (the busiest)."
)
def plot_schedule_cmd(schedule, topology, size_text, output, model, color_by, max_rows):
    """Simulate SCHEDULE at --size and draw it over time: one row per directed link that carries
    data, a bar per transfer while its bytes flow, idle time white, the total time and the lower
    bound marked. The schedule is verified first (exit 1 if invalid)."""
    plot = _plotting()
    _output(output, "synth plot schedule")
    try:
        size = parse_size(size_text, minimum=1)
    except ValueError as exc:
        raise InputError("synth plot schedule", "--size", size_text, str(exc)) from None
    sched = load_schedule(schedule)
    topo, _ = schedule_topology_arg(sched, schedule, topology)
    verify_or_exit(sched, topo, schedule)
    fig = plot.plot_timeline(sched, topo, size, model=model, color_by=color_by, max_rows=max_rows)
    written = plot.save(fig, output, protect=[schedule, topology] if topology else [schedule])
    click.echo(f"{written.verb} {output}")


@plot_group.command("compare", short_help="busbw against size for every method, with the lower bound.")
@click.argument("topology")
@click.option("-c", "--collective", required=True, type=COLLECTIVE_CHOICE, help="Collective primitive.")
@click.option("-o", "--output", required=True, help="Image file (.png or .svg).")
@click.option("--root", type=int, default=None, help="Root rank of a rooted collective (default 0).")
@sweep_options("8B..1GiB doubling")
@click.option("-m", "--methods", default=None, help="Comma-separated methods (default: every applicable one).")
@click.option("--model", type=click.Choice(["sync", "event"]), default="sync", show_default=True, help="Simulator model.")
@click.option("--nccl/--no-nccl", default=True, show_default=True, help="Draw NCCL's analytic model too.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar (it is only drawn on a terminal anyway).")
def plot_compare_cmd(topology, collective, output, root, size_list, begin, end, factor, step, methods, model, nccl, quiet):
    """Run `synth compare` over a sweep of sizes (default 8 B to 1 GiB) and draw busbw against
    size for every method, log-log, with the lower bound as a line and the fastest method per size
    range on top."""
    plot = _plotting()
    _output(output, "synth plot compare")
    topo, source = load_topology_arg(topology)
    kind = parse_kind(collective)
    sizes = _sizes(size_list, begin, end, factor, step)
    names = _methods(methods, "synth plot compare")
    if root is not None and not 0 <= root < topo.num_ranks:
        raise InputError("synth plot compare", "--root", root, f"not a rank of {topo.name} (0..{topo.num_ranks - 1})")
    with Progress(None, "compare", quiet=quiet, unit="candidate") as bar:
        result = compare(topo, kind, sizes, root=root, methods=names, model=model, progress=bar.count_callback())
    if not any(o.ok for o in result.outcomes):
        reasons = "; ".join(f"{o.method}: {o.note}" for o in result.outcomes)
        raise InputError("synth plot compare", "--methods", methods, f"no method serves {kind.value} on {topo.name} ({reasons})")
    fig = plot.plot_curves(result, nccl=nccl)
    written = plot.save(fig, output, protect=[source])
    click.echo(f"{written.verb} {output}")


@click.command("report", short_help="One self-contained HTML page: topology, every method vs the bound, timelines.")
@click.argument("topology")
@click.option("-o", "--output", required=True, help="HTML file to write.")
@click.option("-c", "--collectives", default=None, help="Comma-separated collectives (default: all eight).")
@sweep_options("8B..1GiB doubling")
@click.option("-m", "--methods", default=None, help="Comma-separated methods (default: every applicable one).")
@click.option(
    "--model", type=click.Choice(["sync", "event"]), default="sync", show_default=True, help="Simulator model of the tables."
)
@click.option("--timeline-size", default=None, help="Size of the timelines (default: the largest size).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar (it is only drawn on a terminal anyway).")
def report_cmd(topology, output, collectives, size_list, begin, end, factor, step, methods, model, timeline_size, quiet):
    """Write one HTML page about TOPOLOGY (images embedded, no network needed): its picture, and
    per collective the fastest method per size range, busbw curves against the lower bound, the
    table of every method at every size, and the event-driven timeline of the fastest schedule at
    a large size."""
    _plotting()
    topo, source = load_topology_arg(topology)
    if collectives:
        kinds = []
        for name in (x.strip() for x in collectives.split(",")):
            if not name:
                continue
            try:
                kinds.append(parse_kind(name))
            except ValueError:
                known = ", ".join(k.value for k in Kind)
                raise InputError("synth report", "--collectives", name, f"unknown collective (expected one of {known})") from None
    else:
        kinds = list(DEFAULT_KINDS)
    sizes = _sizes(size_list, begin, end, factor, step)
    big = None
    if timeline_size is not None:
        try:
            big = parse_size(timeline_size, minimum=1)
        except ValueError as exc:
            raise InputError("synth report", "--timeline-size", timeline_size, str(exc)) from None
        if big <= 0:
            raise InputError("synth report", "--timeline-size", timeline_size, "must be positive")
    with Progress(None, "report", quiet=quiet, unit="step") as bar:
        page = build_report(
            topo, kinds, sizes=sizes, methods=_methods(methods, "synth report"), model=model, timeline_size=big, progress=bar
        )
    written = write_text_atomic(output, page, protect=[source])
    click.echo(f"{written.verb} {output}")


COMMANDS = [plot_group, report_cmd]
