"""Chapter 4 end to end in the smoke profile (Stan models compiled once per machine), cached
under a temporary directory."""

import matplotlib
import numpy as np
import pytest
import torch

from symlib.book.cache import cache_dir
from symlib.chapters import get_profile, reported
from symlib.chapters.constrained_models import experiment as ch4  # private helpers are tested too
from symlib.nn import constrained as idf

CLAIM_IDS = {"hyperbola-removed", "permutation-copies-removed", "shallower-trees",
             "ess-lower-constrained", "boston-mse-lower", "boston-coverage-closer",
             "wilcoxon-mse", "wilcoxon-coverage"}


@pytest.fixture(scope="module")
def results():  # conftest.py points SYMLIB_CACHE at a session-wide temporary directory
    return ch4.run("smoke", seed=0)


def test_smoke_run_is_cached_and_restores_threads(results):
    before = torch.get_num_threads()
    again = ch4.run(get_profile(ch4.CHAPTER, "smoke"), seed=0)
    assert torch.get_num_threads() == before
    assert again["boston"]["splits"][0]["constrained"]["mse"] == results["boston"]["splits"][0]["constrained"]["mse"]
    parts = {p.name for p in cache_dir().iterdir() if p.name.startswith(ch4.CHAPTER)}
    assert parts == {f"{ch4.CHAPTER}-{k}" for k in ("prior", "synth", "boston")}


def test_claims_ledger(results):
    unjudged = ch4.claims(results, judge=False)
    assert {c["id"] for c in unjudged} == CLAIM_IDS
    assert all(c["holds"] is None for c in unjudged)
    judged = ch4.claims(results, judge=True)
    assert all(c["holds"] in (True, False, None) for c in judged)
    assert all(isinstance(c[f], str) and c[f] for c in judged for f in ("text", "paper", "ours"))
    by_id = {c["id"]: c for c in judged}
    assert by_id["wilcoxon-mse"]["holds"] is None           # 2 splits cannot reach p < 0.05


def test_synthetic_fits_have_every_model_and_method(results):
    ds = results["synth"]["datasets"]["paper"]
    p = get_profile(ch4.CHAPTER, "smoke")
    for model in idf.MODELS:
        for meth in ch4.METHODS:
            params = ds["fits"][model, meth]["params"]
            n = p.synth_draws * p.synth_chains if meth == "NUTS" else p.advi_draws
            assert params["W1"].shape == (n, 2, 2)
            if model != "unconstrained":
                assert np.all(np.diff(params["b1"], axis=-1) > 0)
            if model == "constrained":
                assert np.allclose(np.linalg.norm(params["W1"], axis=-1), 1, atol=1e-5)
    diag = ch4.diagnostics_table(results["synth"])
    assert len(diag) == 3 and (diag["mean leapfrog"] >= 1).all()
    assert (diag.loc[diag["model"] != "unconstrained", "permutation copies visited"] == 1).all()
    at = ch4.advi_table(results["synth"])
    assert len(at) == 9 and at["final ELBO"].notna().sum() == 6


def test_boston_tables_beside_the_papers(results):
    t1, t2, diag = ch4.boston_tables(results["boston"])
    paper = reported("pourzanjani2017/table1_boston_mse").frame()
    assert t1.shape == (4, 2)
    assert t1.loc["unconstrained (paper)", 1] == paper.loc[0, "unconstrained"]
    assert t1.loc["unconstrained (ours)", 1] != paper.loc[0, "unconstrained"]
    assert ((t2.loc["constrained (ours)"] >= 0) & (t2.loc["constrained (ours)"] <= 1)).all()
    assert len(diag) == 4
    w = ch4.wilcoxon_tests(results["boston"])
    assert list(w["p (paper)"]) == [0.009, 0.003]


def test_prior_demo_without_jacobian_is_not_uniform(results):
    prior = results["prior"]
    assert prior["jacobian"]["w"].shape[1] == 2
    # without the change of measure the last coordinate sin(t_12) piles up near +-1
    assert prior["no_jacobian"]["mean_abs_last"] > prior["jacobian"]["mean_abs_last"]


def test_paper_network_units_are_unit_vectors():
    for g in ("paper", "code"):
        w = ch4.paper_network(g)["W1"]
        assert torch.allclose(w.norm(dim=-1), torch.ones(2, dtype=w.dtype))
    with pytest.raises(ValueError):
        ch4.paper_network("nope")


def test_hyperbola_stats_detects_a_hyperbola():
    gen = np.random.default_rng(0)
    c = np.exp(gen.normal(0, 1, 500))
    params = {"W1": np.stack([np.stack([c, c], -1), np.ones((500, 2))], 1),
              "W2": np.stack([0.5 / c, np.ones(500)], -1)}
    assert ch4.hyperbola_stats(params)["corr"] < -0.99


def test_figures(results):
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = [ch4.plot_figure1(results["synth"]), ch4.plot_predictive(results["synth"]),
            ch4.plot_prior_demo(results["prior"])]
    assert [len(f.axes) for f in figs] == [9, 3, 2]
    for f in figs:
        plt.close(f)
