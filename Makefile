# aorta.cluster: one entry point for people and CI. `make demo` and `make test` are the two
# commands a newcomer needs; everything else is a building block of those.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYENV_ROOT ?= $(shell pyenv root 2>/dev/null)
# ansible-core 2.20+ needs Python >= 3.12 on the controller; fall back to python3 (gets 2.19).
# (pyenv's own python3.12 shim refuses unless selected, so look in its versions directory.)
PYTHON ?= $(firstword $(wildcard $(PYENV_ROOT)/versions/3.12*/bin/python3.12 $(HOME)/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12) $(shell command -v python3))
VENV := .venv
# ansible-test sanity also runs under the other maintained ansible-core releases, each in a venv
# of its own: 2.20 on the same Python, 2.19 on Python 3.11 (its oldest controller Python here).
# (Any python3 from 3.11 to 3.13 serves when no 3.11 is found.)
PYTHON311 ?= $(firstword $(wildcard $(PYENV_ROOT)/versions/3.11*/bin/python3.11 $(HOME)/.pyenv/versions/3.11*/bin/python3.11 /usr/bin/python3.11 /usr/local/bin/python3.11) $(shell command -v python3))
# Each extra release: its pinned version and the Python its venv is made with.
SANITY_CORES := 2.20 2.19
CORE_2.20 := 2.20.10
PYTHON_2.20 = $(PYTHON)
CORE_2.19 := 2.19.14
PYTHON_2.19 = $(PYTHON311)
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed
COLLECTION_LINK := .collections/ansible_collections/aorta/cluster
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: help venv link lint ruff typecheck ansible-lint sanity unit integration faults molecule test bench demo ee ee-demo standin-up standin-down standin-throttle standin-slow clean

help:
	@echo "make demo            whole pipeline on a local stand-in cluster (no GPU needed)"
	@echo "make test            lint, sanity, molecule, unit and integration tests, side by side (about 29 to 31 min on 2 cores)"
	@echo "make venv            the development venv in .venv/ (pinned tools of requirements-dev.txt)"
	@echo "make lint            ruff, typecheck (mypy), ansible-lint and sanity, each also a target of its own"
	@echo "make unit            the unit tests alone (about 2 minutes on 2 cores)"
	@echo "make integration     the integration tests (start a stand-in cluster; need Docker)"
	@echo "make molecule        the molecule scenario: the playbook on its own stand-in cluster"
	@echo "make faults          the fault matrix on the stand-in cluster (a table of fault, expected, got)"
	@echo "make bench           benchmarks (each prints a BENCH line)"
	@echo "make standin-up N=3  start a stand-in cluster of N nodes (default 2): build/standin/cluster.json"
	@echo "make standin-down    remove the stand-in cluster (the image cache stays)"
	@echo "make standin-throttle NODE=1 RATE=200mbit  slow one stand-in node's fabric egress (RATE= lifts it)"
	@echo "make standin-slow NODE=1 FACTOR=1.6  slow one stand-in node's compute for every run (FACTOR=1 undoes it)"
	@echo "make ee              the execution environment image (ansible-builder, local base)"
	@echo "make ee-demo         the demo's pipeline inside that image, as AWX runs it"
	@echo "make clean           remove build/ (the stand-in image cache too), tests/output, .collections, caches"

venv: $(STAMP) link

$(STAMP): requirements-dev.txt
	@test -n "$(PYTHON)" || { echo "no python3 found: install Python >= 3.12" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

# Ansible finds this checkout as aorta.cluster through ansible.cfg's collections_path.
link:
	@mkdir -p $(dir $(COLLECTION_LINK))
	@ln -sfn ../../.. $(COLLECTION_LINK)

ruff: venv
	$(BIN)/python tools/gen_argument_specs.py --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

ansible-lint: venv
	ANSIBLE_INVENTORY_UNPARSED_FAILED=false $(BIN)/ansible-lint --offline

sanity: venv $(SANITY_CORES:%=.venv-core-%/.installed)
	tools/sanity.sh
	@for core in $(SANITY_CORES); do echo "SANITY_VENV=.venv-core-$$core tools/sanity.sh"; SANITY_VENV=.venv-core-$$core tools/sanity.sh || exit 1; done

.venv-core-%/.installed:
	@test -n "$(PYTHON_$*)" || { echo "no Python found for the ansible-core $* sanity venv" >&2; exit 1; }
	$(PYTHON_$*) -m venv .venv-core-$*
	.venv-core-$*/bin/pip install -q ansible-core==$(CORE_$*)
	touch $@

lint: ruff typecheck ansible-lint sanity

# mypy over every plugin, imported the way Ansible imports them (ansible_collections.aorta.cluster).
typecheck: venv
	cd .collections && $(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p ansible_collections.aorta.cluster.plugins

# The unit tests on both cores (they share no state).
unit: venv
	$(BIN)/pytest -n 2 tests/unit

# The integration tests in WORKERS pytest-xdist workers, each with a stand-in cluster of its own
# (tests/standin/standin.py: instances); tests marked whole_machine run with no other beside them,
# and tests that share one run are grouped onto one worker (--dist loadgroup; docs/testing.md).
# The slowest are named (where CI time goes).
WORKERS ?= 2
integration: venv
	$(BIN)/pytest -n $(WORKERS) --dist loadgroup --durations=15 tests/integration

# The fault matrix alone (also part of `make test`): prints fault, expected, got, seconds, left on nodes.
faults: venv
	$(BIN)/pytest tests/integration/test_faults.py \
		tests/integration/test_supervision.py::test_the_head_stops_the_run_within_90_s_when_a_workers_node_dies \
		tests/integration/test_supervision.py::test_the_workers_stop_the_run_within_90_s_when_the_heads_node_dies

# molecule drives the collection's playbook against its own stand-in cluster (the plain
# instance's names: the integration tests' workers run instances of their own beside it).
molecule: venv
	$(BIN)/molecule test -s standin

# Two chains at once (tools/run_steps.py): the lint and sanity steps one after another at the
# lowest CPU priority, beside the unit tests, molecule and then the integration tests, whose
# stand-in runs leave the cores idle for much of their time (and must not be slowed where they
# measure; molecule's nodes are the host dockerd's children, which no nice reaches, so it runs in
# the other chain, before the integration tests' workers start).
# Each step's log is in build/test-logs/; at the end the integration tests' output, a table of each
# step's seconds and one closing line of counts.
test: venv
	$(BIN)/python tools/run_steps.py "nice: ruff typecheck ansible-lint sanity" "unit molecule integration"

N ?= 2
demo: venv
	tools/install-host-deps.sh
	N=$(N) tools/demo.sh

# The execution environment image, built here with ansible-builder on a debootstrapped Debian
# trixie base (no registry, no Galaxy); tagged by a hash of its inputs, so a second run is instant.
ee: venv
	BIN=$(BIN) tools/build_ee.sh

# The demo's pipeline inside that image, as an AWX execution node runs it.
ee-demo: venv
	tools/install-host-deps.sh
	N=$(N) BIN=$(BIN) tools/ee_demo.sh

standin-up: venv
	$(BIN)/python tests/standin/standin.py up --nodes $(N)

standin-down:
	python3 tests/standin/standin.py down

# A slow link to rehearse with: NODE's fabric egress limited to RATE (tc tbf); RATE= lifts it.
NODE ?= 1
RATE ?=
standin-throttle: venv
	$(BIN)/python tests/standin/standin.py throttle --node $(NODE) --rate "$(RATE)"

standin-slow: venv
	$(BIN)/python tests/standin/standin.py slow --node $(NODE) --factor "$(FACTOR)"

bench: venv
	@for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf build tests/output .collections .pytest_cache .ruff_cache
