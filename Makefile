# oomrl — `make demo` and `make test` set everything up from nothing (.venv, packages).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
EXTRAS ?= dev,dask

.PHONY: demo test check types venv server server-down bench lint clean-venv browser sandbox

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip wheel setuptools

# Reinstall only when the dependency list or the lock changes, so a second run is quick.
$(STAMP): pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install -q -c constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

venv: $(STAMP)

demo: venv sandbox
	$(VENV)/bin/oomrl demo

# Whole project >= 90 % branch coverage; the judge (guardrails/) and the agent's S (strategies/) >= 95 %.
test: venv browser sandbox
	$(PY) -m pytest -q -p no:cacheprovider --cov --cov-branch --cov-report=term --cov-fail-under=90 --durations=30 $(PYTEST_ARGS)
	$(PY) -m coverage report --include='guardrails/*' --fail-under=95 --skip-covered
	$(PY) -m coverage report --include='strategies/*' --fail-under=95 --skip-covered

# The browser test needs Debian's chromium; install it when missing (root, package registry only).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	    || echo "chromium not installed: the browser test will skip"; }

# The gate runs every test process under bubblewrap; install it when missing (root, apt only).
sandbox:
	@command -v bwrap >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) \
	    || echo "bubblewrap not installed: the gate will refuse to run without --lock hash-only"; }

server: venv
	$(VENV)/bin/oomrl server up

server-down: venv
	$(VENV)/bin/oomrl server down

# Peers (vectorbt, bt, backtrader) live in their own venv, never in the project's.
BENCH_VENV := .venv-bench
$(BENCH_VENV)/.installed: bench/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q -r bench/requirements.txt
	touch $@

bench: venv $(BENCH_VENV)/.installed
	$(PY) bench/bench_ingest.py
	$(PY) bench/bench_gate.py
	$(PY) bench/bench_replay.py --peer-python $(BENCH_VENV)/bin/python

LINTED := oomrl guardrails strategies strategy_api strategy_host orchestration flows tasks tests bench scripts
lint: venv
	$(PY) -m ruff check $(LINTED)
	$(PY) -m ruff format --check $(LINTED)

# mypy on the core, the judge, the strategy boundary, orchestration/, tasks/ and flows/ ([tool.mypy] in pyproject.toml).
types: venv
	$(PY) -m mypy

# The fast loop: lint, types and every test not marked slow or e2e (make test runs them all), on two
# pytest-xdist workers. The PostgreSQL variants are left to make test: both workers would share its database.
check: lint types browser sandbox
	env -u OOMRL_TEST_POSTGRES_URL $(PY) -m pytest -q -p no:cacheprovider -n 2 -m "not slow and not e2e" $(PYTEST_ARGS)

clean-venv:
	rm -rf $(VENV)
