"""The multipath alltoall: schedules that verify and move the right values, on built-ins, small
and random machines; the routing is the multicommodity-flow optimum; on degraded machines it
relays round the slow link where `direct` cannot."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth import generators as gen
from synth.algorithms import multipath
from synth.algorithms.engines.flow_routing import lp_routing
from synth.algorithms.engines.size_tuning import predicted_us
from synth.bounds.alltoall import alltoall_flow_lp
from synth.builtin import BUILTIN_NAMES
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.registry import synthesize
from synth.verify import verify

from .conftest import SMALL_TOPOLOGIES
from .random_machines import machines
from .reference import numeric_replay


def slow_nic_boxes():
    """Three 8-GPU NVSwitch boxes, a 25 GB/s NIC per GPU, GPU 0's NIC at a tenth of its rate."""
    boxes = gen.nvswitch(boxes=3, nic_bandwidth=25.0)
    return gen.degrade(boxes, "n0-gpu0", "n0-nic0", 0.1)


def slow_link_torus():
    torus = gen.torus(4, 4)
    return gen.degrade(torus, torus.node_name(0), torus.node_name(1), 0.1)


def check(topo, size, chunks=None):
    schedule = synthesize(topo, Kind.ALLTOALL, "multipath", chunks=chunks, options={"size": size}, verify=False)
    result = verify(schedule, topo)
    assert result.ok, result.violation
    assert numeric_replay(schedule)
    return schedule


@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES))
def test_small_topologies(small_topologies, name):
    topo = small_topologies[name]
    for size in (1 << 10, 1 << 30):
        schedule = check(topo, size)
        assert schedule.params["chosen_at_size"] == size


@pytest.mark.parametrize("name", [n for n in BUILTIN_NAMES if n != "fattree-4rack"])
def test_builtins_verify_and_match_direct_or_better_at_1gib(builtin, name):
    topo = builtin(name)
    schedule = synthesize(topo, Kind.ALLTOALL, "multipath", options={"size": 1 << 30})
    direct = synthesize(topo, Kind.ALLTOALL, "direct")
    ours, theirs = (predicted_us(s, topo, [1 << 30])[0] for s in (schedule, direct))
    assert ours <= theirs * 1.01, (ours, theirs)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=machines(), data=st.data())
def test_random_machines(topo, data):
    size = data.draw(st.sampled_from([1, 1 << 16, 1 << 30]), label="size")
    chunks = data.draw(st.sampled_from([None, 1, 3]), label="chunks")
    schedule = check(topo, size, chunks)
    if chunks is not None:
        assert schedule.collective.chunks_per_piece == chunks


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=machines())
def test_routing_is_the_flow_optimum(topo):
    """The paths carry one unit per pair, and their congestion is the LP bound's τ."""
    routing = lp_routing(topo)
    bound = alltoall_flow_lp(topo)
    assert routing is not None and bound is not None
    assert routing.tau == pytest.approx(bound.optimum, rel=1e-3)
    for (s, d), options in routing.paths.items():
        assert sum(w for w, _ in options) == pytest.approx(1.0)
        for _, path in options:
            segments = [routing.segments[i] for i in path]
            assert segments[0].src == s and segments[-1].dst == d
            assert all(a.dst == b.src for a, b in pairwise(segments))


@pytest.mark.parametrize("make", [slow_nic_boxes, slow_link_torus])
def test_degraded_machines_near_the_flow_bound(make):
    """Where `direct` keeps the slow link busiest (3 × and more the bound), multipath relays round
    it and comes within 10% of the multicommodity-flow bound at 1 GiB."""
    topo = make()
    size = 1 << 30
    schedule = check(topo, size)
    ours = predicted_us(schedule, topo, [size])[0]
    direct = predicted_us(synthesize(topo, Kind.ALLTOALL, "direct"), topo, [size])[0]
    bound_us = size / topo.num_ranks * alltoall_flow_lp(topo).ratio / 1e3
    assert direct > 2.5 * bound_us
    assert ours <= 1.1 * bound_us, (ours, bound_us)


def test_slow_nic_traffic_is_relayed():
    """GPU 0's pieces for another box leave mostly through a neighbour's NIC (PXN)."""
    topo = slow_nic_boxes()
    routing = lp_routing(topo)
    off_box = [d for d in range(topo.num_ranks) if topo.hosts[d] != topo.hosts[0]]
    relayed = sum(w for d in off_box for w, path in routing.paths[(0, d)] if len(path) > 1)
    assert relayed >= 0.8 * len(off_box)


def test_serves_alltoall_only(dgx1):
    with pytest.raises(NotApplicable, match="does not serve allgather"):
        synthesize(dgx1, Kind.ALLGATHER, "multipath")
    with pytest.raises(NotApplicable, match="routing LP"):
        multipath.routing_for(gen.torus(16, 16))
