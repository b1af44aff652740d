# The user-facing entry points: `make` alone lists them (make help). `make book` and `make test`
# create .venv when it is missing and install pinned dependencies (torch==2.13.0 plus
# constraints.txt, so nothing pulls a CUDA torch on a CPU machine). Every variable below is
# described, with its default and effect, on the book's Configuration page (book/configuration.md).

PYTHON  ?= python3
VENV    ?= .venv
PROFILE ?= quick
SEED    ?= 0
DEVICE  ?= auto
# test workers (pytest-xdist): one per core; TEST_JOBS=0 runs the suite in one process
TEST_JOBS ?= auto
CHAPTER ?=
# the published tier `make publish` and `make compare` work on: full or paper
TIER    ?= full
# relative tolerance of `make compare` (0: numbers must be equal)
RTOL    ?= 0
# PyPI's Linux torch wheel is the CUDA build (GBs): on a Linux machine without an NVIDIA GPU take
# the CPU wheel from PyTorch's CPU index instead (torch alone: its dependencies come with the
# rest, from the usual index, under the constraints). TORCH= overrides the choice.
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
HAS_NVIDIA := $(shell test -e /proc/driver/nvidia/version -o -x "$$(command -v nvidia-smi)" && echo yes)
ifeq ($(shell uname -s)-$(HAS_NVIDIA),Linux-)
TORCH   ?= torch==2.13.0 --index-url $(TORCH_CPU_INDEX) --no-deps --retries 1
else
TORCH   ?= torch==2.13.0
endif
# The pinned numpy/pandas/scipy/ipython have no builds for Python < 3.11 and soupsieve needs 3.11.5.
MIN_PYTHON := 3.11.5

PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# the chapters present, read from notebooks/ (no Python needed)
CHAPTER_NAMES := $(sort $(patsubst notebooks/%.md,%,$(wildcard notebooks/[0-9][0-9]*_*.md)))

.DEFAULT_GOAL := help
.PHONY: help install lint test test-tools book publish compare execute build chapter linkcheck browser-test page-scan clean chapters

help: ## list the targets and variables (this text)
	@echo "usage: make TARGET [VARIABLE=value ...]"
	@echo
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z-]*:.*## / { printf "  make %-13s %s\n", $$1, $$2 }' $(firstword $(MAKEFILE_LIST))
	@echo
	@echo "variables (now): PROFILE=$(PROFILE) SEED=$(SEED) DEVICE=$(DEVICE) CHAPTER=$(CHAPTER) TIER=$(TIER) RTOL=$(RTOL)"
	@echo "                 TEST_JOBS=$(TEST_JOBS) VENV=$(VENV) PYTHON=$(PYTHON)"
	@echo "chapters: $(CHAPTER_NAMES)"
	@echo "every variable, its default and effect: book/configuration.md"

# Targets that need CHAPTER say so before anything is installed, as do those given a CHAPTER
# that names no chapter. (`make publish` without CHAPTER publishes every finished run of TIER.)
NEEDS_CHAPTER := chapter compare
USES_CHAPTER := $(NEEDS_CHAPTER) publish
usage.chapter := make chapter CHAPTER=NN_name [PROFILE=quick] [SEED=0] [DEVICE=auto]
usage.compare := make compare CHAPTER=NN_name [TIER=full] [RTOL=0]
ifneq ($(filter $(NEEDS_CHAPTER),$(MAKECMDGOALS)),)
ifeq ($(strip $(CHAPTER)),)
$(info usage: $(usage.$(firstword $(filter $(NEEDS_CHAPTER),$(MAKECMDGOALS)))))
$(info chapters: $(CHAPTER_NAMES))
$(error CHAPTER is not set)
endif
endif
ifneq ($(filter $(USES_CHAPTER),$(MAKECMDGOALS)),)
ifneq ($(filter-out $(CHAPTER_NAMES) reproducibility using-symlib,$(CHAPTER)),)
$(info chapters: $(CHAPTER_NAMES))
$(error unknown chapter: $(filter-out $(CHAPTER_NAMES) reproducibility using-symlib,$(CHAPTER)))
endif
endif

install: $(STAMP) ## create .venv and install the pinned dependencies (the other targets do it when needed)

$(STAMP): pyproject.toml constraints.txt
	@v=$$($(if $(wildcard $(PY)),$(PY),$(PYTHON)) -c 'import platform; print(platform.python_version())') || exit 1; \
	  printf '%s\n%s\n' "$(MIN_PYTHON)" "$$v" | sort -V -C || { \
	  echo "error: symlib needs Python >= $(MIN_PYTHON), found $$v. Run with PYTHON=python3.12 (or any >= $(MIN_PYTHON)), or remove $(VENV) if it holds an old Python." >&2; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(TORCH)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[book,dev]'
	@touch $@

test: $(STAMP) ## run the test suite (one worker per core; TEST_JOBS=N)
	$(PY) -m pytest -n $(TEST_JOBS)

# one file per worker: the GPU-piece tests share the pieces their module fixtures run
test-tools: $(STAMP) ## run the tests of the maintainer tooling under tools/ (long runs, carry, GPU pieces)
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadfile -m tools tests/longruns

lint: $(STAMP) ## ruff, the import layers (lint-imports: pyproject's [tool.importlinter]) and actionlint on the workflows, as CI runs them
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/actionlint -no-color .github/workflows/*.yml

execute: $(STAMP) ## execute every chapter (PROFILE, SEED, DEVICE) without building the book
	$(PY) -m symlib.book.pipeline execute --profile $(PROFILE) --seed $(SEED) --device $(DEVICE)

build: $(STAMP) ## build _build/html from the executed chapters
	$(PY) -m symlib.book.pipeline build

book: execute build ## execute every chapter (PROFILE=quick by default) and build the book into _build/html

chapter: $(STAMP) ## rerun one chapter (CHAPTER=NN_name; PROFILE, SEED, DEVICE apply), then rebuild the book
	$(PY) -m symlib.book.pipeline execute --profile $(PROFILE) --seed $(SEED) --device $(DEVICE) $(CHAPTER)
	$(PY) -m symlib.book.pipeline build

chapters: ## list the chapters
	@printf '%s\n' $(CHAPTER_NAMES)

publish: $(STAMP) ## copy a finished full run to published/full/ (TIER=paper: a paper run; no CHAPTER: all)
	$(PY) -m symlib.book.records publish --tier $(TIER) $(CHAPTER)

compare: $(STAMP) ## compare a rerun (results/CHAPTER.json) with its published TIER record and print what moved
	$(PY) -m symlib.book.rerun --tier $(TIER) --rtol $(RTOL) $(CHAPTER)

linkcheck: $(STAMP) ## check every internal link and anchor of the built book (offline)
	$(PY) -m symlib.book.linkcheck _build/html

browser-test: $(STAMP) ## check every built page in headless Chromium and scan its text (needs chromium, chromium-driver)
	$(PY) -m pytest -m browser -p no:cacheprovider tests/test_browser.py tests/test_pages.py

page-scan: $(STAMP) ## scan every built page's text for process wording and gaps in claim numbers
	$(PY) -m pytest -m browser -p no:cacheprovider tests/test_pages.py

# SYMLIB_CACHE, SYMLIB_RESULTS and SYMLIB_EXECUTED are honoured (python -m symlib.book.pipeline
# clean). Without $(VENV) the library cannot run: the checkout's own folders are removed, and a
# redirected folder is reported as left alone (an error), not skipped in silence.
clean: ## remove executed notebooks, results, the cache and the build (wherever SYMLIB_* point them)
	@if [ -x $(PY) ]; then $(PY) -m symlib.book.pipeline clean; else \
	  echo "no $(PY): removing the checkout's _build, executed, results, .cache/symlib only"; \
	  rm -rf _build executed results book/_static/mathjax .cache/symlib; \
	  if [ -n "$$SYMLIB_CACHE$$SYMLIB_RESULTS$$SYMLIB_EXECUTED" ]; then \
	    echo "error: SYMLIB_CACHE / SYMLIB_RESULTS / SYMLIB_EXECUTED are set, and cleaning them needs the library: run make install (or VENV=path/to/venv make clean)" >&2; exit 1; fi; fi
