"""The rack-aware scatter-allgather waves of pipelined-tree (`rack_plan`, `host_racks`)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from synth import builtin, generators
from synth.algorithms import pipelined_tree as pt
from synth.algorithms.engines.size_tuning import predicted_us
from synth.routing import router_for
from synth.verify import verify


@pytest.fixture(scope="module")
def fattree():
    topology = generators.random_machine(1, "fattree")
    router = router_for(topology)
    spreads = pt.Spreads(router)
    layout = next(lay for lay in pt.layouts(topology, 0, router, spreads.finder) if lay.name == "hosts")
    return topology, router, spreads, layout


@pytest.mark.parametrize("racks", [(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2), (0, 1, 1, 0, 2, 2, 1), (0, 1, 1, 1), (0, 0, 1, 1, 1)])
@pytest.mark.parametrize("once", [False, True])
@pytest.mark.parametrize("first", [0, 1])
def test_rack_plan_reaches_every_host_once_and_every_rack_once(racks, once, first):
    hosts = len(racks)
    plan = pt.rack_plan(racks, first, once)
    assert len(plan) == hosts - first
    for g, hops in zip(range(first, hosts), plan):
        held = {g: 0}
        for offset, a, b in sorted(hops):
            assert a in held and held[a] < offset, "a host sends a piece only after it has it"
            assert b not in held and b != 0, "every host but the root's gets a piece once"
            held[b] = offset
        assert set(held) == set(range(hosts)) - ({0} - {g})
        crossings = [racks[b] for _, a, b in hops if racks[a] != racks[b]]
        assert sorted(crossings) == sorted(set(crossings)), "a piece enters a rack once"
        if once and racks[g] == racks[0]:
            assert sum(racks[a] == racks[0] != racks[b] for _, a, b in hops) <= 1


def test_host_racks(fattree):
    _, router, _, layout = fattree
    racks = pt.host_racks(layout, router)
    assert sorted(racks.count(r) for r in set(racks)) == [4, 4, 4]
    # one switch for every host: no racks
    flat = builtin.get_topology("dgx-a100x2")
    flat_router = router_for(flat)
    assert all(pt.host_racks(lay, flat_router) == () for lay in pt.layouts(flat, 0, flat_router))


@pytest.mark.parametrize(("once", "bounce"), list(itertools.product([False, True], ["", "split", "whole"])))
def test_rack_waves_verify_both_ways(fattree, once, bounce):
    topology, router, spreads, layout = fattree
    hosts = len(layout.groups)
    racks = pt.host_racks(layout, router)
    shape = pt.Shape("scatter-allgather", hosts - 1, 4, (hosts - 1) * 3, root_piece=False, racks=racks, rack_once=once)
    if bounce:
        shape = replace(shape, bounce_split=True, bounce_whole=bounce == "whole", slices=(1, 2))
    schedule = pt.build_broadcast(topology, layout, 0, shape, 1 << 24, spreads)
    assert verify(schedule, topology).ok
    assert schedule.params["racks"] == list(racks)
    reduce = pt.mirrored_reduce(topology, 0, schedule.params, 1 << 24)
    assert reduce is not None and verify(reduce, topology).ok


def test_rack_waves_beat_the_flat_allgather_and_nccl_at_1gib(fattree):
    """random-fattree-1, 1 GiB from rank 0: the flat allgather overloads the 2:1 rack uplinks; the
    rack-aware one with ramped waves comes within 3 % of the bound (11007.33 µs) and under NCCL's
    analytic 11417.82 µs (issue 17)."""
    topology, router, spreads, layout = fattree
    hosts = len(layout.groups)
    size = 1 << 30
    racks = pt.host_racks(layout, router)
    flat = pt.Shape("scatter-allgather", hosts - 1, 4, (hosts - 1) * 4, root_piece=False)
    rack = replace(flat, racks=racks)
    times = [predicted_us(pt.build_broadcast(topology, layout, 0, s, size, spreads), topology, [size])[0] for s in (flat, rack)]
    assert times[1] < 0.85 * times[0]
    ramped = pt.ramped_shapes(topology, layout, 0, rack, None, size, spreads)
    best = min(predicted_us(pt.build_broadcast(topology, layout, 0, s, size, spreads), topology, [size])[0] for s in ramped)
    assert best < 11417.82
