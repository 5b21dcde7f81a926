"""Gradient averaging with a synthesized allreduce, in a PyTorch training job.

    torchrun --nproc-per-node 4 examples/ddp_synth.py
    torchrun --nproc-per-node 4 examples/ddp_synth.py --schedules schedules/ --topology machine.json

A small MLP is trained three times from the same start on the same data:

1. by hand, averaging the gradients with ``torch.distributed.all_reduce``;
2. by hand, averaging them with ``synth.torch.all_reduce`` and a synthesized schedule;
3. with DistributedDataParallel, first plain, then with synth's communication hook, which averages
   every gradient bucket with the schedule for the bucket's size.

and the parameters are compared: they agree to float32 rounding (a schedule may add the ranks'
gradients in another order than gloo does; here they usually agree bit for bit).

Without ``--schedules`` every rank synthesizes a ring allreduce for a ring of as many ranks as the
job has (the same schedule on every rank: synthesis is deterministic). With your machine's
schedules (see examples/README.md: ``synth topo import nccl``, then ``synth synthesize … -m auto
--sizes …``), pass the folder and the topology file. CPU and gloo here; the same code runs on GPUs
with the NCCL backend (not tested in this project, which has no GPU).
"""

from __future__ import annotations

import argparse
import datetime
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import synth.torch as st


def make_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
    )


def batches(rank: int, steps: int, seed: int):
    """Each rank's own data (the same for every run)."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    for _ in range(steps):
        yield torch.randn(32, 64, generator=g), torch.randint(0, 10, (32,), generator=g)


def train_by_hand(average, steps: int, seed: int) -> tuple[list[torch.Tensor], float]:
    """SGD where ``average(grad)`` averages each gradient over the ranks, in place."""
    model = make_model(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    begin = time.perf_counter()
    for x, y in batches(dist.get_rank(), steps, seed):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        for p in model.parameters():
            average(p.grad)
        opt.step()
    return [p.detach().clone() for p in model.parameters()], (time.perf_counter() - begin) / steps


def train_ddp(hook, steps: int, seed: int) -> tuple[list[torch.Tensor], float]:
    """The same with DistributedDataParallel (its own allreduce, or ``hook``)."""
    model = DDP(make_model(seed), bucket_cap_mb=1)
    if hook is not None:
        model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    begin = time.perf_counter()
    for x, y in batches(dist.get_rank(), steps, seed):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()], (time.perf_counter() - begin) / steps


def largest_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", default=None, help="a schedule set folder or an allreduce schedule file")
    parser.add_argument("--topology", default=None, help="the topology file the schedules were made for")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))  # torchrun sets RANK, WORLD_SIZE, …
    rank, world = dist.get_rank(), dist.get_world_size()

    if args.schedules is None:  # a ring allreduce for a ring of `world` ranks, made here on every rank
        from synth import generators
        from synth.registry import synthesize

        topology = generators.ring(world)
        schedules = synthesize(topology, "allreduce", "ring")
    else:
        topology, schedules = args.topology, args.schedules

    def torch_average(grad: torch.Tensor) -> None:
        dist.all_reduce(grad)
        grad.div_(world)

    def synth_average(grad: torch.Tensor) -> None:
        st.all_reduce(grad, schedule=schedules, topology=topology)  # a set: the schedule for the gradient's size
        grad.div_(world)

    theirs, t_theirs = train_by_hand(torch_average, args.steps, args.seed)
    ours, t_ours = train_by_hand(synth_average, args.steps, args.seed)
    plain, t_plain = train_ddp(None, args.steps, args.seed)
    hook = st.allreduce_hook(schedules, topology=topology)
    hooked, t_hooked = train_ddp(hook, args.steps, args.seed)

    if rank == 0:
        eps = torch.finfo(torch.float32).eps
        by_hand, with_ddp = largest_difference(theirs, ours), largest_difference(plain, hooked)
        print(f"{world} ranks, {args.steps} steps, {sum(p.numel() for p in ours)} parameters")
        print(f"by hand: dist.all_reduce {t_theirs * 1e3:.1f} ms/step, synth {t_ours * 1e3:.1f} ms/step;"
              f" largest parameter difference {by_hand:.3g}")  # fmt: skip
        print(f"DDP: plain {t_plain * 1e3:.1f} ms/step, synth hook {t_hooked * 1e3:.1f} ms/step;"
              f" largest parameter difference {with_ddp:.3g}; buckets by schedule {dict(hook.calls)}"
              + (f"; PyTorch's allreduce for sizes {sorted(hook.fallback_sizes)}" if hook.fallback_sizes else ""))  # fmt: skip
        agree = by_hand <= 16 * eps and with_ddp <= 16 * eps
        print("parameters " + ("identical" if by_hand == with_ddp == 0 else "agree to float32 rounding" if agree else "DIFFER"))
        if not agree:
            raise SystemExit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
