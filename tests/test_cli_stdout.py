"""Nothing but our own output reaches stdout: every `--json` parses, `-q` prints only the result.

These run the real `synth` in a subprocess with stdout on a pipe, so output that a native library
writes straight to file descriptor 1 (HiGHS 1.16's banner when a `highspy.Highs` is constructed;
click's CliRunner never sees it) would break them. Each case is small, and together they call every
solver path: the alltoall LP with HiGHS and with CBC, the ILP with HiGHS and with CBC.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import click
import pytest

from synth.cli import main

from .conftest import REPO

DGX1_ALLTOALL = str(REPO / "generated" / "dgx1" / "alltoall-direct.json")

#: (command path, arguments after it): at least one case for every command that has --json
JSON_CASES = [
    (("topo", "show"), ["dgx1", "--json"]),
    (("bound",), ["dgx1", "-c", "alltoall", "--size", "1GiB", "--json"]),  # the alltoall LP, HiGHS
    (("bound",), ["dgx1", "-c", "alltoall", "--size", "1KiB,1GiB", "--solver", "cbc", "--json"]),  # the LP, CBC
    (("bound",), ["dgx1", "-c", "broadcast", "--root", "3", "--size", "1MiB", "--json"]),
    (("compare",), ["dgx1", "-c", "allgather", "-m", "ilp", "--sizes", "1KiB", "--json"]),  # the ILP, HiGHS
    (("compare",), ["dgx1", "-c", "alltoall", "-m", "direct", "--sizes", "1KiB,1GiB", "--json", "-q"]),  # its bound: the LP
    (("simulate",), [DGX1_ALLTOALL, "--size", "1KiB,1GiB", "--json"]),
]


def run_synth(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "synth", *args], capture_output=True, text=True, cwd=REPO, stdin=subprocess.DEVNULL, timeout=300
    )


def commands_with_json_option() -> set[tuple[str, ...]]:
    """Every command of the CLI (nested groups included) that takes --json."""
    found: set[tuple[str, ...]] = set()

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        elif any("--json" in p.opts for p in command.params if isinstance(p, click.Option)):
            found.add(path)

    walk(main, ())
    return found


def test_every_json_command_has_a_case():
    assert commands_with_json_option() == {path for path, _ in JSON_CASES}


@pytest.mark.parametrize(("path", "args"), JSON_CASES, ids=[" ".join((*p, *a[1:])) for p, a in JSON_CASES])
def test_json_output_parses(path, args):
    done = run_synth(*path, *args)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)  # the whole of stdout: a banner or a stray line fails here
    assert isinstance(doc, dict | list) and doc


def test_topology_written_to_stdout_parses():
    """`topo gen -o -` writes the topology file itself on stdout."""
    done = run_synth("topo", "gen", "torus", "--rows", "2", "--cols", "3", "-o", "-")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(json.loads(done.stdout)["links"]) > 0


# What `synth ilp` prints on stdout: its header, the verified schedule, the proof, the prediction.
ILP_LINES = [
    r"ilp: allgather on 8 ranks, 16 chunks on dgx1, objective time at 1MiB, solver (highs|cbc), symmetry .+",
    r"verified: allgather on 8 ranks, 16 chunks, \d+ steps, \d+ transfers \(method ilp, topology dgx1\)",
    r"\d+ steps, \d+ rounds, proven optimal .+; solved in [\d.]+ s",
    r"predicted [\d.]+ us at 1MiB \(algbw [\d.]+ GB/s\); lower bound [\d.]+ us \([\d.]+% of it\)",
]


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_ilp_quiet_prints_only_its_result(solver, tmp_path):
    out = tmp_path / "ag.json"
    done = run_synth("ilp", "dgx1", "-c", "allgather", "--steps", "2", "-k", "2", "--solver", solver, "-o", str(out), "-q")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""  # -q: no progress, and no library's banner moved there either
    lines = done.stdout.splitlines()
    expected = [ILP_LINES[0], re.escape(f"wrote {out}"), *ILP_LINES[1:]]
    assert len(lines) == len(expected), done.stdout
    for line, pattern in zip(lines, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    assert json.loads(out.read_text(encoding="utf-8"))["collective"]["name"] == "allgather"


@pytest.mark.skipif(sys.platform == "win32", reason="calls C's printf through the process's own C library")
def test_native_output_during_a_solve_goes_to_stderr_and_ours_stays_on_stdout():
    """The guard itself: what C prints inside it goes to stderr, what Python printed before and
    after it stays on stdout in order, and a Highs constructed by new_highs() prints nothing."""
    code = (
        "import ctypes\n"
        "from synth.solver_output import native_stdout_to_stderr, new_highs\n"
        "print('before')\n"
        "with native_stdout_to_stderr():\n"
        "    ctypes.CDLL(None).printf(b'from C\\n')\n"
        "print('after')\n"
        "new_highs()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "before\nafter\n"
    assert done.stderr == "from C\n"
