"""HiGHS objects that print nothing.

highspy 1.16 prints a copyright banner on the process's standard output when the first `Highs`
object is made: from C++, on file descriptor 1, before any option can turn output off. It would
corrupt ``--json`` output, ``-q`` and anything else a user reads from stdout, so `new_highs` makes
the first object with descriptor 1 pointed at /dev/null, and every object with ``output_flag`` off.
"""

from __future__ import annotations

import os
import sys
import threading

_lock = threading.Lock()
_banner_shown = False


def new_highs():
    """A fresh ``highspy.Highs`` with its output off (the banner, if any, swallowed)."""
    import highspy

    global _banner_shown
    with _lock:
        if not _banner_shown:
            _banner_shown = True
            sys.stdout.flush()
            saved = os.dup(1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, 1)
                highspy.Highs()  # the first object prints the banner, if this version has one
            finally:
                os.dup2(saved, 1)
                os.close(saved)
                os.close(devnull)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h
