import json

import pytest
from click.testing import CliRunner

from synth.cli import main
from synth.cli.compare_cmd import render
from synth.collective import Kind
from synth.compare import compare, default_methods
from synth.registry import synthesize
from synth.simulate import Simulator
from synth.topology import topology_from_document


@pytest.fixture(autouse=True)
def no_ilp_unless_asked(request, monkeypatch):
    """The ILP gets 10 s per run on machines of up to 8 ranks; only the tests about it let it run."""
    if "ilp" not in request.node.name:
        monkeypatch.setattr("synth.selection.EXACT_RANKS", 0)


@pytest.fixture(scope="module")
def dgx1_allgather(dgx1):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("synth.selection.EXACT_RANKS", 0)
        return compare(dgx1, "allgather", [1 << 10, 1 << 30])


def test_every_applicable_method_and_bound(dgx1_allgather):
    c = dgx1_allgather
    assert {o.method for o in c.outcomes} == set(default_methods(Kind.ALLGATHER))
    for i in range(len(c.sizes)):
        rows = c.rows(i)
        assert [r.time_us for r in rows] == sorted(r.time_us for r in rows)
        assert all(r.ratio >= 1 - 1e-9 for r in rows)  # nothing beats the lower bound
        assert len(rows) == len([o for o in c.outcomes if o.ok])


def test_latency_and_bandwidth_winners(dgx1_allgather):
    small, large = dgx1_allgather.best(0), dgx1_allgather.best(1)
    # few steps win small messages (two-step schedules: direct, or greedy/packing tuned for 1 KiB)
    assert small.method in ("direct", "greedy", "packing") and small.ratio < 1.05
    rows = {r.method: r for r in dgx1_allgather.rows(1)}
    assert rows["multiring"].ratio < 1.01  # six NVLink rings reach the optimum
    assert large.method in ("multiring", "greedy") and large.ratio < 1.01
    ring_small = next(r for r in dgx1_allgather.rows(0) if r.method == "ring")
    assert ring_small.ratio > 3  # a ring pays R-1 latencies


def test_not_applicable_listed(dgx1):
    c = compare(dgx1, "alltoall", [1 << 20], methods=["ring", "direct", "nope"])
    notes = {o.method: o.note for o in c.skipped}
    assert "does not serve alltoall" in notes["ring"] and "unknown method" in notes["nope"]
    assert [r.method for r in c.rows(0)] == ["direct"]


def test_cli_table_and_json(tmp_path):
    runner = CliRunner()
    out = runner.invoke(main, ["compare", "dgx1", "-c", "allreduce", "--sizes", "1KiB,1GiB"])
    assert out.exit_code == 0, out.output
    assert "size 1KiB" in out.output and "lower bound" in out.output and "NCCL model" in out.output
    data = json.loads(runner.invoke(main, ["compare", "dgx1", "-c", "allreduce", "--sizes", "1MiB", "--json"]).output)
    assert data["collective"] == "allreduce" and data["sizes"][0]["methods"][0]["ratio_to_bound"] >= 1
    bad = runner.invoke(main, ["compare", "dgx1", "-c", "allreduce", "--sizes", "1XB"])
    assert bad.exit_code == 2


def test_event_model_compares_against_the_event_bound(dgx1):
    from synth.bounds import bound_model

    c = compare(dgx1, "allgather", [1 << 10, 1 << 30], model="event")
    event_bound = bound_model(dgx1, "allgather", model="event")
    assert [b.time_us for b in c.bounds] == pytest.approx([event_bound.time_us(s) for s in c.sizes], rel=1e-12)
    for i in range(len(c.sizes)):
        assert all(r.ratio >= 1 - 1e-9 for r in c.rows(i))


def test_self_tuning_methods_take_the_schedule_tuned_for_each_size(dgx1):
    """greedy and packing are synthesized once per size (at most three) and each size takes the
    best of them: never slower there than the schedule tuned for the largest size alone."""
    sizes = [1 << 10, 1 << 20, 64 << 20, 1 << 30]
    c = compare(dgx1, "allgather", sizes, methods=["greedy", "ring"])
    greedy = next(o for o in c.outcomes if o.method == "greedy")
    assert len(greedy.tuned) == len(sizes) and {t[0] for t in greedy.tuned} <= {"1KiB", "64MiB", "1GiB"}
    assert greedy.tuned[0][0] == "1KiB" and greedy.tuned[-1][0] == "1GiB"
    alone = compare(dgx1, "allgather", sizes[-1:], methods=["greedy"])
    large = synthesize(dgx1, "allgather", "greedy", options={"size": sizes[-1]})
    assert greedy.schedule.collective == large.collective
    times = Simulator(large, dgx1).run(sizes, "sync", timeline=False)
    assert all(t <= r.time_us * (1 + 1e-12) for t, r in zip(greedy.times_us, times, strict=True))
    assert greedy.times_us[0] < times[0].time_us  # a 1 KiB schedule beats the 1 GiB one at 1 KiB
    assert alone.outcomes[0].times_us[0] == pytest.approx(greedy.times_us[-1])
    ring = next(o for o in c.outcomes if o.method == "ring")
    assert ring.tuned == () and ring.shape(0) == (ring.steps, ring.chunks)
    assert "tuned for 1KiB" in render(c)
    assert c.to_dict()["schedules"][0]["tuned_for"][str(1 << 10)] == "1KiB"


def test_a_method_that_ignores_the_size_is_not_shown_as_tuned(builtin):
    topo = builtin("dgx-a100x2")
    allreduce = compare(topo, "allreduce", [1 << 10, (1 << 10) + 64], methods=["hierarchical"]).outcomes[0]
    assert allreduce.ok and allreduce.tuned == ()  # hierarchical allreduce: one schedule for both sizes
    scatter = compare(topo, "scatter", [1 << 10, 1 << 30], methods=["hierarchical"]).outcomes[0]
    assert [t[0] for t in scatter.tuned] == ["1KiB", "1GiB"] and scatter.shape(0) != scatter.shape(1)


def two_pcie_hosts(gpus: int):
    """Two hosts of ``gpus`` GPUs under a PCIe switch (16 GB/s), a NIC per host (10 GB/s)."""
    ranks, links = [], []
    for h in range(2):
        for g in range(gpus):
            ranks.append({"name": f"h{h}-gpu{g}", "host": f"host{h}"})
            links.append({"a": f"h{h}-gpu{g}", "b": f"h{h}-pcisw", "bandwidth": 16, "latency": 0.5})
        links.append({"a": f"h{h}-pcisw", "b": "net", "bandwidth": 10, "latency": 1.0})
    switches = [{"name": "h0-pcisw"}, {"name": "h1-pcisw"}, {"name": "net"}]
    doc = {
        "format": "synth-topology",
        "version": 1,
        "name": f"pcie2x{gpus}",
        "ranks": ranks,
        "switches": switches,
        "links": links,
    }
    return topology_from_document(doc, "test")


def test_compare_shows_every_candidate_auto_runs_the_ilp_too_and_ranks_them_alike():
    """On a small machine auto runs the exact ILP (plain and pipelined at 1 MiB); compare runs the
    same candidates, shows the ILP, and crowns what auto chooses (the solves here end proven
    optimal well inside their time, so both runs get the same schedules)."""
    topo = two_pcie_hosts(2)
    auto_seconds: dict[str, float] = {}
    auto = synthesize(topo, "allgather", "auto", options={"size": 1 << 20, "timings": auto_seconds.update})
    c = compare(topo, "allgather", [1 << 20])
    labels = {x.label for x in c.selection.ranked}
    assert labels == set(auto.params["predicted_us"]) and {"ilp@1MiB", "ilp@1MiB/pipelined"} <= labels
    assert dict(c.skipped_runs) == auto.params["skipped"]
    assert c.chosen == auto.params["chosen"] == c.best(0).candidate
    assert list(c.explanation) == auto.params["explanation"]
    for x in c.selection.ranked:
        assert x.times_us[0] == pytest.approx(auto.params["predicted_us"][x.label][0], abs=1e-3)
    ilp = next(o for o in c.outcomes if o.method == "ilp")
    assert ilp.ok and len(ilp.candidates) == 2
    # how long each candidate took: every run, in the table and the JSON (auto hands them to its
    # timings callable; the command line prints them)
    assert {label for label, _ in c.seconds} == labels == set(auto_seconds)
    assert all(s >= 0 for _, s in c.seconds)
    table = render(c)
    assert "\n  ilp " in table and "synthesis (s, wall): " in table and "ilp@1MiB/pipelined" in table
    assert f"auto chose {c.chosen}" in table
    data = c.to_dict()
    assert {x["label"] for x in data["candidates"]} == labels and data["chosen"] == c.chosen
    assert data["sizes"][0]["methods"][0]["candidate"] == c.chosen


def test_the_ilp_is_listed_as_skipped_on_large_machines(builtin):
    c = compare(builtin("dgx2"), "broadcast", [1 << 10], methods=["ring", "ilp"])
    assert "exact solver" in dict(c.skipped_runs)["ilp"] and "exact solver" in {o.method: o.note for o in c.skipped}["ilp"]
    assert [r.method for r in c.rows(0)] == ["ring"]
    assert "  skipped: ilp: an exact solver" in render(c)
    assert "exact solver" in c.to_dict()["skipped"]["ilp"]
    # left out on request (the report and the suite: a time-limited solve is not reproducible)
    small = compare(builtin("dgx1"), "broadcast", [1 << 10], methods=["ring", "ilp"], exact=False)
    assert "left out here" in dict(small.skipped_runs)["ilp"]


def test_the_bound_terms_are_shown_by_name(builtin):
    """The "lower bound" line is the largest of several bounds: compare names each with its time,
    largest first, the binding one starred (docs/bounds.md); --json has them per size. On a machine
    over the LPs' rank cap, the bound says what it left out."""
    c = compare(builtin("dgx-a100"), "broadcast", [1 << 10, 1 << 20], methods=["binomial"])
    table = render(c)
    for i, report in enumerate(c.bounds):
        names = {b.name: b.time_us for b in report.bounds}
        assert "time-expanded" in names and "ingress" in names and "latency" in names
        assert report.time_us == max(names.values())
        listed = c.to_dict()["sizes"][i]["bound"]["terms"]
        assert {t["name"]: t["time_us"] for t in listed} == names
    # at 1 MiB scatter + allgather (two steps) beats one step: the time-expanded LP and root-pipeline
    # (one wave and a closing chunk) say the same time, and one of them binds
    at_1m = c.bounds[1]
    assert at_1m.binding in ("time-expanded", "root-pipeline")
    assert at_1m.bound("time-expanded").time_us == pytest.approx(at_1m.bound("root-pipeline").time_us, rel=1e-9)
    star = f"{at_1m.binding}*"
    rows = table.splitlines()
    at = next(i for i, x in enumerate(rows) if "terms (us):" in x and star in x)
    line = " ".join([rows[at]] + [x for x in rows[at + 1 : at + 3] if x.startswith(" " * 20)])  # wrapped
    assert line.index(star) < line.index("ingress") < line.index("latency")
    big = compare(builtin("dgx-a100x4"), "allgather", [1 << 20], methods=["ring"])
    assert any("time-expanded and crossing-steps LPs skipped: 32 ranks > 16" in n for n in big.bound_notes)
    assert "  lower bound: time-expanded and crossing-steps LPs skipped" in render(big)
    assert big.to_dict()["bound_notes"] == list(big.bound_notes)
