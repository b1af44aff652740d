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


def _json_line(text: str, word: str) -> dict:
    return next(json.loads(line) for line in text.splitlines() if line.startswith("{") and f'"{word}"' in line)


@pytest.mark.slow
def test_a_kept_piece_continues_from_carry_after_paper_carry_is_lost(tmp_path):
    repo = tmp_path / "repo"  # a checkout of its own: keep writes carry/ and .paper-carry/ there
    shutil.copytree(ROOT / "symlib", repo / "symlib", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "benchmarks").mkdir()
    shutil.copy(ROOT / "benchmarks" / "gpu_piece.sh", repo / "benchmarks")
    shutil.copy(ROOT / "_toc.yml", repo)
    (repo / "notebooks").mkdir()
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYMLIB_")}
    env |= {"PY": sys.executable, "PROFILE": "smoke", "DEVICE": "cpu", "CHAPTER": CHAPTER, "PIECE_S": "300",
            "OUT": str(out), "STATE": str(tmp_path / "state"), "SYMLIB_JOBS": "1"}

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
