"""Outputs never harm what a user has: only regular files or new paths are written, a replaced
file keeps its mode and the message says "replaced", system folders and devices are refused."""

from __future__ import annotations

import os
import stat

import pytest

from synth.errors import InputError
from synth.fileio import prepare_output_dir, write_text_atomic
from synth.generated import regenerate
from tests.cli_helpers import assert_bad_input, invoke

SYNTH = ("synthesize", "dgx1", "-c", "allgather", "-m", "ring", "-o")


def test_device_fifo_and_system_paths_are_refused(tmp_path):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    assert_bad_input(invoke(*SYNTH, fifo), "out.json", "not a regular file")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the FIFO
    assert_bad_input(invoke(*SYNTH, "/dev/null"), "/dev/null", "/dev")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    link = tmp_path / "null.json"
    link.symlink_to("/dev/null")
    assert_bad_input(invoke(*SYNTH, link), "null.json")
    for path in ("/proc/self/comm", "/sys/kernel/out.json", "/proc/out.json"):
        assert_bad_input(invoke(*SYNTH, path), path)
    assert_bad_input(invoke(*SYNTH, tmp_path), "is a directory")
    assert_bad_input(invoke("topo", "gen", "ring", "-o", "/dev/null"), "/dev/null")


def test_replacing_keeps_the_mode_and_says_so(tmp_path):
    out = tmp_path / "s.json"
    first = invoke(*SYNTH, out)
    assert first.exit_code == 0 and first.stdout.startswith(f"wrote {out}")
    os.chmod(out, 0o600)
    again = invoke(*SYNTH, out)
    assert again.exit_code == 0 and again.stdout.startswith(f"replaced {out}")
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    gen = invoke("topo", "gen", "ring", "-o", tmp_path / "t.json")
    assert gen.stderr.startswith("wrote ")
    gen = invoke("topo", "gen", "ring", "-o", tmp_path / "t.json")
    assert gen.stderr.startswith("replaced ")


def test_library_writer_refuses_and_reports(tmp_path):
    with pytest.raises(InputError, match="not a regular file"):
        os.mkfifo(tmp_path / "p")
        write_text_atomic(tmp_path / "p", "x")
    assert write_text_atomic(tmp_path / "a", "x").verb == "wrote"
    assert write_text_atomic(tmp_path / "a", "y").verb == "replaced"
    (tmp_path / "b").write_text("keep")
    os.link(tmp_path / "b", tmp_path / "c")
    with pytest.raises(InputError, match="also an input"):
        write_text_atomic(tmp_path / "c", "x", protect=[tmp_path / "b"])  # the same file by another name
    assert (tmp_path / "b").read_text() == "keep"


def test_output_folders(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="not a folder"):
        prepare_output_dir(tmp_path / "file")
    with pytest.raises(InputError, match="/proc"):
        prepare_output_dir("/proc/self/x")
    assert (prepare_output_dir(tmp_path / "new" / "sub")).exists()


def test_regenerate_into_a_folder_of_ones_own_removes_nothing(tmp_path, monkeypatch):
    """`synth regenerate --out DIR` used to delete every *.json under DIR that it does not produce."""
    mine = tmp_path / "mine"
    (mine / "dgx1").mkdir(parents=True)
    (mine / "dgx1" / "notes.json").write_text("{}")
    (mine / "other.json").write_text("{}")
    monkeypatch.setattr("synth.generated.BUILTIN_NAMES", ("dgx1",))
    from synth import generated

    real_entries = generated.entries
    monkeypatch.setattr(generated, "entries", lambda: real_entries(topologies=("dgx1",), methods=("ring",)))
    regenerate(mine)
    assert (mine / "dgx1" / "notes.json").exists() and (mine / "other.json").exists()
    # once the folder is ours (it has our INDEX.md), stale schedules beside ours are removed
    (mine / "dgx1" / "notes.json").unlink()
    (mine / "dgx1" / "stale.json").write_text("{}")
    changed = regenerate(mine)
    assert "dgx1/stale.json" in changed and not (mine / "dgx1" / "stale.json").exists()
    assert (mine / "other.json").exists()
