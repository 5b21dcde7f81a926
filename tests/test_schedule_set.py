"""Schedule sets (what the DDP hook picks from): written and read back, bad folders and index files
refused naming the file and field, ``synth synthesize --sizes``'s input checks; and ``import synth``
(the core package, its CLI and the torch backend's launcher) never imports torch. No torch needed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from synth import generators as gen
from synth.collective import Kind
from synth.errors import InputError
from synth.exec.schedule_set import ANY_SIZE, INDEX, ScheduleSet, SetEntry, load_schedule_set, save_schedule_set
from synth.registry import synthesize
from synth.schedule import same_transfers
from synth.topology import topology_to_json

from .cli_helpers import assert_bad_input, invoke


def _set(r: int = 4) -> ScheduleSet:
    topo = gen.ring(r)
    ring = synthesize(topo, Kind.ALLREDUCE, "ring")
    direct = synthesize(topo, Kind.ALLREDUCE, "direct")
    entries = (SetEntry(direct, 1, 4095, "small.json", (1024,)), SetEntry(ring, 4096, 1 << 20, "large.json", (1 << 20,)))
    return ScheduleSet(Kind.ALLREDUCE, r, topo.name, entries)


def test_a_set_is_written_and_read_back(tmp_path):
    made = _set()
    save_schedule_set(made, tmp_path / "set")
    back = load_schedule_set(tmp_path / "set")
    assert (back.kind, back.num_ranks, back.topology_name) == (Kind.ALLREDUCE, 4, made.topology_name)
    assert [(e.lo, e.hi, e.file, e.samples) for e in back.entries] == [(e.lo, e.hi, e.file, e.samples) for e in made.entries]
    assert same_transfers(back.choose(100), made.entries[0].schedule)
    assert same_transfers(back.choose(4096), made.entries[1].schedule)
    assert back.choose(0) is None and back.choose((1 << 20) + 1) is None
    again = tmp_path / "again"
    save_schedule_set(made, again)
    assert (again / INDEX).read_bytes() == (tmp_path / "set" / INDEX).read_bytes()  # same bytes each time


def test_a_schedule_file_is_a_set_serving_every_size(tmp_path):
    path = tmp_path / "ring.json"
    save_schedule_set(_set(), tmp_path / "set")
    path.write_bytes((tmp_path / "set" / "large.json").read_bytes())
    one = load_schedule_set(path)
    assert len(one.entries) == 1 and (one.lo, one.hi) == (0, ANY_SIZE) and one.choose(1 << 40) is not None


def test_a_folder_holding_other_files_is_refused(tmp_path):
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="already holds 1 other file"):
        save_schedule_set(_set(), folder)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.update(format="other"), "format"),
        (lambda d: d.update(version=9), "version"),
        (lambda d: d.update(entries=[]), "entries"),
        (lambda d: d["entries"][1].update(min_bytes=10), "entries[1].min_bytes"),
        (lambda d: d["entries"][0].update(max_bytes=-1), "entries[0].max_bytes"),
        (lambda d: d["entries"][0].update(file="../x.json"), "entries[0].file"),
    ],
)
def test_a_bad_index_names_the_field(tmp_path, change, field):
    folder = tmp_path / "set"
    save_schedule_set(_set(), folder)
    doc = json.loads((folder / INDEX).read_text())
    change(doc)
    (folder / INDEX).write_text(json.dumps(doc))
    with pytest.raises(InputError) as caught:
        load_schedule_set(folder)
    assert caught.value.field == field and str(folder / INDEX) in str(caught.value)


def test_synthesize_sizes_input_checks(tmp_path):
    topo = tmp_path / "ring4.json"
    topo.write_text(topology_to_json(gen.ring(4)))
    base = ["synthesize", str(topo), "-c", "allreduce"]
    assert_bad_input(invoke(*base, "-m", "ring", "--sizes", "1K", "-o", str(tmp_path / "s")), "--sizes", "-m auto")
    assert_bad_input(invoke(*base, "-m", "auto", "--sizes", "1K"), "--sizes", "-o FOLDER")
    assert_bad_input(invoke(*base, "-m", "auto", "--sizes", "lots", "-o", str(tmp_path / "s")), "--sizes")
    assert_bad_input(invoke(*base, "-m", "auto", "--sizes", "1K", "--seed", "3", "-o", str(tmp_path / "s")), "--sizes")


def test_import_synth_never_imports_torch():
    """The core package, the CLI, the schedule sets and the torch backend's launcher (what ``synth
    run --backend torch`` imports in the parent process) leave torch alone: it is an extra."""
    code = (
        "import sys, synth, synth.cli, synth.exec.schedule_set, synth.schedule_set_build, synth.exec.backends;"
        "import synth.exec.torch_backend.launch;"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
