"""Chapter 4's Boston housing (Sec. 4.2, Tables 1-2): the ``boston`` stage's NUTS fits.

50 ReLU units, random 80/20 splits, NUTS on the unconstrained and the constrained model (and the
constrained model under the authors' prior on the angles); test MSE of the posterior-predictive
mean and the share of test points outside the central 95% posterior-predictive interval, both
on the standardised target.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from symlib.book.parallel import fan_out
from symlib.chapters.constrained_models import seeds
from symlib.chapters.constrained_models.fits import nuts_fit
from symlib.data import load_boston, standardise
from symlib.inference import stan as st
from symlib.nn import constrained as idf

__all__ = [
    "AUTHORS_ANGLES", "BOSTON_MODELS", "authors_angle_program", "boston_experiment", "boston_fit", "boston_splits",
    "boston_tasks",
]

AUTHORS_ANGLES = "constrained, authors' angle prior"
"""Key of the Boston fits of the constrained model under the authors' prior on the angles."""

BOSTON_MODELS = ("unconstrained", "constrained")
"""The two models of Sec. 4.2, under this chapter's priors."""


def boston_experiment(profile, seed: int, *, progress: bool = False,
                      jobs: int | None = None) -> dict:
    """NUTS on the unconstrained and the constrained model for every random 80/20 split.

    With ``boston_authors_angles`` the constrained model is also fitted under the authors' prior on
    the angles (:func:`authors_angle_program`), stored under :data:`AUTHORS_ANGLES`. The splits x
    fits (:func:`boston_tasks`) are independent and run through :func:`symlib.book.parallel.fan_out`
    (``jobs`` at a time, default ``$SYMLIB_JOBS``); each draws from its own seeds, so the results
    do not depend on ``jobs``. The chapter's ``boston`` stage runs the same fits one cache entry
    each (a run stopped part-way keeps the fits it finished) and joins them with
    :func:`boston_splits`.
    """
    tasks = boston_tasks(profile)
    fits = fan_out(boston_fit, [(profile, seed, s, key) for s, key in tasks], threads=profile.threads,
                   jobs=jobs, progress=progress, desc="Boston NUTS")
    return boston_splits(profile, dict(zip(tasks, fits, strict=True)))


def boston_tasks(profile) -> list[tuple[int, str]]:
    """Every ``(split index, fit key)`` of the Boston experiment, split by split (the keys:
    :data:`BOSTON_MODELS`, and :data:`AUTHORS_ANGLES` with ``boston_authors_angles``)."""
    keys = BOSTON_MODELS + ((AUTHORS_ANGLES,) if profile.boston_authors_angles else ())
    return [(s, key) for s in range(profile.boston_splits) for key in keys]


def boston_splits(profile, fits: dict) -> dict:
    """The experiment's result from its fits (``{(split index, key): fit}``, every one of
    :func:`boston_tasks`): one row per split, numbered from 1, with the split's sizes and its fits."""
    n = len(load_boston(standardise=False)[0])
    n_test = round(profile.boston_test_fraction * n)
    splits = []
    for s in range(profile.boston_splits):
        row = {"split": s + 1, "n_train": n - n_test, "n_test": int(n_test)}
        row.update({key: fits[s, key] for split, key in boston_tasks(profile) if split == s})
        splits.append(row)
    return {"splits": splits, "hidden": profile.boston_hidden}


def boston_fit(profile, seed: int, split: int, key: str) -> dict:
    """NUTS on split ``split`` for ``key`` (one of :data:`BOSTON_MODELS` or :data:`AUTHORS_ANGLES`;
    one task): test MSE of the posterior-predictive mean, share of test points outside its
    central 95% interval."""
    x_all, y_all = load_boston(standardise=False)
    x_all, y_all = x_all.double(), y_all.double()
    n = x_all.shape[0]
    n_test = round(profile.boston_test_fraction * n)
    prior = idf.NetPrior(w_laplace=profile.w_laplace, w_scale=profile.boston_w_scale,
                         sigma_scale=profile.sigma_scale, angle_jacobian=profile.angle_jacobian)
    if key == AUTHORS_ANGLES:
        # the authors' prior on the angles, and no change of measure (stan/boston.stan)
        model, code, prior, stream = "constrained", authors_angle_program(), replace(prior, angle_jacobian=False), 5000 + split
    else:
        model, code, stream = key, None, 1000 + 2 * split + BOSTON_MODELS.index(key)
    perm = torch.randperm(n, generator=seeds.generator(seed, "boston_split", split))
    te, tr = perm[:n_test], perm[n_test:]
    xtr, xte, _, _ = standardise(x_all[tr], x_all[te])
    ytr, yte, _, _ = standardise(y_all[tr], y_all[te])
    fit = nuts_fit(model, xtr, ytr, profile.boston_hidden, prior, chains=profile.boston_chains,
                warmup=profile.boston_warmup, draws=profile.boston_draws,
                seed=seeds.stan_seed(seed, stream), max_depth=profile.boston_max_depth,
                f_points=xte[:20], code=code)
    p = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in fit["params"].items()}
    f = idf.forward(p, xte)                                          # (S, n_test)
    gen = seeds.generator(seed, "predictive", stream)
    ys = f + p["sigma"][:, None] * torch.randn(f.shape, generator=gen, dtype=torch.float64)
    lo, hi = torch.quantile(ys, torch.tensor([0.025, 0.975], dtype=torch.float64), dim=0)
    return {"mse": float(((f.mean(0) - yte) ** 2).mean()),
            "outside": float(((yte < lo) | (yte > hi)).double().mean()),
            "diag": fit["diag"]}


def authors_angle_program() -> str:
    """The constrained Stan program with the authors' Boston prior on the angles.

    The authors' ``stan/boston.stan`` puts Laplace(0, 1) on every angle of a unit vector (the
    first in ``(-pi, pi)``, the others in ``(-pi/2, pi/2)``) and leaves the change of measure out.
    Here the first angle is ``atan2`` of the auxiliary point, whose own N(0, I) prior makes it
    uniform; adding the Laplace term on that angle gives it the authors' density (continuous where
    it wraps at ``+-pi``). Fit it with ``angle_jacobian = 0``.
    """
    code = st.program("constrained")
    for anchor, added in (
        ("    target += normal_lpdf(p[h] | 0, 1);\n",
         "    target += double_exponential_lpdf(atan2(p[h][2], p[h][1]) | 0, 1);\n"),
        ("  if (angle_jacobian) {\n", "  target += double_exponential_lpdf(to_vector(t) | 0, 1);\n"),
    ):
        if code.count(anchor) != 1:
            raise RuntimeError(f"the constrained Stan program changed: {anchor.strip()!r} not found once")
        code = code.replace(anchor, anchor + added if anchor.startswith("    target") else added + anchor)
    return code

