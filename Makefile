# Quick start: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two stamps: the demo needs only the `serve` extra, so a first `make demo` installs that
# alone (seconds); everything else (tests, lint, types, docs) needs the full install.
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench dist clean

# The venv is made without a pip of its own, and the pip of $(PYTHON) installs into it
# (pip >= 22.3: --python): ensurepip alone takes longer than the demo's whole install. The
# full install adds pip to the venv for developers. --no-compile: Python compiles what the
# demo imports when it first imports it, not every module of every dependency.
PIP := $(PYTHON) -m pip --python $(VENV)

$(BIN)/python:
	@$(PYTHON) -m pip --version >/dev/null 2>&1 || { echo "make: $(PYTHON) has no pip (Debian: apt-get install python3-pip python3-venv)" >&2; exit 1; }
	$(PYTHON) -m venv --without-pip $(VENV)
	@$(PIP) --version >/dev/null 2>&1 || { rm -rf $(VENV); echo "make: the pip of $(PYTHON) is older than 22.3 (no --python): $(PYTHON) -m pip install --upgrade pip" >&2; exit 1; }

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) install --quiet --no-compile -e '.[serve]'
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP) install --quiet --upgrade pip -e '.[dev,docs,asgi,wsgi,django,fastapi,flask,postgres,serve]'
	touch $(STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/pactmw demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# The sdist and the wheel built from it, into dist/, checked as PyPI would check them
# (tests/test_packaging.py builds and installs them too).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/twine check --strict dist/*

# Every benchmark, one after the other (benchmarks/README.md); each also has its own target.
bench: $(STAMP)
	$(BIN)/python benchmarks/verify.py
	$(BIN)/python benchmarks/pyjwt_jobs.py
	$(MAKE) --no-print-directory bench-memory
	$(MAKE) --no-print-directory bench-store
	$(MAKE) --no-print-directory bench-http
	$(MAKE) --no-print-directory bench-poppy

# The benchmarks' own tools (the `bench` extra: gunicorn) and Debian packages (wrk, and
# PostgreSQL's server binaries), installed when missing.
.PHONY: bench-http bench-store bench-memory bench-poppy
BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PIP) install --quiet -e '.[dev,docs,asgi,wsgi,django,fastapi,flask,postgres,serve,bench]'
	touch $(BENCH_STAMP)

bench-http: $(BENCH_STAMP)
	sh benchmarks/system-packages.sh wrk postgresql
	$(BIN)/python benchmarks/http_load.py

bench-store: $(STAMP)
	sh benchmarks/system-packages.sh postgresql
	$(BIN)/python benchmarks/store.py

bench-memory: $(STAMP)
	$(BIN)/python benchmarks/memory.py

# One signed-in Poppy turn on the SDK's own company and on pactmw (sqlite, then memory).
bench-poppy: $(STAMP)
	$(BIN)/python benchmarks/poppy_turn.py
	$(BIN)/python benchmarks/poppy_turn.py --store memory

# The bounded soak of tests/reliability/test_soak.py, 60 s per store instead of the suite's 10.
.PHONY: soak
soak: $(STAMP)
	PACTMW_SOAK_SECONDS=60 $(BIN)/python -m pytest -q -s --timeout=600 tests/reliability/test_soak.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist
