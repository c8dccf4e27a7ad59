# The README's commands. `make preview` and `make test` set up ./venv on first use.
PYTHON ?= python3
VENV := venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup preview preview-prod test golden bench contract

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
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
