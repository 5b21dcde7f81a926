"""Whole processes at scale: every stage of a 4,096- and a 16,384-rank allgather as a user runs it.

Issue 16's targets are figures of whole ``synth`` processes, not of library calls: for each case
the topology file is written first with ``synth topo gen`` (so every command is exactly what a
user types), then each stage runs as a fresh process, timed from outside:

* ``synth synthesize TOPO -c allgather -m METHOD [--size 1GiB] -o ag.npz`` (synthesis,
  verification, writing) with the method a user runs on that machine:

  - on the fat-trees (servers of eight GPUs behind NICs, racks behind top-of-rack switches) the
    pipelined ``hierarchical`` allgather tuned for 1 GiB (``--size 1GiB``): across racks, then
    across the servers of a rack, then inside every server, which is what the host structure
    calls for (1.1 x the per-rank ingress bound at 1 GiB on 4,096 GPUs, where greedy's 731 steps
    each pay the spine latency: 2.2 x). The case ``fattree4k-greedy`` keeps greedy's row on the
    same machine beside it, for comparison;
  - on the tori ``greedy``: a torus has no hosts (every rank is its own node, joined to its four
    neighbours by direct links), so there is no host structure for ``hierarchical`` to follow,
    and greedy's schedule is within a few percent of the bound there already. It runs without
    ``--size`` (one chunk per piece), as tuning the chunking would multiply its transfers;
* up to 4,096 ranks, ``synth convert ag.npz ag.json`` and back to ``.npz`` (what the JSON
  encoding costs to write, and the byte-for-byte round trip); the small case also synthesizes
  straight to JSON and checks it gives the converted bytes;
* ``synth verify ag.npz`` (and ``ag.json``);
* ``synth simulate ag.npz --size 1KiB,1MiB,1GiB -m sync`` (the step-synchronous model, which is
  what the targets are about; ``--event`` adds a run of the event-driven model);
* ``synth export msccl ag.npz`` (applies to the small case; the 4,096-rank schedules are refused
  in one line, as a layout would need tens of gigabytes: shown);

Each row gives the wall time, the CPU time (user + system: on a shared machine the wall time
also counts the time the process waited for a core) and the peak resident memory of that process
alone (``os.wait4``'s rusage of the child), with the size of the file written and the command's
exit code. ``-v`` prints each command's output. This process stays small on purpose: Linux counts
in a child's peak RSS the memory its parent held when it forked, so files are compared in pieces
and the ratio to the bound is computed in a child.

    nice -n 10 .venv/bin/python benchmarks/scale.py                  # 256 and 4,096 ranks: results/scale.json
    nice -n 10 .venv/bin/python benchmarks/scale.py --set scale-torus128    # 16,384 ranks, one case a run:
    nice -n 10 .venv/bin/python benchmarks/scale.py --set scale-fattree16k  # results/scale-torus128.json, …
    .venv/bin/python benchmarks/scale.py --case torus16 --keep /tmp/scale   # one case, files kept, not recorded
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _results import Capture, record, run_child

from synth.topology import load_topology

SYNTH = str(Path(sys.executable).with_name("synth"))

#: the `synthesize` arguments of each method (see the module docstring for which machine gets which)
GREEDY = ["-m", "greedy"]
HIERARCHICAL = ["-m", "hierarchical", "--size", "1GiB"]
FATTREE4K = ["fattree", "--racks", "16", "--servers", "32", "--gpus", "8"]

#: case -> (ranks, topology file name, `synth topo gen` arguments, `synthesize` method arguments,
#: whether the JSON stages run)
CASES: dict[str, tuple[int, str, list[str], list[str], bool]] = {
    "torus64": (4096, "torus64x64.json", ["torus", "--rows", "64", "--cols", "64"], GREEDY, True),
    "fattree4k": (4096, "fattree16x32x8.json", FATTREE4K, HIERARCHICAL, True),
    "fattree4k-greedy": (4096, "fattree16x32x8.json", FATTREE4K, GREEDY, False),
    "torus128": (16384, "torus128x128.json", ["torus", "--rows", "128", "--cols", "128"], GREEDY, False),
    "fattree16k": (
        16384,
        "fattree3-4x16x32x8.json",
        ["fattree3", "--pods", "4", "--racks", "16", "--servers", "32", "--gpus", "8", "--leaf-oversubscription", "4"],
        HIERARCHICAL,
        False,
    ),
    "torus16": (256, "torus16x16.json", ["torus", "--rows", "16", "--cols", "16"], GREEDY, True),
}
#: The sets a full run records (results/NAME.json): the 4,096-rank cases with a small one beside
#: them (where MSCCL export applies, and JSON and .npz compare on a schedule under 100,000
#: transfers), and each 16,384-rank case on its own (each takes many minutes and gigabytes: run
#: them one at a time).
SETS: dict[str, tuple[str, ...]] = {
    "scale": ("torus16", "torus64", "fattree4k", "fattree4k-greedy"),
    "scale-torus128": ("torus128",),
    "scale-fattree16k": ("fattree16k",),
}
SIZES = "1KiB,1MiB,1GiB"


@dataclass
class Row:
    case: str
    stage: str
    command: list[str]
    wall_s: float
    cpu_s: float
    peak_mb: float
    exit_code: int
    output_mb: float | None
    last_line: str
    stdout: str


def run(case: str, stage: str, args: list[str], cwd: Path, output: str | None, verbose: bool) -> Row:
    """Run one command as a fresh process; its own wall time, CPU time and peak RSS."""
    child = run_child(args, cwd)
    wall, cpu, peak, code, text, errors = child.wall_s, child.cpu_s, child.peak_mb, child.exit_code, child.stdout, child.stderr
    if verbose:
        print(f"$ {shlex.join(args)}\n{text}{errors}", file=sys.stderr)
    # progress on stderr as each command ends (a 16,384-rank case takes many minutes)
    print(
        f"  {case} {stage}: {wall:.1f} s wall, {cpu:.1f} s CPU, {peak:.0f} MB peak, exit {code}",
        file=sys.stderr,
        flush=True,
    )
    lines = [line for line in (errors + text).splitlines() if line.strip() and not line.startswith("#")]
    if args[1] == "simulate" and "--json" in args and code == 0:
        lines = [line for line in errors.splitlines() if line.strip()] or ["(JSON)"]
    size = (cwd / output).stat().st_size / 1e6 if output and (cwd / output).is_file() else None
    return Row(
        case,
        stage,
        args,
        wall,
        cpu,
        peak,
        code,
        size,
        lines[-1][:150] if lines else "",
        text,
    )


def run_case(case: str, work: Path, *, event: bool, verbose: bool) -> tuple[list[Row], float | None]:
    """The case's rows and its step-synchronous time at 1 GiB over the per-rank ingress bound."""
    ranks, topo, gen_args, method, with_json = CASES[case]
    rows = [run(case, "topo gen", [SYNTH, "topo", "gen", *gen_args, "-o", topo], work, topo, verbose)]
    synth = [SYNTH, "synthesize", topo, "-c", "allgather", *method, "-q"]
    rows.append(run(case, "synthesize -> .npz", [*synth, "-o", "ag.npz"], work, "ag.npz", verbose))
    if rows[-1].exit_code != 0 or not (work / "ag.npz").is_file():
        return rows, None
    if with_json:  # JSON beside it: written by convert (and, for the small case, by synthesize)
        rows.append(run(case, "convert .npz -> .json", [SYNTH, "convert", "ag.npz", "ag.json"], work, "ag.json", verbose))
        rows.append(run(case, "convert .json -> .npz", [SYNTH, "convert", "ag.json", "back.npz"], work, "back.npz", verbose))
        rows[
            -1
        ].last_line = f"same bytes as synthesize -o ag.npz: {filecmp.cmp(work / 'back.npz', work / 'ag.npz', shallow=False)}"
    if ranks <= 256:
        rows.append(run(case, "synthesize -> .json", [*synth, "-o", "direct.json"], work, "direct.json", verbose))
        rows[-1].last_line = f"same bytes as convert: {filecmp.cmp(work / 'direct.json', work / 'ag.json', shallow=False)}"
    rows.append(run(case, "verify .npz", [SYNTH, "verify", "ag.npz", "--topology", topo], work, None, verbose))
    if (work / "ag.json").is_file():
        rows.append(run(case, "verify .json", [SYNTH, "verify", "ag.json", "--topology", topo], work, None, verbose))
    simulate = [SYNTH, "simulate", "ag.npz", "--topology", topo, "--size", SIZES]
    rows.append(run(case, "simulate .npz (sync, 3 sizes)", [*simulate, "-m", "sync", "--json"], work, None, verbose))
    ratio = None
    if rows[-1].exit_code == 0:
        (work / "simulate.json").write_text(rows[-1].stdout, encoding="utf-8")
        # in a child process: the topology of 16,384 ranks would otherwise grow this process, and
        # a child's peak RSS counts its parent's memory at fork time
        done = subprocess.run(
            [sys.executable, __file__, "--ratio", topo, "simulate.json"], cwd=work, capture_output=True, text=True, check=True
        )
        ratio = float(done.stdout)
    if event:
        rows.append(run(case, "simulate .npz (event, 3 sizes)", [*simulate, "-m", "event"], work, None, verbose))
    export = [SYNTH, "export", "msccl", "ag.npz", "--topology", topo, "-o", "ag.xml"]
    rows.append(run(case, "export msccl", export, work, "ag.xml", verbose))
    return rows, ratio


def ratio_at_1gib(topo: str, simulate_json: str) -> float:
    """The step-synchronous time at 1 GiB over the per-rank ingress bound ((R-1)/R x size / the
    smallest in-link bandwidth of a rank), from ``synth simulate --json``'s output."""
    doc = json.loads(Path(simulate_json).read_text(encoding="utf-8"))
    time_us = next(x["sync"]["time_us"] for x in doc["results"] if x["size"] == 2**30)
    topology = load_topology(topo)
    r = topology.num_ranks
    ingress = min(topology.rank_ingress(v) for v in range(r))
    return time_us / ((r - 1) / r * 2**30 / (ingress * 1e3))


def table(rows: list[Row]) -> str:
    out = [
        f"{'case':<16} {'stage':<30} {'wall':>7} {'cpu':>7} {'peak RSS':>9} {'file':>7} {'exit':>4}  result",
    ]
    for r in rows:
        size = f"{r.output_mb:.0f}MB" if r.output_mb is not None else "-"
        out.append(
            f"{r.case:<16} {r.stage:<30} {r.wall_s:>6.1f}s {r.cpu_s:>6.1f}s {r.peak_mb:>7.0f}MB {size:>7} {r.exit_code:>4}  "
            f"{r.last_line[:100]}"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=list(SETS), default="scale", help="Cases a full run records (default: scale).")
    parser.add_argument("--case", action="append", choices=list(CASES), help="Run only these cases (records nothing).")
    parser.add_argument("--keep", type=Path, default=None, help="Folder to work in and keep (default: a temporary one).")
    parser.add_argument("--event", action="store_true", help="Also simulate with the event-driven model.")
    parser.add_argument("-v", "--verbose", action="store_true", help="Print every command and its output.")
    parser.add_argument("--ratio", nargs=2, metavar=("TOPOLOGY", "SIMULATE_JSON"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ratio:
        print(ratio_at_1gib(*args.ratio))
        return
    cases = args.case or list(SETS[args.set])
    figures: dict[str, dict] = {}
    with Capture() as out:
        print(f"# load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}")
        first = True
        for case in cases:
            work = args.keep / case if args.keep else Path(tempfile.mkdtemp(prefix=f"synth-scale-{case}-"))
            work.mkdir(parents=True, exist_ok=True)
            load_before = os.getloadavg()[0]
            try:
                rows, ratio = run_case(case, work, event=args.event, verbose=args.verbose)
            finally:
                if args.keep is None:
                    shutil.rmtree(work, ignore_errors=True)
            text = table(rows)
            print(text if first else text.split("\n", 1)[1], flush=True)
            first = False
            if ratio is not None:
                print(f"{'':<16} step-synchronous time at 1 GiB / per-rank ingress bound: {ratio:.3f}")
            figures[case] = {
                "ranks": CASES[case][0],
                "method": " ".join(CASES[case][3]),
                "ratio_1gib": None if ratio is None else round(ratio, 4),
                "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                "stages": {
                    r.stage: {
                        "wall_s": round(r.wall_s, 3),
                        "cpu_s": round(r.cpu_s, 3),
                        "peak_mb": round(r.peak_mb, 1),
                        "file_mb": None if r.output_mb is None else round(r.output_mb, 2),
                        "exit": r.exit_code,
                    }
                    for r in rows
                },
            }
        print(f"# load average after: {os.getloadavg()[0]:.1f}")
        print(
            "  wall, cpu (user + system) and peak RSS are the child process's own (os.wait4); file = the output's size.\n"
            "  simulate verifies the schedule first (as every reading command does), then times it at 3 sizes."
        )
    if not args.case:
        command = ".venv/bin/python benchmarks/scale.py" + ("" if args.set == "scale" else f" --set {args.set}")
        record(args.set, command, out.text, figures)


if __name__ == "__main__":
    main()
