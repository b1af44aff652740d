"""(f) scaling on one device: many HMC chains against hamiltorch's one, and many OptuNets at once.

The two GPU targets of the full tier: batched chains should give at least 10x hamiltorch's
chain-gradient evaluations per second, and 1,000 OptuNets should train at once. Run it on a
CUDA machine (``python benchmarks/bench_gpu.py --device cuda``); with ``--device cpu`` (the
default when torch sees no GPU) the same work runs on one CPU thread, at smaller sizes, where
batching is not expected to pay much (the CPU is already close to matmul-bound).

* HMC chains: ``symlib.inference.hmc.sample`` with ``C`` chains batched in one call on chapter
  5's 784-128-10 classifier, 4,000 points (random pixels and labels: the cost does not depend
  on the values), float32, no adaptation, against ``hamiltorch.sample_model`` running one
  chain of the same network on the same device. The ratio compares chain-gradient evaluations
  per second, each code's count (symlib: ``C (1 + T L)``; hamiltorch: ``T (L + 1)`` plus two
  forward passes per transition).
* OptuNets at once: ``symlib.nn.training.train_batched`` with the grouped-convolution loss
  (``optunet_cross_entropy_batched``, chapters 2a and 2b's path) for ``M`` networks, against a
  per-network ``nn.Module`` + ``torch.optim.SGD`` loop on the same device timed on a few
  networks. The ratio compares network-steps per second. Both draw their batches from
  ``minibatches`` (per-network shuffles and random crops, on the device).

Every timed call ends with a device synchronisation, so GPU times are wall times of finished
work; peak GPU memory is reported for the batched side.
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import os
import statistics

import torch
import torch.nn.functional as F
from bench_batched import _loop, _OptuNet
from bench_hmc import HAMILTORCH_FILE, STEP_SIZE, hamiltorch_sampler

from symlib.inference import hmc
from symlib.nn.convnets import init_optunet, optunet_cross_entropy_batched
from symlib.nn.mlp import MLPSpec, init_mlp
from symlib.nn.training import SGDConfig, train_batched

NAME = "gpu"


def _device() -> torch.device:
    """``$SYMLIB_BENCH_DEVICE`` (set by ``--device``), else the first GPU, else the CPU."""
    name = os.environ.get(harness.DEVICE_ENV) or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _synced(fn, device: torch.device):
    """``fn`` followed by a synchronisation of ``device`` (a no-op on the CPU)."""

    def call():
        out = fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return out

    return call


def _peak_mb(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None


def _hmc_rows(quick: bool, peers: harness.Peers, device: torch.device) -> list[dict]:
    n_data, width = 4000, 128
    n_transitions, n_leapfrog = (2, 5) if quick else (4, 25)
    chain_counts = (1, 4) if device.type == "cpu" else ((1, 16) if quick else (1, 16, 64, 256))
    repeats = 3 if quick else 5
    spec = MLPSpec((784, width, 10))
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(n_data, 784, generator=gen).to(device)
    y = torch.randint(0, 10, (n_data,), generator=gen).to(device)
    init = init_mlp(spec, gen)
    potential = hmc.mlp_classification_potential(spec, x, y, prior_sd=1.0)
    case = f"784-{width}-10, {n_data} points, {n_transitions} x {n_leapfrog} leapfrog, float32, {device.type}"

    def symlib_run(c):
        start = {k: v.to(device).expand(c, *v.shape).clone() for k, v in init.items()}
        return hmc.sample(potential, start, n_burnin=0, n_samples=n_transitions, n_leapfrog=n_leapfrog,
                          step_size=STEP_SIZE, generator=torch.Generator().manual_seed(1), adapt=False,
                          progress=False)

    fns = {f"symlib x{c}": _synced(lambda c=c: symlib_run(c), device) for c in chain_counts}
    root, why = peers.locate("hamiltorch", HAMILTORCH_FILE)
    if root:
        fns["hamiltorch"] = _synced(hamiltorch_sampler(root, init, x, y, n_transitions, n_leapfrog), device)
    times = harness.alternate(fns, repeats)
    ht_grads = n_transitions * (n_leapfrog + 1)
    rows = []
    for c in chain_counts:
        t = times[f"symlib x{c}"]
        grads = c * (1 + n_transitions * n_leapfrog)
        metrics = {"symlib chain-grad evals/s": grads / statistics.median(t)}
        subject = f"symlib hmc.sample, {c} chain{'s' if c > 1 else ''} batched"
        if not root:
            rows.append(harness.row(NAME, case, subject, "hamiltorch, one chain", subject_s=t,
                                    metrics=metrics, skipped=why))
            continue
        th = times["hamiltorch"]
        metrics["hamiltorch grad evals/s"] = ht_grads / statistics.median(th)
        # per round: (symlib's chain-gradients per second) / (hamiltorch's gradients per second)
        per_round = [(grads / a) / (ht_grads / b) for a, b in zip(t, th)]
        rows.append(harness.row(
            NAME, case, subject, "hamiltorch sample_model, one chain", subject_s=t, reference_s=th,
            ratio=harness.summary(per_round), ratio_is="chain-grad evals/s, symlib / hamiltorch",
            metrics=metrics, note="target on a GPU: >= 10"))
    return rows


def _optunet_rows(quick: bool, device: torch.device) -> list[dict]:
    if device.type == "cpu":
        n_models, n_loop, steps = 16, 4, 3 if quick else 10
    else:
        n_models, n_loop, steps = (100 if quick else 1000), 8, 3 if quick else 10
    repeats = 3 if quick else 5
    gen = torch.Generator().manual_seed(0)
    xi = ((torch.rand(64 * steps, 1, 28, 28, generator=gen) - 0.1307) / 0.3081).to(device)
    yi = torch.randint(0, 10, (64 * steps,), generator=gen).to(device)
    params = {k: v.to(device) for k, v in init_optunet(gen, n_models).items()}
    cfg = SGDConfig(lr=0.04, epochs=1, batch_size=64, weight_decay=2e-4, momentum=0.9, crop_padding=4)

    def batched():
        return train_batched(None, params, xi, yi, cfg, torch.Generator(device=device).manual_seed(3),
                             batched_loss_fn=optunet_cross_entropy_batched)

    def loop():
        first = {k: v[:n_loop] for k, v in params.items()}
        return _loop(_OptuNet, F.cross_entropy, first, xi, yi, cfg, 3)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = harness.alternate({"batched": _synced(batched, device), "loop": _synced(loop, device)}, repeats)
    per_round = [(n_models / a) / (n_loop / b) for a, b in zip(times["batched"], times["loop"])]
    metrics = {"batched network-steps/s": n_models * steps / statistics.median(times["batched"]),
               "loop network-steps/s": n_loop * steps / statistics.median(times["loop"])}
    peak = _peak_mb(device)
    if peak is not None:
        metrics["peak GPU MB"] = peak
    return [harness.row(
        NAME, f"OptuNet, {n_models} nets x {steps} steps of 64, {device.type}",
        f"symlib train_batched (grouped conv), {n_models} at once",
        f"per-network loop (nn.Conv2d + SGD), {n_loop} nets", subject_s=times["batched"],
        reference_s=times["loop"], ratio=harness.summary(per_round),
        ratio_is="network-steps/s, batched / loop", metrics=metrics,
        note="target on a GPU: 1,000 networks at once")]


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    """Both cases on ``$SYMLIB_BENCH_DEVICE`` (default: the GPU when there is one)."""
    device = _device()
    if device.type == "cuda" and not torch.cuda.is_available():
        why = "no CUDA device visible to torch"
        return [harness.skipped_row(NAME, "HMC chains", "symlib hmc.sample", "hamiltorch", why),
                harness.skipped_row(NAME, "OptuNets at once", "symlib train_batched", "loop", why)]
    return _hmc_rows(quick, peers, device) + _optunet_rows(quick, device)


if __name__ == "__main__":
    harness.main_for(run, NAME, __doc__.splitlines()[0])
