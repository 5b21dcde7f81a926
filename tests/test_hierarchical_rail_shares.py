"""hierarchical's allgather where the rails cross the network at unequal rates (a degraded NIC,
GCDs sharing a package's NIC): every rail carries a share of the host's data in proportion to its
fair rate (`host_levels.rail_shares`, `hierarchical.LevelSetup.build_weighted`)."""

import numpy as np
import pytest

from synth import generators as gen
from synth.algorithms import hierarchical
from synth.algorithms.engines import host_levels
from synth.algorithms.engines.size_tuning import predicted_us
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.registry import synthesize
from synth.verify import verify

from .reference import numeric_replay

MIB = 1 << 20


def _slow_nic_boxes(factor: float = 0.1):
    """Three 4-GPU NVSwitch boxes, a 25 GB/s NIC per GPU; box 0's GPU 3 NIC at ``factor`` of it."""
    topo = gen.nvswitch(4, 300.0, boxes=3, nic_bandwidth=25.0)
    return gen.degrade(topo, "n0-gpu3", "n0-nic3", factor, name="nvswitch4x3-slow-nic")


def _slow_nic_mi250():
    """Two MI250 nodes of four packages (GCD 0 of each package carries), package 0's NIC at 1/4."""
    topo = gen.mi250(packages=4, nodes=2)
    return gen.degrade(topo, "n0-nic0", "network", 0.25, name="mi250x2-slow-nic")


def test_the_fair_rates_follow_the_narrow_links():
    """Rates per route: each rank's NIC carries its routes to the two other hosts."""
    topo = _slow_nic_boxes()
    setup = hierarchical.LevelSetup(topo)
    rates = host_levels.rail_shares(topo, setup.levels, setup.routes, (0, 1, 2, 3))
    assert rates is not None
    assert np.allclose(rates, [12.5, 12.5, 12.5, 1.25])
    # only some rails: the others get nothing
    assert np.allclose(host_levels.rail_shares(topo, setup.levels, setup.routes, (0, 3)), [12.5, 0.0, 0.0, 1.25])


def test_rails_through_one_link_split_it():
    """Two GPUs behind their host's one 12.5 GB/s NIC share it: 6.25 GB/s each to the other host."""
    topo = gen.multihost(hosts=2, gpus=2, nic="host", nic_bandwidth=12.5, name="mh-host-nic")
    setup = hierarchical.LevelSetup(topo)
    rates = host_levels.rail_shares(topo, setup.levels, setup.routes, (0, 1))
    assert rates is not None and np.allclose(rates, rates[0]) and rates[0] < 12.5
    links = [link.bandwidth for link in topo.links]
    assert any(abs(2 * rates[0] - bw) < 1e-9 for bw in links)  # the shared link is full


def test_chunks_per_rail_in_proportion():
    setup = hierarchical.LevelSetup(_slow_nic_boxes())
    chunks = setup.rail_chunks(8)
    assert chunks.sum() == 4 * 8
    assert list(chunks) == [11, 10, 10, 1]  # 25 : 25 : 25 : 2.5 of 32: 10.3, 10.3, 10.3, 1.03, largest remainders
    # equal rails: no weighted build (the plain one already balances them)
    plain = hierarchical.LevelSetup(gen.nvswitch(4, 300.0, boxes=3, nic_bandwidth=25.0))
    assert plain.rail_chunks(8) is None
    with pytest.raises(NotApplicable, match="equal rates"):
        plain.build_weighted(Collective(Kind.ALLGATHER, 12, 8), 2, MIB)


@pytest.mark.parametrize("machine", [_slow_nic_boxes, _slow_nic_mi250], ids=["boxes", "mi250"])
def test_every_wave_and_chunk_count_verifies_and_replays(machine):
    topo = machine()
    setup = hierarchical.LevelSetup(topo)
    r = topo.num_ranks
    for k in (1, 2, 4, 16):
        if setup.rail_chunks(k) is None:
            continue
        for waves in (1, 2, 8):
            for patient in (False, True):
                schedule = setup.build_weighted(Collective(Kind.ALLGATHER, r, k), waves, MIB, patient=patient)
                assert verify(schedule, topo).ok, (k, waves, patient)
                # every chunk crosses to each other host once: R - 1 receptions per chunk
                assert schedule.num_transfers == r * (r - 1) * k
                assert schedule.params["rails"] == "weighted"
                assert schedule.params.get("batches") == ("whole" if patient else None)
    for patient in (False, True):
        schedule = setup.build_weighted(Collective(Kind.ALLGATHER, r, 4), 2, MIB, patient=patient)
        assert numeric_replay(schedule)


def test_the_slow_rail_carries_its_share_only():
    topo = _slow_nic_boxes()
    setup = hierarchical.LevelSetup(topo)
    schedule = setup.build_weighted(Collective(Kind.ALLGATHER, 12, 8), 2, MIB)
    host = np.array([topo.nodes[v].host for v in range(topo.num_ranks)])
    across = host[schedule.src] != host[schedule.dst]
    slow = (schedule.src % 4 == 3) & across
    # each host's slow rail sends its 1 of 32 chunks to each of the 2 other hosts
    assert int(slow.sum()) == 3 * 1 * 2
    assert int(across.sum()) == 3 * 2 * 32


@pytest.mark.parametrize("kind", (Kind.ALLGATHER, Kind.REDUCE_SCATTER), ids=lambda k: k.value)
def test_tuned_hierarchical_takes_it_where_it_is_faster(kind):
    """With one NIC at 1/10 the plain allgather waits on it at every wave; the weighted one
    sends that rail 1/31 of the data, several times faster at 1 MiB and 16 MiB."""
    topo = _slow_nic_boxes()
    for size in (MIB, 16 * MIB):
        schedule = synthesize(topo, kind, "hierarchical", options={"size": size})
        assert schedule.params.get("rails") == "weighted"
        plain = hierarchical.LevelSetup(topo if kind is Kind.ALLGATHER else topo.reversed())
        equal = plain.build(Collective(Kind.ALLGATHER, 12, schedule.collective.chunks_per_piece), 2, size)
        machine = topo if kind is Kind.ALLGATHER else topo.reversed()
        assert predicted_us(schedule, topo, [size])[0] < 0.5 * predicted_us(equal, machine, [size])[0]
        assert numeric_replay(schedule)


def test_allreduce_uses_the_weighted_phases_and_verifies():
    topo = _slow_nic_boxes()
    schedule = synthesize(topo, Kind.ALLREDUCE, "hierarchical", options={"size": 16 * MIB}, verify=False)
    assert verify(schedule, topo).ok
    assert numeric_replay(schedule)


def _gaudi_boxes():
    """Four Gaudi 2-style boxes of 4: three 12.5 GB/s scale-out ports per accelerator, port i on
    leaf switch i, so every pair across boxes has three equally good paths."""
    return gen.gaudi(boxes=4, gpus=4, port_bandwidth=12.5, name="gaudi4x4")


def test_the_fastest_candidates_are_spread_over_the_ports():
    """One route per pair sends a rank's three rail peers' chunks out of one port; spread over the
    three, the across step takes a third: the tuned allgather keeps the spread schedule."""
    topo = _gaudi_boxes()
    size = MIB
    schedule = synthesize(topo, Kind.ALLGATHER, "hierarchical", options={"size": size})
    assert schedule.params.get("routes") == "spread"
    setup = hierarchical.LevelSetup(topo)
    plain = setup.build(Collective(Kind.ALLGATHER, 16, schedule.collective.chunks_per_piece), schedule.params["waves"], size)
    assert predicted_us(schedule, topo, [size])[0] < 0.8 * predicted_us(plain, topo, [size])[0]
    # every port of a rank carries some of its sends across
    ports = {via[0] for via, src in ((schedule.routes[r], s) for r, s in zip(schedule.route, schedule.src)) if via and src == 0}
    assert len(ports) == 3
    assert numeric_replay(schedule)


@pytest.mark.parametrize("kind", (Kind.REDUCE_SCATTER, Kind.ALLREDUCE), ids=lambda k: k.value)
def test_spread_duals_verify_and_replay(kind):
    topo = _gaudi_boxes()
    schedule = synthesize(topo, kind, "hierarchical", options={"size": MIB}, verify=False)
    assert verify(schedule, topo).ok
    assert numeric_replay(schedule)


def test_pipelined_allreduce_spreads_both_phases():
    """The pipelined allreduce takes the tuned allgather's spread routes for its reduce-scatter
    (the dual of the same allgather, spread on the reversed machine) too."""
    from synth.routing import router_for

    topo = _gaudi_boxes()
    schedule = hierarchical.pipelined_allreduce(topo, Collective(Kind.ALLREDUCE, 16, 64), router_for(topo), MIB)
    assert schedule.params["allgather"]["routes"] == "spread"
    assert verify(schedule, topo).ok
    sends = [schedule.routes[r][0] for r, s in zip(schedule.route, schedule.src) if s == 0 and schedule.routes[r]]
    assert len({via for via in sends if via.startswith("leaf")}) == 3
