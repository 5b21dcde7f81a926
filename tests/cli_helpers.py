"""Running the command line in-process and asserting the bad-input contract: exit code 2, one line
on stderr naming the problem, nothing on stdout, no traceback."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner, Result

from synth.cli import main


@contextmanager
def working_directory(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def invoke(*args: str, cwd: Path | None = None) -> Result:
    """``synth ARGS`` in this process (stdout and stderr apart)."""
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(main, [str(a) for a in args])
    with working_directory(cwd):
        return runner.invoke(main, [str(a) for a in args])


def assert_bad_input(result: Result, *needles: str) -> str:
    """Exit 2 with exactly one ``synth: error:`` line on stderr containing every needle."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("synth: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
