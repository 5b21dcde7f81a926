"""``synth bound``: table and JSON output, the binding bound, and one-line errors."""

import json
import re

import pytest
from click.testing import CliRunner

from synth import generators as gen
from synth.cli import main
from synth.topology import topology_to_json

from .test_cli import run


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_help_lists_bound():
    assert "  bound " in invoke("--help").output


def test_table_marks_the_binding_bound_per_size():
    result = invoke("bound", "dgx-a100x2", "--collective", "allgather", "--size", "1KiB,1GiB")
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("dgx-a100x2: allgather on 16 ranks, step-synchronous cost model")
    # 3.6 us to cross into a box (GPU, NIC, rail, NIC, GPU), 0.7 us for one more step, and 512 B over
    # 8 NICs (cut-latency: 4.303 us); the crossing-steps and crossing-phases LPs charge the bytes
    # inside the box too (the same figure: the first of them in the table binds)
    assert "size 1KiB: at least 4.304 us" in out and "(binding: crossing-phases)" in out
    assert re.search(r"\n    cut-latency +4\.303 ", out)
    assert re.search(r"\n    crossing-steps +4\.304 ", out)
    assert "size 1GiB:" in out and "(binding: time-expanded)" in out
    assert "  * crossing-phases" in out and "  * time-expanded" in out
    assert "346.51" in out  # ForestColl's 346.67, less 2 steps x 0.7 us at 1 GiB (the ingress row)


def test_json_output(tmp_path):
    path = tmp_path / "ring4.json"
    path.write_text(topology_to_json(gen.ring(4, bandwidth=10.0, latency=1.0)))
    result = invoke("bound", str(path), "-c", "broadcast", "--root", "2", "-s", "1MB", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["format"] == "synth-bounds" and doc["collective"] == {"name": "broadcast", "root": 2, "num_ranks": 4}
    (entry,) = doc["sizes"]
    # two pipelines of 9..10 steps (one each way round the ring): >= 9 x 1 us + 10/9 x size / 20 GB/s
    assert entry["size"] == 1_000_000 and entry["time_us"] == pytest.approx(9 + 10 / 9 * 1e6 / 20e3)
    assert entry["binding"] == "time-expanded"
    names = ["ingress", "egress", "flow", "root-pipeline", "exit-pipeline", "time-expanded", "latency"]
    assert [b["name"] for b in entry["bounds"]] == names
    assert [t["name"] for t in doc["terms"]] == names
    (steps,) = [t for t in doc["terms"] if t["name"] == "time-expanded"]
    assert steps["lines"][0] == {"latency_us": 2.0, "us_per_byte": pytest.approx(2 / 20e3), "note": steps["lines"][0]["note"]}


def test_event_model_and_lp_note():
    result = invoke("bound", "dgx1", "-c", "alltoall", "-s", "1GiB", "--model", "event", "--lp-max-variables", "0")
    assert result.exit_code == 0, result.output
    assert "event-driven cost model" in result.output and "LP skipped" in result.output
    assert "multicommodity-flow" not in result.output.split("note:")[1].split("\n", 1)[1]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["dgx1", "-c", "allgather", "-s", "1Q"], "--size"),
        (["dgx1", "-c", "allgather", "--root", "1", "-s", "1K"], "--root"),
        (["dgx1", "-c", "broadcast", "--root", "8", "-s", "1K"], "--root"),
        (["no-such-topology", "-c", "allgather", "-s", "1K"], "topology"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, field):
    proc = run("bound", *args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and field in proc.stderr and "Traceback" not in proc.stderr
