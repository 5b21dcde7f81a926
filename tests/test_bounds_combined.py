"""The bounds that combine latency and bandwidth (docs/bounds.md): hand-checked cases with their
exact figures, and schedules that meet them (so a bound too large by any margin would fail).

- time-expanded: a path of 3 ranks and a ring of 4, broadcast: the LP's β_T is the pipeline's
  T/(T − 1) (per direction), and the pipelined schedule with the best T costs exactly the bound;
- cut-latency: two hosts joined by one slow link with a long latency;
- contracted: allreduce on 4 boxes with one 12 GB/s NIC each (issue 17's example);
- steps: an allreduce in as many steps as the hop diameter exists even on a 4-rank ring, so no
  combining-depth argument can add steps there.
"""

from __future__ import annotations

import pytest

from synth import generators as gen
from synth.bounds import bound_model, lower_bounds, pipeline
from synth.bounds.latency import latency_facts
from synth.bounds.layered import flow_spec, layered_bound, layout
from synth.bounds.model import LAYERED_STEPS
from synth.builtin import get_topology
from synth.collective import Collective, Kind
from synth.registry import synthesize
from synth.schedule import Transfer, schedule_from_steps
from synth.simulate import simulate
from synth.topology import topology_from_document
from synth.verify import check

from .test_bounds_sound import step_synchronous_time

BW = 10.0  # GB/s = 1e4 bytes per µs
ALPHA = 1.0


def path3():
    return gen.mesh(1, 3, bandwidth=BW, latency=ALPHA)


def copy(src: int, dst: int, chunk: int) -> Transfer:
    return Transfer(src, dst, chunk, "copy", ())


def cost(schedule, topology, size: int) -> float:
    """The step-synchronous time, by the simulator and by the independent re-implementation."""
    sim = simulate(schedule, topology, size)[0].time_us
    assert sim == pytest.approx(step_synchronous_time(schedule, topology, size), rel=1e-12)
    return sim


# ============================================================================ time-expanded: path of 3
@pytest.mark.parametrize("steps", [2, 3, 4, 5])
def test_path_of_three_broadcast_lp_is_the_pipeline(steps):
    """From an end of x – h – y, y is 2 hops away: in T steps, x sends on x→h in steps 1..T−1 and
    h forwards in 2..T, so Σ_j max(bytes on x→h, bytes on h→y) ≥ T/(T − 1)·size (equal parts)."""
    topo = path3()
    facts = latency_facts(topo)
    spec = flow_spec(Collective(Kind.BROADCAST, 3, 1, 0))
    result = layered_bound(topo, spec, layout(topo, facts.direct, facts.hops), steps)
    assert result.us_per_byte == pytest.approx(steps / (steps - 1) / (BW * 1e3), rel=1e-6)
    assert result.us_per_byte <= steps / (steps - 1) / (BW * 1e3) * (1 + 1e-12)  # certified: never above


@pytest.mark.parametrize(
    ("size", "steps", "expected"),
    [
        (10_000, 2, 2 * ALPHA + 2 * 1.0),  # T = 2: 2 x 1 µs + 2 x 1 µs of bytes; T = 3 would be 4.5
        (40_000, 3, 3 * ALPHA + 1.5 * 4.0),  # T = 3: 9 µs; T = 2: 10, T = 4: 9.33
        (90_000, 4, 4 * ALPHA + 4 / 3 * 9.0),  # T = 4: 16 µs; T = 3: 16.5, T = 5: 16.25
    ],
)
def test_path_of_three_broadcast_bound_is_met_by_the_pipeline(size, steps, expected):
    topo = path3()
    report = lower_bounds(topo, Kind.BROADCAST, size, root=0)
    assert report.binding == "time-expanded"
    assert report.time_us == pytest.approx(expected, rel=1e-6)
    assert f"{steps} steps" in report.bound("time-expanded").explanation
    # the old bounds: 2 steps of α and size over one link
    assert report.bound("flow").time_us == pytest.approx(2 * ALPHA + size / (BW * 1e3))
    # the pipeline: T − 1 chunks, x sends chunk j in step j, h forwards it in step j + 1
    k = steps - 1
    plan = [[copy(0, 1, j)] * (j < k) + [copy(1, 2, j - 1)] * (j > 0) for j in range(steps)]
    schedule = schedule_from_steps(Collective(Kind.BROADCAST, 3, k, 0), plan, topology=topo)
    check(schedule, topo)
    assert cost(schedule, topo, size) == pytest.approx(report.time_us, rel=1e-6)


def test_step_counts_beyond_those_solved_get_the_tail_line():
    topo = path3()
    model = bound_model(topo, Kind.BROADCAST, 0)
    lines = model.term("time-expanded").line_list()
    first = 2
    solved = [first + extra for extra in LAYERED_STEPS]
    assert [line.latency_us for line in lines] == [first * ALPHA] + [(t + 1) * ALPHA for t in solved[:-1]] + [
        (solved[-1] + 1) * ALPHA
    ]
    # the tail: more than the last solved step count, at the plain bandwidth bound
    assert lines[-1].us_per_byte == pytest.approx(1 / (BW * 1e3))
    # at 1 GB the pipeline wants ~317 steps: the bound is the tail's, below the best schedule
    size = 10**9
    best = min(t * ALPHA + t / (t - 1) * size / (BW * 1e3) for t in range(2, 2000))
    assert model.time_us(size) == pytest.approx((solved[-1] + 1) * ALPHA + size / (BW * 1e3))
    assert model.time_us(size) <= best


# ============================================================================ time-expanded: a ring
def test_ring_of_four_broadcast_bound_is_met():
    """Two pipelines, one each way round: β_T = T/(T − 1) · size / (2 bw). At 80 kB the best T is
    3 (T = 2: 10 µs, T = 4: 9.33): 3 x 1 µs + 1.5 x 4 µs = 9 µs, and quarters sent as below take
    exactly that (every link carries at most one quarter per step: 1 + 2 µs)."""
    topo = gen.ring(4, bandwidth=BW, latency=ALPHA)
    size = 80_000
    report = lower_bounds(topo, Kind.BROADCAST, size, root=0)
    assert report.binding == "time-expanded"
    assert report.time_us == pytest.approx(9.0, rel=1e-6)
    assert report.bound("flow").time_us == pytest.approx(2 * ALPHA + size / (2 * BW * 1e3))
    # quarters q0, q1 clockwise 0 → 1 → 2, q2, q3 the other way 0 → 3 → 2; 1 and 3 get the rest
    # from 2 and from the root in the last step
    plan = [
        [copy(0, 1, 0), copy(0, 3, 2)],
        [copy(0, 1, 1), copy(1, 2, 0), copy(0, 3, 3), copy(3, 2, 2)],
        [copy(1, 2, 1), copy(3, 2, 3), copy(2, 1, 2), copy(0, 1, 3), copy(2, 3, 0), copy(0, 3, 1)],
    ]
    schedule = schedule_from_steps(Collective(Kind.BROADCAST, 4, 4, 0), plan, topology=topo)
    check(schedule, topo)
    assert cost(schedule, topo, size) == pytest.approx(9.0)


# ============================================================================ cut-latency: two hosts
def two_hosts():
    """Hosts A = {a0, a1} and B = {b0, b1}, 100 GB/s and 0.5 µs inside, one 10 GB/s link of 3 µs
    between a0 and b0."""
    links = [("a0", "a1", 100.0, 0.5), ("b0", "b1", 100.0, 0.5), ("a0", "b0", 10.0, 3.0)]
    return topology_from_document(
        {
            "format": "synth-topology",
            "version": 1,
            "name": "two-hosts",
            "ranks": [
                {"name": "a0", "host": "A"},
                {"name": "a1", "host": "A"},
                {"name": "b0", "host": "B"},
                {"name": "b1", "host": "B"},
            ],
            "links": [{"a": a, "b": b, "bandwidth": bw, "latency": lat} for a, b, bw, lat in links],
        },
        "<two-hosts>",
    )


@pytest.mark.parametrize("size", [1_000, 100_000, 10_000_000])
def test_two_hosts_allgather_cut_latency(size):
    """Half of size must cross a0 – b0 (10 GB/s); the step that carries it lasts >= 3 µs, and
    a1 → a0 → b0 → b1 is 3 hops, so 2 more steps of >= 0.5 µs: 4 µs + size/2 over 10 GB/s. The
    cut bound had 3 x 0.5 µs, the latency bound 4 µs without the bytes."""
    topo = two_hosts()
    report = lower_bounds(topo, Kind.ALLGATHER, size)
    crossing = 4.0 + size / 2 / (10.0 * 1e3)
    assert report.bound("cut-latency").time_us == pytest.approx(crossing)
    assert report.bound("cut").time_us == pytest.approx(1.5 + size / 2 / (10.0 * 1e3))
    assert report.bound("latency").time_us == pytest.approx(4.0)
    assert report.time_us >= crossing
    # a schedule: gather each host's pieces at its gateway, cross in one step, spread
    plan = [
        [copy(1, 0, 1), copy(0, 1, 0), copy(3, 2, 3), copy(2, 3, 2)],
        [copy(0, 2, 0), copy(0, 2, 1), copy(2, 0, 2), copy(2, 0, 3)],
        [copy(2, 3, 0), copy(2, 3, 1), copy(0, 1, 2), copy(0, 1, 3)],
    ]
    schedule = schedule_from_steps(Collective(Kind.ALLGATHER, 4, 1), plan, topology=topo)
    check(schedule, topo)
    t = cost(schedule, topo, size)
    assert t >= report.time_us
    # it pays the bound's 4 µs and crossing bytes, plus the bytes of the two steps inside the hosts
    assert t == pytest.approx(crossing + size / 4 / 100e3 + size / 2 / 100e3)


# ============================================================================ contracted partitions
def four_boxes(nic: float = 12.0):
    """4 boxes of 2 GPUs on an NVSwitch (100 GB/s), each box behind one NIC of ``nic`` GB/s into a
    core switch."""
    ranks, switches, links = [], ["core"], []
    for b in range(4):
        switches += [f"nvs{b}", f"nic{b}"]
        links += [(f"nvs{b}", f"nic{b}", 100.0, 0.5), (f"nic{b}", "core", nic, 1.0)]
        for g in range(2):
            ranks.append({"name": f"b{b}g{g}", "host": f"box{b}"})
            links.append((f"b{b}g{g}", f"nvs{b}", 100.0, 0.35))
    return topology_from_document(
        {
            "format": "synth-topology",
            "version": 1,
            "name": "four-boxes",
            "ranks": ranks,
            "switches": switches,
            "links": [{"a": a, "b": b, "bandwidth": bw, "latency": lat} for a, b, bw, lat in links],
        },
        "<four-boxes>",
    )


def test_four_boxes_allreduce_contracted_volume():
    """Issue 17: the boxes as 4 nodes, every byte needs 2·3 transfers between them, through 4 x
    12 GB/s: 1.5 x size / 12 GB/s = 134 ms at 1 GiB, where the cut bound said 89 ms."""
    topo = four_boxes()
    size = 1 << 30
    report = lower_bounds(topo, Kind.ALLREDUCE, size)
    # one step (GPU, NVSwitch, NIC, core, NIC, NVSwitch, GPU is a switch-only path) of >= 0.7 µs
    assert report.bound("cut").time_us == pytest.approx(size / 12e3 + 0.7)
    assert report.bound("contracted").time_us == pytest.approx(1.5 * size / 12e3 + 0.7)
    assert round(report.bound("contracted").time_us / 1e3) == 134
    assert "hosts" in report.bound("contracted").explanation
    assert report.time_us >= report.bound("contracted").time_us


def test_contracted_bound_is_met_by_reduce_and_broadcast_over_boxes():
    """Inside a box everything is free next to the NICs: reduce to one GPU per box, allreduce
    among the 4 box leaders by reduce-scatter + allgather over the core (each NIC carries
    2·3/4 of size each way), broadcast inside. Its time over the bound tends to 1."""

    topo = four_boxes()
    schedule = synthesize(topo, Kind.ALLREDUCE, "hierarchical")
    size = 1 << 30
    bound = bound_model(topo, Kind.ALLREDUCE).time_us(size)
    t = cost(schedule, topo, size)
    assert bound <= t < 1.1 * bound


def test_four_boxes_broadcast_steps_volume_is_met():
    """steps-volume on the four boxes, broadcast of 64 KiB: a step between boxes lasts >= 3.7 µs
    (GPU, NVSwitch, NIC, core and back); one such step sends 3 x size out of the root's box over
    its 12 GB/s NIC (3.7 + 16.4 µs), two cost 7.4 µs plus the contracted LP's 1.5 x size / 12 GB/s
    (a quarter to each other box, then they swap and the root sends the last quarter), three or
    more at least 11.1 µs + size / 12 GB/s. A schedule with those two steps and one inside the
    boxes costs the bound plus that last step."""
    topo = four_boxes()
    size = 64 << 10
    report = lower_bounds(topo, Kind.BROADCAST, size, root=0)
    nic = size / 12e3
    expected = 2 * 3.7 + 1.5 * nic
    assert report.bound("steps-volume").time_us == pytest.approx(expected, rel=1e-6)
    assert "2 step(s) between parts" in report.bound("steps-volume").explanation
    assert report.bound("cut-latency").time_us == pytest.approx(3.7 + nic)
    net = {b: (f"nvs{b}", f"nic{b}", "core") for b in range(4)}

    def across(a: int, b: int, chunk: int) -> Transfer:
        return Transfer(a, b, chunk, "copy", (*net[a // 2], f"nic{b // 2}", f"nvs{b // 2}"))

    def inside(a: int, b: int, chunk: int) -> Transfer:
        return Transfer(a, b, chunk, "copy", (f"nvs{a // 2}",))

    leaders = (2, 4, 6)
    plan = [
        [across(0, 2, 1), across(0, 4, 2), across(0, 6, 3)] + [inside(0, 1, q) for q in range(4)],
        [across(0, g, 0) for g in leaders]
        + [across(g, h, g // 2) for g in leaders for h in leaders if h != g]
        + [inside(g, g + 1, g // 2) for g in leaders],
        [inside(g, g + 1, q) for g in leaders for q in range(4) if q != g // 2],
    ]
    schedule = schedule_from_steps(Collective(Kind.BROADCAST, 8, 4, 0), plan, topology=topo)
    check(schedule, topo)
    t = cost(schedule, topo, size)
    assert t == pytest.approx(expected + 0.7 + 0.75 * size / 100e3)
    assert report.time_us <= t


def test_fattree_broadcast_steps_volume_by_racks():
    """fattree-4rack (docs/bounds.md, `steps-volume`): between racks a step lasts >= 4 µs; one
    such step sends 3 x 1 MiB out of the root's rack over its 400 GB/s of uplinks, two or more pay
    8 µs and 1 MiB over a rack's 400 GB/s at least."""
    topo = get_topology("fattree-4rack")
    size = 1 << 20
    term = bound_model(topo, Kind.BROADCAST, 0).term("steps-volume")
    assert term.time_us(size) >= min(4.0 + 3 * size / 400e3, 8.0 + size / 400e3) - 1e-9
    assert term.time_us(size) > lower_bounds(topo, Kind.BROADCAST, size).bound("cut-latency").time_us


@pytest.mark.parametrize("size", [1 << 16, 1 << 24, 1 << 30])
def test_root_pipeline_on_an_nvswitch_box(size):
    """dgx-a100 broadcast: the root's 300 GB/s carry the data out in N steps, and whichever step
    sends the most (>= n/N) leaves 6/7 of it to be taken in again; the last step either sends
    straight to every rank what had not left the root before (then some step sends >= 7n/(7(N-1)+1))
    or comes after the root's last. So >= the smaller of N x 0.7 us + (1 + 6/(7(N-1)+1)) x n/300 GB/s
    and (N+1) x 0.7 us + (1 + 6/(7N)) x n/300 GB/s, near n/B + 2 sqrt(6/7 x 0.7 us x n/B) at large
    sizes. Methods' broadcasts stay above, and scatter-allgather with a closing chunk meets it: at
    16 MiB 8 waves and one chunk from the root to all 7 in the ninth step, 68.11 us."""
    topo = get_topology("dgx-a100")
    n_over_b = size / 300e3
    term = bound_model(topo, Kind.BROADCAST, 0).term("root-pipeline")
    exact = min(
        min(n * 0.7 + (1 + 6 / (7 * (n - 1) + 1)) * n_over_b, (n + 1) * 0.7 + (1 + 6 / (7 * n)) * n_over_b) for n in range(1, 129)
    )
    assert term.time_us(size) == pytest.approx(exact, rel=1e-12)
    if size >= 1 << 24:
        smooth = n_over_b + 2 * (6 / 7 * 0.7 * n_over_b) ** 0.5
        assert smooth <= term.time_us(size) <= smooth * 1.01
    assert term.time_us(size) > lower_bounds(topo, Kind.BROADCAST, size).bound("ingress").time_us
    for method in ("pipelined-tree", "packing", "ring"):
        schedule = synthesize(topo, Kind.BROADCAST, method, root=0)
        assert cost(schedule, topo, size) >= term.time_us(size)
    closing = synthesize(topo, Kind.BROADCAST, "scatter-allgather", root=0, options={"size": size})
    assert closing.collective.chunks_per_piece % 7 == 1
    assert term.time_us(size) <= cost(closing, topo, size) <= term.time_us(size) * (1 + (1e-4 if size > 1 << 24 else 1e-9))


def test_root_pipeline_holds_for_every_scatter_allgather():
    """Scatter-allgather broadcasts with and without a closing chunk, every chunk count up to four
    waves and one (on the larger machines those around whole waves), from two roots on one
    switch, a DGX-2 and a machine with a degraded rank: none is faster than `root-pipeline` at
    any size."""
    from synth.generators import random_machine

    for topo in (gen.nvswitch(5, 100.0, latency=1.5), get_topology("dgx2"), random_machine(2, "nvl72")):
        for root in (0, topo.num_ranks - 1):
            term = bound_model(topo, Kind.BROADCAST, root).term("root-pipeline")
            n = topo.num_ranks - 1
            every = range(1, 4 * n + 2) if n < 8 else (1, 2, n - 1, n, n + 1, 2 * n, 2 * n + 1, 3 * n + 1, 4 * n + 1)
            for k in every:
                schedule = synthesize(topo, Kind.BROADCAST, "scatter-allgather", root=root, chunks=k)
                for size in (1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 30):
                    assert cost(schedule, topo, size) >= term.time_us(size) * (1 - 1e-9), (topo.name, root, k, size)


# ============================================================================ steps
def test_allreduce_in_diameter_steps_on_a_ring_of_four():
    """Diameter 2; each rank's final value must be a disjoint union of its neighbours' values
    after step 1. Copies that drop a rank's own contribution make that possible, so the steps
    bound of allreduce stays the hop diameter (docs/bounds.md)."""
    topo = gen.ring(4, bandwidth=BW, latency=ALPHA)
    red = lambda s, d: Transfer(s, d, 0, "reduce", ())  # noqa: E731
    plan = [
        [red(1, 0), red(3, 0), copy(0, 1, 0), red(1, 2), red(3, 2), copy(2, 3, 0)],  # 013, 0, 123, 2
        [red(3, 0), red(2, 1), red(1, 2), red(0, 3)],
    ]
    schedule = schedule_from_steps(Collective(Kind.ALLREDUCE, 4, 1), plan, topology=topo)
    check(schedule, topo)
    size = 1000
    model = bound_model(topo, Kind.ALLREDUCE)
    assert model.step_floor_us == pytest.approx(2 * ALPHA)
    # every directed link carries at most one full buffer per step
    assert cost(schedule, topo, size) == pytest.approx(2 * (ALPHA + size / (BW * 1e3)))
    assert model.time_us(size) <= cost(schedule, topo, size)
    assert model.time_us(size) == pytest.approx(cost(schedule, topo, size), rel=0.05)


# ============================================================================ the LP's certificate
def test_certificate_never_exceeds_the_solver_optimum(builtin):
    topo = builtin("dgx1")
    facts = latency_facts(topo)
    lay = layout(topo, facts.direct, facts.hops)
    for kind in (Kind.BROADCAST, Kind.ALLREDUCE, Kind.ALLGATHER):
        spec = flow_spec(Collective(kind, 8, 1, 0 if kind is Kind.BROADCAST else None))
        for steps in (2, 3):
            for options in ({}, {"solver": "ipm"}):
                result = layered_bound(topo, spec, lay, steps, options)
                assert 0 < result.us_per_byte <= result.optimum
                assert result.us_per_byte == pytest.approx(result.optimum, rel=1e-7)


# ============================================================================ the methods' gaps, not the bounds'
def test_dgx1_allreduce_in_two_steps():
    """The DGX-1's hop diameter is 2, and a single-chunk allreduce in 2 steps exists (found by an
    ILP feasibility search): step 1 builds {0,3,4} {1,5} {2,6} {7} {0} {1,4,5} {2} {3,6,7}, step 2
    folds in the three other values of each quad. At 1 KiB it takes 1.48 µs against the bound's
    1.41; the methods' best (recursive doubling) takes 3 steps, 2.20 µs (docs/bounds.md)."""

    topo = get_topology("dgx1")
    red = lambda s, d: Transfer(s, d, 0, "reduce", ())  # noqa: E731
    step1 = [red(3, 0), red(4, 0), red(5, 1), red(6, 2), copy(7, 3, 0), copy(0, 4, 0), red(1, 5), red(4, 5)]
    step1 += [copy(2, 6, 0), red(3, 7), red(6, 7)]
    quads = ((0, 1, 2, 3), (4, 5, 6, 7))
    step2 = [red(s, d) for q in quads for d in q for s in q if s != d]
    schedule = schedule_from_steps(Collective(Kind.ALLREDUCE, 8, 1), [step1, step2], topology=topo)
    check(schedule, topo)
    size = 1024
    t = cost(schedule, topo, size)
    assert t == pytest.approx(2 * (0.7 + size / 25e3))  # every directed link carries one buffer per step
    bound = bound_model(topo, Kind.ALLREDUCE).time_us(size)
    assert bound <= t < 1.06 * bound


def test_one_step_allreduce_meets_the_bound_on_an_nvswitch_box():
    """Every rank folds in every other rank's buffer in one step: α + 7 × size over 300 GB/s,
    exactly the time-expanded bound's one-step line (the methods take 2 steps: 2 x at 1 KiB)."""
    topo = gen.nvswitch(8, 300.0, 0.35)
    steps = [[Transfer(s, d, 0, "reduce", ("nvswitch",)) for d in range(8) for s in range(8) if s != d]]
    schedule = schedule_from_steps(Collective(Kind.ALLREDUCE, 8, 1), steps, topology=topo)
    check(schedule, topo)
    size = 1024
    assert cost(schedule, topo, size) == pytest.approx(0.7 + 7 * size / 300e3)
    report = lower_bounds(topo, Kind.ALLREDUCE, size)
    assert report.binding == "time-expanded"
    assert report.time_us == pytest.approx(cost(schedule, topo, size), rel=1e-6)


def test_pcie_broadcast_at_64k_a_better_schedule_than_the_methods():
    """pcie-2socket, broadcast from gpu0 at 64 KiB: the methods' best takes 1.36 x the bound
    (17.07 us); quarters do better. Step 1: gpu0 sends one quarter to each GPU of the other socket
    over the UPI link (3 us + 64 KiB over 10 GB/s) and all four to gpu1; step 2: the other socket's
    GPUs swap quarters, gpu0 and gpu1 serve gpu2 and gpu3 (1 us + 64 KiB over 24 GB/s). 13.28 us,
    1.06 x the bound: the gap is the methods', not the bound's (docs/bounds.md)."""

    topo = get_topology("pcie-2socket")
    a, b, across = ("pcisw0",), ("pcisw1",), ("pcisw0", "cpu0", "cpu1", "pcisw1")
    t = lambda s, d, q, via: Transfer(s, d, q, "copy", via)  # noqa: E731
    step1 = [t(0, 4 + q, q, across) for q in range(4)] + [t(0, 1, q, a) for q in range(4)]
    step2 = [t(4 + i, 4 + k, i, b) for i in range(4) for k in range(4) if i != k]
    step2 += [t(0, 2, 0, a), t(0, 2, 1, a), t(1, 2, 2, a), t(1, 2, 3, a)]
    step2 += [t(0, 3, 2, a), t(0, 3, 3, a), t(1, 3, 0, a), t(1, 3, 1, a)]
    schedule = schedule_from_steps(Collective(Kind.BROADCAST, 8, 4, 0), [step1, step2], topology=topo)
    check(schedule, topo)
    size = 64 << 10
    quarter = size / 4
    expected = (3.0 + 4 * quarter / 10e3) + (1.0 + 4 * quarter / 24e3)
    assert cost(schedule, topo, size) == pytest.approx(expected)
    bound = bound_model(topo, Kind.BROADCAST, 0).time_us(size)
    assert bound <= expected < 1.06 * bound


# ============================================================================ exit-pipeline
def test_exit_pipeline_on_two_sockets():
    """pcie-2socket broadcast from gpu0 (docs/bounds.md, `exit-pipeline`): the root's socket
    exits over 10 GB/s, a crossing step lasts >= 3 us, the four far GPUs take in 24 GB/s each
    (K = 96 GB/s, r = (9.6 - 1)/3). One crossing step: 3 us + n (1/10 + 3/96) / 1e3 us; two: the
    weights (1, r/(1+r)); socket-pipeline, tuned at each size, within 1.09 of the bound and above it."""
    topo = get_topology("pcie-2socket")
    term = bound_model(topo, Kind.BROADCAST, 0).term("exit-pipeline")
    c, k, r = 1 / 10e3, 1 / 96e3, (9.6 - 1) / 3
    size = 64 << 10
    assert term.time_us(size) == pytest.approx(3 + size * (c + 3 * k), rel=1e-9)
    two = [(lat, slope) for n, lat, slope, _ in pipeline.lines(3.0, 1.0, c, k, 4) if n == 2]
    theta2 = r / (1 + r)
    assert two[1] == pytest.approx((3 + theta2 * 3 + (1 - theta2) * 1, c + 3 * k / (1 + r)))
    assert two[0] == pytest.approx((6.0, c))
    for size, most in ((64 << 10, 1.09), (1 << 20, 1.03), (16 << 20, 1.01), (1 << 30, 1.003)):
        schedule = synthesize(topo, Kind.BROADCAST, "socket-pipeline", root=0, options={"size": size})
        assert term.time_us(size) <= cost(schedule, topo, size) <= most * term.time_us(size)
    # NCCL's analytic ring (streamed: one 3 us crossing) is below it at 16 MiB and 1 GiB
    assert term.time_us(16 << 20) > 1691.83 and term.time_us(1 << 30) > 107388.29


def test_piecewise_bounds_pick_the_line_the_rule_names():
    """A piecewise bound is evaluated on arrays (`_LineTable`); it must pick the very line that the
    combine rule names with Python's min and max over (time, latency) keys in the lines' order,
    ties included, on random line sets."""
    import random

    from synth.bounds.model import BoundTerm, Line

    def rule(lines, combine, size):
        def key(line):
            return (line.time_us(size), line.latency_us)

        if combine == "max-min-max":
            families = {}
            for line in lines:
                families.setdefault(line.family, {}).setdefault(line.group, []).append(line)
            return max((min((max(g, key=key) for g in f.values()), key=key) for f in families.values()), key=key)
        if combine == "max-min":
            groups = {}
            for line in lines:
                groups.setdefault(line.group, []).append(line)
            return max((min(g, key=key) for g in groups.values()), key=key)
        return (min if combine == "min" else max)(lines, key=key)

    rng = random.Random(7)
    for _ in range(400):
        lines = tuple(
            Line(
                rng.choice([0.0, 1.0, 2.0, rng.random()]),
                rng.choice([0.0, 1.0, rng.random()]),
                f"{i}",
                rng.randint(0, 4),
                rng.randint(0, 3),
            )
            for i in range(rng.randint(1, 25))
        )
        for combine in ("min", "max", "max-min", "max-min-max"):
            term = BoundTerm("t", 0.0, 0.0, "", lines, combine)
            for size in (0.0, 0.5, 1.0, 3.0):
                assert term._line_at(size) is rule(lines, combine, size)


def test_crossing_phases_on_the_multihost_machine():
    """docs/bounds.md, `crossing-phases`: random-multihost-1 (4 hosts × 8 GPUs behind one 12 GB/s
    NIC path each), broadcast of 64 KiB: two crossing steps and a closing phase, 2 × 4.3 + 0.7 µs +
    179.69 µs per MB = 21.076 µs, above NCCL's analytic 20.22 and below auto's schedule; with four
    or more crossing steps the cut line 4 × 4.3 µs + 64 KiB over 12 GB/s."""
    from synth.generators import random_machine
    from synth.nccl_model import nccl_model_best

    topo = random_machine(1, "multihost")
    model = bound_model(topo, Kind.BROADCAST, 0)
    term = model.term("crossing-phases")
    size = 64 << 10
    assert term.time_us(size) == pytest.approx(2 * 4.3 + 0.7 + 179.6875e-6 * size, rel=1e-6)
    assert model.time_us(size) == pytest.approx(term.time_us(size))
    lines = {line.note.split(":")[0]: line for line in term.line_list()}
    assert lines["hosts, 4 or more crossing steps"].latency_us == pytest.approx(4 * 4.3)
    assert nccl_model_best(topo, Kind.BROADCAST, [size])[0].time_us < term.time_us(size)
    best = synthesize(topo, Kind.BROADCAST, "host-deal", root=0, options={"size": size})
    assert term.time_us(size) <= step_synchronous_time(best, topo, size)


def test_crossing_phases_on_the_three_tier_fat_tree():
    """docs/bounds.md, `crossing-phases`: random-fattree3-1 (2 pods of 2 one-server racks, a pod's
    exit 50 GB/s), broadcast of 16 MiB. Between hosts (α_P = 4 µs) with the pods' exits as the cut
    (their boundaries are crossed only by transfers between hosts): five crossing steps and a
    closing phase, 358.94 µs, above NCCL's analytic 357.9 and `exit-pipeline`'s 355.34."""
    from synth.generators import random_machine
    from synth.nccl_model import nccl_model_best

    topo = random_machine(1, "fattree3")
    model = bound_model(topo, Kind.BROADCAST, 0)
    size = 16 << 20
    term = model.term("crossing-phases")
    assert term.time_us(size) == pytest.approx(358.941, abs=1e-3)
    assert term.time_us(size) > model.term("exit-pipeline").time_us(size)
    assert nccl_model_best(topo, Kind.BROADCAST, [size])[0].time_us < term.time_us(size)
    tuned = synthesize(topo, Kind.BROADCAST, "pipelined-tree", root=0, options={"size": size})
    assert term.time_us(size) <= step_synchronous_time(tuned, topo, size)


def test_crossing_phases_proves_the_multihost_allgather_optimal():
    """docs/bounds.md, `crossing-phases` for allgather: on random-multihost-1 at 64 KiB the binding
    line is one crossing step between hosts (4.3 µs) and steps inside the hosts after it (0.7 µs),
    117.19 µs per MB: 12.68 µs (8.40 before the tenth round), which the hierarchical schedule
    (across, then inside) takes exactly, so that schedule is optimal in the step model. The
    reduce-scatter, with its opening phase charged, gets the same figure."""
    from synth.generators import random_machine

    topo = random_machine(1, "multihost")
    size = 64 << 10
    model = bound_model(topo, Kind.ALLGATHER)
    report = model.at(size)
    assert report.binding == "crossing-phases"
    assert report.time_us == pytest.approx(12.68, abs=5e-3)
    best = synthesize(topo, Kind.ALLGATHER, "hierarchical", options={"size": size})
    assert step_synchronous_time(best, topo, size) == pytest.approx(report.time_us, rel=1e-9)
    assert "1 crossing step, nothing before the first, then steps inside the parts" in report.bound("crossing-phases").explanation
    rs = bound_model(topo, Kind.REDUCE_SCATTER).at(size)
    assert rs.time_us == pytest.approx(report.time_us, rel=1e-9)
    assert "steps inside the parts first" in rs.bound("crossing-phases").explanation
