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


@pytest.mark.parametrize(
    "make",
    [
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
