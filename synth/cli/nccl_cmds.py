"""``synth nccl-model``: NCCL's analytic cost model for a topology (a reference, not a schedule)."""

from __future__ import annotations

import click

from synth.cli._util import COLLECTIVE_CHOICE, load_topology_arg
from synth.collective import Collective, parse_kind
from synth.errors import InputError
from synth.nccl_model import ARCHES, LABEL, model_inputs, nccl_model
from synth.units import format_size, parse_sizes

DEFAULT_SIZES = "1K,64K,1M,16M,256M,1G"


@click.command("nccl-model", short_help="NCCL's analytic cost model (Ring/Tree x LL/LL128/Simple) per size.")
@click.argument("topology")
@click.option("-c", "--collective", required=True, type=COLLECTIVE_CHOICE, help="Collective primitive.")
@click.option(
    "--sizes",
    default=DEFAULT_SIZES,
    show_default=True,
    help="Comma-separated sizes (nccl-tests units: 8, 1K, 1M, 1G; a..b doubles from a to b).",
)
@click.option("--arch", type=click.Choice(ARCHES), default=None, help="GPU generation (default: guessed from the topology).")
def nccl_model_cmd(topology, collective, sizes, arch):
    """Predict NCCL's time for COLLECTIVE on TOPOLOGY with its own cost model (tuning.cc): every
    enabled algorithm/protocol, and the one NCCL's tuner would pick. A model, not a schedule."""
    topo, _ = load_topology_arg(topology)
    kind = parse_kind(collective)
    try:
        size_list = parse_sizes(sizes)
    except ValueError as exc:
        raise InputError("synth nccl-model", "--sizes", sizes, str(exc)) from None
    predictions = nccl_model(topo, kind, size_list, arch=arch)
    inputs = model_inputs(topo, arch)
    busbw = Collective(kind, topo.num_ranks).busbw_factor()
    nodes = f"{inputs.nodes} node{'s' if inputs.nodes > 1 else ''}"
    click.echo(
        f"{LABEL}: {kind.value} on {topo.name} ({inputs.ranks} ranks, {nodes}, {inputs.channels} channels x "
        f"{inputs.channel_bandwidth:.4g} GB/s, {inputs.intra_hw} inside hosts, {inputs.arch})"
    )
    header = ["size"] + [p.name for p in predictions] + ["NCCL picks", "time(us)", "algbw", "busbw"]
    rows = []
    for i, size in enumerate(size_list):
        times = [p.times_us[i] for p in predictions]
        best = min(range(len(predictions)), key=lambda j: times[j])
        algbw = size / (times[best] * 1e3)
        rows.append(
            [format_size(size)]
            + [f"{t:.1f}" for t in times]
            + [predictions[best].name, f"{times[best]:.1f}", f"{algbw:.2f}", f"{algbw * busbw:.2f}"]
        )
    widths = [max(len(header[c]), *(len(r[c]) for r in rows)) for c in range(len(header))]
    click.echo("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for row in rows:
        click.echo("  ".join(v.rjust(w) for v, w in zip(row, widths)))
    click.echo("times in us per algorithm/protocol; algbw and busbw in GB/s (nccl-tests definitions)")


COMMANDS = [nccl_model_cmd]
