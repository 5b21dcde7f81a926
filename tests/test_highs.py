"""HiGHS prints nothing on standard output (highspy 1.16 prints a banner when its first object is
made, from C++, which would corrupt ``--json`` output)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("highspy")


def test_new_highs_prints_nothing():
    code = "from synth.highs import new_highs; new_highs(); new_highs(); print('done')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "done\n"


def test_bound_json_is_only_json():
    """The alltoall bound solves an LP with HiGHS; ``--json`` must still be parseable."""
    import json

    cmd = [sys.executable, "-m", "synth", "bound", "dgx1", "-c", "alltoall", "--size", "1MiB", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    json.loads(out.stdout)
