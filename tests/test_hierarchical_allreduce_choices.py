"""The size-tuned hierarchical allreduce tries every pair of methods inside the hosts (direct,
ring) and across them (direct, ring, one-shot): at small sizes one crossing of the network
(one-shot along the rails) beats the two of a direct or ring allreduce there, whatever the link
loads say. Verified, replayed with numbers, and never slower than any of the pairs."""

import itertools

import pytest

from synth import generators as gen
from synth.algorithms import hierarchical, one_shot
from synth.algorithms.engines.size_tuning import predicted_us
from synth.collective import Collective, Kind
from synth.registry import synthesize
from synth.routing import router_for
from synth.verify import verify

from .reference import numeric_replay

MACHINES = {
    "gaudi3": lambda: gen.gaudi(boxes=3),
    "fattree2x2x2": lambda: gen.fattree(racks=2, servers=2, gpus=2),
    "multihost3x4": lambda: gen.multihost(hosts=3, gpus=4),
}


@pytest.mark.parametrize("name", sorted(MACHINES))
@pytest.mark.parametrize("size", [64 << 10, 1 << 30])
def test_tuned_allreduce_is_the_fastest_pair_of_inner_methods(name, size):
    topo = MACHINES[name]()
    r = topo.num_ranks
    tuned = synthesize(topo, Kind.ALLREDUCE, hierarchical.NAME, options={"size": size})
    assert verify(tuned, topo).ok and numeric_replay(tuned)
    best = predicted_us(tuned, topo, [size])[0]
    one = Collective(Kind.ALLREDUCE, r, r)
    for intra, inter in itertools.product(hierarchical.INNER, hierarchical.ACROSS):
        pair = hierarchical.allreduce(topo, one, router_for(topo), intra, inter)
        assert pair.params["intra"] == intra and pair.params["inter"] == inter
        assert verify(pair, topo).ok and numeric_replay(pair)
        assert best <= predicted_us(pair, topo, [size])[0] * (1 + 1e-9)


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_small_allreduce_crosses_the_network_once(name):
    topo = MACHINES[name]()
    tuned = synthesize(topo, Kind.ALLREDUCE, hierarchical.NAME, options={"size": 64 << 10})
    assert tuned.params.get("inter") == one_shot.NAME and tuned.num_steps == 3
    default = hierarchical.allreduce(topo, Collective(Kind.ALLREDUCE, topo.num_ranks, topo.num_ranks), router_for(topo))
    assert predicted_us(tuned, topo, [64 << 10])[0] < 0.9 * predicted_us(default, topo, [64 << 10])[0]


# ----------------------------------------------------------------------------- by carriers
def _mi250(packages=2, nodes=2, degraded=False):
    topo = gen.mi250(packages=packages, nodes=nodes)
    return gen.degrade(topo, "n0-nic0", "network", 0.25) if degraded else topo


@pytest.mark.parametrize("degraded", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("inter", sorted(hierarchical.ACROSS))
@pytest.mark.parametrize("intra", sorted(hierarchical.INNER))
def test_carrier_allreduce_verifies_and_sums(intra, inter, weighted, degraded):
    topo = _mi250(degraded=degraded)
    r = topo.num_ranks
    for k in (r, 4 * r):
        schedule = hierarchical.carrier_allreduce(
            topo, Collective(Kind.ALLREDUCE, r, k), router_for(topo), intra, inter, weighted
        )
        assert verify(schedule, topo).ok and numeric_replay(schedule)
        assert schedule.params["carriers_per_host"] == 2 and sum(schedule.params["rail_chunks"]) == k


def test_carriers_are_the_ranks_with_a_nic_and_a_slow_rail_takes_less():
    topo = _mi250(degraded=True)
    hosts = hierarchical.host_ranks(topo)
    carriers = hierarchical.network_carriers(topo, router_for(topo), hosts)
    assert [[topo.node_name(c) for c in cs] for cs in carriers] == [
        ["n0-gpu0gcd0", "n0-gpu1gcd0"],
        ["n1-gpu0gcd0", "n1-gpu1gcd0"],
    ]
    r = topo.num_ranks
    equal = hierarchical.carrier_allreduce(topo, Collective(Kind.ALLREDUCE, r, 4 * r), router_for(topo), "direct", "direct")
    weighted = hierarchical.carrier_allreduce(
        topo, Collective(Kind.ALLREDUCE, r, 4 * r), router_for(topo), "direct", "direct", weighted=True
    )
    assert equal.params["rail_chunks"] == [16, 16]
    assert weighted.params["rail_chunks"][0] < weighted.params["rail_chunks"][1]
    for size in (1 << 20, 1 << 30):
        assert predicted_us(weighted, topo, [size])[0] < 0.8 * predicted_us(equal, topo, [size])[0]


@pytest.mark.parametrize("degraded", [False, True])
def test_tuned_allreduce_on_mi250_nodes_beats_the_pipelined_one_at_64k(degraded):
    topo = _mi250(packages=4, degraded=degraded)
    size = 64 << 10
    tuned = synthesize(topo, Kind.ALLREDUCE, hierarchical.NAME, options={"size": size})
    assert verify(tuned, topo).ok and numeric_replay(tuned)
    assert "carriers_per_host" in tuned.params
    r = topo.num_ranks
    pipelined = hierarchical.pipelined_allreduce(topo, Collective(Kind.ALLREDUCE, r, r), router_for(topo), size)
    assert predicted_us(tuned, topo, [size])[0] < predicted_us(pipelined, topo, [size])[0]
