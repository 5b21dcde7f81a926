"""Small helpers shared by CLI commands."""

from __future__ import annotations

import sys

import click

from synth.builtin import TopologyLocation, load_located, locate_schedule_topology, locate_topology
from synth.collective import Kind, parse_kind
from synth.errors import InputError
from synth.registry import METHODS
from synth.schedule import Schedule
from synth.text import printable
from synth.topology import Topology
from synth.verify import VerifyResult, verify


def _loaded(location: TopologyLocation, schedule: Schedule | None = None) -> tuple[Topology, str]:
    """Load the topology (`synth.builtin.load_located`: checked against the schedule it was found
    through), and say on stderr which file was used when that may surprise."""
    topology = load_located(location, schedule)
    if location.note:
        click.echo(f"synth: note: {printable(location.note)}", err=True)
    return topology, str(location.path)


def load_located_topology(spec: str) -> tuple[Topology, TopologyLocation]:
    """`load_topology_arg` with where it was found (for ``topology.source`` in outputs)."""
    location = locate_topology(spec)
    return _loaded(location)[0], location


def load_topology_arg(spec: str) -> tuple[Topology, str]:
    """Topology and the path it came from, for a path, a built-in name or ``builtin:NAME``; a
    file that shadows a built-in's name is used, with a note on stderr."""
    return _loaded(locate_topology(spec))


def schedule_topology_arg(schedule: Schedule, schedule_path: str, topology: str | None) -> tuple[Topology, str]:
    """The topology given with ``--topology``, or else the one the schedule records
    (``topology.source``, or a built-in's name); and the path it came from. Which file a recorded
    source led to is said on stderr; the caller's verification checks its hash."""
    if topology is not None:
        return load_topology_arg(topology)
    return _loaded(locate_schedule_topology(schedule, schedule_path), schedule)


def verify_or_exit(schedule: Schedule, topology: Topology, schedule_path: str, *, quiet: bool = False) -> VerifyResult:
    """The verifier's result for a valid schedule; for an invalid one, print its first violation
    (unless ``quiet``) and exit 1."""
    result = verify(schedule, topology)
    if not result.ok:
        if not quiet:
            click.echo(f"{schedule_path}: INVALID {schedule.collective.describe()}: {result.violation}")
        sys.exit(1)
    return result


def sweep_options(default: str):
    """The size options of commands that sweep sizes (``synth compare``, ``synth plot compare``,
    ``synth report``): ``--sizes LIST`` or nccl-tests' ``-b/-e/-f/-i``, passed as ``size_list``,
    ``begin``, ``end``, ``factor``, ``step``; ``default`` says what no option means."""
    options = [
        click.option("--sizes", "--size", "size_list", default=None, help=f"Sizes, e.g. 1KiB,1MiB,1GiB (default {default})."),
        click.option("-b", "--minbytes", "begin", default=None, help="nccl-tests style: first size."),
        click.option("-e", "--maxbytes", "end", default=None, help="nccl-tests style: last size."),
        click.option("-f", "--stepfactor", "factor", default=None, help="nccl-tests style: multiply by this (default 2)."),
        click.option("-i", "--stepbytes", "step", default=None, help="nccl-tests style: add this instead."),
    ]

    def decorate(command):
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def collective_arg(value: str, command: str = "synth") -> Kind:
    """The collective named on the command line, in any of the spellings `parse_kind` takes."""
    try:
        return parse_kind(value)
    except ValueError:
        names = ", ".join(k.value for k in Kind)
        raise InputError(command, "--collective", value, f"unknown collective (expected one of {names})") from None


class CollectiveType(click.ParamType):
    """``-c/--collective``: any spelling users bring (``all_reduce``, ``reduce_scatter``,
    ``all_to_all``, ...), given to the command as its `Kind`; an unknown name is one line, exit 2."""

    name = "collective"

    def convert(self, value, param, ctx):
        if isinstance(value, Kind):
            return value
        return collective_arg(value, ctx.command_path if ctx is not None else "synth")

    def get_metavar(self, param, ctx=None) -> str:
        return "[" + "|".join(k.value for k in Kind) + "]"


COLLECTIVE_CHOICE = CollectiveType()


def method_list_arg(text: str | None, command: str, option: str = "--methods") -> list[str] | None:
    """A comma-separated list of method names, each one `synth methods` lists (None: not given)."""

    if text is None:
        return None
    names = [m.strip() for m in text.split(",") if m.strip()]
    if not names:
        raise InputError(command, option, text, "names no method")
    for name in names:
        if name not in METHODS:
            raise InputError(command, option, name, f"unknown method (known: {', '.join(METHODS)})")
    return names
