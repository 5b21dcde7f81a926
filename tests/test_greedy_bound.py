"""greedy's lower bound on its own schedules (`StepBound`) and the early CannotBeat it allows: the
bound never exceeds the time of a schedule the engine makes, and giving up with it gives what the
search gives without it (the same schedule, or CannotBeat). Also the exact shortcuts of the
one-destination proposals (`first_valid`, `stable_argsort`, no holdings check)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import synth.algorithms.greedy as greedy
from synth import generators as gen
from synth.algorithms.engines.greedy_engine import EngineOptions, Plan, SingleTargetProposer, disseminate
from synth.algorithms.engines.greedy_engine.proposals_single_target import first_valid, stable_argsort
from synth.algorithms.engines.greedy_engine.step_bound import StepBound, cut_links
from synth.algorithms.engines.path_channels import channels_for
from synth.algorithms.engines.size_tuning import TimeLimit, predicted_us
from synth.collective import ROOTED, Collective, Kind
from synth.errors import CannotBeat
from synth.registry import synthesize

from .random_machines import machines

FORWARD = [Kind.ALLGATHER, Kind.BROADCAST, Kind.GATHER, Kind.SCATTER, Kind.ALLTOALL]
SIZES = (1 << 10, 1 << 16, 1 << 30)


def _collective(kind: Kind, ranks: int, k: int) -> Collective:
    return Collective(kind, ranks, k, 0 if kind in ROOTED else None)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=machines(), kind=st.sampled_from(FORWARD), k=st.integers(1, 3), quantum=st.sampled_from([1, 2, 4, 16]))
def test_bound_is_below_every_schedule_the_engine_makes(topo, kind, k, quantum):
    collective = _collective(kind, topo.num_ranks, k)
    channels = channels_for(topo)
    schedule = disseminate(topo, collective, channels, Plan(quantum=quantum, seed=3), "greedy")
    bound = StepBound(topo, channels)
    times = predicted_us(schedule, topo, SIZES)
    for size, time in zip(SIZES, times, strict=True):
        assert bound.time_us(collective, quantum, size) <= time * (1 + 1e-12)


@pytest.mark.parametrize("name", ["dgx1", "dgx-a100x2"])
def test_bound_on_builtins(builtin, name):
    topo = builtin(name)
    channels = channels_for(topo)
    bound = StepBound(topo, channels)
    for kind in FORWARD:
        for k, quantum in ((1, 1), (2, 4)):
            collective = _collective(kind, topo.num_ranks, k)
            schedule = disseminate(topo, collective, channels, Plan(quantum=quantum), "greedy")
            for size, time in zip(SIZES, predicted_us(schedule, topo, SIZES), strict=True):
                assert 0 < bound.time_us(collective, quantum, size) <= time * (1 + 1e-12)


def test_reductions_have_no_bound(builtin):
    topo = builtin("dgx1")
    bound = StepBound(topo, channels_for(topo))
    for kind in (Kind.REDUCE, Kind.REDUCE_SCATTER, Kind.ALLREDUCE):
        assert bound.time_us(_collective(kind, 8, 1), 1, 1 << 20) == 0.0


def test_a_rack_cuts_at_its_uplinks():
    """The cut of a fat-tree rack is its top-of-rack switch's links from the spines (the switches
    of the rack join the set), not the links into its GPUs."""
    topo = gen.fattree(racks=2, servers=2, gpus=2)
    channels = channels_for(topo)
    rack = max(channels.neighbourhoods().members, key=len)
    inside = np.zeros(topo.num_ranks, dtype=bool)
    inside[rack] = True
    cut = cut_links(topo, inside)
    names = {(topo.node_name(topo.links[i].src), topo.node_name(topo.links[i].dst)) for i in cut.tolist()}
    assert names and all(topo.is_switch(topo.links[i].src) and topo.is_switch(topo.links[i].dst) for i in cut.tolist()), names


def test_gives_up_before_running_when_every_run_is_bounded_above_the_time(monkeypatch):
    topo = gen.fattree(racks=2, servers=2, gpus=2)
    size = 1 << 16
    free = synthesize(topo, "alltoall", "greedy", options={"size": size})
    bound = StepBound(topo, channels_for(topo))
    least = min(
        bound.time_us(_collective(Kind.ALLTOALL, topo.num_ranks, k), q, size)
        for k in greedy.chunk_candidates(Kind.ALLTOALL, topo.num_ranks)
        for q in greedy.QUANTUMS
    )
    beat = least * 0.9
    assert predicted_us(free, topo, [size])[0] > beat  # the search gives CannotBeat without the bound too

    def no_runs(*args, **kwargs):
        raise AssertionError("greedy ran the engine")

    monkeypatch.setattr(greedy, "disseminate", no_runs)
    with pytest.raises(CannotBeat, match="every run it has left takes at least"):
        synthesize(topo, "alltoall", "greedy", options={"size": size, "beat_us": beat})
    with pytest.raises(CannotBeat, match="every run it has left takes at least"):
        synthesize(topo, "alltoall", "greedy", chunks=1, options={"size": size, "beat_us": beat})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topo=machines(),
    kind=st.sampled_from(FORWARD),
    size=st.sampled_from(SIZES),
    fraction=st.sampled_from([0.05, 0.3, 0.8, 0.99, 1 + 1e-7, 1.5]),
)
def test_giving_up_early_gives_what_the_search_gives(topo, kind, size, fraction):
    """With a time to beat, the size search gives the schedule it gives without one when that is
    fast enough, and CannotBeat exactly when it is not, whether or not the bound let it stop early."""
    free = synthesize(topo, kind.value, "greedy", options={"size": size})
    time = predicted_us(free, topo, [size])[0]
    beat = time * fraction
    if time > beat * (1 + TimeLimit.SLACK):
        with pytest.raises(CannotBeat):
            synthesize(topo, kind.value, "greedy", options={"size": size, "beat_us": beat})
    else:
        pruned = synthesize(topo, kind.value, "greedy", options={"size": size, "beat_us": beat})
        assert pruned.collective == free.collective and pruned.params == free.params
        assert pruned.num_transfers == free.num_transfers


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.integers(0, 5), min_size=0, max_size=40))
def test_stable_argsort_is_the_stable_sort(values):
    key = np.asarray(values, dtype=np.float64) + 0.25
    assert np.array_equal(stable_argsort(-key), np.argsort(-key, kind="stable"))
    unique = np.random.default_rng(len(values)).random(len(values))
    assert np.array_equal(stable_argsort(unique), np.argsort(unique, kind="stable"))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), rows=st.integers(1, 6), cols=st.integers(1, 10))
def test_first_valid_is_the_best_of_a_sorted_row(data, rows, cols):
    """On rows whose costs never fall (a carrier's queue, farthest first), the first ``room``
    usable entries are the ``room`` lowest costs, ties leftmost: a stable sort's choice."""
    ok = np.array(data.draw(st.lists(st.booleans(), min_size=rows * cols, max_size=rows * cols))).reshape(rows, cols)
    room = np.array(data.draw(st.lists(st.integers(1, cols + 1), min_size=rows, max_size=rows)))
    drawn = data.draw(st.lists(st.integers(0, 3), min_size=rows * cols, max_size=rows * cols))
    cost = np.sort(np.array(drawn).reshape(rows, cols), axis=1)
    masked = np.where(ok, cost.astype(np.float64), np.inf)
    order = np.argsort(masked, axis=1, kind="stable")
    expect = [(i, int(j)) for i in range(rows) for j in sorted(order[i][np.isfinite(masked[i][order[i]])][: room[i]].tolist())]
    row, col = first_valid(ok, room)
    assert list(zip(row.tolist(), col.tolist(), strict=True)) == expect


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=machines(), kind=st.sampled_from([Kind.GATHER, Kind.SCATTER, Kind.ALLTOALL]), k=st.integers(1, 2))
def test_one_destination_proposals_never_offer_a_chunk_to_a_rank_that_had_it(topo, kind, k):
    """`SingleTargetProposer.propose` does not ask whether the destination holds the chunk: a
    chunk only moves nearer its rank, so no rank nearer than its carrier ever held it, and one it
    is on its way to in this step is ``moving``. Checked on every proposal against the holdings and
    this step's accepted transfers."""
    seen: list[int] = []

    class Checked(SingleTargetProposer):
        def start_step(self, chunk_noise, offered):
            self.on_way = np.zeros_like(self.shared.holds)
            return super().start_step(chunk_noise, offered)

        def propose(self, chans, room, chunk_noise):
            out = super().propose(chans, room, chunk_noise)
            dst = self.shared.ch.dst[chans[out.row]]
            assert not (self.shared.holds[dst, out.chunk] | self.on_way[dst, out.chunk]).any()
            seen.append(out.row.size)
            return out

        def accept(self, dst, chunks, entered):
            self.on_way[dst, chunks] = True
            super().accept(dst, chunks, entered)

    collective = _collective(kind, topo.num_ranks, k)
    disseminate(topo, collective, channels_for(topo), Plan(seed=1), "greedy", proposer=Checked)
    assert sum(seen) >= collective.min_transfers()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topo=machines(),
    kind=st.sampled_from([Kind.GATHER, Kind.SCATTER, Kind.ALLTOALL]),
    k=st.integers(1, 3),
    quantum=st.sampled_from([1, 4]),
    scan=st.sampled_from([1, 3, 64]),
)
def test_one_destination_proposals_from_the_chunks_side_are_the_dense_ones(topo, kind, k, quantum, scan):
    """`SingleTargetProposer.propose` (each looked-at chunk lists the channels it is usable by)
    gives, in every round, exactly the proposals of `propose_dense` (every channel against every
    chunk it looks at), in the same order."""
    rounds: list[int] = []

    class Both(SingleTargetProposer):
        def propose(self, chans, room, chunk_noise):
            fast = super().propose(chans, room, chunk_noise)
            dense = self.propose_dense(chans, room, chunk_noise)
            for a, b in zip(fast, dense, strict=True):
                assert a.dtype.kind == b.dtype.kind and np.array_equal(a, b)
            rounds.append(fast.row.size)
            return fast

    collective = _collective(kind, topo.num_ranks, k)
    plan = Plan(quantum=quantum, seed=2, engine=EngineOptions(single_scan=scan))
    disseminate(topo, collective, channels_for(topo), plan, "greedy", proposer=Both)
    assert rounds


def test_one_destination_proposals_without_the_nearer_table_give_the_same_schedule(builtin, monkeypatch):
    """Beyond `NEARER_TABLE_CELLS` the proposer tests every channel against every chunk
    (`propose_dense`): the same schedule."""
    from synth.algorithms.engines.greedy_engine import proposals_single_target

    topo = builtin("dgx-a100x2")
    collective = _collective(Kind.ALLTOALL, topo.num_ranks, 2)
    with_table = disseminate(topo, collective, channels_for(topo), Plan(quantum=2), "greedy")
    monkeypatch.setattr(proposals_single_target, "NEARER_TABLE_CELLS", 0)
    without = disseminate(topo, collective, channels_for(topo), Plan(quantum=2), "greedy")
    assert with_table == without


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.integers(0, 4), min_size=0, max_size=30))
def test_rank_in_runs_counts_places_within_runs(values):
    from synth.algorithms.engines.greedy_engine.state import rank_in_runs

    keys = np.sort(np.asarray(values, dtype=np.int64))
    expect = [sum(1 for earlier in keys[:i] if earlier == keys[i]) for i in range(keys.size)]
    assert rank_in_runs(keys).tolist() == expect


def test_no_bound_on_machines_too_large_for_its_tables(monkeypatch):
    """Beyond `TABLE_CELLS` greedy makes no bound and searches as before (CannotBeat only from its
    runs); beyond `LACKING_WORK` a collective's bound is 0."""
    from synth.algorithms.engines.greedy_engine import step_bound

    topo = gen.fattree(racks=2, servers=2, gpus=2)
    size = 1 << 16
    monkeypatch.setattr(step_bound, "TABLE_CELLS", 1)
    with pytest.raises(CannotBeat, match="its fastest schedule takes"):
        synthesize(topo, "alltoall", "greedy", options={"size": size, "beat_us": 1.0})
    monkeypatch.setattr(step_bound, "LACKING_WORK", 1)
    bound = StepBound(topo, channels_for(topo))
    assert bound.time_us(_collective(Kind.ALLTOALL, topo.num_ranks, 1), 1, size) == 0.0
