"""The simulator against hand-computed cases (both models), slow reference versions, and properties
that hold by construction (see docs/simulator.md)."""

from __future__ import annotations

import functools
import itertools
import random

import numpy as np
import pytest

from synth import generators as gen
from synth.builtin import get_topology
from synth.collective import ALL_KINDS, Collective, Kind
from synth.errors import NotApplicable
from synth.registry import CLASSIC_METHODS, METHODS, NCCL_METHODS, synthesize
from synth.routing import router_for
from synth.schedule import Transfer, schedule_from_steps
from synth.simulate import Simulator, max_min_rates, simulate
from synth.simulate import event as event_module
from synth.topology import topology_from_document
from synth.verify import verify

from .sim_reference import max_min, must_follow, path_links, sync_time

SIZES = [0, 1, 1000, 123_457, 2**20, 2**30]


def topology(ranks, links, switches=()):
    """A topology from (a, b, bandwidth GB/s, latency µs[, duplex]) tuples."""
    entries = []
    for link in links:
        a, b, bw, lat = link[:4]
        entry = {"a": a, "b": b, "bandwidth": bw, "latency": lat}
        if len(link) > 4:
            entry["duplex"] = link[4]
        entries.append(entry)
    doc = {"format": "synth-topology", "version": 1, "name": "t", "ranks": list(ranks), "switches": list(switches)}
    doc["links"] = entries
    return topology_from_document(doc)


def schedule(topo, kind, steps, chunks=1, root=None):
    sched = schedule_from_steps(Collective(kind, topo.num_ranks, chunks, root), steps, topo)
    result = verify(sched, topo)
    assert result.ok, result.violation
    return sched


def times(sched, topo, sizes, model):
    return [r.time_us for r in simulate(sched, topo, sizes, model)]


def both(sched, topo, sizes):
    return times(sched, topo, sizes, "sync"), times(sched, topo, sizes, "event")


# =========================================================================== hand-computed: 2 ranks
TWO = topology(["a", "b"], [("a", "b", 10.0, 1.5)])  # 10 GB/s = 1e4 bytes/µs each way, α 1.5 µs


def test_two_ranks_one_transfer():
    sched = schedule(TWO, Kind.BROADCAST, [[(0, 1, 0)]], root=0)
    expected = [1.5 + s / 1e4 for s in SIZES]
    sync, event = both(sched, TWO, SIZES)
    assert sync == pytest.approx(expected, rel=1e-12)
    assert event == pytest.approx(expected, rel=1e-12)


def test_two_ranks_both_directions_are_separate_links():
    sched = schedule(TWO, Kind.ALLGATHER, [[(0, 1, 0), (1, 0, 1)]])
    expected = [1.5 + s / 2 / 1e4 for s in SIZES]  # half the buffer each way, at the same time
    sync, event = both(sched, TWO, SIZES)
    assert sync == pytest.approx(expected, rel=1e-12)
    assert event == pytest.approx(expected, rel=1e-12)


def test_two_ranks_two_chunks_in_one_step_share_the_link():
    sched = schedule(TWO, Kind.BROADCAST, [[(0, 1, 0), (0, 1, 1)]], chunks=2, root=0)
    expected = [1.5 + s / 1e4 for s in SIZES]  # B = both chunks = size; one α
    sync, event = both(sched, TWO, SIZES)
    assert sync == pytest.approx(expected, rel=1e-12)
    assert event == pytest.approx(expected, rel=1e-12)
    tl = simulate(sched, TWO, [10**6], "event")[0].timeline
    assert tl.data_start_us.tolist() == pytest.approx([1.5, 1.5])
    assert tl.end_us.tolist() == pytest.approx([101.5, 101.5])  # both at half rate the whole time


def test_two_ranks_two_chunks_in_two_steps_take_turns():
    """The link serves the steps in order: the second chunk waits for the first (no data
    dependency between them), so both models pay α twice."""
    sched = schedule(TWO, Kind.BROADCAST, [[(0, 1, 0)], [(0, 1, 1)]], chunks=2, root=0)
    expected = [2 * (1.5 + s / 2 / 1e4) for s in SIZES]
    sync, event = both(sched, TWO, SIZES)
    assert sync == pytest.approx(expected, rel=1e-12)
    assert event == pytest.approx(expected, rel=1e-12)


def test_one_way_link():
    topo = topology(["a", "b"], [("a", "b", 10.0, 1.5, False), ("b", "a", 40.0, 0.5, False)])
    sched = schedule(topo, Kind.ALLGATHER, [[(0, 1, 0), (1, 0, 1)]])
    expected = [max(1.5 + s / 2 / 1e4, 0.5 + s / 2 / 4e4) for s in SIZES]
    sync, event = both(sched, topo, SIZES)
    assert sync == pytest.approx(expected, rel=1e-12)
    assert event == pytest.approx(expected, rel=1e-12)


# =========================================================================== hand-computed: 4-rank ring
ALPHA, BW = 0.7, 25.0
RING4 = gen.ring(4, bandwidth=BW, latency=ALPHA)


def ring_allgather_steps(r):
    """At step s, rank p forwards the piece of rank p − s to p + 1."""
    return [[(p, (p + 1) % r, (p - s) % r) for p in range(r)] for s in range(r - 1)]


def test_ring_allgather_on_a_4_ring():
    sched = schedule(RING4, Kind.ALLGATHER, ring_allgather_steps(4))
    expected = [3 * (ALPHA + s / 4 / (BW * 1e3)) for s in SIZES]
    sync, event = both(sched, RING4, SIZES)
    assert sync == pytest.approx(expected, rel=1e-12)
    assert event == pytest.approx(expected, rel=1e-12)
    result = simulate(sched, RING4, [2**30], "sync")[0]
    assert result.algbw == pytest.approx(2**30 / expected[-1] / 1e3)
    assert result.busbw == pytest.approx(result.algbw * 3 / 4)


def test_ring_allreduce_on_a_4_ring():
    r = 4
    reduce_scatter = [[(p, (p + 1) % r, (p - s) % r, "reduce") for p in range(r)] for s in range(r - 1)]
    allgather = [[(p, (p + 1) % r, (p + 1 - s) % r) for p in range(r)] for s in range(r - 1)]
    sched = schedule(RING4, Kind.ALLREDUCE, reduce_scatter + allgather, chunks=4)
    expected = [6 * (ALPHA + s / 4 / (BW * 1e3)) for s in SIZES]
    sync, event = both(sched, RING4, SIZES)
    assert sync == pytest.approx(expected, rel=1e-12)
    assert event == pytest.approx(expected, rel=1e-12)
    result = simulate(sched, RING4, [2**30], "event")[0]
    assert result.busbw == pytest.approx(result.algbw * 2 * 3 / 4)


# =========================================================================== hand-computed: a star
def star(out_bw=(10.0, 10.0, 10.0)):
    """Ranks r0, r1, r2 on one switch; rank i's (duplex) link has α 0.2 + 0.1·i µs and bandwidth
    out_bw[i] GB/s."""
    links = [(f"r{i}", "sw", bw, 0.2 + 0.1 * i) for i, bw in enumerate(out_bw)]
    return topology(["r0", "r1", "r2"], links, switches=["sw"])


def test_star_one_transfer_pays_both_alphas():
    topo = star()
    sched = schedule(topo, Kind.GATHER, [[(0, 1, 0, "copy", ("sw",))], [(2, 1, 2, "copy", ("sw",))]], root=1)
    # each step: one chunk (size/3) over two links of 10 GB/s; α of r0's link 0.2 + r1's 0.3, then 0.4 + 0.3
    expected = [(0.2 + 0.3 + s / 3 / 1e4) + (0.4 + 0.3 + s / 3 / 1e4) for s in SIZES]
    sync, event = both(sched, topo, SIZES)
    assert sync == pytest.approx(expected, rel=1e-12)
    assert event == pytest.approx(expected, rel=1e-12)


def test_star_two_transfers_into_one_rank_share_its_link():
    topo = star()
    sched = schedule(topo, Kind.GATHER, [[(0, 1, 0, "copy", ("sw",)), (2, 1, 2, "copy", ("sw",))]], root=1)
    # sync: sw→r1 carries both chunks, B = 2c (c = size/3); r2's transfer has the larger α (0.7)
    sync, event = both(sched, topo, SIZES)
    assert sync == pytest.approx([0.7 + 2 * s / 3 / 1e4 for s in SIZES], rel=1e-12)
    # event: r0's flow starts at 0.5 and has sw→r1 to itself until r2's starts at 0.7 (2000 bytes);
    # after that sw→r1 stays busy until both chunks are through, unless r0's flow was done first
    expected = []
    for s in SIZES:
        c = s / 3
        expected.append(0.7 + c / 1e4 if c <= 2000 else 0.5 + 2 * c / 1e4)
    assert event == pytest.approx(expected, rel=1e-12)


def test_star_max_min_sharing():
    """r0 scatters to r1 and r2 through the switch; r2's link is ten times slower. Sync: the step
    takes the slow transfer's Σα + c/1e3. Event: the slow flow is held to 1e3 bytes/µs by its own
    link, so max-min gives the other flow the rest of r0's link (9e3 bytes/µs), not half of it."""
    topo = star(out_bw=(10.0, 10.0, 1.0))
    sched = schedule(topo, Kind.SCATTER, [[(0, 1, 1, "copy", ("sw",)), (0, 2, 2, "copy", ("sw",))]], root=0)
    size = 3 * 10**6
    c = size / 3
    sync = simulate(sched, topo, [size], "sync")[0]
    assert sync.time_us == pytest.approx(max(0.2 + 0.3 + 2 * c / 1e4, 0.2 + 0.4 + c / 1e3))
    event = simulate(sched, topo, [size], "event")[0]
    assert event.time_us == pytest.approx(0.2 + 0.4 + c / 1e3)
    # both flows start together (their α differ: 0.5 and 0.6): r1's flow runs 0.1 µs alone at full rate
    tl = event.timeline
    assert tl.data_start_us.tolist() == pytest.approx([0.5, 0.6])
    assert tl.end_us[0] == pytest.approx(0.6 + (c - 0.1 * 1e4) / 9e3)


def test_worked_example_from_the_docs():
    """docs/simulator.md: a 3-rank allgather where a step's slow transfer and the next step's
    slow transfer are independent, so the event-driven model overlaps them."""
    topo = topology(["r0", "r1", "r2"], [("r0", "r1", 10.0, 1.0), ("r0", "r2", 20.0, 1.0), ("r1", "r2", 20.0, 1.0)])
    steps = [[(0, 1, 0), (1, 2, 1), (2, 1, 2)], [(2, 0, 1), (2, 0, 2), (0, 2, 0)]]
    sched = schedule(topo, Kind.ALLGATHER, steps)
    size = 300_000  # 100,000 bytes per chunk: 10 µs on a 10 GB/s link, 5 µs on a 20 GB/s link
    assert simulate(sched, topo, [size], "sync")[0].time_us == pytest.approx(22.0)
    event = simulate(sched, topo, [size], "event")[0]
    assert event.time_us == pytest.approx(12.0)
    got = {(e.step, e.src, e.dst, e.chunk): (e.start, e.data_start, e.end) for e in event.timeline}
    assert got[(0, 0, 1, 0)] == pytest.approx((0, 1, 11))
    assert got[(0, 1, 2, 1)] == pytest.approx((0, 1, 6))
    assert got[(1, 2, 0, 2)] == pytest.approx((0, 1, 6))  # nothing to wait for: runs during step 0
    assert got[(1, 2, 0, 1)] == pytest.approx((6, 7, 12))  # waits for chunk 1 to reach rank 2
    assert got[(1, 0, 2, 0)] == pytest.approx((0, 1, 6))


# =========================================================================== the sync model vs a slow one
@functools.cache
def classic_cases():
    """Every classic method × collective on a few small topologies (k = default and 2)."""
    topos = {
        "ring5": gen.ring(5),
        "torus3x3": gen.torus(3, 3),
        "full4": gen.fully_connected(4),
        "nvswitch5": gen.nvswitch(5, 100.0),
        "pcie": gen.pcie_tree(sockets=2, switches_per_socket=1, gpus_per_switch=2),
        "fattree": gen.fattree(racks=2, servers=2, gpus=2),
        "dgx1": get_topology("dgx1"),
    }
    out = []
    for name, topo in topos.items():
        # baselines only: the scalable methods' schedules are timed in test_greedy/test_packing, and
        # the ILP's in test_ilp.py; this Python-loop check would take minutes on their transfers
        for method in (m for m in METHODS if m in CLASSIC_METHODS or m in NCCL_METHODS):
            for kind in ALL_KINDS:
                if not METHODS[method].serves(kind):
                    continue
                for chunks in (None, 2):
                    try:
                        out.append((name, method, kind, topo, synthesize(topo, kind, method, chunks=chunks)))
                    except (NotApplicable, ValueError):
                        continue
    return out


def randomized(topo, seed):
    """The same machine with random bandwidths and latencies (per directed link)."""
    rng = random.Random(seed)
    links = [
        (topo.node_name(lk.src), topo.node_name(lk.dst), rng.choice([5.0, 12.5, 25.0, 50.0, 300.0]), rng.random() * 2, False)
        for lk in topo.links
    ]
    return topology([n.name for n in topo.ranks], links, switches=[n.name for n in topo.switches])


def test_sync_matches_the_literal_formula_on_classic_schedules():
    for name, method, kind, topo, sched in classic_cases():
        for variant in (topo, randomized(topo, len(name) + len(method) + len(kind.value))):
            got = times(sched, variant, SIZES, "sync")
            want = [sync_time(sched, variant, s) for s in SIZES]
            assert got == pytest.approx(want, rel=1e-12, abs=1e-12), (name, method, kind)


def random_schedule(topo, seed, steps=6, per_step=8):
    """Arbitrary transfers (not a valid collective; the cost models do not need one), routed
    through switches where the topology has them."""
    rng = random.Random(seed)
    router = router_for(topo)
    r = topo.num_ranks
    coll = Collective(Kind.ALLTOALL, r, 1)
    out = []
    for _ in range(steps):
        step = []
        for _ in range(rng.randint(0, per_step)):
            a, b = rng.sample(range(r), 2)
            if (a, b) in topo.link_index:
                via = ()
            else:
                via = router.via_names(a, b)
                if via is None:
                    continue
            step.append(Transfer(a, b, rng.randrange(coll.num_chunks), "copy", via))
        out.append(step)
    return schedule_from_steps(coll, out, topo)


RANDOM_TOPOLOGIES = {
    "ring6": lambda: gen.ring(6),
    "nvswitch6": lambda: gen.nvswitch(6, 100.0),
    "fattree": lambda: gen.fattree(racks=2, servers=2, gpus=2),
    "pcie": lambda: gen.pcie_tree(sockets=2, switches_per_socket=1, gpus_per_switch=3),
    "dgx1": lambda: get_topology("dgx1"),
}


@pytest.mark.parametrize("name", sorted(RANDOM_TOPOLOGIES))
def test_sync_matches_the_literal_formula_on_random_schedules(name):
    base = RANDOM_TOPOLOGIES[name]()
    for seed in range(25):
        topo = randomized(base, seed)
        sched = random_schedule(topo, seed)
        got = times(sched, topo, SIZES, "sync")
        assert got == pytest.approx([sync_time(sched, topo, s) for s in SIZES], rel=1e-12, abs=1e-12)


# =========================================================================== properties of both models
def test_a_single_transfer_takes_the_same_time_in_both_models():
    topo = randomized(gen.fattree(racks=2, servers=2, gpus=2), 7)
    router = router_for(topo)
    rng = random.Random(3)
    for _ in range(30):
        a, b = rng.sample(range(topo.num_ranks), 2)
        via = router.via_names(a, b)
        sched = schedule_from_steps(Collective(Kind.ALLTOALL, topo.num_ranks, 1), [[Transfer(a, b, 0, "copy", via)]], topo)
        links = path_links(topo, a, b, via)
        for size in SIZES:
            c = size * topo.num_ranks / topo.num_ranks**2
            alone = sum(topo.links[x].latency for x in links) + c / (min(topo.links[x].bandwidth for x in links) * 1e3)
            sync, event = both(sched, topo, [size])
            assert sync[0] == pytest.approx(alone, rel=1e-12)
            assert event[0] == pytest.approx(alone, rel=1e-12)


def test_a_bigger_message_never_takes_less_time():
    """Sync: every step is a maximum of lines with non-negative slopes, so this holds for any
    schedule. Event: not a theorem; checked here on the classic schedules (with random link
    figures too), where the event-driven time is also never above the step-synchronous one."""
    sizes = [0, *(2**e for e in range(0, 31, 5))]
    for name, method, kind, topo, sched in classic_cases()[::2]:
        for variant in (topo, randomized(topo, 11)):
            got = {model: times(sched, variant, sizes, model) for model in ("sync", "event")}
            for model, values in got.items():
                assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(values)), (name, method, kind, model, values)
            assert all(e <= s * (1 + 1e-12) for e, s in zip(got["event"], got["sync"])), (name, method, kind)


def shuffled_within_steps(sched, seed):
    rng = random.Random(seed)
    steps = []
    for step in sched.steps:
        step = list(step)
        rng.shuffle(step)
        steps.append(step)
    return sched.with_steps(steps)


def test_the_order_of_transfers_within_a_step_does_not_matter():
    for _name, _method, _kind, topo, sched in classic_cases()[::3]:
        other = shuffled_within_steps(sched, 5)
        assert times(other, topo, SIZES, "sync") == times(sched, topo, SIZES, "sync")
        a = simulate(sched, topo, [2**20], "event")[0]
        b = simulate(other, topo, [2**20], "event")[0]
        assert b.time_us == pytest.approx(a.time_us, rel=1e-9)
        ends_a = sorted(
            zip(
                a.timeline.step.tolist(), sched.src.tolist(), sched.dst.tolist(), sched.chunk.tolist(), a.timeline.end_us.tolist()
            )
        )
        ends_b = sorted(
            zip(
                b.timeline.step.tolist(), other.src.tolist(), other.dst.tolist(), other.chunk.tolist(), b.timeline.end_us.tolist()
            )
        )
        assert [e[:4] for e in ends_a] == [e[:4] for e in ends_b]
        assert [e[4] for e in ends_a] == pytest.approx([e[4] for e in ends_b], rel=1e-9)


# =========================================================================== the event model's rules
def check_event_rules(sched, topo, size):
    """Every transfer starts exactly when the last transfer it must wait for has completed (or at
    0), pays its path's α, and moves its bytes no faster than its slowest link allows."""
    result = simulate(sched, topo, [size], "event")[0]
    tl = result.timeline
    deps = must_follow(sched, topo)
    c = sched.collective.chunk_bytes(size)
    for i in range(sched.num_transfers):
        ready = max((tl.end_us[j] for j in deps[i]), default=0.0)
        assert tl.start_us[i] == pytest.approx(ready, rel=1e-9, abs=1e-9)
        links = tl.links(i)
        alpha = sum(topo.links[x].latency for x in links)
        assert tl.data_start_us[i] == pytest.approx(tl.start_us[i] + alpha, rel=1e-9, abs=1e-9)
        slowest = min(topo.links[x].bandwidth for x in links) * 1e3
        assert tl.end_us[i] - tl.data_start_us[i] >= c / slowest * (1 - 1e-9) - 1e-9
    assert result.time_us == pytest.approx(float(tl.end_us.max()) if len(tl) else 0.0)


def test_event_dependencies_and_timing_on_classic_schedules():
    for _name, _method, _kind, topo, sched in classic_cases()[::2]:
        check_event_rules(sched, randomized(topo, 1), 10**6)


@pytest.mark.parametrize("name", sorted(RANDOM_TOPOLOGIES))
def test_event_dependencies_and_timing_on_random_schedules(name):
    base = RANDOM_TOPOLOGIES[name]()
    for seed in range(10):
        topo = randomized(base, seed)
        check_event_rules(random_schedule(topo, 100 + seed), topo, 50_000)


def test_links_carry_no_more_than_their_bandwidth():
    """Over the union of the intervals in which flows cross a link, the link moved all their bytes:
    bytes ≤ bandwidth × busy time."""
    for _name, _method, _kind, topo, sched in classic_cases()[::4]:
        size = 10**6
        tl = simulate(sched, topo, [size], "event")[0].timeline
        c = sched.collective.chunk_bytes(size)
        for link in range(len(topo.links)):
            idx, begin, end = tl.link_intervals(link)
            if not len(idx):
                continue
            busy, reach = 0.0, -np.inf
            for b, e in sorted(zip(begin.tolist(), end.tolist())):
                if b > reach:
                    busy += e - b
                    reach = e
                elif e > reach:
                    busy += e - reach
                    reach = e
            assert len(idx) * c <= topo.links[link].bandwidth * 1e3 * busy * (1 + 1e-9) + 1e-6


def test_max_min_rates_match_textbook_progressive_filling():
    rng = random.Random(0)
    for _ in range(200):
        n_links = rng.randint(1, 8)
        capacity = {link: rng.choice([1.0, 2.0, 3.5, 10.0]) for link in range(n_links)}
        paths = [sorted(rng.sample(range(n_links), rng.randint(1, min(3, n_links)))) for _ in range(rng.randint(1, 10))]
        weights = [rng.randint(1, 3) for _ in paths]
        expanded = [p for p, w in zip(paths, weights) for _ in range(w)]
        want = max_min(expanded, capacity)
        width = max(len(p) for p in paths)
        pad = n_links
        table = np.array([p + [pad] * (width - len(p)) for p in paths], dtype=np.int64)
        cap = np.array([capacity[x] for x in range(n_links)] + [np.inf])
        got = max_min_rates(table, np.array(weights), cap)
        assert list(np.repeat(got, weights)) == pytest.approx(want, rel=1e-9)


def test_incremental_rates_equal_recomputing_from_scratch(monkeypatch):
    monkeypatch.setattr(event_module, "PARTIAL_MIN_PATHS", 1)
    for name, method, kind, topo, sched in classic_cases()[1::3]:
        sim = Simulator(sched, topo)
        for size in (1000, 10**6):
            c = sim.chunk_bytes(size)
            args = (sched, topo, sim.paths, sim.groups, c, sim.network)
            a = event_module.simulate_events(*args, incremental=True)
            b = event_module.simulate_events(*args, incremental=False)
            assert a.end_us == pytest.approx(b.end_us, rel=1e-9), (name, method, kind)
    # and the incremental path was really taken: a direct alltoall on a fat-tree, all at once
    topo = randomized(gen.fattree(racks=4, servers=2, gpus=2), 3)
    sched = synthesize(gen.fattree(racks=4, servers=2, gpus=2), Kind.ALLTOALL, "direct")
    sim = Simulator(sched, topo)
    made = []
    original = event_module._FlowRates.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(event_module._FlowRates, "__init__", spy)
    args = (sched, topo, sim.paths, sim.groups, sim.chunk_bytes(2**20), sim.network)
    a = event_module.simulate_events(*args, incremental=True)
    partial = made[-1].partial_recomputes
    b = event_module.simulate_events(*args, incremental=False)
    assert partial > 10
    assert a.end_us == pytest.approx(b.end_us, rel=1e-9)


# =========================================================================== API
def test_results_follow_the_sizes_and_units():
    sched = schedule(RING4, Kind.ALLGATHER, ring_allgather_steps(4))
    results = simulate(sched, RING4, [2**20, 8, 2**10], "sync")
    assert [r.size for r in results] == [2**20, 8, 2**10]
    assert all(r.model == "sync" and r.timeline is None for r in results)
    r = results[0]
    assert r.algbw == pytest.approx(r.size / r.time_us / 1e3)
    assert simulate(sched, RING4, 2**20, "event")[0].time_us == pytest.approx(r.time_us)
    assert simulate(sched, RING4, [0], "event")[0].algbw == 0.0
    with pytest.raises(ValueError):
        simulate(sched, RING4, [-1])
    with pytest.raises(ValueError):
        simulate(sched, RING4, [1], model="pipelined")


def test_sync_timeline_places_transfers_in_their_steps():
    sched = schedule(RING4, Kind.ALLGATHER, ring_allgather_steps(4))
    size = 4 * 25_000  # 1 µs of bytes per chunk
    tl = simulate(sched, RING4, [size], "sync", timeline=True)[0].timeline
    assert len(tl) == 12
    for entry in tl:
        assert entry.start == pytest.approx(entry.step * 1.7)
        assert entry.data_start == pytest.approx(entry.start + 0.7)
        assert entry.end == pytest.approx(entry.start + 1.7)
        assert entry.links == (RING4.link_index[(entry.src, entry.dst)],)
    idx, begin, _end = tl.link_intervals(RING4.link_index[(0, 1)])
    assert idx.tolist() == [0, 4, 8] and begin.tolist() == pytest.approx([0.7, 2.4, 4.1])
    ptr, carried = tl.by_link(len(RING4.links))
    for link in range(len(RING4.links)):
        assert carried[ptr[link] : ptr[link + 1]].tolist() == tl.link_intervals(link)[0].tolist()


def test_empty_steps_take_no_time():
    sched = schedule_from_steps(Collective(Kind.BROADCAST, 2, 1, 0), [[], [(0, 1, 0)], []], TWO)
    assert sched.num_steps == 3
    for model in ("sync", "event"):
        assert times(sched, TWO, [10**4], model) == pytest.approx([2.5])


def test_a_schedule_without_transfers_takes_no_time():
    one = topology(["solo"], [])
    sched = schedule_from_steps(Collective(Kind.ALLGATHER, 1, 1), [], one)
    assert verify(sched, one).ok
    for model in ("sync", "event"):
        (result,) = simulate(sched, one, [1024], model)
        assert result.time_us == 0.0 and result.algbw == float("inf") and result.busbw == 0.0
