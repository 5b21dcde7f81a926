"""Built-in topologies: found by name (``dgx1``) as well as by path.

The files live in the repository's ``topologies/`` folder (a wheel carries them as
``synth/_topologies``). Each is produced by a recipe below from `synth.generators`, with a
description that names where its figures come from; ``synth topo write-builtins`` rewrites the
files from the recipes, and a test checks that they agree.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from synth import generators as gen
from synth.errors import InputError
from synth.topology import Topology, load_topology

# Public sources of the figures in the descriptions below (each description names the ones it uses).
_DGX1_PAPER = "the NVIDIA DGX-1 System Architecture white paper (WP-08437-001)"
_SCCL = "SCCL (PPoPP'21, arXiv 2008.08708)"
_TACCL = "TACCL (NSDI'23, arXiv 2111.04867)"
_TECCL = "TE-CCL (SIGCOMM'24, arXiv 2305.13479)"
_FORESTCOLL = "ForestColl (arXiv 2402.06787)"
_NCCL = "github.com/NVIDIA/nccl"

BUILTIN_RECIPES: dict[str, Callable[[], Topology]] = {
    "dgx1": lambda: gen.dgx1(
        name="dgx1",
        description=(
            "NVIDIA DGX-1 (8 x V100), hybrid cube-mesh NVLink: six NVLinks per GPU, doubled between some "
            f"pairs, as {_DGX1_PAPER} draws them; 25 GB/s per NVLink per direction (double links 50 GB/s), "
            "alpha 0.7 us per link (an estimate: GPU to GPU through the NVSwitch of dgx2). NVLink only (PCIe "
            f"and NICs not modelled), as in {_SCCL} and {_FORESTCOLL}."
        ),
    ),
    "dgx2": lambda: gen.nvswitch(
        16,
        125.0,
        0.35,
        name="dgx2",
        description=(
            "NVIDIA DGX-2: 16 x V100 on NVSwitch, 125 GB/s per GPU per direction; alpha 0.35 us per link, "
            f"so 0.7 us GPU to GPU through the switch: the DGX-2 figures of {_TECCL}."
        ),
    ),
    "dgx-a100": lambda: gen.nvswitch(
        8,
        300.0,
        0.35,
        nic_bandwidth=25.0,
        name="dgx-a100",
        description=(
            "NVIDIA DGX A100 (NVIDIA DGX A100 datasheet): 8 x A100, 12 NVLink3 per GPU through NVSwitch = "
            "300 GB/s per GPU per direction (one switch node stands for the 6 NVSwitches); 8 HDR InfiniBand "
            "NICs (200 Gb/s = 25 GB/s), one per GPU (they lead off the box; see dgx-a100x2). alpha 0.35 us per "
            f"NVSwitch link (the per-link NVSwitch figure of {_TECCL}), 0.5 us GPU to NIC (an estimate)."
        ),
    ),
    "dgx-h100": lambda: gen.nvswitch(
        8,
        450.0,
        0.35,
        nic_bandwidth=50.0,
        name="dgx-h100",
        description=(
            "NVIDIA DGX H100 (NVIDIA DGX H100 datasheet): 8 x H100, 18 NVLink4 per GPU through NVSwitch, about "
            "450 GB/s per GPU per direction; 8 x 400 Gb/s NICs (50 GB/s), one per GPU. alpha 0.35 us per "
            "NVSwitch link, 0.5 us GPU to NIC (as dgx-a100)."
        ),
    ),
    "pcie-2socket": lambda: gen.pcie_tree(
        sockets=2,
        switches_per_socket=1,
        gpus_per_switch=4,
        pcie_bandwidth=24.0,
        inter_socket_bandwidth=10.0,
        name="pcie-2socket",
        description=(
            "8 GPUs over PCIe, no NVLink (like the 8 x RTX 3090 server of tests/data/nccl-rtx3090-pcie-8gpu.xml): "
            "4 GPUs per PCIe switch, each switch under one CPU root complex, PCIe Gen4 x16 = 24 GB/s per "
            "direction (NCCL: lane width x 120 / 80, src/graph/topo.cc); the two sockets joined by UPI at "
            f"10 GB/s (NCCL's Skylake-and-later figure, src/graph/topo.h; {_NCCL}). alpha 0.5 us per PCIe link, "
            "1 us across sockets (estimates)."
        ),
    ),
    "ndv2x2": lambda: gen.dgx1(
        boxes=2,
        nvlink_bandwidth=25.0,
        nvlink_latency=0.7,
        nic_bandwidth=12.5,
        nic_latency=1.3,
        pcie_bandwidth=12.0,
        pcie_latency=0.5,
        name="ndv2x2",
        description=(
            "Two Azure NDv2 / DGX-1 boxes: the DGX-1 NVLink matrix of dgx1 at 25 GB/s per NVLink, alpha 0.7 us; "
            "one 12.5 GB/s (100 Gb/s) InfiniBand NIC per box, alpha 1.3 us per NIC-to-switch link (2.6 us NIC "
            f"to NIC, the InfiniBand alpha of the NDv2 profile of {_TACCL}), reached from every GPU of its box "
            f"over PCIe Gen3 x16 (12 GB/s, NCCL's figure in src/graph/topo.h, {_NCCL}; alpha 0.5 us); the two "
            "NICs on one IB switch."
        ),
    ),
    "dgx-a100x2": lambda: gen.nvswitch(
        8,
        300.0,
        0.35,
        boxes=2,
        nic_bandwidth=25.0,
        nic_latency=1.3,
        rails=2,
        name="dgx-a100x2",
        description=(
            "Two DGX A100 boxes: per box 8 GPUs on NVSwitch at 300 GB/s per GPU; each GPU has its own "
            "25 GB/s HDR NIC; the NICs of even GPUs on one InfiniBand rail switch, of odd GPUs on another: the "
            f"2-box machine of {_FORESTCOLL}, whose exact allgather optimum is 346.67 GB/s. alpha 0.35 us per "
            "NVSwitch link, 0.5 us GPU to NIC (as dgx-a100), 1.3 us NIC to switch (half of the 2.6 us InfiniBand "
            f"alpha of {_TACCL})."
        ),
    ),
    "dgx-a100x4": lambda: gen.nvswitch(
        8,
        300.0,
        0.35,
        boxes=4,
        nic_bandwidth=25.0,
        nic_latency=1.3,
        rails=2,
        name="dgx-a100x4",
        description=(
            "Four DGX A100 boxes, cabled as dgx-a100x2: 8 GPUs per box on NVSwitch at 300 GB/s per GPU, one "
            "25 GB/s NIC per GPU, even/odd GPUs' NICs on two InfiniBand rail switches: the 4-box machine of "
            f"{_FORESTCOLL}, whose exact allgather optimum is 266.67 GB/s. Latencies as dgx-a100x2."
        ),
    ),
    "fattree-4rack": lambda: gen.fattree(
        racks=4,
        servers=4,
        gpus=8,
        nvlink_bandwidth=300.0,
        nic_bandwidth=50.0,
        oversubscription=4.0,
        spines=2,
        name="fattree-4rack",
        description=(
            "4 racks x 4 servers x 8 GPUs = 128 ranks. NVSwitch inside each server (300 GB/s per GPU, the "
            "NVIDIA DGX A100 datasheet figure); 8 x 400 Gb/s (50 GB/s) NDR InfiniBand NICs per server, one per "
            "GPU, to the top-of-rack switch; each top-of-rack switch has one 200 GB/s "
            "uplink to each of 2 spines, 400 GB/s against 1600 GB/s down: 4:1 oversubscribed (our choice). "
            "alpha 0.35 us per NVSwitch link, 0.5 us GPU to NIC, 1 us NIC to ToR, 0.5 us ToR to spine "
            "(estimates)."
        ),
    ),
}

BUILTIN_NAMES: tuple[str, ...] = tuple(BUILTIN_RECIPES)


def builtin_dir() -> Path:
    """Folder of the built-in topology files: $SYNTH_TOPOLOGIES, the packaged copy, or the
    repository's ``topologies/``."""
    env = os.environ.get("SYNTH_TOPOLOGIES")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    packaged = here / "_topologies"
    if packaged.is_dir():
        return packaged
    return here.parent / "topologies"


def builtin_path(name: str) -> Path:
    return builtin_dir() / f"{name}.json"


def list_builtins() -> list[str]:
    """Names of the built-in topology files present (recipes first, in their order)."""
    folder = builtin_dir()
    present = {p.stem for p in folder.glob("*.json")} if folder.is_dir() else set()
    ordered = [n for n in BUILTIN_NAMES if n in present]
    return ordered + sorted(present - set(ordered))


def resolve_topology_path(spec: str | os.PathLike) -> Path:
    """A path for a topology given as a file path or a built-in name."""
    path = Path(spec)
    if path.is_file():
        return path
    if path.suffix == "" and os.sep not in str(spec):
        candidate = builtin_path(str(spec))
        if candidate.is_file():
            return candidate
    if path.exists():
        return path  # a directory: load_topology reports it
    names = ", ".join(list_builtins())
    raise InputError(str(spec), "topology", str(spec), f"no such file or built-in topology (built-ins: {names})")


def get_topology(spec: str | os.PathLike) -> Topology:
    """Load a topology by file path or built-in name."""
    return load_topology(resolve_topology_path(spec))
