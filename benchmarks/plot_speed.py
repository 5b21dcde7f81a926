"""How long the pictures and the report take (`synth.plot`, `synth.report`).

For each topology: the topology picture; the busbw curves of allreduce (28 sizes, 8 B … 1 GiB,
every method; the comparison and the drawing timed apart); the event-driven timeline of the
fastest allreduce schedule at 1 GiB (simulation and drawing apart); and the whole report with
all eight collectives (as ``synth report TOPOLOGY -o FILE`` makes it), with its size. PNG
rendering is included in each drawing time.

Times are wall-clock seconds, with the process's CPU seconds in brackets (they differ when the
machine is shared).

    .venv/bin/python benchmarks/plot_speed.py [--topologies dgx1,fattree-4rack] [--no-report]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from synth.builtin import get_topology
from synth.compare import compare
from synth.plot import plot_curves, plot_timeline, plot_topology, render
from synth.report import build_report
from synth.simulate import Simulator
from synth.units import size_range


def timed(label: str, action: Callable[[], Any], note: Callable[[Any], str] | None = None) -> Any:
    wall, cpu = time.perf_counter(), time.process_time()
    out = action()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    extra = f"   {note(out)}" if note else ""
    print(f"  {label:<34} {wall:7.2f} s  ({cpu:6.2f} s CPU){extra}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topologies", default="dgx1,fattree-4rack")
    parser.add_argument("--no-report", action="store_true", help="skip the whole report")
    args = parser.parse_args()
    sizes = size_range(8, 1 << 30)
    for name in args.topologies.split(","):
        topology = get_topology(name)
        print(f"{name} ({topology.num_ranks} ranks, {len(topology.links)} links)")
        timed("topology picture", lambda t=topology: render(plot_topology(t)), lambda b: f"{len(b) / 1e3:.0f} kB PNG")
        c = timed(
            "compare allreduce, 28 sizes",
            lambda t=topology: compare(t, "allreduce", sizes),
            lambda c: f"{sum(o.ok for o in c.outcomes)} methods",
        )
        timed("curves picture", lambda c=c: render(plot_curves(c)), lambda b: f"{len(b) / 1e3:.0f} kB PNG")
        best = c.best(len(sizes) - 1)
        schedule = next(o.schedule for o in c.outcomes if o.method == best.method)
        timed(
            f"event simulation ({best.method}, 1GiB)",
            lambda s=schedule, t=topology: Simulator(s, t).event([1 << 30]),
            lambda r, s=schedule: f"{s.num_transfers:,} transfers",
        )
        timed(
            "timeline picture (simulates again)",
            lambda s=schedule, t=topology: render(plot_timeline(s, t, 1 << 30)),
            lambda b: f"{len(b) / 1e3:.0f} kB PNG",
        )
        if not args.no_report:
            timed(
                "report, 8 collectives",
                lambda t=topology: build_report(t),
                lambda page: f"{len(page) / 1e6:.1f} MB HTML, {page.count('<img ')} images",
            )


if __name__ == "__main__":
    main()
