"""What a benchmark records: ``benchmarks/results/NAME.json``, the command that was run, the text it
printed and its figures (a JSON object of numbers and names), from its last full run.

``benchmarks/readme_figures.py`` renders README.md's figures and benchmarks/README.md's output
blocks from these files, and checks that the two READMEs agree with them. A benchmark records only
when it runs its whole default set (a run restricted to some cases prints but records nothing), so
a results file always holds one complete run.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


class Capture:
    """Everything printed to stdout inside ``with Capture() as out:`` also lands in ``out.text``."""

    def __enter__(self) -> Capture:
        self._buffer = io.StringIO()
        self._stdout = sys.stdout
        sys.stdout = _Tee(self._stdout, self._buffer)
        return self

    def __exit__(self, *exc) -> None:
        sys.stdout = self._stdout

    @property
    def text(self) -> str:
        return self._buffer.getvalue()


def record(name: str, command: str, output: str, figures: dict[str, Any], *, shown: str | None = None) -> Path:
    """Write ``results/NAME.json`` (sorted keys, so a rerun changes only what changed). ``shown`` is
    the text an output block shows, when it is not ``$ command`` and the output (a README
    example's transcript)."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    doc = {"command": command, "figures": figures, "output": output}
    if shown is not None:
        doc["shown"] = shown
    path.write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    where = path.relative_to(RESULTS.parent.parent)
    print(f"recorded {where}; python benchmarks/readme_figures.py --write puts it in the READMEs", file=sys.stderr)
    return path
