"""Chapter 3 end to end in the smoke profile, cached under a temporary directory."""

import math

import matplotlib
import numpy as np
import pytest
import torch

from symlib.book.cache import cache_dir
from symlib.book.results import Claim, Kind
from symlib.chapters import get_profile, reported
from symlib.chapters.sgm_vi import experiment as ch3  # private helpers are tested too

CLAIM_IDS = {"mean-seeking-threshold", "equivalent-modes-closer", "toy-mfvi-interpolates",
             "toy-symmetrised-elbo", "toy-test-mse", "theorem-4.1-gap",
             "mnist-gain-grows-with-width", "mnist-sgm-beats-mfvi", "cost-linear-in-K"}


@pytest.fixture(scope="module")
def results():  # conftest.py points SYMLIB_CACHE at a session-wide temporary directory
    return ch3.run("smoke", seed=0)


def test_smoke_run_writes_cache_and_restores_threads(results):
    before = torch.get_num_threads()
    again = ch3.run(get_profile(ch3.CHAPTER, "smoke"), seed=0)                  # loads the cache
    assert torch.get_num_threads() == before
    assert np.array_equal(again["mnist"]["cells"][0]["accuracy"], results["mnist"]["cells"][0]["accuracy"])
    parts = {p.name for p in cache_dir().iterdir() if p.name.startswith(ch3.CHAPTER)}
    assert parts == {f"{ch3.CHAPTER}-{k}" for k in ("interp", "prox", "toy", "mnist")}


def test_claims_ledger(results):
    unjudged = [Claim(**c) for c in ch3.claims(results, judge=False)]
    assert {c.id for c in unjudged} == CLAIM_IDS == set(ch3.CLAIM_PARTS)
    assert all(c.holds is None and c.verdict.startswith("not judged: run sized") for c in unjudged)
    judged = [Claim(**c) for c in ch3.claims(results, judge=True)]
    assert all(c.criterion for c in judged)
    assert {c.id for c in judged if c.kind == Kind.CODE_CHECK} == {"theorem-4.1-gap", "cost-linear-in-K"}


# --------------------------------------------------------------------------- made-up results
# A results dict built by hand, where the verdict of every criterion is known in advance.


def _made_up(*, a_star=5.0, kl_curve=None, toy_gain=0.01, mfvi_mean="midpoint", toy_flat=True,
             mnist_gain=0.1, mfvi_accuracy=(88.0, 95.0)):
    rng = np.random.default_rng(0)
    grid = np.arange(1, 21) * 0.5                                    # a/s in (0, 10], step 0.5
    ratio = np.where(grid < a_star, 0.5, 0.0)[None].repeat(2, 0)     # two component sds
    interp = {"a_over_sd": grid, "sds": np.array([0.5, 1.0]), "dims": [2], "band": 0.25,
              2: {"ratio": ratio, "threshold_over_sd": np.array([a_star, a_star]),
                  "loss_curve": np.ones(100) if kl_curve is None else kl_curve}}
    prox = {"rows": [{"d_i": 1, "d_o": 1, "width": w, "mean": m, "min": m / 2, "max": m * 1.5,
                      "theorem 3.1 bound": 50.0, "sqrt(8/d_h)": math.sqrt(8 / w)}
                     for w, m in ((4, 0.4), (16, 0.1), (64, 0.02))]}
    a, seeds, n = [0.05, 0.1], 10, 100
    curve = np.full((2, seeds, 10), -1.0) if toy_flat else np.linspace(-3, -1, 10) * np.ones((2, seeds, 10))
    mode = np.array(a)[:, None, None] * np.array([1.0, -1.0])
    means = {"midpoint": 0.01 * mode, "mode": mode}[mfvi_mean] * np.ones((2, seeds, 2))
    mfvi = {"mse": 0.2 + 0.001 * rng.standard_normal((2, seeds)), "L_VI": np.full((2, seeds), -1.0),
            "I": np.full((2, seeds), 0.5), "mean": means, "sd": np.full((2, seeds, 2), 0.1),
            "objective_curve": curve}
    mfvi["L_G"] = mfvi["L_VI"] + mfvi["I"] / n
    shift = toy_gain + 0.0001 * rng.standard_normal((2, seeds))     # SGM's L_VI and L^G alike
    sgm_fit = {**mfvi, "mse": mfvi["mse"] - 3 * toy_gain + 0.0001 * rng.standard_normal((2, seeds)),
               "L_VI": mfvi["L_VI"] + shift, "L_G": mfvi["L_G"] + shift}
    toy = {"a": a, "x": {"train": np.zeros((2, seeds, n, 1))}, "MFVI": mfvi, "SGM K=2": sgm_fit}
    cells = []
    for width, acc in zip((5, 30), mfvi_accuracy):
        base = acc + 0.1 * rng.standard_normal(seeds)
        gain = mnist_gain * (1 if width == 5 else 2)
        for method, shift in (("MFVI", 0.0), ("SGM K=5", gain * (1 + 0.05 * rng.standard_normal(seeds)))):
            cells.append({"width": width, "method": method, "K": 1 if method == "MFVI" else 5,
                          "accuracy": base + shift, "objective_curve": np.full((seeds, 10), -2.0)})
    mnist = {"cells": cells, "widths": [5, 30], "methods": ["MFVI", "SGM K=5"]}
    cost = {"rows": [{"path": p, "K": k, "ms per step": 1.0 + slope * k}
                     for p, slope in (("unit_pairs", 0.01), ("direct", 0.5)) for k in (1, 5, 10, 20)]}
    return {"interp": interp, "prox": prox, "toy": toy, "mnist": mnist, "cost": cost}


def _verdicts(results):
    return {c["id"]: Claim(**c) for c in ch3.claims(results)}


def test_made_up_results_where_every_claim_holds():
    v = _verdicts(_made_up())
    assert {k: c.verdict for k, c in v.items()} == {k: "holds" for k in CLAIM_IDS}


def test_made_up_results_where_the_criteria_fail():
    v = _verdicts(_made_up(a_star=4.0, toy_gain=-0.01, mfvi_mean="mode", mnist_gain=-0.1))
    for claim in ("mean-seeking-threshold", "toy-mfvi-interpolates", "toy-symmetrised-elbo",
                  "toy-test-mse", "mnist-gain-grows-with-width", "mnist-sgm-beats-mfvi"):
        assert v[claim].verdict == "does not hold", claim


def test_a_star_criterion_allows_the_grid_step_and_ten_percent():
    # crossing in (a* - 0.5, a*]: a* = 5.5 may cross at 5.1 (within 5 ± 10 %); a* = 4.0 cannot
    assert _verdicts(_made_up(a_star=5.5))["mean-seeking-threshold"].holds is True
    assert _verdicts(_made_up(a_star=4.5))["mean-seeking-threshold"].holds is True
    assert _verdicts(_made_up(a_star=6.0))["mean-seeking-threshold"].holds is False  # in (5.5, 6]


def test_failed_preconditions_withhold_the_verdict_and_name_themselves():
    rising = np.linspace(2.0, 1.0, 100)                               # the KL still falling
    v = _verdicts(_made_up(kl_curve=rising, toy_flat=False, mfvi_accuracy=(60.0, 95.0)))
    assert v["mean-seeking-threshold"].holds is None
    assert "mean reverse KL of the fits, D = 2" in v["mean-seeking-threshold"].verdict
    for claim in ("toy-mfvi-interpolates", "toy-symmetrised-elbo", "toy-test-mse"):
        assert v[claim].holds is None and "per-point ELBO" in v[claim].verdict, claim
    for claim in ("mnist-gain-grows-with-width", "mnist-sgm-beats-mfvi"):
        assert v[claim].holds is None
        assert "width 5 >= 90% of 88.4" in v[claim].verdict and "width 30" not in v[claim].verdict
    assert v["equivalent-modes-closer"].holds is True                 # exact: no precondition


def test_identical_sgm_and_mfvi_do_not_hold_once_judged():
    v = _verdicts(_made_up(mnist_gain=0.0))
    for claim in ("mnist-gain-grows-with-width", "mnist-sgm-beats-mfvi"):
        assert v[claim].verdict == "does not hold" and "identical" in v[claim].ours


def test_resolution_precondition():
    assert ch3.resolves(0.1, 0.04, what="x").met and not ch3.resolves(0.1, 0.05, what="x").met
    assert not ch3.resolves(0.1, float("nan"), what="x").met
    assert ch3.resolves(-0.1, 0.01, what="x").met                      # the size of the effect counts


def test_robustness_stage_rejudges_each_setting(results):
    rob = results["robustness"]
    assert set(rob) == {"mean-seeking-threshold", "toy-mfvi-interpolates", "toy-symmetrised-elbo", "toy-test-mse"}
    rows = rob["toy-test-mse"]
    assert [(r["choice"], r["value"], r["this run"]) for r in rows] == [
        ("toy_init_sd", 0.05, True), ("toy_init_sd", 0.5, False)]
    # the variant's numbers are its own: rerun with the changed sd, not the run's
    assert rows[0]["ours"] != rows[1]["ours"]
    same = ch3.with_band(results["interp"], results["interp"]["band"])
    for d in results["interp"]["dims"]:
        np.testing.assert_array_equal(same[d]["threshold_over_sd"], results["interp"][d]["threshold_over_sd"])


def test_robustness_summary_names_the_choice_a_verdict_depends_on():
    rows = [{"choice": "x", "value": 0.1, "outcome": "holds"},
            {"choice": "x", "value": 1.0, "outcome": "does not hold"},
            {"choice": "y", "value": 2, "outcome": "holds"}, {"choice": "y", "value": 3, "outcome": "holds"}]
    assert ch3.robustness_summary(rows) == (
        "depends on x (holds at 0.1, does not hold at 1); y: holds at every value")


def test_tables_show_ours_beside_the_papers(results):
    t1 = ch3.table1(results["mnist"])
    assert list(t1.index) == ["MFVI", "SGM K=5"]
    paper = reported("gelberg2024/table1_mnist").frame().set_index("method")
    assert t1.loc["MFVI", "width 5 (paper)"] == paper.loc["MFVI", "width 5"]
    assert t1.loc["MFVI", "width 5 (ours)"] != paper.loc["MFVI", "width 5"]
    t2, t3 = ch3.table2(results["toy"]), ch3.table3(results["toy"])
    assert t2.shape == (2, 8) and t3.shape == (4, 8)
    assert t3.loc[("SGM", "L^G"), "a=0.2 (paper)"] == "-0.019"
    assert len(ch3.threshold_table(results["interp"])) == 2 * 2
    assert set(ch3.cost_table(results["cost"]).index) == {1, 5}


def test_toy_symmetrised_elbo_gap_is_exact_and_bounded(results):
    toy = results["toy"]
    for method in ("MFVI", "SGM K=2"):
        gap = toy[method]["L_G"] - toy[method]["L_VI"]
        assert np.all(gap >= -1e-6) and np.all(gap <= math.log(2) / 100 + 1e-6)
        assert np.allclose(gap, toy[method]["I"] / 100, atol=2e-6)


def test_toy_permutation_spec_and_invariance():
    ps = ch3.toy_pspec()
    assert ps.perm_to_axes == {"P1": (("W1", 0),)} and ps.param_ndims == {"W1": 2}
    w = torch.tensor([[0.3], [-0.2]])
    x = torch.linspace(-10, 10, 7).unsqueeze(-1)
    assert torch.allclose(ch3._toy_forward(w, x), ch3._toy_forward(w.flip(0), x))
    assert torch.allclose(ch3._toy_forward(w, x)[:, 0], 0.3 * x.clamp(min=0)[:, 0] + 0.2 * (-x).clamp(min=0)[:, 0])


def test_batched_forward_keeps_models_apart():
    from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward

    spec = MLPSpec((4, 3, 2))
    gen = torch.Generator().manual_seed(0)
    nets = [[init_mlp(spec, gen) for _ in range(2)] for _ in range(3)]            # (R=3, S=2)
    w = {k: torch.stack([torch.stack([n[k] for n in row]) for row in nets]) for k in nets[0][0]}
    x = torch.randn(3, 5, 4, generator=gen)
    out = ch3._forward_seeds_samples(w, x, spec)
    assert out.shape == (3, 2, 5, 2)
    for r in range(3):
        for s in range(2):
            assert torch.allclose(out[r, s], mlp_forward(nets[r][s], x[r], spec), atol=1e-6)


def test_generators_are_deterministic_and_independent():
    a = torch.rand(3, generator=ch3._generator(0, "toy_data"))
    assert torch.equal(a, torch.rand(3, generator=ch3._generator(0, "toy_data")))
    assert not torch.equal(a, torch.rand(3, generator=ch3._generator(1, "toy_data")))
    assert not torch.equal(a, torch.rand(3, generator=ch3._generator(0, "toy_init")))


def test_figures(results):
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = [ch3.plot_figure3(results["interp"]), ch3.plot_proximity(results["prox"]),
            ch3.plot_figure4(results["toy"]), ch3.plot_mnist_gain(results["mnist"]),
            ch3.plot_cost(results["cost"])]
    assert [len(f.axes) for f in figs] == [3, 1, 6, 1, 1]
    for f in figs:
        plt.close(f)
