"""benchmarks/paper_units.py times the stage items it names (the first item of each chapter's
training fan-out, at the profile asked for, with the stage's own seed) and writes every unit it
timed, with its profile."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("paper_units", ROOT / "benchmarks" / "paper_units.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _few(data: dict) -> dict:
    """MNIST digits cut to 640 training and 200 test digits (ten batches): the units' bookkeeping
    holds at any size, and the tests need not pay for the shipped 5,000."""
    return {**data, **{k: data[k][:640] for k in ("x_train", "y_train")},
            **{k: data[k][:200] for k in ("x_test", "y_test")}}


def test_times_the_first_training_item_of_each_chapter_and_writes_it(tmp_path, monkeypatch):
    from symlib.chapters import declared, get_profile
    from symlib.chapters.posterior_mmd import networks
    from symlib.chapters.posterior_mmd import stages as stages_2b
    from symlib.chapters.posterior_mmd.networks import train_chunks
    from symlib.chapters.symmetry_removal import optunets
    from symlib.chapters.symmetry_removal.optunets import optunet_chunks

    few_2b = _few(networks.load_data(get_profile("02b_posterior_mmd", "smoke"), ood=False))
    monkeypatch.setattr(stages_2b, "load_data", lambda config, *, ood=True: few_2b)   # train_chunks' (ood=False)
    load_mnist = optunets.load_mnist
    monkeypatch.setattr(optunets, "load_mnist", lambda source, **kw: _few(load_mnist(source, **kw)))
    out = tmp_path / "units.json"
    result = _script().main(["--profile", "smoke", "--units", "2b_chunk", "2a_chunk", "--out", str(out)])
    assert json.loads(out.read_text()) == result
    assert result["profile"] == "smoke" and result["device"] == "cpu"
    assert list(result["units"]) == ["2b_chunk", "2a_chunk"]
    b, a = result["units"]["2b_chunk"], result["units"]["2a_chunk"]
    assert b["networks"] == train_chunks(get_profile("02b_posterior_mmd", "smoke"))[0][1]
    assert a["networks"] == optunet_chunks(get_profile("02a_symmetry_removal", "smoke"))[0][1]
    assert b["epochs"] == get_profile("02b_posterior_mmd", "smoke").epochs
    # each with the seed its stage has in a run of seed 0 (chapter 2a's chunks: not the run seed itself)
    assert b["seed"] == declared("02b_posterior_mmd").stage("train_chunks").legacy_seed(0)
    assert a["seed"] == declared("02a_symmetry_removal").stage("optunet_chunks").legacy_seed(0) != 0
    for unit in (a, b):
        assert unit["seconds"] > 0 and 0 <= unit["networks_restarted"] <= unit["restarts"] <= 10 * unit["networks"]


def test_times_the_samples_stage_method_by_method_in_a_cache_of_its_own(tmp_path, monkeypatch):
    """Each method of chapter 2b's ``samples`` is a unit of its own (the stage stops between
    them); the stand-in modes' checkpoint never reaches the user's cache, and the budget
    variables are as they were (on :func:`_few` digits)."""
    from symlib.chapters import get_profile
    from symlib.chapters.posterior_mmd import networks
    from symlib.chapters.posterior_mmd import stages as stages_module
    from symlib.chapters.posterior_mmd.sampling import POSTERIORS

    few = _few(networks.load_data(get_profile("02b_posterior_mmd", "smoke"), ood=False))
    monkeypatch.setattr(stages_module, "load_data", lambda config, *, ood=True: few)   # the samples stage's (ood=False)
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SYMLIB_BUDGET_S", "480")
    unit = _script().main(["--profile", "smoke", "--units", "2b_samples"])["units"]["2b_samples"]
    assert list(unit["methods_s"]) == list(POSTERIORS) and unit["rows"] == 10
    assert all(t > 0 for t in unit["methods_s"].values())
    assert unit["seconds"] >= sum(unit["methods_s"].values()) - 0.3   # each rounded to 0.1 s
    assert not (tmp_path / "cache").exists()
    assert os.environ["SYMLIB_BUDGET_S"] == "480" and os.environ["SYMLIB_CACHE"] == str(tmp_path / "cache")


def test_an_unknown_unit_is_refused():
    with pytest.raises(SystemExit):
        _script().main(["--units", "3_chunk"])


def test_times_every_remedy_fit_of_chapter_6_on_one_benchmark():
    """``6_fits``: fit 0 of every remedy of chapter 6's ``fits`` stage on the benchmark asked for
    (each a unit that keeps no checkpoint), through the stage's compute, at the profile's budgets."""
    from symlib.chapters import get_profile
    from symlib.chapters.synthesis.remedies import COMPACT, methods

    unit = _script().main(["--profile", "smoke", "--units", "6_fits", "--benchmark", "boston"])["units"]["6_fits"]
    assert list(unit["methods_s"]) == [m for m in methods("boston") if m not in COMPACT]
    assert all(t >= 0 for t in unit["methods_s"].values())
    assert unit["seconds"] >= sum(unit["methods_s"].values()) - 0.5
    config = get_profile("06_synthesis", "smoke")
    assert (unit["benchmark"], unit["epochs"], unit["fits_per_method"]) == ("boston", config.vi_epochs, config.n_seeds)


def test_costs_the_gold_standards_gradient_and_bookkeeping_per_benchmark():
    """``6_gold_costs``: per benchmark, one gradient for all chains and one kept transition's
    bookkeeping at the profile's shapes, with the run's counts of each and their products."""
    from symlib.chapters import get_profile

    config = get_profile("06_synthesis", "smoke")
    unit = _script().main(["--profile", "smoke", "--units", "6_gold_costs", "--repeats", "3"])["units"]["6_gold_costs"]
    assert list(unit["benchmarks"]) == list(config.benchmarks) and unit["repeats"] == 3
    for cost in unit["benchmarks"].values():
        assert cost["chains"] == config.hmc_chains and cost["kept"] == config.hmc_samples
        assert cost["gradients"] == (config.hmc_burnin + config.hmc_samples * config.hmc_thin) * config.hmc_leapfrog
        assert cost["gradient_ms"] > 0 and cost["keep_ms"] > 0
        assert cost["gradients_s"] == pytest.approx(cost["gradient_ms"] * cost["gradients"] / 1e3, abs=0.06)
