# The user-facing entry points. `make book` and `make test` create .venv when it is missing and
# install pinned dependencies (torch==2.13.0 plus constraints.txt, so nothing pulls a CUDA torch).
#
#   make test                          run the test suite (one worker per core; TEST_JOBS=N)
#   make lint                          ruff check (CI runs it)
#   make book                          execute every chapter (PROFILE=quick) and build _build/html
#   make book PROFILE=paper DEVICE=cuda
#   make chapter CHAPTER=00_symmetries rerun one chapter, then rebuild the book
#   make publish CHAPTER=... [TIER=paper]  copy a finished full (or paper) run to published/<tier>/ (all: no CHAPTER)
#   make linkcheck                     check every internal link and anchor of the built book (offline)
#   make browser-test                  open every built page in headless Chromium
#   make clean                         remove executed notebooks, results, the cache and the build
#                                      (wherever SYMLIB_EXECUTED / SYMLIB_RESULTS / SYMLIB_CACHE point)

PYTHON  ?= python3
VENV    ?= .venv
PROFILE ?= quick
SEED    ?= 0
DEVICE  ?= auto
# test workers (pytest-xdist): one per core; TEST_JOBS=0 runs the suite in one process
TEST_JOBS ?= auto
CHAPTER ?=
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

.PHONY: install lint test book publish execute build chapter linkcheck browser-test clean chapters

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@v=$$($(if $(wildcard $(PY)),$(PY),$(PYTHON)) -c 'import platform; print(platform.python_version())') || exit 1; \
	  printf '%s\n%s\n' "$(MIN_PYTHON)" "$$v" | sort -V -C || { \
	  echo "error: symlib needs Python >= $(MIN_PYTHON), found $$v. Run with PYTHON=python3.12 (or any >= $(MIN_PYTHON)), or remove $(VENV) if it holds an old Python." >&2; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(TORCH)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[book,dev]'
	@touch $@

test: $(STAMP)
	$(PY) -m pytest -n $(TEST_JOBS)

lint: $(STAMP)
	$(PY) -m ruff check .

execute: $(STAMP)
	$(PY) -m symlib.book.pipeline execute --profile $(PROFILE) --seed $(SEED) --device $(DEVICE)

build: $(STAMP)
	$(PY) -m symlib.book.pipeline build

book: execute build

chapter: $(STAMP)
	@test -n "$(CHAPTER)" || { echo "usage: make chapter CHAPTER=NN_name (one of: $$($(PY) -m symlib.book.pipeline chapters | tr '\n' ' '))"; exit 2; }
	$(PY) -m symlib.book.pipeline execute --profile $(PROFILE) --seed $(SEED) --device $(DEVICE) $(CHAPTER)
	$(PY) -m symlib.book.pipeline build

chapters: $(STAMP)
	@$(PY) -m symlib.book.pipeline chapters

publish: $(STAMP)
	$(PY) -m symlib.book.published publish --tier $(or $(TIER),full) $(CHAPTER)

linkcheck: $(STAMP)
	$(PY) -m symlib.book.linkcheck _build/html

browser-test: $(STAMP)
	$(PY) -m pytest -m browser -p no:cacheprovider tests/test_browser.py

# SYMLIB_CACHE, SYMLIB_RESULTS and SYMLIB_EXECUTED are honoured (python -m symlib.book.pipeline
# clean). Without $(VENV) the library cannot run: the checkout's own folders are removed, and a
# redirected folder is reported as left alone (an error), not skipped in silence.
clean:
	@if [ -x $(PY) ]; then $(PY) -m symlib.book.pipeline clean; else \
	  echo "no $(PY): removing the checkout's _build, executed, results, .cache/symlib only"; \
	  rm -rf _build executed results book/_static/mathjax .cache/symlib; \
	  if [ -n "$$SYMLIB_CACHE$$SYMLIB_RESULTS$$SYMLIB_EXECUTED" ]; then \
	    echo "error: SYMLIB_CACHE / SYMLIB_RESULTS / SYMLIB_EXECUTED are set, and cleaning them needs the library: run make install (or VENV=path/to/venv make clean)" >&2; exit 1; fi; fi
