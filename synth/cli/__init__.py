"""The ``synth`` command line: a thin layer over the library.

Bad input (unreadable or invalid files, unknown names, inapplicable methods) is reported as one
line on stderr with exit code 2; a schedule that fails verification prints its first violation and
exits 1. Each command group lives in its own module and registers itself here.
"""

from __future__ import annotations

import sys

import click

from synth import __version__
from synth.errors import SynthError


class SynthGroup(click.Group):
    """A click group that turns `SynthError` into one line and its exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except SynthError as exc:
            click.echo(f"synth: error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("synth: interrupted", err=True)
            sys.exit(130)


@click.group(cls=SynthGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="synth")
def main() -> None:
    """Topology-aware synthesis of collective-communication schedules.

    Describe a machine (or pick a built-in: synth topo list), synthesize a schedule for a collective,
    and verify it symbolically.
    """


def _register() -> None:
    from synth.cli import interop, schedule_cmds, topo

    main.add_command(topo.topo)
    for command in schedule_cmds.COMMANDS:
        main.add_command(command)
    main.add_command(__import__("synth.cli.bound", fromlist=["bound_cmd"]).bound_cmd)
    main.add_command(__import__("synth.cli.nccl_cmds", fromlist=["nccl_model_cmd"]).nccl_model_cmd)
    main.add_command(__import__("synth.cli.simulate_cmd", fromlist=["simulate_cmd"]).simulate_cmd)
    main.add_command(__import__("synth.cli.compare_cmd", fromlist=["compare_cmd"]).compare_cmd)
    for command in __import__("synth.cli.plot", fromlist=["COMMANDS"]).COMMANDS:
        main.add_command(command)
    interop.register(main)


_register()
