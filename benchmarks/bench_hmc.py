"""(a) symlib's HMC vs hamiltorch on chapter 5's Bayesian MLP classifier, one thread.

The work: ``T`` HMC transitions of ``L`` leapfrog steps, fixed step size 1e-3, one chain of a
784-128-10 ReLU MLP with an ``N(0, 1)`` prior and a full-batch cross-entropy over 4,000
MNIST-sized inputs (random pixels and labels: the cost does not depend on the values), float32.

* symlib: ``symlib.inference.hmc.sample`` (no adaptation) on
  ``mlp_classification_potential``, the code path of chapter 5; it evaluates ``1 + T L``
  gradients (the end-point gradient of a trajectory starts the next one).
* hamiltorch (Cobb et al.): ``hamiltorch.sample_model`` on the same network as an
  ``nn.Sequential``, same initial weights; per transition it evaluates ``L + 1`` gradients and
  two more forward passes (the Hamiltonian at both ends).

Reported: each code's gradient evaluations per second (as each one counts them), the ratio of
wall times for the same ``T x L`` trajectory steps, and symlib's share of the matmul-bound rate
(its flops per gradient, counted, over the measured float32 matmul rate).
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import statistics
import warnings

import torch

from symlib.inference import hmc
from symlib.nn.mlp import MLPSpec, init_mlp

NAME = "hmc"
HAMILTORCH_FILE = "hamiltorch/__init__.py"
STEP_SIZE = 1e-3


def hamiltorch_sampler(root, init: dict, x, y, n_transitions: int, n_leapfrog: int):
    """A call of ``hamiltorch.sample_model`` (one chain) on the MLP classifier with weights
    ``init`` (``W1, b1, W2, b2``), from the same start, on ``x``'s device."""
    ht = harness.import_hamiltorch(root)
    # its acceptance step calls float() on a tensor that requires grad, warning every time
    warnings.filterwarnings("ignore", message="Converting a tensor with requires_grad")
    width = init["W1"].shape[0]
    model = torch.nn.Sequential(
        torch.nn.Linear(x.shape[-1], width), torch.nn.ReLU(), torch.nn.Linear(width, init["W2"].shape[0])
    )
    with torch.no_grad():
        for layer, l in ((model[0], 1), (model[2], 2)):
            layer.weight.copy_(init[f"W{l}"])
            layer.bias.copy_(init[f"b{l}"])
    model = model.to(x.device)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])

    def hamiltorch_run():
        return ht.sample_model(
            model,
            x,
            y,
            params_init=flat.clone(),
            model_loss="multi_class_linear_output",
            num_samples=n_transitions,
            num_steps_per_sample=n_leapfrog,
            step_size=STEP_SIZE,
            burn=0,
            sampler=ht.Sampler.HMC,
            integrator=ht.Integrator.EXPLICIT,
            verbose=False,
        )

    return hamiltorch_run


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    """Alternated rounds of symlib, hamiltorch (if available) and the matmul probe."""
    n_data, width = 4000, 128
    n_transitions, n_leapfrog = (2, 5) if quick else (4, 25)
    repeats = 3 if quick else 5
    spec = MLPSpec((784, width, 10))
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(n_data, 784, generator=gen)
    y = torch.randint(0, 10, (n_data,), generator=gen)
    init = init_mlp(spec, gen)
    potential = hmc.mlp_classification_potential(spec, x, y, prior_sd=1.0)
    start = {k: v.unsqueeze(0) for k, v in init.items()}  # one chain

    def symlib_run():
        return hmc.sample(
            potential,
            start,
            n_burnin=0,
            n_samples=n_transitions,
            n_leapfrog=n_leapfrog,
            step_size=STEP_SIZE,
            generator=torch.Generator().manual_seed(1),
            adapt=False,
            progress=False,
        )

    probe, probe_flops = harness.matmul_probe(torch.float32)
    fns = {"symlib": symlib_run, "matmul": probe}
    grad_flops = harness.count_flops(lambda: hmc.value_and_grad(potential, start))
    symlib_grads = 1 + n_transitions * n_leapfrog

    case = f"784-{width}-10, {n_data} points, {n_transitions} x {n_leapfrog} leapfrog, float32"
    root, why = peers.locate("hamiltorch", HAMILTORCH_FILE)
    if root:
        fns["hamiltorch"] = hamiltorch_sampler(root, init, x, y, n_transitions, n_leapfrog)

    times = harness.alternate(fns, repeats)
    share = harness.matmul_share(
        grad_flops * symlib_grads, times["symlib"], probe_flops, times["matmul"]
    )
    metrics = {
        "GFLOP per gradient": grad_flops / 1e9,
        "symlib grad evals/s": symlib_grads / statistics.median(times["symlib"]),
        "matmul GFLOP/s": probe_flops / statistics.median(times["matmul"]) / 1e9,
    }
    if not root:
        return [
            harness.row(
                NAME,
                case,
                "symlib hmc.sample",
                "hamiltorch",
                subject_s=times["symlib"],
                share=share,
                metrics=metrics,
                skipped=why,
            )
        ]
    ht_grads = n_transitions * (n_leapfrog + 1)
    metrics["hamiltorch grad evals/s"] = ht_grads / statistics.median(times["hamiltorch"])
    return [
        harness.row(
            NAME,
            case,
            "symlib hmc.sample",
            "hamiltorch sample_model",
            subject_s=times["symlib"],
            reference_s=times["hamiltorch"],
            ratio=harness.ratios(times["hamiltorch"], times["symlib"]),
            ratio_is="hamiltorch time / symlib time, same trajectories",
            share=share,
            metrics=metrics,
            note=(
                f"grad evals per run: symlib {symlib_grads}, hamiltorch {ht_grads} "
                f"+ {2 * n_transitions} forward passes; rates at the median time"
            ),
        )
    ]


if __name__ == "__main__":
    harness.main_for(run, NAME, __doc__.splitlines()[0])
