"""Carrying an unfinished run between machines (tools/longruns/carry.py): the chapter's current
cache entries go to a folder and back, and the cache serves them there without recomputing;
entries of other code are neither carried nor served as current."""

from __future__ import annotations

import json
import lzma

import numpy as np
import pytest

from symlib.book import cache, pieces
from symlib.book.cache import cached
from tools.longruns import carry

CHAPTER = "04_constrained_models"


def _never():
    raise AssertionError("recomputed: the carried entry was not served")


@pytest.fixture
def two_caches(tmp_path, monkeypatch):
    here, there, folder = tmp_path / "here", tmp_path / "there", tmp_path / "carry"
    monkeypatch.setenv("SYMLIB_CACHE", str(here))
    monkeypatch.setenv("SYMLIB_RESULTS", str(here / "results"))
    for i in range(3):
        cached(f"{CHAPTER}-boston_fits", "1", {"fit": i}, lambda i=i: {"mse": 0.1 * i})
    cached("00_symmetries", "1", {"other": 1}, lambda: 1.0)          # another chapter's entry
    return there, folder


def test_saved_entries_load_into_another_cache_and_are_served_there(two_caches, monkeypatch):
    there, folder = two_caches
    out = carry.save(CHAPTER, folder)
    assert out["saved"] == 3 and out["bytes"] > 0
    assert sorted(p.parent.name for p in folder.glob("*/*.pt")) == [f"{CHAPTER}-boston_fits"] * 3
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    assert carry.load(CHAPTER, folder)["loaded"] == 3
    for i in range(3):
        assert cached(f"{CHAPTER}-boston_fits", "1", {"fit": i}, _never) == {"mse": 0.1 * i}
    again = carry.load(CHAPTER, folder)
    assert again["loaded"] == 0 and again["already in the cache"] == 3


def test_the_pieces_of_the_run_travel_with_it_merged(two_caches, monkeypatch):
    there, folder = two_caches
    pieces.log_piece(CHAPTER, profile="full", device="cpu", seconds=3600, outcome="budget", code_hash="a")
    assert carry.save(CHAPTER, folder)["pieces"] == 1
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    monkeypatch.setenv("SYMLIB_RESULTS", str(there / "results"))
    pieces.log_piece(CHAPTER, profile="quick", device="cpu", seconds=60, outcome="complete", code_hash="a")
    assert carry.load(CHAPTER, folder)["pieces"] == 2
    assert carry.load(CHAPTER, folder)["pieces"] == 2                   # loading twice adds nothing
    pieces.log_piece(CHAPTER, profile="full", device="cpu", seconds=1800, outcome="complete", code_hash="a")
    got = pieces.account(pieces.read(CHAPTER), "full")
    assert got["pieces"] == 2 and got["seconds"] == 5400 and got["stopped_at_budget"] == 1
    assert carry.save(CHAPTER, folder)["pieces"] == 3


def test_entries_of_other_code_are_not_carried_and_carried_ones_are_kept_unless_pruned(two_caches, monkeypatch):
    """Before: a save from a checkout whose stage code differed (one added comment) removed every
    carried entry without asking, losing uncommitted results."""
    _there, folder = two_caches
    carry.save(CHAPTER, folder)
    real = cache.fingerprint

    def moved_on(experiment):                    # this checkout's code is now another
        return real(experiment) | {"code_hash": "0" * 16}

    monkeypatch.setattr(cache, "fingerprint", moved_on)
    assert not any(e.current for e in carry.entries(folder, CHAPTER))
    out = carry.save(CHAPTER, folder)
    assert out["saved"] == 0 and out["not current, left"] == 3 and out["removed from the carry folder"] == 0
    assert out["not current, kept (prune removes)"] == 3 and len(list(folder.glob("*/*.pt"))) == 3
    out = carry.save(CHAPTER, folder, prune=True)
    assert out["removed from the carry folder"] == 3 and not list(folder.glob("*/*.pt"))


def test_a_swapped_entry_is_never_served_under_the_other_name(two_caches, monkeypatch):
    """Before: two entries whose files were swapped (a rename, a merge fix) were each served as
    the other, with no warning."""
    there, folder = two_caches
    carry.save(CHAPTER, folder)
    a, b = sorted(folder.glob("*/*.pt"))[:2]
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    with pytest.warns(cache.CacheCorruptionWarning, match="records experiment .* but sits at"):
        listed = carry.entries(folder, CHAPTER)
    assert sum(not e.current for e in listed) == 2
    assert {p.name for p in folder.glob("*/*")} == {p.name for p in folder.glob("*/*.pt")}  # nothing renamed
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    with pytest.warns(cache.CacheCorruptionWarning):
        assert carry.load(CHAPTER, folder)["loaded"] == 1
    # and in the cache itself: a swapped entry is moved aside and recomputed, never served
    here = there / f"{CHAPTER}-boston_fits"
    x, y = sorted(here.glob("*.pt"))[:1] + [here / a.name]
    y.write_bytes(x.read_bytes())
    with pytest.warns(cache.CacheCorruptionWarning, match="another entry's result under this name"):
        ok, _value, _meta = cache._load(y)
    assert not ok and (here / (a.name + ".corrupt")).exists()


def test_listing_a_carry_folder_changes_no_file(two_caches):
    """Before: `carry list` renamed a corrupt carried file inside the tracked carry/ folder."""
    _there, folder = two_caches
    carry.save(CHAPTER, folder)
    victim = min(folder.glob("*/*.pt"))
    victim.write_bytes(victim.read_bytes()[:-5])
    before = sorted(p.name for p in folder.rglob("*"))
    with pytest.warns(cache.CacheCorruptionWarning):
        assert carry.main(["list", CHAPTER, "--dir", str(folder)]) == 0
    assert sorted(p.name for p in folder.rglob("*")) == before


def test_a_misspelt_chapter_is_an_error_naming_the_valid_ones(two_caches, capsys):
    """Before: save, load and list of a misspelt chapter exited 0 ("saved": 0)."""
    _there, folder = two_caches
    for action in ("save", "load", "list"):
        with pytest.raises(SystemExit) as exit_:
            carry.main([action, "04_constrained_model", "--dir", str(folder)])
        assert exit_.value.code == 2
        assert "unknown chapter '04_constrained_model'; valid chapters: 00_symmetries" in capsys.readouterr().err


def test_a_conflicted_carried_pieces_file_fails_before_anything_is_copied(two_caches, monkeypatch):
    """Before: a raw JSONDecodeError naming no file, after entries had been copied into the cache."""
    there, folder = two_caches
    carry.save(CHAPTER, folder)
    pieces.pieces_path(CHAPTER, folder).parent.mkdir(parents=True, exist_ok=True)
    pieces.pieces_path(CHAPTER, folder).write_text("<<<<<<< HEAD\n[]\n=======\n[]\n>>>>>>> other\n")
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    with pytest.raises(ValueError, match=f"{CHAPTER}.* is not valid JSON"):
        carry.load(CHAPTER, folder)
    assert not list(there.glob("*/*.pt"))


def test_a_corrupted_carried_entry_is_not_loaded(two_caches, monkeypatch):
    there, folder = two_caches
    carry.save(CHAPTER, folder)
    victim = min(folder.glob("*/*.pt"))
    victim.write_bytes(victim.read_bytes()[:-5])
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    with pytest.warns(cache.CacheCorruptionWarning):
        out = carry.load(CHAPTER, folder)
    assert out["loaded"] == 2


def test_the_command_line_saves_lists_and_refuses_a_missing_chapter(two_caches, capsys):
    _there, folder = two_caches
    assert carry.main(["save", CHAPTER, "--dir", str(folder)]) == 0
    assert carry.main(["list", "--dir", str(folder)]) == 0
    assert f"{CHAPTER}: 3 entries (3 current" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        carry.main(["save"])


def _checkpoint(root, name: str, size: int, *, random: bool = False):
    """A checkpoint file of ``size`` bytes: repeating (compressible) or random (incompressible)."""
    path = root / "checkpoints" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    data = np.random.default_rng(size).bytes(size) if random else bytes(range(256)) * (size // 256)
    path.write_bytes(data)
    return path


def test_checkpoints_travel_and_never_replace_the_caches_own(two_caches, monkeypatch, tmp_path):
    """A fit stopped inside its stage (chapter 1's VI, chapter 5's HMC) left a checkpoint: it
    travels with the entries, lands where the cache has none of its name, and a checkpoint
    already there (the run continued on that machine) is kept."""
    there, folder = two_caches
    here = tmp_path / "here"
    mine = _checkpoint(here, f"{CHAPTER}-fit-a-0123.pt", 1024)
    _checkpoint(here, "00_symmetries-fit-b-4567.pt", 512)           # another chapter's
    out = carry.save(CHAPTER, folder)
    assert out["checkpoints"] == 1 and out["bytes"] >= 1024
    assert [p.name for p in carry.checkpoints(folder, CHAPTER)] == [mine.name]
    assert carry.entries(folder, CHAPTER) and all(e.experiment != "checkpoints" for e in carry.entries(folder, CHAPTER))
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    assert carry.load(CHAPTER, folder)["checkpoints"] == 1
    assert (there / "checkpoints" / mine.name).read_bytes() == mine.read_bytes()
    further = _checkpoint(there, mine.name, 2048)                     # the run went on here
    assert carry.load(CHAPTER, folder)["checkpoints"] == 0
    assert further.stat().st_size == 2048


def test_files_over_the_limit_stay_behind_and_are_named(two_caches, tmp_path, capsys):
    _there, folder = two_caches
    here = tmp_path / "here"
    _checkpoint(here, f"{CHAPTER}-hmc-main-89ab.pt", 3 << 20, random=True)   # 3 MiB that xz cannot shrink
    small = _checkpoint(here, f"{CHAPTER}-fit-a-0123.pt", 1024)
    out = carry.save(CHAPTER, folder, limit=2)
    assert out["saved"] == 3 and out["checkpoints"] == 1
    assert out["too large, left"] == [f"checkpoints/{CHAPTER}-hmc-main-89ab.pt (3.0 MiB as xz, of 3.0 MiB)"]
    assert [p.name for p in carry.checkpoints(folder, CHAPTER)] == [small.name]
    entry = max(here.glob(f"{CHAPTER}-boston_fits/*.pt"), key=lambda p: p.stat().st_size)
    tiny = entry.stat().st_size / (1 << 20) / 2                        # below every entry's size
    assert len(carry.save(CHAPTER, tmp_path / "other", limit=tiny)["too large, left"]) >= 2
    assert carry.main(["list", "--dir", str(folder)]) == 0
    assert "and 1 checkpoints" in capsys.readouterr().out
    assert carry.main(["save", "--limit", "2", CHAPTER, "--dir", str(folder)]) == 0  # options anywhere
    for bad in (["save", CHAPTER, "--limit", "0"], ["load", CHAPTER, "--limit", "2"],
                ["load", CHAPTER, "--no-limit"], ["save", CHAPTER, "--limit", "2", "--no-limit"]):
        with pytest.raises(SystemExit):
            carry.main(bad)


def test_the_command_line_leaves_a_file_over_its_default_limit_behind_and_says_so(two_caches, tmp_path,
                                                                                  monkeypatch, capsys):
    """A checkpoint too large for git (chapter 6's digits gold standard late in its sampling is
    about 113 MB stored) is not committed by a plain ``save``: it stays, named on stderr;
    ``--no-limit`` carries it."""
    _there, folder = two_caches
    here = tmp_path / "here"
    big = _checkpoint(here, f"{CHAPTER}-hmc-main-89ab.pt", 3 << 20, random=True)   # 3 MiB that xz cannot shrink
    monkeypatch.setattr(carry, "DEFAULT_LIMIT_MIB", 2)
    assert carry.main(["save", CHAPTER, "--dir", str(folder)]) == 0
    err = capsys.readouterr().err
    assert f"left on this machine, over 2 MiB stored: checkpoints/{big.name}" in err and "--no-limit" in err
    assert carry.checkpoints(folder, CHAPTER) == []
    assert carry.main(["save", CHAPTER, "--dir", str(folder), "--no-limit"]) == 0
    assert "left on this machine" not in capsys.readouterr().err
    assert [p.name for p in carry.checkpoints(folder, CHAPTER)] == [big.name + ".xz"]


def test_a_large_file_is_carried_compressed_and_comes_back_whole(two_caches, monkeypatch, tmp_path):
    """Over COMPRESS_OVER bytes a file is stored as <name>.xz: the limit reads its stored size,
    the cache on the other machine gets the file's own bytes back and serves the entry."""
    there, folder = two_caches
    here = tmp_path / "here"
    big = _checkpoint(here, f"{CHAPTER}-hmc-main-89ab.pt", 3 << 20)     # 3 MiB that compresses well
    out = carry.save(CHAPTER, folder, limit=2)
    assert out["too large, left"] == [] and out["checkpoints"] == 1
    stored = folder / "checkpoints" / (big.name + ".xz")
    assert stored.is_file() and not (folder / "checkpoints" / big.name).exists()
    assert stored.stat().st_size < 2 << 20 and lzma.decompress(stored.read_bytes()) == big.read_bytes()
    assert carry.checkpoints(folder, CHAPTER) == [stored]
    monkeypatch.setattr(carry, "COMPRESS_OVER", 64)                      # every entry is compressed now
    assert carry.save(CHAPTER, folder)["saved"] == 3
    assert len(list(folder.glob(f"{CHAPTER}-boston_fits/*.pt.xz"))) == 3
    assert not list(folder.glob(f"{CHAPTER}-boston_fits/*.pt"))         # the plain copies are replaced
    assert all(e.current and e.name.endswith(".pt") for e in carry.entries(folder, CHAPTER))
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    out = carry.load(CHAPTER, folder)
    assert out["loaded"] == 3 and out["checkpoints"] == 1
    assert (there / "checkpoints" / big.name).read_bytes() == big.read_bytes()
    for i in range(3):
        assert cached(f"{CHAPTER}-boston_fits", "1", {"fit": i}, _never) == {"mse": 0.1 * i}


def test_carried_content_is_not_compressed_again(two_caches, monkeypatch, tmp_path):
    _there, folder = two_caches
    big = _checkpoint(tmp_path / "here", f"{CHAPTER}-hmc-main-89ab.pt", 3 << 20)
    carry.save(CHAPTER, folder)
    stored = folder / "checkpoints" / (big.name + ".xz")
    before = stored.stat().st_mtime_ns

    def refuse(*args, **kwargs):
        raise AssertionError("compressed again: the carried copy already holds this content")

    monkeypatch.setattr(carry.lzma, "compress", refuse)
    assert carry.save(CHAPTER, folder)["checkpoints"] == 1
    assert stored.stat().st_mtime_ns == before
    big.write_bytes(big.read_bytes()[::-1])                             # the run went on: new content
    with pytest.raises(AssertionError, match="compressed again"):
        carry.save(CHAPTER, folder)


def test_a_truncated_compressed_file_is_not_loaded(two_caches, monkeypatch, tmp_path):
    there, folder = two_caches
    monkeypatch.setattr(carry, "COMPRESS_OVER", 64)
    big = _checkpoint(tmp_path / "here", f"{CHAPTER}-hmc-main-89ab.pt", 1 << 16)
    carry.save(CHAPTER, folder)
    victim = min(folder.glob(f"{CHAPTER}-boston_fits/*.pt.xz"))
    victim.write_bytes(victim.read_bytes()[:-9])
    ckpt = folder / "checkpoints" / (big.name + ".xz")
    ckpt.write_bytes(ckpt.read_bytes()[: len(ckpt.read_bytes()) // 2])
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    with pytest.warns(cache.CacheCorruptionWarning):
        out = carry.load(CHAPTER, folder)
    assert out["loaded"] == 2 and out["checkpoints"] == 0 and out["not current, left"] == 1
    assert not (there / "checkpoints" / big.name).exists()


def test_a_carried_checkpoint_the_cache_no_longer_has_is_removed_unless_it_was_dropped(two_caches, tmp_path, capsys):
    """A fit that finished removed its checkpoint from the cache: save removes the carried copy (else
    every later piece would load it, carry it again and read it as a run in progress), except one
    named as dropped for a GPU piece's way back, whose carried older copy is still worth resuming."""
    _, folder = two_caches
    here = tmp_path / "here"
    finished = _checkpoint(here, f"{CHAPTER}-fit-a-0123.pt", 1024)
    dropped = _checkpoint(here, f"{CHAPTER}-fit-b-4567.pt", 2 << 20)     # carried xz-compressed
    going_on = _checkpoint(here, f"{CHAPTER}-fit-c-89ab.pt", 512)
    assert carry.save(CHAPTER, folder)["checkpoints"] == 3
    finished.unlink()
    dropped.unlink()
    assert carry.main(["save", CHAPTER, "--dir", str(folder), "--dropped", dropped.name]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoints gone from the cache, removed"] == 1 and out["checkpoints"] == 1
    assert [carry._plain_name(p) for p in carry.checkpoints(folder, CHAPTER)] == [dropped.name, going_on.name]
    carry.save(CHAPTER, folder)                                           # dropped no more: it finished too
    assert [p.name for p in carry.checkpoints(folder, CHAPTER)] == [going_on.name]


def test_saving_from_a_second_cache_keeps_the_checkpoints_the_first_saved(two_caches, monkeypatch, tmp_path):
    """Two processes of one run, each with its own cache, save into one folder: a carried
    checkpoint the saving cache never held is another fit still going, not a finished one, and
    stays; once a cache that held it no longer has it (the fit finished there), it goes."""
    there, folder = two_caches
    first = _checkpoint(tmp_path / "here", f"{CHAPTER}-fit-a-0123.pt", 1024)
    assert carry.save(CHAPTER, folder)["checkpoints"] == 1
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    second = _checkpoint(there, f"{CHAPTER}-fit-b-4567.pt", 512)
    out = carry.save(CHAPTER, folder)
    assert out["checkpoints"] == 1 and out["checkpoints gone from the cache, removed"] == 0
    assert out["checkpoints this cache never held, kept"] == 1
    assert sorted(carry._plain_name(p) for p in carry.checkpoints(folder, CHAPTER)) == [first.name, second.name]
    assert carry.load(CHAPTER, folder)["checkpoints"] == 1                 # the first's, into this cache
    (there / "checkpoints" / first.name).unlink()                          # its fit finished here
    second.unlink()                                                        # and so did this one
    out = carry.save(CHAPTER, folder)
    assert out["checkpoints gone from the cache, removed"] == 2 and carry.checkpoints(folder, CHAPTER) == []
    assert carry.held(there, CHAPTER) == {first.name, second.name}


def _git(repo, *args):
    import subprocess

    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def test_a_finished_runs_state_loads_from_the_commit_that_held_it(two_caches, monkeypatch, tmp_path, capsys):
    # a published run's carried state is deleted, but git keeps it: load it from the commit before
    there, _folder = two_caches
    repo = tmp_path / "book"
    folder = repo / "carry"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("carried runs\n")
    _git(repo, "init", "-q")
    assert carry.save(CHAPTER, folder)["saved"] == 3
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "state")
    _git(repo, "rm", "-q", "-r", f"carry/{CHAPTER}-boston_fits")
    _git(repo, "commit", "-q", "-m", "published: state deleted")
    assert not (folder / f"{CHAPTER}-boston_fits").exists()

    assert carry.main(["list", "--dir", str(folder), "--from", "HEAD~1"]) == 0
    assert f"{CHAPTER}: 3 entries (3 current" in capsys.readouterr().out
    assert carry.main(["list", "--dir", str(folder), "--from", "HEAD"]) == 0
    assert capsys.readouterr().out.startswith("nothing carried in")
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    assert carry.main(["load", CHAPTER, "--dir", str(folder), "--from", "HEAD~1"]) == 0
    assert json.loads(capsys.readouterr().out)["loaded"] == 3
    for i in range(3):
        assert cached(f"{CHAPTER}-boston_fits", "1", {"fit": i}, _never) == {"mse": 0.1 * i}
    assert not (folder / f"{CHAPTER}-boston_fits").exists()   # the checkout is left as it was


def test_loading_from_history_names_what_is_wrong(two_caches, tmp_path, capsys):
    _there, _folder = two_caches
    repo = tmp_path / "book"
    (repo / "carry").mkdir(parents=True)
    (repo / "carry" / "README.md").write_text("x\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    for argv, said in [(["load", CHAPTER, "--from", "nosuchrev"], "git holds no carry/ at 'nosuchrev'"),
                       (["load", CHAPTER, "--from", "HEAD", "--dir", str(repo / "later")], "git holds no later/"),
                       (["save", CHAPTER, "--from", "HEAD"], "--from is for load and list"),
                       (["load", CHAPTER, "--from", "HEAD", "--dir", str(tmp_path / "elsewhere")], "in no git checkout")]:
        if "--dir" not in argv:
            argv = [*argv, "--dir", str(repo / "carry")]
        with pytest.raises(SystemExit):
            carry.main(argv)
        assert said in capsys.readouterr().err, argv
