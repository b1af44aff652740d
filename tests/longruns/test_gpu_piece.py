"""tools/longruns/gpu_piece.sh, the GPU tier's piece, run here on the CPU (``PROFILE=smoke DEVICE=cpu``):
a piece, ``keep``, and the next piece on a machine that lost the untracked ``.paper-carry/``,
which continues from the tracked ``carry/`` alone instead of computing again; several chapters
sharing one piece; and the checkpoints dropped for the way back, put back by a second piece on the
same machine only.

A piece costs tens of seconds (each of its steps starts Python and torch), so the tests share the
two that several of them read (module fixtures ``kept`` and ``stopped``); a test that goes on from
one works on a copy of its folder (:func:`_copy`), so that none sees another's changes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "01_ortho_skip"


def _checkout(base: Path) -> Path:
    """A checkout of its own: keep writes carry/ and .paper-carry/ there."""
    repo = base / "repo"
    shutil.copytree(ROOT / "symlib", repo / "symlib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tools", repo / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "_toc.yml", repo)
    (repo / "notebooks").mkdir()
    return repo


def _env(base: Path, **more: str) -> dict:
    """The piece's environment: its output in ``base/out``, its state in ``base/state``, the
    machine's leftovers in ``base/local``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYMLIB_")}
    return env | {"PY": sys.executable, "PROFILE": "smoke", "DEVICE": "cpu", "CHAPTER": CHAPTER, "PIECE_S": "300",
                  "OUT": str(base / "out"), "STATE": str(base / "state"), "LOCAL": str(base / "local"),
                  "SYMLIB_JOBS": "1", **more}


def _json_line(text: str, word: str, chapter: str = CHAPTER) -> dict:
    """The JSON line of ``text`` (what carry save or load printed) that has ``word`` and is ``chapter``'s."""
    return next(json.loads(line) for line in text.splitlines()
                if line.startswith("{") and f'"{word}"' in line and json.loads(line).get("chapter") == chapter)


def _runner(base: Path, **env: str):
    """``run(*args, **more)``: gpu_piece.sh in ``base``'s checkout, with ``_env(base, **env)`` and
    ``more`` on top; fails the test on a non-zero exit; returns its stdout."""
    env = _env(base, **env)

    def run(*args: str, **more: str) -> str:
        done = subprocess.run(["bash", "tools/longruns/gpu_piece.sh", *args], check=False, cwd=base / "repo",
                              env=env | more, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout
    return run


def _piece(run, base: Path, **more: str) -> str:
    """One piece; returns its log."""
    shutil.rmtree(base / "out", ignore_errors=True)
    run(**more)
    return (base / "out" / "piece.log").read_text().replace("\r", "\n")


def _copy(base: Path, tmp_path: Path) -> Path:
    """A copy of a shared piece's folder (checkout, output, state, leftovers) for a test that goes on from it."""
    shutil.copytree(base, tmp_path / "copy", symlinks=True)
    return tmp_path / "copy"


def _archive_names(base: Path) -> list[str]:
    """The files in the piece's state archive (its parts joined)."""
    whole = base / "state.tgz"
    with open(whole, "wb") as f:
        f.writelines(part.read_bytes() for part in sorted((base / "out").glob("state.tgz.*")))
    with tarfile.open(whole) as tar:
        return tar.getnames()


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """Chapters 3 and 1 (smoke) run to their end in one piece, which keep then brings back:
    ``(folder, the piece's log, keep's output)``. Read only: go on from a :func:`_copy`."""
    base = tmp_path_factory.mktemp("kept")
    _checkout(base)
    run = _runner(base, CHAPTER=f"03_sgm_vi {CHAPTER}")
    log = _piece(run, base)
    return base, log, run("keep", str(base / "out"))


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """Chapters 1 and 3 (smoke) in one piece that stops at its budget inside chapter 1's first fit
    (``PIECE_S=1e-9``), with ``RETURN_MIB=0``: nothing fits the way back. ``(folder, the piece's
    log)``. Read only: go on from a :func:`_copy`."""
    base = tmp_path_factory.mktemp("stopped")
    _checkout(base)
    run = _runner(base, CHAPTER=f"{CHAPTER} 03_sgm_vi", PIECE_S="1e-9", HARD_S="300", RETURN_MIB="0")
    return base, _piece(run, base)


@pytest.mark.slow
def test_several_chapters_share_a_piece_and_keep_keeps_each(kept):
    base, log, _ = kept
    assert [line for line in log.splitlines() if line.startswith(f"torch {torch.__version__} ")]   # what it ran on
    assert "03_sgm_vi compute rc=0" in log and f"{CHAPTER} compute rc=0" in log
    assert log.index("03_sgm_vi start") < log.index(f"{CHAPTER} start")       # in the order given
    assert [p.name for p in (base / "out").glob("state.tgz.*")] == ["state.tgz.00"]   # one archive, both folders
    repo = base / "repo"
    for chapter in ("03_sgm_vi", CHAPTER):
        assert list((repo / ".paper-carry" / chapter).glob("state.tgz.*")), chapter
        assert (repo / ".paper-carry" / chapter / "last-piece.log").read_text() == (base / "out" / "piece.log").read_text()
        assert list((repo / "carry").glob(f"{chapter}-*/*.pt")), chapter


@pytest.mark.slow
def test_a_kept_piece_continues_from_carry_after_paper_carry_is_lost(kept, tmp_path):
    _, log, keep = kept
    assert "VI, 4 variants" in log                                       # chapter 1 trained
    saved = _json_line(keep, "saved")
    assert saved["saved"] >= 3 and saved["too large, left"] == [] and saved["pieces"] == 1
    base = _copy(kept[0], tmp_path)
    repo = base / "repo"
    assert len(list((repo / "carry").glob(f"{CHAPTER}-*/*.pt"))) == saved["saved"]   # carry/<experiment>/
    shutil.rmtree(repo / ".paper-carry")                                 # a replaced machine
    second = _piece(_runner(base), base)
    assert "no carried state" in second
    assert _json_line(second, "loaded")["loaded"] == saved["saved"]
    assert "compute rc=0" in second and "VI, 4 variants" not in second  # served, not trained again


@pytest.mark.slow
def test_a_state_too_large_to_come_back_drops_its_largest_checkpoints_not_its_entries(stopped):
    """With RETURN_MIB=0 nothing fits the way back, so every checkpoint is dropped (named in the
    log) and the state comes back without them, whole."""
    base, log = stopped
    assert f"{CHAPTER} compute rc=75" in log, "stopped at its budget"
    dropped = [line for line in log.splitlines() if line.startswith("dropped ")]
    assert dropped and all("its item starts again in the next piece" in line for line in dropped)
    assert "without a checkpoint to drop" in log     # still over 0 MiB once they are gone: said, not looped
    names = _archive_names(base)
    assert f"{CHAPTER}/results/pieces/{CHAPTER}.json" in names and not [n for n in names if "/checkpoints/" in n]


@pytest.mark.slow
def test_a_later_chapter_waits_when_the_first_stops_at_the_budget(stopped):
    base, log = stopped
    assert f"{CHAPTER} compute rc=75" in log
    assert f"03_sgm_vi: waits for the next piece ({CHAPTER} did not finish: rc=75)" in log
    assert "03_sgm_vi start" not in log
    assert {name.split("/")[0] for name in _archive_names(base)} == {CHAPTER}


@pytest.mark.slow
def test_a_second_piece_on_the_same_machine_puts_back_what_was_dropped_for_the_way_back(stopped, tmp_path):
    """Chapter 1's main fit stopped after its first of 40 steps and its checkpoint could not come
    back: the next piece on this machine continues it (a bar of 39 steps, beside the two sweep
    fits' 40), and one whose local marker names another state starts it again (three of 40)."""
    base = _copy(stopped[0], tmp_path)
    local = base / "local" / CHAPTER
    dropped = [p.name for p in (local / "dropped").iterdir()]
    assert dropped and (local / "pieces.sha256").read_text().strip()
    run = _runner(base, RETURN_MIB="100")
    run("keep", str(base / "out"))

    other = base / "other"                         # a machine whose leftovers belong to another state
    shutil.copytree(base / "local", other)
    (other / CHAPTER / "pieces.sha256").write_text("0" * 64 + "\n")
    fresh = _piece(run, base, LOCAL=str(other))
    assert "put back" not in fresh and "compute rc=0" in fresh
    assert fresh.count("| 0/40 [") == 3 and "| 0/39 [" not in fresh

    same = _piece(run, base)
    assert [line for line in same.splitlines() if "put back" in line] == [
        f"{CHAPTER}: put back {name}, dropped for the way back by the previous piece on this machine" for name in dropped]
    assert same.count("| 0/40 [") == 2 and same.count("| 0/39 [") == 1 and "compute rc=0" in same


@pytest.mark.slow
def test_keep_publishes_how_far_a_gold_standard_got_though_its_checkpoint_stayed_on_the_machine(tmp_path):
    """Chapter 6's gold standard stops at the budget and its checkpoint is dropped for the way back
    (RETURN_MIB=0): the progress the piece read from it on the device still comes back, and keep
    publishes it (a chain short of its length is shown, never hidden)."""
    repo = _checkout(tmp_path)
    run = _runner(tmp_path, CHAPTER="06_synthesis", PIECE_S="1e-9", HARD_S="300", RETURN_MIB="0")
    log = _piece(run, tmp_path)
    assert "compute rc=75" in log and "dropped 06_synthesis-gold-" in log
    run("keep", str(tmp_path / "out"))
    chains = json.loads((repo / "published" / "paper" / "progress" / "06_synthesis.chains.json").read_text())
    assert [c["run"] for c in chains] == ["gold sinc"] and chains[0]["transitions"] >= 1
    assert not list((repo / "carry").rglob("*gold-sinc*.pt"))      # the checkpoint itself did not come back


def test_an_unknown_chapter_is_refused_before_any_chapter_runs(tmp_path):
    repo = _checkout(tmp_path)
    env = _env(tmp_path, CHAPTER=f"{CHAPTER} 01_ortho_skp")
    done = subprocess.run(["bash", "tools/longruns/gpu_piece.sh"], check=False, cwd=repo, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "unknown chapter(s) 01_ortho_skp; chapters: 00_symmetries" in done.stderr
    assert not (tmp_path / "state" / CHAPTER).exists() and not list((tmp_path / "out").glob("*"))


@pytest.mark.slow
def test_a_checkpoint_of_earlier_code_is_neither_loaded_nor_read_nor_kept(tmp_path):
    """carry/ holds, beside the run's own HMC checkpoint, one that no run of this code continues
    (left by a code change: another digest), written later: the piece does not load it, the
    progress is read from the run's own checkpoint, and keep removes it from carry/."""
    repo = _checkout(tmp_path)
    run = _runner(tmp_path, CHAPTER="05_rebasin_hmc", PIECE_S="1e-9", HARD_S="300")
    assert "compute rc=75" in _piece(run, tmp_path)
    run("keep", str(tmp_path / "out"))
    (own,) = (repo / "carry" / "checkpoints").glob("05_rebasin_hmc-bayes-main-*.pt*")
    stale = own.with_name(own.name.replace(own.name.split("-")[-1].split(".")[0], "0123456789abcdef"))
    shutil.copy(own, stale)                                            # newer, and readable as an HMC checkpoint
    log = _piece(run, tmp_path)
    assert '"checkpoints no run of this code continues, left": 1' in log and "compute rc=75" in log
    run("keep", str(tmp_path / "out"))
    assert not stale.exists() and own.exists()
    chains = json.loads((repo / "published" / "paper" / "progress" / "05_rebasin_hmc.chains.json").read_text())
    assert [c["digest"] for c in chains] == [own.name.split("-")[-1].split(".")[0]]
