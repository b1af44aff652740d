"""Chapter 6's gold standard in resumable pieces (symlib.chapters.synthesis.gold), checked against
the computation it replaced: hmc.sample keeping every draw, then thinned, diagnosed and
averaged whole."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from symlib import symmetry as sym
from symlib.chapters import get_profile
from symlib.chapters.synthesis import gold as G
from symlib.chapters.synthesis import load_benchmark, stages
from symlib.chapters.synthesis.benchmarks import flat, potential, thin
from symlib.inference import hmc
from symlib.inference.hmc_resumable import BudgetExhausted
from symlib.metrics.mcmc import summary
from symlib.nn.mlp import init_mlp, mlp_forward

# more draws than thinned ones, so that the record keeps a strict subset
CONFIG = dataclasses.replace(get_profile("06_synthesis", "smoke"), hmc_chains=4, hmc_samples=15, hmc_thin=2,
                             mmd_gold=12, n_pred_samples=5, diag_points=7)


def _whole(b, config, seed):
    """The replaced computation: every draw kept (chain-major), then reduced whole."""
    g = torch.Generator().manual_seed(seed)
    chains = [init_mlp(b.spec, g) for _ in range(config.hmc_chains)]
    init = {k: torch.stack([c[k] for c in chains]) for k in chains[0]}
    res = hmc.sample(potential(b, b.x, b.y), init, n_burnin=config.hmc_burnin, n_samples=config.hmc_samples,
                     n_leapfrog=config.hmc_leapfrog, step_size=1e-2, generator=g, thin=config.hmc_thin,
                     progress=False)
    rows = res.samples.batch(range(len(res.samples)))          # (iteration, chain)
    c, t = config.hmc_chains, config.hmc_samples
    w = {k: v.reshape(t, c, *v.shape[1:]).transpose(0, 1).reshape(c * t, *v.shape[1:]) for k, v in rows.items()}
    res.samples.close()
    f = torch.func.vmap(mlp_forward, in_dims=(0, None, None))(w, b.x_test[: config.diag_points], b.spec)
    if b.task == "classification":
        f = torch.log_softmax(f, -1).gather(-1, b.y_test[: config.diag_points].expand(c * t, -1)[..., None])
    weights = flat(w)
    canon = flat(sym.canonicalise({k: v.double() for k, v in w.items()}, b.spec))
    cols = np.linspace(0, weights.shape[1] - 1, min(G.DIAG_WEIGHTS, weights.shape[1])).round().astype(int)
    out = {"weights": w, "accept": res.accept_rate.mean().item(),
           "pred": f[..., 0].reshape(c, t, -1).double().numpy(),
           "raw": weights[:, cols].reshape(c, t, -1).numpy(), "canon": canon[:, cols].reshape(c, t, -1).numpy()}
    if b.task == "classification":
        out["probs_test"] = torch.softmax(torch.func.vmap(mlp_forward, in_dims=(0, None, None))(w, b.x_test, b.spec),
                                          -1).mean(0)
    return out


@pytest.fixture(scope="module")
def runs():
    """``name -> (benchmark, _whole(...), gold_standard(...))`` of one benchmark, both runs from
    seed 3, each computed once for the module's tests (which only read them)."""
    done = {}

    def run(name: str):
        if name not in done:
            b = load_benchmark(name, CONFIG, "cpu")
            done[name] = b, _whole(b, CONFIG, seed=3), G.gold_standard(b, CONFIG, torch.Generator().manual_seed(3), "cpu")
        return done[name]

    return run


@pytest.mark.parametrize("name", ["sinc", "digits"])
def test_the_record_keeps_exactly_the_compared_draws_of_the_whole_run(runs, name):
    b, whole, gold = runs(name)
    total = CONFIG.hmc_chains * CONFIG.hmc_samples
    assert gold["n_draws"] == total and 0 < len(gold["index"]) < total
    assert gold["accept_rate"] == whole["accept"], "the same chains as hmc.sample's"
    # the draws every comparison reads: the same tensors as thinning every draw
    ref = stages.gold_reference(gold, CONFIG)
    for k, v in thin(whole["weights"], CONFIG.mmd_gold).items():
        assert torch.equal(ref[k], v)
    first = (CONFIG.hmc_chains // 2) * CONFIG.hmc_samples
    halves = ({k: v[:first] for k, v in whole["weights"].items()}, {k: v[first:] for k, v in whole["weights"].items()})
    for got, w, n in zip(G.floor_halves(CONFIG), halves, (CONFIG.n_pred_samples, CONFIG.mmd_gold), strict=True):
        for k, v in thin(w, n).items():
            assert torch.equal(G.gold_draws(gold, got)[k], v)
    # the diagnostics: computed one transition at a time instead of on every draw at once
    for what, x in (("predictions", whole["pred"]), ("raw weights", whole["raw"]),
                    ("canonical weights", whole["canon"])):
        expect = summary(x)._asdict()
        assert gold["diagnostics"][what] == pytest.approx(expect, rel=1e-9, nan_ok=True), what
    if b.task == "classification":
        torch.testing.assert_close(gold["probs_test"], whole["probs_test"], rtol=0, atol=1e-6)
        assert gold["probs_ood"].shape == (len(b.x_ood), 10)
        assert torch.allclose(gold["probs_ood"].sum(-1), torch.ones(len(b.x_ood)))


def test_a_draw_the_record_does_not_keep_is_refused_by_name(runs):
    _, _, gold = runs("sinc")
    missing = sorted(set(range(gold["n_draws"])) - set(gold["index"].tolist()))
    with pytest.raises(KeyError, match=f"does not keep draws \\[{missing[0]}"):
        G.gold_draws(gold, [missing[0]])


def test_stopped_after_every_transition_and_continued_it_is_the_uninterrupted_run(runs, tmp_path):
    b, _, whole = runs("digits")
    ckpt, pieces = tmp_path / "gold.pt", 0
    while True:   # a deadline long past: one transition per piece
        pieces += 1
        try:
            split = G.gold_standard(b, CONFIG, torch.Generator().manual_seed(3), "cpu", checkpoint=ckpt, deadline=0.0)
            break
        except BudgetExhausted as err:
            assert ckpt.is_file() and "chapter 6's gold standard (digits)" in str(err)
    assert pieces == CONFIG.hmc_burnin + CONFIG.hmc_samples * CONFIG.hmc_thin == split["pieces"]
    assert np.array_equal(split["index"], whole["index"])
    for k in whole["draws"]:
        assert torch.equal(split["draws"][k], whole["draws"][k])
    assert split["diagnostics"] == whole["diagnostics"]
    assert torch.equal(split["probs_test"], whole["probs_test"]) and torch.equal(split["probs_ood"], whole["probs_ood"])
    assert split["accept_rate"] == whole["accept_rate"] and split["n_grad_evals"] == whole["n_grad_evals"]


def test_the_stage_continues_a_gold_standard_stopped_at_its_budget(sandbox, monkeypatch):
    """Through the chapter: a piece stops in the gold stage keeping its checkpoints, the next
    continues them and removes them, and the numbers are those of one uninterrupted run."""
    from symlib.book import cache
    from symlib.chapters.synthesis import CHAPTER

    config = get_profile("06_synthesis", "smoke")
    alone = CHAPTER.stage("gold")
    with pytest.raises(BudgetExhausted):   # a deadline long past
        stages._gold_item(_context(alone, config, deadline=0.0), "sinc")
    left = sorted((cache.cache_dir() / "checkpoints").glob("06_synthesis-gold-sinc-*.pt"))
    assert len(left) == 1 and left[0] == stages.gold_checkpoint(_context(alone, config), "sinc")
    continued = stages._gold_item(_context(alone, config), "sinc")
    assert not left[0].exists(), "a finished item's checkpoint is spent"
    assert continued["pieces"] == 2
    fresh = stages._gold_item(_context(alone, config), "sinc")
    assert fresh["pieces"] == 1 and fresh["diagnostics"] == continued["diagnostics"]
    assert _untimed(fresh["floor"]) == _untimed(continued["floor"])
    for k in fresh["reference"]:
        assert torch.equal(fresh["reference"][k], continued["reference"][k])


@pytest.mark.parametrize("name", ["sinc", "digits"])
def test_the_stage_record_keeps_the_reference_draws_and_the_floor_not_the_floors_draws(runs, name):
    """The cached gold record: the mmd_gold draws the remedies are compared with (the same tensors
    as thinning every draw of the run), their test outputs, and the floor row computed from the
    whole record, whose extra draws it drops."""
    b, whole, full = runs(name)
    record = stages.gold_record(b, full, CONFIG)
    assert "draws" not in record and "index" not in record
    expect = thin(whole["weights"], CONFIG.mmd_gold)
    assert record["reference"].keys() == expect.keys()
    for k, v in expect.items():
        assert torch.equal(record["reference"][k], v)
    assert len(full["index"]) > CONFIG.mmd_gold, "the whole record keeps more draws than the stage's"
    assert _untimed(record["floor"]) == _untimed(stages.gold_floor(b, full, CONFIG))
    assert record["floor"]["MMD raw"] > 0 and record["floor"]["MMD NS"] > 0
    if b.task == "regression":
        f = torch.func.vmap(mlp_forward, in_dims=(0, None, None))(expect, b.x_test, b.spec)[..., 0]
        torch.testing.assert_close(record["f_ref"], f, rtol=0, atol=0)
    else:
        assert record["f_ref"] is None and torch.equal(record["probs_test"], full["probs_test"])
    assert {k for k in stages.GOLD_KEEPS if k in full} <= set(record)


def test_the_checkpoint_names_its_settings():
    config = get_profile("06_synthesis", "smoke")
    from symlib.chapters.synthesis import CHAPTER

    stage = CHAPTER.stage("gold")
    base = stages.gold_checkpoint(_context(stage, config), "digits")
    assert base.name.startswith("06_synthesis-gold-digits-")
    assert stages.gold_checkpoint(_context(stage, config), "sinc") != base
    assert stages.gold_checkpoint(_context(stage, dataclasses.replace(config, hmc_samples=11)), "digits") != base
    assert stages.gold_checkpoint(_context(stage, config, seed=1), "digits") != base
    assert stages.gold_checkpoint(_context(stage, dataclasses.replace(config, vi_epochs=7)), "digits") == base, \
        "a field the gold stage does not read leaves its checkpoint alone"


def _untimed(row: dict) -> dict:
    """A metrics row without what measures the machine (wall time; peak GPU memory, NaN here)."""
    return {k: v for k, v in row.items() if k not in ("time (s)", "peak GPU (MB)")}


def _context(stage, config, seed=0, deadline=None):
    from symlib.book.chapter import StageContext

    return StageContext("06_synthesis", stage, stage.view(config), "cpu", {}, seed, deadline)


def test_the_progress_of_a_stopped_gold_standard_is_read_from_its_checkpoint(tmp_path, monkeypatch):
    """Length, acceptance and the mixing of the draws so far, against hmc.sample run for that
    many draws from the same seed (the same first draws: adaptation ends with the burn-in)."""
    from symlib.chapters.synthesis.progress import checkpoint_progress, write_progress

    b = load_benchmark("digits", CONFIG, "cpu")
    ckpt = tmp_path / "06_synthesis-gold-digits-0123456789abcdef.pt"
    draws = 6
    done = CONFIG.hmc_burnin + draws * CONFIG.hmc_thin
    for _ in range(done):   # one transition per piece
        with pytest.raises(BudgetExhausted):
            G.gold_standard(b, CONFIG, torch.Generator().manual_seed(2), "cpu", checkpoint=ckpt, deadline=0.0)
    got = checkpoint_progress(ckpt)
    assert (got["run"], got["chains"], got["transitions"], got["draws_per_chain"]) == \
        ("gold digits", CONFIG.hmc_chains, done, draws)
    assert got["total"] == CONFIG.hmc_burnin + CONFIG.hmc_samples * CONFIG.hmc_thin
    assert got["quantity"] == f"the predictions at {CONFIG.diag_points} test inputs"
    short = _whole(b, dataclasses.replace(CONFIG, hmc_samples=draws), seed=2)
    expect = summary(short["pred"])._asdict()
    assert got["rhat"] == pytest.approx(expect["rhat_max"], rel=1e-9)
    assert got["bulk_ess"] == pytest.approx(expect["bulk_ess_min"], rel=1e-9)
    assert got["accept"] == pytest.approx(short["accept"], rel=1e-12)
    import os
    import shutil

    older = tmp_path / "06_synthesis-gold-digits-00000000000000aa.pt"
    shutil.copy(ckpt, older)
    os.utime(older, (1, 1))   # an abandoned checkpoint of the same benchmark: not reported
    out = write_progress(tmp_path / "progress" / "06.chains.json", [older, ckpt])
    assert [(r["run"], r["digest"]) for r in json.loads(out.read_text())] == [("gold digits", "0123456789abcdef")]
    with pytest.raises(ValueError, match="not a chapter-6 gold-standard checkpoint name"):
        checkpoint_progress(tmp_path / "gold.pt")
