"""Buffer layout of each collective (synth.exec.layout) and the compiled schedule (synth.exec.program)."""

import numpy as np
import pytest

from synth.collective import ALL_KINDS, ROOTED, Collective, Kind
from synth.exec.layout import Layout
from synth.exec.program import RECV, SEND, WORK, Program
from synth.registry import synthesize


def _collective(kind, r=4, k=1):
    return Collective(kind, r, k, 1 if kind in ROOTED else None)


@pytest.mark.parametrize("kind", ALL_KINDS)
@pytest.mark.parametrize("k", [1, 3])
def test_positions_follow_the_collective_and_tile_the_buffers(kind, k):
    c = _collective(kind, 4, k)
    layout = Layout(c, np.float32, 10)  # 10 elements per part: uneven chunks when k = 3
    held = np.ones((4, c.num_chunks), bool) if c.is_reduction else c.initial_holders()
    assert np.array_equal(layout.send_position >= 0, held)
    assert np.array_equal(layout.recv_position >= 0, c.required())
    lengths = layout.chunk_length
    assert lengths.sum() == layout.count * c.num_chunks // k
    for rank in range(4):
        for positions, count, used in (
            (layout.send_position[rank], layout.send_count, layout.sends_data(rank)),
            (layout.recv_position[rank], layout.recv_count, layout.has_output(rank)),
        ):
            cover = np.zeros(count, int)
            for chunk in np.flatnonzero(positions >= 0):
                cover[positions[chunk] : positions[chunk] + lengths[chunk]] += 1
            assert np.all(cover == (1 if used else 0)), (rank, positions)


@pytest.mark.parametrize(
    ("kind", "size", "count", "effective", "send", "recv"),
    [
        (Kind.ALLREDUCE, 100, 25, 100, 25, 25),
        (Kind.ALLGATHER, 100, 3, 96, 3, 24),  # size is the output: 25 elements, 3 per rank
        (Kind.REDUCE_SCATTER, 100, 3, 96, 24, 3),  # size is the input
        (Kind.ALLTOALL, 100, 3, 96, 24, 24),  # size is the per-rank send buffer
        (Kind.BROADCAST, 6, 1, 4, 1, 1),
        (Kind.SCATTER, 8, 0, 0, 0, 0),
    ],
)
def test_sizes_round_down_to_whole_elements_per_part(kind, size, count, effective, send, recv):
    layout = Layout.for_size(_collective(kind, 8), size, np.float32)
    assert (layout.count, layout.size, layout.send_count, layout.recv_count) == (count, effective, send, recv)


def test_uneven_chunks_split_as_evenly_as_possible():
    layout = Layout(Collective(Kind.ALLREDUCE, 4, 4), np.float64, 2)  # 8 B·2: fewer elements than chunks
    assert layout.chunk_length.tolist() == [0, 1, 0, 1]
    assert Layout(Collective(Kind.ALLREDUCE, 4, 3), np.int8, 10).chunk_length.tolist() == [3, 3, 4]


def test_program_slots_and_conflicts(small_topologies):
    ring = Program(synthesize(small_topologies["ring5"], "allreduce", "ring"))
    assert np.all(ring.slot_kind == RECV)
    assert ring.steps_with_conflicts.size == 0  # a ring never overwrites what it sends in a step
    rs = Program(synthesize(small_topologies["ring5"], "reduce-scatter", "ring"))
    own = np.eye(5, dtype=bool)
    assert np.all(rs.slot_kind[own] == RECV)
    assert set(np.unique(rs.slot_kind[~own]).tolist()) <= {SEND, WORK}
    doubling = Program(synthesize(small_topologies["hypercube3"], "allreduce", "recursive-doubling"))
    assert doubling.steps_with_conflicts.size > 0  # partners swap the same chunk: scratch needed
    assert doubling.conflicts(0, 0, int(doubling.steps_with_conflicts[0])) or any(
        doubling.conflicts(r, 0, int(doubling.steps_with_conflicts[0])) for r in range(8)
    )
    gather = Program(synthesize(small_topologies["ring5"], "allgather", "ring"))
    assert gather.never_written_outputs(2).tolist() == [2]  # the own piece is copied once per call
