"""A set of schedules for one collective on one machine, each for a range of call sizes: what a
training job's communication hook picks from, per bucket (`synth.torch.allreduce_hook`).

`synth.schedule_set_build.build_schedule_set` makes one from auto's choices over a list of sizes.
Sizes are nccl-tests sizes in bytes (docs/formats.md: for allreduce, the one buffer; a DDP
bucket's bytes).

On disk a set is a folder: one schedule file per range and ``index.json``, which says which file
serves which sizes (``synth synthesize … -m auto --sizes LIST -o FOLDER`` writes one). A single
schedule file also loads as a set, serving every size.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from synth.builtin import TopologyLocation
from synth.collective import Kind, parse_kind
from synth.errors import InputError
from synth.fileio import write_text_atomic
from synth.schedule import Schedule, load_schedule, schedule_to_json
from synth.units import format_size

SET_FORMAT = "synth-schedule-set"
SET_VERSION = 1
INDEX = "index.json"
#: the largest size an entry that serves "every size" covers (a schedule file loaded as a set)
ANY_SIZE = 2**63 - 1


@dataclass(frozen=True)
class SetEntry:
    """One schedule of a set and the call sizes it serves: ``lo`` … ``hi`` bytes, both included;
    ``samples`` are the sizes auto chose it at."""

    schedule: Schedule
    lo: int
    hi: int
    file: str
    samples: tuple[int, ...] = ()

    def describe(self) -> str:
        hi = "any size" if self.hi >= ANY_SIZE else format_size(self.hi)
        return f"{format_size(self.lo)} … {hi}: {self.schedule.params.get('chosen', self.schedule.method)} ({self.file})"


@dataclass(frozen=True)
class ScheduleSet:
    """Schedules of one collective on one machine, each for a range of sizes (sorted, disjoint)."""

    kind: Kind
    num_ranks: int
    topology_name: str
    entries: tuple[SetEntry, ...]
    source: str = ""

    def choose(self, size: int) -> Schedule | None:
        """The schedule for a call of ``size`` bytes, or None if no entry covers it."""
        for entry in self.entries:
            if entry.lo <= size <= entry.hi:
                return entry.schedule
        return None

    @property
    def lo(self) -> int:
        return self.entries[0].lo if self.entries else 0

    @property
    def hi(self) -> int:
        return self.entries[-1].hi if self.entries else -1

    def describe(self) -> str:
        hi = "any size" if self.hi >= ANY_SIZE else format_size(self.hi)
        return (
            f"{self.kind.value} on {self.topology_name} ({self.num_ranks} ranks): {len(self.entries)} schedule(s)"
            f" for {format_size(self.lo)} … {hi}"
        )

    def index(self) -> dict:
        """The set's ``index.json`` document."""
        return {
            "format": SET_FORMAT,
            "version": SET_VERSION,
            "collective": self.kind.value,
            "num_ranks": self.num_ranks,
            "topology": self.topology_name,
            "entries": [
                {
                    "file": e.file,
                    "min_bytes": e.lo,
                    "max_bytes": e.hi,
                    "samples": list(e.samples),
                    "chosen": str(e.schedule.params.get("chosen", e.schedule.method)),
                }
                for e in self.entries
            ],
        }


def save_schedule_set(
    schedules: ScheduleSet, folder: str | Path, *, protect: Iterable[str | Path] = (), topology: TopologyLocation | None = None
) -> list[Path]:
    """Write the set into ``folder`` (created if missing): its schedule files, then ``index.json``;
    returns the paths written. ``topology``: where the machine's topology was found, recorded in
    every schedule file as ``topology.source`` (so the set is verified against it when loaded).

    A folder holding files other than this set's own is refused (nothing is written or removed: a
    stray schedule there would be mistaken for part of the set); files of the same names (an
    earlier run of the same command) are replaced."""
    folder = Path(folder)
    names = {e.file for e in schedules.entries} | {INDEX}
    if folder.exists() and not folder.is_dir():
        raise InputError(str(folder), "output", str(folder), "is a file; -o names the folder to write the set into")
    if folder.is_dir():
        strangers = sorted(p.name for p in folder.iterdir() if p.name not in names)
        if strangers:
            shown = ", ".join(strangers[:5]) + (" …" if len(strangers) > 5 else "")
            reason = f"already holds {len(strangers)} other file(s) ({shown}); write the set into an empty or new folder"
            raise InputError(str(folder), "output", str(folder), reason)
    written = []
    for e in schedules.entries:
        source = topology.recorded_for(folder / e.file) if topology is not None else None
        written.append(write_text_atomic(folder / e.file, schedule_to_json(e.schedule, topology_source=source), protect=protect))
    text = json.dumps(schedules.index(), indent=1, sort_keys=True) + "\n"
    written.append(write_text_atomic(folder / INDEX, text, protect=protect))
    return written


def load_schedule_set(path: str | Path) -> ScheduleSet:
    """A set from a folder (its ``index.json``), or a single schedule file as a set that serves
    every size. Bad files are `InputError`s naming the file and the field."""
    path = Path(path)
    if path.is_file():
        schedule = load_schedule(path)
        c = schedule.collective
        return ScheduleSet(c.kind, c.num_ranks, schedule.topology_name, (SetEntry(schedule, 0, ANY_SIZE, path.name),), str(path))
    index_path = path / INDEX
    if not index_path.is_file():
        raise InputError(str(path), "", None, f"is neither a schedule file nor a schedule set (no {INDEX})", show_value=False)
    try:
        doc = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(str(index_path), "", None, f"not readable JSON: {exc}", show_value=False) from None
    where = str(index_path)
    if not isinstance(doc, dict) or doc.get("format") != SET_FORMAT:
        raise InputError(where, "format", doc.get("format") if isinstance(doc, dict) else doc, f"expected {SET_FORMAT!r}")
    if doc.get("version") != SET_VERSION:
        raise InputError(where, "version", doc.get("version"), f"expected {SET_VERSION}")
    try:
        kind = parse_kind(str(doc.get("collective")))
    except ValueError as exc:
        raise InputError(where, "collective", doc.get("collective"), str(exc)) from None
    raw = doc.get("entries")
    if not isinstance(raw, list) or not raw:
        raise InputError(where, "entries", raw, "expected a non-empty list")
    entries: list[SetEntry] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InputError(where, f"entries[{i}]", item, "expected an object")
        lo, hi, name = item.get("min_bytes"), item.get("max_bytes"), item.get("file")
        for field, value in (("min_bytes", lo), ("max_bytes", hi)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InputError(where, f"entries[{i}].{field}", value, "expected a whole number of bytes")
        if hi < lo or (entries and lo <= entries[-1].hi):
            raise InputError(where, f"entries[{i}].min_bytes", lo, "ranges must be sorted, non-empty and disjoint")
        if not isinstance(name, str) or Path(name).name != name:
            raise InputError(where, f"entries[{i}].file", name, "expected a file name in the set's folder")
        schedule = load_schedule(path / name)
        c = schedule.collective
        if c.kind is not kind or (entries and c.num_ranks != entries[0].schedule.collective.num_ranks):
            raise InputError(str(path / name), "collective", c.describe(), f"the set is of {kind.value} on one rank count")
        samples = tuple(int(s) for s in item.get("samples", []) if isinstance(s, int))
        entries.append(SetEntry(schedule, lo, hi, name, samples))
    first = entries[0].schedule
    return ScheduleSet(kind, first.collective.num_ranks, first.topology_name, tuple(entries), str(path))


__all__ = [
    "ANY_SIZE",
    "INDEX",
    "SET_FORMAT",
    "ScheduleSet",
    "SetEntry",
    "load_schedule_set",
    "save_schedule_set",
]
