"""The multiprocessing backend: generated schedules run on real data and give the right results."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

import synth
from synth import generators as gen
from synth.cli import main
from synth.exec import data, mp
from synth.exec.layout import Layout
from synth.exec.program import Program
from synth.registry import synthesize
from synth.schedule import load_schedule, save_schedule
from synth.topology import topology_to_json
from synth.verify import VerificationError

from .conftest import REPO

SIZES = (8, 100, 4096, 65548)


def _run(schedule, dtype=np.float32, op="sum", sizes=SIZES):
    layouts = [Layout.for_size(schedule.collective, s, dtype) for s in sizes]
    reduce_op = data.OPS[op] if schedule.collective.is_reduction else None
    return mp.run_sizes(Program(schedule), layouts, reduce_op, warmup=0, iters=1, timeout=30)


@pytest.mark.parametrize("path", sorted(p.name for p in (REPO / "generated" / "dgx1").glob("*.json")))
def test_every_dgx1_schedule_runs_correctly(path):
    schedule = load_schedule(REPO / "generated" / "dgx1" / path)
    rows = _run(schedule)
    assert [m.wrong for m in rows] == [0] * len(SIZES)
    assert all(m.time_us > 0 for m in rows)


#: every classic operator on a spread of types; each of the others (avg, bitwise, logical) on some
#: of the types it applies to, bool included (tests/test_exec_matrix.py, marked slow, runs them all)
OP_CASES = [
    *((d, o) for d in ("int8", "uint8", "int32", "uint64", "float16", "float64") for o in ("sum", "prod", "max", "min")),
    *(("float16", "avg"), ("float32", "avg"), ("int8", "band"), ("uint64", "bor"), ("int32", "bxor")),
    *(("uint8", "land"), ("int64", "lor"), ("bool", "sum"), ("bool", "min"), ("bool", "bxor"), ("bool", "land")),
]


@pytest.mark.parametrize("dtype, op", OP_CASES)
def test_dtypes_and_ops(dtype, op):
    for name in ("allreduce-recursive-doubling", "reduce-scatter-ring"):
        schedule = load_schedule(REPO / "generated" / "dgx1" / f"{name}.json")
        assert [m.wrong for m in _run(schedule, data.DTYPES[dtype], op, (100, 4096))] == [0, 0]


@pytest.mark.parametrize("path", ["dgx2/alltoall-direct.json", "ndv2x2/allgather-ring.json", "pcie-2socket/gather-binomial.json"])
def test_other_topologies(path):
    assert [m.wrong for m in _run(load_schedule(REPO / "generated" / path), sizes=(8, 4096))] == [0, 0]


def test_a_wrong_execution_is_counted():
    """An (unverified) schedule with a transfer removed runs, and the check catches the result."""
    schedule = load_schedule(REPO / "generated" / "dgx1" / "allreduce-ring.json")
    steps = schedule.steps
    broken = schedule.with_steps([*steps[:5], steps[5][1:], *steps[6:]])
    for op in ("sum", "max"):
        rows = mp.run_sizes(Program(broken), [Layout.for_size(broken.collective, 4096, np.float32)], data.OPS[op], iters=1)
        assert rows[0].wrong > 0


def test_64_ranks_on_two_cores():
    schedule = synthesize(gen.nvswitch(64, 100.0), "allreduce", "ring")
    rows = _run(schedule, sizes=(256,))
    assert rows[0].wrong == 0


def test_run_api_matches_numpy():
    path = REPO / "generated" / "dgx1" / "allreduce-ring.json"
    rng = np.random.default_rng(1)
    inputs = rng.integers(-50, 50, size=(8, 37)).astype(np.float64)
    outputs = synth.run(path, inputs)
    assert all(np.array_equal(out, inputs.sum(axis=0)) for out in outputs)
    pieces = [np.full(3, r, np.int32) for r in range(8)]
    gathered = synth.run(REPO / "generated" / "dgx1" / "allgather-direct.json", pieces)
    assert all(np.array_equal(out, np.repeat(np.arange(8), 3)) for out in gathered)
    blocks = np.arange(8 * 16, dtype=np.int64).reshape(8, 16)  # rank s sends block d (2 elements) to rank d
    exchanged = synth.run(REPO / "generated" / "dgx1" / "alltoall-direct.json", blocks)
    for d in range(8):
        assert np.array_equal(exchanged[d], np.concatenate([blocks[s, 2 * d : 2 * d + 2] for s in range(8)]))
    root_only = synth.run(REPO / "generated" / "dgx1" / "reduce-binomial.json", inputs, op="max")
    assert np.array_equal(root_only[0], inputs.max(axis=0)) and not root_only[3].any()


def test_run_refuses_an_invalid_schedule_before_starting(monkeypatch):
    schedule = load_schedule(REPO / "generated" / "dgx1" / "allgather-ring.json")
    broken = schedule.with_steps(schedule.steps[1:])

    def never(*args, **kwargs):
        raise AssertionError("processes started for an invalid schedule")

    monkeypatch.setattr(mp, "execute", never)
    with pytest.raises(VerificationError):
        synth.run(broken, [np.zeros(2, np.float32)] * 8)


def test_cli_table_and_exit_codes(tmp_path, monkeypatch):
    runner = CliRunner()
    path = str(REPO / "generated" / "dgx1" / "reduce-scatter-ring.json")
    result = runner.invoke(
        main, ["run", path, "-b", "64", "-e", "4K", "-f", "8", "-d", "int32,float16", "-o", "max", "-n", "2", "-w", "1"]
    )
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if not line.startswith("#")]
    assert [(r[0], r[2], r[3], r[4], r[-1]) for r in rows] == [
        (size, dtype, "max", "-1", "0") for dtype in ("int32", "float16") for size in ("64", "512", "4096")
    ]
    assert rows[0][1] == "2"  # count: elements per rank's piece, as nccl-tests prints
    monkeypatch.setenv("SYNTH_EXEC_FAULT", "3:0:corrupt")
    result = runner.invoke(main, ["run", path, "--size", "1K", "-n", "1", "-w", "0"])
    assert result.exit_code == 1 and "Wrong elements       : 1" in result.output


def test_cli_refuses_invalid_schedule_and_bad_options(tmp_path):
    runner = CliRunner()
    doc = json.loads((REPO / "generated" / "dgx1" / "allgather-ring.json").read_text())
    doc["steps"] = doc["steps"][:-1]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    result = runner.invoke(main, ["run", str(bad)])
    assert result.exit_code == 1 and "INVALID" in result.output and "size" not in result.output
    good = str(REPO / "generated" / "dgx1" / "allreduce-ring.json")
    for args, field in (
        (["-d", "bfloat16"], "--dtype"),
        (["-o", "avg", "-d", "int32"], "--op"),
        (["--size", "12 parsecs"], "--size"),
        (["--compare-native"], "--compare-native"),
        (["-n", "0"], "--iters"),
    ):
        result = runner.invoke(main, ["run", good, *args])
        assert result.exit_code == 2 and field in result.output, (args, result.output)
    topo = tmp_path / "ring3.json"
    topo.write_text(topology_to_json(gen.ring(3, name="ring3")))
    sched = tmp_path / "ring3-allreduce.json"
    save_schedule(synthesize(gen.ring(3, name="ring3"), "allreduce", "ring"), sched)
    assert runner.invoke(main, ["run", str(sched)]).exit_code == 2  # not a built-in: needs --topology
    result = runner.invoke(main, ["run", str(sched), "--topology", str(topo), "--size", "8..64", "-f", "2", "-n", "1", "-w", "0"])
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.output.splitlines() if not line.startswith("#")] == ["8", "16", "32", "64"]


def test_sizes_as_nccl_tests_takes_them():
    from synth.cli.run import parse_run_sizes

    assert parse_run_sizes(None, None, None, None) == [8 * 4**i for i in range(11)]  # 8 B … 8 MiB
    assert parse_run_sizes(None, "1M", "4M", 2) == [2**20, 2**21, 2**22]
    assert parse_run_sizes(None, "64M", None, None) == [2**26]
    assert parse_run_sizes("8B..1GiB", None, None, 8)[-1] == 2**30
    assert parse_run_sizes("1K,100", None, None, None) == [1024, 100]
