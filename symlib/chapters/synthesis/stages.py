"""Chapter 6's compute: the gold standards, every remedy's fits, and their metrics.

Four stages (:data:`STAGES`), run in order:

* ``gold`` (one cached item per benchmark): long multi-chain HMC with jitter, checkpointed so
  that it goes in pieces (:func:`symlib.chapters.synthesis.gold.gold_standard`, under
  ``<cache>/checkpoints/``: :func:`gold_checkpoint`), its adequacy shown by split R-hat and
  bulk/tail ESS on symmetry-invariant quantities (test predictions), beside the same diagnostics
  on canonicalised and on raw weights. Its cached record (:func:`gold_record`) keeps the weights
  of the ``mmd_gold`` draws every remedy is compared with, and the floor row (the gold standard
  against itself, :func:`gold_floor`), computed here from the draws only the floor reads, which
  are then dropped;
* ``fits`` (one cached item per benchmark, method and seed): every remedy that fits something
  (:func:`~symlib.chapters.synthesis.remedies.fit_remedy`), and its metrics against the gold
  standard (:func:`fit_record`);
* ``qr`` (one cached item per benchmark, ``q_r`` method and seed): the rebasin-compact
  summaries of the ensemble (from ``fits``) and of the HMC samples (from ``gold``)
  (:func:`~symlib.chapters.synthesis.remedies.fit_compact`), and their metrics;
* ``benchmarks`` (not cached: milliseconds): per benchmark the rows of every fit, and the table
  of means and standard errors over seeds with the floor last (:func:`benchmark_results`).

A fit's record keeps its metrics, not its weight draws (only the ensemble keeps its members,
which ``qr`` summarises), so every cached entry but the gold records is a few kilobytes: the
``paper`` profile's 80 digits fits kept 500 draws of 6,634 weights each (1.0 GiB), more than a
lent GPU machine can hand back or be sent (issue 31). The price is that the fits need the gold
standard: they run after it, as they did since the stages were declared. The numbers are those
the metrics gave when they were computed in ``benchmarks`` (the same functions on the same
tensors).

The ``gold`` stage's items run side by side under ``$SYMLIB_JOBS``, then the fits' items. Each
item builds its own generators from its seed, so neither the order nor the worker changes a
number.

Random streams (:mod:`symlib.book.streams`; they replaced the old seeds ``s`` and
``s + 1 + i``, which gave a fit's two generators the same seed and every benchmark the same draws):
each gold standard draws from its benchmark's ``chains`` stream (:func:`gold_generator`); fit ``i``
of a remedy draws its initialisations from the stream ``init[benchmark, i]``, shared by every
remedy on purpose (the claims compare remedies paired by fit index, from the same initial
network), and its Monte Carlo noise, minibatches and weight samples from ``noise[benchmark,
method, i]``, its own (:func:`fit_generators`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import torch

from symlib import symmetry as sym
from symlib.book import cache
from symlib.book.chapter import Stage, StageContext
from symlib.book.runtime import torch_threads
from symlib.book.streams import Stream
from symlib.chapters.synthesis.benchmarks import (
    DATA_FIELDS,
    Benchmark,
    load_benchmark,
    metrics_row,
    predictions,
    thin_index,
)
from symlib.chapters.synthesis.gold import DIAG_WEIGHTS, floor_halves, gold_draws, gold_standard
from symlib.chapters.synthesis.remedies import (
    COMPACT,
    FIT_FIELDS,
    fit_compact,
    fit_remedy,
    method_name,
    methods,
)

__all__ = [
    "DIAG_WEIGHTS",
    "GOLD",
    "GOLD_KEEPS",
    "KEEP_WEIGHTS",
    "STAGES",
    "STAGE_CODE",
    "VERSION",
    "benchmark_results",
    "fit_generators",
    "fit_record",
    "gold_checkpoint",
    "gold_floor",
    "gold_generator",
    "gold_record",
    "gold_reference",
    "gold_standard",
    "summarise",
]

VERSION = "5"
"""Every cached stage's version (5: a fit's record keeps its metrics against the gold standard, not
its draws, and the gold record the floor row and only the draws the remedies are compared with;
4: the gold record keeps the compared draws, not every draw; 3: named streams;
2: interval means of the ELBO)."""
GOLD = "HMC: half the chains vs the other half"
"""The name of the floor row: the gold standard against itself."""

GOLD_FIELDS = ("benchmarks", *DATA_FIELDS, "hmc_chains", "hmc_burnin", "hmc_samples", "hmc_thin", "hmc_leapfrog",
               "diag_points", "threads", "mmd_gold", "n_pred_samples")
"""The gold stage's fields: ``mmd_gold`` and ``n_pred_samples`` choose which draws its record keeps
(:func:`symlib.chapters.synthesis.gold.reference_index`)."""
FITS_FIELDS = (*GOLD_FIELDS, *(f for f in ("n_seeds", *FIT_FIELDS) if f not in GOLD_FIELDS))
"""The fits' fields: their own and the gold stage's, whose record their metrics are measured against."""
KEEP_WEIGHTS = ("ensemble",)
"""The methods whose record keeps its weight draws: another stage summarises them (``qr_ensemble``)."""


# --------------------------------------------------------------------------- random generators


def gold_generator(ctx: StageContext, benchmark: str) -> torch.Generator:
    """The gold standard's one generator: the chains' initialisations, then HMC's momenta and jitter."""
    return ctx.stream("chains", benchmark).torch()


def fit_generators(ctx: StageContext, benchmark: str, method: str, i: int,
                   device: str) -> tuple[torch.Generator, torch.Generator]:
    """Fit ``i`` of ``method``'s two generators ``(g_cpu, g)``: ``g_cpu`` draws initialisations
    and skip matrices (on the CPU) from ``init[benchmark, i]``, the same for every remedy (paired
    comparisons); ``g`` the fit's Monte Carlo noise and minibatches and the final weight samples
    (on ``device``) from ``noise[benchmark, method, i]``."""
    init = Stream(ctx.run_seed, ctx.chapter, "fits", f"init[{benchmark},{i}]")
    noise = Stream(ctx.run_seed, ctx.chapter, ctx.stage.name, f"noise[{benchmark},{method},{i}]")
    return init.torch(), noise.torch(device)


# --------------------------------------------------------------------------- gold standard


def gold_floor(b: Benchmark, gold: dict, config) -> dict:
    """The gold standard against itself: the first half of the chains vs the second half.

    Args:
        gold: the whole record of :func:`~symlib.chapters.synthesis.gold.gold_standard` (the
            halves' draws are among those it keeps).
    """
    # the sample sizes of the remedies' comparisons: n_pred_samples draws against mmd_gold
    first, second = floor_halves(config)
    a, thin_b = gold_draws(gold, first), gold_draws(gold, second)
    pa, pb = predictions(b, a, {}), predictions(b, thin_b, {})
    fit = {**pa, "weights": a, "wall_s": gold["wall_s"] / 2,
           "stored_floats": gold["stored_floats"] / 2, "peak_mb": gold["peak_mb"]}
    ref = {**pb, "f_ref": pb.get("f_test")}
    canon_b = sym.canonicalise({k: v.double() for k, v in thin_b.items()}, b.spec)
    return metrics_row(b, fit, ref, thin_b, canon_b)


GOLD_KEEPS = ("n_draws", "diagnostics", "wall_s", "peak_mb", "accept_rate", "step_size", "n_grad_evals", "pieces",
              "stored_floats", "probs_test", "probs_ood")
"""What the cached gold record keeps of :func:`~symlib.chapters.synthesis.gold.gold_standard`'s
(the predictive means only for classification), beside ``reference``, ``f_ref`` and ``floor``."""


def gold_record(b: Benchmark, gold: dict, config) -> dict:
    """The gold stage's cached record of one benchmark, from the whole record of
    :func:`~symlib.chapters.synthesis.gold.gold_standard`.

    Returns:
        ``reference``: the weights of the draws evenly thinned to ``mmd_gold`` over all chains
        (:func:`gold_reference`), the only draws a later stage reads; ``f_ref``: their test
        outputs (regression; ``None`` for classification, whose remedies are compared with the
        predictive mean over every draw, ``probs_test``); ``floor``: the metrics row of
        :func:`gold_floor`; and the entries of :data:`GOLD_KEEPS`.
    """
    reference = gold_reference(gold, config)
    f_ref = predictions(b, reference, {})["f_test"] if b.task == "regression" else None
    return {"reference": reference, "f_ref": f_ref, "floor": gold_floor(b, gold, config),
            **{k: gold[k] for k in GOLD_KEEPS if k in gold}}


def gold_reference(gold: dict, config) -> dict:
    """The gold standard's draws evenly thinned to ``mmd_gold`` over all chains: what every
    remedy's MMD and the ``q_r`` fit of the HMC samples compare with."""
    return gold_draws(gold, thin_index(gold["n_draws"], config.mmd_gold))


def fit_record(b: Benchmark, method: str, fit: dict, gold: dict) -> dict:
    """What a fit's cached record keeps: its ``row`` of metrics against the gold record ``gold``
    (:func:`gold_record`; :func:`~symlib.chapters.synthesis.benchmarks.metrics_row`), its
    ``plateau`` precondition, and, for the methods of :data:`KEEP_WEIGHTS` only, its ``weights``
    and ``wall_s`` (what ``qr`` summarises); not the other methods' weight draws."""
    gold_w = gold["reference"]
    gold_canon = sym.canonicalise({k: v.double() for k, v in gold_w.items()}, b.spec)
    out = {"row": metrics_row(b, fit, gold, gold_w, gold_canon), "plateau": fit["plateau"]}
    if method in KEEP_WEIGHTS:
        out |= {"weights": fit["weights"], "wall_s": fit["wall_s"]}
    return out


# --------------------------------------------------------------------------- stage items


def _device(ctx: StageContext) -> str:
    return str(torch.device(ctx.device))


def gold_checkpoint(ctx: StageContext, name: str) -> Path:
    """Where benchmark ``name``'s gold standard checkpoints:
    ``<cache>/checkpoints/<chapter>-gold-<name>-<digest>.pt``. The digest is of everything the
    chains depend on (the stage's profile fields, the run seed, the device, the stage's code and
    data hashes), so a checkpoint of other settings, code or data is never continued."""
    ident = {"chapter": ctx.chapter, "benchmark": name, "fields": ctx.config.fields(), "seed": ctx.run_seed,
             "device": cache.device_key(ctx.device), "code": cache.fingerprint(f"{ctx.chapter}-gold")}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return cache.cache_dir() / "checkpoints" / f"{ctx.chapter}-gold-{name}-{digest}.pt"


def _gold_item(ctx: StageContext, name: str) -> dict:
    """Stage ``gold``, one benchmark (in torch's ``threads`` of the profile, as the old queue ran
    it), continuing from its checkpoint where one is left (:func:`gold_checkpoint`); its record
    is :func:`gold_record`'s."""
    device = _device(ctx)
    path = gold_checkpoint(ctx, name)
    with torch_threads(ctx.config.threads):
        b = load_benchmark(name, ctx.config, device)
        out = gold_standard(b, ctx.config, gold_generator(ctx, name), device, checkpoint=path, deadline=ctx.deadline)
    record = gold_record(b, out, ctx.config)
    path.unlink(missing_ok=True)   # the item's record is what is cached; its checkpoint is spent
    return record


def _benchmark_items(config) -> list[str]:
    return list(config.benchmarks)


def _fit_items(config) -> list[tuple[str, str, int]]:
    return [(n, m, i) for n in config.benchmarks for m in methods(n) if m not in COMPACT for i in range(config.n_seeds)]


def _fit_item(ctx: StageContext, item: tuple[str, str, int]) -> dict:
    """Stage ``fits``, one ``(benchmark, method, fit index)``."""
    name, method, i = item
    device = _device(ctx)
    with torch_threads(ctx.config.threads):
        b = load_benchmark(name, ctx.config, device)
        g_cpu, g = fit_generators(ctx, name, method, i, device)
        fit = fit_remedy(b, method, ctx.config, g_cpu, g, device)
    return fit_record(b, method, fit, ctx.inputs["gold"][name])


def _compact_items(config) -> list[tuple[str, str, int]]:
    return [(n, m, i) for n in config.benchmarks for m in methods(n) if m in COMPACT for i in range(config.n_seeds)]


def _compact_item(ctx: StageContext, item: tuple[str, str, int]) -> dict:
    """Stage ``qr``, one ``(benchmark, q_r method, fit index)``: the ensemble fit with the same
    index, or the gold standard thinned to ``mmd_gold`` samples (matched onto the sample at the
    fit's index, modulo their number)."""
    name, method, i = item
    device, config = _device(ctx), ctx.config
    gold = ctx.inputs["gold"][name]
    with torch_threads(config.threads):
        b = load_benchmark(name, config, device)
        _, g = fit_generators(ctx, name, method, i, device)
        if method == "qr_ensemble":
            ens = ctx.inputs["fits"][(name, "ensemble", i)]
            source, base, ref = ens["weights"], ens["wall_s"], 0
        else:
            source, base = gold["reference"], gold["wall_s"]
            ref = i % len(next(iter(source.values())))
        fit = fit_compact(b, method, source, base, ref, config, g, device)
    return fit_record(b, method, fit, gold)


# --------------------------------------------------------------------------- metrics and tables


def benchmark_results(ctx: StageContext) -> dict[str, dict]:
    """Stage ``benchmarks``: per benchmark, every fit's metrics against the gold standard (each
    measured in its own stage, :func:`fit_record`), gathered into tables.

    Returns:
        Per benchmark: ``task``, ``spec`` (widths), ``n_train``, ``n_test``, ``rows`` (one per
        method and seed), ``table`` (mean and standard error over seeds, the floor last,
        :func:`summarise`), ``floor``, ``gold`` (diagnostics and sampler statistics) and
        ``plateaus`` (the fits' objective-plateau preconditions, by method key).
    """
    config = ctx.config
    fits = {**ctx.inputs["fits"], **ctx.inputs["qr"]}
    out = {}
    for n in config.benchmarks:
        b = load_benchmark(n, config, "cpu")
        gold = ctx.inputs["gold"][n]
        rows, plateaus = [], {}
        for m in methods(n):
            for i in range(config.n_seeds):
                fit = fits[(n, m, i)]
                rows.append({"method": method_name(m, config), "key": m, "seed": i, **fit["row"]})
                if fit["plateau"] is not None:
                    plateaus.setdefault(m, []).append(fit["plateau"])
        floor = {"method": GOLD, "key": "gold", "seed": ctx.run_seed, **gold["floor"]}
        frame = pd.DataFrame(rows)
        out[n] = {
            "task": b.task, "spec": b.spec.widths, "n_train": len(b.x), "n_test": len(b.x_test),
            "rows": frame, "table": summarise(frame, floor), "floor": floor,
            "gold": {k: gold[k] for k in ("diagnostics", "wall_s", "accept_rate", "step_size", "n_grad_evals",
                                          "peak_mb")},
            "plateaus": plateaus,
        }
    return out


def summarise(frame: pd.DataFrame, floor: dict) -> pd.DataFrame:
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


STAGES = (
    Stage("gold", _gold_item, fields=GOLD_FIELDS, version=VERSION, streams=("chains",), items=_benchmark_items),
    Stage("fits", _fit_item, fields=FITS_FIELDS, version=VERSION, needs=("gold",), streams=("init", "noise"),
          items=_fit_items),
    Stage("qr", _compact_item, fields=FITS_FIELDS, version=VERSION, needs=("gold", "fits"), streams=("noise",),
          items=_compact_items),
    Stage("benchmarks", benchmark_results, fields=FITS_FIELDS, needs=("gold", "fits", "qr"), cache=False),
)
"""Chapter 6's stages, in order (see the module docstring)."""

STAGE_CODE = {stage.name: ("symlib.chapters.synthesis.stages",) for stage in STAGES}
"""The code each stage runs (:data:`symlib.book.provenance.STAGE_CODE_ATTRIBUTE`): this module and
what it imports (``gold``, ``remedies``, ``benchmarks`` and the library's samplers, VI, metrics and
symmetry code), not ``claims``, ``views``, ``profiles`` or ``paper``. So an edit of the claims or
texts leaves the cached entries and the gold standards' checkpoints current; an edit of what
computes restarts them."""
