"""slow-feed: scatter-allgather over the fast ranks, the slow-ingress ranks fed in every step
(synth/algorithms/slow_feed.py)."""

import numpy as np
import pytest

from synth import generators as gen
from synth.algorithms.slow_feed import build, nearest, slow_ranks
from synth.builtin import get_topology
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.nccl_model import nccl_model_best
from synth.registry import synthesize
from synth.routing import router_for
from synth.simulate import simulate
from synth.topology import topology_from_document
from synth.verify import check

GIB = 1 << 30
MIB16 = 16 << 20


def _us(schedule, topology, size):
    return simulate(schedule, topology, [size], model="sync")[0].time_us


@pytest.fixture(scope="module")
def nvl72():
    """random-nvl72-2: 72 GPUs on one NVLink switch at 900 GB/s, tray7-gpu1 (rank 29) at 90."""
    return gen.random_machine(2, "nvl72")


def test_the_slow_rank_is_found(nvl72):
    carriers, slow = slow_ranks(nvl72, 0)
    assert slow == [29] and len(carriers) == 70 and 0 not in carriers
    # the slow rank as root: nobody else is slow
    with pytest.raises(NotApplicable, match="no rank"):
        slow_ranks(nvl72, 29)


def test_the_slow_rank_gets_every_chunk_once_in_every_step(nvl72):
    router = router_for(nvl72)
    for waves in (1, 3):
        chunks = waves * 70
        ours = build(nvl72, Collective(Kind.BROADCAST, 72, chunks, 0), router, waves, 1, GIB)
        check(ours, nvl72)
        assert ours.num_steps == waves + 1
        got = [ours.chunk[ours.step_slice(t)][ours.dst[ours.step_slice(t)] == 29] for t in range(ours.num_steps)]
        assert all(g.size > 0 for g in got)  # fed in every step
        assert sorted(np.concatenate(got).tolist()) == list(range(chunks))
        feeds = np.array(ours.params["root_feeds"]) + np.array(ours.params["carrier_feeds"])
        assert feeds.sum() == chunks


def test_the_feeders_are_the_nearest_fast_ranks():
    """On a rail-only two-box machine the fast ranks of the slow GPU's own box feed it (through
    the NVSwitch), not the other box's (through the NICs)."""
    topo = get_topology("dgx-a100x2")
    topo = gen.degrade(topo, topo.node_name(12), "n1-nvswitch", 0.1, name="a100x2-slow12")
    carriers, slow = slow_ranks(topo, 0)
    assert slow == [12]
    assert nearest(router_for(topo), carriers, 0, 12).tolist() == [8, 9, 10, 11, 13, 14, 15]


def test_a_tree_base_where_the_flat_shape_has_no_paths():
    """dgx-a100x2 with GPU 12's NVSwitch link at 1/10 (rail-only network: the flat shape has no
    switch path between most pairs): packing's trees over the other ranks, GPU 12 fed by its box
    in every step; at 16 MiB 379.41 us where packing over the whole machine takes 388.50."""
    topo = get_topology("dgx-a100x2")
    topo = gen.degrade(topo, topo.node_name(12), "n1-nvswitch", 0.1, name="a100x2-slow12")
    ours = synthesize(topo, Kind.BROADCAST, "slow-feed", options={"size": MIB16})
    assert ours.params["base"] == "packing"
    assert _us(ours, topo, MIB16) == pytest.approx(379.41, abs=0.01)
    theirs = synthesize(topo, Kind.BROADCAST, "packing", options={"size": MIB16})
    assert _us(ours, topo, MIB16) < 0.985 * _us(theirs, topo, MIB16)
    reduce = synthesize(topo, Kind.REDUCE, "slow-feed", options={"size": MIB16})  # verified
    assert reduce.params["dual_of"] == "broadcast" and reduce.params["slow_ranks"] == [12]


def test_reaches_the_ingress_bound_within_two_alphas_and_beats_nccl(nvl72):
    """1 GiB: two steps, n/90 GB/s + 2 x 1 us = 11932.46 us (bound 11931.46: ingress + alpha;
    NCCL's analytic pick 11942.26; pipelined-tree's 19 steps took 11964.61). 16 MiB: 188.41
    (bound 187.41, NCCL 198.21, pipelined-tree 190.99)."""
    for size, expected in ((GIB, 11932.46), (MIB16, 188.41)):
        ours = synthesize(nvl72, Kind.BROADCAST, "slow-feed", options={"size": size})
        assert ours.num_steps == 2 and ours.params["slow_ranks"] == [29]
        mine = _us(ours, nvl72, size)
        assert mine == pytest.approx(expected, abs=0.01)
        assert mine < nccl_model_best(nvl72, Kind.BROADCAST, [size])[0].time_us


def test_the_root_feeds_just_enough(nvl72):
    """Of the equally fast feeds the LP picks the one that leaves the root's link most free: at
    1 GiB the root sends the slow rank 8 of the 70 chunks beside its deal (8 at 90 GB/s outlast
    78 at 900), the carriers the other 62 while they share theirs."""
    ours = synthesize(nvl72, Kind.BROADCAST, "slow-feed", options={"size": GIB})
    assert ours.params["root_feeds"] == [[8, 0]] and ours.params["carrier_feeds"] == [[0, 62]]


def test_two_slow_ranks_at_different_rates(nvl72):
    """rank 50's link also degraded (to 1/4): both are fed (the slowest in every step), the
    schedule verifies, and the time is still bound by the slowest (rank 29's n/90 + 2 alpha)."""
    topo = gen.degrade(nvl72, nvl72.node_name(50), "nvlink-switch", 0.25, name="nvl72-two-slow")
    assert slow_ranks(topo, 0)[1] == [29, 50]
    ours = synthesize(topo, Kind.BROADCAST, "slow-feed", options={"size": GIB})
    assert _us(ours, topo, GIB) == pytest.approx(11932.46, abs=0.01)
    assert all((ours.dst[ours.step_slice(t)] == 29).any() for t in range(ours.num_steps))
    feeds = np.array(ours.params["root_feeds"]) + np.array(ours.params["carrier_feeds"])
    assert feeds.sum(axis=1).tolist() == [69, 69]  # one wave over the 69 carriers


def test_a_mildly_slow_rank_is_fed_too(nvl72):
    """The slow link at 650 of 900 GB/s (above half, below `SLOW_FRACTION`): still faster than
    scatter-allgather with the rank as a carrier (1 GiB: 1667.10 against 1721.47 us, 1721.45 with
    the closing chunk of 6081144)."""
    doc = nvl72.to_document()
    for link in doc["links"]:
        if link["bandwidth"] == 90.0:
            link["bandwidth"] = 650.0
    topo = topology_from_document(doc, source="<test>")
    ours = synthesize(topo, Kind.BROADCAST, "slow-feed", options={"size": GIB})
    theirs = synthesize(topo, Kind.BROADCAST, "scatter-allgather", options={"size": GIB})
    assert ours.params["slow_ranks"] == [29]
    assert _us(ours, topo, GIB) == pytest.approx(1667.10, abs=0.01)
    assert _us(ours, topo, GIB) < 0.98 * _us(theirs, topo, GIB)


def test_reduce_by_duality_and_another_root(nvl72):
    reduce = synthesize(nvl72, Kind.REDUCE, "slow-feed", options={"size": GIB})  # verified
    assert reduce.params["dual_of"] == "broadcast"
    assert _us(reduce, nvl72, GIB) == pytest.approx(11932.46, abs=0.01)
    other = synthesize(nvl72, Kind.BROADCAST, "slow-feed", root=40, options={"size": MIB16})
    assert other.params["slow_ranks"] == [29]


def test_not_applicable():
    with pytest.raises(NotApplicable, match="no rank"):
        synthesize(get_topology("dgx-a100"), Kind.BROADCAST, "slow-feed")
    with pytest.raises(NotApplicable, match="does not serve"):
        synthesize(gen.random_machine(2, "nvl72"), Kind.ALLGATHER, "slow-feed")
