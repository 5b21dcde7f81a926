"""What every picture shares: matplotlib without global state, deterministic saving, size labels.

Figures are made with `matplotlib.figure.Figure` directly (not pyplot): no global figure registry,
no backend switching, nothing left open between calls. Saving renders with Agg (PNG) or the SVG
backend, with the SVG id salt fixed and dates left out, so the same figure gives the same bytes
with the same matplotlib.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from synth.errors import InputError
from synth.fileio import Written, write_bytes_atomic
from synth.units import format_size

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = ("png", "svg")
#: fixed salt for the ids matplotlib writes into SVG files (clip paths, glyphs): reproducible output
SVG_HASH_SALT = "synth"
DEFAULT_DPI = 120


def require_matplotlib() -> None:
    """Raise a one-line `InputError` when the ``plot`` extra is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError(
            "synth plot", "matplotlib", None, "is not installed: pip install 'synth[plot]' (make setup does)", show_value=False
        ) from None


def new_figure(width: float, height: float) -> Figure:
    """A figure of ``width`` × ``height`` inches with constrained layout, detached from pyplot."""
    require_matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def image_format(path: str | Path) -> str:
    """The format a path's extension asks for (png or svg); `InputError` otherwise."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        expected = ", ".join("." + f for f in FORMATS)
        raise InputError("synth plot", "-o", str(path), f"unknown image format (expected a file ending in {expected})")
    return suffix


def render(fig: Figure, fmt: str = "png", *, dpi: int = DEFAULT_DPI) -> bytes:
    """The figure as PNG or SVG bytes, reproducibly: SVG ids salted with a constant and no date in
    either format's metadata (PNG keeps only matplotlib's version as its Software tag)."""
    import matplotlib

    if fmt not in FORMATS:
        raise ValueError(f"unknown image format {fmt!r} (expected one of {', '.join(FORMATS)})")
    freeze_layout(fig)
    buf = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {}
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASH_SALT}):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=metadata)
    return buf.getvalue()


def freeze_layout(fig: Figure) -> None:
    """Run the constrained layout once and keep its result. Constrained layout starts from the
    positions of the previous draw, so a figure saved twice (as PNG, then as SVG) would otherwise
    come out slightly different the second time; frozen, every save of it is the same."""
    if fig.get_layout_engine() is not None and fig.get_layout_engine().__class__.__name__ != "PlaceHolderLayoutEngine":
        fig.draw_without_rendering()
        fig.set_layout_engine("none")


def save(fig: Figure, path: str | Path, *, dpi: int = DEFAULT_DPI, protect: Iterable[str | Path] = ()) -> Written:
    """Write the figure to ``path`` as PNG or SVG (by its extension), atomically and never over one
    of ``protect`` (the command's inputs)."""
    return write_bytes_atomic(path, render(fig, image_format(path), dpi=dpi), protect=protect)


def size_label(size: float) -> str:
    """A byte count as a short axis label: 8B, 1KiB, 256MiB, 1GiB."""
    return format_size(int(size)).replace(" ", "")


def bandwidth_label(gbps: float) -> str:
    """A bandwidth in GB/s without trailing zeros: 25, 12.5, 0.75."""
    return f"{gbps:.3g}" if gbps < 100 else f"{gbps:.0f}"
