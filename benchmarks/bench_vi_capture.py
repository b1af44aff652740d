"""(i) chapter 1's VI training step, eager vs one CUDA graph per step: steps per second.

Issue 30, items 2 and 5: chapter 1 trains its sinc networks (1-32-32-32-32-32-1, SELU, the four
variants as one batch of models) for the paper's 200,000 Adam steps with 64 Monte Carlo samples
per step; eagerly, on an H100, 40,000 steps of the ``full`` profile took more than 5.7 minutes,
because each step launches a few hundred small kernels. The target: 200,000 steps in under
5 minutes (667 steps/s).

- reference: :func:`symlib.inference.mfvi.fit` as chapter 1 calls it (``paper`` profile settings,
  fused Adam, records every 100 steps), ``n`` steps;
- subject: the same step (``mfvi.elbo``, backward, Adam) recorded once as a CUDA graph by
  :class:`symlib.inference.mfvi_graph.CapturedFit` and replayed ``n`` times (recorded once before
  the rounds; the recording time is reported). Before timing, ``fit_captured`` and ``mfvi.fit``
  run the same 200 steps from the same generator, and the largest difference of their final
  variational parameters is reported (the captured fit takes the eager fit's steps).

Run on a GPU: ``python benchmarks/bench_vi_capture.py --device cuda``. On the CPU (no CUDA graph)
the subject runs the same step function eagerly (``mode="replay"``), a check of the script only.
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import time

import torch
from bench_precision import _device, _sync

from symlib.chapters.ortho_skip import profiles as ch1_profiles
from symlib.chapters.ortho_skip.stages import VARIANTS, legacy_generator
from symlib.data import sinc_regression
from symlib.inference import mfvi
from symlib.inference.mfvi_graph import CapturedFit, fit_captured
from symlib.nn.mlp import Activation, MLPSpec, init_mlp
from symlib.nn.orthoskip import skip_matrices

NAME = "vi_capture"
TARGET_STEPS_PER_S = 200_000 / 300.0


def _problem(profile, device: torch.device, seed: int = 0):
    """Chapter 1's model and data at ``profile``'s sizes (as ``stages.sinc_experiment``)."""
    spec = MLPSpec((1, *profile.hidden_widths, 1), Activation.SELU)
    x, y = sinc_regression(profile.n_train, legacy_generator(seed, "train"), frequency=profile.frequency,
                           amplitude=profile.amplitude, noise_sd=profile.noise_sd)
    skips = skip_matrices(spec, legacy_generator(seed, "skips"), placement=profile.skip_placement)
    has_skip = torch.tensor([v["skip"] for v in VARIANTS])
    skips = {k: torch.where(has_skip[:, None, None], o, torch.zeros_like(o)).to(device) for k, o in skips.items()}
    model = mfvi.BayesMLP(spec, skips, torch.tensor([v["ordered"] for v in VARIANTS], device=device))
    base = init_mlp(spec, legacy_generator(seed, "init"))
    params = {k: v.expand(len(VARIANTS), *v.shape).clone().to(device) for k, v in base.items()}
    q0 = mfvi.mean_field_from_params(model, params, init_sd=profile.init_sd)
    return model, q0, x.to(device), y.to(device)


def _kwargs(profile, n_steps: int, device: torch.device) -> dict:
    """``mfvi.fit``'s arguments as chapter 1 passes them."""
    return {"n_steps": n_steps, "n_samples": profile.n_train_samples, "lr": profile.learning_rate,
            "generator": legacy_generator(0, "fit", device), "noise_sd": profile.noise_sd,
            "anneal_fraction": profile.anneal_fraction, "record_every": profile.record_every, "progress": False,
            "average_records": True}


def _eager(profile, model, q0, x, y, n_steps: int, device: torch.device) -> float:
    result = mfvi.fit(model, q0, x, y, **_kwargs(profile, n_steps, device))
    _sync(device)
    return float(result.history["elbo"][..., -1].mean())


def _largest_difference(profile, model, q0, x, y, device: torch.device, mode: str, n_steps: int = 200) -> float:
    want = mfvi.fit(model, q0, x, y, **_kwargs(profile, n_steps, device))
    got = fit_captured(model, q0, x, y, mode=mode, **_kwargs(profile, n_steps, device))
    return max(float((got.q.mean[k] - want.q.mean[k]).abs().max()) for k in want.q.mean)


def _replays(fit: CapturedFit, device: torch.device, n_steps: int) -> float:
    result = fit.run(n_steps)
    _sync(device)
    return float(result.history["elbo"][..., -1].mean())


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    device = _device()
    if device.type == "cuda" and not torch.cuda.is_available():
        return [harness.skipped_row(NAME, "VI step", "graph", "eager", "no CUDA device visible")]
    cpu = device.type == "cpu"
    profile = ch1_profiles.PROFILES["smoke" if cpu else "paper"]
    n_steps = 20 if cpu else (500 if quick else 1000)   # eager: ~21 ms a step on an H200
    repeats = 2 if (cpu or quick) else 3
    model, q0, x, y = _problem(profile, device)
    mode = "replay" if cpu else "graph"
    diff = _largest_difference(profile, model, q0, x, y, device, mode, n_steps=20 if cpu else 200)
    t0 = time.perf_counter()
    graph = CapturedFit(model, q0, x, y, graph=not cpu, **_kwargs(profile, n_steps, device))
    _sync(device)
    record_s = time.perf_counter() - t0
    elbos: dict[str, float] = {}
    fns = {"eager": lambda: elbos.__setitem__("eager", _eager(profile, model, q0, x, y, n_steps, device)),
           "graph": lambda: elbos.__setitem__("graph", _replays(graph, device, n_steps))}
    times = harness.alternate(fns, repeats)
    subject = "symlib VI step as one CUDA graph" if not cpu else "symlib VI step, eager replay (CPU)"
    widths = "-".join(map(str, (1, *profile.hidden_widths, 1)))
    return [harness.row(
        NAME, f"chapter 1 sinc MLP {widths}, {len(VARIANTS)} variants, {profile.n_train_samples} MC samples, "
              f"{n_steps} steps per call, {device.type}",
        subject, "mfvi.fit (eager, as chapter 1)", subject_s=times["graph"], reference_s=times["eager"],
        ratio=harness.ratios(times["eager"], times["graph"]), ratio_is="speed-up (eager time / graph time)",
        metrics={"graph steps/s": n_steps / min(times["graph"]), "eager steps/s": n_steps / min(times["eager"]),
                 "200,000 steps, graph (min)": 200_000 / (n_steps / min(times["graph"])) / 60,
                 "200,000 steps, eager (min)": 200_000 / (n_steps / min(times["eager"])) / 60,
                 "record s": record_s, "200 steps: max |mean - eager mean|": diff, "ELBO after the graph's calls (mean over variants)": elbos["graph"],
                 "ELBO of one eager call (mean over variants)": elbos["eager"]},
        note=f"target {TARGET_STEPS_PER_S:.0f} steps/s (200,000 in 5 min)")]


if __name__ == "__main__":
    harness.main_for(run, NAME, __doc__.splitlines()[0])
