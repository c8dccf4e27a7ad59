# The README's commands. `make preview` and `make test` set up ./venv on first use.
PYTHON ?= python3
VENV := venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup preview preview-prod test golden bench contract

# The last pip line installs verl's config tree only (--no-deps: no torch), at the verl row's
# version of data/versions.yaml: tools/verl_snapshot.py and the tests compose against it.
$(STAMP): requirements.txt requirements-dev.txt data/versions.yaml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps "verl==$$($(BIN)/python -c 'from components.versions import load_versions as v; print(v().for_framework("verl").framework_version)')"
	touch $(STAMP)

setup: $(STAMP)

preview: $(STAMP)  ## the dev stack's offline preview, as a tree
	$(BIN)/python -m tools.preview dev

preview-prod: $(STAMP)
	$(BIN)/python -m tools.preview prod

test: $(STAMP)  ## the whole suite; CI runs exactly this
	$(BIN)/python -m pytest

golden: $(STAMP)  ## regenerate tests/golden/*.json on purpose, then review the diff
	$(BIN)/python -m tools.golden

bench: $(STAMP)  ## offline preview of prod vs. the floor of importing the SDK modules
	$(BIN)/python -m tools.bench_preview

contract: $(STAMP)
	$(BIN)/python ../shared/tools/check_preview_contract.py
