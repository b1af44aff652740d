"""Chapter 1 end to end in the smoke profile, plus the claim rules, the sweeps, the views and the profiles."""

import dataclasses
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch

from symlib.book.chapter import Figure, RunResults, Table
from symlib.book.results import Column, Kind, depends_on
from symlib.chapters import get_profile
from symlib.chapters.ortho_skip import (
    CHAPTER,
    ROBUSTNESS_CHOICES,
    VARIANTS,
    OrthoSkipProfile,
    stages,
    views,
)
from symlib.chapters.ortho_skip import claims as ch1_claims

matplotlib.use("Agg")

SINC_CLAIMS = ["plain-underfits", "skip-ood-uncertainty", "plain-collapses-to-prior"]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("SYMLIB_CACHE", str(tmp_path_factory.mktemp("cache")))
    try:
        yield CHAPTER.run_stages(get_profile("01_ortho_skip", "smoke"), seed=0, device="cpu")
    finally:
        mp.undo()


def test_smoke_run_end_to_end(smoke):
    main = smoke["main"]
    names = [v["name"] for v in VARIANTS]
    assert main["seed"] == 0 and main["device"] == "cpu"
    assert [row["variant"] for row in main["metrics"]] == names
    for row in main["metrics"]:
        for key in ("train_rmse", "test_loglik", "epistemic_sd_in", "epistemic_sd_out", "elbo", "kl"):
            assert math.isfinite(row[key]), (row["variant"], key)
        assert 0.0 <= row["share_at_prior"] <= 1.0
        assert row["noise_sd"] == pytest.approx(0.2)  # fixed noise
    fits = main["fits"]
    n_grid = smoke.config.n_grid
    for key in ("mean", "epistemic_sd", "aleatoric_sd", "total_sd"):
        assert fits[key].shape == (4, n_grid)
    assert np.allclose(fits["total_sd"] ** 2, fits["epistemic_sd"] ** 2 + fits["aleatoric_sd"] ** 2, rtol=1e-5)
    assert fits["x_grid"][0] == -2.0 and fits["x_grid"][-1] == 2.0
    assert fits["x_train"].min() >= -1.0 and fits["x_train"].max() <= 1.0
    g = main["gap"]
    assert abs(g["gap"][0]) < 1e-9 and np.all(g["gap"] <= g["log_n"] + 1e-9)
    assert main["history"]["elbo"].shape[0] == 4
    claims = CHAPTER.judged_claims(smoke)
    assert [c.id for c in claims] == [*SINC_CLAIMS, "gap-bounded"]
    for c in claims:
        assert c.holds is None and c.criterion and c.preconditions
    for c in claims[:3]:  # smoke: the chapter's judge_field gates every claim
        assert "profile sized to judge the claims" in c.verdict, c.verdict
    # the code check is not gated by the profile; smoke's 64 gap samples fail its own precondition
    assert "standard error" in claims[3].verdict and "profile" not in claims[3].verdict
    assert [e.id for e in ch1_claims.errata(smoke)] == ["gap-bound-layers"]
    import matplotlib.pyplot as plt

    before = dict(matplotlib.rcParams)
    for fig in (views.plot_fits(main), views.plot_elbo_gap(main)):
        assert isinstance(fig, matplotlib.figure.Figure)
        plt.close(fig)
    assert dict(matplotlib.rcParams) == before  # no global style side effects


def test_smoke_run_is_cached_and_deterministic(smoke, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path))
    profile = get_profile("01_ortho_skip", "smoke")
    threads = torch.get_num_threads()
    fresh = CHAPTER.run_stages(profile, seed=0, device="cpu")  # recomputed in an empty cache
    assert torch.get_num_threads() == threads  # the stages restore the thread setting
    again = CHAPTER.run_stages(profile, seed=0, device="cpu")  # loaded
    for a, b in ((fresh, smoke), (again, smoke)):
        for ra, rb in zip(a["main"]["metrics"], b["main"]["metrics"]):
            assert ra["elbo"] == rb["elbo"] and ra["train_rmse"] == rb["train_rmse"]
        assert np.array_equal(a["main"]["fits"]["mean"], b["main"]["fits"]["mean"])
    # one entry for the main run, one per robustness setting (a long sweep resumes)
    assert len(list(tmp_path.rglob("*.pt"))) == 1 + len(profile.robustness)


def test_the_sinc_fit_in_pieces_gives_the_numbers_of_one_fit(tmp_path, monkeypatch):
    """Stopped at its budget after every step and continued from its checkpoint, the sinc run
    gives the numbers of one uninterrupted run, with either VI engine (``mfvi_batched_fast``, every
    profile's: tests/inference/test_mfvi_batched.py; ``mfvi``, whose steps are ``mfvi.fit``'s on
    the CPU: tests/inference/test_mfvi_graph.py)."""
    from symlib.inference.loop import BudgetExhausted

    smoke = get_profile("01_ortho_skip", "smoke")
    assert smoke.vi_engine == "mfvi_batched_fast"
    for profile in (smoke, dataclasses.replace(smoke, vi_engine="mfvi")):
        whole = stages.sinc_experiment(profile, 0, torch.device("cpu"))
        assert whole["timing"]["pieces"] == 1
        path, stopped = tmp_path / f"ck-{profile.vi_engine}.pt", 0
        while True:
            try:
                # a deadline long past: every piece takes one step, then stops
                got = stages.sinc_experiment(profile, 0, torch.device("cpu"), checkpoint=path, deadline=0.0)
                break
            except BudgetExhausted as err:
                stopped += 1
                assert path.is_file() and "run again" in str(err)
        assert stopped == profile.n_steps - 1 and got["timing"]["pieces"] == profile.n_steps
        assert got["metrics"] == whole["metrics"] and got["reference"] == whole["reference"]
        for k, v in whole["history"].items():
            assert np.array_equal(got["history"][k], v), k
        assert np.array_equal(got["fits"]["mean"], whole["fits"]["mean"])
    with pytest.raises(ValueError, match="vi_engine"):
        stages.sinc_experiment(dataclasses.replace(smoke, vi_engine="other"), 0, torch.device("cpu"))


def test_a_stage_checkpoints_where_its_settings_say_and_spends_the_checkpoint(smoke, tmp_path, monkeypatch):
    from types import SimpleNamespace

    profile = get_profile("01_ortho_skip", "smoke")
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path))
    view = CHAPTER.stage("main").view(profile)
    ctx = SimpleNamespace(chapter=CHAPTER.name, config=view, seed=0, device="cpu")
    path = stages.checkpoint_path(ctx, "main")
    assert path.parent == tmp_path / "checkpoints" and path.name.startswith("01_ortho_skip-sinc-main-")
    other = SimpleNamespace(**{**vars(ctx), "seed": 1})
    assert stages.checkpoint_path(other, "main") != path != stages.checkpoint_path(ctx, "learning_rate=0.03")
    assert stages.checkpoint_path(ctx, "learning_rate=0.03").name.startswith("01_ortho_skip-sinc-learning_rate_0.03-")
    assert not path.exists()
    CHAPTER.run_stages(profile, seed=0, device="cpu")
    assert not list((tmp_path / "checkpoints").glob("*.pt"))     # spent once the stage's result is cached


def test_streams_are_distinct_and_the_legacy_aliases_listed():
    CHAPTER.streams(0)  # no two named streams coincide (none yet: both stages are legacy)
    # both stages seed from the run seed, as before the contract: the sweep reruns the main
    # run's data, initial means and skip matrices on purpose (one choice changed at a time)
    assert CHAPTER.legacy_aliases(0) == [("main", "robustness")]
    assert [s.legacy_seed(7) for s in CHAPTER.stages] == [7, 7]


def _made_up(plain=None, skip=None, elbo_plain=None, gap=None, se=None, judge=True, robustness=None):
    """Results with known answers: floor 0.2; plain underfits, skip fits and grows its sd away
    from the data, plain collapses more; flat ELBOs; a gap curve inside [0, log N]."""
    rows = {v["name"]: {"variant": v["name"], "label": v["label"], "train_rmse": 0.2, "test_loglik": -0.3,
                        "epistemic_sd_in": 0.1, "epistemic_sd_out": 0.2, "share_at_prior": 0.5}
            for v in VARIANTS}
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
    main = {
        "metrics": list(rows.values()),
        "reference": {"oracle_train_rmse": 0.2},
        "history": {"elbo": elbo},
        "gap": {"widths": [1, 4, 4, 1], "n_permutations": 576, "scales": np.array([0.0, 0.1, 1.0, 10.0]),
                "gap": gaps, "standard_error": np.full(len(gaps), 0.01 if se is None else se),
                "log_n": log_n, "log_n_paper": math.log(24)},
    }
    config = dataclasses.replace(get_profile("01_ortho_skip", "quick"), judge=judge,
                                 robustness=tuple(robustness or {}))
    return RunResults({"main": main, "robustness": dict(robustness or {})}, config=config)


def _verdicts(results):
    return {c.id: c for c in CHAPTER.judged_claims(results)}


def test_each_criterion_on_made_up_results():
    v = _verdicts(_made_up())
    assert all(c.holds is True for c in v.values()), {k: c.verdict for k, c in v.items()}
    assert v["gap-bounded"].kind is Kind.CODE_CHECK
    assert all(v[k].kind is Kind.CLAIM for k in SINC_CLAIMS)
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
    for cid in SINC_CLAIMS:  # the plateau gates the robust column only: the paper trained a fixed budget
        assert v[cid].holds is True and v[cid].verdict == "holds"
        robust = v[cid].column_verdict(Column.ROBUST)
        assert v[cid].robust is None and robust.startswith("not judged") and "ELBO of plain" in robust, robust
    assert v["gap-bounded"].holds is True  # the gap check does not rest on the VI fit
    noisy = _verdicts(_made_up(se=1.0))["gap-bounded"]  # 1 nat > 5 % of log 576
    assert noisy.holds is None and "standard error" in noisy.verdict
    smoke = _verdicts(_made_up(judge=False))
    assert all(smoke[cid].holds is None and "profile" in smoke[cid].verdict for cid in SINC_CLAIMS)
    assert smoke["gap-bounded"].holds is True  # a code check: judged in every profile


def test_the_two_columns_are_gated_by_their_own_preconditions():
    # the paper's protocol gates the reproduced column only: a run without its KL annealing is
    # not judged there, and judged in the robust column (the same criterion on the same numbers)
    config = dataclasses.replace(get_profile("01_ortho_skip", "quick"), anneal_fraction=0.0)
    v = _verdicts(dataclasses.replace(_made_up(), config=config))
    for cid in SINC_CLAIMS:
        c = v[cid]
        assert c.holds is None and "KL annealing" in c.verdict and "8,000 of 200,000 steps" in c.verdict, c.verdict
        # one seed: a robust "holds" needs three, and the sweep's readings are not judged either
        assert [p.name for p in c.failed(Column.ROBUST)] == ["replicates", "sweep"]
        c = dataclasses.replace(c, preconditions=tuple(p for p in c.preconditions
                                                       if p.name not in ("sweep", "replicates")))
        assert c.robust is True and c.column_verdict(Column.ROBUST) == "holds"
        assert c.verdicts["reproduced"]["holds"] is None and c.verdicts["robust"]["holds"] is True
        assert [p["name"] for p in c.verdicts["robust"]["preconditions"]] == ["plateau", "plateau"]
        assert [p["name"] for p in c.verdicts["reproduced"]["preconditions"]] == ["protocol"]
    # a smaller budget is stated, not gated: quick's run is judged at 8,000 of 200,000 steps
    (protocol,) = [p for p in _verdicts(_made_up())["plain-underfits"].preconditions if p.name == "protocol"]
    assert protocol.met and protocol.column is Column.REPRODUCED
    assert protocol.measured.startswith("8,000 of 200,000 steps (4%), 8 of 64 MC samples per step")
    # the criterion is one: a claim that does not hold fails in both columns alike; with every
    # robust precondition met, its own setting refutes it there, unjudged readings notwithstanding
    fails = _verdicts(_made_up(skip={"train_rmse": 0.3}))["plain-underfits"]
    assert fails.holds is False and fails.robust is False and fails.column_verdict(Column.ROBUST) == "does not hold"
    assert fails.robust_refuted.startswith("this run's setting")


def test_every_reproduced_gate_cites_the_paper():
    for results in (_made_up(), _made_up(elbo_plain=np.linspace(-1e3, -1e2, 80), se=1.0), _made_up(judge=False)):
        for c in CHAPTER.judged_claims(results):
            columns = {p.name: p.column for p in c.preconditions}
            if c.kind is Kind.CLAIM:
                gate = {"profile": Column.BOTH} if not results.config.judge else {}  # the smoke gate
                seeds = {"replicates": Column.ROBUST} if c.criterion_holds else {}  # only a "holds" needs seeds
                assert columns == {"protocol": Column.REPRODUCED, "plateau": Column.ROBUST, "sweep": Column.ROBUST,
                                   **gate, **seeds}
            else:
                assert columns == {"mc_error": Column.BOTH}
            for p in c.preconditions:
                if p.gates(Column.REPRODUCED) and p.name != "profile":  # the smoke gate is the lead's
                    assert p.source, (c.id, p.name)
    assert "Sec. 4" in ch1_claims.PAPER_PROTOCOL and "200.000" in ch1_claims.PAPER_PROTOCOL
    assert "NOTES" not in ch1_claims.PAPER_PROTOCOL and "N(0, 1)" not in ch1_claims.PAPER_PROTOCOL  # Sec. 4: isotropic


def test_erratum_names_the_printed_bound():
    (static,) = ch1_claims.ERRATA
    (e,) = CHAPTER.errata_of(_made_up())  # the chapter's errata are those of the run
    assert e.id == static.id == "gap-bound-layers" and "∏ₗ₌₂ᴸ" in e.paper_says  # the printed product starts at layer 2
    assert e.correction.startswith(static.correction)
    assert f"{math.log(24):.3f}" in e.correction and f"{math.log(576):.3f}" in e.correction


def _sweep_frames(results) -> dict:
    return {s.claim: CHAPTER.sweep_frame(s, results) for s in CHAPTER.sweeps}


def test_robustness_sweeps_report_which_choice_flips_a_verdict():
    def sinc(results):
        return {k: v for k, v in results["main"].items() if k != "gap"}

    rising = np.linspace(-1e3, -1e2, 80)
    sweep = {("learning_rate", 1e-2): sinc(_made_up()),  # here the skip net fits
             ("learn_noise", True): sinc(_made_up(skip={"train_rmse": 0.3}, elbo_plain=rising)),
             ("anneal_fraction", 0.0): sinc(_made_up(skip={"train_rmse": 0.3}))}  # not the paper's protocol
    main = _made_up(skip={"train_rmse": 0.3}, robustness=sweep)  # as run: the skip net underfits too
    tables = _sweep_frames(main)
    assert list(tables) == SINC_CLAIMS  # one sweep per sinc claim; the gap check has none
    t = tables["plain-underfits"]
    assert list(t.columns) == ["choice", "setting", "verdict", "robust verdict", "failed preconditions", "ours"]
    relative = "fit: the ortho-skip BNN's train RMSE below the plain BNN's (no threshold)"
    # the run's own setting, its other reading on the same fits, then the sweep's settings
    assert t["choice"].tolist() == ["as run", "reading", "learning rate", "noise model", "KL annealing"]
    assert t["setting"].tolist() == ["this profile; fit: train RMSE ≤ 1.1 × the noise floor", relative,
                                     "learning_rate = 0.01", "learn_noise = True", "anneal_fraction = 0.0"]
    assert t["verdict"].tolist() == ["does not hold", "holds", "holds", "does not hold", "not judged"]
    # a "holds" on one seed is not judged in the robust column (three seeds); a failure is
    assert t["robust verdict"].tolist() == ["does not hold", "not judged", "not judged", "not judged", "does not hold"]
    assert "replicates: 1 [robust]" in t["failed preconditions"].iloc[1]
    assert "ELBO of plain" in t["failed preconditions"].iloc[3] and "[robust]" in t["failed preconditions"].iloc[3]
    assert "departs from the paper in: KL annealed" in t["failed preconditions"].iloc[4]
    assert "[reproduced]" in t["failed preconditions"].iloc[4]
    assert depends_on(t) == (f"depends on reading, learning rate; holds with {relative}, learning_rate = 0.01; "
                             "not judged with anneal_fraction = 0.0")
    assert depends_on(tables["plain-collapses-to-prior"]) == (
        "holds under every setting judged; not judged with anneal_fraction = 0.0")
    assert depends_on(t.iloc[4:]) == "not judged under any setting tried"
    unjudged_run = pd.DataFrame({"choice": ["as run", "learning rate", "noise model"],
                                 "setting": ["this profile", "lr = 1", "learn_noise = True"],
                                 "verdict": ["not judged", "holds", "does not hold"]})
    assert depends_on(unjudged_run) == (
        "depends on learning rate, noise model; holds with lr = 1; not judged with this profile")
    # the ledger appends each sweep's summary to its claim
    claims = _verdicts(main)
    assert claims["plain-underfits"].ours.endswith(f"; robustness: {depends_on(t)}")
    assert "robustness" not in claims["gap-bounded"].ours
    # a setting under the smoke profile is gated like the ledger's claims
    smoke_rows = _sweep_frames(_made_up(judge=False, robustness=sweep))["plain-underfits"]
    assert smoke_rows["verdict"].tolist() == ["not judged"] * 5
    assert smoke_rows["robust verdict"].tolist() == ["not judged"] * 5
    assert all("profile: no: sized to test the code" in f for f in smoke_rows["failed preconditions"])


def test_a_profile_that_sweeps_no_setting_still_judges_every_reading():
    results = _made_up()  # no setting swept
    assert not results.config.robustness
    frames = _sweep_frames(results)
    for cid, frame in frames.items():
        assert frame["choice"].tolist() == ["as run"] + ["reading"] * (len(ch1_claims.READINGS[cid]) - 1)
        assert frame["setting"].tolist()[1:] == [w for _, w in ch1_claims.READINGS[cid][1:]]
    claims = _verdicts(results)
    assert all(claims[cid].ours.endswith(f"robustness: {depends_on(frames[cid])}") for cid in SINC_CLAIMS)
    assert "robustness" not in claims["gap-bounded"].ours


def test_each_reading_on_made_up_results():
    """The readings the paper's words allow (READINGS), each judged on the same fits."""
    def judged(reading, **kw):
        (cid,) = reading
        return {c.id: c for c in ch1_claims.claims(_made_up(**kw), reading)}[cid].holds

    # the skip net underfits too (0.3 > 1.1 x 0.2) but fits better than the plain net (0.35)
    assert judged({"plain-underfits": "noise floor"}, skip={"train_rmse": 0.3}) is False
    assert judged({"plain-underfits": "relative"}, skip={"train_rmse": 0.3}) is True
    assert judged({"plain-underfits": "relative"}, skip={"train_rmse": 0.4}) is False
    # wider everywhere (level) but growing less away from the data than the plain net (growth)
    wide = {"epistemic_sd_in": 2.0, "epistemic_sd_out": 1.0}
    assert judged({"skip-ood-uncertainty": "level"}, skip=wide) is True
    assert judged({"skip-ood-uncertainty": "growth"}, skip=wide) is False
    assert judged({"skip-ood-uncertainty": "level and growth"}, skip=wide) is False
    # most weights of the plain net at the prior (0.9), but more still in the skip net's (0.95)
    assert judged({"plain-collapses-to-prior": "most weights"}, skip={"share_at_prior": 0.95}) is True
    assert judged({"plain-collapses-to-prior": "comparative"}, skip={"share_at_prior": 0.95}) is False
    assert judged({"plain-collapses-to-prior": "most weights"}, plain={"share_at_prior": 0.4}) is False
    # the ledger's reading is each claim's first, and its criterion names the others
    for cid, options in ch1_claims.READINGS.items():
        claim = {c.id: c for c in CHAPTER.judged_claims(_made_up())}[cid]
        assert f"reading: {options[0][1]}" in claim.criterion
        assert all(words in claim.criterion for _, words in options[1:])


def test_a_failure_under_a_fully_gated_setting_is_a_robust_does_not_hold():
    """The published `full` run's pattern: the claim fails as run (ELBOs flat) and under two more
    settings, while one setting's ELBO still moves (not judged there): robust "does not hold"."""
    def sinc(results):
        return {k: v for k, v in results["main"].items() if k != "gap"}

    skip_underfits = {"train_rmse": 0.3, "share_at_prior": 0.95}
    rising = np.linspace(-1e3, -1e2, 80)
    sweep = {("learning_rate", 6e-3): sinc(_made_up(skip=skip_underfits, elbo_plain=rising)),
             ("init_sd", 0.1): sinc(_made_up(skip=skip_underfits)),
             ("n_steps", 80_000): sinc(_made_up(skip=skip_underfits))}
    claims = _verdicts(_made_up(skip=skip_underfits, robustness=sweep))
    for cid in ("plain-underfits", "plain-collapses-to-prior"):
        c = claims[cid]
        assert c.verdict == "does not hold" and c.column_verdict(Column.ROBUST) == "does not hold", cid
        assert [p.name for p in c.failed(Column.ROBUST)] == ["sweep"]  # some settings not judged ...
        # ... yet refuted: as run, and with init_sd and n_steps, every robust precondition met
        assert c.robust_refuted.startswith("this run's setting") and "init_sd = 0.1" in c.robust_refuted
        assert "n_steps = 80000" in c.robust_refuted and "learning_rate" not in c.robust_refuted
        assert c.verdicts["robust"]["refuted_under"] == c.robust_refuted
        causes = [d.cause.value for d in c.diagnosis]
        assert causes[:2] == ["budget", "budget"] and "open choice" in causes
        assert {d.sweep for d in c.diagnosis} >= {"number of steps", "learning rate", "initial posterior sd", "reading"}


def test_diagnoses_count_the_budget_per_fit_against_the_paper():
    """Fractions from the profile against Kurle et al. Sec. 4 (200,000 steps, 64 samples)."""
    full = dataclasses.replace(_made_up(), config=get_profile("01_ortho_skip", "full"))
    full.stages["robustness"] = {}
    got = ch1_claims.diagnoses(full)
    assert set(got) == set(SINC_CLAIMS)
    steps, samples, data, reading = got["plain-underfits"]
    assert steps.cause.value == "budget" and steps.detail.startswith("40,000 of 200,000 full-batch steps per fit (20 %")
    assert samples.cause.value == "budget" and samples.detail.startswith("16 of 64 Monte Carlo samples per step (25 %)")
    assert data.cause.value == "data" and "sinc(4x)" in data.detail
    assert reading.cause.value == "open choice" and reading.sweep == "reading"
    assert steps.sweep == samples.sweep == ""  # no setting swept in these results: none named
    # a departure from the paper's protocol is its own diagnosis
    config = dataclasses.replace(get_profile("01_ortho_skip", "quick"), anneal_fraction=0.0)
    (departure,) = [d for d in ch1_claims.diagnoses(dataclasses.replace(_made_up(), config=config))["plain-underfits"]
                    if d.cause.value == "protocol departure"]
    assert departure.detail.startswith("KL annealed over the first half: 0.0 here, 0.5 in Kurle et al. Sec. 4")
    # at the paper's budget and protocol, with no departure: the paper's claim fails here
    paper = dataclasses.replace(_made_up(), config=dataclasses.replace(get_profile("01_ortho_skip", "paper"),
                                                                         robustness=()))
    paper.stages["robustness"] = {}
    causes = [d.cause.value for d in ch1_claims.diagnoses(paper)["plain-underfits"]]
    assert "budget" not in causes and causes[-1] == "the paper's claim fails here"
    # every failing claim of a judged ledger carries one (the contract raises otherwise)
    fails = _verdicts(_made_up(skip={"train_rmse": 0.3}))["plain-underfits"]
    assert fails.fails and fails.diagnosis


def test_smoke_robustness_stage(smoke):
    profile = get_profile("01_ortho_skip", "smoke")
    sweep = smoke["robustness"]
    assert list(sweep) == list(profile.robustness)
    lr = sweep[profile.robustness[0]]
    assert set(lr) == {"metrics", "reference", "history"}
    assert lr["metrics"][0]["train_rmse"] != smoke["main"]["metrics"][0]["train_rmse"]  # a different fit
    assert lr["reference"] == smoke["main"]["reference"]  # the same data
    assert sweep[("learn_noise", True)]["metrics"][0]["noise_sd"] != pytest.approx(0.2)  # learned
    tables = _sweep_frames(smoke)
    assert all(len(t) == len(ch1_claims.READINGS[cid]) + len(sweep) for cid, t in tables.items())
    with pytest.raises(ValueError, match="not one of"):
        stages.robustness_settings(dataclasses.replace(profile, robustness=(("hidden_widths", (8,)),)))


def test_views_build_from_the_smoke_results(smoke):
    import matplotlib.pyplot as plt

    for view in CHAPTER.views:
        built = view.build(smoke)
        if isinstance(view, Figure):
            plt.close(built)
        else:
            assert isinstance(view, Table) and isinstance(built, pd.DataFrame) and len(built), view.name
    assert CHAPTER.view("sinc_metrics").build(smoke).index.tolist() == [v["label"] for v in VARIANTS]
    layers = CHAPTER.view("share_at_prior_by_layer").build(smoke).columns
    assert set(layers) <= set(CHAPTER.view("share_at_prior_by_layer").formats)
    assert len(CHAPTER.view("elbo_gap").build(smoke)) == smoke.config.n_gap_scales
    quotes = {q.name: q.value(smoke) for q in CHAPTER.quotes}
    assert quotes.pop("gap_widths") == "1-2-3-1"  # text, for the figure's caption
    assert all(math.isfinite(float(v)) for v in quotes.values())
    assert quotes["gap_n"] == math.factorial(2) * math.factorial(3)  # smoke's 1-2-3-1 net
    assert quotes["paper_n_steps"] == get_profile("01_ortho_skip", "paper").n_steps


def test_settings_table_sets_the_paper_beside_the_run():
    frame = views.settings_frame(RunResults({}, config=get_profile("01_ortho_skip", "quick")))
    rows = {r["setting"]: (r["Kurle et al."], r["this run"]) for r in frame.to_dict("records")}
    assert rows["network"] == ("1-32x5-1, SELU", "1-32x32x32x32x32-1, SELU")
    assert rows["data"][0] == "128 points, x ~ U[-1, 1], scaled sinc + N(0, 0.2²)"
    assert rows["iterations (full batch)"] == ("200,000", "8,000")
    assert rows["MC samples train / test"] == ("64 / 256", "8 / 256")
    assert rows["likelihood noise"] == ("not stated", "fixed at 0.2")


def test_stages_declare_what_they_read():
    main, robustness = CHAPTER.stages
    profile = get_profile("01_ortho_skip", "quick")
    assert set(main.fields) | {"judge", "robustness"} == {f.name for f in dataclasses.fields(profile)}
    assert set(robustness.fields) == set(stages.SINC_FIELDS) | {"robustness"}
    # a field no stage reads changes no key
    assert main.key(dataclasses.replace(profile, judge=False), 0) == main.key(profile, 0)
    assert main.key(dataclasses.replace(profile, gap_samples=8), 0) != main.key(profile, 0)


def test_profiles():
    paper = get_profile("01_ortho_skip", "paper")
    assert isinstance(paper, OrthoSkipProfile)
    assert (paper.n_steps, paper.n_train_samples, paper.n_test_samples) == (200_000, 64, 256)
    assert paper.hidden_widths == (32,) * 5 and paper.n_train == 128 and paper.noise_sd == 0.2
    assert paper.anneal_fraction == 0.5
    quick = get_profile("01_ortho_skip", "quick")
    assert quick.hidden_widths == paper.hidden_widths and quick.n_train == paper.n_train
    assert quick.judge and not get_profile("01_ortho_skip", "smoke").judge
    assert {f for f, _ in paper.robustness} == set(ROBUSTNESS_CHOICES)
    # full: twice and a quarter of its steps, and one departure each of learning rate, initial sd
    # and MC samples; quick: a fifth of its steps, within its time
    full = get_profile("01_ortho_skip", "full")
    assert full.robustness == (("n_steps", 80_000), ("learning_rate", 6e-3), ("init_sd", 1e-1),
                               ("n_train_samples", 8), ("n_steps", 10_000))
    assert all(getattr(full, f) != v for f, v in full.robustness)
    assert quick.robustness == (("n_steps", 1_600),)
    with pytest.raises(ValueError, match="valid profiles"):
        get_profile("01_ortho_skip", "huge")
