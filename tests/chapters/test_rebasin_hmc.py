"""Chapter 5 end to end in the smoke profile: experiment, cache, tables, figures, ledger, notebook."""

import json

import matplotlib
import numpy as np
import pytest

from symlib.book import pipeline
from symlib.chapters import get_profile
from symlib.chapters import rebasin_hmc as ch5

CONFIG = get_profile("05_rebasin_hmc", "smoke")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    root = tmp_path_factory.mktemp("ch5")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYMLIB_CACHE", str(root / "cache"))
        mp.setenv("SYMLIB_RESULTS", str(root / "results"))
        yield root, mp


@pytest.fixture(scope="module")
def results(sandbox):
    return ch5.run(CONFIG, seed=0, progress=False)


def test_smoke_run_has_every_table_column_and_is_cached(results, sandbox, monkeypatch):
    t1 = ch5.table1(results["bayes"])
    assert list(t1.columns) == list(ch5.METHODS)
    assert len(t1) == 8 and set(t1.index.get_level_values("source")) == {"paper", "ours"}
    ours = t1.xs("ours", level="source")
    assert ours.loc["agreement with HMC", "HMC sample"] == 1.0 and ours.loc["TV to HMC", "HMC sample"] == 0.0
    assert ((ours.loc["agreement with HMC"] >= 0) & (ours.loc["agreement with HMC"] <= 1)).all()
    # a second run is served from the cache: computing again would fail
    monkeypatch.setattr(ch5, "not_experiment", lambda *a, **k: pytest.fail("not cached"))
    monkeypatch.setattr(ch5, "bayes_experiment", lambda *a, **k: pytest.fail("not cached"))
    again = ch5.run(CONFIG, seed=0, progress=False)
    assert ch5.table1(again["bayes"]).equals(t1)
    assert list((sandbox[0] / "cache").iterdir())


def test_not_experiment_recovers_the_initial_permutation_at_epoch_0(results):
    nr = results["not"]
    assert (nr["not_epochs"][:, :, 0] == nr["values"][None, :]).all()
    assert nr["path_not"][0, 0] == 0 and nr["path_not"][0, -1] == nr["path_value"]
    frame = ch5.not_frame(nr)
    assert list(frame.index) == list(nr["values"])


def test_hmc_diagnostics(results):
    h = results["bayes"]["hmc"]
    assert h["samples"] == CONFIG.hmc_chains * CONFIG.hmc_samples
    assert h["grad_evals_per_s"] > 0
    assert h["grad_evals_per_chain"] == 1 + (CONFIG.hmc_burnin + CONFIG.hmc_samples) * CONFIG.hmc_leapfrog
    assert np.all(h["nots_to_reference"][h["sample_chain"] == 0] >= 0)
    assert len(ch5.hmc_frame(results["bayes"])) == CONFIG.hmc_chains


def test_claims_unjudged_in_smoke_and_judged_on_request(results):
    unjudged = ch5.claims(results, judge=False)
    assert len(unjudged) == 9 and all(c["holds"] is None for c in unjudged)
    judged = ch5.claims(results, judge=True)
    assert all(c["holds"] in (True, False, None) for c in judged)
    assert {c["id"] for c in judged} == {c["id"] for c in unjudged}


def test_tables_prose_and_figures(results):
    matplotlib.use("Agg")
    assert len(ch5.plot_figure1(results["not"]).axes) == 2
    assert len(ch5.plot_figure2(results["not"]).axes) == 7  # six panels and a colour bar
    assert len(ch5.plot_figure3(results["bayes"]).axes) == 4
    prose = ch5.findings(results)
    assert set(prose) == {"figure2", "table1", "figure3_sigma", "figure3_pruning"}
    assert all(isinstance(v, str) and len(v) > 100 for v in prose.values())
    settings = ch5.settings_table(CONFIG)
    assert settings.loc["HMC: leapfrog steps, initial step size", "paper"] == "500, 0.001"
    assert list(ch5.pruning_table(results["bayes"]).index) == [100 * k for k in CONFIG.prune_keep]


@pytest.mark.slow
def test_notebook_runs_in_smoke_and_writes_its_ledger(sandbox, tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "EXECUTED", tmp_path / "executed")
    pipeline.execute("05_rebasin_hmc", profile="smoke", seed=0, device="cpu")
    results = json.loads((sandbox[0] / "results" / "05_rebasin_hmc.json").read_text())
    assert results["profile"] == "smoke" and len(results["claims"]) == 9
    assert "table1" in results["tables"] and results["notes"]["hmc_grad_evals_per_s"] > 0
