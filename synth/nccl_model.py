"""NCCL's own analytic cost model, as a reference line: what NCCL's tuner would predict for its Ring
and Tree algorithms with the LL, LL128 and Simple protocols, and which one it would pick.

This is a *model*, not a schedule: nothing here is verified or simulated. It follows
``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` in NCCL's ``src/graph/tuning.cc`` (2.19 and
later; github.com/NVIDIA/nccl), with that file's constants. For an algorithm ``a``, protocol ``p`` and a call of ``size``
bytes (the nccl-tests size, as NCCL's ``nBytes``)::

    time = latency(a, p) + size / algBw(a, p)          (µs; GB/s = 1e3 bytes/µs)

    latency(ring)  = base + (steps − interSteps) · max(intraLat, netOverhead) + interSteps · interLat
    latency(tree)  = base + 2 · ((R/N − 1) · intraLat + ⌊log2 N⌋ · interLat)          (allreduce)
    algBw(ring)    = busBw · R / steps,   algBw(tree) = busBw / 2
    busBw          = channels · per-channel bandwidth, then the protocol's factors and caps

with R ranks on N hosts, steps = 2(R − 1) for allreduce, R − 1 for allgather and reduce-scatter, R
for broadcast and reduce (whose ring latency is one step when all channels share a ring order, else
``steps`` steps). Tree serves allreduce only, as in NCCL. The tuner picks the fastest enabled pair.

Where NCCL measures its machine, this module reads the topology file; every simplification:

- **Channels and their bandwidth** come from our ring channels (`synth.algorithms.engines.ring_channels`), the
  rings the ``multiring`` method runs: NCCL's search also packs rings over disjoint link capacity.
  NCCL's search settles on per-channel speeds around one NVLink, so each of our rings is counted as
  ⌈its bandwidth / 25 GB/s⌉ NCCL channels of equal share (at most 32): a DGX A100's one ring over
  NVSwitch at 300 GB/s is 12 channels of 25 GB/s, as NCCL's 12 (×20 GB/s) ring channels. The
  channel count matters only for the per-channel caps of LL128 and Tree.
- NCCL uses the intra-node ring speed on up to two nodes and the inter-node speed beyond; our ring
  bandwidth is already the end-to-end bottleneck, so we use it in both cases.
- **Tree** uses the same channels and per-channel bandwidth as the ring (NCCL searches a separate
  tree graph, usually with the same result on these machines); NCCL's extra 0.85 for a plain
  ``TREE`` pattern is not applied (NVLink machines get balanced trees).
- **Hardware class** of the intra-host hops: NVLink if every intra-host ring hop is a direct
  rank-to-rank link or goes through a switch whose name contains ``nvswitch`` or ``nvlink``, else
  PCI; hops between hosts are NET. N is the number of hosts (ranks without a host: one node).
- **GPU generation** (``arch``: volta, ampere, hopper, blackwell) selects NCCL's per-channel caps;
  topology files do not say it, so it is guessed from the name and description (V100, DGX-1,
  DGX-2 → volta; H100/H200 → hopper; B200/GB200 → blackwell; else ampere). Pass it to override.
- Multi-node LL caps use NCCL's Intel-CPU row; the network post overhead is NCCL's Intel default
  (1 µs, ×3 for Simple); ``latencyInter`` (a network plugin's extra latency) is 0.
- **LL128** is enabled when the intra-host hops are NVLink (NCCL also requires the NIC to be close
  to the GPU on PCIe, which we assume for GPU-attached NICs).
- NVLS, CollNet and PAT are not modelled (they need NVSwitch multicast, SHARP switches or one GPU
  per node); neither is NCCL's choice of fewer channels and threads for small messages.
- Kept from NCCL as is: the LL/LL128/Tree bandwidth factors and caps, the tree correction factors
  for medium sizes, the ring "plateau" latency factor of multi-node Simple allreduce.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from synth.algorithms.engines.ring_channels import RingChannels, ring_channels
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.routing import router_for
from synth.topology import Topology

LABEL = "NCCL model (analytic, not a schedule)"

ALGORITHMS = ("tree", "ring")
PROTOCOLS = ("LL", "LL128", "Simple")
ARCHES = ("volta", "ampere", "hopper", "blackwell")
KINDS = frozenset({Kind.BROADCAST, Kind.REDUCE, Kind.ALLGATHER, Kind.REDUCE_SCATTER, Kind.ALLREDUCE})

#: base latency (µs) by algorithm, protocol (LL, LL128, Simple)
BASE_LATENCY = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
#: per-step latency (µs) by hardware class, algorithm, protocol
HW_LATENCY = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
#: caps by generation, for 1 / 2 / more nodes (GB/s): LL total, per-channel ring LL128, tree LL128, tree
LL_MAX_BW = {
    "volta": (39.0, 39.0, 20.4),
    "ampere": (87.7, 22.5, 19.0),
    "hopper": (141.0, 45.0, 35.0),
    "blackwell": (282.0, 90.0, 70.0),
}
PER_CHANNEL_RING_LL128 = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 36.7),
    "blackwell": (73.4, 73.4, 73.4),
}
PER_CHANNEL_TREE_LL128 = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 29.0),
    "blackwell": (73.4, 73.4, 58.0),
}
PER_CHANNEL_TREE = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (38.7, 41.4, 36.0),
    "blackwell": (77.4, 82.8, 72.0),
}
#: tree bandwidth correction for allreduce by ⌊log2(size / 64)⌋ = 0 … 22, per protocol
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0),
    "Simple": (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9),
}
NET_OVERHEAD_US = 1.0
CHANNEL_SPEED = 25.0
MAX_CHANNELS = 32


@dataclass(frozen=True)
class ModelInputs:
    """What the model reads from the topology (see the module docstring)."""

    ranks: int
    nodes: int
    channels: int
    channel_bandwidth: float
    intra_hw: str
    arch: str
    same_channels: bool


@dataclass(frozen=True)
class NcclPrediction:
    """One algorithm/protocol: its latency and bandwidth terms and the predicted time per size."""

    algorithm: str
    protocol: str
    latency_us: float
    bandwidth_gbps: float  # algBw before the tree's size-dependent correction
    sizes: tuple[int, ...]
    times_us: tuple[float, ...]

    @property
    def name(self) -> str:
        return f"{self.algorithm}/{self.protocol}"


@dataclass(frozen=True)
class NcclChoice:
    """The tuner's pick for one size."""

    size: int
    algorithm: str
    protocol: str
    time_us: float

    @property
    def name(self) -> str:
        return f"{self.algorithm}/{self.protocol}"


def guess_arch(topology: Topology) -> str:
    """GPU generation from the topology's name and description (see the module docstring)."""
    text = f"{topology.name} {topology.description}".lower()
    if any(key in text for key in ("v100", "dgx-1", "dgx1", "dgx-2", "dgx2", "ndv2", "volta")):
        return "volta"
    if any(key in text for key in ("h100", "h200", "hopper")):
        return "hopper"
    if any(key in text for key in ("b200", "gb200", "blackwell")):
        return "blackwell"
    return "ampere"


def _intra_hw(topology: Topology, plan: RingChannels) -> str:
    hosts = topology.hosts
    for ring, routes in zip(plan.rings, plan.routes):
        for i, via in enumerate(routes):
            a, b = ring[i], ring[(i + 1) % len(ring)]
            if hosts[a] != hosts[b]:
                continue
            if via is None:
                return "pci"
            if any("nvswitch" not in name.lower() and "nvlink" not in name.lower() for name in via):
                return "pci"
    return "nvlink"


def model_inputs(topology: Topology, arch: str | None = None) -> ModelInputs:
    """Ranks, nodes, channels, per-channel bandwidth, hardware class and generation for the model."""
    if arch is not None and arch not in ARCHES:
        raise NotApplicable(f"unknown GPU generation {arch!r} (known: {', '.join(ARCHES)})")
    if topology.num_ranks < 2:
        raise NotApplicable("NCCL's cost model needs at least two ranks")
    plan = ring_channels(topology, router_for(topology))
    hosts = topology.host_groups
    nodes = 1 if None in hosts else len(hosts)
    channels = min(MAX_CHANNELS, plan.channels * max(1, math.ceil(plan.channel_bandwidth / CHANNEL_SPEED - 1e-9)))
    return ModelInputs(
        ranks=topology.num_ranks,
        nodes=nodes,
        channels=channels,
        channel_bandwidth=plan.total_bandwidth / channels,
        intra_hw=_intra_hw(topology, plan),
        arch=arch or guess_arch(topology),
        same_channels=plan.same_order,
    )


def _log2i(value: int) -> int:
    return value.bit_length() - 1 if value > 0 else 0


def _steps(kind: Kind, ranks: int) -> int:
    if kind is Kind.ALLREDUCE:
        return 2 * (ranks - 1)
    if kind in (Kind.ALLGATHER, Kind.REDUCE_SCATTER):
        return ranks - 1
    return ranks


def _terms(kind: Kind, algorithm: str, protocol: str, m: ModelInputs) -> tuple[float, float] | None:
    """(latency µs, algBw GB/s) for one algorithm/protocol, or None where NCCL disables it."""
    p = PROTOCOLS.index(protocol)
    level = 0 if m.nodes == 1 else 1 if m.nodes == 2 else 2
    if algorithm == "tree" and kind is not Kind.ALLREDUCE:
        return None
    if protocol == "LL128" and m.intra_hw != "nvlink":
        return None
    steps = _steps(kind, m.ranks)
    bus = m.channels * m.channel_bandwidth
    ll_max = LL_MAX_BW[m.arch if m.nodes == 1 else "volta"][level]
    if algorithm == "ring":
        if protocol == "LL":
            bus = min(ll_max, bus * 0.5)
        elif protocol == "LL128":
            bus = min(bus * 0.92, m.channels * PER_CHANNEL_RING_LL128[m.arch][level])
        algbw = bus * m.ranks / steps
    else:
        bus = min(bus * 0.92, m.channels * PER_CHANNEL_TREE[m.arch][level])
        if protocol == "LL":
            bus = min(bus / 3.8, ll_max)
        elif protocol == "LL128":
            bus = min(bus * (7.0 / 9.0 if m.nodes == 1 else 120.0 / 128.0), m.channels * PER_CHANNEL_TREE_LL128[m.arch][level])
        algbw = bus * 0.5
    latency = BASE_LATENCY[algorithm][p]
    intra = HW_LATENCY[m.intra_hw][algorithm][p]
    ppn = m.ranks / m.nodes
    inter = HW_LATENCY["net"]["tree" if ppn == 1 else algorithm][p]
    if algorithm == "ring":
        if kind in (Kind.BROADCAST, Kind.REDUCE):
            hw = m.intra_hw if m.nodes == 1 else "net"
            step = HW_LATENCY[hw]["ring"][p]
            if m.same_channels:
                latency += step
            else:
                if protocol == "Simple":
                    step = HW_LATENCY[hw]["tree"][p]
                latency += steps * step
        else:
            overhead = 0.0 if m.nodes == 1 else NET_OVERHEAD_US * (3 if protocol == "Simple" else 1)
            intra = max(intra, overhead)
            inter_steps = 0 if m.nodes == 1 else 2 * (m.nodes - 1) if kind is Kind.ALLREDUCE else m.nodes - 1
            latency += (steps - inter_steps) * intra + inter_steps * inter
    else:
        latency += 2 * ((m.ranks // m.nodes - 1) * intra + _log2i(m.nodes) * inter)
    return latency, algbw


def _time(kind: Kind, algorithm: str, protocol: str, latency: float, algbw: float, size: int, m: ModelInputs) -> float:
    bw = algbw
    if algorithm == "tree" and kind is Kind.ALLREDUCE:
        log_size = _log2i(size >> 6)
        if log_size < len(TREE_CORRECTION[protocol]):
            bw *= TREE_CORRECTION[protocol][log_size]
    lat = latency
    if (
        algorithm == "ring"
        and protocol == "Simple"
        and m.nodes > 1
        and kind is Kind.ALLREDUCE
        and size / (m.channels * m.ranks) >= 64
    ):
        lat *= 1.9 if m.arch == "volta" else 1.4  # NCCL's "plateau effect of ring"
    return lat + size / (1e3 * bw)


def _check(topology: Topology, kind: Kind) -> None:
    if kind not in KINDS:
        names = ", ".join(sorted(k.value for k in KINDS))
        raise NotApplicable(f"NCCL's cost model covers {names}; not {kind.value}")
    if topology.num_ranks < 2:
        raise NotApplicable("NCCL's cost model needs at least two ranks")


def nccl_model(topology: Topology, kind: Kind | str, sizes: Sequence[int], *, arch: str | None = None) -> list[NcclPrediction]:
    """NCCL's predicted time for every enabled algorithm/protocol at each size (µs)."""
    kind = Kind(kind)
    _check(topology, kind)
    m = model_inputs(topology, arch)
    out = []
    for algorithm in ALGORITHMS:
        for protocol in PROTOCOLS:
            terms = _terms(kind, algorithm, protocol, m)
            if terms is None:
                continue
            latency, algbw = terms
            times = tuple(_time(kind, algorithm, protocol, latency, algbw, int(s), m) for s in sizes)
            out.append(NcclPrediction(algorithm, protocol, latency, algbw, tuple(int(s) for s in sizes), times))
    return out


def nccl_model_best(topology: Topology, kind: Kind | str, sizes: Sequence[int], *, arch: str | None = None) -> list[NcclChoice]:
    """The tuner's choice per size: the fastest enabled algorithm/protocol (first in NCCL's order
    tree, ring × LL, LL128, Simple on ties)."""
    predictions = nccl_model(topology, kind, sizes, arch=arch)
    choices = []
    for i, size in enumerate(sizes):
        best = min(predictions, key=lambda p: p.times_us[i])
        choices.append(NcclChoice(int(size), best.algorithm, best.protocol, best.times_us[i]))
    return choices
