"""Simulator speed on big schedules: how long each stage of `synth.simulate` takes.

* a 1024-rank ring allreduce (2,095,104 transfers) on one NVSwitch: the step-synchronous model at
  the 28 nccl-tests sizes 8 B … 1 GiB, then the event-driven model at 1 MiB;
* the built-in fattree-4rack (128 GPUs): direct alltoall (16,256 transfers, all in flight at once)
  and ring allreduce (32,512 transfers), event-driven model at 1 KiB, 1 MiB and 1 GiB.

With ``--fattree256``, also a direct alltoall on a 256-GPU fat-tree (4 racks x 8 servers x 8 GPUs,
65,280 transfers in flight at once): the event-driven model with incremental rate updates and with
rates recomputed from scratch at every event (synthesizing it takes most of a minute).

Times are wall-clock seconds, with the process's CPU seconds in brackets (they differ when the
machine is shared).

    .venv/bin/python benchmarks/simulate_speed.py [--ranks 1024] [--fattree256]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from synth import generators as gen
from synth.builtin import get_topology
from synth.registry import synthesize
from synth.simulate import Simulator
from synth.simulate.event import simulate_events
from synth.units import format_size, size_range


def timed(label: str, action: Callable[[], Any], note: str = "") -> Any:
    wall, cpu = time.perf_counter(), time.process_time()
    out = action()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"  {label:<26} {wall:7.2f} s  ({cpu:6.2f} s CPU){'   ' + note if note else ''}", flush=True)
    return out


def describe(result) -> str:
    return f"{format_size(result.size)}: {result.time_us:.2f} us, busbw {result.busbw:.2f} GB/s"


def big_ring(ranks: int) -> None:
    topo = gen.nvswitch(ranks, 300.0)
    schedule = synthesize(topo, "allreduce", "ring", verify=False)
    print(f"ring allreduce on {ranks} ranks (one NVSwitch): {schedule.num_steps} steps, {schedule.num_transfers} transfers")
    sim = timed("paths", lambda: Simulator(schedule, topo))
    timed("sync: per-step lines", lambda: sim.lines, "once per schedule")
    sizes = size_range(8, 2**30, 2)
    results = timed(f"sync: {len(sizes)} sizes", lambda: sim.sync(sizes), f"8B .. 1GiB; {describe(sim.sync([2**30])[0])}")
    assert len(results) == len(sizes)
    timed("event: dependencies", lambda: sim.groups, "once per schedule")
    timed("event: sharing network", lambda: sim.network, "once per schedule")
    out = timed("event: 1 MiB", lambda: sim.event([2**20], timeline=False))
    print(f"    {describe(out[0])} (sync: {describe(sim.sync([2**20])[0])})")


def fattree(kind: str) -> None:
    topo = get_topology("fattree-4rack")
    method = "direct" if kind == "alltoall" else "ring"
    schedule = synthesize(topo, kind, method, verify=False)
    counts = f"{schedule.num_steps} steps, {schedule.num_transfers} transfers"
    print(f"{method} {kind} on fattree-4rack ({topo.num_ranks} GPUs): {counts}")
    sim = timed("paths", lambda: Simulator(schedule, topo))
    timed("event: dependencies", lambda: sim.groups, "once per schedule")
    timed("event: sharing network", lambda: sim.network, "once per schedule")
    for size in (2**10, 2**20, 2**30):
        out = timed(f"event: {format_size(size)}", lambda size=size: sim.event([size], timeline=False))
        print(f"    {describe(out[0])} (sync: {describe(sim.sync([size])[0])})")


def fattree256() -> None:
    topo = gen.fattree(racks=4, servers=8, gpus=8)
    schedule = synthesize(topo, "alltoall", "direct", verify=False)
    counts = f"{schedule.num_steps} steps, {schedule.num_transfers} transfers"
    print(f"direct alltoall on a 256-GPU fat-tree (4 x 8 x 8): {counts}")
    sim = timed("paths", lambda: Simulator(schedule, topo))
    timed("event: dependencies", lambda: sim.groups, "once per schedule")
    timed("event: sharing network", lambda: sim.network, "once per schedule")
    out = timed("event: 1MiB", lambda: sim.event([2**20], timeline=False))
    print(f"    {describe(out[0])} (sync: {describe(sim.sync([2**20])[0])})")
    args = (schedule, topo, sim.paths, sim.groups, sim.chunk_bytes(2**20), sim.network)
    scratch = timed(
        "event: 1MiB, from scratch", lambda: simulate_events(*args, incremental=False), "rates recomputed at every event"
    )
    assert abs(scratch.time_us - out[0].time_us) <= 1e-9 * out[0].time_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--fattree256", action="store_true", help="also the 256-GPU fat-tree alltoall (slow to synthesize)")
    args = parser.parse_args()
    big_ring(args.ranks)
    fattree("alltoall")
    fattree("allreduce")
    if args.fattree256:
        fattree256()


if __name__ == "__main__":
    main()
