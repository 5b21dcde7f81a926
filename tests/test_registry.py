"""The method table: each method module describes itself once (``METHOD``), the registry only
collects them, and a `Method` runs (and verifies) without the registry."""

from __future__ import annotations

import importlib

import pytest

from synth import ilp
from synth.errors import NotApplicable
from synth.ilp.search import CLASSIC_BASELINES
from synth.method import FAMILIES, Method, one_chunk
from synth.registry import CLASSIC_METHODS, METHODS, NCCL_METHODS, get_method, synthesize
from synth.schedule import same_transfers
from synth.selection import auto_method

MODULES = [
    "ring",
    "direct",
    "binomial",
    "recursive_doubling",
    "recursive_halving",
    "scatter_allgather",
    "multiring",
    "double_binary_tree",
    "hierarchical",
    "greedy",
    "packing",
    "one_shot",
    "pipelined_tree",
    "multipath",
    "weighted_two_shot",
    "socket_pipeline",
    "duplex_packing",
    "host_deal",
    "slow_feed",
]


def test_each_method_names_itself_once():
    described = {}
    for module_name in MODULES:
        module = importlib.import_module(f"synth.algorithms.{module_name}")
        assert isinstance(module.METHOD, Method) and module.METHOD.name == module.NAME
        described[module.NAME] = module.METHOD
    described[ilp.NAME] = ilp.METHOD
    assert {name: m for name, m in METHODS.items() if name != "auto"} == described
    assert all(m.summary and m.family in FAMILIES for m in METHODS.values())
    assert list(METHODS)[-1] == "auto" and METHODS["auto"].family == "meta"


def test_families_give_the_baseline_lists():
    assert CLASSIC_METHODS == ("ring", "direct", "binomial", "recursive-doubling", "recursive-halving", "scatter-allgather")
    assert NCCL_METHODS == ("multiring", "double-binary-tree", "hierarchical")
    # the ILP's warm starts and Pareto baselines are the classic family, in the registry's order
    assert tuple(m.name for m in CLASSIC_BASELINES) == CLASSIC_METHODS


def test_a_method_runs_without_the_registry(dgx1):
    from synth.algorithms import ring

    direct_run = ring.METHOD.synthesize(dgx1, "allreduce")
    assert same_transfers(direct_run, synthesize(dgx1, "allreduce", "ring")) and direct_run.method == "ring"
    with pytest.raises(NotApplicable, match="does not serve alltoall"):
        ring.METHOD.synthesize(dgx1, "alltoall")
    with pytest.raises(NotApplicable, match="takes no option"):
        ring.METHOD.synthesize(dgx1, "allgather", options={"size": 1})
    assert get_method("ring") is ring.METHOD


def test_a_method_description_is_checked():
    with pytest.raises(ValueError, match="family"):
        Method("x", "x", "magic", frozenset(), lambda *a: None, one_chunk)
    with pytest.raises(ValueError, match="exact method takes the options"):
        Method("x", "x", "exact", frozenset(), lambda *a: None, one_chunk)


def test_auto_is_built_over_the_table_it_is_given(dgx1):
    """auto over a table of two methods chooses between those two only."""
    two = auto_method([METHODS["ring"], METHODS["direct"]])
    schedule = two.synthesize(dgx1, "allgather", options={"size": 1 << 10})
    assert set(schedule.params["predicted_us"]) == {"ring", "direct"} and schedule.params["chosen"] == "direct"
