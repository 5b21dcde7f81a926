"""Sizes that nothing capped: each is checked against what it can mean and against memory before
anything is allocated, and refused in one line."""

from __future__ import annotations

import pytest

from synth import generators as gen
from tests.cli_helpers import assert_bad_input, invoke


@pytest.mark.parametrize(
    "args",
    [
        ("hypercube", "--dim", "40"),
        ("hypercube", "--dim", "100000"),
        ("ring", "--ranks", "1000000000"),
        ("torus", "--rows", "100000", "--cols", "100000"),
        ("mesh", "--rows", "100000", "--cols", "100000"),
        ("full", "--ranks", "100000"),
        ("nvswitch", "--gpus", "8", "--boxes", "10000000", "--nic-bandwidth", "25"),
        ("dgx1", "--boxes", "10000000", "--nic-bandwidth", "12.5"),
        ("pcie", "--sockets", "100000", "--gpus-per-switch", "1000"),
        ("fattree", "--racks", "1" + "0" * 30),
    ],
)
def test_generators_refuse_machines_too_large(args):
    assert_bad_input(invoke("topo", "gen", *args), "synth topo gen", "at most")


def test_generator_limits_leave_real_machines():
    assert gen.hypercube(10).num_ranks == 1024
    assert gen.fattree(racks=16, servers=4, gpus=8).num_ranks == 512
