# Spillway — the two commands the README promises: `make test` and `make demo`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# Python 3.13 (the Lambda runtime) when the machine has it, else python3.
PYTHON_BOOTSTRAP := $(shell PYENV_VERSION=3.13.0 python3.13 -c 'import sys' >/dev/null 2>&1 && echo "env PYENV_VERSION=3.13.0 python3.13" || echo python3)

# The deploy tools live in their own venv: SAM CLI pins versions our runtime deps must not share.
TOOLS ?= .venv-tools
TOOLS_BOOTSTRAP := $(shell python3 -c 'import sys' >/dev/null 2>&1 && echo python3 || echo $(PYTHON_BOOTSTRAP))
# sam build needs the Lambda runtime's python3.13 on PATH; with pyenv that means naming it.
SAM_ENV := SAM_CLI_TELEMETRY=0 SAM_CLI_ENABLE_LANGUAGE_EXTENSIONS=1 $(shell command -v pyenv >/dev/null 2>&1 && pyenv versions --bare 2>/dev/null | grep -qx 3.13.0 && echo "PYENV_VERSION=$$(pyenv global | head -1):3.13.0")

.PHONY: venv tools test lint typecheck validate build unit demo bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON_BOOTSTRAP) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

$(TOOLS)/.installed: Makefile
	test -x $(TOOLS)/bin/python || $(TOOLS_BOOTSTRAP) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install -q --upgrade pip
	$(TOOLS)/bin/python -m pip install -q 'aws-sam-cli==1.170.0' 'cfn-lint==1.58.0' 'checkov==3.2.459'
	touch $@

tools: $(TOOLS)/.installed

lint: venv
	$(VENV)/bin/ruff check layers functions tests bench
	$(VENV)/bin/ruff format --check layers functions tests bench

typecheck: venv
	$(VENV)/bin/mypy

# The template as AWS will see it: SAM's own linter, cfn-lint, checkov (skips carry their reasons).
validate: tools
	$(TOOLS)/bin/cfn-lint template.yaml
	$(SAM_ENV) $(TOOLS)/bin/sam validate --lint --template template.yaml --region us-east-1
	$(TOOLS)/bin/checkov --file template.yaml --framework cloudformation --compact --quiet

# .aws-sam/build: the functions and the layer exactly as `sam deploy` uploads them.
build: tools
	$(SAM_ENV) $(TOOLS)/bin/sam build --template template.yaml

unit: venv
	$(VENV)/bin/pytest

test: lint typecheck validate build unit

demo: venv
	$(VENV)/bin/spillway demo

bench: venv build
	$(PY) bench/planner.py
	$(PY) bench/cold_start.py

clean:
	rm -rf $(VENV) $(TOOLS) .aws-sam .mypy_cache .ruff_cache .pytest_cache .hypothesis
