"""The columnar schedule encoding (``.npz``) as docs/formats.md states the public contract: read
as an independent tool would write it, written so that plain numpy reads it, round trips with
JSON byte for byte, and every malformed or hostile archive refused in one line."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.collective import Collective, Kind
from synth.errors import InputError
from synth.schedule import (
    Schedule,
    load_schedule,
    save_schedule,
    schedule_from_steps,
    schedule_header,
    schedule_to_json,
)
from synth.schedule_npz import npy_header, write_schedule_npz

from .conftest import REPO

GENERATED = REPO / "generated"
#: Schedules with routes through switches (fat-tree), reductions, a rooted collective, alltoall.
SAMPLES = [
    GENERATED / "fattree-4rack" / "allreduce-hierarchical.json",
    GENERATED / "dgx1" / "allreduce-ring.json",
    GENERATED / "dgx-a100x2" / "reduce-binomial.json",
    GENERATED / "dgx-a100" / "alltoall-direct.json",
]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synth", *args], capture_output=True, text=True, cwd=REPO)


def npz_bytes(schedule: Schedule) -> bytes:
    out = io.BytesIO()
    write_schedule_npz(schedule, schedule_header(schedule), out)
    return out.getvalue()


# ------------------------------------------------------------------- an independent tool's file
def independent_npz(
    path: Path,
    schedule: Schedule,
    *,
    compression: int = zipfile.ZIP_STORED,
    dtype: str = "<i4",
    version: tuple[int, int] = (1, 0),
    extra: dict[str, bytes] | None = None,
    routes_reversed: bool = False,
    override: dict[str, np.ndarray] | None = None,
    header_edit=None,
) -> Path:
    """Write ``schedule`` as docs/formats.md describes, with nothing but zipfile and numpy.lib.format
    (not synth's writer): any member order, numpy's own .npy headers, routes in any order."""
    doc = json.loads(schedule_to_json(schedule))
    steps = doc.pop("steps")
    routes = [list(r) for r in schedule.routes]
    route = schedule.route.copy()
    if routes_reversed and len(routes) > 2:
        order = [0, *range(len(routes) - 1, 0, -1)]  # entry 0 stays []
        new_id = np.empty(len(routes), dtype=np.int64)
        new_id[order] = np.arange(len(routes))
        routes = [routes[i] for i in order]
        route = new_id[route]
    doc.update(num_steps=len(steps), num_transfers=schedule.num_transfers, routes=routes)
    if header_edit is not None:
        header_edit(doc)
    columns = {
        "src": schedule.src.astype(dtype),
        "dst": schedule.dst.astype(dtype),
        "chunk": schedule.chunk.astype(dtype),
        "op": schedule.op.astype(np.uint8),
        "route": route.astype(dtype),
        "step_starts": schedule.step_starts.astype("<i8"),
    }
    columns.update(override or {})
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name in ("route", "op", "chunk", "dst", "src", "step_starts"):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, columns[name], version=version, allow_pickle=name == "pickled")
            archive.writestr(f"{name}.npy", buffer.getvalue())
        archive.writestr("header.json", json.dumps(doc, indent=3))
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return path


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED], ids=["stored", "deflated"])
@pytest.mark.parametrize("dtype", ["<i4", "<i8"])
@pytest.mark.parametrize("version", [(1, 0), (2, 0)], ids=["npy1.0", "npy2.0"])
def test_independent_file_reads_as_the_json(tmp_path, sample, compression, dtype, version):
    expected = load_schedule(sample)
    path = independent_npz(
        tmp_path / "s.npz",
        expected,
        compression=compression,
        dtype=dtype,
        version=version,
        extra={"README.txt": b"made by another tool", "notes/extra.npy": b"\x93NUMPY junk"},
        routes_reversed=True,
    )
    got = load_schedule(path)
    assert got == expected
    assert schedule_to_json(got) == sample.read_text()


def test_our_file_is_plain_numpy(tmp_path):
    schedule = load_schedule(SAMPLES[0])
    path = save_schedule(schedule, tmp_path / "s.npz")
    with np.load(path, allow_pickle=False) as z:
        assert z.files == ["header.json", "step_starts", "src", "dst", "chunk", "op", "route"]
        header = json.loads(z["header.json"])
        for name in ("step_starts", "src", "dst", "chunk", "op", "route"):
            assert z[name].ndim == 1
        assert z["step_starts"].dtype == np.int64 and z["op"].dtype == np.uint8
        assert z["src"].dtype == z["dst"].dtype == z["chunk"].dtype == z["route"].dtype == np.int32
        assert np.array_equal(z["step_starts"], schedule.step_starts)
        for name in ("src", "dst", "chunk", "op"):
            assert np.array_equal(z[name], getattr(schedule, name)), name
        via = [tuple(header["routes"][i]) for i in z["route"]]
        assert via == [schedule.routes[i] for i in schedule.route]
    doc = json.loads(schedule_to_json(schedule))
    del doc["steps"]
    assert header == {**doc, "num_steps": schedule.num_steps, "num_transfers": schedule.num_transfers, "routes": header["routes"]}
    assert header["routes"][0] == [] and header["routes"][1:] == sorted(header["routes"][1:])
    for info in zipfile.ZipFile(path).infolist():
        assert info.compress_type == zipfile.ZIP_STORED and info.date_time == (1980, 1, 1, 0, 0, 0)


def test_int64_column_when_values_need_it(tmp_path):
    c = Collective(Kind.ALLGATHER, 2, 1)
    s = schedule_from_steps(c, [[(0, 1, 0)], [(1, 0, 2**40)]])
    path = save_schedule(s, tmp_path / "s.npz")
    with np.load(path) as z:
        assert z["chunk"].dtype == np.int64 and z["src"].dtype == np.int32
    assert load_schedule(path) == s


@pytest.mark.parametrize("sample", SAMPLES[::2], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_convert_round_trips_byte_for_byte(tmp_path, sample):
    a_npz, b_json, c_npz = tmp_path / "a.npz", tmp_path / "b.json", tmp_path / "c.npz"
    for args in ((str(sample), str(a_npz)), (str(a_npz), str(b_json)), (str(b_json), str(c_npz))):
        result = run("convert", *args)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"wrote {args[1]}")
    assert b_json.read_bytes() == sample.read_bytes()
    assert c_npz.read_bytes() == a_npz.read_bytes()


def test_every_reader_takes_npz(tmp_path):
    path = tmp_path / "ring.npz"
    assert run("convert", str(GENERATED / "dgx1" / "allreduce-ring.json"), str(path)).returncode == 0
    verify = run("verify", str(path))
    assert verify.returncode == 0 and verify.stdout.startswith("OK allreduce on 8 ranks")
    simulate = run("simulate", str(path), "--size", "1MiB", "--json")
    assert simulate.returncode == 0 and json.loads(simulate.stdout)["transfers"] == 112
    export = run("export", "msccl", str(path), "-o", str(tmp_path / "ring.xml"))
    assert export.returncode == 0, export.stderr
    ours = run("export", "msccl", str(GENERATED / "dgx1" / "allreduce-ring.json"), "-o", str(tmp_path / "ref.xml"))
    assert ours.returncode == 0 and (tmp_path / "ring.xml").read_bytes() == (tmp_path / "ref.xml").read_bytes()
    executed = run("run", str(path), "--size", "1K", "-n", "1", "-w", "0")
    assert executed.returncode == 0, executed.stderr
    assert "allreduce" in executed.stdout
    plot = run("plot", "schedule", str(path), "--size", "1MiB", "-m", "sync", "-o", str(tmp_path / "ring.svg"))
    assert plot.returncode == 0 and (tmp_path / "ring.svg").read_bytes().lstrip().startswith(b"<")


def test_synthesize_writes_npz_by_extension(tmp_path):
    out = tmp_path / "ag.npz"
    result = run("synthesize", "dgx1", "-c", "allgather", "-m", "ring", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:4] == b"PK\x03\x04"
    assert schedule_to_json(load_schedule(out)) == (GENERATED / "dgx1" / "allgather-ring.json").read_text()


def test_content_decides_not_the_extension(tmp_path):
    """Choice (docs/formats.md): a zip named .json is read as .npz, JSON named .npz as JSON; the
    extension only chooses the encoding written."""
    schedule = load_schedule(SAMPLES[1])
    zipped = tmp_path / "really-npz.json"
    zipped.write_bytes(npz_bytes(schedule))
    text = tmp_path / "really-json.npz"
    text.write_text(schedule_to_json(schedule))
    assert load_schedule(zipped) == schedule == load_schedule(text)


def test_writer_is_deterministic_and_canonical():
    """Route ids, unused routes and the order routes were met in do not change the bytes."""
    c = Collective(Kind.ALLGATHER, 3, 1)
    steps = [[(0, 1, 0, "copy", ("b",)), (1, 2, 1, "copy", ("a", "c"))], [(2, 0, 2), (0, 2, 0, "copy", ("b",))]]
    first = schedule_from_steps(c, steps)
    again = Schedule(
        collective=first.collective,
        topology_name=first.topology_name,
        topology_sha256=first.topology_sha256,
        method=first.method,
        params=first.params,
        step_starts=first.step_starts,
        src=first.src,
        dst=first.dst,
        chunk=first.chunk,
        op=first.op,
        route=np.array([3, 1, 0, 3]),
        routes=((), ("a", "c"), ("unused",), ("b",)),
    )
    assert again == first
    assert npz_bytes(again) == npz_bytes(first)
    header = json.loads(zipfile.ZipFile(io.BytesIO(npz_bytes(again))).read("header.json"))
    assert header["routes"] == [[], ["a", "c"], ["b"]]


# ------------------------------------------------------------------------- hostile archives
BASE = SAMPLES[1]


def _refused(path: Path, *fragments: str) -> str:
    with pytest.raises(InputError) as err:
        load_schedule(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(path)), text
    for fragment in fragments:
        assert fragment in text, text
    return text


def _bad(tmp_path, **kwargs) -> Path:
    return independent_npz(tmp_path / "bad.npz", load_schedule(BASE), **kwargs)


def test_big_endian_column_refused(tmp_path):
    s = load_schedule(BASE)
    _refused(_bad(tmp_path, override={"src": s.src.astype(">i4")}), "src.npy", "big-endian")


def test_pickled_object_column_refused(tmp_path):
    s = load_schedule(BASE)
    path = tmp_path / "bad.npz"
    independent_npz(path, s)
    objects = np.array([object()] * s.num_transfers, dtype=object)
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, objects, allow_pickle=True)
    _replace_member(path, "dst.npy", buffer.getvalue())
    _refused(path, "dst.npy", "pickle")


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ({"src": np.zeros(112, dtype=np.float64)}, ("src.npy", "<f8")),
        ({"src": np.zeros(112, dtype=np.uint32)}, ("src.npy", "<u4")),
        ({"op": np.zeros(112, dtype=np.int64)}, ("op.npy", "<i8")),
        ({"step_starts": np.zeros(15, dtype=np.int32)}, ("step_starts.npy", "<i4")),
        ({"chunk": np.zeros(111, dtype=np.int32)}, ("chunk.npy", "111 values", "112")),
        ({"route": np.zeros((56, 2), dtype=np.int32)}, ("route.npy", "one dimension")),
        ({"src": np.asfortranarray(np.zeros((56, 2), dtype=np.int32))}, ("src.npy", "Fortran")),
        ({"op": np.full(112, 2, dtype=np.uint8)}, ("op.npy[0] = 2", "copy")),
        ({"route": np.full(112, 1, dtype=np.int32)}, ("route.npy[0] = 1", "routes")),
        ({"route": np.full(112, -1, dtype=np.int32)}, ("route.npy[0] = -1",)),
        ({"step_starts": np.array([0, 8, 4, *range(24, 113, 8)], dtype=np.int64)}, ("step_starts.npy[2] = 4", "decreases")),
        ({"step_starts": np.array([1, *range(8, 113, 8)], dtype=np.int64)}, ("step_starts.npy[0] = 1",)),
        ({"step_starts": np.array([*range(0, 112, 8), 111], dtype=np.int64)}, ("step_starts.npy[14] = 111",)),
    ],
)
def test_malformed_columns_refused(tmp_path, override, fragments):
    _refused(_bad(tmp_path, override=override), *fragments)


@pytest.mark.parametrize(
    ("edit", "fragments"),
    [
        (lambda d: d.update(num_transfers=113), ("112",)),
        (lambda d: d.update(num_transfers=True), ("num_transfers", "integer")),
        (lambda d: d.update(num_steps=-1), ("num_steps",)),
        (lambda d: d.update(num_transfers=2**40), ("num_transfers",)),
        (lambda d: d.update(routes=[["sw"]]), ("routes[0]",)),
        (lambda d: d.update(routes=[[], [3]]), ("routes[1]",)),
        (lambda d: d.pop("routes"), ("routes",)),
        (lambda d: d.update(steps=[]), ("steps",)),
        (lambda d: d.update(format="other"), ("format",)),
        (lambda d: d["collective"].update(name="allsum"), ("collective.name",)),
    ],
)
def test_malformed_header_refused(tmp_path, edit, fragments):
    _refused(_bad(tmp_path, header_edit=edit), *fragments)


def test_memory_asked_for_by_the_header_refused(tmp_path):
    """A header that claims two billion transfers is refused before any column is read (by the
    memory it would need, or by the member sizes its counts imply)."""
    text = _refused(_bad(tmp_path, header_edit=lambda d: d.update(num_transfers=2**31 - 1)))
    assert "would need" in text or "values" in text


def _replace_member(path: Path, name: str, data: bytes) -> None:
    with zipfile.ZipFile(path) as old:
        members = [(info, old.read(info)) for info in old.infolist()]
    with zipfile.ZipFile(path, "w") as new:
        for info, content in members:
            new.writestr(info, data if info.filename == name else content)


def test_zip_bomb_refused_by_declared_sizes(tmp_path):
    """A deflated member that expands to far more than the header's counts allow is refused from
    its declared size, before it is decompressed; one that lies about its size ends at the size it
    declared (zipfile never yields more) and fails its length check."""
    s = load_schedule(BASE)
    path = tmp_path / "bomb.npz"
    independent_npz(path, s, compression=zipfile.ZIP_DEFLATED)
    bomb = npy_header(np.dtype("<i4"), 112) + bytes(2**27)  # 128 MiB of zeros, ~130 kB deflated
    with zipfile.ZipFile(path) as old:
        members = [(info, old.read(info)) for info in old.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as new:
        for info, content in members:
            new.writestr(info.filename, bomb if info.filename == "src.npy" else content)
    assert path.stat().st_size < 2**20
    _refused(path, "src.npy", "declares")
    # the same bomb declaring a small size: zipfile stops at the declared size, the CRC fails
    raw = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = raw.find(signature + b"", 0)
        while at >= 0:
            name_len = int.from_bytes(raw[at + (26 if signature == b"PK\x03\x04" else 28) :][:2], "little")
            name_at = at + (30 if signature == b"PK\x03\x04" else 46)
            if raw[name_at : name_at + name_len] == b"src.npy":
                raw[at + offset : at + offset + 4] = (len(npy_header(np.dtype("<i4"), 112)) + 448).to_bytes(4, "little")
            at = raw.find(signature, at + 4)
    path.write_bytes(bytes(raw))
    _refused(path, "src.npy")


@pytest.mark.parametrize("cut", [0, 3, 100, 1000, -200, -22, -1])
def test_truncated_file_refused(tmp_path, cut):
    data = npz_bytes(load_schedule(BASE))
    path = tmp_path / "cut.npz"
    path.write_bytes(data[:cut] if cut else b"")
    with pytest.raises(InputError) as err:
        load_schedule(path)
    assert "\n" not in str(err.value)


def test_missing_and_duplicate_members_refused(tmp_path):
    data = npz_bytes(load_schedule(BASE))
    path = tmp_path / "s.npz"
    with zipfile.ZipFile(io.BytesIO(data)) as old, zipfile.ZipFile(path, "w") as new:
        for info in old.infolist():
            if info.filename != "op.npy":
                new.writestr(info, old.read(info))
    _refused(path, "op.npy")
    with zipfile.ZipFile(io.BytesIO(data)) as old, zipfile.ZipFile(path, "w") as new:
        for info in old.infolist():
            new.writestr(info, old.read(info))
        with pytest.warns(UserWarning):
            new.writestr("src.npy", old.read("src.npy"))
    _refused(path, "src.npy", "twice")


def test_other_compression_and_npy_versions_refused(tmp_path):
    s = load_schedule(BASE)
    _refused(_bad(tmp_path, compression=zipfile.ZIP_BZIP2), "compression method 12")
    path = independent_npz(tmp_path / "v3.npz", s, version=(3, 0))
    _refused(path, ".npy format 3.0")


def test_cli_refuses_in_one_line_with_exit_2(tmp_path):
    path = tmp_path / "cut.npz"
    path.write_bytes(npz_bytes(load_schedule(BASE))[:-300])
    for command in (["verify", str(path)], ["simulate", str(path), "--size", "1MiB"], ["convert", str(path), "x.json"]):
        result = run(*command)
        assert result.returncode == 2, (command, result.stderr)
        assert result.stderr.startswith(f"synth: error: {path}") and result.stderr.count("\n") == 1, result.stderr
        assert "Traceback" not in result.stderr


# ----------------------------------------------------------------------------------- properties
@st.composite
def schedules(draw) -> Schedule:
    """Random well-formed schedules (valid or not: structure is what the encodings carry), with
    routes through switches, reduces, empty steps and params."""
    kind = draw(st.sampled_from([Kind.ALLGATHER, Kind.ALLREDUCE, Kind.BROADCAST]))
    ranks = draw(st.integers(1, 6))
    root = draw(st.integers(0, ranks - 1)) if kind == Kind.BROADCAST else None
    collective = Collective(kind, ranks, draw(st.integers(1, 3)), root)
    names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=6)
    via = st.lists(names, max_size=3).map(tuple)
    transfer = st.tuples(
        st.integers(-2, 2**31 + 5), st.integers(0, 9), st.integers(0, 2**33), st.sampled_from(["copy", "reduce"]), via
    )
    steps = draw(st.lists(st.lists(transfer, max_size=5), max_size=5))
    params = draw(
        st.dictionaries(names, st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False), names), max_size=3)
    )
    method = draw(names)
    return schedule_from_steps(collective, steps, method=method, params=params, normalize=draw(st.booleans()))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schedule=schedules())
def test_round_trips_are_byte_identical(tmp_path, schedule):
    json_path, npz_path, json_again, npz_again = (tmp_path / n for n in ("a.json", "a.npz", "b.json", "b.npz"))
    save_schedule(schedule, json_path)
    save_schedule(schedule, npz_path)
    from_npz = load_schedule(npz_path)
    assert from_npz == schedule == load_schedule(json_path)
    save_schedule(from_npz, json_again)  # npz -> json gives the JSON synth writes
    assert json_again.read_bytes() == json_path.read_bytes()
    save_schedule(load_schedule(json_path), npz_again)  # json -> npz gives the npz synth writes
    assert npz_again.read_bytes() == npz_path.read_bytes()


@st.composite
def mutated_archives(draw) -> bytes:
    data = bytearray(npz_bytes(load_schedule(BASE)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["set", "insert", "delete", "truncate", "word"]))
        if kind == "set" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "word" and at + 4 <= len(data):  # sizes, offsets and counts are 2-8 bytes
            data[at : at + 4] = draw(st.sampled_from([b"\xff\xff\xff\xff", b"\x00\x00\x00\x80", b"\x00\x00\x00\x00"]))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif kind == "truncate":
            del data[at:]
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=mutated_archives())
def test_mutated_archive_is_read_or_refused_in_one_line(tmp_path, data):
    path = tmp_path / "m.npz"
    path.write_bytes(data)
    try:
        schedule = load_schedule(path)
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert schedule.num_transfers >= 0


def test_transfer_count_read_from_the_src_header_alone(tmp_path):
    """`synth export msccl` refuses a .npz schedule too large to lay out from this count, before
    reading its columns (a 16,384-rank allgather's 4.6 GB); anything unreadable gives None, and
    reading the file then says what is wrong."""
    from synth.schedule_npz import npz_transfer_count

    schedule = load_schedule(SAMPLES[1])
    path = tmp_path / "s.npz"
    path.write_bytes(npz_bytes(schedule))
    assert npz_transfer_count(path) == schedule.num_transfers
    text = tmp_path / "s.json"
    text.write_text(schedule_to_json(schedule))
    assert npz_transfer_count(text) is None
    broken = tmp_path / "broken.npz"
    broken.write_bytes(npz_bytes(schedule)[:200])
    assert npz_transfer_count(broken) is None
    assert npz_transfer_count(tmp_path / "missing.npz") is None
