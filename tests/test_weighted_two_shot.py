"""weighted-two-shot: the two-shot allreduce with reduce-scatter shares that follow each rank's
bandwidth, pipelined over blocks; verified, replayed with real numbers, and timed against the
equal-share two-shot (``direct``) on machines with a slow rank."""

import numpy as np
import pytest

from synth import generators as gen
from synth.algorithms import weighted_two_shot as w2s
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.registry import METHODS, synthesize
from synth.simulate import simulate
from synth.verify import verify

from .reference import numeric_replay, reference_check


def _time(schedule, topology, size):
    return simulate(schedule, topology, [size], "sync", timeline=False)[0].time_us


def _check(schedule, topology):
    assert verify(schedule, topology).ok
    assert reference_check(schedule, topology) is None
    assert numeric_replay(schedule)


def _slow_switch(ranks=8, slow=10.0):
    topo = gen.nvswitch(ranks, 100.0)
    names = [topo.node_name(r) for r in range(topo.num_ranks)]
    switch = next(topo.node_name(n) for n in range(topo.num_ranks, topo.num_nodes))
    return gen.degrade(topo, names[3], switch, slow / 100.0)


def test_balanced_weights_give_a_slow_rank_no_share_and_equal_ranks_equal_shares():
    w = w2s.balanced_weights(np.array([900.0] * 7 + [90.0]))
    assert w[-1] == 0 and np.allclose(w[:-1], 1 / 7)
    assert np.allclose(w2s.balanced_weights(np.full(5, 25.0)), 0.2)
    # the per-rank load (1 + (R - 2) w) / B is level on the ranks that own something
    bw = np.array([10.0, 20.0, 30.0, 40.0])
    w = w2s.balanced_weights(bw)
    load = (1 + 2 * w) / bw
    assert w.sum() == pytest.approx(1) and np.allclose(load[w > 0], load[w > 0][0])
    # the slowest rank is slower than the level even with no share: it owns none
    assert w[0] == 0 and load[0] > load[1]


def test_integer_shares_sum_to_the_chunks():
    shares = w2s.integer_shares(np.array([0.5, 0.3, 0.2, 0.0]), 7)
    assert shares.sum() == 7 and shares[-1] == 0 and shares.tolist() == [4, 2, 1, 0]


@pytest.mark.parametrize("size", [None, 64 << 10, 16 << 20, 1 << 30])
def test_slow_rank_owns_nothing_and_the_schedule_beats_the_equal_shares(size):
    topo = _slow_switch()
    options = {} if size is None else {"size": size}
    schedule = synthesize(topo, Kind.ALLREDUCE, w2s.NAME, options=options)
    _check(schedule, topo)
    at = size or w2s.DEFAULT_SIZE
    equal = synthesize(topo, Kind.ALLREDUCE, "direct")
    assert _time(schedule, topo, at) <= _time(equal, topo, at) * (1 + 1e-9)
    if at >= 16 << 20:
        assert schedule.params["shares"] == "bandwidth" and schedule.params["blocks"] > 1
        # the slow rank sends its contribution once and receives the result once, overlapped:
        # within 15 % of the time its link needs for the data, against 2(R - 1)/R times for direct
        slow_link_us = at / (10.0 * 1e3)
        assert _time(schedule, topo, at) < 1.15 * slow_link_us < _time(equal, topo, at) / 1.5
        assert 3 not in set(schedule.dst[schedule.op == 1].tolist())


@pytest.mark.parametrize("chunks", [1, 5, 8])
def test_a_given_chunk_count_is_one_block_of_weighted_shares(chunks):
    topo = _slow_switch()
    schedule = synthesize(topo, Kind.ALLREDUCE, w2s.NAME, chunks=chunks)
    _check(schedule, topo)
    assert schedule.collective.chunks_per_piece == chunks and schedule.num_steps == 2


@pytest.mark.parametrize(
    "topology",
    [
        lambda: gen.nvswitch(2, 100.0),
        lambda: gen.nvswitch(5, 100.0),
        lambda: gen.multihost(hosts=3, gpus=4),
        lambda: gen.fattree(racks=2, servers=2, gpus=2),
    ],
)
def test_serves_switched_and_multihost_machines(topology):
    topo = topology()
    for size in (64 << 10, 1 << 30):
        _check(synthesize(topo, Kind.ALLREDUCE, w2s.NAME, options={"size": size}), topo)


def test_equal_machine_pipelining_never_loses_to_direct():
    topo = gen.nvswitch(8, 300.0)
    for size in (1 << 10, 1 << 20, 1 << 30):
        schedule = synthesize(topo, Kind.ALLREDUCE, w2s.NAME, options={"size": size})
        assert _time(schedule, topo, size) <= _time(synthesize(topo, Kind.ALLREDUCE, "direct"), topo, size) * (1 + 1e-9)


def test_needs_routes_between_all_pairs_and_serves_only_allreduce():
    with pytest.raises(NotApplicable, match="only through other ranks"):
        synthesize(gen.ring(5), Kind.ALLREDUCE, w2s.NAME)
    with pytest.raises(NotApplicable):
        synthesize(gen.nvswitch(4, 100.0), Kind.REDUCE_SCATTER, w2s.NAME)
    assert METHODS[w2s.NAME].tunes_for_size and METHODS[w2s.NAME].family == "scalable"
