"""Faults: a rank that crashes, hangs or is killed ends the run within the timeout with a message
naming the rank and the step; Ctrl-C stops everything; nothing is left in /dev/shm or the process
table. Through real ``synth run`` processes, on both backends."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .conftest import REPO
from .live_processes import live_processes

HAVE_MPI = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) is not None
try:
    import mpi4py  # noqa: F401
except ImportError:
    HAVE_MPI = False

BACKENDS = ["mp", pytest.param("mpi", marks=pytest.mark.skipif(not HAVE_MPI, reason="needs mpi4py and mpich"))]
TIMEOUT = 2.0


def _shm() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


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
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=_as_from_a_terminal,
    )
    _WATCHES[schedule] = _ShmWatch(schedule, proc)
    return proc


@pytest.fixture
def stray_killer():
    """Kill, after the test, any process still mentioning the schedules it registered, so a failed
    test does not leave a million-iteration run behind (MPI ranks sit in sessions of their own)."""
    markers: list[str] = []
    yield markers.append
    for marker in markers:
        for line in live_processes(marker):
            with contextlib.suppress(OSError):
                os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)


class _ShmWatch(threading.Thread):
    """The /dev/shm files the processes of one run map (read from /proc while they live), so that
    the check after the run looks at this run's files only: other people's runs on a shared
    machine come and go in /dev/shm meanwhile (and a killed run of theirs leaves its files)."""

    def __init__(self, marker: str, proc: subprocess.Popen):
        super().__init__(daemon=True)
        self.marker, self.proc = marker, proc
        self.names: set[str] = set()
        self.pids: set[int] = set()
        self.start()

    def run(self) -> None:
        while True:
            live = live_processes(self.marker)
            for line in live:
                pid = int(line.split(":", 1)[0])
                self.pids.add(pid)
                with contextlib.suppress(OSError):
                    for entry in Path(f"/proc/{pid}/maps").read_text(errors="replace").splitlines():
                        if "/dev/shm/" in entry:
                            self.names.add(entry.split("/dev/shm/", 1)[1].removesuffix(" (deleted)"))
            if not live and self.proc.poll() is not None:
                return
            time.sleep(0.1)


_WATCHES: dict[str, _ShmWatch] = {}


def _assert_clean(schedule: str, before: set[str]) -> None:
    """No process of the run is left, and none of the files in /dev/shm it made: the ones its
    processes were seen mapping, and the multiprocessing segments named after its processes."""
    deadline = time.monotonic() + 5
    while live_processes(schedule) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live_processes(schedule) == []
    watch = _WATCHES.pop(schedule)
    watch.join(timeout=10)
    made = watch.names | {n for n in _shm() - before if any(n.startswith(f"synth-exec-{pid}-") for pid in watch.pids)}
    left = sorted(n for n in made if (n.startswith("synth-exec-") or n.startswith("mpich")) and n in _shm())
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


# ============================================================ MPI: faults from outside the run
# A rank is hit with real signals, as a user, a debugger or the kernel's out-of-memory killer
# would, at a moment the test does not control; the launcher must still name the rank and the
# exact position it had reached (which the test reads from the run's board while the rank is
# stopped), and leave nothing behind.
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs mpi4py and mpich")
LONG = ("--size", "1K", "-n", "1000000", "-w", "0")  # runs until stopped
LABELS = ["size 1024 B, float32 sum"]


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _rank_process(marker: str, rank: int, timeout: float = 120.0) -> int:
    """The process that runs MPI rank ``rank`` of the run marked by ``marker``, as soon as it
    exists: the child of the rank's keeper (the process mpiexec started for the rank, which forks
    the rank; polled for up to 10 s), else that process."""
    deadline = time.monotonic() + timeout
    first_seen = None
    while time.monotonic() < deadline:
        candidates = [int(line.split(":", 1)[0]) for line in live_processes(marker) if "synth.exec.mpi" in line]
        candidates = [pid for pid in candidates if _environ(pid).get("PMI_RANK") == str(rank)]
        children = [pid for pid in candidates if _parent(pid) in candidates]
        if children:
            return children[0]
        if candidates:
            first_seen = first_seen or time.monotonic()
            if time.monotonic() - first_seen > 10:
                return candidates[0]
        time.sleep(0.01)
    raise AssertionError(f"no process of rank {rank} appeared")


def _posted_position(pid: int, rank: int) -> str | None:
    """Where rank ``rank`` (process ``pid``, stopped) last said it was, from the run's board."""
    from synth.exec.faults import describe_position

    args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    try:
        from synth.exec.mpi.board import Board

        board = Board(args[args.index("--progress-file") + 1])
        return describe_position(board.row(rank)[:3].copy(), LABELS)
    except (ImportError, ValueError, IndexError, OSError):  # no board (an older synth): no position
        return None


def _header_seen(proc: subprocess.Popen) -> None:
    while True:  # the table's heading is out: the ranks are running
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        if line.startswith("#        (B)"):
            return


@needs_mpi
def test_mpi_a_rank_killed_while_starting_is_named(tmp_path, stray_killer):
    schedule = _schedule(tmp_path)
    stray_killer(schedule)
    before = _shm()
    proc = _start(schedule, "mpi", *LONG, "--timeout", "30")
    os.kill(_rank_process(schedule, 3), signal.SIGKILL)  # at once: it is still importing
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, (out, err)
    assert err.strip().splitlines()[-1] == "synth: error: rank 3 was killed by SIGKILL while preparing (set-up)", err
    _assert_clean(schedule, before)


@needs_mpi
def test_mpi_a_rank_killed_mid_run_is_named_with_its_step(tmp_path, stray_killer):
    schedule = _schedule(tmp_path)
    stray_killer(schedule)
    before = _shm()
    proc = _start(schedule, "mpi", *LONG, "--timeout", "30")
    _header_seen(proc)
    time.sleep(1)
    victim = _rank_process(schedule, 3)
    os.kill(victim, signal.SIGSTOP)  # so that its position holds still while the test reads it
    where = _posted_position(victim, 3)
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, (out, err)
    message = err.strip().splitlines()[-1]
    assert message.startswith("synth: error: rank 3 was killed by SIGKILL "), err
    assert where is not None and where.startswith("in step ") and message.endswith(where), (message, where)
    _assert_clean(schedule, before)


@needs_mpi
@pytest.mark.parametrize("when", ["starting", "running"])
def test_mpi_a_stopped_rank_is_named_with_its_step(tmp_path, stray_killer, when):
    schedule = _schedule(tmp_path)
    stray_killer(schedule)
    before = _shm()
    proc = _start(schedule, "mpi", *LONG, "--timeout", str(TIMEOUT))
    if when == "running":
        _header_seen(proc)
        time.sleep(1)
    victim = _rank_process(schedule, 3)
    os.kill(victim, signal.SIGSTOP)
    where = _posted_position(victim, 3) if when == "running" else "while preparing (set-up)"
    stopped = time.monotonic()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, (out, err)
    message = err.strip().splitlines()[-1]
    assert message.startswith("synth: error: rank 3 made no progress for 2 s "), err
    assert (
        message
        == f"synth: error: rank 3 made no progress for 2 s {where}, its process stopped; the other ranks were waiting for it"
    )
    assert time.monotonic() - stopped < TIMEOUT + 15
    _assert_clean(schedule, before)  # the stopped rank too


@needs_mpi
def test_mpi_every_failing_rank_gets_one_line(tmp_path):
    """Every rank crashes in the same step: each report that reaches the user is one whole line
    (never two ranks' glued together), the first one last, as the error."""
    schedule = _schedule(tmp_path)
    before = _shm()
    proc = _start(schedule, "mpi", "--size", "1K", "-n", "2", "-w", "1", fault="all:3:crash")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    pattern = re.compile(
        r"synth: (error: )?rank (\d) failed in step 3 \(size 1024 B, float32 sum, checked call\): "
        r"InjectedFault: injected crash at step 3 \(faults\.py:\d+\)"
    )
    matches = [pattern.fullmatch(line) for line in lines]
    assert lines and all(matches), err
    ranks = [m.group(2) for m in matches]
    assert len(set(ranks)) == len(ranks)
    assert [bool(m.group(1)) for m in matches] == [False] * (len(lines) - 1) + [True]
    _assert_clean(schedule, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_too_big_for_memory_is_refused_as_bad_input(tmp_path, backend):
    """1 TiB per rank is more memory than any machine has: refused before anything starts, in one
    line naming the option, its value and the memory needed against what there is (exit 2)."""
    schedule = _schedule(tmp_path)
    before = _shm()
    proc = _start(schedule, backend, "--size", "1TiB", "-n", "1", "-w", "0")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, (out, err)
    assert out == "" and len(err.splitlines()) == 1, (out, err)
    assert re.fullmatch(
        r'synth: error: synth run: --size = "1TiB": the buffers need [\d.]+ GiB of (shared memory but /dev/shm '
        r"has [\d.]+ GiB free|memory but [\d.]+ GiB is available); run smaller sizes or fewer at a time\n",
        err,
    ), err
    _assert_clean(schedule, before)
