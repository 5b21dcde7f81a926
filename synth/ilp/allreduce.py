"""A direct allreduce model: every chunk reduced into one root along a tree, then broadcast.

Reduce-scatter followed by allgather (SCCL's allreduce) finishes every reduction before any
broadcast starts, and ties each chunk to the rank that owns its piece. Here both are free: each
chunk c picks its root, every other rank sends its partial value of c to a neighbour exactly once,
after everything it was sent has arrived (so the partials flow up a tree and each contribution is
counted once), and the root's full value then spreads by copies, possibly while other chunks are
still being reduced. Reduce-scatter + allgather, reduce + broadcast, and their pipelined mixes
are all such schedules; recursive doubling, where several ranks build the full value each, is not.

Variables, for chunk c, route ρ and step s: ``r[c, ρ, s]`` (a reduce of src(ρ)'s partial into
dst(ρ)), ``b[c, ρ, s]`` (a copy of the full value), ``root[c, a]``, and ``z[c, a, s]`` ("a is c's
root and holds the full value after step s"). Rows (docs/ilp.md):

1. one root per chunk;
2. every rank but the root sends its partial exactly once: ``Σ r[c, ρ from a, ·] = 1 − root[c, a]``;
3. a rank sends after all its receipts: ``r[c, ρ' into a, s'] + Σ_{s ≤ s'} r[c, ρ from a, s] ≤ 1``;
4. ``z[c, a, s] ≤ root[c, a]`` and ``z[c, a, s] + r[c, ρ' into a, s'] ≤ 1`` for s' > s;
5. a copy is sent only from the full value: ``b[c, ρ from a, s] ≤ z[c, a, s − 1] + Σ_{s' < s} b[c, ρ' into a, s']``;
6. every rank but the root receives the full value once: ``Σ b[c, ρ into a, ·] = 1 − root[c, a]``;
7. a rank receives the full value only after it sent its partial (the copy overwrites it):
   ``b[c, ρ into a, s] ≤ Σ_{s'' < s} r[c, ρ from a, s'']``.

Link loads and the objective are those of every route model (`RouteModel`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from synth.bounds import BoundModel
from synth.bounds.latency import latency_facts
from synth.collective import Collective, Kind
from synth.ilp.formulation import ModelSize, Route, RouteModel, TooLarge, enumerate_routes
from synth.ilp.solve import LinearModel
from synth.ilp.symmetry import SymmetryGroup, trivial_group
from synth.schedule import OP_COPY, OP_REDUCE, Schedule
from synth.topology import Topology


def minimum_allreduce_steps(topology: Topology) -> int:
    """Fewest steps of a tree allreduce: over roots a, the farthest rank's hops to a plus a's
    hops to the farthest rank."""
    hops = latency_facts(topology).hops
    return int((hops.max(axis=0) + hops.max(axis=1)).min())


class AllreduceFormulation(RouteModel):
    """The direct allreduce model for ``steps`` steps (see the module)."""

    def __init__(
        self,
        topology: Topology,
        collective: Collective,
        steps: int,
        *,
        objective: str = "time",
        size: float = 1 << 20,
        routes: tuple[Route, ...] | None = None,
        bounds: BoundModel | None = None,
        max_variables: int | None = None,
        group: SymmetryGroup | None = None,
    ):
        if collective.kind is not Kind.ALLREDUCE:
            raise ValueError("the direct model is for allreduce")
        if objective not in ("time", "rounds"):
            raise ValueError(f"the model's objective is 'time' or 'rounds', not {objective!r}")
        if steps < 2:
            raise ValueError("an allreduce tree needs at least 2 steps")
        self.topology = topology
        self.collective = collective
        self.steps = steps
        self.waves = 1
        self.num_steps = steps
        self.objective = objective
        self.size = float(size)
        self.routes = routes if routes is not None else enumerate_routes(topology)
        self.group = trivial_group(topology)  # loads are not folded: chunks have no home rank
        self.unit = float(min(link.bandwidth for link in topology.links))
        self.chunk_bytes = collective.chunk_bytes(self.size)
        self.max_variables = max_variables
        self._build(bounds, group)

    def _build(self, bounds: BoundModel | None, group: SymmetryGroup | None) -> None:
        topo, S, routes = self.topology, self.steps, self.routes
        r, k = topo.num_ranks, self.collective.num_chunks
        src = np.array([p.src for p in routes], dtype=np.int64)
        dst = np.array([p.dst for p in routes], dtype=np.int64)
        # columns: reduces in steps 1 … S−1 (the root still has to broadcast), copies in 2 … S
        cols = [(c, p, s, OP_REDUCE) for c in range(k) for s in range(1, S) for p in range(len(routes))]
        cols += [(c, p, s, OP_COPY) for c in range(k) for s in range(2, S + 1) for p in range(len(routes))]
        if self.max_variables is not None and len(cols) > self.max_variables:
            raise TooLarge(len(cols), self.max_variables)
        arr = np.array(cols, dtype=np.int64).reshape(-1, 4)
        self.col_c, self.col_p, self.col_s, self.col_op = arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]
        model = LinearModel()
        y = model.add_cols(len(cols))
        self.y = y
        root = model.add_cols(k * r).reshape(k, r)
        z = model.add_cols(k * r * (S - 1)).reshape(k, r, S - 1)  # z[c, a, s − 1] for s = 1 … S−1
        self.root, self.z = root, z

        def group_by(op: int, ends: np.ndarray) -> dict[tuple[int, int], list[int]]:
            out: dict[tuple[int, int], list[int]] = {}
            for j in np.flatnonzero(self.col_op == op):
                out.setdefault((int(self.col_c[j]), int(ends[self.col_p[j]])), []).append(int(j))
            return out

        red_out, red_in = group_by(OP_REDUCE, src), group_by(OP_REDUCE, dst)
        bc_out, bc_in = group_by(OP_COPY, src), group_by(OP_COPY, dst)
        steps_of = self.col_s
        for c in range(k):
            model.add_row(root[c], 1.0, 1.0, 1.0)  # 1
            for a in range(r):
                out_r = red_out.get((c, a), [])
                in_r = red_in.get((c, a), [])
                model.add_row(np.append(y[out_r], root[c, a]), 1.0, 1.0, 1.0)  # 2
                for j in in_r:  # 3
                    earlier = [i for i in out_r if steps_of[i] <= steps_of[j]]
                    model.add_row(np.append(y[j], y[earlier]), 1.0, -math.inf, 1.0)
                for s in range(1, S):  # 4
                    model.add_row([z[c, a, s - 1], root[c, a]], [1.0, -1.0], -math.inf, 0.0)
                    for j in in_r:
                        if steps_of[j] > s:
                            model.add_row([z[c, a, s - 1], y[j]], 1.0, -math.inf, 1.0)
                in_b = bc_in.get((c, a), [])
                for j in bc_out.get((c, a), []):  # 5
                    s = int(steps_of[j])
                    before = [i for i in in_b if steps_of[i] < s]
                    model.add_row(
                        np.concatenate(([y[j], z[c, a, s - 2]], y[before])),
                        np.concatenate(([1.0, -1.0], -np.ones(len(before)))),
                        -math.inf,
                        0.0,
                    )
                model.add_row(np.append(y[in_b], root[c, a]), 1.0, 1.0, 1.0)  # 6
                for j in in_b:  # 7
                    sent = [i for i in out_r if steps_of[i] < steps_of[j]]
                    model.add_row(np.append(y[j], y[sent]), np.append(1.0, -np.ones(len(sent))), -math.inf, 0.0)
        # chunks are interchangeable: order them by their root's id; and an automorphism can move
        # the first chunk's root to the smallest rank of its orbit
        ids = np.arange(r, dtype=float)
        for c1, c2 in itertools.pairwise(range(k)):
            model.add_row(np.concatenate((root[c1], root[c2])), np.concatenate((ids, -ids)), -math.inf, 0.0)
        if group is not None and group.order > 1 and k:
            reps = set(group.rank_orbit_representatives(r))
            model.set_upper(root[0, [a for a in range(r) if a not in reps]], 0.0)
        self._add_costs(model, bounds)
        self.model = model
        self.size_info = ModelSize(k, len(routes), model.num_cols, model.num_rows, 1)

    # ================================================================================ solutions
    def transfers(self, values: np.ndarray) -> list[tuple[int, int, int, int, tuple[int, ...], int]]:
        """(step 0-based, src, dst, chunk, via node ids, op) of a solution."""
        out = []
        for j in np.flatnonzero(values[self.y] > 0.5):
            p = self.routes[self.col_p[j]]
            out.append((int(self.col_s[j]) - 1, p.src, p.dst, int(self.col_c[j]), p.via, int(self.col_op[j])))
        return out

    def encode(self, schedule: Schedule) -> np.ndarray | None:
        """A complete solution vector for a tree allreduce ``schedule`` (such as reduce-scatter
        + allgather), or None if it is not one or does not fit."""
        if schedule.num_steps > self.steps or schedule.collective != self.collective:
            return None
        topo, r, k = self.topology, self.topology.num_ranks, self.collective.num_chunks
        route_index = {(p.src, p.dst, p.via): i for i, p in enumerate(self.routes)}
        col_index = {
            (int(c), int(p), int(s), int(o)): j
            for j, (c, p, s, o) in enumerate(zip(self.col_c, self.col_p, self.col_s, self.col_op))
        }
        values = np.zeros(self.model.num_cols)
        senders = np.zeros((k, r), dtype=int)
        last_in = np.zeros((k, r), dtype=int)
        for s in range(schedule.num_steps):
            sl = schedule.step_slice(s)
            for t_src, t_dst, c, op, rid in zip(
                schedule.src[sl], schedule.dst[sl], schedule.chunk[sl], schedule.op[sl], schedule.route[sl]
            ):
                via = tuple(topo.node_index[name] for name in schedule.routes[int(rid)])
                p = route_index.get((int(t_src), int(t_dst), via))
                j = col_index.get((int(c), p, s + 1, int(op))) if p is not None else None
                if j is None:
                    return None
                values[self.y[j]] = 1.0
                if op == OP_REDUCE:
                    senders[c, t_src] += 1
                    last_in[c, t_dst] = max(last_in[c, t_dst], s + 1)
        for c in range(k):
            roots = np.flatnonzero(senders[c] == 0)
            if roots.size != 1:
                return None
            a = int(roots[0])
            values[self.root[c, a]] = 1.0
            for s in range(max(1, last_in[c, a]), self.steps):
                values[self.z[c, a, s - 1]] = 1.0
        self.complete(values)
        return values if self.model.violation(values) is None else None
