"""Lower bounds: hand-computed cases, ForestColl's figures (arXiv 2402.06787), brute-force checks of every max-flow
computation, and the API (see tests/test_bounds_sound.py for soundness against schedules)."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest

from synth import generators as gen
from synth.bounds import bound_model, lower_bounds
from synth.bounds.alltoall import alltoall_flow_lp, best_alltoall_cut, candidate_rank_sets
from synth.bounds.cuts import in_bandwidth, max_ratio_cut, min_pair_cut, rank_ingress_cuts
from synth.bounds.maxflow import FlowNetwork
from synth.collective import Kind
from synth.topology import Topology, topology_from_document

from .test_bounds_sound import random_topology

MB = 1_000_000


def topo(name: str, ranks, links, switches=()) -> Topology:
    return topology_from_document(
        {
            "format": "synth-topology",
            "version": 1,
            "name": name,
            "ranks": list(ranks),
            "switches": list(switches),
            "links": [{"a": a, "b": b, "bandwidth": bw, "latency": lat} for a, b, bw, lat in links],
        },
        f"<{name}>",
    )


def us(size: float, gbps: float) -> float:
    """µs to move size bytes at gbps GB/s."""
    return size / (gbps * 1e3)


# ============================================================================ hand-computed cases
TWO = topo("two", ["a", "b"], [("a", "b", 10.0, 1.0)])


@pytest.mark.parametrize(
    ("kind", "expected", "binding"),
    [
        # one link of 10 GB/s each way, α 1 µs; every collective needs one step
        (Kind.ALLGATHER, us(MB / 2, 10) + 1, "ingress"),  # each rank receives the other's half
        (Kind.REDUCE_SCATTER, us(MB / 2, 10) + 1, "ingress"),  # ties with egress: the first listed wins
        (Kind.GATHER, us(MB / 2, 10) + 1, "ingress"),
        (Kind.SCATTER, us(MB / 2, 10) + 1, "ingress"),
        (Kind.ALLTOALL, us(MB / 2, 10) + 1, "ingress"),
        (Kind.BROADCAST, us(MB, 10) + 1, "ingress"),
        (Kind.REDUCE, us(MB, 10) + 1, "ingress"),
        (Kind.ALLREDUCE, us(MB, 10) + 1, "ingress"),  # 2(R−1) = 2 transfers per byte over 20 GB/s
    ],
)
def test_two_ranks_one_link(kind, expected, binding):
    report = lower_bounds(TWO, kind, MB)
    assert report.time_us == pytest.approx(expected)
    assert report.binding == binding
    assert report.bound("latency").time_us == pytest.approx(1.0)
    assert report.algbw == pytest.approx(MB / (expected * 1e3))


RING4 = gen.ring(4, bandwidth=10.0, latency=1.0)  # bidirectional ring: 20 GB/s into each rank


@pytest.mark.parametrize(
    ("kind", "expected", "binding"),
    [
        # diameter 2 hops: at least 2 steps of ≥ 1 µs each
        (Kind.ALLGATHER, us(3 * MB / 4, 20) + 2, "ingress"),  # 3/4·size through 2 links of 10
        (Kind.REDUCE_SCATTER, us(3 * MB / 4, 20) + 2, "egress"),
        # a pair of neighbours: 2×2 pieces of size/4 enter over 2 links; the LP agrees
        (Kind.ALLTOALL, us(MB, 20) + 2, "cut"),
        (Kind.BROADCAST, us(MB, 20) + 2, "ingress"),  # max-flow 20 as well
        # 2(R−1) = 6 transfers per byte over 4 × 20 GB/s of rank ingress
        (Kind.ALLREDUCE, us(6 * MB, 80) + 2, "total-ingress"),
    ],
)
def test_four_rank_ring(kind, expected, binding):
    report = lower_bounds(RING4, kind, MB)
    assert report.bound(binding).time_us == pytest.approx(expected)
    assert report.time_us >= report.bound(binding).time_us
    # the combined bounds (tests/test_bounds_combined.py) may bind instead, never anything else
    assert report.binding in (binding, "time-expanded", "cut-latency")
    assert report.bound("latency").time_us == pytest.approx(2.0)


def test_four_rank_ring_alltoall_lp_equals_the_cut():
    report = lower_bounds(RING4, Kind.ALLTOALL, MB)
    assert report.bound("multicommodity-flow").time_us == pytest.approx(report.bound("cut").time_us)
    assert report.bound("ingress").time_us == pytest.approx(us(3 * MB / 4, 20) + 2)


STAR = gen.nvswitch(4, 10.0, 0.5)  # 4 ranks on one switch, 10 GB/s each way, α 0.5 per link


@pytest.mark.parametrize(
    ("kind", "expected", "binding"),
    [
        # one step through the switch costs ≥ 2 × 0.5 µs
        (Kind.ALLGATHER, us(3 * MB / 4, 10) + 1, "ingress"),
        (Kind.ALLTOALL, us(3 * MB / 4, 10) + 1, "ingress"),
        (Kind.BROADCAST, us(MB, 10) + 1, "ingress"),
        (Kind.GATHER, us(3 * MB / 4, 10) + 1, "ingress"),
        (Kind.ALLREDUCE, us(6 * MB, 40) + 1, "total-ingress"),  # = 2(R−1)/R · size / B
        (Kind.REDUCE_SCATTER, us(3 * MB / 4, 10) + 1, "egress"),
        (Kind.SCATTER, us(3 * MB / 4, 10) + 1, "egress"),
        (Kind.REDUCE, us(MB, 10) + 1, "ingress"),
    ],
)
def test_star_through_one_switch(kind, expected, binding):
    report = lower_bounds(STAR, kind, MB)
    assert report.bound(binding).time_us == pytest.approx(expected)
    assert report.time_us >= report.bound(binding).time_us
    assert report.binding in (binding, "time-expanded", "root-pipeline", "exit-pipeline")


def test_star_with_unequal_links():
    star = topo(
        "star",
        ["a", "b", "c", "d"],
        [("a", "s", 10.0, 0.5), ("b", "s", 20.0, 0.5), ("c", "s", 30.0, 0.5), ("d", "s", 40.0, 0.5)],
        switches=["s"],
    )
    ag = lower_bounds(star, Kind.ALLGATHER, MB)
    assert ag.time_us == pytest.approx(us(3 * MB / 4, 10) + 1)
    assert "rank a" in ag.bound("ingress").explanation
    # broadcast from d: everything must reach a through its 10 GB/s link
    bc = lower_bounds(star, Kind.BROADCAST, MB, root=3)
    assert bc.bound("ingress").time_us == pytest.approx(us(MB, 10) + 1)
    # allreduce: every rank receives everything (a: size over 10) beats 6 transfers over 100 GB/s
    ar = lower_bounds(star, Kind.ALLREDUCE, MB)
    assert ar.bound("ingress").time_us == pytest.approx(us(MB, 10) + 1)
    # the LPs see the steps the bytes need as well (and the rooted models borrowed from the broadcast and reduce)
    lps = ("time-expanded", "steps-volume", "as-broadcast")
    assert max(b.time_us for b in ar.bounds if b.name not in lps) == ar.bound("ingress").time_us
    assert ar.bound("total-ingress").time_us == pytest.approx(us(6 * MB, 100) + 1)


def test_nic_that_leads_nowhere_does_not_count_as_ingress():
    """A GPU's NIC with nothing behind it (single-box dgx-a100) adds no usable ingress."""
    with_nics = gen.nvswitch(8, 300.0, nic_bandwidth=25.0)
    cuts = rank_ingress_cuts(with_nics)
    assert all(c.bandwidth == pytest.approx(300.0) for c in cuts)
    assert with_nics.rank_ingress(0) == pytest.approx(325.0)


# ============================================================================ ForestColl's figures
@pytest.mark.parametrize(
    ("name", "algbw"),
    [("dgx1", 171.43), ("dgx-a100", 342.86), ("dgx-a100x2", 346.67), ("dgx-a100x4", 266.67)],
)
def test_anchor_allgather_optimum_on_builtins(builtin, name, algbw):
    model = bound_model(builtin(name), Kind.ALLGATHER)
    assert round(model.peak_algbw, 2) == algbw
    # and at 1 GiB the bound's algbw is within the few step latencies of it
    assert model.at(1 << 30).algbw == pytest.approx(algbw, rel=2e-3)


@pytest.mark.parametrize(
    ("make", "algbw"),
    [
        (lambda: gen.nvswitch(8, 300.0), 342.86),  # ForestColl: 8 GPUs on one NVSwitch, 300 GB/s
        (lambda: gen.nvswitch(8, 300.0, boxes=2, nic_bandwidth=25.0, rails=2), 346.67),
        (lambda: gen.nvswitch(8, 300.0, boxes=4, nic_bandwidth=25.0, rails=2), 266.67),
    ],
)
def test_anchor_allgather_optimum_on_generator_calls(make, algbw):
    assert round(bound_model(make(), Kind.ALLGATHER).peak_algbw, 2) == algbw


def test_reduce_scatter_mirrors_allgather_on_anchors(builtin):
    for name in ("dgx1", "dgx-a100x2", "dgx-a100x4"):
        t = builtin(name)
        assert bound_model(t, Kind.REDUCE_SCATTER).peak_algbw == pytest.approx(bound_model(t, Kind.ALLGATHER).peak_algbw)


def test_anchor_per_rank_allreduce_bound():
    """The classic allreduce bound: ≥ 2(R−1)/R · size / B without in-network reduction."""
    model = bound_model(gen.nvswitch(8, 300.0), Kind.ALLREDUCE)
    assert model.peak_algbw == pytest.approx(8 * 300 / (2 * 7))


# ============================================================================ brute force
def subsets(n: int):
    for mask in range(1, (1 << n) - 1):
        yield frozenset(v for v in range(n) if mask >> v & 1)


@pytest.mark.parametrize("seed", range(30))
def test_exact_allgather_cut_matches_enumeration(seed):
    t = random_topology(seed)
    r, n = t.num_ranks, t.num_nodes
    best_ag = best_gather = best_rs = 0.0
    reverse = t.reversed()
    for s in subsets(n):
        inside = [v for v in s if v < r]
        if not inside or len(inside) == r:
            continue
        outside = r - len(inside)
        best_ag = max(best_ag, outside / in_bandwidth(t, s))
        best_rs = max(best_rs, outside / in_bandwidth(reverse, s))
        if 0 in s:
            best_gather = max(best_gather, outside / in_bandwidth(t, s))
    ingress = rank_ingress_cuts(t)
    start = max(ingress, key=lambda c: 1 / c.bandwidth)
    assert max_ratio_cut(t, range(r), start).ratio == pytest.approx(best_ag, rel=1e-9)
    assert max_ratio_cut(t, [0], ingress[0]).ratio == pytest.approx(best_gather, rel=1e-9)
    rev_start = max(rank_ingress_cuts(reverse), key=lambda c: 1 / c.bandwidth)
    assert max_ratio_cut(reverse, range(r), rev_start).ratio == pytest.approx(best_rs, rel=1e-9)
    # per-rank effective ingress: the smallest in(S) over S holding r and no other rank
    for v in range(r):
        smallest = min(in_bandwidth(t, s) for s in subsets(n) if v in s and all(u not in s for u in range(r) if u != v))
        assert ingress[v].bandwidth == pytest.approx(smallest, rel=1e-9)


@pytest.mark.parametrize("seed", range(30))
def test_pair_cuts_match_networkx(seed):
    t = random_topology(seed)
    g = nx.DiGraph()
    for link in t.links:
        g.add_edge(link.src, link.dst, capacity=link.bandwidth)
    r = t.num_ranks
    pairs = [(a, b) for a in range(r) for b in range(r) if a != b]
    expected = min(nx.maximum_flow_value(g, a, b) for a, b in pairs)
    got = min_pair_cut(t, pairs)
    assert got is not None and got.bandwidth == pytest.approx(expected, rel=1e-9)
    assert in_bandwidth(t, got.cut.nodes) == pytest.approx(got.bandwidth, rel=1e-9)


@pytest.mark.parametrize("seed", range(30))
def test_alltoall_cuts_and_lp_against_enumeration(seed):
    t = random_topology(seed)
    r, n = t.num_ranks, t.num_nodes
    sparsest = 0.0
    for s in subsets(n):
        a = sum(1 for v in s if v < r)
        if 0 < a < r:
            sparsest = max(sparsest, a * (r - a) / in_bandwidth(t, s))
    lp = alltoall_flow_lp(t)
    assert lp is not None
    assert lp.ratio >= sparsest * (1 - 1e-7)  # the LP is at least every cut
    assert lp.ratio == pytest.approx(lp.optimum, rel=1e-6)  # the certificate is tight
    family = best_alltoall_cut(t)
    if family is not None:
        assert family.ratio <= sparsest * (1 + 1e-9)
        assert in_bandwidth(t, family.cut.nodes) == pytest.approx(family.cut.bandwidth)


def test_cbc_agrees_with_highs(builtin):
    for t in (builtin("dgx1"), gen.torus(3, 3), random_topology(3)):
        highs = alltoall_flow_lp(t, "highs")
        cbc = alltoall_flow_lp(t, "cbc")
        assert highs is not None and cbc is not None and cbc.solver == "CBC"
        assert cbc.ratio == pytest.approx(highs.ratio, rel=1e-6)


def test_torus_alltoall_cut_family_finds_the_bisection():
    t = gen.torus(8, 8, bandwidth=25.0)
    cut = best_alltoall_cut(t)
    assert cut is not None and cut.inside_ranks == 32
    assert cut.cut.bandwidth == pytest.approx(16 * 25.0)  # 8 columns × 2 seams
    assert all(2 <= len(a) <= 62 for a in candidate_rank_sets(t))


def test_maxflow_limit_and_cut():
    net = FlowNetwork(4, [(0, 1), (0, 2), (1, 3), (2, 3), (1, 2)])
    caps = [3.0, 2.0, 2.0, 3.0, 1.0]
    full = net.max_flow(caps, 0, 3)
    assert full.value == pytest.approx(5.0)
    side = full.source_side
    assert side is not None and 0 in side and 3 not in side
    crossing = sum(c for (u, v), c in zip(net.arcs, caps) if u in side and v not in side)
    assert crossing == pytest.approx(5.0)
    early = net.max_flow(caps, 0, 3, limit=1.0)
    assert early.value >= 1.0 and early.source_side is None


# ============================================================================ API and models
def test_report_fields_and_busbw(builtin):
    t = builtin("dgx-a100")
    model = bound_model(t, "allreduce")
    report = model.at(1 << 30)
    assert report.time_us == max(b.time_us for b in report.bounds)
    # 2(R-1) transfers per byte over all ingress; and (time-expanded) no schedule has fewer than 2 steps
    assert report.bound("total-ingress").time_us == pytest.approx(0.7 + (1 << 30) * 14 / 8 / 300e3)
    assert report.binding == "time-expanded"
    assert report.time_us == pytest.approx(report.bound("total-ingress").time_us + 0.7)
    assert report.algbw == pytest.approx((1 << 30) / (report.time_us * 1e3))
    assert report.busbw == pytest.approx(report.algbw * 2 * 7 / 8)
    assert [b.name for b in report.bounds] == list(model.names)
    assert model.time_us(1 << 30) == report.time_us
    assert report.to_dict()["binding"] == "time-expanded"
    assert bound_model(t, "allreduce") is model  # cached


def test_latency_binds_small_sizes(builtin):
    report = lower_bounds(builtin("dgx-a100x2"), Kind.ALLGATHER, 1)
    # gpu0 of box 0 to gpu1 of box 1: GPU→NIC→rail→NIC→GPU (3.6 µs) plus one NVSwitch hop (0.7)
    assert report.bound("latency").time_us == pytest.approx(4.3)
    # the same 4.3 µs, plus the byte: a step crossing into a box lasts 3.6 µs, and one more step
    # (cut-latency; crossing-steps and crossing-phases charge the byte's share a little more precisely)
    assert report.bound("cut-latency").time_us == pytest.approx(4.3 + 0.5 / 200e3)
    assert report.binding in ("cut-latency", "crossing-steps", "crossing-phases")
    assert 4.3 + 0.5 / 200e3 <= report.time_us == pytest.approx(4.3, rel=1e-5)


def test_event_model_drops_the_step_floor(builtin):
    t = builtin("dgx1")
    step = bound_model(t, Kind.ALLGATHER, model="step")
    event = bound_model(t, Kind.ALLGATHER, model="event")
    assert step.term("ingress").latency_us == pytest.approx(2 * 0.7)  # 2 hops, 0.7 µs each
    assert event.term("ingress").latency_us == 0.0
    assert event.term("latency").latency_us == step.term("latency").latency_us
    assert step.step_floor_us == pytest.approx(1.4) and event.step_floor_us == 0.0
    assert bound_model(t, "reduce_scatter").kind is Kind.REDUCE_SCATTER
    with pytest.raises(ValueError, match="cost model"):
        bound_model(t, Kind.ALLGATHER, model="fluid")


def test_rooted_default_and_errors(builtin):
    t = builtin("dgx1")
    assert bound_model(t, Kind.BROADCAST).root == 0
    with pytest.raises(ValueError):
        bound_model(t, Kind.ALLGATHER, root=1)
    with pytest.raises(ValueError):
        bound_model(t, Kind.BROADCAST, root=8)


def test_single_rank_has_nothing_to_bound():
    one = topology_from_document({"format": "synth-topology", "version": 1, "name": "one", "ranks": ["a"], "links": []}, "<one>")
    report = lower_bounds(one, Kind.ALLREDUCE, 1024)
    assert report.time_us == 0.0 and report.binding == "none" and math.isinf(report.algbw)
    assert report.to_dict()["algbw"] is None


def test_lp_limit_leaves_a_note(builtin):
    model = bound_model(builtin("dgx1"), Kind.ALLTOALL, lp_max_variables=10)
    assert "multicommodity-flow" not in model.names and "skipped" in model.notes[0]
    assert "multicommodity-flow" in bound_model(builtin("dgx1"), Kind.ALLTOALL).names


def test_every_builtin_and_collective_has_bounds(builtin):
    from synth.builtin import BUILTIN_NAMES

    for name in BUILTIN_NAMES:
        if name == "fattree-4rack":
            continue
        t = builtin(name)
        for kind in Kind:
            report = lower_bounds(t, kind, 1 << 20)
            assert report.time_us > 0 and {"ingress", "egress", "latency"} <= {b.name for b in report.bounds}


@pytest.mark.parametrize("pair", list(itertools.product(["allgather", "alltoall"], [1, 1 << 30])))
def test_binding_is_the_largest(pair, builtin):
    kind, size = pair
    report = lower_bounds(builtin("ndv2x2"), kind, size)
    assert report.bound(report.binding).time_us == report.time_us


@pytest.mark.parametrize("seed", range(20))
def test_floyd_and_dijkstra_latency_facts_agree(seed, monkeypatch):
    from synth.bounds import latency

    t = random_topology(seed)
    fast = latency.latency_facts(t)
    monkeypatch.setattr(latency, "FLOYD_MAX_NODES", 0)
    slow = latency.latency_facts(t)
    np.testing.assert_allclose(fast.alpha, slow.alpha, rtol=1e-12)
    assert fast.hops.tolist() == slow.hops.tolist()
    assert fast.min_transfer_alpha == pytest.approx(slow.min_transfer_alpha)


def test_latency_facts_by_hand():
    from synth.bounds.latency import latency_facts

    # a – s – b with α 0.5 per link, and c behind b over a direct link of α 2
    t = topo("line", ["a", "b", "c"], [("a", "s", 10.0, 0.5), ("s", "b", 10.0, 0.5), ("b", "c", 10.0, 2.0)], switches=["s"])
    facts = latency_facts(t)
    assert facts.alpha[0, 2] == pytest.approx(3.0) and facts.hops[0, 2] == 2  # relayed by b
    assert facts.min_transfer_alpha == pytest.approx(1.0)
    assert lower_bounds(t, Kind.BROADCAST, 0).time_us == pytest.approx(3.0)
