# `make demo` and `make test` work on a fresh machine: they create .venv and install what each needs.
# `make demo` installs the runtime dependencies only (no test tools, no Ray, pyarrow, Playwright or Chromium);
# `make test` adds the test extra and Graphviz's `dot`; `make test-all` adds Chromium for the browser tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install -q --disable-pip-version-check
RUNTIME := $(VENV)/.runtime-installed
TESTS   := $(VENV)/.tests-installed

.PHONY: setup demo test test-slow test-all test-pythons test-real bench tables clean graphviz chromium

setup: $(TESTS) graphviz chromium

# uv (from PyPI, into .uv/ unless it is on PATH) makes the venv and installs in a fraction of pip's time
# (on a fresh clone, 2 loaded cores: 29 s against 126 s); where it cannot be had, venv and pip do it
UV_BIN := $(shell command -v uv 2>/dev/null)

$(RUNTIME): pyproject.toml setup.py
	@uv="$(UV_BIN)"; \
	if [ -z "$$uv" ] && $(PYTHON) -m pip install -q --disable-pip-version-check --target .uv uv >/dev/null 2>&1; then \
	  uv=.uv/bin/uv; fi; \
	if [ -n "$$uv" ]; then \
	  echo "installing the runtime dependencies with uv"; \
	  "$$uv" venv -q --seed --allow-existing --python $(PYTHON) $(VENV) && "$$uv" pip install -q --python $(BIN)/python -e .; \
	else \
	  echo "installing the runtime dependencies with pip"; \
	  $(PYTHON) -m venv $(VENV) && $(PIP) -e .; \
	fi
	@# pip byte-compiles what it installs, but not an editable project: without this, where
	@# PYTHONDONTWRITEBYTECODE is set, every `gsr` start compiles each module it imports again
	$(BIN)/python -m compileall -q gsrlang >/dev/null
	touch $(RUNTIME)

# --compile-bytecode: uv writes no .pyc by default (pip does), and where PYTHONDONTWRITEBYTECODE is set nothing
# ever writes them, so every process of the suite (pytest, each `gsr` a test starts, each of Ray's workers)
# compiled what it imports from source again (docs/testing.md: the Ray tests took twice as long). uv compiles
# the packages this step installs (Ray, scipy, pyarrow, pytest...); `make test` writes the rest as they are imported.
$(TESTS): $(RUNTIME)
	@if [ -x .uv/bin/uv ] || [ -n "$(UV_BIN)" ]; then uv="$${UV_BIN:-$(UV_BIN)}"; [ -n "$$uv" ] || uv=.uv/bin/uv; \
	  "$$uv" pip install -q --compile-bytecode --python $(BIN)/python -e ".[test]"; else $(PIP) -e ".[test]"; fi
	@# the runtime packages too (make demo installs them uncompiled, to stay light), once, on every core: else
	@# each test worker compiles the same modules again on its first import
	$(BIN)/python -m compileall -q -j 0 $$($(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") gsrlang >/dev/null || true
	touch $(TESTS)

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

demo: $(RUNTIME)
	$(BIN)/python -m gsrlang.demo

# the fast suite: every test but the slow tier (pyproject's addopts deselect `slow`; see docs/testing.md), on two
# workers per core, at most 8 (pytest-xdist; `make test WORKERS=0` runs it in this process): much of a test's time
# is spent waiting on a server, a subprocess or a timeout, so two per core keep the cores busy (2 cores, idle: 126 s
# against 169 s with one per core; docs/testing.md), a test file's tests in one worker
# (a module's fixtures, the local Ray among them, start once). .pyc files are written even where
# PYTHONDONTWRITEBYTECODE is set (into .venv and the ignored __pycache__ folders): without them every worker and
# every `gsr` a test starts compiles its imports again, and pytest rewrites every test module's asserts again.
WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(8, 2 * len(os.sched_getaffinity(0))))" 2>/dev/null || echo auto)
test: $(TESTS) graphviz
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(WORKERS) --dist loadfile

# the slow tier: soak, kill-and-resume, browser pages, and the property and fuzz tests with all their examples
# (pytest exits 5 when a tier selects no test: that is a broken tier, not a pass)
test-slow: $(TESTS) graphviz chromium
	GSR_TEST_FULL=1 $(BIN)/python -m pytest -m "slow or examples"

# everything: the fast suite and the slow tier, in one run
test-all: $(TESTS) graphviz chromium
	GSR_TEST_FULL=1 $(BIN)/python -m pytest -m ""

# the package on the oldest Python it supports (3.10) and the newest one found here (scripts/pythons.sh)
test-pythons:
	bash scripts/pythons.sh

bench: setup
	$(BIN)/python benchmarks/run.py

# The parser shipped in the package (gsrlang/lang/syntax/_standalone.py: Lark's standalone parser and its tables), made
# from grammar/gsr.lark: run after editing the grammar (tests/test_tables.py fails until then). Byte-compiled, as
# `make setup` compiles the rest: where PYTHONDONTWRITEBYTECODE is set, it would otherwise compile on every start.
tables: setup
	$(BIN)/python -m gsrlang.lang.syntax.tables
	$(BIN)/python -m compileall -q gsrlang/lang/syntax/_standalone.py >/dev/null

# The real-model tier: llama-cpp-python's server with SmolLM2-135M (both from PyPI) on
# 127.0.0.1, and the tests marked `realmodel` against it (see README, "The real-model tier").
test-real: $(TESTS)
	bash scripts/realmodel.sh

clean:
	rm -rf $(VENV) .uv build *.egg-info .pytest_cache .hypothesis
