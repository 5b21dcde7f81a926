"""Property tests: randomly mutated valid schedules are either rejected (and the production
verifier agrees with the naive reference on the first violation) or still genuinely correct (a
numeric replay with real values gives the right result)."""

from __future__ import annotations

import contextlib
import functools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth import generators as gen
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.registry import CLASSIC_METHODS, METHODS, synthesize
from synth.schedule import Transfer
from synth.verify import verify

from .reference import numeric_replay, reference_check

TOPOLOGIES = {
    "ring4": lambda: gen.ring(4),
    "nvswitch5": lambda: gen.nvswitch(5, 100.0),
    "mesh2x3": lambda: gen.mesh(2, 3),
    "pcie": lambda: gen.pcie_tree(sockets=2, switches_per_socket=1, gpus_per_switch=2),
}


@functools.cache
def topology(name):
    return TOPOLOGIES[name]()


@functools.cache
def base_schedules():
    out = []
    for name in TOPOLOGIES:
        topo = topology(name)
        for kind in Kind:
            for method in CLASSIC_METHODS:
                if not METHODS[method].serves(kind):
                    continue
                with contextlib.suppress(NotApplicable):
                    out.append((name, synthesize(topo, kind, method)))
    return out


def mutate(data, schedule, topo):
    steps = [list(s) for s in schedule.steps]
    r, g = schedule.collective.num_ranks, schedule.collective.num_chunks
    switches = [n.name for n in topo.switches]
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        kind = data.draw(
            st.sampled_from(["drop", "duplicate", "move", "retarget", "rechunk", "flip-op", "swap-steps", "add", "reroute"])
        )
        nonempty = [i for i, s in enumerate(steps) if s]
        if not nonempty:
            steps.append([])
            nonempty = []
        if kind == "swap-steps" and len(steps) > 1:
            a, b = data.draw(st.integers(0, len(steps) - 1)), data.draw(st.integers(0, len(steps) - 1))
            steps[a], steps[b] = steps[b], steps[a]
            continue
        if kind == "add" or not nonempty:
            s = data.draw(st.integers(0, max(len(steps) - 1, 0)))
            src, dst = data.draw(st.integers(0, r - 1)), data.draw(st.integers(0, r - 1))
            via = tuple(data.draw(st.lists(st.sampled_from(switches), max_size=2))) if switches else ()
            op = data.draw(st.sampled_from(["copy", "reduce"]))
            if not steps:
                steps.append([])
            steps[s].insert(
                data.draw(st.integers(0, len(steps[s]))), Transfer(src, dst, data.draw(st.integers(0, g - 1)), op, via)
            )
            continue
        s = data.draw(st.sampled_from(nonempty))
        i = data.draw(st.integers(0, len(steps[s]) - 1))
        t = steps[s][i]
        if kind == "drop":
            steps[s].pop(i)
        elif kind == "duplicate":
            steps[data.draw(st.integers(0, len(steps) - 1))].append(t)
        elif kind == "move":
            steps[s].pop(i)
            steps[data.draw(st.integers(0, len(steps) - 1))].append(t)
        elif kind == "retarget":
            steps[s][i] = Transfer(t.src, data.draw(st.integers(0, r - 1)), t.chunk, t.op, t.via)
        elif kind == "rechunk":
            steps[s][i] = Transfer(t.src, t.dst, data.draw(st.integers(0, g - 1)), t.op, t.via)
        elif kind == "flip-op":
            steps[s][i] = Transfer(t.src, t.dst, t.chunk, "copy" if t.op == "reduce" else "reduce", t.via)
        elif kind == "reroute" and switches:
            via = tuple(data.draw(st.lists(st.sampled_from(switches), max_size=2)))
            steps[s][i] = Transfer(t.src, t.dst, t.chunk, t.op, via)
    return schedule.with_steps(steps)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutants_rejected_or_genuinely_correct(data):
    name, schedule = data.draw(st.sampled_from(base_schedules()), label="base")
    topo = topology(name)
    mutant = mutate(data, schedule, topo)
    result = verify(mutant, topo)
    expected = reference_check(mutant, topo)
    if result.ok:
        assert expected is None
        assert numeric_replay(mutant, seed=1), "accepted schedule computes a wrong result"
    else:
        v = result.violation
        assert expected == (v.rule, v.step, v.transfer), f"{v} vs reference {expected}"


def test_every_base_schedule_correct_numerically():
    for name, schedule in base_schedules():
        assert verify(schedule, topology(name)).ok
        assert numeric_replay(schedule), (name, schedule.method, schedule.collective.kind)
