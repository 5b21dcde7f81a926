"""Keep the solver libraries off our standard output.

What ``synth`` prints on stdout is the result a user asked for: a ``--json`` document that a script
parses, or the lines of a command run with ``-q``. Native solver libraries write with C's stdio,
which Python's ``sys.stdout`` (and ``contextlib.redirect_stdout``) never sees: HiGHS 1.16 prints a
two-line banner ("Running HiGHS 1.16.0 ... Copyright ...") on file descriptor 1 when a
``highspy.Highs`` object is constructed, before any option can turn it off. Its options
``output_flag`` and ``log_to_console`` silence everything after that.

So the solvers are called through this module:

- `new_highs()` constructs a ``highspy.Highs`` with descriptor 1 pointed at the null device (the
  banner is a greeting, and the options we set at once say "print nothing") and every output
  option off;
- `native_stdout_to_stderr()` wraps each solve: for its duration descriptor 1 points at
  descriptor 2, so anything a library still prints is shown as a diagnostic, never mixed into
  the result.

C's buffers are flushed before descriptor 1 is restored, so nothing written inside lands on stdout
later; Python's own buffer is flushed before it is redirected, so what we printed earlier still
goes to stdout. Descriptor 1 is one per process: a reentrant lock makes threads take turns (the
solves of one process run one at a time anyway), and nesting restores in order.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

_LOCK = threading.RLock()


def _libc_fflush() -> Any:
    """C's fflush (None where the C library cannot be loaded this way, e.g. on Windows)."""
    try:
        return ctypes.CDLL(None).fflush
    except (OSError, AttributeError):
        return None


_FFLUSH = _libc_fflush()


def _flush_c_streams() -> None:
    if _FFLUSH is not None:
        _FFLUSH(None)  # fflush(NULL): every open output stream


def _flush_python_stdout() -> None:
    for stream in (sys.stdout, sys.__stdout__):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):  # closed or detached
                stream.flush()


@contextmanager
def _descriptor_1_to(target: int | str) -> Iterator[None]:
    """Point file descriptor 1 at ``target`` (a descriptor, or a path opened for writing) while
    the block runs. Does nothing when descriptor 1 is not open."""
    with _LOCK:
        _flush_python_stdout()
        _flush_c_streams()
        try:
            saved = os.dup(1)
        except OSError:  # no descriptor 1 (a daemon): nothing to protect
            saved = None
        if saved is None:
            yield
            return
        opened = os.open(target, os.O_WRONLY) if isinstance(target, str) else None
        try:
            os.dup2(target if opened is None else opened, 1)
            try:
                yield
            finally:
                _flush_c_streams()
                os.dup2(saved, 1)
        finally:
            os.close(saved)
            if opened is not None:
                os.close(opened)


@contextmanager
def native_stdout_to_stderr() -> Iterator[None]:
    """Run a solve with file descriptor 1 pointed at descriptor 2 (see the module docstring)."""
    try:
        os.fstat(2)
    except OSError:  # no stderr either: send it nowhere
        with _descriptor_1_to(os.devnull):
            yield
        return
    with _descriptor_1_to(2):
        yield


def new_highs() -> Any:
    """A ``highspy.Highs`` that prints nothing: its construction banner is discarded and its
    output options are off. Raises ImportError when highspy is not installed.

    It runs on one thread, whoever asks: HiGHS sizes its process-wide task scheduler at the first
    solve, and a later solve asking another thread count fails (status "error"), so a bound LP
    solved with the default count would break every single-threaded solve after it (and the other
    way round). One thread also keeps the solves deterministic."""
    import highspy

    with _descriptor_1_to(os.devnull):
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("log_to_console", False)
        h.setOptionValue("threads", 1)
    return h


def seeded_highs_with_columns(lp: Any, starts: Any, index: Any, value: Any) -> Any:
    """A quiet `new_highs`, seeded 0 (same LP, same answer), for ``lp`` (a ``highspy.HighsLp`` with
    its costs and bounds set), whose constraint matrix this sets column-wise from HiGHS's compressed
    columns: column j's entries are ``index``/``value`` [``starts[j]``, ``starts[j + 1]``). The
    caller passes the model and runs it."""
    import highspy

    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.asarray(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.asarray(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.asarray(value, dtype=np.float64)
    h = new_highs()
    h.setOptionValue("random_seed", 0)
    return h
