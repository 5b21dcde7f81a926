"""Every verifier rule broken on purpose, and seen caught with the right step/transfer/rank/chunk."""

import pytest

from synth import generators as gen
from synth.collective import Collective, Kind
from synth.registry import synthesize
from synth.schedule import TopologyMismatch, Transfer, schedule_from_steps
from synth.verify import VerificationError, check, verify

from .reference import reference_check


def steps_of(schedule):
    return [list(step) for step in schedule.steps]


@pytest.fixture(scope="module")
def ring_ar(dgx1):
    return synthesize(dgx1, "allreduce", "ring")


@pytest.fixture(scope="module")
def ring_ag(dgx1):
    return synthesize(dgx1, "allgather", "ring")


def assert_violation(schedule, topology, rule, step, transfer, rank=None, chunk=None):
    result = verify(schedule, topology)
    assert not result.ok, "expected a violation"
    v = result.violation
    assert (v.rule, v.step, v.transfer) == (rule, step, transfer), str(v)
    if rank is not None:
        assert v.rank == rank, str(v)
    if chunk is not None:
        assert v.chunk == chunk, str(v)
    assert reference_check(schedule, topology) == (rule, step, transfer)
    return v


def test_valid_schedule_passes(dgx1, ring_ar):
    result = verify(ring_ar, dgx1)
    assert result.ok and result.summary().startswith("OK allreduce on 8 ranks")
    assert reference_check(ring_ar, dgx1) is None


def test_dropped_transfer_caught_at_the_end(dgx1, ring_ar):
    steps = steps_of(ring_ar)
    dropped = steps[3].pop(2)
    v = assert_violation(ring_ar.with_steps(steps), dgx1, "post", None, None)
    assert "not fully reduced" in v.message
    assert dropped.chunk == v.chunk or v.chunk is not None


def test_duplicated_reduce_counts_twice(dgx1, ring_ar):
    steps = steps_of(ring_ar)
    t = steps[0][0]
    steps[1].append(t)  # the same partial reduced again one step later
    v = assert_violation(ring_ar.with_steps(steps), dgx1, "double", 1, len(steps[1]) - 1, rank=t.dst, chunk=t.chunk)
    assert f"rank(s) {t.src}" in v.message


def test_two_reduces_in_one_step_sharing_a_contribution(dgx1, ring_ar):
    steps = steps_of(ring_ar)
    steps[0].append(steps[0][0])  # same reduce twice in the same step
    assert_violation(ring_ar.with_steps(steps), dgx1, "double", 0, len(steps[0]) - 1)


def test_send_unheld_chunk(dgx1, ring_ag):
    steps = steps_of(ring_ag)
    steps[0][0] = Transfer(0, 1, 5)  # rank 0 starts with chunk 0 only
    assert_violation(ring_ag.with_steps(steps), dgx1, "unheld", 0, 0, rank=0, chunk=5)


def test_missing_link(dgx1, ring_ag):
    steps = steps_of(ring_ag)
    steps[0][1] = Transfer(0, 5, 0)  # no NVLink between GPU 0 and GPU 5
    v = assert_violation(ring_ag.with_steps(steps), dgx1, "route", 0, 1, rank=0)
    assert "no link gpu0 -> gpu5" in v.message


def test_write_twice_copy(dgx1, ring_ag):
    steps = steps_of(ring_ag)
    first = steps[1][0]
    steps[1].append(Transfer(first.src, first.dst, first.chunk))  # same copy twice in a step
    assert_violation(ring_ag.with_steps(steps), dgx1, "conflict", 1, len(steps[1]) - 1, rank=first.dst, chunk=first.chunk)


def test_copy_and_reduce_into_same_target(dgx1, ring_ar):
    steps = steps_of(ring_ar)
    t = steps[0][0]
    steps[0].append(Transfer(t.src, t.dst, t.chunk, "copy"))
    assert_violation(ring_ar.with_steps(steps), dgx1, "conflict", 0, len(steps[0]) - 1, rank=t.dst)


def test_reduce_in_non_reduction(dgx1, ring_ag):
    steps = steps_of(ring_ag)
    t = steps[2][3]
    steps[2][3] = Transfer(t.src, t.dst, t.chunk, "reduce")
    assert_violation(ring_ag.with_steps(steps), dgx1, "op", 2, 3)


@pytest.mark.parametrize(
    ("transfer", "rule"),
    [(Transfer(0, 8, 0), "rank"), (Transfer(-1, 1, 0), "rank"), (Transfer(1, 1, 0), "rank"), (Transfer(0, 1, 64), "chunk")],
)
def test_out_of_range(dgx1, ring_ag, transfer, rule):
    steps = steps_of(ring_ag)
    steps[4].insert(0, transfer)
    assert_violation(ring_ag.with_steps(steps), dgx1, rule, 4, 0)


def test_routes_through_switches(builtin):
    topo = builtin("dgx-a100")
    c = Collective(Kind.BROADCAST, 8, 1, 0)
    good = schedule_from_steps(c, [[Transfer(0, d, 0, "copy", ("nvswitch",)) for d in range(1, 8)]], topo)
    assert verify(good, topo).ok
    for via, needle in [
        (("nvswitch9",), "not a node"),
        (("gpu3",), "is a rank"),
        (("nic0",), "no link nic0 -> gpu1"),
        (("nvswitch", "nvswitch"), "appears twice"),
        ((), "no link gpu0 -> gpu1"),
    ]:
        bad = schedule_from_steps(c, [[Transfer(0, 1, 0, "copy", via)]], topo)
        v = assert_violation(bad, topo, "route", 0, 0)
        assert needle in v.message


def test_first_violation_in_order(dgx1, ring_ag):
    steps = steps_of(ring_ag)
    steps[3][2] = Transfer(0, 5, 0)  # route violation later
    t = steps[1][4]
    steps[1][4] = Transfer(t.src, t.dst, (t.chunk + 3) % 8)  # unheld violation earlier (maybe)
    result = verify(ring_ag.with_steps(steps), dgx1)
    assert (result.violation.step, result.violation.transfer) <= (3, 2)
    assert reference_check(ring_ag.with_steps(steps), dgx1)[1:] == (result.violation.step, result.violation.transfer)


def test_mixed_group_reports_in_transfer_order():
    topo = gen.nvswitch(4, 100.0)
    c = Collective(Kind.REDUCE, 4, 1, 0)
    via = ("nvswitch",)
    # reduce 1->0, reduce 1->0 again (double, transfer 1), then a copy 2->0 (conflict, transfer 2)
    s = schedule_from_steps(
        c, [[Transfer(1, 0, 0, "reduce", via), Transfer(1, 0, 0, "reduce", via), Transfer(2, 0, 0, "copy", via)]], topo
    )
    assert_violation(s, topo, "double", 0, 1)
    s = schedule_from_steps(
        c, [[Transfer(1, 0, 0, "reduce", via), Transfer(3, 0, 0, "reduce", via), Transfer(2, 0, 0, "copy", via)]], topo
    )
    assert_violation(s, topo, "conflict", 0, 2)


def test_topology_mismatch_refused(builtin, ring_ag):
    with pytest.raises(TopologyMismatch, match="made for topology 'dgx1'"):
        verify(ring_ag, builtin("dgx-a100"))
    with pytest.raises(TopologyMismatch, match="16 ranks"):
        verify(ring_ag, builtin("dgx2"))


def test_check_raises(dgx1, ring_ag):
    steps = steps_of(ring_ag)
    steps.pop()
    with pytest.raises(VerificationError):
        check(ring_ag.with_steps(steps), dgx1)


def test_small_memory_budget_gives_same_answer(dgx1):
    s = synthesize(dgx1, "alltoall", "direct")
    steps = steps_of(s)
    steps[1].pop(3)
    broken = s.with_steps(steps)
    for budget in (1, 64, 10**9):
        assert verify(s, dgx1, memory_budget=budget).ok
        v = verify(broken, dgx1, memory_budget=budget).violation
        assert v.rule == "post"
    red = synthesize(dgx1, "reduce-scatter", "ring")
    steps = steps_of(red)
    steps[2].append(steps[1][0])
    bad = red.with_steps(steps)
    expected = verify(bad, dgx1).violation
    assert verify(bad, dgx1, memory_budget=1).violation == expected


def test_many_ranks_bitsets_cross_word_boundaries():
    topo = gen.nvswitch(130, 100.0)
    s = synthesize(topo, "allreduce", "ring")
    assert verify(s, topo).ok
    steps = steps_of(s)
    steps[-1].pop()
    assert verify(s.with_steps(steps), topo).violation.rule == "post"
