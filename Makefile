# Spillway — the two commands the README promises: `make test` and `make demo`; `make deploy` after it.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# Python 3.13 (the Lambda runtime) wherever it is installed (deploy/find_python.py), else python3 (3.11+).
PYTHON_BOOTSTRAP := $(shell python3 deploy/find_python.py 2>/dev/null || command -v python3)

# The deploy tools live in their own venv: SAM CLI pins versions our runtime deps must not share.
TOOLS ?= .venv-tools
TOOLS_BOOTSTRAP := $(shell command -v python3 >/dev/null 2>&1 && echo python3 || echo $(PYTHON_BOOTSTRAP))
# No telemetry; Fn::ForEach (AWS::LanguageExtensions) expanded by SAM CLI too (samconfig.toml says so for
# build and deploy; sam validate reads only the variable).
SAM_ENV := SAM_CLI_TELEMETRY=0 SAM_CLI_ENABLE_LANGUAGE_EXTENSIONS=1
# checkov without its platform: no guideline download, no mapping, no network.
CHECKOV := BC_SKIP_MAPPING=TRUE $(TOOLS)/bin/checkov --framework cloudformation --compact --quiet --skip-download
# Where sam build finds python3.13: a link to the interpreter deploy/find_python.py found.
PY313_DIR := build/python3.13
CAPABILITIES := CAPABILITY_IAM CAPABILITY_AUTO_EXPAND

.PHONY: venv tools test lint typecheck validate python313 build deploy unit demo bench clean

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
	$(VENV)/bin/ruff check layers functions tests bench deploy
	$(VENV)/bin/ruff format --check layers functions tests bench deploy

typecheck: venv
	$(VENV)/bin/mypy

# The template as AWS will see it: SAM's own linter, cfn-lint, checkov (skips carry their reasons) on
# the template as written and with its Fn::ForEach blocks expanded (checkov skips those otherwise).
validate: tools
	$(TOOLS)/bin/cfn-lint template.yaml
	$(SAM_ENV) $(TOOLS)/bin/sam validate --lint --template template.yaml --region us-east-1
	PYTHONPATH=layers/spillway $(TOOLS)/bin/python deploy/expand_foreach.py template.yaml build/template.expanded.json
	$(CHECKOV) --file template.yaml
	$(CHECKOV) --file build/template.expanded.json

# A python3.13 for sam build, or one line saying it is missing.
python313:
	@found=$$(python3 deploy/find_python.py) || exit 1; \
	mkdir -p $(PY313_DIR) && ln -sfn "$$found" $(PY313_DIR)/python3.13

# .aws-sam/build: the functions and the layer exactly as `sam deploy` uploads them.
build: tools python313
	PATH="$(CURDIR)/$(PY313_DIR):$$PATH" $(SAM_ENV) $(TOOLS)/bin/sam build --template template.yaml

# Asks for the stack name, region and parameters (ClusterName, Regions, ...), saves them in samconfig.toml;
# later runs can be `$(TOOLS)/bin/sam deploy` alone.
deploy: build
	$(SAM_ENV) $(TOOLS)/bin/sam deploy --guided --language-extensions --capabilities $(CAPABILITIES)

unit: venv
	$(VENV)/bin/pytest

test: lint typecheck validate build unit

demo: venv
	$(VENV)/bin/spillway demo

bench: venv build
	$(PY) bench/planner.py
	$(PY) bench/cold_start.py

clean:
	rm -rf $(VENV) $(TOOLS) .aws-sam build .mypy_cache .ruff_cache .pytest_cache .hypothesis
