"""``auto``: the best predicted schedule among every applicable method, explained."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from synth import generators as gen
from synth.algorithms.engines.size_tuning import predicted_us
from synth.cli import main
from synth.collective import ROOTED, Kind
from synth.errors import NotApplicable
from synth.method import Method
from synth.registry import CLASSIC_METHODS, METHODS, NCCL_METHODS, synthesize
from synth.selection import COST_ORDER, EXACT_MIN_SECONDS, EXACT_SECONDS, EXACT_WORK, cost_rank, plan, select
from synth.verify import verify

from .reference import numeric_replay


@pytest.fixture(autouse=True)
def no_ilp_unless_asked(request, monkeypatch):
    """The ILP gets up to EXACT_WORK per size in auto; only the tests about it let it run."""
    if "ilp" not in request.node.name:
        monkeypatch.setattr("synth.selection.EXACT_RANKS", 0)


def classic_times(topo, kind, size, root=None):
    out = {}
    for name in CLASSIC_METHODS:
        if not METHODS[name].serves(kind):
            continue
        try:
            schedule = synthesize(topo, kind, name, root=root)
        except NotApplicable:
            continue
        out[name] = predicted_us(schedule, topo, [size])[0]
    return out


@pytest.mark.parametrize("kind", list(Kind))
def test_every_collective_never_worse_than_a_classic(small_topologies, kind):
    topo = small_topologies["fattree2x2x2"]
    root = 1 if kind in ROOTED else None
    for size in (1 << 10, 1 << 30):
        schedule = synthesize(topo, kind, "auto", root=root, options={"size": size})
        assert verify(schedule, topo).ok
        assert numeric_replay(schedule)
        chosen = predicted_us(schedule, topo, [size])[0]
        assert chosen == pytest.approx(schedule.params["predicted_us"][schedule.params["chosen"]][0], abs=1e-3)
        assert all(chosen <= t * (1 + 1e-9) for t in classic_times(topo, kind, size, root).values())
        assert chosen == pytest.approx(min(ts[0] for ts in schedule.params["predicted_us"].values()), abs=1e-3)


def test_explains_its_choice(dgx1):
    schedule = synthesize(dgx1, "allgather", "auto", options={"size": 1 << 30})
    params = schedule.params
    assert schedule.method == "auto"
    assert params["chosen"].split("@")[0] in METHODS
    assert params["chosen_method"] == params["chosen"].split("@")[0]
    assert params["explanation"][0].startswith(f"auto chose {params['chosen']}")
    assert "lower bound" in params["explanation"][0]
    assert params["lower_bound_us"][0] <= params["predicted_us"][params["chosen"]][0]


def test_tells_how_long_each_candidate_took(dgx1):
    seconds: dict[str, float] = {}
    schedule = synthesize(dgx1, "allgather", "auto", options={"sizes": [1 << 10, 1 << 30], "timings": seconds.update})
    assert "seconds" not in schedule.params  # (wall times would make the file differ from run to run)
    assert set(schedule.params["predicted_us"]) <= set(seconds)  # a repeated schedule's run is timed too
    assert all(isinstance(s, float) and s >= 0 for s in seconds.values())
    assert {"greedy@1KiB", "greedy@1GiB", "ring"} <= set(seconds)


def test_a_range_of_sizes(dgx1):
    sizes = [1 << 10, 1 << 20, 1 << 30]
    schedule = synthesize(dgx1, "allreduce", "auto", options={"sizes": sizes})
    params = schedule.params
    assert params["sizes"] == sizes
    assert len(params["predicted_us"][params["chosen"]]) == 3
    assert "geometric mean" in params["explanation"][0]
    # tuned methods ran once per size
    assert {"greedy@1KiB", "greedy@1MiB", "greedy@1GiB"} <= set(params["predicted_us"])


def test_budget_keeps_only_the_baselines(dgx1):
    schedule = synthesize(dgx1, "allgather", "auto", options={"budget": 0.0})
    assert all(label.split("@")[0] in CLASSIC_METHODS + NCCL_METHODS for label in schedule.params["predicted_us"])
    assert "time budget" in schedule.params["skipped"]["greedy"]


def test_the_ilp_runs_on_small_machines_only(builtin):
    # (at 1 MiB no faster candidate meets the bound first, which would prune the ILP)
    small = synthesize(builtin("dgx1"), "broadcast", "auto", root=0, options={"size": 1 << 20})
    assert any(label.startswith("ilp") for label in small.params["predicted_us"])
    large = synthesize(builtin("dgx2"), "broadcast", "auto", root=0, options={"size": 1 << 10})
    assert "exact solver" in large.params["skipped"]["ilp"]


def test_option_errors(dgx1):
    with pytest.raises(ValueError, match="either size or sizes"):
        synthesize(dgx1, "allgather", "auto", options={"size": 1, "sizes": [1]})


def test_cli_prints_the_choice(tmp_path):
    out = tmp_path / "s.json"
    result = CliRunner().invoke(main, ["synthesize", "dgx1", "-c", "allgather", "-m", "auto", "--size", "1KiB", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "auto chose" in result.output
    assert out.is_file()
    result = CliRunner().invoke(main, ["synthesize", "dgx1", "-c", "allgather", "-m", "ring", "--size", "1KiB", "-o", str(out)])
    assert result.exit_code == 2
    assert "does not take it" in result.output


def test_identical_candidates_kept_once_and_explanation_short(builtin):
    """hierarchical allreduce builds the same schedule for sizes this close (all latency-bound),
    so its runs for several sizes are one candidate; the explanation shows the smallest, middle and
    largest of many sizes (params hold them all)."""
    topo = builtin("dgx-a100x2")
    sizes = [(1 << 10) + 64 * i for i in range(11)]  # 1 KiB .. 1.6 KiB
    schedule = synthesize(topo, "allreduce", "auto", options={"sizes": sizes, "budget": 60})
    labels = [label for label in schedule.params["predicted_us"] if label.startswith("hierarchical")]
    assert len(labels) == 1
    assert all(len(times) == len(sizes) for times in schedule.params["predicted_us"].values())
    first = schedule.params["explanation"][0]
    assert "over 11 sizes" in first and first.count("x the lower bound") == 3


def test_pipelined_ilp_candidate_at_large_sizes(builtin, monkeypatch):
    """At 1 GiB on an 8-rank machine auto also asks the ILP for a pipelined schedule, with waves of
    ingress / slowest link chunks: on a DGX-1 (6) that reaches the gather bound the greedy misses.
    The ILP gets 120 s instead of auto's 10: its solves end at their proof in about 5 s, but on a
    loaded machine (pytest-xdist workers, other users) 10 s of wall time can stop it short of
    the bound (1.29 x seen), which would test the machine's load, not auto."""
    from synth.bounds import bound_model
    from synth.selection import wave_chunks

    monkeypatch.setattr("synth.selection.EXACT_SECONDS", 120.0)
    dgx1 = builtin("dgx1")
    assert wave_chunks(dgx1) == 6 and wave_chunks(gen.nvswitch(8, 100.0)) == 1
    schedule = synthesize(dgx1, "gather", "auto", root=0, options={"size": 1 << 30, "budget": 600})
    assert "ilp@1GiB/pipelined" in schedule.params["predicted_us"]
    best = min(times[0] for times in schedule.params["predicted_us"].values())
    assert best <= 1.05 * bound_model(dgx1, "gather", 0).time_us(1 << 30)  # 1.001 once the ILP proves its optimum
    assert predicted_us(schedule, dgx1, [1 << 30])[0] == pytest.approx(best, abs=1e-3)
    small = synthesize(dgx1, "gather", "auto", root=0, options={"size": 1 << 10})
    assert not any("pipelined" in label for label in small.params["predicted_us"])


def test_plan_runs_the_cheap_families_first(builtin):
    """Whatever order the methods come in, the baselines run first, then the self-tuning
    synthesizers, then exact solvers (selection.COST_ORDER), each family in the order given."""
    methods = list(reversed([m for m in METHODS.values() if m.family != "meta"]))
    runs, _ = plan(methods, builtin("dgx1"), Kind.ALLGATHER, [1 << 20])
    ranks = [cost_rank(run.method) for run in runs]
    assert ranks == sorted(ranks) and len(set(ranks)) > 1
    assert [COST_ORDER[i] for i in dict.fromkeys(ranks)] == [f for f in COST_ORDER if f in {r.method.family for r in runs}]
    classic = [run.method.name for run in runs if run.method.family == "classic"]
    assert classic == [m.name for m in methods if m.family == "classic" and m.serves(Kind.ALLGATHER)]


@pytest.mark.parametrize(
    "name, kind, size", [("dgx-a100", "allgather", 1 << 16), ("dgx1", "allreduce", 1 << 20), ("dgx-a100x2", "alltoall", 1 << 16)]
)
def test_pruning_keeps_the_chosen_time(builtin, name, kind, size):
    """auto prunes (the bound met, methods that cannot beat the best) and chooses the same time as
    a selection that runs every candidate to the end; what it pruned it says, with the seconds of
    a run it stopped."""
    topo = builtin(name)
    table = [m for m in METHODS.values() if m.family != "meta"]
    full = select(table, topo, kind, [size])
    pruned = select(table, topo, kind, [size], prune=True)
    assert pruned.chosen.times_us[0] == pytest.approx(full.chosen.times_us[0], rel=1e-12)
    assert len(pruned.ranked) <= len(full.ranked)
    for label, why in pruned.skipped:
        if "cannot beat" in why:
            assert label in dict(pruned.seconds)


def test_a_baseline_at_the_bound_ends_the_search(builtin):
    """On a DGX A100 a 64 KiB allgather's direct schedule meets the lower bound: nothing can be
    faster, so auto runs no synthesizer after the baselines and says why."""
    seconds: dict[str, float] = {}
    schedule = synthesize(builtin("dgx-a100"), "allgather", "auto", options={"size": 1 << 16, "timings": seconds.update})
    params = schedule.params
    assert params["predicted_us"][params["chosen"]][0] == pytest.approx(params["lower_bound_us"][0], rel=1e-6)
    assert "meets the lower bound" in params["skipped"]["greedy"]
    assert not any(label.startswith(("greedy", "packing")) for label in seconds)


def test_the_same_auto_command_writes_the_same_file(tmp_path):
    """The candidates' wall seconds are printed, not written: two runs give byte-identical files."""
    files = []
    for name in ("a.json", "b.json"):
        out = tmp_path / name
        result = CliRunner().invoke(
            main, ["synthesize", "dgx1", "-c", "allgather", "-m", "auto", "--size", "1KiB", "-q", "-o", str(out)]
        )
        assert result.exit_code == 0, result.output
        assert "synthesis (s, wall): " in result.output and "ring " in result.output
        files.append(out.read_bytes())
    assert files[0] == files[1]


def test_exact_runs_like_the_ilp_get_a_work_limit(builtin):
    """auto gives every exact run the same work limit (EXACT_WORK: counted by the solver, so its
    cut, and the schedule, do not depend on the machine's speed), whatever time the runs before it
    took; the time limit it also gets is only a safety net, never under EXACT_MIN_SECONDS. Checked
    with a stand-in exact method that records its options and builds a ring."""
    seen: list[dict] = []
    ring = METHODS["ring"]

    def build(topology, collective, router=None, **options):
        seen.append(options)
        return ring.build(topology, collective, router)

    exact = Method(
        name="recorder",
        summary="records the options an exact run gets",
        family="exact",
        collectives=frozenset({Kind.ALLGATHER}),
        build=build,
        default_chunks=ring.default_chunks,
        options=frozenset({"size", "time_limit", "work_limit", "pipeline", "wave_chunks"}),
    )
    select([ring, exact], builtin("dgx1"), Kind.ALLGATHER, [1 << 10, 1 << 20])
    assert len(seen) == 3  # two sizes and the pipelined run
    assert all(o["work_limit"] == EXACT_WORK for o in seen)
    assert all(EXACT_MIN_SECONDS <= o["time_limit"] <= EXACT_SECONDS for o in seen)
