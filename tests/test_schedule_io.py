import json

import numpy as np
import pytest

from synth import generators as gen
from synth import schedule as schedule_module
from synth.collective import Collective, Kind
from synth.errors import InputError
from synth.registry import synthesize
from synth.schedule import (
    Transfer,
    load_schedule,
    save_schedule,
    schedule_from_document,
    schedule_from_steps,
    schedule_to_json,
)

from .conftest import write_json


def test_round_trip_small(tmp_path, dgx1):
    s = synthesize(dgx1, "allreduce", "ring")
    path = save_schedule(s, tmp_path / "s.json")
    again = load_schedule(path)
    assert again == s
    assert schedule_to_json(again) == path.read_text()


def test_file_follows_formats_md(tmp_path, dgx1):
    s = synthesize(dgx1, "allreduce", "ring")
    doc = json.loads(schedule_to_json(s))
    assert doc["format"] == "synth-schedule" and doc["version"] == 1
    assert doc["collective"] == {"name": "allreduce", "root": None, "num_ranks": 8, "num_chunks": 8}
    assert doc["topology"] == {"name": "dgx1", "sha256": dgx1.sha256}
    assert doc["synthesizer"]["method"] == "ring"
    first = doc["steps"][0][0]
    assert set(first) == {"src", "dst", "chunk", "op", "via"} and first["op"] == "reduce"


def test_fast_path_equals_general_path(tmp_path, monkeypatch):
    topo = gen.fattree(racks=2, servers=2, gpus=8)
    s = synthesize(topo, "allreduce", "direct")
    text = schedule_to_json(s)
    path = tmp_path / "big.json"
    path.write_text(text)
    used = []
    real = schedule_module._fast_columns
    monkeypatch.setattr(schedule_module, "FAST_PATH_MIN_BYTES", 0)
    monkeypatch.setattr(schedule_module, "_fast_columns", lambda raw: used.append(1) or real(raw))
    fast = load_schedule(path)
    assert used and real(path.read_bytes()) is not None
    general = schedule_from_document(json.loads(text), source=str(path))
    assert fast == general == s
    assert any(r for r in fast.routes)  # routes through switches survive both paths
    # a layout we did not write (keys reordered, other spacing) is read by the general path
    doc = json.loads(text)
    doc["steps"][0][0] = {
        "via": doc["steps"][0][0]["via"],
        "src": doc["steps"][0][0]["src"],
        "op": doc["steps"][0][0]["op"],
        "dst": doc["steps"][0][0]["dst"],
        "chunk": doc["steps"][0][0]["chunk"],
    }
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc, indent=1))
    assert load_schedule(other) == s


def test_deterministic_bytes(dgx1):
    a = schedule_to_json(synthesize(dgx1, "alltoall", "direct"))
    b = schedule_to_json(synthesize(dgx1, "alltoall", "direct"))
    assert a == b


def test_hand_written_order_kept_and_steps_view():
    c = Collective(Kind.ALLGATHER, 2, 1)
    s = schedule_from_steps(c, [[Transfer(1, 0, 1), Transfer(0, 1, 0)], []])
    assert s.num_steps == 2 and s.steps[0][0] == Transfer(1, 0, 1) and s.steps[1] == []


BASE = {
    "format": "synth-schedule",
    "version": 1,
    "collective": {"name": "allgather", "root": None, "num_ranks": 2, "num_chunks": 2},
    "topology": {"name": "x", "sha256": "00"},
    "synthesizer": {"method": "manual", "params": {}},
    "steps": [[{"src": 0, "dst": 1, "chunk": 0, "op": "copy", "via": []}]],
}


BAD = [
    (lambda d: d.update(format="x"), "format"),
    (lambda d: d["collective"].update(name="allsum"), "collective.name"),
    (lambda d: d["collective"].update(num_ranks=0), "collective.num_ranks"),
    (lambda d: d["collective"].update(num_chunks=3), "collective.num_chunks"),
    (lambda d: d["collective"].update(name="broadcast"), "collective.root"),
    (lambda d: d["collective"].update(root=1), "collective.root"),
    (lambda d: d.update(steps={}), "steps"),
    (lambda d: d["steps"].append(5), "steps[1]"),
    (lambda d: d["steps"][0][0].pop("dst"), "steps[0][0]"),
    (lambda d: d["steps"][0][0].update(src="0"), "steps[0][0].src"),
    (lambda d: d["steps"][0][0].update(chunk=1.0), "steps[0][0].chunk"),
    (lambda d: d["steps"][0][0].update(op="sum"), "steps[0][0].op"),
    (lambda d: d["steps"][0][0].update(via="sw"), "steps[0][0].via"),
    (lambda d: d["steps"][0][0].update(via=[3]), "steps[0][0].via[0]"),
]


@pytest.mark.parametrize(("mutate", "field"), BAD)
def test_malformed_schedule_names_field(tmp_path, mutate, field):
    doc = json.loads(json.dumps(BASE))
    mutate(doc)
    path = write_json(tmp_path / "s.json", doc)
    with pytest.raises(InputError) as err:
        load_schedule(path)
    assert str(err.value).startswith(f"{path}: {field}")


def test_builder_normalizes_and_freezes(dgx1):
    s = synthesize(dgx1, "allgather", "direct")
    with pytest.raises(ValueError):
        s.src[0] = 3
    for step in range(s.num_steps):
        sl = s.step_slice(step)
        keys = list(zip(s.src[sl].tolist(), s.dst[sl].tolist(), s.chunk[sl].tolist()))
        assert keys == sorted(keys)
    assert np.all(s.op == 0)


def test_builder_keeps_steps_already_in_order_and_sorts_others():
    """A step written in canonical order is taken as is (a linear check), any other order sorted:
    the result is the same either way."""
    import numpy as np

    from synth.collective import Collective
    from synth.schedule import ScheduleBuilder

    c = Collective("allgather", 4, 1)
    rows = [(0, 1, 0, 0), (0, 1, 2, 0), (0, 2, 0, 0), (1, 0, 1, 0), (1, 0, 1, 1), (3, 2, 3, 0)]
    cols = [np.array(x) for x in zip(*rows)]
    shuffled = [col[[4, 0, 5, 2, 1, 3]] for col in cols]
    results = []
    for src, dst, chunk, route in (cols, shuffled):
        builder = ScheduleBuilder(c, topology_name="t", topology_sha256="x")
        builder.route_id(("sw",))
        builder.add_step_arrays(src, dst, chunk, 0, route)
        results.append(builder.build())
    assert results[0] == results[1]
    assert results[0].src.tolist() == [0, 0, 0, 1, 1, 3] and results[0].route.tolist() == [0, 0, 0, 0, 1, 0]


@pytest.mark.parametrize("reserve", [None, 5, 9, 10, 11, 40])
def test_builder_reserve_is_a_hint_only(reserve):
    """With room reserved for exactly the transfers added, `build` sorts the one block in place and
    hands it over (no copy); any other count grows and copies as without it. The schedule is the
    same either way: steps sorted, routes renumbered in sorted order, empty steps dropped or kept."""
    from synth.schedule import ScheduleBuilder

    c = Collective("allgather", 4, 1)
    steps = [
        [(3, 2, 3, "copy", ("sw-b",)), (0, 1, 0), (1, 0, 1, "copy", ("sw-a",))],
        [],
        [(0, 2, 0), (0, 1, 2, "copy", ("sw-b",))],
        [(2, 3, 1), (1, 3, 2, "copy", ("sw-a",)), (0, 3, 3), (2, 0, 2), (1, 2, 1, "copy", ("sw-b",))],
    ]
    for drop_empty in (True, False):
        built = []
        for hint in (None, reserve):
            builder = ScheduleBuilder(c, topology_name="t", topology_sha256="x")
            if hint is not None:
                builder.reserve(hint)
            for step in steps:
                builder.add_step(step)
            built.append(builder.build(drop_empty=drop_empty))
        plain, hinted = built
        assert plain == hinted and plain.routes == hinted.routes == ((), ("sw-a",), ("sw-b",))
        assert hinted.num_transfers == 10 and hinted.num_steps == (3 if drop_empty else 4)
        assert not hinted.src.flags.writeable and hinted.src.flags.owndata
        for step in range(hinted.num_steps):
            sl = hinted.step_slice(step)
            keys = list(zip(hinted.src[sl].tolist(), hinted.dst[sl].tolist(), hinted.chunk[sl].tolist()))
            assert keys == sorted(keys)
