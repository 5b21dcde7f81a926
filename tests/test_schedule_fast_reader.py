"""The fast schedule reader (files in synth's own layout, over 1 MiB) accepts exactly what the JSON
reader accepts and gives the same schedule: a differential property test over mutated files."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.builtin import get_topology
from synth.errors import InputError
from synth.fileio import parse_json
from synth.registry import synthesize
from synth.schedule import _fast_columns, _fast_header, load_schedule, schedule_from_document, schedule_to_json


def _text() -> bytes:
    topo = get_topology("dgx-a100")  # a switch, so the file has routes in "via"
    schedule = synthesize(topo, "allgather", "ring")
    return schedule_to_json(schedule).encode()


BASE = _text()
STEPS_AT = BASE.index(b'"steps": [')
STEPS_END = BASE.index(b'"synthesizer"')

# bytes that make or break JSON, numbers and the layout the fast path expects
ALPHABET = [*b'0123456789-+.eE"\\,:[]{} \n\t\r', 0x00, 0x1F, 0x7F, 0xC3, 0xA9, 0xFF, 0xED, *b"xnul"]
SNIPPETS = [b"0", b"00", b"-0", b"01", b"1e3", b"1.0", b"9" * 19, b"9" * 18, b'"', b"\\u0000", b"NaN", b"\xef\xbb\xbf", b"\x00"]


def _outcome(read):
    try:
        return ("ok", read())
    except InputError:
        return ("error", None)


def _fast(raw: bytes, tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    path.write_bytes(raw)
    monkeypatch.setattr("synth.schedule.FAST_PATH_MIN_BYTES", 0)
    return _outcome(lambda: load_schedule(path))


def _general(raw: bytes):
    return _outcome(lambda: schedule_from_document(parse_json(raw, "s.json"), source="s.json"))


def _same(fast, general) -> None:
    assert fast[0] == general[0], (fast, general)
    if fast[0] == "ok":
        a, b = fast[1], general[1]
        assert a == b
        assert a.routes == b.routes and a.topology_name == b.topology_name and a.params == b.params


mutation = st.one_of(
    st.tuples(st.just("set"), st.integers(0, len(BASE) - 1), st.sampled_from(ALPHABET)),
    st.tuples(st.just("insert"), st.integers(STEPS_AT, STEPS_END), st.sampled_from(SNIPPETS)),
    st.tuples(st.just("insert"), st.integers(0, len(BASE)), st.sampled_from(SNIPPETS)),
    st.tuples(st.just("delete"), st.integers(0, len(BASE) - 1), st.integers(1, 3)),
    st.tuples(st.just("set"), st.integers(STEPS_AT, STEPS_END), st.sampled_from(ALPHABET)),
)


def _apply(raw: bytes, edits) -> bytes:
    out = bytearray(raw)
    for kind, at, what in edits:
        at = min(at, len(out))
        if kind == "set" and at < len(out):
            out[at] = what
        elif kind == "insert":
            out[at:at] = what
        elif kind == "delete":
            del out[at : at + what]
    return bytes(out)


def test_the_unmutated_file_takes_the_fast_path():
    fast = _fast_columns(BASE)
    assert fast is not None and _fast_header(fast[0]) is not None  # no silent fall-back to json


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(mutation, min_size=1, max_size=3))
def test_fast_and_json_readers_agree(edits, tmp_path, monkeypatch):
    raw = _apply(BASE, edits)
    _same(_fast(raw, tmp_path, monkeypatch), _general(raw))


@pytest.mark.parametrize(
    "old,new",
    [
        (b'"src": 0,', b'"src": 000,'),  # leading zeros: not JSON
        (b'"src": 0,', b'"src": 01,'),
        (b'"chunk": 0,', b'"chunk": 9223372036854775808,'),  # beyond int64
        (b"}],\n    [", b"}]\n    ["),  # a missing comma between steps
        (b'"via": ["', b'"via": ["\x01'),  # a raw control character in a string
        (b'"via": ["', b'"via": ["\xff'),  # not UTF-8
        (b'"version": 1', b'"version": 1, "steps": []'),  # a second "steps": the last one counts
        (b"{\n", b"\xef\xbb\xbf{\n"),  # a byte order mark (json.loads(bytes) would take it)
        (b'"version": 1', b'"version": NaN'),
    ],
)
def test_known_differences_are_gone(old, new, tmp_path, monkeypatch):
    assert old in BASE
    raw = BASE.replace(old, new, 1)
    _same(_fast(raw, tmp_path, monkeypatch), _general(raw))
