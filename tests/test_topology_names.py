"""Names and paths: a file that shadows a built-in, ``builtin:NAME``, names from files never used
as paths, and the topology's source recorded in schedules so later commands find it."""

from __future__ import annotations

import json
import shutil

import pytest

from synth.builtin import builtin_path
from synth.exec.api import resolve_topology
from synth.schedule import load_schedule
from tests.cli_helpers import assert_bad_input, invoke


def test_a_file_named_like_a_builtin_is_used_with_a_note(tmp_path):
    shutil.copy(builtin_path("dgx2"), tmp_path / "dgx1")
    result = invoke("topo", "show", "dgx1", cwd=tmp_path)
    assert result.exit_code == 0 and result.stdout.startswith("dgx2:")
    assert "not the built-in dgx1" in result.stderr and "builtin:dgx1" in result.stderr
    forced = invoke("topo", "show", "builtin:dgx1", cwd=tmp_path)
    assert forced.exit_code == 0 and forced.stdout.startswith("dgx1:") and forced.stderr == ""
    assert invoke("topo", "show", "dgx1").stderr == ""  # no file: the built-in, silently


def test_builtin_prefix_with_an_unknown_name():
    assert_bad_input(invoke("topo", "show", "builtin:nope"), "builtin:nope", "built-ins: dgx1")
    assert_bad_input(invoke("topo", "show", "builtin:../topologies/dgx1"), "no such built-in")


@pytest.fixture
def schedule_file(tmp_path):
    path = tmp_path / "s.json"
    assert invoke("synthesize", "dgx1", "-c", "allgather", "-m", "ring", "-o", path).exit_code == 0
    return path


@pytest.mark.parametrize("name", ["../topologies/dgx1", "../../topologies/dgx1", "/etc/passwd", "dgx1/../dgx1"])
def test_a_schedule_name_is_never_a_path(schedule_file, name):
    doc = json.loads(schedule_file.read_text())
    doc["topology"] = {"name": name, "sha256": doc["topology"]["sha256"]}
    schedule_file.write_text(json.dumps(doc))
    assert_bad_input(invoke("verify", schedule_file), "topology.name", "not a built-in")
    from synth.errors import InputError

    with pytest.raises(InputError, match="not a built-in"):
        resolve_topology(load_schedule(schedule_file))


def test_builtin_schedules_record_their_source(schedule_file):
    assert json.loads(schedule_file.read_text())["topology"]["source"] == "builtin:dgx1"
    assert load_schedule(schedule_file).topology_source == "builtin:dgx1"


def test_a_schedule_made_for_a_file_finds_it_again(tmp_path):
    (tmp_path / "topos").mkdir()
    (tmp_path / "out").mkdir()
    shutil.copy(builtin_path("dgx1"), tmp_path / "topos" / "mine.json")
    made = invoke("synthesize", "topos/mine.json", "-c", "allreduce", "-m", "ring", "-o", "out/s.json", cwd=tmp_path)
    assert made.exit_code == 0, made.output
    doc = json.loads((tmp_path / "out" / "s.json").read_text())
    assert doc["topology"]["source"] == "../topos/mine.json"  # relative to the schedule's folder
    for cwd, path in ((tmp_path, "out/s.json"), (tmp_path / "out", "s.json"), (tmp_path / "topos", "../out/s.json")):
        for args in (("verify", path), ("simulate", path, "--size", "1M")):
            result = invoke(*args, cwd=cwd)
            assert result.exit_code == 0, (cwd, args, result.output)
            assert "mine.json" in result.stderr and "recorded in" in result.stderr
    # moved together, they still find each other
    shutil.move(tmp_path / "topos", tmp_path / "elsewhere-topos")
    shutil.move(tmp_path / "out", tmp_path / "elsewhere-out")
    assert_bad_input(invoke("verify", "elsewhere-out/s.json", cwd=tmp_path), "topology.source", "pass --topology")
    (tmp_path / "bundle").mkdir()
    shutil.move(tmp_path / "elsewhere-topos", tmp_path / "bundle" / "topos")
    shutil.move(tmp_path / "elsewhere-out", tmp_path / "bundle" / "out")
    assert invoke("verify", "bundle/out/s.json", cwd=tmp_path).exit_code == 0
    # the hash is still checked: an edited link is refused in one line
    topo = tmp_path / "bundle" / "topos" / "mine.json"
    topo.write_text(topo.read_text().replace('"bandwidth": 50', '"bandwidth": 51', 1))
    assert_bad_input(invoke("verify", "bundle/out/s.json", cwd=tmp_path), "topology.sha256")


def test_the_library_api_finds_the_recorded_topology(tmp_path):
    shutil.copy(builtin_path("dgx1"), tmp_path / "mine.json")
    assert invoke("synthesize", tmp_path / "mine.json", "-c", "allgather", "-m", "ring", "-o", tmp_path / "s.json").exit_code == 0
    assert resolve_topology(load_schedule(tmp_path / "s.json")).num_ranks == 8


def test_a_recorded_source_that_is_not_a_string(schedule_file):
    doc = json.loads(schedule_file.read_text())
    doc["topology"]["source"] = 7
    schedule_file.write_text(json.dumps(doc))
    assert_bad_input(invoke("verify", schedule_file), "topology.source")
