"""Chapter 1 end to end in the smoke profile, plus the claim rules and the profiles."""

import copy
import math

import matplotlib
import numpy as np
import pytest
import torch

from symlib.chapters import get_profile, ortho_skip
from symlib.chapters.ortho_skip import OrthoSkipProfile

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("SYMLIB_CACHE", str(tmp_path_factory.mktemp("cache")))
    try:
        yield ortho_skip.run("smoke", seed=0, device="cpu")
    finally:
        mp.undo()


def test_smoke_run_end_to_end(smoke):
    names = [v["name"] for v in ortho_skip.VARIANTS]
    assert smoke["profile"] == "smoke" and smoke["seed"] == 0
    assert [row["variant"] for row in smoke["metrics"]] == names
    for row in smoke["metrics"]:
        for key in ("train_rmse", "test_loglik", "epistemic_sd_in", "epistemic_sd_out", "elbo", "kl"):
            assert math.isfinite(row[key]), (row["variant"], key)
        assert 0.0 <= row["share_at_prior"] <= 1.0
        assert row["noise_sd"] == pytest.approx(0.2)  # fixed noise
    fits = smoke["fits"]
    n_grid = smoke["config"]["n_grid"]
    for key in ("mean", "epistemic_sd", "aleatoric_sd", "total_sd"):
        assert fits[key].shape == (4, n_grid)
    assert np.allclose(fits["total_sd"] ** 2, fits["epistemic_sd"] ** 2 + fits["aleatoric_sd"] ** 2, rtol=1e-5)
    assert fits["x_grid"][0] == -2.0 and fits["x_grid"][-1] == 2.0
    assert fits["x_train"].min() >= -1.0 and fits["x_train"].max() <= 1.0
    g = smoke["gap"]
    assert abs(g["gap"][0]) < 1e-9 and np.all(g["gap"] <= g["log_n"] + 1e-9)
    assert smoke["history"]["elbo"].shape[0] == 4
    claims = ortho_skip.claims(smoke)
    assert len(claims) == 5 and len({c["id"] for c in claims}) == 5
    for c in claims:
        assert set(c) == {"id", "text", "paper", "ours", "holds"}
        assert c["holds"] is None  # smoke cannot judge
        assert all(isinstance(c[k], str) and c[k] for k in ("id", "text", "paper", "ours"))
    import matplotlib.pyplot as plt

    before = dict(matplotlib.rcParams)
    for fig in (ortho_skip.plot_fits(smoke), ortho_skip.plot_elbo_gap(smoke)):
        assert isinstance(fig, matplotlib.figure.Figure)
        plt.close(fig)
    assert dict(matplotlib.rcParams) == before  # no global style side effects


def test_smoke_run_is_cached_and_deterministic(smoke, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path))
    profile = get_profile("01_ortho_skip", "smoke")
    threads = torch.get_num_threads()
    fresh = ortho_skip.run(profile, seed=0, device="cpu")  # recomputed in an empty cache
    assert torch.get_num_threads() == threads  # run() restores the thread setting
    again = ortho_skip.run(profile, seed=0, device="cpu")  # loaded
    for a, b in ((fresh, smoke), (again, smoke)):
        for ra, rb in zip(a["metrics"], b["metrics"]):
            assert ra["elbo"] == rb["elbo"] and ra["train_rmse"] == rb["train_rmse"]
        assert np.array_equal(a["fits"]["mean"], b["fits"]["mean"])
    assert len(list(tmp_path.rglob("*.pt"))) == 1


def test_claim_rules_on_synthetic_results(smoke):
    fake = copy.deepcopy(smoke)
    fake["config"]["judge"] = True
    fake["reference"]["oracle_train_rmse"] = 0.2
    rows = {r["variant"]: r for r in fake["metrics"]}
    rows["plain"].update(train_rmse=0.35, epistemic_sd_in=0.1, epistemic_sd_out=0.1, share_at_prior=0.9)
    rows["ortho_skip"].update(train_rmse=0.21, epistemic_sd_in=0.05, epistemic_sd_out=0.4, share_at_prior=0.3)
    verdicts = {c["id"]: c["holds"] for c in ortho_skip.claims(fake)}
    assert verdicts["plain-underfits"] and verdicts["skip-ood-uncertainty"] and verdicts["plain-collapses-to-prior"]
    assert verdicts["gap-bounded"] is True and verdicts["gap-bound-as-printed"] is False
    # a skip net that is wider everywhere but does not grow away from the data does not count
    rows["ortho_skip"].update(epistemic_sd_in=2.0, epistemic_sd_out=1.0, train_rmse=0.3)
    verdicts = {c["id"]: c["holds"] for c in ortho_skip.claims(fake)}
    assert verdicts["skip-ood-uncertainty"] is False and verdicts["plain-underfits"] is False


def test_profiles():
    paper = get_profile("01_ortho_skip", "paper")
    assert isinstance(paper, OrthoSkipProfile)
    assert (paper.n_steps, paper.n_train_samples, paper.n_test_samples) == (200_000, 64, 256)
    assert paper.hidden_widths == (32,) * 5 and paper.n_train == 128 and paper.noise_sd == 0.2
    assert paper.anneal_fraction == 0.5
    quick = get_profile("01_ortho_skip", "quick")
    assert quick.hidden_widths == paper.hidden_widths and quick.n_train == paper.n_train
    assert quick.judge and not get_profile("01_ortho_skip", "smoke").judge
    with pytest.raises(ValueError, match="valid profiles"):
        get_profile("01_ortho_skip", "huge")
