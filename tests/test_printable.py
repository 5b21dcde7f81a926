"""Everything printed from file contents is escaped: names with terminal escape sequences, carriage
returns, newlines or bidirectional overrides cannot reach the terminal raw or forge lines."""

from __future__ import annotations

import json

import pytest

from synth.builtin import builtin_path
from synth.text import PrintableStream, printable, printable_text
from tests.cli_helpers import assert_bad_input, invoke

EVIL = "x\x1b]0;pwned\x07\x1b[2J\r\u202e\x9b31m\u2028"
RAW = ["\x1b", "\x07", "\r", "\u202e", "\x9b", "\u2028"]


def _evil_topology(tmp_path):
    doc = json.loads(builtin_path("dgx1").read_text())
    doc["name"] = EVIL
    doc["description"] = "first line\nOK forged line " + EVIL
    doc["ranks"][0]["host"] = "node\x1b[5m"
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(doc))
    return path


def _clean(text: str) -> None:
    for ch in RAW:
        assert ch not in text, (ch, text)


def test_topo_show_list_and_validate_escape_names(tmp_path):
    path = _evil_topology(tmp_path)
    shown = invoke("topo", "show", path)
    assert shown.exit_code == 0
    _clean(shown.stdout)
    assert "\\u001b]0;pwned\\u0007" in shown.stdout
    assert not any(line.startswith("OK forged") for line in shown.stdout.splitlines())
    validated = invoke("topo", "validate", path)
    _clean(validated.stdout)
    assert validated.stdout.count("\n") == 1


def test_json_output_still_parses_to_the_same_name(tmp_path):
    shown = invoke("topo", "show", _evil_topology(tmp_path), "--json")
    assert json.loads(shown.stdout)["name"] == EVIL


def test_schedule_names_in_summaries(tmp_path):
    path = tmp_path / "s.json"
    assert invoke("synthesize", "dgx1", "-c", "allgather", "-m", "ring", "-o", path).exit_code == 0
    doc = json.loads(path.read_text())
    doc["synthesizer"]["method"] = EVIL
    path.write_text(json.dumps(doc))
    result = invoke("verify", path)
    assert result.exit_code == 0
    _clean(result.stdout)


def test_error_lines_escape_values_and_paths(tmp_path):
    doc = json.loads(builtin_path("dgx1").read_text())
    doc["links"][0]["a"] = EVIL
    path = tmp_path / "bad\x1b[1m.json"
    path.write_text(json.dumps(doc))
    line = assert_bad_input(invoke("topo", "validate", path), "links[0].a")
    _clean(line)


def test_unpaired_surrogates_are_refused(tmp_path):
    text = builtin_path("dgx1").read_text().replace('"name": "dgx1"', '"name": "dgx1\\ud800"')
    path = tmp_path / "t.json"
    path.write_text(text)
    assert_bad_input(invoke("topo", "show", path), "unpaired surrogate")


@pytest.mark.parametrize("ch", [*RAW, "\x00", "\x7f", "\u200b", "\ufeff", "\U000e0041"])
def test_printable_escapes(ch):
    assert ch not in printable(f"a{ch}b") and ch not in printable_text(f"a{ch}b")
    assert printable("plain, é, 日本, a\\b") == "plain, é, 日本, a\\b"
    assert printable("a\nb\tc") == "a\\u000ab\\u0009c" and printable_text("a\nb\tc") == "a\nb\tc"


def test_printable_stream(tmp_path):
    import io

    out = io.StringIO()
    stream = PrintableStream(out)
    stream.write("ok\n\x1b[31mred\n")
    assert out.getvalue() == "ok\n\\u001b[31mred\n"
