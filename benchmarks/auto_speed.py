"""How long ``synth synthesize -m auto --size S`` takes on 64 and 128 ranks, and what it gives.

Issue 17's target: auto in at most 30 s per size on 64 ranks and 2 min on 128, with the same or
better result. Every case is one whole process, as a user runs it: ``synth synthesize TOPOLOGY -c
COLLECTIVE -m auto --size S -q -o FILE`` (the topology made first by ``synth topo gen``, outside the
timing). Per case: the wall seconds, the child's CPU seconds (user + system; the machine is shared,
so wall time depends on the load and CPU time less so) and its peak resident set, what auto chose and
its predicted step-synchronous time (read back from the schedule file it wrote: auto records every
candidate's predicted time there), and how long each candidate took.

``--synth`` runs another checkout's command (e.g. the code before a change, from a ``git worktree``
of that commit with its own ``make setup``), so one results file holds a before and an after run,
each under its ``--label``; the summary compares the two per case: wall, CPU and peak memory
ratios and whether the chosen time is the same or better.

    nice -n 10 .venv/bin/python benchmarks/auto_speed.py --label after
    nice -n 10 .venv/bin/python benchmarks/auto_speed.py --label before --synth ../old/.venv/bin/synth
    .venv/bin/python benchmarks/auto_speed.py --case gaudi64-allreduce-64KiB      # one case, records nothing
    .venv/bin/python benchmarks/auto_speed.py --summary                          # reprint the recorded runs
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import RESULTS, Capture, record, run_child

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NAME = "auto_speed"

#: case name -> (machine, ``synth topo gen`` arguments or a built-in name, ranks, collective, size)
#: The machines are the midsize benchmark's (benchmarks/midsize.py): its 64-rank random machines
#: and the 128-rank built-in, at the collectives and sizes where auto took longest in its first run.
CASES: dict[str, tuple[str, tuple[str, ...] | str, int, str, str]] = {
    "mi250-64-alltoall-1GiB": ("random-mi250-1", ("random", "--seed", "1", "--family", "mi250"), 64, "alltoall", "1GiB"),
    "gaudi-64-allreduce-64KiB": ("random-gaudi-1", ("random", "--seed", "1", "--family", "gaudi"), 64, "allreduce", "64KiB"),
    "gaudi-64-allgather-1GiB": ("random-gaudi-1", ("random", "--seed", "1", "--family", "gaudi"), 64, "allgather", "1GiB"),
    "fattree-128-alltoall-64KiB": ("fattree-4rack", "fattree-4rack", 128, "alltoall", "64KiB"),
    "fattree-128-allreduce-64KiB": ("fattree-4rack", "fattree-4rack", 128, "allreduce", "64KiB"),
    "fattree-128-broadcast-1GiB": ("fattree-4rack", "fattree-4rack", 128, "broadcast", "1GiB"),
}
#: issue 17's limits: seconds per size by ranks
LIMITS = {64: 30.0, 128: 120.0}


def candidate_seconds(stdout: str) -> dict[str, float]:
    """The wall seconds of every candidate run, from the ``synthesis (s, wall): LABEL S, ...`` line
    that ``synth synthesize -m auto`` prints (auto keeps them out of the schedule file, which is the
    same for the same inputs); empty for a synth that does not print it."""
    for line in stdout.splitlines():
        if line.startswith("synthesis (s, wall): "):
            pairs = (item.rsplit(" ", 1) for item in line.removeprefix("synthesis (s, wall): ").split(", "))
            return {label: float(seconds) for label, seconds in pairs}
    return {}


def run_case(synth: str, name: str, workdir: Path) -> dict:
    machine, source, ranks, collective, size = CASES[name]
    if isinstance(source, tuple):
        topology = workdir / f"{machine}.json"
        if not topology.exists():
            subprocess.run([synth, "topo", "gen", *source, "-o", str(topology)], check=True, capture_output=True)
        target = str(topology)
    else:
        target = source
    out = workdir / f"{name}.schedule.json"
    command = [synth, "synthesize", target, "-c", collective, "-m", "auto", "--size", size, "-q", "-o", str(out)]
    child = run_child(command)
    if child.exit_code != 0:
        raise SystemExit(f"{name}: {' '.join(command)} failed:\n{child.stdout}{child.stderr}")
    params = json.loads(out.read_text(encoding="utf-8"))["synthesizer"]["params"]
    chosen = params["chosen"]
    return {
        "case": name,
        "machine": machine,
        "ranks": ranks,
        "collective": collective,
        "size": size,
        "wall_s": round(child.wall_s, 2),
        "cpu_s": round(child.cpu_s, 2),
        "peak_rss_mib": round(child.peak_mb, 1),
        "chosen": chosen,
        "time_us": params["predicted_us"][chosen][0],
        "candidate_seconds": candidate_seconds(child.stdout),
        "skipped": sorted(params.get("skipped", {})),
    }


def show(run: dict) -> None:
    limit = LIMITS.get(run["ranks"])
    print(
        f"{run['case']:<30} {run['ranks']:>5} {run['wall_s']:>8.1f} {run['cpu_s']:>8.1f} {run['peak_rss_mib']:>8.0f}"
        f"  {run['time_us']:>12.3f}  {run['chosen']}" + (f"  (limit {limit:g} s)" if limit else "")
    )
    seconds = ", ".join(f"{label} {s:.1f}" for label, s in run["candidate_seconds"].items())
    print(f"{'':<30} candidates (s): {seconds}")


HEADER = f"{'case':<30} {'ranks':>5} {'wall s':>8} {'cpu s':>8} {'MiB':>8}  {'chosen us':>12}  chosen"


def summary(runs: dict[str, list[dict]]) -> dict:
    """Per case, after / before: wall, CPU, memory, and the chosen time (<= 1 is the same or better)."""
    if "before" not in runs or "after" not in runs:
        return {}
    before = {r["case"]: r for r in runs["before"]}
    out = {}
    print("\nafter / before, per case (the machine was shared: CPU seconds are the steadier figure)")
    print(f"{'case':<30} {'wall':>7} {'cpu':>7} {'memory':>7} {'time':>7}  within limit (cpu)")
    for r in runs["after"]:
        b = before.get(r["case"])
        if b is None:
            continue
        ratios = {
            "wall": r["wall_s"] / b["wall_s"],
            "cpu": r["cpu_s"] / b["cpu_s"],
            "memory": r["peak_rss_mib"] / b["peak_rss_mib"],
            "time": r["time_us"] / b["time_us"],
        }
        limit = LIMITS.get(r["ranks"], float("inf"))
        ok = r["cpu_s"] <= limit
        out[r["case"]] = {k: round(v, 3) for k, v in ratios.items()} | {"within_limit": ok}
        print(
            f"{r['case']:<30} {ratios['wall']:>7.3f} {ratios['cpu']:>7.3f} {ratios['memory']:>7.3f} {ratios['time']:>7.3f}"
            f"  {'yes' if ok else 'NO'} ({r['cpu_s']:.1f} s of {limit:g})"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synth", default=str(ROOT / ".venv" / "bin" / "synth"), help="the synth command to time")
    parser.add_argument("--label", default="after", help="name of this run in the results file (before, after)")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only these cases (records nothing)")
    parser.add_argument("--summary", action="store_true", help="reprint the recorded runs and their comparison")
    args = parser.parse_args(argv)
    path = RESULTS / f"{NAME}.json"
    recorded = json.loads(path.read_text(encoding="utf-8"))["figures"]["runs"] if path.exists() else {}
    if args.summary:
        for label, runs in recorded.items():
            print(f"{label}:\n{HEADER}")
            for run in runs:
                show(run)
        summary(recorded)
        return 0
    names = args.case or list(CASES)
    with Capture() as out, tempfile.TemporaryDirectory(prefix="auto-speed-") as tmp:
        print(f"{args.label}: {HEADER}")
        runs = []
        for name in names:
            run = run_case(args.synth, name, Path(tmp))
            show(run)
            runs.append(run)
        if args.case:
            return 0
        recorded = {**recorded, args.label: runs}
        figures = {"runs": recorded, "ratios": summary(recorded)}
    command = f"nice -n 10 .venv/bin/python benchmarks/auto_speed.py --label {args.label}"
    record(NAME, command, out.text, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
