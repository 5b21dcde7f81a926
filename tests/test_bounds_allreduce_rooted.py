"""The allreduce's `as-broadcast` bound (docs/bounds.md), and the reduce half of its proof.

Their proof is a construction: the transfers that carry one rank's contribution out of an
allreduce schedule form a broadcast from that rank, in the same steps. These tests carry the
construction out on every method's allreduce and on random valid ones, check that what comes out
is a valid broadcast (the verifier says so) and no slower than the allreduce, and that the terms
are what they claim (the rooted models' bounds) and bind where a rooted bound is the larger.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from synth import generators as gen
from synth.bounds import bound_model
from synth.collective import Collective, Kind
from synth.schedule import OP_REDUCE, Schedule, Transfer, schedule_from_steps
from synth.topology import Topology, topology_from_document
from synth.verify import check

from .test_bounds_sound import (
    REL,
    SIZES,
    assert_sound,
    method_schedules,
    multilevel_machines,
    random_schedule,
    step_synchronous_time,
)


def carried_broadcast(schedule: Schedule, topology: Topology, origin: int) -> Schedule:
    """The broadcast from ``origin`` inside an allreduce schedule: per step, the transfers whose
    source's value of the chunk holds ``origin``'s contribution at the start of the step, one per
    (destination, chunk), to a destination not yet holding it, as copies over the same routes.
    A rank's value holds the contribution after a transfer from a holder; a copy from anyone else
    replaces its value, a reduce from anyone else keeps what it held."""
    c = schedule.collective
    holds = np.zeros((c.num_ranks, c.num_chunks), dtype=bool)
    holds[origin, :] = True
    received = holds.copy()  # what the broadcast has delivered (never lost)
    steps = []
    for s in range(schedule.num_steps):
        lo, hi = int(schedule.step_starts[s]), int(schedule.step_starts[s + 1])
        before = holds.copy()
        copied = np.zeros_like(holds)
        step = []
        for i in range(lo, hi):
            src, dst, chunk = int(schedule.src[i]), int(schedule.dst[i]), int(schedule.chunk[i])
            reduce = int(schedule.op[i]) == OP_REDUCE
            if before[src, chunk]:
                holds[dst, chunk] = True
                if not received[dst, chunk]:
                    received[dst, chunk] = True
                    step.append(Transfer(src, dst, chunk, "copy", schedule.routes[int(schedule.route[i])]))
            elif not reduce and not copied[dst, chunk]:
                holds[dst, chunk] = False  # overwritten by a value without the contribution
            copied[dst, chunk] |= before[src, chunk]
        if step:
            steps.append(step)
    assert holds.all(), "an allreduce whose result lacks a contribution (not valid)"
    return schedule_from_steps(Collective(Kind.BROADCAST, c.num_ranks, c.chunks_per_piece, origin), steps, topology=topology)


def assert_carries_broadcasts(schedule: Schedule, topology: Topology, where: str) -> None:
    """Every rank's carried broadcast is valid and no slower than the allreduce at every size."""
    for origin in range(topology.num_ranks):
        bc = carried_broadcast(schedule, topology, origin)
        check(bc, topology)
        for size in SIZES:
            cost = step_synchronous_time(schedule, topology, size)
            assert step_synchronous_time(bc, topology, size) <= cost * (1 + REL), f"{where} origin {origin} size {size}"


def two_boxes() -> Topology:
    """Two boxes of four GPUs joined by slow NICs: the broadcast's crossing bounds exceed the
    allreduce's own at mid sizes."""
    return gen.multihost(hosts=2, gpus=4, nic="gpu", name="two-boxes")


MACHINES = [two_boxes, *(lambda m=m: m for m in multilevel_machines())]


@pytest.mark.parametrize("index", [i if i < 2 else pytest.param(i, marks=pytest.mark.slow) for i in range(len(MACHINES))])
def test_every_method_allreduce_carries_broadcasts(index):
    topo = MACHINES[index]()
    for method, chunks, schedule in method_schedules(topo, Kind.ALLREDUCE, None, [None, 2]):
        check(schedule, topo)
        assert_carries_broadcasts(schedule, topo, f"{topo.name} {method} chunks {chunks}")


@pytest.mark.parametrize("seed", [s if s < 3 else pytest.param(s, marks=pytest.mark.slow) for s in range(6)])
def test_random_allreduces_carry_broadcasts(seed):
    topo = MACHINES[seed % len(MACHINES)]()
    rng = random.Random(seed)
    for _ in range(3):
        schedule = random_schedule(topo, Kind.ALLREDUCE, rng)
        check(schedule, topo)
        assert_carries_broadcasts(schedule, topo, f"{topo.name} random {seed}")
        assert_sound(schedule, topo, f"{topo.name} random {seed}")


def test_a_copy_from_a_non_holder_takes_the_contribution_away():
    """Rank 1 gets rank 0's contribution, then is overwritten by a copy from rank 2 (which lacks
    it): a later transfer from rank 1 carries nothing of rank 0, and the broadcast skips it."""
    topo = gen.fully_connected(3, name="three")
    c = Collective(Kind.ALLREDUCE, 3, 1)
    steps = [
        [Transfer(0, 1, 0, "reduce"), Transfer(2, 1, 0, "reduce")],  # 1 = all three
        [Transfer(1, 0, 0, "copy"), Transfer(1, 2, 0, "copy")],  # everyone holds the sum
    ]
    schedule = schedule_from_steps(c, steps, topology=topo)
    check(schedule, topo)
    bc = carried_broadcast(schedule, topo, 0)
    assert [(int(s), int(d)) for s, d in zip(bc.src, bc.dst, strict=True)] == [(0, 1), (1, 2)]
    check(bc, topo)
    # a copy from a rank without rank 0's contribution replaces it
    steps_lost = [[Transfer(0, 1, 0, "copy")], [Transfer(2, 1, 0, "copy")], [Transfer(1, 2, 0, "copy")]]
    lost = schedule_from_steps(c, steps_lost, topology=topo)
    with pytest.raises(AssertionError, match="lacks a contribution"):
        carried_broadcast(lost, topo, 0)


def one_way_slower() -> Topology:
    """Two hosts of two GPUs whose NIC links carry 25 GB/s out of every GPU but 5 GB/s into h1-gpu1:
    links differ by direction, so a reduce is not a broadcast run backwards."""
    doc = gen.multihost(hosts=2, gpus=2, nic="gpu", name="one-way").to_document()
    links = []
    for link in doc["links"]:
        if {link["a"], link["b"]} == {"h1-gpu1", "h1-nic1"}:
            links.append({**link, "a": "h1-gpu1", "b": "h1-nic1", "duplex": False})
            links.append({**link, "a": "h1-nic1", "b": "h1-gpu1", "bandwidth": 5.0, "duplex": False})
        else:
            links.append(link)
    return topology_from_document({**doc, "links": links})


@pytest.mark.parametrize("index", range(len(MACHINES) + 1))
def test_the_term_is_the_rooted_bound(index):
    """`as-broadcast` is the broadcast bound from the rank with the least bandwidth out, at every
    size (rank 0 on these machines: on the one-way machine only h1-gpu1's way in is slow); the
    reduce bound holds too but is not a term."""
    topo = (*MACHINES, one_way_slower)[index]()
    model = bound_model(topo, Kind.ALLREDUCE)
    assert [n for n in model.names if n.startswith("as-")] == ["as-broadcast"]
    term = model.term("as-broadcast")
    assert f"(broadcast from {topo.node_name(0)})" in term.explanation
    inner = bound_model(topo, Kind.BROADCAST, 0)
    for size in (1, 4096, 65536, 1 << 20, 1 << 24, 1 << 30):
        assert term.time_us(size) == pytest.approx(inner.time_us(size), rel=1e-12)
        assert model.time_us(size) >= inner.time_us(size) * (1 - 1e-12)


def test_as_broadcast_binds_on_two_boxes_at_mid_sizes():
    """On two boxes behind NICs the allreduce's own bounds see one crossing; a broadcast from one
    GPU needs its data through its box's NICs and then spread in the other box, which the
    broadcast's crossing-phases bound counts: the allreduce bound at 1 MiB rises to it."""
    topo = two_boxes()
    model = bound_model(topo, Kind.ALLREDUCE)
    report = model.at(1 << 20)
    assert report.binding == "as-broadcast"
    own = max(b.time_us for b in report.bounds if not b.name.startswith("as-"))
    assert report.time_us > own * 1.05
    assert report.time_us == pytest.approx(bound_model(topo, Kind.BROADCAST, 0).time_us(1 << 20), rel=1e-12)
    assert "broadcast from" in report.bound(report.binding).explanation or "reduce to" in report.bound(report.binding).explanation


def test_the_weakest_rank_is_the_root():
    """A rank behind a degraded NIC sends its contribution out slowest: the broadcast is taken
    from it, and the bound is at least its broadcast's."""
    degraded = gen.degrade(gen.multihost(hosts=2, gpus=2, nic="gpu"), "h0-gpu1", "h0-nic1", 0.1, name="degraded")
    model = bound_model(degraded, Kind.ALLREDUCE)
    assert "(broadcast from h0-gpu1)" in model.term("as-broadcast").explanation
    for size in (65536, 1 << 20, 1 << 30):
        assert model.time_us(size) >= bound_model(degraded, Kind.BROADCAST, 1).time_us(size) * (1 - 1e-12)
        assert bound_model(degraded, Kind.BROADCAST, 1).time_us(size) >= bound_model(degraded, Kind.BROADCAST, 0).time_us(size)


def test_the_one_way_machine_keeps_its_allreduces_sound():
    """Every method's allreduce on the machine whose links differ by direction carries valid
    broadcasts, stays above the term, and is a valid reduce to the rank with the slow way in: no
    faster than that reduce's bound (the reduce half of the proof)."""
    topo = one_way_slower()
    reduce_bound = bound_model(topo, Kind.REDUCE, 3)
    for method, chunks, schedule in method_schedules(topo, Kind.ALLREDUCE, None, [None, 2]):
        check(schedule, topo)
        assert_carries_broadcasts(schedule, topo, f"one-way {method} chunks {chunks}")
        assert_sound(schedule, topo, f"one-way {method} chunks {chunks}")
        as_reduce = schedule_from_steps(
            Collective(Kind.REDUCE, 4, schedule.collective.chunks_per_piece, 3), schedule.steps, topology=topo
        )
        check(as_reduce, topo)
        for size in SIZES:
            cost = step_synchronous_time(schedule, topo, size)
            assert reduce_bound.time_us(size) <= cost * (1 + REL), f"one-way {method} size {size}"
