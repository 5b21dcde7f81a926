"""synth: topology-aware collective-communication algorithm synthesizer."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def run(schedule: Any, inputs: Any, op: str = "sum", **kwargs: Any) -> Any:
    """Run ``schedule`` once on local processes with ``inputs`` (one send buffer per rank) and
    return every rank's receive buffer; see `synth.exec.api.run`. Imported on first use, so that
    ``import synth`` stays light."""
    from synth.exec.api import run as _run

    return _run(schedule, inputs, op, **kwargs)
