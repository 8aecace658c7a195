# Set-up and checks. `make demo` and `make test` work on a fresh machine: they create .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
DEPS := setup.cfg setup.py pyproject.toml

SB3_VENV ?= .venv-sb3

.PHONY: demo test test-sb3 bench docs lint type check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.demo-installed: $(BIN)/python $(DEPS)
	$(PIP) install -e .
	touch $@

$(VENV)/.test-installed: $(BIN)/python $(DEPS)
	$(PIP) install -e ".[test]"
	touch $@

## demo: install vecenv into .venv and run the main job (CartPole-v1, 8 envs in worker processes, 100k steps)
demo: $(VENV)/.demo-installed
	$(BIN)/vecenv run CartPole-v1 --num-envs 8 --backend subproc --steps 100000 --seed 0

## test: install vecenv with its test extra into .venv and run the test suite
test: $(VENV)/.test-installed
	$(BIN)/python -m pytest

# Stable-Baselines3 needs torch, installed first and pinned (torch 2.13.0). Which build pip gets is the index's
# choice: on PyPI (Linux) it is the CUDA build, several GB. TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# gets the CPU build; left empty, pip uses the index it is configured with.
TORCH_INDEX_URL ?=
TORCH_INSTALL = -m pip --disable-pip-version-check -q install $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL) )torch==2.13.0

$(SB3_VENV)/.installed: $(DEPS)
	$(PYTHON) -m venv $(SB3_VENV)
	$(SB3_VENV)/bin/python $(TORCH_INSTALL)
	$(SB3_VENV)/bin/python -m pip --disable-pip-version-check -q install -e ".[test,sb3]"
	touch $@

## test-sb3: the interoperability tests with stable-baselines3 (separate venv: torch 2.13.0 from TORCH_INDEX_URL, SB3, the test extra)
test-sb3: $(SB3_VENV)/.installed
	$(SB3_VENV)/bin/python -m pytest -m sb3

BENCH_VENV ?= .venv-bench

$(BENCH_VENV)/.installed: $(DEPS)
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python $(TORCH_INSTALL)
	$(BENCH_VENV)/bin/python -m pip --disable-pip-version-check -q install -e ".[bench]"
	touch $@

## bench: vecenv vs SB3 vs Gymnasium vs a plain loop (venv: torch 2.13.0 from TORCH_INDEX_URL, the bench extra); writes benchmarks/results/
bench: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/vecenv bench --output-dir benchmarks/results $(BENCH_ARGS)

$(VENV)/.docs-installed: $(VENV)/.test-installed
	$(PIP) install -e ".[docs]"
	touch $@

## docs: build the documentation site (Sphinx, MyST, furo) into docs/_build/html; warnings are errors, and so
## is a link of the built site to a missing file or anchor or to a placeholder address (docs/check_links.py)
docs: $(VENV)/.docs-installed
	$(BIN)/sphinx-build -E -W --keep-going -q -b html docs docs/_build/html
	$(BIN)/python docs/check_links.py docs/_build/html

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .

type: $(VENV)/.test-installed
	$(BIN)/mypy

check: test lint type

clean:
	rm -rf $(VENV) $(SB3_VENV) $(BENCH_VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache docs/_build
