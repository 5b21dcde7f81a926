import hashlib
import json

import pytest

from synth.canonical import canonical_json, canonical_sha256


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
