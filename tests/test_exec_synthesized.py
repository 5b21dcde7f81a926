"""Schedules from the synthesizers (not only the generated baselines) run correctly on real data:
greedy, packing, auto and hierarchical gather/scatter, with their relays, many chunks and partial
sums, executed by `synth.run` (local processes) and compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import synth
from synth import generators as gen
from synth.builtin import get_topology
from synth.registry import synthesize

N = 48  # elements per piece (per rank's part), so chunks come out uneven and some empty


def _inputs(kind: str, r: int, root: int | None, rng) -> list:
    parts = r if kind in ("reduce-scatter", "scatter", "alltoall") else 1
    data = [rng.integers(-20, 20, size=parts * N).astype(np.float64) for _ in range(r)]
    if kind in ("broadcast", "scatter"):
        return [data[v] if v == root else None for v in range(r)]
    return data


def _expected(kind: str, inputs: list, root: int | None) -> list:
    r = len(inputs)
    if kind == "allreduce":
        return [sum(inputs)] * r
    if kind == "reduce-scatter":
        total = sum(inputs)
        return [total[v * N : (v + 1) * N] for v in range(r)]
    if kind == "allgather":
        return [np.concatenate(inputs)] * r
    if kind == "broadcast":
        return [inputs[root]] * r
    if kind == "scatter":
        return [inputs[root][v * N : (v + 1) * N] for v in range(r)]
    if kind == "alltoall":
        return [np.concatenate([inputs[s][d * N : (d + 1) * N] for s in range(r)]) for d in range(r)]
    if kind == "gather":
        return [np.concatenate(inputs) if v == root else None for v in range(r)]
    if kind == "reduce":
        return [sum(inputs) if v == root else None for v in range(r)]
    raise AssertionError(kind)


CASES = [
    ("dgx1", "allreduce", "greedy", None, {"size": 1 << 20}),
    ("dgx1", "reduce-scatter", "packing", None, {"size": 1 << 30}),
    ("dgx1", "alltoall", "greedy", None, {"seeds": 2}),
    ("torus3x3", "gather", "auto", 5, {"size": 1 << 30}),  # 9 ranks: auto runs no ILP
    ("dgx-a100x2", "scatter", "hierarchical", 3, {"size": 1 << 30}),
    ("dgx-a100x2", "gather", "hierarchical", 11, {"size": 1 << 20}),
    ("dgx-a100x2", "alltoall", "hierarchical", None, {"size": 1 << 30}),
    ("torus3x3", "broadcast", "packing", 4, {"size": 1 << 30}),
    ("fattree", "reduce", "greedy", 2, {"size": 1 << 20}),
    ("fattree", "allgather", "packing", None, {"size": 1 << 20}),
]


def _topology(name: str):
    if name == "torus3x3":
        return gen.torus(3, 3)
    if name == "fattree":
        return gen.fattree(racks=2, servers=2, gpus=2)
    return get_topology(name)


@pytest.mark.parametrize(("name", "kind", "method", "root", "options"), CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_synthesized_schedule_runs_correctly(name, kind, method, root, options):
    topology = _topology(name)
    schedule = synthesize(topology, kind, method, root=root, options=options)
    r = topology.num_ranks
    inputs = _inputs(kind, r, schedule.collective.root, np.random.default_rng(7))
    outputs = synth.run(schedule, inputs, op="sum", topology=topology)
    for rank, (got, want) in enumerate(zip(outputs, _expected(kind, inputs, schedule.collective.root), strict=True)):
        if want is None:
            continue  # ranks without an output (non-roots of gather and reduce)
        assert np.array_equal(got, want), f"rank {rank}"
