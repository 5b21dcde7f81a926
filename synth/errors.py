"""Errors that the command line turns into one line and an exit code.

`InputError` is bad input (a file that cannot be read, a field with a wrong value): exit code 2.
`NotApplicable` is a method asked for a case it cannot serve (exit code 2 at the CLI, since the
request is what was wrong).

A schedule that fails verification is reported in two ways (both in `synth.verify`): `verify`
returns a `VerifyResult` naming the first violation, which the CLI prints before exiting with code
1 (a schedule a user gave); `check` raises `VerificationError` (``exit_code`` 1) for code that must
never pass an invalid schedule on (the method registry, the MSCCL importer, the executors). There an
invalid schedule is a bug in synth rather than bad input, so `VerificationError` is not a
`SynthError`: the CLI does not shorten it to one line.
"""

from __future__ import annotations

from typing import Any


def describe_value(value: Any) -> str:
    """A short, one-line rendering of a JSON value for error messages."""
    import json

    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    except RecursionError:
        text = "(a value nested too deeply to show)"
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


class SynthError(Exception):
    """Base class of the errors that the CLI reports as one line."""

    exit_code = 2


class InputError(SynthError):
    """Bad input: names the file, the field (a JSON path such as ``links[3].bandwidth``) and the value."""

    def __init__(self, file: str, field: str, value: Any, reason: str, *, show_value: bool = True):
        self.file = file
        self.field = field
        self.value = value
        self.reason = reason
        where = f"{file}: {field}" if field else file
        text = f"{where} = {describe_value(value)}: {reason}" if show_value else f"{where}: {reason}"
        super().__init__(text)


class NotApplicable(SynthError):
    """A synthesizer cannot produce a schedule for this topology/collective (says why)."""


class CannotBeat(NotApplicable):
    """A method asked to beat a time (the ``beat_us`` option some methods take: `synth.selection`
    passes the best time found so far) found that its schedule cannot: the steps it had built
    already took longer. Its schedule would not have been chosen, so it stopped building it."""
