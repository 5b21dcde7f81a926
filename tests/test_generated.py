"""generated/ holds every classic schedule for every built-in topology, reproducible byte for byte."""

from pathlib import Path

from synth.builtin import get_topology
from synth.generated import regenerate
from synth.schedule import load_schedule
from synth.verify import verify

from .conftest import REPO


def test_generated_is_up_to_date_byte_for_byte():
    assert regenerate(REPO / "generated", check=True) == []


def test_generated_files_verify():
    index = (REPO / "generated" / "INDEX.md").read_text()
    files = sorted((REPO / "generated").rglob("*.json"))
    assert len(files) > 200
    for path in files[::7]:  # a spread sample; the check above covers the bytes of all of them
        schedule = load_schedule(path)
        assert verify(schedule, get_topology(schedule.topology_name)).ok, path
        assert path.relative_to(REPO / "generated").as_posix() in index


def test_regenerate_into_empty_folder(tmp_path: Path):
    changed = regenerate(tmp_path)
    assert "INDEX.md" in changed and (tmp_path / "dgx1" / "allreduce-ring.json").is_file()
    assert regenerate(tmp_path, check=True) == []
