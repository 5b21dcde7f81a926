"""Pictures of machines, schedules and comparisons (matplotlib; PNG and SVG).

* `plot_topology` (`synth.plot.topology`): ranks, switches and links laid out by structure.
* `plot_timeline` (`synth.plot.timeline`): a Gantt chart of a simulated schedule, one row per
  directed link that carries data.
* `plot_curves` (`synth.plot.curves`): busbw against message size for every method of a
  `synth.compare.Comparison`, with the lower bound.

Each returns a `matplotlib.figure.Figure`; `save(fig, path)` writes PNG or SVG by the path's
extension, reproducibly. matplotlib (the ``plot`` extra) is imported only when a picture is drawn
(`require_matplotlib` says so in one line when it is missing), so importing this package, ``import
synth`` and the CLI do not need it.
"""

from synth.plot._common import image_format, render, require_matplotlib, save
from synth.plot.curves import best_ranges, plot_curves
from synth.plot.timeline import plot_timeline
from synth.plot.topology import plot_topology, topology_layout

__all__ = [
    "best_ranges",
    "image_format",
    "plot_curves",
    "plot_timeline",
    "plot_topology",
    "render",
    "require_matplotlib",
    "save",
    "topology_layout",
]
