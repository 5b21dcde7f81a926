"""How much a command may allocate, and the refusal when an input asks for more.

Sizes in users' inputs (a chunk count, a generator's dimension, a file) are checked against what
they can mean and against the memory this process can still get *before* anything is allocated,
so a typo ends in one line instead of the kernel's out-of-memory killer.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

from synth.errors import InputError

#: Any JSON input nested deeper than this is refused (no topology or schedule needs more than 5).
MAX_JSON_DEPTH = 64


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def available_memory() -> int:
    """Bytes this process can still allocate, as far as it can tell: the kernel's MemAvailable,
    lowered by a cgroup (container) memory limit and by ``ulimit -v``."""
    candidates: list[int] = []
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    candidates.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    if not candidates:
        try:
            candidates.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            candidates.append(8 * 2**30)
    limit, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        candidates.append(max(0, limit - used))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        vm = 0
        try:
            with open("/proc/self/statm", encoding="ascii") as fh:
                vm = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            pass
        candidates.append(max(0, soft - vm))
    return min(candidates)


def format_bytes(n: float) -> str:
    """``3.2 GB``: a rough figure for messages (decimal units)."""
    for unit, factor in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{int(n)} B"


def require_memory(need: float, file: str, field: str, value: Any, what: str) -> None:
    """Raise `InputError` if ``need`` bytes (an estimate of what ``what`` would allocate) exceed
    the memory this process can get."""
    have = available_memory()
    if need > have:
        raise InputError(file, field, value, f"{what} would need about {format_bytes(need)}; {format_bytes(have)} is available")


#: Bytes of memory a synthesizer uses per transfer it must build (columns, lists while building,
#: the verifier's indexes; a ring allreduce measured 630 per fewest-possible transfer).
BYTES_PER_TRANSFER = 600
#: More transfers than this is beyond any schedule a file or a process holds (int32 indexes).
MAX_TRANSFERS = 2**31


def check_collective_size(
    collective: Any, file: str, field: str, value: Any, *, bytes_per_transfer: int = BYTES_PER_TRANSFER
) -> None:
    """Refuse a collective whose every schedule is too large to build: it needs at least
    ``collective.min_transfers()`` transfers (a ring allreduce on 8 ranks with 10**8 chunks per
    piece needs 5.6 billion), each costing ``bytes_per_transfer`` (the method's own figure,
    `synth.method.Method.memory_per_transfer`, where it builds in columns)."""
    need = collective.min_transfers()
    what = f"{collective.describe()} (at least {need:,} transfers)"
    if need > MAX_TRANSFERS:
        raise InputError(file, field, value, f"{what} is more than a schedule can hold ({MAX_TRANSFERS:,} transfers)")
    require_memory(need * bytes_per_transfer, file, field, value, what)
