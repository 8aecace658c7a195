# Set-up and checks. `make demo` and `make test` work on a fresh machine: they create .venv themselves.
# A venv is reinstalled when DEPS change: the version is part of the installed metadata.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
DEPS := setup.cfg setup.py pyproject.toml vecenv/version.py

SB3_VENV ?= .venv-sb3
DOCS_VENV ?= .venv-docs

.PHONY: demo test test-sb3 bench figures docs dist lint type check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.demo-installed: $(BIN)/python $(DEPS)
	$(PIP) install -e .
	touch $@

$(VENV)/.test-installed: $(BIN)/python $(DEPS)
	$(PIP) install -e ".[test]"
	touch $@

## demo: install vecenv into .venv and run the main job (CartPole-v1, 8 envs in DummyVecEnv, 100k steps), then
## time the layouts on the same envs (plain loop, DummyVecEnv, SubprocVecEnv; about 6 s) and say which to use and why
demo: $(VENV)/.demo-installed
	$(BIN)/vecenv run CartPole-v1 --num-envs 8 --backend dummy --steps 100000 --seed 0 --compare

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

# Every figure of the docs needs the bench extra and the test extra's EnvPool, PettingZoo, mpe2 and SuperSuit.
$(BENCH_VENV)/.figures-installed: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python -m pip --disable-pip-version-check -q install -e ".[bench,test]"
	touch $@

## figures: measure every figure of the docs again with the commands that made them (benchmarks/figures.py;
## long: the benchmarks' own settings), into benchmarks/snapshots/ under today's date; FIGURES_ARGS="--only
## pettingzoo" measures one, "--dry-run" prints the commands, "--smoke" runs each with tiny settings
figures: $(BENCH_VENV)/.figures-installed
	$(BENCH_VENV)/bin/python benchmarks/figures.py $(FIGURES_ARGS)

# The site needs Sphinx, MyST, furo and what autodoc imports (vecenv and its base dependencies): the docs
# extra alone, in a venv of its own (not the test extra's Ray, EnvPool, ...).
$(DOCS_VENV)/.installed: $(DEPS)
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip --disable-pip-version-check -q install -e ".[docs]"
	touch $@

## docs: build the documentation site (Sphinx, MyST, furo; venv: the docs extra, .venv-docs) into docs/_build/html;
## warnings are errors, and so is a link of the built site to a missing file or anchor or to a placeholder
## address (docs/check_links.py)
docs: $(DOCS_VENV)/.installed
	$(DOCS_VENV)/bin/sphinx-build -E -W --keep-going -q -b html docs docs/_build/html
	$(DOCS_VENV)/bin/python docs/check_links.py docs/_build/html

$(VENV)/.build-installed: $(BIN)/python
	$(PIP) install "build>=1.0"
	touch $@

## dist: build the source distribution and the wheel into dist/ (python -m build, in .venv); install the wheel
## anywhere with `pip install dist/vecenv-*.whl`
dist: $(VENV)/.build-installed
	rm -f dist/vecenv-*
	$(BIN)/python -m build --outdir dist .

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .

type: $(VENV)/.test-installed
	$(BIN)/mypy

check: test lint type

clean:
	rm -rf $(VENV) $(SB3_VENV) $(BENCH_VENV) $(DOCS_VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache docs/_build
