"""Chapter 2b's OOD set: Fashion-MNIST's test images when its files are found, else the grey-patch
stand-in, decided at run time and recorded in the cache key, the claims and the captions."""


import pytest
import torch

from symlib import data
from symlib.book.chapter import RunResults
from symlib.chapters import get_profile
from symlib.chapters.posterior_mmd import CHAPTER, claims, networks, ood, views
from symlib.chapters.posterior_mmd.profiles import PROFILES, PosteriorMMDProfile
from tests.chapters.test_posterior_mmd import _made_up as _made_up_eval
from tests.data.test_data import write_fake_dataset


@pytest.fixture
def no_fashion(tmp_path, monkeypatch):
    """No Fashion-MNIST anywhere: an empty data root and no system folder."""
    monkeypatch.delenv("SYMLIB_FASHION_MNIST", raising=False)
    monkeypatch.setenv("SYMLIB_DATA", str(tmp_path / "empty"))
    monkeypatch.setitem(data.IDX_DATASETS, "fashion-mnist",
                        {**data.IDX_DATASETS["fashion-mnist"], "system_dirs": ()})


@pytest.fixture
def fake_fashion(tmp_path, monkeypatch, no_fashion):
    """Made-up Fashion-MNIST files under $SYMLIB_FASHION_MNIST (checksums off: not the real files)."""
    arrays = write_fake_dataset(tmp_path, "fashion", gz=True, n_test=7)
    monkeypatch.setenv("SYMLIB_FASHION_MNIST", str(tmp_path / "fashion"))
    monkeypatch.setenv("SYMLIB_VERIFY_MD5", "0")
    return arrays["x_test"]


def test_profiles_use_fashion_mnist_when_present_except_smoke():
    assert {name: p.ood_source for name, p in PROFILES.items()} == {
        "smoke": "patches", "quick": "auto", "full": "auto", "paper": "auto"}
    assert PosteriorMMDProfile().ood_source == "auto"


def test_auto_resolves_to_what_is_found(fake_fashion, monkeypatch):
    assert ood.resolve("auto") == "fashion"
    assert ood.resolve("patches") == "patches"  # smoke: the stand-in, whatever is installed
    x = ood.inputs("auto", 5)
    assert x.shape == (5, 1, 28, 28)
    torch.testing.assert_close(x, torch.tensor(fake_fashion[:5], dtype=torch.float32)[:, None] / 255)
    monkeypatch.delenv("SYMLIB_FASHION_MNIST")
    assert ood.resolve("auto") == "patches"
    torch.testing.assert_close(ood.inputs("auto", 5), data.ood_patches(5, seed=0).reshape(-1, 1, 28, 28))
    with pytest.raises(FileNotFoundError, match="fashion-mnist IDX files not found"):
        ood.inputs("fashion", 5)  # asked for by name: absent files are an error, not a fallback
    with pytest.raises(ValueError, match="ood_source must be one of 'auto', 'fashion', 'patches'"):
        ood.resolve("svhn")


def test_a_wrong_variable_is_an_error_not_a_fallback(no_fashion, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_FASHION_MNIST", str(tmp_path / "typo"))
    with pytest.raises(FileNotFoundError, match="SYMLIB_FASHION_MNIST is set"):
        ood.resolve("auto")


def test_cache_keys_say_which_ood_set_was_used(fake_fashion, monkeypatch):
    quick = get_profile("02b_posterior_mmd", "quick")
    smoke = get_profile("02b_posterior_mmd", "smoke")
    train, ev, rob = (CHAPTER.stage(s) for s in ("train", "eval", "robustness"))
    with_files = {s.name: s.key(quick, 0) for s in (train, ev, rob)}
    assert with_files["eval"]["ood_set"] == with_files["robustness"]["ood_set"] == "fashion"
    assert with_files["eval"]["fashion_mnist_idx"] == data.idx_fingerprint("fashion-mnist")
    smoke_key = ev.key(smoke, 0)
    monkeypatch.delenv("SYMLIB_FASHION_MNIST")
    without = {s.name: s.key(quick, 0) for s in (train, ev, rob)}
    assert without["eval"]["ood_set"] == without["robustness"]["ood_set"] == "patches"
    assert "fashion_mnist_idx" not in without["eval"]
    assert without["eval"] != with_files["eval"] and without["robustness"] != with_files["robustness"]
    assert without["train"] == with_files["train"]  # the networks never see the OOD inputs
    # smoke reads the stand-in: its key neither names a set nor depends on what is installed
    assert ev.key(smoke, 0) == smoke_key and "ood_set" not in smoke_key and "fashion_mnist_idx" not in smoke_key


def test_smoke_loads_the_stand_in_even_with_fashion_mnist_present(fake_fashion):
    smoke = get_profile("02b_posterior_mmd", "smoke")
    x = networks.load_data(smoke)["x_ood"]
    expected = (data.ood_patches(smoke.ood_points, seed=0).reshape(-1, 1, 28, 28) - networks.MNIST_MEAN)
    torch.testing.assert_close(x, expected / networks.MNIST_SD)


def _made_up(ood_record=None):
    out = _made_up_eval()
    return out if ood_record is None else {**out, "ood": ood_record}


FASHION = {"set": "fashion", "source": "auto", "points": 1000}
FALLBACK = {"set": "patches", "source": "auto", "points": 1000}


def test_ood_claims_name_the_ood_set():
    on_ood = ("multi_mode_better_ood", "optunet_id_ood_diversity_correlated")
    for record, text in [(FASHION, "; OOD: Fashion-MNIST test images (the first 1,000 of 10,000)"),
                         (FALLBACK, ("; OOD: grey-patch stand-in (1,000 patches of scikit-learn's sample "
                                    "photographs; Fashion-MNIST's files not found)"))]:
        ledger = {c.id: c for c in claims.judge(_made_up(record))}
        for claim in on_ood:
            assert ledger[claim].ours.endswith(text), (claim, ledger[claim].ours)
        assert "OOD:" not in ledger["multi_mode_closer"].ours  # the claims on weights do not
    # a result cached before the record: the entries as they were
    assert all("OOD:" not in c.ours for c in claims.judge(_made_up()))


def test_tables_and_settings_name_the_ood_set():
    """Table 1 and the collapse table name each run's OOD set in their own cells (a column, a
    heading), so that the published run's numbers shown under this build's caption still say
    which set they were measured on; the captions name none."""
    quick = get_profile("02b_posterior_mmd", "quick")
    table1, collapse = CHAPTER.view("table1_mnist"), CHAPTER.view("functional_collapse")
    def with_brier(made):   # every Table 1 column, as the eval stage gives them
        return {**made, "rows": [{**r, "Brier": 10.0} for r in made["rows"]]}
    results = RunResults({"eval": with_brier(_made_up(FASHION))}, config=quick)
    fallback = RunResults({"eval": with_brier(_made_up(FALLBACK))}, config=quick)
    for view in (table1, collapse):
        assert isinstance(view.caption, str) and "stand-in" not in view.caption and "Fashion" not in view.caption
    frame = views.table1_frame(results)
    assert set(frame["OOD inputs"]) == {"Fashion-MNIST"} and set(frame["OOD inputs (paper)"]) == {"Fashion-MNIST"}
    assert set(views.table1_frame(fallback)["OOD inputs"]) == {"grey patches (stand-in)"}
    made = _made_up(FASHION)
    made["collapse"] = {**made["collapse"], "id": torch.rand(5), "ood": torch.rand(5)}
    assert "out of distribution (Fashion-MNIST)" in views.collapse_frame(RunResults({"eval": made}, config=quick))
    made = {**made, "ood": FALLBACK}
    assert "out of distribution (grey patches (stand-in))" in views.collapse_frame(
        RunResults({"eval": made}, config=quick))
    settings = {r["setting"]: r["ours"] for r in views.paper_vs_ours(quick, _made_up(FALLBACK))}
    assert settings["OOD inputs"].startswith("grey-patch stand-in")
    quotes = {q.name: q.value for q in CHAPTER.quotes}
    assert quotes["ood_set"](results) == "Fashion-MNIST test images (the first 1,000 of 10,000)"
    # an old result without the record: named from a profile that fixes the set, else "not recorded"
    smoke = get_profile("02b_posterior_mmd", "smoke")
    assert views.ood_short(RunResults({"eval": _made_up()}, config=smoke)) == "grey patches (stand-in)"
    assert views.ood_short(RunResults({"eval": _made_up()}, config=quick)) == "not recorded"
