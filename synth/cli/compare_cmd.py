"""``synth compare``: every candidate side by side (those ``-m auto`` considers), best first, per
size, with the lower bound and NCCL's analytic model, what was left out and why, and how long
each candidate took (library: `synth.compare`, on `synth.selection`)."""

from __future__ import annotations

import json

import click

from synth.cli._util import COLLECTIVE_CHOICE, load_topology_arg, method_list_arg, sweep_options
from synth.cli.simulate_cmd import sizes_from_options
from synth.collective import parse_kind
from synth.compare import DEFAULT_SIZES, Comparison, compare
from synth.errors import InputError
from synth.nccl_model import LABEL as NCCL_LABEL
from synth.progress import Progress
from synth.selection import DEFAULT_BUDGET
from synth.simulate import MODEL_TITLES
from synth.units import format_size


def _fmt(value: float, width: int, digits: int = 2) -> str:
    if value == float("inf"):
        return "inf".rjust(width)
    return f"{value:{width}.{digits}f}"


def render(c: Comparison) -> str:
    """The table `synth compare` prints."""
    root = f", root {c.root}" if c.root is not None else ""
    lines = [
        f"{c.kind.value}{root} on {c.topology} ({c.num_ranks} ranks), {MODEL_TITLES[c.model]} model; "
        "time in us, algbw/busbw in GB/s (nccl-tests), x bound = time / lower bound"
    ]
    for label, why in c.skipped_runs:
        lines.append(f"  skipped: {label}: {why}")
    width = max([len(o.method) for o in c.outcomes] + [len("lower bound"), 12])
    for i, size in enumerate(c.sizes):
        b = c.bounds[i]
        lines.append("")
        lines.append(f"size {format_size(size)}")
        lines.append(f"  {'method':<{width}} {'time':>12} {'algbw':>9} {'busbw':>9} {'x bound':>8} {'steps':>6} {'chunks':>6}")
        steps = {o.method: o for o in c.outcomes if o.ok}
        for r in c.rows(i):
            o = steps[r.method]
            n_steps, n_chunks = o.shape(i)
            tuned = f"  (tuned for {o.tuned[i][0]})" if o.tuned else ""
            lines.append(
                f"  {r.method:<{width}} {_fmt(r.time_us, 12)} {_fmt(r.algbw, 9)} {_fmt(r.busbw, 9)} "
                f"{_fmt(r.ratio, 8)} {n_steps:>6} {n_chunks:>6}{tuned}"
            )
        lines.append(
            f"  {'lower bound':<{width}} {_fmt(b.time_us, 12)} {_fmt(b.algbw, 9)} {_fmt(b.busbw, 9)} {'1.00':>8}  ({b.binding})"
        )
        if c.nccl:
            n = c.nccl[i]
            algbw = size / (n.time_us * 1e3) if n.time_us > 0 else float("inf")
            lines.append(
                f"  {'NCCL model':<{width}} {_fmt(n.time_us, 12)} {_fmt(algbw, 9)} {_fmt(algbw * c.busbw_factor, 9)} "
                f"{_fmt(n.time_us / b.time_us, 8)}  ({n.algorithm}/{n.protocol}; {NCCL_LABEL})"
            )
    if c.chosen:
        lines.append("")
        lines.extend(c.explanation or [f"best over all sizes ({MODEL_TITLES[c.model]} model): {c.chosen}"])
    if c.seconds:
        lines.append("")
        lines.extend(_wrapped("synthesis (s, wall): ", [f"{label} {s:.2f}" for label, s in c.seconds]))
    return "\n".join(lines)


def _wrapped(head: str, items: list[str], width: int = 100) -> list[str]:
    """``head`` and the items, comma-separated, over as many lines as ``width`` needs."""
    lines, line = [], head
    for n, item in enumerate(items):
        text = item + ("," if n < len(items) - 1 else "")
        if len(line) + len(text) + 1 > width and line.strip():
            lines.append(line.rstrip())
            line = " " * len(head)
        line += text + " "
    lines.append(line.rstrip())
    return lines


@click.command("compare", short_help="Every candidate method side by side against the lower bound.")
@click.argument("topology")
@click.option("-c", "--collective", required=True, type=COLLECTIVE_CHOICE, help="Collective primitive.")
@click.option("--root", type=int, default=None, help="Root rank of a rooted collective (default 0).")
@sweep_options("1KiB..1GiB")
@click.option(
    "-m",
    "--methods",
    default=None,
    help="Comma-separated methods (default: every candidate of -m auto).",
)
@click.option("--model", type=click.Choice(["sync", "event"]), default="sync", show_default=True, help="Simulator model.")
@click.option(
    "--budget",
    type=click.FloatRange(min=0),
    default=DEFAULT_BUDGET,
    show_default=True,
    help="Seconds after which only the baselines still run (as -m auto's budget).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar (it is only drawn on a terminal anyway).")
def compare_cmd(topology, collective, root, size_list, begin, end, factor, step, methods, model, budget, as_json, quiet):
    """Synthesize every candidate for a collective on TOPOLOGY (those -m auto considers: every
    method that serves it, self-tuning ones for each size, the exact ILP on machines of up to 8
    ranks), verify each schedule, and print predicted time, algbw, busbw and the ratio to the lower
    bound per size, best first; then what -m auto picks over these sizes, what was left out and
    why, and how long each candidate took."""
    topo, _ = load_topology_arg(topology)
    kind = parse_kind(collective)
    if size_list is None and all(x is None for x in (begin, end, factor, step)):
        sizes = list(DEFAULT_SIZES)
    else:
        sizes = sizes_from_options(size_list, begin, end, factor, step)
    names = method_list_arg(methods, "synth compare")
    if root is not None and not 0 <= root < topo.num_ranks:
        raise InputError("synth compare", "--root", root, f"not a rank of {topo.name} (0..{topo.num_ranks - 1})")

    with Progress(None, "compare", quiet=quiet or as_json, unit="candidate") as bar:
        result = compare(topo, kind, sizes, root=root, methods=names, model=model, budget=budget, progress=bar.count_callback())
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    else:
        click.echo(render(result))
