"""Fuzzing the readers users feed files to, through the commands they call.

Real files (the built-in topologies, schedules from generated/) are mutated byte by byte and
value by value (huge and tiny numbers, wrong types, deep nesting, paths in names, control
characters) and handed to the command that reads them. Whatever the mutation, the command ends
with exit code 2 and one ``synth: error:`` line, or a result (exit 0; exit 1 with the first
violation for a schedule that fails verification): never a traceback, within bounded time and
memory (an address-space limit is set around each run, so an unbounded allocation fails the test
instead of the machine).

Each reader is a `Reader`: its seed files and the command line that reads a file. MSCCL XML
(``synth import msccl``), NCCL topology XML (``synth topo import``) and the coming columnar
``.npz`` schedule encoding are added as further entries of `READERS` with their own seeds and, for
binary or XML formats, their own `Reader.mutations`.
"""

from __future__ import annotations

import copy
import json
import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.builtin import builtin_path
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
    result (2 is always bad input); ``mutations`` build a mutated file from a seed's bytes."""

    name: str
    seeds: Sequence[Path]
    command: Callable[[Path], list[str]]
    ok_codes: frozenset[int] = frozenset({0})
    mutations: Sequence[Callable[[bytes], st.SearchStrategy[bytes]]] = field(default=(json_mutation, byte_mutation))

    def mutated_files(self) -> st.SearchStrategy[tuple[str, bytes]]:
        seeds = [(p.name, p.read_bytes()) for p in self.seeds]
        return st.sampled_from(seeds).flatmap(
            lambda s: st.one_of(*(m(s[1]) for m in self.mutations)).map(lambda data, name=s[0]: (name, data))
        )


def _schedules() -> list[Path]:
    folder = REPO / "generated"
    picks = ["dgx1/allreduce-ring.json", "dgx1/broadcast-binomial.json", "dgx-a100/allgather-direct.json"]
    return [folder / p for p in picks if (folder / p).is_file()]


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
    for seed in reader.seeds:
        path = tmp_path / seed.name
        path.write_bytes(seed.read_bytes())
        result = invoke(*reader.command(path))
        assert result.exit_code == 0, result.output
