"""Writing output files without losing anything a user gave.

Outputs are written to a temporary file beside the target and renamed over it, so a crash never
leaves a half-written file; a path that is one of the command's inputs is never overwritten.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from synth.errors import InputError


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
    return write_stream_atomic(path, lambda fh: fh.write(data), protect=protect)


def write_stream_atomic(path: str | Path, write: Callable[[BinaryIO], object], *, protect: Iterable[str | Path] = ()) -> Path:
    """Write ``path`` atomically by calling ``write`` with a binary file open for writing (seekable),
    so that outputs too large to hold in memory twice (schedules of millions of transfers) go to
    disk piece by piece; the same checks as `write_text_atomic`. If ``write`` raises, the target
    is left as it was."""
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
            write(fh)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
