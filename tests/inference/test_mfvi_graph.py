"""Chapter 1's VI step as a CUDA graph (issue 30, item 2): symlib/inference/mfvi_graph.py.

On the CPU the graph's step function, run eagerly (``mode="replay"``), must take the steps of
:func:`symlib.inference.mfvi.fit` (the same noise from the same generator, the same Adam): the
same parameters and history. On a GPU (skipped here) the replayed graph must do the same.
"""

import signal

import numpy as np
import pytest
import torch
from killing import kill_after_checkpoint

from symlib.inference import mfvi
from symlib.inference.hmc_resumable import BudgetExhausted
from symlib.inference.mfvi_graph import fit_captured, fit_resumable
from symlib.nn.mlp import Activation, MLPSpec, init_mlp
from symlib.nn.orthoskip import skip_matrices

CUDA = torch.cuda.is_available()


def _problem(device="cpu"):
    spec = MLPSpec((1, 8, 8, 1), Activation.SELU)
    gen = torch.Generator().manual_seed(0)
    skips = skip_matrices(spec, gen)
    has_skip = torch.tensor([False, True, False, True])
    skips = {k: torch.where(has_skip[:, None, None], o, torch.zeros_like(o)).to(device) for k, o in skips.items()}
    model = mfvi.BayesMLP(spec, skips, torch.tensor([False, False, True, True], device=device))
    base = init_mlp(spec, gen)
    params = {k: v.expand(4, *v.shape).clone().to(device) for k, v in base.items()}
    q0 = mfvi.mean_field_from_params(model, params, init_sd=1e-2)
    x = torch.rand(32, 1, generator=gen) * 2 - 1
    y = torch.sin(3 * x) + 0.1 * torch.randn(32, 1, generator=gen)
    return model, q0, x.to(device), y.to(device)


def _args(device="cpu", **kw):
    """The problem and the fit's arguments (a fresh generator each time), ``kw`` overriding them."""
    gen = torch.Generator(device).manual_seed(7)
    return _problem(device), {"n_steps": 25, "n_samples": 3, "lr": 1e-2, "generator": gen, "noise_sd": 0.2,
                              "anneal_fraction": 0.5, "record_every": 5, "progress": False} | kw


def _fit(mode, device="cpu", **kw):
    problem, args = _args(device, **kw)
    if mode == "fit":
        return mfvi.fit(*problem, **args)
    return fit_captured(*problem, mode=mode, **args)


def _assert_same(got, want, rtol=0.0, atol=0.0):
    for k in want.q.mean:
        torch.testing.assert_close(got.q.mean[k].cpu(), want.q.mean[k].cpu(), rtol=rtol, atol=atol)
        torch.testing.assert_close(got.q.log_sd[k].cpu(), want.q.log_sd[k].cpu(), rtol=rtol, atol=atol)
    torch.testing.assert_close(got.log_noise_sd.cpu(), want.log_noise_sd.cpu(), rtol=rtol, atol=atol)
    assert set(got.history) == set(want.history)
    for k, v in want.history.items():
        assert got.history[k].shape == v.shape, k
        np.testing.assert_allclose(got.history[k], v, rtol=max(rtol, 1e-12), atol=atol, err_msg=k)


@pytest.mark.parametrize("kw", [{}, {"average_records": True}, {"learn_noise": True, "anneal_fraction": 0.0}])
def test_the_graph_step_run_eagerly_takes_the_steps_of_mfvi_fit(kw):
    _assert_same(_fit("replay", **kw), _fit("fit", **kw))


def test_the_fit_moves_and_auto_is_mfvi_fit_on_the_cpu():
    got, start = _fit("auto"), _problem()[1]
    _assert_same(got, _fit("fit"))
    assert not torch.equal(got.q.mean["W1"], start.mean["W1"])     # the steps did something


def test_bad_modes_are_refused_with_a_message():
    with pytest.raises(ValueError, match="mode must be one of"):
        _fit("fast")
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        _fit("graph")


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("kw", [{}, {"average_records": True, "learn_noise": True}])
def test_the_replayed_graph_takes_the_steps_of_mfvi_fit_on_the_gpu(kw):
    _assert_same(_fit("graph", "cuda", **kw), _fit("fit", "cuda", **kw), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- resumable fits (issue 30, item 3)

def _resumable(path, device="cpu", **kw):
    problem, args = _args(device, **{"average_records": True, "learn_noise": True} | kw)
    return fit_resumable(*problem, checkpoint=path, mode="replay" if device == "cpu" else "graph", **args)


def test_a_fit_stopped_at_its_budget_after_every_step_resumes_to_mfvi_fit(tmp_path):
    path, pieces = tmp_path / "ck.pt", 0
    while True:
        res = _resumable(path, budget_s=0.0)          # each piece takes one step, then stops
        pieces += 1
        if res.complete:
            break
        with pytest.raises(BudgetExhausted, match="run again"):
            res.require_complete()
    assert pieces == 25 and res.pieces == 25 and res.steps == 25
    _assert_same(res.fit, _fit("fit", average_records=True, learn_noise=True))
    again = _resumable(path)                              # a finished fit is read, not trained again
    assert again.complete and again.pieces == 25
    _assert_same(again.fit, res.fit)


def test_a_killed_fit_resumes_to_the_same_numbers(tmp_path):
    path = tmp_path / "ck.pt"
    returncode = kill_after_checkpoint(
        __file__, f"t._resumable({str(path)!r}, n_steps=200, every_s=0)",
        "symlib.inference.mfvi:elbo", path, linger_s=0.5)
    assert returncode == -signal.SIGKILL            # killed, not finished
    partial = torch.load(path, weights_only=False)["done"]
    assert 0 < partial < 200
    res = _resumable(path, n_steps=200)
    assert res.complete and res.pieces == 2
    _assert_same(res.fit, _fit("fit", n_steps=200, average_records=True, learn_noise=True))


def test_a_checkpoint_of_other_settings_is_refused_by_name(tmp_path):
    _resumable(tmp_path / "ck.pt", n_steps=5)
    with pytest.raises(ValueError, match=r"other settings \(lr\)"):
        _resumable(tmp_path / "ck.pt", n_steps=5, lr=3e-2)


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need a GPU")
def test_on_a_gpu_a_graph_fit_in_pieces_resumes_to_mfvi_fit(tmp_path):
    path = tmp_path / "ck.pt"
    while not (res := _resumable(path, "cuda", budget_s=0.0)).complete:
        pass
    assert res.pieces == 25
    _assert_same(res.fit, _fit("fit", "cuda", average_records=True, learn_noise=True), rtol=1e-5, atol=1e-6)
