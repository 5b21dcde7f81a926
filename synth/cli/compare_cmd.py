"""``synth compare``: every applicable method side by side, best first, per size, with the lower
bound and NCCL's analytic model (library: `synth.compare`)."""

from __future__ import annotations

import json

import click

from synth.cli._util import COLLECTIVE_CHOICE, load_topology_arg, sweep_options
from synth.cli.simulate_cmd import sizes_from_options
from synth.collective import parse_kind
from synth.compare import DEFAULT_SIZES, Comparison, compare, default_methods
from synth.errors import InputError
from synth.nccl_model import LABEL as NCCL_LABEL
from synth.progress import Progress
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
    for o in c.outcomes:
        if o.ok:
            continue
        lines.append(f"  not applicable: {o.method}: {o.note}")
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
    return "\n".join(lines)


@click.command("compare", short_help="Every applicable method side by side against the lower bound.")
@click.argument("topology")
@click.option("-c", "--collective", required=True, type=COLLECTIVE_CHOICE, help="Collective primitive.")
@click.option("--root", type=int, default=None, help="Root rank of a rooted collective (default 0).")
@sweep_options("1KiB..1GiB")
@click.option("-m", "--methods", default=None, help="Comma-separated methods (default: every applicable one).")
@click.option(
    "--model",
    type=click.Choice(["sync", "event", "one-port"]),
    default="sync",
    show_default=True,
    help="Simulator model (and the bound's): step-synchronous, event-driven, or the textbook one-port model.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar (it is only drawn on a terminal anyway).")
def compare_cmd(topology, collective, root, size_list, begin, end, factor, step, methods, model, as_json, quiet):
    """Synthesize every applicable method for a collective on TOPOLOGY, verify each schedule, and
    print predicted time, algbw, busbw and the ratio to the lower bound per size, best first."""
    topo, _ = load_topology_arg(topology)
    kind = parse_kind(collective)
    if size_list is None and all(x is None for x in (begin, end, factor, step)):
        sizes = list(DEFAULT_SIZES)
    else:
        sizes = sizes_from_options(size_list, begin, end, factor, step)
    names = [m.strip() for m in methods.split(",") if m.strip()] if methods else None
    if root is not None and not 0 <= root < topo.num_ranks:
        raise InputError("synth compare", "--root", root, f"not a rank of {topo.name} (0..{topo.num_ranks - 1})")

    total = len(names) if names is not None else len(default_methods(kind))
    with Progress(total, "compare", quiet=quiet or as_json, unit="method") as bar:
        result = compare(topo, kind, sizes, root=root, methods=names, model=model, progress=bar.step_callback())
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    else:
        click.echo(render(result))
