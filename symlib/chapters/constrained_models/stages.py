"""Chapter 4's compute: the stages, each a pure function of its profile fields and the seed.

Pourzanjani, Jiang & Petzold (2017), "Improving the identifiability of neural networks for
Bayesian inference". One hidden ReLU layer, three Stan programs (:mod:`symlib.inference.stan`,
torch twins in :mod:`symlib.nn.constrained`): unconstrained; ordered hidden biases (removes the
permutations); ordered biases plus unit-norm incoming weights through angles, last layer free
(removes the permutations and the ReLU scaling). The stages, in order:

* ``compile`` (:func:`compile_models`): build every Stan program (not cached: it reports what
  this machine paid now);
* ``prior`` (:func:`prior_demo`, torch only): the implied prior of a unit vector in 13
  dimensions with and without the angle change of measure the authors' Stan file leaves out;
* ``synth`` (:func:`~symlib.chapters.constrained_models.stages_synthetic.synthetic_experiment`,
  Sec. 4.1, Figure 1): NUTS and both ADVI families on every model, for the paper's generator
  (and the authors' code's);
* ``boston_fits`` (:func:`~symlib.chapters.constrained_models.stages_boston.boston_fit`, Sec. 4.2,
  Tables 1-2): NUTS on the unconstrained and the constrained model (and the constrained model under
  the authors' angle prior) per random split, one cache entry per fit, so that a run stopped
  part-way (hours at Stan's default tree depth on 2 cores) resumes with the fits it finished;
* ``boston`` (not cached): those fits, split by split
  (:func:`~symlib.chapters.constrained_models.stages_boston.boston_splits`);
* ``robust_synth`` (:func:`robust_synthetic`): the synthetic NUTS runs again under other weight
  prior scales;
* ``robust_boston_fits`` (:func:`robust_boston_items`; in the `paper` profile only): NUTS on
  Boston housing again under each of those scales, one cache entry per fit;
* ``robust`` (not cached, :func:`robust_join`): the two joined, what
  :func:`robustness_experiment` gives in one go.

Each stage's ``profile`` is the chapter's profile
(:class:`~symlib.chapters.constrained_models.profiles.ConstrainedModelsProfile`) or a stage's
view of it. The stages declare their code (:data:`STAGE_CODE`). Each cached stage but the two
fan-out stages of fits is one cache entry (as before the chapter contract); its
independent Stan fits fan out through :func:`symlib.book.parallel.fan_out` inside it. Everything runs on the CPU
(Stan's NUTS, and ADVI on ten-parameter models), under the profile's ``threads``. The stages
keep the seeds they had before the contract (``legacy_seed``: the run seed, from which
:mod:`.seeds` derives one generator per purpose and fit); moving them onto named streams would
move numbers, so it is a change of its own.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
from scipy import stats

from symlib import transforms as tf
from symlib.book.chapter import ProfileView, Stage
from symlib.book.parallel import fan_out
from symlib.book.runtime import torch_threads
from symlib.chapters.constrained_models import seeds
from symlib.chapters.constrained_models.fits import hyperbola_stats, mode_labels, nuts_fit
from symlib.chapters.constrained_models.stages_boston import (
    boston_fit,
    boston_splits,
    boston_tasks,
)
from symlib.chapters.constrained_models.stages_synthetic import synthetic_data, synthetic_experiment
from symlib.inference import stan as st
from symlib.nn import constrained as idf

__all__ = [
    "BOSTON_FIELDS",
    "PRIOR_FIELDS",
    "ROBUST_BOSTON_FIELDS",
    "ROBUST_FIELDS",
    "ROBUST_SYNTH_FIELDS",
    "STAGES",
    "STAGE_CODE",
    "SYNTH_FIELDS",
    "VERSION",
    "compile_models",
    "prior_demo",
    "robust_boston_items",
    "robust_boston_variant",
    "robust_join",
    "robust_synthetic",
    "robustness_experiment",
]

VERSION = "4"
"""The cached stages' version (the old chapter version: the migration moved no number); bump it
when a code change alters their results."""

def compile_models() -> dict:
    """Build every Stan program once (compiling it unless httpstan's cache has it); seconds each.

    Not cached by symlib: it reports what this machine paid now (about 1 s when cached).
    """
    x = torch.zeros(3, 3, dtype=torch.float64)
    out = {}
    for name in st.MODELS:
        model = st.build(name, idf.stan_data(name, x, torch.zeros(3), 1), seed=1)
        out[name] = model.build_s
    return out


def prior_demo(profile, seed: int, dim: int = 13) -> dict:
    """Implied prior of a unit vector in ``dim`` dimensions from the constrained model's angles.

    Samples the angles exactly from the prior the Stan program puts on them: ``t_1`` uniform
    (from the auxiliary point), ``t_k`` (``k >= 2``) uniform on ``(-pi/2, pi/2)`` without the
    change of measure, or with density proportional to ``cos(t_k)^(k-1)`` with it (rejection
    sampling). Compares the coordinates of the resulting unit vectors with the uniform
    distribution on the sphere, whose every coordinate has density ``(1 - w^2)^((dim-3)/2)``.
    """
    gen = seeds.generator(seed, "prior")
    n = profile.prior_demo_draws
    out = {"dim": dim}
    t1 = (2 * torch.rand(n, 1, generator=gen, dtype=torch.float64) - 1) * math.pi
    for jac in (False, True):
        cols = []
        for k in range(2, dim):
            if not jac:
                cols.append((torch.rand(n, generator=gen, dtype=torch.float64) - 0.5) * math.pi)
                continue
            got = torch.empty(0, dtype=torch.float64)
            while got.numel() < n:
                t = (torch.rand(4 * n, generator=gen, dtype=torch.float64) - 0.5) * math.pi
                keep = torch.rand(4 * n, generator=gen, dtype=torch.float64) < torch.cos(t) ** (k - 1)
                got = torch.cat([got, t[keep]])
            cols.append(got[:n])
        theta = torch.cat([t1, torch.stack(cols, -1)], dim=-1)
        w = tf.unit_vector_from_angles(theta)
        ref = torch.randn(n, dim, generator=gen, dtype=torch.float64)
        ref = ref / ref.norm(dim=-1, keepdim=True)
        ks = [stats.ks_2samp(w[:, i].numpy(), ref[:, i].numpy()).pvalue for i in range(dim)]
        out["jacobian" if jac else "no_jacobian"] = {
            "w": w[:, [0, dim - 1]].numpy().astype(np.float32), "ks_p": np.asarray(ks),
            "mean_abs_last": float(w[:, -1].abs().mean()), "mean_abs_first": float(w[:, 0].abs().mean())}
    out["uniform_mean_abs"] = float(ref[:, -1].abs().mean())
    # the authors' Boston prior (stan/boston.stan): Laplace(0, 1) on every angle, cut to the
    # angle's range, and no change of measure
    theta = torch.stack([_truncated_laplace(n, math.pi, gen)]
                        + [_truncated_laplace(n, math.pi / 2, gen) for _ in range(2, dim)], -1)
    w = tf.unit_vector_from_angles(theta)
    ref = torch.randn(n, dim, generator=gen, dtype=torch.float64)
    ref = ref / ref.norm(dim=-1, keepdim=True)
    ks = [stats.ks_2samp(w[:, i].numpy(), ref[:, i].numpy()).pvalue for i in range(dim)]
    out["authors"] = {
        "w": w[:, [0, dim - 1]].numpy().astype(np.float32), "ks_p": np.asarray(ks),
        "mean_abs_last": float(w[:, -1].abs().mean()), "mean_abs_first": float(w[:, 0].abs().mean())}
    return out


def _truncated_laplace(n: int, bound: float, gen: torch.Generator) -> torch.Tensor:
    """``n`` exact draws of Laplace(0, 1) restricted to ``(-bound, bound)`` (inverse CDF of |t|)."""
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    size = -torch.log1p(-u * (1 - math.exp(-bound)))
    sign = torch.where(torch.rand(n, generator=gen, dtype=torch.float64) < 0.5, -1.0, 1.0)
    return sign * size


def robustness_experiment(profile, seed: int, *, progress: bool = False, jobs: int | None = None) -> dict:
    """The synthetic NUTS runs again under every weight prior scale of ``robust_w_scales``.

    The paper's generator and data, the three models, NUTS only (every synthetic claim rests on
    NUTS); with ``robust_boston`` also Boston housing under each scale (no authors' angle prior).
    Only the summaries the claims need are kept. Every fit is a task of
    :func:`symlib.book.parallel.fan_out`. The chapter's stages compute the same in pieces: the
    synthetic fits in one cache entry (``robust_synth``), each Boston fit in its own
    (``robust_boston_fits``, so that the `paper` profile's 60 fits, hours on 2 cores, resume
    where a run stopped), joined by ``robust`` (:func:`robust_join`).
    """
    items = robust_boston_items(profile)
    fits = fan_out(boston_fit, [(robust_boston_variant(profile, w), seed, split, key) for w, split, key in items],
                   threads=profile.threads, jobs=jobs, progress=progress, desc="robustness (Boston)")
    return robust_join(profile, robust_synthetic(profile, seed, progress=progress, jobs=jobs),
                       dict(zip(items, fits, strict=True)))


def robust_synthetic(profile, seed: int, *, progress: bool = False, jobs: int | None = None) -> dict:
    """``{scale: {(model, "NUTS"): fit summary}}``: NUTS on the paper's synthetic data under every
    weight prior scale of ``robust_w_scales``, one :func:`symlib.book.parallel.fan_out` task a fit."""
    tasks = [(profile, seed, k, w, model) for k, w in enumerate(profile.robust_w_scales)
             for model in idf.MODELS]
    fits = fan_out(_robust_synthetic_fit, tasks, threads=profile.threads, jobs=jobs,
                   progress=progress, desc="robustness (synthetic)")
    out: dict = {}
    for (_, _, _, w, model), fit in zip(tasks, fits, strict=True):
        out.setdefault(w, {})[model, "NUTS"] = fit
    return out


def robust_boston_variant(profile, w_scale: float):
    """``profile`` as the robustness stage refits Boston housing: weight prior scale ``w_scale``,
    no authors' angle prior."""
    return _variant(profile, boston_w_scale=w_scale, boston_authors_angles=False)


def robust_boston_items(profile) -> list[tuple[float, int, str]]:
    """Every ``(scale, split index, fit key)`` the robustness stage fits on Boston housing: with
    ``robust_boston``, :func:`boston_tasks` under each scale of ``robust_w_scales``; else none."""
    if not profile.robust_boston:
        return []
    return [(w, split, key) for w in profile.robust_w_scales
            for split, key in boston_tasks(robust_boston_variant(profile, w))]


def robust_join(profile, synth: dict, boston_fits: dict) -> dict:
    """The robustness stage's result from its synthetic fits (:func:`robust_synthetic`) and its
    Boston fits (``{(scale, split, key): fit}``, every one of :func:`robust_boston_items`):
    ``{"synth": {scale: fits}, "boston": {scale: splits}}``, the splits as :func:`boston_splits`
    gives them."""
    boston = {}
    if profile.robust_boston:
        for w in profile.robust_w_scales:
            fits = {(split, key): fit for (scale, split, key), fit in boston_fits.items() if scale == w}
            boston[w] = boston_splits(robust_boston_variant(profile, w), fits)["splits"]
    return {"synth": synth, "boston": boston}


def _robust_synthetic_fit(profile, seed: int, k: int, w_scale: float,
                          model: str) -> dict:
    """NUTS on the paper's synthetic data under weight prior sd ``w_scale`` (one task)."""
    x, y, _, _, _ = synthetic_data(profile, seed, "paper")
    prior = idf.NetPrior(w_laplace=False, w_scale=w_scale, sigma_scale=profile.sigma_scale,
                         angle_jacobian=profile.angle_jacobian)
    fit = nuts_fit(model, x, y, 2, prior, chains=profile.synth_chains, warmup=profile.synth_warmup,
                draws=profile.synth_draws, seed=seeds.stan_seed(seed, 3000 + 10 * k + idf.MODELS.index(model)))
    return {"diag": fit["diag"], "hyperbola": hyperbola_stats(fit["params"]),
            "modes": mode_labels(fit["params"], profile.synth_chains)}


def _variant(profile, **changes):
    """``profile`` with some fields changed: a stage's :class:`ProfileView` or a whole profile."""
    if isinstance(profile, ProfileView):
        return profile.replace(**changes)
    return dataclasses.replace(profile, **changes)


# --------------------------------------------------------------------------- the stages

PRIOR_FIELDS = ("prior_demo_draws", "threads")
"""What the ``prior`` stage reads."""
SYNTH_FIELDS = ("synth_n", "synth_x_range", "synth_noise_sd", "synth_w_scale", "synth_code_generator",
                "synth_chains", "synth_warmup", "synth_draws", "advi_steps", "advi_lr", "advi_mc",
                "advi_init_scale", "advi_draws", "sigma_scale", "angle_jacobian", "threads")
"""What the ``synth`` stage reads."""
BOSTON_FIELDS = ("boston_hidden", "boston_splits", "boston_test_fraction", "boston_chains", "boston_warmup",
                 "boston_draws", "boston_max_depth", "boston_w_scale", "boston_authors_angles", "w_laplace",
                 "sigma_scale", "angle_jacobian", "threads")
"""What the ``boston`` stage reads."""
ROBUST_SYNTH_FIELDS = ("synth_n", "synth_x_range", "synth_noise_sd", "synth_chains", "synth_warmup",
                       "synth_draws", "robust_w_scales", "sigma_scale", "angle_jacobian", "threads")
"""What the ``robust_synth`` stage reads: the synthetic data and NUTS sizes, and the scales."""
ROBUST_BOSTON_FIELDS = ("robust_w_scales", "robust_boston", *BOSTON_FIELDS)
"""What the ``robust_boston_fits`` stage reads: the scales, whether Boston is refitted, and every
Boston field."""
ROBUST_FIELDS = tuple(dict.fromkeys(ROBUST_SYNTH_FIELDS + ROBUST_BOSTON_FIELDS))
"""What the ``robust`` stage reads (it joins the two above)."""


def _run_seed(seed: int) -> int:
    """The seed every stage used before the chapter contract: the run seed itself (each stage
    derives its own generators from it, :mod:`.seeds`)."""
    return seed


def _compile(ctx) -> dict:
    return compile_models()


def _prior(ctx) -> dict:
    with torch_threads(ctx.config.threads):
        return prior_demo(ctx.config, ctx.seed)


def _synth(ctx) -> dict:
    with torch_threads(ctx.config.threads):
        return synthetic_experiment(ctx.config, ctx.seed)


def _boston_items(config) -> list[tuple[int, str]]:
    return boston_tasks(config)


def _boston_fit(ctx, item: tuple[int, str]) -> dict:
    """Stage ``boston_fits``, one ``(split index, fit key)``."""
    split, key = item
    with torch_threads(ctx.config.threads):
        return boston_fit(ctx.config, ctx.seed, split, key)


def _boston(ctx) -> dict:
    return boston_splits(ctx.config, ctx.inputs["boston_fits"])


def _robust_synth(ctx) -> dict:
    with torch_threads(ctx.config.threads):
        return robust_synthetic(ctx.config, ctx.seed)


def _robust_boston_fit(ctx, item: tuple[float, int, str]) -> dict:
    """Stage ``robust_boston_fits``, one ``(scale, split index, fit key)``."""
    w, split, key = item
    with torch_threads(ctx.config.threads):
        return boston_fit(robust_boston_variant(ctx.config, w), ctx.seed, split, key)


def _robust(ctx) -> dict:
    return robust_join(ctx.config, ctx.inputs["robust_synth"], ctx.inputs["robust_boston_fits"])


STAGES = (
    Stage("compile", _compile, cache=False),
    Stage("prior", _prior, fields=PRIOR_FIELDS, version=VERSION, legacy_seed=_run_seed),
    Stage("synth", _synth, fields=SYNTH_FIELDS, version=VERSION, legacy_seed=_run_seed),
    Stage("boston_fits", _boston_fit, fields=BOSTON_FIELDS, version=VERSION, legacy_seed=_run_seed,
          items=_boston_items),
    Stage("boston", _boston, fields=BOSTON_FIELDS, needs=("boston_fits",), cache=False),
    Stage("robust_synth", _robust_synth, fields=ROBUST_SYNTH_FIELDS, version=VERSION, legacy_seed=_run_seed),
    Stage("robust_boston_fits", _robust_boston_fit, fields=ROBUST_BOSTON_FIELDS, version=VERSION,
          legacy_seed=_run_seed, items=robust_boston_items),
    Stage("robust", _robust, fields=ROBUST_FIELDS, needs=("robust_synth", "robust_boston_fits"), cache=False),
)
"""Chapter 4's stages, in the order the old ``run`` computed them (each derives its own
generators from the run seed, so the order moves no number)."""

STAGE_CODE = {stage.name: ("symlib.chapters.constrained_models.stages",) for stage in STAGES}
"""The code each stage runs (:data:`symlib.book.provenance.STAGE_CODE_ATTRIBUTE`): this module
and what it imports (``stages_synthetic``, ``stages_boston``, ``fits``, ``seeds``, the Stan
programs and the library's samplers and constrained networks), not ``claims``, ``views``,
``figures``, ``paper``, ``profiles`` or ``wilcoxon``. So an edit of the claims or texts leaves
the cached fits current and a `paper` run (hours of Stan fits on the CPU, in pieces) continues;
an edit of what computes restarts it."""
