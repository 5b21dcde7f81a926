"""Canonical JSON (RFC 8785, the JSON Canonicalization Scheme) and its SHA-256.

A schedule names the topology it was made for by the SHA-256 of the topology file's canonical JSON.
We canonicalize with JCS because it is the standard, language-neutral definition: object keys sorted
by UTF-16 code units, no insignificant whitespace, strings with minimal escaping, and numbers in the
shortest round-trip form (so ``300.0`` and ``300`` are the same number). For files whose text is
ASCII and whose integral numbers are written without a fraction (all built-in topologies), this is
byte-identical to Python's ``json.dumps(doc, sort_keys=True, separators=(",", ":"))``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any


def _number(value: float | int) -> str:
    """ECMAScript Number::toString of the shortest round-trip digits (RFC 8785, section 3.2.2.3)."""
    if isinstance(value, int):
        value = float(value) if abs(value) >= 2**53 else value
        if isinstance(value, int):
            return str(value)
    if not math.isfinite(value):
        raise ValueError(f"non-finite number {value!r} has no JSON form")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    # decimal exponent n such that value = 0.d1d2... * 10**n
    n = len(whole.lstrip("0")) if whole.strip("0") else -(len(frac) - len(frac.lstrip("0")))
    n += int(exponent) if exponent else 0
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + text


_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')


def _string(value: str) -> str:
    """RFC 8785 section 3.2.2.2: quote, escape only ``"``, ``\\`` and controls (short forms where
    JSON has them, else lowercase ``\\u00xx``)."""
    if _PLAIN.fullmatch(value):  # nearly every name: nothing to escape
        return '"' + value + '"'
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif code < 0x20:
            out.append({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}.get(code, f"\\u{code:04x}"))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be")


#: A JSON string in ``json.dumps`` output (quotes inside are escaped), or a number token.
_STRING_OR_NUMBER = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')
#: Punctuation between the tokens of ``json.dumps`` output once its strings are taken out.
_PUNCTUATION = str.maketrans("{}[],:", "      ")
_WORDS = frozenset(("true", "false", "null"))


def _token_number(token: str) -> str:
    """RFC 8785's text of a number token that ``json.dumps`` wrote."""
    if "." in token or "e" in token or "E" in token:
        return _number(float(token))
    return _number(int(token))


def _fast_canonical_json(value: Any) -> str | None:
    r"""`canonical_json` through the C JSON encoder, or None when it might differ (then the
    Python walk decides). ``json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` escapes strings exactly as RFC 8785 does (``\"``, ``\\``, the short
    forms, lowercase ``\u00xx`` for other controls) and sorts keys by code point, which is UTF-16
    order when no character lies beyond U+FFFF; only its numbers can differ (``repr`` of floats,
    integers from 2**53 on), and those are rewritten token by token. Dictionary keys must be
    strings, as in JSON."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    if not text.isascii() and max(text) > "\uffff":
        return None
    if "\\" in text:  # a string holds an escape (maybe a quote): find the numbers the slow way
        tokens = {m for m in _STRING_OR_NUMBER.findall(text) if not m.startswith('"')}
    else:  # every other piece between quotes is outside the strings
        tokens = set("".join(text.split('"')[0::2]).translate(_PUNCTUATION).split()) - _WORDS
    rewrite = {token: canonical for token in tokens if (canonical := _token_number(token)) != token}
    if rewrite:
        text = _STRING_OR_NUMBER.sub(lambda m: rewrite.get(m.group(0), m.group(0)), text)
    return text


def canonical_json(value: Any) -> str:
    """Serialize a JSON value (dict/list/str/int/float/bool/None) in RFC 8785 canonical form."""
    fast = _fast_canonical_json(value) if isinstance(value, (dict, list)) else None
    return fast if fast is not None else canonical_json_walk(value)


def canonical_json_walk(value: Any) -> str:
    """`canonical_json`, value by value: the definition, which the fast path through the C
    encoder gives byte for byte (tests compare the two)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_json_walk(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: _utf16_key(kv[0]))
        return "{" + ",".join(_string(k) + ":" + canonical_json_walk(v) for k, v in items) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def canonical_sha256(value: Any) -> str:
    """Hex SHA-256 of the UTF-8 bytes of ``canonical_json(value)``."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
