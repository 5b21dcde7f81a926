"""Reading inputs and writing outputs without harm to anything a user has.

Inputs are read with a size cap and only from regular files, so ``/dev/zero``, a FIFO or a
runaway file ends in one line instead of filling memory or waiting forever; JSON is parsed
strictly (no ``NaN``), with its nesting depth and number lengths bounded.

Every reader goes through `read_input_bytes` (or `read_text_file` for text), which turns every
way a file can fail to read into one `InputError` line. Outputs are written to a temporary file
beside the target and renamed over it, so a crash never leaves a half-written file; a path that
is one of the command's inputs is never overwritten.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
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


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_text(text: str, source: str, where: str) -> None:
    if not text.isascii() and _SURROGATE.search(text):
        raise InputError(
            source,
            where or "(top level)",
            None,
            "a string holds an unpaired surrogate (\\ud800-\\udfff escape), not text",
            show_value=False,
        )


def check_depth(value: Any, source: str, field: str = "", *, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse a JSON value nested more than ``limit`` levels (iteratively: no recursion to
    overflow), naming the path of the first container too deep; and one whose strings hold an
    unpaired surrogate (JSON's ``"\\ud800"`` parses, but is no text: it cannot be hashed,
    written or printed)."""
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item, source, where)
            continue
        if isinstance(item, dict):
            for key in item:
                _check_text(key, source, where)
            children = ((v, f"{where}.{k}" if where else str(k)) for k, v in item.items())
        elif isinstance(item, list):
            children = ((v, f"{where}[{i}]") for i, v in enumerate(item))
        else:
            continue
        if depth >= limit:
            raise InputError(source, where or "(top level)", None, f"nested more than {limit} levels deep", show_value=False)
        stack.extend((v, w, depth + 1) for v, w in children if isinstance(v, (dict, list, str)))


def read_text_file(path: str | Path, *, limit: int = DEFAULT_INPUT_LIMIT, what: str | None = None) -> str:
    """The UTF-8 text of the regular file ``path`` (`read_input_bytes`: at most ``limit`` bytes);
    one `InputError` line naming the file if it is missing, a folder, a device, unreadable, too
    large (``what`` says what such a file is expected to be) or not UTF-8."""
    name = str(path)
    try:
        raw = read_input_bytes(path, limit=limit)
    except InputError as exc:
        if what is None or "reader takes" not in exc.reason:
            raise
        size = f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else format_bytes(limit)
        raise InputError(name, "", None, f"larger than {size}: not {what}", show_value=False) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(name, "", None, f"not UTF-8 text (byte {exc.start}: {exc.reason})", show_value=False) from None


@functools.cache
def _default_mode() -> int:
    """0666 less the process's umask: the mode ``open(path, "w")`` would give a new file (read
    once: reading the umask means setting it)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


#: Folders whose files are the kernel's or devices: never a place for an output file.
SYSTEM_FOLDERS = (Path("/proc"), Path("/sys"), Path("/dev"))


class Written(type(Path())):  # type: ignore[misc]
    """The path an output was written to (a `Path`), knowing whether it ``replaced`` a file."""

    replaced: bool = False

    @classmethod
    def of(cls, path: Path, replaced: bool) -> Written:
        written = cls(path)
        written.replaced = replaced
        return written

    @property
    def verb(self) -> str:
        """``"replaced"`` or ``"wrote"``, for the command's message."""
        return "replaced" if self.replaced else "wrote"


def _system_folder(target: Path) -> Path | None:
    return next((root for root in SYSTEM_FOLDERS if target == root or root in target.parents), None)


def check_output_file(path: str | Path) -> tuple[Path, os.stat_result | None]:
    """The resolved target of an output file and the status of the file there (None if new).

    Raises `InputError` unless ``path`` is a new path or an existing regular file: a folder, a
    device, FIFO or socket, or anything under /proc, /sys or /dev is refused (as root, replacing
    ``/dev/null`` with a file would break the system)."""
    name = str(path)
    if not name:
        raise InputError("(output)", "output", name, "the output path is empty")
    target = Path(path).resolve()
    root = _system_folder(target)
    if root is not None:
        raise InputError(name, "output", name, f"is under {root}, which holds devices and kernel files, not outputs")
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise InputError(name, "output", name, f"cannot write here ({exc.strerror or exc})") from None
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise InputError(name, "output", name, "is a directory; give a file name")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(
                name, "output", name, "exists and is not a regular file (a device, FIFO or socket); refusing to replace it"
            )
    return target, info


def prepare_output_dir(path: str | Path) -> Path:
    """Create (if needed) a folder that a command writes several files into; refuses a path that
    exists and is not a folder, and anything under /proc, /sys or /dev."""
    name = str(path)
    target = Path(path).resolve()
    root = _system_folder(target)
    if root is not None:
        raise InputError(name, "output", name, f"is under {root}, which holds devices and kernel files, not outputs")
    if target.exists() and not target.is_dir():
        raise InputError(name, "output", name, "exists and is not a folder")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(name, "output", name, f"cannot create folder ({exc.strerror or exc})") from None
    return Path(path)


def write_text_atomic(path: str | Path, text: str, *, protect: Iterable[str | Path] = ()) -> Written:
    """Write ``text`` to ``path`` atomically (UTF-8, newlines as given). Raises `InputError` if
    ``path`` is one of ``protect`` (the command's own inputs), is not a regular file or a new path,
    or its folder cannot be created."""
    return write_bytes_atomic(path, text.encode("utf-8"), protect=protect)


def write_bytes_atomic(path: str | Path, data: bytes, *, protect: Iterable[str | Path] = ()) -> Written:
    """Write ``data`` to ``path`` atomically (images and other binary outputs); the same checks as
    `write_text_atomic`. A file that is replaced keeps its mode (and, where we may, its owner)."""
    path = Path(path)
    target, existing = check_output_file(path)
    for other in protect:
        if not other or not Path(other).exists():
            continue
        same = Path(other).resolve() == target
        if existing is not None and not same:
            other_info = os.stat(other)
            same = (other_info.st_dev, other_info.st_ino) == (existing.st_dev, existing.st_ino)
        if same:
            raise InputError(str(path), "output", str(path), "is also an input of this command; refusing to overwrite it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(str(path), "output", str(path), f"cannot create folder ({exc.strerror or exc})") from None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise InputError(str(path), "output", str(path), f"cannot write here ({exc.strerror or exc})") from None
    try:
        # mkstemp makes the file private (0600): keep the replaced file's mode, or give a new file
        # the mode an ordinary write would have
        os.fchmod(fd, stat.S_IMODE(existing.st_mode) if existing is not None else _default_mode())
        if existing is not None and (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
            with contextlib.suppress(OSError):
                os.fchown(fd, existing.st_uid, existing.st_gid)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except OSError as exc:  # a full disk, a read-only file system
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise InputError(str(path), "output", str(path), f"cannot write ({exc.strerror or exc})") from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return Written.of(path, existing is not None)
