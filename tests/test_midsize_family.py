"""The mid-size benchmark's random family (benchmarks/midsize.py) is fixed: issue 17 measures every
method against it, so it must not drift. A generator change that alters one of these machines
changes the yardstick: say so in the commit and re-run the benchmark on today's code first."""

import hashlib
import importlib.util
import sys
from pathlib import Path

from synth.generators import random_machine
from synth.topology import topology_to_json

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "midsize.py"

#: (family, seed, ranks, first 16 hex digits of the sha256 of the topology file's text)
FIXED = (
    ("mi250", 1, 64, "c6fe769ca4c10c88"),
    ("mi250", 2, 16, "217caebc204efc68"),
    ("mi300x", 1, 24, "205bc8856dd905d1"),
    ("mi300x", 2, 24, "aa4ace556c2556e1"),
    ("gaudi", 1, 64, "f17c6527254f0740"),
    ("gaudi", 2, 16, "e18182d38ff9352a"),
    ("multihost", 1, 32, "2e3afc07017aa84c"),
    ("multihost", 2, 36, "10a64f3fdbf7b3f7"),
    ("rail-only", 1, 56, "418f370e352607f8"),
    ("rail-only", 2, 44, "6749af73280b8c83"),
    ("fattree", 1, 48, "82d7ba944e864fcf"),
    ("fattree", 2, 24, "eafb394bbf5ba00a"),
    ("fattree3", 1, 8, "d8f2bb2a7a8c406d"),
    ("fattree3", 2, 24, "a428354fba088601"),
    ("torus3d", 1, 48, "20590c224ac1b2e8"),
    ("torus3d", 2, 90, "231c2305e96183f9"),
    ("dragonfly", 1, 42, "540f752097daa66d"),
    ("dragonfly", 2, 16, "e9a60f0f3690657e"),
    ("nvl72", 1, 72, "139963ea865ddd62"),
    ("nvl72", 2, 72, "6be6da06a333e88d"),
    ("pcie-asym", 1, 10, "c49bc1c795b7321f"),
    ("pcie-asym", 2, 9, "22f433be69e0c5a4"),
)


def _benchmark():
    spec = importlib.util.spec_from_file_location("midsize_benchmark", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_the_benchmark_runs_the_fixed_seeds():
    in_benchmark = _benchmark().RANDOM_MACHINES
    assert in_benchmark == tuple((family, seed) for family, seed, _, _ in FIXED)


def test_the_fixed_machines_are_byte_identical():
    for family, seed, ranks, digest in FIXED:
        t = random_machine(seed, family)
        assert t.num_ranks == ranks, (family, seed)
        assert hashlib.sha256(topology_to_json(t).encode()).hexdigest()[:16] == digest, (family, seed)
