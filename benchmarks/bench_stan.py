"""(f) chapter 4's Stan programs: the ReLU layer as one matrix expression vs a loop of scalars.

The work: NUTS in Stan (PyStan, one chain, Stan's default maximum tree depth of 10) on the
Boston housing network of chapter 4's ``full`` and ``paper`` profiles: 13 inputs, 50 hidden ReLU
units, the 405 training points of an 80/20 split, standardised. Contenders, the same model:

* ``symlib``: the programs in ``symlib/inference/stan_models`` (since 2026-11-27): the hidden
  activations ``fmax([X, 1] * [W1, b1]', 0)``, one matrix product with the bias as a column;
* ``loop``: the same programs as they were until then (rebuilt here from today's by
  :func:`loop_program`): ``X * W1'``, then ``fmax(act[n, h] + b1[h], 0)`` for each of the
  N x H entries, each a scalar node of Stan's autodiff.

Both are checked first to be the same density: log density and gradient at random points agree
to rounding. Each round builds both with one seed (so both start from the same point) and
samples; the time per gradient is Stan's own sampling time over the leapfrog steps it took
(trajectories part ways after a few steps, since the gradients differ in the last bits, so
the step counts differ a little). Reported: microseconds per gradient, and the ratio
loop / symlib per round (median and range): how much faster chapter 4's fits run.
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import numpy as np
import torch

from symlib.data import load_boston, standardise
from symlib.inference import stan as st
from symlib.nn import constrained as idf

NAME = "stan_relu"
HIDDEN = 50

VECTORISED = "  matrix[N, H] act = fmax(X1 * append_col(W1, b1)', 0);\n"
LOOP = """  matrix[N, H] act = X * W1';
  for (h in 1:H) {
    for (n in 1:N) {
      act[n, h] = fmax(act[n, h] + b1[h], 0);
    }
  }
"""


def loop_program(name: str) -> str:
    """Program ``name`` with its ReLU layer written as before 2026-11-27 (a loop of scalars)."""
    code = st.program(name)
    if code.count(VECTORISED) != 1:
        raise RuntimeError(f"the {name} program changed: its ReLU line was not found once")
    return code.replace(VECTORISED, LOOP)


def _data(name: str) -> dict:
    x, y = load_boston(standardise=False)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    tr = perm[round(0.2 * len(x)):]
    xtr, _, _, _ = standardise(x[tr].double(), x[tr].double())
    ytr, _, _, _ = standardise(y[tr].double(), y[tr].double())
    return idf.stan_data(name, xtr, ytr, HIDDEN, idf.NetPrior())


def _same_density(a: st.StanModel, b: st.StanModel, n_params: int) -> dict:
    """Largest relative differences of log density and gradient at 3 random points."""
    rng = np.random.default_rng(0)
    lp, grad = 0.0, 0.0
    for _ in range(3):
        z = 0.5 * rng.normal(size=n_params)
        lp = max(lp, abs(a.log_prob(z) - b.log_prob(z)) / abs(a.log_prob(z)))
        ga, gb = a.grad_log_prob(z), b.grad_log_prob(z)
        grad = max(grad, float(np.abs(ga - gb).max() / np.abs(ga).max()))
    if lp > 1e-12 or grad > 1e-10:
        raise RuntimeError(f"the two programs are not the same density (relative differences {lp:.1e}, {grad:.1e})")
    return {"lp rel diff": lp, "grad rel diff": grad}


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    """Per program, alternated rounds: build both with the round's seed, sample each."""
    warmup, draws, repeats = (20, 5, 2) if quick else (100, 30, 3)
    names = ("unconstrained",) if quick else ("unconstrained", "constrained")
    rows = []
    for name in names:
        data = _data(name)
        codes = {"symlib": st.program(name), "loop": loop_program(name)}
        probe = {k: st.build(f"{name}-bench-{k}", data, seed=0, code=c) for k, c in codes.items()}
        check = _same_density(probe["symlib"], probe["loop"], _n_unconstrained(probe["symlib"], data))
        us: dict[str, list[float]] = {"symlib": [], "loop": []}
        steps: dict[str, list[int]] = {"symlib": [], "loop": []}
        for r in range(repeats + 1):                 # round 0 untimed: the first sampling process
            for k, code in codes.items():
                fit = st.build(f"{name}-bench-{k}", data, seed=1000 + r, code=code).sample(
                    chains=1, warmup=warmup, draws=draws, max_depth=10)
                n = int(fit.sampler["n_leapfrog__"].sum())
                if r:
                    us[k].append(1e6 * float(np.nansum(fit.sampling_s)) / n)
                    steps[k].append(n)
        rows.append(harness.row(
            NAME, f"{name}: {data['N']} points, {data['D']}-{HIDDEN}-1 ReLU, 1 chain, {warmup} + {draws} "
                  "iterations, depth 10", "symlib (matrix ReLU)", "loop of scalars",
            ratio=harness.ratios(us["loop"], us["symlib"]), ratio_is="loop / symlib, time per gradient",
            metrics={"us per gradient (symlib)": float(np.median(us["symlib"])),
                     "us per gradient (loop)": float(np.median(us["loop"])),
                     "leapfrog steps per round (symlib)": float(np.median(steps["symlib"])),
                     "leapfrog steps per round (loop)": float(np.median(steps["loop"])), **check},
            note="Stan's own sampling time per leapfrog step"))
    return rows


def _n_unconstrained(model: st.StanModel, data: dict) -> int:
    """Unconstrained coordinates: every parameter's size (W1 of the constrained program is a
    transformed parameter, not a coordinate)."""
    dims = dict(zip(model.model.param_names, model.model.dims))
    size = sum(int(np.prod(d)) if d else 1 for d in dims.values())
    return size - (data["H"] * data["D"] if "angle_jacobian" in data else 0)


if __name__ == "__main__":
    harness.main_for(run, NAME, __doc__.splitlines()[0])
