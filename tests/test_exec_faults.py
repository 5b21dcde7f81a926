"""Faults: a rank that crashes, hangs or is killed ends the run within the timeout with a message
naming the rank and the step; Ctrl-C stops everything; nothing is left in /dev/shm or the process
table. Through real ``synth run`` processes, on both backends."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import REPO

HAVE_MPI = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) is not None
try:
    import mpi4py  # noqa: F401
except ImportError:
    HAVE_MPI = False

BACKENDS = ["mp", pytest.param("mpi", marks=pytest.mark.skipif(not HAVE_MPI, reason="needs mpi4py and mpich"))]
TIMEOUT = 2.0


def _shm() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def _mapped_anywhere(name: str) -> bool:
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            if f"/dev/shm/{name}" in maps.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


def _ours(marker: str) -> list[str]:
    """Live processes (not zombies) whose command line mentions ``marker``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z" and int(proc.name) != os.getpid():
            found.append(f"{proc.name}: {cmdline}")
    return found


def _schedule(tmp_path: Path, name: str = "allreduce-ring.json") -> str:
    """A private copy of a dgx1 schedule: its path marks this test's processes."""
    path = tmp_path / f"marker-{os.getpid()}-{name}"
    path.write_bytes((REPO / "generated" / "dgx1" / name).read_bytes())
    return str(path)


def _as_from_a_terminal() -> None:
    """Run the child as a terminal's foreground job, which Ctrl-C reaches. A shell script's
    background job (``cmd &``) ignores SIGINT, and a test runner started that way would pass the
    ignoring on to ``synth run``, which, like every program, keeps it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(schedule: str, backend: str, *args: str, fault: str | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "SYNTH_EXEC_FAULT"}
    if fault:
        env["SYNTH_EXEC_FAULT"] = fault
    cmd = [sys.executable, "-m", "synth", "run", schedule, "--topology", "dgx1", "--backend", backend, *args]
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=_as_from_a_terminal,
    )


@pytest.fixture
def stray_killer():
    """Kill, after the test, any process still mentioning the schedules it registered, so a failed
    test does not leave a million-iteration run behind (MPI ranks sit in sessions of their own)."""
    markers: list[str] = []
    yield markers.append
    for marker in markers:
        for line in _ours(marker):
            with contextlib.suppress(OSError):
                os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)


def _assert_clean(schedule: str, before: set[str]) -> None:
    deadline = time.monotonic() + 5
    while _ours(schedule) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ours(schedule) == []
    left = [n for n in _shm() - before if (n.startswith("synth-exec-") or n.startswith("mpich")) and not _mapped_anywhere(n)]
    assert left == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["crash", "hang", "kill"])
def test_a_failing_rank_ends_the_run_with_its_rank_and_step(tmp_path, backend, kind):
    schedule = _schedule(tmp_path)
    before = _shm()
    began = time.monotonic()
    proc = _start(schedule, backend, "--size", "1K", "-n", "2", "-w", "1", "--timeout", str(TIMEOUT), fault=f"5:3:{kind}")
    out, err = proc.communicate(timeout=60)
    elapsed = time.monotonic() - began
    assert proc.returncode == 3, (out, err)
    message = err.strip().splitlines()[-1]
    assert message.startswith("synth: error: rank 5 ") and "step 3 " in message, err
    expected = {"crash": "InjectedFault", "hang": "no progress", "kill": ("killed", "died")}[kind]
    assert any(word in message for word in ((expected,) if isinstance(expected, str) else expected)), message
    assert elapsed < TIMEOUT + 15  # start-up included; the hang itself is caught after TIMEOUT (+2 s MPI grace)
    _assert_clean(schedule, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ctrl_c_stops_everything(tmp_path, backend, stray_killer):
    schedule = _schedule(tmp_path)
    stray_killer(schedule)
    before = _shm()
    proc = _start(schedule, backend, "--size", "1K", "-n", "1000000", "-w", "0")
    while True:  # wait until the ranks are running (the header is out)
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        if line.startswith("#        (B)"):
            break
    time.sleep(0.5)
    began = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err
    assert time.monotonic() - began < 10
    _assert_clean(schedule, before)


def test_sigterm_stops_the_mp_run_cleanly(tmp_path, stray_killer):
    schedule = _schedule(tmp_path)
    stray_killer(schedule)
    before = _shm()
    proc = _start(schedule, "mp", "--size", "1K", "-n", "1000000", "-w", "0")
    while not proc.stdout.readline().startswith("#        (B)"):
        pass
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    _assert_clean(schedule, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_invalid_schedule_starts_nothing(tmp_path, backend):
    import json

    path = tmp_path / f"marker-{os.getpid()}-broken.json"
    doc = json.loads((REPO / "generated" / "dgx1" / "reduce-ring.json").read_text())
    doc["steps"][2], doc["steps"][3] = doc["steps"][3], doc["steps"][2]
    path.write_text(json.dumps(doc))
    proc = _start(str(path), backend, fault="0:0:kill")  # a rank that started would die and exit 3
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    assert "INVALID" in out and "#        (B)" not in out


def test_the_phase_cell_gives_the_step_and_whether_the_rank_waits():
    from synth.exec.faults import describe_position, phase_of, step_of

    assert step_of(phase_of(-1)) == (-1, False)
    for step in (0, 1, 7, 1000):
        assert step_of(phase_of(step, blocked=True)) == (step, True)
        assert step_of(phase_of(step)) == (step, False)
        assert phase_of(step, blocked=True) < phase_of(step) < phase_of(step + 1, blocked=True)
    labels = ["8 B float32 sum"]
    assert describe_position([0, -1, -1], labels) == "while preparing (8 B float32 sum)"
    assert describe_position([0, 0, -1], labels) == "before step 0 (8 B float32 sum, checked call)"
    assert describe_position([0, 3, phase_of(5, blocked=True)], labels) == "in step 5 (8 B float32 sum, call 3)"


def test_a_rank_waits_for_the_peers_of_its_current_step_only():
    from synth.exec.faults import phase_of
    from synth.exec.mpi import Progress

    progress = Progress(0)
    progress.peers = {2: (1, 3)}
    progress.set(0, 1, 2)
    assert progress.waiting_for == ()  # in step 2 but outside communication
    progress.cells[2] = phase_of(2, blocked=True)
    assert progress.waiting_for == (1, 3)
    assert progress.describe(["1 KiB"]) == "in step 2 (1 KiB, call 1)"
    progress.cells[2] = phase_of(3, blocked=True)
    assert progress.waiting_for == ()  # no messages in step 3
