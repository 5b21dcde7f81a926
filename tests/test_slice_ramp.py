"""Ramped (non-uniform) slices (`synth.algorithms.engines.slice_ramp`) in pipelined-tree and
packing: the ramped candidates verify and replay on every collective each method serves, their
slices are whole chunks, and on two boxes at 1 GiB they beat the equal slices (the fill is paid
at the speed of the fast stages inside the boxes, not in whole slices of the NICs' pace)."""

from __future__ import annotations

import numpy as np
import pytest

from synth import generators as gen
from synth.algorithms import packing, pipelined_tree
from synth.algorithms.engines.path_channels import channels_for
from synth.algorithms.engines.size_tuning import predicted_us
from synth.algorithms.engines.slice_ramp import lower_bound_us, ramp_lp, stage_loads, whole_slices
from synth.algorithms.engines.tree_packing import packings
from synth.algorithms.engines.tree_pipeline import tree_schedule
from synth.collective import Collective, Kind
from synth.registry import synthesize
from synth.routing import router_for
from synth.verify import verify

from .reference import numeric_replay

GIB = 1 << 30


@pytest.fixture(scope="module")
def two_boxes():
    """Two 4-GPU NVSwitch boxes, a 25 GB/s NIC per GPU: the deal and the sharing inside a box are
    faster than the NICs between them."""
    return gen.multihost(hosts=2, gpus=4)


def _slices_of(params: dict) -> list[int] | None:
    """The ramped slices a schedule's params name (an allreduce's broadcast or allgather phase)."""
    for key in ("slices", "broadcast", "allgather", "reduce_scatter", "reduce"):
        value = params.get(key)
        if key == "slices" and value:
            return value
        if isinstance(value, dict) and value.get("slices"):
            return value["slices"]
    return None


def test_whole_slices_are_whole_chunks_summing_to_the_part():
    for sizes, chunks in (([1.0, 1.7, 2.89, 4.9, 1.2], 64), ([1.0] * 8, 8), ([1.0, 30.5, 1.0], 33)):
        sliced = whole_slices(np.array(sizes), chunks)
        assert sum(sliced) == chunks and all(isinstance(k, int) and k >= 1 for k in sliced)


@pytest.mark.parametrize("kind", sorted(pipelined_tree.COLLECTIVES, key=lambda k: k.value))
def test_pipelined_tree_ramp_serves_every_collective(two_boxes, kind):
    schedule = synthesize(two_boxes, kind, pipelined_tree.NAME, options={"size": GIB})
    slices = _slices_of(schedule.params)
    assert slices is not None, "the ramped candidate should win on two boxes at 1 GiB"
    phase = schedule.params.get("broadcast", schedule.params)
    assert sum(slices) == phase["chunks_per_part"] and min(slices) >= 1 and len(set(slices)) > 1
    assert verify(schedule, two_boxes).ok
    assert numeric_replay(schedule)


@pytest.mark.parametrize("hosts", [2, 3])
def test_pipelined_tree_every_ramped_candidate_verifies(hosts, monkeypatch):
    """Every ramped shape the method would time (not only the winner), with and without the
    split return (``bounce_split``: the chain's return, and scatter-allgather's on three boxes),
    is a valid broadcast."""
    two_boxes = gen.multihost(hosts=hosts, gpus=4)
    monkeypatch.setattr(pipelined_tree, "RAMP_CHUNKS", 60)  # small schedules: the pattern is the point
    router = router_for(two_boxes)
    spreads = pipelined_tree.Spreads(router)
    tried = split = 0
    for layout in pipelined_tree.layouts(two_boxes, 0, router, spreads.finder):
        bounce = pipelined_tree.bounce_ok(layout, 0, router)
        for shape in pipelined_tree.shapes(layout, None, bounce=bounce):
            # one chunk count and the most parts per series (each series' ramps are the same then)
            if shape.kind == "knomial" or shape.chunks_per_part not in (4, hosts - 1) or shape.parts != layout.max_parts:
                continue
            for ramped in pipelined_tree.ramped_shapes(two_boxes, layout, 0, shape, None, GIB, spreads):
                schedule = pipelined_tree.build_broadcast(two_boxes, layout, 0, ramped, GIB, spreads)
                # a slice is whole chunks (scatter-allgather: whole waves of one piece per group)
                unit = ramped.chunks_per_part // sum(ramped.slices)
                assert unit in ((1,) if ramped.kind == "kary" else (hosts, hosts - 1))
                assert sum(ramped.slices) * unit * ramped.parts == schedule.collective.num_chunks
                assert verify(schedule, two_boxes).ok
                assert numeric_replay(schedule)
                tried += 1
                split += ramped.bounce_split
    assert tried >= 4 and split >= 1


def test_pipelined_tree_ramp_is_faster_than_equal_slices_on_two_boxes(builtin, monkeypatch):
    """dgx-a100x2 at 1 GiB: the ramp (and the split return of the root's part) beats the best
    equal slices, by more than rounding."""
    topo = builtin("dgx-a100x2")
    ramped = synthesize(topo, Kind.BROADCAST, pipelined_tree.NAME, options={"size": GIB})
    assert ramped.params.get("slices")
    monkeypatch.setattr(pipelined_tree, "RAMP_SERIES", 0)
    equal = synthesize(topo, Kind.BROADCAST, pipelined_tree.NAME, options={"size": GIB})
    assert "slices" not in equal.params
    fast, slow = predicted_us(ramped, topo, [GIB])[0], predicted_us(equal, topo, [GIB])[0]
    assert fast < 0.97 * slow, (fast, slow)


@pytest.mark.parametrize("kind", sorted(packing.COLLECTIVES, key=lambda k: k.value))
def test_packing_with_ramps_verifies_on_every_collective(two_boxes, kind):
    schedule = synthesize(two_boxes, kind, packing.NAME, options={"size": GIB})
    assert verify(schedule, two_boxes).ok
    assert numeric_replay(schedule)
    slices = _slices_of(schedule.params)
    if slices is not None:
        assert min(slices) >= 1 and all(isinstance(k, int) for k in slices)


@pytest.mark.parametrize("kind", [Kind.BROADCAST, Kind.ALLGATHER])
def test_packing_ramped_candidates_verify(two_boxes, kind):
    """Every ramped candidate of the packing's first trees is a valid schedule whose slices are
    whole rounds of the trees' chunks, and none is slower than its LP's optimum says by more than
    rounding to chunks can make it."""
    r = two_boxes.num_ranks
    channels = channels_for(two_boxes)
    root = 0 if kind is Kind.BROADCAST else None
    trees = packings(two_boxes, kind, root)[0]
    candidates = packing.ramped(two_boxes, channels, trees, kind, root, None, GIB)
    assert candidates
    for schedule in candidates:
        slices = schedule.params["slices"]
        per_root = schedule.collective.num_chunks if kind is Kind.BROADCAST else schedule.collective.chunks_per_piece
        assert per_root % sum(slices) == 0 and min(slices) >= 1
        assert verify(schedule, two_boxes).ok
        assert numeric_replay(schedule)
    assert r == 8


def test_ramp_lp_is_the_step_time_of_its_slices(two_boxes):
    """The LP's optimum is the step-synchronous time of its (continuous) slices, so no whole
    slicing beats it, and the whole-chunk MIP's value is exactly the time of the schedule built
    from its slices."""
    channels = channels_for(two_boxes)
    trees = packings(two_boxes, Kind.BROADCAST, 0)[0]
    k = sum(c.multiplicity for c in trees.classes)
    r = two_boxes.num_ranks
    template = tree_schedule(two_boxes, channels, trees, Collective(Kind.BROADCAST, r, k, 0), packing.NAME, {})
    loads = stage_loads(template, two_boxes)
    rounds = 64
    chunk_bytes = GIB / (k * rounds)
    whole = Collective(Kind.BROADCAST, r, k * rounds, 0)
    for slices in (4, 8, 16):
        solved = ramp_lp(loads, slices, rounds, chunk_bytes)
        exact = ramp_lp(loads, slices, rounds, chunk_bytes, whole=True)
        assert solved is not None and exact is not None
        optimum, sizes = solved
        assert sizes.min() >= 1 - 1e-9 and abs(sizes.sum() - rounds) < 1e-6
        rounded = tree_schedule(two_boxes, channels, trees, whole, packing.NAME, {}, whole_slices(sizes, rounds))
        assert predicted_us(rounded, two_boxes, [GIB])[0] >= optimum * (1 - 1e-6)
        mip = tuple(int(x) for x in exact[1])
        assert sum(mip) == rounds and min(mip) >= 1 and exact[0] >= optimum * (1 - 1e-6)
        built = tree_schedule(two_boxes, channels, trees, whole, packing.NAME, {}, mip)
        assert predicted_us(built, two_boxes, [GIB])[0] == pytest.approx(exact[0], rel=1e-6)


@pytest.mark.parametrize("kind", [Kind.BROADCAST, Kind.ALLGATHER])
def test_ramp_lower_bound_is_at_most_the_time_of_its_slices(two_boxes, kind):
    """`lower_bound_us` (the LP's objective at whole slices) never exceeds the simulated time of
    the schedule with those slices (here it is that time), so `packing.ramped` may skip a ramp
    whose bound is above the time to beat; with a time below every ramp's, it builds none."""
    r = two_boxes.num_ranks
    channels = channels_for(two_boxes)
    root = 0 if kind is Kind.BROADCAST else None
    trees = packings(two_boxes, kind, root)[0]
    k = sum(c.multiplicity for c in trees.classes if c.root == trees.roots[0])
    template = tree_schedule(two_boxes, channels, trees, Collective(kind, r, k, root), packing.NAME, {})
    loads = stage_loads(template, two_boxes)
    rounds = 64
    for size in (1 << 16, GIB):
        chunk_bytes = size / (k * rounds * (r if kind is Kind.ALLGATHER else 1))
        whole = Collective(kind, r, k * rounds, root)
        for slices in ((1, 2, 4, 8, 16, 16, 8, 4, 3, 1, 1), (32, 32), tuple([1] * 64)):
            built = tree_schedule(two_boxes, channels, trees, whole, packing.NAME, {}, slices)
            time = predicted_us(built, two_boxes, [size])[0]
            bound = lower_bound_us(loads, slices, chunk_bytes)
            assert bound <= time * (1 + 1e-12)
            assert bound == pytest.approx(time, rel=1e-9)
    ramps = packing.ramped(two_boxes, channels, trees, kind, root, None, GIB)
    assert ramps
    fastest = min(predicted_us(schedule, two_boxes, [GIB])[0] for schedule in ramps)
    assert not packing.ramped(two_boxes, channels, trees, kind, root, None, GIB, fastest * 0.999)
    assert len(packing.ramped(two_boxes, channels, trees, kind, root, None, GIB, fastest)) >= 1


@pytest.mark.parametrize("kind", [Kind.BROADCAST, Kind.ALLGATHER])
def test_equal_pipeline_bound_is_at_most_its_time(two_boxes, kind, monkeypatch):
    """`packing.equal_bound_us` (the one-round pattern's loads in slices of one round) bounds the
    simulated time of every equal pipeline from below (here it is that time), so
    `_best_tree_schedule` may leave unbuilt a candidate whose bound exceeds a built one's time
    (bounded here whatever their size)."""
    monkeypatch.setattr(packing, "BOUND_FROM_TRANSFERS", 0)
    r = two_boxes.num_ranks
    channels = channels_for(two_boxes)
    root = 0 if kind is Kind.BROADCAST else None
    for trees in packings(two_boxes, kind, root):
        for count in packing.chunk_counts(trees, kind, r)[:4]:
            built = tree_schedule(two_boxes, channels, trees, Collective(kind, r, count, root), packing.NAME, {})
            for size in (1 << 16, GIB):
                time = predicted_us(built, two_boxes, [size])[0]
                bound = packing.equal_bound_us(two_boxes, channels, trees, kind, root, count, size)
                assert 0 < bound <= time * (1 + 1e-12)
                assert bound == pytest.approx(time, rel=1e-9)
