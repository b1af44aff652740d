"""(g) reduced-precision HMC forces: chain-gradients per second, acceptance, and R-hat per minute.

Issue 30's GPU targets for chapter 5's sampler at the paper's width (784-512-10 classifier on the
4,000 shipped MNIST training digits, N(0, 1) prior, float32 positions and momenta):

* Throughput. ``symlib.inference.hmc.hmc_step`` with 8, 32 and 128 chains batched, its leapfrog
  forces in fp32, TF32 and bf16 (``force_precision``), its draws from a generator on the
  device; and, as the baseline ("today's"), fp32 forces with draws from a CPU generator, as
  every chapter ran until now. Each timed call is one ``init`` and ``T`` transitions of ``L``
  leapfrog steps at one fixed step size (adapted once, in fp32, on 8 chains), no jitter,
  nothing stored. Chain-gradients counted as ``C (1 + T L)``; the reduced precisions also pay
  one full-precision forward pass per transition for the Metropolis step, counted as cost, not
  as gradients. Ratios are per alternated round against the baseline with the same number of
  chains; hamiltorch's one chain (``sample_model``, same network, same device, its own fixed
  step size) is one more contender of the same rounds, compared with the baseline. Acceptance
  is each variant's mean acceptance probability over the timed transitions (same step size).
* Mixing per minute. For each precision, 8 chains from the same 8 starting points sample for a
  fixed wall-clock budget: ``B`` burn-in transitions with dual averaging (target 0.8, jitter
  0.2), then as many sampling transitions as the budget allows at the throughput measured above
  (the count fixed before the run). Reported: acceptance, transitions reached, and the split
  R-hat (rank-normalised, max of bulk and folded, ArviZ) of the predictive logits at 50 fixed
  test digits, worst and median over the 500 logits: the function-space R-hat chapter 5 judges.
  Draws from a generator on the device.

Run on a GPU: ``python benchmarks/bench_precision.py --device cuda --hamiltorch DIR``. With
``--device cpu`` (the default without a GPU) the same work runs at small sizes on one thread;
TF32 changes nothing there, and bf16 autocast on a CPU is usually slower than fp32.
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import math
import os
import statistics
import time

import numpy as np
import torch
from bench_hmc import HAMILTORCH_FILE, hamiltorch_sampler

from symlib.data import load_mnist
from symlib.inference import hmc
from symlib.metrics.mcmc import split_rhat
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward

NAME = "hmc_precision"
PRECISIONS = ("fp32", "tf32", "bf16")
BASELINE = "fp32, CPU generator"


def _device() -> torch.device:
    name = os.environ.get(harness.DEVICE_ENV) or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _sizes(quick: bool, device: torch.device) -> dict:
    if device.type == "cpu":
        return {"width": 32, "n_data": 400, "chains": (2, 8), "T": 2, "L": 5, "repeats": 3, "budget_s": 4.0 if quick else 20.0,
                    "burnin": 10, "mix_L": 10}
    return {"width": 512, "n_data": 4000, "chains": (8, 32) if quick else (8, 32, 128), "T": 2, "L": 10,
                "repeats": 3 if quick else 5, "budget_s": 10.0 if quick else 45.0, "burnin": 60, "mix_L": 25}


def _setup(s: dict, device: torch.device):
    data = load_mnist()
    x = data["x_train"][: s["n_data"]].to(device)
    y = data["y_train"][: s["n_data"]].to(device)
    x_test = data["x_test"][:50].to(device)
    spec = MLPSpec((784, s["width"], 10))
    gen = torch.Generator().manual_seed(0)                                  # the starting points
    inits = [init_mlp(spec, gen) for _ in range(max(s["chains"]))]
    potential = hmc.mlp_classification_potential(spec, x, y, prior_sd=1.0)
    return spec, x, y, x_test, inits, potential


def _start(inits: list[dict], c: int, device: torch.device) -> dict:
    return {k: torch.stack([i[k] for i in inits[:c]]).to(device) for k in inits[0]}


def _adapted_step(potential, inits, device) -> float:
    """The median over 8 chains of a 40-transition fp32 dual-averaging burn-in's step size."""
    res = hmc.sample(potential, _start(inits, min(8, len(inits)), device), n_burnin=40, n_samples=1,
                     n_leapfrog=20, step_size=1e-3, generator=torch.Generator().manual_seed(1), jitter=0.0,
                     progress=False)
    return float(res.step_size.median())


def _throughput_rows(s, setup, eps, peers, device) -> tuple[list[dict], dict]:
    _spec, x, y, _, inits, potential = setup
    accept: dict[str, list[float]] = {}

    def run(c: int, precision: str, gen_device: torch.device):
        key = f"{precision} x{c}" if gen_device == device else f"{BASELINE} x{c}"

        def call():
            gen = torch.Generator(gen_device).manual_seed(2)
            state = hmc.init(_start(inits, c, device), potential, precision)
            step = torch.full((c,), eps, dtype=torch.float32, device=device)
            for _ in range(s["T"]):
                state, info = hmc.hmc_step(state, potential, step, s["L"], gen, precision)
                accept.setdefault(key, []).append(float(info.accept_prob.mean()))
            _sync(device)
        return key, call

    fns = dict(run(c, p, device) for c in s["chains"] for p in PRECISIONS)
    if device.type != "cpu":
        fns.update(run(c, "fp32", torch.device("cpu")) for c in s["chains"])
    root, why = peers.locate("hamiltorch", HAMILTORCH_FILE)
    if root:
        ht = hamiltorch_sampler(root, {k: v for k, v in inits[0].items()}, x, y, s["T"], s["L"])

        def ht_call():
            ht()
            _sync(device)
        fns["hamiltorch"] = ht_call
    times = harness.alternate(fns, s["repeats"])
    grads_per_chain = 1 + s["T"] * s["L"]
    case = (f"784-{s['width']}-10, {s['n_data']} MNIST digits, {s['T']} x {s['L']} leapfrog at step "
            f"{eps:.3g}, {device.type}")
    rows, rates = [], {}
    for c in s["chains"]:
        base_key = f"{BASELINE} x{c}" if device.type != "cpu" else f"fp32 x{c}"
        base_name = BASELINE if device.type != "cpu" else "fp32"
        base = times[base_key]
        variants = ([BASELINE] if device.type != "cpu" else []) + list(PRECISIONS)
        for p in variants:
            key = f"{BASELINE} x{c}" if p == BASELINE else f"{p} x{c}"
            t = times[key]
            rate = c * grads_per_chain / statistics.median(t)
            rates[(p, c)] = rate
            metrics = {"chain-grad evals/s": rate, "acceptance (timed transitions)": statistics.mean(accept[key])}
            subject = f"symlib hmc_step, {c} chains, {p}{' forces' if p != BASELINE else ''}"
            if key == base_key:
                ratio, ratio_is, ref, ref_s, note = None, "", "(the baseline)", None, ""
                if root:
                    th = times["hamiltorch"]
                    ht_grads = s["T"] * (s["L"] + 1)
                    ratio = harness.summary([(c * grads_per_chain / a) / (ht_grads / b) for a, b in zip(t, th)])
                    ratio_is, ref, ref_s = "chain-grad evals/s, symlib / hamiltorch", \
                        "hamiltorch sample_model, one chain", th
                    metrics["hamiltorch grad evals/s"] = ht_grads / statistics.median(th)
                else:
                    note = f"hamiltorch skipped: {why}"
                rows.append(harness.row(NAME, case, subject, ref, subject_s=t, reference_s=ref_s, ratio=ratio,
                                        ratio_is=ratio_is, metrics=metrics, note=note))
            else:
                per_round = [a / b for a, b in zip(base, t)]                  # time baseline / time p
                rows.append(harness.row(
                    NAME, case, subject, f"symlib hmc_step, {c} chains, {base_name}", subject_s=t,
                    reference_s=base, ratio=harness.summary(per_round),
                    ratio_is="chain-grad evals/s, this / baseline", metrics=metrics,
                    note="target on a GPU: >= 4x the baseline at width 512" if device.type == "cuda" else
                    "TF32 has no effect on a CPU" if p == "tf32" else ""))
    return rows, rates


def _mixing_rows(s, setup, rates, device) -> list[dict]:
    spec, _, _, x_test, inits, potential = setup
    c = s["chains"][0]
    forward = torch.func.vmap(mlp_forward, in_dims=(0, None, None))
    rows = []
    for p in PRECISIONS:
        per_transition = c * s["mix_L"] / rates[(p, c)]          # seconds, from the throughput rounds
        n_total = max(int(s["budget_s"] / per_transition), s["burnin"] + 8)
        n_samples = n_total - s["burnin"]
        thin = max(1, math.ceil(n_samples / 100))
        n_keep = n_samples // thin
        _sync(device)
        start = time.perf_counter()
        res = hmc.sample(potential, _start(inits, c, device), n_burnin=s["burnin"], n_samples=n_keep,
                         thin=thin, n_leapfrog=s["mix_L"], step_size=1e-3,
                         generator=torch.Generator(device).manual_seed(3), force_precision=p, progress=False,
                         max_memory_bytes=8 << 30)
        _sync(device)
        wall = time.perf_counter() - start
        store = res.samples
        chains = store.chains[: len(store)]
        logits = []
        for lo in range(0, len(store), 64):
            batch = store.batch(range(lo, min(lo + 64, len(store))), device=device)
            with torch.no_grad():
                logits.append(forward(batch, x_test, spec).flatten(1).cpu().numpy())
        logits = np.concatenate(logits)                                 # (draws * chains, 500)
        draws = np.stack([logits[chains == k] for k in range(c)])       # (chains, draws, 500)
        rhat = np.asarray(split_rhat(draws))
        store.close()
        rows.append(harness.row(
            NAME, f"mixing: 784-{s['width']}-10, {c} chains, {s['mix_L']} leapfrog, {s['burnin']} adapted "
            f"burn-in, budget {s['budget_s']:.0f} s, {device.type}",
            f"symlib hmc.sample, {p} forces", "(R-hat per budget)", subject_s=[wall],
            metrics={"transitions": s["burnin"] + n_keep * thin, "kept per chain": n_keep,
                     "acceptance (sampling)": float(res.accept_rate.mean()),
                     "step size (median)": float(res.step_size.median()),
                     "function-space R-hat, worst": float(rhat.max()),
                     "function-space R-hat, median": float(np.median(rhat)),
                     "wall s": wall}))
    return rows


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    """Throughput (alternated rounds), then the per-budget mixing study, on one device."""
    device = _device()
    if device.type == "cuda" and not torch.cuda.is_available():
        return [harness.skipped_row(NAME, "HMC forces", "symlib hmc_step", "fp32", "no CUDA device visible")]
    s = _sizes(quick, device)
    setup = _setup(s, device)
    eps = _adapted_step(setup[-1], setup[4], device)
    rows, rates = _throughput_rows(s, setup, eps, peers, device)
    return rows + _mixing_rows(s, setup, rates, device)


if __name__ == "__main__":
    harness.main_for(run, NAME, __doc__.splitlines()[0])
