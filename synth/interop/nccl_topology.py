"""An NCCL topology dump (``NCCL_TOPO_DUMP_FILE``, ``NCCL_TOPO_FILE``) → a `synth` topology.

NCCL writes what it detected as ``<system>``: CPUs (NUMA nodes) holding a PCIe tree of ``<pci>``
devices (bridges, GPUs, NICs), GPUs with their ``<nvlink>`` rows, NICs with their ``<net>`` ports.
This module reads it the way NCCL does (``src/graph/topo.cc``, ``xml.cc``, ``paths.cc``) and
builds a topology with NCCL's own figures:

- **GPUs** are ranks, ordered by their ``rank`` attribute (``dev`` when ranks are missing or
  repeated).
- **PCIe**: every ``<pci>`` bridge is a switch node; each device is linked to its parent at
  ``link_width × per-lane / 80`` GB/s, per lane 15, 30, 60, 120, 240, 480 for 2.5 … 64 GT/s
  (NCCL's table, matched on the text's beginning: the old ``"16 GT/s"`` and new
  ``"16.0 GT/s PCIe"`` kernel spellings). α 0.5 µs per PCIe link.
- **CPUs** are switch nodes, every pair joined by the inter-socket link NCCL assumes for the CPU:
  Intel by model (Broadwell and older 6, Skylake 10, Sapphire Rapids 22, Emerald and Granite
  Rapids 40 GB/s), AMD by family (Zen 1/2 16, Zen 3/4 24, Zen 5 32), POWER9 32, ARM 6; α 1 µs.
  A dump whose ``<cpu>`` elements carry several ``host_hash`` values (NCCL sees several hosts)
  is imported as one host, with a warning.
- **NVLink**: per link by GPU generation (``sm``): 60 → 18, 70 → 20, 80 → 20, 86 → 12,
  90 → 20.6, 100 → 40.1 GB/s. Rows whose target is an NVSwitch (``tclass 0x068000``) go to one
  switch node per host standing for all NVSwitch chips, at ``count`` × per-link (the rows add up:
  12 links on an HGX A100, 18 on an H100 or on the B200 VM's single hidden target); α 0.35 µs per
  link. Rows whose target is another GPU (``tclass 0x03…``, DGX-1, NVLink bridges) are directed
  GPU-to-GPU links of ``count`` × per-link; α 0.7 µs. ``<c2c>`` (Grace) joins a GPU to its CPU at
  ``count × bw / 1000`` GB/s, as NCCL reads it.
- **NICs**: a ``<nic>`` (under its PCIe device, or directly under a CPU) is a switch node; its
  ports' ``speed`` (Mb/s) add up to its network bandwidth (÷ 8000 for GB/s). A NIC directly under a
  CPU is linked to it at that bandwidth.

**Figures NCCL does not take as written**, taken the way NCCL takes them, each kind with one
warning line that names the elements: a ``link_width`` that is ``0``, empty or missing counts as
16 lanes; a ``link_speed`` that is empty, missing or not in NCCL's table counts as 8 GT/s per lane
(Gen3); a port ``speed`` that is missing or not positive counts as 10 Gb/s; a ``<net>`` without
``dev`` is left out. What NCCL would misread (it reads numbers with C's ``strtol``, so
``count="1e12"`` is one NVLink and ``link_width="x"`` is 16 lanes) is refused instead
(`InputError`, exit 2): a ``link_width`` that is not a lane count of 0 … 32, an NVLink ``count``
that is not a whole number, rows adding up to more NVLinks than NCCL's own detection gives a GPU
of that generation (4, 6, 12 and 18 from sm 60, 70, 80, 90 on), a port ``speed`` that is not a
whole number.

**Virtual machines' bridges.** A hypervisor's emulated PCIe port reports one lane at 2.5 GT/s
(0.1875 GB/s) whatever sits behind it, while the GPU and NIC passed through beneath it report
their own links (32 GT/s on an H100). NCCL computes 0.1875 GB/s for such a bridge and plans with
it, but its traffic never needs it on those machines: a GPU and the NIC beside it exchange data
under the bridge (GPU Direct RDMA), GPUs talk over NVLink, and a GPU reaches another rail's NIC
through the GPU next to it (PXN). synth routes through switches only, so such a link would put
every path that crosses it at 0.1875 GB/s. A bridge whose own link has one lane and is slower than
a device link directly beneath it is therefore counted at the fastest of those device links (the
GPU/NIC pair behind one switch port, as on the host), with a warning; ``virtual_bridges="dumped"``
keeps NCCL's figure.

``hosts`` > 1 replicates the machine (hosts ``node0`` …, names prefixed ``n0-`` …) and joins the
NICs through the network: one switch for all NICs (``network="single"``), or one switch per rail
(``"rails"``: the i-th NIC of every host on rail switch i, as rail-optimized clusters are cabled;
rails are not joined to each other); α 1.3 µs NIC to switch. With one host the NICs lead nowhere.

The XML is read with bounded depth, element count and size and without document type
declarations (so without entities, internal or external); elements NCCL's format has but synth
does not use, and unknown elements, are skipped with a warning; malformed XML or a missing
essential attribute is an `InputError` naming the element.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat

from synth.errors import InputError
from synth.fileio import read_text_file
from synth.generators import TopologyDoc
from synth.routing import ring_order, router_for
from synth.topology import Topology

PCIE_LATENCY = 0.5
INTER_CPU_LATENCY = 1.0
NVSWITCH_LATENCY = 0.35
NVLINK_LATENCY = 0.7
NIC_NETWORK_LATENCY = 1.3

#: Per-lane PCIe speed in units of 100 Mb/s, NCCL's table in NCCL's order (``kvDictPciGen``): the
#: first entry the text starts with wins; the old kernel spelling has no 64 GT/s.
PCIE_LANE_SPEED = (
    ("2.5 GT/s", 15),
    ("5 GT/s", 30),
    ("8 GT/s", 60),
    ("16 GT/s", 120),
    ("32 GT/s", 240),
    ("2.5 GT/s PCIe", 15),
    ("5.0 GT/s PCIe", 30),
    ("8.0 GT/s PCIe", 60),
    ("16.0 GT/s PCIe", 120),
    ("32.0 GT/s PCIe", 240),
    ("64.0 GT/s PCIe", 480),
)
#: NCCL's per-lane figure for a speed it cannot read (Gen3), and its lane count for width 0.
PCIE_FALLBACK_LANE_SPEED = 60
PCIE_FALLBACK_WIDTH = 16
#: PCIe links have at most 32 lanes.
PCIE_MAX_WIDTH = 32
#: NCCL's figure (Mb/s) for a port whose speed is missing or not positive.
NET_FALLBACK_SPEED_MBPS = 10_000

TCLASS_NVSWITCH = "0x068000"
TCLASS_CPU = "0x068001"

#: Bounds of what the reader accepts. NCCL's own reader holds 256 elements; its dumps nest about
#: eight deep (system, cpu, a few PCIe switch levels, pci, gpu, nvlink).
MAX_XML_BYTES = 8 << 20
MAX_XML_DEPTH = 64
MAX_XML_ELEMENTS = 20_000


def nvlink_bandwidth_for_sm(sm: int) -> float:
    """GB/s per NVLink per direction that NCCL assumes for a GPU of compute capability ``sm``."""
    if sm < 70:
        return 18.0
    if sm < 80:
        return 20.0
    if sm == 86:
        return 12.0
    if sm < 90:
        return 20.0
    if sm < 100:
        return 20.6
    return 40.1


def max_nvlinks_for_sm(sm: int) -> int:
    """The most NVLinks NCCL's own detection gives a GPU of compute capability ``sm``."""
    if sm < 60:
        return 0
    if sm < 70:
        return 4
    if sm < 80:
        return 6
    if sm < 90:
        return 12
    return 18


@dataclass(frozen=True)
class PcieLink:
    """A ``<pci>`` element's link as NCCL counts it, and which figures were NCCL's fallbacks."""

    bandwidth: float  # GB/s per direction
    width: int  # lanes counted
    lane_speed: int  # per lane, 100 Mb/s units
    width_fallback: bool  # link_width was 0, empty or missing: 16 lanes
    speed_fallback: bool  # link_speed was empty, missing or not in NCCL's table: Gen3


def pcie_link(link_speed: str | None, link_width: str | None) -> PcieLink:
    """A link from a ``<pci>`` element's ``link_speed`` and ``link_width``, as NCCL reads them.

    Raises ValueError (with the reason) for a width that is not a lane count 0 … 32, which NCCL
    would read as something else (``strtol``: ``"x"`` is 0, so 16 lanes)."""
    text = (link_width or "").strip()
    if text == "":
        width, width_fallback = PCIE_FALLBACK_WIDTH, True
    elif re.fullmatch(r"[0-9]{1,6}", text) is None:
        raise ValueError("expected a lane count (a whole number, 0 when unknown)")
    else:
        width = int(text)
        if width > PCIE_MAX_WIDTH:
            raise ValueError(f"a PCIe link has at most {PCIE_MAX_WIDTH} lanes")
        width_fallback = width == 0
        if width_fallback:
            width = PCIE_FALLBACK_WIDTH
    speed = link_speed or ""
    lane = next((value for prefix, value in PCIE_LANE_SPEED if speed.startswith(prefix)), None)
    speed_fallback = lane is None
    if lane is None:
        lane = PCIE_FALLBACK_LANE_SPEED
    return PcieLink(_gbps(width * lane / 80.0), width, lane, width_fallback, speed_fallback)


def pcie_bandwidth(link_speed: str | None, link_width: str | None) -> float:
    """GB/s of a ``<pci>`` element's link, as NCCL computes it (see `pcie_link`)."""
    return pcie_link(link_speed, link_width).bandwidth


def inter_cpu_bandwidth(arch: str, vendor: str, family: int | None, model: int | None) -> tuple[float, str]:
    """(GB/s, what NCCL calls it) for the link between two CPU sockets of this kind."""
    arch = arch.lower()
    if arch.startswith("ppc"):
        return 32.0, "POWER9"
    if arch.startswith("arm") or arch.startswith("aarch"):
        return 6.0, "ARM"
    if vendor == "GenuineIntel":
        if family == 6 and model is not None:
            # Granite Rapids (0xAD, 0xAE) and Sierra Forest (0xAF) are newer than their model numbers say
            if model >= 0xCF or model in (0xAD, 0xAE, 0xAF):
                return 40.0, "Intel Emerald Rapids UPI"
            if model >= 0x8F:
                return 22.0, "Intel Sapphire Rapids UPI"
            if model >= 0x55:
                return 10.0, "Intel Skylake-or-later UPI"
        return 6.0, "Intel Broadwell QPI"
    if vendor == "AuthenticAMD":
        # CPUID families 23 (Zen 1/2), 25 (Zen 3/4), 26 (Zen 5); 0x8F, 0xAF, 0xBF as older NCCL wrote them
        if family in (26, 0xBF):
            return 32.0, "AMD Zen 5 Infinity Fabric"
        if family in (25, 0xAF):
            return 24.0, "AMD Zen 3/4 Infinity Fabric"
        return 16.0, "AMD Infinity Fabric"
    if vendor in ("CentaurHauls", "  Shanghai  "):
        return 6.0, "Zhaoxin ZPI"
    return 10.0, "unknown CPU (assumed 10 GB/s)"


def _gbps(value: float) -> float:
    """Bandwidths rounded to 1e-9 GB/s so that sums of per-link figures compare equal."""
    return round(value, 9)


def _busid_key(text: str) -> tuple:
    """Bus ids compared as numbers, so ``0000:0c:00.0`` and ``0:c:0.0`` are one device."""
    try:
        domain_bus, devfn = text.strip().lower().rsplit(":", 1)
        domain, bus = domain_bus.split(":") if domain_bus.count(":") == 1 else ("0", domain_bus)
        dev, fn = devfn.split(".")
        return (int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16))
    except ValueError:
        return (text.strip().lower(),)


# ================================================================================ the XML reader
class _Refused(Exception):
    """Raised inside the expat handlers to stop reading at once, with where the reader was."""

    def __init__(self, reason: str, line: int, column: int):
        super().__init__(reason)
        self.reason, self.line, self.column = reason, line, column


def parse_nccl_xml(text: str, source: str) -> ET.Element:
    """The element tree of an NCCL dump, read with bounded size, depth and element count and
    without a document type declaration (NCCL's files have none; refusing it refuses every entity,
    internal or external, before anything is expanded). Text content is ignored, as NCCL does."""
    if len(text) > MAX_XML_BYTES:
        reason = f"larger than {MAX_XML_BYTES >> 20} MiB: not an NCCL topology dump (those are kilobytes)"
        raise InputError(source, "", None, reason, show_value=False)
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[ET.Element] = []
    roots: list[ET.Element] = []
    count = 0

    def refuse(reason: str) -> _Refused:
        return _Refused(reason, parser.CurrentLineNumber, parser.CurrentColumnNumber + 1)

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal count
        count += 1
        if len(stack) >= MAX_XML_DEPTH:
            raise refuse(f"<{tag}> nested deeper than {MAX_XML_DEPTH} elements (NCCL's dumps nest about 8 deep)")
        if count > MAX_XML_ELEMENTS:
            raise refuse(f"more than {MAX_XML_ELEMENTS} elements (NCCL's own reader holds 256)")
        elem = ET.Element(tag, attrs)
        if stack:
            stack[-1].append(elem)
        else:
            roots.append(elem)
        stack.append(elem)

    def end(tag: str) -> None:
        stack.pop()

    def doctype(*_args) -> None:
        raise refuse("a document type declaration (<!DOCTYPE>): NCCL's dumps have none, and its entities are not read")

    def entity(*_args) -> None:
        raise refuse("an entity declaration: NCCL's dumps have none")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = entity
    try:
        parser.Parse(text, True)
    except _Refused as exc:
        raise InputError(
            source, f"line {exc.line} column {exc.column}", None, f"refused: {exc.reason}", show_value=False
        ) from None
    except expat.ExpatError as exc:
        reason = expat.errors.messages.get(exc.code, str(exc))
        where = f"line {exc.lineno} column {exc.offset + 1}"
        raise InputError(source, where, None, f"malformed XML ({reason})", show_value=False) from None
    return roots[0]


# ======================================================================================== model
@dataclass
class _Gpu:
    busid: str
    rank: int | None
    dev: int | None
    sm: int
    parent: str  # node name (host-local) of the PCIe parent
    pcie: float
    cpu: str
    nvlinks: list[tuple[str, int, str]] = field(default_factory=list)  # (target busid, count, tclass)
    c2c: float = 0.0  # GB/s to its CPU over C2C (Grace)
    name: str = ""


@dataclass
class _Nic:
    name: str
    parent: str
    uplink: float  # GB/s to the parent
    speed: float  # GB/s to the network (sum of ports)
    ports: int


@dataclass
class _Host:
    """One machine as read from the dump (names are local, without the host prefix)."""

    cpus: list[tuple[str, float, str]] = field(default_factory=list)  # (name, inter-cpu GB/s, kind)
    switches: list[str] = field(default_factory=list)
    links: list[tuple[str, str, float, float]] = field(default_factory=list)  # duplex (a, b, GB/s, us)
    gpus: list[_Gpu] = field(default_factory=list)
    nics: list[_Nic] = field(default_factory=list)


def _group(paths: list[str]) -> str:
    """Element paths of one warning in one phrase: ``pci[a, b, c, … 16 in all].x`` when they
    differ only inside their first brackets, else listed."""
    unique = list(dict.fromkeys(paths))
    parts = [re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", p) for p in unique]
    if len(unique) > 1 and all(parts) and len({(m.group(1), m.group(3)) for m in parts}) == 1:
        ids = [m.group(2) for m in parts]
        inner = ", ".join(ids) if len(ids) <= 4 else f"{', '.join(ids[:3])}, … {len(ids)} in all"
        return f"{parts[0].group(1)}[{inner}]{parts[0].group(3)}"
    return ", ".join(unique) if len(unique) <= 4 else f"{', '.join(unique[:3])}, … {len(unique)} in all"


def _quoted(value: str | None) -> str:
    return "missing" if value is None else f'= "{value}"'


class _Reader:
    def __init__(self, source: str, virtual_bridges: str):
        self.source = source
        self.virtual_bridges = virtual_bridges
        self.host = _Host()
        self.names: set[str] = set()
        # warnings of one kind become one line naming every element: key -> (render, paths)
        self.notes: dict[tuple, tuple] = {}
        self.host_hashes: set[str] = set()

    def note(self, key: tuple, path: str, render) -> None:
        """Record a warning; ``render(paths)`` words it once for every element of its kind."""
        entry = self.notes.setdefault(key, (render, []))
        entry[1].append(path)

    def warn(self, text: str) -> None:
        self.note(("text", text), "", lambda _paths, text=text: text)

    def skipped(self, tag: str, where: str) -> None:
        """An element NCCL's format has but synth does not use, or an unknown one: one line per tag."""
        self.note(("unknown", tag), where, lambda paths, tag=tag: f"skipped unknown element <{tag}> in {paths}")

    def warnings(self) -> list[str]:
        return [f"{self.source}: {render(_group(paths))}" for render, paths in self.notes.values()]

    def fail(self, field: str, value, reason: str):
        raise InputError(self.source, field, value, reason)

    def attr_int(self, elem: ET.Element, key: str, where: str, default: int | None = None) -> int | None:
        raw = elem.get(key)
        if raw is None or raw.strip() == "":
            return default
        try:
            return int(raw.strip(), 0)
        except ValueError:
            raise InputError(self.source, f"{where}.{key}", raw, "expected an integer") from None

    def whole(self, elem: ET.Element, key: str, where: str, what: str) -> int | None:
        """A count NCCL writes in decimal; None when missing or empty. Refuses what NCCL's
        ``strtol`` would misread (``"1e12"`` as 1, ``"-1"``, ``"x"`` as 0)."""
        raw = elem.get(key)
        if raw is None or raw.strip() == "":
            return None
        if re.fullmatch(r"[0-9]{1,10}", raw.strip()) is None:
            self.fail(f"{where}.{key}", raw, f"expected {what} (a whole number, as NCCL writes it)")
        return int(raw.strip())

    def unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.names:
            k += 1
            name = f"{base}-{k}"
        self.names.add(name)
        return name

    # ----------------------------------------------------------------------------- elements
    def system(self, root: ET.Element) -> None:
        if root.tag != "system":
            raise InputError(self.source, "(root element)", root.tag, "expected <system> (an NCCL topology file)")
        version = root.get("version")
        if version not in (None, "1"):
            self.warn(f"<system version={version!r}>: only version 1 (NVIDIA NCCL) is known; reading what matches it")
        cpu_index = 0
        for child in root:
            if child.tag == "cpu":
                self.cpu(child, cpu_index)
                cpu_index += 1
            else:
                self.warn(f"skipped unknown element <{child.tag}> in <system>")
        if not self.host.gpus:
            raise InputError(self.source, "system", None, "the dump has no <gpu>", show_value=False)
        if len(self.host_hashes) > 1:
            self.warn(
                f"<cpu> elements carry {len(self.host_hashes)} different host_hash values: NCCL sees that many hosts "
                "(a dump fused across an NVLink domain); synth imports them as one host"
            )

    def cpu(self, elem: ET.Element, index: int) -> None:
        where = f"cpu[{index}]"
        numa = self.attr_int(elem, "numaid", where, index)
        name = self.unique(f"cpu{numa}")
        family = self.attr_int(elem, "familyid", where)
        model = self.attr_int(elem, "modelid", where)
        if elem.get("host_hash"):
            self.host_hashes.add(elem.get("host_hash", "").strip().lower())
        bw, kind = inter_cpu_bandwidth(elem.get("arch", "x86_64"), elem.get("vendor", ""), family, model)
        if kind.startswith("unknown"):
            self.warn(
                f"{where}: unknown CPU (arch {elem.get('arch')!r}, vendor {elem.get('vendor')!r}); "
                "inter-socket link assumed 10 GB/s"
            )
        self.host.cpus.append((name, bw, kind))
        self.host.switches.append(name)
        for child in elem:
            if child.tag == "pci":
                self.pci(child, name, name, f"{where}.pci")
            elif child.tag == "nic":
                self.nic(child, name, None, f"{where}.nic")
            else:
                self.skipped(child.tag, where)

    def link_of(self, elem: ET.Element, where: str) -> PcieLink:
        """The element's link as NCCL counts it; notes NCCL's fallbacks, refuses misreadable widths."""
        speed, width = elem.get("link_speed"), elem.get("link_width")
        try:
            link = pcie_link(speed, width)
        except ValueError as exc:
            self.fail(f"{where}.link_width", width, str(exc))
        if link.width_fallback:
            self.note(
                ("width", width),
                where,
                lambda paths, width=width: f"{paths}.link_width {_quoted(width)}: counted as 16 lanes, as NCCL does",
            )
        if link.speed_fallback:
            known = (speed or "").strip() == ""
            self.note(
                ("speed", speed),
                where,
                lambda paths, speed=speed, known=known: (
                    f"{paths}.link_speed {_quoted(speed)}: "
                    + ("" if known else "not a PCIe speed NCCL knows; ")
                    + "counted as 8 GT/s per lane (Gen3), NCCL's fallback"
                ),
            )
        return link

    def pci(self, elem: ET.Element, parent: str, cpu: str, where: str) -> float | None:
        """Read a ``<pci>`` and what it holds; returns the figure of its link to ``parent``
        (None when it carries nothing and is left out)."""
        busid = elem.get("busid")
        if not busid:
            raise InputError(self.source, f"{where}.busid", None, "a <pci> element needs a busid")
        where = f"pci[{busid}]"
        link = self.link_of(elem, where)
        gpus = [c for c in elem if c.tag == "gpu"]
        nics = [c for c in elem if c.tag == "nic"]
        subs = [c for c in elem if c.tag == "pci"]
        for child in elem:
            if child.tag not in ("gpu", "nic", "pci"):
                self.skipped(child.tag, where)
        if gpus:
            if len(gpus) > 1:
                self.warn(f"{where}: several <gpu> in one device; using the first")
            self.gpu(gpus[0], busid, parent, link.bandwidth, cpu, where)
            return link.bandwidth
        if nics:
            for nic in nics:
                self.nic(nic, parent, link, f"{where}.nic")
            return link.bandwidth
        if not subs:
            cls = (elem.get("class") or "").lower()
            if cls.startswith("0x03"):
                self.warn(f"{where}: a display device without <gpu>; skipped")
            return None  # leaf devices (NVSwitch management ports, empty bridges) carry no collective traffic
        name = self.unique(f"pci{busid.lower()}")
        self.host.switches.append(name)
        slot = len(self.host.links)
        self.host.links.append((name, parent, link.bandwidth, PCIE_LATENCY))
        beneath = [bw for sub in subs if (bw := self.pci(sub, name, cpu, where)) is not None]
        fastest = max(beneath, default=0.0)
        if link.width == 1 and not link.width_fallback and fastest > link.bandwidth:
            mode, dumped, speed = self.virtual_bridges, link.bandwidth, elem.get("link_speed")
            self.note(
                ("virtual", speed, dumped, fastest),
                where,
                lambda paths, mode=mode, speed=speed, dumped=dumped, fastest=fastest: _virtual_bridge_warning(
                    paths, speed, dumped, fastest, mode
                ),
            )
            if mode == "devices":
                self.host.links[slot] = (name, parent, fastest, PCIE_LATENCY)
                return fastest
        return link.bandwidth

    def gpu(self, elem: ET.Element, busid: str, parent: str, bw: float, cpu: str, where: str) -> None:
        where = f"{where}.gpu"
        sm = self.attr_int(elem, "sm", where)
        if sm is None:
            raise InputError(self.source, f"{where}.sm", None, "a <gpu> needs its compute capability (sm)")
        gpu = _Gpu(busid, self.attr_int(elem, "rank", where), self.attr_int(elem, "dev", where), sm, parent, bw, cpu)
        total = 0
        for i, child in enumerate(elem):
            if child.tag == "c2c":
                count = self.whole(child, "count", f"{where}.c2c", "a number of C2C links") or 0
                per_link = self.whole(child, "bw", f"{where}.c2c", "MB/s per C2C link") or 0
                gpu.c2c = _gbps(gpu.c2c + count * per_link / 1000.0)
                continue
            if child.tag != "nvlink":
                self.skipped(child.tag, where)
                continue
            row = f"{where}.nvlink[{i}]"
            target = child.get("target")
            count = self.whole(child, "count", row, "a number of NVLinks")
            tclass = (child.get("tclass") or "").lower()
            if not target or not count:
                self.note(
                    ("nvlink-empty",),
                    row,
                    lambda paths: f"{paths}: an NVLink row without target or with count 0 or missing; skipped",
                )
                continue
            total += count
            gpu.nvlinks.append((target, count, tclass))
        most = max_nvlinks_for_sm(sm)
        if total > most:
            self.fail(
                f"{where}.nvlink[*].count",
                total,
                f"the rows add up to {total} NVLinks; NCCL's detection gives a GPU of sm {sm} at most {most}",
            )
        self.host.gpus.append(gpu)

    def nic(self, elem: ET.Element, parent: str, link: PcieLink | None, where: str) -> None:
        nets = []
        for child in elem:
            if child.tag != "net":
                self.skipped(child.tag, where)
                continue
            port = f"{where}.net[{child.get('name') or len(nets)}]"
            if child.get("dev") is None:
                self.note(
                    ("net-dev",), port, lambda paths: f"{paths}: no dev attribute; NCCL leaves such a port out, as does synth"
                )
                continue
            raw = child.get("speed")
            text = (raw or "").strip()
            if text and re.fullmatch(r"-?[0-9]{1,10}", text) is None:
                self.fail(f"{port}.speed", raw, "expected a speed in Mb/s (a whole number, as NCCL writes it)")
            speed = int(text) if text else 0
            if speed > 2**31 - 1:
                self.fail(f"{port}.speed", raw, "more Mb/s than NCCL can hold (it reads the speed into an int)")
            if speed <= 0:
                self.note(
                    ("net-speed", raw),
                    port,
                    lambda paths, raw=raw: f"{paths}.speed {_quoted(raw)}: counted as 10 Gb/s, as NCCL does",
                )
                speed = NET_FALLBACK_SPEED_MBPS
            nets.append((child.get("name") or f"net{len(nets)}", speed / 8000.0))
        if not nets:
            self.warn(f"{where}: a <nic> without usable <net> ports; skipped")
            return
        total = _gbps(sum(s for _, s in nets))
        name = self.unique(f"nic-{nets[0][0]}")
        uplink = total if link is None else link.bandwidth
        if link is not None and link.speed_fallback and uplink < total:
            self.note(
                ("nic-fallback", uplink),
                name,
                lambda paths, uplink=uplink: (
                    f"{paths}: ports faster than the PCIe link above them, which the dump does not give and "
                    f"NCCL counts at its fallback {uplink:g} GB/s; NCCL plans with that figure too, so these NICs "
                    "reach the network at it (a dump with the link's real link_speed and link_width lifts it)"
                ),
            )
        self.host.nics.append(_Nic(name, parent, uplink, total, len(nets)))
        self.host.switches.append(name)


def _virtual_bridge_warning(paths: str, speed: str | None, dumped: float, fastest: float, mode: str) -> str:
    head = (
        f"{paths}: link {speed or '?'} x1 = {dumped:g} GB/s above a device link of {fastest:g} GB/s: "
        "a virtual machine's emulated bridge"
    )
    if mode == "devices":
        return (
            f"{head}; counted at {fastest:g} GB/s (NCCL plans with {dumped:g} GB/s but sends GPU-NIC traffic beneath "
            "it and GPU-GPU traffic over NVLink; --virtual-bridges dumped keeps the dumped figure)"
        )
    return f"{head}; kept at {dumped:g} GB/s as NCCL counts it (--virtual-bridges dumped): routes across it run at that rate"


# ================================================================================== building
@dataclass
class NcclTopologyImport:
    """The topology and what was noticed on the way."""

    topology: Topology
    warnings: list[str]
    gpus_per_host: int
    nvlink_per_link: dict[int, float]
    cpu_kind: str

    def summary(self) -> str:
        t = self.topology
        hosts = len(set(t.hosts))
        return f"{t.name}: {t.num_ranks} ranks on {hosts} host(s), {len(t.switches)} switches, {len(t.links)} directed links"


def import_nccl_topology_text(
    text: str,
    source: str = "<nccl topology>",
    *,
    hosts: int = 1,
    network: str = "single",
    name: str | None = None,
    nvlink_bandwidth: float | None = None,
    nvlink_only: bool = False,
    virtual_bridges: str = "devices",
) -> NcclTopologyImport:
    """Build a topology from NCCL topology XML text (see the module docstring).

    ``nvlink_bandwidth`` (GB/s per link) replaces NCCL's per-generation figure, e.g. 25 to use the
    datasheet's NVLink2/3 rate as synth's built-ins do. ``nvlink_only`` keeps the GPUs and their
    NVLinks/NVSwitch only (no PCIe, CPUs or NICs), the fabric that synth's NVLink built-ins
    describe; one host only. ``virtual_bridges``: ``"devices"`` counts a virtual machine's
    emulated x1 bridge at the fastest device link beneath it, ``"dumped"`` at the figure NCCL
    computes from the dump."""
    if nvlink_only and hosts > 1:
        raise InputError(
            "--nvlink-only", "hosts", hosts, "the NICs that join hosts hang off PCIe; use --nvlink-only for one host"
        )
    if hosts < 1:
        raise InputError("--hosts", "hosts", hosts, "must be at least 1")
    if network not in ("single", "rails"):
        raise InputError("--network", "network", network, "expected 'single' or 'rails'")
    if nvlink_bandwidth is not None and nvlink_bandwidth <= 0:
        raise InputError("--nvlink-bandwidth", "bandwidth", nvlink_bandwidth, "must be a positive number (GB/s per link)")
    if virtual_bridges not in ("devices", "dumped"):
        raise InputError("--virtual-bridges", "virtual_bridges", virtual_bridges, "expected 'devices' or 'dumped'")
    root = parse_nccl_xml(text, source)
    reader = _Reader(source, virtual_bridges)
    reader.system(root)
    warnings = reader.warnings()
    host = reader.host

    # rank order: by NCCL rank when every GPU has a distinct one, else by dev, else file order
    gpus = host.gpus
    ranks = [g.rank for g in gpus]
    devs = [g.dev for g in gpus]
    if None not in ranks and len(set(ranks)) == len(ranks):
        gpus.sort(key=lambda g: g.rank)
    elif None not in devs and len(set(devs)) == len(devs):
        gpus.sort(key=lambda g: g.dev)
        warnings.append(f"{source}: GPU rank attributes missing or repeated; ranks follow dev numbers")
    for i, g in enumerate(gpus):
        g.name = f"gpu{i}"
    by_busid = {_busid_key(g.busid): g for g in gpus}

    # NVLinks
    nvswitch_links: dict[str, float] = {}
    gpu_links: list[tuple[str, str, float]] = []
    cpu_links: list[tuple[str, str, float]] = []
    per_link: dict[int, float] = {}
    for g in gpus:
        bw = nvlink_bandwidth if nvlink_bandwidth is not None else nvlink_bandwidth_for_sm(g.sm)
        per_link[g.sm] = bw
        for target, count, tclass in g.nvlinks:
            if tclass == TCLASS_NVSWITCH:
                nvswitch_links[g.name] = _gbps(nvswitch_links.get(g.name, 0.0) + count * bw)
            elif tclass.startswith("0x03"):
                peer = by_busid.get(_busid_key(target))
                if peer is None or peer is g:
                    warnings.append(
                        f"{source}: {g.name} ({g.busid}) has an NVLink to {target}, which is not another GPU of the dump; skipped"
                    )
                    continue
                gpu_links.append((g.name, peer.name, _gbps(count * bw)))
            elif tclass == TCLASS_CPU:
                cpu_links.append((g.name, g.cpu, _gbps(count * bw)))
            else:
                warnings.append(f"{source}: {g.name}: NVLink to {target} of unknown class {tclass!r}; skipped")
        if g.c2c > 0:
            cpu_links.append((g.name, g.cpu, g.c2c))

    if nvlink_only:
        if not (nvswitch_links or gpu_links):
            raise InputError(source, "system", None, "--nvlink-only: the dump has no NVLink between GPUs", show_value=False)
        if cpu_links:
            warnings.append(f"{source}: --nvlink-only leaves out the {len(cpu_links)} NVLink/C2C link(s) to CPUs")
    cpu_bw = {name: bw for name, bw, _ in host.cpus}
    kinds = sorted({kind for _, _, kind in host.cpus})
    base = Path(source).stem if not source.startswith("<") else "nccl-import"
    topo_name = name or (base if hosts == 1 else f"{base}-x{hosts}")
    if hosts > 1 and not host.nics:
        raise InputError(source, "system", None, "--hosts needs NICs to join the hosts, and the dump has none", show_value=False)
    desc = _description(source, gpus, host, nvswitch_links, gpu_links, per_link, kinds, hosts, network, nvlink_bandwidth)
    if nvlink_only:
        desc = _description(source, gpus, _Host(), nvswitch_links, gpu_links, per_link, [], 1, network, nvlink_bandwidth)
        desc = desc[:-1] + "; NVLink only: PCIe, CPUs and NICs left out."
        host.switches, host.links, host.nics, host.cpus = [], [], [], []
        cpu_links = []
    doc = TopologyDoc(topo_name, desc)
    net_switches: list[str] = []
    if hosts > 1:
        if network == "single":
            net_switches = [doc.switch("net")]
        else:
            net_switches = [doc.switch(f"rail{i}") for i in range(len(host.nics))]
    for h in range(hosts):
        prefix = f"n{h}-" if hosts > 1 else ""
        hostname = f"node{h}"

        def n(local: str, prefix: str = prefix) -> str:
            return prefix + local

        for g in gpus:
            doc.rank(n(g.name), hostname)
        for sw in host.switches:
            doc.switch(n(sw), hostname)
        if nvswitch_links:
            doc.switch(n("nvswitch"), hostname)
        for a, b, bw, lat in host.links:
            doc.link(n(a), n(b), bw, lat)
        for g in gpus:
            if not nvlink_only:
                doc.link(n(g.name), n(g.parent), g.pcie, PCIE_LATENCY)
        for nic in host.nics:
            doc.link(n(nic.name), n(nic.parent), nic.uplink, PCIE_LATENCY)
        for i, (a, _, _) in enumerate(host.cpus):
            for b, _, _ in host.cpus[i + 1 :]:
                doc.link(n(a), n(b), min(cpu_bw[a], cpu_bw[b]), INTER_CPU_LATENCY)
        for gname, bw in nvswitch_links.items():
            doc.link(n(gname), n("nvswitch"), bw, NVSWITCH_LATENCY)
        for a, b, bw in gpu_links:
            doc.link(n(a), n(b), bw, NVLINK_LATENCY, duplex=False)
        for a, b, bw in cpu_links:
            doc.link(n(a), n(b), bw, NVLINK_LATENCY)
        for i, nic in enumerate(host.nics):
            if net_switches:
                sw = net_switches[0] if network == "single" else net_switches[i]
                doc.link(n(nic.name), sw, nic.speed, NIC_NETWORK_LATENCY)
    try:
        topology = doc.build()
    except InputError as exc:
        if not nvlink_only:
            raise
        raise InputError(
            source, "nvlink", None, f"--nvlink-only: NVLinks alone do not join every GPU ({exc.reason})", show_value=False
        ) from None
    return NcclTopologyImport(topology, warnings, len(gpus), per_link, ", ".join(kinds))


def import_nccl_topology(path: str | Path, **kwargs) -> NcclTopologyImport:
    """Read an NCCL topology file (see `import_nccl_topology_text`); at most `MAX_XML_BYTES` are read."""
    path = Path(path)
    text = read_text_file(path, limit=MAX_XML_BYTES, what="an NCCL topology dump (those are kilobytes)")
    return import_nccl_topology_text(text, str(path), **kwargs)


def _description(source, gpus, host, nvswitch_links, gpu_links, per_link, kinds, hosts, network, override) -> str:
    sms = sorted({g.sm for g in gpus})
    parts = [f"Imported from the NCCL topology dump {Path(source).name}: {len(gpus)} GPUs (sm {', '.join(map(str, sms))})"]
    if host.cpus:
        parts.append(f"{len(host.cpus)} CPU socket(s) ({'; '.join(kinds)})")
    if nvswitch_links:
        lo, hi = min(nvswitch_links.values()), max(nvswitch_links.values())
        rate = f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"
        parts.append(f"NVSwitch: one switch node, {rate} GB/s per GPU")
    if gpu_links:
        parts.append(f"{len(gpu_links)} direct GPU-to-GPU NVLink rows")
    if nvswitch_links or gpu_links:
        figure = ", ".join(f"sm {sm}: {bw:g}" for sm, bw in sorted(per_link.items()))
        parts.append(f"NVLink GB/s per link {'(given) ' if override else '(NCCL) '}{figure}")
    pci_switches = sum(1 for s in host.switches if s.startswith("pci"))
    if host.cpus:
        parts.append(f"{pci_switches} PCIe switch node(s)")
    if host.nics:
        speeds = ", ".join(f"{nic.speed:g}" for nic in host.nics)
        parts.append(f"{len(host.nics)} NIC(s) at {speeds} GB/s")
    if hosts > 1:
        parts.append(f"{hosts} hosts joined by {'one network switch' if network == 'single' else 'one switch per rail'}")
    if host.cpus:
        parts.append(
            f"alpha: PCIe {PCIE_LATENCY:g}, inter-socket {INTER_CPU_LATENCY:g}, NVSwitch link {NVSWITCH_LATENCY:g}, "
            f"GPU-GPU NVLink {NVLINK_LATENCY:g}, NIC to network {NIC_NETWORK_LATENCY:g} us"
        )
    else:
        parts.append(f"alpha: NVSwitch link {NVSWITCH_LATENCY:g}, GPU-GPU NVLink {NVLINK_LATENCY:g} us")
    return "; ".join(parts) + "."


# ================================================================================ comparisons
@dataclass(frozen=True)
class TopologyFigures:
    """Figures to compare two descriptions of one machine (an import and a hand-written file):
    per-rank ingress/egress (GB/s), the best route's bottleneck for every ordered rank pair (0
    where only a relay through ranks reaches), and the ring synth's ring algorithms use with its
    narrowest hop."""

    ingress: tuple[float, ...]
    egress: tuple[float, ...]
    pair_bandwidth: tuple[tuple[float, ...], ...]
    ring: tuple[int, ...]
    ring_bottleneck: float


def topology_figures(topology: Topology) -> TopologyFigures:
    """`TopologyFigures` of a topology."""
    router = router_for(topology)
    n = topology.num_ranks
    pairs = []
    for a in range(n):
        row = []
        for b in range(n):
            route = router.route(a, b) if a != b else None
            row.append(0.0 if route is None else _gbps(route.bottleneck))
        pairs.append(tuple(row))
    order, _ = ring_order(topology, router)
    hops = [pairs[a][b] for a, b in zip(order, order[1:] + order[:1])] if n > 1 else [0.0]
    return TopologyFigures(
        tuple(_gbps(topology.rank_ingress(r)) for r in range(n)),
        tuple(_gbps(topology.rank_egress(r)) for r in range(n)),
        tuple(pairs),
        tuple(order),
        min(hops),
    )
