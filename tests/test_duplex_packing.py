"""duplex-packing: allreduce over one set of trees run both ways at once (synth/algorithms/duplex_packing.py)."""

import numpy as np
import pytest

from synth import generators as gen
from synth.algorithms.duplex_packing import duplex_packing, greedy_packing, lp_packing, mirror_links
from synth.algorithms.engines.path_channels import channels_for
from synth.bounds import bound_model
from synth.builtin import get_topology
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.registry import synthesize
from synth.simulate import simulate
from synth.topology import Link, Topology


def _us(schedule, topology, size):
    return simulate(schedule, topology, [size], model="sync")[0].time_us


@pytest.fixture(scope="module")
def asym():
    """random-pcie-asym-1: sockets of 3 and 7 GPUs at 10 GB/s, two 12 GB/s GPUs behind one 12 GB/s uplink."""
    return gen.random_machine(1, "pcie-asym")


def _pair_loads(topology, packing):
    """Trees on every link pair (a link and its mirror together), per tree of the packing."""
    channels = channels_for(topology)
    mirror = mirror_links(topology)
    load = np.zeros(len(topology.links))
    for cls in packing.classes:
        for c in cls.parent[cls.parent >= 0].tolist():
            links = channels.links(c)
            load[links] += cls.multiplicity
            load[mirror[links]] += cls.multiplicity
    return load


@pytest.mark.parametrize("packer", [lp_packing, greedy_packing])
def test_trees_span_and_keep_one_budget_per_link_pair(asym, packer):
    packing = packer(asym)
    r = asym.num_ranks
    for root in range(r):
        assert sum(c.multiplicity for c in packing.classes if c.root == root) == packing.trees_per_root
    for cls in packing.classes:
        assert (cls.parent >= 0).sum() == r - 1 and cls.depth[cls.root] == 0
    bw = asym.bandwidth_array
    pair_bw = np.minimum(bw, bw[mirror_links(asym)])
    assert np.all(_pair_loads(asym, packing) * packing.unit_gbps <= pair_bw + 1e-9)


def test_beats_packing_on_the_asymmetric_pcie_machine(asym):
    size = 1 << 30
    ours = synthesize(asym, Kind.ALLREDUCE, "duplex-packing", options={"size": size})  # verified
    assert ours.params["trees"]["chosen_at_size"] == size and ours.params["overlapped"]
    t = _us(ours, asym, size)
    bound = bound_model(asym, Kind.ALLREDUCE).time_us(size)
    assert bound <= t <= 1.15 * bound  # docs/algorithms.md: 126.2 ms against 114.2
    packed = synthesize(asym, Kind.ALLREDUCE, "packing", options={"size": size})
    assert t < 0.9 * _us(packed, asym, size)


@pytest.mark.parametrize("name", ["pcie-2socket", "dgx1", "dgx-a100x2"])
@pytest.mark.parametrize("size", [64 << 10, 1 << 30])
def test_verifies_on_builtins_at_small_and_large_sizes(name, size):
    topology = get_topology(name)
    s = synthesize(topology, Kind.ALLREDUCE, "duplex-packing", options={"size": size})
    assert s.collective.num_chunks % topology.num_ranks == 0
    assert _us(s, topology, size) >= bound_model(topology, Kind.ALLREDUCE).time_us(size)


def test_not_beyond_its_rank_limit():
    with pytest.raises(NotApplicable, match="up to 16 ranks"):
        synthesize(get_topology("dgx-a100x4"), Kind.ALLREDUCE, "duplex-packing")


def test_the_packing_is_cached(asym):
    assert duplex_packing(asym) is duplex_packing(asym)


def test_requested_chunks_are_kept(asym):
    s = synthesize(asym, Kind.ALLREDUCE, "duplex-packing", chunks=40, options={"size": 1 << 20})
    assert s.collective.num_chunks == 40
    with pytest.raises(NotApplicable, match="multiple of the rank count"):
        synthesize(asym, Kind.ALLREDUCE, "duplex-packing", chunks=15)


def test_allreduce_only_and_needs_links_back(asym):
    with pytest.raises(NotApplicable, match=r"does not serve|allreduce only"):
        synthesize(asym, Kind.ALLGATHER, "duplex-packing")
    one_way = Topology(
        name="one-way-ring",
        ranks=asym.ranks[:3],
        switches=(),
        links=(Link(0, 1, 10.0, 1.0), Link(1, 2, 10.0, 1.0), Link(2, 0, 10.0, 1.0)),
    )
    with pytest.raises(NotApplicable, match="no link back"):
        synthesize(one_way, Kind.ALLREDUCE, "duplex-packing")
