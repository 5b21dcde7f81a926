"""synth.torch on real torch.distributed jobs (gloo, CPU): collectives against torch's own and a
reference, refusals before any message, the DDP hook with a schedule set and its fallback,
``synth run --backend torch``, faults, and the example under torchrun.

The default suite runs a few small jobs (2 and 3 ranks, about 3 minutes of wall time on the shared
2-core machine); the hang and crash faults, torchrun's world-size refusal and the full matrix (2, 3, 4 and 8 ranks,
every quick method on rings and fully connected machines, every data type and operator, uneven
sizes) is marked slow. Everything here skips, saying why, when PyTorch is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip(
    "torch", reason="PyTorch is not installed (the torch extra: pip install 'synth[torch]'; make setup installs it)"
)

from synth import generators as gen
from synth.collective import ALL_KINDS, Kind
from synth.exec.schedule_set import ScheduleSet, SetEntry, save_schedule_set
from synth.schedule import load_schedule
from synth.topology import topology_to_json

from .conftest import REPO
from .live_processes import live_processes
from .torch_job import run_job
from .torch_schedules import schedules, topology_file

ALL_OPS = ["sum", "prod", "max", "min", "avg", "band", "bor", "bxor", "land", "lor"]
ALL_DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
TORCHRUN = Path(sys.executable).parent / "torchrun"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SYNTH_EXEC_FAULT"}
    env["OMP_NUM_THREADS"] = "1"
    return env


# ============================================================================ collectives
def test_every_collective_matches_torch_on_3_ranks(tmp_path):
    """Every collective (ring, direct and binomial schedules on a ring of 3), uneven element
    counts, against the reference and torch's own collective; and ranks calling different
    schedules get an error each, not a hang."""
    found = schedules(tmp_path, 3, methods=("ring", "direct", "binomial"), families=("ring",))
    assert {load_schedule(p).collective.kind for p, _ in found} == set(ALL_KINDS)
    result = run_job(
        3,
        "collectives",
        tmp_path,
        hard_exit=True,
        schedules=found,
        counts=[1, 1001],
        dtypes=["float32", "int64", "bool"],
        ops=ALL_OPS,
    )
    assert result["bad"] == []
    assert result["cases"] > 50


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 3, 4, 8])
def test_the_full_matrix(tmp_path, ranks):
    """Every quick method on a ring and a fully connected machine of ``ranks`` ranks, every data
    type and operator, empty, tiny and uneven element counts."""
    found = schedules(tmp_path, ranks)
    counts = [0, 1, 5, 1000, 4097] if ranks < 8 else [0, 3, 1001]
    result = run_job(
        ranks,
        "collectives",
        tmp_path,
        timeout=3000,
        hard_exit=True,
        schedules=found,
        counts=counts,
        dtypes=ALL_DTYPES,
        ops=ALL_OPS,
    )
    assert result["bad"] == []
    assert result["cases"] > 100


@pytest.mark.slow
def test_types_torch_has_and_gloo_cannot_reduce(tmp_path):
    """bfloat16, int16, the wide unsigned types and complex64 through synth's allreduce."""
    (path, topo), *_ = schedules(tmp_path, 4, kinds=[Kind.ALLREDUCE], methods=("ring",), families=("ring",))
    result = run_job(4, "data_types_everywhere", tmp_path, schedule=path, topology=topo)
    assert result["bad"] == []


# ============================================================================ refusals, fallback, DDP
def test_refusals_mismatches_async_and_fallback(tmp_path):
    """A schedule for another rank count or topology, the wrong collective, operators torch
    refuses: each refused before any message (and the group still works after); ranks calling
    different schedules or shapes get an error each, no hang; a size the set does not cover runs
    torch's own all_reduce, said once; a call shape is compiled once, whatever the tensors."""
    (path, topo), *_ = schedules(tmp_path, 2, kinds=[Kind.ALLREDUCE], methods=("ring",), families=("ring",))
    (other_world, _), *_ = schedules(tmp_path, 3, kinds=[Kind.ALLREDUCE], methods=("ring",), families=("ring",))
    other_topo = tmp_path / "slow-ring2.json"  # the same ranks and links, another bandwidth
    other_topo.write_text(topology_to_json(gen.ring(2, bandwidth=3.0)))
    limited = tmp_path / "limited"
    _write_set(path, limited, hi=100_000)
    checks = [
        ["refusals", {"schedule": path, "topology": topo, "other_world": other_world, "other_topology": str(other_topo)}],
        ["uneven_count", {"schedule": path, "topology": topo}],
        ["async_and_fallback", {"schedule_set": str(limited), "topology": topo}],
        ["compiled_once", {"schedule": path, "topology": topo}],
    ]
    # mismatched calls on purpose: the ranks leave without tearing gloo down (see run_job)
    result = run_job(2, "several", tmp_path, hard_exit=True, checks=checks)
    said = result["refusals"]
    assert "for 3 ranks" in said["other world"] and "this process group has 2" in said["other world"]
    assert "the schedule was made for topology" in said["other topology"]
    assert "broadcast needs a broadcast schedule" in said["wrong collective"]
    for name in ("avg on int", "band on float", "max on complex", "premul sum", "not contiguous"):
        assert said[name].startswith("ValueError"), (name, said[name])
    assert said["after"] == "3.0"
    assert "call a different schedule or shape" in result["uneven_count"]["error"]
    assert result["compiled_once"] == {"one shape": 1, "three shapes": 3, "a": 2.0**5, "b": 2.0, "r": 2}
    fallback = result["async_and_fallback"]
    assert fallback["done"] and fallback["sum"] == 2.0 and fallback["big"] == 2.0
    assert len(fallback["warnings"]) == 1 and "using torch.distributed.all_reduce" in fallback["warnings"][0]


def _write_set(schedule: str, folder: Path, hi: int) -> None:
    """A one-entry schedule set serving 1 B … ``hi`` B."""
    s = load_schedule(schedule)
    entry = SetEntry(s, 1, hi, "allreduce.json")
    save_schedule_set(ScheduleSet(Kind.ALLREDUCE, s.collective.num_ranks, s.topology_name, (entry,)), folder)


def test_the_ddp_hook_gives_plain_ddps_parameters(tmp_path):
    """A schedule set made by ``synth synthesize -m auto --sizes``; the hook takes each bucket's
    schedule from it; sizes above the set run torch's allreduce (said once); parameters equal
    plain DDP's within float32 tolerance."""
    _, topo = topology_file(tmp_path, "ring", 2)
    folder = tmp_path / "set"
    cmd = [sys.executable, "-m", "synth", "synthesize", topo, "-c", "allreduce", "-m", "auto", "--sizes", "1KiB,16KiB", "-q"]
    done = subprocess.run([*cmd, "-o", str(folder)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (folder / "index.json").is_file()
    result = run_job(2, "ddp", tmp_path, steps=5, schedules=str(folder), topology=topo)
    assert result["max_diff"] <= 1e-5
    assert sum(result["calls"].values()) > 0  # buckets the set covers ran a schedule
    assert result["fallback"] and all(size > 16 * 1024 for size in result["fallback"])


# ============================================================================ synth run --backend torch
def _run(tmp_path: Path, *args: str, fault: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    _, topo = topology_file(tmp_path, "ring", 3)
    schedule = tmp_path / f"marker-{os.getpid()}-{time.monotonic_ns()}.json"
    made = subprocess.run(
        [sys.executable, "-m", "synth", "synthesize", topo, "-c", "allreduce", "-m", "ring", "-o", str(schedule)],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    env = _env()
    if fault:
        env["SYNTH_EXEC_FAULT"] = fault
    cmd = [sys.executable, "-m", "synth", "run", str(schedule), "--backend", "torch", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    done.marker = str(schedule)  # type: ignore[attr-defined]
    return done


def test_synth_run_backend_torch_compares_with_pytorch(tmp_path):
    done = _run(tmp_path, "--size", "8,64K", "-d", "float32,int32", "-o", "sum,max", "--compare-native", "-n", "3", "-w", "1")
    assert done.returncode == 0, done.stderr
    assert "dist.all_reduce" in done.stdout and "PyTorch's own collective" in done.stdout
    assert "Wrong elements       : 0 (all results checked: OK)" in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.strip() and not line.startswith("#")]
    assert len(rows) == 8  # 2 sizes x 2 types x 2 operators


@pytest.mark.parametrize(
    "kind", ["kill", pytest.param("hang", marks=pytest.mark.slow), pytest.param("crash", marks=pytest.mark.slow)]
)
def test_a_failing_rank_ends_the_run_naming_rank_and_step(tmp_path, kind):
    began = time.monotonic()
    done = _run(tmp_path, "--size", "1K", "-n", "2", "-w", "1", "--timeout", "3", fault=f"1:2:{kind}")
    assert done.returncode == 3, (done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.startswith("synth: error:")]
    assert len(lines) >= 1 and lines[0].startswith("synth: error: rank 1 ") and "step 2 " in lines[0], done.stderr
    expected = {"kill": "killed by SIGKILL", "hang": "made no progress for 3 s", "crash": "InjectedFault"}[kind]
    assert expected in lines[0]
    assert time.monotonic() - began < 120
    assert live_processes(done.marker) == []  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_schedule_for_another_world_size_is_refused_under_torchrun(tmp_path):
    """Started by hand under torchrun with 2 processes, a 3-rank schedule is refused before the
    ranks join a group: one line, exit 2."""
    if not TORCHRUN.exists():
        pytest.skip(f"torchrun is not beside {sys.executable}")
    _, topo = topology_file(tmp_path, "ring", 3)
    schedule = tmp_path / "ar3.json"
    subprocess.run(
        [sys.executable, "-m", "synth", "synthesize", topo, "-c", "allreduce", "-m", "ring", "-o", str(schedule)],
        check=True,
        capture_output=True,
    )
    cmd = [str(TORCHRUN), "--nproc-per-node", "2", "-m", "synth.exec.torch_backend", str(schedule), "--size", "1K"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=300, cwd=tmp_path)
    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if line.startswith("synth: error:")]
    assert said == [f"synth: error: {schedule}: the schedule has 3 ranks but the job has 2 (WORLD_SIZE)"]


def test_the_example_runs_under_torchrun(tmp_path):
    """examples/ddp_synth.py as its docstring says, on 2 ranks: the parameters agree."""
    if not TORCHRUN.exists():
        pytest.skip(f"torchrun is not beside {sys.executable}")
    cmd = [str(TORCHRUN), "--nproc-per-node", "2", str(REPO / "examples" / "ddp_synth.py"), "--steps", "4"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 ranks, 4 steps" in done.stdout
    assert "parameters identical" in done.stdout or "parameters agree to float32 rounding" in done.stdout
