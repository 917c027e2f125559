# The two commands the README opens with: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install install-test system-deps demo test lint bench mutation image image-browser test-image

# The environment is made without pip, which uv then installs with the rest: ensurepip
# unpacks pip into every new environment (3.4 s of a fresh clone's `make test` on the 2-core
# machine; all of this step 2.3 s instead of 4.8 s). uv comes from the interpreter's own pip
# (pip >= 22.3 installs into another environment with --python); without one, ensurepip.
$(BIN)/python:
	$(PYTHON) -m venv --without-pip $(VENV)

# uv installs what pip would, from the same pyproject.toml, in seconds instead of one to
# two minutes (pip's resolver and installer; measured in tests/README.md). Like pip, it
# compiles the installed modules to bytecode for a user's install: with
# PYTHONDONTWRITEBYTECODE set every new process would otherwise compile each module it
# imports again. The test environment is not compiled whole (13,800 files, 15 s here, most
# never imported): `make test` compiles what its processes import (tests/precompile.py).
$(BIN)/uv: $(BIN)/python
	$(PYTHON) -m pip --python $(BIN)/python install -q --disable-pip-version-check uv \
	  2>/dev/null || { $(BIN)/python -m ensurepip --default-pip >/dev/null && \
	  $(BIN)/python -m pip install -q --disable-pip-version-check uv; }
	$(BIN)/uv pip install --python $(BIN)/python -q pip
UV_INSTALL := $(BIN)/uv pip install --python $(BIN)/python
PIP_INSTALL := $(UV_INSTALL) --compile-bytecode

# `make install` (and `make demo`) install the package as a user gets it; the tests use an
# editable install, so that they run the working tree.
# (--reinstall-package: uv would otherwise reuse its cached wheel of an edited tree.)
install: $(BIN)/uv
	$(PIP_INSTALL) -q --reinstall-package gpuradar .

install-test: $(BIN)/uv
	$(UV_INSTALL) -q -e '.[test,contract]'

# Debian packages the tests use: chromium (the Playwright sources; Playwright cannot
# download its own browser here), promtool (package prometheus) and docker-compose (to
# validate deploy/). Installed when missing and we are root; otherwise say what is missing.
SYSTEM_DEPS := chromium:chromium promtool:prometheus docker-compose:docker-compose
system-deps:
	@missing=""; for dep in $(SYSTEM_DEPS); do \
	  command -v $${dep%%:*} >/dev/null 2>&1 || missing="$$missing $${dep#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -q --no-install-recommends $$missing >/dev/null 2>&1 || \
	    { apt-get update -q && apt-get install -y -q --no-install-recommends $$missing; }; \
	  else echo "missing Debian packages:$$missing (sudo apt-get install$$missing)"; fi; fi

demo: install
	$(BIN)/gpuradar demo

# The suite on pytest-xdist workers (tests/README.md); the container image is its own stage
# (`make test-image`), which .ci/run runs after this one. Each worker takes whole files,
# the longest first (tests/conftest.py: LONGEST_FILES), and the files that mostly wait on
# a daemon's timers in two lanes of their own (WAITING_LANES): none is left with a long
# file at the end, and the other two workers keep both cores busy. Four on the 2-core
# machine: a fifth cost more CPU than it filled idle time (the same tree, back to back:
# 4 -> 154 s, 290 s of CPU; 5 -> 171 s, 335 s).
PYTEST_WORKERS ?= 4
# What the suite's processes import (the working tree, the libraries, the test files
# rewritten for pytest's asserts) is compiled once first (tests/precompile.py): the suite
# starts hundreds of processes. Bytecode may be written
# during the suite even where PYTHONDONTWRITEBYTECODE is set (as on the CI machine):
# pytest's assertion rewriting of a test file is then kept, not redone in every worker and
# subprocess, and a library only some tests import is compiled once.
test: install-test system-deps
	$(BIN)/python -m tests.precompile
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile \
	  --no-loadscope-reorder --ignore tests/project/test_image.py
	$(BIN)/ruff check .

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q tests/project/test_architecture.py

# bench/serving.py loads the page and API with Debian's wrk
bench: install
	@command -v wrk >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get install -y -q \
	  --no-install-recommends wrk >/dev/null; } || echo "missing Debian package: wrk"
	$(BIN)/python -m bench

# Mutation testing of the modules that decide what is stored and sent (slow: not in `test`/CI).
mutation: install-test
	$(PIP_INSTALL) -q -e '.[test,mutation]'
	$(BIN)/python mutation/run.py

# The container image (deploy/Dockerfile): `make image` builds the default image (no
# browser), `make image-browser` the variant with Debian's Chromium. deploy/image-base.sh
# checks that a Docker engine runs (as root: installs and starts it) and names the Python
# base image (a local one, made with debootstrap, where Docker Hub cannot be reached).
# `make test-image` runs the image tests (.ci/run runs them after `make test`), which also
# start deploy/compose-ha.yaml whole with docker-compose (a Debian package `system-deps`
# installs) or the compose plugin.
IMAGE ?= gpuradar
image:
	base=$$(sh deploy/image-base.sh) && \
	docker build -f deploy/Dockerfile --build-arg PYTHON_IMAGE=$$base -t $(IMAGE) .

image-browser:
	base=$$(sh deploy/image-base.sh) && \
	docker build -f deploy/Dockerfile --build-arg PYTHON_IMAGE=$$base --build-arg BROWSER=1 \
	  -t $(IMAGE):browser .

test-image: install-test
	GPURADAR_REQUIRE_DOCKER=1 $(BIN)/python -m pytest -q tests/project/test_image.py
