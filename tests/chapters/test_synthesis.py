"""Chapter 6 end to end in the smoke profile: experiment, cache, tables, figure, claims, notebook."""

import dataclasses
import json
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

from symlib.book import pipeline, tables
from symlib.book.results import Claim
from symlib.chapters import get_profile
from symlib.chapters import synthesis as ch6
from symlib.chapters.synthesis import experiment as ex

CONFIG = get_profile("06_synthesis", "smoke")


@pytest.fixture(scope="module")
def results(sandbox):
    return ch6.run(CONFIG, seed=0)


def test_every_benchmark_has_every_method_and_the_gold_floor(results):
    assert list(results["benchmarks"]) == list(CONFIG.benchmarks)
    for name, r in results["benchmarks"].items():
        table = r["table"]
        expected = [ex.method_name(k, CONFIG) for k in ex._methods(CONFIG, name)] + [ex.GOLD]
        assert list(table["method"]) == expected
        # one input: no unit-vector row on sinc, and only there
        assert (ex.METHODS["unit"] in set(table["method"])) == (name != "sinc")
        assert len(r["rows"]) == CONFIG.n_seeds * (len(expected) - 1)
        assert table["TV to gold"].between(0, 1).all() and table["time (s)"].ge(0).all()
        if r["task"] == "classification":
            for col in ("accuracy", "ECE", "OOD AUPR", "agreement"):
                assert table[col].between(0, 1).all(), col
        else:
            assert table["RMSE"].gt(0).all()
        shown = ch6.format_table(table)
        assert "±" in shown.iloc[0]["TV to gold"] and "±" not in shown.iloc[-1]["TV to gold"]
        # a missing mean is None, which show_table renders as its "—"
        means = [c for c in shown.columns if c != "method"]
        assert shown[means].isna().sum().sum() == table[means].isna().sum().sum()
    diag = ch6.diagnostics_frame(results)
    assert set(diag["quantity"]) == {"predictions", "canonical weights", "raw weights"}


def test_cached_run_resumes_with_the_same_numbers(results, monkeypatch):
    # a second run finds every fit in the cache: nothing is refitted
    monkeypatch.setattr(ex, "_fit", lambda *a: pytest.fail("refitted a cached remedy"))
    monkeypatch.setattr(ex, "_gold", lambda *a: pytest.fail("resampled a cached gold standard"))
    again = ch6.run(CONFIG, seed=0)
    for name in results["benchmarks"]:
        # wall-clock columns measure the machine and differ between runs (0.0297 vs 0.983 s once)
        first, second = (tables.without_timing(r["benchmarks"][name]["table"]) for r in (results, again))
        assert "time (s)" not in first.columns and "TV to gold" in first.columns
        pd.testing.assert_frame_equal(second, first)


def test_fits_fan_out(results, monkeypatch):
    calls = []

    def spy(fn, tasks, **kw):
        tasks = list(tasks)
        calls.append([t[0] if t[0] == "gold" else t[2] for t in tasks])  # "gold" or the method
        return [fn(*t) for t in tasks]

    monkeypatch.setattr(ex, "fan_out", spy)
    ch6.run(CONFIG, seed=0)
    n_gold = len(CONFIG.benchmarks)
    methods = [m for n in CONFIG.benchmarks for m in ex._methods(CONFIG, n) for _ in range(CONFIG.n_seeds)]
    # two queues: the gold standards first, then every fit that reuses nothing; then the q_r fits,
    # which reuse a gold standard or an ensemble from the cache
    assert len(calls) == 2
    assert calls[0][:n_gold] == ["gold"] * n_gold
    assert sorted(calls[0][n_gold:]) == sorted(m for m in methods if not m.startswith("qr_"))
    assert sorted(calls[1]) == sorted(m for m in methods if m.startswith("qr_"))


def test_smoke_claims_are_not_judged_and_name_the_gold_standard(results):
    claims = [Claim(**c) for c in ch6.claims(results)]
    assert [c.id for c in claims] == ["sgm_tv", "multimodal_tv", "skip_ll", "ns_mmd", "qr_ensemble_tv"]
    for c in claims:
        assert c.criterion and c.preconditions
    # the smoke chains are far too short to mix: no claim on closeness to gold is judged
    for c in claims:
        if c.id != "skip_ll":
            assert c.holds is None and "gold predictions" in c.verdict
    # fewer than three seeds: no 2-SE criterion can be judged either
    assert all(c.holds is None for c in claims if c.id != "ns_mmd")


def _made_up(tv_mfvi, tv_sgm, rhat=1.001, ess=1000.0, seeds=4):
    """A results dict with one classification benchmark, every gold diagnostic as given."""
    config = dataclasses.replace(CONFIG, benchmarks=("digits",), n_seeds=seeds)
    rows = []
    rng = np.random.default_rng(0)
    for key in ex._methods(config, "digits"):
        base = {"mfvi": tv_mfvi, "sgm20": tv_sgm}.get(key, 0.3)
        for s in range(seeds):
            rows.append({"method": ex.method_name(key, config), "key": key, "seed": s + 1,
                         "TV to gold": base + 0.001 * rng.standard_normal(), "test LL": -1.0,
                         "MMD raw": 0.5, "MMD NS": 0.2})
    frame = pd.DataFrame(rows)
    table = ex._summarise(frame, {"method": ex.GOLD, "TV to gold": 0.01, "test LL": -1.0, "MMD raw": 0.4,
                                  "MMD NS": 0.1})
    diag = {"rhat_max": rhat, "bulk_ess_min": ess, "tail_ess_min": ess}
    return {"config": config, "benchmarks": {"digits": {
        "rows": frame, "table": table, "plateaus": {},
        "gold": {"diagnostics": {"predictions": diag}}}}}


def test_claims_on_made_up_results():
    by_id = {c["id"]: Claim(**c) for c in ch6.claims(_made_up(0.30, 0.20))}
    assert by_id["sgm_tv"].holds is True and "+0.1" in by_id["sgm_tv"].ours
    assert by_id["ns_mmd"].holds is True
    assert Claim(**ch6.claims(_made_up(0.20, 0.30))[0]).holds is False
    # the same numbers on chains that have not mixed: not judged, the precondition named
    unmixed = Claim(**ch6.claims(_made_up(0.30, 0.20, rhat=1.05))[0])
    assert unmixed.holds is None and "split R-hat of digits gold predictions <= 1.01" in unmixed.verdict
    few = Claim(**ch6.claims(_made_up(0.30, 0.20, seeds=2))[0])
    assert few.holds is None and "at least 3 seeds" in few.verdict


def test_figure_and_findings(results):
    matplotlib.use("Agg")
    fig = ch6.plot_quality_vs_cost(results)
    assert len(fig.axes) == len(CONFIG.benchmarks)
    found = ch6.findings(results)
    for name in CONFIG.benchmarks:
        assert 0 <= found[f"{name}_mfvi_tv"] <= 1 and found[f"{name}_best"] in set(ex.METHODS.values()) | {
            ex.method_name(k, CONFIG) for k in ex.METHODS}


def test_unknown_benchmark_lists_valid_ones():
    with pytest.raises(ValueError, match="sinc, boston, digits"):
        ch6.load_benchmark("cifar", CONFIG)


def test_profiles_document_every_field():
    doc = ch6.SynthesisProfile.__doc__
    assert doc
    fields = [f.name for f in dataclasses.fields(ch6.SynthesisProfile)]
    source = Path(ex.__file__).with_name("profiles.py").read_text()
    for name in fields:  # every field is followed by its docstring
        assert f'    {name}:' in source and source.split(f'    {name}:', 1)[1].split('\n', 2)[1].strip().startswith('"""')
    assert get_profile("06_synthesis", "quick").sgm_ks == (5, 20)
    assert get_profile("06_synthesis", "quick").n_modes == 10 == get_profile("06_synthesis", "quick").n_members


@pytest.mark.slow
def test_notebook_runs_in_smoke_and_writes_its_ledger(sandbox, tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "EXECUTED", tmp_path / "executed")
    pipeline.execute("06_synthesis", profile="smoke", seed=0, device="cpu")
    results = json.loads((sandbox[0] / "results" / "06_synthesis.json").read_text())
    assert results["profile"] == "smoke" and len(results["claims"]) == 5
    assert {"table_sinc", "table_boston", "table_digits", "gold_diagnostics"} <= set(results["tables"])
    assert all(c["preconditions"] for c in results["claims"])
