"""Sizes and units, as nccl-tests users write them.

Sizes are bytes. ``8``, ``8B``; ``1K``/``1M``/``1G``/``1T`` are binary multiples as in nccl-tests'
``-b``/``-e`` options, as are ``1KiB``/``1MiB``/``1GiB``; ``1KB``/``1MB``/``1GB`` are decimal.
Bandwidths are GB/s (10^9 bytes/s) and times µs, so bytes / (GB/s) = 10^-3 µs.
"""

from __future__ import annotations

import re

_SUFFIX = {
    "": 1,
    "B": 1,
    "K": 2**10,
    "M": 2**20,
    "G": 2**30,
    "T": 2**40,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Bytes for ``"1MiB"``, ``"1M"`` (binary, as nccl-tests), ``"1MB"`` (decimal), ``"64"``.
    Raises ValueError with the reason."""
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size {text} is negative")
        return text
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 8, 1KiB, 1M, 1GiB)")
    number, suffix = match.groups()
    factor = _SUFFIX.get(suffix.upper())
    if factor is None:
        raise ValueError(f"{text!r}: unknown unit {suffix!r} (use B, K/KiB, M/MiB, G/GiB, or KB/MB/GB)")
    value = float(number) * factor
    if value != int(value):
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(value)


def parse_sizes(text: str, factor: float = 2) -> list[int]:
    """A comma-separated list of sizes (``"1KiB,1MiB,1GiB"``); ``a..b`` means a, a·f, a·f², … ≤ b
    with f = ``factor`` (2 unless given, as nccl-tests' ``-f``)."""
    sizes: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if ".." in part:
            lo, hi = part.split("..", 1)
            sizes.extend(size_range(parse_size(lo), parse_size(hi), factor))
        else:
            sizes.append(parse_size(part))
    if not sizes:
        raise ValueError(f"{text!r} gives no sizes")
    return sizes


def size_range(begin: int, end: int, factor: float = 2, step: int | None = None) -> list[int]:
    """nccl-tests' ``-b begin -e end -f factor`` (or ``-i step``): begin, begin·f, … while ≤ end."""
    if begin <= 0 or end < begin:
        raise ValueError(f"need 0 < begin <= end, got {begin}..{end}")
    sizes = []
    value = begin
    if step:
        while value <= end:
            sizes.append(value)
            value += step
        return sizes
    if factor <= 1:
        raise ValueError(f"factor must be greater than 1, got {factor}")
    while value <= end:
        sizes.append(int(value))
        value *= factor
    return sizes


def format_size(size: int) -> str:
    """``1048576`` → ``"1MiB"``; exact binary multiples get a unit, others stay in bytes."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


def transfer_time_us(num_bytes: float, bandwidth_gbps: float) -> float:
    """Time in µs to move ``num_bytes`` at ``bandwidth_gbps`` GB/s."""
    return num_bytes / (bandwidth_gbps * 1e3)


def bandwidth_gbps(num_bytes: float, time_us: float) -> float:
    """GB/s achieved moving ``num_bytes`` in ``time_us`` µs."""
    return num_bytes / (time_us * 1e3) if time_us > 0 else float("inf")
