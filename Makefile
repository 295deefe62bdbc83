# Two entry points for a fresh machine (see README):
#   make demo  -> sets up .venv and runs the main job on the embedded default
#   make test  -> sets up .venv and runs the test suite (what .ci/run calls)
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: setup test demo lint

setup: $(VENV)/.ormix-installed

# torch==2.13.0 first: the CPU wheel is on local disk; letting TRL pull plain `torch` fetches a multi-GB CUDA build.
$(VENV)/.ormix-installed: pyproject.toml
	@command -v bwrap >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq bubblewrap; }
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[trl,plot,dev]'
	@touch $@

# pytest-xdist: `-n auto` is one worker more than the cores (tests/conftest.py: many tests wait on a
# subprocess while a core idles); --dist loadfile keeps each test file on one worker, so a file's
# module-scoped servers and trained runs are built once.
test: setup
	$(PY) -m pytest -q -n auto --dist loadfile

# DEMO_ARGS lets CI shorten the run (e.g. DEMO_ARGS="--max-steps 2"); the README's command leaves it empty.
demo: setup
	$(VENV)/bin/ormix train mixtures/local-skills.yaml $(DEMO_ARGS)

# Formatted, ruff clean, type-checked ([tool.mypy] in pyproject.toml names what is checked).
lint: setup
	$(VENV)/bin/ruff format --check src tests benchmarks examples
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/mypy

# The documentation site (mkdocs.yml, docs/) into site/, strictly: a broken link or anchor, or a name exported
# without a docstring, fails the build. The docs extra is installed once per pyproject.toml, as setup does.
.PHONY: docs
docs: $(VENV)/.ormix-docs-installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

$(VENV)/.ormix-docs-installed: $(VENV)/.ormix-installed pyproject.toml
	$(PIP) install -q -e '.[docs]'
	@touch $@
