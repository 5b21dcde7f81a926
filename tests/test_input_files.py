"""Input files that used to end in a traceback, unbounded memory or a wait: each is one line, exit 2."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from synth.builtin import builtin_path
from synth.errors import InputError
from synth.fileio import read_input_bytes
from synth.schedule import load_schedule
from synth.topology import load_topology
from tests.cli_helpers import assert_bad_input, invoke


@pytest.fixture
def schedule_file(tmp_path):
    path = tmp_path / "s.json"
    result = invoke("synthesize", "dgx1", "-c", "allreduce", "-m", "ring", "-o", path)
    assert result.exit_code == 0, result.output
    return path


def _dgx1_text() -> str:
    return builtin_path("dgx1").read_text(encoding="utf-8")


def test_deeply_nested_topology_and_schedule(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert_bad_input(invoke("topo", "validate", deep), "deep.json", "nested too deeply")
    assert_bad_input(invoke("verify", deep, "-t", "dgx1"), "deep.json", "nested too deeply")


def test_nesting_that_parses_but_is_deeper_than_any_input(tmp_path, schedule_file):
    doc = json.loads(_dgx1_text())
    doc["extra"] = json.loads("[" * 500 + "]" * 500)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert_bad_input(invoke("topo", "validate", path), "t.json", "extra", "levels deep")
    doc = json.loads(schedule_file.read_text())
    doc["synthesizer"]["params"]["x"] = json.loads("[" * 500 + "]" * 500)
    schedule_file.write_text(json.dumps(doc))
    assert_bad_input(invoke("verify", schedule_file), "synthesizer.params.x", "levels deep")


def test_integer_longer_than_python_converts(tmp_path, schedule_file):
    path = tmp_path / "t.json"
    path.write_text(_dgx1_text().replace('"bandwidth": 50', '"bandwidth": ' + "9" * 5000, 1))
    assert_bad_input(invoke("topo", "validate", path), "t.json", "4300 digits")
    schedule_file.write_text(schedule_file.read_text().replace('"src": 0,', '"src": ' + "9" * 5000 + ",", 1))
    assert_bad_input(invoke("verify", schedule_file), "4300 digits")


def test_huge_integer_bandwidth(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(_dgx1_text().replace('"bandwidth": 50', '"bandwidth": 1' + "0" * 400, 1))
    assert_bad_input(invoke("topo", "validate", path), "t.json", "links[0].bandwidth")


def test_nan_and_infinity_are_not_json(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(_dgx1_text().replace('"latency": 0.7', '"latency": NaN', 1))
    assert_bad_input(invoke("topo", "validate", path), "NaN is not JSON")


@pytest.mark.parametrize("fast", [False, True])
def test_schedule_integers_beyond_int64(schedule_file, monkeypatch, fast):
    """Both schedule readers: the general JSON one and the fast one (files over 1 MiB)."""
    if fast:
        monkeypatch.setattr("synth.schedule.FAST_PATH_MIN_BYTES", 0)
    text = schedule_file.read_text()
    schedule_file.write_text(text.replace('"src": 0,', f'"src": {2**63},', 1))
    assert_bad_input(invoke("verify", schedule_file), "steps[0][0].src", str(2**63), "out of range")
    schedule_file.write_text(text.replace('"num_chunks": 8', f'"num_chunks": {2**63}'))
    assert_bad_input(invoke("verify", schedule_file), "collective.num_chunks", "at most")


def test_endless_and_special_files(tmp_path):
    assert_bad_input(invoke("topo", "validate", "/dev/zero"), "/dev/zero", "not a regular file")
    assert_bad_input(invoke("verify", "/dev/zero", "-t", "dgx1"), "/dev/zero", "not a regular file")
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    assert_bad_input(invoke("topo", "validate", fifo), "pipe.json", "not a regular file")
    assert_bad_input(invoke("verify", fifo, "-t", "dgx1"), "pipe.json", "not a regular file")
    assert_bad_input(invoke("topo", "validate", tmp_path), "is a directory")


def test_read_is_capped(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 1000)
    assert read_input_bytes(path, limit=1000) == b" " * 1000
    with pytest.raises(InputError, match="more than this reader takes"):
        read_input_bytes(path, limit=999)


def test_proc_files_are_read_with_the_cap():
    """/proc files say they are empty; the cap still holds while reading."""
    if not os.path.exists("/proc/self/status"):
        pytest.skip("no /proc here")
    with pytest.raises(InputError, match="longer than this reader takes"):
        read_input_bytes("/proc/self/status", limit=10)


def test_library_readers_refuse_the_same(tmp_path):
    with pytest.raises(InputError):
        load_topology("/dev/zero")
    with pytest.raises(InputError):
        load_schedule("/dev/zero")


def test_good_files_still_read(tmp_path, schedule_file):
    shutil.copy(builtin_path("dgx1"), tmp_path / "t.json")
    assert load_topology(tmp_path / "t.json").num_ranks == 8
    assert load_schedule(schedule_file).num_transfers == 112


@pytest.mark.parametrize("op", ["[]", "{}", "1", "null"])
def test_an_op_that_is_not_a_string(schedule_file, op):
    """Found by the fuzz test: "op": [] raised TypeError (unhashable) while explaining the error."""
    schedule_file.write_text(schedule_file.read_text().replace('"op": "reduce"', f'"op": {op}', 1))
    assert_bad_input(invoke("verify", schedule_file), "steps[0][0]")
