"""``synth ilp`` and ``synth synthesize -m ilp``: outputs, the Pareto table, one-line errors."""

import pytest
from click.testing import CliRunner

from synth import generators as gen
from synth.cli import main
from synth.schedule import load_schedule
from synth.topology import topology_to_json
from synth.verify import verify

from .test_cli import run


def invoke(*args):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def ring4(tmp_path):
    path = tmp_path / "ring4.json"
    path.write_text(topology_to_json(gen.ring(4, bandwidth=10.0, latency=1.0)))
    return path


def test_help_and_methods_list_ilp():
    assert "  ilp " in invoke("--help").output
    assert "\nilp " in invoke("methods").output


def test_writes_a_verified_schedule_and_says_what_was_proven(ring4, tmp_path):
    out = tmp_path / "ag.json"
    result = invoke(
        "ilp", str(ring4), "-c", "allgather", "-k", "2", "--steps", "2", "--objective", "rounds", "-o", str(out), "-q"
    )
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    assert "2 steps, 3 rounds, proven optimal (meets the lower bound)" in result.output
    schedule = load_schedule(out)
    assert schedule.method == "ilp" and schedule.params["rounds"] == 3
    assert verify(schedule, gen.ring(4, bandwidth=10.0, latency=1.0)).ok


def test_time_objective_reports_the_bound(ring4):
    result = invoke("ilp", str(ring4), "-c", "reduce-scatter", "--size", "1MiB", "-q")
    assert result.exit_code == 0, result.output
    assert "objective time at 1MiB" in result.output and "lower bound" in result.output
    assert "verified: reduce-scatter on 4 ranks" in result.output


def test_progress_goes_to_stderr():
    r = run("ilp", "dgx1", "-c", "allgather", "-k", "3", "--steps", "3", "--objective", "rounds")
    assert r.returncode == 0, r.stderr
    assert " best " in r.stderr and " bound " in r.stderr
    assert " best " not in r.stdout


def test_a_work_limit_cut_is_said_and_repeats_byte_for_byte(tmp_path):
    """--work-limit cuts the search at a point that does not depend on timing: two runs write the
    same file, and the result line says the work limit cut it."""
    outs = [tmp_path / f"b{i}.json" for i in range(2)]
    for out in outs:
        args = ["-c", "broadcast", "-k", "48", "--pipeline", "3", "--wave-chunks", "6", "--size", "16MiB"]
        result = invoke("ilp", "dgx1", *args, "--work-limit", "20", "-o", str(out), "-q")
        assert result.exit_code == 0, result.output
        assert "not proven optimal (work limit" in result.output
    assert outs[0].read_bytes() == outs[1].read_bytes()


def test_pareto_table(ring4, tmp_path):
    folder = tmp_path / "frontier"
    result = invoke("ilp", str(ring4), "-c", "allgather", "--pareto", "--max-chunks", "3", "-o", str(folder))
    assert result.exit_code == 0, result.output
    assert "bandwidth lower bound: 3/2 rounds per chunk" in result.output
    assert "stopped: the rounds per chunk met the bandwidth lower bound" in result.output
    files = sorted(folder.iterdir())
    assert files and all(verify(load_schedule(f), gen.ring(4, bandwidth=10.0, latency=1.0)).ok for f in files)


def test_synthesize_with_the_ilp_method(tmp_path):
    out = tmp_path / "bcast.json"
    r = run("synthesize", "dgx1", "-c", "broadcast", "-m", "ilp", "--root", "3", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "verified: broadcast root 3 on 8 ranks" in r.stdout
    assert load_schedule(out).collective.root == 3


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--steps", "0"], "--steps"),
        (["--size", "12 parsecs"], "--size"),
        (["--steps", "2", "--pipeline", "2"], "--pipeline"),
        (["--chunks", "0"], "--chunks"),
        (["--time-limit", "0"], "--time-limit"),
        (["--work-limit", "0"], "--work-limit"),
        (["--pareto", "--work-limit", "5"], "--work-limit"),
        (["--pareto", "--sizes", "x"], "--sizes"),
    ],
)
def test_bad_options_get_one_line_and_exit_2(args, field):
    r = run("ilp", "dgx1", "-c", "allgather", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("synth: error: synth ilp: " + field), r.stderr


def test_inapplicable_requests_exit_2():
    r = run("ilp", "dgx1", "-c", "allreduce", "-k", "3", "--allreduce", "composed")
    assert r.returncode == 2 and "multiple of the rank count" in r.stderr
    r = run("ilp", "dgx1", "-c", "allreduce", "--pareto")
    assert r.returncode == 2 and "allreduce" in r.stderr
    r = run("ilp", "dgx1", "-c", "broadcast", "--root", "9")
    assert r.returncode == 2 and "--root" in r.stderr


def test_never_overwrites_the_topology(ring4):
    r = run("ilp", str(ring4), "-c", "allgather", "-o", str(ring4), "-q")
    assert r.returncode == 2 and "refusing to overwrite" in r.stderr
