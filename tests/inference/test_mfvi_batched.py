"""``mfvi_batched`` against ``mfvi.fit``, the independent reference.

Two kinds of agreement:

* exact stream (``noise="torch"``): ``mfvi_batched`` draws the same ``torch.randn`` numbers from the
  same generator, in ``mfvi.sample_outputs``' order (one call whose blocks of 16 reproduce the
  per-layer calls, or per-layer calls where a count is not a multiple of 16), so a few steps from
  the same seed must give the same parameters and records up to float32 rounding;
* statistical (``noise="fast"``): other numbers from a counter-based generator, so only the
  distribution can agree: the generator's moments, and the mean of many single-draw gradients
  against the mean of as many of ``mfvi``'s own autograd gradients (z-test per coordinate).
"""

from __future__ import annotations

import math

import pytest
import torch

from symlib.inference import _mfvi_kernels, mfvi, mfvi_batched
from symlib.nn.mlp import Activation, MLPSpec, init_mlp
from symlib.nn.orthoskip import skip_matrices

VARIANTS = [(False, False), (True, False), (False, True), (True, True)]   # (ordered, skip), chapter 1's


def _c_available() -> bool:
    try:
        _mfvi_kernels.c_kernels(Activation.SELU)
        return True
    except RuntimeError:
        return False


KERNELS = ["torch", pytest.param("c", marks=pytest.mark.skipif(not _c_available(), reason="no g++"))]


def _problem(widths=(8, 8), n=32, seed=0, ordered=True, activation=Activation.SELU):
    spec = MLPSpec((1, *widths, 1), activation)
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=gen) * 2 - 1
    y = torch.sin(3 * x) + 0.2 * torch.randn(n, 1, generator=gen)
    skips = skip_matrices(spec, gen)
    has_skip = torch.tensor([s for _, s in VARIANTS])
    model = mfvi.BayesMLP(
        spec, {k: torch.where(has_skip[:, None, None], o, torch.zeros_like(o)) for k, o in skips.items()},
        torch.tensor([o for o, _ in VARIANTS]) if ordered else False)
    base = init_mlp(spec, gen)
    q0 = mfvi.mean_field_from_params(model, {k: v.expand(4, *v.shape).clone() for k, v in base.items()},
                                     init_sd=0.05)
    return model, q0, x, y


def _assert_fits_equal(ref: mfvi.FitResult, new: mfvi.FitResult, atol=2e-5, rtol=1e-4):
    for k in ref.q.mean:
        torch.testing.assert_close(new.q.mean[k], ref.q.mean[k], atol=atol, rtol=rtol, msg=f"mean {k}")
        torch.testing.assert_close(new.q.log_sd[k], ref.q.log_sd[k], atol=atol, rtol=rtol, msg=f"log_sd {k}")
    torch.testing.assert_close(new.log_noise_sd, ref.log_noise_sd, atol=atol, rtol=rtol)
    for k in ("elbo", "objective", "expected_log_likelihood", "kl", "noise_sd"):
        torch.testing.assert_close(torch.as_tensor(new.history[k]), torch.as_tensor(ref.history[k]),
                                   atol=1e-3, rtol=1e-4, msg=k)
    assert (new.history["step"] == ref.history["step"]).all()
    assert (new.history["kl_weight"] == ref.history["kl_weight"]).all()


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("learn_noise", [False, True])
def test_same_stream_equals_mfvi_fit(kernels, learn_noise):
    """Exact stream: 6 steps of chapter 1's four variants (smoke size) equal ``mfvi.fit`` to rounding."""
    model, q0, x, y = _problem()
    kw = {"n_steps": 6, "n_samples": 4, "lr": 1e-2, "noise_sd": 0.3, "learn_noise": learn_noise,
          "anneal_fraction": 0.5, "record_every": 2, "average_records": True, "progress": False}
    ref_gen, gen = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    ref = mfvi.fit(model, q0, x, y, generator=ref_gen, **kw)
    new = mfvi_batched.fit(model, q0, x, y, generator=gen, kernels=kernels, **kw)
    _assert_fits_equal(ref, new)
    # the generator was advanced exactly as mfvi.fit advances it
    assert torch.equal(gen.get_state(), ref_gen.get_state())


@pytest.mark.parametrize("kernels", KERNELS)
def test_same_stream_unaligned_counts_and_other_cases(kernels):
    """Counts not multiples of 16 (per-layer draws), no ordered biases, unequal widths, tanh."""
    for widths, n, ordered, act, one_draw in [((5, 3), 7, True, Activation.SELU, False),
                                              ((6, 6), 9, False, Activation.SELU, False),
                                              ((4, 4), 8, True, Activation.TANH, True)]:
        model, q0, x, y = _problem(widths, n, ordered=ordered, activation=act)
        prob = mfvi_batched.problem(model, x, y, n_models=4, n_samples=3, lr=1e-2, n_steps=4)
        assert prob.one_draw is one_draw
        kw = {"n_steps": 4, "n_samples": 3, "lr": 1e-2, "record_every": 1, "progress": False}
        ref = mfvi.fit(model, q0, x, y, generator=torch.Generator().manual_seed(5), **kw)
        new = mfvi_batched.fit(model, q0, x, y, generator=torch.Generator().manual_seed(5), kernels=kernels, **kw)
        _assert_fits_equal(ref, new)


def test_one_randn_call_is_the_per_layer_stream():
    """The premise of the single draw: torch's CPU normal sampler, for counts that are multiples
    of 16, gives in one call the concatenation of the per-chunk calls."""
    counts = [8192, 1048576, 16, 32768]
    one = torch.randn(sum(counts), generator=torch.Generator().manual_seed(11))
    gen = torch.Generator().manual_seed(11)
    parts = torch.cat([torch.randn(c, generator=gen) for c in counts])
    assert torch.equal(one, parts)


def test_step_is_a_value():
    """``step`` leaves its state untouched and is reproducible from the generator's state."""
    model, q0, x, y = _problem()
    prob = mfvi_batched.problem(model, x, y, n_models=4, n_samples=2, lr=1e-2, n_steps=10)
    s0 = mfvi_batched.init(prob, q0, 0.2)
    before = [t.clone() for t in s0]
    s1, _ = mfvi_batched.step(prob, s0, torch.Generator().manual_seed(0))
    s1b, _ = mfvi_batched.step(prob, s0, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(before, s0))
    assert all(torch.equal(a, b) for a, b in zip(s1, s1b))
    assert int(s1.count) == 1
    q, log_noise = mfvi_batched.mean_field(prob, s0)
    for k in q0.mean:
        assert torch.equal(q.mean[k], q0.mean[k]) and torch.equal(q.log_sd[k], q0.log_sd[k])
    torch.testing.assert_close(log_noise.exp(), torch.full((4,), 0.2))


@pytest.mark.skipif(not _c_available(), reason="no g++")
def test_fast_normals_are_standard_normal():
    """Statistical: the counter-based generator's first four moments and a KS test (4e5 draws)."""
    from scipy import stats

    kern = _mfvi_kernels.c_kernels(Activation.SELU)
    z = kern.normal(400_001, 987654321).double()
    n = z.numel()
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / n)
    assert abs((z**3).mean()) < 5 * math.sqrt(15 / n)
    assert abs((z**4).mean() - 3) < 5 * math.sqrt(96 / n)
    assert stats.kstest(z[:100_000].numpy(), "norm").pvalue > 1e-4
    half = n // 2   # cos and sin halves of the same Box-Muller pairs must be uncorrelated
    assert abs(torch.corrcoef(torch.stack([z[:half], z[half:2 * half]]))[0, 1]) < 5 / math.sqrt(half)
    assert not torch.equal(kern.normal(64, 1), kern.normal(64, 2))
    assert torch.equal(kern.normal(64, 1), kern.normal(64, 1))


def _mfvi_gradient(model, q, x, y, log_noise, beta, n_samples, gen):
    """``mfvi``'s own loss and autograd gradient, in the batched layout ``(B, 2P + 1)``."""
    keys = [f"W{l}" for l in range(1, model.spec.n_layers + 1)] + [f"b{l}" for l in range(1, model.spec.n_layers + 1)]
    mean = {k: v.clone().requires_grad_(True) for k, v in q.mean.items()}
    log_sd = {k: v.clone().requires_grad_(True) for k, v in q.log_sd.items()}
    parts = mfvi.elbo(mfvi.MeanField(mean, log_sd), model, x, y, log_noise.exp(), n_samples, gen, kl_weight=beta)
    (-parts.elbo.sum() / x.shape[0]).backward()
    b = log_noise.shape[0]
    return torch.cat([mean[k].grad.reshape(b, -1) for k in keys] + [log_sd[k].grad.reshape(b, -1) for k in keys]
                     + [torch.zeros(b, 1)], dim=1)


@pytest.mark.skipif(not _c_available(), reason="no g++")
def test_fast_noise_gradient_has_mfvis_expectation():
    """Statistical: the mean of 150 single-draw gradients with ``noise="fast"`` against the mean of
    150 of ``mfvi``'s autograd gradients (torch noise), per coordinate: Welch z, all below 5.5 (about
    800 coordinates; under equal expectations the largest |z| is near 3.5)."""
    model, q0, x, y = _problem(n=16)
    n_steps, draws, s = 10, 150, 2
    prob = mfvi_batched.problem(model, x, y, n_models=4, n_samples=s, lr=1e-2, n_steps=n_steps, noise="fast")
    state = mfvi_batched.init(prob, q0, 0.3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):           # move off the initial point; t = 3 has KL weight 0.6
        state, _ = mfvi_batched.step(prob, state, gen)
    fast = torch.stack([mfvi_batched.gradient(prob, state, gen)[1] for _ in range(draws)])
    q, log_noise = mfvi_batched.mean_field(prob, state)
    beta = mfvi.kl_weight(3, n_steps, 0.5)
    ref = torch.stack([_mfvi_gradient(model, q, x, y, log_noise, beta, s, gen) for _ in range(draws)])
    fast, ref = fast[..., :-1].flatten(1).double(), ref[..., :-1].flatten(1).double()
    se = (fast.var(0) / draws + ref.var(0) / draws).sqrt()
    z = (fast.mean(0) - ref.mean(0)) / se.clamp_min(1e-12)
    assert z.abs().max() < 5.5, f"max |z| = {z.abs().max():.2f}"
    # and the spread of a single draw is the same (the noise has unit variance)
    ratio = fast.var(0).sum() / ref.var(0).sum()
    assert 0.75 < ratio < 1.33, f"gradient variance ratio {ratio:.3f}"
