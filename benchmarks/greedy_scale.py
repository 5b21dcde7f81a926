"""Greedy allgather at 1,024 and 4,096 ranks: synthesis time, memory, and quality.

Issue 5's targets: greedy allgather in under 10 s for 1,024 ranks and under 60 s for 4,096 ranks
(a 64 x 64 torus and a fat-tree of 512 eight-GPU servers), on this 2-core machine. The timed call
is the whole library pipeline a user runs, ``synth.registry.synthesize(topology, "allgather",
"greedy")``: channels, the greedy steps, the schedule's numpy columns, and the verifier (the
registry verifies every schedule). Building the topology is reported apart. Each case runs in a
fresh process, so its peak memory (resident set) is its own; the schedule's own size is its
columns (33 bytes per transfer). Quality: the step-synchronous time at 1 GiB over the per-rank
ingress bound, (R - 1)/R x size / (a rank's in-link bandwidth).

    .venv/bin/python benchmarks/greedy_scale.py            # every case; records results/greedy_scale.json
    .venv/bin/python benchmarks/greedy_scale.py --case torus64
"""

from __future__ import annotations

import os
import resource
import time

from _results import case_row, cases_in_fresh_processes

CASES = {
    "torus32": ("torus 32x32", "1,024 ranks, 25 GB/s links", lambda gen: gen.torus(32, 32)),
    "fattree1k": (
        "fat-tree 4x32x8",
        "1,024 GPUs: 4 racks x 32 servers x 8, NVSwitch + 50 GB/s NIC per GPU, 4:1 to 2 spines",
        lambda gen: gen.fattree(racks=4, servers=32, gpus=8),
    ),
    "torus64": ("torus 64x64", "4,096 ranks, 25 GB/s links", lambda gen: gen.torus(64, 64)),
    "fattree4k": (
        "fat-tree 16x32x8",
        "4,096 GPUs: 16 racks x 32 servers x 8 (512 servers), as above",
        lambda gen: gen.fattree(racks=16, servers=32, gpus=8),
    ),
}
SIZE = 1 << 30


def run_case(key: str) -> dict:
    from synth import generators as gen
    from synth.algorithms.engines.size_tuning import predicted_us
    from synth.registry import synthesize

    name, what, make = CASES[key]
    t0 = time.perf_counter()
    topology = make(gen)
    build_s = time.perf_counter() - t0
    load_before = os.getloadavg()[0]
    wall0, cpu0 = time.perf_counter(), time.process_time()
    schedule = synthesize(topology, "allgather", "greedy")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    load_after = os.getloadavg()[0]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    r = topology.num_ranks
    ingress = min(topology.rank_ingress(v) for v in range(r))
    bound = (r - 1) / r * SIZE / (ingress * 1e3)
    ratio = predicted_us(schedule, topology, [SIZE])[0] / bound
    return {
        "case": name,
        "what": what,
        "ranks": r,
        "topology_s": build_s,
        "wall_s": wall,
        "cpu_s": cpu,
        "steps": schedule.num_steps,
        "transfers": schedule.num_transfers,
        "schedule_mb": schedule.num_transfers * 33 / 1e6,
        "peak_mb": peak / 1e6,
        "ratio": ratio,
        "load": (load_before, load_after),
        "params": {k: schedule.params[k] for k in ("channels", "all_pairs", "quantum")},
    }


def report(keys: list[str]) -> dict[str, dict]:
    """Run each case in a fresh process and print its row; the rows by case key."""
    rows = {}
    print(
        f"{'case':18s} {'ranks':>6s} {'synthesize':>11s} {'cpu':>8s} {'steps':>6s} {'transfers':>11s}"
        f" {'schedule':>9s} {'peak RSS':>9s} {'vs ingress':>10s}  load"
    )
    for key in keys:
        row = rows[key] = case_row(__file__, key)
        print(
            f"{row['case']:18s} {row['ranks']:6d} {row['wall_s']:10.1f}s {row['cpu_s']:7.1f}s {row['steps']:6d}"
            f" {row['transfers']:11,d} {row['schedule_mb']:7.0f}MB {row['peak_mb']:7.0f}MB {row['ratio']:10.3f}"
            f"  {row['load'][0]:.1f}/{row['load'][1]:.1f}"
        )
    print()
    for key in keys:
        name, what, _ = CASES[key]
        print(f"  {name}: {what}")
    print("  synthesize = synth.registry.synthesize(topology, 'allgather', 'greedy'): channels, steps, columns, verifier;")
    print("  the topology is built before the clock starts. vs ingress = step-synchronous time at 1 GiB over")
    print("  (R-1)/R x size / a rank's in-link bandwidth. load = 1-minute load average before/after (2 cores).")
    return rows


if __name__ == "__main__":
    cases_in_fresh_processes(__file__, __doc__, list(CASES), run_case, report, "greedy_scale")
