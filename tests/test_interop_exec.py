"""Algorithms written elsewhere run for real: each published MSCCL XML file in tests/data, imported
onto the DGX A100 (`synth import msccl`), runs on both executors with every result checked against
numpy (`synth run`), including sizes that do not divide into the file's chunks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

FILES = sorted((REPO / "tests" / "data").glob("msccl-*.xml"))
MPIEXEC = Path(sys.executable).parent / "mpiexec"


def _synth(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synth", *args], capture_output=True, text=True, timeout=180, cwd=REPO)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("msccl")
    out = {}
    for path in FILES:
        target = folder / f"{path.stem}.json"
        result = _synth("import", "msccl", str(path), "--topology", "dgx-a100", "-o", str(target))
        assert result.returncode == 0, result.stdout + result.stderr
        out[path.stem] = target
    return out


def test_every_published_file_is_covered():
    assert len(FILES) >= 4


@pytest.mark.parametrize("backend", ["mp", "mpi"])
@pytest.mark.parametrize("stem", [p.stem for p in FILES])
def test_imported_msccl_algorithm_runs_correctly(imported, stem, backend):
    if backend == "mpi" and not MPIEXEC.is_file():
        pytest.skip("needs the mpich wheel's mpiexec")
    args = ["run", str(imported[stem]), "--topology", "dgx-a100", "--backend", backend]
    args += ["--size", "8,1000,65536,1MiB", "-d", "float32,int32", "-n", "2", "-w", "1", "--timeout", "30"]
    if "allreduce" in stem:
        args += ["-o", "sum,max"]
    result = _synth(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.strip() and not line.startswith("#")]
    table = [row for row in rows if row[0].isdigit()]
    assert len(table) == 4 * 2 * (2 if "allreduce" in stem else 1)
    assert all(row[8] == "0" for row in table), result.stdout  # #wrong
    assert "all results checked: OK" in result.stdout
