"""Topology families: classic graphs (ring, torus, mesh, hypercube, fully connected) and machines
(NVSwitch boxes and clusters of them, DGX-1 boxes, PCIe trees, multi-rack fat-trees).

Every function returns a validated `Topology`. The built-in files in ``topologies/`` are produced by
these functions (see `synth.builtin.BUILTIN_RECIPES`), so a file and its generator never drift.
Bandwidths are GB/s per direction, latencies µs per link.
"""

from __future__ import annotations

from typing import Any

from synth.topology import TOPOLOGY_FORMAT, TOPOLOGY_VERSION, Topology, _json_number, topology_from_document

#: DGX-1 (V100) hybrid cube-mesh: number of NVLinks between GPUs i and j (ANCHORS.md).
DGX1_NVLINKS = (
    (0, 2, 1, 1, 2, 0, 0, 0),
    (2, 0, 1, 2, 0, 1, 0, 0),
    (1, 1, 0, 2, 0, 0, 2, 0),
    (1, 2, 2, 0, 0, 0, 0, 1),
    (2, 0, 0, 0, 0, 2, 1, 1),
    (0, 1, 0, 0, 2, 0, 1, 2),
    (0, 0, 2, 0, 1, 1, 0, 2),
    (0, 0, 0, 1, 1, 2, 2, 0),
)


class _Doc:
    """Accumulates nodes and duplex links into a topology document."""

    def __init__(self, name: str, description: str):
        self.name = name
        self.description = description
        self.ranks: list[dict[str, Any]] = []
        self.switches: list[dict[str, Any]] = []
        self.links: list[dict[str, Any]] = []

    def rank(self, name: str, host: str | None = None) -> str:
        self.ranks.append({"name": name, "host": host} if host else {"name": name})
        return name

    def switch(self, name: str, host: str | None = None) -> str:
        self.switches.append({"name": name, "host": host} if host else {"name": name})
        return name

    def link(self, a: str, b: str, bandwidth: float, latency: float, *, duplex: bool = True) -> None:
        entry: dict[str, Any] = {"a": a, "b": b, "bandwidth": _json_number(bandwidth), "latency": _json_number(latency)}
        if not duplex:
            entry["duplex"] = False
        self.links.append(entry)

    def document(self) -> dict[str, Any]:
        return {
            "format": TOPOLOGY_FORMAT,
            "version": TOPOLOGY_VERSION,
            "name": self.name,
            "description": self.description,
            "ranks": self.ranks,
            "switches": self.switches,
            "links": self.links,
        }

    def build(self) -> Topology:
        return topology_from_document(self.document(), source=f"<generated {self.name}>")


def _check_positive(**values: float) -> None:
    for key, value in values.items():
        if value is None or value <= 0:
            raise ValueError(f"{key} must be positive, got {value}")


# ===================================================================================== classic
def ring(n: int, bandwidth: float = 25.0, latency: float = 0.7, *, name: str | None = None) -> Topology:
    """n ranks in a bidirectional ring (rank i linked to i±1)."""
    if n < 2:
        raise ValueError("a ring needs at least 2 ranks")
    _check_positive(bandwidth=bandwidth)
    doc = _Doc(name or f"ring{n}", f"{n} ranks in a bidirectional ring, {bandwidth:g} GB/s and {latency:g} us per link.")
    names = [doc.rank(f"r{i}") for i in range(n)]
    pairs = {tuple(sorted((i, (i + 1) % n))) for i in range(n)}
    for a, b in sorted(pairs):
        doc.link(names[a], names[b], bandwidth, latency)
    return doc.build()


def _grid(rows: int, cols: int, bandwidth: float, latency: float, wrap: bool, name: str | None) -> Topology:
    if rows < 1 or cols < 1 or rows * cols < 2:
        raise ValueError("a grid needs at least 2 ranks")
    _check_positive(bandwidth=bandwidth)
    kind = "torus" if wrap else "mesh"
    doc = _Doc(
        name or f"{kind}{rows}x{cols}",
        f"{rows} x {cols} 2-D {kind} of ranks (row-major ids), {bandwidth:g} GB/s and {latency:g} us per link"
        + (", with wrap-around links." if wrap else "."),
    )
    names = [[doc.rank(f"r{r}c{c}") for c in range(cols)] for r in range(rows)]
    pairs: set[tuple[tuple[int, int], tuple[int, int]]] = set()
    for r in range(rows):
        for c in range(cols):
            for dr, dc in ((0, 1), (1, 0)):
                rr, cc = r + dr, c + dc
                if wrap:
                    rr, cc = rr % rows, cc % cols
                elif rr >= rows or cc >= cols:
                    continue
                if (rr, cc) != (r, c):
                    pairs.add(tuple(sorted(((r, c), (rr, cc)))))  # type: ignore[arg-type]
    for (r1, c1), (r2, c2) in sorted(pairs):
        doc.link(names[r1][c1], names[r2][c2], bandwidth, latency)
    return doc.build()


def torus(rows: int, cols: int, bandwidth: float = 25.0, latency: float = 0.7, *, name: str | None = None) -> Topology:
    """rows × cols 2-D torus (a ring in each dimension)."""
    return _grid(rows, cols, bandwidth, latency, True, name)


def mesh(rows: int, cols: int, bandwidth: float = 25.0, latency: float = 0.7, *, name: str | None = None) -> Topology:
    """rows × cols 2-D mesh (no wrap-around)."""
    return _grid(rows, cols, bandwidth, latency, False, name)


def hypercube(dim: int, bandwidth: float = 25.0, latency: float = 0.7, *, name: str | None = None) -> Topology:
    """2**dim ranks; ranks whose ids differ in one bit are linked."""
    if dim < 1:
        raise ValueError("a hypercube needs dimension at least 1")
    _check_positive(bandwidth=bandwidth)
    n = 1 << dim
    doc = _Doc(
        name or f"hypercube{dim}", f"{dim}-dimensional hypercube of {n} ranks, {bandwidth:g} GB/s and {latency:g} us per link."
    )
    names = [doc.rank(f"r{i}") for i in range(n)]
    for i in range(n):
        for b in range(dim):
            j = i ^ (1 << b)
            if i < j:
                doc.link(names[i], names[j], bandwidth, latency)
    return doc.build()


def fully_connected(n: int, bandwidth: float = 25.0, latency: float = 0.7, *, name: str | None = None) -> Topology:
    """n ranks with a direct link between every pair."""
    if n < 2:
        raise ValueError("needs at least 2 ranks")
    _check_positive(bandwidth=bandwidth)
    doc = _Doc(name or f"full{n}", f"{n} fully connected ranks, {bandwidth:g} GB/s and {latency:g} us per link.")
    names = [doc.rank(f"r{i}") for i in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            doc.link(names[i], names[j], bandwidth, latency)
    return doc.build()


# ===================================================================================== machines
def nvswitch(
    gpus: int = 8,
    bandwidth: float = 300.0,
    latency: float = 0.35,
    *,
    boxes: int = 1,
    nic_bandwidth: float | None = None,
    nic_latency: float = 1.3,
    gpu_nic_latency: float = 0.5,
    rails: int = 1,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """``boxes`` servers of ``gpus`` GPUs on one NVSwitch each (``bandwidth`` per GPU per direction).

    With ``nic_bandwidth``, every GPU has its own NIC (a switch node linked to the GPU at the NIC's
    speed); with several boxes the NICs join ``rails`` network switches, GPU g's NIC on rail
    g mod rails (rail-optimized, as DGX SuperPODs are cabled).
    """
    _check_positive(gpus=gpus, bandwidth=bandwidth, boxes=boxes, rails=rails)
    if boxes > 1 and nic_bandwidth is None:
        raise ValueError("several boxes need --nic-bandwidth to be joined")
    doc = _Doc(
        name or (f"nvswitch{gpus}" if boxes == 1 else f"nvswitch{gpus}x{boxes}"),
        description
        or (
            f"{boxes} x {gpus} GPUs on NVSwitch at {bandwidth:g} GB/s per GPU"
            + (f", one {nic_bandwidth:g} GB/s NIC per GPU" if nic_bandwidth else "")
            + (f" on {rails} rail switch(es)" if boxes > 1 else "")
            + "."
        ),
    )
    rail_names = [doc.switch(f"rail{i}") for i in range(rails)] if boxes > 1 else []
    for b in range(boxes):
        prefix = f"n{b}-" if boxes > 1 else ""
        host = f"node{b}"
        gpu_names = [doc.rank(f"{prefix}gpu{g}", host) for g in range(gpus)]
        sw = doc.switch(f"{prefix}nvswitch", host)
        for g in gpu_names:
            doc.link(g, sw, bandwidth, latency)
        if nic_bandwidth:
            for g, gname in enumerate(gpu_names):
                nic = doc.switch(f"{prefix}nic{g}", host)
                doc.link(gname, nic, nic_bandwidth, gpu_nic_latency)
                if rail_names:
                    doc.link(nic, rail_names[g % rails], nic_bandwidth, nic_latency)
    return doc.build()


def dgx1(
    *,
    boxes: int = 1,
    nvlink_bandwidth: float = 25.0,
    nvlink_latency: float = 0.7,
    nic_bandwidth: float | None = None,
    nic_latency: float = 1.3,
    pcie_bandwidth: float = 12.0,
    pcie_latency: float = 0.5,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """DGX-1 (8 × V100) boxes: the hybrid cube-mesh NVLink matrix (``nvlink_bandwidth`` per link).

    With several boxes, each box has one NIC of ``nic_bandwidth`` that every GPU of the box reaches
    over PCIe (``pcie_bandwidth``), and the NICs share one network switch (the NDv2 layout).
    """
    _check_positive(boxes=boxes, nvlink_bandwidth=nvlink_bandwidth)
    if boxes > 1 and nic_bandwidth is None:
        raise ValueError("several DGX-1 boxes need a NIC bandwidth")
    doc = _Doc(name or ("dgx1" if boxes == 1 else f"dgx1x{boxes}"), description or "DGX-1 boxes.")
    ib = doc.switch("ib") if boxes > 1 else None
    for b in range(boxes):
        prefix = f"n{b}-" if boxes > 1 else ""
        host = f"node{b}"
        gpu_names = [doc.rank(f"{prefix}gpu{g}", host) for g in range(8)]
        for i in range(8):
            for j in range(i + 1, 8):
                count = DGX1_NVLINKS[i][j]
                if count:
                    doc.link(gpu_names[i], gpu_names[j], count * nvlink_bandwidth, nvlink_latency)
        if ib is not None and nic_bandwidth:
            nic = doc.switch(f"{prefix}nic", host)
            for g in gpu_names:
                doc.link(g, nic, pcie_bandwidth, pcie_latency)
            doc.link(nic, ib, nic_bandwidth, nic_latency)
    return doc.build()


def pcie_tree(
    *,
    sockets: int = 2,
    switches_per_socket: int = 1,
    gpus_per_switch: int = 4,
    pcie_bandwidth: float = 24.0,
    pcie_latency: float = 0.5,
    inter_socket_bandwidth: float = 10.0,
    inter_socket_latency: float = 1.0,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """A PCIe server: GPUs under PCIe switches, switches under CPU root complexes, sockets joined
    by the inter-socket link (UPI/QPI/xGMI). No NVLink: GPU-to-GPU traffic crosses PCIe."""
    _check_positive(
        sockets=sockets,
        switches_per_socket=switches_per_socket,
        gpus_per_switch=gpus_per_switch,
        pcie_bandwidth=pcie_bandwidth,
        inter_socket_bandwidth=inter_socket_bandwidth,
    )
    total = sockets * switches_per_socket * gpus_per_switch
    if total < 1:
        raise ValueError("no GPUs")
    doc = _Doc(
        name or f"pcie{total}",
        description
        or (
            f"{total} GPUs over PCIe: {sockets} socket(s) x {switches_per_socket} switch(es) x {gpus_per_switch} GPU(s), "
            f"{pcie_bandwidth:g} GB/s per PCIe link, {inter_socket_bandwidth:g} GB/s between sockets."
        ),
    )
    cpus = [doc.switch(f"cpu{s}") for s in range(sockets)]
    gpu_id = 0
    pending: list[tuple[str, str]] = []
    for s in range(sockets):
        for w in range(switches_per_socket):
            sw = doc.switch(f"pcisw{s * switches_per_socket + w}")
            pending.append((sw, cpus[s]))
            for _ in range(gpus_per_switch):
                g = doc.rank(f"gpu{gpu_id}", "node0")
                gpu_id += 1
                doc.link(g, sw, pcie_bandwidth, pcie_latency)
    for sw, cpu in pending:
        doc.link(sw, cpu, pcie_bandwidth, pcie_latency)
    for a in range(sockets):
        for b in range(a + 1, sockets):
            doc.link(cpus[a], cpus[b], inter_socket_bandwidth, inter_socket_latency)
    return doc.build()


def fattree(
    *,
    racks: int = 4,
    servers: int = 4,
    gpus: int = 8,
    nvlink_bandwidth: float = 300.0,
    nvlink_latency: float = 0.35,
    nic_bandwidth: float = 50.0,
    gpu_nic_latency: float = 0.5,
    nic_latency: float = 1.0,
    oversubscription: float = 4.0,
    spines: int = 2,
    spine_latency: float = 0.5,
    pods: int = 1,
    cores: int | None = None,
    core_oversubscription: float = 1.0,
    core_latency: float = 0.5,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """Racks of NVSwitch servers: each GPU has its own NIC to its rack's top-of-rack switch; every
    top-of-rack switch has one uplink to each spine, together ``1/oversubscription`` of its
    downlink bandwidth (so 4 means 4:1 oversubscribed).

    With ``pods`` > 1, a three-tier fat-tree: ``pods`` copies of that two-tier network (each of
    ``racks`` racks, with its own ``spines``, the aggregation switches), joined by ``cores`` core
    switches (default: as many as spines per pod); every aggregation switch has one link to each
    core switch, together ``1/core_oversubscription`` of what its racks send up to it (1: the
    core is not oversubscribed). Names then start with the pod: ``p0r1s2-gpu3``, ``p0-tor1``,
    ``p0-spine0``, ``core0``; with one pod they are those of the two-tier tree."""
    _check_positive(
        racks=racks,
        servers=servers,
        gpus=gpus,
        nvlink_bandwidth=nvlink_bandwidth,
        nic_bandwidth=nic_bandwidth,
        oversubscription=oversubscription,
        spines=spines,
        pods=pods,
        core_oversubscription=core_oversubscription,
    )
    cores = spines if cores is None else cores
    _check_positive(cores=cores)
    tiers = "" if pods == 1 else f"{pods} pod(s) x "
    default_name = f"fattree{racks}x{servers}x{gpus}" if pods == 1 else f"fattree{pods}x{racks}x{servers}x{gpus}"
    core_text = (
        ""
        if pods == 1
        else f" Pods joined by {cores} core switch(es), {core_oversubscription:g}:1 from each pod's spines (aggregation)."
    )
    doc = _Doc(
        name or default_name,
        description
        or (
            f"{tiers}{racks} rack(s) x {servers} server(s) x {gpus} GPU(s); NVSwitch at {nvlink_bandwidth:g} GB/s per GPU; "
            f"one {nic_bandwidth:g} GB/s NIC per GPU to the top-of-rack switch; {oversubscription:g}:1 to {spines} spine(s)."
            f"{core_text}"
        ),
    )
    uplink = servers * gpus * nic_bandwidth / oversubscription / spines
    core_names = [doc.switch(f"core{k}") for k in range(cores)] if pods > 1 else []
    for pod in range(pods):
        prefix = "" if pods == 1 else f"p{pod}"
        dash = "" if pods == 1 else f"{prefix}-"
        spine_names = [doc.switch(f"{dash}spine{k}") for k in range(spines)] if racks > 1 or pods > 1 else []
        for spine in spine_names:
            for core in core_names:
                doc.link(spine, core, racks * uplink / core_oversubscription / cores, core_latency)
        for r in range(racks):
            tor = doc.switch(f"{dash}tor{r}")
            for k in spine_names:
                doc.link(tor, k, uplink, spine_latency)
            for s in range(servers):
                host = f"{prefix}r{r}s{s}"
                gpu_names = [doc.rank(f"{host}-gpu{g}", host) for g in range(gpus)]
                sw = doc.switch(f"{host}-nvswitch", host)
                for g, gname in enumerate(gpu_names):
                    doc.link(gname, sw, nvlink_bandwidth, nvlink_latency)
                    nic = doc.switch(f"{host}-nic{g}", host)
                    doc.link(gname, nic, nic_bandwidth, gpu_nic_latency)
                    doc.link(nic, tor, nic_bandwidth, nic_latency)
    return doc.build()


#: Families offered by ``synth topo gen KIND``.
FAMILIES = ("ring", "torus", "mesh", "hypercube", "full", "nvswitch", "pcie", "fattree", "dgx1")
