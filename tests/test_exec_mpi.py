"""The MPI backend: ``synth run --backend mpi`` (with MPI's own collective beside it) and the
MPI-side API a user's mpi4py program calls, under the venv's own mpiexec."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import REPO

mpi4py = pytest.importorskip("mpi4py")
MPIEXEC = Path(sys.executable).parent / "mpiexec"
pytestmark = pytest.mark.skipif(not MPIEXEC.is_file(), reason="needs the mpich wheel's mpiexec")


def _synth_run(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "synth", "run", "--backend", "mpi", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.mark.parametrize(
    ("name", "dtype", "op"),
    [
        ("allreduce-ring", "float32", "sum"),
        ("allreduce-recursive-doubling", "int8,float64", "prod,max"),
        ("reduce-scatter-recursive-halving", "uint32", "min"),
        ("alltoall-direct", "float16", "sum"),
        ("gather-binomial", "int64", "sum"),
        ("scatter-ring", "uint8", "sum"),
        ("broadcast-binomial", "float32", "sum"),
    ],
)
def test_synth_run_mpi_with_native_comparison(name, dtype, op):
    result = _synth_run(
        f"generated/dgx1/{name}.json",
        "--size",
        "8,100,4096,65548",
        "-d",
        dtype,
        "-o",
        op,
        "-n",
        "2",
        "-w",
        "1",
        "--compare-native",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if not line.startswith("#")]
    assert len(rows) == 4 * len(dtype.split(",")) * (len(op.split(",")) if "reduce" in name else 1)
    assert all(row[8] == "0" and row[12] == "0" for row in rows)  # our #wrong and MPI's
    assert "all results checked: OK" in result.stdout


def test_synth_run_mpi_new_operators_and_bool():
    """avg, the bitwise and the logical operators, and bool data: ours always checked; MPI's own
    collective where MPI has the operator for the type (LAND/LOR on bool and integers, BAND/BOR/BXOR
    on integers; no average), else n/a; pairs that make no sense (avg on integers) are left out."""
    result = _synth_run(
        "generated/dgx1/allreduce-ring.json", "--size", "100,4096", "-d", "int32,bool,float32", "-o", "avg,bxor,land", "-n", "1",
        "-w", "0", "--compare-native",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {(row[2], row[3]): row for row in (line.split() for line in result.stdout.splitlines() if not line.startswith("#"))}
    assert sorted(rows) == [("bool", "bxor"), ("bool", "land"), ("float32", "avg"), ("int32", "bxor"), ("int32", "land")]
    assert all(row[8] == "0" for row in rows.values())
    assert rows[("int32", "land")][12] == "0" and rows[("bool", "land")][12] == "0" and rows[("int32", "bxor")][12] == "0"
    assert rows[("float32", "avg")][12] == "n/a" and rows[("bool", "bxor")][12] == "n/a"


def test_synth_run_mpi_reports_a_wrong_result(monkeypatch):
    monkeypatch.setenv("SYNTH_EXEC_FAULT", "2:0:corrupt")
    result = _synth_run("generated/dgx1/allgather-ring.json", "--size", "1K", "-n", "1", "-w", "0")
    assert result.returncode == 1 and "Wrong elements       : 1" in result.stdout


def test_python_m_synth_exec_mpi_checks_the_rank_count():
    cmd = [str(MPIEXEC), "-n", "3", sys.executable, "-m", "synth.exec.mpi", "generated/dgx1/allreduce-ring.json"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 2 and "the schedule has 8 ranks but mpiexec started 3" in result.stderr


USER_PROGRAM = textwrap.dedent(
    """
    import numpy as np
    from mpi4py import MPI
    from synth.schedule import load_schedule
    from synth.exec.mpi import BoundPlan, Executor, execute

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    g = "{repo}/generated/dgx1/"
    ring = load_schedule(g + "allreduce-ring.json")
    rng = np.random.default_rng(rank)

    # out of place, called twice on the same buffers (the second call reuses the set-up)
    send = rng.integers(-100, 100, 1000).astype(np.float64)
    recv = np.empty_like(send)
    want = np.empty_like(send)
    comm.Allreduce(send, want, MPI.SUM)
    for _ in range(2):
        recv[:] = np.nan
        execute(ring, comm, send, recv, op="sum")
        assert np.array_equal(recv, want)

    # in place, another operator
    buf = send.copy()
    comm.Allreduce(send, want, MPI.MAX)
    execute(ring, comm, None, buf, op="max")
    assert np.array_equal(buf, want)

    # allgather in place: the rank's own piece already sits at its place in recvbuf
    ag = load_schedule(g + "allgather-recursive-doubling.json")
    out = np.zeros(size * 3, np.int32)
    out[rank * 3 : rank * 3 + 3] = rank + 1
    execute(ag, comm, None, out)
    assert np.array_equal(out, np.repeat(np.arange(1, size + 1), 3).astype(np.int32))

    # alltoall: non-adjacent chunks between two ranks travel in one message (derived datatype)
    a2a = load_schedule(g + "alltoall-direct.json")
    mine = (np.arange(size * 4) + 1000 * rank).astype(np.int64)
    got = np.empty_like(mine)
    ex = Executor(a2a, comm)
    ex(mine, got)
    ref = np.empty_like(mine)
    comm.Alltoall(mine, ref)
    assert np.array_equal(got, ref)
    typed = sum(len(p._types) for p in ex._plans.values())
    ex.free()

    # reduce to a root: non-roots need no receive buffer
    red = load_schedule(g + "reduce-binomial.json")
    r_out = np.zeros(5, np.float32) if rank == 0 else None
    execute(red, comm, np.full(5, rank, np.float32), r_out)
    if rank == 0:
        assert np.array_equal(r_out, np.full(5, sum(range(size)), np.float32))

    # a wrong buffer size is refused with a clear message
    try:
        execute(ring, comm, send[:10], recv)
    except ValueError as exc:
        assert "elements" in str(exc)
    else:
        raise AssertionError("size mismatch accepted")
    counts = comm.gather(typed)
    if rank == 0:
        print("OK derived datatypes:", sum(counts))
    """
)


def test_user_program_calls_the_mpi_side_api(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(USER_PROGRAM.format(repo=REPO))
    result = subprocess.run([str(MPIEXEC), "-n", "8", sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK derived datatypes:" in result.stdout
    assert int(result.stdout.split(":")[-1]) > 0  # the alltoall's grouped messages used derived datatypes


ONE_STEP_PROGRAM = textwrap.dedent(
    """
    import numpy as np
    from mpi4py import MPI
    from synth.exec.api import verified
    from synth.exec.layout import Layout
    from synth.exec.mpi import BoundPlan, Progress
    from synth.exec.program import Program

    comm = MPI.COMM_WORLD
    schedule = verified("{repo}/generated/dgx-a100/allgather-direct.json")
    assert schedule.num_steps == 1
    layout = Layout.for_size(schedule.collective, 8192, np.float32)
    send, recv = np.ones(layout.send_count, np.float32), np.empty(layout.recv_count, np.float32)
    progress = Progress(comm.Get_rank())
    plan = BoundPlan(Program(schedule), comm, layout, None, send, recv, progress=progress)
    for _ in range(5):
        plan()
    assert int(progress.cells[3]) == 5, progress.cells  # one beat per call
    print("OK", flush=True)  # (unbuffered: the eight ranks' lines may mix)
    """
)


def test_every_call_shows_progress_even_of_a_one_step_schedule(tmp_path):
    """A one-step schedule's phase never changes from call to call: the heartbeat counts calls, so
    that a long run of it is not taken for a hang (the launcher and the watchdogs watch the cells)."""
    script = tmp_path / "one_step.py"
    script.write_text(ONE_STEP_PROGRAM.format(repo=REPO))
    result = subprocess.run([str(MPIEXEC), "-n", "8", sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("OK") == 8
