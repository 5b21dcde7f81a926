"""The topology hash covers what a schedule's meaning depends on, not labels; schedules that name
the old whole-document hash still verify."""

from __future__ import annotations

import copy
import json

import pytest

from synth.builtin import builtin_path
from synth.canonical import canonical_sha256
from synth.registry import synthesize
from synth.schedule import ScheduleBuilder, TopologyMismatch, save_schedule
from synth.topology import topology_from_document
from synth.verify import verify
from tests.cli_helpers import assert_bad_input, invoke

BASE = json.loads(builtin_path("dgx-a100").read_text())


def _hash(doc) -> str:
    return topology_from_document(doc).sha256


def _edited(edit):
    doc = copy.deepcopy(BASE)
    edit(doc)
    return doc


LABELS = {
    "description": lambda d: d.update(description="edited"),
    "name": lambda d: d.update(name="renamed"),
    "hosts": lambda d: [r.update(host="elsewhere") for r in d["ranks"] if isinstance(r, dict)],
    "link order": lambda d: d["links"].reverse(),
    "unknown field": lambda d: d.update(comment="added by a tool"),
    "rank spelling": lambda d: d.update(ranks=[r["name"] for r in d["ranks"]]),
    "explicit defaults": lambda d: [lk.setdefault("duplex", True) for lk in d["links"]],
    "a parallel entry split in two": lambda d: d["links"].extend(
        [dict(d["links"].pop(0), bandwidth=BASE["links"][0]["bandwidth"] / 2) for _ in range(1)]
        + [dict(BASE["links"][0], bandwidth=BASE["links"][0]["bandwidth"] / 2)]
    ),
}

MEANING = {
    "bandwidth": lambda d: d["links"][0].update(bandwidth=d["links"][0]["bandwidth"] + 1),
    "latency": lambda d: d["links"][0].update(latency=d["links"][0]["latency"] + 1),
    "one direction only": lambda d: d["links"].append(dict(d["links"][0], duplex=False)),
    "rank order": lambda d: d.update(ranks=d["ranks"][1:] + d["ranks"][:1]),
    "a switch name": lambda d: (
        [lk.update({k: "sw" for k in ("a", "b") if lk[k] == d["switches"][0]["name"]}) for lk in d["links"]]
        and d["switches"][0].update(name="sw")
    ),
}


@pytest.mark.parametrize("edit", LABELS.values(), ids=LABELS.keys())
def test_labels_and_spelling_keep_the_hash(edit):
    assert _hash(_edited(edit)) == _hash(BASE)


@pytest.mark.parametrize("edit", MEANING.values(), ids=MEANING.keys())
def test_what_a_schedule_depends_on_changes_it(edit):
    assert _hash(_edited(edit)) != _hash(BASE)


def test_editing_a_description_keeps_schedules_valid(tmp_path):
    topo_path = tmp_path / "t.json"
    topo_path.write_text(json.dumps(BASE))
    sched = tmp_path / "s.json"
    assert invoke("synthesize", topo_path, "-c", "allgather", "-m", "ring", "-o", sched).exit_code == 0
    topo_path.write_text(json.dumps(_edited(LABELS["description"])))
    assert invoke("verify", sched).exit_code == 0
    topo_path.write_text(json.dumps(_edited(MEANING["bandwidth"])))
    assert_bad_input(invoke("verify", sched), "topology.sha256")


def test_schedules_naming_the_old_whole_document_hash_still_verify(tmp_path):
    topo = topology_from_document(BASE)
    legacy = canonical_sha256(BASE)
    assert legacy != topo.sha256 and topo.document_sha256 == legacy
    schedule = synthesize(topo, "allgather", "ring")
    builder = ScheduleBuilder.like(schedule)
    builder.topology_sha256 = legacy
    builder.extend(schedule)
    old = builder.build()
    assert verify(old, topo).ok
    path = tmp_path / "old.json"
    save_schedule(old, path)
    assert invoke("verify", path, "-t", "dgx-a100").exit_code == 0
    # the old hash covered the description: an edited file no longer matches it
    with pytest.raises(TopologyMismatch):
        verify(old, topology_from_document(_edited(LABELS["description"])))
