"""No verified schedule ever beats the lower bound, as timed by the simulator itself (both models),
over random topologies and random or synthesized schedules (hypothesis)."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.bounds import bound_model
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.registry import METHODS, synthesize
from synth.simulate import Simulator
from synth.verify import verify

from .test_bounds_sound import random_schedule, random_topology

SIZES = (1, 1000, 1 << 16, 1 << 20, 1 << 30)
BOUND_MODEL = {"sync": "step", "event": "event"}


def assert_not_below_bound(schedule, topology):
    assert verify(schedule, topology).ok
    c = schedule.collective
    sim = Simulator(schedule, topology)
    for model in ("sync", "event"):
        bm = bound_model(topology, c.kind, c.root, model=BOUND_MODEL[model])
        for result in sim.run(SIZES, model, timeline=False):
            bound = bm.time_us(result.size)
            assert result.time_us >= bound * (1 - 1e-9) - 1e-9, (
                f"{schedule.method} {c.kind.value} {model} at {result.size} B: {result.time_us} us < bound {bound} us"
            )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**9), kind=st.sampled_from(list(Kind)), synthesized=st.booleans())
def test_no_schedule_beats_the_bound(seed, kind, synthesized):
    topology = random_topology(seed)
    rng = random.Random(seed)
    if synthesized:
        methods = [m for m, spec in METHODS.items() if spec.serves(kind) and spec.family not in ("exact", "meta")]
        method = rng.choice(methods)
        try:
            schedule = synthesize(topology, kind, method)
        except NotApplicable:
            return
    else:
        schedule = random_schedule(topology, kind, rng)
    assert_not_below_bound(schedule, topology)
