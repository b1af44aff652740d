"""``mfvi_batched`` against ``mfvi.fit``, the independent reference.

Two kinds of agreement:

* exact stream (``noise="torch"``): ``mfvi_batched`` draws the same ``torch.randn`` numbers from the
  same generator, in ``mfvi.sample_outputs``' order (one call whose blocks of 16 reproduce the
  per-layer calls, or per-layer calls where a count is not a multiple of 16), so a few steps from
  the same seed must give the same parameters and records up to float32 rounding;
* statistical (``noise="fast"``): other numbers from a counter-based generator, so only the
  distribution can agree: the generator's moments and a Kolmogorov-Smirnov test against
  ``scipy.stats.norm``, the mean of many single-draw gradients against the mean of as many of
  ``mfvi``'s own autograd gradients (z-test per coordinate), and whole fits: the fitted posteriors
  (means, sds, predictive) of ``mfvi.fit`` and of the fast step across seeds (Welch z per summary).

Plus the resumable fit: pieces cut by a budget give the uninterrupted fit bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
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
    assert list(q.mean) == list(q0.mean) == list(model.spec.shapes())     # the order samplers draw in
    for k in q0.mean:
        assert torch.equal(q.mean[k], q0.mean[k]) and torch.equal(q.log_sd[k], q0.log_sd[k])
    torch.testing.assert_close(log_noise.exp(), torch.full((4,), 0.2))


@pytest.mark.skipif(not _c_available(), reason="no g++")
def test_fast_normals_are_standard_normal():
    """Statistical: the counter-based generator's first four moments and a KS test (4e5 draws);
    the cos and sin of each Box-Muller pair (``32 q + t`` and ``32 q + 16 + t``) uncorrelated."""
    from scipy import stats

    kern = _mfvi_kernels.c_kernels(Activation.SELU)
    z = kern.normal(400_000, 987654321).double()
    n = z.numel()
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / n)
    assert abs((z**3).mean()) < 5 * math.sqrt(15 / n)
    assert abs((z**4).mean() - 3) < 5 * math.sqrt(96 / n)
    assert stats.kstest(z[:100_000].numpy(), "norm").pvalue > 1e-4
    assert stats.kstest(z[-100_000:].numpy(), "norm").pvalue > 1e-4
    pairs = z.view(-1, 2, 16)     # [q, 0, t]: r cos, [q, 1, t]: r sin of pair 16 q + t
    cos, sin = pairs[:, 0].flatten(), pairs[:, 1].flatten()
    assert abs(torch.corrcoef(torch.stack([cos, sin]))[0, 1]) < 5 / math.sqrt(cos.numel())
    assert abs(torch.corrcoef(torch.stack([z[:-1], z[1:]]))[0, 1]) < 5 / math.sqrt(n)
    # the tails: P(|z| > 3) = 0.0027 within 5 standard errors
    p3 = 2 * stats.norm.sf(3)
    assert abs((z.abs() > 3).double().mean() - p3) < 5 * math.sqrt(p3 / n)
    assert not torch.equal(kern.normal(64, 1), kern.normal(64, 2))
    assert torch.equal(kern.normal(64, 1), kern.normal(64, 1))
    assert torch.equal(kern.normal(40, 1), kern.normal(64, 1)[:40])


@pytest.mark.skipif(not _c_available(), reason="no g++")
def test_network_routine_draws_standard_normal_noise():
    """The C routine's own noise (given a ``key``), read back exactly: for a one-layer net with zero
    means, unit sds, no bias, ``y = 0``, ``sigma = 1`` and one sample, ``f = eps`` and
    ``dL/dmu1 = -(y - f) / (S n) = eps / n``. Standard normal (moments, KS), different per model and
    per key, and ``sq = sum eps^2``."""
    from scipy import stats

    kern = _mfvi_kernels.c_kernels(Activation.SELU)
    m, n, width = 4, 100, 24
    mu1t, sd1t, y = torch.zeros(m, width, n), torch.ones(m, width, n), torch.zeros(n, width)
    layers = {"brow": {1: torch.zeros(m, 1, width)}}
    draws = []
    for key in range(12):
        sq, g = kern.network((1, width), layers, mu1t, sd1t, y, torch.zeros(m), 1, key=key)
        eps = g["mu1t"] * n
        torch.testing.assert_close(sq, eps.square().sum((1, 2)), rtol=1e-4, atol=1e-3)
        draws.append(eps)
    z = torch.stack(draws).double()                      # (keys, models, units, points)
    flat = z.flatten()
    k = flat.numel()
    assert abs(flat.mean()) < 5 / math.sqrt(k) and abs(flat.var() - 1) < 5 * math.sqrt(2 / k)
    assert stats.kstest(flat.numpy(), "norm").pvalue > 1e-4
    by_model = z.transpose(0, 1).flatten(1)
    assert torch.corrcoef(by_model).triu(1).abs().max() < 5 / math.sqrt(by_model.shape[1])
    assert not torch.equal(draws[0], draws[1])
    sq, g = kern.network((1, width), layers, mu1t, sd1t, y, torch.zeros(m), 1, key=0)
    assert torch.equal(g["mu1t"] * n, draws[0])          # reproducible from the key


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


def _summaries(fit: mfvi.FitResult, model, x_eval, seed: int) -> torch.Tensor:
    """Per model: mean |posterior mean| and mean posterior sd of each weight matrix, and the
    predictive mean and sd at ``x_eval`` from 512 whole-network draws (a generator of its own per
    fit, so that the draws' Monte Carlo error is part of the spread over seeds)."""
    q = fit.q
    rows = []
    for k in q.mean:
        if k.startswith("W"):
            rows += [q.mean[k].abs().flatten(1).mean(1), q.log_sd[k].exp().flatten(1).mean(1)]
    pred = mfvi.predict(q, model, x_eval, 512, torch.Generator().manual_seed(seed), fit.log_noise_sd.exp(),
                        whole_functions=True)
    rows += [pred.mean[..., 0].T, pred.epistemic_var[..., 0].sqrt().T]
    return torch.cat([r.reshape(-1, 4) for r in rows]).T.flatten().double()    # (4 models x stats,)


@pytest.mark.skipif(not _c_available(), reason="no g++")
def test_fast_fits_match_mfvi_fits_across_seeds():
    """Statistical, whole fits: 12 seeds of ``mfvi.fit`` (torch noise) against 12 of the fast step,
    from the same start. Per summary of the fitted posterior (:func:`_summaries`: 4 models x 14),
    Welch's z of the two means over seeds is below 4.5 (t with ~22 degrees of freedom: about 2e-4
    per summary, so ~1% for all 56 under equal distributions). The same statistic must see a real
    difference: fits with a 30% larger initial posterior sd give some |z| above 4.5."""
    model, q0, x, y = _problem(n=16)
    x_eval = torch.linspace(-1.5, 1.5, 5)[:, None]
    kw = {"n_steps": 150, "n_samples": 2, "lr": 1e-2, "noise_sd": 0.3, "anneal_fraction": 0.5,
          "record_every": 50, "progress": False}
    seeds = range(12)
    ref = torch.stack([_summaries(mfvi.fit(model, q0, x, y, generator=torch.Generator().manual_seed(r), **kw),
                                  model, x_eval, 1000 + r) for r in seeds])
    fast = torch.stack([_summaries(mfvi_batched.fit(model, q0, x, y, generator=torch.Generator().manual_seed(100 + r),
                                                    noise="fast", **kw), model, x_eval, 2000 + r) for r in seeds])

    def welch(a, b):
        return (a.mean(0) - b.mean(0)) / (a.var(0) / a.shape[0] + b.var(0) / b.shape[0]).sqrt().clamp_min(1e-12)

    z = welch(fast, ref)
    assert z.abs().max() < 4.5, f"max |z| = {z.abs().max():.2f} at {z.abs().argmax()}"
    wider = mfvi.MeanField(q0.mean, {k: v + math.log(1.3) for k, v in q0.log_sd.items()})
    other = torch.stack([_summaries(mfvi_batched.fit(model, wider, x, y, generator=torch.Generator().manual_seed(200 + r),
                                                     noise="fast", **kw), model, x_eval, 3000 + r) for r in seeds])
    assert welch(other, ref).abs().max() > 4.5


@pytest.mark.skipif(not _c_available(), reason="no g++")
def test_resumable_pieces_equal_one_fit(tmp_path):
    """``fit_resumable`` cut into pieces by a zero budget continues to the uninterrupted fit, bit for
    bit (fast noise), and refuses a checkpoint of other settings."""
    model, q0, x, y = _problem()
    kw = {"n_steps": 12, "n_samples": 3, "lr": 1e-2, "record_every": 4, "average_records": True,
          "progress": False, "noise": "fast"}
    whole = mfvi_batched.fit(model, q0, x, y, generator=torch.Generator().manual_seed(7), **kw)
    path = tmp_path / "vi.pt"
    pieces = 0
    while True:
        piece = mfvi_batched.fit_resumable(model, q0, x, y, checkpoint=path, every_s=1e9, budget_s=0.0,
                                           generator=torch.Generator().manual_seed(7), **kw)
        pieces += 1
        if piece.complete:
            break
        assert piece.steps == pieces   # a zero budget stops after every step
        with pytest.raises(Exception, match="time budget"):
            piece.require_complete()
    assert pieces == 12 and piece.steps == 12 and piece.pieces == 12
    for k in whole.q.mean:
        assert torch.equal(piece.fit.q.mean[k], whole.q.mean[k]) and torch.equal(piece.fit.q.log_sd[k], whole.q.log_sd[k])
    for k, v in whole.history.items():
        assert np.array_equal(piece.fit.history[k], v), k
    again = mfvi_batched.fit_resumable(model, q0, x, y, checkpoint=path, generator=torch.Generator().manual_seed(7), **kw)
    assert again.complete and torch.equal(again.fit.q.mean["W1"], whole.q.mean["W1"])
    with pytest.raises(ValueError, match="lr"):
        mfvi_batched.fit_resumable(model, q0, x, y, checkpoint=path, generator=torch.Generator().manual_seed(7),
                                   **{**kw, "lr": 2e-2})


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(ln.split(":", 1)[1].split()) for ln in f if ln.startswith("flags")), set())
    except OSError:
        return set()


@pytest.mark.skipif(not _c_available() or "avx" not in _cpu_flags(), reason="needs g++ and an AVX CPU")
def test_8_float_loops_compute_the_16_float_numbers(monkeypatch):
    """The routine built with its hot loops on 8-float vectors (what an AVX, non-AVX-512 CPU runs)
    gives the 16-float build's numbers bit for bit (``-DSYMLIB_VECTOR16``; with AVX-512 both are
    built without it), for both noise sources, unaligned counts and skips."""
    base = ("-mno-avx512f",) if "avx512f" in _cpu_flags() else ()
    libs = {"8": _mfvi_kernels._load(base), "16": _mfvi_kernels._load((*base, "-DSYMLIB_VECTOR16"))}
    for widths, n in [((8, 8, 8), 32), ((20, 20), 37)]:
        model, q0, x, y = _problem(widths, n)
        for noise in ("fast", "torch"):
            fits = {}
            for name, lib in libs.items():
                monkeypatch.setattr(_mfvi_kernels, "_LIB", lib)
                fits[name] = mfvi_batched.fit(model, q0, x, y, n_steps=5, n_samples=3, lr=1e-2, noise=noise,
                                              generator=torch.Generator().manual_seed(7), kernels="c",
                                              learn_noise=True, record_every=1, progress=False)
            a, b = fits["8"], fits["16"]
            for k in a.q.mean:
                assert torch.equal(a.q.mean[k], b.q.mean[k]) and torch.equal(a.q.log_sd[k], b.q.log_sd[k]), (widths, noise, k)
            assert torch.equal(a.log_noise_sd, b.log_noise_sd)
            assert np.array_equal(np.asarray(a.history["elbo"]), np.asarray(b.history["elbo"]))
            # and the fit moved: the equality is not of two untouched starts
            assert not torch.equal(a.q.mean["W2"], q0.mean["W2"])
