"""Reading input files, and writing output files without losing anything a user gave.

Inputs are read by `read_text_file`, which turns every way a file can fail to read into one
`InputError` line. Outputs are written to a temporary file beside the target and renamed over it, so a crash never
leaves a half-written file; a path that is one of the command's inputs is never overwritten.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from synth.errors import InputError


def read_text_file(path: str | Path) -> str:
    """The text of ``path`` (UTF-8); one `InputError` line naming the file if it is missing, a
    folder, unreadable or not UTF-8."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "", None, "no such file", show_value=False) from None
    except IsADirectoryError:
        raise InputError(str(path), "", None, "is a directory, not a file", show_value=False) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), "", None, f"cannot read file ({exc})", show_value=False) from None


@functools.cache
def _default_mode() -> int:
    """0666 less the process's umask: the mode ``open(path, "w")`` would give a new file (read
    once: reading the umask means setting it)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_text_atomic(path: str | Path, text: str, *, protect: Iterable[str | Path] = ()) -> Path:
    """Write ``text`` to ``path`` atomically (UTF-8, newlines as given). Raises `InputError` if
    ``path`` is one of ``protect`` (the command's own inputs) or its folder cannot be created."""
    return write_bytes_atomic(path, text.encode("utf-8"), protect=protect)


def write_bytes_atomic(path: str | Path, data: bytes, *, protect: Iterable[str | Path] = ()) -> Path:
    """Write ``data`` to ``path`` atomically (images and other binary outputs); the same checks as
    `write_text_atomic`."""
    path = Path(path)
    target = path.resolve()
    for other in protect:
        if other and Path(other).exists() and Path(other).resolve() == target:
            raise InputError(str(path), "output", str(path), "is also an input of this command; refusing to overwrite it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(str(path), "output", str(path), f"cannot create folder ({exc.strerror})") from None
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp makes the file private (0600); give it the mode an ordinary write would have
        os.fchmod(fd, _default_mode())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
