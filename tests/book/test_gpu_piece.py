"""benchmarks/gpu_piece.sh, the GPU tier's piece, run here on the CPU (``PROFILE=smoke DEVICE=cpu``):
a piece, ``keep``, and the next piece on a machine that lost the untracked ``.paper-carry/``,
which continues from the tracked ``carry/`` alone instead of computing again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "01_ortho_skip"


def _checkout(tmp_path: Path) -> Path:
    """A checkout of its own: keep writes carry/ and .paper-carry/ there."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "symlib", repo / "symlib", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "benchmarks").mkdir()
    shutil.copy(ROOT / "benchmarks" / "gpu_piece.sh", repo / "benchmarks")
    shutil.copy(ROOT / "_toc.yml", repo)
    (repo / "notebooks").mkdir()
    return repo


def _env(tmp_path: Path, out: Path, **more: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYMLIB_")}
    return env | {"PY": sys.executable, "PROFILE": "smoke", "DEVICE": "cpu", "CHAPTER": CHAPTER, "PIECE_S": "300",
                  "OUT": str(out), "STATE": str(tmp_path / "state"), "SYMLIB_JOBS": "1", **more}


def _json_line(text: str, word: str) -> dict:
    return next(json.loads(line) for line in text.splitlines() if line.startswith("{") and f'"{word}"' in line)


@pytest.mark.slow
def test_a_kept_piece_continues_from_carry_after_paper_carry_is_lost(tmp_path):
    repo = _checkout(tmp_path)
    out = tmp_path / "out"
    env = _env(tmp_path, out)

    def run(*args: str) -> str:
        done = subprocess.run(["bash", "benchmarks/gpu_piece.sh", *args], check=False, cwd=repo, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout

    def piece() -> str:
        shutil.rmtree(out, ignore_errors=True)
        run()
        return (out / "piece.log").read_text().replace("\r", "\n")

    first = piece()
    assert "compute rc=0" in first and "VI, 4 variants" in first       # it trained
    saved = _json_line(run("keep", str(out)), "saved")
    assert saved["saved"] >= 3 and saved["too large, left"] == [] and saved["pieces"] == 1
    assert len(list((repo / "carry").glob(f"{CHAPTER}-*/*.pt"))) == saved["saved"]   # carry/<experiment>/
    assert list((repo / ".paper-carry" / CHAPTER).glob("state.tgz.*"))

    shutil.rmtree(repo / ".paper-carry")                                 # a replaced machine
    second = piece()
    assert "no carried state" in second
    assert _json_line(second, "loaded")["loaded"] == saved["saved"]
    assert "compute rc=0" in second and "VI, 4 variants" not in second  # served, not trained again


@pytest.mark.slow
def test_a_state_too_large_to_come_back_drops_its_largest_checkpoints_not_its_entries(tmp_path):
    """A piece stopped at its budget inside a fit: with RETURN_MIB=0 nothing fits the way back, so
    every checkpoint is dropped (named in the log) and the state comes back without them, whole."""
    import tarfile

    repo, out = _checkout(tmp_path), tmp_path / "out"
    env = _env(tmp_path, out, PIECE_S="1e-9", HARD_S="300", RETURN_MIB="0")
    done = subprocess.run(["bash", "benchmarks/gpu_piece.sh"], check=False, cwd=repo, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    log = (out / "piece.log").read_text()
    assert "compute rc=75" in log, "stopped at its budget"
    dropped = [line for line in log.splitlines() if line.startswith("dropped ")]
    assert dropped and all("its item starts again in the next piece" in line for line in dropped)
    assert "without a checkpoint to drop" in log     # still over 0 MiB once they are gone: said, not looped
    with open(tmp_path / "state.tgz", "wb") as whole:
        whole.writelines(part.read_bytes() for part in sorted(out.glob("state.tgz.*")))
    with tarfile.open(tmp_path / "state.tgz") as tar:
        names = tar.getnames()
    assert "results/pieces/01_ortho_skip.json" in names and not [n for n in names if "/checkpoints/" in n]
