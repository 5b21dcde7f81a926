"""What a benchmark records: ``benchmarks/results/NAME.json``, the command that was run, the text it
printed and its figures (a JSON object of numbers and names), from its last full run.

``benchmarks/readme_figures.py`` renders README.md's figures and benchmarks/README.md's output
blocks from these files, and checks that the two READMEs agree with them. A benchmark records only
when it runs its whole default set (a run restricted to some cases prints but records nothing), so
a results file always holds one complete run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


class Capture:
    """Everything printed to stdout inside ``with Capture() as out:`` also lands in ``out.text``."""

    def __enter__(self) -> Capture:
        self._buffer = io.StringIO()
        self._stdout = sys.stdout
        sys.stdout = _Tee(self._stdout, self._buffer)
        return self

    def __exit__(self, *exc) -> None:
        sys.stdout = self._stdout

    @property
    def text(self) -> str:
        return self._buffer.getvalue()


def record(name: str, command: str, output: str, figures: dict[str, Any], *, shown: str | None = None) -> Path:
    """Write ``results/NAME.json`` (sorted keys, so a rerun changes only what changed). ``shown`` is
    the text an output block shows, when it is not ``$ command`` and the output (a README
    example's transcript)."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    doc = {"command": command, "figures": figures, "output": output}
    if shown is not None:
        doc["shown"] = shown
    path.write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    where = path.relative_to(RESULTS.parent.parent)
    print(f"recorded {where}; python benchmarks/readme_figures.py --write puts it in the READMEs", file=sys.stderr)
    return path


@dataclass(frozen=True)
class ChildRun:
    """One command run as a fresh process: its own wall time, CPU time (user + system) and peak
    resident set, its exit code and what it printed."""

    wall_s: float
    cpu_s: float
    peak_mb: float
    exit_code: int
    stdout: str
    stderr: str


def run_child(args: list[str], cwd: Path | None = None) -> ChildRun:
    """Run ``args`` as a fresh process and measure that process alone (``os.wait4``'s rusage of
    the child, not of this benchmark). Its output goes to temporary files, never to pipes, so a
    child that prints a lot cannot block before it is waited for."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    # ru_maxrss is in kB on Linux
    return ChildRun(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode, stdout, stderr)


def cases_in_fresh_processes(
    script: str,
    doc: str,
    cases: list[str],
    run_case: Callable[[str], dict],
    report: Callable[[list[str]], dict[str, dict]],
    name: str,
) -> None:
    """The command line of a benchmark whose every case runs in a fresh process of the same
    script (so each case's peak memory is its own): ``--case KEY`` (repeatable) runs only those
    cases and records nothing; ``--json`` (internal) runs one case in this process and prints its
    row as JSON; with no ``--case`` the whole set is recorded as ``results/NAME.json``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--case", choices=cases, action="append", help="run only these cases")
    parser.add_argument("--json", action="store_true", help="(internal) print one case as JSON")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(run_case(args.case[0])))
        return
    with Capture() as out:
        rows = report(args.case or cases)
    if not args.case:
        figures = {key: {k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()} for key, row in rows.items()}
        record(name, f".venv/bin/python benchmarks/{Path(script).name}", out.text, figures)


def case_row(script: str, key: str) -> dict:
    """One case's row, computed by ``script --json --case KEY`` in a fresh process."""
    out = subprocess.run([sys.executable, script, "--json", "--case", key], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)
