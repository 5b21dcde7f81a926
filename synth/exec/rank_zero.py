"""What rank 0 of an MPI or torch.distributed benchmark run does with each case's measurements.

Started by hand (``mpiexec … python -m synth.exec.mpi``, ``torchrun … -m synth.exec.torch_backend``)
rank 0 prints the nccl-tests style table itself (`PrintedTable`); under ``synth run`` it posts the
description and the rows to the launcher's board (`BoardPosts`), and the launcher prints them. Both
backends' ranks call the same three methods, so the two ways out are one choice at the start.
"""

from __future__ import annotations

import click

from synth.exec.mpi.board import Board
from synth.exec.report import Measurement, table_footer, table_header, table_row
from synth.exec.settings import RunSettings


class PrintedTable:
    """Rank 0's output when started by hand: the table, printed. ``native_owner`` names whose
    own collective the second group of columns times (MPI's or PyTorch's)."""

    def __init__(self, settings: RunSettings, native_owner: str):
        self.settings = settings
        self.native_owner = native_owner
        self.native: str | None = None

    def start(self, description: str, native_name: str | None) -> None:
        self.native = native_name
        for line in self.settings.header(description) + table_header(native_name):
            click.echo(line)

    def row(self, index: int, ours: Measurement, native: Measurement | None) -> None:
        op = self.settings.cases[index].op
        click.echo(table_row(ours, op.name if op else None, native, with_native=self.native is not None))

    def finish(self, ours: list[Measurement], native: list[Measurement]) -> None:
        for line in table_footer(ours, native or None, self.native_owner):
            click.echo(line)


class BoardPosts:
    """Rank 0's output under ``synth run``: the description and the rows, posted to the board."""

    def __init__(self, board: Board):
        self.board = board

    def start(self, description: str, native_name: str | None) -> None:
        self.board.post_description(description)

    def row(self, index: int, ours: Measurement, native: Measurement | None) -> None:
        self.board.post_result(index, (ours.time_us, ours.wrong), None if native is None else (native.time_us, native.wrong))

    def finish(self, ours: list[Measurement], native: list[Measurement]) -> None:
        """Nothing: the launcher writes the footer from the rows it read."""
