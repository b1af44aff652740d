"""Where a batched HMC gradient spends its time on a GPU (a diagnosis script, not a benchmark).

For chapter 5's 784-512-10 classifier on 4,000 digits: time one chain-batched ``value_and_grad``
of the vmapped potential (``hmc.mlp_classification_potential``) against a candidate that folds
the first layer of every chain into one matrix product, in fp32 / TF32 / bf16 forces; check they
agree; then print the profiler's top CUDA kernels for each at 32 chains.
"""

from __future__ import annotations

import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, ".")
from symlib.inference import hmc
from symlib.nn.mlp import MLPSpec, activation_fn, init_mlp


def folded_potential(spec, x, y, prior_sd=1.0):
    n = x.shape[0]
    act = activation_fn(spec.activation)
    labels = y.reshape(1, n, 1)

    def forward(params):
        w1 = params["W1"]                                          # (C, d1, d0)
        c, d1, d0 = w1.shape
        h = (x @ w1.reshape(c * d1, d0).T).reshape(n, c, d1).transpose(0, 1) + params["b1"][:, None, :]
        for l in range(2, spec.n_layers + 1):
            h = torch.baddbmm(params[f"b{l}"][:, None, :], act(h), params[f"W{l}"].transpose(1, 2))
        return h

    def potential(params):
        logits = forward(params)
        picked = logits.gather(-1, labels.expand(logits.shape[0], n, 1))[..., 0]
        ce = torch.logsumexp(logits.float(), -1) - picked.float()
        prior = sum(v.to(torch.float64).square().flatten(1).sum(1) for v in params.values())
        return ce.to(torch.float64).sum(1) + 0.5 * prior / prior_sd**2

    return potential


def main():
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n, width = (4000, 512) if dev.type == "cuda" else (300, 32)
    spec = MLPSpec((784, width, 10))
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 784, generator=g).to(dev)
    y = torch.randint(0, 10, (n,), generator=g).to(dev)
    pots = {"vmap": hmc.mlp_classification_potential(spec, x, y), "folded": folded_potential(spec, x, y)}
    for c in ((8, 32, 128) if dev.type == "cuda" else (4,)):
        inits = [init_mlp(spec, g) for _ in range(c)]
        q = {k: torch.stack([i[k] for i in inits]).to(dev) for k in inits[0]}
        ref_u, ref_g = hmc.value_and_grad(pots["vmap"], q)
        for name, pot in pots.items():
            for prec in ("fp32", "tf32", "bf16"):
                u, gr = hmc.value_and_grad(pot, q, prec)
                err = max(float((gr[k] - ref_g[k]).norm() / ref_g[k].norm()) for k in gr)
                for _ in range(2):
                    hmc.value_and_grad(pot, q, prec)
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                reps = 5
                t0 = time.perf_counter()
                for _ in range(reps):
                    hmc.value_and_grad(pot, q, prec)
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                dt = (time.perf_counter() - t0) / reps
                print(f"C={c:4d} {name:7s} {prec}: {dt * 1e3:8.2f} ms/grad  {c / dt:9.0f} chain-grad/s  "
                      f"grad rel err vs vmap fp32 {err:.1e}  |dU| {float((u - ref_u).abs().max()):.2e}", flush=True)
    if dev.type == "cuda":
        c = 32
        inits = [init_mlp(spec, g) for _ in range(c)]
        q = {k: torch.stack([i[k] for i in inits]).to(dev) for k in inits[0]}
        for name, pot in pots.items():
            for prec in ("fp32", "bf16"):
                with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
                    for _ in range(3):
                        hmc.value_and_grad(pot, q, prec)
                    torch.cuda.synchronize()
                print(f"== {name} {prec}, C={c}, 3 gradients")
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))


if __name__ == "__main__":
    main()
