"""``synth export msccl``, ``synth export msccl-set``, ``synth import msccl`` and ``synth topo import
nccl``: other tools' formats.

Thin commands over `synth.interop`: they read, call the library, write with
`synth.fileio.write_text_atomic` (never over an input) and print one summary line; warnings go to
standard error.
"""

from __future__ import annotations

from pathlib import Path

import click

from synth import generators as gen
from synth.builtin import builtin_path, get_topology
from synth.cli._util import COLLECTIVE_CHOICE, load_topology_arg, schedule_topology_arg, verify_or_exit
from synth.collective import parse_kind
from synth.errors import InputError
from synth.fileio import write_text_atomic
from synth.interop.msccl_export import check_export_memory, check_export_transfers, export_msccl
from synth.interop.msccl_import import import_msccl
from synth.interop.msccl_set import INDEX_PATH, build_set, write_set
from synth.interop.msccl_xml import MAX_CHANNELS, PROTOCOLS, algo_to_xml, parse_msccl
from synth.interop.nccl_topology import import_nccl_topology
from synth.progress import Progress
from synth.schedule import load_schedule, save_schedule
from synth.schedule_npz import npz_transfer_count
from synth.topology import Topology, topology_to_json
from synth.units import format_size, parse_size, parse_sizes

#: The topology an imported MSCCL algorithm runs on when none is given: an NVSwitch box with as many
#: GPUs (every GPU pair one hop through the switch, like the machines MSCCL targets and MSCCLang's
#: own ``fully_connected``): the built-in of that size where there is one, else `generators.nvswitch`
#: with its defaults (what ``synth topo gen nvswitch --gpus N`` writes).
DEFAULT_NVSWITCH_BOX = {8: "dgx-a100", 16: "dgx2"}


def default_topology(ngpus: int) -> tuple[Topology, str | None, str]:
    """The topology assumed for an MSCCL file of ``ngpus`` GPUs without ``--topology``: (topology,
    the path it came from or None, a note saying what was assumed)."""
    name = DEFAULT_NVSWITCH_BOX.get(ngpus)
    if name is not None:
        topo = get_topology(name)
        return topo, str(builtin_path(name)), f"no --topology: assuming the built-in {name}, an {ngpus}-GPU NVSwitch box"
    topo = gen.nvswitch(ngpus)
    note = (
        f"no --topology: assuming {topo.name}, {ngpus} GPUs on one switch at {topo.links[0].bandwidth:g} GB/s each "
        f"(every pair one hop, as in MSCCLang's fully_connected; synth topo gen nvswitch --gpus {ngpus} writes it, "
        "for synth verify); pass --topology for your machine"
    )
    return topo, None, note


def _warn(lines) -> None:
    for line in lines:
        click.echo(f"synth: warning: {line}", err=True)


def _size(option: str, text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise InputError("synth export msccl", option, text, str(exc)) from None


# ======================================================================================= export
@click.group("export", short_help="Write a schedule in another tool's format (MSCCL XML).")
def export_group() -> None:
    """Write a synth schedule in another tool's format."""


@export_group.command("msccl")
@click.argument("schedule")
@click.option("-o", "--output", default=None, help="XML file to write (default: standard output).")
@click.option("-t", "--topology", default=None, help="Topology file or built-in name (default: the built-in the schedule names).")
@click.option("--channels", type=int, default=1, show_default=True, help="Channels to spread chunks over (chunk mod N).")
@click.option("--proto", type=click.Choice(PROTOCOLS), default="Simple", show_default=True, help="NCCL protocol.")
@click.option(
    "--min-bytes",
    default=None,
    help="Smallest call size (bytes, the runtime's count) to use it for (default: from the sizes the schedule was tuned "
    "for, else 0).",
)
@click.option(
    "--max-bytes",
    default=None,
    help="Largest call size, included (default: from the sizes the schedule was tuned for, else no limit, 2^63-1).",
)
@click.option("--inplace/--outofplace", default=False, show_default=True, help="Buffer semantics of the algorithm.")
@click.option("--name", default=None, help="Algorithm name (default: synth <collective> <method> on <topology>).")
def export_msccl_cmd(schedule, output, topology, channels, proto, min_bytes, max_bytes, inplace, name):
    """Export SCHEDULE as an MSCCL algorithm XML (MSCCL runtime, RCCL). The schedule is verified
    first; the XML is executed symbolically before it is written."""
    count = npz_transfer_count(schedule)
    if count is not None:  # a .npz file says how many transfers it holds before its columns are read
        check_export_transfers(count, schedule)
    sched = load_schedule(schedule)
    check_export_memory(sched)  # before verifying: a schedule too large to lay out is refused at once
    topo, topo_source = schedule_topology_arg(sched, schedule, topology)
    verify_or_exit(sched, topo, schedule)
    lo = None if min_bytes is None else _size("--min-bytes", min_bytes)
    hi = None if max_bytes is None else _size("--max-bytes", max_bytes)
    exported = export_msccl(sched, channels=channels, proto=proto, min_bytes=lo, max_bytes=hi, inplace=inplace, name=name)
    _warn(exported.notes)
    text = algo_to_xml(exported.algo)
    if output in (None, "-"):
        click.echo(text, nl=False)
        click.echo(f"exported {exported.summary()}", err=True)
        return
    write_text_atomic(output, text, protect=[schedule, topo_source])
    click.echo(f"wrote {output}: {exported.summary()}")


@export_group.command("msccl-set", short_help="Write a folder of MSCCL algorithms, auto's choice per size range.")
@click.argument("topology")
@click.option("-c", "--collective", required=True, type=COLLECTIVE_CHOICE, help="Collective primitive.")
@click.option(
    "--sizes",
    "size_list",
    default="1KiB..1GiB",
    show_default=True,
    help="Sample sizes (nccl-tests bytes): a list, a..b for powers of 2 from a to b; the set covers first to last.",
)
@click.option("-o", "--output", required=True, help="Folder to write (new or empty; the runtime loads every file in it).")
@click.option("--root", type=int, default=None, help="Root rank of a rooted collective (default 0).")
@click.option(
    "--inplace/--outofplace", default=None, help="Buffer semantics (default: both, one file each per range, as RCCL ships)."
)
@click.option("--channels", type=int, default=1, show_default=True, help="Channels to spread chunks over (chunk mod N).")
@click.option("--proto", type=click.Choice(PROTOCOLS), default="Simple", show_default=True, help="NCCL protocol.")
@click.option("--budget", type=float, default=None, help="Seconds auto may spend per sample size (default: auto's own).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar (it is only drawn on a terminal anyway).")
def export_msccl_set_cmd(topology, collective, size_list, output, root, inplace, channels, proto, budget, quiet):
    """For each sample size, let auto choose the best schedule for COLLECTIVE on TOPOLOGY; write one
    MSCCL algorithm per range of sizes with the same choice (contiguous, non-overlapping
    minBytes..maxBytes) into the folder -o, with an index in its subfolder index/."""
    topo, topo_source = load_topology_arg(topology)
    kind = parse_kind(collective)
    try:
        sizes = parse_sizes(size_list)
    except ValueError as exc:
        raise InputError("synth export msccl-set", "--sizes", size_list, str(exc)) from None
    if root is not None and not 0 <= root < topo.num_ranks:
        raise InputError("synth export msccl-set", "--root", root, f"not a rank of {topo.name} (0..{topo.num_ranks - 1})")
    if budget is not None and budget < 0:
        raise InputError("synth export msccl-set", "--budget", budget, "must be at least 0")
    if not 1 <= channels <= MAX_CHANNELS:
        raise InputError("synth export msccl-set", "--channels", channels, f"must be 1 … {MAX_CHANNELS}")
    modes = (True, False) if inplace is None else (inplace,)
    with Progress(len(set(sizes)), "auto per size", quiet=quiet, unit="size") as bar:
        built = build_set(
            topo,
            kind,
            sizes,
            root=root,
            modes=modes,
            proto=proto,
            channels=channels,
            budget=budget,
            progress=lambda done, total: bar.advance(),
        )
    _warn(built.notes)
    for entry in built.entries:
        _warn(f"{entry.filename}: {note}" for note in entry.exported.notes)
    given = [
        ("--root", root),
        ("--channels", channels if channels != 1 else None),
        ("--proto", proto if proto != "Simple" else None),
    ]
    given += [("--budget", budget)]
    command = " ".join(
        ["synth export msccl-set", topology, "-c", kind.value, "--sizes", size_list]
        + [f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}" for flag, value in given if value is not None]
        + ([] if inplace is None else ["--inplace" if inplace else "--outofplace"])
        + ["-o", output]
    )
    write_set(built, output, command=command, protect=[topo_source])
    for entry in built.entries:
        mode = "in place" if entry.inplace else "out of place"
        chosen = entry.schedule.params.get("chosen", entry.schedule.method)
        click.echo(
            f"wrote {Path(output) / entry.filename}: {entry.min_bytes} … {entry.max_bytes} bytes, {mode}, {chosen} "
            f"({entry.schedule.num_steps} steps, {entry.schedule.collective.num_chunks} chunks)"
        )
    click.echo(
        f"wrote {Path(output) / INDEX_PATH}: {len(built.entries)} file(s) covering {format_size(built.sizes[0])} … "
        f"{format_size(built.sizes[-1])}"
    )


# ======================================================================================= import
@click.group("import", short_help="Read another tool's schedule format (MSCCL XML).")
def import_group() -> None:
    """Read a schedule written by another tool."""


@import_group.command("msccl")
@click.argument("algo")
@click.option("-o", "--output", required=True, help="Schedule file to write.")
@click.option(
    "-t",
    "--topology",
    default=None,
    help="Topology file or built-in name (default: an NVSwitch box with as many GPUs: dgx-a100 for 8, dgx2 for 16, "
    "else synth topo gen nvswitch --gpus N; said on standard error).",
)
@click.option("--root", type=int, default=None, help="Root of a rooted collective (default: inferred from the buffers it uses).")
@click.option("--inplace/--outofplace", default=None, help="Buffer semantics (default: what the file declares).")
def import_msccl_cmd(algo, output, topology, root, inplace):
    """Import an MSCCL algorithm XML as a synth schedule: executed symbolically (deadlock, race and
    result checks), turned into steps, verified, written."""
    parsed, warnings = parse_msccl(algo)
    if topology is None:
        topo, topo_source, note = default_topology(parsed.ngpus)
        click.echo(f"synth: note: {note}", err=True)
    else:
        topo, topo_source = load_topology_arg(topology)
    result = import_msccl(parsed, topo, inplace=inplace, root=root, warnings=warnings)
    _warn(result.warnings)
    save_schedule(result.schedule, output, protect=[algo, topo_source])
    click.echo(f"wrote {output}: {result.summary()}; verified")


# ================================================================================ topo import
@click.group("import", short_help="Build a topology from another tool's description (NCCL dump).")
def topo_import_group() -> None:
    """Build a topology file from another tool's description of a machine."""


@topo_import_group.command("nccl")
@click.argument("system_xml")
@click.option("-o", "--output", default=None, help="Topology file to write (default: standard output).")
@click.option("--hosts", type=int, default=1, show_default=True, help="Replicate the machine into this many hosts.")
@click.option(
    "--network",
    type=click.Choice(["single", "rails"]),
    default="single",
    show_default=True,
    help="Join the hosts' NICs through one switch, or one switch per rail (i-th NIC of every host).",
)
@click.option("--nvlink-bandwidth", type=float, default=None, help="GB/s per NVLink instead of NCCL's per-generation figure.")
@click.option("--nvlink-only", is_flag=True, help="Keep GPUs and NVLink/NVSwitch only (no PCIe, CPUs, NICs); one host.")
@click.option(
    "--virtual-bridges",
    type=click.Choice(["devices", "dumped"]),
    default="devices",
    show_default=True,
    help="A VM's emulated x1 bridge above faster devices: count it at the devices' link, or as dumped (NCCL's figure).",
)
@click.option("--name", default=None, help="Topology name (default: the file's name).")
def topo_import_nccl_cmd(system_xml, output, hosts, network, nvlink_bandwidth, nvlink_only, virtual_bridges, name):
    """Import an NCCL topology dump (NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE) as a topology file.

    Figures NCCL does not take as written (link width 0, empty speeds, ...) are taken as NCCL
    takes them, with a warning on standard error for each kind; see docs/interop.md."""
    imported = import_nccl_topology(
        system_xml,
        hosts=hosts,
        network=network,
        name=name,
        nvlink_bandwidth=nvlink_bandwidth,
        nvlink_only=nvlink_only,
        virtual_bridges=virtual_bridges,
    )
    _warn(imported.warnings)
    text = topology_to_json(imported.topology)
    if output in (None, "-"):
        click.echo(text, nl=False)
        click.echo(f"imported {imported.summary()}", err=True)
        return
    write_text_atomic(output, text, protect=[system_xml])
    click.echo(f"wrote {output}: {imported.summary()}")


def register(main: click.Group) -> None:
    """Add ``export``, ``import`` and ``topo import`` to the command line."""
    main.add_command(export_group)
    main.add_command(import_group)
    topo = main.commands.get("topo")
    if isinstance(topo, click.Group):
        topo.add_command(topo_import_group)


__all__ = ["register"]
