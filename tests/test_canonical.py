import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synth.canonical import canonical_json, canonical_json_walk, canonical_sha256


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (300.0, "300"),
        (300, "300"),
        (0.7, "0.7"),
        (12.5, "12.5"),
        (1e-5, "0.00001"),
        (1e-7, "1e-7"),
        (1e16, "10000000000000000"),
        (1e21, "1e+21"),
        (-2.5, "-2.5"),
        (0.0, "0"),
        (-0.0, "0"),
        (123456789.125, "123456789.125"),
    ],
)
def test_numbers_follow_ecmascript(value, text):
    assert canonical_json(value) == text


def test_objects_sorted_and_compact():
    doc = {"b": [1, 2.0, "x"], "a": {"z": None, "y": True}, "é": "ü\n"}
    assert canonical_json(doc) == '{"a":{"y":true,"z":null},"b":[1,2,"x"],"é":"ü\\n"}'


def test_matches_python_sort_keys_for_ascii_integral_documents():
    doc = {"name": "x", "links": [{"a": "g0", "b": "g1", "bandwidth": 300, "latency": 0.7}], "version": 1}
    python = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    assert canonical_sha256(doc) == hashlib.sha256(python).hexdigest()


def test_non_finite_rejected():
    with pytest.raises(ValueError):
        canonical_json(float("nan"))


def test_non_finite_rejected_inside_documents():
    with pytest.raises(ValueError):
        canonical_json({"links": [{"bandwidth": float("inf")}]})


@pytest.mark.parametrize(
    "doc",
    [
        {"bandwidth": 300.0, "latency": 1e-05, "x": [1e-7, 1e16, 1e21, -0.0, 5e-324, 123456789.125], "s": ["300.0", "1e-05"]},
        {"big": [2**53 - 1, 2**53, 2**53 + 1, -(2**53) - 1, 10**22], "f": 2.0**53},
        {"quote": 'a"b', "back": "c\\", "ctl": "\x00\x1f\x7f\b\t\n\f\r", "n": 1.5, "m": 300.0},
        {"\U0001f600": 1, "\ue000": 2, "a": 3},  # code point and UTF-16 orders differ here
        [{"b": 1, "a": [True, False, None, "300.0", "1e-05"]}, 2.50],
    ],
)
def test_fast_path_gives_the_definition(doc):
    assert canonical_json(doc) == canonical_json_walk(doc)


_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([300.0, 1e-5, 1e21, 1e22, 2.0**53, -0.0])
_ints = st.integers() | st.sampled_from([2**53 - 1, 2**53, 2**53 + 1, -(2**53), 10**16])
_text = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(list('"\\\x00\x1f\x7f\n/\ue000\U0001f600')), max_size=6)
_values = st.recursive(
    st.none() | st.booleans() | _ints | _floats | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_values, max_size=4) | st.dictionaries(_text, _values, max_size=4))
def test_fast_path_matches_the_walk_on_any_document(doc):
    """canonical_json goes through the C encoder and rewrites the numbers it writes differently;
    whatever the document, the bytes are those of the value-by-value definition."""
    assert canonical_json(doc) == canonical_json_walk(doc)
