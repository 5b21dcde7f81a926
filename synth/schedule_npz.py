"""The columnar encoding of schedule files (``.npz``): a zip archive of numpy columns.

A JSON schedule of a 4,096-rank allgather is 1.1 GB of text for 16.7 million transfers, and
writing or parsing it costs a Python object per transfer. The columnar encoding holds the same
schedule as the `Schedule`'s own columns (``step_starts``, ``src``, ``dst``, ``chunk``, ``op``,
``route``), one ``.npy`` member each, beside ``header.json`` (every top-level field of the JSON
file except ``steps``, plus ``num_steps``, ``num_transfers`` and the ``routes`` table that
``route`` indexes). It is read and written at disk speed, in memory proportional to the columns.

Reading follows the public format to the letter and trusts nothing: every size is checked against
what the header says, and against the memory this process can get, before anything is allocated
(a member that declares gigabytes, a header that claims billions of transfers); only the data
types the format names are taken (no pickles, no object arrays, no big-endian columns); lengths,
``step_starts``, ``op`` codes and ``route`` indexes are checked. Every problem is one `InputError`
line naming the file, the member and the value.

Writing is deterministic: the same schedule gives the same bytes (members in one order, stored,
with a fixed timestamp and mode; the ``.npy`` headers written here, not by the installed numpy;
the route table reduced to the routes used, in sorted order; 32-bit columns whenever the values
fit). That is what makes ``npz -> json -> npz`` give back the same bytes.
"""

from __future__ import annotations

import json
import os
import stat
import zipfile
from collections.abc import Iterable
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np

from synth.errors import InputError
from synth.limits import available_memory, format_bytes


class ScheduleColumns(Protocol):
    """What the writer reads of a `synth.schedule.Schedule`: its columns, counts and route table
    (named here so this module, which `synth.schedule` calls to read and write, need not import it)."""

    step_starts: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    chunk: np.ndarray
    op: np.ndarray
    route: np.ndarray
    routes: tuple[tuple[str, ...], ...]

    @property
    def num_steps(self) -> int: ...

    @property
    def num_transfers(self) -> int: ...


#: The first bytes of every zip archive (JSON text never starts with them).
ZIP_MAGIC = b"PK"
#: The extension that chooses this encoding when writing.
NPZ_SUFFIX = ".npz"

HEADER_MEMBER = "header.json"
#: Column members in the order they are written; each is ``NAME.npy``.
COLUMNS = ("step_starts", "src", "dst", "chunk", "op", "route")

#: Data types each column may have in a file (``numpy.dtype.str``: little-endian or byte-sized).
ALLOWED_DTYPES: dict[str, tuple[str, ...]] = {
    "step_starts": ("<i8",),
    "src": ("<i4", "<i8"),
    "dst": ("<i4", "<i8"),
    "chunk": ("<i4", "<i8"),
    "op": ("|u1",),
    "route": ("|i1", "<i2", "<i4", "<i8"),
}
OP_MAX = 1  # 0 copy, 1 reduce

#: Far beyond any schedule, small enough that every count fits int64 arithmetic and every
#: transfer index fits the 32-bit columns written.
MAX_TRANSFERS = 2**31 - 1
MAX_STEPS = 2**31 - 1
#: ``header.json`` holds the synthesizer's parameters and the routes: a route per pair of ranks
#: that talk over switches, so 115 MB for the 16,384-GPU fat-tree's hierarchical allgather
#: (1.5 million routes); what parsing it needs is checked against the memory available as well.
MAX_HEADER_BYTES = 2**30
#: Bytes of memory per byte of ``header.json`` while it is parsed (a Python object per value).
HEADER_MEMORY_FACTOR = 24
#: A ``.npy`` header is a short dict padded to 64 bytes (numpy refuses more than 10,000).
MAX_NPY_HEADER_BYTES = 10_000
#: A schedule archive holds 7 members; other tools may add a few of their own.
MAX_MEMBERS = 4096
#: Bytes of memory per transfer while reading: the in-memory columns (4 of int64, 1 of uint8)
#: and one column read from the file before its conversion.
READ_BYTES_PER_TRANSFER = 4 * 8 + 1 + 8
#: Columns are read and converted in pieces of this many bytes.
READ_BLOCK = 1 << 24

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_ZIP_MODE = (stat.S_IFREG | 0o644) << 16
_ZIP_UNIX = 3


# ======================================================================================= writing
def is_npz_path(path: str | Path) -> bool:
    """Whether writing ``path`` chooses the columnar encoding (its extension is ``.npz``, in any
    case)."""
    return Path(path).suffix.lower() == NPZ_SUFFIX


def npy_header(dtype: np.dtype, length: int) -> bytes:
    """The ``.npy`` format 1.0 header of a 1-D, C-order array: magic, version, header length and
    the dict, padded with spaces to a multiple of 64 bytes and ended by a newline (what numpy
    writes, written here so the bytes never depend on the installed numpy)."""
    text = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': ({length},), }}"
    prefix = 6 + 2 + 2  # magic, version, header length
    total = -(-(prefix + len(text) + 1) // 64) * 64
    text = text + " " * (total - prefix - len(text) - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("ascii")


def _narrowest(column: np.ndarray) -> np.dtype:
    """int32 when every value fits, else int64 (little-endian either way)."""
    info = np.iinfo(np.int32)
    if column.size == 0 or (int(column.min()) >= info.min and int(column.max()) <= info.max):
        return np.dtype("<i4")
    return np.dtype("<i8")


def canonical_routes(schedule: ScheduleColumns) -> tuple[list[tuple[str, ...]], np.ndarray | None]:
    """The route table to write (the direct route first, then the routes transfers use, sorted)
    and the map from the schedule's route ids to it (None when it is the identity)."""
    used = np.bincount(schedule.route, minlength=len(schedule.routes)) > 0 if schedule.num_transfers else None
    keep = [i for i in range(len(schedule.routes)) if i == 0 or (used is not None and used[i])]
    keep.sort(key=lambda i: schedule.routes[i])  # () sorts first
    table = [schedule.routes[i] for i in keep]
    if keep == list(range(len(schedule.routes))):
        return table, None
    remap = np.zeros(len(schedule.routes), dtype=np.int64)
    remap[keep] = np.arange(len(keep), dtype=np.int64)
    return table, remap


def header_document(schedule: ScheduleColumns, header: dict[str, Any], routes: Iterable[tuple[str, ...]]) -> dict[str, Any]:
    """``header.json``: ``header`` (the JSON file's top-level fields but ``steps``) with the counts
    and routes."""
    doc = dict(header)
    doc["num_steps"] = schedule.num_steps
    doc["num_transfers"] = schedule.num_transfers
    doc["routes"] = [list(r) for r in routes]
    return doc


def _member(name: str, size: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
    info.compress_type = zipfile.ZIP_STORED
    info.create_system = _ZIP_UNIX
    info.external_attr = _ZIP_MODE
    info.file_size = size  # lets zipfile choose zip64 fields for members over 2 GiB, and only then
    return info


def _write_column(archive: zipfile.ZipFile, name: str, column: np.ndarray, dtype: np.dtype) -> None:
    head = npy_header(dtype, column.size)
    with archive.open(_member(f"{name}.npy", len(head) + column.size * dtype.itemsize), "w") as out:
        out.write(head)
        step = max(1, READ_BLOCK // max(dtype.itemsize, 1))
        for lo in range(0, column.size, step):
            part = column[lo : lo + step]
            out.write(memoryview(np.ascontiguousarray(part, dtype=dtype)).cast("B"))


def write_schedule_npz(schedule: ScheduleColumns, header: dict[str, Any], fh: BinaryIO) -> None:
    """Write ``schedule`` in the columnar encoding to the binary file ``fh`` (seekable);
    ``header`` holds the JSON file's top-level fields but ``steps``."""
    routes, remap = canonical_routes(schedule)
    text = json.dumps(header_document(schedule, header, routes), sort_keys=True, ensure_ascii=True) + "\n"
    route = schedule.route if remap is None else remap[schedule.route]
    columns = {
        "step_starts": (schedule.step_starts, np.dtype("<i8")),
        "src": (schedule.src, _narrowest(schedule.src)),
        "dst": (schedule.dst, _narrowest(schedule.dst)),
        "chunk": (schedule.chunk, _narrowest(schedule.chunk)),
        "op": (schedule.op, np.dtype("|u1")),
        "route": (route, np.dtype("<i4") if len(routes) <= np.iinfo(np.int32).max else np.dtype("<i8")),
    }
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        data = text.encode("ascii")
        with archive.open(_member(HEADER_MEMBER, len(data)), "w") as out:
            out.write(data)
        for name in COLUMNS:
            column, dtype = columns[name]
            _write_column(archive, name, column, dtype)


# ======================================================================================= reading
def _open_regular(path: str | Path) -> int | None:
    """A descriptor of the regular file ``path``, or None if it is something else (a device or
    FIFO, which is never waited on) or cannot be opened."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(str(path), flags)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def is_zip_file(path: str | Path) -> bool:
    """Whether ``path`` is a regular file that starts like a zip archive (False if it cannot be
    read: the JSON reader then says why)."""
    fd = _open_regular(path)
    if fd is None:
        return False
    with os.fdopen(fd, "rb") as fh:
        return fh.read(len(ZIP_MAGIC)) == ZIP_MAGIC


def npz_transfer_count(path: str | Path) -> int | None:
    """The number of transfers a ``.npz`` schedule holds, from its ``src.npy`` member's own header
    (a few hundred bytes read), or None if that cannot be read: a command may refuse a schedule
    too large for it before reading gigabytes of columns (reading the file reports any error)."""
    if not is_zip_file(path):
        return None
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            archive = _Archive(fh, str(path))
            with archive.open("src.npy") as stream:
                version = np.lib.format.read_magic(stream)
                read_header = np.lib.format.read_array_header_2_0 if version == (2, 0) else np.lib.format.read_array_header_1_0
                shape, _, _ = read_header(stream, max_header_size=MAX_NPY_HEADER_BYTES)
    except (InputError, ValueError, TypeError, SyntaxError, OSError, EOFError, zipfile.BadZipFile):
        return None
    if len(shape) != 1 or type(shape[0]) is not int:
        return None
    return shape[0]


class _Archive:
    """An opened schedule archive: its members by name, each read within the bytes it may hold."""

    def __init__(self, fh: BinaryIO, source: str):
        self.source = source
        self._check_member_count(fh)
        try:
            self.zip = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
            raise self.error("", f"not a readable zip archive ({exc})") from None
        self.members: dict[str, zipfile.ZipInfo] = {}
        wanted = {HEADER_MEMBER, *(f"{c}.npy" for c in COLUMNS)}
        for info in self.zip.infolist():
            if info.filename not in wanted:
                continue  # unknown members are ignored
            if info.filename in self.members:
                raise self.error(info.filename, "appears twice in the archive")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise self.error(info.filename, f"compression method {info.compress_type}: members must be stored or deflated")
            if info.flag_bits & 0x1:
                raise self.error(info.filename, "is encrypted")
            self.members[info.filename] = info
        missing = sorted(wanted - set(self.members))
        if missing:
            raise self.error("", f"not a schedule archive: no {', '.join(missing)} member(s)")

    def error(self, member: str, reason: str, value: Any = None, *, show_value: bool = False) -> InputError:
        return InputError(self.source, member, value, reason, show_value=show_value)

    def _check_member_count(self, fh: BinaryIO) -> None:
        """Refuse an archive whose central directory lists more members than a schedule needs
        before zipfile builds an object for each (a small file can list millions)."""
        end_record = getattr(zipfile, "_EndRecData", None)
        if end_record is None:
            return
        try:
            record = end_record(fh)
        except (OSError, EOFError, ValueError):
            return  # zipfile reports it
        if record is not None and record[zipfile._ECD_ENTRIES_TOTAL] > MAX_MEMBERS:
            raise self.error("", f"the archive lists {record[zipfile._ECD_ENTRIES_TOTAL]} members; a schedule has 7")

    def open(self, name: str):
        """A stream of the member ``name`` (zipfile never yields more than the size it declares)."""
        try:
            return self.zip.open(self.members[name])
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError, NotImplementedError) as exc:
            raise self.error(name, f"cannot be read ({exc})") from None

    def read_into(self, name: str, stream, view: memoryview, *, last: bool = True) -> None:
        """Fill ``view`` from the member's stream; if it is the ``last`` part, check that the
        member ends there (which also checks its CRC)."""
        filled = 0
        try:
            while filled < len(view):
                got = stream.readinto(view[filled : filled + READ_BLOCK])
                if not got:
                    raise self.error(name, "ends before its data does (truncated)")
                filled += got
            if last and stream.read(1):
                raise self.error(name, "holds bytes after its data")
        except InputError:
            raise
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError) as exc:
            raise self.error(name, f"cannot be read ({exc})") from None


def _parse_header(data: bytes, source: str) -> dict[str, Any]:
    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            dup = next(k for k in keys if keys.count(k) > 1)
            raise ValueError(f"key {dup!r} appears twice in one object")
        return dict(pairs)

    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=no_constant, object_pairs_hook=unique_keys)
    except UnicodeDecodeError:
        raise InputError(source, HEADER_MEMBER, None, "is not UTF-8 text", show_value=False) from None
    except RecursionError:
        raise InputError(source, HEADER_MEMBER, None, "invalid JSON (nested too deeply)", show_value=False) from None
    except ValueError as exc:
        raise InputError(source, HEADER_MEMBER, None, f"invalid JSON ({exc})", show_value=False) from None
    if not isinstance(doc, dict):
        raise InputError(source, HEADER_MEMBER, doc, "expected a JSON object")
    return doc


def _count(header: dict[str, Any], key: str, source: str, maximum: int) -> int:
    value = header.get(key)
    if type(value) is not int:
        raise InputError(source, f"{HEADER_MEMBER}: {key}", value, "expected a non-negative integer")
    if not 0 <= value <= maximum:
        raise InputError(source, f"{HEADER_MEMBER}: {key}", value, f"must be between 0 and {maximum}")
    return value


def _routes(header: dict[str, Any], source: str) -> tuple[tuple[str, ...], ...]:
    field = f"{HEADER_MEMBER}: routes"
    routes = header.get("routes")
    if not isinstance(routes, list) or not routes:
        raise InputError(source, field, routes, "expected a list of switch-name lists, entry 0 = [] (the direct link)")
    # one pass over every name (a large machine's header lists hundreds of thousands of routes);
    # the entry-by-entry walk only names the first bad one
    if not all(type(route) is list for route in routes) or not all(type(name) is str for name in chain.from_iterable(routes)):
        for i, route in enumerate(routes):
            if not isinstance(route, list) or not all(isinstance(name, str) for name in route):
                raise InputError(source, f"{field}[{i}]", route, "expected a list of switch names")
    out = list(map(tuple, routes))
    if out[0] != ():
        raise InputError(source, f"{field}[0]", routes[0], "entry 0 must be [] (the direct link)")
    return tuple(out)


def _read_column(archive: _Archive, name: str, length: int, memory_dtype: np.dtype) -> np.ndarray:
    """Column ``name`` of ``length`` values, checked against the format and converted to
    ``memory_dtype``."""
    member = f"{name}.npy"
    info = archive.members[member]
    if info.file_size > MAX_NPY_HEADER_BYTES + 12 + length * 8:
        raise archive.error(member, f"declares {info.file_size} bytes, more than {length} values can take")
    stream = archive.open(member)
    with stream:
        try:
            version = np.lib.format.read_magic(stream)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream, max_header_size=MAX_NPY_HEADER_BYTES)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream, max_header_size=MAX_NPY_HEADER_BYTES)
            else:
                raise archive.error(member, f"is .npy format {version[0]}.{version[1]}; the schedule format takes 1.0 or 2.0")
        except InputError:
            raise
        except (ValueError, TypeError, SyntaxError, OSError, EOFError, zipfile.BadZipFile) as exc:
            text = " ".join(str(exc).split())[:200]
            raise archive.error(member, f"is not a valid .npy array ({text})") from None
        if dtype.hasobject:
            raise archive.error(member, "holds Python objects (a pickle); the format takes integer columns only")
        allowed = ALLOWED_DTYPES[name]
        if dtype.str not in allowed:
            big = dtype.byteorder == ">" or dtype.str.startswith(">")
            why = "is big-endian" if big else f"has data type {dtype.str}"
            raise archive.error(member, f"{why}; the format takes {' or '.join(allowed)} (little-endian)")
        if fortran:
            raise archive.error(member, "is in Fortran order; the format takes C order")
        if len(shape) != 1:
            raise archive.error(member, f"has shape {shape}; the format takes one dimension")
        if shape[0] != length:
            raise archive.error(member, f"has {shape[0]} values; the header says {length}")
        offset = info.file_size - length * dtype.itemsize
        if offset != stream.tell():
            raise archive.error(
                member,
                f"declares {info.file_size} bytes; its header and {length} values make {stream.tell() + length * dtype.itemsize}",
            )
        out = np.empty(length, dtype=memory_dtype)
        if dtype == memory_dtype:
            archive.read_into(member, stream, memoryview(out).cast("B"))
        else:  # converted a block at a time: no second copy of the column
            rows = max(1, READ_BLOCK // dtype.itemsize)
            buffer = np.empty(min(rows, length), dtype=dtype)
            for lo in range(0, length, rows):
                part = buffer[: min(rows, length - lo)]
                archive.read_into(member, stream, memoryview(part).cast("B"), last=lo + rows >= length)
                out[lo : lo + part.size] = part
            if not length:
                archive.read_into(member, stream, memoryview(buffer).cast("B"))
    out.setflags(write=False)  # handed to the schedule as it is
    return out


def read_npz_document(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read a ``.npz`` schedule file: the schedule document without its steps (the JSON file's
    top-level fields) and its checked columns, for `synth.schedule.schedule_from_document`
    (which checks the rest; `synth.verify.verify` checks the transfers' meaning)."""
    source = str(path)
    fd = _open_regular(path)
    if fd is None:
        if os.path.exists(source) and not os.path.isdir(source) and os.access(source, os.R_OK):
            reason = "is not a regular file (a device, FIFO or socket); give a file"
        else:
            reason = "cannot be read (missing, a folder, or not readable)"
        raise InputError(source, "", None, reason, show_value=False)
    with os.fdopen(fd, "rb") as fh:
        return _read(_Archive(fh, source), source)


def _read(archive: _Archive, source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    info = archive.members[HEADER_MEMBER]
    if info.file_size > MAX_HEADER_BYTES:
        raise archive.error(
            HEADER_MEMBER, f"declares {format_bytes(info.file_size)}; a header takes at most {format_bytes(MAX_HEADER_BYTES)}"
        )
    have = available_memory()
    if info.file_size * HEADER_MEMORY_FACTOR > have:
        raise archive.error(
            HEADER_MEMBER, f"parsing its {format_bytes(info.file_size)} would need more than the {format_bytes(have)} available"
        )
    data = bytearray(info.file_size)
    with archive.open(HEADER_MEMBER) as stream:
        archive.read_into(HEADER_MEMBER, stream, memoryview(data))
    header = _parse_header(bytes(data), source)
    if "steps" in header:
        raise InputError(
            source, f"{HEADER_MEMBER}: steps", None, "the columns hold the transfers; a header has no steps", show_value=False
        )
    num_steps = _count(header, "num_steps", source, MAX_STEPS)
    num_transfers = _count(header, "num_transfers", source, MAX_TRANSFERS)
    routes = _routes(header, source)
    need = num_transfers * READ_BYTES_PER_TRANSFER + (num_steps + 1) * 8
    have = available_memory()
    if need > have:
        raise InputError(
            source,
            f"{HEADER_MEMBER}: num_transfers",
            num_transfers,
            f"reading this schedule would need about {format_bytes(need)}; {format_bytes(have)} is available",
        )
    step_starts = _read_column(archive, "step_starts", num_steps + 1, np.dtype(np.int64))
    _check_step_starts(step_starts, num_transfers, source)
    columns: dict[str, Any] = {"step_starts": step_starts, "routes": routes}
    for name in ("src", "dst", "chunk"):
        columns[name] = _read_column(archive, name, num_transfers, np.dtype(np.int64))
    op = _read_column(archive, "op", num_transfers, np.dtype(np.uint8))
    if num_transfers and int(op.max()) > OP_MAX:
        i = int(np.flatnonzero(op > OP_MAX)[0])
        raise InputError(source, f"op.npy[{i}]", int(op[i]), "expected 0 (copy) or 1 (reduce)")
    columns["op"] = op
    route = _read_column(archive, "route", num_transfers, np.dtype(np.int64))
    if num_transfers and (int(route.min()) < 0 or int(route.max()) >= len(routes)):
        i = int(np.flatnonzero((route < 0) | (route >= len(routes)))[0])
        raise InputError(
            source, f"route.npy[{i}]", int(route[i]), f"not an index into header.json's routes (0..{len(routes) - 1})"
        )
    columns["route"] = route
    doc = {k: v for k, v in header.items() if k not in ("num_steps", "num_transfers", "routes")}
    doc["steps"] = []
    return doc, columns


def _check_step_starts(step_starts: np.ndarray, num_transfers: int, source: str) -> None:
    field = "step_starts.npy"
    if int(step_starts[0]) != 0:
        raise InputError(source, f"{field}[0]", int(step_starts[0]), "must be 0")
    last = step_starts.size - 1
    if int(step_starts[last]) != num_transfers:
        raise InputError(source, f"{field}[{last}]", int(step_starts[last]), f"must be num_transfers ({num_transfers})")
    down = np.flatnonzero(step_starts[1:] < step_starts[:-1])
    if down.size:
        i = int(down[0]) + 1
        raise InputError(
            source, f"{field}[{i}]", int(step_starts[i]), f"decreases (step_starts[{i - 1}] = {int(step_starts[i - 1])})"
        )
