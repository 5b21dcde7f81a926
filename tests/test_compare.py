import json

import pytest
from click.testing import CliRunner

from synth.cli import main
from synth.cli.compare_cmd import render
from synth.collective import Kind
from synth.compare import compare, default_methods
from synth.registry import synthesize
from synth.simulate import Simulator


@pytest.fixture(scope="module")
def dgx1_allgather(dgx1):
    return compare(dgx1, "allgather", [1 << 10, 1 << 30])


def test_every_applicable_method_and_bound(dgx1_allgather):
    c = dgx1_allgather
    assert {o.method for o in c.outcomes} == set(default_methods(Kind.ALLGATHER))
    for i in range(len(c.sizes)):
        rows = c.rows(i)
        assert [r.time_us for r in rows] == sorted(r.time_us for r in rows)
        assert all(r.ratio >= 1 - 1e-9 for r in rows)  # nothing beats the lower bound
        assert len(rows) == len([o for o in c.outcomes if o.ok])


def test_latency_and_bandwidth_winners(dgx1_allgather):
    small, large = dgx1_allgather.best(0), dgx1_allgather.best(1)
    # few steps win small messages (two-step schedules: direct, or greedy/packing tuned for 1 KiB)
    assert small.method in ("direct", "greedy", "packing") and small.ratio < 1.05
    rows = {r.method: r for r in dgx1_allgather.rows(1)}
    assert rows["multiring"].ratio < 1.01  # six NVLink rings reach the optimum
    assert large.method in ("multiring", "greedy") and large.ratio < 1.01
    ring_small = next(r for r in dgx1_allgather.rows(0) if r.method == "ring")
    assert ring_small.ratio > 3  # a ring pays R-1 latencies


def test_not_applicable_listed(dgx1):
    c = compare(dgx1, "alltoall", [1 << 20], methods=["ring", "direct", "nope"])
    notes = {o.method: o.note for o in c.skipped}
    assert "does not serve alltoall" in notes["ring"] and "unknown method" in notes["nope"]
    assert [r.method for r in c.rows(0)] == ["direct"]


def test_cli_table_and_json(tmp_path):
    runner = CliRunner()
    out = runner.invoke(main, ["compare", "dgx1", "-c", "allreduce", "--sizes", "1KiB,1GiB"])
    assert out.exit_code == 0, out.output
    assert "size 1KiB" in out.output and "lower bound" in out.output and "NCCL model" in out.output
    data = json.loads(runner.invoke(main, ["compare", "dgx1", "-c", "allreduce", "--sizes", "1MiB", "--json"]).output)
    assert data["collective"] == "allreduce" and data["sizes"][0]["methods"][0]["ratio_to_bound"] >= 1
    bad = runner.invoke(main, ["compare", "dgx1", "-c", "allreduce", "--sizes", "1XB"])
    assert bad.exit_code == 2


def test_event_model_compares_against_the_event_bound(dgx1):
    from synth.bounds import bound_model

    c = compare(dgx1, "allgather", [1 << 10, 1 << 30], model="event")
    event_bound = bound_model(dgx1, "allgather", model="event")
    assert [b.time_us for b in c.bounds] == pytest.approx([event_bound.time_us(s) for s in c.sizes], rel=1e-12)
    for i in range(len(c.sizes)):
        assert all(r.ratio >= 1 - 1e-9 for r in c.rows(i))


def test_self_tuning_methods_take_the_schedule_tuned_for_each_size(dgx1):
    """greedy and packing are synthesized once per size (at most three) and each size takes the
    best of them: never slower there than the schedule tuned for the largest size alone."""
    sizes = [1 << 10, 1 << 20, 64 << 20, 1 << 30]
    c = compare(dgx1, "allgather", sizes, methods=["greedy", "ring"])
    greedy = next(o for o in c.outcomes if o.method == "greedy")
    assert len(greedy.tuned) == len(sizes) and {t[0] for t in greedy.tuned} <= {"1KiB", "64MiB", "1GiB"}
    assert greedy.tuned[0][0] == "1KiB" and greedy.tuned[-1][0] == "1GiB"
    alone = compare(dgx1, "allgather", sizes[-1:], methods=["greedy"])
    large = synthesize(dgx1, "allgather", "greedy", options={"size": sizes[-1]})
    assert greedy.schedule.collective == large.collective
    times = Simulator(large, dgx1).run(sizes, "sync", timeline=False)
    assert all(t <= r.time_us * (1 + 1e-12) for t, r in zip(greedy.times_us, times, strict=True))
    assert greedy.times_us[0] < times[0].time_us  # a 1 KiB schedule beats the 1 GiB one at 1 KiB
    assert alone.outcomes[0].times_us[0] == pytest.approx(greedy.times_us[-1])
    ring = next(o for o in c.outcomes if o.method == "ring")
    assert ring.tuned == () and ring.shape(0) == (ring.steps, ring.chunks)
    assert "tuned for 1KiB" in render(c)
    assert c.to_dict()["schedules"][0]["tuned_for"][str(1 << 10)] == "1KiB"


def test_a_method_that_ignores_the_size_is_not_shown_as_tuned(builtin):
    topo = builtin("dgx-a100x2")
    allreduce = compare(topo, "allreduce", [1 << 10, 1 << 30], methods=["hierarchical"]).outcomes[0]
    assert allreduce.ok and allreduce.tuned == ()  # hierarchical allreduce: one schedule for every size
    scatter = compare(topo, "scatter", [1 << 10, 1 << 30], methods=["hierarchical"]).outcomes[0]
    assert [t[0] for t in scatter.tuned] == ["1KiB", "1GiB"] and scatter.shape(0) != scatter.shape(1)
