"""A folder of MSCCL algorithms covering a range of call sizes, auto's choice in each part of it.

The MSCCL runtime (and RCCL, which ships such a folder as ``msccl-algorithms``) loads every file of
its algorithm folder and runs, for a call, the first algorithm whose collective, rank count, buffer
mode and ``minBytes`` … ``maxBytes`` fit (`synth.interop.msccl_sizes`). `build_set` asks ``auto``
for the best schedule at each sample size, gives each sample the sizes nearest to it on a
logarithmic scale (boundaries at the geometric means of neighbours, the outer ends at the first and
last sample), joins neighbouring samples with the same schedule into one range, and exports one
algorithm per range and buffer mode. The ranges are contiguous and do not overlap, so exactly one
file answers every size in [first, last]; sizes outside fall back to NCCL.

One range per file: the format has one ``minBytes``/``maxBytes`` per file, so a schedule chosen for
two ranges that another schedule separates is written twice.

The runtime parses every regular file of the folder as an algorithm and fails on anything else
(folders are skipped), so the index (`SetIndex`) is written into a subfolder, ``index/README.md``,
and each XML file starts with a comment saying what it covers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from synth.collective import Kind
from synth.errors import InputError
from synth.fileio import write_text_atomic
from synth.interop.msccl_export import ExportResult, export_msccl
from synth.interop.msccl_sizes import declared_range, sample_ranges
from synth.interop.msccl_xml import COLL_NAMES, algo_to_xml
from synth.schedule import Schedule
from synth.schedule_set_build import choose_per_size, same_schedule_runs
from synth.topology import Topology
from synth.units import format_size

#: the index's place in the folder: a subfolder, which the runtime skips
INDEX_PATH = Path("index") / "README.md"


@dataclass(frozen=True)
class SetEntry:
    """One file of the set: the schedule, the synth sizes it covers [lo, hi) (the samples
    ``first`` … ``last`` chose it), the runtime's byte range and buffer mode, and the export."""

    schedule: Schedule
    lo: int
    hi: int
    samples: tuple[int, ...]
    min_bytes: int
    max_bytes: int
    inplace: bool
    filename: str
    exported: ExportResult


@dataclass
class MscclSet:
    """The files of a set, in size order (in place before out of place within a range)."""

    topology: str
    kind: Kind
    num_ranks: int
    sizes: list[int]
    entries: list[SetEntry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def index(self, command: str = "") -> str:
        """The index (Markdown): which file covers which sizes, and why."""
        coll = COLL_NAMES[self.kind]
        lines = [
            f"# MSCCL algorithms: {coll} on {self.topology} ({self.num_ranks} GPUs)",
            "",
            f"Written by synth{(': `' + command + '`') if command else ''}. For each sample size "
            f"({', '.join(format_size(s) for s in self.sizes)}) synth's `auto` chose the schedule with the best "
            "predicted time; each sample covers the sizes nearest to it on a logarithmic scale (boundaries at the "
            "geometric means of neighbouring samples), and neighbouring samples with the same schedule share a file.",
            "",
            "Point the runtime at the folder holding the XML files (`MSCCL_ALGO_DIR`). It parses every file there, so "
            "this index lives in a subfolder, which it skips. `minBytes`/`maxBytes` are the runtime's byte counts of a "
            "call (both included); a call whose element count does not divide into the file's `nchunksperloop` falls "
            "back to NCCL, as do sizes outside the range.",
            "",
            "| file | minBytes | maxBytes | sizes | buffers | schedule | steps | chunks |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for e in self.entries:
            chosen = e.schedule.params.get("chosen", e.schedule.method)
            sizes = f"{format_size(e.lo)} … {format_size(e.hi - 1)}"
            mode = "in place" if e.inplace else "out of place"
            lines.append(
                f"| {e.filename} | {e.min_bytes} | {e.max_bytes} | {sizes} | {mode} | {chosen} | "
                f"{e.schedule.num_steps} | {e.schedule.collective.num_chunks} |"
            )
        return "\n".join(lines) + "\n"


def _filename(kind: Kind, ranks: int, lo: int, last: int, chosen: str, inplace: bool) -> str:
    """``allreduce-8gpu-1KiB-11585B-recursive-doubling-inplace.xml``: what, for which sizes, how."""
    label = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in chosen.split("@")[0])
    mode = "inplace" if inplace else "outofplace"
    return f"{COLL_NAMES[kind]}-{ranks}gpu-{format_size(lo)}-{format_size(last)}-{label}-{mode}.xml"


def build_set(
    topology: Topology,
    kind: Kind,
    sizes: Sequence[int],
    *,
    root: int | None = None,
    modes: Sequence[bool] = (True, False),
    proto: str = "Simple",
    channels: int = 1,
    budget: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> MscclSet:
    """The set for ``sizes`` (synth sizes, sorted and made distinct here): auto per size, ranges,
    one export per range and buffer mode (``modes``: True for in place)."""
    samples = sorted(set(sizes))
    if not samples or samples[0] < 1:
        raise InputError("--sizes", "sizes", list(sizes), "need at least one positive size")
    schedules = choose_per_size(topology, kind, samples, root=root, budget=budget, progress=progress)
    bounds = sample_ranges(samples)
    result = MscclSet(topology.name, kind, topology.num_ranks, samples)
    for first, last in same_schedule_runs(schedules):
        schedule = schedules[first]
        lo, hi = bounds[first][0], bounds[last][1]
        min_bytes, max_bytes = declared_range(kind, topology.num_ranks, lo, hi)
        if max_bytes < min_bytes:
            result.notes.append(
                f"{format_size(lo)} … {format_size(hi - 1)} holds no whole byte count of the runtime's; no file for it"
            )
            continue
        chosen = str(schedule.params.get("chosen", schedule.method))
        for inplace in modes:
            name = _filename(kind, topology.num_ranks, lo, hi - 1, chosen, inplace)
            algo_name = f"synth {COLL_NAMES[kind]} {chosen} on {topology.name}, {format_size(lo)}-{format_size(hi - 1)}"
            exported = export_msccl(
                schedule,
                channels=channels,
                proto=proto,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                inplace=inplace,
                name=algo_name,
            )
            samples_here = tuple(samples[first : last + 1])
            result.entries.append(SetEntry(schedule, lo, hi, samples_here, min_bytes, max_bytes, inplace, name, exported))
    return result


def _comment(entry: SetEntry, kind: Kind, topology: str) -> str:
    mode = "in place" if entry.inplace else "out of place"
    text = (
        f" synth: {COLL_NAMES[kind]} on {topology}, {mode}, for calls of {entry.min_bytes} … {entry.max_bytes} bytes "
        f"(sizes {format_size(entry.lo)} … {format_size(entry.hi - 1)}; auto's choice at "
        f"{', '.join(format_size(s) for s in entry.samples)}: {entry.schedule.params.get('chosen', entry.schedule.method)}). "
        "The folder's index/README.md lists the whole set. "
    )
    return "<!--" + text.replace("--", "- -") + "-->\n"


def write_set(result: MscclSet, folder: str | Path, *, command: str = "", protect: Sequence[str | Path] = ()) -> list[Path]:
    """Write the set's XML files and its index into ``folder``; returns the paths written.

    The runtime would also load any other file the folder holds, with sizes that may overlap the
    set's, so a folder holding files other than this set's own is refused (nothing is written or
    removed); files of the same names (an earlier run of the same command) are replaced."""
    folder = Path(folder)
    names = {e.filename for e in result.entries}
    if folder.exists() and not folder.is_dir():
        raise InputError(str(folder), "output", str(folder), "is a file; -o names the folder to write the set into")
    if folder.is_dir():
        strangers = sorted(
            p.name for p in folder.iterdir() if p.name not in names and not (p.is_dir() and p.name == INDEX_PATH.parent.name)
        )
        if strangers:
            shown = ", ".join(strangers[:5]) + (" …" if len(strangers) > 5 else "")
            raise InputError(
                str(folder),
                "output",
                str(folder),
                f"already holds {len(strangers)} other file(s) ({shown}); the runtime loads every file of its algorithm "
                "folder, so write the set into an empty or new folder",
            )
    written = []
    for entry in result.entries:
        text = _comment(entry, result.kind, result.topology) + algo_to_xml(entry.exported.algo)
        written.append(write_text_atomic(folder / entry.filename, text, protect=protect))
    written.append(write_text_atomic(folder / INDEX_PATH, result.index(command), protect=protect))
    return written


__all__ = ["INDEX_PATH", "MscclSet", "SetEntry", "build_set", "choose_per_size", "write_set"]
