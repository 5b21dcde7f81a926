"""Link figures outside the physical range are refused at load time (they used to validate and then
make `synth bound` divide by zero and `synth simulate` report a dependency cycle)."""

from __future__ import annotations

import json

import pytest

from synth import generators as gen
from synth.builtin import builtin_path
from tests.cli_helpers import assert_bad_input, invoke


def _write(tmp_path, **link0):
    doc = json.loads(builtin_path("dgx1").read_text())
    doc["links"][0].update(link0)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("bandwidth", [1e308, 1e-320, 1e-7, 1.5e9, 10**400])
def test_bandwidth_out_of_range(tmp_path, bandwidth):
    path = _write(tmp_path, bandwidth=bandwidth)
    assert_bad_input(invoke("bound", path, "-c", "allreduce", "--size", "1M"), "t.json", "links[0].bandwidth")
    assert_bad_input(invoke("topo", "validate", path), "links[0].bandwidth")


@pytest.mark.parametrize("latency", [1e10, -1])
def test_latency_out_of_range(tmp_path, latency):
    assert_bad_input(invoke("topo", "validate", _write(tmp_path, latency=latency)), "links[0].latency")


def test_the_limits_themselves_are_accepted(tmp_path):
    for figures in ({"bandwidth": 1e-6}, {"bandwidth": 1e9}, {"latency": 1e9}):
        result = invoke("bound", _write(tmp_path, **figures), "-c", "allreduce", "--size", "1M")
        assert result.exit_code == 0, result.output


def test_parallel_entries_that_add_up_beyond_the_limit(tmp_path):
    doc = json.loads(builtin_path("dgx1").read_text())
    doc["links"] += [dict(doc["links"][0], bandwidth=6e8), dict(doc["links"][0], bandwidth=6e8)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert_bad_input(invoke("topo", "validate", path), "add up to more than")


def test_generators_refuse_the_same():
    with pytest.raises(ValueError, match="between"):
        gen.ring(4, bandwidth=1e308)
    with pytest.raises(ValueError):
        gen.ring(4, latency=float("nan"))
