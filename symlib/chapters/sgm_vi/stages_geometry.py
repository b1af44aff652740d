"""Chapter 3's first two experiments: mode interpolation (Figure 3) and mode proximity (Theorem 3.1).

* :func:`interpolation_experiment`: reverse-KL Gaussian fits to the mixture ``p_a`` of two
  components a distance ``a`` apart (:mod:`symlib.chapters.sgm_vi.mode_interpolation`), for every
  component sd ``s`` and dimension ``D``; the ratio ``|mu*| / a`` and the threshold ``a*`` where
  the fit stops interpolating.
* :func:`proximity_experiment`: for random one-hidden-layer MLPs of growing width, the exact
  distance to the nearest non-identity permuted copy relative to ``|w|``
  (:mod:`symlib.chapters.sgm_vi.mode_proximity`), beside the theorem's bound and an elementary one.

Mode interpolation's open choices: the direction of ``u`` (``interp_direction``: ``e_1`` as in the
authors' notebook, or ``(1, ..., 1)/sqrt(D)``); where ``q`` starts (``interp_init``: ``N(0, I)`` for
every ``s`` as in the authors' notebook, or the first component ``N(0, s^2 I)``); Adam; ``a*`` = the first grid ``a`` with
``|ratio - 1/2| > interp_band`` (0.25).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from symlib.chapters.sgm_vi import mode_interpolation as mi
from symlib.chapters.sgm_vi import mode_proximity as mp
from symlib.chapters.sgm_vi.rng import generator
from symlib.inference import loop
from symlib.nn.mlp import MLPSpec, init_mlp

__all__ = ["interpolation_experiment", "proximity_experiment", "proximity_table", "threshold_table", "with_band"]


CHECKPOINT_FORMAT = "sgm_vi-interp-1"
"""The layout of :func:`interpolation_experiment`'s checkpoint: ``{"format", "settings", "fits"}``,
``fits`` mapping each dimension ``D`` to its fit's latest state (:func:`~.mode_interpolation.fit_reverse_kl`'s ``save``)."""


def interpolation_experiment(profile, seed: int, *, device: torch.device | str = "cpu",
                             checkpoint: str | Path | None = None, budget_s: float | None = None) -> dict:
    """Reverse-KL fits on the grid ``a / s in (0, 10]`` for every ``s`` and ``D`` (one batch per D),
    on ``device`` (draws from a generator there).

    Args:
        profile: the chapter's profile (or a stage's view of it): the ``interp_*`` fields.
        seed: the run seed.
        device: where the fits run.
        checkpoint: where the fits keep their states (every fit's, finished ones included, in one
            file written whole); if it exists they continue from it, to the numbers of an
            uninterrupted run. None: nothing is kept and there is no budget.
        budget_s: seconds this call may run before it stops with its checkpoint written.

    Raises:
        BudgetExhausted: ``budget_s`` was spent; the checkpoint holds where each fit got.
        ValueError: the checkpoint was written by a run with other settings.
    """
    grid = np.linspace(0.0, 10.0, profile.interp_n_a + 1)[1:]
    sds = np.asarray(profile.interp_sds, dtype=float)
    out = {"a_over_sd": grid, "sds": sds, "dims": list(profile.interp_dims), "band": profile.interp_band,
           "direction": profile.interp_direction, "init": profile.interp_init}
    settings = {"seed": seed, "device": torch.device(device).type,
                **{f: getattr(profile, f) for f in ("interp_n_a", "interp_samples", "interp_steps", "interp_dims",
                                                    "interp_sds", "interp_lr", "interp_direction", "interp_init")}}
    states = {}
    if checkpoint is not None and Path(checkpoint).is_file():
        states = loop.read_checkpoint(checkpoint, format=CHECKPOINT_FORMAT, settings=settings,
                                      what="Figure 3 fit")["fits"]
    start = time.perf_counter()

    def keep(dim):
        def save(state: dict) -> None:
            states[dim] = state
            loop.write_checkpoint(checkpoint, {"format": CHECKPOINT_FORMAT, "settings": settings, "fits": states})
        return save

    for dim in profile.interp_dims:
        a = torch.tensor(sds[:, None] * grid[None, :], dtype=torch.float32)     # (n_sd, n_a)
        s = torch.tensor(sds[:, None], dtype=torch.float32)
        u = mi.direction(dim, kind=profile.interp_direction)
        left = None if budget_s is None else max(budget_s - (time.perf_counter() - start), 1e-9)
        try:
            fit = mi.fit_reverse_kl(a, s, dim=dim, n_samples=profile.interp_samples,
                                    n_steps=profile.interp_steps, lr=profile.interp_lr,
                                    generator=generator(seed, "interp", dim, device=device), u=u,
                                    init_sd=_start_sd(profile.interp_init, s), state=states.get(dim),
                                    save=keep(dim) if checkpoint is not None else None, budget_s=left)
        except loop.BudgetExhausted as stop:
            raise loop.BudgetExhausted(f"Figure 3's fits at D = {dim}: {stop}") from None
        along = fit.mean @ u                                        # signed position along u
        sd_along = torch.sqrt((fit.sd.square() * u.square()).sum(-1))  # sd of q projected on u
        thresholds = [mi.mode_seeking_threshold(grid, r, band=profile.interp_band)
                      for r in fit.ratio.numpy()]
        out[dim] = {"ratio": fit.ratio.numpy(), "along": along.numpy(), "sd_along": sd_along.numpy(),
                    "kl": fit.kl.numpy(), "threshold_over_sd": np.asarray(thresholds),
                    "loss_curve": fit.loss_history.numpy()}
    return out


def _start_sd(init: str, component_sd: torch.Tensor) -> torch.Tensor | float:
    """The sd ``q`` starts from: 1 (``"unit"``, q = N(0, I)) or the component sd ``s`` (``"component"``).

    Raises:
        ValueError: ``init`` is neither.
    """
    if init == "unit":
        return 1.0
    if init == "component":
        return component_sd
    raise ValueError(f"interp_init must be 'unit' or 'component', got {init!r}")


def with_band(interp: dict, band: float) -> dict:
    """The interpolation results with ``a*`` read off the same fits for another band (no refit)."""
    out = {**interp, "band": band}
    for dim in interp["dims"]:
        thresholds = [mi.mode_seeking_threshold(interp["a_over_sd"], r, band=band) for r in interp[dim]["ratio"]]
        out[dim] = {**interp[dim], "threshold_over_sd": np.asarray(thresholds)}
    return out


def threshold_table(interp: dict) -> pd.DataFrame:
    """``a*`` per component sd and dimension, in units of ``a`` and of ``s`` (paper: ``a* = 5 s``)."""
    rows = []
    for dim in interp["dims"]:
        for s, t in zip(interp["sds"], interp[dim]["threshold_over_sd"]):
            rows.append({"D": dim, "component sd s": s, "a* (ours)": t * s, "a*/s (ours)": t,
                         "a* (paper)": 5.0 * s})
    return pd.DataFrame(rows)


def proximity_experiment(profile, seed: int) -> dict:
    """Relative distance to the nearest permuted copy of random MLPs (``init_mlp``), per width.

    Args:
        profile: the chapter's profile (or a stage's view of it): the ``prox_*`` fields.
        seed: the run seed.
    """
    gen = generator(seed, "prox")
    rows = []
    for d_in, d_out in profile.prox_shapes:
        for width in profile.prox_widths:
            spec = MLPSpec((d_in, width, d_out))
            nets = [init_mlp(spec, gen, torch.float64) for _ in range(profile.prox_draws)]
            params = {k: torch.stack([p[k] for p in nets]) for k in nets[0]}
            rel = mp.nearest_copy_distance(params, spec).numpy()
            rows.append({"d_i": d_in, "d_o": d_out, "width": width, "mean": float(rel.mean()),
                         "min": float(rel.min()), "max": float(rel.max()),
                         "theorem 3.1 bound": float(mp.theorem31_bound(d_in, d_out, width)),
                         "sqrt(8/d_h)": float(mp.elementary_bound(width))})
    return {"rows": rows}


def proximity_table(prox: dict) -> pd.DataFrame:
    """The proximity experiment's rows: one per (d_i, d_o, width)."""
    return pd.DataFrame(prox["rows"])
