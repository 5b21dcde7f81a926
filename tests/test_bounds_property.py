"""Property tests of the lower bounds (hypothesis): on random machines, no verified schedule (a
random valid one, or one of every method) is faster than the bound at sizes from 1 B to 1 GiB,
in the step-synchronous model (docs/formats.md, re-implemented in tests/test_bounds_sound.py) and the
event-driven one; and the combined bounds are never below the simple ones they refine."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.bounds import bound_model
from synth.collective import ROOTED, Kind
from synth.errors import NotApplicable
from synth.registry import METHODS, synthesize
from synth.verify import check

from .random_machines import machines
from .test_bounds_sound import random_schedule, step_synchronous_time

SIZES = (1, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 1 << 30)
REL = 1e-9
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def assert_no_faster(schedule, topology, where: str) -> None:
    c = schedule.collective
    for name in ("step", "event"):  # the event-driven bounds are the step ones without their floors
        model = bound_model(topology, c.kind, c.root, model=name)
        for size in SIZES:
            cost = step_synchronous_time(schedule, topology, size)
            bound = model.time_us(size)
            assert bound <= cost * (1 + REL) + 1e-12, (
                f"{where} {name} size {size}: bound {bound} ({model.at(size).binding}) > schedule cost {cost}"
            )


@SETTINGS
@given(topology=machines(), kind=st.sampled_from(list(Kind)), seed=st.integers(0, 2**16))
def test_no_random_schedule_beats_the_bound(topology, kind, seed):
    schedule = random_schedule(topology, kind, random.Random(seed))
    check(schedule, topology)
    assert_no_faster(schedule, topology, f"random {kind.value} schedule on {topology.name}")


METHOD_NAMES = sorted(m for m in METHODS if m not in ("ilp", "auto"))


@SETTINGS
@given(
    topology=machines(),
    kind=st.sampled_from(list(Kind)),
    method=st.sampled_from(METHOD_NAMES),
    chunks=st.sampled_from([None, 2, 3]),
    data=st.data(),
)
def test_no_method_beats_the_bound(topology, kind, method, chunks, data):
    if not METHODS[method].serves(kind):
        return
    r = topology.num_ranks
    root = data.draw(st.integers(0, r - 1), label="root") if kind in ROOTED else None
    if chunks is not None and kind is Kind.ALLREDUCE:
        chunks *= r  # allreduce methods split into pieces of R chunks
    try:
        schedule = synthesize(topology, kind, method, root=root, chunks=chunks)
    except NotApplicable:
        return
    assert_no_faster(schedule, topology, f"{method} {kind.value} root {root} on {topology.name}")


@SETTINGS
@given(topology=machines(), kind=st.sampled_from(list(Kind)))
def test_combined_bounds_refine_the_simple_ones(topology, kind):
    """time-expanded ≥ its linear form (fewest steps × α_min + the bandwidth bound); cut-latency ≥
    the bandwidth term it refines, minus nothing; and the whole bound ≥ every simple term."""
    model = bound_model(topology, kind)
    simple = [t for t in model.terms if t.name not in ("time-expanded", "cut-latency")]
    for size in SIZES:
        for term in model.terms:
            assert term.time_us(size) >= term.us_per_byte * size + term.latency_us - 1e-12
        assert model.time_us(size) >= max(t.time_us(size) for t in simple)


def multilevel_machines():
    """Machines of several hosts (NIC per GPU or per host, NVSwitch or PCIe inside) and small
    fat-trees: the partitions of the steps-volume bound (docs/bounds.md) have a slow α between
    their parts there."""
    from synth import generators as gen

    return st.one_of(
        st.builds(
            lambda h, g, nic, fabric, bw: gen.multihost(hosts=h, gpus=g, nic=nic, fabric=fabric, nic_bandwidth=bw),
            st.integers(2, 3),
            st.integers(1, 3),
            st.sampled_from(["gpu", "host"]),
            st.sampled_from(["nvswitch", "pcie"]),
            st.sampled_from([12.5, 50.0]),
        ),
        st.builds(
            lambda r, s: gen.fattree(racks=r, servers=s, gpus=2, oversubscription=4.0),
            st.integers(2, 3),
            st.integers(1, 2),
        ),
    )


@SETTINGS
@given(topology=multilevel_machines(), kind=st.sampled_from(list(Kind)), seed=st.integers(0, 2**16))
def test_no_random_schedule_beats_the_bound_on_multilevel_machines(topology, kind, seed):
    schedule = random_schedule(topology, kind, random.Random(seed))
    check(schedule, topology)
    assert_no_faster(schedule, topology, f"random {kind.value} schedule on {topology.name}")


@SETTINGS
@given(
    topology=multilevel_machines(),
    kind=st.sampled_from(list(Kind)),
    method=st.sampled_from(METHOD_NAMES),
    chunks=st.sampled_from([None, 2, 3]),
    data=st.data(),
)
def test_no_method_beats_the_bound_on_multilevel_machines(topology, kind, method, chunks, data):
    test_no_method_beats_the_bound.hypothesis.inner_test(topology, kind, method, chunks, data)
