"""Built-in topologies: found by name (``dgx1``) as well as by path.

The files live in the repository's ``topologies/`` folder (a wheel carries them as
``synth/_topologies``). Each is produced by a recipe below from `synth.generators`, with a
description that names where its figures come from; ``synth topo write-builtins`` rewrites the
files from the recipes, and a test checks that they agree.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from synth import generators as gen
from synth.errors import InputError
from synth.schedule import Schedule, check_topology_match
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


#: ``builtin:NAME`` names a built-in even when a file called NAME is in the working directory.
BUILTIN_PREFIX = "builtin:"


def is_builtin(name: object) -> bool:
    """Whether ``name`` is exactly the name of a built-in topology (never a path: a name from a
    file such as ``../x`` is not looked up on disk)."""
    return isinstance(name, str) and name in list_builtins()


@dataclass(frozen=True)
class TopologyLocation:
    """Where a topology given on the command line (or recorded in a schedule) was found.

    ``builtin`` is the built-in's name when it is one; ``note`` is a line for stderr when the
    choice may surprise (a file that shadows a built-in, a topology found through a schedule)."""

    path: Path
    builtin: str | None = None
    note: str | None = None

    def recorded_for(self, schedule_path: str | os.PathLike) -> str:
        """What a schedule written to ``schedule_path`` records as ``topology.source``:
        ``builtin:NAME``, or the file's path relative to the schedule's folder."""
        if self.builtin is not None:
            return BUILTIN_PREFIX + self.builtin
        folder = os.path.dirname(os.path.abspath(schedule_path))
        return Path(os.path.relpath(os.path.abspath(self.path), folder)).as_posix()


def _builtin_location(name: str, spec: str) -> TopologyLocation:
    if not is_builtin(name):
        names = ", ".join(list_builtins())
        raise InputError(spec, "topology", spec, f"no such built-in topology (built-ins: {names})")
    return TopologyLocation(builtin_path(name), builtin=name)


def locate_topology(spec: str | os.PathLike) -> TopologyLocation:
    """A topology given as a path or a built-in name. The rule: ``builtin:NAME`` is the built-in;
    otherwise an existing path wins (with a note when its name is also a built-in's: a file
    ``dgx1`` in the working directory shadows the built-in ``dgx1``); otherwise the built-in."""
    text = os.fspath(spec)
    if text.startswith(BUILTIN_PREFIX):
        return _builtin_location(text[len(BUILTIN_PREFIX) :], text)
    path = Path(text)
    if path.exists():
        note = None
        if is_builtin(text):
            note = (
                f"using the file {text} in the working directory, not the built-in {text} (write {BUILTIN_PREFIX}{text} for it)"
            )
        return TopologyLocation(path, note=note)  # a folder or a device: load_topology says what is wrong
    if is_builtin(text):
        return TopologyLocation(builtin_path(text), builtin=text)
    names = ", ".join(list_builtins())
    raise InputError(text, "topology", text, f"no such file or built-in topology (built-ins: {names})")


def locate_schedule_topology(schedule: Schedule, schedule_path: str | os.PathLike | None = None) -> TopologyLocation:
    """The topology a schedule was made for, from what the schedule records: ``topology.source``
    (``builtin:NAME``, or a path relative to the schedule's folder), else ``topology.name`` when it
    is exactly a built-in's name. The caller still checks the hash (`synth.verify`)."""
    where = str(schedule_path if schedule_path is not None else schedule.source)
    source = schedule.topology_source
    if source:
        if source.startswith(BUILTIN_PREFIX):
            name = source[len(BUILTIN_PREFIX) :]
            if not is_builtin(name):
                raise InputError(where, "topology.source", source, "no such built-in topology; pass --topology FILE")
            return TopologyLocation(builtin_path(name), builtin=name)
        candidate = Path(os.path.dirname(os.path.abspath(where))) / source
        if not candidate.is_file():
            raise InputError(where, "topology.source", source, f"the topology file is not at {candidate}; pass --topology FILE")
        shown = os.path.relpath(candidate) if not os.path.isabs(source) else str(candidate)
        return TopologyLocation(candidate, note=f"topology {shown} (recorded in {where})")
    name = schedule.topology_name
    if not is_builtin(name):
        raise InputError(where, "topology.name", name, "not a built-in topology; pass --topology FILE")
    return TopologyLocation(builtin_path(name), builtin=name)


def resolve_topology_path(spec: str | os.PathLike) -> Path:
    """A path for a topology given as a file path or a built-in name (see `locate_topology`)."""
    return locate_topology(spec).path


def get_topology(spec: str | os.PathLike) -> Topology:
    """Load a topology by file path or built-in name."""
    return load_topology(resolve_topology_path(spec))


def load_located(location: TopologyLocation, schedule: Schedule | None = None) -> Topology:
    """Load a located topology; when it was found through ``schedule`` (a recorded path, not a
    built-in), check that it is the machine the schedule was made for, so that a mismatch is one
    line naming the file. The caller says ``location.note`` where it prints notes."""
    topology = load_topology(location.path)
    if schedule is not None and location.builtin is None:
        check_topology_match(schedule, topology, str(location.path))
    return topology


def schedule_topology(
    schedule: Schedule, schedule_path: str | os.PathLike, spec: str | os.PathLike | None
) -> tuple[Topology, TopologyLocation]:
    """The topology a schedule runs against: ``spec`` (``--topology``) when given, else the one the
    schedule records (`locate_schedule_topology`); with where it was found."""
    location = locate_topology(spec) if spec is not None else locate_schedule_topology(schedule, schedule_path)
    return load_located(location, schedule if spec is None else None), location
