# The two commands the README opens with: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install install-test chromium demo test lint bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

install-test: $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'

# Debian's Chromium for the Playwright sources (Playwright cannot download its own here).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -q chromium >/dev/null || \
	    { apt-get update -q && apt-get install -y -q chromium; }; \
	  else echo "install Debian's chromium (sudo apt-get install chromium)"; fi; }

demo: install
	$(BIN)/gpuradar demo

test: install-test chromium
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check .

lint: install-test
	$(BIN)/ruff check .

bench: install
	$(BIN)/python -m bench
