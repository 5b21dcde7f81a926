"""The scatter-allgather broadcast (van de Geijn) and its dual reduce."""

from collections import Counter

import pytest

from synth import generators as gen
from synth.collective import Kind
from synth.registry import synthesize
from synth.simulate import Simulator
from synth.verify import verify

from .reference import numeric_replay


def _at(schedule, topo, size):
    return Simulator(schedule, topo).run([size], "sync", timeline=False)[0].time_us


@pytest.mark.parametrize(("ranks", "root", "chunks"), [(5, 0, 4), (5, 3, 8), (6, 2, 13), (2, 1, 1), (8, 7, 3)])
def test_one_copy_out_of_the_root_and_one_into_every_rank(ranks, root, chunks):
    """On one switch: W waves take W + 1 steps (W with a single carrier); the root sends each chunk once (to its carrier) and
    every other rank receives each chunk exactly once."""
    topo = gen.nvswitch(ranks, 100.0)
    schedule = synthesize(topo, "broadcast", "scatter-allgather", root=root, chunks=chunks)
    assert verify(schedule, topo).ok and numeric_replay(schedule)
    waves = -(-chunks // (ranks - 1))
    assert schedule.num_steps == waves + (1 if ranks > 2 else 0)  # with one carrier there is nothing to share
    moves = [(t.src, t.dst, t.chunk) for step in schedule.steps for t in step]
    assert sum(1 for src, _, _ in moves if src == root) == chunks
    received = Counter((dst, chunk) for _, dst, chunk in moves)
    assert set(received.values()) == {1} and len(received) == (ranks - 1) * chunks
    assert all(dst != root for _, dst, _ in moves)


@pytest.mark.parametrize(("ranks", "root", "waves"), [(5, 0, 2), (8, 3, 1), (4, 1, 5)])
def test_a_closing_chunk_goes_from_the_root_to_every_rank_in_the_last_step(ranks, root, waves):
    """k = W·(R − 1) + 1: W dealt waves and one chunk the root sends to every other rank in the
    last step, beside the sharing of wave W − 1; W + 1 steps, and on a switch every step moves
    R − 1 chunks out of the root and at most R − 1 into a rank."""
    topo = gen.nvswitch(ranks, 100.0)
    k = waves * (ranks - 1) + 1
    schedule = synthesize(topo, "broadcast", "scatter-allgather", root=root, chunks=k)
    assert verify(schedule, topo).ok and numeric_replay(schedule)
    assert schedule.num_steps == waves + 1
    last = [(t.src, t.dst, t.chunk) for t in schedule.steps[-1]]
    assert sorted(dst for src, dst, chunk in last if chunk == k - 1) == [v for v in range(ranks) if v != root]
    assert all(src == root for src, _, chunk in last if chunk == k - 1)
    for step in schedule.steps:
        assert sum(1 for t in step if t.src == root) == ranks - 1
        assert max(Counter(t.dst for t in step).values()) <= ranks - 1
    reduce = synthesize(topo, "reduce", "scatter-allgather", root=root, chunks=k)
    assert verify(reduce, topo).ok and numeric_replay(reduce) and reduce.num_steps == waves + 1


def test_reduce_is_the_dual_and_relays_where_there_is_no_switch():
    ring = gen.ring(5)
    for kind in ("broadcast", "reduce"):
        schedule = synthesize(ring, kind, "scatter-allgather", root=2)
        assert schedule.collective.kind is Kind(kind) and schedule.collective.chunks_per_piece == 4
        assert verify(schedule, ring).ok and numeric_replay(schedule)
    assert synthesize(gen.nvswitch(1, 100.0), "broadcast", "scatter-allgather").num_steps == 0


def test_faster_than_a_binomial_tree_on_nvswitch_and_tuned_for_the_size():
    """dgx2 (16 GPUs on NVSwitch) at 1 MiB: about 2·size/B against the binomial tree's 4·size/B;
    at 1 GiB many waves make it about (1 + 1/W)·size/B, within 3% of the lower bound."""
    from synth.bounds import bound_model
    from synth.builtin import get_topology

    topo = get_topology("dgx2")
    binomial = synthesize(topo, "broadcast", "binomial")
    mid = synthesize(topo, "broadcast", "scatter-allgather", options={"size": 1 << 20})
    assert _at(mid, topo, 1 << 20) <= 0.45 * _at(binomial, topo, 1 << 20)
    big = synthesize(topo, "reduce", "scatter-allgather", options={"size": 1 << 30})
    assert big.collective.chunks_per_piece >= 16 * 15 and big.collective.chunks_per_piece % 15 in (0, 1)
    assert _at(big, topo, 1 << 30) <= 1.03 * bound_model(topo, "reduce", 0).time_us(1 << 30)
    fixed = synthesize(topo, "broadcast", "scatter-allgather", chunks=7, options={"size": 1 << 30})
    assert fixed.collective.chunks_per_piece == 7
    with pytest.raises(ValueError, match="positive integer"):
        synthesize(topo, "broadcast", "scatter-allgather", options={"size": -1})
