"""How fast the exact allgather bound is computed, and what it is, on every built-in topology and on
two 64-rank machines (issue 3's target: under 1 s for 64 ranks).

For each topology it prints the exact allgather optimum (algbw = size / time for large sizes, the
ForestColl figure), the cut that binds, the number of max-flow problems solved, and two wall times,
each the best of ``--repeat`` runs on a fresh copy of the topology (no cached results), as wall
time and as this process's CPU time (which other jobs on a shared machine disturb less):

- ``cut``: the per-rank ingress max-flows plus the parametric max-flow search over all cuts;
- ``model``: everything `synth.bounds.bound_model` computes for allgather (adds latency facts).

Then the time to build the models of all eight collectives (alltoall includes its LP where it is
solved) and evaluate them at 1 KiB, 64 KiB, 1 MiB, 16 MiB and 1 GiB (which solves the
time-expanded and crossing-steps LPs, on machines of up to 16 ranks), each on a fresh copy, and the
slowest of the eight: what `synth compare` (or ``-m auto``, for its explanation) pays for the bound of one
collective on top of synthesis.

    .venv/bin/python benchmarks/bounds_speed.py [--repeat 3]

The whole run records its output and figures in ``benchmarks/results/bounds_speed.json``.
"""

from __future__ import annotations

import argparse
import sys
import time

from _results import Capture, record

from synth import generators as gen
from synth.bounds import bound_model
from synth.bounds.cuts import max_ratio_cut, rank_ingress_cuts
from synth.builtin import BUILTIN_NAMES, get_topology
from synth.collective import Kind
from synth.topology import Topology, topology_from_document


def fresh(topology: Topology) -> Topology:
    """A copy with no cached analysis."""
    return topology_from_document(topology.to_document(), "<copy>")


def best_of(repeat: int, work) -> tuple[float, float, object]:
    """Best wall time, best CPU time of this process (less disturbed by other jobs on a shared
    machine), and the result."""
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = work()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu, result


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:>6.1f}ms" if seconds < 1 else f"{seconds:>7.2f}s"


def exact_allgather(topology: Topology):
    cuts = rank_ingress_cuts(topology)
    start = max(cuts, key=lambda c: 1.0 / c.bandwidth)
    return max_ratio_cut(topology, range(topology.num_ranks), start)


SIZES = (1 << 10, 64 << 10, 1 << 20, 16 << 20, 1 << 30)


def evaluate(model) -> list[float]:
    return [model.time_us(size) for size in SIZES]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cases = [(name, get_topology(name)) for name in BUILTIN_NAMES]
    cases += [
        ("torus 8x8 (64)", gen.torus(8, 8)),
        ("8 x DGX A100 (64)", gen.nvswitch(8, 300.0, boxes=8, nic_bandwidth=25.0, rails=2)),
    ]
    figures: dict = {"repeat": args.repeat, "cases": {}}
    with Capture() as out:
        print(f"{'':<37}{'---- cut ----':>17} {'-- model --':>17} {'- all 8, 5 sizes -':>17}  slowest collective")
        times = " ".join(f"{'wall':>8} {'cpu':>8}" for _ in range(3))
        print(f"{'topology':<18} {'ranks':>5} {'allgather optimum':>17} {'flows':>5} {times}  {'cpu':>8}")
        for name, topology in cases:
            cut_wall, cut_cpu, rc = best_of(args.repeat, lambda t=topology: exact_allgather(fresh(t)))
            model_wall, model_cpu, model = best_of(args.repeat, lambda t=topology: bound_model(fresh(t), Kind.ALLGATHER))
            per_kind = {}
            all_wall, all_cpu = 0.0, 0.0
            for kind in Kind:
                wall, cpu, _ = best_of(1, lambda t=topology, k=kind: evaluate(bound_model(fresh(t), k)))
                per_kind[kind.value] = cpu
                all_wall, all_cpu = all_wall + wall, all_cpu + cpu
            slowest = max(per_kind, key=lambda k: (per_kind[k], k))
            print(
                f"{name:<18} {topology.num_ranks:>5} {model.peak_algbw:>12.2f} GB/s {rc.max_flows:>5} "
                f"{ms(cut_wall)} {ms(cut_cpu)} {ms(model_wall)} {ms(model_cpu)} {ms(all_wall)} {ms(all_cpu)}  "
                f"{ms(per_kind[slowest])} {slowest}"
            )
            sys.stdout.flush()
            figures["cases"][name] = {
                "ranks": topology.num_ranks,
                "allgather_algbw": round(model.peak_algbw, 2),
                "max_flows": rc.max_flows,
                "cut_cpu_s": round(cut_cpu, 4),
                "model_cpu_s": round(model_cpu, 4),
                "all_cpu_s": round(all_cpu, 3),
                "all_wall_s": round(all_wall, 3),
                "slowest_collective": slowest,
                "slowest_cpu_s": round(per_kind[slowest], 3),
            }
    figures["max_slowest_cpu_s"] = max(c["slowest_cpu_s"] for c in figures["cases"].values())
    figures["max_model_cpu_s_64"] = max(c["model_cpu_s"] for c in figures["cases"].values() if c["ranks"] == 64)
    record("bounds_speed", f".venv/bin/python benchmarks/bounds_speed.py --repeat {args.repeat}", out.text, figures)


if __name__ == "__main__":
    main()
