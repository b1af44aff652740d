"""Chapter 3's two-parameter BNN (Sec. 5, Figure 4, Tables 2 and 3).

``f(x) = ReLU(w1 x) + ReLU(w2 x)`` on ``y = a|x| + noise``; MFVI and SGM (K = 2) fitted for
every ``a`` and seed as one batch of models; test MSE of the 1,000-sample predictive mean,
``L_VI`` and the exact ``L^G = L_VI + I(g; w) / N`` (``|G| = 2``); the exact posterior on a grid
for the figure.

Choices the paper leaves open (profile fields marked [open]):

* **Noise**: ``sigma_n = 0.25`` for data and likelihood. Read off the paper's tables: a
  per-point Gaussian log-likelihood of a good fit is ``-(1/2) log(2 pi sigma_n^2) - 1/2``, which
  is -0.03 at 0.25, the scale of Table 3's ELBOs, and the noise floor of the test MSE,
  ``sigma_n^2 = 0.0625``, sits just below Table 2's smallest entries.
* **Prior**: isotropic ``N(0, 1)`` (the paper: "isotropic Gaussian").
* **Initialisation**: means ``N(0, 0.1^2)``, sds 0.05. **S** (weight draws per step): 10.
  **Data order**: a fresh shuffle per model and epoch. **Predictions** sample weights.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from symlib.chapters.sgm_vi.rng import generator
from symlib.inference import sgm
from symlib.nn.mlp import MLPSpec, mlp_forward
from symlib.symmetry import mlp_permutation_spec

__all__ = [
    "TOY_SPEC",
    "sgm_key",
    "toy_experiment",
    "toy_fits_between_modes",
    "toy_fits_on_a_mode",
    "toy_forward",
    "toy_pspec",
]

TOY_SPEC = MLPSpec((1, 2, 1))
"""``f(x) = W2 ReLU(W1 x)`` with ``W2 = (1, 1)`` fixed and no biases: Gelberg et al.'s toy."""


def toy_pspec():
    """The group's action on the toy's only variational tensor ``W1`` (``G = {e, (1 2)}``)."""
    return sgm.restrict_permutation_spec(mlp_permutation_spec(TOY_SPEC), ["W1"])


def _toy_fixed(dtype=torch.float32, device=None) -> dict:
    return {"b1": torch.zeros(2, dtype=dtype, device=device), "W2": torch.ones(1, 2, dtype=dtype, device=device),
            "b2": torch.zeros(1, dtype=dtype, device=device)}


def toy_forward(w1: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``f(x; w)`` for weights ``w1 (..., 2, 1)`` and inputs ``x (..., n, 1)`` -> ``(..., n, 1)``."""
    return mlp_forward({"W1": w1, **_toy_fixed(w1.dtype, w1.device)}, x, TOY_SPEC)


def _gauss_loglik(y, f, sd):
    return (-0.5 * ((y - f) / sd).square() - math.log(sd) - 0.5 * math.log(2 * math.pi)).sum((-1, -2))


def toy_experiment(profile, seed: int, *, device: torch.device | str = "cpu") -> dict:
    """MFVI and SGM on ``y = a|x| + noise`` for every ``a`` and seed (one batch of models each).

    Data, initial means, permutations and shuffles are drawn on the CPU (as MNIST's are) and
    moved to ``device``; the weight noise is drawn there.

    Args:
        profile: the chapter's profile (or a stage's view of it): the ``toy_*`` fields.
        seed: the run seed.
        device: where the models train.
    """
    p = profile
    device = torch.device(device)
    a = torch.tensor(p.toy_a, dtype=torch.float32)[:, None, None, None]        # (A, 1, 1, 1)
    shape = (len(p.toy_a), p.toy_seeds)
    gen = generator(seed, "toy_data")
    xs, ys = {}, {}
    for split in ("train", "test"):
        x = 20.0 * torch.rand(shape + (p.toy_n, 1), generator=gen) - 10.0
        xs[split] = x
        ys[split] = a * x.abs() + p.toy_noise_sd * torch.randn(x.shape, generator=gen)
    pspec = toy_pspec()
    means = {"W1": p.toy_init_mean_sd * torch.randn(shape + (2, 1), generator=generator(seed, "toy_init"))}
    q0 = sgm.mean_field({k: v.to(device) for k, v in means.items()}, p.toy_init_sd)
    on_device = {split: (xs[split].to(device), ys[split].to(device)) for split in xs}
    xtr, ytr = on_device["train"]

    def batch_loglik(w, idx):
        ix = idx.unsqueeze(-1)
        xb = torch.take_along_dim(xtr, ix, -2).unsqueeze(-3)                    # (A, R, 1, M, 1)
        yb = torch.take_along_dim(ytr, ix, -2).unsqueeze(-3)
        return _gauss_loglik(yb, toy_forward(w["W1"], xb), p.toy_noise_sd)

    out = {"a": list(p.toy_a), "x": {k: v.numpy() for k, v in xs.items()},
           "y": {k: v.numpy() for k, v in ys.items()}}
    for name, k in (("MFVI", 1), (f"SGM K={p.toy_k}", p.toy_k)):
        res = sgm.fit(q0, pspec, batch_loglik, n_data=p.toy_n, batch_size=p.toy_batch_size,
                      epochs=p.toy_epochs, lr=p.toy_lr, k=k, n_samples=p.toy_train_samples,
                      prior_sd=p.toy_prior_sd, generator=generator(seed, "toy_noise", device=device),
                      perm_generator=generator(seed, "toy_perm"),
                      order_generator=generator(seed, "toy_order"), desc=name)
        out[name] = _toy_evaluate(res.q, pspec, on_device, p, generator(seed, "toy_eval", device=device))
        out[name]["objective_curve"] = res.history["objective"]                  # (A, R, epochs)
    out["grid"] = _toy_posterior_grid(xs["train"][:, 0], ys["train"][:, 0], p)
    return out


@torch.no_grad()
def _toy_evaluate(q, pspec, data: dict, p, gen) -> dict:
    """``data``: split -> ``(x, y)`` on the device of ``q`` and ``gen``."""
    n = p.toy_n
    (xte, yte), (xtr, ytr) = data["test"], data["train"]
    w = sgm.sample_weights(q, pspec, p.toy_pred_samples, gen)["W1"]             # (A, R, S, 2, 1)
    pred = toy_forward(w, xte.unsqueeze(-3)).mean(-3)                          # (A, R, n, 1)
    mse = (pred - yte).square().mean((-1, -2))
    w = sgm.sample_weights(q, pspec, p.toy_eval_samples, gen)["W1"]
    ytr, xtr = ytr.unsqueeze(-3), xtr.unsqueeze(-3)
    ell = torch.cat([_gauss_loglik(ytr, toy_forward(c, xtr), p.toy_noise_sd)
                     for c in w.split(2000, dim=-3)], -1).mean(-1)            # (A, R)
    kl = sgm.kl_to_prior(q, pspec, p.toy_prior_sd)
    info = sgm.exact_mutual_information(q, pspec, p.toy_eval_samples, gen)
    l_vi = (ell - kl) / n
    return {"mse": mse.cpu().numpy(), "L_VI": l_vi.cpu().numpy(), "L_G": (l_vi + info / n).cpu().numpy(),
            "I": info.cpu().numpy(), "mean": q.mean["W1"][..., 0].cpu().numpy(),
            "sd": torch.exp(q.log_sd["W1"][..., 0]).cpu().numpy()}


def _toy_posterior_grid(x, y, p) -> dict:
    """Exact log posterior of the first seed's data for every ``a`` on a square grid."""
    out = []
    for i, a in enumerate(p.toy_a):
        half = 1.5 * a + 0.1
        axis = torch.linspace(-half, half, p.toy_grid, dtype=torch.float64)
        w1, w2 = torch.meshgrid(axis, axis, indexing="xy")
        w = torch.stack([w1, w2], -1).reshape(-1, 2, 1)                         # (P, 2, 1)
        xi, yi = x[i].double(), y[i].double()
        loglik = torch.cat([_gauss_loglik(yi, toy_forward(c, xi), p.toy_noise_sd)
                            for c in w.split(4096)])
        logprior = (-0.5 * (w / p.toy_prior_sd).square()).sum((-1, -2))
        out.append({"axis": axis.numpy(),
                    "log_post": (loglik + logprior).reshape(p.toy_grid, p.toy_grid).numpy()})
    return {"per_a": out}


def sgm_key(toy: dict) -> str:
    """The key of the SGM fit among a toy experiment's results (its name carries K)."""
    return next(k for k in toy if isinstance(k, str) and k.startswith("SGM"))


def toy_fits_on_a_mode(toy: dict, method: str) -> np.ndarray:
    """``(A, R)`` bools: the fitted means have opposite signs and both exceed ``a/2`` in size,
    i.e. ``q`` sits near ``(a, -a)`` or ``(-a, a)`` rather than between them."""
    mean = toy[method]["mean"]                                              # (A, R, 2)
    a = np.asarray(toy["a"])[:, None]
    return (mean[..., 0] * mean[..., 1] < 0) & (np.abs(mean).min(-1) > a / 2)


def toy_fits_between_modes(toy: dict, method: str) -> np.ndarray:
    """``(A, R)`` bools: the fitted mean is nearer the midpoint ``(0, 0)`` of the two modes than
    either mode ``(a, -a)`` or ``(-a, a)`` (Figure 4(b)'s interpolating fit)."""
    mean = toy[method]["mean"]                                              # (A, R, 2)
    a = np.asarray(toy["a"])[:, None, None]
    mode = a * np.array([1.0, -1.0])
    to_mode = np.minimum(np.linalg.norm(mean - mode, axis=-1), np.linalg.norm(mean + mode, axis=-1))
    return np.linalg.norm(mean, axis=-1) < to_mode
