"""Mean-field VI: local reparameterisation, closed-form KLs, ELBO against exact evidence."""

import itertools
import math

import numpy as np
import pytest
import torch

from symlib.inference import mfvi
from symlib.nn.mlp import MLPSpec, activation_fn, init_mlp, mlp_forward
from symlib.nn.orthoskip import orthoskip_forward, skip_matrices
from symlib.transforms import ordered_from_unconstrained

F64 = torch.float64


def _random_state(spec, gen, batch=(), sd_range=(0.1, 0.5)):
    mean = {k: torch.randn(*batch, *s, generator=gen, dtype=F64) for k, s in spec.shapes().items()}
    lo, hi = sd_range
    log_sd = {k: torch.log(lo + (hi - lo) * torch.rand(*batch, *s, generator=gen, dtype=F64))
              for k, s in spec.shapes().items()}
    return mfvi.MeanField(mean, log_sd)


# --------------------------------------------------------------------------- local reparameterisation


def test_local_reparameterisation_matches_the_pre_activation_moments():
    """One layer: z = W x + b under q has mean M x + m and variance S^2 x^2 + s^2, and both the
    local trick and whole-weight sampling reproduce them."""
    spec = MLPSpec((3, 4))
    gen = torch.Generator().manual_seed(0)
    q = _random_state(spec, gen)
    model = mfvi.BayesMLP(spec)
    x = torch.randn(5, 3, generator=gen, dtype=F64)
    mean = x @ q.mean["W1"].T + q.mean["b1"]
    var = x.square() @ torch.exp(2 * q.log_sd["W1"]).T + torch.exp(2 * q.log_sd["b1"])
    n = 40_000
    local = mfvi.sample_outputs(q, model, x, n, gen)  # (S, 5, 4)
    weights = mfvi.sample_weights(q, model, n, gen)
    sampled = torch.func.vmap(mlp_forward, in_dims=(0, None, None))(weights, x, spec)  # (S, 5, 4)
    for draws in (local, sampled):
        se = (var / n).sqrt()
        assert ((draws.mean(0) - mean).abs() < 5 * se).all()
        assert torch.allclose(draws.var(0), var, rtol=0.05)


@pytest.mark.parametrize("ordered", [False, True, "mixed"])
def test_local_trick_matches_weight_sampling_through_a_deep_skip_network(ordered):
    """The local trick's output marginals equal those of whole-network weight draws (with skips
    and ordered biases), compared by Monte Carlo."""
    spec = MLPSpec((1, 3, 3, 1), "selu")
    gen = torch.Generator().manual_seed(1)
    batch = (2,)
    q = _random_state(spec, gen, batch, sd_range=(0.2, 0.6))
    skips = skip_matrices(spec, gen, dtype=F64)
    skips = {k: torch.stack([v, torch.zeros_like(v)]) for k, v in skips.items()}  # model 2: no skip
    flag = torch.tensor([True, False]) if ordered == "mixed" else ordered
    model = mfvi.BayesMLP(spec, skips, flag)
    x = torch.tensor([[-1.5], [0.0], [0.7]], dtype=F64)
    n = 40_000
    local = mfvi.sample_outputs(q, model, x, n, gen)[..., 0]  # (2, S, 3)
    sampled = mfvi.sample_functions(q, model, x, n, gen)[..., 0]  # whole-network draws
    m1, m2 = local.mean(1), sampled.mean(1)
    v1, v2 = local.var(1), sampled.var(1)
    se = ((v1 + v2) / n).sqrt()
    assert ((m1 - m2).abs() < 5 * se).all(), (m1, m2)
    assert torch.allclose(v1, v2, rtol=0.08), (v1, v2)


def _reference_outputs(q, model, x, n_samples, generator):
    """The local reparameterisation trick written out with plain autograd ops, one layer at a
    time on (models, samples, points, units) tensors, drawing the noise in sample_outputs'
    order (per layer: the ordered biases' noise, then the pre-activations')."""
    spec = model.spec
    f = activation_fn(spec.activation)
    n_models = q.mean["W1"].shape[0]
    flag = model.ordered_biases
    mask = flag if isinstance(flag, torch.Tensor) else torch.full((n_models,), bool(flag))
    mask = mask.view(n_models, 1, 1, 1)
    h = x.expand(n_models, n_samples, *x.shape)
    for l in range(1, spec.n_layers + 1):
        width = spec.widths[l]
        w_mean, w_var = q.mean[f"W{l}"].unsqueeze(1), torch.exp(2 * q.log_sd[f"W{l}"]).unsqueeze(1)
        b_mean, b_sd = q.mean[f"b{l}"].view(n_models, 1, 1, width), torch.exp(q.log_sd[f"b{l}"]).view(n_models, 1, 1, width)
        b_sample = torch.zeros_like(b_mean)
        if bool(mask.any()) and l < spec.n_layers:
            eps_b = torch.randn((n_models, n_samples, 1, width), generator=generator, dtype=x.dtype)
            b_sample = torch.where(mask, ordered_from_unconstrained(b_mean + b_sd * eps_b), 0.0)
            b_mean, b_sd = torch.where(mask, 0.0, b_mean), torch.where(mask, 0.0, b_sd)
        inp = h if l == 1 else f(h)
        mu = inp @ w_mean.transpose(-1, -2) + b_mean + b_sample
        var = inp.square() @ w_var.transpose(-1, -2) + b_sd.square()
        if f"O{l}" in model.skips:
            mu = mu + h @ model.skips[f"O{l}"].unsqueeze(1).transpose(-1, -2)
        if l == 1:  # as in sample_outputs: x = 0 with an ordered bias has zero variance
            var = var.clamp_min(torch.finfo(var.dtype).tiny)
        eps = torch.randn((n_models, n_samples, x.shape[0], width), generator=generator, dtype=x.dtype)
        h = mu + var.sqrt() * eps
    return h


@pytest.mark.parametrize("activation, ordered, dtype", [
    ("selu", "mixed", F64), ("selu", True, torch.float32), ("relu", False, F64), ("tanh", "mixed", F64),
    ("identity", False, F64),
])
def test_sample_outputs_and_its_gradients_match_a_plain_autograd_reference(activation, ordered, dtype):
    """Same generator state -> the same outputs, ELBO and gradients as the reference above
    (chapter 1's setting: a batch of models with and without skips and ordered biases)."""
    spec = MLPSpec((1, 4, 5, 3, 2), activation)
    gen = torch.Generator().manual_seed(5)
    q = _random_state(spec, gen, (3,), sd_range=(0.2, 0.6))
    q = mfvi.MeanField(*({k: v.to(dtype).requires_grad_(True) for k, v in d.items()} for d in q))
    skips = skip_matrices(spec, gen, dtype=dtype)
    skips = {k: torch.stack([v, torch.zeros_like(v), v]) for k, v in skips.items()}
    flag = torch.tensor([True, False, True]) if ordered == "mixed" else ordered
    model = mfvi.BayesMLP(spec, skips, flag)
    x = torch.linspace(-1.5, 1.5, 7, dtype=dtype)[:, None]
    y = torch.randn(7, 2, generator=gen, dtype=dtype)
    leaves = list(q.mean.values()) + list(q.log_sd.values())
    results = []
    for sampler in (mfvi.sample_outputs, _reference_outputs):
        out = sampler(q, model, x, 6, torch.Generator().manual_seed(9))
        loss = -mfvi.gaussian_log_likelihood(y, out, 0.3).mean(-1).sum() + mfvi.kl_divergence(q, model).sum()
        results.append((out, loss, torch.autograd.grad(loss, leaves)))
    (out, loss, grads), (ref_out, ref_loss, ref_grads) = results
    tol = {"rtol": 1e-11, "atol": 1e-11} if dtype == F64 else {"rtol": 1e-4, "atol": 1e-4}
    assert out.shape == ref_out.shape == (3, 6, 7, 2)
    assert torch.allclose(out, ref_out, **tol)
    assert torch.allclose(loss, ref_loss, **tol)
    for g, r in zip(grads, ref_grads):
        assert torch.allclose(g, r, **tol), (g - r).abs().max()


def test_local_reparameterisation_backward_matches_finite_differences():
    spec = MLPSpec((2, 3, 3, 2), "selu")
    gen = torch.Generator().manual_seed(6)
    q = _random_state(spec, gen, (2,), sd_range=(0.3, 0.8))
    skips = {k: torch.stack([v, torch.zeros_like(v)]) for k, v in skip_matrices(spec, gen, dtype=F64).items()}
    model = mfvi.BayesMLP(spec, skips, torch.tensor([True, False]))
    x = torch.randn(4, 2, generator=gen, dtype=F64)
    keys = list(q.mean)

    def outputs(*tensors):
        state = mfvi.MeanField(dict(zip(keys, tensors[: len(keys)])), dict(zip(keys, tensors[len(keys):])))
        return mfvi.sample_outputs(state, model, x, 3, torch.Generator().manual_seed(1))

    inputs = [t.clone().requires_grad_(True) for t in (*q.mean.values(), *q.log_sd.values())]
    assert torch.autograd.gradcheck(outputs, inputs)


def test_sample_functions_evaluates_whole_weight_draws():
    spec = MLPSpec((1, 3, 2, 1), "selu")
    q = _random_state(spec, torch.Generator().manual_seed(11), (2,))
    skips = skip_matrices(spec, torch.Generator().manual_seed(12), dtype=F64)
    model = mfvi.BayesMLP(spec, skips, torch.tensor([True, False]))
    x = torch.linspace(-1, 1, 4, dtype=F64)[:, None]
    out = mfvi.sample_functions(q, model, x, 5, torch.Generator().manual_seed(13))
    weights = mfvi.sample_weights(q, model, 5, torch.Generator().manual_seed(13))
    assert out.shape == (2, 5, 4, 1)
    for b in range(2):
        for s in range(5):
            w = {k: v[b, s] for k, v in weights.items()}
            assert torch.allclose(out[b, s], orthoskip_forward(w, x, spec, skips))
    assert (weights["b1"][0].diff(dim=-1) > 0).all()  # model 0 has ordered biases


def test_ordered_initialisation_keeps_the_function_and_orders_the_biases():
    spec = MLPSpec((1, 5, 4, 1), "selu")
    gen = torch.Generator().manual_seed(2)
    params = init_mlp(spec, gen, dtype=F64)
    model = mfvi.BayesMLP(spec, ordered_biases=True)
    q = mfvi.mean_field_from_params(model, params, init_sd=1e-3)
    centre = mfvi.sample_weights(mfvi.MeanField(q.mean, {k: v - 50 for k, v in q.log_sd.items()}), model, 1, gen)
    for l in (1, 2):
        assert (centre[f"b{l}"][0].diff() > 0).all()
    x = torch.linspace(-1, 1, 9, dtype=F64)[:, None]
    assert torch.allclose(mlp_forward({k: v[0] for k, v in centre.items()}, x, spec), mlp_forward(params, x, spec))
    # a per-model mask sorts only the masked model
    batched = {k: torch.stack([v, v]) for k, v in params.items()}
    mixed = mfvi.mean_field_from_params(mfvi.BayesMLP(spec, ordered_biases=torch.tensor([False, True])), batched)
    assert torch.equal(mixed.mean["W2"][0], params["W2"])
    assert torch.allclose(mixed.mean["b1"][1], q.mean["b1"])


# --------------------------------------------------------------------------- KL


def test_gaussian_kl_matches_torch_distributions():
    gen = torch.Generator().manual_seed(3)
    mean = torch.randn(50, generator=gen, dtype=F64)
    log_sd = torch.randn(50, generator=gen, dtype=F64) * 0.7
    ref = torch.distributions.kl_divergence(
        torch.distributions.Normal(mean, log_sd.exp()), torch.distributions.Normal(0.0, 1.0))
    assert torch.allclose(mfvi.gaussian_kl(mean, log_sd), ref)


def _log_ordered_prior(u):
    """log p(u): K! prod N(b_k; 0, 1) on the ordered cone, pulled back through b = ordered(u)."""
    from symlib.transforms import ordered_from_unconstrained

    k = u.shape[-1]
    b = ordered_from_unconstrained(u)
    return (math.lgamma(k + 1) + torch.distributions.Normal(0.0, 1.0).log_prob(b).sum(-1)
            + u[..., 1:].sum(-1))


def test_ordered_prior_is_normalised():
    """p(u) for K = 2 integrates to 1 (checks the K! and the Jacobian)."""
    u1 = torch.linspace(-9, 9, 1201, dtype=F64)
    u2 = torch.linspace(-16, 4, 1601, dtype=F64)
    grid = torch.stack(torch.meshgrid(u1, u2, indexing="ij"), dim=-1)
    density = _log_ordered_prior(grid).exp().numpy()
    total = np.trapezoid(np.trapezoid(density, u2.numpy(), axis=1), u1.numpy())
    assert abs(total - 1.0) < 1e-4


@pytest.mark.parametrize("k", [1, 2, 5])
def test_ordered_normal_kl_matches_monte_carlo(k):
    gen = torch.Generator().manual_seed(4 + k)
    mean = torch.cat([torch.randn(1, generator=gen, dtype=F64), -1.0 + 0.5 * torch.randn(k - 1, generator=gen, dtype=F64)])
    log_sd = torch.log(0.2 + 0.5 * torch.rand(k, generator=gen, dtype=F64))
    q = torch.distributions.Normal(mean, log_sd.exp())
    u = q.sample((200_000,))
    terms = q.log_prob(u).sum(-1) - _log_ordered_prior(u)
    estimate, se = terms.mean(), terms.std() / math.sqrt(len(terms))
    closed = mfvi.ordered_normal_kl(mean, log_sd)
    assert abs(closed - estimate) < 5 * se + 1e-9
    if k == 1:
        assert torch.allclose(closed, mfvi.gaussian_kl(mean, log_sd).sum())


def test_kl_of_a_mixed_batch_equals_separate_models():
    spec = MLPSpec((1, 4, 3, 1), "selu")
    gen = torch.Generator().manual_seed(5)
    q = _random_state(spec, gen, (2,))
    mixed = mfvi.kl_divergence(q, mfvi.BayesMLP(spec, ordered_biases=torch.tensor([False, True])))
    for i, flag in enumerate((False, True)):
        single = mfvi.MeanField({k: v[i] for k, v in q.mean.items()}, {k: v[i] for k, v in q.log_sd.items()})
        assert torch.allclose(mixed[i], mfvi.kl_divergence(single, mfvi.BayesMLP(spec, ordered_biases=flag)))
    plain = mfvi.kl_divergence(q, mfvi.BayesMLP(spec))
    expected = sum(mfvi.gaussian_kl(q.mean[k], q.log_sd[k]).flatten(1).sum(-1) for k in q.mean)
    assert torch.allclose(plain, expected)


# --------------------------------------------------------------------------- ELBO vs exact evidence


def _conjugate_regression():
    """y = w1 x1 + w2 x2 + b + noise with orthogonal design columns (incl. the constant), so
    the exact posterior under the N(0, I) prior is a diagonal Gaussian: mean-field is exact."""
    x = torch.tensor([[1, 1], [1, -1], [-1, 1], [-1, -1], [2, 2], [2, -2], [-2, 2], [-2, -2]], dtype=F64) * 0.5
    y = torch.tensor([0.9, 0.1, 0.4, -0.8, 1.7, 0.2, 0.3, -1.6], dtype=F64)[:, None]
    noise = 0.3
    design = torch.cat([x, torch.ones(8, 1, dtype=F64)], dim=1)
    assert torch.allclose(design.T @ design, torch.diag(torch.diagonal(design.T @ design)))
    cov = torch.linalg.inv(torch.eye(3, dtype=F64) + design.T @ design / noise**2)
    mean = cov @ design.T @ y[:, 0] / noise**2
    evidence = torch.distributions.MultivariateNormal(
        torch.zeros(8, dtype=F64), design @ design.T + noise**2 * torch.eye(8, dtype=F64)).log_prob(y[:, 0])
    post_sd = torch.diagonal(cov).sqrt()
    q_star = mfvi.MeanField({"W1": mean[:2].reshape(1, 2), "b1": mean[2:]},
                            {"W1": post_sd[:2].log().reshape(1, 2), "b1": post_sd[2:].log()})
    return x, y, noise, evidence.item(), q_star


def test_elbo_reaches_the_exact_log_evidence_at_the_exact_posterior():
    x, y, noise, log_z, q_star = _conjugate_regression()
    model = mfvi.BayesMLP(MLPSpec((2, 1)))
    gen = torch.Generator().manual_seed(6)
    parts = mfvi.elbo(q_star, model, x, y, noise, 100_000, gen)
    assert abs(parts.elbo.item() - log_z) < 0.03


def test_elbo_is_log_evidence_minus_kl_to_the_posterior():
    """ELBO(q) = log Z - KL[q || posterior] < log Z for any other q."""
    x, y, noise, log_z, q_star = _conjugate_regression()
    model = mfvi.BayesMLP(MLPSpec((2, 1)))
    gen = torch.Generator().manual_seed(7)
    for _ in range(3):
        mean = {k: v + 0.3 * torch.randn(v.shape, generator=gen, dtype=F64) for k, v in q_star.mean.items()}
        log_sd = {k: v + 0.5 * torch.randn(v.shape, generator=gen, dtype=F64) for k, v in q_star.log_sd.items()}
        q = mfvi.MeanField(mean, log_sd)
        kl_post = sum(torch.distributions.kl_divergence(
            torch.distributions.Normal(mean[k], log_sd[k].exp()),
            torch.distributions.Normal(q_star.mean[k], q_star.log_sd[k].exp())).sum() for k in mean).item()
        value = mfvi.elbo(q, model, x, y, noise, 100_000, gen).elbo.item()
        assert value < log_z
        assert abs(value - (log_z - kl_post)) < 0.05


def test_fit_converges_to_the_exact_posterior():
    x, y, noise, log_z, q_star = _conjugate_regression()
    model = mfvi.BayesMLP(MLPSpec((2, 1)))
    gen = torch.Generator().manual_seed(8)
    q0 = mfvi.init_mean_field(model, gen, init_sd=0.5, dtype=F64)
    result = mfvi.fit(model, q0, x, y, n_steps=1500, n_samples=16, lr=0.03, generator=gen,
                      noise_sd=noise, anneal_fraction=0.0, progress=False)
    for k in q_star.mean:
        assert torch.allclose(result.q.mean[k], q_star.mean[k], atol=0.03)
        assert torch.allclose(result.q.log_sd[k], q_star.log_sd[k], atol=0.1)
    final = mfvi.elbo(result.q, model, x, y, noise, 50_000, gen).elbo.item()
    assert log_z - 0.05 < final < log_z + 0.03
    assert result.history["elbo"].shape == (len(result.history["step"]),)


def test_averaged_records_are_the_means_of_the_per_step_estimates_between_records():
    x, y, noise, _, _ = _conjugate_regression()
    model = mfvi.BayesMLP(MLPSpec((2, 1)))
    q0 = mfvi.init_mean_field(model, torch.Generator().manual_seed(1), init_sd=0.5, dtype=F64)

    def fit(**kw):
        return mfvi.fit(model, q0, x, y, n_steps=23, n_samples=2, lr=0.03, noise_sd=noise, progress=False,
                        generator=torch.Generator().manual_seed(2), **kw)

    every_step = fit(record_every=1)
    averaged = fit(record_every=5, average_records=True)
    # recording draws nothing, so both runs take the same steps
    assert torch.equal(every_step.q.mean["W1"], averaged.q.mean["W1"])
    steps = averaged.history["step"]
    assert list(steps) == [0, 5, 10, 15, 20, 22]
    for key in ("elbo", "objective", "expected_log_likelihood", "kl"):
        per_step = every_step.history[key]
        expected = [per_step[0]] + [per_step[a + 1:b + 1].mean() for a, b in itertools.pairwise(steps)]
        np.testing.assert_allclose(averaged.history[key], expected, rtol=1e-12)
    # the default keeps the one estimate at each recorded step
    at_step = fit(record_every=5).history["elbo"]
    np.testing.assert_allclose(at_step, every_step.history["elbo"][steps], rtol=1e-12)


# --------------------------------------------------------------------------- schedule, prediction, noise


def test_kl_weight_rises_linearly_over_the_first_half():
    assert mfvi.kl_weight(0, 100) == 0.0
    assert mfvi.kl_weight(25, 100) == 0.5
    assert mfvi.kl_weight(50, 100) == 1.0 and mfvi.kl_weight(99, 100) == 1.0
    assert mfvi.kl_weight(0, 100, anneal_fraction=0.0) == 1.0


def test_predictive_split_and_test_log_likelihood():
    spec = MLPSpec((1, 4, 1), "selu")
    gen = torch.Generator().manual_seed(9)
    params = init_mlp(spec, gen, dtype=F64)
    model = mfvi.BayesMLP(spec)
    q = mfvi.mean_field_from_params(model, params, init_sd=1e-9)
    x = torch.linspace(-1, 1, 5, dtype=F64)[:, None]
    pred = mfvi.predict(q, model, x, 4, gen, 0.3)
    assert torch.allclose(pred.mean, mlp_forward(params, x, spec), atol=1e-6)
    assert (pred.epistemic_var < 1e-10).all()
    assert torch.allclose(pred.aleatoric_var, torch.full_like(pred.mean, 0.09))
    assert torch.allclose(pred.total_var, pred.epistemic_var + pred.aleatoric_var)
    y = mlp_forward(params, x, spec) + 0.1
    ll = mfvi.predictive_log_likelihood(pred.samples, y, 0.3)
    expected = torch.distributions.Normal(mlp_forward(params, x, spec), 0.3).log_prob(y).mean()
    assert torch.allclose(ll, expected, atol=1e-6)


def test_learned_noise_moves_towards_the_residual_scale():
    gen = torch.Generator().manual_seed(10)
    x = torch.rand(64, 1, generator=gen, dtype=F64) * 2 - 1
    y = 0.5 * x + 0.05 * torch.randn(64, 1, generator=gen, dtype=F64)
    model = mfvi.BayesMLP(MLPSpec((1, 1)))
    q0 = mfvi.init_mean_field(model, gen, dtype=F64)
    result = mfvi.fit(model, q0, x, y, n_steps=600, n_samples=8, lr=0.05, generator=gen, noise_sd=1.0,
                      learn_noise=True, progress=False)
    assert 0.03 < result.log_noise_sd.exp().item() < 0.1
    assert result.history["noise_sd"][-1] < result.history["noise_sd"][0]
