import pytest

from synth import generators as gen


@pytest.mark.parametrize(
    ("make", "ranks", "directed_links"),
    [
        (lambda: gen.ring(6), 6, 12),
        (lambda: gen.torus(4, 4), 16, 64),
        (lambda: gen.torus(2, 3), 6, 18),  # a 2-ring gives one link pair, not two
        (lambda: gen.mesh(3, 4), 12, 34),
        (lambda: gen.hypercube(4), 16, 64),
        (lambda: gen.fully_connected(5), 5, 20),
        (lambda: gen.nvswitch(8, 300.0), 8, 16),
        (lambda: gen.nvswitch(8, 300.0, boxes=2, nic_bandwidth=25.0, rails=2), 16, 96),
        (lambda: gen.pcie_tree(), 8, 22),
        (lambda: gen.fattree(racks=2, servers=2, gpus=4, spines=2), 16, 16 * 3 * 2 + 2 * 2 * 2),
        (lambda: gen.dgx1(boxes=2, nic_bandwidth=12.5), 16, 2 * 2 * 16 + 2 * 2 * 8 + 2 * 2),
    ],
)
def test_family_sizes(make, ranks, directed_links):
    t = make()
    assert t.num_ranks == ranks
    assert len(t.links) == directed_links


def test_fattree_oversubscription_and_hosts():
    t = gen.fattree(racks=3, servers=2, gpus=4, nic_bandwidth=50.0, oversubscription=8.0, spines=4)
    up = [lk.bandwidth for lk in t.links if t.node_name(lk.src) == "tor0" and t.node_name(lk.dst).startswith("spine")]
    assert len(up) == 4 and sum(up) == 2 * 4 * 50.0 / 8.0
    assert len(set(t.hosts)) == 6


def test_fattree_pods_make_three_tiers():
    """Pods of racks joined by core switches: each pod's spines (aggregation) link to every core
    switch with what its racks send up, over the core oversubscription."""
    t = gen.fattree(pods=3, racks=2, servers=2, gpus=4, nic_bandwidth=50.0, oversubscription=4.0, spines=2, cores=4)
    assert t.num_ranks == 3 * 2 * 2 * 4 and t.name == "fattree3x2x2x4"
    names = {t.node_name(n) for n in range(t.num_ranks, t.num_nodes)}
    assert {"core0", "core3", "p0-spine0", "p2-spine1", "p1-tor1", "p2r1s1-nic3"} <= names
    down = [lk.bandwidth for lk in t.links if t.node_name(lk.dst) == "p0-spine0" and "tor" in t.node_name(lk.src)]
    up = [lk.bandwidth for lk in t.links if t.node_name(lk.src) == "p0-spine0" and t.node_name(lk.dst).startswith("core")]
    assert len(down) == 2 and len(up) == 4 and sum(up) == sum(down) == 2 * 2 * 4 * 50.0 / 4.0 / 2
    assert len(set(t.hosts)) == 12
    half = gen.fattree(pods=2, racks=2, servers=1, gpus=2, core_oversubscription=2.0, cores=1)
    to_core = [lk.bandwidth for lk in half.links if half.node_name(lk.dst) == "core0"]
    assert to_core == [2 * 1 * 2 * 50.0 / 4.0 / 2 / 2] * 4  # 2 pods x 2 spines, half of what enters each


def test_fattree_one_pod_is_the_two_tier_tree():
    assert gen.fattree(racks=2, servers=2, gpus=2).sha256 == gen.fattree(racks=2, servers=2, gpus=2, pods=1, cores=7).sha256


@pytest.mark.parametrize(
    "make",
    [
        lambda: gen.fattree(pods=0),
        lambda: gen.fattree(pods=2, cores=0),
        lambda: gen.ring(1),
        lambda: gen.torus(0, 3),
        lambda: gen.hypercube(0),
        lambda: gen.nvswitch(4, -1.0),
        lambda: gen.nvswitch(4, 10.0, boxes=2),
        lambda: gen.fattree(oversubscription=0),
    ],
)
def test_bad_parameters(make):
    with pytest.raises(ValueError):
        make()


def test_three_tier_fattree_takes_schedules():
    from synth.algorithms import synthesize

    t = gen.fattree(pods=2, racks=2, servers=2, gpus=2)
    for method, kind in (("greedy", "allgather"), ("ring", "allreduce"), ("hierarchical", "allreduce")):
        assert synthesize(t, kind, method).num_transfers > 0  # verified by the registry
