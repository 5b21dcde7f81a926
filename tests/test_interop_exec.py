"""Algorithms written elsewhere run for real: each published MSCCL XML file in the shared real-data
folder (../shared/reference/realdata, skipped when absent), imported (`synth import msccl`) onto an
NVSwitch box of its size, runs on both executors with every result checked against numpy
(`synth run`), including sizes that do not divide into the file's chunks. MSCCLang's
recursive-doubling allgather is left out: its import is refused for a race between thread blocks
(tests/test_msccl_import.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REALDATA, REPO

FILES = sorted(p for p in REALDATA.glob("msccl-*.xml") if "recursive-doubling" not in p.name)
MPIEXEC = Path(sys.executable).parent / "mpiexec"


def _synth(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synth", *args], capture_output=True, text=True, timeout=180, cwd=REPO)


def _gpus(path: Path) -> int:
    match = re.search(r'ngpus="(\d+)"', path.read_text(encoding="utf-8"))
    assert match
    return int(match.group(1))


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """stem -> (schedule, topology) for every file."""
    folder = tmp_path_factory.mktemp("msccl")
    out = {}
    for path in FILES:
        gpus = _gpus(path)
        topology = "dgx-a100"
        if gpus != 8:
            topology = str(folder / f"nvswitch{gpus}.json")
            result = _synth("topo", "gen", "nvswitch", "--gpus", str(gpus), "-o", topology)
            assert result.returncode == 0, result.stderr
        target = folder / f"{path.stem}.json"
        result = _synth("import", "msccl", str(path), "--topology", topology, "-o", str(target))
        assert result.returncode == 0, result.stdout + result.stderr
        out[path.stem] = (target, topology)
    return out


def test_every_published_file_is_covered():
    if not REALDATA.is_dir():
        pytest.skip(f"needs {REALDATA} (the shared real-data folder beside the checkout)")
    assert len(FILES) >= 7


def _cases() -> list:
    """Every file on both backends; MSCCLang's files on the MPI backend only with the slow tests
    (the default suite stays short; the shared-memory run already checks their data)."""
    out = []
    for path in FILES:
        for backend in ("mp", "mpi"):
            slow = backend == "mpi" and path.stem.endswith("-mscclang")
            out.append(pytest.param(path.stem, backend, marks=[pytest.mark.slow] if slow else [], id=f"{path.stem}-{backend}"))
    return out


@pytest.mark.parametrize(("stem", "backend"), _cases())
def test_imported_msccl_algorithm_runs_correctly(imported, stem, backend):
    if backend == "mpi" and not MPIEXEC.is_file():
        pytest.skip("needs the mpich wheel's mpiexec")
    schedule, topology = imported[stem]
    args = ["run", str(schedule), "--topology", topology, "--backend", backend]
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
