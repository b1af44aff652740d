"""(b) symlib's 20-kernel MMD bank vs MMDAgg's numpy code and Laurent et al.'s port of it.

The work: the unbiased MMD^2 between ``n`` and ``m`` samples of dimension ``d`` for Laurent et
al.'s bank (10 Gaussian and 10 Laplace kernels, bandwidths by MMDAgg's rule from the first 500
rows), as ``symlib.metrics.mmd.kernel_bank_mmd2`` computes it.

The peers compute the same 20 numbers inside their permutation tests; they are called with the
fewest permutations they accept (``B1 = B2 = B3 = 1``), so what is left is their distances,
kernels and estimator, plus a negligible test on 3 columns:

* MMDAgg (Schrab et al.), ``mmdagg/np.py``: ``mmdagg(..., permutations_same_sample_size=True,
  return_dictionary=True)``. Permutations make it use the same estimator as symlib (with equal
  sample sizes its default wild bootstrap also drops the diagonal of the cross Gram matrix).
  scipy distances and numpy kernels, all in float64 whatever the input dtype.
* Laurent et al.'s "torch version" (``mmd/mmd_torch.py`` in the authors' repository): the same
  code with distances from ``torch.cdist`` in float32 and numpy kernels.

Before the timed rounds, each contender's 20 values are compared with symlib's in float64
(``max |diff|`` in the table).
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import numpy as np
import torch

from symlib.metrics import mmd

NAME = "mmd"
MMDAGG_FILE = "mmdagg/np.py"
LAURENT_FILE = "mmd/mmd_torch.py"


def _data(n: int, m: int, d: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    y = 1.1 * torch.randn(m, d, generator=gen, dtype=torch.float64) + 0.05
    return x, y


def _mmdagg_values(module, xn: np.ndarray, yn: np.ndarray) -> np.ndarray:
    """MMDAgg's 20 MMD^2 values, reordered to symlib's (Gaussian kernels first)."""
    _, info = module.mmdagg(
        xn, yn, B1=1, B2=1, B3=1, permutations_same_sample_size=True, return_dictionary=True
    )
    laplace = [info[f"Single test 1.{i}"]["MMD"] for i in range(1, 11)]
    gauss = [info[f"Single test 2.{i}"]["MMD"] for i in range(1, 11)]
    return np.array(gauss + laplace)


def _laurent_values(module, xn: np.ndarray, yn: np.ndarray) -> np.ndarray:
    values = module.mmdagg(xn, yn, B1=1, B2=1, B3=1)  # Laplace kernels first
    return np.concatenate([values[10:], values[:10]])


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    """Alternated rounds of symlib and each available peer, per dtype."""
    n, d = (300, 392) if quick else (1000, 392)
    repeats = 3 if quick else 7
    peer_modules, skips = {}, {}
    root, why = peers.locate("mmdagg", MMDAGG_FILE)
    if root:
        peer_modules["MMDAgg numpy"] = (
            harness.load_file_module("mmdagg_np", root / MMDAGG_FILE),
            _mmdagg_values,
        )
    else:
        skips["MMDAgg numpy"] = why
    root, why = peers.locate("laurent", LAURENT_FILE)
    if root:
        peer_modules["Laurent et al. torch port"] = (
            harness.load_file_module("laurent_mmd_torch", root / LAURENT_FILE),
            _laurent_values,
        )
    else:
        skips["Laurent et al. torch port"] = why

    x64, y64 = _data(n, n, d)
    exact = mmd.kernel_bank_mmd2(x64, y64).numpy()
    rows = []
    for dtype in (torch.float64, torch.float32):
        case = f"{n} x {n} x {d}, {str(dtype).removeprefix('torch.')}"
        x, y = x64.to(dtype), y64.to(dtype)
        xn, yn = x.numpy(), y.numpy()
        fns = {"symlib": lambda x=x, y=y, dtype=dtype: mmd.kernel_bank_mmd2(x, y, dtype=dtype)}
        for name, (module, values) in peer_modules.items():
            fns[name] = lambda module=module, values=values, xn=xn, yn=yn: values(module, xn, yn)
        agreement = {name: float(np.abs(np.asarray(f()) - exact).max()) for name, f in fns.items()}
        times = harness.alternate(fns, repeats)
        for name in peer_modules:
            rows.append(
                harness.row(
                    NAME,
                    case,
                    "symlib kernel_bank_mmd2",
                    name,
                    subject_s=times["symlib"],
                    reference_s=times[name],
                    ratio=harness.ratios(times[name], times["symlib"]),
                    ratio_is="peer time / symlib time",
                    metrics={
                        "max |diff| symlib": agreement["symlib"],
                        "max |diff| peer": agreement[name],
                    },
                    note="max |diff|: of the 20 MMD^2 values vs symlib in float64",
                )
            )
        for name, why in skips.items():
            rows.append(harness.skipped_row(NAME, case, "symlib kernel_bank_mmd2", name, why))
    return rows


if __name__ == "__main__":
    harness.main_for(run, NAME, __doc__.splitlines()[0])
