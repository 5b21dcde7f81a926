"""Sizes and units, as nccl-tests users write them.

Sizes are bytes: ``8``, ``8B``; ``1K``/``1M``/``1G``/``1T`` are binary multiples as in nccl-tests'
``-b``/``-e`` options (any case: ``1m`` too), as are ``1KiB``/``1MiB``/``1GiB``/``1TiB``;
``1KB``/``1MB``/``1GB``/``1TB`` are decimal (SI). A unit with a lowercase ``b`` (``1Mb``, ``8b``)
is refused: it reads as bits to many people, and sizes are bytes. A size is a whole number of
bytes from 1 to `MAX_SIZE` (1 PiB); a list or range gives at most `MAX_SIZES` sizes.
Bandwidths are GB/s (10^9 bytes/s) and times µs, so bytes / (GB/s) = 10^-3 µs.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

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

#: The largest size a command takes: 1 PiB, beyond any buffer a collective moves today and far
#: inside int64 arithmetic on chunk bytes.
MAX_SIZE = 2**50
#: More sizes than this in one list or range is a typo (-i 1 over gigabytes), not a request.
MAX_SIZES = 100_000


def parse_size(text: str | int, *, minimum: int = 0) -> int:
    """Bytes for ``"1MiB"``, ``"1M"`` (binary, as nccl-tests), ``"1MB"`` (decimal), ``"64"``.
    ``minimum`` is 1 for the size of a call (size 0 is refused: it moves nothing) and 0 for byte
    thresholds (MSCCL's minBytes). Raises ValueError with the reason."""
    if isinstance(text, int):
        if not minimum <= text <= MAX_SIZE:
            raise ValueError(f"size {text} is not between {minimum} and {MAX_SIZE} bytes")
        return text
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 8, 1KiB, 1M, 1GiB)")
    number, suffix = match.groups()
    if suffix.endswith("b") and suffix.upper() in _SUFFIX:
        prefix = suffix[:1].upper() if len(suffix) > 1 else ""
        if suffix[1:2].lower() == "i":
            hint = f"{number}{prefix}iB"
        elif prefix:
            power = "KMGT".index(prefix) * 3 + 3
            hint = f"{number}{prefix}B (10^{power} bytes), or {number}{prefix} / {number}{prefix}iB (binary, as nccl-tests)"
        else:
            hint = f"{number}B"
        raise ValueError(f"{text!r}: a lowercase b means bits, and sizes are bytes: write {hint}")
    factor = _SUFFIX.get(suffix.upper())
    if factor is None:
        raise ValueError(f"{text!r}: unknown unit {suffix!r} (use B, K/KiB, M/MiB, G/GiB, T/TiB, or KB/MB/GB/TB)")
    if len(number) > 40:
        raise ValueError(f"{text!r} is not between {minimum} and {format_size(MAX_SIZE)}")
    value = Fraction(number) * factor  # exact: 99999999999999999999999 is not rounded to a float
    if value.denominator != 1:
        raise ValueError(f"{text!r} is not a whole number of bytes")
    if not minimum <= value <= MAX_SIZE:
        hint = " (a 0-byte call moves nothing; nccl-tests' -b 0 never grows)" if value == 0 else ""
        least = "1 byte" if minimum == 1 else f"{minimum} bytes"
        raise ValueError(f"{text!r} is not between {least} and {format_size(MAX_SIZE)}{hint}")
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
            sizes.extend(size_range(parse_size(lo, minimum=1), parse_size(hi, minimum=1), factor))
        else:
            sizes.append(parse_size(part, minimum=1))
        if len(sizes) > MAX_SIZES:
            raise ValueError(f"{text!r} gives more than {MAX_SIZES} sizes")
    if not sizes:
        raise ValueError(f"{text!r} gives no sizes")
    return sizes


def check_factor(factor: float) -> float:
    """nccl-tests' ``-f``: a finite number greater than 1 (NaN used to give one size silently)."""
    if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 1):
        raise ValueError(f"the step factor must be a finite number greater than 1, got {factor}")
    return factor


def size_range(begin: int, end: int, factor: float = 2, step: int | None = None) -> list[int]:
    """nccl-tests' ``-b begin -e end -f factor`` (or ``-i step``): begin, begin·f, … while ≤ end."""
    if begin <= 0 or end < begin:
        raise ValueError(f"need 0 < begin <= end, got {begin}..{end}")
    sizes = []
    value = begin
    if step:
        if step < 0 or (end - begin) // step + 1 > MAX_SIZES:
            raise ValueError(f"an increment of {step} from {begin} to {end} gives more than {MAX_SIZES} sizes")
        while value <= end:
            sizes.append(value)
            value += step
        return sizes
    check_factor(factor)
    if math.log(end / begin) / math.log(factor) + 1 > MAX_SIZES:
        raise ValueError(f"a factor of {factor} from {begin} to {end} gives more than {MAX_SIZES} sizes")
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
