"""Quality of the scalable synthesizers against the lower bounds (issue 5's targets).

  greedy   greedy allgather time at 1 GiB over the per-rank ingress bound on the 8 x 8 and
           16 x 16 tori and DGX-1 (target <= 1.05; TACOS's public code: 1.08, 1.03, 1.07 with its
           best chunking), with one chunk per piece and with the chunking it picks for 1 GiB.
  packing  the tree packing's rate over the exact optimum (target within 1%) and its trees per
           root, for allgather, reduce-scatter and allreduce on every built-in, with synthesis
           times (targets: < 5 s for 64 ranks, < 30 s for fattree-4rack); also the pipelined
           schedule's time at 1 GiB over the lower bound.
  auto     every built-in x collective at 1 GiB (geomean target <= 1.10 of the lower bound) and
           1 KiB (<= 1.5 of the latency bound), and never slower than the best classic baseline.

Times are the step-synchronous cost (docs/formats.md, 'Step-synchronous cost'); bounds are
`synth.bounds` (docs/bounds.md).

    .venv/bin/python benchmarks/quality.py [--part greedy|packing|auto ...]

Each part records results/quality-PART.json (auto only when it runs on every built-in).
"""

from __future__ import annotations

import argparse
import math
import os
import time

from _results import Capture, record

from synth import generators as gen
from synth.algorithms.engines.size_tuning import predicted_us
from synth.algorithms.packing import packings
from synth.bounds import bound_model
from synth.builtin import BUILTIN_NAMES, BUILTIN_RECIPES, get_topology
from synth.collective import ROOTED, Kind
from synth.errors import NotApplicable
from synth.registry import CLASSIC_METHODS, METHODS, synthesize
from synth.units import format_size

GIB = 1 << 30
KIB = 1 << 10


def clock():
    return time.perf_counter(), time.process_time()


def since(start) -> tuple[float, float]:
    return time.perf_counter() - start[0], time.process_time() - start[1]


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


# ============================================================================ greedy
TACOS = {"torus 8x8": (1.08, 1.02), "torus 16x16": (None, 1.03), "dgx1": (1.29, 1.07)}


def part_greedy() -> dict:
    figures = {}
    print("== greedy allgather at 1 GiB over the per-rank ingress bound")
    print(
        f"{'topology':12s} {'ranks':>5s} {'1 chunk':>8s} {'chosen':>8s} {'chunks/piece':>12s} {'quantum':>7s}"
        f" {'seconds':>8s}  TACOS (1 chunk / best)"
    )
    cases = [("torus 8x8", gen.torus(8, 8)), ("torus 16x16", gen.torus(16, 16)), ("dgx1", get_topology("dgx1"))]
    for name, topo in cases:
        ingress = bound_model(topo, "allgather").term("ingress").time_us(GIB)
        one = synthesize(topo, "allgather", "greedy", chunks=1)
        start = clock()
        tuned = synthesize(topo, "allgather", "greedy", options={"size": GIB, "seeds": 4})
        wall, cpu = since(start)
        r1 = predicted_us(one, topo, [GIB])[0] / ingress
        rt = predicted_us(tuned, topo, [GIB])[0] / ingress
        tacos = TACOS[name]
        figures[name] = {
            "ranks": topo.num_ranks,
            "one_chunk": round(r1, 6),
            "chosen": round(rt, 6),
            "chunks_per_piece": tuned.collective.chunks_per_piece,
            "quantum": tuned.params["quantum"],
            "seconds": round(wall, 2),
            "cpu_s": round(cpu, 2),
        }
        print(
            f"{name:12s} {topo.num_ranks:5d} {r1:8.3f} {rt:8.3f} {tuned.collective.chunks_per_piece:12d}"
            f" {tuned.params['quantum']:7d} {wall:8.1f}  {tacos[0] or '-'} / {tacos[1]}"
        )
    print("  chosen = greedy with --size 1GiB --seeds 4 (it tries chunks per piece and link room, keeps the fastest);")
    print("  seconds = that whole search, verification included.")
    return {"cases": figures, "worst_chosen": max(c["chosen"] for c in figures.values())}


# ============================================================================ packing
def fresh(name: str):
    """A new topology object (no cached packings or bounds), from the recipe or generator."""
    extra = {
        "torus 8x8": lambda: gen.torus(8, 8),
        "8 x DGX A100": lambda: gen.nvswitch(8, 300.0, boxes=8, nic_bandwidth=25.0, rails=2),
    }
    return extra[name]() if name in extra else BUILTIN_RECIPES[name]()


def part_packing() -> dict:
    rows = {}
    print("== packing: trees per root and rate over the exact optimum; schedule at 1 GiB over the lower bound")
    header = (
        f"{'topology':14s} {'ranks':>5s} {'collective':14s} {'rate/opt':>8s} {'k':>3s} {'distinct':>8s} {'height':>6s}"
        f" {'trees s':>8s} {'synth s':>8s} {'1GiB/bound':>10s}"
    )
    print(header)
    names = [*BUILTIN_NAMES, "torus 8x8", "8 x DGX A100"]
    worst = 1.0
    for name in names:
        topo = fresh(name)
        for kind in (Kind.ALLGATHER, Kind.REDUCE_SCATTER, Kind.ALLREDUCE):
            start = clock()
            if kind is Kind.ALLREDUCE:
                trees = [packings(topo.reversed(), Kind.ALLGATHER, None)[0], packings(topo, Kind.ALLGATHER, None)[0]]
            else:
                trees = [packings(topo if kind is Kind.ALLGATHER else topo.reversed(), Kind.ALLGATHER, None)[0]]
            trees_s, _ = since(start)
            schedule = synthesize(topo, kind, "packing", options={"size": GIB})
            synth_s, synth_cpu = since(start)
            rate = min(p.rate_gbps / p.optimum_gbps for p in trees)
            worst = min(worst, rate)
            ratio = predicted_us(schedule, topo, [GIB])[0] / bound_model(topo, kind).time_us(GIB)
            k = "/".join(str(p.trees_per_root) for p in trees)
            distinct = "/".join(str(len(p.classes)) for p in trees)
            height = "/".join(str(p.height) for p in trees)
            rows.setdefault(name, {})[kind.value] = {
                "rate": round(rate, 6),
                "trees_per_root": k,
                "synth_s": round(synth_s, 2),
                "synth_cpu_s": round(synth_cpu, 2),
                "ratio_1gib": round(ratio, 6),
            }
            print(
                f"{name:14s} {topo.num_ranks:5d} {kind.value:14s} {rate:8.4f} {k:>3s} {distinct:>8s} {height:>6s}"
                f" {trees_s:8.2f} {synth_s:8.2f} {ratio:10.3f}"
            )
    print(f"  lowest rate over the optimum: {worst:.4f}")
    print("  allreduce rows: reduce-scatter / allgather trees (rate: the smaller). k = trees per root;")
    print("  distinct = different trees in all; trees s = computing the packings (cold topology object);")
    print("  synth s = that plus the schedule at 1 GiB, verified. 1GiB/bound includes the latency of every")
    print("  pipeline step and its fill and drain, which the rate does not.")
    lowest = min((r["rate"], name, kind) for name, kinds in rows.items() for kind, r in kinds.items())
    return {
        "rows": rows,
        "lowest_rate": lowest[0],
        "lowest_at": f"{lowest[1]} {lowest[2]}",
        "max_synth_s": {name: max(r["synth_s"] for r in kinds.values()) for name, kinds in rows.items()},
        "max_synth_cpu_s": {name: max(r["synth_cpu_s"] for r in kinds.values()) for name, kinds in rows.items()},
    }


# ============================================================================ auto
def best_classic(topo, kind, root, size) -> tuple[str, float]:
    best = ("", math.inf)
    for name in CLASSIC_METHODS:
        if not METHODS[name].serves(kind):
            continue
        try:
            schedule = synthesize(topo, kind, name, root=root)
        except NotApplicable:
            continue
        t = predicted_us(schedule, topo, [size])[0]
        if t < best[1]:
            best = (name, t)
    return best


def part_auto(names: list[str]) -> dict:
    figures = {}
    for size in (GIB, KIB):
        big = size == GIB
        print(f"== auto at {format_size(size)}: time over the {'lower bound' if big else 'latency bound'}")
        print(
            f"{'topology':14s} {'collective':14s} {'auto':>7s} {'classic':>8s} {'auto/classic':>12s}"
            "  chose / best classic   seconds"
        )
        ratios, worst, cases = [], 0.0, {}
        for name in names:
            topo = get_topology(name)
            for kind in Kind:
                root = 0 if kind in ROOTED else None
                model = bound_model(topo, kind, root)
                bound = model.time_us(size) if big else model.term("latency").time_us(size)
                start = clock()
                schedule = synthesize(topo, kind, "auto", root=root, options={"size": size})
                wall, _ = since(start)
                t = predicted_us(schedule, topo, [size])[0]
                classic, tc = best_classic(topo, kind, root, size)
                ratios.append(t / bound)
                worst = max(worst, t / tc)
                cases[f"{name} {kind.value}"] = {
                    "auto": round(t / bound, 6),
                    "classic": round(tc / bound, 6),
                    "chose": schedule.params["chosen"],
                    "best_classic": classic,
                }
                print(
                    f"{name:14s} {kind.value:14s} {t / bound:7.3f} {tc / bound:8.3f} {t / tc:12.3f}  "
                    f"{schedule.params['chosen']} / {classic:18s} {wall:6.1f}"
                )
        print(f"  geometric mean over {len(ratios)} cases: {geomean(ratios):.3f}; largest auto/classic: {worst:.3f}")
        print()
        figures[f"at_{format_size(size)}"] = {
            "cases": cases,
            "count": len(ratios),
            "geomean": round(geomean(ratios), 6),
            "largest_auto_over_classic": round(worst, 6),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["greedy", "packing", "auto"], action="append")
    parser.add_argument("--topology", action="append", help="auto: only these built-ins")
    args = parser.parse_args()
    for part in args.part or ["greedy", "packing", "auto"]:
        with Capture() as out:
            print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at start)")
            start = clock()
            if part == "greedy":
                figures = part_greedy()
            elif part == "packing":
                figures = part_packing()
            else:
                figures = part_auto(args.topology or list(BUILTIN_NAMES))
            wall, cpu = since(start)
            print(f"  ({part}: {wall:.0f} s wall, {cpu:.0f} s cpu; load average {os.getloadavg()[0]:.1f})")
            print()
        if part != "auto" or not args.topology:
            figures["wall_s"], figures["cpu_s"] = round(wall, 1), round(cpu, 1)
            record(f"quality-{part}", f".venv/bin/python benchmarks/quality.py --part {part}", out.text, figures)


if __name__ == "__main__":
    main()
