"""(e) chapter 1's training step at the paper's size, and its share of the matmul-bound rate.

The work: full-batch Adam steps of ``symlib.inference.mfvi.fit`` exactly as chapter 1 runs them
(``symlib.chapters.ortho_skip``) with Kurle et al.'s sizes (profile ``paper``): the four
variants (plain, ordered biases, orthogonal skips, both) as one batch of models, a 1-32x5-1
SELU MLP with fixed semi-orthogonal skips, 128 training points, 64 Monte Carlo samples per step
by the local reparameterisation trick, float32, one thread. The paper runs 200,000 such steps.

Reported: time per step, the projected time of the paper's run, and the share of the measured
float32 matmul rate (the step's matmul flops, forward and backward, counted by
``FlopCounterMode``). No peer: Kurle et al. published no code.
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import statistics

import torch

from symlib.chapters import get_profile
from symlib.chapters.ortho_skip import VARIANTS
from symlib.data import sinc_regression
from symlib.inference import mfvi
from symlib.nn.mlp import Activation, MLPSpec, init_mlp
from symlib.nn.orthoskip import skip_matrices

NAME = "ortho_skip"


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    """Alternated rounds of ``steps`` training steps and the matmul probe."""
    profile = get_profile("01_ortho_skip", "paper")
    steps = 5 if quick else 50
    repeats = 3 if quick else 5
    spec = MLPSpec((1, *profile.hidden_widths, 1), Activation.SELU)
    gen = torch.Generator().manual_seed(0)
    x, y = sinc_regression(
        profile.n_train,
        gen,
        frequency=profile.frequency,
        amplitude=profile.amplitude,
        noise_sd=profile.noise_sd,
    )
    # the four variants as one batch, as symlib.chapters.ortho_skip builds them
    skips = skip_matrices(spec, gen, placement=profile.skip_placement)
    has_skip = torch.tensor([v["skip"] for v in VARIANTS])
    model = mfvi.BayesMLP(
        spec,
        {k: torch.where(has_skip[:, None, None], o, torch.zeros_like(o)) for k, o in skips.items()},
        torch.tensor([v["ordered"] for v in VARIANTS]),
    )
    base = init_mlp(spec, gen)
    q0 = mfvi.mean_field_from_params(
        model,
        {k: v.expand(len(VARIANTS), *v.shape).clone() for k, v in base.items()},
        init_sd=profile.init_sd,
    )

    def train(n_steps: int):
        return mfvi.fit(
            model,
            q0,
            x,
            y,
            n_steps=n_steps,
            n_samples=profile.n_train_samples,
            lr=profile.learning_rate,
            generator=torch.Generator().manual_seed(1),
            noise_sd=profile.noise_sd,
            anneal_fraction=profile.anneal_fraction,
            record_every=n_steps,
            progress=False,
        )

    step_flops = harness.count_flops(lambda: train(1))
    probe, probe_flops = harness.matmul_probe(torch.float32)
    times = harness.alternate({"symlib": lambda: train(steps), "matmul": probe}, repeats)
    share = harness.matmul_share(step_flops * steps, times["symlib"], probe_flops, times["matmul"])
    per_step = statistics.median(times["symlib"]) / steps
    case = (
        f"{len(VARIANTS)} variants, 1-{'x'.join(map(str, profile.hidden_widths))}-1 SELU, "
        f"{profile.n_train} points, S = {profile.n_train_samples}, {steps} steps"
    )
    return [
        harness.row(
            NAME,
            case,
            "symlib mfvi.fit",
            "matmul-bound rate",
            subject_s=times["symlib"],
            share=share,
            metrics={
                "ms per step": 1e3 * per_step,
                "MFLOP per step": step_flops / 1e6,
                f"hours for {profile.n_steps:,} steps": per_step * profile.n_steps / 3600,
                "matmul GFLOP/s": probe_flops / statistics.median(times["matmul"]) / 1e9,
            },
        )
    ]


if __name__ == "__main__":
    harness.main_for(run, NAME, __doc__.splitlines()[0])
