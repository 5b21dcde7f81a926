"""The ``generated/`` folder: every classic and NCCL-style method's schedule for every collective it
serves, on every built-in topology, verified, written deterministically, with an index. One command
(``synth regenerate``) rebuilds it byte for byte; ``--check`` compares instead of writing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from synth.builtin import BUILTIN_NAMES, BUILTIN_PREFIX, builtin_path
from synth.collective import ALL_KINDS, Kind
from synth.errors import NotApplicable
from synth.fileio import prepare_output_dir, write_text_atomic
from synth.registry import CLASSIC_METHODS, METHODS, NCCL_METHODS, synthesize
from synth.routing import router_for
from synth.schedule import schedule_to_json
from synth.topology import load_topology

#: Schedules with more transfers than this are listed in the index but not written: the
#: multi-channel rings on the 128-rank fat-tree (8 channels, so 8x a ring's transfers: 130k-260k,
#: 10-21 MB each) would otherwise double the folder.
MAX_TRANSFERS = 100_000


def schedule_filename(kind: Kind, method: str, root: int | None = None, chunks: int | None = None) -> str:
    """``<collective>-<method>[-root<r>][-k<k>].json`` (root 0 and default chunks unmarked)."""
    name = f"{kind.value}-{method}"
    if root:
        name += f"-root{root}"
    if chunks is not None:
        name += f"-k{chunks}"
    return name + ".json"


@dataclass(frozen=True)
class Entry:
    topology: str
    kind: Kind
    method: str
    relpath: str | None
    steps: int = 0
    transfers: int = 0
    note: str = ""


def entries(
    topologies: tuple[str, ...] = BUILTIN_NAMES,
    methods: tuple[str, ...] = CLASSIC_METHODS + NCCL_METHODS,
) -> Iterator[tuple[Entry, str | None]]:
    """(index entry, file text) for every built-in × collective × method; text None when the
    method does not apply (the entry says why)."""
    for topo_name in topologies:
        topology = load_topology(builtin_path(topo_name))
        router = router_for(topology)
        for kind in ALL_KINDS:
            for method in methods:
                if not METHODS[method].serves(kind):
                    continue
                try:
                    schedule = synthesize(topology, kind, method, router=router)
                except NotApplicable as exc:
                    yield Entry(topo_name, kind, method, None, note=str(exc)), None
                    continue
                if schedule.num_transfers > MAX_TRANSFERS:
                    note = (
                        f"not written ({schedule.num_transfers:,} transfers, above the {MAX_TRANSFERS:,} budget of generated/): "
                        f"`synth synthesize {topo_name} -c {kind.value} -m {method} -o FILE` makes it"
                    )
                    yield Entry(topo_name, kind, method, None, schedule.num_steps, schedule.num_transfers, note), None
                    continue
                rel = f"{topo_name}/{schedule_filename(kind, method)}"
                text = schedule_to_json(schedule, topology_source=f"{BUILTIN_PREFIX}{topo_name}")
                yield Entry(topo_name, kind, method, rel, schedule.num_steps, schedule.num_transfers), text


def entry_count(
    topologies: tuple[str, ...] = BUILTIN_NAMES,
    methods: tuple[str, ...] = CLASSIC_METHODS + NCCL_METHODS,
) -> int:
    """How many entries `entries` yields (for a progress bar), without synthesizing anything."""
    return len(topologies) * sum(1 for kind in ALL_KINDS for method in methods if METHODS[method].serves(kind))


def index_text(rows: list[Entry]) -> str:
    lines = [
        "# Generated schedules",
        "",
        "Every classic and NCCL-style method's schedule for every collective it serves, on every built-in",
        "topology (rooted collectives with root 0, default chunks per piece), each verified before it was",
        "written.",
        "Regenerate byte for byte with `synth regenerate` (or `make generated`); check with",
        "`synth regenerate --check`.",
        "",
        "| topology | collective | method | steps | transfers | file |",
        "|---|---|---|---:|---:|---|",
    ]
    for e in rows:
        if e.relpath is None and e.transfers:
            lines.append(f"| {e.topology} | {e.kind.value} | {e.method} | {e.steps} | {e.transfers} | {e.note} |")
        elif e.relpath is None:
            lines.append(f"| {e.topology} | {e.kind.value} | {e.method} | - | - | not applicable: {e.note} |")
        else:
            lines.append(
                f"| {e.topology} | {e.kind.value} | {e.method} | {e.steps} | {e.transfers} | [{e.relpath}]({e.relpath}) |"
            )
    return "\n".join(lines) + "\n"


def _is_generated_folder(out: Path) -> bool:
    """Whether ``out`` holds an INDEX.md that `index_text` wrote."""
    index = out / "INDEX.md"
    if not index.is_file():  # not a FIFO that would block the read
        return False
    try:
        with index.open(encoding="utf-8") as fh:
            return fh.readline().rstrip("\n") == "# Generated schedules"
    except (OSError, UnicodeDecodeError):
        return False


def regenerate(out: Path, *, check: bool = False, progress: Callable[[Entry], None] | None = None) -> list[str]:
    """Write (or, with ``check``, compare) every generated schedule and the index under ``out``.
    Returns the relative paths that differ (check) or were rewritten with new content (write).
    Schedule files that are no longer produced are removed when writing, reported when checking:
    only ``*.json`` directly inside the folders of the built-in topologies, and only when ``out``
    already holds our INDEX.md (so ``--out`` pointed at a folder of one's own removes nothing)."""
    ours = _is_generated_folder(out)
    if not check:
        prepare_output_dir(out)
    changed: list[str] = []
    rows: list[Entry] = []
    produced: set[str] = set()
    for entry, text in entries():
        rows.append(entry)
        if progress:
            progress(entry)
        if entry.relpath is None or text is None:
            continue
        produced.add(entry.relpath)
        path = out / entry.relpath
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        if old != text:
            changed.append(entry.relpath)
            if not check:
                write_text_atomic(path, text)
    index = index_text(rows)
    produced.add("INDEX.md")
    index_path = out / "INDEX.md"
    if (index_path.read_text(encoding="utf-8") if index_path.is_file() else None) != index:
        changed.append("INDEX.md")
        if not check:
            write_text_atomic(index_path, index)
    if ours:
        candidates = [p for name in sorted({e.topology for e in rows}) for p in (out / name).glob("*.json") if p.is_file()]
        for stale in sorted(p for p in candidates if p.relative_to(out).as_posix() not in produced):
            changed.append(stale.relative_to(out).as_posix())
            if not check:
                stale.unlink()
    return changed
