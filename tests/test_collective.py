import numpy as np
import pytest

from synth.collective import Collective, Kind, collective_from_counts, parse_kind


@pytest.mark.parametrize(
    ("kind", "g"),
    [
        (Kind.ALLGATHER, 12),
        (Kind.GATHER, 12),
        (Kind.SCATTER, 12),
        (Kind.REDUCE_SCATTER, 12),
        (Kind.ALLTOALL, 48),
        (Kind.BROADCAST, 3),
        (Kind.REDUCE, 3),
        (Kind.ALLREDUCE, 3),
    ],
)
def test_num_chunks(kind, g):
    assert Collective(kind, 4, 3).num_chunks == g


def test_conditions_allgather_and_alltoall():
    ag = Collective(Kind.ALLGATHER, 3, 2)
    assert ag.initial_holders().tolist() == [[1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1]]
    assert ag.required().all()
    a2a = Collective(Kind.ALLTOALL, 2, 1)  # chunk (s*R+d)*k+i at s, to d
    assert a2a.initial_holders().tolist() == [[1, 1, 0, 0], [0, 0, 1, 1]]
    assert a2a.required().tolist() == [[1, 0, 1, 0], [0, 1, 0, 1]]


def test_rooted_conditions():
    sc = Collective(Kind.SCATTER, 3, 1, root=2)
    assert sc.initial_holders()[2].all() and not sc.initial_holders()[:2].any()
    assert np.array_equal(sc.required(), np.eye(3, dtype=bool))
    red = Collective(Kind.REDUCE, 3, 2, root=1)
    assert red.required().tolist() == [[0, 0], [1, 1], [0, 0]]


def test_chunk_bytes_and_busbw():
    assert Collective(Kind.ALLTOALL, 4, 1).chunk_bytes(1024) == 1024 * 4 / 16
    assert Collective(Kind.ALLREDUCE, 8, 8).chunk_bytes(1024) == 128
    assert Collective(Kind.ALLREDUCE, 8).busbw_factor() == 2 * 7 / 8
    assert Collective(Kind.BROADCAST, 8).busbw_factor() == 1


def test_validation():
    with pytest.raises(ValueError):
        Collective(Kind.ALLGATHER, 4, root=0)
    with pytest.raises(ValueError):
        Collective(Kind.BROADCAST, 4, root=4)
    assert Collective(Kind.GATHER, 4).root == 0
    with pytest.raises(ValueError):
        collective_from_counts(Kind.ALLGATHER, 4, 6, None)
    assert parse_kind("Reduce_Scatter") is Kind.REDUCE_SCATTER
