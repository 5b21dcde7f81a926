"""socket-pipeline: broadcast over a host's slow socket link in shrinking groups (synth/algorithms/socket_pipeline.py)."""

import numpy as np
import pytest

from synth import generators as gen
from synth.algorithms.socket_pipeline import shrinking_groups, sides
from synth.bounds import bound_model
from synth.builtin import get_topology
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.registry import synthesize
from synth.routing import router_for
from synth.simulate import simulate


def _us(schedule, topology, size):
    return simulate(schedule, topology, [size], model="sync")[0].time_us


@pytest.fixture(scope="module")
def pcie():
    return get_topology("pcie-2socket")


def test_the_sides_are_the_sockets(pcie):
    assert sides(pcie, 0, router_for(pcie)) == ([1, 2, 3], [4, 5, 6, 7])
    assert sides(pcie, 6, router_for(pcie)) == ([4, 5, 7], [0, 1, 2, 3])


@pytest.mark.parametrize("chunks,groups,ratio", [(192, 5, 1.8), (48, 1, 1.0), (12, 12, 1.0), (7, 3, 2.4)])
def test_groups_cover_every_chunk_once_and_shrink(chunks, groups, ratio):
    parts = shrinking_groups(chunks, groups, ratio)
    assert np.array_equal(np.concatenate(parts), np.arange(chunks))
    sizes = [p.size for p in parts]
    assert min(sizes) >= 1 and len(sizes) == groups
    if ratio > 1 and chunks >= 48:
        assert sizes == sorted(sizes, reverse=True)


def test_beats_the_chain_and_the_baselines_on_pcie_at_1mib(pcie):
    size = 1 << 20
    ours = synthesize(pcie, Kind.BROADCAST, "socket-pipeline", options={"size": size})  # verified
    assert ours.params["chosen_at_size"] == size and len(ours.params["groups"]) > 1
    t = _us(ours, pcie, size)
    assert t >= bound_model(pcie, Kind.BROADCAST, 0).time_us(size)
    others = [
        synthesize(pcie, Kind.BROADCAST, "multiring", chunks=8),  # the chain near its best chunk count
        synthesize(pcie, Kind.BROADCAST, "scatter-allgather", options={"size": size}),
        synthesize(pcie, Kind.BROADCAST, "binomial"),
    ]
    assert all(t < _us(o, pcie, size) for o in others)
    assert t < 120.0  # docs/bounds.md, 'Streaming versus steps': 118.4 us


@pytest.mark.parametrize("root", range(8))
def test_every_root_verifies(pcie, root):
    s = synthesize(pcie, Kind.BROADCAST, "socket-pipeline", root=root, options={"size": 64 << 10})
    assert s.collective.root == root


def test_requested_chunks_are_kept():
    topology = gen.pcie_tree(gpus_per_switch=2, name="pcie-2x2")
    s = synthesize(topology, Kind.BROADCAST, "socket-pipeline", chunks=6, options={"size": 1 << 20})
    assert s.collective.chunks_per_piece == 6


def test_not_for_several_hosts_nor_other_collectives():
    with pytest.raises(NotApplicable, match="one host"):
        synthesize(get_topology("dgx-a100x2"), Kind.BROADCAST, "socket-pipeline")
    with pytest.raises(NotApplicable, match="does not serve"):
        synthesize(get_topology("pcie-2socket"), Kind.ALLREDUCE, "socket-pipeline")


def test_no_slower_cut_no_method():
    with pytest.raises(NotApplicable, match="slower cut"):
        synthesize(get_topology("dgx-a100"), Kind.BROADCAST, "socket-pipeline")


def test_both_shapes_verify(pcie):
    from synth.algorithms.socket_pipeline import build, entry_rank
    from synth.collective import Collective

    router = router_for(pcie)
    near, far = sides(pcie, 0, router)
    entry = entry_rank(far, 0, router)
    for through in (True, False):
        s = build(pcie, Collective(Kind.BROADCAST, 8, 48, 0), router, (4, 2.0, through), near, far, entry)
        assert (s.params["entry"] is None) == (not through)
        assert s.num_steps == 4 + (2 if through else 1)
        from synth.verify import check

        check(s, pcie)


def test_at_1mib_on_pcie_not_slower_than_nccls_analytic_model(pcie):
    from synth.nccl_model import nccl_model_best

    size = 1 << 20
    ours = synthesize(pcie, Kind.BROADCAST, "socket-pipeline", options={"size": size})
    assert _us(ours, pcie, size) <= nccl_model_best(pcie, Kind.BROADCAST, [size])[0].time_us


def test_switch_by_switch_spreading_on_asymmetric_pcie():
    """random-pcie-asym-1: the far socket's GPUs sit behind three PCIe switches (4 at 24 GB/s, 2
    and 1 behind 12 GB/s uplinks). Spreading each group switch by switch (a share to every other
    switch, then inside each) keeps every uplink at one copy of each byte, where the flat swap sends
    a copy per rank: 1 MiB 183.6 -> 145.8 us, below packing's 154.7. Every shape verifies, for
    roots elsewhere too."""
    from synth.algorithms.socket_pipeline import build, entry_rank, grouped, switch_groups
    from synth.collective import Collective
    from synth.verify import check

    topo = gen.random_machine(1, "pcie-asym")
    router = router_for(topo)
    near, far = sides(topo, 0, router)
    far_groups = switch_groups(far, 0, router)
    assert sorted(map(len, far_groups)) == [1, 2, 4] and grouped(far_groups)
    entry = entry_rank(far, 0, router)
    for through in (True, False):
        for spread in ((None, far_groups), (switch_groups(near, 0, router), far_groups)):
            s = build(
                topo, Collective(Kind.BROADCAST, topo.num_ranks, 48, 0), router, (3, 1.8, through, *spread), near, far, entry
            )
            check(s, topo)
    size = 1 << 20
    ours = synthesize(topo, Kind.BROADCAST, "socket-pipeline", options={"size": size})
    assert ours.params["spread"]["far"] == "switches"
    packed = synthesize(topo, Kind.BROADCAST, "packing", options={"size": size})
    assert _us(ours, topo, size) < _us(packed, topo, size)
    for root in (2, 9):  # behind a 12 GB/s uplink on either socket (verified by synthesize)
        synthesize(topo, Kind.BROADCAST, "socket-pipeline", root=root, options={"size": size})


def test_near_side_fed_back_from_the_far_one_on_asymmetric_pcie():
    """random-pcie-asym-2: the root's own PCIe link (12 GB/s) is barely wider than the socket link
    (10 GB/s), so it cannot send a group across and over its own socket too. Sending each group
    across only (dealt by the far switches' uplinks: 24 against 12 GB/s) and dealing it back from
    the far side over the socket link's other direction keeps every step at the crossing's pace:
    1 MiB 154.2 us against packing's 163.3. Every such shape verifies."""
    from synth.algorithms.socket_pipeline import build, entry_rank, switch_groups
    from synth.collective import Collective
    from synth.verify import check

    topo = gen.random_machine(2, "pcie-asym")
    router = router_for(topo)
    near, far = sides(topo, 0, router)
    far_groups = switch_groups(far, 0, router)
    entry = entry_rank(far, 0, router)
    for spread in ((None, None, True), (None, far_groups, True, True), (None, far_groups, False, True)):
        check(
            build(topo, Collective(Kind.BROADCAST, topo.num_ranks, 48, 0), router, (3, 1.8, False, *spread), near, far, entry),
            topo,
        )
    size = 1 << 20
    ours = synthesize(topo, Kind.BROADCAST, "socket-pipeline", options={"size": size})
    assert ours.params["near_from"].startswith("far") and ours.params["far_deal"] == "by uplink"
    packed = synthesize(topo, Kind.BROADCAST, "packing", options={"size": size})
    assert _us(ours, topo, size) < _us(packed, topo, size)


def test_last_group_from_the_root_beats_nccls_analytic_pick_on_asymmetric_pcie():
    """random-pcie-asym-2 at 64 KiB: fed back from the far side, the near side's last group came
    over the slow link's other direction in the step after the last crossing, which then paid the
    crossing's 3 µs again (21.88 us in all). The root's own link is idle by then and one switch hop
    (1 µs) from the near side, so it deals that group itself: 20.10 us, below NCCL's analytic
    pick (ring/Simple, 20.65 us), which the fed-back shape alone (21.88) was not. Every such shape
    verifies, and so does the reduce run backwards from a root on the far socket."""
    from synth.algorithms.socket_pipeline import build, entry_rank, switch_groups
    from synth.collective import Collective
    from synth.nccl_model import nccl_model_best
    from synth.verify import check

    topo = gen.random_machine(2, "pcie-asym")
    router = router_for(topo)
    near, far = sides(topo, 0, router)
    far_groups = switch_groups(far, 0, router)
    entry = entry_rank(far, 0, router)
    for m in (1, 2, 3):
        for spread in ((None, None, True, False, True), (None, far_groups, True, True, True)):
            shape = (m, 1.8, False, *spread)
            check(build(topo, Collective(Kind.BROADCAST, topo.num_ranks, 48, 0), router, shape, near, far, entry), topo)
    size = 64 << 10
    ours = synthesize(topo, Kind.BROADCAST, "socket-pipeline", options={"size": size})
    assert ours.params["near_from"] == "far, the last group from the root"
    fed_back = build(
        topo,
        Collective(Kind.BROADCAST, topo.num_ranks, 48, 0),
        router,
        (2, 1.0, False, None, far_groups, True, True),
        near,
        far,
        entry,
    )
    assert _us(ours, topo, size) < _us(fed_back, topo, size) - 1.5
    assert _us(ours, topo, size) < nccl_model_best(topo, Kind.BROADCAST, [size])[0].time_us
    synthesize(topo, Kind.REDUCE, "socket-pipeline", root=5, options={"size": size})  # verified


@pytest.mark.parametrize("size", [64 << 10, 1 << 20])
def test_reduce_is_the_reversed_broadcast(pcie, size):
    """A reduce is the broadcast of the reversed machine run backwards with reduces: on
    pcie-2socket (links the same both ways) it takes the broadcast's time, from every root, and
    beats the binomial tree that was the methods' best reduce at 64 KiB (17.01 µs)."""
    for root in (0, 5):
        red = synthesize(pcie, Kind.REDUCE, "socket-pipeline", root=root, options={"size": size})
        bcast = synthesize(pcie, Kind.BROADCAST, "socket-pipeline", root=root, options={"size": size})
        assert red.collective.kind is Kind.REDUCE and red.params["dual_of"] == "broadcast"
        assert red.params["chosen_at_size"] == size
        assert _us(red, pcie, size) == pytest.approx(_us(bcast, pcie, size))
    if size == 64 << 10:
        binomial = synthesize(pcie, Kind.REDUCE, "binomial")
        assert _us(red, pcie, size) < 0.8 * _us(binomial, pcie, size)
