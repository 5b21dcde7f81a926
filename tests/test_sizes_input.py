"""Sizes and step factors as users write them: one rule everywhere, refused in one line when odd."""

from __future__ import annotations

import pytest

from synth.units import MAX_SIZE, parse_size, parse_sizes, size_range
from tests.cli_helpers import assert_bad_input, invoke


@pytest.fixture(scope="module")
def schedule_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("s") / "s.json"
    assert invoke("synthesize", "dgx1", "-c", "allreduce", "-m", "ring", "-o", path).exit_code == 0
    return path


def test_huge_sizes_are_refused_exactly():
    with pytest.raises(ValueError, match="between 1 byte"):
        parse_size("99999999999999999999999", minimum=1)
    with pytest.raises(ValueError, match="between 0"):
        parse_size("9" * 5000)
    assert parse_size("0") == 0  # a byte threshold (MSCCL's minBytes) may be 0; a call size may not
    with pytest.raises(ValueError, match="between 1 byte"):
        parse_size("0", minimum=1)
    assert parse_size("1024T") == MAX_SIZE
    assert parse_size("1.5K") == 1536


@pytest.mark.parametrize(
    "args",
    [
        ("run", "--size", "99999999999999999999999"),
        ("simulate", "--size", "99999999999999999999999"),
        ("simulate", "-b", "1", "-e", "99999999999999999999999"),
    ],
)
def test_huge_sizes_on_the_command_line(schedule_file, args):
    assert_bad_input(invoke(args[0], schedule_file, *args[1:]), "99999999999999999999999")


def test_huge_sizes_in_report_and_compare(tmp_path):
    assert_bad_input(invoke("report", "dgx1", "-c", "allreduce", "--size", "9" * 23, "-o", tmp_path / "r.html"), "between")
    assert_bad_input(invoke("compare", "dgx1", "-c", "allreduce", "-m", "ring", "--size", "9" * 23), "between")


def test_run_checks_the_buffers_against_memory(schedule_file):
    assert_bad_input(invoke("run", schedule_file, "--size", "1T"), "--size", "of shared memory but")


@pytest.mark.parametrize("factor", ["nan", "inf", "1", "0.5", "-2"])
def test_step_factor_must_be_finite_and_above_one(schedule_file, factor):
    assert_bad_input(invoke("run", schedule_file, "-b", "8", "-e", "1K", "-f", factor), "--stepfactor")
    assert_bad_input(invoke("simulate", schedule_file, "-b", "8", "-e", "1K", "-f", factor), "-f")
    with pytest.raises(ValueError):
        size_range(8, 1024, float(factor))


def test_size_zero_is_refused_everywhere(schedule_file):
    for args in (("--size", "0"), ("-b", "0", "-e", "0"), ("-b", "0", "-e", "8")):
        assert_bad_input(invoke("simulate", schedule_file, *args), "between 1 byte")
        assert_bad_input(invoke("run", schedule_file, *args), "between 1 byte")


@pytest.mark.parametrize("text", ["1Mb", "8b", "1kb", "1Gb", "1mib", "1tb"])
def test_lowercase_b_is_refused(text, schedule_file):
    with pytest.raises(ValueError, match="lowercase b means bits"):
        parse_size(text)
    assert_bad_input(invoke("simulate", schedule_file, "--size", text), "lowercase b means bits")


def test_the_unit_rules():
    assert parse_size("1M") == parse_size("1m") == parse_size("1MiB") == 2**20
    assert parse_size("1MB") == 10**6
    assert parse_size("8B") == parse_size("8") == 8


def test_lists_and_ranges_are_bounded():
    with pytest.raises(ValueError, match="more than"):
        size_range(1, 2**40, 1.0000001)
    with pytest.raises(ValueError, match="more than"):
        size_range(1, 2**40, step=1)
    with pytest.raises(ValueError, match="more than"):
        parse_sizes(",".join(["8"] * 100_001))
