"""Tests of :mod:`symlib.inference.posteriors` against closed forms and independent code."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from symlib.inference import posteriors as P
from symlib.nn.convnets import init_optunet, optunet_forward
from symlib.nn.training import SGDConfig, train_batched


def _logreg_forward(params, x):
    """Binary logistic regression as a 2-class softmax: logits ``[0, x w + b]``."""
    z = x @ params["w"] + params["b"]
    return torch.stack([torch.zeros_like(z), z], dim=-1)


def _logreg_loss(params, x, y):
    return F.cross_entropy(_logreg_forward(params, x), y)


def _logreg_data(n=60, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.tensor([1.5, -1.0, 0.5], dtype=torch.float64)
    y = (torch.rand(n, generator=g, dtype=torch.float64) < torch.sigmoid(x @ w + 0.3)).long()
    return x, y


# --- SWAG ----------------------------------------------------------------------------------


def test_swag_collect_matches_direct_moments():
    g = torch.Generator().manual_seed(0)
    snaps = [{"a": torch.randn(2, 3, generator=g), "b": torch.randn(2, 2, 2, generator=g)}
             for _ in range(6)]
    state = P.swag_init(snaps[0], max_rank=4)
    for s in snaps:
        state = P.swag_collect(state, s)
    flat = torch.stack([torch.cat([s["a"], s["b"].reshape(2, -1)], -1) for s in snaps], 1)
    running_means = flat.cumsum(1) / torch.arange(1, 7)[None, :, None]
    assert state.n_snapshots == 6
    torch.testing.assert_close(state.mean, flat.mean(1))
    torch.testing.assert_close(state.sq_mean, (flat**2).mean(1))
    # the last 4 deviations, each from the running mean after its own snapshot
    torch.testing.assert_close(state.deviations, (flat - running_means)[:, 2:])


def test_swag_sample_moments_match_swag_gaussian():
    g = torch.Generator().manual_seed(1)
    snaps = [{"w": torch.randn(1, 4, generator=g, dtype=torch.float64) * torch.arange(1, 5)}
             for _ in range(5)]
    state = P.swag_init(snaps[0], max_rank=3)
    for s in snaps:
        state = P.swag_collect(state, s)
    scale = 0.1
    samples = P.swag_sample(state, 200_000, g, scale=scale)["w"][0]
    var = state.sq_mean[0] - state.mean[0] ** 2
    dev = state.deviations[0]
    cov = scale / 2 * (torch.diag(var) + dev.T @ dev / (dev.shape[0] - 1))
    torch.testing.assert_close(samples.mean(0), state.mean[0], atol=4e-3, rtol=0)
    torch.testing.assert_close(torch.cov(samples.T), cov, atol=3e-3, rtol=0.03)


def test_train_swag_snapshots_are_the_sgd_iterates():
    x, y = _logreg_data(n=40)
    params = {"w": torch.zeros(2, 3, dtype=torch.float64), "b": torch.zeros(2, dtype=torch.float64)}
    config = SGDConfig(lr=0.1, epochs=99, batch_size=10)  # epochs overridden: 3 * 2
    state = P.train_swag(_logreg_loss, params, x, y, config, torch.Generator().manual_seed(3),
                         n_snapshots=3, snapshot_every=2, max_rank=2)
    assert state.n_snapshots == 3 and state.deviations.shape == (2, 2, 4)
    record = []
    train_batched(_logreg_loss, params, x, y, SGDConfig(lr=0.1, epochs=6, batch_size=10),
                  torch.Generator().manual_seed(3),
                  on_step=lambda s, p: record.append(torch.cat([p["w"], p["b"][:, None]], -1))
                  if s % 8 == 0 else None)
    assert len(record) == 3
    torch.testing.assert_close(state.mean, torch.stack(record).mean(0))


# --- Laplace -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["full", "ggn"])
def test_laplace_matches_analytic_logistic_regression(kind):
    x, y = _logreg_data()
    prior = 0.7
    xt = np.c_[x.numpy(), np.ones(len(x))]
    theta = np.zeros(4)
    for _ in range(50):  # Newton's method on the log posterior
        p = 1 / (1 + np.exp(-xt @ theta))
        hess = xt.T @ (xt * (p * (1 - p))[:, None]) + prior * np.eye(4)
        theta -= np.linalg.solve(hess, xt.T @ (p - y.numpy()) + prior * theta)
    p = 1 / (1 + np.exp(-xt @ theta))
    precision = xt.T @ (xt * (p * (1 - p))[:, None]) + prior * np.eye(4)
    t = torch.from_numpy(theta)
    params = {"w": t[:3].repeat(2, 1), "b": t[3].repeat(2)}
    state = P.fit_laplace(_logreg_forward, params, x, y, prior, kind, chunk_size=16)
    assert state.n_negative.tolist() == [0, 0]
    torch.testing.assert_close(state.precision, torch.from_numpy(precision).expand(2, 4, 4))
    samples = P.laplace_sample(state, 100_000, torch.Generator().manual_seed(0))
    flat = torch.cat([samples["w"][1], samples["b"][1][:, None]], -1)
    cov = np.linalg.inv(precision)
    torch.testing.assert_close(flat.mean(0), t, atol=4 * np.sqrt(cov.max() / 1e5), rtol=0)
    torch.testing.assert_close(torch.cov(flat.T), torch.from_numpy(cov), atol=0.02 * cov.max(),
                               rtol=0.03)


def test_laplace_subset_scaling_and_full_hessian_clipping():
    g = torch.Generator().manual_seed(0)
    params = init_optunet(g, 1)
    x, y = torch.rand(8, 1, 28, 28, generator=g), torch.randint(0, 10, (8,), generator=g)
    ggn = P.fit_laplace(optunet_forward, params, x, y, 1.0, "ggn", chunk_size=4)
    sub = P.fit_laplace(optunet_forward, params, x[:4], y[:4], 1.0, "ggn")
    half = P.fit_laplace(optunet_forward, params, x[:4], y[:4], 1.0, "ggn", n_data=8)
    eye = torch.eye(355, dtype=torch.float64)
    assert torch.linalg.eigvalsh(ggn.precision[0]).min() > 0.999
    # an untrained network is no minimum: the exact Hessian has negative directions, clipped
    full = P.fit_laplace(optunet_forward, params, x[:2], y[:2], 1.0, "full")
    assert full.n_negative[0] > 0
    assert torch.linalg.eigvalsh(full.precision[0]).min() > 0.999
    torch.testing.assert_close(half.precision - eye, 2 * (sub.precision - eye))
    assert P.laplace_sample(full, 3, g)["W2"].shape == (1, 3, 10, 1, 5, 5)


# --- SGHMC ---------------------------------------------------------------------------------


def test_sghmc_recovers_gaussian_moments():
    a = torch.tensor([[2.0, 0.6], [0.6, 1.0]], dtype=torch.float64)

    def potential(params, xb, yb):
        return 0.5 * params["x"] @ a @ params["x"]

    chains = 100
    params = {"x": torch.full((chains, 2), 3.0, dtype=torch.float64)}
    data = torch.zeros(10, 1)
    config = P.SGHMCConfig(lr=0.005, alpha=0.1, batch_size=10, burn_in=400, thin=10,
                           n_samples=60)
    out = P.sghmc(potential, params, data, data[:, 0], config, torch.Generator().manual_seed(0))
    assert out["x"].shape == (chains, 60, 2)
    flat = out["x"].reshape(-1, 2)
    torch.testing.assert_close(flat.mean(0), torch.zeros(2, dtype=torch.float64), atol=0.06,
                               rtol=0)
    torch.testing.assert_close(torch.cov(flat.T), torch.linalg.inv(a), atol=0.06, rtol=0.1)


def test_nll_potential_is_n_times_mean_loss_plus_prior():
    x, y = _logreg_data(n=20)
    params = {"w": torch.tensor([0.2, -0.1, 0.3], dtype=torch.float64),
              "b": torch.tensor(0.5, dtype=torch.float64)}
    u = P.nll_potential(_logreg_forward, 1000, 2.0)(params, x, y)
    expected = 1000 * _logreg_loss(params, x, y) + (params["w"] ** 2).sum() + 0.25
    torch.testing.assert_close(u, expected)
    # weight decay wd on the mean loss is the prior of precision N * wd on the summed NLL
    wd, n = 2e-4, 4000
    prior = P.prior_precision_from_weight_decay(wd, n)
    sq = sum((v**2).sum() for v in params.values())
    torch.testing.assert_close(P.nll_potential(_logreg_forward, n, prior)(params, x, y),
                               n * (_logreg_loss(params, x, y) + wd / 2 * sq))


# --- MC dropout ----------------------------------------------------------------------------


def _optunet_with_active_units(seed=0):
    g = torch.Generator().manual_seed(seed)
    params = init_optunet(g, 1)
    params["W3"] = params["W3"].abs() * 5
    params["b3"] = params["b3"].abs()
    x = torch.rand(6, 1, 28, 28, generator=g)
    return params, x, g


def test_dropout_forward_equals_dropout_on_activations():
    params, x, g = _optunet_with_active_units()
    one = {k: v[0] for k, v in params.items()}
    p = 0.2
    mask = (torch.rand(6, 3, generator=g) >= p).float()
    # hidden activations: the network with an identity last layer
    probe = {**one, "W4": torch.eye(10, 3), "b4": torch.zeros(10)}
    h = optunet_forward(probe, x)[:, :3]
    assert (h > 0).all()
    expected = (h * mask / (1 - p)) @ one["W4"].T + one["b4"]
    torch.testing.assert_close(P.dropout_forward(optunet_forward, one, x, mask, p), expected)
    # one mask shared by all examples = the masked-weight network of dropout_samples
    shared = mask[:1].expand(6, 3)
    masked = {**one, "W4": one["W4"] * mask[0] / (1 - p)}
    torch.testing.assert_close(P.dropout_forward(optunet_forward, one, x, shared, p),
                               optunet_forward(masked, x))


def test_dropout_samples_mask_columns_at_rate_p():
    params, _, g = _optunet_with_active_units()
    s = P.dropout_samples(params, 20_000, g, p=0.2)
    w = s["W4"][0]  # (S, 10, 3)
    assert s["W1"].shape == (1, 20_000, 2, 1, 4, 4)
    torch.testing.assert_close(s["W1"][0, 5], params["W1"][0])
    dropped = (w == 0).all(dim=1)  # (S, 3): whole input columns
    assert ((w == 0) == dropped[:, None, :]).all()
    assert abs(dropped.float().mean().item() - 0.2) < 0.01
    torch.testing.assert_close(w.mean(0), params["W4"][0], atol=0.02 * params["W4"].abs().max(),
                               rtol=0)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_train_dropout_runs_and_matches_train_batched_without_dropout(optimizer):
    params, x, g = _optunet_with_active_units()
    y = torch.randint(0, 10, (6,), generator=g)
    config = SGDConfig(lr=0.05, epochs=1, batch_size=3, momentum=0.9, weight_decay=1e-3,
                       optimizer=optimizer)
    out = P.train_dropout(optunet_forward, params, x, y, config, torch.Generator().manual_seed(1),
                          p=0.0)
    ref = train_batched(lambda p, xb, yb: F.cross_entropy(optunet_forward(p, xb), yb), params, x,
                        y, config, torch.Generator().manual_seed(1))
    for k in ref:  # p = 0 keeps every unit; both draw the same shuffle first
        assert not torch.equal(out[k], params[k])
        torch.testing.assert_close(out[k], ref[k], atol=1e-5, rtol=1e-4)


# --- mean-field VI -------------------------------------------------------------------------


def test_mean_field_vi_matches_gaussian_optimum():
    g = torch.Generator().manual_seed(0)
    n, d, noise, prior_sd = 20, 3, 2.0, 1.0
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = x @ torch.tensor([1.0, -0.5, 0.2], dtype=torch.float64) + noise * torch.randn(
        n, generator=g, dtype=torch.float64)
    precision = x.T @ x / noise**2 + torch.eye(d, dtype=torch.float64) / prior_sd**2
    post_mean = torch.linalg.solve(precision, x.T @ y / noise**2)

    def log_lik(params, xb, yb):
        return -0.5 * ((yb - xb @ params["w"]) ** 2).mean() / noise**2

    params = {"w": torch.zeros(2, d, dtype=torch.float64)}
    config = P.VIConfig(lr=0.01, epochs=1000, batch_size=n, prior_sd=prior_sd, init_sd=0.1)
    q = P.fit_mean_field(log_lik, params, x, y, config, g)
    sd = q.log_sd["w"].exp()
    target_sd = precision.diagonal().rsqrt()
    # the mean-field optimum for a Gaussian target: its mean, and sd 1 / sqrt(diag precision);
    # Adam's last iterates jitter around it by about lr
    torch.testing.assert_close(q.mean["w"], post_mean.expand(2, d), atol=0.25 * target_sd.min(),
                               rtol=0)
    torch.testing.assert_close(sd, target_sd.expand(2, d), atol=0, rtol=0.1)
    s = P.mean_field_sample(q, 50_000, g)["w"]
    assert s.shape == (2, 50_000, d)
    torch.testing.assert_close(s.std(1), sd, atol=0, rtol=0.02)


# --- predictions ---------------------------------------------------------------------------


def test_predictive_probs_matches_loop():
    g = torch.Generator().manual_seed(0)
    samples = {k: v.reshape(2, 3, *v.shape[1:]) for k, v in init_optunet(g, 6).items()}
    x = torch.rand(5, 1, 28, 28, generator=g)
    probs = P.predictive_probs(optunet_forward, samples, x, batch_size=2, nets_per_chunk=4)
    assert probs.shape == (2, 3, 5, 10)
    for m in range(2):
        for s in range(3):
            one = {k: v[m, s] for k, v in samples.items()}
            torch.testing.assert_close(probs[m, s], torch.softmax(optunet_forward(one, x), -1))
