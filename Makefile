# The two commands the README opens with: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install install-test system-deps demo test lint bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

install-test: $(BIN)/python
	$(BIN)/pip install -q -e '.[test,contract]'

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

test: install-test system-deps
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check .

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q tests/test_architecture.py

bench: install
	$(BIN)/python -m bench
