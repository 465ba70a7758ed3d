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

.PHONY: demo demo-play test bench lint venv clean-venv system-deps

$(STAMP): pyproject.toml
	@mkdir -p "$(GEM_CACHE)"
	@test -x "$(PY)" || $(PYTHON) -m venv "$(VENV)"
	"$(PY)" -m pip install --quiet --upgrade pip
	"$(PY)" -m pip install --quiet -e ".[dev]"
	@rm -f "$(VENV)"/.installed-*
	@touch "$(STAMP)"

venv: $(STAMP)

# bubblewrap isolates the Python sandbox (gem_core.sandbox). Installed with apt where apt
# exists (as root or through sudo); elsewhere install it with your package manager. Without
# it the sandbox falls back to weaker isolation with a warning, and the tests that need it
# are skipped with the reason printed.
system-deps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1; then \
	    SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo -n"; \
	    $$SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
	    { $$SUDO apt-get update -q >/dev/null 2>&1 && $$SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1; } || \
	    echo "note: could not install bubblewrap; sandbox tests needing it will be skipped"; \
	  else echo "note: no apt-get; install bubblewrap for full sandbox isolation"; fi; }

demo: $(STAMP)
	"$(PY)" recipes/demo_play.py

demo-play: $(STAMP)
	"$(PY)" recipes/demo_play.py

test: system-deps $(STAMP)
	"$(PY)" -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	"$(PY)" benchmarks/run.py

lint: $(STAMP)
	"$(VENV)/bin/ruff" check gem_core tests benchmarks recipes

clean-venv:
	rm -rf "$(VENV)"
