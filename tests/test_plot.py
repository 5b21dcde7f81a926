"""Pictures: what each figure contains (axes, labels, scales, number of nodes, lines and bars),
its layout rules, and that saving is reproducible."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from matplotlib.collections import LineCollection, PolyCollection

from synth import generators as gen
from synth.bounds import bound_model
from synth.compare import compare
from synth.plot import best_ranges, plot_curves, plot_timeline, plot_topology, render, save, topology_layout
from synth.plot.timeline import busy_time, gantt_rows, link_kinds
from synth.plot.topology import MAX_CLASSES, bandwidth_classes
from synth.registry import synthesize
from synth.simulate import Simulator
from synth.units import size_range


def _pairs(topology):
    return {(min(link.src, link.dst), max(link.src, link.dst)) for link in topology.links}


def _line_collections(ax):
    return [c for c in ax.collections if isinstance(c, LineCollection)]


def _collection(ax, gid):
    found = [c for c in ax.collections if c.get_gid() == gid]
    assert len(found) == 1, [c.get_gid() for c in ax.collections]
    return found[0]


# --------------------------------------------------------------------------------------- topology
def test_dgx1_picture(dgx1):
    fig = plot_topology(dgx1)
    ax = fig.axes[0]
    assert "dgx1" in ax.get_title() and "8 ranks" in ax.get_title()
    ranks = _collection(ax, "ranks")
    assert len(ranks.get_offsets()) == 8
    assert not [c for c in ax.collections if c.get_gid() == "switches"]
    lines = _line_collections(ax)
    assert sorted(c.get_label() for c in lines) == ["25 GB/s", "50 GB/s"]
    assert sum(len(c.get_segments()) for c in lines) == len(_pairs(dgx1)) == 16
    by_label = {c.get_label(): c for c in lines}
    assert len(by_label["50 GB/s"].get_segments()) == 8
    # wider and different colour for the faster links
    assert by_label["50 GB/s"].get_linewidth()[0] > by_label["25 GB/s"].get_linewidth()[0]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["25 GB/s", "50 GB/s"]
    assert "bandwidth" in legend.get_title().get_text()
    # every rank is numbered
    texts = {t.get_text() for t in ax.texts}
    assert {str(r) for r in range(8)} <= texts


def test_dgx1_circle_follows_the_double_nvlinks(dgx1):
    """The mesh is drawn as a circle whose sides are the eight 50 GB/s links."""
    layout = topology_layout(dgx1)
    ranks = [n for n in layout.nodes if n.kind == "rank"]
    angles = {n.members[0]: math.atan2(n.y, n.x - np.mean([m.x for m in ranks])) for n in ranks}
    order = sorted(angles, key=lambda r: -angles[r])
    bw = {(link.src, link.dst): link.bandwidth for link in dgx1.links}
    assert all(bw[(order[k], order[(k + 1) % 8])] == 50 for k in range(8))
    radii = [math.hypot(n.x - np.mean([m.x for m in ranks]), n.y) for n in ranks]
    assert max(radii) - min(radii) < 1e-9


def test_fattree_collapses_hosts_into_racks(builtin):
    topology = builtin("fattree-4rack")
    layout = topology_layout(topology)
    assert layout.collapsed and layout.num_racks == 4
    hosts = [n for n in layout.nodes if n.kind == "host"]
    switches = {n.label: n for n in layout.nodes if n.kind == "switch"}
    assert len(hosts) == 16 and sorted(switches) == ["spine0", "spine1", "tor0", "tor1", "tor2", "tor3"]
    assert all(h.note == "8 ranks\n300 GB/s each" for h in hosts)
    # every rank and every host-owned switch (NVSwitch, NICs) is inside its host box
    assert sorted(v for h in hosts for v in h.members) == sorted(
        list(range(128)) + [s for s in range(128, topology.num_nodes) if topology.nodes[s].host is not None]
    )
    # ToRs above their rack's hosts, spines above the ToRs
    for r in range(4):
        rack = [h for h in hosts if h.label.startswith(f"r{r}s")]
        tor = switches[f"tor{r}"]
        assert min(h.x for h in rack) < tor.x < max(h.x for h in rack)
        assert tor.y > max(h.y for h in rack)
    assert switches["spine0"].y > switches["tor0"].y and switches["spine0"].y == switches["spine1"].y
    # racks are further apart than hosts in a rack
    xs = sorted(h.x for h in hosts)
    gaps = np.diff(xs)
    assert gaps[3] > gaps[0] and np.allclose(gaps[[0, 1, 2]], gaps[0])
    edges = {(layout.nodes[e.a].label, layout.nodes[e.b].label): e for e in layout.edges}
    e = edges[("r0s0", "tor0")] if ("r0s0", "tor0") in edges else edges[("tor0", "r0s0")]
    assert (e.count, e.per_link, e.bandwidth) == (8, 50, 400)
    assert len(layout.edges) == 16 + 8

    fig = plot_topology(topology)
    ax = fig.axes[0]
    assert "16 hosts collapsed in 4 racks" in ax.get_title()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["200 GB/s", "400 GB/s"]
    assert sum(len(c.get_segments()) for c in _line_collections(ax)) == 24
    assert sum(1 for p in ax.patches if (p.get_gid() or "").startswith("host-")) == 16
    assert sum(1 for t in ax.texts if t.get_text() == "8×50") == 16
    width, height = fig.get_size_inches()
    assert width <= 21 and height >= 4


def test_fattree_uncollapsed_draws_every_rank(builtin):
    topology = builtin("fattree-4rack")
    layout = topology_layout(topology, collapse=False)
    assert not layout.collapsed
    assert sum(n.kind == "rank" for n in layout.nodes) == 128
    assert sum(n.kind == "bar" for n in layout.nodes) == 16  # each server's NVSwitch under its GPUs
    assert len(layout.edges) == len(_pairs(topology))
    assert len(layout.boxes) == 16


def test_host_internal_switches_below_and_nics_above(builtin):
    topology = builtin("dgx-a100x2")
    layout = topology_layout(topology)
    nodes = {n.label: n for n in layout.nodes}
    rank_y = {n.y for n in layout.nodes if n.kind == "rank"}
    assert rank_y == {0.0}
    assert nodes["n0-nvswitch"].kind == "bar" and nodes["n0-nvswitch"].y < 0
    assert nodes["n0-nvswitch"].width >= 7  # spans its eight GPUs
    nic = nodes["n0-nic3"]
    assert nic.kind == "switch" and nic.x == pytest.approx(nodes["3"].x)
    assert nodes["rail0"].y > nic.y > 0
    assert layout.num_racks == 1  # both boxes hang off both rails
    # the NICs are drawn inside their box
    box = next(b for b in layout.boxes if b.host == "node0")
    assert box.y1 > nic.y


def test_pcie_levels(builtin):
    topology = builtin("pcie-2socket")
    layout = topology_layout(topology)
    nodes = {n.label: n for n in layout.nodes}
    assert nodes["pcisw0"].x == pytest.approx(np.mean([nodes[str(r)].x for r in range(4)]))
    assert nodes["cpu0"].y == nodes["cpu1"].y > nodes["pcisw0"].y > 0
    assert nodes["cpu0"].x < nodes["cpu1"].x


@pytest.mark.parametrize(
    "make",
    [
        lambda: gen.ring(5),
        lambda: gen.torus(3, 3),
        lambda: gen.nvswitch(6, 100.0),
        lambda: gen.pcie_tree(sockets=2, switches_per_socket=1, gpus_per_switch=3),
        lambda: gen.fattree(racks=2, servers=2, gpus=2),
        lambda: gen.ring(2),
        lambda: gen.dgx1(boxes=2, nic_bandwidth=12.5),
    ],
)
def test_every_node_and_link_is_drawn(make):
    topology = make()
    layout = topology_layout(topology)
    drawn = sorted(v for n in layout.nodes for v in n.members)
    assert drawn == list(range(topology.num_nodes))
    if not layout.collapsed:
        assert len(layout.edges) == len(_pairs(topology))
    positions = {(round(n.x, 6), round(n.y, 6)) for n in layout.nodes if n.kind in ("rank", "switch", "host")}
    assert len(positions) == sum(n.kind in ("rank", "switch", "host") for n in layout.nodes)  # no two on one spot
    fig = plot_topology(topology)
    assert all(t.get_text().endswith("GB/s") for t in fig.axes[0].get_legend().get_texts())


def test_bandwidth_classes_bin_many_values():
    values = [1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0, 55.0, 89.0, 144.0]
    classes = bandwidth_classes(values)
    assert len(classes) <= MAX_CLASSES
    assert all(sum(c.low <= v <= c.high for c in classes) == 1 for v in values)
    assert all(c.label.endswith(" GB/s") and "-" in c.label for c in classes if c.low != c.high)
    assert [c.width for c in classes] == sorted(c.width for c in classes)
    exact = bandwidth_classes([25.0, 50.0, 25.0])
    assert [c.label for c in exact] == ["25 GB/s", "50 GB/s"]


# --------------------------------------------------------------------------------------- saving
def test_save_png_and_svg_reproducibly(tmp_path, dgx1):
    fig = plot_topology(dgx1)
    png, svg = render(fig, "png"), render(fig, "svg")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert svg.lstrip().startswith(b"<?xml") and b"<svg" in svg
    assert b"<dc:date>" not in svg
    assert render(plot_topology(dgx1), "png") == png
    assert render(plot_topology(dgx1), "svg") == svg
    save(fig, tmp_path / "t.svg")
    assert (tmp_path / "t.svg").read_bytes() == svg
    save(fig, tmp_path / "t.PNG")
    assert (tmp_path / "t.PNG").read_bytes() == png


def test_save_refuses_unknown_format_and_inputs(tmp_path, dgx1):
    from synth.errors import InputError

    fig = plot_topology(dgx1)
    with pytest.raises(InputError, match="unknown image format"):
        save(fig, tmp_path / "t.jpg")
    existing = tmp_path / "in.png"
    existing.write_bytes(b"mine")
    with pytest.raises(InputError, match="also an input"):
        save(fig, existing, protect=[existing])
    assert existing.read_bytes() == b"mine"


# --------------------------------------------------------------------------------------- timeline
def test_busy_time_is_the_union_of_intervals():
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(0, 8))
        starts = rng.integers(0, 20, n).astype(float)
        ends = starts + rng.integers(0, 6, n)
        grid = np.zeros(40, dtype=bool)
        for s, e in zip(starts, ends):
            grid[int(s) : int(e)] = True
        assert busy_time(starts, ends) == grid.sum()


@pytest.fixture(scope="module")
def dgx1_multiring(dgx1):
    return synthesize(dgx1, "allreduce", "multiring")


def test_timeline_bars_are_the_link_transfer_entries(dgx1, dgx1_multiring):
    size = 1 << 20
    fig = plot_timeline(dgx1_multiring, dgx1, size)
    ax = fig.axes[0]
    result = Simulator(dgx1_multiring, dgx1).event([size])[0]
    tl = result.timeline
    bars = _collection(ax, "transfers")
    assert isinstance(bars, PolyCollection)
    assert len(bars.get_paths()) == len(tl.link_ids)  # one bar per (link, transfer)
    carrying = sorted(set(tl.link_ids.tolist()))
    assert len(ax.get_yticklabels()) == len(carrying) == 32
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names[0] == "gpu0→gpu1" and all("→" in n for n in names)
    assert ax.get_xlabel() == "time (µs)" and ax.get_ylabel() == "directed link"
    # bars span data_start .. end of their transfers
    verts = np.array([p.vertices[:4] for p in bars.get_paths()])
    assert np.isclose(verts[:, :, 0].min(), tl.data_start_us.min())
    assert np.isclose(verts[:, :, 0].max(), result.time_us)
    # the total time and the lower bound are marked
    bound = bound_model(dgx1, "allreduce", model="event").at(size)
    marks = {line.get_gid(): line.get_xdata()[0] for line in ax.get_lines()}
    assert marks["total"] == pytest.approx(result.time_us) and marks["bound"] == pytest.approx(bound.time_us)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0].startswith("total ") and legend[1].startswith("lower bound ")
    assert fig.axes[1].get_ylabel() == "step"  # the colour bar
    assert np.array_equal(np.sort(bars.get_array()), np.sort(tl.step[gantt_rows(tl, len(dgx1.links)).bar_transfer]))
    assert "multiring" in ax.get_title() and "1MiB" in ax.get_title()


def test_timeline_shows_idle_links(dgx1):
    ring = synthesize(dgx1, "allreduce", "ring")
    fig = plot_timeline(ring, dgx1, 1 << 30, color_by="chunk")
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == 16
    assert "16 of 32 links idle" in ax.get_title()
    assert fig.axes[1].get_ylabel() == "chunk"
    busy = [t.get_text() for t in ax.texts if t.get_text().endswith("%")]
    assert len(busy) == 16 and set(busy) == {"50%"}  # each ring direction works half of the time


def test_timeline_keeps_the_busiest_rows_of_each_kind(builtin):
    topology = builtin("ndv2x2")
    tree = synthesize(topology, "allreduce", "double-binary-tree")
    tl = Simulator(tree, topology).event([1 << 24])[0].timeline
    kinds = link_kinds(topology)
    assert len(set(kinds.tolist())) == 5  # NVLink 25 and 50, GPU→NIC, NIC→GPU, NIC↔IB
    all_rows = gantt_rows(tl, len(topology.links), kinds=kinds)
    rows = gantt_rows(tl, len(topology.links), max_rows=9, kinds=kinds)
    assert len(rows.links) == 9 and rows.links_with_data == len(all_rows.links) > 9
    busy = dict(zip(all_rows.links.tolist(), all_rows.busy_us.tolist()))
    shown_kinds = kinds[rows.links]
    carrying_kinds = set(kinds[all_rows.links].tolist())
    assert set(shown_kinds.tolist()) == carrying_kinds  # every kind that carries data has a row
    for k in carrying_kinds:  # and each kind's rows are its busiest links
        mine = [ell for ell in all_rows.links.tolist() if kinds[ell] == k]
        picked = [ell for ell in rows.links.tolist() if kinds[ell] == k]
        assert min(busy[ell] for ell in picked) >= sorted((busy[ell] for ell in mine), reverse=True)[len(picked) - 1]
    # rows are grouped by kind, then ordered by link id
    assert list(zip(shown_kinds.tolist(), rows.links.tolist())) == sorted(zip(shown_kinds.tolist(), rows.links.tolist()))
    per_link = np.bincount(tl.link_ids, minlength=len(topology.links))
    assert len(rows.bar_transfer) == per_link[rows.links].sum()
    fig = plot_timeline(tree, topology, 1 << 24, max_rows=9)
    assert f"{rows.links_with_data} links" in fig.axes[0].get_title()
    assert "9 rows: the busiest links of each kind" in fig.axes[0].get_title()
    assert len(_collection(fig.axes[0], "transfers").get_paths()) == per_link[rows.links].sum()


def test_sync_timeline_has_barriers(dgx1, dgx1_multiring):
    size = 1 << 20
    fig = plot_timeline(dgx1_multiring, dgx1, size, model="sync")
    verts = np.array([p.vertices[:4] for p in _collection(fig.axes[0], "transfers").get_paths()])
    tl = Simulator(dgx1_multiring, dgx1).sync([size], timeline=True)[0].timeline
    gr = gantt_rows(tl, len(dgx1.links), kinds=link_kinds(dgx1))
    steps = tl.step[gr.bar_transfer]
    # no bar of a step starts before every bar of the previous step has ended
    for s in range(1, dgx1_multiring.num_steps):
        assert verts[steps == s, :, 0].min() >= verts[steps == s - 1, :, 0].max() - 1e-9
    assert "step-synchronous" in fig.axes[0].get_title()


# --------------------------------------------------------------------------------------- curves
@pytest.fixture(scope="module")
def allgather_comparison(dgx1):
    return compare(dgx1, "allgather", size_range(8, 1 << 30, 8))


def test_curves_one_line_per_method_and_the_bound(allgather_comparison):
    c = allgather_comparison
    fig = plot_curves(c)
    ax = fig.axes[1]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel().startswith("message size") and ax.get_ylabel() == "busbw (GB/s)"
    ok = [o for o in c.outcomes if o.ok]
    lines = ax.get_lines()
    assert len(lines) == len(ok) + 2
    labels = [line.get_label() for line in lines]
    assert sorted(labels[: len(ok)]) == sorted(o.method for o in ok)
    assert labels[-2:] == ["lower bound", "NCCL model (analytic)"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == labels
    for line in lines[: len(ok)]:
        o = next(o for o in ok if o.method == line.get_label())
        expected = [c.busbw_factor * s / (t * 1e3) for s, t in zip(c.sizes, o.times_us)]
        assert np.allclose(line.get_ydata(), expected)
        assert list(line.get_xdata()) == list(c.sizes)
    assert np.allclose(lines[-2].get_ydata(), [b.busbw for b in c.bounds])
    # no method is above the bound
    assert all(np.all(line.get_ydata() <= lines[-2].get_ydata() * (1 + 1e-9)) for line in lines[: len(ok)])
    # the legend lists the fastest method at 1 GiB first
    assert labels[0] == c.best(len(c.sizes) - 1).method
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0] == "8B" and ticks[-1] == "1GiB"
    assert len(plot_curves(c, nccl=False).axes[1].get_lines()) == len(ok) + 1


def test_best_ranges_partition_the_sizes(allgather_comparison):
    c = allgather_comparison
    ranges = best_ranges(c)
    covered = [i for r in ranges for i in range(r.first, r.last + 1)]
    assert covered == list(range(len(c.sizes)))
    for r in ranges:
        assert all(c.best(i).method == r.method for i in range(r.first, r.last + 1))
        assert (r.low, r.high) == (c.sizes[r.first], c.sizes[r.last])
    assert all(a.method != b.method for a, b in itertools.pairwise(ranges))
    strip = plot_curves(c).axes[0]
    spans = [p for p in strip.patches if (p.get_gid() or "").startswith("best-")]
    assert [p.get_gid() for p in spans] == [f"best-{r.method}" for r in ranges]
    assert [t.get_text() for t in strip.texts] == [r.method for r in ranges]
