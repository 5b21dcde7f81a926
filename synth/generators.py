"""Topology families: classic graphs (ring, torus, mesh, hypercube, fully connected) and machines
(NVSwitch boxes and clusters of them, DGX-1 boxes, PCIe trees, multi-rack fat-trees).

Every function returns a validated `Topology`. The built-in files in ``topologies/`` are produced by
these functions (see `synth.builtin.BUILTIN_RECIPES`), so a file and its generator never drift.
Bandwidths are GB/s per direction, latencies µs per link.
"""

from __future__ import annotations

import math
from typing import Any

from synth.limits import available_memory
from synth.topology import (
    MAX_BANDWIDTH,
    MAX_LATENCY,
    MIN_BANDWIDTH,
    TOPOLOGY_FORMAT,
    TOPOLOGY_VERSION,
    Topology,
    json_number,
    topology_from_document,
)

#: DGX-1 (V100) hybrid cube-mesh: number of NVLinks between GPUs i and j, as the NVIDIA DGX-1 System
#: Architecture white paper (WP-08437-001) draws them (six per GPU; SCCL, arXiv 2008.08708, uses the same).
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


class TopologyDoc:
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
        entry: dict[str, Any] = {"a": a, "b": b, "bandwidth": json_number(bandwidth), "latency": json_number(latency)}
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


#: The largest machine a generator builds: far beyond today's clusters, small enough to build in
#: a few GB of memory. Counts are checked before anything is allocated.
MAX_GENERATED_NODES = 2**17
MAX_GENERATED_LINKS = 2**20
#: Bytes of memory per link entry while a topology is built and validated (document, links, indexes).
BYTES_PER_LINK = 2000


def _check_positive(**values: float) -> None:
    for key, value in values.items():
        if value is None or not value > 0:
            raise ValueError(f"{key} must be positive, got {value}")
        if "bandwidth" in key and not MIN_BANDWIDTH <= value <= MAX_BANDWIDTH:
            raise ValueError(f"{key} must be between {MIN_BANDWIDTH:g} and {MAX_BANDWIDTH:g} GB/s, got {value:g}")
        try:
            finite = math.isfinite(value)
        except OverflowError:
            finite = False
        if not finite:
            raise ValueError(f"{key} must be a finite number, got {value}")


def _check_latency(**values: float) -> None:
    for key, value in values.items():
        if not 0 <= value <= MAX_LATENCY:  # NaN fails too
            raise ValueError(f"{key} must be between 0 and {MAX_LATENCY:g} us, got {value}")


def _check_size(family: str, nodes: int, links: int) -> None:
    """Refuse parameters that make more nodes or links than a machine can mean or memory holds."""
    if nodes > MAX_GENERATED_NODES:
        raise ValueError(f"{family} would have {nodes} nodes; the generators build at most {MAX_GENERATED_NODES}")
    if links > MAX_GENERATED_LINKS:
        raise ValueError(f"{family} would have {links} links; the generators build at most {MAX_GENERATED_LINKS}")
    need, have = links * BYTES_PER_LINK, available_memory()
    if need > have:
        raise ValueError(
            f"{family} with {links} links needs about {need / 1e9:.1f} GB to build; {have / 1e9:.1f} GB is available"
        )


# ===================================================================================== classic
def ring(n: int, bandwidth: float = 25.0, latency: float = 0.7, *, name: str | None = None) -> Topology:
    """n ranks in a bidirectional ring (rank i linked to i±1)."""
    if n < 2:
        raise ValueError("a ring needs at least 2 ranks")
    _check_positive(bandwidth=bandwidth)
    _check_latency(latency=latency)
    _check_size("the ring", n, n)
    doc = TopologyDoc(name or f"ring{n}", f"{n} ranks in a bidirectional ring, {bandwidth:g} GB/s and {latency:g} us per link.")
    names = [doc.rank(f"r{i}") for i in range(n)]
    pairs = {tuple(sorted((i, (i + 1) % n))) for i in range(n)}
    for a, b in sorted(pairs):
        doc.link(names[a], names[b], bandwidth, latency)
    return doc.build()


def _grid(rows: int, cols: int, bandwidth: float, latency: float, wrap: bool, name: str | None) -> Topology:
    if rows < 1 or cols < 1 or rows * cols < 2:
        raise ValueError("a grid needs at least 2 ranks")
    _check_positive(bandwidth=bandwidth)
    _check_latency(latency=latency)
    _check_size("the grid", rows * cols, 2 * rows * cols)
    kind = "torus" if wrap else "mesh"
    doc = TopologyDoc(
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
    _check_latency(latency=latency)
    if dim > 62:
        raise ValueError(
            f"a hypercube of dimension {dim} would have 2**{dim} ranks; the generators build at most {MAX_GENERATED_NODES}"
        )
    _check_size("the hypercube", 1 << dim, (1 << dim) * dim // 2)
    n = 1 << dim
    doc = TopologyDoc(
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
    _check_latency(latency=latency)
    _check_size("the fully connected machine", n, n * (n - 1) // 2)
    doc = TopologyDoc(name or f"full{n}", f"{n} fully connected ranks, {bandwidth:g} GB/s and {latency:g} us per link.")
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
    if nic_bandwidth is not None:
        _check_positive(nic_bandwidth=nic_bandwidth)
    _check_latency(latency=latency, nic_latency=nic_latency, gpu_nic_latency=gpu_nic_latency)
    _check_size("the NVSwitch machine", boxes * (2 * gpus + 1) + rails, boxes * gpus * 3)
    if boxes > 1 and nic_bandwidth is None:
        raise ValueError("several boxes need --nic-bandwidth to be joined")
    doc = TopologyDoc(
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
    _check_positive(boxes=boxes, nvlink_bandwidth=nvlink_bandwidth, pcie_bandwidth=pcie_bandwidth)
    if nic_bandwidth is not None:
        _check_positive(nic_bandwidth=nic_bandwidth)
    _check_latency(nvlink_latency=nvlink_latency, nic_latency=nic_latency, pcie_latency=pcie_latency)
    _check_size("the DGX-1 machine", boxes * 10 + 1, boxes * 30)
    if boxes > 1 and nic_bandwidth is None:
        raise ValueError("several DGX-1 boxes need a NIC bandwidth")
    doc = TopologyDoc(name or ("dgx1" if boxes == 1 else f"dgx1x{boxes}"), description or "DGX-1 boxes.")
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
    _check_latency(pcie_latency=pcie_latency, inter_socket_latency=inter_socket_latency)
    total = sockets * switches_per_socket * gpus_per_switch
    _check_size("the PCIe tree", total + sockets * (switches_per_socket + 1), total + sockets * switches_per_socket + sockets**2)
    if total < 1:
        raise ValueError("no GPUs")
    doc = TopologyDoc(
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
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """Racks of NVSwitch servers: each GPU has its own NIC to its rack's top-of-rack switch; every
    top-of-rack switch has one uplink to each spine, together ``1/oversubscription`` of its
    downlink bandwidth (so 4 means 4:1 oversubscribed)."""
    _check_positive(
        racks=racks,
        servers=servers,
        gpus=gpus,
        nvlink_bandwidth=nvlink_bandwidth,
        nic_bandwidth=nic_bandwidth,
        oversubscription=oversubscription,
        spines=spines,
    )
    _check_latency(
        nvlink_latency=nvlink_latency, gpu_nic_latency=gpu_nic_latency, nic_latency=nic_latency, spine_latency=spine_latency
    )
    gpus_total = racks * servers * gpus
    _check_size("the fat-tree", 2 * gpus_total + racks * (servers + 1) + spines, 3 * gpus_total + racks * spines)
    if not MIN_BANDWIDTH <= servers * gpus * nic_bandwidth / oversubscription / spines <= MAX_BANDWIDTH:
        raise ValueError("the uplinks' bandwidth (servers x gpus x nic bandwidth / oversubscription / spines) is out of range")
    doc = TopologyDoc(
        name or f"fattree{racks}x{servers}x{gpus}",
        description
        or (
            f"{racks} rack(s) x {servers} server(s) x {gpus} GPU(s); NVSwitch at {nvlink_bandwidth:g} GB/s per GPU; "
            f"one {nic_bandwidth:g} GB/s NIC per GPU to the top-of-rack switch; {oversubscription:g}:1 to {spines} spine(s)."
        ),
    )
    uplink = servers * gpus * nic_bandwidth / oversubscription / spines
    spine_names = [doc.switch(f"spine{k}") for k in range(spines)] if racks > 1 else []
    for r in range(racks):
        tor = doc.switch(f"tor{r}")
        for k in spine_names:
            doc.link(tor, k, uplink, spine_latency)
        for s in range(servers):
            host = f"r{r}s{s}"
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


# ===================================================================================== more machines
# Families for machines nobody tuned for (issue 17): unequal link counts between GPU pairs, boxes
# with all-to-all Ethernet, rail-only and oversubscribed networks, 3-D tori, dragonflies, a 72-GPU
# NVLink domain, asymmetric PCIe; `degrade` turns any of them into a machine with one slow link, and
# `random_machine` draws one of them with its parameters from a seed.

#: the most nodes and directed links these families build (checked before anything is allocated)
FAMILY_MAX_NODES = 1 << 17
FAMILY_MAX_LINKS = 1 << 20


def _check_counts(family: str, nodes: int, links: int) -> None:
    if nodes > FAMILY_MAX_NODES:
        raise ValueError(f"{family} would have {nodes} nodes; at most {FAMILY_MAX_NODES} are built")
    if links > FAMILY_MAX_LINKS:
        raise ValueError(f"{family} would have {links} directed links; at most {FAMILY_MAX_LINKS} are built")


def _check_int(minimum: int, **values: int) -> None:
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{key} must be an integer of at least {minimum}, got {value}")


def _check_delay(**values: float) -> None:
    for key, value in values.items():
        if not 0 <= value <= 1e9:  # NaN fails too
            raise ValueError(f"{key} must be between 0 and 1e9 us, got {value}")


def _check_rate(**values: float) -> None:
    for key, value in values.items():
        if not 1e-6 <= value <= 1e9:  # NaN fails too
            raise ValueError(f"{key} must be between 1e-06 and 1e9 GB/s, got {value}")


def mi250(
    *,
    packages: int = 8,
    nodes: int = 1,
    link_bandwidth: float = 50.0,
    link_latency: float = 0.7,
    nic_bandwidth: float = 25.0,
    gpu_nic_latency: float = 0.5,
    nic_latency: float = 1.3,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """Nodes of AMD Instinct MI250/MI250X packages: two GCDs (each its own rank) per package, GCD
    pairs joined by 4, 2 or 1 Infinity Fabric (xGMI) links, so link counts between pairs differ.

    Per GCD, 7 xGMI links of ``link_bandwidth`` (50 GB/s per direction: 16 lanes at 25 GT/s, AMD
    ROCm documentation "AMD Instinct MI250 microarchitecture") join other GCDs:

    - 4 links (200 GB/s) to the other GCD of its package (OLCF Frontier User Guide: "The 2 GCDs on
      the same MI250X are connected with Infinity Fabric GPU-GPU with a peak bandwidth of 200 GB/s");
    - 2 links (100 GB/s) from GCD 0 of package p to GCD 1 of package p+1 (a ring over packages);
    - 1 link (50 GB/s) from GCD d of package p to GCD d of package p + packages/2 (the Frontier
      guide: GCDs on different MI250X are joined by 1 or 2 links, 50-100 GB/s).

    The eighth link of a GCD goes to the host CPU (36 GB/s on Frontier), not modelled: collective
    libraries do not route GPU traffic through the CPU. ``packages`` = 4 is a Frontier/LUMI node
    (8 GCDs), 8 a 16-GCD server. With ``nodes`` > 1, each package has one NIC of
    ``nic_bandwidth`` (25 GB/s = HPE Slingshot 200 Gb/s, one per MI250X on Frontier) attached to
    its GCD 0, all NICs on one network switch. The exact pairing of the single and double links on
    a real board differs; the counts per GCD (4 + 2 + 1) are the vendor's. α per xGMI link is an
    assumption (0.7 µs, as the NVLink built-ins): no vendor latency figure is public.
    """
    _check_int(2, packages=packages)
    _check_int(1, nodes=nodes)
    if packages % 2:
        raise ValueError(f"packages must be even (single links join package p and p + packages/2), got {packages}")
    _check_rate(link_bandwidth=link_bandwidth, nic_bandwidth=nic_bandwidth)
    _check_delay(link_latency=link_latency, gpu_nic_latency=gpu_nic_latency, nic_latency=nic_latency)
    _check_counts("the MI250 machine", nodes * (2 * packages + packages) + 1, nodes * packages * 12)
    gcds = 2 * packages
    doc = TopologyDoc(
        name or (f"mi250x{gcds}" if nodes == 1 else f"mi250x{gcds}n{nodes}"),
        description
        or (
            f"{nodes} node(s) of {packages} MI250-like packages ({gcds} GCDs per node); GCD pairs joined by 4, 2 or 1 "
            f"xGMI links of {link_bandwidth:g} GB/s"
            + (f"; one {nic_bandwidth:g} GB/s NIC per package on one network switch." if nodes > 1 else ".")
        ),
    )
    network = doc.switch("network") if nodes > 1 else None
    for n in range(nodes):
        prefix = f"n{n}-" if nodes > 1 else ""
        host = f"node{n}"
        gcd = [[doc.rank(f"{prefix}gpu{p}gcd{d}", host) for d in range(2)] for p in range(packages)]
        joined: list[tuple[str, str, int]] = []
        for p in range(packages):
            joined.append((gcd[p][0], gcd[p][1], 4))
            joined.append((gcd[p][0], gcd[(p + 1) % packages][1], 2))
            half = (p + packages // 2) % packages
            if p < half:
                joined.extend((gcd[p][d], gcd[half][d], 1) for d in range(2))
        for a, b, count in joined:  # never the same pair twice (packages >= 2)
            doc.link(a, b, count * link_bandwidth, link_latency)
        if network is not None:
            for p in range(packages):
                nic = doc.switch(f"{prefix}nic{p}", host)
                doc.link(gcd[p][0], nic, nic_bandwidth, gpu_nic_latency)
                doc.link(nic, network, nic_bandwidth, nic_latency)
    return doc.build()


def mi300x(
    *,
    nodes: int = 1,
    gpus: int = 8,
    link_bandwidth: float = 64.0,
    link_latency: float = 0.7,
    nic_bandwidth: float = 50.0,
    gpu_nic_latency: float = 0.5,
    nic_latency: float = 1.3,
    rails: int = 1,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """Nodes of ``gpus`` AMD Instinct MI300X-like GPUs fully connected by xGMI: one link of
    ``link_bandwidth`` between every pair, no switch.

    AMD's MI300X data sheet: 7 Infinity Fabric links per GPU at 128 GB/s peak each (both
    directions), so 64 GB/s per direction per link and 448 GB/s per GPU to its 7 peers on the
    8-GPU platform (AMD: 896 GB/s bidirectional). With ``nodes`` > 1, every GPU has its own NIC of
    ``nic_bandwidth`` (50 GB/s = 400 Gb/s, the per-GPU NIC of MI300X platforms), GPU g's NIC on
    network switch g mod ``rails``. α per xGMI link is an assumption (0.7 µs, as the NVLink
    built-ins).
    """
    _check_int(2, gpus=gpus)
    _check_int(1, nodes=nodes, rails=rails)
    _check_rate(link_bandwidth=link_bandwidth, nic_bandwidth=nic_bandwidth)
    _check_delay(link_latency=link_latency, gpu_nic_latency=gpu_nic_latency, nic_latency=nic_latency)
    _check_counts("the MI300X machine", nodes * 2 * gpus + rails, nodes * (gpus * (gpus - 1) + 4 * gpus))
    doc = TopologyDoc(
        name or (f"mi300x{gpus}" if nodes == 1 else f"mi300x{gpus}n{nodes}"),
        description
        or (
            f"{nodes} node(s) of {gpus} MI300X-like GPUs fully connected by xGMI at {link_bandwidth:g} GB/s per link"
            + (f"; one {nic_bandwidth:g} GB/s NIC per GPU on {rails} network switch(es)." if nodes > 1 else ".")
        ),
    )
    rail_names = [doc.switch(f"rail{r}") for r in range(rails)] if nodes > 1 else []
    for n in range(nodes):
        prefix = f"n{n}-" if nodes > 1 else ""
        host = f"node{n}"
        names = [doc.rank(f"{prefix}gpu{g}", host) for g in range(gpus)]
        for i in range(gpus):
            for j in range(i + 1, gpus):
                doc.link(names[i], names[j], link_bandwidth, link_latency)
        for g, gname in enumerate(names if rail_names else []):
            nic = doc.switch(f"{prefix}nic{g}", host)
            doc.link(gname, nic, nic_bandwidth, gpu_nic_latency)
            doc.link(nic, rail_names[g % rails], nic_bandwidth, nic_latency)
    return doc.build()


def gaudi(
    *,
    boxes: int = 1,
    gpus: int = 8,
    port_bandwidth: float = 25.0,
    ports_per_peer: int = 3,
    scaleout_ports: int = 3,
    port_latency: float = 1.0,
    switch_latency: float = 1.0,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """Intel Gaudi-style boxes: accelerators with integrated RoCE Ethernet ports, ``ports_per_peer``
    ports straight to each other accelerator of the box (all-to-all, no switch), and
    ``scaleout_ports`` ports to leaf switches, port i of every accelerator on leaf switch i.

    Intel Gaudi documentation, "Network Configuration": each Gaudi 3 has 21 scale-up ports and 3
    scale-out ports at 200 Gb/s (25 GB/s); 3 ports to each of the 7 other Gaudi 3 of an HLS-3 box
    (525 GB/s per direction), 75 GB/s per direction out of each Gaudi 3; Gaudi 2 is the same at
    100 Gb/s (``port_bandwidth`` 12.5). α is an assumption: 1 µs per RoCE hop (Ethernet MAC and
    PHY on both ends), 1 µs from a leaf switch.
    """
    _check_int(2, gpus=gpus)
    _check_int(1, boxes=boxes, ports_per_peer=ports_per_peer)
    _check_int(0, scaleout_ports=scaleout_ports)
    if boxes > 1 and scaleout_ports < 1:
        raise ValueError("several boxes need at least one scale-out port per accelerator")
    _check_rate(port_bandwidth=port_bandwidth)
    _check_delay(port_latency=port_latency, switch_latency=switch_latency)
    _check_counts("the Gaudi machine", boxes * gpus + scaleout_ports, boxes * gpus * (gpus - 1 + 2 * scaleout_ports))
    generation = {12.5: "Gaudi 2", 25.0: "Gaudi 3"}.get(port_bandwidth, "Gaudi-style")
    doc = TopologyDoc(
        name or (f"gaudi{gpus}" if boxes == 1 else f"gaudi{gpus}x{boxes}"),
        description
        or (
            f"{boxes} {generation} box(es) of {gpus}: {ports_per_peer} x {port_bandwidth:g} GB/s RoCE ports between every "
            f"pair in a box"
            + (f"; {scaleout_ports} scale-out port(s) per accelerator, port i on leaf switch i." if boxes > 1 else ".")
        ),
    )
    leaves = [doc.switch(f"leaf{i}") for i in range(scaleout_ports)] if boxes > 1 else []
    for b in range(boxes):
        prefix = f"b{b}-" if boxes > 1 else ""
        host = f"box{b}"
        names = [doc.rank(f"{prefix}gaudi{g}", host) for g in range(gpus)]
        for i in range(gpus):
            for j in range(i + 1, gpus):
                doc.link(names[i], names[j], ports_per_peer * port_bandwidth, port_latency)
        for gname in names if leaves else []:
            for leaf in leaves:
                doc.link(gname, leaf, port_bandwidth, switch_latency)
    return doc.build()


def multihost(
    *,
    hosts: int = 4,
    gpus: int = 8,
    fabric: str = "nvswitch",
    fabric_bandwidth: float | None = None,
    fabric_latency: float = 0.35,
    nic: str = "gpu",
    nic_bandwidth: float = 25.0,
    pcie_bandwidth: float = 24.0,
    pcie_latency: float = 0.5,
    nic_latency: float = 1.3,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """``hosts`` servers of ``gpus`` GPUs on one network switch, with a NIC per GPU or per host.

    Inside a host, ``fabric`` "nvswitch" puts the GPUs on one switch at ``fabric_bandwidth`` per
    GPU (default 300 GB/s, DGX A100's 12 NVLink3, NVIDIA DGX A100 user guide; H100: 450); "pcie"
    puts them under one PCIe switch at ``fabric_bandwidth`` per GPU (default 24 GB/s: PCIe Gen4 x16
    is 31.5 GB/s raw per direction, PCI-SIG, about 24 usable as NCCL counts it; Gen5 twice that).
    ``nic`` "gpu" gives every GPU its own NIC (reached at ``nic_bandwidth``, the DGX layout); "host"
    gives the host one NIC that every GPU reaches over PCIe at ``pcie_bandwidth`` (the NDv2 /
    cheaper-server layout, where the NIC is shared).
    ``nic_bandwidth``: 12.5, 25, 50 GB/s for 100, 200, 400 Gb/s InfiniBand or Ethernet.
    """
    _check_int(2, hosts=hosts)
    _check_int(1, gpus=gpus)
    if fabric not in ("nvswitch", "pcie"):
        raise ValueError(f"fabric must be nvswitch or pcie, got {fabric!r}")
    if nic not in ("gpu", "host"):
        raise ValueError(f"nic must be gpu or host, got {nic!r}")
    if fabric_bandwidth is None:
        fabric_bandwidth = 300.0 if fabric == "nvswitch" else 24.0
    _check_rate(fabric_bandwidth=fabric_bandwidth, nic_bandwidth=nic_bandwidth, pcie_bandwidth=pcie_bandwidth)
    _check_delay(fabric_latency=fabric_latency, pcie_latency=pcie_latency, nic_latency=nic_latency)
    _check_counts("the multi-host machine", hosts * (2 * gpus + 2) + 1, hosts * gpus * 8)
    doc = TopologyDoc(
        name or f"{fabric}{gpus}x{hosts}-nic-per-{nic}",
        description
        or (
            f"{hosts} host(s) x {gpus} GPU(s) on {'NVSwitch' if fabric == 'nvswitch' else 'a PCIe switch'} at "
            f"{fabric_bandwidth:g} GB/s per GPU; "
            + (
                f"one {nic_bandwidth:g} GB/s NIC per GPU"
                if nic == "gpu"
                else f"one {nic_bandwidth:g} GB/s NIC per host, reached over PCIe at {pcie_bandwidth:g} GB/s"
            )
            + "; all NICs on one network switch."
        ),
    )
    network = doc.switch("network")
    for h in range(hosts):
        host = f"host{h}"
        names = [doc.rank(f"h{h}-gpu{g}", host) for g in range(gpus)]
        fabric_switch = doc.switch(f"h{h}-{fabric}", host)
        for gname in names:
            doc.link(gname, fabric_switch, fabric_bandwidth, fabric_latency)
        if nic == "gpu":
            for g, gname in enumerate(names):
                nic_name = doc.switch(f"h{h}-nic{g}", host)
                doc.link(gname, nic_name, nic_bandwidth, pcie_latency)
                doc.link(nic_name, network, nic_bandwidth, nic_latency)
        else:
            nic_name = doc.switch(f"h{h}-nic", host)
            if fabric == "pcie":  # the NIC sits under the same PCIe switch as the GPUs
                doc.link(fabric_switch, nic_name, pcie_bandwidth, pcie_latency)
            else:
                for gname in names:
                    doc.link(gname, nic_name, pcie_bandwidth, pcie_latency)
            doc.link(nic_name, network, nic_bandwidth, nic_latency)
    return doc.build()


def rail_only(
    *,
    hosts: int = 4,
    gpus: int = 8,
    nvlink_bandwidth: float = 450.0,
    nvlink_latency: float = 0.35,
    nic_bandwidth: float = 50.0,
    gpu_nic_latency: float = 0.5,
    nic_latency: float = 1.3,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """A rail-only network: ``hosts`` NVSwitch servers, GPU g of every host has its NIC on rail
    switch g, and the rails are not joined (no spine). GPUs of different hosts and different
    indices reach each other only through a GPU of either host (NVLink first, then the rail).

    Wang et al., "Rail-only: A Low-Cost High-Performance Network for Training LLMs with Trillion
    Parameters" (HOTI 2024, arXiv:2307.12169) propose exactly this: drop the spine, keep the rails.
    Defaults are a DGX H100 (18 NVLink4 = 450 GB/s per GPU per direction; 8 x 400 Gb/s = 50 GB/s
    NICs, NVIDIA DGX H100 user guide).
    """
    _check_int(2, hosts=hosts)
    _check_int(1, gpus=gpus)
    return nvswitch(
        gpus,
        nvlink_bandwidth,
        nvlink_latency,
        boxes=hosts,
        nic_bandwidth=nic_bandwidth,
        nic_latency=nic_latency,
        gpu_nic_latency=gpu_nic_latency,
        rails=gpus,
        name=name or f"railonly{gpus}x{hosts}",
        description=description
        or (
            f"Rail-only network: {hosts} hosts x {gpus} GPUs on NVSwitch at {nvlink_bandwidth:g} GB/s per GPU; GPU g's "
            f"{nic_bandwidth:g} GB/s NIC on rail switch g; no spine."
        ),
    )


def fattree3(
    *,
    pods: int = 2,
    racks: int = 2,
    servers: int = 2,
    gpus: int = 8,
    nvlink_bandwidth: float = 300.0,
    nvlink_latency: float = 0.35,
    nic_bandwidth: float = 50.0,
    gpu_nic_latency: float = 0.5,
    nic_latency: float = 1.0,
    leaf_oversubscription: float = 1.0,
    spine_oversubscription: float = 1.0,
    spines: int = 2,
    cores: int = 2,
    switch_latency: float = 0.5,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """A 3-tier fat-tree: ``pods`` of ``racks`` racks of NVSwitch servers. Every GPU has a NIC to its
    rack's leaf switch; every leaf has one uplink to each of its pod's ``spines`` spine switches,
    together 1/``leaf_oversubscription`` of its downlink bandwidth; every spine has one uplink to
    each of the ``cores`` core switches, together 1/``spine_oversubscription`` of its downlinks.

    Oversubscription 1 is a non-blocking Clos; 2:1 to 8:1 at the leaves is common in Ethernet AI
    and HPC clusters (3:1 at the spine is the classic data-centre choice). NIC figures as
    `fattree` (400 Gb/s = 50 GB/s); α 0.5 µs per switch-to-switch link, a cut-through
    Ethernet/InfiniBand switch's few hundred ns plus cable.
    """
    _check_int(1, pods=pods, racks=racks, servers=servers, gpus=gpus, spines=spines, cores=cores)
    _check_rate(nvlink_bandwidth=nvlink_bandwidth, nic_bandwidth=nic_bandwidth)
    _check_positive(leaf_oversubscription=leaf_oversubscription, spine_oversubscription=spine_oversubscription)
    _check_delay(
        nvlink_latency=nvlink_latency, gpu_nic_latency=gpu_nic_latency, nic_latency=nic_latency, switch_latency=switch_latency
    )
    total = pods * racks * servers * gpus
    _check_counts(
        "the 3-tier fat-tree",
        2 * total + pods * (racks * (servers + 1) + spines) + cores,
        6 * total + 2 * pods * (racks * spines + spines * cores),
    )
    leaf_up = servers * gpus * nic_bandwidth / leaf_oversubscription / spines
    spine_up = racks * leaf_up / spine_oversubscription / cores
    _check_rate(leaf_uplink_bandwidth=leaf_up, spine_uplink_bandwidth=spine_up)
    doc = TopologyDoc(
        name or f"fattree3-{pods}x{racks}x{servers}x{gpus}",
        description
        or (
            f"3-tier fat-tree: {pods} pod(s) x {racks} rack(s) x {servers} server(s) x {gpus} GPU(s); NVSwitch at "
            f"{nvlink_bandwidth:g} GB/s per GPU; one {nic_bandwidth:g} GB/s NIC per GPU to the leaf; "
            f"{leaf_oversubscription:g}:1 leaf to {spines} spine(s) per pod, {spine_oversubscription:g}:1 spine to "
            f"{cores} core(s)."
        ),
    )
    core_names = [doc.switch(f"core{c}") for c in range(cores)] if pods > 1 else []
    for p in range(pods):
        spine_names = [doc.switch(f"p{p}-spine{s}") for s in range(spines)] if racks > 1 or pods > 1 else []
        for s in spine_names:
            for c in core_names:
                doc.link(s, c, spine_up, switch_latency)
        for r in range(racks):
            leaf = doc.switch(f"p{p}-leaf{r}")
            for s in spine_names:
                doc.link(leaf, s, leaf_up, switch_latency)
            for v in range(servers):
                host = f"p{p}r{r}s{v}"
                names = [doc.rank(f"{host}-gpu{g}", host) for g in range(gpus)]
                sw = doc.switch(f"{host}-nvswitch", host) if gpus > 1 else None
                for g, gname in enumerate(names):
                    if sw is not None:
                        doc.link(gname, sw, nvlink_bandwidth, nvlink_latency)
                    nic = doc.switch(f"{host}-nic{g}", host)
                    doc.link(gname, nic, nic_bandwidth, gpu_nic_latency)
                    doc.link(nic, leaf, nic_bandwidth, nic_latency)
    return doc.build()


def torus3d(
    x: int,
    y: int,
    z: int,
    bandwidth: float = 50.0,
    latency: float = 0.5,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """An x × y × z 3-D torus: each rank linked to its neighbours ±1 in each dimension, with
    wrap-around (a dimension of 2 gives one link pair, not two; of 1, none).

    Google's TPU v4 (Jouppi et al., "TPU v4: An Optically Reconfigurable Supercomputer for Machine
    Learning", ISCA 2023; Cloud TPU v4 documentation) wires chips as a 3-D torus (4 × 4 × 4 cubes)
    with 6 inter-chip-interconnect links per chip, 400 Gb/s = 50 GB/s each per direction;
    sub-microsecond per hop (α 0.5 µs here is an assumption in that range). Ranks are numbered
    x fastest, then y, then z.
    """
    _check_int(1, x=x, y=y, z=z)
    if x * y * z < 2:
        raise ValueError("a 3-D torus needs at least 2 ranks")
    _check_rate(bandwidth=bandwidth)
    _check_delay(latency=latency)
    _check_counts("the 3-D torus", x * y * z, 6 * x * y * z)
    doc = TopologyDoc(
        name or f"torus{x}x{y}x{z}",
        description
        or f"{x} x {y} x {z} 3-D torus (wrap-around in every dimension), {bandwidth:g} GB/s and {latency:g} us per link.",
    )
    dims = (x, y, z)
    names = {}
    for k in range(z):
        for j in range(y):
            for i in range(x):
                names[(i, j, k)] = doc.rank(f"r{i}-{j}-{k}")
    pairs: set[tuple[tuple[int, int, int], tuple[int, int, int]]] = set()
    for coord in names:
        for axis in range(3):
            if dims[axis] < 2:
                continue
            nxt = list(coord)
            nxt[axis] = (nxt[axis] + 1) % dims[axis]
            a, b = coord, tuple(nxt)
            pairs.add((a, b) if a < b else (b, a))  # type: ignore[arg-type]
    for a, b in sorted(pairs):
        doc.link(names[a], names[b], bandwidth, latency)
    return doc.build()


def dragonfly(
    *,
    groups: int = 4,
    routers: int = 4,
    ranks_per_router: int = 2,
    global_links: int = 1,
    nic_bandwidth: float = 25.0,
    local_bandwidth: float = 25.0,
    global_bandwidth: float = 25.0,
    nic_latency: float = 1.0,
    router_latency: float = 0.5,
    global_latency: float = 1.0,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """A dragonfly (Kim, Dally, Scott and Abts, ISCA 2008): ``groups`` groups of ``routers``
    routers (switch nodes), all-to-all links inside a group, ``global_links`` links between every
    pair of groups, and ``ranks_per_router`` endpoints (one GPU each, its own host) per router.

    The global links of group g are spread over its routers in turn (the link to the i-th other
    group leaves router i mod routers), so a packet between groups takes local, global, local
    hops. Figures of HPE Slingshot (the dragonfly of Frontier, Aurora and LUMI): 64-port Rosetta
    switches at 200 Gb/s = 25 GB/s per port, 200 Gb/s Cassini NICs (ALCF Aurora interconnect
    documentation; De Sensi et al., "An In-Depth Analysis of the Slingshot Interconnect", SC 2020).
    α: 0.5 µs per local (electrical) hop, 1 µs per global (optical) hop and NIC, assumptions in
    the range that paper measures.
    """
    _check_int(2, groups=groups)
    _check_int(1, routers=routers, ranks_per_router=ranks_per_router, global_links=global_links)
    _check_rate(nic_bandwidth=nic_bandwidth, local_bandwidth=local_bandwidth, global_bandwidth=global_bandwidth)
    _check_delay(nic_latency=nic_latency, router_latency=router_latency, global_latency=global_latency)
    _check_counts(
        "the dragonfly",
        groups * routers * (ranks_per_router + 1),
        2 * groups * routers * (ranks_per_router + routers) + groups * groups,
    )
    doc = TopologyDoc(
        name or f"dragonfly{groups}x{routers}x{ranks_per_router}",
        description
        or (
            f"Dragonfly: {groups} groups x {routers} routers x {ranks_per_router} endpoints; all-to-all "
            f"{local_bandwidth:g} GB/s links in a group, {global_links} x {global_bandwidth:g} GB/s between every pair "
            f"of groups; {nic_bandwidth:g} GB/s per endpoint."
        ),
    )
    router_names = [[doc.switch(f"g{g}-router{r}") for r in range(routers)] for g in range(groups)]
    for g in range(groups):
        for r in range(routers):
            for e in range(ranks_per_router):
                host = f"g{g}r{r}e{e}"
                rank = doc.rank(f"{host}-gpu", host)
                doc.link(rank, router_names[g][r], nic_bandwidth, nic_latency)
        for a in range(routers):
            for b in range(a + 1, routers):
                doc.link(router_names[g][a], router_names[g][b], local_bandwidth, router_latency)
    for g in range(groups):
        for h in range(g + 1, groups):
            # h is the (h-1)-th other group of g, g the g-th other group of h
            a, b = router_names[g][(h - 1) % routers], router_names[h][g % routers]
            doc.link(a, b, global_links * global_bandwidth, global_latency)
    return doc.build()


def nvl72(
    *,
    gpus: int = 72,
    gpus_per_tray: int = 4,
    racks: int = 1,
    nvlink_bandwidth: float = 900.0,
    nvlink_latency: float = 0.5,
    nic_bandwidth: float = 100.0,
    gpu_nic_latency: float = 0.5,
    nic_latency: float = 1.3,
    rails: int = 4,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """An NVL72-like rack: ``gpus`` GPUs on one NVLink switch domain (one switch node stands for
    the rack's NVLink switch trays), ``nvlink_bandwidth`` per GPU per direction.

    NVIDIA GB200 NVL72: 72 Blackwell GPUs in 18 compute trays of 4, all on fifth-generation NVLink
    at 1.8 TB/s per GPU (900 GB/s per direction; 130 TB/s across the rack) through 9 NVLink switch
    trays (NVIDIA GB200 NVL72 product page). All GPUs of a rack share one host name: NCCL treats
    one NVLink domain as one node (multi-node NVLink). With ``racks`` > 1 every GPU has its own NIC
    of ``nic_bandwidth`` (100 GB/s = ConnectX-8 800 Gb/s; 50 for ConnectX-7), GPU g's NIC on rail
    g mod ``rails``. α per NVLink hop: 0.5 µs (an assumption: one more switch level than a DGX).
    """
    _check_int(2, gpus=gpus)
    _check_int(1, gpus_per_tray=gpus_per_tray, racks=racks, rails=rails)
    _check_rate(nvlink_bandwidth=nvlink_bandwidth, nic_bandwidth=nic_bandwidth)
    _check_delay(nvlink_latency=nvlink_latency, gpu_nic_latency=gpu_nic_latency, nic_latency=nic_latency)
    _check_counts("the NVL72 machine", racks * (2 * gpus + 1) + rails, racks * gpus * 6)
    doc = TopologyDoc(
        name or (f"nvl{gpus}" if racks == 1 else f"nvl{gpus}x{racks}"),
        description
        or (
            f"{racks} NVL72-like rack(s) of {gpus} GPUs on one NVLink switch domain at {nvlink_bandwidth:g} GB/s per GPU"
            + (f"; one {nic_bandwidth:g} GB/s NIC per GPU on {rails} rail(s)." if racks > 1 else ".")
        ),
    )
    rail_names = [doc.switch(f"rail{r}") for r in range(rails)] if racks > 1 else []
    for k in range(racks):
        prefix = f"k{k}-" if racks > 1 else ""
        host = f"rack{k}"
        names = [doc.rank(f"{prefix}tray{g // gpus_per_tray}-gpu{g % gpus_per_tray}", host) for g in range(gpus)]
        sw = doc.switch(f"{prefix}nvlink-switch", host)
        for gname in names:
            doc.link(gname, sw, nvlink_bandwidth, nvlink_latency)
        for g, gname in enumerate(names if rail_names else []):
            nic = doc.switch(f"{prefix}nic{g}", host)
            doc.link(gname, nic, nic_bandwidth, gpu_nic_latency)
            doc.link(nic, rail_names[g % rails], nic_bandwidth, nic_latency)
    return doc.build()


def pcie_asymmetric(
    layout: tuple[tuple[int, int, float], ...] = ((0, 4, 24.0), (0, 2, 12.0), (1, 2, 24.0)),
    *,
    pcie_latency: float = 0.5,
    inter_socket_bandwidth: float = 10.0,
    inter_socket_latency: float = 1.0,
    name: str | None = None,
    description: str | None = None,
) -> Topology:
    """A PCIe server whose switches differ: ``layout`` lists (socket, GPUs, GB/s) per PCIe switch,
    so switches carry different numbers of GPUs at different speeds (a switch of 1 GPU is a GPU on
    a CPU root port), and sockets differ in GPU count. No NVLink.

    PCIe figures per direction, as NCCL counts them: Gen3 x16 12 GB/s, Gen4 x16 24 GB/s (x8 half);
    raw rates are 15.75 and 31.5 GB/s (PCI-SIG). Sockets are joined by UPI/xGMI at
    ``inter_socket_bandwidth`` (10 GB/s, NCCL's Skylake-and-later figure). A switch's uplink to
    its CPU runs at the switch's speed.
    """
    if not layout:
        raise ValueError("layout needs at least one PCIe switch")
    sockets = 0
    for entry in layout:
        if len(entry) != 3:
            raise ValueError(f"each layout entry is (socket, gpus, GB/s), got {entry!r}")
        socket, count, bandwidth = entry
        _check_int(0, socket=socket)
        _check_int(1, gpus=count)
        _check_rate(pcie_bandwidth=bandwidth)
        sockets = max(sockets, socket + 1)
    _check_rate(inter_socket_bandwidth=inter_socket_bandwidth)
    _check_delay(pcie_latency=pcie_latency, inter_socket_latency=inter_socket_latency)
    total = sum(entry[1] for entry in layout)
    if total < 2:
        raise ValueError("an asymmetric PCIe server needs at least 2 GPUs")
    used = {entry[0] for entry in layout}
    if used != set(range(sockets)):
        raise ValueError(f"sockets must be numbered 0..{sockets - 1} without gaps, got {sorted(used)}")
    _check_counts("the PCIe server", total + len(layout) + sockets, 2 * (total + len(layout) + sockets * sockets))
    shape = ", ".join(f"{count} GPU(s) at {bandwidth:g} GB/s on socket {socket}" for socket, count, bandwidth in layout)
    doc = TopologyDoc(
        name or f"pcie-asym{total}",
        description
        or f"{total} GPUs over PCIe, switches of unequal size and speed: {shape}; sockets joined at "
        f"{inter_socket_bandwidth:g} GB/s.",
    )
    cpus = [doc.switch(f"cpu{s}") for s in range(sockets)]
    gpu_id = 0
    for w, (socket, count, bandwidth) in enumerate(layout):
        sw = doc.switch(f"pcisw{w}")
        doc.link(sw, cpus[socket], bandwidth, pcie_latency)
        for _ in range(count):
            g = doc.rank(f"gpu{gpu_id}", "node0")
            gpu_id += 1
            doc.link(g, sw, bandwidth, pcie_latency)
    for a in range(sockets):
        for b in range(a + 1, sockets):
            doc.link(cpus[a], cpus[b], inter_socket_bandwidth, inter_socket_latency)
    return doc.build()


def degrade(topology: Topology, a: str, b: str, factor: float, *, name: str | None = None) -> Topology:
    """The same machine with the link between nodes ``a`` and ``b`` (both directions, merged
    parallel links included) at ``factor`` of its bandwidth: a NIC at 1/10 of its rate is
    ``factor`` 0.1 on its GPU-to-NIC or NIC-to-switch link, a torus link at 1/4 is 0.25."""
    if not 0 < factor <= 1:
        raise ValueError(f"the degradation factor must be in (0, 1], got {factor}")
    index = topology.node_index
    for end in (a, b):
        if end not in index:
            raise ValueError(f"no node named {end!r} in {topology.name}")
    u, v = index[a], index[b]
    if (u, v) not in topology.link_index and (v, u) not in topology.link_index:
        raise ValueError(f"no link between {a!r} and {b!r} in {topology.name}")
    doc = topology.to_document()
    changed = []
    for entry in doc["links"]:
        if {entry["a"], entry["b"]} == {a, b}:
            old = float(entry["bandwidth"])
            entry["bandwidth"] = json_number(float(f"{old * factor:.9g}"))
            changed.append(old)
    doc["name"] = name or f"{topology.name}-degraded"
    rate = f"1/{1 / factor:g}" if abs(1 / factor - round(1 / factor)) < 1e-9 else f"{factor:g}"
    doc["description"] = (
        f"{topology.description} Degraded: the link between {a} and {b} runs at {rate} of its rate "
        f"({max(changed):g} -> {max(changed) * factor:.6g} GB/s)."
    ).strip()
    return topology_from_document(doc, source=f"<generated {doc['name']}>")


#: Families added for issue 17, each also a ``synth topo gen KIND`` command.
MORE_FAMILIES = ("mi250", "mi300x", "gaudi", "multihost", "rail-only", "fattree3", "torus3d", "dragonfly", "nvl72", "pcie-asym")


# ===================================================================================== random machines
#: the families `random_machine` draws from (``fattree`` is the 2-tier one above)
RANDOM_FAMILIES = (
    "mi250",
    "mi300x",
    "gaudi",
    "multihost",
    "rail-only",
    "fattree",
    "fattree3",
    "torus3d",
    "dragonfly",
    "nvl72",
    "pcie-asym",
)
#: chance that a random machine has one link degraded, and the factors it is degraded by
DEGRADE_PROBABILITY = 0.3
DEGRADE_FACTORS = (0.1, 0.25, 0.5)
#: chance that a random machine may have up to `LARGE_RANKS` ranks instead of `USUAL_RANKS`
LARGE_PROBABILITY = 0.15
USUAL_RANKS = 64
LARGE_RANKS = 128
MAX_SEED = 2**63 - 1


def _pick(rng, options):
    return options[int(rng.integers(len(options)))]


def _draw_until(rng, draw, accept, family: str):
    """Draw parameters until ``accept`` holds (deterministic: the draws come from ``rng``)."""
    for _ in range(10_000):
        params = draw()
        if accept(params):
            return params
    raise RuntimeError(f"no parameters of {family} accepted")  # not reached with the ranges below


def _random_mi250(rng, limit: int, name: str) -> Topology:
    packages = _pick(rng, (4, 8))
    nodes = _pick(rng, [n for n in (1, 2, 3, 4, 6, 8) if 2 * packages * n <= limit])
    return mi250(packages=packages, nodes=nodes, nic_bandwidth=_pick(rng, (12.5, 25.0)), name=name)


def _random_mi300x(rng, limit: int, name: str) -> Topology:
    nodes = int(rng.integers(1, limit // 8 + 1))
    return mi300x(nodes=nodes, nic_bandwidth=_pick(rng, (25.0, 50.0)), rails=_pick(rng, (1, 8)), name=name)


def _random_gaudi(rng, limit: int, name: str) -> Topology:
    boxes = int(rng.integers(1, limit // 8 + 1))
    return gaudi(boxes=boxes, port_bandwidth=_pick(rng, (12.5, 25.0)), name=name)


def _random_multihost(rng, limit: int, name: str) -> Topology:
    gpus = _pick(rng, (4, 8))
    hosts = int(rng.integers(2, limit // gpus + 1))
    fabric = _pick(rng, ("nvswitch", "pcie"))
    return multihost(
        hosts=hosts,
        gpus=gpus,
        fabric=fabric,
        fabric_bandwidth=_pick(rng, (150.0, 300.0, 450.0) if fabric == "nvswitch" else (12.0, 24.0)),
        nic=_pick(rng, ("gpu", "host")),
        nic_bandwidth=_pick(rng, (12.5, 25.0, 50.0)),
        pcie_bandwidth=_pick(rng, (12.0, 24.0)),
        name=name,
    )


def _random_rail_only(rng, limit: int, name: str) -> Topology:
    gpus = _pick(rng, (4, 8))
    hosts = int(rng.integers(2, limit // gpus + 1))
    return rail_only(
        hosts=hosts,
        gpus=gpus,
        nvlink_bandwidth=_pick(rng, (300.0, 450.0)),
        nic_bandwidth=_pick(rng, (25.0, 50.0)),
        name=name,
    )


def _random_fattree(rng, limit: int, name: str) -> Topology:
    racks, servers, gpus = _draw_until(
        rng,
        lambda: (int(rng.integers(2, 5)), int(rng.integers(1, 5)), _pick(rng, (1, 2, 4, 8))),
        lambda p: 8 <= p[0] * p[1] * p[2] <= limit,
        "fattree",
    )
    return fattree(
        racks=racks,
        servers=servers,
        gpus=gpus,
        nvlink_bandwidth=_pick(rng, (300.0, 450.0)),
        nic_bandwidth=_pick(rng, (25.0, 50.0)),
        oversubscription=_pick(rng, (1.0, 2.0, 3.0, 4.0, 8.0)),
        spines=_pick(rng, (1, 2, 4)),
        name=name,
    )


def _random_fattree3(rng, limit: int, name: str) -> Topology:
    pods, racks, servers, gpus = _draw_until(
        rng,
        lambda: (int(rng.integers(2, 4)), int(rng.integers(2, 4)), int(rng.integers(1, 3)), _pick(rng, (1, 2, 4, 8))),
        lambda p: 8 <= p[0] * p[1] * p[2] * p[3] <= limit,
        "fattree3",
    )
    return fattree3(
        pods=pods,
        racks=racks,
        servers=servers,
        gpus=gpus,
        nic_bandwidth=_pick(rng, (25.0, 50.0)),
        leaf_oversubscription=_pick(rng, (1.0, 2.0, 4.0, 8.0)),
        spine_oversubscription=_pick(rng, (1.0, 2.0, 4.0)),
        spines=_pick(rng, (1, 2)),
        cores=_pick(rng, (1, 2)),
        name=name,
    )


def _random_torus3d(rng, limit: int, name: str) -> Topology:
    dims = _draw_until(
        rng,
        lambda: tuple(_pick(rng, (2, 3, 4, 5, 6)) for _ in range(3)),
        lambda d: 8 <= d[0] * d[1] * d[2] <= limit,
        "torus3d",
    )
    return torus3d(*dims, bandwidth=_pick(rng, (50.0, 100.0)), latency=_pick(rng, (0.5, 1.0)), name=name)


def _random_dragonfly(rng, limit: int, name: str) -> Topology:
    groups, routers, per_router = _draw_until(
        rng,
        lambda: (int(rng.integers(3, 9)), int(rng.integers(2, 5)), int(rng.integers(1, 5))),
        lambda p: 8 <= p[0] * p[1] * p[2] <= limit,
        "dragonfly",
    )
    port = _pick(rng, (25.0, 50.0))
    return dragonfly(
        groups=groups,
        routers=routers,
        ranks_per_router=per_router,
        global_links=_pick(rng, (1, 2)),
        nic_bandwidth=port,
        local_bandwidth=port,
        global_bandwidth=port,
        name=name,
    )


def _random_nvl72(rng, limit: int, name: str) -> Topology:
    return nvl72(gpus=_pick(rng, (36, 72)), name=name)


def _random_pcie_asym(rng, limit: int, name: str) -> Topology:
    def draw():
        sockets = int(rng.integers(1, 3))
        return tuple(
            (s, int(rng.integers(1, 5)), _pick(rng, (12.0, 24.0))) for s in range(sockets) for _ in range(int(rng.integers(1, 4)))
        )

    layout = _draw_until(rng, draw, lambda lay: 4 <= sum(e[1] for e in lay) <= 16, "pcie-asym")
    return pcie_asymmetric(layout, name=name)


_RANDOM_DRAWS = {
    "mi250": _random_mi250,
    "mi300x": _random_mi300x,
    "gaudi": _random_gaudi,
    "multihost": _random_multihost,
    "rail-only": _random_rail_only,
    "fattree": _random_fattree,
    "fattree3": _random_fattree3,
    "torus3d": _random_torus3d,
    "dragonfly": _random_dragonfly,
    "nvl72": _random_nvl72,
    "pcie-asym": _random_pcie_asym,
}


def random_family(seed: int) -> str:
    """The family `random_machine` draws for ``seed`` when none is given."""
    import numpy as np

    _check_seed(seed)
    return RANDOM_FAMILIES[int(np.random.default_rng([seed]).integers(len(RANDOM_FAMILIES)))]


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"the seed must be an integer from 0 to {MAX_SEED}, got {seed!r}")


def random_machine(seed: int, family: str | None = None) -> Topology:
    """A random machine of ``family`` (default: drawn from the seed, `random_family`), its sizes and
    link figures drawn from the ranges of the vendor figures in each family's docstring: mostly 8
    to 64 ranks, with probability `LARGE_PROBABILITY` up to 128; with probability
    `DEGRADE_PROBABILITY` one link (a GPU's NIC, an NVLink, a torus link, an uplink...) runs at 1/10,
    1/4 or 1/2 of its rate (`degrade`).

    Deterministic: the same seed and family give a byte-identical topology file (numpy's
    ``default_rng`` seeded with (seed, family index); ``random_machine(s)`` is
    ``random_machine(s, random_family(s))``). The machine is named ``random-FAMILY-SEED``.
    """
    import numpy as np

    _check_seed(seed)
    if family is None:
        family = random_family(seed)
    if family not in RANDOM_FAMILIES:
        raise ValueError(f"unknown random family {family!r} (known: {', '.join(RANDOM_FAMILIES)})")
    rng = np.random.default_rng([seed, RANDOM_FAMILIES.index(family)])
    limit = LARGE_RANKS if rng.random() < LARGE_PROBABILITY else USUAL_RANKS
    name = f"random-{family}-{seed}"
    topology = _RANDOM_DRAWS[family](rng, limit, name)
    if rng.random() < DEGRADE_PROBABILITY:
        pairs = sorted({(min(lk.src, lk.dst), max(lk.src, lk.dst)) for lk in topology.links})
        u, v = pairs[int(rng.integers(len(pairs)))]
        factor = _pick(rng, DEGRADE_FACTORS)
        topology = degrade(topology, topology.node_name(u), topology.node_name(v), factor, name=name)
    doc = topology.to_document()
    doc["description"] = f"Random machine (synth topo gen random --seed {seed} --family {family}): {topology.description}"
    return topology_from_document(doc, source=f"<generated {name}>")
