"""The README's examples that take long or print timings, run as README.md shows them.

Each example runs its commands in a scratch folder (with ``generated/``, ``tests/`` and ``.venv``
linked in, so the README's relative paths work), standard output and error together as a terminal
shows them, and records the transcript, and the figures the README's prose quotes from it, in
``results/readme-NAME.json``. ``benchmarks/readme_figures.py --write`` then puts each transcript in
README.md's ``<!-- output: readme-NAME -->`` block and the figures in its ``<!-- figures: ... -->``
blocks. The README's quick commands are not here: ``tests/test_readme.py`` runs them and compares
their output with what README.md shows.

    .venv/bin/python benchmarks/readme_examples.py [--only compare,curves,ilp,scalable,run]

``--check`` reruns the examples and says whether their records are current, comparing the timed
ones with every number masked (``tests/test_readme.py`` runs it in the slow suite). A timed
example also records the load average at its end.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from _results import RESULTS, record

REPO = Path(__file__).resolve().parent.parent
LINKED = ("generated", "tests", ".venv")
#: a number with the spaces that align it: what differs between two runs of a timed example
NUMBER = re.compile(r" *\d+(?:\.\d+)*")


@dataclass(frozen=True)
class Example:
    commands: tuple[str, ...]
    #: the transcript as shown (may leave lines out); default: all of it
    shown: Callable[[str], str] = lambda text: text
    #: the figures the README's prose quotes, read from the full transcript
    figures: Callable[[str], dict] = lambda text: {}
    #: timings in the output: --check compares it with every number masked
    timed: bool = False
    #: a blank line between the commands' transcripts
    gap: bool = False
    notes: tuple[str, ...] = field(default=())


# ================================================================================ synth compare
COMPARE_ROW = re.compile(r"^  (\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)\b")


def _compare_sections(text: str) -> dict[str, list[str]]:
    sections, current = {}, None
    for line in text.splitlines():
        if line.startswith("size "):
            current = sections.setdefault(line.split()[1], [])
        elif current is not None and line.strip():
            current.append(line)
    return sections


def compare_shown(text: str, keep: int = 4) -> str:
    """Per size, the column header, the ``keep`` fastest methods, ``...`` for the others, then the
    lower bound and NCCL's model."""
    out = []
    methods = 0
    for line in text.splitlines():
        if line.startswith("size "):
            methods = 0
        elif COMPARE_ROW.match(line):
            methods += 1
            if methods > keep:
                if methods == keep + 1:
                    out.append("  ...")
                continue
        out.append(line)
    return "\n".join(out) + "\n"


def compare_figures(text: str) -> dict:
    figures = {}
    for size, lines in _compare_sections(text).items():
        rows = {}
        for line in lines:
            m = COMPARE_ROW.match(line)
            if m:
                method, time_us, _, _, ratio, steps, chunks = m.groups()
                rows[method] = {"time_us": float(time_us), "x_bound": float(ratio), "steps": int(steps), "chunks": int(chunks)}
        figures[f"at_{size}"] = rows
    return figures


# ================================================================================ ILP, runs
def ilp_figures(text: str) -> dict:
    m = re.search(r"\(([\d.]+) s, (\d+) solves\)", text)
    return {"seconds": float(m.group(1)), "solves": int(m.group(2))} if m else {}


EXAMPLES: dict[str, Example] = {
    "compare": Example(
        ("synth compare fattree-4rack --collective allreduce --sizes 1KiB,1MiB,1GiB",),
        shown=compare_shown,
        figures=compare_figures,
    ),
    "ilp": Example(("synth ilp dgx1 -c allgather --pareto -q",), figures=ilp_figures, timed=True),
    # auto on a machine of more than 8 ranks: no ILP, whose result depends on the time it is given
    "scalable": Example(
        (
            "synth synthesize fattree-4rack -c allgather -m greedy --size 1GiB -o fat-ag-greedy.json",
            "synth simulate fat-ag-greedy.json --size 1GiB",
            "synth synthesize dgx-a100x2 -c allgather -m packing --size 1GiB -o a100x2-ag-packing.json",
            "synth synthesize dgx-a100x2 -c allgather -m auto --size 1GiB -o a100x2-ag-auto.json",
        )
    ),
    "run": Example(
        (
            "synth run generated/dgx1/allreduce-ring.json -b 8 -e 16M -f 16",
            "synth run generated/dgx1/allreduce-ring.json --backend mpi --compare-native -b 1K -e 16M -f 16",
            ".venv/bin/mpiexec -n 8 .venv/bin/python -m synth.exec.mpi generated/dgx1/allgather-multiring.json"
            " --size 1M -d float32,int32",
        ),
        timed=True,
        gap=True,
    ),
}


def _argv(command: str) -> list[str]:
    argv = shlex.split(command)
    if argv[0] == "synth":
        return [sys.executable, "-m", "synth", *argv[1:]]
    return argv


def transcript(example: Example, scratch: Path) -> str:
    parts = []
    for command in example.commands:
        out = subprocess.run(_argv(command), cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{command}: exit code {out.returncode}\n{out.stdout}")
        text = "".join(line.rstrip() + "\n" for line in out.stdout.splitlines())
        parts.append(f"$ {command}\n{text}")
    return ("\n" if example.gap else "").join(parts)


def scratch_folder() -> tempfile.TemporaryDirectory:
    tmp = tempfile.TemporaryDirectory(prefix="synth-readme-")
    for name in LINKED:
        if (REPO / name).exists():
            os.symlink(REPO / name, Path(tmp.name) / name)
    return tmp


# ================================================================================ DGX-1 curves
CURVE_SIZES = tuple(1 << k for k in range(3, 31))  # 8 B .. 1 GiB, as `synth plot compare` draws them


def curves() -> tuple[str, dict]:
    """What README.md says about its DGX-1 allreduce picture (`synth plot compare dgx1
    --collective allreduce`): which method is fastest over which sizes, from where the best
    schedule is within 1% of the bound, and how one ring compares with six at 1 GiB."""
    from synth.builtin import get_topology
    from synth.compare import compare
    from synth.plot.curves import best_ranges
    from synth.units import format_size

    c = compare(get_topology("dgx1"), "allreduce", CURVE_SIZES)
    ranges = [{"method": r.method, "low": format_size(r.low), "high": format_size(r.high)} for r in best_ranges(c)]
    by_method = {o.method: o for o in c.outcomes if o.ok}
    tuned_sizes = sorted({(size, label) for size, (label, _, _) in zip(c.sizes, by_method["greedy"].tuned, strict=True)})
    tuned = list(dict.fromkeys(label for _, label in tuned_sizes))
    within = next(format_size(s) for i, s in enumerate(c.sizes) if all(c.best(j).ratio <= 1.01 for j in range(i, len(c.sizes))))
    last = len(c.sizes) - 1
    ring, multiring = by_method["ring"].times_us[last], by_method["multiring"].times_us[last]
    figures = {
        "ranges": ranges,
        "greedy_tuned_for": tuned,
        "within_1_percent_from": within,
        "multiring_x_bound_1GiB": round(multiring / c.bounds[last].time_us, 6),
        "ring_over_multiring_1GiB": round(ring / multiring, 6),
    }
    lines = [f"allreduce on dgx1, {len(c.sizes)} sizes 8B..1GiB, step-synchronous model"]
    lines += [f"  fastest from {r['low']} to {r['high']}: {r['method']}" for r in ranges]
    lines.append(f"  greedy tuned for: {', '.join(tuned)}")
    lines.append(f"  the fastest schedule is within 1% of the lower bound from {within} on")
    lines.append(f"  at 1GiB: ring {ring:.1f} us, multiring {multiring:.1f} us ({ring / multiring:.2f} x)")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    return text, figures


# ================================================================================ main
def run_example(name: str) -> tuple[str, str, dict]:
    """(full transcript, transcript as shown, figures)."""
    if name == "curves":
        text, figures = curves()
        return text, text, figures
    example = EXAMPLES[name]
    with scratch_folder() as scratch:
        text = transcript(example, Path(scratch))
    print(text, end="")
    figures = {**example.figures(text), "load": round(os.getloadavg()[0], 1)} if example.timed else example.figures(text)
    return text, example.shown(text), figures


NAMES = ("compare", "curves", "ilp", "scalable", "run")


def mask_wall_seconds(text: str) -> str:
    """``text`` with the numbers of its ``synthesis (s, wall):`` lines (and their indented
    continuation lines) masked: how long each candidate took differs from run to run."""
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        inside = "synthesis (s, wall):" in line or (inside and line.startswith(" "))
        out.append(NUMBER.sub(" #", line) if inside else line)
    return "".join(out)


def check(names) -> list[str]:
    """Rerun the examples that do not depend on timing (and the timed ones with their decimal
    numbers masked); the names whose recorded transcript differs."""
    import json

    stale = []
    for name in names:
        path = RESULTS / f"readme-{name}.json"
        recorded = json.loads(path.read_text(encoding="utf-8"))["shown"] if path.is_file() else None
        _, shown, _ = run_example(name)
        timed = name in EXAMPLES and EXAMPLES[name].timed
        mask = (lambda s: NUMBER.sub(" #", s)) if timed else mask_wall_seconds
        if recorded is None or mask(recorded) != mask(shown):
            stale.append(name)
    return stale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(NAMES), help=f"examples to run ({', '.join(NAMES)})")
    parser.add_argument("--check", action="store_true", help="rerun and compare with the records instead of recording")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    for name in names:
        if name not in NAMES:
            parser.error(f"unknown example {name!r} (known: {', '.join(NAMES)})")
    if args.check:
        stale = check(names)
        if stale:
            raise SystemExit(f"out of date: {', '.join(stale)} (python benchmarks/readme_examples.py --only {','.join(stale)})")
        print("every record is current", file=sys.stderr)
        return
    for name in names:
        text, shown, figures = run_example(name)
        record(f"readme-{name}", f".venv/bin/python benchmarks/readme_examples.py --only {name}", text, figures, shown=shown)


if __name__ == "__main__":
    main()
