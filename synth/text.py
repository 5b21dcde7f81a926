"""Text from files, made safe to print on a terminal.

Names and descriptions in topology and schedule files are anyone's text: an escape sequence in a
rank's name would move the cursor, recolour or retitle the user's terminal, a carriage return or a
bidirectional override would make a line read as something it is not, and a lone surrogate cannot
even be encoded (a traceback). The command line therefore writes its standard output through
`PrintableStream`, and its one-line messages through `printable`.

Hidden characters are written as ``\\uXXXX`` (``\\UXXXXXXXX`` beyond the first plane): readable
on a terminal, and inside a JSON string the same character, so ``--json`` output still parses to
the same value.
"""

from __future__ import annotations

import io
import re
from typing import TextIO

#: Controls (C0 but tab and newline, DEL, C1), the invisible formatting characters (soft hyphen,
#: Arabic letter mark, zero-width ones, bidirectional embeddings, overrides and isolates, word
#: joiners, byte order mark, interlinear annotations, tags), the line and paragraph separators,
#: and surrogates.
_HIDDEN_CLASS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f"
)
_HIDDEN_IN_TEXT = re.compile(f"[{_HIDDEN_CLASS}]")
_HIDDEN_IN_LINE = re.compile(f"[\t\n{_HIDDEN_CLASS}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: object) -> str:
    """``text`` as one safe line: every control, invisible formatting character, tab and newline
    written as an escape (a backslash already in the text stays as it is)."""
    return _HIDDEN_IN_LINE.sub(_escape, str(text))


def printable_text(text: str) -> str:
    """``text`` with its lines and tabs kept and everything else hidden escaped."""
    return _HIDDEN_IN_TEXT.sub(_escape, text)


class PrintableStream(io.TextIOBase):
    """A text stream that passes everything written to ``stream`` through `printable_text`."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable_text(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._stream, "errors", None)

    @property
    def buffer(self):  # binary writes bypass the filter: only our own bytes are written there
        return self._stream.buffer
