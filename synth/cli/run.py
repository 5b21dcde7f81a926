"""``synth run``: execute a schedule for real, check its results, print an nccl-tests style table.

A thin layer over the backends of `synth.exec.backends`: the multiprocessing backend (default)
runs the ranks as local processes over shared memory; the MPI backend starts the venv's own
``mpiexec`` (``python -m synth.exec.mpi``, which is also what you start yourself to run across
machines); the torch backend starts one torch.distributed process per rank (gloo on the CPU;
``torchrun … -m synth.exec.torch_backend`` by hand). All take the same `RunSettings` and hand
back the rows this command prints.

Exit codes: 0 all results right; 1 a wrong result, or a schedule that fails verification (refused
before anything starts); 2 bad input; 3 a rank failed, was killed or hung; 130 interrupted.
"""

from __future__ import annotations

import sys

import click

from synth.cli._util import verify_or_exit
from synth.errors import InputError
from synth.exec.backends import BACKENDS, backend
from synth.exec.faults import ExecutionError, sigterm_as_interrupt
from synth.exec.report import Row, table_footer, table_header, table_row
from synth.exec.settings import RunSettings, parse_run_sizes, run_options


@click.command("run", short_help="Run a schedule for real (processes or MPI), check it, time it.")
@click.option(
    "--backend",
    "backend_name",
    type=click.Choice(list(BACKENDS)),
    default="mp",
    show_default=True,
    help="Local processes, MPI, or torch.distributed (gloo on CPU).",
)
@run_options
def run_cmd(backend_name, schedule, **options):
    """Run SCHEDULE on real numpy buffers, check every result against numpy, and print times and
    bandwidths as nccl-tests does. Exit 1 if a result is wrong (or the schedule is invalid)."""
    settings = RunSettings(schedule, **options)
    if settings.compare_native and backend_name not in ("mpi", "torch"):
        raise InputError("synth run", "--compare-native", True, "needs --backend mpi or torch")
    verify_or_exit(settings.schedule, settings.topology, settings.schedule_path)
    chosen = backend(backend_name)
    chosen.check_available()
    with_native = False

    def start(description: str, native_name: str | None) -> None:
        nonlocal with_native
        with_native = native_name is not None
        for line in settings.header(description) + table_header(native_name):
            click.echo(line)

    def show(index: int, row: Row) -> None:
        op = settings.cases[index].op
        click.echo(table_row(row.ours, op.name if op else None, row.native, with_native=with_native))

    try:
        with sigterm_as_interrupt():
            rows = chosen.run(settings, on_start=start, on_result=show)
    except ExecutionError as exc:  # one line per failing rank; the first failure's is the error
        for line in exc.others:
            click.echo(f"synth: {line}", err=True)
        raise
    native = [row.native for row in rows if row.native is not None]
    for line in table_footer([row.ours for row in rows], native or None, "PyTorch" if backend_name == "torch" else "MPI"):
        click.echo(line)
    if any(row.ours.wrong for row in rows) or any(m.wrong for m in native):
        sys.exit(1)


COMMANDS = [run_cmd]

__all__ = ["COMMANDS", "parse_run_sizes", "run_cmd"]  # parse_run_sizes: its old home
