"""The families for machines nobody tuned for (issue 17), `degrade` and the random family."""

import json
from collections import Counter

import pytest
from click.testing import CliRunner

from synth import generators as gen
from synth.cli import main
from synth.topology import topology_to_json


def _pair_bandwidth(t, a: str, b: str) -> float:
    return t.links[t.link_index[(t.node_index[a], t.node_index[b])]].bandwidth


def _rank_neighbours(t, rank: int) -> Counter:
    """Bandwidth to each other rank over direct rank-to-rank links."""
    return Counter({t.node_name(t.links[i].dst): t.links[i].bandwidth for i in t.out_links[rank] if t.links[i].dst < t.num_ranks})


def _is_duplex(t) -> bool:
    return all((lk.dst, lk.src) in t.link_index for lk in t.links)


# ------------------------------------------------------------------------------------------ mi250
def test_mi250_link_counts_between_gcd_pairs():
    t = gen.mi250(packages=8)
    assert t.num_ranks == 16 and not t.switches and len(t.links) == 2 * (8 + 8 + 8)
    for r in range(t.num_ranks):
        counts = sorted(bw / 50.0 for bw in _rank_neighbours(t, r).values())
        assert counts == [1, 2, 4], t.node_name(r)  # one partner of each kind
        assert t.rank_egress(r) == t.rank_ingress(r) == 7 * 50.0  # 7 of the 8 xGMI links per GCD
    assert _pair_bandwidth(t, "gpu0gcd0", "gpu0gcd1") == 200.0
    assert _pair_bandwidth(t, "gpu0gcd0", "gpu1gcd1") == 100.0
    assert _pair_bandwidth(t, "gpu0gcd0", "gpu4gcd0") == 50.0


def test_mi250_two_packages_and_nodes():
    t = gen.mi250(packages=2)
    assert t.num_ranks == 4 and all(t.rank_egress(r) == 350.0 for r in range(4))
    multi = gen.mi250(packages=4, nodes=3, nic_bandwidth=25.0)
    assert multi.num_ranks == 24 and len(set(multi.hosts)) == 3
    nics = [s.name for s in multi.switches if "nic" in s.name]
    assert len(nics) == 12
    assert _pair_bandwidth(multi, "n1-nic2", "network") == 25.0
    assert _pair_bandwidth(multi, "n1-gpu2gcd0", "n1-nic2") == 25.0


# ------------------------------------------------------------------------------------------ mi300x
def test_mi300x_fully_connected_and_nics():
    t = gen.mi300x()
    assert t.num_ranks == 8 and len(t.links) == 56
    assert all(t.rank_egress(r) == 7 * 64.0 for r in range(8))
    multi = gen.mi300x(nodes=2, rails=8)
    assert multi.num_ranks == 16 and len(multi.switches) == 8 + 16
    assert all(multi.rank_egress(r) == 7 * 64.0 + 50.0 for r in range(16))
    assert _pair_bandwidth(multi, "n1-nic5", "rail5") == 50.0


# ------------------------------------------------------------------------------------------ gaudi
def test_gaudi_all_to_all_ports_and_scale_out():
    t = gen.gaudi()
    assert t.num_ranks == 8 and not t.switches
    assert all(t.rank_egress(r) == 21 * 25.0 for r in range(8))  # 525 GB/s scale-up, Intel's figure
    two = gen.gaudi(boxes=2, port_bandwidth=12.5)
    assert [s.name for s in two.switches] == ["leaf0", "leaf1", "leaf2"]
    assert all(two.rank_egress(r) == 21 * 12.5 + 3 * 12.5 for r in range(16))
    assert "Gaudi 2" in two.description
    with pytest.raises(ValueError):
        gen.gaudi(boxes=2, scaleout_ports=0)


# ------------------------------------------------------------------------------------------ multihost
@pytest.mark.parametrize("fabric", ["nvswitch", "pcie"])
def test_multihost_nic_per_gpu_or_host(fabric):
    per_gpu = gen.multihost(hosts=3, gpus=4, fabric=fabric, nic="gpu", nic_bandwidth=25.0)
    per_host = gen.multihost(hosts=3, gpus=4, fabric=fabric, nic="host", nic_bandwidth=25.0)
    assert per_gpu.num_ranks == per_host.num_ranks == 12
    network = per_gpu.node_index["network"]
    assert sum(per_gpu.links[i].bandwidth for i in per_gpu.in_links[network]) == 12 * 25.0
    network = per_host.node_index["network"]
    assert sum(per_host.links[i].bandwidth for i in per_host.in_links[network]) == 3 * 25.0
    inside = per_gpu.links[per_gpu.out_links[0][0]].bandwidth
    assert inside == (300.0 if fabric == "nvswitch" else 24.0)


# ------------------------------------------------------------------------------------------ rail-only
def test_rail_only_has_rails_and_no_spine():
    t = gen.rail_only(hosts=3, gpus=4)
    rails = [s.name for s in t.switches if s.name.startswith("rail")]
    assert rails == ["rail0", "rail1", "rail2", "rail3"]
    for rail in rails:
        idx = t.node_index[rail]
        neighbours = {t.node_name(t.links[i].dst) for i in t.out_links[idx]}
        assert all("nic" in n for n in neighbours) and len(neighbours) == 3  # NICs only: no spine
    assert t.num_ranks == 12 and all(t.rank_egress(r) == 450.0 + 50.0 for r in range(12))


# ------------------------------------------------------------------------------------------ fattree3
@pytest.mark.parametrize(("leaf", "spine"), [(1.0, 1.0), (4.0, 2.0), (8.0, 4.0)])
def test_fattree3_oversubscription_at_both_tiers(leaf, spine):
    t = gen.fattree3(
        pods=2,
        racks=3,
        servers=2,
        gpus=4,
        nic_bandwidth=50.0,
        leaf_oversubscription=leaf,
        spine_oversubscription=spine,
        spines=2,
        cores=4,
    )
    assert t.num_ranks == 2 * 3 * 2 * 4
    leaf_up = [lk.bandwidth for lk in t.links if t.node_name(lk.src) == "p0-leaf1" and "spine" in t.node_name(lk.dst)]
    assert len(leaf_up) == 2 and sum(leaf_up) == pytest.approx(2 * 4 * 50.0 / leaf)
    spine_up = [lk.bandwidth for lk in t.links if t.node_name(lk.src) == "p1-spine0" and "core" in t.node_name(lk.dst)]
    assert len(spine_up) == 4 and sum(spine_up) == pytest.approx(3 * sum(leaf_up) / 2 / spine)
    assert len(set(t.hosts)) == 12 and _is_duplex(t)


# ------------------------------------------------------------------------------------------ torus3d
@pytest.mark.parametrize(
    ("dims", "links"), [((4, 4, 4), 6 * 64), ((2, 3, 4), 2 * (12 + 24 + 24)), ((1, 1, 5), 10), ((2, 2, 2), 24)]
)
def test_torus3d_sizes(dims, links):
    t = gen.torus3d(*dims)
    assert t.num_ranks == dims[0] * dims[1] * dims[2]
    assert len(t.links) == links


def test_torus3d_every_rank_has_six_neighbours():
    t = gen.torus3d(3, 4, 5, bandwidth=50.0)
    assert all(len(t.out_links[r]) == 6 and t.rank_egress(r) == 300.0 for r in range(t.num_ranks))


# ------------------------------------------------------------------------------------------ dragonfly
def test_dragonfly_groups_routers_and_global_links():
    t = gen.dragonfly(groups=5, routers=3, ranks_per_router=2, global_links=2, global_bandwidth=25.0)
    assert t.num_ranks == 30 and len(t.switches) == 15
    routers = [s.name for s in t.switches]
    global_pairs = Counter()
    for lk in t.links:
        a, b = t.node_name(lk.src), t.node_name(lk.dst)
        if a in routers and b in routers:
            ga, gb = a.split("-")[0], b.split("-")[0]
            if ga == gb:
                assert lk.bandwidth == 25.0  # local
            else:
                assert lk.bandwidth == 50.0  # two global links
                global_pairs[tuple(sorted((ga, gb)))] += 1
    assert len(global_pairs) == 10 and set(global_pairs.values()) == {2}  # one duplex link per pair of groups
    for g in range(5):  # all-to-all inside a group
        for a in range(3):
            for b in range(3):
                if a != b:
                    assert (t.node_index[f"g{g}-router{a}"], t.node_index[f"g{g}-router{b}"]) in t.link_index


# ------------------------------------------------------------------------------------------ nvl72
def test_nvl72_one_domain():
    t = gen.nvl72()
    assert t.num_ranks == 72 and len(t.switches) == 1 and set(t.hosts) == {"rack0"}
    assert all(t.rank_egress(r) == 900.0 for r in range(72))
    assert t.node_name(5) == "tray1-gpu1"
    two = gen.nvl72(gpus=36, racks=2, rails=4)
    assert two.num_ranks == 72 and len(set(two.hosts)) == 2
    assert sum(two.links[i].bandwidth for i in two.in_links[two.node_index["rail3"]]) == 2 * 9 * 100.0


# ------------------------------------------------------------------------------------------ pcie-asym
def test_pcie_asymmetric_layout():
    t = gen.pcie_asymmetric(((0, 3, 24.0), (0, 1, 12.0), (1, 4, 24.0)))
    assert t.num_ranks == 8
    assert [t.rank_egress(r) for r in range(8)] == [24.0, 24.0, 24.0, 12.0, 24.0, 24.0, 24.0, 24.0]
    assert _pair_bandwidth(t, "pcisw1", "cpu0") == 12.0 and _pair_bandwidth(t, "cpu0", "cpu1") == 10.0
    with pytest.raises(ValueError, match="without gaps"):
        gen.pcie_asymmetric(((0, 2, 24.0), (2, 2, 24.0)))


# ------------------------------------------------------------------------------------------ all families
FAMILY_MAKERS = [
    lambda: gen.mi250(packages=4, nodes=2),
    lambda: gen.mi300x(nodes=2),
    lambda: gen.gaudi(boxes=2),
    lambda: gen.multihost(nic="host"),
    lambda: gen.rail_only(),
    lambda: gen.fattree3(),
    lambda: gen.torus3d(3, 3, 3),
    lambda: gen.dragonfly(),
    lambda: gen.nvl72(racks=2, gpus=8),
    lambda: gen.pcie_asymmetric(),
]


@pytest.mark.parametrize("make", FAMILY_MAKERS)
def test_families_are_connected_duplex_and_deterministic(make):
    t = make()  # topology_from_document refuses a machine whose ranks cannot all reach each other
    assert _is_duplex(t)
    assert topology_to_json(make()) == topology_to_json(t)


@pytest.mark.parametrize(
    "make",
    [
        lambda: gen.mi250(packages=3),
        lambda: gen.mi250(packages=4, link_bandwidth=float("nan")),
        lambda: gen.mi300x(gpus=1),
        lambda: gen.multihost(fabric="nvlink"),
        lambda: gen.multihost(hosts=1),
        lambda: gen.fattree3(leaf_oversubscription=0),
        lambda: gen.torus3d(1, 1, 1),
        lambda: gen.torus3d(100, 100, 100),
        lambda: gen.dragonfly(groups=1),
        lambda: gen.nvl72(nvlink_bandwidth=float("inf")),
        lambda: gen.pcie_asymmetric(()),
        lambda: gen.dragonfly(nic_latency=-1.0),
    ],
)
def test_bad_family_parameters(make):
    with pytest.raises(ValueError):
        make()


# ------------------------------------------------------------------------------------------ degrade
def test_degrade_changes_exactly_one_link_pair():
    t = gen.torus3d(4, 4, 4)
    d = gen.degrade(t, "r0-0-0", "r1-0-0", 0.25)
    assert d.num_ranks == t.num_ranks and len(d.links) == len(t.links)
    changed = [(a, b) for a, b in zip(t.links, d.links) if a != b]
    assert len(changed) == 2  # both directions, nothing else
    for old, new in changed:
        assert (old.src, old.dst) == (new.src, new.dst)
        assert {t.node_name(old.src), t.node_name(old.dst)} == {"r0-0-0", "r1-0-0"}
        assert new.bandwidth == old.bandwidth / 4 and new.latency == old.latency
    assert "1/4" in d.description and d.name == "torus4x4x4-degraded"


def test_degrade_a_nic_to_a_tenth():
    t = gen.mi300x(nodes=2)
    d = gen.degrade(t, "n1-nic3", "rail0", 0.1)
    assert _pair_bandwidth(d, "n1-nic3", "rail0") == 5.0 and _pair_bandwidth(d, "rail0", "n1-nic3") == 5.0
    assert sum(lk.bandwidth for lk in d.links) == pytest.approx(sum(lk.bandwidth for lk in t.links) - 2 * 45.0)


@pytest.mark.parametrize(
    ("a", "b", "factor"), [("r0", "nope", 0.5), ("r0-0-0", "r2-2-2", 0.5), ("r0-0-0", "r1-0-0", 0), ("r0-0-0", "r1-0-0", 1.5)]
)
def test_degrade_refuses(a, b, factor):
    with pytest.raises(ValueError):
        gen.degrade(gen.torus3d(4, 4, 4), a, b, factor)


# ------------------------------------------------------------------------------------------ random
def test_random_machine_is_deterministic():
    for seed in range(12):
        first = topology_to_json(gen.random_machine(seed))
        assert topology_to_json(gen.random_machine(seed)) == first
        assert topology_to_json(gen.random_machine(seed, gen.random_family(seed))) == first
        for family in ("torus3d", "fattree3"):
            assert topology_to_json(gen.random_machine(seed, family)) == topology_to_json(gen.random_machine(seed, family))


def test_random_machines_span_families_sizes_and_degradation():
    machines = [gen.random_machine(seed, family) for family in gen.RANDOM_FAMILIES for seed in range(6)]
    ranks = [t.num_ranks for t in machines]
    assert min(ranks) >= 4 and max(ranks) <= gen.LARGE_RANKS
    assert sum(r <= gen.USUAL_RANKS for r in ranks) >= 0.75 * len(ranks)
    degraded = [t for t in machines if "Degraded" in t.description]
    assert 0.1 * len(machines) <= len(degraded) <= 0.5 * len(machines)
    assert len({topology_to_json(t) for t in machines}) == len(machines)
    assert {t.name.split("-", 1)[1].rsplit("-", 1)[0] for t in machines} == set(gen.RANDOM_FAMILIES)


def test_random_machine_refuses():
    with pytest.raises(ValueError):
        gen.random_machine(-1)
    with pytest.raises(ValueError):
        gen.random_machine(1, "hypercube")


# ------------------------------------------------------------------------------------------ CLI
def test_cli_random_is_byte_identical(tmp_path):
    runner = CliRunner()
    first = runner.invoke(main, ["topo", "gen", "random", "--seed", "7", "--family", "dragonfly"])
    second = runner.invoke(main, ["topo", "gen", "random", "--seed", "7", "--family", "dragonfly"])
    assert first.exit_code == 0 and first.output == second.output
    assert first.output == topology_to_json(gen.random_machine(7, "dragonfly"))


@pytest.mark.parametrize(
    "args",
    [
        ["mi250", "--packages", "4", "--nodes", "2"],
        ["mi300x", "--nodes", "2", "--rails", "8"],
        ["gaudi", "--boxes", "2", "--port-bandwidth", "12.5"],
        ["multihost", "--nic", "host", "--fabric", "pcie"],
        ["rail-only", "--hosts", "2"],
        ["fattree3", "--leaf-oversubscription", "4"],
        ["torus3d", "--x", "2", "--y", "3", "--z", "4", "--degrade", "r0-0-0:r1-0-0:1/4"],
        ["dragonfly", "--groups", "3"],
        ["nvl72", "--gpus", "36"],
        ["pcie-asym", "--layout", "0:4x24,1:1x12"],
    ],
)
def test_cli_families(args):
    result = CliRunner().invoke(main, ["topo", "gen", *args])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["format"] == "synth-topology" and doc["ranks"]
    if "--degrade" in args:
        assert "Degraded" in doc["description"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["torus3d", "--x", "0"], "parameters"),
        (["torus3d", "--degrade", "r0-0-0:r1-0-0"], "--degrade"),
        (["torus3d", "--degrade", "r0-0-0:r9-9-9:0.5"], "--degrade"),
        (["torus3d", "--degrade", "r0-0-0:r1-0-0:1/0"], "--degrade"),
        (["pcie-asym", "--layout", "0:4"], "--layout"),
        (["mi250", "--link-bandwidth", "nan"], "parameters"),
        (["random", "--seed", "-3"], "--seed"),
    ],
)
def test_cli_family_bad_input_is_one_line(args, field):
    result = CliRunner().invoke(main, ["topo", "gen", *args])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in result.output
