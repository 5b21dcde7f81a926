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
