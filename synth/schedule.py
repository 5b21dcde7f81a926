"""Schedules: steps of chunk transfers, in memory and as ``synth-schedule`` JSON files.

A `Schedule` stores its transfers column-wise (numpy arrays of src, dst, chunk, op and a route id
into a table of switch paths) so that schedules with millions of transfers stay compact and can be
checked and simulated with vectorized code. `Schedule.steps` gives the familiar list-of-steps view
of `Transfer` objects for small schedules and tests.

Synthesizers build schedules with `ScheduleBuilder`, which sorts the transfers of each step into a
canonical order (a step is a set: every transfer reads the state at the start of the step), so the
same inputs always serialize to the same bytes.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from json.encoder import encode_basestring_ascii
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

import numpy as np

from synth.collective import ROOTED, Collective, Kind, collective_from_counts
from synth.errors import InputError
from synth.fileio import Written, check_depth, parse_json, read_input_bytes, write_stream_atomic
from synth.limits import MAX_JSON_DEPTH, require_memory
from synth.schedule_npz import is_npz_path, is_zip_file, read_npz_document, write_schedule_npz
from synth.text import printable
from synth.topology import Topology

SCHEDULE_FORMAT = "synth-schedule"
SCHEDULE_VERSION = 1

OP_COPY = 0
OP_REDUCE = 1
OP_NAMES = ("copy", "reduce")
OP_CODES = {"copy": OP_COPY, "reduce": OP_REDUCE}


@dataclass(frozen=True)
class Transfer:
    """One chunk moved from rank ``src`` to rank ``dst`` in one step, directly or through the
    switches named in ``via``; ``op`` is ``"copy"`` or ``"reduce"``."""

    src: int
    dst: int
    chunk: int
    op: str = "copy"
    via: tuple[str, ...] = ()


def _frozen(array: np.ndarray, dtype) -> np.ndarray:
    """A read-only column of ``dtype``. A column that is already read-only, contiguous, of that
    type and owns its memory (what the builder and the file readers hand over, or another
    schedule's column) is taken as it is: columns of millions of transfers are not copied again.
    Anything else is copied, so no caller can change a schedule through an array it kept."""
    out = np.ascontiguousarray(array, dtype=dtype)
    if out is array and (array.flags.writeable or not array.flags.owndata):
        out = out.copy()
    out.setflags(write=False)
    return out


def _freeze_params(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(json.loads(json.dumps(dict(params or {}), sort_keys=True)))


@dataclass(frozen=True, eq=False)
class Schedule:
    """A collective schedule. Transfer ``i`` belongs to step ``s`` when
    ``step_starts[s] <= i < step_starts[s + 1]``; ``routes[route[i]]`` is its tuple of switch names
    (``routes[0]`` is the direct route ``()``)."""

    collective: Collective
    topology_name: str
    topology_sha256: str
    method: str
    params: Mapping[str, Any]
    step_starts: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    chunk: np.ndarray
    op: np.ndarray
    route: np.ndarray
    routes: tuple[tuple[str, ...], ...] = ((),)
    source: str = field(default="<schedule>", compare=False)
    #: Where the topology came from (``topology.source``: ``builtin:NAME`` or a path relative to
    #: the schedule file's folder), so later commands find it; "" when not recorded.
    topology_source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _freeze_params(self.params))
        object.__setattr__(self, "step_starts", _frozen(self.step_starts, np.int64))
        for name, dtype in (("src", np.int64), ("dst", np.int64), ("chunk", np.int64), ("op", np.uint8), ("route", np.int64)):
            object.__setattr__(self, name, _frozen(getattr(self, name), dtype))
        n = len(self.src)
        if not (len(self.dst) == len(self.chunk) == len(self.op) == len(self.route) == n):
            raise ValueError("transfer columns differ in length")
        if len(self.step_starts) < 1 or self.step_starts[0] != 0 or self.step_starts[-1] != n:
            raise ValueError("step_starts must run from 0 to the number of transfers")
        if np.any(np.diff(self.step_starts) < 0):
            raise ValueError("step_starts must not decrease")
        if not self.routes or self.routes[0] != ():
            raise ValueError("routes[0] must be the direct route ()")

    # ----------------------------------------------------------------------------------- views
    @property
    def num_steps(self) -> int:
        return len(self.step_starts) - 1

    @property
    def num_transfers(self) -> int:
        return len(self.src)

    @cached_property
    def step_of_transfer(self) -> np.ndarray:
        """Step index of every transfer."""
        arr = np.repeat(np.arange(self.num_steps, dtype=np.int64), np.diff(self.step_starts))
        arr.setflags(write=False)
        return arr

    def step_slice(self, step: int) -> slice:
        return slice(int(self.step_starts[step]), int(self.step_starts[step + 1]))

    def transfer(self, index: int) -> Transfer:
        return Transfer(
            int(self.src[index]),
            int(self.dst[index]),
            int(self.chunk[index]),
            OP_NAMES[int(self.op[index])] if int(self.op[index]) < len(OP_NAMES) else "?",
            self.routes[int(self.route[index])],
        )

    def step(self, step: int) -> list[Transfer]:
        sl = self.step_slice(step)
        return [self.transfer(i) for i in range(sl.start, sl.stop)]

    @property
    def steps(self) -> list[list[Transfer]]:
        """All steps as lists of `Transfer` (convenient for small schedules)."""
        return [self.step(s) for s in range(self.num_steps)]

    def __iter__(self) -> Iterator[list[Transfer]]:
        return (self.step(s) for s in range(self.num_steps))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        return (
            self.collective == other.collective
            and self.topology_name == other.topology_name
            and self.topology_sha256 == other.topology_sha256
            and self.method == other.method
            and dict(self.params) == dict(other.params)
            and self.num_steps == other.num_steps
            and np.array_equal(self.step_starts, other.step_starts)
            and np.array_equal(self.src, other.src)
            and np.array_equal(self.dst, other.dst)
            and np.array_equal(self.chunk, other.chunk)
            and np.array_equal(self.op, other.op)
            and [self.routes[i] for i in self.route] == [other.routes[i] for i in other.route]
        )

    __hash__ = None  # type: ignore[assignment]

    def summary(self) -> str:
        """One line; the method and topology names are escaped (they come from files)."""
        return (
            f"{self.collective.describe()}, {self.num_steps} steps, {self.num_transfers} transfers"
            f" (method {printable(self.method)}, topology {printable(self.topology_name)})"
        )

    # ----------------------------------------------------------------------------------- edits
    def with_steps(self, steps: Iterable[Iterable[Transfer]]) -> Schedule:
        """A copy with other steps (same collective and provenance), in the given order."""
        builder = ScheduleBuilder.like(self)
        for step in steps:
            builder.add_step(step)
        return builder.build(normalize=False, drop_empty=False)


def same_transfers(a: Schedule, b: Schedule) -> bool:
    """The same collective and the same transfers step by step (method and params aside): e.g. a
    method that was asked for two sizes and gave the same schedule for both."""
    if a.collective != b.collective or a.num_transfers != b.num_transfers or a.step_starts.shape != b.step_starts.shape:
        return False
    if not all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("step_starts", "src", "dst", "chunk", "op")):
        return False
    return [a.routes[i] for i in a.route] == [b.routes[i] for i in b.route]


#: Column types while a schedule is built and in the built schedule: src, dst, chunk, op, route.
_COLUMN_TYPES = (np.int64, np.int64, np.int64, np.uint8, np.int64)
#: Rows of the first block of a builder's columns; blocks double up to `_MAX_BLOCK_ROWS` rows
#: (64 MB per int64 column: allocated and returned to the system whole, never fragmented).
_FIRST_BLOCK_ROWS = 1 << 10
_MAX_BLOCK_ROWS = 1 << 23


class _ColumnBlocks:
    """Transfers appended step by step into blocks of columns, read back step by step by `take`,
    which frees every block it has read to its end: building a schedule of millions of transfers
    then holds about one copy of its columns, not two."""

    def __init__(self) -> None:
        self.blocks: list[list[np.ndarray] | None] = []
        self.used = 0  # rows filled in the last block
        self.step_sizes: list[int] = []
        self.total = 0
        self._read_block = 0
        self._read_row = 0

    def reserve(self, rows: int) -> None:
        """Make the first block ``rows`` long (before anything is appended): a caller that knows
        how many transfers it will add gets them in one block, which `ScheduleBuilder.build`
        hands to the schedule without copying it."""
        if not self.blocks and rows > 0:
            self.blocks.append([np.empty(rows, dtype=t) for t in _COLUMN_TYPES])
            self.used = 0

    def whole(self) -> list[np.ndarray] | None:
        """The columns, if they fill exactly one block (nothing read yet); the blocks are let go."""
        if len(self.blocks) != 1 or self._read_row or self.blocks[0] is None or self.blocks[0][0].shape[0] != self.total:
            return None
        block, self.blocks = self.blocks[0], []
        return block

    def append(self, columns: Sequence[Any], n: int) -> None:
        """One step of ``n`` transfers; each column is an array of ``n`` values or a scalar."""
        done = 0
        while done < n:
            if not self.blocks or self.used == self.blocks[-1][0].shape[0]:  # type: ignore[index]
                rows = min(_MAX_BLOCK_ROWS, max(_FIRST_BLOCK_ROWS, self.total))
                self.blocks.append([np.empty(rows, dtype=t) for t in _COLUMN_TYPES])
                self.used = 0
            block = self.blocks[-1]
            assert block is not None
            take = min(n - done, block[0].shape[0] - self.used)
            for col, values in zip(block, columns):
                col[self.used : self.used + take] = values if np.ndim(values) == 0 else values[done : done + take]
            self.used += take
            done += take
        self.step_sizes.append(n)
        self.total += n

    def take(self, n: int) -> list[np.ndarray]:
        """The next ``n`` rows (in append order) as five columns."""
        pieces: list[list[np.ndarray]] = [[] for _ in _COLUMN_TYPES]
        while n > 0:
            block = self.blocks[self._read_block]
            assert block is not None
            filled = self.used if self._read_block == len(self.blocks) - 1 else block[0].shape[0]
            part = min(n, filled - self._read_row)
            for i, col in enumerate(block):
                pieces[i].append(col[self._read_row : self._read_row + part])
            self._read_row += part
            n -= part
            if self._read_row == block[0].shape[0]:
                self.blocks[self._read_block] = None  # read to its end: free it
                self._read_block += 1
                self._read_row = 0
        return [p[0] if len(p) == 1 else np.concatenate(p) if p else np.zeros(0, dtype=t) for p, t in zip(pieces, _COLUMN_TYPES)]


class ScheduleBuilder:
    """Accumulates steps and produces a `Schedule` in canonical order.

    ``add_step`` takes `Transfer` objects or ``(src, dst, chunk[, op[, via]])`` tuples;
    ``add_step_arrays`` takes numpy columns for vectorized synthesizers. `build` hands the
    columns over to the schedule (the builder is empty afterwards).
    """

    def __init__(
        self,
        collective: Collective,
        topology: Topology | None = None,
        method: str = "unknown",
        params: Mapping[str, Any] | None = None,
        *,
        topology_name: str | None = None,
        topology_sha256: str | None = None,
        topology_source: str = "",
    ):
        self.collective = collective
        self.topology_name = topology_name if topology_name is not None else (topology.name if topology else "")
        self.topology_sha256 = topology_sha256 if topology_sha256 is not None else (topology.sha256 if topology else "")
        self.topology_source = topology_source
        self.method = method
        self.params: dict[str, Any] = dict(params or {})
        self._routes: dict[tuple[str, ...], int] = {(): 0}
        self._columns = _ColumnBlocks()

    @classmethod
    def like(cls, schedule: Schedule) -> ScheduleBuilder:
        return cls(
            schedule.collective,
            method=schedule.method,
            params=schedule.params,
            topology_name=schedule.topology_name,
            topology_sha256=schedule.topology_sha256,
            topology_source=schedule.topology_source,
        )

    def route_id(self, via: Sequence[str]) -> int:
        key = tuple(via)
        rid = self._routes.get(key)
        if rid is None:
            rid = self._routes[key] = len(self._routes)
        return rid

    @property
    def num_steps(self) -> int:
        return len(self._columns.step_sizes)

    def reserve(self, transfers: int) -> None:
        """Room for ``transfers`` transfers at once, before the first step is added: when that
        is exactly how many are added, `build` hands their columns to the schedule as they are
        (sorted in place) instead of copying them (for millions of transfers, a copy of the
        columns less to allocate and fill). A hint only: any other count works as without it."""
        self._columns.reserve(transfers)

    def add_step(self, transfers: Iterable[Transfer | tuple]) -> None:
        src: list[int] = []
        dst: list[int] = []
        chunk: list[int] = []
        op: list[int] = []
        route: list[int] = []
        for t in transfers:
            if isinstance(t, Transfer):
                s, d, c, o, v = t.src, t.dst, t.chunk, t.op, t.via
            else:
                s, d, c = t[0], t[1], t[2]
                o = t[3] if len(t) > 3 else "copy"
                v = t[4] if len(t) > 4 else ()
            src.append(s)
            dst.append(d)
            chunk.append(c)
            op.append(OP_CODES[o] if isinstance(o, str) else int(o))
            route.append(self.route_id(v) if v else 0)
        columns = [np.asarray(col, dtype=t) for col, t in zip((src, dst, chunk, op, route), _COLUMN_TYPES)]
        self._columns.append(columns, len(src))

    def add_step_arrays(self, src, dst, chunk, op=OP_COPY, route=0) -> None:
        """Append a step from numpy columns; ``dst``, ``chunk``, ``op`` and ``route`` may be
        scalars."""
        src = np.asarray(src, dtype=np.int64)
        n = src.shape[0]
        columns = [src]
        for values, t in zip((dst, chunk, op, route), _COLUMN_TYPES[1:]):
            values = np.asarray(values, dtype=t)
            if values.ndim and values.shape != (n,):
                values = np.broadcast_to(values, (n,))
            columns.append(values)
        self._columns.append(columns, n)

    def extend(self, schedule: Schedule) -> None:
        """Append all steps of another schedule (same chunk numbering)."""
        remap = np.array([self.route_id(r) for r in schedule.routes], dtype=np.int64)
        for s in range(schedule.num_steps):
            sl = schedule.step_slice(s)
            route = remap[schedule.route[sl]]
            self._columns.append((schedule.src[sl], schedule.dst[sl], schedule.chunk[sl], schedule.op[sl], route), route.size)

    def build(self, *, normalize: bool = True, drop_empty: bool = True) -> Schedule:
        """The schedule. ``normalize`` sorts each step canonically and renumbers routes in sorted
        order; ``drop_empty`` removes steps with no transfer. The columns are handed over: the
        builder holds no transfer afterwards."""
        routes_by_id = sorted(self._routes, key=self._routes.__getitem__)
        if normalize:
            order = sorted(range(len(routes_by_id)), key=lambda i: routes_by_id[i])  # () sorts first
            new_id = np.empty(len(routes_by_id), dtype=np.int64)
            new_id[order] = np.arange(len(order))
            routes = tuple(routes_by_id[i] for i in order)
            renumber = not np.array_equal(new_id, np.arange(len(routes_by_id)))
        else:
            routes = tuple(routes_by_id)
            renumber = False
        store, self._columns = self._columns, _ColumnBlocks()
        total = store.total
        whole = store.whole()  # one block holds every transfer: sorted and handed over in place
        out = whole if whole is not None else [np.empty(total, dtype=t) for t in _COLUMN_TYPES]
        starts = [0]
        at = 0
        for size in store.step_sizes:
            if size == 0:
                if not drop_empty:
                    starts.append(at)
                continue
            if whole is not None:
                src, dst, chunk, op, route = (col[at : at + size] for col in whole)
            else:
                src, dst, chunk, op, route = store.take(size)
            changed = whole is None
            if renumber:
                route, changed = new_id[route], True
            if normalize and size > 1 and not _in_order((src, dst, chunk, op, route)):
                perm = np.lexsort((route, op, chunk, dst, src))
                src, dst, chunk, op, route = src[perm], dst[perm], chunk[perm], op[perm], route[perm]
                changed = True
            if changed:
                for col, values in zip(out, (src, dst, chunk, op, route)):
                    col[at : at + size] = values
            at += size
            starts.append(at)
        for col in out:
            col.setflags(write=False)  # handed to the schedule as they are (`_frozen`)
        return Schedule(
            collective=self.collective,
            topology_name=self.topology_name,
            topology_sha256=self.topology_sha256,
            method=self.method,
            params=self.params,
            step_starts=np.asarray(starts, dtype=np.int64),
            src=out[0],
            dst=out[1],
            chunk=out[2],
            op=out[3],
            route=out[4],
            routes=routes,
            topology_source=self.topology_source,
        )


def _in_order(columns: tuple[np.ndarray, ...]) -> bool:
    """Whether the rows are already in lexicographic order of the columns (a linear check, so
    that steps a synthesizer wrote in order are not sorted again)."""
    before = np.zeros(columns[0].shape[0] - 1, dtype=bool)  # row i < row i+1 decided already
    equal = np.ones_like(before)
    for col in columns:
        a, b = col[:-1], col[1:]
        if np.any(equal & (a > b)):
            return False
        before |= equal & (a < b)
        equal &= a == b
    return True


def schedule_from_steps(
    collective: Collective,
    steps: Iterable[Iterable[Transfer | tuple]],
    topology: Topology | None = None,
    method: str = "manual",
    params: Mapping[str, Any] | None = None,
    *,
    normalize: bool = False,
) -> Schedule:
    """A schedule from explicit steps (for tests and hand-written schedules); keeps the given order
    and empty steps unless ``normalize``."""
    builder = ScheduleBuilder(collective, topology, method, params)
    for step in steps:
        builder.add_step(step)
    return builder.build(normalize=normalize, drop_empty=normalize)


# ===================================================================================== JSON I/O
def schedule_header(schedule: Schedule, topology_source: str | None = None) -> dict[str, Any]:
    """The schedule file's top-level fields but ``steps`` (both encodings write them)."""
    c = schedule.collective
    topology = {"name": schedule.topology_name, "sha256": schedule.topology_sha256}
    source = schedule.topology_source if topology_source is None else topology_source
    if source:
        topology["source"] = source
    return {
        "collective": {
            "name": c.kind.value,
            "num_chunks": c.num_chunks,
            "num_ranks": c.num_ranks,
            "root": c.root,
        },
        "format": SCHEDULE_FORMAT,
        "synthesizer": {"method": schedule.method, "params": dict(schedule.params)},
        "topology": topology,
        "version": SCHEDULE_VERSION,
    }


def schedule_to_json(schedule: Schedule, *, topology_source: str | None = None) -> str:
    """Deterministic text of a schedule file: sorted keys everywhere, one step per line.
    ``topology_source`` (default: the schedule's own) is recorded as ``topology.source``."""
    return "".join(schedule_json_pieces(schedule, topology_source=topology_source))


#: The JSON writer turns columns into Python lists this many transfers at a time (whole steps).
JSON_BLOCK_TRANSFERS = 1 << 16


def _via_text(route: tuple[str, ...]) -> str:
    """``json.dumps(list(route), ensure_ascii=True)``, without building an encoder per route."""
    return "[" + ", ".join(map(encode_basestring_ascii, route)) + "]"


def schedule_json_pieces(schedule: Schedule, *, topology_source: str | None = None) -> Iterator[str]:
    """The text of `schedule_to_json` in pieces (the header lines, then one piece per step line),
    so that a file of millions of transfers is written without holding its text: memory stays at
    the Python objects of `JSON_BLOCK_TRANSFERS` transfers."""
    header = schedule_header(schedule, topology_source)
    op_text = [json.dumps(name) for name in OP_NAMES]
    for key in ("collective", "format"):
        yield "{\n" if key == "collective" else ""
        yield f'  "{key}": {json.dumps(header[key], sort_keys=True, ensure_ascii=True)},\n'
    if schedule.num_steps == 0:
        yield '  "steps": [],\n'
    else:
        yield '  "steps": [\n'
        via_text = [_via_text(r) for r in schedule.routes]
        starts = schedule.step_starts.tolist()
        last = schedule.num_steps - 1
        first_step = 0
        while first_step <= last:
            # whole steps, together at most JSON_BLOCK_TRANSFERS transfers (at least one step)
            lo = starts[first_step]
            end_step = bisect.bisect_right(starts, lo + JSON_BLOCK_TRANSFERS, first_step + 1, last + 2) - 1
            end_step = max(end_step, first_step + 1)
            hi = starts[end_step]
            src = schedule.src[lo:hi].tolist()
            dst = schedule.dst[lo:hi].tolist()
            chunk = schedule.chunk[lo:hi].tolist()
            op = schedule.op[lo:hi].tolist()
            route = schedule.route[lo:hi].tolist()
            for s in range(first_step, end_step):
                items = [
                    f'{{"chunk": {chunk[i]}, "dst": {dst[i]}, "op": {op_text[op[i]]}, '
                    f'"src": {src[i]}, "via": {via_text[route[i]]}}}'
                    for i in range(starts[s] - lo, starts[s + 1] - lo)
                ]
                yield "    [" + ", ".join(items) + ("],\n" if s < last else "]\n")
            first_step = end_step
        yield "  ],\n"
    for key in ("synthesizer", "topology"):
        yield f'  "{key}": {json.dumps(header[key], sort_keys=True, ensure_ascii=True)},\n'
    yield f'  "version": {SCHEDULE_VERSION}\n}}\n'


INT64_MAX = 2**63 - 1
#: Bounds of the header's counts: far beyond any machine, small enough for int64 arithmetic
#: (rank pairs, chunk ids); the verifier checks the counts against the topology and transfers.
MAX_RANKS = 2**31
MAX_CHUNKS = 2**48


def _expect_int(value: Any, source: str, field: str, *, minimum: int | None = None, maximum: int = INT64_MAX) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError(source, field, value, "expected an integer")
    if minimum is not None and value < minimum:
        raise InputError(source, field, value, f"must be at least {minimum}")
    if value > maximum:
        raise InputError(source, field, value, f"must be at most {maximum}")
    return value


def schedule_from_document(doc: Any, source: str = "<schedule>", *, columns: dict[str, Any] | None = None) -> Schedule:
    """Validate the structure of a parsed ``synth-schedule`` document and build the `Schedule`.

    Structural problems (missing fields, wrong types, unknown collective) raise `InputError`.
    Whether the transfers make sense (ranks in range, links exist, data held) is the verifier's job.
    """
    if not isinstance(doc, Mapping):
        raise InputError(source, "(top level)", doc, "expected a JSON object")

    for key, value in doc.items():
        if key != "steps":  # transfers are checked entry by entry below
            check_depth(value, source, str(key), limit=MAX_JSON_DEPTH - 1)
    if doc.get("format") != SCHEDULE_FORMAT:
        raise InputError(source, "format", doc.get("format"), f"expected {SCHEDULE_FORMAT!r}")
    version = doc.get("version")
    if version != SCHEDULE_VERSION or isinstance(version, bool):
        raise InputError(source, "version", version, f"expected {SCHEDULE_VERSION}")

    coll = doc.get("collective")
    if not isinstance(coll, Mapping):
        raise InputError(source, "collective", coll, "expected an object with name, num_ranks, num_chunks, root")
    name = coll.get("name")
    try:
        kind = Kind(name)
    except ValueError:
        names = ", ".join(k.value for k in Kind)
        raise InputError(source, "collective.name", name, f"unknown collective (expected one of {names})") from None
    num_ranks = _expect_int(coll.get("num_ranks"), source, "collective.num_ranks", minimum=1, maximum=MAX_RANKS)
    num_chunks = _expect_int(coll.get("num_chunks"), source, "collective.num_chunks", minimum=1, maximum=MAX_CHUNKS)
    root = coll.get("root")
    if kind in ROOTED:
        if root is None:
            raise InputError(source, "collective.root", root, f"{kind.value} needs a root rank")
        root = _expect_int(root, source, "collective.root", minimum=0)
        if root >= num_ranks:
            raise InputError(source, "collective.root", root, f"not a rank (0..{num_ranks - 1})")
    elif root is not None:
        raise InputError(source, "collective.root", root, f"{kind.value} has no root; use null")
    try:
        collective = collective_from_counts(kind, num_ranks, num_chunks, root)
    except ValueError as exc:
        raise InputError(source, "collective.num_chunks", num_chunks, str(exc)) from None

    topo = doc.get("topology")
    if not isinstance(topo, Mapping):
        raise InputError(source, "topology", topo, "expected an object with name and sha256")
    topo_name = topo.get("name", "")
    topo_sha = topo.get("sha256", "")
    if not isinstance(topo_name, str):
        raise InputError(source, "topology.name", topo_name, "expected a string")
    if not isinstance(topo_sha, str):
        raise InputError(source, "topology.sha256", topo_sha, "expected a hex string")
    topo_source = topo.get("source", "")
    if not isinstance(topo_source, str):
        raise InputError(source, "topology.source", topo_source, "expected a path or builtin:NAME")

    synth = doc.get("synthesizer", {})
    if not isinstance(synth, Mapping):
        raise InputError(source, "synthesizer", synth, "expected an object with method and params")
    method = synth.get("method", "unknown")
    if not isinstance(method, str):
        raise InputError(source, "synthesizer.method", method, "expected a string")
    params = synth.get("params", {})
    if not isinstance(params, Mapping):
        raise InputError(source, "synthesizer.params", params, "expected an object")

    steps = doc.get("steps")
    if not isinstance(steps, list):
        raise InputError(source, "steps", steps, "expected a list of steps")
    columns = _steps_from_json(steps, source) if columns is None else columns
    return Schedule(
        collective=collective,
        topology_name=topo_name,
        topology_sha256=topo_sha,
        method=method,
        params=params,
        source=source,
        topology_source=topo_source,
        **columns,
    )


def _steps_from_json(steps: list, source: str) -> dict[str, Any]:
    """Transfer columns from the parsed ``steps`` list (with exact errors for malformed entries)."""
    routes: dict[tuple[str, ...], int] = {(): 0}
    src: list[int] = []
    dst: list[int] = []
    chunk: list[int] = []
    op: list[int] = []
    route: list[int] = []
    starts = [0]
    op_codes = OP_CODES
    for si, step in enumerate(steps):
        if not isinstance(step, list):
            raise InputError(source, f"steps[{si}]", step, "a step is a list of transfers")
        for ti, t in enumerate(step):
            try:
                s, d, c = t["src"], t["dst"], t["chunk"]
                if type(s) is not int or type(d) is not int or type(c) is not int:
                    raise TypeError
                o = op_codes[t.get("op", "copy")]
                via = t.get("via")
                rid = 0
                if via:
                    if type(via) is not list:
                        raise TypeError
                    key = tuple(via)
                    rid = routes.get(key, -1)
                    if rid < 0:
                        if not all(isinstance(v, str) for v in key):
                            raise TypeError
                        rid = routes[key] = len(routes)
                elif via is not None and via != []:
                    raise TypeError
            except (KeyError, TypeError, AttributeError):
                _explain_transfer(t, f"steps[{si}][{ti}]", source)
                raise  # _explain_transfer always raises; keeps type checkers happy
            src.append(s)
            dst.append(d)
            chunk.append(c)
            op.append(o)
            route.append(rid)
        starts.append(len(src))
    try:
        columns = [np.asarray(col, dtype=np.int64) for col in (src, dst, chunk)]
    except OverflowError:
        _explain_overflow(steps, source)
        raise
    return {
        "step_starts": np.asarray(starts, dtype=np.int64),
        "src": columns[0],
        "dst": columns[1],
        "chunk": columns[2],
        "op": np.asarray(op, dtype=np.uint8),
        "route": np.asarray(route, dtype=np.int64),
        "routes": tuple(sorted(routes, key=routes.__getitem__)),
    }


# Fast path for files in the layout `schedule_to_json` writes (one step per line, fixed key order):
# each step line must match exactly, or the general JSON path is used instead. It accepts a subset
# of JSON and gives what the general path gives for it: numbers without leading zeros and below
# 10**18 (so they fit int64), switch names of printable ASCII without escapes, a comma after every
# step line but the last, and a header that parses as strict JSON with exactly one top-level
# "steps" key, the one these lines are the value of (checked with a nonce put in their place).
_NAME = rb'"[\x20\x21\x23-\x5a\x5e-\x7e]*"'
_INT = rb"(?:0|[1-9][0-9]{0,17})"
_TRANSFER = (
    rb'\{"chunk": '
    + _INT
    + rb', "dst": '
    + _INT
    + rb', "op": "(?:copy|reduce)", "src": '
    + _INT
    + rb', "via": \[(?:'
    + _NAME
    + rb"(?:, "
    + _NAME
    + rb")*)?\]\}"
)
_STEP_LINE = re.compile(rb"    \[(?:" + _TRANSFER + rb"(?:, " + _TRANSFER + rb")*)?\]")
_VIA_FIELD = re.compile(rb', "via": (\[[^\]]*\])')
_STEPS_OPEN = b'\n  "steps": [\n'
_STEPS_CLOSE = b'\n  ],\n  "synthesizer"'
FAST_PATH_MIN_BYTES = 1 << 20  # smaller files parse quickly enough as plain JSON
_DIGITS_ONLY = bytes(c if 48 <= c <= 57 else 32 for c in range(256))


def _fast_columns(raw: bytes) -> tuple[bytes, dict[str, Any]] | None:
    """(header JSON without the steps, transfer columns), or None if the layout is not ours."""
    start = raw.find(_STEPS_OPEN)
    end = raw.find(_STEPS_CLOSE)
    if start < 0 or end < start:
        return None
    start += len(_STEPS_OPEN)
    lines = raw[start:end].split(b"\n")
    routes: dict[bytes, int] = {b"[]": 0}
    numbers: list[np.ndarray] = []
    route_ids: list[np.ndarray] = []
    starts = [0]
    last = len(lines) - 1
    for i, line in enumerate(lines):
        stop = len(line)
        if i < last:
            if not line.endswith(b","):
                return None
            stop -= 1  # the comma between steps; matched without copying the line
        if _STEP_LINE.fullmatch(line, 0, stop) is None:
            return None
        count = line.count(b'{"chunk": ')
        starts.append(starts[-1] + count)
        if count == 0:
            continue
        if line.count(b'"via": []') == count:
            route_ids.append(np.zeros(count, dtype=np.int64))
        else:
            ids = [routes.setdefault(v, len(routes)) for v in _VIA_FIELD.findall(line)]
            route_ids.append(np.asarray(ids, dtype=np.int64))
        text = line.replace(b'"op": "copy"', b"0").replace(b'"op": "reduce"', b"1")
        text = _VIA_FIELD.sub(b"", text).translate(_DIGITS_ONLY)
        numbers.append(np.array(text.split(), dtype=np.int64))
    table = np.concatenate(numbers).reshape(-1, 4) if numbers else np.zeros((0, 4), dtype=np.int64)
    decoded = {}
    for text, rid in routes.items():
        names = json.loads(text)
        decoded[rid] = tuple(names)
    if len(set(decoded.values())) != len(decoded):
        return None  # the same route written two ways; let the general path intern it
    columns = {
        "step_starts": np.asarray(starts, dtype=np.int64),
        "chunk": table[:, 0],
        "dst": table[:, 1],
        "op": table[:, 2].astype(np.uint8),
        "src": table[:, 3],
        "route": np.concatenate(route_ids) if route_ids else np.zeros(0, dtype=np.int64),
        "routes": tuple(decoded[i] for i in range(len(decoded))),
    }
    return raw[: start - 2] + b"\x00" + raw[end + 4 :], columns


def _fast_header(template: bytes) -> dict[str, Any] | None:
    """The header of a fast-path file (`_fast_columns`' template with the steps cut out), or None
    unless it is strict JSON whose one top-level "steps" key held the cut-out lines."""
    nonce = secrets.token_hex(16)
    try:
        text = template.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.count("\x00") != 1:  # a raw NUL is never valid JSON: only ours may be there
        return None
    text = text.replace("\x00", f'"{nonce}"')
    top: list[list[tuple[str, Any]]] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        top.append(pairs)
        return dict(pairs)

    try:
        header = json.loads(text, object_pairs_hook=pairs_hook, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(header, dict) or not top:
        return None
    keys = [k for k, _ in top[-1]]
    if keys.count("steps") != 1 or header.get("steps") != nonce:
        return None
    header["steps"] = []
    return header


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _explain_overflow(steps: list, source: str) -> None:
    """Raise the InputError for the first src/dst/chunk outside int64 (the columns' type)."""
    for si, step in enumerate(steps):
        for ti, t in enumerate(step):
            for key in ("src", "dst", "chunk"):
                if not -INT64_MAX - 1 <= t[key] <= INT64_MAX:
                    raise InputError(source, f"steps[{si}][{ti}].{key}", t[key], "integer out of range (int64)")


def _explain_transfer(t: Any, where: str, source: str) -> None:
    """Raise the InputError that says what is wrong with a malformed transfer."""
    if not isinstance(t, Mapping):
        raise InputError(source, where, t, "a transfer is an object with src, dst, chunk, op, via")
    for key in ("src", "dst", "chunk"):
        if key not in t:
            raise InputError(source, where, t, f"transfer needs '{key}'")
        if type(t[key]) is not int:
            raise InputError(source, f"{where}.{key}", t[key], "expected an integer")
    o = t.get("op", "copy")
    if not isinstance(o, str) or o not in OP_CODES:
        raise InputError(source, f"{where}.op", o, "op must be 'copy' or 'reduce'")
    via = t.get("via")
    if via is not None and not isinstance(via, list):
        raise InputError(source, f"{where}.via", via, "via must be a list of switch names")
    for i, v in enumerate(via or []):
        if not isinstance(v, str):
            raise InputError(source, f"{where}.via[{i}]", v, "expected a switch name")
    raise InputError(source, where, t, "malformed transfer")


#: A schedule file larger than this is refused (a 2-million-transfer file is about 170 MB).
MAX_SCHEDULE_BYTES = 4 * 2**30
#: Bytes of memory per byte of file: the fast path (raw bytes, lines, numbers) and the general
#: JSON reader (a Python object per value).
FAST_PATH_MEMORY_FACTOR = 3
JSON_MEMORY_FACTOR = 12


def load_schedule(path: str | Path) -> Schedule:
    """Load a schedule file (structure only; run `synth.verify.verify` to check it): the columnar
    ``.npz`` encoding when the file starts like a zip archive (`synth.schedule_npz`), else JSON.

    Files in the layout that `schedule_to_json` writes are read by a fast path that parses numbers
    with numpy (a 2-million-transfer file in about 2 s instead of 9); anything else goes through
    the general JSON reader, which reports malformed entries by their JSON path. Both accept
    exactly the same files and give the same schedule. The file is read only if it is a regular
    file that fits in `MAX_SCHEDULE_BYTES` and in the memory available."""
    source = str(path)
    if is_zip_file(path):  # the content decides, whatever the extension
        document, columns = read_npz_document(path)
        return schedule_from_document(document, source=source, columns=columns)
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0  # read_input_bytes says what is wrong
    require_memory(size * FAST_PATH_MEMORY_FACTOR, source, "", None, f"reading this {size}-byte schedule")
    raw = read_input_bytes(path, limit=MAX_SCHEDULE_BYTES)
    fast = _fast_columns(raw) if len(raw) >= FAST_PATH_MIN_BYTES else None
    if fast is not None:
        template, columns = fast
        header = _fast_header(template)
        if header is not None:
            return schedule_from_document(header, source=source, columns=columns)
    if len(raw) >= FAST_PATH_MIN_BYTES:
        require_memory(len(raw) * JSON_MEMORY_FACTOR, source, "", None, "reading this schedule as general JSON")
    return schedule_from_document(parse_json(raw, source), source=source)


def save_schedule(
    schedule: Schedule, path: str | Path, *, protect: Iterable[str | Path] = (), topology_source: str | None = None
) -> Written:
    """Write a schedule file atomically, as JSON or, for a path ending in ``.npz``, in the
    columnar encoding (`synth.schedule_npz`); refuses to overwrite any path in ``protect``.
    ``topology_source`` is recorded as ``topology.source`` (`synth.builtin.TopologyLocation`)."""
    if is_npz_path(path):
        header = schedule_header(schedule, topology_source)
        return write_stream_atomic(path, lambda fh: write_schedule_npz(schedule, header, fh), protect=protect)
    return write_stream_atomic(
        path, lambda fh: write_schedule_json(schedule, fh, topology_source=topology_source), protect=protect
    )


def write_schedule_json(schedule: Schedule, fh: BinaryIO, *, topology_source: str | None = None) -> None:
    """Write `schedule_to_json`'s text to the binary file ``fh`` piece by piece (UTF-8)."""
    buffer: list[str] = []
    size = 0
    for piece in schedule_json_pieces(schedule, topology_source=topology_source):
        buffer.append(piece)
        size += len(piece)
        if size >= 1 << 22:
            fh.write("".join(buffer).encode("utf-8"))
            buffer, size = [], 0
    fh.write("".join(buffer).encode("utf-8"))


class TopologyMismatch(InputError):
    """The schedule was made for another topology (hash or rank count differ)."""


def check_topology_match(schedule: Schedule, topology: Topology, topology_source: str = "") -> None:
    """Refuse a schedule made for a different topology (by hash and rank count)."""
    where = topology_source or topology.name
    if schedule.collective.num_ranks != topology.num_ranks:
        raise TopologyMismatch(
            schedule.source,
            "collective.num_ranks",
            schedule.collective.num_ranks,
            f"topology {where} has {topology.num_ranks} ranks",
        )
    if not topology.made_for(schedule.topology_sha256):
        raise TopologyMismatch(
            schedule.source,
            "topology.sha256",
            schedule.topology_sha256[:16] + ("..." if len(schedule.topology_sha256) > 16 else ""),
            f"the schedule was made for topology {schedule.topology_name!r}, not {where} (sha256 {topology.sha256[:16]}...)",
        )
