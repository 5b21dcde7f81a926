"""The ``synth`` command line: a thin layer over the library.

Bad input (unreadable or invalid files, unknown names, inapplicable methods) is reported as one
line on stderr with exit code 2; a schedule that fails verification prints its first violation and
exits 1. Each command group lives in its own module and registers itself here.
"""

from __future__ import annotations

import sys

import click

from synth import __version__
from synth.cli import bound, compare_cmd, ilp, interop, nccl_cmds, plot, run, schedule_cmds, simulate_cmd, topo
from synth.errors import SynthError
from synth.text import PrintableStream, printable


class SynthGroup(click.Group):
    """A click group that turns `SynthError` into one line and its exit code."""

    def invoke(self, ctx: click.Context):
        stdout = sys.stdout
        if not isinstance(stdout, PrintableStream):  # names from files never reach a terminal raw
            sys.stdout = PrintableStream(stdout)
        try:
            return super().invoke(ctx)
        except SynthError as exc:
            click.echo(f"synth: error: {printable(exc)}", err=True)
            sys.exit(exc.exit_code)
        except click.UsageError as exc:  # an unknown option or choice: one line too, not click's usage block
            where = exc.ctx.command_path if exc.ctx is not None else ctx.command_path
            click.echo(f"synth: error: {where}: {printable(exc.format_message())} (see {where} --help)", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("synth: interrupted", err=True)
            sys.exit(130)
        finally:
            sys.stdout = stdout


@click.group(cls=SynthGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="synth")
def main() -> None:
    """Topology-aware synthesis of collective-communication schedules.

    Describe a machine (or pick a built-in: synth topo list), synthesize a schedule for a collective,
    and verify it symbolically.
    """


def _register() -> None:
    main.add_command(topo.topo)
    commands = [
        *schedule_cmds.COMMANDS,
        simulate_cmd.simulate_cmd,
        bound.bound_cmd,
        compare_cmd.compare_cmd,
        nccl_cmds.nccl_model_cmd,
        *plot.COMMANDS,
        *ilp.COMMANDS,
    ]
    for command in commands:
        main.add_command(command)
    interop.register(main)
    main.add_command(run.run_cmd)


_register()
