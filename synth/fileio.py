"""Reading inputs and writing outputs without harm to anything a user has.

Inputs are read with a size cap and only from regular files, so ``/dev/zero``, a FIFO or a
runaway file ends in one line instead of filling memory or waiting forever; JSON is parsed
strictly (no ``NaN``), with its nesting depth and number lengths bounded.

Outputs are written to a temporary file beside the target and renamed over it, so a crash never
leaves a half-written file; a path that is one of the command's inputs is never overwritten.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from synth.errors import InputError
from synth.limits import MAX_JSON_DEPTH, format_bytes

#: Reads are refused beyond this many bytes unless the caller gives its own limit.
DEFAULT_INPUT_LIMIT = 256 * 2**20


def read_input_bytes(path: str | Path, *, limit: int = DEFAULT_INPUT_LIMIT) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises `InputError` (one line naming the file) for a missing or unreadable path, a folder, a
    device, FIFO or socket (they may never end, or block), and a file larger than ``limit``."""
    name = str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags)
    except FileNotFoundError:
        raise InputError(name, "", None, "no such file", show_value=False) from None
    except IsADirectoryError:
        raise InputError(name, "", None, "is a directory, not a file", show_value=False) from None
    except OSError as exc:
        raise InputError(name, "", None, f"cannot read file ({exc.strerror or exc})", show_value=False) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(name, "", None, "is a directory, not a file", show_value=False)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(name, "", None, "is not a regular file (a device, FIFO or socket); give a file", show_value=False)
        if info.st_size > limit:
            raise InputError(
                name,
                "",
                None,
                f"is {format_bytes(info.st_size)}, more than this reader takes ({format_bytes(limit)})",
                show_value=False,
            )
        chunks: list[bytes] = []
        size = 0
        while size <= limit:  # files in /proc report size 0 and may still be long
            try:
                part = os.read(fd, min(1 << 24, limit + 1 - size))
            except OSError as exc:
                raise InputError(name, "", None, f"cannot read file ({exc.strerror or exc})", show_value=False) from None
            if not part:
                break
            chunks.append(part)
            size += len(part)
        if size > limit:
            raise InputError(name, "", None, f"is longer than this reader takes ({format_bytes(limit)})", show_value=False)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str | bytes, source: str) -> Any:
    """Parse JSON exactly as RFC 8259 defines it (UTF-8, no ``NaN``/``Infinity``), turning every
    problem into one `InputError` line: syntax, encoding, numbers of more digits than Python
    converts (4,300), nesting too deep for the parser."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(source, f"byte {exc.start}", None, "not UTF-8 text", show_value=False) from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InputError(
            source, f"line {exc.lineno} column {exc.colno}", None, f"invalid JSON ({exc.msg})", show_value=False
        ) from None
    except RecursionError:
        raise InputError(source, "", None, "invalid JSON (nested too deeply)", show_value=False) from None
    except ValueError as exc:  # NaN/Infinity, or an integer longer than int(str) converts
        reason = str(exc) if "is not JSON" in str(exc) else "a number has more than 4300 digits"
        raise InputError(source, "", None, f"invalid JSON ({reason})", show_value=False) from None


def check_depth(value: Any, source: str, field: str = "", *, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse a JSON value nested more than ``limit`` levels (iteratively: no recursion to
    overflow), naming the path of the first container too deep."""
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, dict):
            children = ((v, f"{where}.{k}" if where else str(k)) for k, v in item.items())
        elif isinstance(item, list):
            children = ((v, f"{where}[{i}]") for i, v in enumerate(item))
        else:
            continue
        if depth >= limit:
            raise InputError(source, where or "(top level)", None, f"nested more than {limit} levels deep", show_value=False)
        stack.extend((v, w, depth + 1) for v, w in children if isinstance(v, (dict, list)))


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
