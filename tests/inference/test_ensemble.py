"""Deep-ensemble MAP training: the objective, batched == separate training, callbacks."""

import pytest
import torch

from symlib.inference import ensemble
from symlib.nn.mlp import MLPSpec, mlp_forward

SPEC = MLPSpec((4, 6, 3))


def _data(n=24, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=gen), torch.randint(0, 3, (n,), generator=gen)


def test_one_full_batch_sgd_step_follows_the_map_objective():
    x, y = _data()
    params = ensemble.init_ensemble(SPEC, 2, torch.Generator().manual_seed(1))
    lr, prior_sd = 0.1, 1.5
    out = ensemble.train_map(params, x, y, SPEC, epochs=1, batch_size=len(x), lr=lr,
                             generator=torch.Generator().manual_seed(2), optimiser="sgd", momentum=0.0,
                             prior_sd=prior_sd, progress=False).params
    for m in range(2):
        leaves = {k: v[m].clone().requires_grad_(True) for k, v in params.items()}
        loss = torch.nn.functional.cross_entropy(mlp_forward(leaves, x, SPEC), y) + sum(
            v.square().sum() for v in leaves.values()) / (2 * prior_sd**2 * len(x))
        loss.backward()
        for k, v in leaves.items():
            torch.testing.assert_close(out[k][m], v.detach() - lr * v.grad, rtol=1e-5, atol=1e-6)


def test_batched_training_equals_separate_training():
    x, y = _data()
    params = ensemble.init_ensemble(SPEC, 3, torch.Generator().manual_seed(3))
    kwargs = {"epochs": 5, "batch_size": len(x), "lr": 1e-2, "prior_sd": 1.0, "progress": False}
    joint = ensemble.train_map(params, x, y, SPEC, generator=torch.Generator().manual_seed(4), **kwargs).params
    for m in range(3):
        alone = ensemble.train_map({k: v[m: m + 1] for k, v in params.items()}, x, y, SPEC,
                                   generator=torch.Generator().manual_seed(5), **kwargs).params
        for k in params:
            torch.testing.assert_close(joint[k][m], alone[k][0], rtol=1e-5, atol=1e-6)


def test_training_reduces_loss_and_calls_back_every_epoch():
    x, y = _data(64)
    seen = []
    res = ensemble.train_map(ensemble.init_ensemble(SPEC, 2, torch.Generator().manual_seed(6)), x, y, SPEC,
                             epochs=15, batch_size=16, lr=1e-2, generator=torch.Generator().manual_seed(7),
                             on_epoch=lambda e, p: seen.append(e), progress=False)
    assert seen == list(range(16))
    assert res.history["loss"].shape == (15, 2)
    assert (res.history["loss"][-1] < res.history["loss"][0]).all()


def test_ensemble_forward_matches_members():
    x, _ = _data()
    params = ensemble.init_ensemble(SPEC, 3, torch.Generator().manual_seed(8))
    out = ensemble.ensemble_forward(params, x, SPEC)
    assert out.shape == (3, len(x), 3)
    for m in range(3):
        torch.testing.assert_close(out[m], mlp_forward({k: v[m] for k, v in params.items()}, x, SPEC))


def test_unknown_optimiser():
    x, y = _data()
    with pytest.raises(ValueError):
        ensemble.train_map(ensemble.init_ensemble(SPEC, 1, torch.Generator()), x, y, SPEC, epochs=1,
                           batch_size=8, lr=0.1, generator=torch.Generator(), optimiser="lbfgs")
