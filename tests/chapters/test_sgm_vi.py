"""Chapter 3 end to end in the smoke profile, cached under a temporary directory."""

import math

import matplotlib
import numpy as np
import pytest
import torch

from symlib.book.cache import cache_dir
from symlib.chapters import get_profile, reported
from symlib.chapters.sgm_vi import experiment as ch3  # private helpers are tested too

CLAIM_IDS = {"mean-seeking-threshold", "equivalent-modes-closer", "toy-symmetrised-elbo",
             "toy-test-mse", "theorem-4.1-gap", "mnist-gain-grows-with-width",
             "mnist-sgm-beats-mfvi", "cost-linear-in-K"}


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
    unjudged = ch3.claims(results, judge=False)
    assert {c["id"] for c in unjudged} == CLAIM_IDS
    assert all(c["holds"] is None for c in unjudged)
    judged = ch3.claims(results, judge=True)
    assert all(c["holds"] in (True, False, None) for c in judged)
    assert all(isinstance(c[f], str) and c[f] for c in judged for f in ("text", "paper", "ours"))


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
