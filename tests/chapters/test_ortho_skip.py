"""Chapter 1 end to end in the smoke profile, plus the claim rules and the profiles."""

import dataclasses
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch

from symlib.book.results import Claim, Kind
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
    claims = [Claim(**c) for c in ortho_skip.claims(smoke)]
    assert [c.id for c in claims] == ["plain-underfits", "skip-ood-uncertainty", "plain-collapses-to-prior",
                                      "gap-bounded"]
    for c in claims:
        assert c.holds is None and c.verdict.startswith("not judged: profile sized to judge")  # smoke
        assert c.criterion and c.preconditions
    assert [e["id"] for e in ortho_skip.errata(smoke)] == ["gap-bound-layers"]
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


def _made_up(plain=None, skip=None, elbo_plain=None, gap=None, se=None, judge=True):
    """A results dict with known answers: floor 0.2; plain underfits, skip fits and grows its sd
    away from the data, plain collapses more; flat ELBOs; a gap curve inside [0, log N]."""
    rows = {v["name"]: {"variant": v["name"], "train_rmse": 0.2, "test_loglik": -0.3, "epistemic_sd_in": 0.1,
                        "epistemic_sd_out": 0.2, "share_at_prior": 0.5} for v in ortho_skip.VARIANTS}
    rows["plain"].update({"train_rmse": 0.35, "epistemic_sd_in": 0.1, "epistemic_sd_out": 0.1,
                          "share_at_prior": 0.9, **(plain or {})})
    rows["ortho_skip"].update({"train_rmse": 0.21, "epistemic_sd_in": 0.05, "epistemic_sd_out": 0.4,
                               "share_at_prior": 0.3, **(skip or {})})
    flat = -100.0 + 0.01 * np.sin(np.arange(80))  # noise far below 1 % of the level
    elbo = np.stack([flat] * 4)
    if elbo_plain is not None:
        elbo[0] = elbo_plain
    log_n = math.log(576)
    gaps = np.array([0.0, 1.0, 4.0, log_n - 1e-3]) if gap is None else np.asarray(gap)
    return {
        "config": {"judge": judge, "prior_kl_threshold": 0.1},
        "metrics": list(rows.values()),
        "reference": {"oracle_train_rmse": 0.2},
        "history": {"elbo": elbo},
        "gap": {"widths": [1, 4, 4, 1], "n_permutations": 576, "scales": np.array([0.0, 0.1, 1.0, 10.0]),
                "gap": gaps, "standard_error": np.full(len(gaps), 0.01 if se is None else se),
                "log_n": log_n, "log_n_paper": math.log(24)},
    }


def _verdicts(results):
    return {c["id"]: Claim(**c) for c in ortho_skip.claims(results)}


def test_each_criterion_on_made_up_results():
    v = _verdicts(_made_up())
    assert all(c.holds is True for c in v.values()), {k: c.verdict for k, c in v.items()}
    assert v["gap-bounded"].kind is Kind.CODE_CHECK
    assert all(v[k].kind is Kind.CLAIM for k in ("plain-underfits", "skip-ood-uncertainty", "plain-collapses-to-prior"))
    # the skip net underfits too: the underfitting contrast does not hold
    assert _verdicts(_made_up(skip={"train_rmse": 0.3}))["plain-underfits"].holds is False
    # a skip net wider everywhere but not growing away from the data does not count
    wide = _verdicts(_made_up(skip={"epistemic_sd_in": 2.0, "epistemic_sd_out": 1.0}))
    assert wide["skip-ood-uncertainty"].holds is False
    assert _verdicts(_made_up(skip={"share_at_prior": 0.95}))["plain-collapses-to-prior"].holds is False
    log_n = math.log(576)
    assert _verdicts(_made_up(gap=[0.0, 1.0, log_n + 0.5, log_n]))["gap-bounded"].holds is False  # above log N
    assert _verdicts(_made_up(gap=[0.0, 1.0, 4.0, 3.0]))["gap-bounded"].holds is False  # never reaches log N


def test_unmet_preconditions_give_not_judged():
    rising = np.linspace(-1000.0, -100.0, 80)  # still climbing: 10 % windows differ by ~10 %
    v = _verdicts(_made_up(elbo_plain=rising))
    for cid in ("plain-underfits", "skip-ood-uncertainty", "plain-collapses-to-prior"):
        assert v[cid].holds is None and "ELBO of plain" in v[cid].verdict, v[cid].verdict
    assert v["gap-bounded"].holds is True  # the gap check does not rest on the VI fit
    noisy = _verdicts(_made_up(se=1.0))["gap-bounded"]  # 1 nat > 5 % of log 576
    assert noisy.holds is None and "standard error" in noisy.verdict
    smoke = _verdicts(_made_up(judge=False))
    assert all(c.holds is None and "profile" in c.verdict for c in smoke.values())


def test_erratum_names_the_printed_bound():
    (e,) = ortho_skip.errata(_made_up())
    assert e["id"] == "gap-bound-layers" and "l=2" in e["paper_says"]
    assert f"{math.log(24):.3f}" in e["correction"] and f"{math.log(576):.3f}" in e["correction"]


def test_robustness_tables_report_which_choice_flips_a_verdict():
    main = _made_up(skip={"train_rmse": 0.3})  # as run: the skip net underfits too
    sweep = [
        {"field": "learning_rate", "value": 1e-2, "choice": "learning rate",
         "results": {k: v for k, v in _made_up().items() if k != "gap"}},  # here it fits
        {"field": "learn_noise", "value": True, "choice": "noise model",
         "results": {k: v for k, v in _made_up(skip={"train_rmse": 0.3}, elbo_plain=np.linspace(-1e3, -1e2, 80)).items()
                     if k != "gap"}},
    ]
    tables = ortho_skip.robustness_tables(main, sweep)
    assert set(tables) == {"plain-underfits", "skip-ood-uncertainty", "plain-collapses-to-prior"}
    t = tables["plain-underfits"]
    assert t["verdict"].tolist() == ["does not hold", "holds", "not judged"]
    assert "ELBO of plain" in t["failed preconditions"].iloc[2]
    assert ortho_skip.depends_on(t) == ("depends on learning rate; holds with learning_rate = 0.01; "
                                        "not judged with learn_noise = True")
    assert ortho_skip.depends_on(tables["plain-collapses-to-prior"]) == (
        "holds under every setting judged; not judged with learn_noise = True")
    assert ortho_skip.depends_on(t.iloc[2:]) == "not judged under any setting tried"
    unjudged_run = pd.DataFrame({"choice": ["as run", "learning rate", "noise model"],
                                 "setting": ["this profile", "lr = 1", "learn_noise = True"],
                                 "verdict": ["not judged", "holds", "does not hold"]})
    assert ortho_skip.depends_on(unjudged_run) == (
        "depends on learning rate, noise model; holds with lr = 1; not judged with this profile")
    assert ortho_skip.robustness_tables(main, []) == {}


def test_smoke_robustness_stage(smoke, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path))
    profile = get_profile("01_ortho_skip", "smoke")
    sweep = ortho_skip.robustness(profile, seed=0, device="cpu")
    assert [(s["field"], s["value"]) for s in sweep] == list(profile.robustness)
    lr = sweep[0]["results"]
    assert lr["config"]["learning_rate"] == profile.robustness[0][1]
    assert lr["metrics"][0]["train_rmse"] != smoke["metrics"][0]["train_rmse"]  # a different fit
    assert sweep[1]["results"]["config"]["learn_noise"] is True
    tables = ortho_skip.robustness_tables(smoke, sweep)
    assert all(len(t) == 1 + len(sweep) for t in tables.values())
    with pytest.raises(ValueError, match="not one of"):
        ortho_skip.robustness(dataclasses.replace(profile, robustness=(("n_steps", 3),)), seed=0)


def test_profiles():
    paper = get_profile("01_ortho_skip", "paper")
    assert isinstance(paper, OrthoSkipProfile)
    assert (paper.n_steps, paper.n_train_samples, paper.n_test_samples) == (200_000, 64, 256)
    assert paper.hidden_widths == (32,) * 5 and paper.n_train == 128 and paper.noise_sd == 0.2
    assert paper.anneal_fraction == 0.5
    quick = get_profile("01_ortho_skip", "quick")
    assert quick.hidden_widths == paper.hidden_widths and quick.n_train == paper.n_train
    assert quick.judge and not get_profile("01_ortho_skip", "smoke").judge
    assert {f for f, _ in paper.robustness} == set(ortho_skip.ROBUSTNESS_CHOICES)
    with pytest.raises(ValueError, match="valid profiles"):
        get_profile("01_ortho_skip", "huge")
