"""Text from files, made safe to print on a terminal.

Names and descriptions in topology and schedule files are anyone's text: an escape sequence in a
rank's name would move the cursor, recolour or retitle the user's terminal, and a newline would
forge an output line. Everything printed from file contents goes through `printable`.
"""

from __future__ import annotations

import unicodedata

#: Unicode categories shown escaped: controls (C0, DEL, C1), format characters (bidirectional
#: overrides, zero-width ones), line and paragraph separators, surrogates, private use, unassigned.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: object) -> str:
    """``text`` with every control or invisible formatting character written as ``\\xNN``,
    ``\\uNNNN`` or ``\\UNNNNNNNN`` (a backslash stays as it is); plain text is returned as is."""
    text = str(text)
    if text.isprintable():  # the common case, and fast: no control, format or separator char
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _HIDDEN else ch for ch in text)
