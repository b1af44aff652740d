"""Chapter 2a end to end in the smoke profile (cache and results redirected to tmp_path)."""

import matplotlib
import pandas as pd
import pytest
import torch

from symlib.chapters import get_profile
from symlib.chapters import symmetry_removal as ex

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def results():
    # cache and results go to the session's temporary directories (tests/conftest.py)
    return ex.run(get_profile("02a_symmetry_removal", "smoke"), seed=0)


def test_smoke_run_structure(results):
    assert {c["id"] for c in results["claims"]} == {
        "toy-duplicated-modes", "not-min-mass", "permutations-rare-late", "identical-marginals"}
    assert all(c["holds"] is None for c in results["claims"])  # smoke cannot judge
    assert results["toy"]["n_trained"] == 200
    assert results["mass"]["max_output_change"] < 1e-8
    assert results["optunets"]["canonical_output_change"] < 1e-10
    assert all(r["min-mass"] <= r["mass"] * (1 + 1e-9) for r in results["mass"]["rows"])
    assert results["changes"]["mean_tau"].shape[0] == results["optunets"]["steps_per_epoch"]


def test_toy_removal_keeps_function_and_sorts(results):
    toy = results["toy"]
    assert toy["max_output_change"] < 1e-9
    if toy["n_kept"]:
        assert (toy["sorted"][:, 0] >= toy["sorted"][:, 1]).all()


def test_figures_and_tables(results):
    for fig in (ex.plot_toy(results["toy"]), ex.plot_mass(results["mass"]), ex.plot_kendall(results["changes"])):
        assert fig.axes
        matplotlib.pyplot.close(fig)
    modes = pd.DataFrame(results["modes"])
    assert "ResNet-18 (CIFAR-100)" in set(modes["network"])


def test_kendall_tau():
    p = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3]])
    q = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0]])
    torch.testing.assert_close(ex.kendall_tau(p, q), torch.tensor([1.0, -1.0]))
    torch.testing.assert_close(ex.kendall_tau(torch.tensor([0, 1, 2]), torch.tensor([1, 0, 2])),
                               torch.tensor(1 / 3))


def test_marginal_ks_detects_difference():
    gen = torch.Generator().manual_seed(0)
    same = torch.randn(500, 2, 1, generator=gen)
    assert ex.marginal_ks(same, 0.05)["rejected"] == 0.0
    diff = torch.cat([torch.randn(500, 1, 1, generator=gen), 1 + torch.randn(500, 1, 1, generator=gen)], 1)
    assert ex.marginal_ks(diff, 0.05)["rejected"] == 1.0
