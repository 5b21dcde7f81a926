"""Every classic method, for every collective it serves, on built-in and generated topologies."""

import pytest

from synth import generators as gen
from synth.builtin import BUILTIN_NAMES
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.registry import CLASSIC_METHODS, METHODS, synthesize
from synth.verify import verify

from .conftest import SMALL_TOPOLOGIES
from .reference import numeric_replay

CASES = [(m, k) for m in CLASSIC_METHODS for k in Kind if METHODS[m].serves(k)]


@pytest.mark.parametrize("topology_name", BUILTIN_NAMES)
def test_every_classic_method_verifies_on_builtins(builtin, topology_name):
    topo = builtin(topology_name)
    for method, kind in CASES:
        schedule = synthesize(topo, kind, method, verify=False)
        assert verify(schedule, topo).ok, (method, kind)


@pytest.mark.parametrize("topology_name", sorted(SMALL_TOPOLOGIES))
def test_every_classic_method_on_small_topologies(small_topologies, topology_name):
    topo = small_topologies[topology_name]
    for method, kind in CASES:
        for root in [0, topo.num_ranks - 1] if kind in (Kind.BROADCAST, Kind.REDUCE, Kind.GATHER, Kind.SCATTER) else [None]:
            for chunks in (None, 2 * topo.num_ranks if kind is Kind.ALLREDUCE else 2):
                try:
                    schedule = synthesize(topo, kind, method, root=root, chunks=chunks, verify=False)
                except NotApplicable:
                    assert method == "recursive-doubling" and kind is Kind.ALLREDUCE
                    continue
                assert verify(schedule, topo).ok, (method, kind, root, chunks)
                assert numeric_replay(schedule), (method, kind, root, chunks)


@pytest.mark.parametrize("ranks", [1, 2, 3, 5, 6, 7, 12])
def test_any_rank_count(ranks):
    topo = gen.nvswitch(ranks, 100.0) if ranks > 1 else gen.nvswitch(1, 100.0)
    for method, kind in CASES:
        schedule = synthesize(topo, kind, method, verify=False)
        assert verify(schedule, topo).ok, (method, kind)


def test_ring_steps_and_transfers(dgx1):
    ar = synthesize(dgx1, "allreduce", "ring")
    assert ar.num_steps == 14 and ar.num_transfers == 8 * 14  # 2(R-1) steps, R chunks per step
    assert ar.params["reduce_scatter"]["ring"] == [0, 4, 5, 7, 6, 2, 3, 1] or ar.params["allgather"]["ring"] == [
        0,
        1,
        3,
        2,
        6,
        7,
        5,
        4,
    ]
    bc = synthesize(dgx1, "broadcast", "ring", chunks=4)
    assert bc.num_steps == 4 + 8 - 2  # pipelined chain


def test_ring_on_dgx1_uses_only_double_nvlinks(dgx1):
    ag = synthesize(dgx1, "allgather", "ring")
    for step in ag.steps:
        for t in step:
            assert dgx1.links[dgx1.link_index[(t.src, t.dst)]].bandwidth == 50.0


def test_recursive_and_binomial_step_counts(builtin):
    dgx2 = builtin("dgx2")
    assert synthesize(dgx2, "allgather", "recursive-doubling").num_steps == 4
    assert synthesize(dgx2, "reduce-scatter", "recursive-halving").num_steps == 4
    assert synthesize(dgx2, "broadcast", "binomial").num_steps == 4
    twelve = gen.nvswitch(12, 100.0)
    assert synthesize(twelve, "allgather", "recursive-doubling").num_steps == 3 + 2  # fold in, 3 doublings, fold out


def test_relays_on_a_torus():
    torus = gen.torus(4, 4)
    for method in ("direct", "recursive-doubling"):
        ag = synthesize(torus, "allgather", method)
        assert all(not r for r in ag.routes)  # torus has no switches: every transfer is one link
        assert ag.num_steps > {"direct": 1, "recursive-doubling": 4}[method]  # relays add steps
    with pytest.raises(NotApplicable, match="recursive-halving"):
        synthesize(torus, "allreduce", "recursive-doubling")


def test_not_applicable_messages(dgx1):
    with pytest.raises(NotApplicable, match="multiple of the rank count 8"):
        synthesize(dgx1, "allreduce", "ring", chunks=3)
    with pytest.raises(NotApplicable, match="does not serve alltoall"):
        synthesize(dgx1, "alltoall", "ring")
    with pytest.raises(NotApplicable, match="unknown method"):
        synthesize(dgx1, "allgather", "magic")


@pytest.mark.slow
def test_1024_rank_ring_allreduce_verifies():
    topo = gen.nvswitch(1024, 300.0)
    schedule = synthesize(topo, "allreduce", "ring")
    assert schedule.num_steps == 2 * 1023 and schedule.num_transfers == 2 * 1023 * 1024


def test_make_collective_accepts_kind_names(dgx1):
    from synth.registry import make_collective

    assert make_collective(dgx1, "allreduce", "ring").chunks_per_piece == 8
    assert make_collective(dgx1, Kind.ALLREDUCE, "ring").chunks_per_piece == 8
