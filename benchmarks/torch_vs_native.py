"""synth's schedules inside torch.distributed against PyTorch's own collectives, in one run.

    .venv/bin/python benchmarks/torch_vs_native.py [--ranks 4] [--rounds 7]

Starts ``--ranks`` processes (gloo on the CPU, meeting through a file) that measure, on the same
process group:

- allreduce of 8 B and of 64 MiB of float32: synth's ring allreduce (``synth.torch.all_reduce``,
  in place) against ``dist.all_reduce``; time per call (slowest rank), algbw = size / time;
- a small MLP trained for 20 steps with DistributedDataParallel, plain and with synth's
  communication hook: time per step, and the largest difference between the two models'
  parameters. The hook's schedules are a schedule set made as a user makes one for their machine
  (`schedule_set`: auto's choice per size on the machine the ranks run on, R processes on one host
  that reach each other directly over loopback).

Every figure is the median over ``--rounds`` rounds, each round timing ours and theirs back to
back (alternating which goes first), so that the load of a shared machine falls on both alike;
the ratios come from the same run. Results are checked: the allreduce outputs against each other,
the parameters within float32 tolerance. A run of the default set records its output and figures
in benchmarks/results/torch_vs_native.json (``benchmarks/readme_figures.py --write`` puts them in
the READMEs).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import Capture, record

from synth import generators
from synth.builtin import locate_topology
from synth.collective import Kind
from synth.exec.schedule_set import save_schedule_set
from synth.schedule_set_build import build_schedule_set
from synth.topology import topology_to_json

REPO = Path(__file__).resolve().parent.parent


# ============================================================================ one rank
def _rank(out: str, rounds: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import synth.torch as st
    from synth.registry import synthesize

    rank, world = dist.get_rank(), dist.get_world_size()
    topology = generators.ring(world)
    ring = synthesize(topology, "allreduce", "ring")
    results: dict = {"ranks": world, "torch": torch.__version__, "load": os.getloadavg()[0]}

    def slowest(seconds: float) -> float:
        t = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(t, dist.ReduceOp.MAX)
        return float(t.item())

    def timed(fn, iters: int) -> float:
        dist.barrier()
        begin = time.perf_counter()
        for _ in range(iters):
            fn()
        return slowest((time.perf_counter() - begin) / iters)

    for size, iters in ((8, 200), (64 << 20, 3)):
        ours_t = torch.ones(size // 4)
        theirs_t = torch.ones(size // 4)

        def ours(t=ours_t):
            st.all_reduce(t, schedule=ring, topology=topology)

        def theirs(t=theirs_t):
            dist.all_reduce(t)

        check = torch.arange(size // 4, dtype=torch.float32) % 13 * (rank + 1)
        a, b = check.clone(), check.clone()
        st.all_reduce(a, schedule=ring, topology=topology)
        dist.all_reduce(b)
        same = bool(torch.equal(a, b))
        for fn in (ours, theirs):  # warm-up: set-up, first-touch of the memory
            fn()
        times: dict[str, list[float]] = {"ours": [], "theirs": []}
        for r in range(rounds):
            order = (("ours", ours), ("theirs", theirs)) if r % 2 == 0 else (("theirs", theirs), ("ours", ours))
            for name, fn in order:
                ours_t.fill_(1.0)
                theirs_t.fill_(1.0)
                times[name].append(timed(fn, iters))
        results[f"allreduce {size}"] = {
            "ours_us": [x * 1e6 for x in times["ours"]],
            "theirs_us": [x * 1e6 for x in times["theirs"]],
            "same_result": same,
        }

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
        )

    def train(hook, steps: int = 20) -> tuple[list, float]:
        net = DDP(model(), bucket_cap_mb=1)
        if hook is not None:
            net.register_comm_hook(None, hook)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(rank)
        data = [(torch.randn(32, 64, generator=g), torch.randint(0, 10, (32,), generator=g)) for _ in range(steps)]
        dist.barrier()
        begin = time.perf_counter()
        for x, y in data:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
        return [p.detach().clone() for p in net.parameters()], slowest((time.perf_counter() - begin) / steps)

    folder = os.path.dirname(out)
    hook = st.allreduce_hook(os.path.join(folder, "set"), topology=os.path.join(folder, "machine.json"))
    train(None, 3)
    train(hook, 3)
    steps: dict[str, list[float]] = {"plain": [], "hook": []}
    diff = 0.0
    for r in range(rounds):
        order = (None, hook) if r % 2 == 0 else (hook, None)
        params = {}
        for h in order:
            name = "plain" if h is None else "hook"
            params[name], seconds = train(h)
            steps[name].append(seconds)
        diff = max(diff, max(float((a - b).abs().max()) for a, b in zip(params["plain"], params["hook"])))
    results["ddp"] = {
        "plain_ms": [x * 1e3 for x in steps["plain"]],
        "hook_ms": [x * 1e3 for x in steps["hook"]],
        "max_diff": diff,
        "parameters": sum(p.numel() for p in model().parameters()),
    }
    if rank == 0:
        Path(out).write_text(json.dumps(results))


# ============================================================================ the launcher
def schedule_set(ranks: int, folder: str) -> str:
    """The DDP hook's schedules, as a user makes them for their machine: R processes on one host
    talk over loopback, every pair directly (a fully connected machine of R ranks); auto's choice
    at 64 KiB, 1 MiB and 16 MiB, written as a schedule set (what ``synth synthesize … -m auto
    --sizes`` writes). Returns what the set holds."""
    machine = generators.fully_connected(ranks)
    path = Path(folder) / "machine.json"
    path.write_text(topology_to_json(machine))
    made = build_schedule_set(machine, Kind.ALLREDUCE, [64 << 10, 1 << 20, 16 << 20])
    save_schedule_set(made, Path(folder) / "set", topology=locate_topology(str(path)))
    return "; ".join(e.describe() for e in made.entries)


def run(ranks: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="synth-bench-torch-") as folder:
        chosen = schedule_set(ranks, folder)
        out = os.path.join(folder, "out.json")
        procs = []
        for rank in range(ranks):
            env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(ranks), "OMP_NUM_THREADS": "1"}
            cmd = [sys.executable, __file__, "--rank-of", folder, "--rounds", str(rounds)]
            procs.append(subprocess.Popen(cmd, env=env, cwd=REPO))
        codes = [p.wait() for p in procs]
        if any(codes):
            raise SystemExit(f"a rank failed: exit codes {codes}")
        return {**json.loads(Path(out).read_text()), "hook_set": chosen}


def _join(values: list[float], digits: int) -> str:
    return ", ".join(f"{x:.{digits}f}" for x in values)


def table(r: dict) -> list[str]:
    med = statistics.median
    lines = [
        f"{r['ranks']} ranks, gloo on the CPU, torch {r['torch']}; median of {len(r['ddp']['hook_ms'])} alternating rounds;"
        f" load average {r['load']:.1f} when it started (2-core machine shared with other engineers)",
        "",
        f"allreduce: synth's ring schedule for a ring of {r['ranks']}; DDP hook's schedule set: {r['hook_set']}",
        "",
        "| measurement | synth | PyTorch | ratio | target |",
        "|---|---|---|---|---|",
    ]
    small, big = r["allreduce 8"], r[f"allreduce {64 << 20}"]
    s_us, t_us = med(small["ours_us"]), med(small["theirs_us"])
    lines.append(f"| allreduce 8 B, time per call | {s_us:.0f} us | {t_us:.0f} us | {s_us / t_us:.2f} x | <= 3 x |")
    b_us, n_us = med(big["ours_us"]), med(big["theirs_us"])
    algbw = lambda us: (64 << 20) / (us * 1e3)  # noqa: E731
    lines.append(
        f"| allreduce 64 MiB float32, algbw | {algbw(b_us):.3f} GB/s | {algbw(n_us):.3f} GB/s | {algbw(b_us) / algbw(n_us):.2f} x"
        " | >= 0.8 x |"
    )
    d = r["ddp"]
    p_ms, h_ms = med(d["plain_ms"]), med(d["hook_ms"])
    lines.append(
        f"| DDP, MLP of {d['parameters']} parameters, 20 steps: time per step | {h_ms:.1f} ms | {p_ms:.1f} ms"
        f" | {h_ms / p_ms:.2f} x | <= 1.2 x |"
    )
    lines += [
        "",
        f"Results: 8 B and 64 MiB allreduce outputs equal to dist.all_reduce's: {small['same_result']} and {big['same_result']};"
        f" largest difference between the DDP models' parameters: {d['max_diff']:.3g} (float32 tolerance).",
        "",
        "Every round's figures (us per call; ms per step):",
        "",
        f"- allreduce 8 B: synth {_join(small['ours_us'], 0)}; PyTorch {_join(small['theirs_us'], 0)}",
        f"- allreduce 64 MiB: synth {_join(big['ours_us'], 0)}; PyTorch {_join(big['theirs_us'], 0)}",
        f"- DDP step: hook {_join(d['hook_ms'], 1)}; plain {_join(d['plain_ms'], 1)}",
    ]
    return lines


def figures(r: dict, wall_s: float) -> dict:
    """What results/torch_vs_native.json records: the medians and the target ratios."""
    med = statistics.median
    small, big, d = r["allreduce 8"], r[f"allreduce {64 << 20}"], r["ddp"]
    return {
        "ranks": r["ranks"],
        "torch": r["torch"],
        "load_before": round(r["load"], 2),
        "rounds": len(d["hook_ms"]),
        "median_us": {
            "8 synth": round(med(small["ours_us"]), 2),
            "8 dist.all_reduce": round(med(small["theirs_us"]), 2),
            "67108864 synth": round(med(big["ours_us"]), 2),
            "67108864 dist.all_reduce": round(med(big["theirs_us"]), 2),
        },
        "latency_over_native_8b": round(med(small["ours_us"]) / med(small["theirs_us"]), 4),
        "algbw_over_native_64mib": round(med(big["theirs_us"]) / med(big["ours_us"]), 4),
        "ddp_step_ms": {"plain": round(med(d["plain_ms"]), 3), "hook": round(med(d["hook_ms"]), 3)},
        "ddp_step_over_plain": round(med(d["hook_ms"]) / med(d["plain_ms"]), 4),
        "ddp_max_param_diff": d["max_diff"],
        "ddp_parameters": d["parameters"],
        "same_results": bool(small["same_result"] and big["same_result"]),
        "wall_s": round(wall_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="synth.torch against PyTorch's own collectives (gloo, CPU).")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--rank-of", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_of is not None:
        import torch.distributed as dist

        dist.init_process_group(
            "gloo",
            init_method="file://" + os.path.join(args.rank_of, "rendezvous"),
            rank=int(os.environ["RANK"]),
            world_size=int(os.environ["WORLD_SIZE"]),
            timeout=datetime.timedelta(seconds=600),
        )
        _rank(os.path.join(args.rank_of, "out.json"), args.rounds)
        dist.destroy_process_group()
        return
    started = time.monotonic()
    measured = run(args.ranks, args.rounds)
    wall = time.monotonic() - started
    with Capture() as out:
        for line in table(measured):
            print(line)
        print(f"wall time {wall:.0f} s")
    if (args.ranks, args.rounds) == (4, 7):  # the default set: recorded
        record("torch_vs_native", ".venv/bin/python benchmarks/torch_vs_native.py", out.text, figures(measured, wall))


if __name__ == "__main__":
    main()
