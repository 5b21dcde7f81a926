"""Sizes that nothing capped: each is checked against what it can mean and against memory before
anything is allocated, and refused in one line."""

from __future__ import annotations

import pytest

from synth import generators as gen
from tests.cli_helpers import assert_bad_input, invoke


@pytest.mark.parametrize(
    "args",
    [
        ("hypercube", "--dim", "40"),
        ("hypercube", "--dim", "100000"),
        ("ring", "--ranks", "1000000000"),
        ("torus", "--rows", "100000", "--cols", "100000"),
        ("mesh", "--rows", "100000", "--cols", "100000"),
        ("full", "--ranks", "100000"),
        ("nvswitch", "--gpus", "8", "--boxes", "10000000", "--nic-bandwidth", "25"),
        ("dgx1", "--boxes", "10000000", "--nic-bandwidth", "12.5"),
        ("pcie", "--sockets", "100000", "--gpus-per-switch", "1000"),
        ("fattree", "--racks", "1" + "0" * 30),
    ],
)
def test_generators_refuse_machines_too_large(args):
    assert_bad_input(invoke("topo", "gen", *args), "synth topo gen", "at most")


def test_generator_limits_leave_real_machines():
    assert gen.hypercube(10).num_ranks == 1024
    assert gen.fattree(racks=16, servers=4, gpus=8).num_ranks == 512


def test_chunks_beyond_memory_are_refused_before_allocating(tmp_path):
    """--chunks 100000000 on dgx1 used to be killed by the kernel."""
    result = invoke("synthesize", "dgx1", "-c", "allreduce", "-m", "ring", "--chunks", "100000000", "-o", tmp_path / "s.json")
    assert_bad_input(result, "--chunks", "100000000", "transfers")
    assert not (tmp_path / "s.json").exists()
    result = invoke("synthesize", "dgx1", "-c", "allgather", "-m", "ring", "--chunks", str(10**30), "-o", tmp_path / "s.json")
    assert_bad_input(result, "--chunks", "more than a schedule can hold")


def test_check_collective_size_uses_available_memory(monkeypatch):
    from synth.collective import Collective
    from synth.errors import InputError
    from synth.limits import check_collective_size

    monkeypatch.setattr("synth.limits.available_memory", lambda: 10**6)
    check_collective_size(Collective("allreduce", 8, 100), "x", "--chunks", 100)  # 700 transfers
    with pytest.raises(InputError, match="is available"):
        check_collective_size(Collective("allreduce", 8, 10**4), "x", "--chunks", 10**4)


def test_column_building_method_gets_its_own_memory_figure(monkeypatch):
    """The greedy builds in columns (about 64 bytes per transfer measured at 4,096 ranks), so a
    16,384-rank allgather (268 million transfers, 17 GB) is not refused on a machine with 20 GB
    as the default 600 bytes per transfer would (161 GB); a classic method still is."""
    from synth.collective import Collective
    from synth.errors import InputError
    from synth.limits import check_collective_size
    from synth.registry import METHODS

    monkeypatch.setattr("synth.limits.available_memory", lambda: 20 * 10**9)
    big = Collective("allgather", 16384, 1)
    check_collective_size(big, "x", "--chunks", None, bytes_per_transfer=METHODS["greedy"].memory_per_transfer)
    with pytest.raises(InputError, match=r"161\.1 GB"):
        check_collective_size(big, "x", "--chunks", None, bytes_per_transfer=METHODS["ring"].memory_per_transfer)


def test_method_memory_figure_per_collective(monkeypatch):
    """The hierarchical method builds its pipelined allgather in columns, its other collectives not:
    a 16,384-rank allgather passes the size check, a broadcast of as many transfers does not."""
    from synth.collective import Collective, Kind
    from synth.errors import InputError
    from synth.limits import check_collective_size
    from synth.registry import METHODS

    monkeypatch.setattr("synth.limits.available_memory", lambda: 20 * 10**9)
    hierarchical = METHODS["hierarchical"]
    assert hierarchical.bytes_per_transfer(Kind.ALLGATHER) == 64
    assert hierarchical.bytes_per_transfer(Kind.BROADCAST) == hierarchical.memory_per_transfer
    big = Collective("allgather", 16384, 1)
    check_collective_size(big, "x", "--chunks", None, bytes_per_transfer=hierarchical.bytes_per_transfer(Kind.ALLGATHER))
    wide = Collective("broadcast", 16384, 16384)  # as many transfers as the allgather, at least
    with pytest.raises(InputError, match="GB"):
        check_collective_size(wide, "x", "--chunks", None, bytes_per_transfer=hierarchical.bytes_per_transfer(Kind.BROADCAST))


@pytest.mark.parametrize(
    "kind", ["allgather", "gather", "scatter", "alltoall", "broadcast", "reduce", "reduce-scatter", "allreduce"]
)
def test_min_transfers_is_a_lower_bound(dgx1, kind):
    """Every synthesized schedule has at least `Collective.min_transfers()` transfers."""
    from synth.errors import NotApplicable
    from synth.registry import synthesize

    for method in ("ring", "direct"):
        try:
            s = synthesize(dgx1, kind, method)
        except NotApplicable:  # a method that does not serve the kind
            continue
        assert s.num_transfers >= s.collective.min_transfers() > 0


def test_a_header_claiming_huge_chunk_counts_verifies_quickly(tmp_path):
    """num_chunks 10**12 used to replay for hours; now it is refused as too short at once (exit 1)."""
    path = tmp_path / "s.json"
    assert invoke("synthesize", "dgx1", "-c", "allreduce", "-m", "ring", "-o", path).exit_code == 0
    path.write_text(path.read_text().replace('"num_chunks": 8', f'"num_chunks": {10**12}'))
    result = invoke("verify", path)
    assert result.exit_code == 1 and "needs at least" in result.stdout


def test_one_rank_with_many_chunks_and_no_transfers(tmp_path):
    from synth.collective import Collective
    from synth.schedule import ScheduleBuilder
    from synth.topology import topology_from_document
    from synth.verify import verify

    topo = topology_from_document({"format": "synth-topology", "version": 1, "ranks": ["a"], "links": []})
    schedule = ScheduleBuilder(Collective("allgather", 1, 2**40), topo).build()
    assert verify(schedule, topo).ok
