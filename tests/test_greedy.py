"""The greedy synthesizer: every collective verifies and computes the right values, on built-ins,
generated families and random machines; a seed gives the same schedule; options behave."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth import generators as gen
from synth.algorithms.engines.greedy_engine import (
    BitsetProposer,
    EngineOptions,
    Plan,
    SingleTargetProposer,
    WindowProposer,
    disseminate,
    proposer_class,
)
from synth.algorithms.engines.greedy_engine.bitwords import first_true
from synth.algorithms.engines.greedy_engine.proposals_single_target import in_reach
from synth.algorithms.engines.path_channels import channels_for
from synth.algorithms.engines.size_tuning import predicted_us
from synth.bounds import bound_model
from synth.builtin import BUILTIN_NAMES
from synth.collective import ROOTED, Collective, Kind
from synth.errors import CannotBeat, NotApplicable
from synth.registry import METHODS, synthesize
from synth.verify import verify

from .conftest import SMALL_TOPOLOGIES
from .random_machines import machines
from .reference import numeric_replay

KINDS = sorted(METHODS["greedy"].collectives)


def test_serves_every_collective():
    assert set(KINDS) == set(Kind)


@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES))
def test_every_collective_on_small_topologies(small_topologies, name):
    topo = small_topologies[name]
    for kind in KINDS:
        roots = [0, topo.num_ranks - 1] if kind in ROOTED else [None]
        for root in roots:
            for chunks in (None, 2 * topo.num_ranks if kind is Kind.ALLREDUCE else 3):
                schedule = synthesize(topo, kind, "greedy", root=root, chunks=chunks, verify=False)
                assert verify(schedule, topo).ok, (kind, root, chunks)
                assert numeric_replay(schedule), (kind, root, chunks)


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_every_collective_on_builtins(builtin, name):
    topo = builtin(name)
    for kind in KINDS:
        if kind is Kind.ALLTOALL and topo.num_ranks > 32:
            continue  # a 128-rank alltoall has 16,384 chunks: covered by the slow test
        schedule = synthesize(topo, kind, "greedy", root=0 if kind in ROOTED else None, verify=False)
        assert verify(schedule, topo).ok, kind


@pytest.mark.slow
def test_alltoall_on_the_fat_tree(builtin):
    topo = builtin("fattree-4rack")
    assert verify(synthesize(topo, "alltoall", "greedy", verify=False), topo).ok


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=machines(), data=st.data())
def test_random_machines(topo, data):
    kind = data.draw(st.sampled_from(KINDS), label="kind")
    root = data.draw(st.integers(0, topo.num_ranks - 1), label="root") if kind in ROOTED else None
    unit = topo.num_ranks if kind is Kind.ALLREDUCE else 1
    chunks = unit * data.draw(st.integers(1, 3), label="chunks")
    seed = data.draw(st.integers(0, 5), label="seed")
    schedule = synthesize(topo, kind, "greedy", root=root, chunks=chunks, options={"seed": seed}, verify=False)
    result = verify(schedule, topo)
    assert result.ok, result.violation
    assert numeric_replay(schedule)


#: engine options that put small collectives into the modes of thousands of ranks: "window-exact"
#: scans every held chunk without bitsets, "window" a window of the oldest and newest arrivals,
#: "sampled" also offers each link to a few random channels per step
LARGE_MODES = {
    "window-exact": EngineOptions(exact_bytes=0),
    "window": EngineOptions(exact_bytes=0, exact_chunks=0),
    "sampled": EngineOptions(exact_bytes=0, exact_chunks=0, offer_all_up_to=0),
}


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("fattree", lambda b: gen.fattree(racks=2, servers=4, gpus=8)),
        ("torus6x6", lambda b: gen.torus(6, 6)),
        ("dgx-a100x4", lambda b: b("dgx-a100x4")),
    ],
)
@pytest.mark.parametrize("kind", ["allgather", "broadcast"])
def test_windowed_scan_of_every_chunk_chooses_as_the_bitsets_do(builtin, name, make, kind):
    """Beyond ``exact_bytes`` the engine scans arrival lists instead of bitsets; with a window as
    wide as the collective it must make exactly the bitsets' choices, byte for byte."""
    topo = make(builtin)
    root = 0 if kind == "broadcast" else None
    packed = synthesize(topo, kind, "greedy", chunks=3, root=root)
    options = {"engine": LARGE_MODES["window-exact"]}
    assert synthesize(topo, kind, "greedy", chunks=3, root=root, options=options) == packed


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("fattree", lambda b: gen.fattree(racks=2, servers=4, gpus=8)),
        ("torus6x6", lambda b: gen.torus(6, 6)),
        ("dgx-a100x4", lambda b: b("dgx-a100x4")),
    ],
)
@pytest.mark.parametrize("kind", [Kind.ALLGATHER, Kind.BROADCAST])
def test_proposer_classes_agree_where_they_must(builtin, name, make, kind):
    """The bitset and the windowed proposers score the same candidates the same way: given every
    held chunk (the window of at most ``exact_chunks`` chunks, or oldest-first windows as wide as
    the collective) they make byte-identical schedules; so does a run whose sampled offers reach
    every channel."""
    topo = make(builtin)
    collective = Collective(kind, topo.num_ranks, 3, 0 if kind is Kind.BROADCAST else None)
    channels = channels_for(topo)

    def run(proposer, **options):
        plan = Plan(seed=1, engine=EngineOptions(**options))
        return disseminate(topo, collective, channels, plan, "greedy", proposer=proposer)

    bitsets = run(BitsetProposer)
    assert proposer_class(collective, channels, EngineOptions()) is BitsetProposer
    assert run(WindowProposer) == bitsets
    assert run(WindowProposer, exact_chunks=0, window=collective.num_chunks) == bitsets
    assert run(BitsetProposer, offer_all_up_to=0, sampled_offer=channels.count) == bitsets
    if kind is Kind.ALLGATHER:  # a narrower view is a different choice: the comparisons above can fail
        assert run(WindowProposer, exact_chunks=0, window=1) != bitsets


def test_thresholds_choose_the_proposer():
    topo = gen.fattree(racks=2, servers=4, gpus=8)
    channels = channels_for(topo)
    allgather = Collective(Kind.ALLGATHER, topo.num_ranks, 2)
    matrix = channels.count * ((allgather.num_chunks + 7) // 8)  # bytes of one candidate bitset matrix
    assert proposer_class(allgather, channels, EngineOptions(exact_bytes=matrix)) is BitsetProposer
    assert proposer_class(allgather, channels, EngineOptions(exact_bytes=matrix - 1)) is WindowProposer
    for kind in (Kind.GATHER, Kind.SCATTER, Kind.ALLTOALL):
        collective = Collective(kind, topo.num_ranks, 1, 0 if kind in ROOTED else None)
        assert proposer_class(collective, channels, EngineOptions(exact_bytes=0)) is SingleTargetProposer


@pytest.mark.parametrize("mode", sorted(LARGE_MODES))
def test_large_modes_on_a_fat_tree(mode):
    topo = gen.fattree(racks=2, servers=4, gpus=8)
    exact = synthesize(topo, "allgather", "greedy", chunks=2)
    options = {"engine": LARGE_MODES[mode]}
    schedule = synthesize(topo, "allgather", "greedy", chunks=2, options=options, verify=False)
    assert verify(schedule, topo).ok
    assert numeric_replay(schedule)
    # a narrower view costs steps, but not many
    assert schedule.num_steps <= 1.3 * exact.num_steps


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=machines(), data=st.data())
def test_large_modes_on_random_machines(topo, data):
    mode = data.draw(st.sampled_from(sorted(LARGE_MODES)), label="mode")
    kind = data.draw(st.sampled_from(KINDS), label="kind")
    root = data.draw(st.integers(0, topo.num_ranks - 1), label="root") if kind in ROOTED else None
    chunks = (topo.num_ranks if kind is Kind.ALLREDUCE else 1) * data.draw(st.integers(1, 3), label="chunks")
    options = {"engine": LARGE_MODES[mode]}
    schedule = synthesize(topo, kind, "greedy", root=root, chunks=chunks, options=options, verify=False)
    result = verify(schedule, topo)
    assert result.ok, result.violation
    assert numeric_replay(schedule)


def test_same_seed_same_schedule_and_seeds_differ(builtin):
    topo = gen.torus(4, 4)
    a = synthesize(topo, "allgather", "greedy", chunks=2, options={"seed": 3})
    b = synthesize(topo, "allgather", "greedy", chunks=2, options={"seed": 3})
    assert a == b
    others = [synthesize(topo, "allgather", "greedy", chunks=2, options={"seed": s}) for s in range(4)]
    assert any(o != a for o in others)


def test_seeds_keeps_the_fastest(builtin):
    topo = builtin("dgx-a100x4")
    size = 1 << 30
    singles = [synthesize(topo, "allgather", "greedy", options={"seed": s}) for s in range(4)]
    best = synthesize(topo, "allgather", "greedy", options={"seed": 0, "seeds": 4})
    times = [predicted_us(s, topo, [size])[0] for s in singles]
    assert predicted_us(best, topo, [size])[0] == pytest.approx(min(times))
    assert best.params["seeds_tried"] == 4


def test_size_chooses_chunks(builtin):
    topo = builtin("dgx1")
    default = synthesize(topo, "allgather", "greedy")
    tuned = synthesize(topo, "allgather", "greedy", options={"size": 1 << 30})
    assert default.collective.chunks_per_piece == 1
    assert tuned.params["chosen_at_size"] == 1 << 30
    assert predicted_us(tuned, topo, [1 << 30])[0] < predicted_us(default, topo, [1 << 30])[0]
    # a chunk count given by the caller is kept
    fixed = synthesize(topo, "allgather", "greedy", chunks=2, options={"size": 1 << 30})
    assert fixed.collective.chunks_per_piece == 2


@pytest.mark.parametrize("name", ["dgx1", "dgx-a100x2"])
@pytest.mark.parametrize("kind", ["allgather", "reduce-scatter", "allreduce", "broadcast", "reduce", "alltoall", "gather"])
def test_beat_us_stops_exactly_at_the_simulated_time(builtin, name, kind):
    """The time a greedy run adds up step by step (both phases of allreduce, the dual's forward
    run) is the simulator's: asked to beat a hair more than the schedule's time it finishes with
    the same schedule; a hair less, and it stops (CannotBeat)."""
    topo = builtin(name)
    for size in (1 << 16, 1 << 30):
        plain = synthesize(topo, kind, "greedy")
        k = plain.collective.chunks_per_piece
        time = predicted_us(plain, topo, [size])[0]
        kept = synthesize(topo, kind, "greedy", chunks=k, options={"size": size, "beat_us": time * (1 + 1e-7)})
        assert kept.num_transfers == plain.num_transfers and predicted_us(kept, topo, [size])[0] == time
        with pytest.raises(CannotBeat, match="cannot beat"):
            synthesize(topo, kind, "greedy", chunks=k, options={"size": size, "beat_us": time * (1 - 1e-7)})


@pytest.mark.parametrize("kind", ["allgather", "allreduce", "alltoall"])
def test_beat_us_does_not_change_the_size_search(builtin, kind):
    """Stopping the runs that lose does not change what the chunk-count search chooses; a time to
    beat above the choice changes nothing, one below it gives CannotBeat."""
    topo = builtin("dgx-a100x2")
    for size in (1 << 16, 1 << 24):
        free = synthesize(topo, kind, "greedy", options={"size": size})
        time = predicted_us(free, topo, [size])[0]
        for beat in (time * 1.5, time * (1 + 1e-7)):
            pruned = synthesize(topo, kind, "greedy", options={"size": size, "beat_us": beat})
            assert pruned.collective == free.collective and pruned.params == free.params
            assert pruned.num_transfers == free.num_transfers
        with pytest.raises(CannotBeat):
            synthesize(topo, kind, "greedy", options={"size": size, "beat_us": time * 0.99})


def test_option_errors(dgx1):
    with pytest.raises(NotApplicable, match=r"takes no option\(s\) sead"):
        synthesize(dgx1, "allgather", "greedy", options={"sead": 1})
    with pytest.raises(NotApplicable, match="it takes: none"):
        synthesize(dgx1, "allgather", "ring", options={"seed": 1})
    with pytest.raises(ValueError, match="seeds"):
        synthesize(dgx1, "allgather", "greedy", options={"seeds": 0})
    with pytest.raises(ValueError, match="engine"):
        synthesize(dgx1, "allgather", "greedy", options={"engine": {"exact_bytes": 0}})
    with pytest.raises(ValueError, match="beat_us"):
        synthesize(dgx1, "allgather", "greedy", options={"beat_us": 0})
    with pytest.raises(ValueError, match="window must be an integer >= 1"):
        EngineOptions(window=0)


@pytest.mark.parametrize(
    ("name", "make", "chunks", "limit"),
    [
        ("dgx1", lambda b: b("dgx1"), 6, 1.01),
        ("torus8x8", lambda b: gen.torus(8, 8), 2, 1.03),
        ("torus16x16", lambda b: gen.torus(16, 16), 1, 1.03),
    ],
)
def test_allgather_close_to_the_ingress_bound(builtin, name, make, chunks, limit):
    """Regression guard for the benchmark figures (benchmarks/quality.py): rarest-first keeps every
    link busy."""
    topo = make(builtin)
    schedule = synthesize(topo, "allgather", "greedy", chunks=chunks, options={"seeds": 4})
    size = 1 << 30
    ratio = predicted_us(schedule, topo, [size])[0] / bound_model(topo, "allgather").term("ingress").time_us(size)
    assert 1.0 <= ratio <= limit


def test_neighbourhoods_bring_chunks_into_a_box_about_once(builtin):
    """On four DGX A100 boxes joined by 25 GB/s NICs, the NICs bring chunks a box lacks; repeats
    only fill NIC slots that have nothing new to carry (without neighbourhoods, about half the
    NIC transfers were repeats and the schedule took twice as many steps)."""
    topo = builtin("dgx-a100x4")
    schedule = synthesize(topo, "allgather", "greedy")
    box = np.arange(topo.num_ranks) // 8
    crossing = box[schedule.src] != box[schedule.dst]
    pairs = set(zip(box[schedule.dst[crossing]].tolist(), schedule.chunk[crossing].tolist()))
    assert len(pairs) == 4 * 24
    assert crossing.sum() <= 1.25 * 4 * 24
    assert schedule.num_steps <= 5  # 24 outside chunks over 8 NICs: 3 steps, and spreading


def test_channels_sparse_on_large_fabrics():
    topo = gen.fattree(racks=2, servers=16, gpus=8)
    channels = channels_for(topo)
    assert not channels.complete
    per_rank = np.bincount(channels.src, minlength=topo.num_ranks)
    assert per_rank.max() <= 7 + 2 * 5  # the server's GPUs, and partners 1, 2, 4, 8, 16 servers away both ways
    schedule = synthesize(topo, "allgather", "greedy")
    assert verify(schedule, topo).ok


@pytest.mark.parametrize("width", [8, 16, 40, 64])
def test_first_true_over_words_matches_numpy(width):
    """The windowed engine finds a pointer's next unheld arrival over 64-bit words of flags."""
    rng = np.random.default_rng(width)
    flags = rng.random((500, width)) < rng.choice([0.0, 0.01, 0.2], size=(500, 1))
    flags[:2] = False
    flags[1, -1] = True  # only the last flag: the last byte of the last word
    found, first = first_true(flags)
    assert np.array_equal(found, flags.any(axis=1))
    assert np.array_equal(first[found], flags.argmax(axis=1)[found])
    assert not found[0] and first[1] == width - 1


@pytest.mark.parametrize("seed", range(30))
def test_queue_in_reach_keeps_every_carriers_first_chunks(seed):
    """The chunks a one-destination step sorts (in_reach) give every carrier the same first
    ``scan`` chunks, in the same order, as sorting all of them (farthest first, stable); with
    hundreds of chunks per carrier at one distance (seeds from 20), its noise threshold comes in."""
    rng = np.random.default_rng(seed)
    ranks, n, scan = int(rng.integers(1, 9)), int(rng.integers(0, 400 if seed < 20 else 6000)), int(rng.integers(1, 40))
    here = rng.integers(0, ranks, n)
    hops = rng.integers(0, int(rng.integers(1, 5)), n)
    far = hops + rng.random(n)
    far[: n // 10] = np.floor(far[: n // 10])  # keys exactly at a whole number of hops

    def firsts(keep):
        idx = np.arange(n) if keep is None else keep
        order = idx[np.lexsort((-far[idx], here[idx]))]
        return [order[here[order] == v][:scan].tolist() for v in range(ranks)]

    keep = in_reach(here, hops, far, ranks, scan)
    assert firsts(keep) == firsts(None)


def test_queue_in_reach_keeps_a_whole_level_when_too_few_clear_the_noise_threshold():
    """Keys all at a whole number of hops (no noise): none clears the threshold, and the carrier
    keeps its whole level, as before the threshold; one carrier with noise keeps fewer."""
    here = np.repeat([0, 1], 1000)
    hops = np.ones(2000, dtype=np.int64)
    far = hops + np.r_[np.zeros(1000), np.random.default_rng(0).random(1000)]
    keep = in_reach(here, hops, far, 2, 10)
    assert keep is not None and np.array_equal(keep[:1000], np.arange(1000)) and 10 <= (keep >= 1000).sum() < 200
