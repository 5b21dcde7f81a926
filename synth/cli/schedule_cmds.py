"""``synth synthesize``, ``synth verify``, ``synth convert``, ``synth methods`` and ``synth regenerate``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from synth.cli._util import COLLECTIVE_CHOICE, load_located_topology, schedule_topology_arg, verify_or_exit
from synth.collective import ALL_KINDS, parse_kind
from synth.errors import InputError
from synth.exec.schedule_set import save_schedule_set
from synth.generated import entry_count, regenerate, schedule_filename
from synth.limits import check_collective_size
from synth.progress import Progress
from synth.registry import METHODS, make_collective, synthesize
from synth.schedule import load_schedule, save_schedule
from synth.schedule_npz import is_npz_path
from synth.schedule_set_build import build_schedule_set
from synth.units import parse_sizes


def method_options(method: str, seed, seeds, sizes_text) -> dict:
    """The options a command line gave for ``method`` (only those given), checked against what
    the method takes: --seed, --seeds, --size (one size, or for methods that take ``sizes`` a list
    or range)."""
    m = METHODS[method]
    options: dict = {}
    for flag, value in (("--seed", seed), ("--seeds", seeds), ("--size", sizes_text)):
        if value is None:
            continue
        name = flag[2:]
        if name == "size":
            try:
                sizes = parse_sizes(value)
            except ValueError as exc:
                raise InputError("synth synthesize", "--size", value, str(exc)) from None
            if "sizes" in m.options:
                options["sizes"] = sizes
                continue
            if len(sizes) > 1 and "size" in m.options:
                raise InputError("synth synthesize", "--size", value, f"method {method} takes one size")
        if name not in m.options:
            takes = ", ".join(f"--{o}" for o in sorted(m.options & {"seed", "seeds", "size", "sizes"})) or "none of these"
            raise InputError("synth synthesize", flag, value, f"method {method} does not take it (it takes {takes})")
        options[name] = sizes[0] if name == "size" else value
    return options


@click.command("synthesize", short_help="Synthesize and verify a schedule; write it.")
@click.argument("topology")
@click.option("-c", "--collective", required=True, type=COLLECTIVE_CHOICE, help="Collective primitive.")
@click.option("-m", "--method", default="ring", show_default=True, type=click.Choice(list(METHODS)), help="Synthesizer.")
@click.option("--root", type=int, default=None, help="Root rank of a rooted collective (default 0).")
@click.option("-k", "--chunks", type=int, default=None, help="Chunks per piece (default: what the method needs or chooses).")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Random seed (greedy; default 0).")
@click.option("--seeds", type=click.IntRange(min=1), default=None, help="Try this many seeds and keep the fastest (greedy).")
@click.option(
    "--size",
    "sizes_text",
    default=None,
    help="Message size the schedule is for (greedy, packing: one size; auto: a list or range 1KiB..1GiB).",
)
@click.option(
    "--sizes",
    "set_sizes",
    default=None,
    help="auto only: one schedule per size range, auto's choice at each of these sizes (a list or range), written as a"
    " schedule set into the folder -o names (what synth.torch's DDP hook reads).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar (it is only drawn on a terminal anyway).")
@click.option("-o", "--output", default=None, help="Schedule file (default: generated/<topology>/<collective>-<method>.json).")
def synthesize_cmd(topology, collective, method, root, chunks, seed, seeds, sizes_text, set_sizes, quiet, output):
    """Synthesize a schedule for a collective on TOPOLOGY (file or built-in name), verify it, write it."""
    topo, location = load_located_topology(topology)
    source = str(location.path)
    kind = parse_kind(collective)
    if set_sizes is not None:
        _synthesize_set(topo, location, kind, method, root, set_sizes, (chunks, seed, seeds, sizes_text), quiet, output)
        return
    try:
        coll = make_collective(topo, kind, method, root, chunks)
    except ValueError as exc:
        field = "--root" if "root" in str(exc) else "--chunks"
        raise InputError("synth synthesize", field, root if field == "--root" else chunks, str(exc)) from None
    per_transfer = METHODS[method].bytes_per_transfer(kind)
    check_collective_size(coll, "synth synthesize", "--chunks", chunks, bytes_per_transfer=per_transfer)
    options = method_options(method, seed, seeds, sizes_text)
    unit = "candidate" if method == "auto" else "delivery"
    with Progress(None, method, quiet=quiet, unit=unit) as bar:
        if method in ("greedy", "auto"):
            shown = [0]

            def progress(done: int, total: int) -> None:
                bar.set_total(total)
                bar.advance(done - shown[0])
                shown[0] = done

            options["progress"] = progress
        seconds: dict[str, float] = {}
        if method == "auto":
            options["timings"] = seconds.update
        schedule = synthesize(topo, kind, method, root=coll.root, chunks=chunks, options=options or None)
    if output is None:
        default_k = make_collective(topo, kind, method, coll.root).chunks_per_piece
        k = schedule.collective.chunks_per_piece
        name = schedule_filename(kind, method, coll.root, None if k == default_k else k)
        output = str(Path("generated") / topo.name / name)
    written = save_schedule(schedule, output, protect=[source], topology_source=location.recorded_for(output))
    click.echo(f"{written.verb} {output}")
    for line in schedule.params.get("explanation", []):
        click.echo(line)
    if seconds:
        click.echo("synthesis (s, wall): " + ", ".join(f"{label} {s:.2f}" for label, s in seconds.items()))
    click.echo(f"verified: {schedule.summary()}")


def _synthesize_set(topo, location, kind, method, root, set_sizes, others, quiet, output) -> None:
    """``--sizes``: auto's schedule per size range, as a schedule set in the folder ``-o`` names
    (`synth.exec.schedule_set`)."""
    where = "synth synthesize"
    if method != "auto":
        raise InputError(where, "--sizes", set_sizes, "a schedule set is auto's choice per size: add -m auto")
    if any(value is not None for value in others):
        raise InputError(where, "--sizes", set_sizes, "takes none of -k, --seed, --seeds, --size (auto picks per size)")
    if output is None:
        raise InputError(where, "--sizes", set_sizes, "give -o FOLDER, where the set's files go")
    try:
        sizes = parse_sizes(set_sizes)
    except ValueError as exc:
        raise InputError(where, "--sizes", set_sizes, str(exc)) from None
    if root is not None and not 0 <= root < topo.num_ranks:
        raise InputError(where, "--root", root, f"not a rank of {topo.name} (0..{topo.num_ranks - 1})")
    coll_root = make_collective(topo, kind, "auto", root).root
    with Progress(None, "auto per size", quiet=quiet, unit="size") as bar:
        shown = [0]

        def progress(done: int, total: int) -> None:
            bar.set_total(total)
            bar.advance(done - shown[0])
            shown[0] = done

        result = build_schedule_set(topo, kind, sizes, root=coll_root, progress=progress)
    save_schedule_set(result, output, protect=[location.path], topology=location)
    click.echo(f"wrote {output}: {result.describe()}")
    for entry in result.entries:
        click.echo(f"  {entry.describe()}")


@click.command("verify", short_help="Verify a schedule symbolically against its topology.")
@click.argument("schedule")
@click.option("-t", "--topology", default=None, help="Topology file or built-in name (default: the built-in the schedule names).")
def verify_cmd(schedule, topology):
    """Check SCHEDULE symbolically against its topology; exit 1 at the first violation."""
    sched = load_schedule(schedule)
    topo, _ = schedule_topology_arg(sched, schedule, topology)
    click.echo(verify_or_exit(sched, topo, schedule).summary())


@click.command("convert", short_help="Rewrite a schedule file as JSON or .npz (the output's extension chooses).")
@click.argument("source")
@click.argument("output")
def convert_cmd(source, output):
    """Read the schedule SOURCE (JSON or the columnar .npz; the content decides) and write it to
    OUTPUT: in the columnar encoding if OUTPUT ends in .npz, else as JSON. The schedule is not
    verified (no topology is needed); the transfers, steps and header are carried over exactly,
    so converting back gives the same bytes as a file synth wrote."""
    sched = load_schedule(source)
    written = save_schedule(sched, output, protect=[source])
    encoding = "columnar .npz" if is_npz_path(output) else "JSON"
    click.echo(f"{written.verb} {output} ({encoding}): {sched.summary()}")


@click.command("methods", short_help="List synthesizers and the collectives they serve.")
def methods_cmd():
    """List the synthesizers and the collectives each serves."""
    kinds = [k.value for k in ALL_KINDS]
    width = max(len(m) for m in METHODS)
    click.echo(" " * (width + 2) + " ".join(f"{k[:9]:>9}" for k in kinds))
    for name, m in METHODS.items():
        marks = " ".join(f"{'yes' if m.serves(k) else '-':>9}" for k in ALL_KINDS)
        click.echo(f"{name:<{width}}  {marks}")
    click.echo("")
    for name, m in METHODS.items():
        click.echo(f"{name}: {m.summary}")


@click.command("regenerate", short_help="Rebuild generated/ byte for byte (or --check it).")
@click.option("--out", type=click.Path(file_okay=False), default="generated", show_default=True, help="Folder to write.")
@click.option("--check", is_flag=True, help="Compare with the files instead of writing; exit 1 if any differs.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar (it is only drawn on a terminal anyway).")
def regenerate_cmd(out, check, quiet):
    """Rebuild generated/: every classic method x collective x built-in topology, verified."""
    count = 0
    with Progress(entry_count(), "regenerate", quiet=quiet, unit="case") as bar:

        def progress(entry):
            nonlocal count
            count += 1
            bar.advance()
            bar.note(f"{entry.topology} {entry.kind.value} {entry.method}")

        changed = regenerate(Path(out), check=check, progress=progress)
    if check:
        for rel in changed:
            click.echo(f"differs: {Path(out) / rel}")
        click.echo(f"{count} cases checked, {len(changed)} file(s) differ")
        if changed:
            sys.exit(1)
    else:
        click.echo(f"{count} cases, {len(changed)} file(s) written or removed under {out}")


COMMANDS = [synthesize_cmd, verify_cmd, convert_cmd, methods_cmd, regenerate_cmd]
