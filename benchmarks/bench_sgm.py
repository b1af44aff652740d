"""(d) one SGM-VI step vs one mean-field VI step at width 512, one thread.

The work: Adam steps (sample, objective, backward, update) of a 784-512-10 Bayesian MLP
classifier on a minibatch of 100 MNIST-sized inputs (random pixels and labels), one Monte
Carlo sample, float32, as chapter 3's cost experiment does at width ``cost_width``:

* SGM, ``K`` in {5, 20}: ``symlib.inference.sgm.objective`` (whole-weight draws, the ``I_K``
  estimate over ``K - 1`` sampled permutations; default ratio path);
* MFVI (mfvi.py): the mean-field ELBO of ``symlib.inference.mfvi``: outputs by the local
  reparameterisation trick (``sample_outputs``) and the closed-form ``kl_divergence``;
* MFVI (sgm.py, K = 1): the same objective as SGM with ``K = 1`` (``I_1 = 0``): plain
  mean-field VI on SGM's code path, whole-weight draws.

Reported: the cost of an SGM step in MFVI steps (time ratio), against both MFVI variants.
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import torch

from symlib.inference import mfvi, sgm
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward
from symlib.symmetry import mlp_permutation_spec

NAME = "sgm_vs_mfvi"
WIDTH, BATCH, SCALE = 512, 100, 600.0  # SCALE = N / M for 60,000 MNIST digits in batches of 100


def _loglik(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(logits, -1)
    return logp.gather(-1, y.expand(logp.shape[:-1]).unsqueeze(-1)).squeeze(-1).sum(-1)


def _adam(q: mfvi.MeanField) -> torch.optim.Adam:
    leaves = list(q.mean.values()) + list(q.log_sd.values())
    for t in leaves:
        t.requires_grad_(True)
    return torch.optim.Adam(leaves, lr=1e-3)


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    """Alternated rounds of the MFVI steps and the SGM steps for each K."""
    steps = 3 if quick else 20
    repeats = 3 if quick else 5
    spec = MLPSpec((784, WIDTH, 10))
    pspec = mlp_permutation_spec(spec)
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(BATCH, 784, generator=gen)
    y = torch.randint(0, 10, (BATCH,), generator=gen)
    means = init_mlp(spec, gen)

    def sgm_steps(k: int):
        q = sgm.mean_field(means, 0.01)
        opt = _adam(q)
        noise = torch.Generator().manual_seed(1)

        def loglik(w):
            return _loglik(torch.func.vmap(mlp_forward, in_dims=(0, None, None))(w, x, spec), y)

        def work():
            for _ in range(steps):
                parts = sgm.objective(
                    q, pspec, loglik, k=k, n_samples=1, prior_sd=1.0, generator=noise, scale=SCALE
                )
                opt.zero_grad(set_to_none=True)
                (-parts.objective).backward()
                opt.step()

        return work

    def mfvi_steps():
        model = mfvi.BayesMLP(spec)
        q = mfvi.mean_field_from_params(model, means, init_sd=0.01)
        opt = _adam(q)
        noise = torch.Generator().manual_seed(1)

        def work():
            for _ in range(steps):
                logits = mfvi.sample_outputs(q, model, x, 1, noise)  # (S, n, 10)
                elbo = SCALE * _loglik(logits, y).mean(-1) - mfvi.kl_divergence(q, model)
                opt.zero_grad(set_to_none=True)
                (-elbo).backward()
                opt.step()

        return work

    ks = (5, 20)
    fns = {"MFVI (mfvi.py)": mfvi_steps(), "MFVI (sgm.py, K = 1)": sgm_steps(1)}
    fns.update({f"SGM K = {k}": sgm_steps(k) for k in ks})
    times = harness.alternate(fns, repeats)
    rows = []
    for k in ks:
        subject = f"SGM K = {k}"
        for reference in ("MFVI (mfvi.py)", "MFVI (sgm.py, K = 1)"):
            rows.append(
                harness.row(
                    NAME,
                    f"784-{WIDTH}-10, batch {BATCH}, S = 1, {steps} Adam steps",
                    subject,
                    reference,
                    subject_s=times[subject],
                    reference_s=times[reference],
                    ratio=harness.ratios(times[subject], times[reference]),
                    ratio_is="SGM time / MFVI time (cost in MFVI steps)",
                    metrics={
                        "ms per SGM step": 1e3 * harness.summary(times[subject])["median"] / steps
                    },
                )
            )
    return rows


if __name__ == "__main__":
    harness.main_for(run, NAME, __doc__.splitlines()[0])
