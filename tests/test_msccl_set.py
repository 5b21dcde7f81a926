"""``synth export msccl-set``: a folder of MSCCL algorithms covering a range of call sizes, auto's
choice in each part, with contiguous non-overlapping minBytes..maxBytes and an index the runtime
does not read."""

from __future__ import annotations

from itertools import pairwise

import pytest
from click.testing import CliRunner

from synth import generators as gen
from synth.builtin import get_topology
from synth.cli import main
from synth.collective import Kind
from synth.errors import InputError
from synth.interop import msccl_set
from synth.interop.equivalence import compare
from synth.interop.msccl_import import import_msccl
from synth.interop.msccl_set import INDEX_PATH, build_set, write_set
from synth.interop.msccl_xml import parse_msccl
from synth.registry import synthesize

MIB = 1 << 20


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


# ----------------------------------------------------------------------------------- the set
@pytest.fixture(scope="module")
def dgx1_set():
    """allreduce on the DGX-1 over 1 KiB … 1 GiB; auto with the baselines only (budget 0) is fast
    and still changes its choice twice over that range."""
    return build_set(get_topology("dgx1"), Kind.ALLREDUCE, [1 << p for p in range(10, 31)], budget=0)


def test_the_set_covers_the_range_with_contiguous_non_overlapping_ranges(dgx1_set):
    entries = dgx1_set.entries
    for mode in (True, False):
        ranges = [(e.min_bytes, e.max_bytes) for e in entries if e.inplace is mode]
        assert ranges[0][0] == 1024 and ranges[-1][1] == 1 << 30
        assert all(hi + 1 == nlo for (_, hi), (nlo, _) in pairwise(ranges))
        assert len(ranges) >= 2
    # each range's schedule is auto's choice at every sample size inside it
    for e in entries:
        assert all(e.min_bytes <= s <= e.max_bytes for s in e.samples)
        assert e.exported.algo.inplace is e.inplace and e.exported.algo.outofplace is not e.inplace
    # neighbouring ranges hold different schedules (same ones are merged)
    chosen = [e.schedule for e in entries if e.inplace]
    assert all(a.num_transfers != b.num_transfers or a.num_steps != b.num_steps for a, b in pairwise(chosen))


def test_every_size_is_answered_by_exactly_one_file_as_the_runtime_selects(dgx1_set, tmp_path):
    folder = tmp_path / "algos"
    write_set(dgx1_set, folder)
    metas = []
    for path in sorted(folder.glob("*.xml")):
        algo, warnings = parse_msccl(path)
        assert warnings == []
        metas.append(algo)
    assert len(metas) == len(dgx1_set.entries)
    for size in (1024, 1500, 11585, 11586, 370727, 370728, MIB, (1 << 30) - 8, 1 << 30):
        for inplace in (True, False):
            fits = [a for a in metas if a.min_bytes <= size <= a.max_bytes and (a.inplace if inplace else a.outofplace)]
            assert len(fits) == 1, (size, inplace, [a.name for a in fits])
    for size in (1023, (1 << 30) + 1):
        assert not [a for a in metas if a.min_bytes <= size <= a.max_bytes]


def test_each_file_imports_back_as_the_chosen_schedule(dgx1_set, tmp_path):
    folder = tmp_path / "algos"
    write_set(dgx1_set, folder)
    for e in dgx1_set.entries:
        algo, _ = parse_msccl(folder / e.filename)
        back = import_msccl(algo, get_topology("dgx1")).schedule
        assert compare(e.schedule, back).equivalent


def test_the_index_lives_where_the_runtime_does_not_read_it(dgx1_set, tmp_path):
    folder = tmp_path / "algos"
    written = write_set(dgx1_set, folder, command="synth export msccl-set dgx1 -c allreduce")
    # the runtime parses every regular file of its folder as an algorithm: only XML there
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == sorted(e.filename for e in dgx1_set.entries)
    index = (folder / INDEX_PATH).read_text()
    assert folder / INDEX_PATH in written
    assert "synth export msccl-set dgx1 -c allreduce" in index
    for e in dgx1_set.entries:
        assert f"| {e.filename} | {e.min_bytes} | {e.max_bytes} |" in index
    # and every file says what it covers, in a comment before <algo>
    first = dgx1_set.entries[0]
    assert (
        (folder / first.filename)
        .read_text()
        .startswith(f"<!-- synth: allreduce on dgx1, in place, for calls of 1024 … {first.max_bytes} bytes")
    )


def test_a_folder_with_other_files_is_refused_and_left_alone(dgx1_set, tmp_path):
    folder = tmp_path / "algos"
    folder.mkdir()
    mine = folder / "mine.xml"
    mine.write_text("<algo/>")
    with pytest.raises(InputError, match=r"already holds 1 other file\(s\) \(mine.xml\); the runtime loads every file"):
        write_set(dgx1_set, folder)
    assert [p.name for p in folder.iterdir()] == ["mine.xml"] and mine.read_text() == "<algo/>"
    # the set's own files (an earlier run) are replaced
    empty = tmp_path / "again"
    write_set(dgx1_set, empty)
    write_set(dgx1_set, empty)
    # a file where the folder should be
    with pytest.raises(InputError, match="is a file"):
        write_set(dgx1_set, mine)


def test_auto_is_asked_in_one_place(monkeypatch):
    asked = []

    def fake(topology, kind, sizes, **kwargs):
        asked.append(list(sizes))
        ring = synthesize(topology, kind, "ring")
        return [ring for _ in sizes]

    monkeypatch.setattr(msccl_set, "choose_per_size", fake)
    result = build_set(gen.nvswitch(4), Kind.ALLGATHER, [MIB, 1024, MIB], modes=(False,))
    assert asked == [[1024, MIB]]
    assert [(e.min_bytes, e.max_bytes) for e in result.entries] == [(1024, MIB)]


def test_the_set_command(tmp_path):
    topo = tmp_path / "nv4.json"
    assert invoke("topo", "gen", "nvswitch", "--gpus", "4", "-o", topo).exit_code == 0
    out = tmp_path / "set"
    r = invoke(
        "export", "msccl-set", topo, "-c", "allgather", "--sizes", "1KiB..1GiB", "--budget", "0", "--outofplace", "-o", out
    )
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == f"wrote {out / INDEX_PATH}: {len(lines) - 1} file(s) covering 1KiB … 1GiB"
    files = sorted(out.glob("*.xml"))
    assert len(files) == len(lines) - 1 and all("outofplace" in p.name for p in files)
    assert "--budget 0 --outofplace" in (out / INDEX_PATH).read_text()
    r = invoke("export", "msccl-set", topo, "-c", "allgather", "--sizes", "1KiB..1GiB", "--budget", "0", "-o", out)
    assert r.exit_code == 0, r.stderr  # same names (out of place) replaced, in-place ones added
    for args, message in (
        (["--sizes", "lots"], '--sizes = "lots"'),
        (["--root", "9"], "--root = 9: not a rank"),
        (["--budget", "-1"], "--budget = -1.0: must be at least 0"),
        (["--channels", "0"], "--channels = 0: must be 1 … 32"),
    ):
        r = invoke("export", "msccl-set", topo, "-c", "allgather", *args, "-o", tmp_path / "other")
        assert r.exit_code == 2 and message in r.stderr and r.stderr.count("\n") == 1, r.stderr
