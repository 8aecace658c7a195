# Set-up and checks. `make demo` and `make test` work on a fresh machine: they create .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
DEPS := setup.cfg setup.py pyproject.toml

.PHONY: demo test lint type check clean

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

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .

type: $(VENV)/.test-installed
	$(BIN)/mypy

check: test lint type

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
