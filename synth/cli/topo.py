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
from synth.fileio import prepare_output_dir, write_text_atomic
from synth.routing import Router, ring_order
from synth.text import printable
from synth.topology import Topology, load_topology, topology_from_document, topology_to_json


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
        rows.append(
            (
                printable(name),
                str(t.num_ranks),
                str(hosts),
                str(len(t.switches)),
                str(len(t.links)),
                printable(_first_sentence(t.description)),
            )
        )
    header = ("name", "ranks", "hosts", "switches", "links", "description")
    widths = [max(len(r[i]) for r in [*rows, header]) for i in range(5)]
    click.echo("  ".join(h.ljust(w) for h, w in zip(header, widths)) + "  " + header[5])
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[5])
    click.echo(f"({len(rows)} built-in topologies in {builtin_dir()})")


def describe_topology(t: Topology, source: str) -> list[str]:
    """Lines that `synth topo show` prints."""
    name, description = printable(t.name), printable(t.description)  # anyone's text: one line, no escapes
    lines = [f"{name}: {description}" if t.description else name, f"file: {printable(source)} (sha256 {t.sha256})"]
    hosts = Counter(t.hosts)
    host_text = ", ".join(f"{printable(h or '-')} x{n}" for h, n in list(hosts.items())[:6]) + (" ..." if len(hosts) > 6 else "")
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
            click.echo(f"synth: error: {printable(exc)}", err=True)
            bad += 1
            continue
        click.echo(
            f"OK {printable(source)}: {printable(t.name)}, {t.num_ranks} ranks, {len(t.switches)} switches,"
            f" {len(t.links)} directed links"
        )
    if bad:
        sys.exit(2)


@topo.command("write-builtins", hidden=True)
@click.option("--out", "out", type=click.Path(file_okay=False), default=None, help="Folder (default: the built-in folder).")
@click.option("--check", is_flag=True, help="Only compare; exit 1 if a file differs from its recipe.")
def write_builtins_cmd(out: str | None, check: bool) -> None:
    """Write (or check) the built-in topology files from their recipes."""
    folder = prepare_output_dir(out) if out and not check else (Path(out) if out else builtin_dir())
    differ = 0
    for name, recipe in BUILTIN_RECIPES.items():
        text = topology_to_json(recipe())
        path = folder / f"{name}.json"
        if check:
            same = path.is_file() and path.read_text(encoding="utf-8") == text
            differ += not same
            click.echo(f"{'same' if same else 'DIFFERS'} {path}")
        else:
            click.echo(f"{write_text_atomic(path, text).verb} {path}")
    if differ:
        sys.exit(1)


# ======================================================================================= gen
def _emit(t: Topology, output: str | None) -> None:
    text = topology_to_json(t)
    if output in (None, "-"):
        click.echo(text, nl=False)
    else:
        written = write_text_atomic(output, text)
        click.echo(
            f"{written.verb} {output}: {printable(t.name)}, {t.num_ranks} ranks, {len(t.switches)} switches,"
            f" {len(t.links)} directed links",
            err=True,
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
@click.option("--spines", type=int, default=2, show_default=True)
@_common
def gen_fattree(racks, servers, gpus, nvlink_bandwidth, nic_bandwidth, oversubscription, spines, name, output):
    """Multi-rack fat-tree of NVSwitch servers with top-of-rack and spine switches."""
    _generate(
        gen.fattree,
        output,
        racks=racks,
        servers=servers,
        gpus=gpus,
        nvlink_bandwidth=nvlink_bandwidth,
        nic_bandwidth=nic_bandwidth,
        oversubscription=oversubscription,
        spines=spines,
        name=name,
    )


# ------------------------------------------------------------------- machines nobody tuned for
def _parse_degrade(text: str) -> tuple[str, str, float]:
    """``A:B:FACTOR`` (FACTOR a number in (0, 1] or ``1/N``) → (A, B, factor)."""
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise InputError("synth topo gen", "--degrade", text, "expected NODE_A:NODE_B:FACTOR, e.g. n0-nic3:network:1/10")
    a, b, rate = parts
    try:
        if "/" in rate:
            num, den = rate.split("/", 1)
            factor = float(num) / float(den)
        else:
            factor = float(rate)
    except (ValueError, ZeroDivisionError):
        raise InputError("synth topo gen", "--degrade", text, "the factor must be a number such as 0.1 or 1/10") from None
    return a, b, factor


def _generate_family(builder, output: str | None, degrade: str | None, **kwargs) -> None:
    """Build a family member, optionally with one link degraded (`synth.generators.degrade`)."""
    try:
        t = builder(**kwargs)
    except ValueError as exc:
        raise InputError("synth topo gen", "parameters", {k: v for k, v in kwargs.items() if v is not None}, str(exc)) from None
    if degrade:
        a, b, factor = _parse_degrade(degrade)
        try:
            t = gen.degrade(t, a, b, factor)
        except ValueError as exc:
            raise InputError("synth topo gen", "--degrade", degrade, str(exc)) from None
    _emit(t, output)


def _degradable(func):
    func = click.option(
        "--degrade",
        default=None,
        metavar="A:B:FACTOR",
        help="Run the link between nodes A and B (both directions) at FACTOR of its rate, e.g. n0-nic3:network:1/10.",
    )(func)
    return _common(func)


@gen_group.command("mi250")
@click.option("--packages", type=int, default=8, show_default=True, help="MI250 packages per node (2 GCDs = 2 ranks each).")
@click.option("--nodes", type=int, default=1, show_default=True)
@click.option("--link-bandwidth", type=float, default=50.0, show_default=True, help="GB/s per xGMI link per direction.")
@click.option("--nic-bandwidth", type=float, default=25.0, show_default=True, help="One NIC per package (nodes > 1).")
@_degradable
def gen_mi250(packages, nodes, link_bandwidth, nic_bandwidth, degrade, name, output):
    """AMD MI250-like nodes: GCD pairs joined by 4, 2 or 1 xGMI links."""
    _generate_family(
        gen.mi250,
        output,
        degrade,
        packages=packages,
        nodes=nodes,
        link_bandwidth=link_bandwidth,
        nic_bandwidth=nic_bandwidth,
        name=name,
    )


@gen_group.command("mi300x")
@click.option("--nodes", type=int, default=1, show_default=True)
@click.option("--gpus", type=int, default=8, show_default=True, help="GPUs per node, fully connected.")
@click.option("--link-bandwidth", type=float, default=64.0, show_default=True, help="GB/s per xGMI link per direction.")
@click.option("--nic-bandwidth", type=float, default=50.0, show_default=True, help="One NIC per GPU (nodes > 1).")
@click.option("--rails", type=int, default=1, show_default=True, help="Network switches; GPU g's NIC on rail g mod rails.")
@_degradable
def gen_mi300x(nodes, gpus, link_bandwidth, nic_bandwidth, rails, degrade, name, output):
    """AMD MI300X-like nodes: GPUs fully connected by xGMI, a NIC per GPU between nodes."""
    _generate_family(
        gen.mi300x,
        output,
        degrade,
        nodes=nodes,
        gpus=gpus,
        link_bandwidth=link_bandwidth,
        nic_bandwidth=nic_bandwidth,
        rails=rails,
        name=name,
    )


@gen_group.command("gaudi")
@click.option("--boxes", type=int, default=1, show_default=True)
@click.option("--gpus", type=int, default=8, show_default=True, help="Accelerators per box.")
@click.option("--port-bandwidth", type=float, default=25.0, show_default=True, help="GB/s per RoCE port (Gaudi 2: 12.5).")
@click.option("--ports-per-peer", type=int, default=3, show_default=True)
@click.option("--scaleout-ports", type=int, default=3, show_default=True, help="Ports per accelerator to the leaf switches.")
@_degradable
def gen_gaudi(boxes, gpus, port_bandwidth, ports_per_peer, scaleout_ports, degrade, name, output):
    """Gaudi-style boxes: all-to-all RoCE ports inside, scale-out ports on leaf switches."""
    _generate_family(
        gen.gaudi,
        output,
        degrade,
        boxes=boxes,
        gpus=gpus,
        port_bandwidth=port_bandwidth,
        ports_per_peer=ports_per_peer,
        scaleout_ports=scaleout_ports,
        name=name,
    )


@gen_group.command("multihost")
@click.option("--hosts", type=int, default=4, show_default=True)
@click.option("--gpus", type=int, default=8, show_default=True, help="GPUs per host.")
@click.option("--fabric", type=click.Choice(["nvswitch", "pcie"]), default="nvswitch", show_default=True)
@click.option("--fabric-bandwidth", type=float, default=None, help="GB/s per GPU inside a host (default 300 nvswitch, 24 pcie).")
@click.option("--nic", type=click.Choice(["gpu", "host"]), default="gpu", show_default=True, help="A NIC per GPU or per host.")
@click.option("--nic-bandwidth", type=float, default=25.0, show_default=True)
@click.option("--pcie-bandwidth", type=float, default=24.0, show_default=True, help="GPU to a host's shared NIC.")
@_degradable
def gen_multihost(hosts, gpus, fabric, fabric_bandwidth, nic, nic_bandwidth, pcie_bandwidth, degrade, name, output):
    """Hosts on one network switch, with a NIC per GPU or one per host."""
    _generate_family(
        gen.multihost,
        output,
        degrade,
        hosts=hosts,
        gpus=gpus,
        fabric=fabric,
        fabric_bandwidth=fabric_bandwidth,
        nic=nic,
        nic_bandwidth=nic_bandwidth,
        pcie_bandwidth=pcie_bandwidth,
        name=name,
    )


@gen_group.command("rail-only")
@click.option("--hosts", type=int, default=4, show_default=True)
@click.option("--gpus", type=int, default=8, show_default=True, help="GPUs per host (= rails).")
@click.option("--nvlink-bandwidth", type=float, default=450.0, show_default=True, help="NVSwitch GB/s per GPU.")
@click.option("--nic-bandwidth", type=float, default=50.0, show_default=True)
@_degradable
def gen_rail_only(hosts, gpus, nvlink_bandwidth, nic_bandwidth, degrade, name, output):
    """Rail-only network: GPU g of every host on rail switch g, no spine."""
    _generate_family(
        gen.rail_only,
        output,
        degrade,
        hosts=hosts,
        gpus=gpus,
        nvlink_bandwidth=nvlink_bandwidth,
        nic_bandwidth=nic_bandwidth,
        name=name,
    )


@gen_group.command("fattree3")
@click.option("--pods", type=int, default=2, show_default=True)
@click.option("--racks", type=int, default=2, show_default=True, help="Racks (leaf switches) per pod.")
@click.option("--servers", type=int, default=2, show_default=True, help="Servers per rack.")
@click.option("--gpus", type=int, default=8, show_default=True, help="GPUs per server.")
@click.option("--nic-bandwidth", type=float, default=50.0, show_default=True, help="GB/s per NIC (one per GPU).")
@click.option("--leaf-oversubscription", type=float, default=1.0, show_default=True, help="Leaf downlink : uplink.")
@click.option("--spine-oversubscription", type=float, default=1.0, show_default=True, help="Spine downlink : uplink.")
@click.option("--spines", type=int, default=2, show_default=True, help="Spine switches per pod.")
@click.option("--cores", type=int, default=2, show_default=True)
@_degradable
def gen_fattree3(
    pods, racks, servers, gpus, nic_bandwidth, leaf_oversubscription, spine_oversubscription, spines, cores, degrade, name, output
):
    """3-tier fat-tree (leaf, spine, core) of NVSwitch servers, oversubscribed at two tiers."""
    _generate_family(
        gen.fattree3,
        output,
        degrade,
        pods=pods,
        racks=racks,
        servers=servers,
        gpus=gpus,
        nic_bandwidth=nic_bandwidth,
        leaf_oversubscription=leaf_oversubscription,
        spine_oversubscription=spine_oversubscription,
        spines=spines,
        cores=cores,
        name=name,
    )


@gen_group.command("torus3d")
@click.option("--x", "x", type=int, default=4, show_default=True)
@click.option("--y", "y", type=int, default=4, show_default=True)
@click.option("--z", "z", type=int, default=4, show_default=True)
@_bw(50.0)
@_lat(0.5)
@_degradable
def gen_torus3d(x, y, z, bandwidth, latency, degrade, name, output):
    """X x Y x Z 3-D torus (TPU-like)."""
    _generate_family(gen.torus3d, output, degrade, x=x, y=y, z=z, bandwidth=bandwidth, latency=latency, name=name)


@gen_group.command("dragonfly")
@click.option("--groups", type=int, default=4, show_default=True)
@click.option("--routers", type=int, default=4, show_default=True, help="Routers per group (all-to-all inside).")
@click.option("--ranks-per-router", type=int, default=2, show_default=True)
@click.option("--global-links", type=int, default=1, show_default=True, help="Links between every pair of groups.")
@click.option("--nic-bandwidth", type=float, default=25.0, show_default=True)
@click.option("--local-bandwidth", type=float, default=25.0, show_default=True)
@click.option("--global-bandwidth", type=float, default=25.0, show_default=True, help="GB/s per global link.")
@_degradable
def gen_dragonfly(
    groups, routers, ranks_per_router, global_links, nic_bandwidth, local_bandwidth, global_bandwidth, degrade, name, output
):
    """Dragonfly: groups of all-to-all routers, global links between every pair of groups."""
    _generate_family(
        gen.dragonfly,
        output,
        degrade,
        groups=groups,
        routers=routers,
        ranks_per_router=ranks_per_router,
        global_links=global_links,
        nic_bandwidth=nic_bandwidth,
        local_bandwidth=local_bandwidth,
        global_bandwidth=global_bandwidth,
        name=name,
    )


@gen_group.command("nvl72")
@click.option("--gpus", type=int, default=72, show_default=True, help="GPUs on the NVLink domain of a rack.")
@click.option("--racks", type=int, default=1, show_default=True)
@click.option("--nvlink-bandwidth", type=float, default=900.0, show_default=True, help="GB/s per GPU per direction.")
@click.option("--nic-bandwidth", type=float, default=100.0, show_default=True, help="One NIC per GPU (racks > 1).")
@click.option("--rails", type=int, default=4, show_default=True)
@_degradable
def gen_nvl72(gpus, racks, nvlink_bandwidth, nic_bandwidth, rails, degrade, name, output):
    """NVL72-like racks: 72 GPUs on one NVLink switch domain."""
    _generate_family(
        gen.nvl72,
        output,
        degrade,
        gpus=gpus,
        racks=racks,
        nvlink_bandwidth=nvlink_bandwidth,
        nic_bandwidth=nic_bandwidth,
        rails=rails,
        name=name,
    )


def _parse_layout(text: str) -> tuple[tuple[int, int, float], ...]:
    """``SOCKET:GPUSxGBPS,...`` → ((socket, gpus, GB/s), ...)."""
    entries = []
    for item in text.split(","):
        try:
            socket, rest = item.strip().split(":", 1)
            count, bandwidth = rest.lower().split("x", 1)
            entries.append((int(socket), int(count), float(bandwidth)))
        except ValueError:
            raise InputError(
                "synth topo gen pcie-asym",
                "--layout",
                text,
                f"expected SOCKET:GPUSxGBPS entries, e.g. 0:4x24,1:2x12 (at {item!r})",
            ) from None
    return tuple(entries)


@gen_group.command("pcie-asym")
@click.option(
    "--layout",
    default="0:4x24,0:2x12,1:2x24",
    show_default=True,
    help="PCIe switches as SOCKET:GPUSxGBPS, comma-separated (GB/s per link: Gen4 x16 24, Gen3 x16 12).",
)
@click.option("--inter-socket-bandwidth", type=float, default=10.0, show_default=True, help="UPI/xGMI GB/s.")
@_degradable
def gen_pcie_asym(layout, inter_socket_bandwidth, degrade, name, output):
    """PCIe server whose switches carry unequal numbers of GPUs at unequal speeds."""
    _generate_family(
        gen.pcie_asymmetric,
        output,
        degrade,
        layout=_parse_layout(layout),
        inter_socket_bandwidth=inter_socket_bandwidth,
        name=name,
    )


@gen_group.command("random")
@click.option("--seed", type=int, required=True, help="Same seed (and family) = byte-identical file.")
@click.option("--family", type=click.Choice(list(gen.RANDOM_FAMILIES)), default=None, help="Default: drawn from the seed.")
@_common
def gen_random(seed, family, name, output):
    """A random machine of one of the families above, parameters drawn from the seed."""
    try:
        t = gen.random_machine(seed, family)
    except ValueError as exc:
        raise InputError("synth topo gen random", "--seed", seed, str(exc)) from None
    if name:
        doc = t.to_document()
        doc["name"] = name
        t = topology_from_document(doc, source=f"<generated {name}>")
    _emit(t, output)
