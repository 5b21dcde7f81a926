"""How much memory this process can still get, for refusing work that would not fit before any of
it is allocated (a schedule file's columns, an export of millions of transfers)."""

from __future__ import annotations

import resource


def available_memory() -> int:
    """Bytes this process may still allocate, as far as it can tell: the kernel's MemAvailable,
    lowered by ``ulimit -v``."""
    have = 1 << 62
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    have = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        have = min(have, soft)
    return have


def format_bytes(n: float) -> str:
    """``3.2 GB``: a rough figure for messages (decimal units)."""
    for unit, factor in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{int(n)} B"
