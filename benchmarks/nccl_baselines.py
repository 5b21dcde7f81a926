"""NCCL-style baselines: the ring channels found per built-in, the cost of synthesizing each method,
and the bandwidth each schedule reaches under the step-synchronous alpha-beta model
(docs/formats.md, 'Step-synchronous cost'), next to NCCL's own analytic model.

    .venv/bin/python benchmarks/nccl_baselines.py [--quick]

The step-synchronous cost is computed here, straight from its definition (a step takes its
slowest transfer: the sum of the link latencies on its path plus the largest bytes/bandwidth over
its links, counting every transfer of the step on each link), so the figures do not depend on the
simulator module; `synth compare` reports the same model.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from synth.algorithms.engines.ring_channels import ring_channels
from synth.builtin import BUILTIN_NAMES, get_topology
from synth.errors import NotApplicable
from synth.nccl_model import LABEL, nccl_model_best
from synth.registry import METHODS, NCCL_METHODS, synthesize
from synth.units import format_size

SIZES = (2**10, 2**20, 2**26, 2**30)


def step_terms(schedule, topology) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per step and transfer: (latency of its path µs, max over its links of transfers/bandwidth)."""
    index = topology.node_index
    link_index = topology.link_index
    bw, lat = topology.bandwidth_array, topology.latency_array
    paths: dict[tuple[int, int, int], np.ndarray] = {}
    out = []
    for s in range(schedule.num_steps):
        sl = schedule.step_slice(s)
        keys = list(zip(schedule.src[sl].tolist(), schedule.dst[sl].tolist(), schedule.route[sl].tolist()))
        for key in keys:
            if key not in paths:
                a, b, r = key
                nodes = [a, *(index[n] for n in schedule.routes[r]), b]
                paths[key] = np.array([link_index[(u, v)] for u, v in itertools.pairwise(nodes)], dtype=np.int64)
        links = [paths[k] for k in keys]
        flat = np.concatenate(links)
        load = np.bincount(flat, minlength=len(bw)).astype(np.float64)
        owner = np.repeat(np.arange(len(links)), [len(x) for x in links])
        starts = np.concatenate([[0], np.cumsum([len(x) for x in links])[:-1]])
        alpha = np.add.reduceat(lat[flat], starts)
        beta = np.zeros(len(links))
        np.maximum.at(beta, owner, load[flat] / bw[flat])
        out.append((alpha, beta))
    return out


def step_synchronous_us(terms, chunk_bytes: float) -> float:
    """Schedule time in µs: sum over steps of the slowest transfer (bytes / (GB/s) = 1e-3 µs)."""
    return float(sum(np.max(alpha + beta * chunk_bytes / 1e3) for alpha, beta in terms))


def channels_table() -> None:
    print("Ring channels (synth.algorithms.engines.ring_channels.ring_channels)")
    print(f"{'topology':15s} {'ranks':>5s} {'channels':>8s} {'GB/s each':>9s} {'GB/s total':>10s}  {'layout':12s} {'time':>6s}")
    for name in BUILTIN_NAMES:
        topo = get_topology(name)
        t0 = time.perf_counter()
        plan = ring_channels(topo)
        dt = time.perf_counter() - t0
        print(
            f"{name:15s} {topo.num_ranks:5d} {plan.channels:8d} {plan.channel_bandwidth:9.2f} "
            f"{plan.total_bandwidth:10.2f}  {plan.layout:12s} {dt:5.2f}s"
        )


def synthesis_table() -> None:
    print("\nSynthesis (default chunks, verified; time includes verification)")
    print(f"{'topology':15s} {'method':19s} {'collective':15s} {'G':>6s} {'steps':>6s} {'transfers':>9s} {'time':>7s}")
    for name in BUILTIN_NAMES:
        topo = get_topology(name)
        for method in NCCL_METHODS:
            for kind in sorted(METHODS[method].collectives):
                t0 = time.perf_counter()
                try:
                    s = synthesize(topo, kind, method)
                except NotApplicable:
                    continue
                dt = time.perf_counter() - t0
                print(
                    f"{name:15s} {method:19s} {kind.value:15s} {s.collective.num_chunks:6d} {s.num_steps:6d} "
                    f"{s.num_transfers:9d} {dt:6.2f}s"
                )


def bandwidth_table(name: str, kind: str, methods: list[str]) -> None:
    topo = get_topology(name)
    print(f"\n{kind} on {name}: algbw (GB/s) under the step-synchronous model")
    print(f"{'method':19s} {'steps':>5s} " + " ".join(f"{format_size(z):>11s}" for z in SIZES))
    for method in methods:
        try:
            s = synthesize(topo, kind, method)
        except NotApplicable:
            continue
        terms = step_terms(s, topo)
        row = [z / (step_synchronous_us(terms, s.collective.chunk_bytes(z)) * 1e3) for z in SIZES]
        print(f"{method:19s} {s.num_steps:5d} " + " ".join(f"{v:11.2f}" for v in row))
    best = nccl_model_best(topo, kind, SIZES)
    print(f"{LABEL}:")
    print(f"{'  its pick':25s} " + " ".join(f"{c.name:>11s}" for c in best))
    print(f"{'  algbw':25s} " + " ".join(f"{c.size / (c.time_us * 1e3):11.2f}" for c in best))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 128-rank fat-tree tables")
    args = parser.parse_args()
    channels_table()
    synthesis_table()
    bandwidth_table("dgx1", "allgather", ["ring", "direct", "recursive-doubling", "multiring"])
    bandwidth_table("dgx1", "allreduce", ["ring", "direct", "recursive-halving", "multiring", "double-binary-tree"])
    bandwidth_table("dgx-a100x4", "allreduce", ["ring", "direct", "multiring", "double-binary-tree", "hierarchical"])
    if not args.quick:
        bandwidth_table("fattree-4rack", "allreduce", ["ring", "direct", "multiring", "double-binary-tree", "hierarchical"])


if __name__ == "__main__":
    main()
