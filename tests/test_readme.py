"""README.md shows what synth does, and what it shows is true.

- The Python example runs as written (in a scratch folder).
- Every command whose output README.md shows either runs here and prints what README.md shows
  (the quick ones: `test_shown_output`), or sits in an ``<!-- output: ... -->`` block that
  `benchmarks/readme_examples.py` records and `benchmarks/readme_figures.py` writes (the long or
  timed ones; `test_recorded_examples_are_current` reruns them, slow).
- Every measured figure sits in a ``<!-- figures: ... -->`` block that agrees with the results the
  benchmarks recorded (`python benchmarks/readme_figures.py --check`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import sys

import pytest
from click.testing import CliRunner

from synth.cli import main
from synth.schedule import load_schedule, save_schedule

from .conftest import REPO

README = REPO / "README.md"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
GENERATED = re.compile(r"<!-- output: [\w.-]+ -->\n.*?<!-- /output -->", re.S)


def _benchmark_module(name: str):
    path = REPO / "benchmarks" / f"{name}.py"
    sys.path.insert(0, str(path.parent))  # the benchmarks import their helpers from beside them
    try:
        spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


# ============================================================================ the Python example
def test_readme_python_blocks_run(tmp_path, monkeypatch):
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "ar.json").is_file()


# ============================================================================ figures
def test_readme_figures_agree_with_the_recorded_results():
    """The same check as ``python benchmarks/readme_figures.py --check``: text only, no benchmark
    runs. A failure names the figure; rerun its benchmark and ``--write``, or fix the README."""
    problems = _benchmark_module("readme_figures").check()
    assert not problems, "\n".join(problems)


# ============================================================================ shown outputs
def shown_blocks() -> list[list[tuple[str, list[str]]]]:
    """README.md's code blocks that show commands (``$ ...``) and are not generated: per block, the
    commands with the lines README.md shows after each."""
    text = GENERATED.sub("", README.read_text(encoding="utf-8"))
    blocks = []
    for m in FENCE.finditer(text):
        if m.group("lang").strip():
            continue  # ```sh and ```python blocks show no output
        indent = m.group("indent")
        lines = [line[len(indent) :] if line.startswith(indent) else line for line in m.group("body").splitlines()]
        if not any(line.startswith("$ ") for line in lines):
            continue
        assert lines[0].startswith("$ "), f"README.md: a block shows output before its command: {lines[0]!r}"
        block = []
        for line in lines:
            if line.startswith("$ "):
                block.append((line[2:], []))
            else:
                block[-1][1].append(line)
        blocks.append(block)
    return blocks


def _pattern(expected: list[str]) -> re.Pattern:
    """README's ``...`` stands for text left out: a line of its own for any number of lines, inside
    a line for any text."""
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(re.escape(line.rstrip()).replace(r"\.\.\.", ".*?") + r"\n")
    return re.compile("".join(parts))


def _scratch(tmp_path):
    """A folder where README's relative paths work, with the two bad files its error example uses:
    ``out/broken.json`` (the DGX-1 ring allreduce with its second step done twice) and
    ``out/bad.json`` (the DGX-1 file with a negative bandwidth)."""
    for name in ("generated", "tests"):
        os.symlink(REPO / name, tmp_path / name)
    (tmp_path / "out").mkdir()
    ring = load_schedule(REPO / "generated" / "dgx1" / "allreduce-ring.json")
    save_schedule(ring.with_steps([*ring.steps[:2], ring.steps[1], *ring.steps[2:]]), tmp_path / "out" / "broken.json")
    doc = json.loads((REPO / "topologies" / "dgx1.json").read_text(encoding="utf-8"))
    doc["links"][0]["bandwidth"] = -25
    (tmp_path / "out" / "bad.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")


BLOCKS = shown_blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=[b[0][0].split(" -")[0][:40] for b in BLOCKS])
def test_shown_output(block, tmp_path, monkeypatch):
    _scratch(tmp_path)
    monkeypatch.chdir(tmp_path)
    for command, expected in block:
        argv = shlex.split(command)
        assert argv[0] == "synth", f"README.md shows the output of {command!r}: record it with benchmarks/readme_examples.py"
        result = CliRunner().invoke(main, argv[1:])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        output = "\n".join(line.rstrip() for line in result.output.splitlines()) + ("\n" if result.output else "")
        assert _pattern(expected).fullmatch(output), (
            f"$ {command}\nREADME.md shows:\n" + "\n".join(expected) + f"\nit prints:\n{output}"
        )


def test_the_quick_examples_are_found():
    commands = [command for block in BLOCKS for command, _ in block]
    assert "synth topo show dgx1" in commands
    assert any(c.startswith("synth verify out/broken.json") for c in commands)
    assert any(c.startswith("synth export msccl") for c in commands)


@pytest.mark.slow
def test_recorded_examples_are_current():
    """The long and timed examples, rerun (timings masked): their records still hold."""
    stale = _benchmark_module("readme_examples").check(["compare", "curves", "ilp", "scalable", "run"])
    assert not stale, f"out of date: {stale} (python benchmarks/readme_examples.py --only {','.join(stale)})"
