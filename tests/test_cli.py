"""The command line: commands, outputs, one-line errors and exit codes (through a real process)."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from synth.cli import main

from .conftest import REPO


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "synth", *args], capture_output=True, text=True, cwd=cwd or REPO)


def test_help_lists_every_command():
    out = CliRunner().invoke(main, ["--help"]).output
    for command in ("topo", "synthesize", "verify", "methods", "regenerate"):
        assert f"  {command} " in out


def test_topo_list_shows_all_builtins():
    out = CliRunner().invoke(main, ["topo", "list"]).output
    for name in ("dgx1", "dgx2", "dgx-a100", "dgx-h100", "pcie-2socket", "ndv2x2", "dgx-a100x2", "dgx-a100x4", "fattree-4rack"):
        assert f"\n{name} " in "\n" + out


def test_topo_show_and_validate():
    result = CliRunner().invoke(main, ["topo", "show", "dgx1"])
    assert result.exit_code == 0 and "ring order: 0 1 3 2 6 7 5 4" in result.output
    result = CliRunner().invoke(main, ["topo", "validate", "dgx1", str(REPO / "topologies" / "ndv2x2.json")])
    assert result.exit_code == 0 and result.output.count("OK ") == 2


def test_gen_writes_valid_files(tmp_path):
    runner = CliRunner()
    for args in (
        ["torus", "--rows", "3", "--cols", "4"],
        ["fattree", "--racks", "2", "--servers", "2", "--gpus", "4"],
        ["nvswitch", "--gpus", "4", "--boxes", "2", "--nic-bandwidth", "25", "--rails", "2"],
        ["pcie"],
        ["hypercube", "--dim", "3"],
        ["mesh"],
        ["ring"],
        ["full"],
        ["dgx1", "--boxes", "2", "--nic-bandwidth", "12.5"],
    ):
        out = tmp_path / f"{args[0]}.json"
        result = runner.invoke(main, ["topo", "gen", *args, "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert runner.invoke(main, ["topo", "validate", str(out)]).exit_code == 0
    result = runner.invoke(main, ["topo", "gen", "torus", "--rows", "0"])
    assert result.exit_code == 2


def test_synthesize_then_verify(tmp_path):
    out = tmp_path / "ar.json"
    r = run("synthesize", "dgx1", "--collective", "allreduce", "--method", "ring", "-o", str(out))
    assert r.returncode == 0 and "verified: allreduce on 8 ranks" in r.stdout
    r = run("verify", str(out), "--topology", "dgx1")
    assert r.returncode == 0 and r.stdout.startswith("OK allreduce on 8 ranks, 8 chunks; 14 steps, 112 transfers")
    r = run("verify", str(out))  # topology found by the name in the schedule
    assert r.returncode == 0


def test_synthesize_default_output_under_generated(tmp_path):
    r = run("synthesize", "dgx-a100", "-c", "gather", "-m", "binomial", "--root", "3", cwd=tmp_path)
    assert r.returncode == 0
    assert (tmp_path / "generated" / "dgx-a100" / "gather-binomial-root3.json").is_file()


def test_broken_schedule_one_line_exit_1(tmp_path):
    out = tmp_path / "ag.json"
    assert run("synthesize", "dgx1", "-c", "allgather", "-m", "ring", "-o", str(out)).returncode == 0
    doc = json.loads(out.read_text())
    doc["steps"][2][1]["chunk"] = (doc["steps"][2][1]["chunk"] + 1) % 8
    out.write_text(json.dumps(doc))
    r = run("verify", str(out), "--topology", "dgx1")
    assert r.returncode == 1
    assert r.stdout.count("\n") == 1 and "step 2, transfer 1, rank" in r.stdout and "[unheld]" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["topo", "validate", "{bad}"], "links[0].bandwidth = -3: bandwidth must be a positive number"),
        (["topo", "show", "no-such-machine"], "no such file or built-in topology"),
        (["synthesize", "{bad}", "-c", "allgather"], "links[0].bandwidth"),
        (["synthesize", "dgx1", "-c", "allreduce", "-k", "3"], "multiple of the rank count 8"),
        (["synthesize", "dgx1", "-c", "broadcast", "--root", "9"], "root 9 is not a rank"),
        (["verify", "{sched}", "--topology", "dgx2"], "topology dgx2 has 16 ranks"),
        (["verify", "{sched}", "--topology", "dgx-a100"], "made for topology 'dgx1'"),
        (["verify", "{garbage}"], "invalid JSON"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path, args, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {"format": "synth-topology", "version": 1, "ranks": ["a", "b"], "links": [{"a": "a", "b": "b", "bandwidth": -3}]}
        )
    )
    sched = tmp_path / "s.json"
    run("synthesize", "dgx1", "-c", "allgather", "-o", str(sched))
    garbage = tmp_path / "g.json"
    garbage.write_text("{not json")
    args = [a.format(bad=bad, sched=sched, garbage=garbage) for a in args]
    r = run(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr


def test_output_never_overwrites_an_input(tmp_path):
    topo = tmp_path / "t.json"
    assert run("topo", "gen", "ring", "--ranks", "4", "-o", str(topo)).returncode == 0
    before = topo.read_text()
    r = run("synthesize", str(topo), "-c", "allgather", "-o", str(topo))
    assert r.returncode == 2 and "refusing to overwrite" in r.stderr
    assert topo.read_text() == before


def test_methods_table():
    out = CliRunner().invoke(main, ["methods"]).output
    assert out.splitlines()[1].split()[0] == "ring"
