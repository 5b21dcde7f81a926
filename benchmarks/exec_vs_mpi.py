"""Issue 6's targets, measured in one run: a synthesized ring allreduce (4 ranks, float32, sum)
executed by synth's MPI backend and by its multiprocessing backend, against MPI_Allreduce on the
same buffers.

    .venv/bin/python benchmarks/exec_vs_mpi.py [--rounds 9] [--iters 20]

Prints, per size, the median over rounds of each executor's mean time per call (three times as
many rounds at 8 B as at 64 MiB), and the ratios the targets name: at 64 MiB, MPI backend algbw /
MPI_Allreduce algbw (target >= 0.8) and multiprocessing backend algbw / MPI_Allreduce algbw
(target >= 0.5); at 8 B, MPI backend latency / MPI_Allreduce latency (target <= 3), also round by
round. The MPI figures come from one mpiexec job that alternates our executor and MPI_Allreduce
round by round; the multiprocessing figures from one run right after it. With the default rounds
and iterations the run is recorded in results/exec_vs_mpi.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _results import Capture, record

RANKS = 4
SIZES = (8, 64 * 2**20)
#: rounds at 8 B per round at 64 MiB: a round of 8 B calls takes milliseconds, and at 8 B the
#: spread from round to round (scheduling of 4 ranks on 2 cores) is wider than at 64 MiB
SMALL_ROUNDS = 3


def _schedule_files(folder: Path) -> tuple[Path, Path]:
    from synth import generators
    from synth.registry import synthesize
    from synth.schedule import save_schedule
    from synth.topology import topology_to_json

    topology = generators.ring(RANKS, name="ring4")
    topo_path = folder / "ring4.json"
    topo_path.write_text(topology_to_json(topology), encoding="utf-8")
    sched_path = folder / "allreduce-ring.json"
    save_schedule(synthesize(topology, "allreduce", "ring"), sched_path)
    return sched_path, topo_path


def _worker(args) -> None:
    """One MPI rank: alternate our executor and MPI_Allreduce, round by round."""
    from mpi4py import MPI

    from synth.exec import data
    from synth.exec.api import verified
    from synth.exec.layout import Layout
    from synth.exec.mpi import BoundPlan, native_call
    from synth.exec.program import Program

    comm = MPI.COMM_WORLD.Dup()
    rank = comm.Get_rank()
    schedule = verified(args.schedule, args.topology)
    program = Program(schedule)
    op = data.OPS["sum"]
    results = {}
    for size in SIZES:
        layout = Layout.for_size(schedule.collective, size, np.float32)
        send = data.send_data(layout, rank, op)
        recv = np.empty(layout.recv_count, dtype=np.float32)
        ours = BoundPlan(program, comm, layout, op, send, recv)
        native = native_call(layout, comm, op, send, recv)
        iters = args.iters if size > 2**20 else args.iters * 50
        rounds = args.rounds if size > 2**20 else args.rounds * SMALL_ROUNDS
        times = {"synth-mpi": [], "MPI_Allreduce": []}
        wrong = 0
        for _ in range(rounds):
            for name, call in (("synth-mpi", ours), ("MPI_Allreduce", native)):
                recv.fill(np.nan)
                call()
                wrong += data.check_rank(layout, rank, recv, op)
                for _ in range(3):
                    call()
                comm.Barrier()
                begin = MPI.Wtime()
                for _ in range(iters):
                    call()
                times[name].append(comm.allreduce((MPI.Wtime() - begin) / iters * 1e6, op=MPI.MAX))
        ours.free()
        results[size] = {"times": times, "wrong": comm.allreduce(wrong, op=MPI.SUM)}
    if rank == 0:
        print(json.dumps(results))


def _mp(args) -> dict:
    from synth.exec import data, mp
    from synth.exec.api import verified
    from synth.exec.layout import Layout
    from synth.exec.program import Program

    schedule = verified(args.schedule, args.topology)
    out = {}
    for size in SIZES:
        layout = Layout.for_size(schedule.collective, size, np.float32)
        iters = args.iters if size > 2**20 else args.iters * 50
        rounds = args.rounds if size > 2**20 else args.rounds * SMALL_ROUNDS
        rows = mp.run_sizes(Program(schedule), [layout] * rounds, data.OPS["sum"], warmup=3, iters=iters)
        out[size] = {"times": [m.time_us for m in rows], "wrong": sum(m.wrong for m in rows)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--schedule", help=argparse.SUPPRESS)
    parser.add_argument("--topology", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        args.schedule, args.topology = (str(p) for p in _schedule_files(Path(tmp)))
        mpiexec = Path(sys.executable).parent / "mpiexec"
        cmd = [str(mpiexec), "-n", str(RANKS), sys.executable, __file__, "--worker"]
        cmd += [
            "--schedule",
            args.schedule,
            "--topology",
            args.topology,
            "--rounds",
            str(args.rounds),
            "--iters",
            str(args.iters),
        ]
        started = time.time()
        mpi = {int(k): v for k, v in json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout).items()}
        mp_results = _mp(args)
        elapsed = time.time() - started
    with Capture() as out:
        figures = report(args, load, mpi, mp_results, elapsed)
    if (args.rounds, args.iters) == (9, 20):
        record("exec_vs_mpi", ".venv/bin/python benchmarks/exec_vs_mpi.py", out.text, figures)


def report(args, load, mpi, mp_results, elapsed) -> dict:
    """Print the table and the target ratios; the figures to record."""
    print(
        f"ring allreduce, {RANKS} ranks, float32 sum; median of {args.rounds} rounds at 64 MiB and "
        f"{args.rounds * SMALL_ROUNDS} at 8 B (mean time per call, slowest rank)"
    )
    print(
        f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(f"{'size':>10}  {'executor':>16}  {'time (us)':>10}  {'algbw (GB/s)':>12}  {'#wrong':>6}")
    medians = {}
    for size in SIZES:
        rows = [(name, t, mpi[size]["wrong"]) for name, t in mpi[size]["times"].items()]
        rows.append(("synth-mp", mp_results[size]["times"], mp_results[size]["wrong"]))
        for name, times, wrong in rows:
            med = float(np.median(times))
            medians[(size, name)] = med
            print(f"{size:>10}  {name:>16}  {med:>10.1f}  {size / (med * 1e3):>12.3f}  {wrong:>6}")
    big, small = SIZES[1], SIZES[0]
    native_big, native_small = medians[(big, "MPI_Allreduce")], medians[(small, "MPI_Allreduce")]
    print(f"64 MiB: MPI backend algbw / MPI_Allreduce algbw = {native_big / medians[(big, 'synth-mpi')]:.2f}  (target >= 0.8)")
    print(f"64 MiB: mp backend algbw / MPI_Allreduce algbw  = {native_big / medians[(big, 'synth-mp')]:.2f}  (target >= 0.5)")
    print(f"8 B:    MPI backend latency / MPI_Allreduce      = {medians[(small, 'synth-mpi')] / native_small:.2f}  (target <= 3)")
    paired = np.array(mpi[small]["times"]["synth-mpi"]) / np.array(mpi[small]["times"]["MPI_Allreduce"])
    low, mid, high = np.percentile(paired, [25, 50, 75])
    print(f"        the same, round by round (each round times both in turn): median {mid:.2f}, quartiles {low:.2f}..{high:.2f}")
    print(f"8 B:    mp backend latency / MPI_Allreduce       = {medians[(small, 'synth-mp')] / native_small:.2f}  (no target)")
    print(f"wall time {elapsed:.1f} s")
    return {
        "load_before": round(load[0], 2),
        "medians_us": {f"{size} {name}": round(t, 2) for (size, name), t in medians.items()},
        "mpi_algbw_over_native_64mib": round(native_big / medians[(big, "synth-mpi")], 6),
        "mp_algbw_over_native_64mib": round(native_big / medians[(big, "synth-mp")], 6),
        "mpi_latency_over_native_8b": round(medians[(small, "synth-mpi")] / native_small, 6),
        "mpi_latency_over_native_8b_paired": {"median": round(mid, 6), "q1": round(low, 6), "q3": round(high, 6)},
        "mp_latency_over_native_8b": round(medians[(small, "synth-mp")] / native_small, 6),
    }


if __name__ == "__main__":
    main()
