"""Shared fixtures: built-in and small generated topologies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synth import generators as gen
from synth.builtin import BUILTIN_NAMES, get_topology

REPO = Path(__file__).resolve().parent.parent
#: Real NCCL and MSCCL files, kept beside the checkout (../shared/reference/realdata, with their
#: provenance beside them); tests that read them skip, saying so, when it is absent.
REALDATA = REPO.parent / "shared" / "reference" / "realdata"


@pytest.fixture(scope="session")
def builtin():
    cache = {}

    def load(name: str):
        if name not in cache:
            cache[name] = get_topology(name)
        return cache[name]

    return load


@pytest.fixture(scope="session")
def dgx1(builtin):
    return builtin("dgx1")


SMALL_TOPOLOGIES = {
    "ring5": lambda: gen.ring(5),
    "torus3x3": lambda: gen.torus(3, 3),
    "mesh3x3": lambda: gen.mesh(3, 3),
    "mesh2x3": lambda: gen.mesh(2, 3),
    "hypercube3": lambda: gen.hypercube(3),
    "full6": lambda: gen.fully_connected(6),
    "nvswitch6": lambda: gen.nvswitch(6, 100.0),
    "pcie2x1x3": lambda: gen.pcie_tree(sockets=2, switches_per_socket=1, gpus_per_switch=3),
    "fattree2x2x2": lambda: gen.fattree(racks=2, servers=2, gpus=2),
    "two": lambda: gen.ring(2),
}


@pytest.fixture(scope="session")
def small_topologies():
    return {name: make() for name, make in SMALL_TOPOLOGIES.items()}


def write_json(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


__all__ = ["BUILTIN_NAMES", "REPO", "SMALL_TOPOLOGIES", "write_json"]


CHROMIUM = Path("/usr/bin/chromium")
#: flags headless Chromium needs on this closed network (else it stalls on background fetches)
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's headless Chromium, which the set-up installs (`make setup-browser`, run by `make
    test`): tests never install anything on the host. Absent, the test is skipped saying so; under
    CI (CI=true, where .ci/run's make test installs it) it fails, so CI never loses the rendering
    check quietly."""
    import os

    if not CHROMIUM.exists():
        why = f"headless Chromium is not installed ({CHROMIUM}); `make setup-browser` installs Debian's chromium"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(why)
        pytest.skip(why)
    return CHROMIUM
