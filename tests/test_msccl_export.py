"""MSCCL export: every generated schedule of every built-in topology goes out as MSCCL XML and comes
back (import) as the same schedule, step for step; fusion, channels, limits and attributes."""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

import pytest

from synth import generators as gen
from synth.builtin import BUILTIN_NAMES
from synth.collective import Collective, Kind
from synth.interop.equivalence import compare
from synth.interop.msccl_export import LimitExceeded, export_msccl
from synth.interop.msccl_import import execute, import_msccl, schedule_from_execution
from synth.interop.msccl_xml import algo_to_xml, parse_msccl_text
from synth.schedule import load_schedule, schedule_from_steps
from synth.verify import check

from .conftest import REPO

GENERATED = REPO / "generated"
SLOW_TOPOLOGIES = {"fattree-4rack", "dgx-a100x4"}


def _cases(slow: bool) -> list:
    out = []
    for name in BUILTIN_NAMES:
        if (name in SLOW_TOPOLOGIES) != slow:
            continue
        for path in sorted((GENERATED / name).glob("*.json")):
            out.append(pytest.param(name, path, id=f"{name}/{path.stem}"))
    return out


def _round_trip(topology_name, path: Path, builtin, inplace: bool):
    schedule = load_schedule(path)
    topo = builtin(topology_name)
    exported = export_msccl(schedule, inplace=inplace)
    text = algo_to_xml(exported.algo)
    algo, warnings = parse_msccl_text(text, f"{path.stem}.xml")
    assert warnings == []
    back = import_msccl(algo, topo).schedule
    check(back, topo)
    result = compare(schedule, back)
    assert result.equivalent, result.difference
    assert result.identical_steps, f"{result.same_step}/{result.transfers} transfers in the same step"
    assert back.num_steps == schedule.num_steps
    # routes come back from the topology's router: the generators' own choice, except that on the
    # fat-tree reductions built by duality (on the reversed topology) may take the other spine of
    # an equal-cost pair
    for before, after in zip(schedule.steps, back.steps):
        for t, u in zip(before, after):
            assert (t.src, t.dst, t.chunk, t.op) == (u.src, u.dst, u.chunk, u.op)
            assert t.via == u.via or _route_cost(topo, t) == _route_cost(topo, u)
    return exported, back


def _route_cost(topo, t):
    path = [t.src, *(topo.node_index[v] for v in t.via), t.dst]
    links = [topo.links[topo.link_index[(a, b)]] for a, b in pairwise(path)]
    return (min(lk.bandwidth for lk in links), len(links), round(sum(lk.latency for lk in links), 9))


@pytest.mark.parametrize(("topology_name", "path"), _cases(slow=False))
@pytest.mark.parametrize("inplace", [False, True], ids=["outofplace", "inplace"])
def test_generated_schedules_round_trip(topology_name, path, inplace, builtin):
    _round_trip(topology_name, path, builtin, inplace)


@pytest.mark.slow
@pytest.mark.parametrize(("topology_name", "path"), _cases(slow=True))
@pytest.mark.parametrize("inplace", [False, True], ids=["outofplace", "inplace"])
def test_generated_schedules_round_trip_large(topology_name, path, inplace, builtin):
    _round_trip(topology_name, path, builtin, inplace)


def test_every_builtin_has_generated_schedules_covered():
    covered = {p.values[0] for p in _cases(False) + _cases(True)}
    assert covered == set(BUILTIN_NAMES)


# ----------------------------------------------------------------------------- what is written
def test_ring_allgather_relays_fuse_into_recv_copy_send(builtin):
    exported = export_msccl(load_schedule(GENERATED / "dgx1" / "allgather-ring.json"))
    counts = exported.op_counts
    # each rank: one plain send (its own piece), six relays, one plain receive (the last piece)
    assert (counts["s"], counts["rcs"], counts["r"]) == (8, 48, 8)
    # out of place: each rank copies its own piece from its input to its output
    assert counts["cpy"] == 8


def test_ring_reduce_scatter_fuses_into_recv_reduce_send(builtin):
    exported = export_msccl(load_schedule(GENERATED / "dgx1" / "reduce-scatter-ring.json"))
    counts = exported.op_counts
    assert (counts["s"], counts["rrs"], counts["rrc"]) == (8, 48, 8)


def test_reductions_that_are_read_again_store_their_sum(builtin):
    # recursive doubling: every partial sum is sent on and added to again, so rrcs (never rrs)
    exported = export_msccl(load_schedule(GENERATED / "dgx1" / "allreduce-recursive-doubling.json"))
    assert exported.op_counts["rrcs"] > 0 and exported.op_counts["rrs"] == 0


def test_header_attributes_runtimes_need():
    exported = export_msccl(
        load_schedule(GENERATED / "dgx1" / "allreduce-ring.json"), proto="LL", min_bytes=1024, max_bytes=1 << 20, inplace=True
    )
    head = algo_to_xml(exported.algo).splitlines()[0]
    assert head == (
        '<algo name="synth allreduce ring on dgx1" proto="LL" nchannels="1" nchunksperloop="8" ngpus="8" '
        'coll="allreduce" inplace="1" outofplace="0" minBytes="1024" maxBytes="1048576">'
    )
    # in place, the allreduce uses the input buffer only, like MSCCL's own ring file
    assert all((g.i_chunks, g.o_chunks) == (8, 0) for g in exported.algo.gpus)


def test_reduce_scatter_is_called_as_the_runtime_spells_it():
    exported = export_msccl(load_schedule(GENERATED / "dgx1" / "reduce-scatter-ring.json"))
    assert exported.algo.coll == "reducescatter"


def test_channels_spread_chunks_like_msccl_ring(builtin):
    schedule = load_schedule(GENERATED / "dgx-a100" / "allreduce-ring.json")
    exported = export_msccl(schedule, channels=8)
    assert exported.algo.nchannels == 8
    for gpu in exported.algo.gpus:
        # chunk c on channel c, as in MSCCL's allreduce_ring_8channelsperring; synth's ring runs the
        # reduce-scatter against the ring direction (the dual of the allgather), so a channel has a
        # thread block for each direction
        assert {tb.channel for tb in gpu.threadblocks} == set(range(8))
        ring = {(gpu.id + 1) % 8, (gpu.id - 1) % 8}
        assert all({tb.send, tb.recv} <= ring for tb in gpu.threadblocks)
        assert all(sum(tb.channel == c for tb in gpu.threadblocks) <= 2 for c in range(8))
    back = import_msccl(parse_msccl_text(algo_to_xml(exported.algo))[0], builtin("dgx-a100")).schedule
    assert compare(schedule, back).identical_steps


def test_too_many_peers_per_channel_are_split_over_channels():
    schedule = load_schedule(GENERATED / "dgx-a100x4" / "allgather-direct.json")
    exported = export_msccl(schedule)
    assert exported.groups == 2 and exported.algo.nchannels == 2
    assert "split over 2 channels" in exported.notes[0]
    for gpu in exported.algo.gpus:
        for chan in range(2):
            assert sum(tb.channel == chan for tb in gpu.threadblocks) <= 32


def _ping_pong(steps: int):
    """Allreduce on 2 ranks with one chunk, then the value bounced back and forth: every transfer
    uses the same pair and chunk, so no channel split can shorten the thread blocks."""
    coll = Collective(Kind.ALLREDUCE, 2, 1)
    moves = [[(0, 1, 0, "reduce")], [(1, 0, 0, "copy")]]
    moves += [[(i % 2, 1 - i % 2, 0, "copy")] for i in range(steps - 2)]
    topo = gen.ring(2)
    return schedule_from_steps(coll, moves, topo, normalize=True), topo


def test_limits_refuse_with_a_clear_message():
    # relays fuse (receive, send on), so 1200 transfers make about 600 operations per thread block
    schedule, topo = _ping_pong(1200)
    check(schedule, topo)
    with pytest.raises(LimitExceeded, match=r"needs \d+ steps \(MSCCL allows 256\), and no split over at most 32 channels fits"):
        export_msccl(schedule)
    export_msccl(_ping_pong(400)[0])


def test_more_steps_than_a_thread_block_holds_spread_over_channels():
    # ring allreduce on 8 ranks with 512 chunks: in each direction (the reduce-scatter runs against
    # the ring) 7 steps send 64 chunks to the same neighbour, 448 sends on one thread block; over 2
    # channels (chunk mod 2) it is 224
    from synth.registry import synthesize

    topo = gen.nvswitch(8, 100.0)
    schedule = synthesize(topo, Kind.ALLREDUCE, "ring", chunks=512)
    exported = export_msccl(schedule)
    assert all(len(tb.steps) <= 256 for g in exported.algo.gpus for tb in g.threadblocks)
    assert exported.channels == 2 and "split over 2 channels (chunks over 2" in exported.notes[0]


def test_hints_are_checked_and_ignored_when_inconsistent(builtin):
    schedule = load_schedule(GENERATED / "dgx1" / "allgather-ring.json")
    text = algo_to_xml(export_msccl(schedule).algo)
    # put every receive in step 0: impossible for a ring, so the importer falls back to data flow
    broken = re.sub(r'synth_step="\d+"', 'synth_step="0"', text)
    algo, _ = parse_msccl_text(broken)
    back = import_msccl(algo, builtin("dgx1")).schedule
    assert compare(schedule, back).identical_steps  # the ring is as early as data allows anyway


def test_without_hints_steps_come_from_data_flow(builtin):
    # a binomial broadcast on dgx1 relays some hops; without hints the import places every
    # transfer as early as its data allows, which keeps the data flow
    schedule = load_schedule(GENERATED / "dgx1" / "broadcast-binomial.json")
    exported = export_msccl(schedule)
    run, mode = execute(exported.algo)
    for gpu in exported.algo.gpus:
        for tb in gpu.threadblocks:
            assert all(st.synth_step is None or st.type in ("r", "rrc", "rcs", "rrcs", "rrs") for st in tb.steps)
    text = re.sub(r' synth_step="\d+"', "", algo_to_xml(exported.algo))
    algo, _ = parse_msccl_text(text)
    back = import_msccl(algo, builtin("dgx1")).schedule
    result = compare(schedule, back)
    assert result.equivalent and back.num_steps <= schedule.num_steps
    assert schedule_from_execution(run, mode, None).num_transfers == schedule.num_transfers


def test_compare_notices_differences():
    coll = Collective(Kind.ALLGATHER, 3, 1)
    a = schedule_from_steps(coll, [[(0, 1, 0), (1, 2, 1), (2, 0, 2)], [(1, 2, 0), (2, 0, 1), (0, 1, 2)]], normalize=True)
    same_later = schedule_from_steps(coll, [[(0, 1, 0), (1, 2, 1), (2, 0, 2)], [], [(1, 2, 0), (2, 0, 1), (0, 1, 2)]])
    other = schedule_from_steps(coll, [[(0, 1, 0), (1, 2, 1), (2, 0, 2)], [(0, 2, 0), (2, 0, 1), (0, 1, 2)]], normalize=True)
    assert compare(a, a).identical_steps
    r = compare(a, same_later)
    assert r.equivalent and not r.identical_steps and r.same_step == 3
    r = compare(a, other)
    assert not r.equivalent and "transfers differ" in r.difference


@pytest.mark.parametrize("kind", [Kind.BROADCAST, Kind.REDUCE, Kind.GATHER, Kind.SCATTER])
@pytest.mark.parametrize("method", ["ring", "binomial"])
@pytest.mark.parametrize("inplace", [False, True], ids=["outofplace", "inplace"])
def test_other_roots_and_several_chunks_round_trip(kind, method, inplace, builtin):
    from synth.registry import synthesize

    topo = builtin("dgx1")
    schedule = synthesize(topo, kind, method, root=5, chunks=3)
    exported = export_msccl(schedule, inplace=inplace)
    algo, _ = parse_msccl_text(algo_to_xml(exported.algo))
    back = import_msccl(algo, topo)  # the root is inferred from the buffers the algorithm uses
    assert back.schedule.collective.root == 5
    assert compare(schedule, back.schedule).identical_steps


@pytest.mark.parametrize("kind", [Kind.ALLGATHER, Kind.REDUCE_SCATTER, Kind.ALLTOALL, Kind.ALLREDUCE])
def test_several_chunks_per_piece_round_trip(kind, builtin):
    from synth.registry import synthesize

    topo = builtin("ndv2x2")
    schedule = synthesize(topo, kind, "direct", chunks=32 if kind is Kind.ALLREDUCE else 2)
    for inplace in (False, True):
        algo, _ = parse_msccl_text(algo_to_xml(export_msccl(schedule, inplace=inplace).algo))
        assert compare(schedule, import_msccl(algo, topo).schedule).identical_steps
