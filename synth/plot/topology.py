"""A picture of a machine: ranks grouped by host, switches above the ranks they serve, racks side
by side, links drawn with a width and colour for their bandwidth.

The layout is structural, not force-directed, so that the same machine always looks the same and
its hierarchy reads from bottom to top:

* **Units.** Ranks are grouped by host (`Topology.host_groups`). A host whose ranks are linked to
  each other directly (an NVLink mesh such as the DGX-1) is drawn as a circle of ranks, so every
  link is a distinct chord; otherwise its ranks stand in a row. From `COLLAPSE_ABOVE` ranks on
  (and with several hosts), each host is collapsed into one box that says how many ranks it holds
  and their bandwidth inside the host, and the switches that belong to it (its NVSwitch, its NICs)
  are folded into it.
* **Host-internal switches.** A switch that only connects ranks of one host (a box's NVSwitch) is a
  bar under that host's ranks: it is the inside of the box, not a level of the network.
* **Levels.** Every other switch sits at the height of its hop distance from the ranks (NICs 1,
  top-of-rack switches 2, spines 3; a PCIe switch 1, its CPU 2), horizontally at the mean position
  of the nodes below it that it connects, spread apart where they would overlap.
* **Racks.** Hosts that share a switch at the lowest level where hosts share any (a top-of-rack
  switch) form a rack; racks are separated by a wider gap than hosts.

A link pair (both directions) is drawn once, at the larger of its two bandwidths; collapsed links
(a host's eight NIC ports to its ToR) are drawn as one line carrying their total and labelled
``count × bandwidth``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from synth.plot._common import bandwidth_label, new_figure
from synth.topology import Topology

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: collapse hosts into boxes above this many ranks (when there are several hosts)
COLLAPSE_ABOVE = 32
#: at most this many bandwidth classes in the legend; more distinct values are binned
MAX_CLASSES = 7

RANK_GAP = 1.0  # between ranks in a row
HOST_GAP = 1.6  # extra space between hosts
RACK_GAP = 2.0  # extra space between racks
LEVEL_GAP = 1.7  # between switch levels
COLLAPSED_WIDTH = 1.6  # width of a collapsed host box
COLLAPSED_GAP = 0.5  # between collapsed hosts
COLLAPSED_RACK_GAP = 1.5  # extra between racks of collapsed hosts


@dataclass(frozen=True)
class DrawNode:
    """A node of the picture: a rank, a switch, or a collapsed host (``members`` are the topology
    node ids it stands for)."""

    kind: str  # "rank", "switch", "bar" (host-internal switch) or "host" (collapsed)
    label: str
    x: float
    y: float
    members: tuple[int, ...]
    width: float = 0.0  # bars and collapsed hosts
    note: str = ""


@dataclass(frozen=True)
class DrawEdge:
    """A drawn line between two `DrawNode`s: ``bandwidth`` GB/s per direction (the total of
    ``count`` links for a collapsed link; ``per_link`` each)."""

    a: int
    b: int
    bandwidth: float
    count: int = 1
    per_link: float = 0.0
    asymmetric: bool = False


@dataclass(frozen=True)
class HostBox:
    host: str
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(frozen=True)
class TopologyLayout:
    """Where everything goes (units of about one rank spacing); see the module docstring."""

    name: str
    nodes: tuple[DrawNode, ...]
    edges: tuple[DrawEdge, ...]
    boxes: tuple[HostBox, ...]
    collapsed: bool
    num_racks: int

    @property
    def extent(self) -> tuple[float, float, float, float]:
        xs = [n.x - n.width / 2 for n in self.nodes] + [n.x + n.width / 2 for n in self.nodes]
        ys = [n.y for n in self.nodes]
        xs += [b.x0 for b in self.boxes] + [b.x1 for b in self.boxes]
        ys += [b.y0 for b in self.boxes] + [b.y1 for b in self.boxes]
        return min(xs), max(xs), min(ys), max(ys)


# --------------------------------------------------------------------------------------- structure
def _pairs(topology: Topology) -> dict[tuple[int, int], tuple[float, bool]]:
    """Undirected node pairs (u < v) → (larger bandwidth of the two directions, asymmetric?)."""
    out: dict[tuple[int, int], tuple[float, bool]] = {}
    index = topology.link_index
    for link in topology.links:
        u, v = min(link.src, link.dst), max(link.src, link.dst)
        if (u, v) in out:
            continue
        fwd = index.get((u, v))
        back = index.get((v, u))
        bws = [topology.links[i].bandwidth for i in (fwd, back) if i is not None]
        out[(u, v)] = (max(bws), len(bws) == 1 or bws[0] != bws[1])
    return out


def _short(name: str, host: str | None) -> str:
    """A switch's name without its host's prefix ("r0s0-nic3" in host r0s0 → "nic3")."""
    if host is not None:
        for sep in ("-", "_", ".", "/", ":"):
            if name.startswith(host + sep) and len(name) > len(host) + 1:
                return name[len(host) + 1 :]
    return name


def _internal_switches(topology: Topology, neighbours: list[set[int]]) -> dict[int, str | None]:
    """Switches that connect only ranks of one host, at least two of them → that host."""
    out: dict[int, str | None] = {}
    hosts = topology.hosts
    for s in range(topology.num_ranks, topology.num_nodes):
        nb = neighbours[s]
        if len(nb) >= 2 and all(v < topology.num_ranks for v in nb) and len({hosts[v] for v in nb}) == 1:
            out[s] = hosts[next(iter(nb))]
    return out


def _levels(num_nodes: int, neighbours: list[set[int]], bottom: set[int], skip: set[int]) -> dict[int, int]:
    """Hop distance from ``bottom`` (level 0) over nodes not in ``skip``; unreachable nodes one
    level above the highest."""
    level = {v: 0 for v in bottom}
    frontier = sorted(bottom)
    while frontier:
        nxt = []
        for u in frontier:
            for v in sorted(neighbours[u]):
                if v not in level and v not in skip:
                    level[v] = level[u] + 1
                    nxt.append(v)
        frontier = nxt
    top = max(level.values(), default=0) + 1
    for v in range(num_nodes):
        if v not in level and v not in skip:
            level[v] = top
    return level


def _racks(units: list[set[int]], neighbours: list[set[int]], level: dict[int, int], owner: dict[int, int]) -> list[int]:
    """Rack index of each unit: units joined by a switch at the lowest level where any switch
    reaches two units going upwards (a ToR); every unit its own rack if none does."""
    reach: list[set[int]] = [set(u) for u in units]
    frontier = [set(u) for u in units]
    max_level = max(level.values(), default=0)
    for lev in range(1, max_level + 1):
        by_switch: dict[int, set[int]] = defaultdict(set)
        for i, nodes in enumerate(frontier):
            up = {v for u in nodes for v in neighbours[u] if level.get(v) == lev and v not in owner}
            frontier[i] = up
            reach[i] |= up
            for v in up:
                by_switch[v].add(i)
        joins = [sorted(members) for members in by_switch.values() if len(members) >= 2]
        if joins:
            return _classes(len(units), joins)
    return list(range(len(units)))


def _classes(n: int, joins: list[list[int]]) -> list[int]:
    """Class index (0, 1, … in order of first member) of 0..n-1 when each list in ``joins`` is
    one class (union-find)."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for members in joins:
        for m in members[1:]:
            parent[find(m)] = find(members[0])
    roots: dict[int, int] = {}
    return [roots.setdefault(find(i), len(roots)) for i in range(n)]


def _circle_order(ranks: tuple[int, ...], pairs: dict[tuple[int, int], tuple[float, bool]], budget: int = 20_000) -> list[int]:
    """An order of a meshed host's ranks around its circle that follows a cycle of direct links,
    as wide as possible (the DGX-1's eight double NVLinks form its rim), so the widest links are
    the circle's sides; rank order when no cycle is found within ``budget`` steps."""
    members = set(ranks)
    adj: dict[int, dict[int, float]] = {r: {} for r in ranks}
    for (u, v), (bw, _) in pairs.items():
        if u in members and v in members:
            adj[u][v] = adj[v][u] = bw
    for theta in sorted({bw for a in adj.values() for bw in a.values()}, reverse=True):
        cycle = _hamiltonian_cycle(adj, min(ranks), len(ranks), theta, budget)
        if cycle is not None:
            if len(cycle) > 2 and cycle[1] > cycle[-1]:
                cycle = [cycle[0], *reversed(cycle[1:])]
            return cycle
    return list(ranks)


def _hamiltonian_cycle(adj: dict[int, dict[int, float]], start: int, n: int, theta: float, budget: int) -> list[int] | None:
    """A cycle through all ``n`` nodes of ``adj`` over edges of at least ``theta``, found by
    depth-first search (widest edges first) within ``budget`` steps; None if none was found."""
    path, used = [start], {start}
    steps = 0

    def extend() -> bool:
        nonlocal steps
        steps += 1
        if steps > budget:
            return False
        last = path[-1]
        if len(path) == n:
            return adj[last].get(start, 0.0) >= theta
        for v in sorted(adj[last], key=lambda w: (-adj[last][w], w)):
            if v not in used and adj[last][v] >= theta:
                path.append(v)
                used.add(v)
                if extend():
                    return True
                path.pop()
                used.discard(v)
        return False

    return path if extend() else None


def _spread(xs: dict[int, float], min_sep: float) -> dict[int, float]:
    """Move nodes of one level apart to at least ``min_sep``, keeping their order and mean."""
    if len(xs) < 2:
        return dict(xs)
    order = sorted(xs, key=lambda v: (xs[v], v))
    placed = [xs[order[0]]]
    for v in order[1:]:
        placed.append(max(xs[v], placed[-1] + min_sep))
    shift = sum(xs.values()) / len(xs) - sum(placed) / len(placed)
    return {v: p + shift for v, p in zip(order, placed)}


def topology_layout(topology: Topology, *, collapse: bool | None = None) -> TopologyLayout:
    """Positions of ranks (or collapsed hosts), switches, host boxes and links; ``collapse`` None
    collapses hosts when there are more than `COLLAPSE_ABOVE` ranks and more than one host."""
    R, N = topology.num_ranks, topology.num_nodes
    pairs = _pairs(topology)
    neighbours: list[set[int]] = [set() for _ in range(N)]
    for u, v in pairs:
        neighbours[u].add(v)
        neighbours[v].add(u)
    groups = list(topology.host_groups.items())
    if collapse is None:
        collapse = R > COLLAPSE_ABOVE and len(groups) > 1
    internal = _internal_switches(topology, neighbours)
    host_of_group = {h: i for i, (h, _) in enumerate(groups)}

    # owner: topology node → index of the unit it is folded into (collapsed hosts only)
    owner: dict[int, int] = {}
    if collapse:
        for i, (_, ranks) in enumerate(groups):
            for r in ranks:
                owner[r] = i
        for s in range(R, N):
            host = topology.nodes[s].host
            if s in internal:
                owner[s] = host_of_group[internal[s]]
            elif host is not None and host in host_of_group:
                owner[s] = host_of_group[host]
        units = [{v for v, o in owner.items() if o == i} for i in range(len(groups))]
    else:
        units = [set(ranks) for _, ranks in groups]
    skip = set(owner) if collapse else set(internal)
    level = _levels(N, neighbours, set().union(*units) if units else set(), skip)
    racks = _racks(units, neighbours, level, owner)

    nodes: list[DrawNode] = []
    node_of: dict[int, int] = {}  # topology node → draw node
    boxes: list[HostBox] = []
    x = 0.0
    top_of_units = 0.5
    for i, (host, ranks) in enumerate(groups):
        if i > 0 and collapse:
            x += COLLAPSED_GAP + (COLLAPSED_RACK_GAP if racks[i] != racks[i - 1] else 0.0)
        elif i > 0:
            x += HOST_GAP + (RACK_GAP if racks[i] != racks[i - 1] else 0.0)
        if collapse:
            note = _inside_bandwidth(topology, ranks, {s for s, h in internal.items() if h == host})
            cx = x + COLLAPSED_WIDTH / 2
            label = host if host is not None else "ranks"
            node_of.update({v: len(nodes) for v in units[i]})
            nodes.append(DrawNode("host", label, cx, 0.0, tuple(sorted(units[i])), COLLAPSED_WIDTH, note))
            x += COLLAPSED_WIDTH
            continue
        own_bars = sorted(s for s, h in internal.items() if h == host and all(v in set(ranks) for v in neighbours[s]))
        meshed = any(v < R and v in set(ranks) for r in ranks for v in neighbours[r]) and len(ranks) > 2
        if meshed:
            radius = max(1.0, len(ranks) * RANK_GAP * 1.15 / (2 * math.pi))
            cx = x + radius
            for k, r in enumerate(_circle_order(ranks, pairs)):
                angle = math.pi / 2 + math.pi / len(ranks) - 2 * math.pi * k / len(ranks)
                node_of[r] = len(nodes)
                nodes.append(DrawNode("rank", str(r), cx + radius * math.cos(angle), radius * math.sin(angle), (r,)))
            x0, x1, y_low, box_top = x - 0.5, cx + radius + 0.5, -radius - 0.5, radius + 0.5
            top_of_units = max(top_of_units, box_top)
            x = cx + radius
        else:
            for k, r in enumerate(ranks):
                node_of[r] = len(nodes)
                nodes.append(DrawNode("rank", str(r), x + k * RANK_GAP, 0.0, (r,)))
            x0, x1, y_low, box_top = x - 0.5, x + (len(ranks) - 1) * RANK_GAP + 0.5, -0.5, 0.5
            x = x + (len(ranks) - 1) * RANK_GAP
        for j, s in enumerate(own_bars):
            xs = [nodes[node_of[v]].x for v in neighbours[s]]
            y = y_low - 0.55 - 0.75 * j
            node_of[s] = len(nodes)
            nodes.append(
                DrawNode("bar", _short(topology.node_name(s), host), (min(xs) + max(xs)) / 2, y, (s,), max(xs) - min(xs) + 0.6)
            )
            y_low = y - 0.3
        if host is not None:
            boxes.append(HostBox(host, x0, y_low - 0.2, x1, box_top))

    # switches level by level, each above the mean of the nodes below it that it connects
    by_level: dict[int, list[int]] = defaultdict(list)
    for v, lev in level.items():
        if v >= R and v not in node_of and v not in owner:
            by_level[lev].append(v)
    for lev in sorted(by_level):
        y = top_of_units + LEVEL_GAP * lev - 0.5
        xs: dict[int, float] = {}
        for s in sorted(by_level[lev]):
            below = sorted({node_of[v] for v in neighbours[s] if v in node_of and nodes[node_of[v]].y < y - 1e-9})
            placed = below or sorted({node_of[v] for v in neighbours[s] if v in node_of})
            xs[s] = sum(nodes[d].x for d in placed) / len(placed) if placed else x / 2
        min_sep = max(1.0, 0.14 * max((len(_short(topology.node_name(s), topology.nodes[s].host)) for s in xs), default=4))
        for s, sx in sorted(_spread(xs, min_sep).items()):
            node_of[s] = len(nodes)
            nodes.append(DrawNode("switch", _short(topology.node_name(s), topology.nodes[s].host), sx, y, (s,)))

    # a host's box also holds the switches that belong to it (its NICs)
    for k, box in enumerate(boxes):
        owned = [n for v, d in node_of.items() if v >= R and topology.nodes[v].host == box.host for n in [nodes[d]]]
        owned = [n for n in owned if n.kind == "switch"]
        if owned:
            boxes[k] = HostBox(
                box.host,
                min(box.x0, *(n.x - 0.5 for n in owned)),
                box.y0,
                max(box.x1, *(n.x + 0.5 for n in owned)),
                max(box.y1, *(n.y + 0.95 for n in owned)),
            )

    # lines: one per pair of drawn nodes, collapsed links summed
    merged: dict[tuple[int, int], list[tuple[float, bool]]] = defaultdict(list)
    for (u, v), (bw, asym) in sorted(pairs.items()):
        a, b = node_of[u], node_of[v]
        if a == b:
            continue
        merged[(min(a, b), max(a, b))].append((bw, asym))
    edges = []
    for (a, b), items in sorted(merged.items()):
        total = sum(bw for bw, _ in items)
        per_link = items[0][0] if len({bw for bw, _ in items}) == 1 else 0.0
        edges.append(DrawEdge(a, b, total, len(items), per_link, any(asym for _, asym in items)))
    return TopologyLayout(topology.name, tuple(nodes), tuple(edges), tuple(boxes), bool(collapse), max(racks, default=-1) + 1)


def _inside_bandwidth(topology: Topology, ranks: tuple[int, ...], bars: set[int]) -> str:
    """ "8 ranks, 300 GB/s each inside": each rank's bandwidth in from its host's ranks and
    internal switches (a range where they differ)."""
    inside = set(ranks) | bars
    per_rank = []
    for r in ranks:
        per_rank.append(sum(topology.links[i].bandwidth for i in topology.in_links[r] if topology.links[i].src in inside))
    lo, hi = min(per_rank), max(per_rank)
    count = f"{len(ranks)} rank{'s' if len(ranks) != 1 else ''}"
    if hi == 0:
        return count
    bw = bandwidth_label(lo) if lo == hi else f"{bandwidth_label(lo)}-{bandwidth_label(hi)}"
    return f"{count}\n{bw} GB/s each"


# --------------------------------------------------------------------------------------- drawing
@dataclass(frozen=True)
class BandwidthClass:
    """One legend entry: links from ``low`` to ``high`` GB/s (equal for an exact value)."""

    low: float
    high: float
    color: tuple[float, float, float, float]
    width: float

    @property
    def label(self) -> str:
        if self.low == self.high:
            return f"{bandwidth_label(self.low)} GB/s"
        return f"{bandwidth_label(self.low)}-{bandwidth_label(self.high)} GB/s"


def bandwidth_classes(values: list[float]) -> list[BandwidthClass]:
    """Legend classes for the bandwidths drawn: one per distinct value, or `MAX_CLASSES`
    log-spaced bins when there are more; colour and width grow with the logarithm of bandwidth."""
    from matplotlib import colormaps

    distinct = sorted(set(values))
    if not distinct:
        return []
    lo, hi = math.log(distinct[0]), math.log(distinct[-1])

    def style(bw: float) -> tuple[tuple[float, float, float, float], float]:
        t = (math.log(bw) - lo) / (hi - lo) if hi > lo else 1.0
        return colormaps["viridis_r"](0.12 + 0.83 * t), 0.8 + 3.7 * t

    if len(distinct) <= MAX_CLASSES:
        return [BandwidthClass(v, v, *style(v)) for v in distinct]
    edges = [math.exp(lo + (hi - lo) * k / MAX_CLASSES) for k in range(MAX_CLASSES + 1)]
    classes = []
    for k in range(MAX_CLASSES):
        inside = [v for v in distinct if edges[k] <= v <= edges[k + 1] and (k == 0 or v > edges[k])]
        if inside:
            classes.append(BandwidthClass(inside[0], inside[-1], *style(math.sqrt(inside[0] * inside[-1]))))
    return classes


def _class_of(classes: list[BandwidthClass], bw: float) -> int:
    for k, c in enumerate(classes):
        if c.low <= bw <= c.high:
            return k
    raise AssertionError(f"bandwidth {bw} has no class")


def plot_topology(topology: Topology, *, collapse: bool | None = None, title: str | None = None) -> Figure:
    """The machine as a figure: ranks (squares, numbered), switches (grey, named), host-internal
    switches (bars under their host), host boxes, links coloured and sized by bandwidth with a
    legend in GB/s. ``collapse`` as in `topology_layout`. Returns the matplotlib Figure."""
    from matplotlib.collections import LineCollection
    from matplotlib.patches import FancyBboxPatch

    layout = topology_layout(topology, collapse=collapse)
    x0, x1, y0, y1 = layout.extent
    span_x, span_y = x1 - x0 + 2.0, y1 - y0 + 1.6
    scale = min(0.62, 18.0 / span_x)  # inches per unit: the drawing at most 18 in wide
    scale_y = scale if not layout.collapsed else max(scale, 0.75)  # circles need equal aspect
    width = max(6.5, span_x * scale + 2.6)
    height = max(3.8, span_y * scale_y + 1.2)
    fig = new_figure(width, height)
    ax = fig.add_subplot()
    ax.set_xlim(x0 - 1.0, x1 + 1.0)
    ax.set_ylim(y0 - 0.8, y1 + 0.8)
    ax.set_aspect("equal" if not layout.collapsed else "auto")
    ax.axis("off")
    font = 9 if scale >= 0.45 else 7

    for box in layout.boxes:
        ax.add_patch(
            FancyBboxPatch(
                (box.x0, box.y0),
                box.x1 - box.x0,
                box.y1 - box.y0,
                boxstyle="round,pad=0.05,rounding_size=0.25",
                facecolor="#f2f2f2",
                edgecolor="#b0b0b0",
                linewidth=0.8,
                zorder=0,
                gid=f"host-{box.host}",
            )
        )
        ax.text(box.x0 + 0.08, box.y0 + 0.08, box.host, fontsize=font - 1, color="#666666", ha="left", va="bottom", zorder=1)

    classes = bandwidth_classes([e.bandwidth for e in layout.edges])
    segments: list[list] = [[] for _ in classes]
    for e in layout.edges:
        a, b = layout.nodes[e.a], layout.nodes[e.b]
        ya, yb = a.y, b.y
        xa = a.x if a.kind != "bar" else min(max(b.x, a.x - a.width / 2), a.x + a.width / 2)
        xb = b.x if b.kind != "bar" else min(max(a.x, b.x - b.width / 2), b.x + b.width / 2)
        segments[_class_of(classes, e.bandwidth)].append([(xa, ya), (xb, yb)])
        if e.count > 1:
            label = f"{e.count}×{bandwidth_label(e.per_link)}" if e.per_link else f"{e.count} links"
            ax.text(
                xa + 0.45 * (xb - xa),
                ya + 0.45 * (yb - ya),
                label,
                fontsize=font - 2,
                ha="center",
                va="center",
                color="#333333",
                bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
                zorder=7,
            )
    for cls, segs in zip(classes, segments):
        ax.add_collection(
            LineCollection(segs, colors=[cls.color], linewidths=cls.width, label=cls.label, zorder=2, capstyle="round")
        )

    ranks = [n for n in layout.nodes if n.kind == "rank"]
    switches = [n for n in layout.nodes if n.kind == "switch"]
    bars = [n for n in layout.nodes if n.kind == "bar"]
    hosts = [n for n in layout.nodes if n.kind == "host"]
    rank_size = 340 * (scale / 0.62) ** 2
    if ranks:
        ax.scatter(
            [n.x for n in ranks],
            [n.y for n in ranks],
            s=rank_size,
            marker="s",
            facecolor="#cfe3f7",
            edgecolor="#1f4e79",
            linewidth=1.0,
            zorder=5,
            label="ranks",
            gid="ranks",
        )
        if len(ranks) <= 64:
            for n in ranks:
                ax.text(n.x, n.y, n.label, fontsize=font - (1 if len(n.label) > 2 else 0), ha="center", va="center", zorder=6)
    if switches:
        ax.scatter(
            [n.x for n in switches],
            [n.y for n in switches],
            s=rank_size * 0.8,
            marker="h",
            facecolor="#d9d9d9",
            edgecolor="#404040",
            linewidth=1.0,
            zorder=5,
            label="switches",
            gid="switches",
        )
        for n in switches:
            ax.text(
                n.x,
                n.y + 0.42,
                n.label,
                fontsize=font - 1,
                ha="center",
                va="bottom",
                zorder=6,
                color="#202020",
                bbox={"boxstyle": "round,pad=0.08", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
            )
    for n in bars:
        ax.add_patch(
            FancyBboxPatch(
                (n.x - n.width / 2, n.y - 0.18),
                n.width,
                0.36,
                boxstyle="round,pad=0.02,rounding_size=0.1",
                facecolor="#d9d9d9",
                edgecolor="#404040",
                linewidth=1.0,
                zorder=5,
                gid=f"bar-{n.label}",
            )
        )
        ax.text(n.x, n.y, n.label, fontsize=font - 1, ha="center", va="center", zorder=6)
    for n in hosts:
        ax.add_patch(
            FancyBboxPatch(
                (n.x - n.width / 2, n.y - 0.55),
                n.width,
                1.1,
                boxstyle="round,pad=0.02,rounding_size=0.15",
                facecolor="#cfe3f7",
                edgecolor="#1f4e79",
                linewidth=1.0,
                zorder=5,
                gid=f"host-{n.label}",
            )
        )
        ax.text(n.x, n.y + 0.28, n.label, fontsize=font - 1, ha="center", va="center", zorder=6, weight="bold")
        ax.text(n.x, n.y - 0.15, n.note, fontsize=font - 2, ha="center", va="center", zorder=6, linespacing=1.0)

    legend = ax.legend(
        handles=[c for c in ax.collections if isinstance(c, LineCollection)],
        title="link bandwidth\n(per direction)",
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=font,
        title_fontsize=font,
        frameon=False,
    )
    legend.set_gid("bandwidth-legend")
    what = f"{topology.num_ranks} ranks, {len(topology.switches)} switches, {len(topology.links)} directed links"
    if layout.collapsed:
        what += f"; {len(hosts)} hosts collapsed"
    if layout.num_racks > 1 and layout.num_racks < len(topology.host_groups):
        what += f" in {layout.num_racks} racks"
    ax.set_title(title if title is not None else f"{topology.name}: {what}", fontsize=font + 2)
    return fig
