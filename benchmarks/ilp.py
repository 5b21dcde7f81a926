"""The ILP synthesizer's targets (issue 4), each with its figure and how long it took.

1. DGX-1 allgather: the Pareto frontier SCCL proves, (2 steps, 3 rounds over 2 chunks) and
   (3 steps, 7 rounds over 6 chunks), in under 10 s in all (SCCL: 16.9 s).
2. DGX-1 alltoall at its rounds-per-chunk bound in 3 steps.
3. dgx2 (16 GPUs on NVSwitch) allgather optimal in under 60 s (SCCL does not finish in 300 s).
4. ndv2x2 allgather at 1 GiB: at least 24.5 GB/s algbw (98% of the 25 GB/s bound) in under 60 s.

Then what makes the models fast (symmetry on and off) and HiGHS against CBC on the same models.
Times are wall time and CPU time (this process with its HiGHS threads, plus CBC child processes);
the machine is shared, so the load average is printed too and CPU time is the steadier figure.

    .venv/bin/python benchmarks/ilp.py [--only pareto,alltoall,dgx2,ndv2x2,symmetry,solvers,ndv2x2-plain]

(``ndv2x2-plain``, not run by default, shows the unpipelined model stalling on the same target.)
A run of the default sections is recorded in results/ilp.json.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from _results import Capture, record

from synth.bounds import bound_model
from synth.builtin import get_topology
from synth.collective import Collective, Kind
from synth.ilp import IlpOptions, solve_collective
from synth.ilp.pareto import pareto_frontier
from synth.simulate import simulate
from synth.units import bandwidth_gbps, format_size

SECTIONS = ("pareto", "alltoall", "dgx2", "ndv2x2", "symmetry", "solvers")
EXTRA_SECTIONS = ("ndv2x2-plain",)
GIB = 1 << 30


class Clock:
    """Wall and CPU seconds (this process and its children) since creation."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = self._cpu()

    @staticmethod
    def _cpu() -> float:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + children.ru_utime + children.ru_stime

    def seconds(self) -> dict:
        return {"wall_s": round(time.perf_counter() - self.wall, 2), "cpu_s": round(self._cpu() - self.cpu, 2)}

    def __str__(self) -> str:
        return f"{time.perf_counter() - self.wall:.2f} s wall, {self._cpu() - self.cpu:.2f} s CPU"


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} (1 / 5 min) on {os.cpu_count()} cores"


def pareto_section() -> dict:
    print("== 1. DGX-1 allgather Pareto frontier (rounds objective, chunks up to 8)")
    topo = get_topology("dgx1")
    clock = Clock()
    result = pareto_frontier(topo, "allgather", max_chunks=8, time_limit=120)
    seconds = clock.seconds()
    for p in result.points:
        proof = "proven optimal, meets the bound" if p.outcome.meets_lower_bound else p.outcome.status
        print(
            f"  {p.steps} steps, {p.rounds} rounds over {p.chunks} chunks ({p.rounds_per_chunk} per chunk): {proof}; "
            f"{p.times_us[1 << 10]:.3f} us at 1 KiB, {p.times_us[GIB]:.1f} us at 1 GiB"
        )
    print(f"  bandwidth bound {result.lower_bound} rounds per chunk; {len(result.attempts)} solves; stopped: {result.stopped}")
    print(f"  total {clock}")
    points = [
        {"steps": p.steps, "rounds": p.rounds, "chunks": p.chunks, "meets_bound": p.outcome.meets_lower_bound}
        for p in result.points
    ]
    return {"points": points, "solves": len(result.attempts), "bound": str(result.lower_bound), **seconds}


def alltoall_section() -> dict:
    figures = {}
    print("== 2. DGX-1 alltoall in 3 steps (rounds objective)")
    topo = get_topology("dgx1")
    for k in (1, 3):
        clock = Clock()
        o = solve_collective(topo, Collective(Kind.ALLTOALL, 8, k), IlpOptions(steps=3, objective="rounds", time_limit=120))
        figures[f"k={k}"] = {"steps": o.steps, "rounds": o.rounds, "status": o.status, **clock.seconds()}
        print(
            f"  k={k}: {o.steps} steps, {o.rounds} rounds = {o.rounds}/{k} per chunk, {o.status}"
            f"{', meets the bound' if o.meets_lower_bound else ''} [{clock}]"
        )
    print("  bound: 16k of each direction's pair-chunks cross the 6-NVLink bisection: 16k/6 = 8k/3 rounds")
    return figures


def dgx2_section() -> dict:
    figures = {}
    print("== 3. dgx2 allgather (16 GPUs on one NVSwitch)")
    topo = get_topology("dgx2")
    clock = Clock()
    result = pareto_frontier(topo, "allgather", max_chunks=8, time_limit=120)
    figures["pareto"] = {"points": [[p.steps, p.rounds, p.chunks] for p in result.points], **clock.seconds()}
    for p in result.points:
        print(f"  Pareto: {p.steps} step(s), {p.rounds} rounds over {p.chunks} chunk(s), {p.outcome.status} [{clock}]")
    for size in (1 << 10, 1 << 20, GIB):
        clock = Clock()
        o = solve_collective(topo, Collective(Kind.ALLGATHER, 16, 1), IlpOptions(size=size, time_limit=60))
        bound = bound_model(topo, "allgather").time_us(size)
        figures[format_size(size)] = {"steps": o.steps, "meets_bound": o.meets_lower_bound, **clock.seconds()}
        print(
            f"  time objective at {format_size(size)}: {o.steps} step(s), {o.time_us:.3f} us (lower bound {bound:.3f} us), "
            f"{o.status}{', meets the bound' if o.meets_lower_bound else ''} [{clock}]"
        )
    return figures


def ndv2x2_section() -> dict:
    figures = {}
    print("== 4. ndv2x2 allgather at 1 GiB (two DGX-1 boxes, one 12.5 GB/s NIC each)")
    topo = get_topology("ndv2x2")
    bound = 25.0
    lower = bound_model(topo, "allgather").time_us(GIB)
    for stages, waves in ((2, 32), (2, 48), (3, 32)):
        clock = Clock()
        o = solve_collective(
            topo,
            Collective(Kind.ALLGATHER, 16, waves),
            IlpOptions(pipeline=stages, size=GIB, time_limit=60),
        )
        t = simulate(o.schedule, topo, [GIB])[0].time_us
        algbw = bandwidth_gbps(GIB, t)
        cut = f" ({o.stopped_by}, solver gap {100 * o.gap:.2f}%)" if o.status != "optimal" and o.gap is not None else ""
        figures[f"{stages}x{waves}"] = {
            "steps": o.steps,
            "algbw": round(algbw, 6),
            "percent_of_bound": round(100 * algbw / bound, 4),
            "status": o.status,
            **clock.seconds(),
        }
        print(
            f"  pipelined {stages} stages x {waves} waves: {o.steps} steps, {t:.1f} us, algbw {algbw:.2f} GB/s "
            f"({100 * algbw / bound:.1f}% of {bound:g}; lower bound {lower:.1f} us), {o.status}{cut} [{clock}]"
        )
    return figures


def ndv2x2_plain_section() -> None:
    print("== 4b. ndv2x2 allgather at 1 GiB without pipelining (plain model, 2 chunks, 4 steps, 60 s)")
    topo = get_topology("ndv2x2")
    clock = Clock()
    o = solve_collective(topo, Collective(Kind.ALLGATHER, 16, 2), IlpOptions(steps=4, size=GIB, time_limit=60))
    t = simulate(o.schedule, topo, [GIB])[0].time_us
    print(
        f"  {o.steps} steps, {t:.1f} us, algbw {bandwidth_gbps(GIB, t):.2f} GB/s, {o.status} "
        f"({o.stopped_by}, gap {100 * (o.gap or 0):.2f}%) [{clock}]"
    )


def symmetry_section() -> dict:
    figures = {}
    print("== 5. What makes the models small: symmetry on and off (HiGHS)")
    cases = [
        ("dgx1", Kind.ALLGATHER, 6, dict(steps=3, objective="rounds")),
        ("dgx1", Kind.ALLTOALL, 3, dict(steps=3, objective="rounds")),
        ("dgx2", Kind.ALLGATHER, 2, dict(steps=2, size=GIB)),
    ]
    for name, kind, k, opts in cases:
        topo = get_topology(name)
        for symmetry in (True, False):
            clock = Clock()
            o = solve_collective(topo, Collective(kind, topo.num_ranks, k), IlpOptions(symmetry=symmetry, time_limit=120, **opts))
            m = o.model
            case = figures.setdefault(f"{name} {kind.value} k={k}", {})
            case["on" if symmetry else "off"] = {"variables": m.variables, "rows": m.rows, **clock.seconds()}
            print(
                f"  {name} {kind.value} k={k} {opts}: symmetry {'on ' if symmetry else 'off'} (order {o.symmetry_order}): "
                f"{m.variables} variables, {m.rows} rows; {o.rounds} rounds, {o.status} [{clock}]"
            )
    return figures


def solvers_section() -> dict:
    figures = {}
    print("== 6. HiGHS and CBC on the same models (60 s each)")
    cases = [
        ("dgx1", Kind.ALLGATHER, 2, dict(steps=2, objective="rounds")),
        ("dgx1", Kind.ALLGATHER, 6, dict(steps=3, objective="rounds")),
        ("dgx1", Kind.ALLTOALL, 3, dict(steps=3, objective="rounds")),
        ("dgx1", Kind.ALLGATHER, 4, dict(steps=3, size=1 << 20)),
        ("ndv2x2", Kind.ALLGATHER, 32, dict(pipeline=2, size=GIB)),
    ]
    for name, kind, k, opts in cases:
        topo = get_topology(name)
        for solver in ("highs", "cbc"):
            clock = Clock()
            o = solve_collective(topo, Collective(kind, topo.num_ranks, k), IlpOptions(solver=solver, time_limit=60, **opts))
            value = f"{o.rounds} rounds" if opts.get("objective") == "rounds" else f"{o.time_us:.3f} us"
            figures.setdefault(f"{name} {kind.value} k={k}", {})[solver] = {"value": value, "status": o.status, **clock.seconds()}
            print(f"  {name} {kind.value} k={k} {opts}: {solver:5} {value}, {o.status} [{clock}]")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run ({', '.join(SECTIONS + EXTRA_SECTIONS)})")
    args = parser.parse_args()
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    figures = {"load_at_start": round(os.getloadavg()[0], 2)}
    with Capture() as out:
        print(load())
        for section in chosen:
            figures[section] = run_section(section)
        print(load())
    if chosen == list(SECTIONS):
        assert all(isinstance(figures[s], dict) for s in SECTIONS), "every section returns its figures"
        record("ilp", ".venv/bin/python benchmarks/ilp.py", out.text, figures)


def run_section(section: str) -> dict | None:
    return {
        "pareto": pareto_section,
        "alltoall": alltoall_section,
        "dgx2": dgx2_section,
        "ndv2x2": ndv2x2_section,
        "ndv2x2-plain": ndv2x2_plain_section,
        "symmetry": symmetry_section,
        "solvers": solvers_section,
    }[section]()


if __name__ == "__main__":
    main()
