import json

import pytest
from click.testing import CliRunner

from synth.cli import main
from synth.collective import Kind
from synth.compare import compare, default_methods


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
    assert small.method in ("direct", "recursive-doubling")  # few steps win small messages
    assert large.method == "multiring" and large.ratio < 1.01  # six NVLink rings reach the optimum
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
