"""The JSON encoding's speed on schedules under 100,000 transfers, this checkout against another.

Issue 16 moved the JSON writer to a streaming one (a step line at a time, through
``write_stream_atomic``) and taught the reader the columnar encoding; the JSON encoding must not
get slower for the schedules most people write. This script writes the greedy allgathers of an
8 × 8 and a 16 × 16 torus (4,032 and 65,280 transfers) as JSON, then, in a fresh process of each
Python given (this checkout's, and e.g. main's ``.venv/bin/python``), times in CPU seconds the
best and the median of N runs of ``save_schedule`` (file written), ``schedule_to_json`` (text
only) and ``load_schedule``, and checks that each writes the very bytes of the file it read.

    nice -n 10 .venv/bin/python benchmarks/json_speed.py --against /path/to/main/.venv/bin/python

Each Python imports ``synth`` from its own checkout (an editable install), so the two columns
are the two versions of the code on the same files, run one after the other (twice, interleaved).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import synth
from synth.generators import torus
from synth.registry import synthesize
from synth.schedule import load_schedule, save_schedule, schedule_to_json

CASES = {"torus 8x8": (8, 8), "torus 16x16": (16, 16)}


def measure(path: str, runs: int, out: str) -> dict[str, float | bool | int | str]:
    """(run in the Python under test) best and median CPU seconds of each operation."""
    schedule = load_schedule(path)

    def timed(op) -> tuple[float, float]:
        times = []
        for _ in range(runs):
            start = time.process_time()
            op()
            times.append(time.process_time() - start)
        times.sort()
        return times[0], times[len(times) // 2]

    save = timed(lambda: save_schedule(schedule, out))
    text = timed(lambda: schedule_to_json(schedule))
    load = timed(lambda: load_schedule(path))
    return {
        "synth": str(Path(synth.__file__).parent.parent),
        "transfers": schedule.num_transfers,
        "save_best": save[0],
        "save_median": save[1],
        "to_json_best": text[0],
        "to_json_median": text[1],
        "load_best": load[0],
        "load_median": load[1],
        "same_bytes": Path(out).read_bytes() == Path(path).read_bytes(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", action="append", default=[], help="Another checkout's Python to compare with.")
    parser.add_argument("--runs", type=int, default=15, help="Runs of each operation (default 15).")
    parser.add_argument("--measure", nargs=2, metavar=("SCHEDULE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], args.runs, args.measure[1])))
        return
    pythons = [sys.executable, *args.against]
    with tempfile.TemporaryDirectory(prefix="synth-json-speed-") as work:
        files = {}
        for case, (rows, cols) in CASES.items():
            files[case] = f"{work}/{rows}x{cols}.json"
            save_schedule(synthesize(torus(rows, cols), "allgather", "greedy"), files[case])
        results: dict[tuple[str, str], list[dict]] = {}
        for _ in range(2):  # interleaved, so that a change of load hits both alike
            for case, path in files.items():
                for python in pythons:
                    command = [python, __file__, "--runs", str(args.runs), "--measure", path, f"{work}/out.json"]
                    done = subprocess.run(command, capture_output=True, text=True, check=True)
                    results.setdefault((case, python), []).append(json.loads(done.stdout))
    print(f"{'case':<12} {'transfers':>9} {'checkout':<28} {'save':>8} {'to_json':>8} {'load':>8}  same bytes")
    for (case, _python), runs in results.items():
        best = {k: min(r[k] for r in runs) for k in ("save_best", "to_json_best", "load_best")}
        r = runs[0]
        print(
            f"{case:<12} {r['transfers']:>9,} {str(r['synth'])[-28:]:<28} {best['save_best'] * 1e3:>6.1f}ms "
            f"{best['to_json_best'] * 1e3:>6.1f}ms {best['load_best'] * 1e3:>6.1f}ms  {all(x['same_bytes'] for x in runs)}"
        )
    print("  best CPU time of 2 x N runs each; save = save_schedule to a file, to_json = the text only, load = load_schedule.")


if __name__ == "__main__":
    main()
