"""NCCL's analytic cost model: hand-computed cases, the tuner's choice, the command."""

import pytest
from click.testing import CliRunner

from synth import generators as gen
from synth.cli import main
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.nccl_model import guess_arch, model_inputs, nccl_model, nccl_model_best

GIB = 2**30
MIB = 2**20


def _by_name(predictions):
    return {p.name: p for p in predictions}


def test_inputs_from_topologies(builtin):
    dgx1 = model_inputs(builtin("dgx1"))
    assert (dgx1.ranks, dgx1.nodes, dgx1.channels, dgx1.channel_bandwidth) == (8, 1, 6, 25.0)
    assert (dgx1.intra_hw, dgx1.arch, dgx1.same_channels) == ("nvlink", "volta", False)
    a100 = model_inputs(builtin("dgx-a100"))  # one ring at 300 GB/s = 12 NCCL channels of 25
    assert (a100.channels, a100.channel_bandwidth, a100.arch, a100.same_channels) == (12, 25.0, "ampere", True)
    pcie = model_inputs(builtin("pcie-2socket"))
    assert (pcie.channels, pcie.channel_bandwidth, pcie.intra_hw) == (1, 10.0, "pci")
    fat = model_inputs(builtin("fattree-4rack"))
    assert (fat.nodes, fat.channels) == (16, 16) and fat.channel_bandwidth == pytest.approx(300 / 14)
    assert guess_arch(builtin("dgx-h100")) == "hopper"


def test_dgx1_allreduce_by_hand(builtin):
    """DGX-1, 8 ranks, 6 channels x 25 GB/s, NVLink, Volta."""
    p = _by_name(nccl_model(builtin("dgx1"), "allreduce", [1024, MIB, GIB]))
    # ring/Simple: busBw 6*25 = 150, algBw = 150*8/14; latency 8.4 + 14 steps * 3.4
    ring = p["ring/Simple"]
    assert ring.latency_us == pytest.approx(8.4 + 14 * 3.4)
    assert ring.bandwidth_gbps == pytest.approx(150 * 8 / 14)
    assert ring.times_us[2] == pytest.approx(56.0 + GIB / (1e3 * 150 * 8 / 14))
    # ring/LL128: min(150*0.92, 6 channels * 20) = 120 busBw; latency 14 + 14 * 1.9
    assert p["ring/LL128"].times_us[1] == pytest.approx(14 + 14 * 1.9 + MIB / (1e3 * 120 * 8 / 14))
    # tree/LL: min(150*0.92, 6*26.5) = 138 -> /3.8 = 36.3 (< LL cap 39) -> algBw /2;
    # latency 6.8 + 2*(7*0.6); 1 KiB: log2(1024/64) = 4 -> correction 0.9
    tree = p["tree/LL"]
    assert tree.latency_us == pytest.approx(6.8 + 2 * 7 * 0.6)
    assert tree.bandwidth_gbps == pytest.approx(138 / 3.8 / 2)
    assert tree.times_us[0] == pytest.approx(15.2 + 1024 / (1e3 * 138 / 3.8 / 2 * 0.9))
    assert set(p) == {"tree/LL", "tree/LL128", "tree/Simple", "ring/LL", "ring/LL128", "ring/Simple"}


def test_fattree_ring_ll128_by_hand(builtin):
    """128 ranks on 16 hosts, 16 channels x 300/14 GB/s: inter-node steps and the network term."""
    p = _by_name(nccl_model(builtin("fattree-4rack"), "allreduce", [GIB]))["ring/LL128"]
    bus = min(16 * 300 / 14 * 0.92, 16 * 20.0)
    # 254 steps, 30 of them between hosts at 4.0 us, the rest at max(1.9, 1.0 net overhead)
    assert p.latency_us == pytest.approx(14.0 + 224 * 1.9 + 30 * 4.0)
    assert p.bandwidth_gbps == pytest.approx(bus * 128 / 254)
    assert p.times_us[0] == pytest.approx(p.latency_us + GIB / (1e3 * bus * 128 / 254))


def test_broadcast_latency_one_step_when_channels_share_a_ring(builtin):
    one = _by_name(nccl_model(builtin("dgx-a100"), "broadcast", [8]))["ring/Simple"]
    assert one.latency_us == pytest.approx(8.4 + 3.4)
    many = _by_name(nccl_model(builtin("dgx1"), "broadcast", [8]))["ring/Simple"]
    assert many.latency_us == pytest.approx(8.4 + 8 * 4.0)  # 8 steps at the tree's Simple latency


def test_tuner_picks_latency_then_bandwidth(builtin):
    choices = nccl_model_best(builtin("fattree-4rack"), Kind.ALLREDUCE, [8, GIB])
    assert choices[0].algorithm == "tree" and choices[0].protocol == "LL"
    assert choices[1].algorithm == "ring"
    small, large = nccl_model_best(builtin("dgx1"), "allgather", [8, GIB])
    assert small.name == "ring/LL" and large.name == "ring/Simple"
    assert large.time_us < small.time_us * GIB / 8


def test_pcie_disables_ll128_and_tree_serves_only_allreduce(builtin):
    names = {p.name for p in nccl_model(builtin("pcie-2socket"), "allreduce", [MIB])}
    assert "ring/LL128" not in names and "tree/LL128" not in names and "tree/Simple" in names
    names = {p.name for p in nccl_model(builtin("dgx1"), "reduce-scatter", [MIB])}
    assert names == {"ring/LL", "ring/LL128", "ring/Simple"}


def test_not_covered(builtin):
    with pytest.raises(NotApplicable, match="not gather"):
        nccl_model(builtin("dgx1"), "gather", [MIB])
    with pytest.raises(NotApplicable, match="at least two ranks"):
        nccl_model(gen.nvswitch(1, 100.0), "allreduce", [MIB])
    with pytest.raises(NotApplicable, match="unknown GPU generation"):
        nccl_model(builtin("dgx1"), "allreduce", [MIB], arch="pascal")


def test_cli_table():
    result = CliRunner().invoke(main, ["nccl-model", "dgx1", "-c", "allreduce", "--sizes", "8,1G"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("NCCL model (analytic, not a schedule): allreduce on dgx1")
    assert "ring/Simple" in lines[1] and "NCCL picks" in lines[1]
    assert lines[2].split()[0] == "8B" and lines[3].split()[0] == "1GiB"
    assert lines[3].split()[-4] == "ring/Simple"
    bad = CliRunner().invoke(main, ["nccl-model", "dgx1", "-c", "allreduce", "--sizes", "1X"])
    assert bad.exit_code == 2 and "--sizes" in bad.output
    gather = CliRunner().invoke(main, ["nccl-model", "dgx1", "-c", "gather"])
    assert gather.exit_code == 2 and "not gather" in gather.output
