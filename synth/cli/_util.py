"""Small helpers shared by CLI commands."""

from __future__ import annotations

import click

from synth.builtin import get_topology, resolve_topology_path
from synth.collective import Kind, parse_kind
from synth.errors import InputError
from synth.topology import Topology


def load_topology_arg(spec: str) -> tuple[Topology, str]:
    """Topology and the path it came from, for a path or built-in name."""
    path = resolve_topology_path(spec)
    return get_topology(str(path)), str(path)


def collective_arg(value: str) -> Kind:
    try:
        return parse_kind(value)
    except ValueError:
        names = ", ".join(k.value for k in Kind)
        raise InputError("--collective", "collective", value, f"unknown collective (expected one of {names})") from None


COLLECTIVE_CHOICE = click.Choice([k.value for k in Kind], case_sensitive=False)
