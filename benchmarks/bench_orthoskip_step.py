"""Chapter 1's VI step at the paper's size: ``mfvi_batched`` against today's ``mfvi.fit``, one core.

The work (profile ``paper`` of ``symlib.chapters.ortho_skip``, built as ``benchmarks/bench_orthoskip.py``
and the chapter build it): the four variants (plain, ordered biases, orthogonal skips, both) as
one batch of 1-32x5-1 SELU MLPs with fixed semi-orthogonal skips, 128 training points, 64 Monte
Carlo samples per step by the local reparameterisation trick, float32, one thread, full-batch
Adam with the KL weight annealed over the first half of 200,000 steps.

Contenders, alternated round by round (``harness.alternate``) with a 1024^2 float32 matmul that
measures the core's matmul rate in the same rounds:

- ``mfvi.fit``: today's step (what chapter 1 runs on the CPU; ``mfvi_graph.fit_resumable`` replays
  the same steps);
- ``mfvi_batched.fit`` with ``noise="torch"``: the same noise stream as ``mfvi.fit`` (a fit equal to
  float32 rounding), drawn by ``torch.randn`` and copied into the C routine's blocks;
- ``mfvi_batched.fit`` with ``noise="fast"``: the counter-based generator inside the C routine
  (same distribution, other numbers) -- what chapter 1 runs (its ``vi_engine`` ``mfvi_batched_fast``).

Reported per batched contender: the per-round ratio ``mfvi time / batched time`` (median and
range), and each contender's share of the matmul rate (its own matmul flops per step over its
time, over the probe's rate). ``FlopCounterMode`` counts torch's matmuls; the C routine's products
are invisible to it and are counted here from the shapes (:func:`routine_flops`: per model, layer
``l >= 2`` and row, ``2 N_l N_{l-1}`` flops for each of the means, the variances and their two
input-gradient and two weight-gradient products, and two more for a skip). The machine is shared: the load average
is recorded at the start and the end.

Run: ``python benchmarks/bench_orthoskip_step.py [--quick] [--out DIR] [--tag TAG]``; writes
``<out>/<date>_orthoskip_step[_TAG].json`` and ``.md`` (default ``benchmarks/cpu_results``).
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import statistics

import torch

from symlib.chapters import get_profile
from symlib.chapters.ortho_skip import VARIANTS
from symlib.data import sinc_regression
from symlib.inference import mfvi, mfvi_batched
from symlib.nn.mlp import Activation, MLPSpec, init_mlp
from symlib.nn.orthoskip import skip_matrices

NAME = "orthoskip_step"


def chapter_problem(profile):
    """Data, model and initial state as ``symlib.chapters.ortho_skip.stages.sinc_experiment`` builds them."""
    spec = MLPSpec((1, *profile.hidden_widths, 1), Activation.SELU)
    gen = torch.Generator().manual_seed(0)
    x, y = sinc_regression(profile.n_train, gen, frequency=profile.frequency, amplitude=profile.amplitude,
                           noise_sd=profile.noise_sd)
    skips = skip_matrices(spec, gen, placement=profile.skip_placement)
    has_skip = torch.tensor([v["skip"] for v in VARIANTS])
    model = mfvi.BayesMLP(
        spec,
        {k: torch.where(has_skip[:, None, None], o, torch.zeros_like(o)) for k, o in skips.items()},
        torch.tensor([v["ordered"] for v in VARIANTS]),
    )
    base = init_mlp(spec, gen)
    q0 = mfvi.mean_field_from_params(
        model, {k: v.expand(len(VARIANTS), *v.shape).clone() for k, v in base.items()}, init_sd=profile.init_sd)
    return model, q0, x, y


def routine_flops(model, n_samples: int, n: int) -> float:
    """Flops of the products :meth:`symlib.inference._mfvi_kernels.CKernels.network` computes per step."""
    widths, total = model.spec.widths, 0.0
    for l in range(2, len(widths)):
        skip = model.skips.get(f"O{l}")
        with_skip = 0 if skip is None else int((skip != 0).flatten(1).any(1).sum())
        n_models = model.ordered_biases.numel()
        per_model = 2.0 * widths[l] * widths[l - 1] * n_samples * n
        total += per_model * (6 * n_models + 2 * with_skip)
    return total


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    profile = get_profile("01_ortho_skip", "paper")
    model, q0, x, y = chapter_problem(profile)
    steps = 2 if quick else 4
    repeats = 3 if quick else 5
    # as chapter 1 calls the fit (its KL schedule over the paper's 200,000 steps is what a step
    # sees; the schedule's length does not change a step's cost)
    kw = {"n_samples": profile.n_train_samples, "lr": profile.learning_rate, "noise_sd": profile.noise_sd,
          "learn_noise": profile.learn_noise, "anneal_fraction": profile.anneal_fraction,
          "record_every": profile.record_every, "average_records": True, "progress": False}

    def today(n: int):
        return mfvi.fit(model, q0, x, y, n_steps=n, generator=torch.Generator().manual_seed(1), **kw)

    def batched(noise: str):
        def fn(n: int):
            return mfvi_batched.fit(model, q0, x, y, n_steps=n, generator=torch.Generator().manual_seed(1),
                                    noise=noise, **kw)
        return fn

    contenders = {"mfvi.fit": today, "mfvi_batched (torch noise)": batched("torch"),
                  "mfvi_batched (fast noise)": batched("fast")}
    kernels = mfvi_batched.problem(model, x, y, n_models=len(VARIANTS), n_samples=1, lr=1e-3, n_steps=1).kernels.name
    flops = {name: harness.count_flops(lambda fn=fn: fn(1)) for name, fn in contenders.items()}
    if kernels == "c":      # the routine's products, which FlopCounterMode does not see
        for name in contenders:
            if name != "mfvi.fit":
                flops[name] += routine_flops(model, profile.n_train_samples, profile.n_train)
    probe, probe_flops = harness.matmul_probe(torch.float32)
    times = harness.alternate({**{name: (lambda fn=fn: fn(steps)) for name, fn in contenders.items()},
                               "matmul": probe}, repeats)
    rate = probe_flops / statistics.median(times["matmul"]) / 1e9
    case = (f"{len(VARIANTS)} variants, 1-{'x'.join(map(str, profile.hidden_widths))}-1 SELU, "
            f"{profile.n_train} points, S = {profile.n_train_samples}, {steps} steps per round")
    shares = {name: harness.matmul_share(flops[name] * steps, times[name], probe_flops, times["matmul"])
              for name in contenders}
    per_step = {name: statistics.median(times[name]) / steps for name in contenders}
    rows = [harness.row(
        NAME, case, "mfvi.fit", "matmul-bound rate", subject_s=times["mfvi.fit"], share=shares["mfvi.fit"],
        metrics={"ms per step": 1e3 * per_step["mfvi.fit"], "MFLOP per step": flops["mfvi.fit"] / 1e6,
                 f"hours for {profile.n_steps:,} steps": per_step["mfvi.fit"] * profile.n_steps / 3600,
                 "matmul GFLOP/s": rate})]
    for name in contenders:
        if name == "mfvi.fit":
            continue
        rows.append(harness.row(
            NAME, case, name, "mfvi.fit", subject_s=times[name], reference_s=times["mfvi.fit"],
            ratio=harness.ratios(times["mfvi.fit"], times[name]), ratio_is="speed-up (mfvi.fit time / subject time)",
            share=shares[name],
            metrics={"ms per step": 1e3 * per_step[name], "MFLOP per step": flops[name] / 1e6,
                     f"hours for {profile.n_steps:,} steps": per_step[name] * profile.n_steps / 3600,
                     "share at mfvi.fit's flops": harness.matmul_share(
                         flops["mfvi.fit"] * steps, times[name], probe_flops, times["matmul"])["median"],
                     "kernels": kernels},
            note=("same noise stream as mfvi.fit (equal to float32 rounding)" if "torch" in name
                  else "counter-based noise: same distribution, other numbers")))
    return rows


def main(argv=None) -> None:
    harness.main_dated(run, NAME, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    main()
