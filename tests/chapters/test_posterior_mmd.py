"""Chapter 2b's experiment: symmetry removal keeps the function, collapse numbers, smoke run."""

import pytest
import torch

from symlib import metrics
from symlib.book.results import Claim, Kind
from symlib.chapters import get_profile
from symlib.chapters.posterior_mmd import experiment as ch2b  # private helpers are tested too
from symlib.chapters.posterior_mmd.profiles import PosteriorMMDProfile
from symlib.nn.convnets import init_optunet, optunet_forward


def test_remove_symmetries_keeps_the_function_and_is_idempotent():
    params = init_optunet(torch.Generator().manual_seed(0), 5, dtype=torch.float64)
    params["b4"] = params["b4"] + 3.0  # a softmax shift that NS must remove
    ns = ch2b.remove_symmetries(params)
    x = torch.randn(7, 1, 28, 28, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    fwd = torch.vmap(optunet_forward, in_dims=(0, None))
    torch.testing.assert_close(torch.softmax(fwd(ns, x), -1), torch.softmax(fwd(params, x), -1))
    torch.testing.assert_close(ns["b4"].mean(-1), torch.zeros(5, dtype=torch.float64))
    again = ch2b.remove_symmetries(ns)
    for k in ns:
        torch.testing.assert_close(again[k], ns[k])


def test_layers_group_weights_with_their_biases():
    params = init_optunet(torch.Generator().manual_seed(0), 3)
    layers = ch2b._layers(params)
    assert {k: v.shape for k, v in layers.items()} == {
        "conv1": (3, 32), "conv2": (3, 250), "fc1": (3, 33), "fc2": (3, 40)}
    assert sum(v.shape[1] for v in layers.values()) == 355


def test_functional_collapse_matches_direct_pairwise_mutual_information():
    gen = torch.Generator().manual_seed(2)
    probs = torch.softmax(torch.randn(5, 40, 10, generator=gen), -1)
    probs[1] = probs[0]  # two identical networks: zero pairwise MI
    probs_ood = torch.softmax(torch.randn(5, 30, 10, generator=gen), -1)
    col = ch2b.functional_collapse(probs, probs_ood, n_pairs=100, seed=0)
    assert col["n_pairs"] == 10
    pairs = torch.combinations(torch.arange(5), 2)
    for (i, j), mi in zip(pairs.tolist(), col["id"]):
        direct = metrics.mutual_information(probs[[i, j]]).mean()
        torch.testing.assert_close(mi, direct)
    assert col["id"][0].item() == pytest.approx(0.0, abs=1e-12)
    # subsampling keeps the requested number of distinct pairs
    assert ch2b.functional_collapse(probs, probs_ood, n_pairs=4, seed=0)["n_pairs"] == 4


def test_method_metrics_of_identical_samples_has_no_diversity():
    gen = torch.Generator().manual_seed(3)
    one = torch.softmax(torch.randn(1, 50, 10, generator=gen), -1)
    row = ch2b.method_metrics(one.expand(4, -1, -1), one[:, :20].expand(4, -1, -1),
                              torch.randint(10, (50,), generator=gen))
    assert row["IDMI"] == pytest.approx(0.0, abs=1e-9)
    assert row["OODMI"] == pytest.approx(0.0, abs=1e-9)
    assert 0 <= row["Acc"] <= 100 and 0 <= row["AUPR"] <= 100


def test_split_counts_spread_samples_evenly():
    assert ch2b._split_counts(20, 10) == [2] * 10
    assert ch2b._split_counts(7, 3) == [3, 2, 2]
    assert sum(ch2b._split_counts(100, 10)) == 100


def test_smoke_profile_runs_end_to_end():
    cfg = get_profile("02b_posterior_mmd", "smoke")
    results = ch2b.run(cfg, seed=0, progress=False)
    assert [(r["mode"], r["method"]) for r in results["rows"]] == list(ch2b.METHODS)
    for r in results["rows"]:
        assert r["samples"] == cfg.samples
        for col in ("MMD", "NS", "Acc", "ECE", "Brier", "AUPR", "FPR95", "IDMI", "OODMI"):
            assert torch.isfinite(torch.tensor(r[col])), (r["method"], col)
    kinds = {(k["weights"], k["aggregation"]) for k in results["kernels"]}
    assert kinds == {(w, a) for w in ("MMD", "NS") for a in ("median", "mean", "max")}
    # the max over kernels bounds the median and the mean, row by row
    by = {(k["mode"], k["method"], k["weights"], k["aggregation"]): k["value"]
          for k in results["kernels"]}
    for mode, method in ch2b.METHODS:
        for w in ("MMD", "NS"):
            assert by[mode, method, w, "max"] >= by[mode, method, w, "median"] - 1e-9
    claims = [Claim(**c) for c in results["claims"]]
    assert len(claims) == 6 and all(c.holds is None for c in claims)  # smoke does not judge
    assert set(results["robustness"]) == {"multi_mode_closer", "ranking_stable_under_symmetry_removal"}
    # the OOD scores of the robustness stage reproduce Table 1's columns for the baseline score
    data = ch2b.load_data(cfg)
    nets = ch2b.train_networks(cfg, data, 0, progress=False)
    samples = ch2b.posterior_samples(cfg, data, nets, 1, progress=False)
    detection = {(d["mode"], d["method"]): d for d in ch2b.ood_detection(data, samples)
                 if d["score"] == "max_softmax"}
    for r in results["rows"]:
        assert detection[r["mode"], r["method"]]["AUPR"] == pytest.approx(r["AUPR"])
        assert detection[r["mode"], r["method"]]["FPR95"] == pytest.approx(r["FPR95"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_evaluation_on_the_gpu_matches_the_cpu():
    cfg = get_profile("02b_posterior_mmd", "smoke")
    data = ch2b.load_data(cfg)
    nets = ch2b.train_networks(cfg, data, 0, progress=False)
    samples = ch2b.posterior_samples(cfg, data, nets, 1, progress=False)
    cpu = ch2b.evaluate(cfg, data, nets, samples, 2)
    gpu = ch2b.evaluate(cfg, data, nets, samples, 2, device="cuda")
    for a, b in zip(cpu["rows"], gpu["rows"]):
        for col in ("MMD", "NS", "Acc", "IDMI"):
            assert a[col] == pytest.approx(b[col], rel=1e-4, abs=1e-4)


# --------------------------------------------------------------------------- made-up results
# A results dict built by hand, where the verdict of every criterion is known in advance.

JUDGED = PosteriorMMDProfile(robustness=("mmd_aggregation", "ood_score"))
ON_NETWORKS = ("multi_mode_closer", "ranking_stable_under_symmetry_removal", "multi_mode_better_ood",
               "optunet_id_ood_diversity_correlated")


def _made_up(*, accuracy=0.95, ood_pairs=4, r=0.4, p=1e-6, mean_breaks=None):
    single = {"Dropout": 15.0, "BNN": 18.0, "SGHMC": 16.0, "SWAG": 14.0, "Laplace": 10.0}
    rows = []
    for mode, method in ch2b.METHODS:
        mmd = single[method] if mode == "one mode" else (0.0 if method == "DE" else single[method] / 8)
        better = mode == "multi mode" and method in ("Dropout", "BNN", "SWAG", "Laplace")[:ood_pairs]
        rows.append({"mode": mode, "method": method, "MMD": mmd, "NS": 0.9 * mmd,
                     "AUPR": 90.0 if better else 70.0, "FPR95": 30.0 if better else 80.0})
    kernels = [{"mode": row["mode"], "method": row["method"], "weights": w, "aggregation": how,
                "value": row[w] * (10.0 if how == "mean" and (row["mode"], row["method"]) == mean_breaks else 1.0)}
               for row in rows for w in ("MMD", "NS") for how in ("median", "mean", "max")]
    return {"rows": rows, "kernels": kernels, "reference_accuracy": torch.full((40,), accuracy),
            "ensemble_accuracy": torch.full((20,), accuracy), "modes_used": torch.arange(10),
            "collapse": {"pearson_r": r, "p_value": p, "n_pairs": 780}}


def _verdicts(results, config=JUDGED):
    return {c["id"]: Claim(**c) for c in ch2b.claims(results, config)}


def test_made_up_results_where_every_claim_holds():
    v = _verdicts(_made_up())
    assert {k: c.verdict for k, c in v.items() if k != "resnet_id_ood_diversity_uncorrelated"} == {
        k: "holds" for k in (*ON_NETWORKS, "deep_ensembles_closest")}
    assert v["deep_ensembles_closest"].kind == Kind.CODE_CHECK
    resnet = v["resnet_id_ood_diversity_uncorrelated"]
    assert resnet.holds is None and "ResNet-18 reference posterior" in resnet.verdict


def test_ood_claim_needs_all_four_pairs_as_in_the_paper():
    assert _verdicts(_made_up(ood_pairs=3))["multi_mode_better_ood"].verdict == "does not hold"


def test_correlation_claim_needs_a_significant_positive_r():
    assert _verdicts(_made_up(r=0.4, p=0.2))["optunet_id_ood_diversity_correlated"].holds is False
    assert _verdicts(_made_up(r=-0.4, p=1e-6))["optunet_id_ood_diversity_correlated"].holds is False


def test_untrained_networks_withhold_every_verdict_that_rests_on_them():
    v = _verdicts(_made_up(accuracy=0.486))
    for claim in ON_NETWORKS:
        assert v[claim].holds is None, claim
        assert "median test accuracy of the reference checkpoints >= 90% of 0.953" in v[claim].verdict
        assert "(measured 0.486)" in v[claim].verdict
    assert v["deep_ensembles_closest"].verdict == "holds"   # a check of the code, not gated


def test_smoke_profile_judges_nothing():
    smoke = get_profile("02b_posterior_mmd", "smoke")
    assert all(c.verdict.startswith("not judged: run sized") for c in _verdicts(_made_up(), smoke).values())


def test_robustness_rejudges_under_each_choice():
    detection = [{"mode": r["mode"], "method": r["method"], "score": score,
                  "AUPR": r["AUPR"] if score != "entropy" else 50.0, "FPR95": r["FPR95"]}
                 for r in _made_up()["rows"] for score in ch2b.OOD_SCORES]
    results = _made_up(mean_breaks=("multi mode", "SWAG"))
    rob = ch2b.robustness(results, JUDGED, detection)
    closer = {r["value"]: r["outcome"] for r in rob["multi_mode_closer"]}
    assert closer == {"median": "holds", "mean": "does not hold", "max": "holds"}
    ood = {r["value"]: r["outcome"] for r in rob["multi_mode_better_ood"]}
    assert ood == {"max_softmax": "holds", "entropy": "does not hold", "mutual_information": "holds"}
    assert [r["this run"] for r in rob["multi_mode_better_ood"]] == [True, False, False]
    assert ch2b.robustness_summary(rob["multi_mode_better_ood"]) == (
        "depends on ood_score (holds at max_softmax, does not hold at entropy, holds at mutual_information)")
    assert ch2b.robustness_summary(rob["ranking_stable_under_symmetry_removal"]).startswith(
        "mmd_aggregation: holds at every value")
