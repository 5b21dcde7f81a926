"""Interop checks that need the simulator and the bounds: a round trip through MSCCL XML simulates
the same, and NCCL dumps import into topologies whose bandwidth bounds match the built-in of the
same machine."""

from __future__ import annotations

import pytest

from synth.bounds import bound_model
from synth.builtin import get_topology
from synth.collective import Kind
from synth.interop.msccl_export import export_msccl
from synth.interop.msccl_import import import_msccl
from synth.interop.msccl_xml import algo_to_xml, parse_msccl_text
from synth.interop.nccl_topology import import_nccl_topology
from synth.schedule import load_schedule
from synth.simulate import Simulator

from .conftest import REPO

DATA = REPO / "tests" / "data"
REALDATA = REPO.parent / "shared" / "reference" / "realdata"


def dump(name: str):
    """A dump the project wrote (tests/data) or a real one from ../shared/reference/realdata (else skip)."""
    for path in (DATA / name, REALDATA / name):
        if path.is_file():
            return path
    pytest.skip(f"{REALDATA / name} is absent: the real NCCL dumps are read from ../shared/reference/realdata beside the clone")


SIZES = (1 << 10, 1 << 20, 1 << 30)
CASES = [
    (name, path)
    for name in ("dgx1", "dgx-a100", "pcie-2socket", "ndv2x2", "dgx-a100x2")
    for path in sorted((REPO / "generated" / name).glob("*.json"))
]


@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}/{p.stem}" for n, p in CASES])
def test_round_trip_simulates_the_same(name, path):
    topology = get_topology(name)
    schedule = load_schedule(path)
    algo, _ = parse_msccl_text(algo_to_xml(export_msccl(schedule).algo), "x.xml")
    back = import_msccl(algo, topology).schedule
    for model in ("sync", "event"):
        before = [r.time_us for r in Simulator(schedule, topology).run(SIZES, model, timeline=False)]
        after = [r.time_us for r in Simulator(back, topology).run(SIZES, model, timeline=False)]
        assert after == pytest.approx(before, rel=1e-12), model


def _bandwidth_terms(topology, kinds=(Kind.ALLGATHER, Kind.REDUCE_SCATTER, Kind.ALLREDUCE, Kind.BROADCAST, Kind.ALLTOALL)):
    return {k: bound_model(topology, k, 0 if k is Kind.BROADCAST else None).us_per_byte for k in kinds}


@pytest.mark.parametrize(
    ("name", "builtin"),
    [("nccl-dgx1-v100-8gpu.xml", "dgx1"), ("nccl-hgx-a100-8gpu.xml", "dgx-a100"), ("nccl-ibm-h100-8gpu.xml", "dgx-h100")],
)
def test_nvlink_fabric_bounds_match_builtin(name, builtin):
    """The NVLink fabric of a dump (datasheet 25 GB/s per NVLink, as the built-ins) has the
    built-in's bandwidth bounds for every collective."""
    imported = import_nccl_topology(dump(name), nvlink_only=True, nvlink_bandwidth=25.0).topology
    assert _bandwidth_terms(imported) == pytest.approx(_bandwidth_terms(get_topology(builtin)), rel=1e-9)


def test_pcie_server_bounds_match_builtin():
    """The 8 x RTX 3090 PCIe server imports with NCCL's own figures into pcie-2socket's bounds."""
    imported = import_nccl_topology(dump("nccl-rtx3090-pcie-8gpu.xml")).topology
    assert _bandwidth_terms(imported) == pytest.approx(_bandwidth_terms(get_topology("pcie-2socket")), rel=1e-9)


def test_full_imports_bound_at_least_the_nvlink_fabric():
    """With PCIe and NICs added, a machine can only be as fast or faster than its NVLink fabric."""
    for name in ("nccl-dgx1-v100-8gpu.xml", "nccl-fixture-nvswitch-8gpu.xml", "nccl-fixture-vm-8gpu.xml"):
        full = _bandwidth_terms(import_nccl_topology(dump(name), nvlink_bandwidth=25.0).topology)
        fabric = _bandwidth_terms(import_nccl_topology(dump(name), nvlink_only=True, nvlink_bandwidth=25.0).topology)
        for kind in full:
            assert full[kind] <= fabric[kind] * (1 + 1e-9), (name, kind)
