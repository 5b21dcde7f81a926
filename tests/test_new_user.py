"""What new users type: the collective spellings of PyTorch and MSCCL, and unknown methods."""

from __future__ import annotations

import pytest

from synth.collective import Kind, parse_kind
from tests.cli_helpers import assert_bad_input, invoke

SPELLINGS = {
    "all_reduce": Kind.ALLREDUCE,
    "allreduce": Kind.ALLREDUCE,
    "All-Reduce": Kind.ALLREDUCE,
    "reduce_scatter": Kind.REDUCE_SCATTER,
    "reducescatter": Kind.REDUCE_SCATTER,
    "ReduceScatter": Kind.REDUCE_SCATTER,
    "allgather": Kind.ALLGATHER,
    "all_gather": Kind.ALLGATHER,
    "all_to_all": Kind.ALLTOALL,
    "alltoall": Kind.ALLTOALL,
    "broadcast": Kind.BROADCAST,
}


@pytest.mark.parametrize("name,kind", SPELLINGS.items())
def test_parse_kind_takes_every_spelling(name, kind):
    assert parse_kind(name) is kind


@pytest.mark.parametrize("name", ["", "all", "reduce scatter gather", "allreduce2", "bcast"])
def test_parse_kind_refuses_the_rest(name):
    with pytest.raises(ValueError, match="not a collective"):
        parse_kind(name)


@pytest.mark.parametrize("name", ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "alltoall"])
def test_the_command_line_takes_them(name):
    result = invoke("bound", "dgx1", "-c", name, "--size", "1M")
    assert result.exit_code == 0, result.output
    assert parse_kind(name).value in result.stdout


def test_an_unknown_collective_is_one_line():
    assert_bad_input(invoke("bound", "dgx1", "-c", "allreduse", "--size", "1M"), "--collective", "allreduse", "allreduce")


def test_an_unknown_method_in_compare_is_bad_input():
    """`synth compare T -c allreduce -m rng` used to exit 0 with only the bound."""
    line = assert_bad_input(invoke("compare", "dgx1", "-c", "allreduce", "-m", "rng", "--size", "1M"), "--methods", "rng")
    assert "ring" in line and "greedy" in line  # the known ones are listed
    assert_bad_input(invoke("compare", "dgx1", "-c", "allreduce", "-m", "ring,rng", "--size", "1M"), "rng")
    assert_bad_input(invoke("compare", "dgx1", "-c", "allreduce", "-m", ",", "--size", "1M"), "names no method")
    ok = invoke("compare", "dgx1", "-c", "all_reduce", "-m", "ring", "--size", "1M")
    assert ok.exit_code == 0 and "ring" in ok.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (("synthesize", "dgx1", "-c", "allreduce", "-m", "rng"), "'rng' is not one of"),
        (("synthesize", "dgx1"), "Missing option"),
        (("nosuch",), "No such command"),
        (("topo", "gen", "ring", "--ranks", "x"), "not a valid integer"),
    ],
)
def test_usage_errors_are_one_line_too(args, needle):
    assert_bad_input(invoke(*args), needle, "--help")
