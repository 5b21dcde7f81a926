"""Fuzzing the readers users feed files to, through the commands they call.

Real files (the built-in topologies, schedules from generated/) are mutated byte by byte and
value by value (huge and tiny numbers, wrong types, deep nesting, paths in names, control
characters) and handed to the command that reads them. Whatever the mutation, the command ends
with exit code 2 and one ``synth: error:`` line, or a result (exit 0; exit 1 with the first
violation for a schedule that fails verification): never a traceback, within bounded time and
memory (an address-space limit is set around each run, so an unbounded allocation fails the test
instead of the machine).

Each reader is a `Reader`: its seed files and the command line that reads a file. MSCCL XML
(``synth import msccl``), NCCL topology XML (``synth topo import``) and the columnar ``.npz``
schedule encoding are further entries of `READERS` with their own seeds (``encode`` turns a seed
file into the format: the npz reader's seeds are the JSON schedules, converted) and, for binary or
XML formats, their own `Reader.mutations` (for ``.npz``: the archive's bytes, its ``header.json``
as JSON, and its columns' values, data types and shapes).
"""

from __future__ import annotations

import copy
import io
import json
import os
import resource
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.builtin import builtin_path
from synth.fileio import parse_json
from synth.schedule import schedule_from_document, schedule_header
from synth.schedule_npz import write_schedule_npz
from tests.cli_helpers import invoke

REPO = Path(__file__).resolve().parent.parent

#: Generous bounds: a hang or a runaway allocation, not speed, is what they catch.
SECONDS_PER_RUN = 30.0
EXTRA_ADDRESS_SPACE = 3 * 2**30

# ------------------------------------------------------------------------------ mutations
NASTY_VALUES: list[object] = [
    None,
    True,
    0,
    -1,
    1.5,
    2**63,
    -(2**63) - 1,
    10**30,
    1e308,
    1e-320,
    "",
    "../../etc/passwd",
    "/dev/zero",
    "builtin:dgx1",
    "gpu0\x1b[2J\r\u202e",
    "\u0000",
    [],
    {},
    json.loads("[" * 70 + "]" * 70),  # deeper than any input needs
    {"name": "x"},
    ["x", "y"],
]
NASTY_TEXT = [b"NaN", b"1e999", b"-0", b"00", b"9" * 5000, b"\xff", b"\\ud800", b"[" * 3000, b"\x00", b"\xef\xbb\xbf"]


def _paths(doc: object, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON document (keys and indexes), the top level first."""
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc[:6]):  # the first few entries of long lists suffice
            out += _paths(value, (*prefix, i))
    return out


def _set(doc: object, path: tuple, value: object, delete: bool) -> object:
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]  # type: ignore[index]
    if delete:
        del parent[path[-1]]  # type: ignore[union-attr]
    else:
        parent[path[-1]] = value  # type: ignore[index]
    return doc


@st.composite
def json_mutation(draw, seed: bytes) -> bytes:
    """The seed with one to three values replaced by a nasty one, or deleted."""
    doc = json.loads(seed)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        delete = bool(path) and draw(st.booleans())
        # a copy: a later mutation of this draw may reach inside the value, which must not change NASTY_VALUES
        doc = _set(doc, path, copy.deepcopy(draw(st.sampled_from(NASTY_VALUES))), delete)
    return json.dumps(doc, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


@st.composite
def byte_mutation(draw, seed: bytes) -> bytes:
    """The seed with bytes flipped, deleted, or nasty text spliced in."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["set", "insert", "delete", "truncate"]))
        if kind == "set" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.sampled_from(NASTY_TEXT))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del data[at:]
    return bytes(data)


# ------------------------------------------------------------------------------ readers
@dataclass(frozen=True)
class Reader:
    """A file format users bring and the command that reads it.

    ``command(path)`` is the command line (without ``synth``); ``ok_codes`` the exit codes of a
    result (2 is always bad input); ``mutations`` build a mutated file from a seed's bytes;
    ``encode`` turns a seed file's bytes into the format read (and ``suffix`` names it)."""

    name: str
    seeds: Sequence[Path]
    command: Callable[[Path], list[str]]
    ok_codes: frozenset[int] = frozenset({0})
    mutations: Sequence[Callable[[bytes], st.SearchStrategy[bytes]]] = field(default=(json_mutation, byte_mutation))
    encode: Callable[[bytes], bytes] | None = None
    suffix: str | None = None

    def seed_files(self) -> list[tuple[str, bytes]]:
        """(file name, bytes) of each seed in the format read."""
        out = []
        for p in self.seeds:
            data = p.read_bytes()
            out.append((p.with_suffix(self.suffix).name if self.suffix else p.name, self.encode(data) if self.encode else data))
        return out

    def mutated_files(self) -> st.SearchStrategy[tuple[str, bytes]]:
        seeds = self.seed_files()
        return st.sampled_from(seeds).flatmap(
            lambda s: st.one_of(*(m(s[1]) for m in self.mutations)).map(lambda data, name=s[0]: (name, data))
        )


def _schedules() -> list[Path]:
    folder = REPO / "generated"
    picks = ["dgx1/allreduce-ring.json", "dgx1/broadcast-binomial.json", "dgx-a100/allgather-direct.json"]
    return [folder / p for p in picks if (folder / p).is_file()]


# ------------------------------------------------------------------------------ the columnar encoding
NPZ_COLUMNS = ("step_starts", "src", "dst", "chunk", "op", "route")


def schedule_json_to_npz(data: bytes) -> bytes:
    """A JSON schedule file's bytes as the ``.npz`` file ``synth convert`` would write."""
    schedule = schedule_from_document(parse_json(data, "seed"), source="seed")
    out = io.BytesIO()
    write_schedule_npz(schedule, schedule_header(schedule), out)
    return out.getvalue()


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _archive(members: dict[str, bytes], deflate: bool = False) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=array.dtype.hasobject)
    return out.getvalue()


@st.composite
def npz_header_mutation(draw, seed: bytes) -> bytes:
    """The archive with its ``header.json`` mutated as JSON (counts, routes, collective, …)."""
    members = _members(seed)
    members["header.json"] = draw(json_mutation(members["header.json"]))
    return _archive(members, deflate=draw(st.booleans()))


NASTY_INTS = [0, 1, -1, 2, 7, 255, 2**31 - 1, -(2**31), 2**62, -(2**63)]


@st.composite
def npz_column_mutation(draw, seed: bytes) -> bytes:
    """The archive with one column changed: values set to nasty integers, another data type or byte
    order, another length or shape, Python objects, or the member dropped or doubled."""
    members = _members(seed)
    name = draw(st.sampled_from(NPZ_COLUMNS))
    column = np.load(io.BytesIO(members[f"{name}.npy"]))
    kind = draw(st.sampled_from(["values", "dtype", "length", "shape", "objects", "drop", "order"]))
    if kind == "values" and column.size:
        column = column.astype(np.int64)
        for _ in range(draw(st.integers(1, 3))):
            column[draw(st.integers(0, column.size - 1))] = draw(st.sampled_from(NASTY_INTS))
        wide = column.min() < np.iinfo(np.int32).min or column.max() > np.iinfo(np.int32).max
        keep = np.dtype(np.int64) if wide or name == "step_starts" else column.dtype
        members[f"{name}.npy"] = _npy(column.astype(np.uint8) if name == "op" else column.astype(keep))
    elif kind == "dtype":
        dtype = draw(st.sampled_from(["<f8", "<u4", "<i2", "|b1", ">i4", "<i8", "<c16"]))
        members[f"{name}.npy"] = _npy(column.astype(dtype))
    elif kind == "length":
        cut = draw(st.integers(0, column.size + 3))
        members[f"{name}.npy"] = _npy(np.resize(column, cut))
    elif kind == "shape" and column.size % 2 == 0:
        members[f"{name}.npy"] = _npy(column.reshape(2, -1))
    elif kind == "objects":
        members[f"{name}.npy"] = _npy(column.astype(object))
    elif kind == "drop":
        del members[f"{name}.npy"]
    elif kind == "order" and column.size % 2 == 0:
        members[f"{name}.npy"] = _npy(np.asfortranarray(column.reshape(2, -1)))
    return _archive(members, deflate=draw(st.booleans()))


READERS = [
    Reader(
        "topology JSON",
        [builtin_path(n) for n in ("dgx1", "dgx-a100", "pcie-2socket", "ndv2x2")],
        lambda path: ["topo", "validate", str(path)],
    ),
    Reader(
        "schedule JSON",
        _schedules(),
        lambda path: ["verify", str(path)],
        ok_codes=frozenset({0, 1}),  # 1: a well-formed schedule that fails verification
    ),
    Reader(
        "schedule npz",
        _schedules(),
        lambda path: ["verify", str(path)],
        ok_codes=frozenset({0, 1}),
        mutations=(npz_header_mutation, npz_column_mutation, byte_mutation),
        encode=schedule_json_to_npz,
        suffix=".npz",
    ),
]


# ------------------------------------------------------------------------------ the contract
def _run_bounded(args: list[str]):
    """The command in this process, with the address space capped above what it uses now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm", encoding="ascii") as fh:
        used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = used + EXTRA_ADDRESS_SPACE
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    start = time.monotonic()
    try:
        result = invoke(*args)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return result, time.monotonic() - start


def check_contract(reader: Reader, path: Path) -> None:
    result, seconds = _run_bounded(reader.command(path))
    assert seconds < SECONDS_PER_RUN, f"{reader.name}: {seconds:.1f} s"
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"{reader.name}: {type(exc).__name__}: {exc}"
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("synth: error: "), result.stderr
        assert str(path.name) in lines[0] or "synth" in lines[0]
    else:
        assert result.exit_code in reader.ok_codes, (result.exit_code, result.stdout, result.stderr)
        if result.exit_code == 1:
            assert "INVALID" in result.stdout and len(result.stdout.splitlines()) == 1


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc to bound the address space")
@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_mutated_files_get_one_line_or_a_result(reader, tmp_path_factory):
    if not reader.seeds:
        pytest.skip(f"no seed files for the {reader.name} reader")
    folder = tmp_path_factory.mktemp("fuzz")

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(case=reader.mutated_files())
    def run(case):
        name, data = case
        path = folder / name
        path.write_bytes(data)
        check_contract(reader, path)

    run()


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_the_seeds_themselves_read(reader, tmp_path):
    for name, data in reader.seed_files():
        path = tmp_path / name
        path.write_bytes(data)
        result = invoke(*reader.command(path))
        assert result.exit_code == 0, result.output
