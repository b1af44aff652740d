"""Which checkpoints a chapter's run continues (tools/longruns/checkpoint_names.py), against the
checkpoints its stages really leave when stopped at their budget; and the stranded ones (of
other code) that carry neither keeps nor loads."""

from __future__ import annotations

import dataclasses
import json

import pytest

from symlib.book import cache, pieces
from symlib.book.chapter import StageContext
from symlib.chapters import declared, get_profile
from symlib.inference.hmc_resumable import BudgetExhausted
from tools.longruns import carry
from tools.longruns import checkpoint_names as checkpoints

CHECKPOINTING_STAGES = {"01_ortho_skip": ("main", "robustness"), "02b_posterior_mmd": ("samples",), "03_sgm_vi": ("interp",),
                        "05_rebasin_hmc": ("bayes", "robust"), "06_synthesis": ("gold",)}
"""Each chapter's stages that checkpoint inside a fit (read from their code, independently of
:data:`symlib.chapters.checkpointed.CHECKPOINTED`)."""


def _results(chapter, stage, config, seed, done):
    """The results of the stages ``stage`` needs, computed here without a budget."""
    for name in stage.needs:
        if name not in done:
            need = chapter.stage(name)
            ctx = _ctx(chapter, need, config, seed, done)
            done[name] = need.compute(ctx) if need.items is None else {   # a fan-out: by item
                item: need.compute(ctx, item) for item in need.items(ctx.config)}
    return {name: done[name] for name in stage.needs}


def _ctx(chapter, stage, config, seed, done):
    return StageContext(chapter.name, stage, stage.view(config, chapter.name), "cpu",
                        _results(chapter, stage, config, seed, done), seed)


@pytest.mark.parametrize("name", sorted(CHECKPOINTING_STAGES))
def test_the_names_are_those_the_stages_leave_when_stopped(name, tmp_path, monkeypatch):
    """Every checkpointing stage (every item of a fan-out) of the smoke run, stopped at a budget it
    has already spent, leaves its checkpoint: together they are exactly what ``expected`` names,
    and another seed or device names others."""
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path / "results"))
    chapter, config, seed, done, fits = declared(name), get_profile(name, "smoke"), 3, {}, 0
    for stage_name in CHECKPOINTING_STAGES[name]:
        stage = chapter.stage(stage_name)
        ctx = _ctx(chapter, stage, config, seed, done)
        items = list(stage.items(ctx.config)) if stage.items is not None else [None]
        for item in items:
            fits += 1
            past = dataclasses.replace(ctx, deadline=0.0)   # a deadline long past
            with pytest.raises(BudgetExhausted):
                stage.compute(past) if item is None else stage.compute(past, item)
    left = sorted(p.name for p in (cache.cache_dir() / "checkpoints").glob("*.pt"))
    assert len(left) == fits   # one checkpoint per fit stopped
    assert checkpoints.expected(name, "smoke", seed=seed, device="cpu") == left
    assert not set(checkpoints.expected(name, "smoke", seed=0, device="cpu")) & set(left)
    assert not set(checkpoints.expected(name, "smoke", seed=seed, device="cuda (NVIDIA H100 80GB HBM3)")) & set(left)
    assert checkpoints.expected(name, "smoke", seed=seed, device="cuda:1") == \
        checkpoints.expected(name, "smoke", seed=seed, device="cuda")


def test_a_chapter_that_does_not_checkpoint_names_none_and_bad_names_are_refused():
    assert checkpoints.expected("04_constrained_models", "paper") == []
    assert checkpoints.live("04_constrained_models", [{"profile": "paper", "device": "cpu"}]) is None
    with pytest.raises(ValueError, match="valid chapters"):
        checkpoints.expected("05_rebasin", "paper")
    with pytest.raises(ValueError, match="profile"):
        checkpoints.expected("05_rebasin_hmc", "papr")


def test_live_is_the_union_over_the_recorded_runs():
    entries = [{"profile": "paper", "device": "cuda (NVIDIA H200)", "outcome": "budget"},          # seed 0: before pieces had it
               {"profile": "smoke", "device": "cpu", "seed": 2, "outcome": "complete"},
               {"profile": "gone", "device": "cpu", "outcome": "complete"}]                 # a profile since removed
    assert checkpoints.runs(entries) == {("paper", 0, "cuda"), ("smoke", 2, "cpu"), ("gone", 0, "cpu")}
    got = checkpoints.live("05_rebasin_hmc", entries)
    assert got == set(checkpoints.expected("05_rebasin_hmc", "paper", seed=0, device="cuda")) | set(
        checkpoints.expected("05_rebasin_hmc", "smoke", seed=2, device="cpu"))
    assert checkpoints.live("05_rebasin_hmc", []) is None, "no run recorded: nothing is known to be stranded"
    assert checkpoints.live("05_rebasin_hmc", entries[2:]) == set()


CH = "05_rebasin_hmc"


def _file(root, name, size=1024):
    path = root / "checkpoints" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(range(256)) * (size // 256))
    return path


def test_carry_drops_a_checkpoint_no_recorded_run_continues(tmp_path, monkeypatch, capsys):
    """A checkpoint of earlier code (its name no run of this code gives) in the cache is not
    carried, one already carried is removed, and ``load`` does not put one in a cache; the run's
    own checkpoint and another recorded run's (the smoke profile's) travel as before."""
    here, there, folder = tmp_path / "here", tmp_path / "there", tmp_path / "carry"
    monkeypatch.setenv("SYMLIB_CACHE", str(here))
    monkeypatch.setenv("SYMLIB_RESULTS", str(here / "results"))
    pieces.log_piece(CH, profile="paper", device="cuda (NVIDIA H100 80GB HBM3)", seconds=480, outcome="budget", seed=0)
    pieces.log_piece(CH, profile="smoke", device="cpu", seconds=1, outcome="budget", seed=0)
    assert json.loads(pieces.pieces_path(CH).read_text())[0]["seed"] == 0
    (paper_main, *_), (smoke_main, *_) = (sorted(checkpoints.expected(CH, p, device=d), key=lambda n: "main" not in n)
                                          for p, d in (("paper", "cuda"), ("smoke", "cpu")))
    assert "-main-" in paper_main and "-main-" in smoke_main
    old_code = CH + "-bayes-main-0123456789abcdef.pt"
    for name in (paper_main, smoke_main, old_code):
        _file(here, name)
    _file(folder, CH + "-bayes-fixed_step-fedcba9876543210.pt")                   # carried before the code changed
    out = carry.save(CH, folder)
    assert out["checkpoints"] == 2 and out["checkpoints no run of this code continues, removed"] == 1
    assert sorted(p.name for p in carry.checkpoints(folder, CH)) == sorted([paper_main, smoke_main])
    _file(folder, old_code)                                                         # as if carried by an older save
    assert carry.main(["list", CH, "--dir", str(folder)]) == 0
    assert "3 checkpoints" in (said := capsys.readouterr().out) and "1 that no recorded run continues" in said
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    monkeypatch.setenv("SYMLIB_RESULTS", str(there / "results"))
    got = carry.load(CH, folder)
    assert got["checkpoints"] == 2 and got["checkpoints no run of this code continues, left"] == 1
    assert sorted(p.name for p in carry.checkpoints(there, CH)) == sorted([paper_main, smoke_main])


def test_without_a_recorded_run_every_checkpoint_travels(tmp_path, monkeypatch):
    """A first piece killed before it could log itself leaves no run in the pieces file: nothing is
    known to be stranded, so nothing is dropped."""
    here, folder = tmp_path / "here", tmp_path / "carry"
    monkeypatch.setenv("SYMLIB_CACHE", str(here))
    monkeypatch.setenv("SYMLIB_RESULTS", str(here / "results"))
    _file(here, CH + "-bayes-main-0123456789abcdef.pt")
    assert carry.save(CH, folder)["checkpoints"] == 1


def test_the_command_line_prints_names_or_the_existing_paths(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path))
    names = checkpoints.expected("06_synthesis", "smoke", device="cuda")
    assert checkpoints.main(["06_synthesis", "--profile", "smoke", "--device", "cuda"]) == 0
    assert capsys.readouterr().out.split() == names
    _file(tmp_path, names[1])
    _file(tmp_path, "06_synthesis-gold-sinc-0123456789abcdef.pt")
    assert checkpoints.main(["06_synthesis", "--profile", "smoke", "--device", "cuda", "--existing"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "checkpoints" / names[1])]
    with pytest.raises(SystemExit):
        checkpoints.main(["06_synthesis", "--profile", "nope"])
    assert "profile" in capsys.readouterr().err


def test_names_the_device_gave_are_kept_whatever_this_machine_would_name_them(tmp_path, monkeypatch, capsys):
    """The machine that ran the piece may name its run's checkpoint otherwise (other data found
    there: full MNIST's files enter chapter 5's name): ``--live`` keeps that one; the rest of
    other code still goes."""
    here, folder = tmp_path / "here", tmp_path / "carry"
    monkeypatch.setenv("SYMLIB_CACHE", str(here))
    monkeypatch.setenv("SYMLIB_RESULTS", str(here / "results"))
    pieces.log_piece(CH, profile="paper", device="cuda (NVIDIA H200)", seconds=480, outcome="budget", seed=0)
    theirs = _file(here, CH + "-bayes-main-00000000000000aa.pt")
    _file(here, CH + "-bayes-main-00000000000000bb.pt")
    assert carry.main(["save", CH, "--dir", str(folder), "--live", theirs.name]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoints"] == 1
    assert [p.name for p in carry.checkpoints(folder, CH)] == [theirs.name]
    with pytest.raises(SystemExit):
        carry.main(["load", CH, "--dir", str(folder), "--live", theirs.name])


def _names_under(monkeypatch, code_hash, chapter, profile, device):
    """``expected``'s names had every stage of ``chapter`` hashed to ``code_hash``, and the
    experiments the naming asked for (computed here by patching the fingerprint directly)."""
    real, asked = cache.fingerprint, []

    def fake(experiment):
        asked.append(experiment)
        return {**real(experiment), "code_hash": code_hash}

    with monkeypatch.context() as m:
        m.setattr(cache, "fingerprint", fake)
        names = checkpoints.expected(chapter, profile, device=device)
    return names, sorted(set(asked))


@pytest.mark.parametrize("joined", [True, False])
def test_a_checkpoint_of_code_proven_equivalent_travels_under_this_codes_name(tmp_path, monkeypatch, joined):
    """A checkpoint written under a stage code hash that the registry joins to this code's (a
    move proven to change no number) is the same fit: ``save`` renames it in the cache and carries
    it under the name this code gives, and ``load`` puts it there under that name; without the
    registry's entry it is stranded, as before."""
    here, there, folder = tmp_path / "here", tmp_path / "there", tmp_path / "carry"
    monkeypatch.setenv("SYMLIB_CACHE", str(here))
    monkeypatch.setenv("SYMLIB_RESULTS", str(here / "results"))
    registry = tmp_path / "code_equivalences.json"
    monkeypatch.setattr("symlib.book.equivalence.registry_path", lambda root=None: registry)
    pieces.log_piece(CH, profile="smoke", device="cpu", seconds=1, outcome="budget", seed=0)
    old_names, experiments = _names_under(monkeypatch, "0" * 16, CH, "smoke", "cpu")
    now = checkpoints.expected(CH, "smoke", device="cpu")
    assert experiments and not set(old_names) & set(now)
    if joined:
        from symlib.book import equivalence
        equivalence.add([(x, "0" * 16, cache.fingerprint(x)["code_hash"]) for x in experiments], "a test")
    assert checkpoints.bridged(CH, pieces.read(CH)) == (dict(zip(old_names, now)) if joined else {})
    _file(here, old_names[0], size=2048)
    out = carry.save(CH, folder)
    assert out["checkpoints renamed for proven-equivalent code"] == joined
    carried = [p.name for p in carry.checkpoints(folder, CH)]
    assert carried == ([now[0]] if joined else [])
    assert [p.name for p in carry.checkpoints(here, CH)] == [now[0] if joined else old_names[0]]
    # a carry folder saved before the registry's entry: load gives its checkpoint this code's name
    _file(folder, old_names[0], size=2048)
    for p in carry.checkpoints(folder, CH):
        if p.name != old_names[0]:
            p.unlink()
    monkeypatch.setenv("SYMLIB_CACHE", str(there))
    monkeypatch.setenv("SYMLIB_RESULTS", str(there / "results"))
    got = carry.load(CH, folder)
    assert [p.name for p in carry.checkpoints(there, CH)] == ([now[0]] if joined else [])
    assert got["checkpoints"] == joined and got["checkpoints no run of this code continues, left"] == (not joined)
