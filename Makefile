# Spillway — the two commands the README promises: `make test` and `make demo`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# Python 3.13 (the Lambda runtime) when the machine has it, else python3.
PYTHON_BOOTSTRAP := $(shell PYENV_VERSION=3.13.0 python3.13 -c 'import sys' >/dev/null 2>&1 && echo "env PYENV_VERSION=3.13.0 python3.13" || echo python3)

.PHONY: venv test lint typecheck unit demo bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON_BOOTSTRAP) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

lint: venv
	$(VENV)/bin/ruff check layers functions tests bench
	$(VENV)/bin/ruff format --check layers functions tests bench

typecheck: venv
	$(VENV)/bin/mypy

unit: venv
	$(VENV)/bin/pytest

test: lint typecheck unit

demo: venv
	$(VENV)/bin/spillway demo

bench: venv
	$(PY) bench/planner.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
