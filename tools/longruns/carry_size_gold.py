"""How large chapter 6's paper-profile state is: its gold standard's checkpoint and cached record, and
a fit's cached record, raw and as ``tools.longruns.carry`` stores them (xz over 1 MiB).

Real objects at the ``paper`` profile's shapes (8 chains of 196-32-10 on the 2x2-pooled digits, 2,000
kept draws per chain, 1,000 reference draws, predictions at 200 test inputs, 1,000 test digits and
500 OOD patches), with short trajectories (one leapfrog step, a short burn-in) on a few training
digits so that it runs in a minute or two on a CPU: the layouts and sizes are those of the paper run;
only the draws' path is shorter. Measured:

* ``checkpoint_state``: what the gold checkpoint holds besides the chains' positions, gradients and
  step-size adaptation (a few hundred kB): :class:`~symlib.chapters.synthesis.gold.GoldRecord`'s state
  after the last kept transition, the largest a checkpoint stopped at the budget gets;
* ``gold_record``: the gold stage's cached record (:func:`~symlib.chapters.synthesis.stages.gold_record`);
* ``fit_record`` / ``ensemble_record``: a fit's cached record, an MFVI fit's and an ensemble's (which
  keeps its members for ``q_r``), with a one-epoch fit;
* ``fit_draws_before``: what a fit's record held before it kept its metrics instead (its 500 draws).

    python -m tools.longruns.carry_size_gold [--benchmark digits] [--out DIR]   # from the repository root
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import tempfile
import time
from pathlib import Path

import torch

from symlib.chapters import get_profile
from symlib.chapters.synthesis import gold as G
from symlib.chapters.synthesis import load_benchmark, stages
from symlib.chapters.synthesis.benchmarks import potential
from symlib.chapters.synthesis.remedies import fit_remedy
from symlib.inference import hmc_resumable
from symlib.nn.mlp import init_mlp
from tools.longruns import carry


def _sizes(obj) -> dict:
    buf = io.BytesIO()
    torch.save(obj, buf)
    raw = buf.getvalue()
    return {"raw_bytes": len(raw), "stored_bytes": len(carry.packed(raw))}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--benchmark", default="digits", choices=("sinc", "boston", "digits"))
    p.add_argument("--n-train", type=int, default=200, help="training digits (the layout does not depend on it)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    paper = get_profile("06_synthesis", "paper")
    config = dataclasses.replace(paper, hmc_burnin=10, hmc_leapfrog=1, digits_n_train=args.n_train, vi_epochs=1,
                                 threads=None)
    b = load_benchmark(args.benchmark, config, "cpu")
    g = torch.Generator().manual_seed(0)
    chains = [init_mlp(b.spec, g) for _ in range(config.hmc_chains)]
    init = {k: torch.stack([c[k] for c in chains]) for k in chains[0]}
    record = G.GoldRecord(b, config)
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:   # the run's own checkpoint, not measured
        res = hmc_resumable.sample_resumable(
            potential(b, b.x, b.y), init, checkpoint=Path(folder) / "gold.pt", n_burnin=config.hmc_burnin,
            n_samples=config.hmc_samples, n_leapfrog=config.hmc_leapfrog, step_size=1e-3, generator=g,
            thin=config.hmc_thin, accumulate=record, max_checkpoint_bytes=G.CHECKPOINT_MAX_BYTES,
            capture="eager", desc=f"gold {b.name}")
    seconds = time.perf_counter() - t
    out = {"benchmark": b.name, "widths": list(b.spec.widths), "params": b.spec.n_params,
           "chains": config.hmc_chains, "draws_per_chain": record.j, "transitions": res.transitions,
           "sampling_seconds": round(seconds, 1), "checkpoint_state": _sizes(record.state_dict())}
    whole = {**record.result(), "wall_s": res.wall_time_s, "peak_mb": math.nan, "accept_rate": 0.0,
             "step_size": 0.0, "n_grad_evals": res.n_grad_evals, "pieces": 1,
             "stored_floats": config.hmc_chains * config.hmc_samples * b.spec.n_params}
    gold = stages.gold_record(b, whole, config)
    out["gold_record"] = _sizes(gold)
    for method in ("mfvi", "ensemble"):
        fit = fit_remedy(b, method, config, torch.Generator().manual_seed(1), torch.Generator().manual_seed(2), "cpu")
        if method == "mfvi":
            out["fit_draws_before"] = _sizes(fit)
        out[f"{'fit' if method == 'mfvi' else method}_record"] = _sizes(stages.fit_record(b, method, fit, gold))
    print(json.dumps(out))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"carry_size_gold_{b.name}.json").write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
