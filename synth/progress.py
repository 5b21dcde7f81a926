"""Progress bars for long commands (synthesis, the benchmark suite, `synth regenerate`, reports).

A bar is drawn on standard error only when it is a terminal, so pipes, logs and scripts see
nothing; ``quiet=True`` (the commands' ``--quiet``/``-q``) turns it off on a terminal too. The bar
is tqdm's: one small pure-Python dependency, which already knows how to stay silent off a terminal
and to redraw in place without flicker. tqdm is imported only when a bar is made.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO


class Progress:
    """A counted task: ``advance`` after each unit of work, ``note`` to say what is being done.

    Used as a context manager; on exit the bar is removed from the terminal (the command's own
    output follows it). Without a terminal, or with ``quiet``, every method does nothing."""

    def __init__(self, total: int | None, desc: str = "", *, quiet: bool = False, unit: str = "it", file: TextIO | None = None):
        stream = file if file is not None else sys.stderr
        self.stream = stream
        self.quiet = quiet
        self.enabled = not quiet and hasattr(stream, "isatty") and stream.isatty()
        self._bar: Any = None
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, file=stream, leave=False, dynamic_ncols=True)

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def set_total(self, total: int) -> None:
        """Say how many units there are, once the work has been counted."""
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def note(self, text: str) -> None:
        """Show what is being worked on now (after the counter)."""
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)

    def log(self, line: str) -> None:
        """Print a line of progress log on the stream (above the bar on a terminal), unless quiet."""
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def step_callback(self, prefix: str = "") -> Callable[[str], None]:
        """A callback for library functions that announce each unit before doing it: each call after the first counts the previous
        unit as done; the note shows ``prefix`` and the unit's name."""
        started = False

        def callback(name: str) -> None:
            nonlocal started
            if started:
                self.advance()
            started = True
            self.note(prefix + name)

        return callback

    def count_callback(self, prefix: str = "", *, own_total: bool = True) -> Callable[[int, int, str], None]:
        """A callback for library functions that report ``(done, total, label)`` after each unit
        (such as `synth.compare.compare`'s ``progress``): the bar advances with the count (its
        total is the callback's unless ``own_total`` is False: a part of a larger task) and the
        note shows ``prefix`` and the last unit's label."""
        shown = 0

        def callback(done: int, total: int, label: str) -> None:
            nonlocal shown
            if own_total:
                self.set_total(total)
            self.advance(done - shown)
            shown = done
            self.note(prefix + label)

        return callback
