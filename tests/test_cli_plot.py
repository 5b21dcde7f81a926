"""``synth plot topo|schedule|compare`` and ``synth report`` from the command line; progress bars
and ``--quiet``."""

from __future__ import annotations

import io

import pytest
from click.testing import CliRunner

from synth.cli import main
from synth.generated import entry_count
from synth.progress import Progress
from synth.schedule import load_schedule, save_schedule

from .conftest import REPO

RING = str(REPO / "generated" / "dgx1" / "allreduce-ring.json")
PNG = b"\x89PNG\r\n\x1a\n"


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_help_lists_the_commands():
    out = invoke("--help").output
    assert "  plot " in out and "  report " in out
    sub = invoke("plot", "--help").output
    assert all(f"  {name} " in sub for name in ("topo", "schedule", "compare"))


def test_plot_topo(tmp_path):
    result = invoke("plot", "topo", "dgx1", "-o", str(tmp_path / "t.png"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "t.png").read_bytes()[:8] == PNG
    result = invoke("plot", "topo", "fattree-4rack", "-o", str(tmp_path / "t.svg"), "--no-collapse")
    assert result.exit_code == 0, result.output
    assert b"<svg" in (tmp_path / "t.svg").read_bytes()


def test_plot_schedule(tmp_path):
    out = tmp_path / "tl.svg"
    result = invoke("plot", "schedule", RING, "--size", "1MiB", "-o", str(out), "--color-by", "chunk", "-m", "sync")
    assert result.exit_code == 0, result.output
    assert b"<svg" in out.read_bytes()


def test_plot_schedule_refuses_an_invalid_schedule(tmp_path):
    schedule = load_schedule(RING)
    broken = tmp_path / "broken.json"
    save_schedule(schedule.with_steps(schedule.steps[:-1]), broken)
    result = invoke("plot", "schedule", str(broken), "--size", "1MiB", "-o", str(tmp_path / "x.png"))
    assert result.exit_code == 1 and "INVALID" in result.output
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plot", "topo", "dgx1", "-o", "x.jpg"], "unknown image format"),
        (["plot", "topo", "no-such-machine", "-o", "x.png"], "no-such-machine"),
        (["plot", "schedule", RING, "--size", "12XB", "-o", "x.png"], "--size"),
        (["plot", "compare", "dgx1", "-c", "allgather", "-m", "nope", "-o", "x.png"], "unknown method"),
        (["plot", "compare", "dgx1", "-c", "broadcast", "--root", "9", "-o", "x.png"], "--root"),
        (["report", "dgx1", "-c", "allreduce,bogus", "-o", "r.html"], "unknown collective"),
        (["report", "dgx1", "--timeline-size", "0", "-o", "r.html"], "--timeline-size"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("synth: error:") and message in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_plot_compare_and_report(tmp_path):
    out = str(tmp_path / "c.png")
    result = invoke("plot", "compare", "dgx1", "-c", "allgather", "--sizes", "1KiB,1MiB,1GiB", "-o", out, "-q")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "c.png").read_bytes()[:8] == PNG
    page = tmp_path / "r.html"
    result = invoke("report", "dgx1", "-c", "broadcast", "--sizes", "1KiB,1MiB", "--timeline-size", "1MiB", "-o", str(page), "-q")
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert text.count("<img ") == 3 and "Timeline of the fastest schedule at 1MiB" in text


def test_compare_quiet_prints_nothing_on_stderr():
    result = CliRunner().invoke(main, ["compare", "dgx1", "-c", "allgather", "--sizes", "1KiB", "-q"])
    assert result.exit_code == 0 and result.stderr == ""
    assert "lower bound" in result.stdout


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_only_on_a_terminal_and_not_when_quiet():
    tty = Terminal()
    with Progress(3, "work", file=tty) as bar:
        callback = bar.step_callback("case ")
        for name in ("a", "b", "c"):
            callback(name)
        bar.log("a line")
    drawn = tty.getvalue()
    assert "work" in drawn and "2/3" in drawn and "case c" in drawn and "a line" in drawn
    quiet = Terminal()
    with Progress(3, "work", file=quiet, quiet=True) as bar:
        bar.advance()
        bar.log("a line")
    assert quiet.getvalue() == ""
    pipe = io.StringIO()
    with Progress(3, "work", file=pipe) as bar:
        bar.advance()
        bar.note("x")
        bar.log("a line")
    assert pipe.getvalue() == "a line\n"  # off a terminal: the log lines only


def test_regenerate_counts_its_cases():
    index = (REPO / "generated" / "INDEX.md").read_text().splitlines()
    rows = [line for line in index if line.startswith("| ") and not line.startswith("| topology |")]
    assert entry_count() == len(rows)
    assert "--quiet" in invoke("regenerate", "--help").output


def test_matplotlib_is_imported_only_to_draw():
    import subprocess
    import sys

    code = "import sys, synth, synth.cli, synth.plot, synth.report; print('matplotlib' in sys.modules, 'tqdm' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
