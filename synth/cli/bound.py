"""``synth bound``: the physical lower bounds of a collective on a topology, per size."""

from __future__ import annotations

import json
import math
from typing import Any

import click

from synth.bounds import LP_MAX_VARIABLES, MODELS, BoundModel, BoundReport, BoundTerm, bound_model
from synth.cli._util import COLLECTIVE_CHOICE, load_topology_arg
from synth.cli.simulate_cmd import alpha_beta_options, check_alpha_beta
from synth.collective import parse_kind
from synth.errors import InputError
from synth.units import format_size, parse_sizes

_MODEL_NAMES = {"step": "step-synchronous", "event": "event-driven", "one-port": "one-port"}


def _num(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else "-"


def format_report(report: BoundReport) -> list[str]:
    """A size's bounds as text lines: a headline, then one row per bound, the binding one starred."""
    lines = [
        f"size {format_size(report.size)}: at least {_num(report.time_us, 3)} us; best algbw "
        f"{_num(report.algbw)} GB/s, busbw {_num(report.busbw)} GB/s (binding: {report.binding})"
    ]
    if not report.bounds:
        return lines
    width = max(len(b.name) for b in report.bounds)
    lines.append(f"    {'bound':<{width}}  {'time (us)':>13}  {'algbw GB/s':>11}  {'busbw GB/s':>11}  why")
    for b in report.bounds:
        mark = "*" if b.name == report.binding else " "
        lines.append(
            f"  {mark} {b.name:<{width}}  {_num(b.time_us, 3):>13}  {_num(b.algbw):>11}  {_num(b.busbw):>11}  {b.explanation}"
        )
    return lines


def model_document(model: BoundModel, sha256: str, reports: list[BoundReport]) -> dict[str, Any]:
    """The ``--json`` output: the size-independent terms, then every size's evaluation."""
    return {
        "format": "synth-bounds",
        "version": 1,
        "topology": {"name": model.topology, "sha256": sha256},
        "collective": {"name": model.kind.value, "root": model.root, "num_ranks": model.num_ranks},
        "model": model.model,
        "notes": list(model.notes),
        "terms": [_term_document(t) for t in model.terms],
        "sizes": [r.to_dict() for r in reports],
    }


def _term_document(term: BoundTerm) -> dict[str, Any]:
    """A term: its linear form, and for a piecewise bound the lines it is the min or max of (with
    "max-min", each line's group: the largest over the groups of each group's smallest line)."""
    doc: dict[str, Any] = {
        "name": term.name,
        "us_per_byte": term.us_per_byte,
        "latency_us": term.latency_us,
        "explanation": term.explanation,
    }
    lines = term.line_list()
    if lines:
        doc["combine"] = term.combine
        doc["lines"] = [
            {"latency_us": x.latency_us, "us_per_byte": x.us_per_byte, "note": x.note}
            | ({"group": x.group} if term.combine == "max-min" else {})
            for x in lines
        ]
    return doc


@click.command("bound", short_help="Lower bounds on a collective's time on a topology (which one binds).")
@click.argument("topology")
@click.option("-c", "--collective", required=True, type=COLLECTIVE_CHOICE, help="Collective primitive.")
@click.option("--root", type=int, default=None, help="Root rank of a rooted collective (default 0).")
@click.option(
    "-s",
    "--size",
    "sizes",
    required=True,
    help="nccl-tests size(s): 1GiB, a list 1KiB,1MiB,1GiB, or a range 1KiB..1GiB (doubling).",
)
@click.option(
    "--model",
    type=click.Choice(MODELS),
    default="step",
    show_default=True,
    help="Cost model the bounds hold for: step-synchronous (docs/formats.md), event-driven, or the textbook one-port model.",
)
@alpha_beta_options
@click.option(
    "--lp-max-variables",
    type=click.IntRange(min=0),
    default=LP_MAX_VARIABLES,
    show_default=True,
    help="Largest alltoall multicommodity-flow LP to solve.",
)
@click.option("--solver", type=click.Choice(["highs", "cbc"]), default="highs", show_default=True, help="LP solver.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def bound_cmd(topology, collective, root, sizes, model, alpha, beta, lp_max_variables, solver, as_json):
    """Print every lower bound of a COLLECTIVE on TOPOLOGY (file or built-in name) at each size,
    as a time and as the best algbw/busbw any schedule can reach, and mark the binding one.

    A bound is a time no valid schedule can beat: per-rank ingress/egress, cuts computed with
    max-flows, the alltoall routing LP, the latency of the farthest data, and bounds that combine
    latency and bandwidth: the time-expanded LP over the steps, the cut-latency bound, allreduce
    over contracted partitions (docs/bounds.md). With --model one-port, the textbook bounds.
    """
    topo, _ = load_topology_arg(topology)
    kind = parse_kind(collective)
    try:
        size_list = parse_sizes(sizes)
    except ValueError as exc:
        raise InputError("synth bound", "--size", sizes, str(exc)) from None
    check_alpha_beta("synth bound", model, alpha, beta)
    try:
        bm = bound_model(topo, kind, root, model=model, lp_max_variables=lp_max_variables, solver=solver, alpha=alpha, beta=beta)
    except ValueError as exc:
        raise InputError("synth bound", "--root", root, str(exc)) from None
    reports = [bm.at(size) for size in size_list]
    if as_json:
        click.echo(json.dumps(model_document(bm, topo.sha256, reports), indent=2, ensure_ascii=False))
        return
    root_text = f" root {bm.root}" if bm.root is not None else ""
    click.echo(f"{topo.name}: {kind.value}{root_text} on {bm.num_ranks} ranks, {_MODEL_NAMES[model]} cost model")
    for note in bm.notes:
        click.echo(f"note: {note}")
    for report in reports:
        click.echo("")
        for line in format_report(report):
            click.echo(line)


COMMANDS = [bound_cmd]
