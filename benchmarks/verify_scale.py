"""Verifier scale: a 1024-rank ring allreduce (2,095,104 transfers) synthesized, written, read back
and verified; prints the time of each stage. Target (issue 2): `synth verify` under 10 s here.

    .venv/bin/python benchmarks/verify_scale.py [--ranks 1024] [--topology nvswitch|ring]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synth import generators as gen
from synth.registry import synthesize
from synth.schedule import load_schedule, save_schedule
from synth.topology import topology_to_json
from synth.verify import verify


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--topology", choices=["nvswitch", "ring"], default="nvswitch")
    args = parser.parse_args()
    topo = gen.nvswitch(args.ranks, 300.0) if args.topology == "nvswitch" else gen.ring(args.ranks)
    with tempfile.TemporaryDirectory() as tmp:
        topo_path = Path(tmp) / "topo.json"
        topo_path.write_text(topology_to_json(topo))
        t0 = time.perf_counter()
        schedule = synthesize(topo, "allreduce", "ring", verify=False)
        t1 = time.perf_counter()
        path = save_schedule(schedule, Path(tmp) / "ring.json")
        t2 = time.perf_counter()
        loaded = load_schedule(path)
        t3 = time.perf_counter()
        result = verify(loaded, topo)
        t4 = time.perf_counter()
        cli = subprocess.run(
            [sys.executable, "-m", "synth", "verify", str(path), "--topology", str(topo_path)], capture_output=True, text=True
        )
        t5 = time.perf_counter()
        size = path.stat().st_size
    print(
        f"ring allreduce on {args.ranks} ranks ({args.topology}): {schedule.num_steps} steps, "
        f"{schedule.num_transfers} transfers, file {size / 1e6:.0f} MB"
    )
    print(f"  synthesize      {t1 - t0:6.2f} s")
    print(f"  write           {t2 - t1:6.2f} s")
    print(f"  read            {t3 - t2:6.2f} s")
    print(f"  verify          {t4 - t3:6.2f} s   ({'OK' if result.ok else result.violation})")
    print(f"  synth verify    {t5 - t4:6.2f} s   (whole command: start, read, verify; exit {cli.returncode})")


if __name__ == "__main__":
    main()
