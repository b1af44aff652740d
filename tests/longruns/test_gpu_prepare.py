"""tools/longruns/gpu_prepare.sh, run here with a stand-in for pip: which wheels it asks for (each at
the version constraints.txt pins, for the GPU image's CPython 3.12), which chapters it refuses, and
the carry list it prints. The download itself (network) and chapter 2b's Fashion-MNIST copy (apt)
are not run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Stands in for .venv/bin/python: `-m pip download ... -d DIR PIN...` logs its arguments and writes
# one empty file per pin into DIR; anything else is refused (the script runs nothing else unless a
# chapter needs Fashion-MNIST, which these tests do not ask for).
FAKE_PYTHON = """#!/usr/bin/env bash
printf '%s\\n' "$@" > "$PIP_LOG"
[ "$1 $2 $3" = "-m pip download" ] || { echo "unexpected: $*" >&2; exit 9; }
dest=""; pins=()
while [ $# -gt 0 ]; do
  case $1 in
    -d) dest=$2; shift 2 ;;
    *==*) pins+=("$1"); shift ;;
    *) shift ;;
  esac
done
for p in "${pins[@]}"; do : > "$dest/${p%%==*}-${p##*==}-py3-none-any.whl"; done
"""


@pytest.fixture
def repo(tmp_path):
    """A checkout of its own (the script writes .whl/ at the root), with the real constraints."""
    repo = tmp_path / "repo"
    (repo / "tools" / "longruns").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "longruns" / "gpu_prepare.sh", repo / "tools" / "longruns")
    shutil.copy(ROOT / "constraints.txt", repo)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    return repo


def _prepare(repo: Path, *chapters: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PY=str(repo.parent / "python"), PIP_LOG=str(repo.parent / "pip.log"))
    return subprocess.run(["bash", "tools/longruns/gpu_prepare.sh", *chapters], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def _pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pairs = (re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line) for line in lines)
    return {m.group(1).lower(): m.group(2) for m in pairs if m}


def test_wheels_are_the_pinned_versions_for_the_gpu_images_python(repo):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "t"], cwd=repo, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()
    done = _prepare(repo, "05_rebasin_hmc", "02a_symmetry_removal")
    assert done.returncode == 0, done.stderr
    args = (repo.parent / "pip.log").read_text().splitlines()
    asked = [a for a in args if "==" in a]
    names = {a.split("==")[0].lower() for a in asked}
    assert names == {"arviz", "xarray-einstats", "h5netcdf", "mlxtend",   # every chapter
                     "cvxpy", "clarabel", "osqp", "qdldl", "highspy", "sparsediffpy"}  # 02a's solver
    pins = _pins()
    assert all(a.split("==")[1] == pins[a.split("==")[0].lower()] for a in asked)
    assert "--no-deps" in args and "--only-binary=:all:" in args
    assert args[args.index("--python-version") + 1] == "3.12"
    assert args[args.index("--abi") + 1] == "cp312"
    assert len(list((repo / ".whl").glob("*.whl"))) == len(asked)
    assert 'carry: [".whl"]' in done.stdout and "of the 64 MiB" in done.stdout
    call = next(line for line in done.stdout.splitlines() if line.startswith("run("))   # the device tool's call
    assert call.startswith(f"""run(command='CHAPTER="05_rebasin_hmc 02a_symmetry_removal" PIECE_S=480 HARD_S=540 """
                           f"""SYMLIB_COMMIT={head} bash tools/longruns/gpu_piece.sh', carry=[".whl"], timeout_s=600)""")


def test_other_chapters_get_only_the_common_wheels(repo):
    done = _prepare(repo, "03_sgm_vi")
    assert done.returncode == 0, done.stderr
    asked = [a for a in (repo.parent / "pip.log").read_text().splitlines() if "==" in a]
    assert sorted(a.split("==")[0].lower() for a in asked) == ["arviz", "h5netcdf", "mlxtend", "xarray-einstats"]


@pytest.mark.parametrize(("chapter", "message"), [
    ("04_constrained_models", "runs on the CPU (Stan)"),
    ("07_nothing", "unknown chapter 07_nothing"),
])
def test_refused_chapters_download_nothing(repo, chapter, message):
    done = _prepare(repo, chapter)
    assert done.returncode == 2 and message in done.stderr
    assert not (repo.parent / "pip.log").exists() and not (repo / ".whl").exists()


def test_a_wheel_without_a_pin_is_an_error(repo):
    constraints = repo / "constraints.txt"
    constraints.write_text("\n".join(line for line in constraints.read_text().splitlines()
                                     if not line.lower().startswith("mlxtend==")) + "\n")
    done = _prepare(repo, "01_ortho_skip")
    assert done.returncode != 0 and "no pin for mlxtend in constraints.txt" in done.stderr


def test_warns_when_what_travels_nears_the_64_mib_before_any_state(repo):
    """Tree and carried folders together past 52 MiB (the margin gpu_piece.sh keeps for a state):
    a warning on stderr; the call is still printed. Under it: no warning."""
    quiet = _prepare(repo, "05_rebasin_hmc")
    assert quiet.returncode == 0 and "WARNING" not in quiet.stderr
    with open(repo / "big.bin", "wb") as f:   # a sparse 53 MiB tracked file: du -b counts its size
        f.truncate(53 << 20)
    subprocess.run(["git", "add", "big.bin"], cwd=repo, check=True)
    loud = _prepare(repo, "05_rebasin_hmc")
    assert loud.returncode == 0 and "travels: tree 53 MiB" in loud.stdout
    assert "WARNING: 53 MiB before any carried state" in loud.stderr
    assert any(line.startswith("run(") for line in loud.stdout.splitlines())
