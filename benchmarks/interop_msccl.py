"""MSCCL round trips over generated/: every schedule of every built-in topology is exported to
MSCCL XML (executed symbolically with one-message FIFOs, race-checked), parsed back, imported on
its topology, verified and compared with the original. Prints, per topology, how many schedules
came back step for step, the MSCCL size (thread blocks, steps) and the CPU time export and import
take (process time, so that a busy shared machine does not inflate it).

    .venv/bin/python benchmarks/interop_msccl.py [--topology NAME ...] [--inplace]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from synth.builtin import BUILTIN_NAMES, get_topology
from synth.interop.equivalence import compare
from synth.interop.msccl_export import export_msccl
from synth.interop.msccl_import import import_msccl
from synth.interop.msccl_xml import algo_to_xml, parse_msccl_text
from synth.schedule import load_schedule
from synth.verify import check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", nargs="*", default=list(BUILTIN_NAMES))
    parser.add_argument("--inplace", action="store_true", help="Export with in-place buffer semantics.")
    args = parser.parse_args()
    generated = Path(__file__).resolve().parent.parent / "generated"
    print(
        f"{'topology':<15}{'ranks':>6}{'files':>6}{'same steps':>11}{'transfers':>11}{'tbs/rank':>9}{'steps/tb':>9}"
        f"{'split':>6}{'export s':>9}{'import s':>9}"
    )
    total = Counter()
    for name in args.topology:
        topo = get_topology(name)
        row = Counter()
        max_steps = 0
        for path in sorted((generated / name).glob("*.json")):
            schedule = load_schedule(path)
            t0 = time.process_time()
            exported = export_msccl(schedule, inplace=args.inplace)
            text = algo_to_xml(exported.algo)
            t1 = time.process_time()
            algo, _ = parse_msccl_text(text, path.name)
            back = import_msccl(algo, topo).schedule
            check(back, topo)
            t2 = time.process_time()
            result = compare(schedule, back)
            row["files"] += 1
            row["same"] += result.identical_steps
            row["transfers"] += schedule.num_transfers
            row["tbs"] += sum(len(g.threadblocks) for g in exported.algo.gpus)
            row["split"] += bool(exported.notes)
            max_steps = max(max_steps, max(len(tb.steps) for g in exported.algo.gpus for tb in g.threadblocks))
            row["export_us"] += int((t1 - t0) * 1e6)
            row["import_us"] += int((t2 - t1) * 1e6)
        tbs_per_rank = row["tbs"] / max(1, row["files"]) / topo.num_ranks
        print(
            f"{name:<15}{topo.num_ranks:>6}{row['files']:>6}{row['same']:>11}{row['transfers']:>11}{tbs_per_rank:>9.1f}"
            f"{max_steps:>9}{row['split']:>6}{row['export_us'] / 1e6:>9.2f}{row['import_us'] / 1e6:>9.2f}"
        )
        total.update(row)
    print(
        f"all: {total['same']} of {total['files']} schedules came back step for step; {total['transfers']} transfers; "
        f"CPU time: export {total['export_us'] / 1e6:.1f} s, import {total['import_us'] / 1e6:.1f} s"
    )


if __name__ == "__main__":
    main()
