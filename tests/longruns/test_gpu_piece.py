"""tools/longruns/gpu_piece.sh, the GPU tier's piece, run here on the CPU (``PROFILE=smoke DEVICE=cpu``):
a piece, ``keep``, and the next piece on a machine that lost the untracked ``.paper-carry/``,
which continues from the tracked ``carry/`` alone instead of computing again; several chapters
sharing one piece; and the checkpoints dropped for the way back, put back by a second piece on the
same machine only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "01_ortho_skip"


def _checkout(tmp_path: Path) -> Path:
    """A checkout of its own: keep writes carry/ and .paper-carry/ there."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "symlib", repo / "symlib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tools", repo / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "_toc.yml", repo)
    (repo / "notebooks").mkdir()
    return repo


def _env(tmp_path: Path, out: Path, **more: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYMLIB_")}
    return env | {"PY": sys.executable, "PROFILE": "smoke", "DEVICE": "cpu", "CHAPTER": CHAPTER, "PIECE_S": "300",
                  "OUT": str(out), "STATE": str(tmp_path / "state"), "LOCAL": str(tmp_path / "local"), "SYMLIB_JOBS": "1",
                  **more}


def _json_line(text: str, word: str) -> dict:
    return next(json.loads(line) for line in text.splitlines() if line.startswith("{") and f'"{word}"' in line)


def _runner(repo: Path, env: dict):
    def run(*args: str, **more: str) -> str:
        done = subprocess.run(["bash", "tools/longruns/gpu_piece.sh", *args], check=False, cwd=repo, env=env | more,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout
    return run


def _piece(run, out: Path, **more: str) -> str:
    shutil.rmtree(out, ignore_errors=True)
    run(**more)
    return (out / "piece.log").read_text().replace("\r", "\n")


@pytest.mark.slow
def test_a_kept_piece_continues_from_carry_after_paper_carry_is_lost(tmp_path):
    repo, out = _checkout(tmp_path), tmp_path / "out"
    run = _runner(repo, _env(tmp_path, out))
    first = _piece(run, out)
    assert "compute rc=0" in first and "VI, 4 variants" in first       # it trained
    saved = _json_line(run("keep", str(out)), "saved")
    assert saved["saved"] >= 3 and saved["too large, left"] == [] and saved["pieces"] == 1
    assert len(list((repo / "carry").glob(f"{CHAPTER}-*/*.pt"))) == saved["saved"]   # carry/<experiment>/
    assert list((repo / ".paper-carry" / CHAPTER).glob("state.tgz.*"))

    shutil.rmtree(repo / ".paper-carry")                                 # a replaced machine
    second = _piece(run, out)
    assert "no carried state" in second
    assert _json_line(second, "loaded")["loaded"] == saved["saved"]
    assert "compute rc=0" in second and "VI, 4 variants" not in second  # served, not trained again


@pytest.mark.slow
def test_a_state_too_large_to_come_back_drops_its_largest_checkpoints_not_its_entries(tmp_path):
    """A piece stopped at its budget inside a fit: with RETURN_MIB=0 nothing fits the way back, so
    every checkpoint is dropped (named in the log) and the state comes back without them, whole."""
    repo, out = _checkout(tmp_path), tmp_path / "out"
    log = _piece(_runner(repo, _env(tmp_path, out, PIECE_S="1e-9", HARD_S="300", RETURN_MIB="0")), out)
    assert "compute rc=75" in log, "stopped at its budget"
    dropped = [line for line in log.splitlines() if line.startswith("dropped ")]
    assert dropped and all("its item starts again in the next piece" in line for line in dropped)
    assert "without a checkpoint to drop" in log     # still over 0 MiB once they are gone: said, not looped
    with open(tmp_path / "state.tgz", "wb") as whole:
        whole.writelines(part.read_bytes() for part in sorted(out.glob("state.tgz.*")))
    with tarfile.open(tmp_path / "state.tgz") as tar:
        names = tar.getnames()
    assert f"{CHAPTER}/results/pieces/{CHAPTER}.json" in names and not [n for n in names if "/checkpoints/" in n]


@pytest.mark.slow
def test_several_chapters_share_a_piece_and_keep_keeps_each(tmp_path):
    repo, out = _checkout(tmp_path), tmp_path / "out"
    run = _runner(repo, _env(tmp_path, out, CHAPTER=f"03_sgm_vi {CHAPTER}"))
    log = _piece(run, out)
    assert "03_sgm_vi compute rc=0" in log and f"{CHAPTER} compute rc=0" in log
    assert log.index("03_sgm_vi start") < log.index(f"{CHAPTER} start")       # in the order given
    assert [p.name for p in out.glob("state.tgz.*")] == ["state.tgz.00"]           # one archive, both folders
    run("keep", str(out))
    for chapter in ("03_sgm_vi", CHAPTER):
        assert list((repo / ".paper-carry" / chapter).glob("state.tgz.*")), chapter
        assert (repo / ".paper-carry" / chapter / "last-piece.log").read_text() == (out / "piece.log").read_text()
        assert list((repo / "carry").glob(f"{chapter}-*/*.pt")), chapter


@pytest.mark.slow
def test_a_later_chapter_waits_when_the_first_stops_at_the_budget(tmp_path):
    repo, out = _checkout(tmp_path), tmp_path / "out"
    run = _runner(repo, _env(tmp_path, out, CHAPTER=f"{CHAPTER} 03_sgm_vi", PIECE_S="1e-9", HARD_S="300"))
    log = _piece(run, out)
    assert f"{CHAPTER} compute rc=75" in log
    assert f"03_sgm_vi: waits for the next piece ({CHAPTER} did not finish: rc=75)" in log
    assert "03_sgm_vi start" not in log
    with tarfile.open(out / "state.tgz.00") as tar:
        assert {name.split("/")[0] for name in tar.getnames()} == {CHAPTER}


@pytest.mark.slow
def test_a_second_piece_on_the_same_machine_puts_back_what_was_dropped_for_the_way_back(tmp_path):
    """Chapter 1's main fit stops after its first of 40 steps and its checkpoint cannot come back
    (RETURN_MIB=0): the next piece on this machine continues it (a bar of 39 steps, beside the two
    sweep fits' 40), and one whose local marker names another state starts it again (three of 40)."""
    repo, out = _checkout(tmp_path), tmp_path / "out"
    run = _runner(repo, _env(tmp_path, out, RETURN_MIB="0"))
    first = _piece(run, out, PIECE_S="1e-9", HARD_S="300")
    assert "compute rc=75" in first and "dropped " in first
    local = tmp_path / "local" / CHAPTER
    dropped = [p.name for p in (local / "dropped").iterdir()]
    assert dropped and (local / "pieces.sha256").read_text().strip()
    run("keep", str(out))

    other = tmp_path / "other"                     # a machine whose leftovers belong to another state
    shutil.copytree(tmp_path / "local", other)
    (other / CHAPTER / "pieces.sha256").write_text("0" * 64 + "\n")
    fresh = _piece(run, out, LOCAL=str(other), RETURN_MIB="100")
    assert "put back" not in fresh and "compute rc=0" in fresh
    assert fresh.count("| 0/40 [") == 3 and "| 0/39 [" not in fresh

    same = _piece(run, out, RETURN_MIB="100")
    assert [line for line in same.splitlines() if "put back" in line] == [
        f"{CHAPTER}: put back {name}, dropped for the way back by the previous piece on this machine" for name in dropped]
    assert same.count("| 0/40 [") == 2 and same.count("| 0/39 [") == 1 and "compute rc=0" in same


@pytest.mark.slow
def test_keep_publishes_how_far_a_gold_standard_got_though_its_checkpoint_stayed_on_the_machine(tmp_path):
    """Chapter 6's gold standard stops at the budget and its checkpoint is dropped for the way back
    (RETURN_MIB=0): the progress the piece read from it on the device still comes back, and keep
    publishes it (a chain short of its length is shown, never hidden)."""
    repo, out = _checkout(tmp_path), tmp_path / "out"
    run = _runner(repo, _env(tmp_path, out, CHAPTER="06_synthesis", PIECE_S="1e-9", HARD_S="300", RETURN_MIB="0"))
    log = _piece(run, out)
    assert "compute rc=75" in log and "dropped 06_synthesis-gold-" in log
    run("keep", str(out))
    chains = json.loads((repo / "published" / "paper" / "progress" / "06_synthesis.chains.json").read_text())
    assert [c["run"] for c in chains] == ["gold sinc"] and chains[0]["transitions"] >= 1
    assert not list((repo / "carry").rglob("*gold-sinc*.pt"))      # the checkpoint itself did not come back


def test_an_unknown_chapter_is_refused_before_any_chapter_runs(tmp_path):
    repo, out = _checkout(tmp_path), tmp_path / "out"
    env = _env(tmp_path, out, CHAPTER=f"{CHAPTER} 01_ortho_skp")
    done = subprocess.run(["bash", "tools/longruns/gpu_piece.sh"], check=False, cwd=repo, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "unknown chapter(s) 01_ortho_skp; chapters: 00_symmetries" in done.stderr
    assert not (tmp_path / "state" / CHAPTER).exists() and not list(out.glob("*"))


@pytest.mark.slow
def test_a_checkpoint_of_earlier_code_is_neither_loaded_nor_read_nor_kept(tmp_path):
    """carry/ holds, beside the run's own HMC checkpoint, one that no run of this code continues
    (left by a code change: another digest), written later: the piece does not load it, the
    progress is read from the run's own checkpoint, and keep removes it from carry/."""
    repo, out = _checkout(tmp_path), tmp_path / "out"
    run = _runner(repo, _env(tmp_path, out, CHAPTER="05_rebasin_hmc", PIECE_S="1e-9", HARD_S="300"))
    assert "compute rc=75" in _piece(run, out)
    run("keep", str(out))
    (own,) = (repo / "carry" / "checkpoints").glob("05_rebasin_hmc-bayes-main-*.pt*")
    stale = own.with_name(own.name.replace(own.name.split("-")[-1].split(".")[0], "0123456789abcdef"))
    shutil.copy(own, stale)                                            # newer, and readable as an HMC checkpoint
    log = _piece(run, out)
    assert '"checkpoints no run of this code continues, left": 1' in log and "compute rc=75" in log
    run("keep", str(out))
    assert not stale.exists() and own.exists()
    chains = json.loads((repo / "published" / "paper" / "progress" / "05_rebasin_hmc.chains.json").read_text())
    assert [c["digest"] for c in chains] == [own.name.split("-")[-1].split(".")[0]]
