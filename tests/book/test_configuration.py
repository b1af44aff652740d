"""The Configuration page lists every setting the code reads, and the Makefile's entry points work
before anything is installed: `make` alone lists the targets, and a target that needs CHAPTER
says so first."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "book" / "configuration.md"
VARIABLE = re.compile(r"SYMLIB_[A-Z0-9_]*[A-Z0-9]")
# where the settings are read: the library, the entry points, CI, the benchmarks and the book's
# own Sphinx extensions (the tests' private variables are not settings)
SOURCES = ("symlib", "benchmarks", ".ci", "book/_ext", ".github")
CODE_FILES = ("*.py", "*.sh", "*.yml", "*.yaml")

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


# a C preprocessor macro of a routine compiled at run time (``#define``, ``#ifdef``, ``defined(...)``,
# ``-D...``) is no setting of the environment
MACRO = re.compile(r"(?:#\s*(?:define|ifdef|ifndef|undef)\s+|defined\(\s*|-D)(" + VARIABLE.pattern + ")")


def code_variables(root: Path = REPO) -> set[str]:
    """Every ``SYMLIB_*`` name in the code, the Makefile and CI, but C macros (:data:`MACRO`)."""
    files = [root / "Makefile", root / ".ci" / "run"]
    for folder in SOURCES:
        for pattern in CODE_FILES:
            files += (root / folder).rglob(pattern)
    texts = [f.read_text(errors="replace") for f in files if f.is_file()]
    macros = {m for t in texts for m in MACRO.findall(t)}
    return {v for t in texts for v in VARIABLE.findall(t)} - macros


def make_variables(makefile: str) -> set[str]:
    """The Makefile's user settings: its ``NAME ?= value`` lines."""
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)\s*\?=", makefile, re.MULTILINE))


def table_rows(page: str, heading: str | None = None) -> set[str]:
    """The names in the first column of the page's tables (``| `NAME` | ...``), all of them or
    those under the ``## heading`` alone."""
    if heading is not None:
        m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", page, re.MULTILINE | re.DOTALL)
        assert m, f"no section `## {heading}` on {PAGE.name}"
        page = m[1]
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", page, re.MULTILINE))


def undocumented(used: set[str], page: str) -> set[str]:
    """The variables the code reads that no table row of the page documents."""
    return used - table_rows(page)


def unknown(used: set[str], page: str) -> set[str]:
    """The ``SYMLIB_*`` variables the page names that the code no longer reads."""
    return set(VARIABLE.findall(page)) - used


def test_every_symlib_variable_is_documented_on_the_configuration_page():
    used = code_variables()
    assert len(used) >= 10, used  # the scan found the code
    missing = undocumented(used, PAGE.read_text())
    assert not missing, f"add a row for each to {PAGE.relative_to(REPO)} (default, effect): {sorted(missing)}"


def test_the_configuration_page_names_no_variable_the_code_no_longer_reads():
    gone = unknown(code_variables(), PAGE.read_text())
    assert not gone, f"{PAGE.relative_to(REPO)} documents variables no code reads: {sorted(gone)}"


def test_every_make_variable_is_documented_and_no_other():
    declared = make_variables((REPO / "Makefile").read_text())
    assert {"PROFILE", "SEED", "DEVICE", "CHAPTER", "TIER", "TEST_JOBS", "PYTHON", "VENV", "TORCH"} <= declared
    documented = table_rows(PAGE.read_text(), "Make variables")
    assert declared == documented, (f"undocumented: {sorted(declared - documented)}; "
                                    f"documented but not in the Makefile: {sorted(documented - declared)}")


def test_the_checks_catch_a_new_variable_and_a_removed_one():
    page = "## Where things are kept\n\n| variable | default | effect |\n| --- | --- | --- |\n| `SYMLIB_CACHE` | x | y |\n"
    assert undocumented({"SYMLIB_CACHE", "SYMLIB_NEW_SETTING"}, page) == {"SYMLIB_NEW_SETTING"}
    assert unknown({"SYMLIB_RESULTS"}, page) == {"SYMLIB_CACHE"}
    assert make_variables("A ?= 1\nB := 2\nC?=\n# D ?= 3\n") == {"A", "C"}


# --------------------------------------------------------------------------- the Makefile


def _checkout(tmp_path) -> Path:
    """The Makefile and the notebooks' names in a throwaway folder, with no environment."""
    root = tmp_path / "book"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(REPO / "Makefile", root)
    for notebook in (REPO / "notebooks").glob("[0-9][0-9]*_*.md"):
        (root / "notebooks" / notebook.name).write_text("# x\n")
    return root


def _make(root: Path, *args: str) -> subprocess.CompletedProcess:
    # a Python that fails whatever it is asked: nothing can be installed, and trying would show
    env = {k: v for k, v in os.environ.items() if k not in ("CHAPTER", "TIER", "PROFILE", "MAKEFLAGS")}
    return subprocess.run(["make", "--no-print-directory", *args, "PYTHON=false", f"VENV={root / 'no-venv'}"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=60, check=False)


def _targets(makefile: str) -> set[str]:
    phony = re.search(r"^\.PHONY:(.*)$", makefile, re.MULTILINE)
    assert phony
    return set(phony[1].split())


@needs_make
def test_make_alone_lists_every_target_with_a_description(tmp_path):
    root = _checkout(tmp_path)
    done = _make(root)
    assert done.returncode == 0, done.stderr
    listed = dict(re.findall(r"^  make (\S+)\s+(\S.*)$", done.stdout, re.MULTILINE))
    assert set(listed) == _targets((REPO / "Makefile").read_text())
    assert all(len(line) > 10 for line in listed.values()), listed
    assert "book/configuration.md" in done.stdout and "03_sgm_vi" in done.stdout
    assert not (root / "no-venv").exists()
    assert _make(root, "help").stdout == done.stdout


@needs_make
@pytest.mark.parametrize("target", ["chapter", "compare"])
def test_a_target_that_needs_chapter_says_so_before_installing_anything(tmp_path, target):
    root = _checkout(tmp_path)
    done = _make(root, target)
    assert done.returncode == 2
    assert f"usage: make {target} CHAPTER=NN_name" in done.stdout
    assert "00_symmetries" in done.stdout and "CHAPTER is not set" in done.stderr
    assert "pip" not in done.stdout + done.stderr and not (root / "no-venv").exists()
    # a name that is no chapter is refused the same way
    wrong = _make(root, target, "CHAPTER=03_sgm")
    assert wrong.returncode == 2 and "unknown chapter: 03_sgm" in wrong.stderr
    assert not (root / "no-venv").exists()


@needs_make
def test_make_chapter_and_compare_run_the_pipeline_and_the_comparison():
    done = subprocess.run(["make", "-n", "--no-print-directory", "chapter", "compare", "CHAPTER=03_sgm_vi", "TIER=full",
                           "RTOL=1e-6", f"VENV={REPO / '.venv'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "symlib.book.pipeline execute --profile quick --seed 0 --device auto 03_sgm_vi" in done.stdout
    assert "symlib.book.rerun --tier full --rtol 1e-6 03_sgm_vi" in done.stdout
