# The README's commands. Each target installs what it needs into a virtual environment
# cached outside the clone (GEM_CACHE, default ~/.cache/gem), idempotently: a second
# run with an unchanged pyproject.toml installs nothing.
SHELL := /bin/bash
PYTHON ?= python3
GEM_CACHE ?= $(HOME)/.cache/gem
VENV ?= $(GEM_CACHE)/venv-core
PY := $(VENV)/bin/python
# The stamp changes when the dependencies or the clone's location change.
# tests/compat/requirements-gem-llm.txt: the reference package (gem-llm) for the bridge tests,
# installed --no-deps (its pins would downgrade reasoning-gym; `import gem` needs nothing more).
CORE_DEPS := pyproject.toml tests/compat/requirements-gem-llm.txt tests/compat/requirements-reference-suite.txt integrations/constraints.txt
STAMP_KEY := $(shell cat $(CORE_DEPS) | sha1sum | cut -c1-12)-$(shell echo "$(CURDIR)" | sha1sum | cut -c1-8)
STAMP := $(VENV)/.installed-$(STAMP_KEY)
PYTEST_ARGS ?=
# A snapshot of the reference GEM (axon-rl/gem at the commit tests/compat/test_reference_suite.py
# names) whose own tests run through gem_core.compat; they skip, saying so, without one.
GEM_REFERENCE_SRC ?= $(wildcard $(GEM_CACHE)/gem-ref-src)
DEMO_ARGS ?=

.PHONY: demo demo-play test test-core test-verl venv-verl bench lint venv clean-venv system-deps test-trl venv-trl test-rl2 venv-rl2 test-openrlhf venv-openrlhf test-oat venv-oat test-roll venv-roll venv-roll-light

# The verl adapter's own venv (integrations/verl): verl 0.9 needs transformers 5, which
# gem-core[rl] pins below 5, so it cannot share the core venv. Keyed by a hash of its
# requirements, its pyproject, the core's pyproject and the clone's location.
VERL_DIR := integrations/verl
VERL_VENV ?= $(GEM_CACHE)/venv-verl
VERL_PY := $(VERL_VENV)/bin/python
VERL_STAMP_KEY := $(shell cat $(VERL_DIR)/requirements-test.txt $(VERL_DIR)/pyproject.toml pyproject.toml | sha1sum | cut -c1-12)-$(shell echo "$(CURDIR)" | sha1sum | cut -c1-8)
VERL_STAMP := $(VERL_VENV)/.installed-$(VERL_STAMP_KEY)

# The TRL adapter's own venv (integrations/trl): TRL 1.16 needs transformers 5, which
# gem-core[rl] pins below 5, so it cannot share the core venv. Installed with the shared
# constraints (integrations/constraints.txt: the CPU torch). Keyed by a hash of its
# requirements, its pyproject, the core's pyproject, the constraints and the clone's location.
TRL_DIR := integrations/trl
TRL_VENV ?= $(GEM_CACHE)/venv-trl
TRL_PY := $(TRL_VENV)/bin/python
TRL_DEPS := $(TRL_DIR)/requirements-test.txt $(TRL_DIR)/pyproject.toml pyproject.toml integrations/constraints.txt
TRL_STAMP_KEY := $(shell cat $(TRL_DEPS) | sha1sum | cut -c1-12)-$(shell echo "$(CURDIR)" | sha1sum | cut -c1-8)
TRL_STAMP := $(TRL_VENV)/.installed-$(TRL_STAMP_KEY)

# The RL2 adapter's own venv (integrations/rl2): rl-square 0.0.2 pins torch 2.8, SGLang and
# flash-attn, so it is installed --no-deps (requirements-nodeps.txt) over its CPU-installable
# requirements (requirements-test.txt, with the shared CPU-torch constraints). Keyed by a hash
# of both requirement files, its pyproject, the core's pyproject, the constraints and the
# clone's location. RL2 HEAD (source only) is tested when GEM_RL2_SRC names a checkout.
RL2_DIR := integrations/rl2
RL2_VENV ?= $(GEM_CACHE)/venv-rl2
RL2_PY := $(RL2_VENV)/bin/python
RL2_DEPS := $(RL2_DIR)/requirements-test.txt $(RL2_DIR)/requirements-nodeps.txt $(RL2_DIR)/pyproject.toml pyproject.toml integrations/constraints.txt
RL2_STAMP_KEY := $(shell cat $(RL2_DEPS) | sha1sum | cut -c1-12)-$(shell echo "$(CURDIR)" | sha1sum | cut -c1-8)
RL2_STAMP := $(RL2_VENV)/.installed-$(RL2_STAMP_KEY)

# The OpenRLHF adapter's own venv (integrations/openrlhf): OpenRLHF 0.11.2 pins
# transformers 5.15 (gem-core[rl] pins below 5) and flash-attn (no CPU build), so the
# wheel's requirements minus flash-attn (requirements-test.txt, with the shared CPU-torch
# constraints; deepspeed builds from its sdist) go first, then openrlhf itself --no-deps
# (requirements-nodeps.txt). Keyed by a hash of both requirement files, its pyproject, the
# core's pyproject, the constraints and the clone's location.
OPENRLHF_DIR := integrations/openrlhf
OPENRLHF_VENV ?= $(GEM_CACHE)/venv-openrlhf
OPENRLHF_PY := $(OPENRLHF_VENV)/bin/python
OPENRLHF_DEPS := $(OPENRLHF_DIR)/requirements-test.txt $(OPENRLHF_DIR)/requirements-nodeps.txt $(OPENRLHF_DIR)/pyproject.toml pyproject.toml integrations/constraints.txt
OPENRLHF_STAMP_KEY := $(shell cat $(OPENRLHF_DEPS) | sha1sum | cut -c1-12)-$(shell echo "$(CURDIR)" | sha1sum | cut -c1-8)
OPENRLHF_STAMP := $(OPENRLHF_VENV)/.installed-$(OPENRLHF_STAMP_KEY)

# The oat adapter's own venv (integrations/oat): oat-llm 0.2.4 declares Requires-Python <3.11
# and pins CUDA-only packages, so its CPU-installable requirements (requirements-test.txt,
# with the shared constraints: the CPU torch; transformers 4.51.3 fits gem-core[rl]) go first,
# then oat itself --no-deps --ignore-requires-python (requirements-oat.txt). Keyed by a hash of
# both requirement files, its pyproject, the core's pyproject, the constraints and the clone's location.
OAT_DIR := integrations/oat
OAT_VENV ?= $(GEM_CACHE)/venv-oat
OAT_PY := $(OAT_VENV)/bin/python
OAT_DEPS := $(OAT_DIR)/requirements-test.txt $(OAT_DIR)/requirements-oat.txt $(OAT_DIR)/pyproject.toml pyproject.toml integrations/constraints.txt
OAT_STAMP_KEY := $(shell cat $(OAT_DEPS) | sha1sum | cut -c1-12)-$(shell echo "$(CURDIR)" | sha1sum | cut -c1-8)
OAT_STAMP := $(OAT_VENV)/.installed-$(OAT_STAMP_KEY)

# The ROLL adapter (integrations/roll). ROLL is not on PyPI: its tests need a source tree in
# GEM_ROLL_SRC (alibaba/ROLL, tested at 8eb27cc). Two venvs, so CI (no ROLL tree) stays cheap:
# - GEM_ROLL_SRC unset: a light venv ($(GEM_CACHE)/venv-roll-light: gem-core, gem-roll, pytest;
#   seconds) runs the tests that need no ROLL and shows the ROLL-bound ones skipped with the reason;
# - GEM_ROLL_SRC set: the full venv ($(GEM_CACHE)/venv-roll: ROLL's requirements_common.txt
#   minus ./mcore_adapter, ray without cgraph, + pyarrow<21; ~5 min, 2.4 GB) with the tree on
#   PYTHONPATH. Each is keyed by a hash of its requirement files, the adapter's pyproject, the
#   core's pyproject, the constraints and the clone's location.
GEM_ROLL_SRC ?=
ROLL_DIR := integrations/roll
ROLL_VENV ?= $(GEM_CACHE)/venv-roll
ROLL_PY := $(ROLL_VENV)/bin/python
ROLL_DEPS := $(ROLL_DIR)/requirements-test.txt $(ROLL_DIR)/requirements-roll.txt $(ROLL_DIR)/pyproject.toml pyproject.toml integrations/constraints.txt
ROLL_STAMP_KEY := $(shell cat $(ROLL_DEPS) | sha1sum | cut -c1-12)-$(shell echo "$(CURDIR)" | sha1sum | cut -c1-8)
ROLL_STAMP := $(ROLL_VENV)/.installed-$(ROLL_STAMP_KEY)
ROLL_LIGHT_VENV ?= $(GEM_CACHE)/venv-roll-light
ROLL_LIGHT_PY := $(ROLL_LIGHT_VENV)/bin/python
ROLL_LIGHT_DEPS := $(ROLL_DIR)/requirements-test.txt $(ROLL_DIR)/pyproject.toml pyproject.toml integrations/constraints.txt
ROLL_LIGHT_STAMP_KEY := $(shell cat $(ROLL_LIGHT_DEPS) | sha1sum | cut -c1-12)-$(shell echo "$(CURDIR)" | sha1sum | cut -c1-8)
ROLL_LIGHT_STAMP := $(ROLL_LIGHT_VENV)/.installed-$(ROLL_LIGHT_STAMP_KEY)

$(STAMP): $(CORE_DEPS)
	@mkdir -p "$(GEM_CACHE)"
	@test -x "$(PY)" || $(PYTHON) -m venv "$(VENV)"
	"$(PY)" -m pip install --quiet --upgrade pip
	"$(PY)" -m pip install --quiet -c integrations/constraints.txt -e ".[dev]"
	"$(PY)" -m pip install --quiet --no-deps -r tests/compat/requirements-gem-llm.txt
	"$(PY)" -m pip install --quiet -c integrations/constraints.txt -r tests/compat/requirements-reference-suite.txt
	@rm -f "$(VENV)"/.installed-*
	@touch "$(STAMP)"

venv: $(STAMP)

$(VERL_STAMP): $(VERL_DIR)/requirements-test.txt $(VERL_DIR)/pyproject.toml pyproject.toml
	@mkdir -p "$(GEM_CACHE)"
	@test -x "$(VERL_PY)" || $(PYTHON) -m venv "$(VERL_VENV)"
	"$(VERL_PY)" -m pip install --quiet --upgrade pip
	"$(VERL_PY)" -m pip install --quiet -r $(VERL_DIR)/requirements-test.txt -e . -e $(VERL_DIR)
	@rm -f "$(VERL_VENV)"/.installed-*
	@touch "$(VERL_STAMP)"

venv-verl: $(VERL_STAMP)

$(TRL_STAMP): $(TRL_DEPS)
	@mkdir -p "$(GEM_CACHE)"
	@test -x "$(TRL_PY)" || $(PYTHON) -m venv "$(TRL_VENV)"
	"$(TRL_PY)" -m pip install --quiet --upgrade pip
	cd $(TRL_DIR) && "$(TRL_PY)" -m pip install --quiet -c ../constraints.txt -r requirements-test.txt -e ../.. -e .
	@rm -f "$(TRL_VENV)"/.installed-*
	@touch "$(TRL_STAMP)"

venv-trl: $(TRL_STAMP)

$(RL2_STAMP): $(RL2_DEPS)
	@mkdir -p "$(GEM_CACHE)"
	@test -x "$(RL2_PY)" || $(PYTHON) -m venv "$(RL2_VENV)"
	"$(RL2_PY)" -m pip install --quiet --upgrade pip
	cd $(RL2_DIR) && "$(RL2_PY)" -m pip install --quiet -c ../constraints.txt -r requirements-test.txt -e ../.. -e .
	cd $(RL2_DIR) && "$(RL2_PY)" -m pip install --quiet --no-deps -r requirements-nodeps.txt
	@rm -f "$(RL2_VENV)"/.installed-*
	@touch "$(RL2_STAMP)"

venv-rl2: $(RL2_STAMP)

$(OPENRLHF_STAMP): $(OPENRLHF_DEPS)
	@mkdir -p "$(GEM_CACHE)"
	@test -x "$(OPENRLHF_PY)" || $(PYTHON) -m venv "$(OPENRLHF_VENV)"
	"$(OPENRLHF_PY)" -m pip install --quiet --upgrade pip
	cd $(OPENRLHF_DIR) && "$(OPENRLHF_PY)" -m pip install --quiet -c ../constraints.txt -r requirements-test.txt -e ../..
	cd $(OPENRLHF_DIR) && "$(OPENRLHF_PY)" -m pip install --quiet --no-deps -r requirements-nodeps.txt -e .
	@rm -f "$(OPENRLHF_VENV)"/.installed-*
	@touch "$(OPENRLHF_STAMP)"

venv-openrlhf: $(OPENRLHF_STAMP)

$(OAT_STAMP): $(OAT_DEPS)
	@mkdir -p "$(GEM_CACHE)"
	@test -x "$(OAT_PY)" || $(PYTHON) -m venv "$(OAT_VENV)"
	"$(OAT_PY)" -m pip install --quiet --upgrade pip
	cd $(OAT_DIR) && "$(OAT_PY)" -m pip install --quiet -c ../constraints.txt -r requirements-test.txt -e "../..[rl]"
	cd $(OAT_DIR) && "$(OAT_PY)" -m pip install --quiet --no-deps --ignore-requires-python -r requirements-oat.txt -e .
	@rm -f "$(OAT_VENV)"/.installed-*
	@touch "$(OAT_STAMP)"

venv-oat: $(OAT_STAMP)

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

# The main job: a tiny LM learns GuessTheNumber with REINFORCE + ReBN on the CPU (~7 min).
demo: $(STAMP)
	"$(PY)" recipes/cpu_reinforce_rebn.py $(DEMO_ARGS)

demo-play: $(STAMP)
	"$(PY)" recipes/demo_play.py

$(ROLL_STAMP): $(ROLL_DEPS)
	@mkdir -p "$(GEM_CACHE)"
	@test -x "$(ROLL_PY)" || $(PYTHON) -m venv "$(ROLL_VENV)"
	"$(ROLL_PY)" -m pip install --quiet --upgrade pip
	cd $(ROLL_DIR) && "$(ROLL_PY)" -m pip install --quiet -c ../constraints.txt -r requirements-test.txt -r requirements-roll.txt -e ../.. -e .
	"$(ROLL_PY)" -m pip install --quiet "pyarrow<21"
	@rm -f "$(ROLL_VENV)"/.installed-*
	@touch "$(ROLL_STAMP)"

venv-roll: $(ROLL_STAMP)

$(ROLL_LIGHT_STAMP): $(ROLL_LIGHT_DEPS)
	@mkdir -p "$(GEM_CACHE)"
	@test -x "$(ROLL_LIGHT_PY)" || $(PYTHON) -m venv "$(ROLL_LIGHT_VENV)"
	"$(ROLL_LIGHT_PY)" -m pip install --quiet --upgrade pip
	cd $(ROLL_DIR) && "$(ROLL_LIGHT_PY)" -m pip install --quiet -c ../constraints.txt -r requirements-test.txt -e ../.. -e .
	@rm -f "$(ROLL_LIGHT_VENV)"/.installed-*
	@touch "$(ROLL_LIGHT_STAMP)"

venv-roll-light: $(ROLL_LIGHT_STAMP)

# The core tests in the core venv, then each adapter's tests in its own venv. Every target
# runs even when an earlier one fails; the run ends with one table (passed, failed, skipped,
# seconds per target; the JUnit files and summary in TEST_RESULTS) and fails if any target
# failed. `make test TEST_TARGETS="core trl"` runs some of them.
TEST_TARGETS ?= core verl trl rl2 openrlhf oat roll
TEST_RESULTS ?= $(CURDIR)/.test-results
junit = $(if $(TEST_RESULTS),--junitxml="$(TEST_RESULTS)/$(1).xml")

test:
	@MAKE="$(MAKE)" $(PYTHON) .ci/test_targets.py --results "$(TEST_RESULTS)" $(TEST_TARGETS)

test-core: system-deps $(STAMP)
	GEM_REFERENCE_SRC="$(GEM_REFERENCE_SRC)" "$(PY)" -m pytest -q $(PYTEST_ARGS) $(call junit,core)

test-verl: $(VERL_STAMP)
	cd $(VERL_DIR) && "$(VERL_PY)" -m pytest -q $(PYTEST_ARGS) $(call junit,verl)

test-trl: $(TRL_STAMP)
	cd $(TRL_DIR) && "$(TRL_PY)" -m pytest -q $(PYTEST_ARGS) $(call junit,trl)

test-rl2: $(RL2_STAMP)
	cd $(RL2_DIR) && "$(RL2_PY)" -m pytest -q $(PYTEST_ARGS) $(call junit,rl2)

test-openrlhf: $(OPENRLHF_STAMP)
	cd $(OPENRLHF_DIR) && "$(OPENRLHF_PY)" -m pytest -q $(PYTEST_ARGS) $(call junit,openrlhf)

test-oat: $(OAT_STAMP)
	cd $(OAT_DIR) && "$(OAT_PY)" -m pytest -q $(PYTEST_ARGS) $(call junit,oat)

ifeq ($(strip $(GEM_ROLL_SRC)),)
test-roll: $(ROLL_LIGHT_STAMP)
	cd $(ROLL_DIR) && "$(ROLL_LIGHT_PY)" -m pytest -q $(PYTEST_ARGS) $(call junit,roll)
else
test-roll: $(ROLL_STAMP)
	cd $(ROLL_DIR) && GEM_ROLL_SRC="$(GEM_ROLL_SRC)" PYTHONPATH="$(GEM_ROLL_SRC)" "$(ROLL_PY)" -m pytest -q $(PYTEST_ARGS) $(call junit,roll)
endif

bench: $(STAMP)
	"$(PY)" benchmarks/run.py

lint: $(STAMP)
	"$(VENV)/bin/ruff" check gem_core tests benchmarks recipes

clean-venv:
	rm -rf "$(VENV)" "$(VERL_VENV)" "$(TRL_VENV)" "$(RL2_VENV)" "$(OPENRLHF_VENV)" "$(OAT_VENV)" "$(ROLL_VENV)" "$(ROLL_LIGHT_VENV)"
