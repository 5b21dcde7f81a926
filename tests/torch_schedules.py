"""Small schedules for the torch tests: every collective by the quick classic methods on rings
and fully connected machines of R ranks, written as files (with their topology files)."""

from __future__ import annotations

from pathlib import Path

from synth import generators as gen
from synth.collective import ALL_KINDS, Kind
from synth.errors import NotApplicable
from synth.fileio import write_text_atomic
from synth.registry import synthesize
from synth.schedule import save_schedule
from synth.topology import load_topology, topology_to_json

#: methods quick enough to synthesize in a test, each a different shape of schedule
QUICK_METHODS = (
    "ring",
    "direct",
    "binomial",
    "recursive-doubling",
    "recursive-halving",
    "scatter-allgather",
    "double-binary-tree",
)


def topology_file(folder: Path, family: str, r: int):
    """A generated machine of ``r`` ranks, written and read back (the file is what the ranks load)."""
    topo = gen.ring(r) if family == "ring" else gen.fully_connected(r)
    path = folder / f"{family}{r}.json"
    if not path.exists():
        write_text_atomic(path, topology_to_json(topo))
    return load_topology(path), str(path)


def schedules(folder: Path, r: int, kinds=ALL_KINDS, methods=QUICK_METHODS, families=("ring", "full"), root: int | None = None):
    """[schedule file, topology file] for every kind, method and machine that applies."""
    out = []
    for family in families:
        topo, topo_path = topology_file(folder, family, r)
        for kind in kinds:
            for method in methods:
                rooted = kind in (Kind.BROADCAST, Kind.REDUCE, Kind.GATHER, Kind.SCATTER)
                try:
                    schedule = synthesize(topo, kind, method, root=(root if root is not None else r - 1) if rooted else None)
                except (NotApplicable, ValueError):
                    continue
                path = folder / f"{family}{r}-{kind.value}-{method}.json"
                save_schedule(schedule, path)
                out.append([str(path), topo_path])
    return out
