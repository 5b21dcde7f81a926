"""The machine: ranks, switches and directed links with bandwidth (GB/s) and latency (µs).

A `Topology` is the in-memory form of a ``synth-topology`` file (see ``docs/formats.md``). Nodes are
numbered ranks first (node id = rank id for ranks), then switches in file order. Links are directed;
a duplex file entry becomes two links, and entries between the same ordered pair are merged into one
link whose bandwidth is the sum and whose latency is the largest of the entries' (docs/formats.md,
'Topology file').

Everything here is immutable. Derived lookups (name index, adjacency, link index by pair) are cached
on first use.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from synth.canonical import canonical_sha256
from synth.errors import InputError
from synth.fileio import check_depth, parse_json, read_input_bytes

TOPOLOGY_FORMAT = "synth-topology"
TOPOLOGY_VERSION = 1

#: The physical range a link's figures must lie in (docs/formats.md): 1 kB/s to 1 EB/s, and up to
#: 1000 s of latency. Outside it, times overflow or vanish in floating point (1e308 GB/s makes a
#: transfer take 0 µs, 1e-320 makes it infinite) and the bounds and simulators give nonsense.
MIN_BANDWIDTH = 1e-6  # GB/s
MAX_BANDWIDTH = 1e9  # GB/s
MAX_LATENCY = 1e9  # µs


@dataclass(frozen=True)
class Node:
    """A rank (compute endpoint that holds data) or a switch (forwards only)."""

    name: str
    host: str | None = None


@dataclass(frozen=True)
class Link:
    """A directed link ``src → dst`` between node ids; bandwidth in GB/s, latency (α) in µs."""

    src: int
    dst: int
    bandwidth: float
    latency: float


@dataclass(frozen=True)
class Topology:
    """A validated machine description.

    ``sha256`` is the hash schedules name it by: the canonical JSON of what a schedule's meaning
    depends on, `content_document` (ranks, switches, merged directed links; not the name, the
    description or the hosts), so editing a description keeps every schedule valid.
    ``document_sha256`` is the hash of the whole file as read (the definition before), kept so
    that schedules written before still verify; for a topology built in memory it is the hash of
    `to_document()`, which is what the file `topology_to_json` writes would give.
    """

    name: str
    ranks: tuple[Node, ...]
    switches: tuple[Node, ...] = ()
    links: tuple[Link, ...] = ()
    description: str = ""
    sha256: str = field(default="", compare=False)
    document_sha256: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.sha256:
            object.__setattr__(self, "sha256", canonical_sha256(content_document(self)))
        if not self.document_sha256:
            object.__setattr__(self, "document_sha256", canonical_sha256(self.to_document()))

    def made_for(self, sha256: str) -> bool:
        """Whether a schedule naming ``sha256`` was made for this topology: the content hash, or
        (for schedules written before it) the hash of the whole topology file."""
        return bool(sha256) and sha256 in (self.sha256, self.document_sha256)

    # ----------------------------------------------------------------------------- sizes & names
    @property
    def num_ranks(self) -> int:
        return len(self.ranks)

    @property
    def num_nodes(self) -> int:
        return len(self.ranks) + len(self.switches)

    @cached_property
    def nodes(self) -> tuple[Node, ...]:
        return self.ranks + self.switches

    def is_switch(self, node: int) -> bool:
        return node >= len(self.ranks)

    @cached_property
    def node_index(self) -> dict[str, int]:
        """Node id by name."""
        return {n.name: i for i, n in enumerate(self.nodes)}

    def node_name(self, node: int) -> str:
        return self.nodes[node].name

    @cached_property
    def hosts(self) -> tuple[str | None, ...]:
        """Host of each rank (None where the file gives none)."""
        return tuple(r.host for r in self.ranks)

    @cached_property
    def host_groups(self) -> dict[str | None, tuple[int, ...]]:
        """Ranks grouped by host, in rank order of first appearance."""
        groups: dict[str | None, list[int]] = {}
        for rank, node in enumerate(self.ranks):
            groups.setdefault(node.host, []).append(rank)
        return {h: tuple(rs) for h, rs in groups.items()}

    # ----------------------------------------------------------------------------- link lookups
    @cached_property
    def link_index(self) -> dict[tuple[int, int], int]:
        """Link id by ``(src, dst)`` node pair."""
        return {(link.src, link.dst): i for i, link in enumerate(self.links)}

    @cached_property
    def link_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """Links as sorted ``src * num_nodes + dst`` keys and the link id of each key, for
        looking up many node pairs at once (``np.searchsorted``)."""
        n = self.num_nodes
        pairs = sorted(a * n + b for a, b in self.link_index)
        keys = np.array(pairs, dtype=np.int64)
        ids = np.array([self.link_index[(k // n, k % n)] for k in pairs], dtype=np.int64)
        keys.setflags(write=False)
        ids.setflags(write=False)
        return keys, ids

    def link_ids(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The link id of every (a[i], b[i]) node pair, -1 where there is no such link."""
        keys, ids = self.link_keys
        want = np.asarray(a, dtype=np.int64) * self.num_nodes + np.asarray(b, dtype=np.int64)
        if keys.size == 0:
            return np.full(want.shape, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
        return np.where(keys[pos] == want, ids[pos], -1)

    def route_node_ids(self, routes: tuple[tuple[str, ...], ...]) -> tuple[np.ndarray, np.ndarray]:
        """The node ids of the names of every route, as (ptr, ids): route i names
        ``ids[ptr[i]:ptr[i + 1]]``, -1 for a name that is no node of this topology. A schedule
        of a large machine has hundreds of thousands of routes, and verifying then simulating it
        asks twice: the answer for the last ``routes`` asked is kept (by identity)."""
        kept = self.__dict__.get("_route_node_ids")
        if kept is not None and kept[0] is routes:
            return kept[1]
        names = self.node_index
        ptr = np.zeros(len(routes) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, routes), dtype=np.int64, count=len(routes)), out=ptr[1:])
        try:  # every name is a node (a schedule that verifies): looked up in C, without a generator
            ids = np.fromiter(map(names.__getitem__, chain.from_iterable(routes)), dtype=np.int64, count=int(ptr[-1]))
        except KeyError:
            ids = np.fromiter((names.get(name, -1) for via in routes for name in via), dtype=np.int64, count=int(ptr[-1]))
        ptr.setflags(write=False)
        ids.setflags(write=False)
        self.__dict__["_route_node_ids"] = (routes, (ptr, ids))
        return ptr, ids

    @cached_property
    def out_links(self) -> tuple[tuple[int, ...], ...]:
        """Ids of the links leaving each node, in link order."""
        out: list[list[int]] = [[] for _ in range(self.num_nodes)]
        for i, link in enumerate(self.links):
            out[link.src].append(i)
        return tuple(tuple(x) for x in out)

    @cached_property
    def in_links(self) -> tuple[tuple[int, ...], ...]:
        """Ids of the links entering each node, in link order."""
        inn: list[list[int]] = [[] for _ in range(self.num_nodes)]
        for i, link in enumerate(self.links):
            inn[link.dst].append(i)
        return tuple(tuple(x) for x in inn)

    @cached_property
    def bandwidth_array(self) -> np.ndarray:
        """Bandwidth of each link (GB/s), indexed by link id."""
        arr = np.array([link.bandwidth for link in self.links], dtype=np.float64)
        arr.setflags(write=False)
        return arr

    @cached_property
    def link_src_array(self) -> np.ndarray:
        """Source node of each link, indexed by link id."""
        arr = np.array([link.src for link in self.links], dtype=np.int64)
        arr.setflags(write=False)
        return arr

    @cached_property
    def link_dst_array(self) -> np.ndarray:
        """Destination node of each link, indexed by link id."""
        arr = np.array([link.dst for link in self.links], dtype=np.int64)
        arr.setflags(write=False)
        return arr

    @cached_property
    def latency_array(self) -> np.ndarray:
        """Latency of each link (µs), indexed by link id."""
        arr = np.array([link.latency for link in self.links], dtype=np.float64)
        arr.setflags(write=False)
        return arr

    def rank_ingress(self, rank: int) -> float:
        """Total bandwidth into a rank (GB/s)."""
        return float(sum(self.links[i].bandwidth for i in self.in_links[rank]))

    def rank_egress(self, rank: int) -> float:
        """Total bandwidth out of a rank (GB/s)."""
        return float(sum(self.links[i].bandwidth for i in self.out_links[rank]))

    def reversed(self) -> Topology:
        """The same machine with every link pointing the other way (for dual constructions); it
        keeps the name and hash, since schedules built on it are run on this topology."""
        cached = self.__dict__.get("_reversed")
        if cached is not None:
            return cached
        links = tuple(
            sorted(
                (Link(link.dst, link.src, link.bandwidth, link.latency) for link in self.links),
                key=lambda lk: (lk.src, lk.dst),
            )
        )
        rev = Topology(
            name=self.name,
            ranks=self.ranks,
            switches=self.switches,
            links=links,
            description=self.description,
            sha256=self.sha256,
            document_sha256=self.document_sha256,
        )
        rev.__dict__["_reversed"] = self
        self.__dict__["_reversed"] = rev
        return rev

    # ----------------------------------------------------------------------------- documents
    def to_document(self) -> dict[str, Any]:
        """The topology as a ``synth-topology`` JSON document (directed links, merged)."""
        links: list[dict[str, Any]] = []
        pairs = self.link_index
        for link in self.links:
            back = pairs.get((link.dst, link.src))
            if back is not None:
                other = self.links[back]
                if (other.bandwidth, other.latency) == (link.bandwidth, link.latency):
                    if link.src < link.dst:
                        links.append(_link_entry(self, link, duplex=True))
                    continue
            links.append(_link_entry(self, link, duplex=False))
        doc: dict[str, Any] = {
            "format": TOPOLOGY_FORMAT,
            "version": TOPOLOGY_VERSION,
            "name": self.name,
            "description": self.description,
            "ranks": [_node_entry(n) for n in self.ranks],
            "switches": [_node_entry(n) for n in self.switches],
            "links": links,
        }
        return doc

    def to_networkx(self):  # -> networkx.DiGraph
        """A ``networkx.DiGraph``: nodes keyed by name with ``kind`` ('rank'/'switch'), ``rank`` id
        (ranks only) and ``host``; edges with ``bandwidth`` (GB/s) and ``latency`` (µs)."""
        import networkx as nx

        graph = nx.DiGraph(name=self.name, description=self.description)
        for i, node in enumerate(self.ranks):
            graph.add_node(node.name, kind="rank", rank=i, host=node.host)
        for node in self.switches:
            graph.add_node(node.name, kind="switch", host=node.host)
        for link in self.links:
            graph.add_edge(
                self.node_name(link.src),
                self.node_name(link.dst),
                bandwidth=link.bandwidth,
                latency=link.latency,
            )
        return graph

    @classmethod
    def from_networkx(cls, graph, name: str | None = None, description: str = "") -> Topology:
        """Build from a DiGraph with node attribute ``kind`` ('rank' or 'switch', default 'rank'),
        optional ``rank`` (order of ranks; otherwise insertion order) and ``host``; edge attributes
        ``bandwidth`` and ``latency``. The result is validated like a file."""
        ranks = [n for n, d in graph.nodes(data=True) if d.get("kind", "rank") == "rank"]
        ranks.sort(key=lambda n: graph.nodes[n].get("rank", math.inf))
        switches = [n for n, d in graph.nodes(data=True) if d.get("kind", "rank") == "switch"]
        doc = {
            "format": TOPOLOGY_FORMAT,
            "version": TOPOLOGY_VERSION,
            "name": name or graph.graph.get("name") or "graph",
            "description": description or graph.graph.get("description", ""),
            "ranks": [_node_doc(str(n), graph.nodes[n].get("host")) for n in ranks],
            "switches": [_node_doc(str(n), graph.nodes[n].get("host")) for n in switches],
            "links": [
                {
                    "a": str(u),
                    "b": str(v),
                    "bandwidth": d.get("bandwidth"),
                    "latency": d.get("latency", 0.0),
                    "duplex": False,
                }
                for u, v, d in graph.edges(data=True)
            ],
        }
        return topology_from_document(doc, source="<networkx graph>")


def content_document(topo: Topology) -> dict[str, Any]:
    """What a schedule's meaning depends on, as a JSON document: format, version, the rank names
    in rank order, the switch names in file order, and the directed links after merging (as
    `Topology.to_document` writes them: a duplex entry where both directions agree). Its canonical
    JSON's SHA-256 is `Topology.sha256`. Left out: ``name`` and ``description`` (labels), the
    ranks' and switches' ``host`` (a grouping hint for synthesizers: no transfer's validity or
    time depends on it), and how the file spells things (entry order, defaults, parallel entries)."""
    doc = topo.to_document()
    return {
        "format": TOPOLOGY_FORMAT,
        "version": TOPOLOGY_VERSION,
        "ranks": [n.name for n in topo.ranks],
        "switches": [n.name for n in topo.switches],
        "links": doc["links"],
    }


def _node_doc(name: str, host: str | None) -> dict[str, Any]:
    return {"name": name, "host": host} if host is not None else {"name": name}


def _node_entry(node: Node) -> dict[str, Any]:
    return _node_doc(node.name, node.host)


def json_number(value: float) -> float | int:
    """Integral floats are written as integers so that every JSON reader hashes them alike."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


def _link_entry(topo: Topology, link: Link, *, duplex: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "a": topo.node_name(link.src),
        "b": topo.node_name(link.dst),
        "bandwidth": json_number(link.bandwidth),
        "latency": json_number(link.latency),
    }
    if not duplex:
        entry["duplex"] = False
    return entry


# --------------------------------------------------------------------------------- validation
def _is_number(value: Any) -> bool:
    """A finite JSON number (not a boolean); integers too large for a float are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _parse_node(entry: Any, where: str, source: str) -> Node:
    if isinstance(entry, str):
        name, host = entry, None
    elif isinstance(entry, Mapping):
        if "name" not in entry:
            raise InputError(source, where, entry, "an entry needs a 'name'")
        name, host = entry["name"], entry.get("host")
        if host is not None and (not isinstance(host, str) or not host):
            raise InputError(source, f"{where}.host", host, "host must be a non-empty string")
    else:
        raise InputError(source, where, entry, "expected a name or an object with 'name'")
    if not isinstance(name, str) or not name:
        raise InputError(source, f"{where}.name", name, "name must be a non-empty string")
    return Node(name=name, host=host)


def topology_from_document(doc: Any, source: str = "<topology>") -> Topology:
    """Validate a parsed ``synth-topology`` document and build the `Topology`.

    Raises `InputError` naming ``source``, the field and the value for the first problem found.
    Unknown fields are ignored, as docs/formats.md requires of readers.
    """
    if not isinstance(doc, Mapping):
        raise InputError(source, "(top level)", doc, "expected a JSON object")
    fmt = doc.get("format")
    if fmt != TOPOLOGY_FORMAT:
        raise InputError(source, "format", fmt, f"expected {TOPOLOGY_FORMAT!r}")
    version = doc.get("version")
    if version != TOPOLOGY_VERSION or isinstance(version, bool):
        raise InputError(source, "version", version, f"expected {TOPOLOGY_VERSION}")
    name = doc.get("name", Path(source).stem if source and not source.startswith("<") else "topology")
    if not isinstance(name, str) or not name:
        raise InputError(source, "name", name, "name must be a non-empty string")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise InputError(source, "description", description, "description must be a string")

    raw_ranks = doc.get("ranks")
    if not isinstance(raw_ranks, list) or not raw_ranks:
        raise InputError(source, "ranks", raw_ranks, "expected a non-empty list of ranks")
    raw_switches = doc.get("switches", [])
    if raw_switches is None:
        raw_switches = []
    if not isinstance(raw_switches, list):
        raise InputError(source, "switches", raw_switches, "expected a list of switches")
    ranks = tuple(_parse_node(e, f"ranks[{i}]", source) for i, e in enumerate(raw_ranks))
    switches = tuple(_parse_node(e, f"switches[{i}]", source) for i, e in enumerate(raw_switches))

    index: dict[str, int] = {}
    for i, node in enumerate(ranks + switches):
        where = f"ranks[{i}].name" if i < len(ranks) else f"switches[{i - len(ranks)}].name"
        if node.name in index:
            raise InputError(source, where, node.name, "duplicate node name")
        index[node.name] = i

    raw_links = doc.get("links")
    if not isinstance(raw_links, list):
        raise InputError(source, "links", raw_links, "expected a list of links")
    merged: dict[tuple[int, int], list[float]] = {}
    for i, entry in enumerate(raw_links):
        where = f"links[{i}]"
        if not isinstance(entry, Mapping):
            raise InputError(source, where, entry, "expected an object with a, b, bandwidth, latency")
        ends = []
        for key in ("a", "b"):
            if key not in entry:
                raise InputError(source, where, entry, f"link needs '{key}'")
            value = entry[key]
            if not isinstance(value, str) or value not in index:
                raise InputError(source, f"{where}.{key}", value, "unknown node name")
            ends.append(index[value])
        if ends[0] == ends[1]:
            raise InputError(source, f"{where}.b", entry["b"], "a link must join two different nodes")
        if "bandwidth" not in entry:
            raise InputError(source, where, entry, "link needs 'bandwidth' (GB/s)")
        bandwidth = entry["bandwidth"]
        if not _is_number(bandwidth) or bandwidth <= 0:
            raise InputError(source, f"{where}.bandwidth", bandwidth, "bandwidth must be a positive number (GB/s)")
        if not MIN_BANDWIDTH <= bandwidth <= MAX_BANDWIDTH:
            raise InputError(
                source, f"{where}.bandwidth", bandwidth, f"bandwidth must be between {MIN_BANDWIDTH:g} and {MAX_BANDWIDTH:g} GB/s"
            )
        latency = entry.get("latency", 0.0)
        if not _is_number(latency) or latency < 0:
            raise InputError(source, f"{where}.latency", latency, "latency must be a non-negative number (µs)")
        if latency > MAX_LATENCY:
            raise InputError(source, f"{where}.latency", latency, f"latency must be at most {MAX_LATENCY:g} µs")
        duplex = entry.get("duplex", True)
        if not isinstance(duplex, bool):
            raise InputError(source, f"{where}.duplex", duplex, "duplex must be true or false")
        pairs = [(ends[0], ends[1])] + ([(ends[1], ends[0])] if duplex else [])
        for pair in pairs:
            if pair in merged:
                merged[pair][0] += float(bandwidth)
                merged[pair][1] = max(merged[pair][1], float(latency))
                if merged[pair][0] > MAX_BANDWIDTH:
                    raise InputError(
                        source,
                        f"{where}.bandwidth",
                        bandwidth,
                        f"parallel links between these nodes add up to more than {MAX_BANDWIDTH:g} GB/s",
                    )
            else:
                merged[pair] = [float(bandwidth), float(latency)]

    links = tuple(Link(s, d, bw, lat) for (s, d), (bw, lat) in sorted(merged.items()))
    topo = Topology(
        name=name,
        ranks=ranks,
        switches=switches,
        links=links,
        description=description,
        document_sha256=canonical_sha256(doc),
    )
    _check_reachability(topo, source)
    return topo


def _check_reachability(topo: Topology, source: str) -> None:
    """Every rank must reach every other rank (through switches and other ranks)."""
    n = topo.num_nodes
    if topo.num_ranks <= 1:
        return
    for direction, links_of in (("reach", topo.out_links), ("be reached from", topo.in_links)):
        seen = np.zeros(n, dtype=bool)
        seen[0] = True
        stack = [0]
        while stack:
            node = stack.pop()
            for li in links_of[node]:
                link = topo.links[li]
                nxt = link.dst if links_of is topo.out_links else link.src
                if not seen[nxt]:
                    seen[nxt] = True
                    stack.append(nxt)
        missing = np.flatnonzero(~seen[: topo.num_ranks])
        if missing.size:
            bad = int(missing[0])
            if direction == "reach":
                reason = f"rank {topo.ranks[0].name!r} cannot reach this rank over the links"
            else:
                reason = f"this rank cannot reach rank {topo.ranks[0].name!r} over the links"
            raise InputError(source, f"ranks[{bad}]", topo.ranks[bad].name, reason)


#: A topology file larger than this is refused (the largest built-in is 42 kB; a 100,000-GPU
#: cluster is a few tens of MB).
MAX_TOPOLOGY_BYTES = 64 * 2**20


def read_json_file(path: str | Path, *, limit: int = MAX_TOPOLOGY_BYTES, check_nesting: bool = True) -> Any:
    """Read a JSON file, turning every I/O or syntax problem into one `InputError` line: only
    regular files, at most ``limit`` bytes, strict JSON, nested at most `MAX_JSON_DEPTH` levels
    (unless ``check_nesting`` is False: the caller bounds it itself)."""
    source = str(path)
    doc = parse_json(read_input_bytes(path, limit=limit), source)
    if check_nesting:
        check_depth(doc, source)
    return doc


def load_topology(path: str | Path) -> Topology:
    """Load and validate a topology file (``synth-topology`` JSON)."""
    return topology_from_document(read_json_file(path), source=str(path))


def topology_to_json(topo: Topology) -> str:
    """Deterministic, human-readable text of a topology file (one link per line)."""
    doc = topo.to_document()
    return document_to_json(doc)


def document_to_json(doc: Mapping[str, Any]) -> str:
    """Write a topology document with sorted keys, one list entry per line."""
    lines = ["{"]
    keys = sorted(doc)
    for i, key in enumerate(keys):
        value = doc[key]
        comma = "," if i < len(keys) - 1 else ""
        if isinstance(value, list) and value:
            lines.append(f"  {json.dumps(key)}: [")
            for j, item in enumerate(value):
                sep = "," if j < len(value) - 1 else ""
                lines.append("    " + json.dumps(item, sort_keys=True, ensure_ascii=True) + sep)
            lines.append("  ]" + comma)
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, sort_keys=True, ensure_ascii=True)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def topologies_equal(a: Topology, b: Topology) -> bool:
    """Same nodes, hosts and links (ignores name, description and hash)."""
    return (a.ranks, a.switches, a.links) == (b.ranks, b.switches, b.links)


def iter_rank_names(topo: Topology) -> Iterable[str]:
    return (r.name for r in topo.ranks)
