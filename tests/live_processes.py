"""Which processes of a test are still alive: the executor tests check that a run leaves nothing
behind (no rank, no keeper, no mpiexec), naming what it left."""

from __future__ import annotations

import os
from pathlib import Path


def live_processes(marker: str) -> list[str]:
    """Live processes (not zombies, not this one) whose command line mentions ``marker``, each as
    ``"PID: COMMAND LINE"``."""
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
