"""host-deal: broadcast dealt straight over the other hosts' ranks, swapped across hosts, shared
inside (synth/algorithms/host_deal.py)."""

import numpy as np
import pytest

from synth import generators as gen
from synth.algorithms.host_deal import Shape, broadcast_steps, build, hosts_of, owners
from synth.builtin import get_topology
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.nccl_model import nccl_model_best
from synth.registry import synthesize
from synth.routing import router_for
from synth.simulate import simulate
from synth.verify import check

SMALL = 64 << 10


def _us(schedule, topology, size):
    return simulate(schedule, topology, [size], model="sync")[0].time_us


@pytest.fixture(scope="module")
def multihost():
    """random-multihost-1: 4 hosts x 8 GPUs, each host's NIC behind one 12 GB/s PCIe link."""
    return gen.random_machine(1, "multihost")


def test_the_deal_gives_every_host_and_rank_an_equal_share():
    remote = [[4, 5], [6, 7], [8, 9]]
    own = owners(remote, 12)
    assert sorted(np.bincount(own, minlength=10)[4:]) == [2] * 6
    assert list(own[:6]) == [4, 6, 8, 5, 7, 9]


def test_three_steps_the_network_crossed_twice(multihost):
    """Step 1 is the root's deal only (its host link carries each chunk once); no step after
    the second crosses the network (the third shares inside hosts)."""
    home, remote = hosts_of(multihost, 0)
    steps = broadcast_steps(0, home, remote, 24, Shape(1, True, 6))
    assert len(steps) == 3
    src, _, chunk = steps[0]
    assert set(src.tolist()) == {0} and sorted(chunk.tolist()) == list(range(24))
    host = {r: h for h, ranks in enumerate([[0, *home], *remote]) for r in ranks}
    assert all(host[int(s)] == host[int(d)] for s, d in zip(steps[2][0], steps[2][1], strict=True))


@pytest.mark.parametrize("root", [0, 13])
def test_every_shape_verifies(multihost, root):
    router = router_for(multihost)
    shapes = [Shape(1, early, extra, True) for early in (True, False) for extra in (0, 6)]
    shapes += [Shape(waves, early, 0, from_root) for waves in (1, 3) for early in (True, False) for from_root in (True, False)]
    for chunks in (24, 72):
        for shape in shapes:
            check(build(multihost, Collective(Kind.BROADCAST, 32, chunks, root), router, shape), multihost)


def test_waves_pipeline_the_three_steps(multihost):
    """Wave w runs its three steps in steps w, w + 1, w + 2 (w + 2 steps in all); at 1 MiB on
    random-multihost-1 six waves, the root host fed by the owners over its idle network ingress,
    take 145.49 us where pipelined-tree takes 156.51 with ramped slices (163.89 with equal ones:
    every step of its pipeline crosses the network's 4.3 us with a whole chunk on the root host's
    link)."""
    size = 1 << 20
    ours = synthesize(multihost, Kind.BROADCAST, "host-deal", options={"size": size})
    assert ours.params["waves"] > 1 and ours.num_steps == ours.params["waves"] + 2
    assert ours.params["home_from"] == "owners"
    tree = synthesize(multihost, Kind.BROADCAST, "pipelined-tree", options={"size": size})
    assert _us(ours, multihost, size) < 0.95 * _us(tree, multihost, size)
    reduce = synthesize(multihost, Kind.REDUCE, "host-deal", options={"size": size})  # verified
    assert reduce.params["waves"] > 1


def test_two_hosts_have_no_swap_and_verify():
    """dgx-a100x2: one other host, so step 2 has no swap across hosts; broadcast and reduce
    (the reversed machine's broadcast run backwards) verify from a root on either host."""
    topo = get_topology("dgx-a100x2")
    for root in (0, 11):
        synthesize(topo, Kind.BROADCAST, "host-deal", root=root, options={"size": SMALL})
        synthesize(topo, Kind.REDUCE, "host-deal", root=root, options={"size": SMALL})


def test_beats_the_other_multi_host_broadcasts_at_64kib(multihost):
    """random-multihost-1 at 64 KiB: hierarchical sends every byte over the root host's 12 GB/s
    link once per other host (26.55 us, what auto chose; pipelined-tree, which pays the network's
    4.3 us in every step of its pipeline, took 1.02 x that); dealt straight over the remote ranks the root host's link
    carries each byte once: 9.76 + 7.94 + 5.25 = 22.95 us. (NCCL's analytic ring, 20.22 us,
    streams; no three-step shape here reaches it, s6-findings.)"""
    ours = synthesize(multihost, Kind.BROADCAST, "host-deal", options={"size": SMALL})
    assert ours.num_steps == 3 and ours.params["chosen_at_size"] == SMALL
    mine = _us(ours, multihost, SMALL)
    assert mine == pytest.approx(22.95, abs=0.01)
    theirs = synthesize(multihost, Kind.BROADCAST, "hierarchical", options={"size": SMALL})
    assert mine < 0.9 * _us(theirs, multihost, SMALL)
    assert mine > nccl_model_best(multihost, Kind.BROADCAST, [SMALL])[0].time_us
    reduce = synthesize(multihost, Kind.REDUCE, "host-deal", options={"size": SMALL})
    assert reduce.params["dual_of"] == "broadcast"


def test_not_applicable():
    with pytest.raises(NotApplicable, match="at least two hosts"):
        synthesize(get_topology("pcie-2socket"), Kind.BROADCAST, "host-deal")
    with pytest.raises(NotApplicable, match="does not serve"):
        synthesize(get_topology("dgx-a100x2"), Kind.ALLGATHER, "host-deal")
