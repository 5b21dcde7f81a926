"""Hierarchical (pipelined, host-structured) allgather on fat-trees of 1,024 and 4,096 GPUs at 1 GiB.

Issue 16 item 3: the 4,096-GPU fat-tree allgather (512 eight-GPU servers, `greedy_scale.py`'s
``fattree4k``) must come within 1.3 x the per-rank ingress bound at 1 GiB; greedy's 731 steps each
pay the spine latency (2.2 x). Here the same machines with ``-m hierarchical --size 1GiB``: across
racks, then across the servers of a rack, then inside every server, pipelined (docs/algorithms.md,
'Pipelined allgather over the host structure'). The timed call is what a user runs,
``synth.registry.synthesize(topology, "allgather", "hierarchical", options={"size": 1 GiB})``:
choosing the waves (estimated per level, `LevelSetup.estimate`), building the schedule and the
verifier. Each case runs in a fresh process, so its peak memory is its own. Quality: the
step-synchronous time at 1 GiB over (R - 1)/R x size / (a rank's in-link bandwidth), as in
`greedy_scale.py`.

    .venv/bin/python benchmarks/hierarchical_scale.py          # every case; records results/hierarchical_scale.json
    .venv/bin/python benchmarks/hierarchical_scale.py --case fattree4k
"""

from __future__ import annotations

import os
import resource
import time

from _results import case_row, cases_in_fresh_processes

CASES = {
    "fattree1k": (
        "fat-tree 4x32x8",
        "1,024 GPUs: 4 racks x 32 servers x 8, NVSwitch + 50 GB/s NIC per GPU, 4:1 to 2 spines",
        lambda gen: gen.fattree(racks=4, servers=32, gpus=8),
    ),
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
    topology = make(gen)
    load_before = os.getloadavg()[0]
    wall0, cpu0 = time.perf_counter(), time.process_time()
    schedule = synthesize(topology, "allgather", "hierarchical", options={"size": SIZE})
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
        "wall_s": wall,
        "cpu_s": cpu,
        "steps": schedule.num_steps,
        "transfers": schedule.num_transfers,
        "peak_mb": peak / 1e6,
        "ratio": ratio,
        "load": (load_before, load_after),
        "params": {k: schedule.params[k] for k in ("dims", "waves", "caps", "inside")},
    }


def report(keys: list[str]) -> dict[str, dict]:
    """Run each case in a fresh process and print its row; the rows by case key."""
    rows = {}
    print(
        f"{'case':18s} {'ranks':>6s} {'synthesize':>11s} {'cpu':>8s} {'steps':>6s} {'transfers':>11s}"
        f" {'peak RSS':>9s} {'vs ingress':>10s}  {'levels':12s} waves  load"
    )
    for key in keys:
        row = rows[key] = case_row(__file__, key)
        dims = "x".join(str(d) for d in row["params"]["dims"])
        print(
            f"{row['case']:18s} {row['ranks']:6d} {row['wall_s']:10.1f}s {row['cpu_s']:7.1f}s {row['steps']:6d}"
            f" {row['transfers']:11,d} {row['peak_mb']:7.0f}MB {row['ratio']:10.3f}  {dims:12s} {row['params']['waves']:5d}"
            f"  {row['load'][0]:.1f}/{row['load'][1]:.1f}"
        )
    print()
    for key in keys:
        name, what, _ = CASES[key]
        print(f"  {name}: {what}")
    print("  synthesize = synth.registry.synthesize(topology, 'allgather', 'hierarchical', options={'size': 1 GiB}):")
    print("  waves chosen by estimate, schedule columns, verifier; the topology is built before the clock starts.")
    print("  vs ingress = step-synchronous time at 1 GiB over (R-1)/R x size / a rank's in-link bandwidth.")
    print("  levels = racks x servers per rack x GPUs per server. load = 1-minute load average before/after (2 cores).")
    return rows


if __name__ == "__main__":
    cases_in_fresh_processes(__file__, __doc__, list(CASES), run_case, report, "hierarchical_scale")
