# Everything installs itself into .venv from PyPI (numpy, pulp+HiGHS, MPI from the mpich wheel), at the
# exact versions and hashes of requirements.lock, so every machine runs the same solvers.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
LOCK   := requirements.lock
# The extras (pyproject.toml's [project.optional-dependencies]) that the lock covers and make setup
# installs: adding an extra is adding its name here, then `make lock`.
EXTRAS := dev mpi plot

# The torch extra has a lock of its own, requirements-torch.lock (compiled by make lock from requirements-torch.in,
# on top of requirements.lock's pins): PyTorch's CPU build, torch==2.13.0+cpu, for CPython 3.11 on Linux x86-64
# (about 190 MB to download, 0.75 GB installed; the CUDA build PyPI serves brings about 5 GB of CUDA libraries).
# The CPU wheel comes from download.pytorch.org/whl/cpu, or from /opt/wheels where a machine keeps it (the same
# file: its SHA-256 is the one in the lock). Elsewhere make setup skips torch and says so; the tests that need it
# skip, naming `pip install 'synth[torch]'`.
TORCH_LOCK  := requirements-torch.lock
TORCH_WHEELS := /opt/wheels
TORCH_INDEX := https://download.pytorch.org/whl/cpu
TORCH_SOURCE = $(if $(wildcard $(TORCH_WHEELS)/torch-*.whl),--find-links $(TORCH_WHEELS),--extra-index-url $(TORCH_INDEX))
TORCH_PLATFORM := import sys, platform; sys.exit(0 if sys.version_info[:2] == (3, 11) and sys.platform == "linux" and platform.machine() == "x86_64" else 1)

.PHONY: setup setup-browser lock demo test test-all lint bench generated topologies images clean

$(STAMP): pyproject.toml $(LOCK) $(TORCH_LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "synth needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK)
	@if $(BIN)/python -c '$(TORCH_PLATFORM)'; then \
		echo "$(BIN)/python -m pip install --quiet --require-hashes -r $(TORCH_LOCK) $(TORCH_SOURCE)"; \
		$(BIN)/python -m pip install --quiet --require-hashes -r $(TORCH_LOCK) $(TORCH_SOURCE); \
	else \
		echo "setup: $(TORCH_LOCK) is for CPython 3.11 on Linux x86-64; torch not installed (pip install 'synth[torch]'; its tests skip)"; \
	fi
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@touch $(STAMP)

## The package's bytecode, compiled once here (every time: only changed modules are compiled again): an
## editable install has none, and where PYTHONDONTWRITEBYTECODE is set (containers, CI) Python would
## otherwise compile every module of synth at every command's start (about 0.3 s of each).
setup: $(STAMP)
	@$(BIN)/python -m compileall -q synth

## Headless Chromium (Debian's package), which tests/test_report.py renders the HTML report with; make test
## runs this first. Where it cannot be installed (no apt-get, no root or sudo) it says so, and that test is
## skipped with the reason (under CI=true it fails instead: CI must cover the rendering).
setup-browser:
	@if [ ! -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo -n"; fi; \
		echo "setup-browser: installing Debian's chromium with apt-get (headless, for tests/test_report.py)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		{ $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 \
		  || { $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; } \
		|| echo "setup-browser: could not install chromium (needs apt-get and root); tests/test_report.py will skip its rendering test"; \
	fi

## Re-resolve requirements.lock from pyproject.toml: PyPI only (no local index or wheel folder), one version of each
## package for every platform and Python >= 3.11, with hashes. Pins already in the lock are kept when they still fit;
## `make lock ARGS=--upgrade` moves every pin to the newest release (ARGS='--upgrade-package highspy' one package).
## Then requirements-torch.lock from requirements-torch.in: torch's CPU build (from /opt/wheels where present, else
## from PyTorch's CPU index; the same file either way) and its dependencies from PyPI, within requirements.lock's pins.
UV_CLEAN := env -u UV_INDEX -u UV_INDEX_URL -u UV_DEFAULT_INDEX -u UV_EXTRA_INDEX_URL -u UV_FIND_LINKS -u UV_CONSTRAINT
lock: $(STAMP)
	$(UV_CLEAN) $(BIN)/uv pip compile pyproject.toml $(addprefix --extra ,$(EXTRAS)) --no-config --universal --fork-strategy fewest \
		--python-version 3.11 --generate-hashes --quiet --custom-compile-command 'make lock' -o $(LOCK) $(ARGS)
	$(UV_CLEAN) $(BIN)/uv pip compile requirements-torch.in -c $(LOCK) --no-config --python-version 3.11 \
		--python-platform x86_64-manylinux_2_28 $(TORCH_SOURCE) \
		--generate-hashes --quiet --custom-compile-command 'make lock' -o $(TORCH_LOCK) $(ARGS)

## The main job: synthesize an allreduce for a DGX-1, verify it, predict its time, compare every method with the bound, run it.
demo: setup
	$(BIN)/synth topo show dgx1
	$(BIN)/synth synthesize dgx1 --collective allreduce --method ring -o out/dgx1-allreduce-ring.json
	$(BIN)/synth verify out/dgx1-allreduce-ring.json --topology dgx1
	$(BIN)/synth simulate out/dgx1-allreduce-ring.json --size 1KiB,1MiB,1GiB
	$(BIN)/synth compare dgx1 --collective allreduce --sizes 1KiB,1GiB
	$(BIN)/synth run out/dgx1-allreduce-ring.json --size 1KiB,1MiB

## The test suite (slow cases excluded; see test-all), on every core with pytest-xdist (a worker takes the next
## test when it is free: the durations are uneven). WORKERS=0 runs it in this process, e.g. to debug.
WORKERS ?= auto
PYTEST  := $(BIN)/python -m pytest -q -n $(WORKERS) --dist worksteal

test: $(STAMP) setup-browser
	$(PYTEST)

test-all: $(STAMP) setup-browser
	$(PYTEST) -m ''

lint: $(STAMP)
	$(BIN)/ruff check synth tests benchmarks
	$(BIN)/ruff format --check synth tests benchmarks

## The standard benchmark suite: every built-in x collective x size x method against the bound.
bench: setup
	$(BIN)/python benchmarks/suite.py --readme

## Rebuild generated/ and the built-in topology files from their recipes.
generated: $(STAMP)
	$(BIN)/synth regenerate

topologies: $(STAMP)
	$(BIN)/synth topo write-builtins

## The pictures of README.md and docs/plots.md (docs/images/), made by the commands they name.
images: $(STAMP)
	$(BIN)/synth plot topo dgx1 -o docs/images/dgx1-topology.png
	$(BIN)/synth plot compare dgx1 --collective allreduce -o docs/images/dgx1-allreduce-curves.png -q
	$(BIN)/synth plot schedule generated/dgx1/allreduce-ring.json --size 1GiB -o docs/images/dgx1-allreduce-ring-timeline.png
	$(BIN)/synth plot schedule generated/dgx1/allreduce-multiring.json --size 1GiB -o docs/images/dgx1-allreduce-multiring-timeline.png
	$(BIN)/synth plot topo fattree-4rack -o docs/images/fattree-4rack-topology.png
	$(BIN)/synth plot topo dgx-a100x2 -o docs/images/dgx-a100x2-topology.png

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache
