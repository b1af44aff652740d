"""How long the `paper` profile's largest units without a checkpoint take on this machine.

A `paper` run goes in pieces (``SYMLIB_BUDGET_S``, 480 s in ``tools/longruns/gpu_piece.sh``); a stage
item that keeps no checkpoint must finish inside the piece that starts it, or every piece starts
it again. This times those of chapters 2a and 2b, each as its stage computes it:

* ``2b_chunk``: chapter 2b's ``train_chunks`` item 0 (100 OptuNets trained as one batch, 60
  epochs of SGD, with the authors' restart rule, whose restarts train one network at a time);
* ``2a_chunk``: chapter 2a's ``optunet_chunks`` item 0 (the same training, with the sorting
  permutations of the tracked networks recorded after every step);
* ``2b_samples``: chapter 2b's ``samples`` stage (MC dropout, mean-field VI, SGHMC, SWAG and the
  full-Hessian Laplace of Table 1), method by method as a run in pieces computes it (it stops
  between two methods at the budget: each method is a unit), started from 100 freshly
  initialised OptuNets in place of the trained ensemble: its cost depends on the shapes and
  budgets, not on the weights (MC dropout trains its own networks from scratch either way);
* ``6_fits``: chapter 6's ``fits`` stage, fit 0 of every remedy on one benchmark (``--benchmark``,
  default the digits, the largest), each a unit (a fit keeps no checkpoint), against a stand-in
  gold record of the profile's shapes (the gold standard with a 10-transition burn-in and one
  leapfrog step on 200 training points: what a fit's record reads of it has the paper run's
  sizes; the fit itself does not read it);
* ``6_gold_costs``: no unit (the gold standard keeps a checkpoint) but what one costs per step at
  the profile's shapes, for each benchmark: one gradient of the potential for all chains (its
  count in the whole run given beside it) and the record's bookkeeping per kept transition
  (:class:`~symlib.chapters.synthesis.gold.GoldRecord`, partly on the CPU whatever the device),
  each the median of ``--repeats`` calls after one warm-up, from the chains' initialisation. The
  gradient is timed eagerly: on a GPU the run replays each trajectory as one CUDA graph
  (``symlib.inference.capture``), faster for networks this small.

Each runs through its stage's own ``compute``, with the context a run of the profile with run
seed 0 gives it (the stage's seed and threads), on the data the profile resolves here (the
shipped digits unless full MNIST's IDX files are found). CPU times are an indication for a GPU
piece, not a bound: the restarts train one small network at a time, which a GPU does not speed
up much.

    python benchmarks/paper_units.py [--device cpu] [--profile paper] [--units 2b_chunk 2b_samples 2a_chunk 6_fits 6_gold_costs]
        [--benchmark digits] [--repeats 20] [--out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

import torch

from symlib.book.chapter import StageContext
from symlib.book.pieces import host
from symlib.chapters import declared, get_profile

UNITS = ("2b_chunk", "2b_samples", "2a_chunk", "6_fits", "6_gold_costs")


def _restarts(restarts: torch.Tensor) -> dict:
    return {"networks_restarted": int((restarts > 0).sum()), "restarts": int(restarts.sum())}


def _stage(chapter: str, name: str, profile: str, device: str, inputs: dict | None = None):
    """Stage ``name`` of ``chapter`` and the context the pipeline gives it in a run of ``profile``
    with run seed 0 (as ``Chapter.run_stages`` builds it: the stage's view of the profile, its
    seed and threads)."""
    stage = declared(chapter).stage(name)
    return stage, StageContext(chapter=chapter, stage=stage, config=stage.view(get_profile(chapter, profile), chapter),
                               device=device, inputs=inputs or {}, run_seed=0)


def _2b_chunk(profile: str, device: str) -> dict:
    stage, ctx = _stage("02b_posterior_mmd", "train_chunks", profile, device)
    item = stage.items(ctx.config)[0]   # (chunk, size)
    out = stage.compute(ctx, item)
    return {"networks": item[1], "epochs": ctx.config.epochs, "seed": ctx.seed, **_restarts(out["restarts"])}


def _2a_chunk(profile: str, device: str) -> dict:
    stage, ctx = _stage("02a_symmetry_removal", "optunet_chunks", profile, device)
    item = stage.items(ctx.config)[0]   # (chunk, size)
    out = stage.compute(ctx, item)
    return {"networks": item[1], "epochs": ctx.config.optunet_epochs, "seed": ctx.seed, **_restarts(out["restarts"])}


def _2b_samples(profile: str, device: str) -> dict:
    """The ``samples`` stage method by method, as a run in pieces computes it: each call stopped
    at a spent budget after one method, its checkpoint written, the next continuing (in a cache
    of its own, so that no run continues the checkpoint of these stand-in modes)."""
    from symlib.chapters.posterior_mmd.sampling import POSTERIORS
    from symlib.inference.loop import BudgetExhausted
    from symlib.nn.convnets import init_optunet

    config = get_profile("02b_posterior_mmd", profile)
    n = config.ensemble_models
    train = {"ensemble": init_optunet(torch.Generator().manual_seed(0), n),
             "ensemble_accuracy": torch.ones(n)}  # every one "learned": the first `modes` are the modes
    stage, ctx = _stage("02b_posterior_mmd", "samples", profile, device, {"train": train})
    ctx = dataclasses.replace(ctx, deadline=0.0)   # a deadline long past: one method per call
    methods, out = {}, None
    with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ, {"SYMLIB_CACHE": tmp}):
        for method in POSTERIORS:
            t = time.perf_counter()
            try:
                out = stage.compute(ctx)
            except BudgetExhausted:
                pass
            methods[method] = round(time.perf_counter() - t, 1)
            print(f"  {method}: {methods[method]} s", flush=True)
    if out is None:
        raise RuntimeError("the samples stage did not complete after one call per method")
    c = ctx.config
    return {"modes": c.modes, "samples": c.samples, "vi_epochs": c.vi_epochs, "seed": ctx.seed,
            "swag_epochs": c.swag_snapshots * c.swag_epochs_between,
            "laplace": f"{c.laplace_hessian}, at most {c.laplace_points} points", "rows": len(out["rows"]),
            "methods_s": methods}


def _6_fits(profile: str, device: str, benchmark: str = "digits") -> dict:
    """Fit 0 of every remedy of the ``fits`` stage on ``benchmark``, each through the stage's
    ``compute``, against a stand-in gold record (module docstring)."""
    import dataclasses

    from symlib.chapters.synthesis import load_benchmark
    from symlib.chapters.synthesis import stages as S
    from symlib.chapters.synthesis.gold import gold_standard

    config = get_profile("06_synthesis", profile)
    short = dataclasses.replace(config, hmc_burnin=10, hmc_leapfrog=1,
                                sinc_n_train=min(config.sinc_n_train, 200), digits_n_train=min(config.digits_n_train, 200))
    t = time.perf_counter()
    b = load_benchmark(benchmark, short, device)
    gold = S.gold_record(b, gold_standard(b, short, torch.Generator().manual_seed(0), device), short)
    print(f"  stand-in gold record: {time.perf_counter() - t:.1f} s", flush=True)
    stage, ctx = _stage("06_synthesis", "fits", profile, device, {"gold": {benchmark: gold}})
    methods = {}
    for item in stage.items(ctx.config):
        if item[0] != benchmark or item[2] != 0:
            continue
        t = time.perf_counter()
        stage.compute(ctx, item)
        methods[item[1]] = round(time.perf_counter() - t, 1)
        print(f"  {item[1]}: {methods[item[1]]} s", flush=True)
    c = ctx.config
    return {"benchmark": benchmark, "hidden": c.hidden, "epochs": c.vi_epochs, "batch": c.vi_batch, "mc": c.vi_mc,
            "threads": c.threads, "fits_per_method": c.n_seeds, "methods_s": methods}


def _6_gold_costs(profile: str, device: str, repeats: int) -> dict:
    """Per benchmark: one gradient of the gold standard's potential (all chains) and one kept
    transition's bookkeeping, each the median of ``repeats`` timed calls (module docstring)."""
    import statistics

    from symlib.chapters.synthesis import load_benchmark
    from symlib.chapters.synthesis.benchmarks import potential
    from symlib.chapters.synthesis.gold import GoldRecord
    from symlib.nn.mlp import init_mlp

    # not harness.alternate: its gc.collect() before each timed call cools the caches, which doubles
    # a sub-millisecond gradient (sinc: 1.5 against 0.7 ms on one core), where the run's steps follow
    # one another with no collection between them
    def median_s(call, *args, n: int = repeats) -> float:
        call(*args)
        times = []
        for _ in range(n):
            t = time.perf_counter()
            call(*args)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    config = get_profile("06_synthesis", profile)
    out = {}
    for name in config.benchmarks:
        b = load_benchmark(name, config, device)
        g = torch.Generator().manual_seed(0)
        chains = [init_mlp(b.spec, g) for _ in range(config.hmc_chains)]
        w = {k: torch.stack([c[k] for c in chains]).to(device).requires_grad_(True) for k in chains[0]}
        u = potential(b, b.x, b.y)
        grad_s = median_s(lambda u, w: torch.autograd.grad(u(w).sum(), list(w.values())), u, w)
        # room for hmc_samples kept transitions: the warm-up and at most hmc_samples - 1 timed
        keep_s = median_s(GoldRecord(b, config).update, {k: v.detach() for k, v in w.items()},
                          n=min(repeats, config.hmc_samples - 1))
        transitions = config.hmc_burnin + config.hmc_samples * config.hmc_thin
        gradients = transitions * config.hmc_leapfrog
        out[name] = {"widths": list(b.spec.widths), "n_train": len(b.x), "chains": config.hmc_chains,
                     "gradient_ms": round(grad_s * 1e3, 3), "gradients": gradients,
                     "keep_ms": round(keep_s * 1e3, 2), "kept": config.hmc_samples,
                     "gradients_s": round(grad_s * gradients, 1), "keeping_s": round(keep_s * config.hmc_samples, 1)}
        print(f"  {name}: {out[name]}", flush=True)
    return {"repeats": repeats, "benchmarks": out}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--profile", default="paper", help="the chapters' profile (smoke: seconds, for the tests)")
    p.add_argument("--units", nargs="+", choices=UNITS, default=list(UNITS))
    p.add_argument("--out", type=Path, default=None, help="JSON file to write (default: print only)")
    p.add_argument("--benchmark", default="digits", choices=("sinc", "boston", "digits"), help="6_fits' benchmark")
    p.add_argument("--repeats", type=int, default=20, help="6_gold_costs' timed calls of each")
    args = p.parse_args(argv)
    run = {"2b_chunk": _2b_chunk, "2a_chunk": _2a_chunk, "2b_samples": _2b_samples,
           "6_fits": lambda profile, device: _6_fits(profile, device, args.benchmark),
           "6_gold_costs": lambda profile, device: _6_gold_costs(profile, device, args.repeats)}
    result = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "host": host(), "device": args.device, "profile": args.profile,
              "torch": torch.__version__, "python": platform.python_version(),
              "threads": torch.get_num_threads(), "jobs": os.environ.get("SYMLIB_JOBS"), "units": {}}
    for unit in args.units:
        t = time.perf_counter()
        info = run[unit](args.profile, args.device)
        result["units"][unit] = {"seconds": round(time.perf_counter() - t, 3), **info}
        print(unit, result["units"][unit], flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
