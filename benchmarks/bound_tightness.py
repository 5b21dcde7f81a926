"""How tight the lower bounds are: the best schedule of `synth compare`'s methods over the bound.

For every built-in topology of up to 16 ranks and a few small random machines, every collective,
at 1 KiB, 64 KiB, 1 MiB, 16 MiB and 1 GiB, it prints best / bound (the fastest verified schedule
among the default methods of `synth compare`, step-synchronous cost, over the lower bound of
`synth bound`, with the name of the binding bound). A ratio is at least 1 for every valid
schedule; near 1 means both the schedule and the bound are good; a large ratio is slack in one or
the other. The summary gives, per machine, the worst ratio over collectives and sizes (issue 17's
target: 1.3 on every machine of up to 8 ranks).

The schedules are those of `synth compare` without the exact ILP and without a time budget
(``exact=False, budget=inf``, as the benchmark suite runs it: a time-limited solve would make the
figures depend on the machine's load), the self-tuning methods tuned for each size;
docs/bounds.md gives the cases where an ILP schedule or a hand-built one does better. The
schedules' times do not depend on the bounds, so ``--save FILE`` keeps them (JSON) and
``--load FILE`` reuses them: that measures bounds of two versions on the same schedules.

    .venv/bin/python benchmarks/bound_tightness.py [--max-ranks 16] [--save times.json | --load times.json]

A full run (default ``--max-ranks``, no ``--load``) records its output and figures in
``benchmarks/results/bound_tightness.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time

from _results import Capture, record

from synth.bounds import bound_model
from synth.builtin import BUILTIN_NAMES, get_topology
from synth.collective import ALL_KINDS, Kind
from synth.compare import compare, default_methods
from synth.registry import METHODS
from synth.selection import tuning_sizes
from synth.topology import Topology, topology_from_document, topology_to_json
from synth.units import format_size

SIZES = (1 << 10, 64 << 10, 1 << 20, 16 << 20, 1 << 30)
RANDOM_SEEDS = (1, 2, 3, 4)
#: issue 17's target: best / bound at most this on every machine of up to `TARGET_RANKS` ranks
TARGET, TARGET_RANKS = 1.3, 8


def random_machine(seed: int) -> Topology:
    """A random connected machine: 3-6 ranks, 0-2 switches, random bandwidths (5-100 GB/s) and
    latencies (0.1-2 us), a few one-way links (seeded, so the same machine every run)."""
    rng = random.Random(seed)
    num_ranks, num_switches = rng.randint(3, 6), rng.randint(0, 2)
    nodes = [f"r{i}" for i in range(num_ranks)] + [f"s{i}" for i in range(num_switches)]
    order = nodes[:]
    rng.shuffle(order)
    links = []

    def link(a: str, b: str, duplex: bool = True) -> None:
        bandwidth = rng.choice([5.0, 10.0, 12.5, 25.0, 50.0, 100.0])
        latency = rng.choice([0.1, 0.5, 1.0, 2.0])
        links.append({"a": a, "b": b, "bandwidth": bandwidth, "latency": latency, "duplex": duplex})

    for i in range(1, len(order)):
        link(order[i], order[rng.randrange(i)])
    for _ in range(rng.randint(0, len(nodes))):
        a, b = rng.sample(nodes, 2)
        link(a, b, duplex=rng.random() < 0.7)
    doc = {
        "format": "synth-topology",
        "version": 1,
        "name": f"random{seed}",
        "ranks": [{"name": n, "host": f"h{i % 2}"} for i, n in enumerate(nodes[:num_ranks])],
        "switches": nodes[num_ranks:],
        "links": links,
    }
    return topology_from_document(doc, f"<random {seed}>")


def machines(max_ranks: int) -> list[Topology]:
    found = [get_topology(name) for name in BUILTIN_NAMES]
    found = [t for t in found if t.num_ranks <= max_ranks]
    return found + [random_machine(seed) for seed in RANDOM_SEEDS]


def best_times(topology: Topology, kind: Kind) -> list[tuple[float, str]]:
    """(time, method) of the fastest schedule at each size. `synth compare` tunes the self-tuning
    methods for three of the five sizes (`synth.selection.tuning_sizes`); at the other two they are
    run again, tuned for that size alone, so every size gets the best schedule the methods find
    for it."""
    result = compare(topology, kind, SIZES, exact=False, budget=math.inf)
    out = []
    for i in range(len(SIZES)):
        best = result.best(i)
        out.append((best.time_us, best.method) if best else (math.inf, "-"))
    self_tuning = [name for name in default_methods(kind) if "size" in METHODS[name].options]
    for i, size in enumerate(SIZES):
        if size in tuning_sizes(SIZES) or not self_tuning:
            continue
        best = compare(topology, kind, [size], methods=self_tuning, exact=False, budget=math.inf).best(0)
        if best is not None and best.time_us < out[i][0]:
            out[i] = (best.time_us, best.method)
    return out


#: eight-character names for the bounds whose first eight characters are shared
SHORT = {"crossing-steps": "cr-steps", "crossing-phases": "cr-phase"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-ranks", type=int, default=16)
    parser.add_argument("--save", help="write the schedules' best times to this JSON file")
    parser.add_argument("--load", help="read the schedules' best times from this JSON file (no synthesis)")
    parser.add_argument("--write-random", metavar="DIR", help="write the random machines as topology files into DIR and stop")
    args = parser.parse_args()
    if args.write_random:
        for seed in RANDOM_SEEDS:
            with open(f"{args.write_random}/random{seed}.json", "w") as f:
                f.write(topology_to_json(random_machine(seed)))
        return
    saved = {}
    if args.load:
        with open(args.load) as f:
            saved = json.load(f)
    store: dict[str, list] = {}
    cells: dict[str, dict] = {}
    with Capture() as out:
        bound_seconds = table(machines(args.max_ranks), saved, store, cells)
        summary(machines(args.max_ranks), cells, bound_seconds)
    if args.save:
        with open(args.save, "w") as f:
            json.dump(store, f, indent=1, sort_keys=True)
    if not args.load and args.max_ranks == parser.get_default("max_ranks"):
        record(
            "bound_tightness",
            ".venv/bin/python benchmarks/bound_tightness.py",
            out.text,
            figures(machines(args.max_ranks), cells),
        )


def table(found: list[Topology], saved: dict, store: dict, cells: dict) -> float:
    """Print best / bound per machine, collective and size; fill ``cells`` (machine → "collective
    size" → ratio, binding bound, best method); return the CPU seconds the bounds took."""
    bound_seconds = 0.0
    header = "".join(f"{format_size(s):>15}" for s in SIZES)
    print("best schedule / lower bound (binding bound); step-synchronous model")
    print(f"{'machine':<14}{'ranks':>5} {'collective':<15}{header}")
    for topology in found:
        for kind in ALL_KINDS:
            key = f"{topology.name}/{kind.value}"
            best = [tuple(x) for x in saved[key]] if key in saved else best_times(topology, kind)
            store[key] = best
            start = time.process_time()
            model = bound_model(topology_from_document(topology.to_document(), "<copy>"), kind)  # no cached analysis
            reports = [model.at(s) for s in SIZES]
            bound_seconds += time.process_time() - start
            row = []
            for (t, method), report in zip(best, reports, strict=True):
                ratio = t / report.time_us if report.time_us > 0 else math.inf
                cells.setdefault(topology.name, {})[f"{kind.value} {format_size(report.size)}"] = {
                    "ratio": round(ratio, 4),
                    "binding": report.binding,
                    "method": method,
                }
                row.append(f"{ratio:6.2f} {SHORT.get(report.binding, report.binding[:8]):<8}")
            print(f"{topology.name:<14}{topology.num_ranks:>5} {kind.value:<15}{''.join(f'{c:>15}' for c in row)}")
            sys.stdout.flush()
    return bound_seconds


def _stats(values: list[float]) -> tuple[float, float, int]:
    """(worst, geometric mean, cells over the target)."""
    mean = math.exp(sum(math.log(x) for x in values) / len(values))
    return max(values), mean, sum(1 for x in values if x > TARGET)


def summary(found: list[Topology], cells: dict, bound_seconds: float) -> None:
    print(f"\nper machine: worst best/bound, geometric mean, cells over {TARGET} (of 8 collectives x 5 sizes)")
    for topology in found:
        mine = cells[topology.name]
        label = max(mine, key=lambda k: (mine[k]["ratio"], k))
        worst, mean, over = _stats([c["ratio"] for c in mine.values()])
        where = f"{topology.name:<14}{topology.num_ranks:>5} ranks"
        print(f"  {where}  worst {worst:6.2f} ({label:<19}) mean {mean:5.2f}  >{TARGET}: {over:>2}")
    print(f"\ncells over {TARGET} on the built-ins of up to {TARGET_RANKS} ranks (best method, binding bound):")
    for topology in found:
        if topology.num_ranks > TARGET_RANKS or topology.name.startswith("random"):
            continue
        for label, c in cells[topology.name].items():
            if c["ratio"] > TARGET:
                print(f"  {topology.name:<14}{label:<20}{c['ratio']:6.2f}  {c['method']:<20} {c['binding']}")
    print(f"\nbound models and evaluations: {bound_seconds:.2f} s CPU in all")


def figures(found: list[Topology], cells: dict) -> dict:
    machines_figures = {}
    for topology in found:
        worst, mean, over = _stats([c["ratio"] for c in cells[topology.name].values()])
        machines_figures[topology.name] = {
            "ranks": topology.num_ranks,
            "worst": round(worst, 4),
            "geomean": round(mean, 4),
            "over_target": over,
            "cells": cells[topology.name],
        }
    small = [t.name for t in found if t.num_ranks <= TARGET_RANKS and not t.name.startswith("random")]
    over = {f"{m} {label}": c for m in small for label, c in cells[m].items() if c["ratio"] > TARGET}
    return {
        "target": TARGET,
        "target_ranks": TARGET_RANKS,
        "machines": machines_figures,
        "builtins_up_to_8_over_target": over,
        "builtins_up_to_8_cells": 40 * len(small),
    }


if __name__ == "__main__":
    main()
