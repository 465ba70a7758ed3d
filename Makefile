# The README's commands. Each target installs what it needs into a virtual environment
# cached outside the clone (GEM_CACHE, default ~/.cache/gem), idempotently: a second
# run with an unchanged pyproject.toml installs nothing.
SHELL := /bin/bash
PYTHON ?= python3
GEM_CACHE ?= $(HOME)/.cache/gem
VENV ?= $(GEM_CACHE)/venv-core
PY := $(VENV)/bin/python
# The stamp changes when the dependencies or the clone's location change.
STAMP_KEY := $(shell cat pyproject.toml | sha1sum | cut -c1-12)-$(shell echo "$(CURDIR)" | sha1sum | cut -c1-8)
STAMP := $(VENV)/.installed-$(STAMP_KEY)
PYTEST_ARGS ?=

.PHONY: demo demo-play test bench lint venv clean-venv

$(STAMP): pyproject.toml
	@mkdir -p "$(GEM_CACHE)"
	@test -x "$(PY)" || $(PYTHON) -m venv "$(VENV)"
	"$(PY)" -m pip install --quiet --upgrade pip
	"$(PY)" -m pip install --quiet -e ".[dev]"
	@rm -f "$(VENV)"/.installed-*
	@touch "$(STAMP)"

venv: $(STAMP)

demo: $(STAMP)
	"$(PY)" recipes/demo_play.py

demo-play: $(STAMP)
	"$(PY)" recipes/demo_play.py

test: $(STAMP)
	"$(PY)" -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	"$(PY)" benchmarks/run.py

lint: $(STAMP)
	"$(VENV)/bin/ruff" check gem_core tests benchmarks recipes

clean-venv:
	rm -rf "$(VENV)"
