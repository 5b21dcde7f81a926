"""The full matrix (slow): every generated schedule of every built-in topology with at most 16
ranks, every data type and every operator, at sizes that give empty, uneven and even chunks, on
both backends (the MPI runs also check MPI's own collective on the same buffers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from synth.builtin import BUILTIN_NAMES, get_topology

from .conftest import REPO

SMALL = [name for name in BUILTIN_NAMES if get_topology(name).num_ranks <= 16]
CASES = [f"{name}/{path.name}" for name in SMALL for path in sorted((REPO / "generated" / name).glob("*.json"))]
HAVE_MPI = (Path(sys.executable).parent / "mpiexec").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["mp", pytest.param("mpi", marks=pytest.mark.skipif(not HAVE_MPI, reason="needs mpich"))])
@pytest.mark.parametrize("case", CASES)
def test_every_small_builtin_schedule_dtype_and_op(backend, case):
    args = ["--size", "8,100,4096,65548", "-d", "all", "-o", "all", "-n", "1", "-w", "0"]
    if backend == "mpi":
        args.append("--compare-native")
    cmd = [sys.executable, "-m", "synth", "run", f"generated/{case}", "--backend", backend, *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "all results checked: OK" in result.stdout


def test_the_matrix_covers_every_small_builtin_and_collective():
    from synth.collective import ALL_KINDS
    from synth.registry import METHODS

    assert set(SMALL) == {"dgx1", "dgx2", "dgx-a100", "dgx-h100", "pcie-2socket", "ndv2x2", "dgx-a100x2"}
    for name in SMALL:
        stems = [case.split("/")[1][: -len(".json")] for case in CASES if case.startswith(name + "/")]
        kinds = {stem[: -len(method) - 1] for stem in stems for method in METHODS if stem.endswith("-" + method)}
        assert kinds == {k.value for k in ALL_KINDS}, name
