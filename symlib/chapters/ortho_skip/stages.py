"""Chapter 1's compute: the sinc experiment, the ELBO gap and the sensitivity sweep, as stages.

Kurle, Januschowski, Gasthaus & Wang (2021), "On symmetries in variational Bayesian neural nets".

* ``main`` (:func:`main_stage`): both experiments, side by side through
  :func:`symlib.book.parallel.fan_out`, one cache entry:

  1. **Sinc regression** (paper Sec. 4, Figure 1, :func:`sinc_experiment`). A 1-32x5-1 SELU MLP,
     isotropic ``N(0, 1)`` prior, mean-field Gaussian posterior fitted with the local
     reparameterisation trick (:mod:`symlib.inference.mfvi`), full batch, KL weight annealed
     linearly over the first half. The four :data:`VARIANTS` are trained side by side as one
     batch of models (same data, same initial means, same fixed skip matrices). Metrics per
     variant: train RMSE, test log-likelihood on fresh in-range data, mean epistemic sd inside
     and outside the data range, the final ELBO and the share of weights whose posterior stayed
     at the prior (per-weight KL to ``N(0, 1)`` below ``prior_kl_threshold``, weight matrices only:
     the biases' prior differs between variants).
  2. **ELBO gap** (paper Sec. 2.2, Eq. 6, :func:`gap_experiment`). For a net small enough to
     enumerate its whole permutation group, ``KL[q0 || q_mix]`` (:mod:`symlib.chapters.ortho_skip.gap`)
     as the means move from the prior to well separated, and as units collapse onto the prior.

* ``robustness`` (:func:`robustness_setting`): a fan-out stage, one cached sinc rerun per setting
  ``(field, value)`` of the profile's ``robustness`` sweep (:data:`ROBUSTNESS_CHOICES`), with
  data, initial means, skip matrices and seed unchanged; the gap does not depend on these choices.

Seeds: both stages keep the seed they had before the chapter contract (``legacy_seed``: the run
seed itself) and derive their generators from it by purpose (:func:`legacy_generator`,
SeedSequence ``[seed, purpose index]``), as before; the sweep reuses the main run's data and
initial means on purpose. Moving onto named streams would move numbers: a change of its own.

VI engine (profile field ``vi_engine``, :data:`VI_ENGINES`): the VI fit of every sinc run goes through

* ``"mfvi_batched_fast"`` (every profile's choice): :func:`symlib.inference.mfvi_batched.fit_resumable`
  with :attr:`~symlib.inference.mfvi_batched.Noise.FAST`, on the CPU whatever the stage's device:
  the same objective and Adam steps as :func:`symlib.inference.mfvi.fit`, computed by one C routine
  per step, with the Monte Carlo noise from a counter-based generator keyed by one number per step
  drawn from the ``fit`` stream (:func:`legacy_generator`) -- the same distribution as
  ``mfvi.fit``'s draws, other numbers (tests/inference/test_mfvi_batched.py compares the fitted
  posteriors across seeds). About 4x ``mfvi.fit``'s steps per second on one core
  (benchmarks/bench_orthoskip_step.py), which puts the `paper` profile's 200,000 steps within a
  CPU run;
* ``"mfvi"``: :func:`symlib.inference.mfvi_graph.fit_resumable` on the stage's device (on a GPU each
  step one CUDA graph; on the CPU the steps of :func:`symlib.inference.mfvi.fit`, bit for bit),
  with the noise drawn by ``torch.randn`` from the ``fit`` stream.

Either is checkpointed under ``<cache>/checkpoints/`` (:func:`checkpoint_path`): at the run's
deadline (``ctx.deadline``, from ``$SYMLIB_BUDGET_S``) a fit stops with its checkpoint written and
the stage raises :class:`~symlib.inference.loop.BudgetExhausted`; the next run continues it to the
numbers of an uninterrupted fit, so the `paper` profile's 200,000 steps may go in pieces.

Threads: one torch intra-op thread on the CPU while a stage computes (restored afterwards).
Each op here touches only ~10^5 numbers, so a second thread gains little, while on a busy
machine every parallel op waits for a scheduler slice (measured on a 2-core machine
under load: ~8 ms per op with 2 threads vs 0.1 ms with 1, a 15x slower run).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from symlib.book import cache
from symlib.book.chapter import Stage
from symlib.book.parallel import fan_out
from symlib.book.runtime import torch_threads
from symlib.chapters.ortho_skip import gap as gap_lib
from symlib.data import sinc_function, sinc_regression
from symlib.inference import mfvi, mfvi_batched, mfvi_graph
from symlib.inference.loop import seconds_left
from symlib.nn.mlp import Activation, MLPSpec, init_mlp
from symlib.nn.orthoskip import skip_matrices

__all__ = [
    "EXPERIMENT",
    "GAP_FIELDS",
    "ROBUSTNESS_CHOICES",
    "SINC_FIELDS",
    "STAGES",
    "STAGE_CODE",
    "VARIANTS",
    "VERSION",
    "VI_ENGINES",
    "checkpoint_path",
    "compute",
    "gap_experiment",
    "legacy_generator",
    "main_stage",
    "robustness_setting",
    "robustness_settings",
    "run_seed",
    "sinc_experiment",
]

VERSION = "3"
"""Bump when a code change alters the cached results (2: recorded ELBO curves are interval means;
3: the VI fit by the ``vi_engine`` of the profile, ``mfvi_batched_fast`` in every profile)."""

VI_ENGINES = ("mfvi_batched_fast", "mfvi")
"""The VI fits' engines (module docstring)."""

VARIANTS = (
    {"name": "plain", "label": "No skip & no bias constr.", "skip": False, "ordered": False},
    {"name": "bias_ordered", "label": "Bias constr.", "skip": False, "ordered": True},
    {"name": "ortho_skip", "label": "Orthogonal skip", "skip": True, "ordered": False},
    {"name": "ortho_skip_bias_ordered", "label": "Ortho. skip & bias constr.", "skip": True, "ordered": True},
)
"""The four panels of Kurle et al.'s Figure 1, in its order."""

ROBUSTNESS_CHOICES = {
    "learning_rate": "learning rate",
    "init_sd": "initial posterior sd",
    "learn_noise": "noise model",
    "anneal_fraction": "KL annealing",
    "n_train_samples": "MC samples",
    "n_steps": "number of steps",
}
"""The profile fields the sensitivity sweep may change: the sinc experiment's open choices, and the
budget of a fit: the Monte Carlo samples per step and the number of steps (the paper's 64 and
200,000; our profiles run fewer)."""

SINC_FIELDS = (
    "hidden_widths", "n_train", "n_test", "n_grid", "x_plot", "frequency", "amplitude", "noise_sd",
    "skip_placement", "init_sd", "n_steps", "n_train_samples", "learning_rate", "learn_noise",
    "anneal_fraction", "record_every", "n_test_samples", "prior_kl_threshold", "vi_engine",
)
"""The profile fields :func:`sinc_experiment` reads."""

GAP_FIELDS = ("gap_widths", "n_gap_scales", "gap_max_scale", "gap_samples")
"""The profile fields :func:`gap_experiment` reads."""

_STREAMS = {"train": 0, "test": 1, "skips": 2, "init": 3, "fit": 4, "predict": 5, "gap": 6}


def _threads(device: torch.device) -> int | None:
    """Torch intra-op threads while computing: one on the CPU (module docstring), torch's own elsewhere."""
    return 1 if device.type == "cpu" else None


def checkpoint_path(ctx, name: str) -> Path:
    """Where the VI fit of sinc run ``name`` (``"main"`` or a sweep setting) checkpoints:
    ``<cache>/checkpoints/<chapter>-sinc-<name>-<digest>.pt``. The digest is of everything the fit
    depends on (the stage's profile fields, the seed, the device and the stages' code and data
    hashes: :data:`STAGE_CODE`), so a checkpoint of other settings or code is never continued, and
    one of this code survives edits of the claims and texts."""
    ident = {"chapter": ctx.chapter, "run": name, "fields": ctx.config.fields(), "seed": ctx.seed,
             "device": cache.device_key(ctx.device), "code": cache.fingerprint(EXPERIMENT)}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]
    label = re.sub(r"[^A-Za-z0-9.]+", "_", name).strip("_")
    return cache.cache_dir() / "checkpoints" / f"{ctx.chapter}-sinc-{label}-{digest}.pt"


def main_stage(ctx) -> dict:
    """Stage ``main``: both experiments (:func:`compute`) on the stage's fields, seed and device."""
    device = torch.device(ctx.device)
    threads = _threads(device)
    path = checkpoint_path(ctx, "main")
    with torch_threads(threads):
        out = compute(ctx.config, ctx.seed, device, threads, checkpoint=path, deadline=ctx.deadline)
    path.unlink(missing_ok=True)   # the stage's result is what is cached; its checkpoint is spent
    return out


def robustness_settings(config) -> list[tuple[str, object]]:
    """The items of stage ``robustness``: the profile's ``(field, value)`` settings, checked."""
    for field, _ in config.robustness:
        if field not in ROBUSTNESS_CHOICES:
            raise ValueError(f"robustness field {field!r} is not one of {', '.join(ROBUSTNESS_CHOICES)}")
    return [tuple(setting) for setting in config.robustness]


def robustness_setting(ctx, item: tuple[str, object]) -> dict:
    """Stage ``robustness``, one item: the sinc experiment with one open choice changed.

    Returns:
        The sinc results' ``metrics``, ``reference`` and ``history`` under the setting (enough
        for :func:`symlib.chapters.ortho_skip.claims.claims`).
    """
    field, value = item
    device = torch.device(ctx.device)
    path = checkpoint_path(ctx, f"{field}={value}")
    with torch_threads(_threads(device)):
        sinc = sinc_experiment(ctx.config.replace(**{field: value}), ctx.seed, device, checkpoint=path,
                               deadline=ctx.deadline)
    path.unlink(missing_ok=True)
    return {k: sinc[k] for k in ("metrics", "reference", "history")}


def compute(profile, seed: int, device: torch.device, threads: int | None = 1, *,
            checkpoint: str | Path | None = None, deadline: float | None = None) -> dict:
    """Both experiments, independent of each other, through :func:`symlib.book.parallel.fan_out`
    (side by side when ``$SYMLIB_JOBS`` allows; each derives its own random streams);
    ``checkpoint`` and ``deadline``: the sinc fit's (:func:`sinc_experiment`)."""
    start = time.perf_counter()
    out = {"seed": seed, "device": str(device)}
    (fit, _), (gap, gap_s) = fan_out(_experiment, [(profile, seed, "sinc", str(device), checkpoint, deadline),
                                                   (profile, seed, "gap", "cpu", None, None)], threads=threads)
    out.update(fit)
    out["gap"] = gap
    out["timing"]["gap_s"] = gap_s
    out["timing"]["total_s"] = time.perf_counter() - start
    return out


def _experiment(profile, seed: int, which: str, device: str, checkpoint=None, deadline=None) -> tuple[dict, float]:
    """One of the two experiments (one task) and its wall time in seconds."""
    t0 = time.perf_counter()
    if which == "sinc":
        result = sinc_experiment(profile, seed, torch.device(device), checkpoint=checkpoint, deadline=deadline)
    else:
        result = gap_experiment(profile, seed)
    return result, time.perf_counter() - t0


def sinc_experiment(profile, seed: int, device: torch.device, *, checkpoint: str | Path | None = None,
                    deadline: float | None = None) -> dict:
    """The four :data:`VARIANTS` fitted to the sinc data side by side, and their metrics.

    The fit is by the profile's ``vi_engine`` (module docstring): ``checkpoint`` is its file (an
    existing one is continued; None: a temporary file, so the fit cannot be continued). At
    ``deadline`` (seconds since the epoch: the stage's
    :attr:`~symlib.book.chapter.StageContext.deadline`; None: no limit) it stops with its
    checkpoint written and :class:`~symlib.inference.loop.BudgetExhausted` is raised.

    Returns:
        ``metrics`` (one row per variant), ``reference`` (the true function's train RMSE and test
        log-likelihood), ``fits`` (curves for :func:`symlib.chapters.ortho_skip.views.plot_fits`),
        ``history`` (training curves) and ``timing``.
    """
    spec = MLPSpec((1, *profile.hidden_widths, 1), Activation.SELU)
    data_kw = {"frequency": profile.frequency, "amplitude": profile.amplitude, "noise_sd": profile.noise_sd}
    x, y = sinc_regression(profile.n_train, legacy_generator(seed, "train"), **data_kw)
    x_test, y_test = sinc_regression(profile.n_test, legacy_generator(seed, "test"), **data_kw)
    x_grid = torch.linspace(*profile.x_plot, profile.n_grid).unsqueeze(-1)

    # One batch of four models: zero skip matrices are exactly "no skip".
    n_var = len(VARIANTS)
    skips = skip_matrices(spec, legacy_generator(seed, "skips"), placement=profile.skip_placement)
    has_skip = torch.tensor([v["skip"] for v in VARIANTS])
    batched_skips = {k: torch.where(has_skip[:, None, None], o, torch.zeros_like(o)) for k, o in skips.items()}
    ordered = torch.tensor([v["ordered"] for v in VARIANTS])
    base = init_mlp(spec, legacy_generator(seed, "init"))
    params = {k: v.expand(n_var, *v.shape).clone() for k, v in base.items()}
    if profile.vi_engine not in VI_ENGINES:
        raise ValueError(f"vi_engine {profile.vi_engine!r} is not one of {', '.join(VI_ENGINES)}")
    # the batched engine fits on the CPU; predictions and metrics are on the stage's device
    fit_device = torch.device("cpu") if profile.vi_engine == "mfvi_batched_fast" else device
    fit_model = mfvi.BayesMLP(spec, {k: v.to(fit_device) for k, v in batched_skips.items()}, ordered.to(fit_device))
    q0 = mfvi.mean_field_from_params(fit_model, {k: v.to(fit_device) for k, v in params.items()},
                                     init_sd=profile.init_sd)
    fit_kw = {
        "n_steps": profile.n_steps, "n_samples": profile.n_train_samples, "lr": profile.learning_rate,
        "generator": legacy_generator(seed, "fit", fit_device), "noise_sd": profile.noise_sd,
        "learn_noise": profile.learn_noise, "anneal_fraction": profile.anneal_fraction,
        "record_every": profile.record_every, "desc": "chapter 1: VI, 4 variants",
        "budget_s": seconds_left(deadline),
        # the plateau precondition reads this curve: one 16-sample estimate per record had lone
        # spikes at twice the typical ELBO, the mean of the estimates between records has not
        "average_records": True,
    }
    if profile.vi_engine == "mfvi_batched_fast":
        fit_resumable = mfvi_batched.fit_resumable
        fit_kw.update(kernels=mfvi_batched.Kernels.C, noise=mfvi_batched.Noise.FAST)
    else:
        fit_resumable = mfvi_graph.fit_resumable
    x_fit, y_fit = x.to(fit_device), y.to(fit_device)
    if checkpoint is None:
        with tempfile.TemporaryDirectory(prefix="symlib-vi-") as folder:
            fitted = fit_resumable(fit_model, q0, x_fit, y_fit, checkpoint=Path(folder) / "vi.pt", **fit_kw)
    else:
        fitted = fit_resumable(fit_model, q0, x_fit, y_fit, checkpoint=checkpoint, **fit_kw)
    result = fitted.require_complete().fit
    train_s = fitted.wall_time_s

    t1 = time.perf_counter()
    model = mfvi.BayesMLP(spec, {k: v.to(device) for k, v in batched_skips.items()}, ordered.to(device))
    x, y, x_test, y_test, x_grid = (t.to(device) for t in (x, y, x_test, y_test, x_grid))
    q = mfvi.MeanField({k: v.to(device) for k, v in result.q.mean.items()},
                       {k: v.to(device) for k, v in result.q.log_sd.items()})
    noise = result.log_noise_sd.to(device).exp()
    gen = legacy_generator(seed, "predict", device)
    s_test = profile.n_test_samples
    with torch.no_grad():
        train_pred = _predict(q, model, x, s_test, gen, noise)
        test_pred = _predict(q, model, x_test, s_test, gen, noise)
        # whole-network draws on the grid: each sample is one function, so the curves are smooth
        grid_pred = mfvi.predict(q, model, x_grid, s_test, gen, noise, whole_functions=True)
        final = mfvi.elbo(q, model, x, y, noise, s_test, gen)
    rmse = (train_pred.mean - y).square().mean((-1, -2)).sqrt()
    test_ll = mfvi.predictive_log_likelihood(test_pred.samples, y_test, noise)
    epi_sd = grid_pred.epistemic_var.sqrt().squeeze(-1)
    inside = (x_grid.squeeze(-1).abs() <= 1.0)
    kl_w = torch.cat([mfvi.gaussian_kl(q.mean[k], q.log_sd[k]).reshape(n_var, -1)
                      for k in spec.shapes() if k.startswith("W")], dim=-1)
    at_prior = (kl_w < profile.prior_kl_threshold).double().mean(-1)
    by_layer = {k: (mfvi.gaussian_kl(q.mean[k], q.log_sd[k]).reshape(n_var, -1) < profile.prior_kl_threshold)
                .double().mean(-1) for k in spec.shapes() if k.startswith("W")}
    f_true_train = sinc_function(x, profile.frequency, profile.amplitude)
    f_true_test = sinc_function(x_test, profile.frequency, profile.amplitude)
    oracle_rmse = (f_true_train - y).square().mean().sqrt().item()
    oracle_test_ll = (-0.5 * ((y_test - f_true_test) / profile.noise_sd).square()
                      - math.log(profile.noise_sd) - 0.5 * math.log(2 * math.pi)).mean().item()

    metrics = []
    for i, v in enumerate(VARIANTS):
        metrics.append({
            "variant": v["name"],
            "label": v["label"],
            "train_rmse": rmse[i].item(),
            "test_loglik": test_ll[i].item(),
            "epistemic_sd_in": epi_sd[i, inside].mean().item(),
            "epistemic_sd_out": epi_sd[i, ~inside].mean().item(),
            "elbo": final.elbo[i].item(),
            "expected_loglik": final.expected_log_likelihood[i].item(),
            "kl": final.kl[i].item(),
            "share_at_prior": at_prior[i].item(),
            "share_at_prior_by_layer": {k: s[i].item() for k, s in by_layer.items()},
            "noise_sd": noise.reshape(-1).expand(n_var)[i].item(),
        })
    fits = {
        "x_train": _np(x).ravel(), "y_train": _np(y).ravel(),
        "x_grid": _np(x_grid).ravel(),
        "f_true": _np(sinc_function(x_grid, profile.frequency, profile.amplitude)).ravel(),
        "variants": [v["name"] for v in VARIANTS],
        "labels": [v["label"] for v in VARIANTS],
        "mean": _np(grid_pred.mean.squeeze(-1)),
        "epistemic_sd": _np(epi_sd),
        "aleatoric_sd": _np(grid_pred.aleatoric_var.sqrt().squeeze(-1)),
        "total_sd": _np(grid_pred.total_var.sqrt().squeeze(-1)),
    }
    history = {k: np.asarray(v) for k, v in result.history.items()}
    evaluate_s = time.perf_counter() - t1
    return {
        "metrics": metrics,
        "reference": {"oracle_train_rmse": oracle_rmse, "oracle_test_loglik": oracle_test_ll},
        "fits": fits,
        "history": history,
        "timing": {"train_s": train_s, "evaluate_s": evaluate_s, "pieces": fitted.pieces,
                   "iterations_per_s": profile.n_steps / max(train_s, 1e-9)},
    }


def gap_experiment(profile, seed: int) -> dict:
    """The ELBO gap of the ``gap_widths`` net against the mean scale, and against collapsed units."""
    spec = MLPSpec(tuple(profile.gap_widths), Activation.SELU)
    gen = legacy_generator(seed, "gap")
    n_rest = profile.n_gap_scales - 1
    scales = [0.0] + np.geomspace(1e-2, profile.gap_max_scale, n_rest).tolist()
    curve = gap_lib.gap_curve(spec, scales, profile.gap_samples, gen)
    n_hidden = len(spec.hidden_widths)
    collapse = gap_lib.collapse_curve(spec, list(range(min(spec.hidden_widths) + 1)), profile.gap_samples,
                                      gen, scale=profile.gap_max_scale)
    return {
        "widths": list(spec.widths),
        "n_permutations": math.prod(math.factorial(n) for n in spec.hidden_widths),
        "scales": curve.scales.numpy(),
        "gap": curve.gap.numpy(),
        "standard_error": curve.standard_error.numpy(),
        "log_n": curve.log_n,
        "log_n_paper": gap_lib.log_group_order(spec, range(2, n_hidden + 1)),
        "collapse_n_active": collapse.n_active.numpy(),
        "collapse_gap": collapse.gap.numpy(),
        "collapse_standard_error": collapse.standard_error.numpy(),
        "collapse_limit": collapse.limit.numpy(),
        "collapse_scale": profile.gap_max_scale,
        "samples": profile.gap_samples,
    }


def _predict(q, model, x, n_samples, generator, noise, chunk: int = 256) -> mfvi.Predictive:
    """:func:`mfvi.predict` in chunks of inputs (exact: the local trick's noise is per input)."""
    parts = [mfvi.predict(q, model, x[i: i + chunk], n_samples, generator, noise)
             for i in range(0, x.shape[0], chunk)]
    return mfvi.Predictive(*(torch.cat(t, dim=-2) for t in zip(*parts)))  # inputs are axis -2

def legacy_generator(seed: int, stream: str, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator for one named random stream of the run, derived from ``seed`` (SeedSequence)."""
    state = np.random.SeedSequence([int(seed), _STREAMS[stream]]).generate_state(1, dtype=np.uint64)[0]
    return torch.Generator(device=torch.device(device)).manual_seed(int(state))




def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().double().numpy()


def run_seed(seed: int) -> int:
    """The seed both stages used before the chapter contract: the run seed itself."""
    return seed


EXPERIMENT = "01_ortho_skip-sinc"
"""The cache folder both stages share. It was the chapter's name (``01_ortho_skip``, the folder of
the code before the chapter contract) until the stages declared their code (:data:`STAGE_CODE`),
which a stage can only do under a folder of its own (``<chapter>-<name>``)."""

STAGES = (
    Stage("main", main_stage, fields=(*SINC_FIELDS, *GAP_FIELDS), version=VERSION,
          legacy_seed=run_seed, experiment=EXPERIMENT),
    Stage("robustness", robustness_setting, fields=(*SINC_FIELDS, "robustness"), version=VERSION,
          legacy_seed=run_seed, experiment=EXPERIMENT, items=robustness_settings),
)
"""Chapter 1's stages. Both keep the version of the code before the chapter contract (their keys
changed shape with the contract) and its seed, the run seed itself."""

STAGE_CODE = {stage.name: ("symlib.chapters.ortho_skip.stages",) for stage in STAGES}
"""The code each stage runs (:data:`symlib.book.provenance.STAGE_CODE_ATTRIBUTE`): this module and
what it imports (``gap`` and the library's MFVI, its recorded step and the networks), not
``claims``, ``views``, ``profiles`` or ``paper``. So an edit of the claims or texts leaves the
cached entries and the VI fits' checkpoints current, and a `paper` run in GPU pieces continues;
an edit of what computes restarts it."""
