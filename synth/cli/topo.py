"""``synth topo``: list, show, validate and generate topologies."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import click

from synth import generators as gen
from synth.builtin import BUILTIN_RECIPES, builtin_dir, builtin_path, list_builtins
from synth.cli._util import load_topology_arg
from synth.errors import InputError, SynthError
from synth.fileio import write_text_atomic
from synth.routing import Router, ring_order
from synth.topology import Topology, load_topology, topology_to_json


@click.group(short_help="List, show, validate and generate topologies.")
def topo() -> None:
    """List, show, validate and generate topology files."""


def _first_sentence(text: str, width: int = 60) -> str:
    sentence = text.split(". ")[0].split(": ")[0]
    return sentence if len(sentence) <= width else sentence[: width - 3] + "..."


@topo.command("list")
def list_cmd() -> None:
    """List the built-in topologies."""
    rows = []
    for name in list_builtins():
        t = load_topology(builtin_path(name))
        hosts = len({h for h in t.hosts})
        rows.append((name, str(t.num_ranks), str(hosts), str(len(t.switches)), str(len(t.links)), _first_sentence(t.description)))
    header = ("name", "ranks", "hosts", "switches", "links", "description")
    widths = [max(len(r[i]) for r in [*rows, header]) for i in range(5)]
    click.echo("  ".join(h.ljust(w) for h, w in zip(header, widths)) + "  " + header[5])
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[5])
    click.echo(f"({len(rows)} built-in topologies in {builtin_dir()})")


def describe_topology(t: Topology, source: str) -> list[str]:
    """Lines that `synth topo show` prints."""
    lines = [f"{t.name}: {t.description}" if t.description else t.name, f"file: {source} (sha256 {t.sha256})"]
    hosts = Counter(t.hosts)
    host_text = ", ".join(f"{h or '-'} x{n}" for h, n in list(hosts.items())[:6]) + (" ..." if len(hosts) > 6 else "")
    lines.append(
        f"ranks: {t.num_ranks} on {len(hosts)} host(s) ({host_text}); switches: {len(t.switches)}; directed links: {len(t.links)}"
    )
    classes = Counter((lk.bandwidth, lk.latency) for lk in t.links)
    lines.append(
        "link classes: "
        + ", ".join(
            f"{bw:g} GB/s {lat:g} us x{n}" for (bw, lat), n in sorted(classes.items(), key=lambda kv: (-kv[0][0], kv[0][1]))
        )
    )
    ingress = [t.rank_ingress(r) for r in range(t.num_ranks)]
    egress = [t.rank_egress(r) for r in range(t.num_ranks)]
    lines.append(f"per rank: ingress {min(ingress):g}..{max(ingress):g} GB/s, egress {min(egress):g}..{max(egress):g} GB/s")
    order, direct = ring_order(t, Router(t))
    shown = " ".join(str(r) for r in order[:32]) + (" ..." if len(order) > 32 else "")
    lines.append(
        f"ring order: {shown} ({'every hop routed through links/switches' if direct else 'some hops relayed through ranks'})"
    )
    return lines


@topo.command("show")
@click.argument("topology")
@click.option("--json", "as_json", is_flag=True, help="Print the normalized topology file instead.")
def show_cmd(topology: str, as_json: bool) -> None:
    """Summarize a topology (built-in name or file): ranks, hosts, link classes, ring order."""
    t, source = load_topology_arg(topology)
    if as_json:
        click.echo(topology_to_json(t), nl=False)
        return
    for line in describe_topology(t, source):
        click.echo(line)


@topo.command("validate")
@click.argument("files", nargs=-1, required=True)
def validate_cmd(files: tuple[str, ...]) -> None:
    """Validate topology files; one line per file, exit code 2 if any is invalid."""
    bad = 0
    for spec in files:
        try:
            t, source = load_topology_arg(spec)
        except SynthError as exc:
            click.echo(f"synth: error: {exc}", err=True)
            bad += 1
            continue
        click.echo(f"OK {source}: {t.name}, {t.num_ranks} ranks, {len(t.switches)} switches, {len(t.links)} directed links")
    if bad:
        sys.exit(2)


@topo.command("write-builtins", hidden=True)
@click.option("--out", "out", type=click.Path(file_okay=False), default=None, help="Folder (default: the built-in folder).")
@click.option("--check", is_flag=True, help="Only compare; exit 1 if a file differs from its recipe.")
def write_builtins_cmd(out: str | None, check: bool) -> None:
    """Write (or check) the built-in topology files from their recipes."""
    folder = Path(out) if out else builtin_dir()
    differ = 0
    for name, recipe in BUILTIN_RECIPES.items():
        text = topology_to_json(recipe())
        path = folder / f"{name}.json"
        if check:
            same = path.is_file() and path.read_text(encoding="utf-8") == text
            differ += not same
            click.echo(f"{'same' if same else 'DIFFERS'} {path}")
        else:
            write_text_atomic(path, text)
            click.echo(f"wrote {path}")
    if differ:
        sys.exit(1)


# ======================================================================================= gen
def _emit(t: Topology, output: str | None) -> None:
    text = topology_to_json(t)
    if output in (None, "-"):
        click.echo(text, nl=False)
    else:
        write_text_atomic(output, text)
        click.echo(
            f"wrote {output}: {t.name}, {t.num_ranks} ranks, {len(t.switches)} switches, {len(t.links)} directed links", err=True
        )


def _common(func):
    func = click.option("-o", "--output", default=None, help="Output file (default: standard output).")(func)
    func = click.option("--name", default=None, help="Topology name (default: derived from the parameters).")(func)
    return func


def _bw(default: float):
    return click.option("--bandwidth", type=float, default=default, show_default=True, help="GB/s per link per direction.")


def _lat(default: float):
    return click.option("--latency", type=float, default=default, show_default=True, help="Latency (alpha) per link, us.")


def _generate(builder, output: str | None, **kwargs) -> None:
    try:
        t = builder(**kwargs)
    except ValueError as exc:
        raise InputError("synth topo gen", "parameters", {k: v for k, v in kwargs.items() if v is not None}, str(exc)) from None
    _emit(t, output)


@topo.group("gen")
def gen_group() -> None:
    """Generate a topology file of a parametrized family."""


@gen_group.command("ring")
@click.option("--ranks", type=int, default=8, show_default=True)
@_bw(25.0)
@_lat(0.7)
@_common
def gen_ring(ranks, bandwidth, latency, name, output):
    """RANKS ranks in a bidirectional ring."""
    _generate(gen.ring, output, n=ranks, bandwidth=bandwidth, latency=latency, name=name)


@gen_group.command("torus")
@click.option("--rows", type=int, default=4, show_default=True)
@click.option("--cols", type=int, default=4, show_default=True)
@_bw(25.0)
@_lat(0.7)
@_common
def gen_torus(rows, cols, bandwidth, latency, name, output):
    """ROWS x COLS 2-D torus."""
    _generate(gen.torus, output, rows=rows, cols=cols, bandwidth=bandwidth, latency=latency, name=name)


@gen_group.command("mesh")
@click.option("--rows", type=int, default=4, show_default=True)
@click.option("--cols", type=int, default=4, show_default=True)
@_bw(25.0)
@_lat(0.7)
@_common
def gen_mesh(rows, cols, bandwidth, latency, name, output):
    """ROWS x COLS 2-D mesh (no wrap-around)."""
    _generate(gen.mesh, output, rows=rows, cols=cols, bandwidth=bandwidth, latency=latency, name=name)


@gen_group.command("hypercube")
@click.option("--dim", type=int, default=3, show_default=True, help="Dimension (2**dim ranks).")
@_bw(25.0)
@_lat(0.7)
@_common
def gen_hypercube(dim, bandwidth, latency, name, output):
    """Hypercube of 2**DIM ranks."""
    _generate(gen.hypercube, output, dim=dim, bandwidth=bandwidth, latency=latency, name=name)


@gen_group.command("full")
@click.option("--ranks", type=int, default=8, show_default=True)
@_bw(25.0)
@_lat(0.7)
@_common
def gen_full(ranks, bandwidth, latency, name, output):
    """RANKS fully connected ranks."""
    _generate(gen.fully_connected, output, n=ranks, bandwidth=bandwidth, latency=latency, name=name)


@gen_group.command("nvswitch")
@click.option("--gpus", type=int, default=8, show_default=True, help="GPUs per box.")
@_bw(300.0)
@_lat(0.35)
@click.option("--boxes", type=int, default=1, show_default=True)
@click.option("--nic-bandwidth", type=float, default=None, help="One NIC per GPU at this GB/s (needed for --boxes > 1).")
@click.option("--nic-latency", type=float, default=1.3, show_default=True, help="NIC to network switch, us.")
@click.option("--rails", type=int, default=1, show_default=True, help="Network switches; GPU g's NIC on rail g mod rails.")
@_common
def gen_nvswitch(gpus, bandwidth, latency, boxes, nic_bandwidth, nic_latency, rails, name, output):
    """NVSwitch boxes (DGX A100/H100-like), optionally several joined by per-GPU NICs."""
    _generate(
        gen.nvswitch,
        output,
        gpus=gpus,
        bandwidth=bandwidth,
        latency=latency,
        boxes=boxes,
        nic_bandwidth=nic_bandwidth,
        nic_latency=nic_latency,
        rails=rails,
        name=name,
    )


@gen_group.command("dgx1")
@click.option("--boxes", type=int, default=1, show_default=True)
@click.option("--nvlink-bandwidth", type=float, default=25.0, show_default=True)
@click.option("--nic-bandwidth", type=float, default=None, help="One NIC per box (needed for --boxes > 1).")
@_common
def gen_dgx1(boxes, nvlink_bandwidth, nic_bandwidth, name, output):
    """DGX-1 hybrid cube-mesh boxes (NDv2 layout for several boxes)."""
    _generate(gen.dgx1, output, boxes=boxes, nvlink_bandwidth=nvlink_bandwidth, nic_bandwidth=nic_bandwidth, name=name)


@gen_group.command("pcie")
@click.option("--sockets", type=int, default=2, show_default=True)
@click.option("--switches-per-socket", type=int, default=1, show_default=True)
@click.option("--gpus-per-switch", type=int, default=4, show_default=True)
@click.option("--pcie-bandwidth", type=float, default=24.0, show_default=True, help="GB/s per PCIe link (Gen4 x16 = 24).")
@click.option("--inter-socket-bandwidth", type=float, default=10.0, show_default=True, help="UPI/QPI GB/s.")
@_common
def gen_pcie(sockets, switches_per_socket, gpus_per_switch, pcie_bandwidth, inter_socket_bandwidth, name, output):
    """PCIe tree: GPUs under PCIe switches under CPU sockets."""
    _generate(
        gen.pcie_tree,
        output,
        sockets=sockets,
        switches_per_socket=switches_per_socket,
        gpus_per_switch=gpus_per_switch,
        pcie_bandwidth=pcie_bandwidth,
        inter_socket_bandwidth=inter_socket_bandwidth,
        name=name,
    )


@gen_group.command("fattree")
@click.option("--racks", type=int, default=4, show_default=True)
@click.option("--servers", type=int, default=4, show_default=True, help="Servers per rack.")
@click.option("--gpus", type=int, default=8, show_default=True, help="GPUs per server.")
@click.option("--nvlink-bandwidth", type=float, default=300.0, show_default=True, help="NVSwitch GB/s per GPU.")
@click.option("--nic-bandwidth", type=float, default=50.0, show_default=True, help="GB/s per NIC (one per GPU).")
@click.option("--oversubscription", type=float, default=4.0, show_default=True, help="ToR downlink : uplink ratio.")
@click.option("--spines", type=int, default=2, show_default=True, help="Spine switches (per pod with --pods).")
@click.option("--pods", type=int, default=1, show_default=True, help="Pods of --racks racks, joined by core switches (3 tiers).")
@click.option("--cores", type=int, default=None, help="Core switches with --pods (default: as many as --spines).")
@click.option(
    "--core-oversubscription", type=float, default=1.0, show_default=True, help="Spine (aggregation) : core ratio, with --pods."
)
@_common
def gen_fattree(output, **options):
    """Multi-rack fat-tree of NVSwitch servers with top-of-rack and spine switches; with --pods,
    three tiers: pods of racks, joined by core switches."""
    _generate(gen.fattree, output, **options)
