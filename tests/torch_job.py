"""Run a function of this module on R torch.distributed ranks (gloo, CPU), for the torch tests.

`run_job(world, check, tmp_path, **args)` starts R processes of ``python -m tests.torch_job CHECK``
with ``RANK``/``WORLD_SIZE`` set, meeting through a file in ``tmp_path`` (no port to pick), each
running ``CHECK(**args)`` after joining the group; rank 0's return value comes back as JSON. The
checks compare synth's collectives with torch's own on the same inputs, and with a reference
every rank computes by itself (every rank can make every rank's input: it depends only on the
rank and the case).
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_job(
    world: int,
    check: str,
    tmp_path: Path,
    timeout: float = 600,
    env: dict | None = None,
    hard_exit: bool = False,
    **args,
) -> dict:
    """Run ``check`` on ``world`` ranks; returns rank 0's result (raises if a rank fails).

    ``hard_exit``: every rank leaves with ``os._exit(0)`` once the check has returned, its result
    is written and all ranks passed the final barrier, without tearing the process group down.
    For checks that make ranks call mismatched collectives on purpose: gloo may still hold a
    receive that no rank will ever match, and tearing it down then can abort the process in
    torch's C++ destructors ("terminate called without an active exception", exit -6), after
    every result is in; such an abort says nothing about what the check tests. The long
    collectives checks use it too: the same abort ended one rank of the 3-rank check once in CI
    (2026-11-25), after every case had passed and the final barrier."""
    store = tmp_path / f"store-{check}-{world}-{time.monotonic_ns()}"
    out = tmp_path / f"result-{check}-{world}-{time.monotonic_ns()}.json"
    spec = json.dumps({"check": check, "args": args, "out": str(out), "store": str(store), "hard_exit": hard_exit})
    procs = []
    for rank in range(world):
        proc_env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "OMP_NUM_THREADS": "1", **(env or {})}
        cmd = [sys.executable, "-m", "tests.torch_job", spec]
        procs.append(subprocess.Popen(cmd, cwd=REPO, env=proc_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + timeout
    outputs = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            outputs.append((proc.returncode, stdout, stderr))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    failed = [(rank, code, err[-3000:]) for rank, (code, _, err) in enumerate(outputs) if code != 0]
    assert not failed, failed
    return json.loads(out.read_text())


def main() -> None:
    import torch.distributed as dist

    spec = json.loads(sys.argv[1])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(
        "gloo", init_method="file://" + spec["store"], rank=rank, world_size=world, timeout=datetime.timedelta(seconds=300)
    )
    from tests import torch_checks

    result = getattr(torch_checks, spec["check"])(**spec["args"])
    if rank == 0:
        Path(spec["out"]).write_text(json.dumps(result))
    dist.barrier()
    if spec.get("hard_exit"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
