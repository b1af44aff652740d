"""The minimum scaled network mass problem of Laurent et al. (2024, Sec. 3.6, App. C.7).

A ReLU network keeps its function when hidden unit ``u`` has its incoming weights and bias
multiplied by ``a_u = exp(lam_u) > 0`` and its outgoing weights by ``1 / a_u``. The *mass* is
the L2 term of the weights, biases excluded::

    M(lam) = sum_l sum_ij W_l[i, j]^2 exp(2 (lam_l[i] - lam_{l-1}[j]))     (lam = 0 at in/out)

(conv: ``W[i, j]^2`` summed over the kernel). ``M`` is a posynomial in ``a``, so minimising it
is a geometric program (log-log convex; strictly convex in ``lam`` when non-degenerate, so the
minimiser is unique). Biases are rescaled with their unit but not counted, as in the paper.

The problem is stated on any :class:`symlib.symmetry.PermutationSpec`: every weight entry gets
``+2 lam`` of the unit it feeds (incoming axes) and ``-2 lam`` of the unit it reads (outgoing
axes); passive axes do not scale. Entries sharing the same pair of units are summed into one
term ``c_k exp(A_k . lam)``.

Public functions:

* :func:`mass`, :func:`mass_terms`: the objective;
* :func:`solve_min_mass` (cvxpy geometric program), :func:`solve_min_mass_scipy` (generic
  convex solver on the log-scales, a check), :func:`closed_form_one_hidden` (one hidden layer:
  ``a_i^4 = ||W2[:, i]||^2 / ||W1[i, :]||^2``);
* :func:`min_mass_element`, :func:`min_mass`: the scaling as a group element / applied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from symlib.nn.mlp import Params
from symlib.symmetry.group import GroupElement, PermutationSpec, apply_group_element

__all__ = [
    "MassTerms",
    "MinMassSolver",
    "closed_form_one_hidden",
    "mass",
    "mass_terms",
    "min_mass",
    "min_mass_element",
    "scales_from_log",
    "solve_min_mass",
    "solve_min_mass_scipy",
    "weight_keys",
]


@dataclass(frozen=True)
class MassTerms:
    """``M(lam) = sum_k coef[k] * exp(2 lam[inc[k]] - 2 lam[out[k]])``; index ``n`` = fixed (0).

    Attributes:
        coef: ``(K,)`` float64, summed squared weights per (incoming unit, outgoing unit) pair.
        inc, out: ``(K,)`` int64 indices into the concatenated log-scales, ``n`` for none.
        n: number of free log-scales (all hidden units of all perms, in spec order).
        offsets: perm name -> start of its units in ``lam``.
    """

    coef: np.ndarray
    inc: np.ndarray
    out: np.ndarray
    n: int
    offsets: dict[str, int]

    def value(self, lam: np.ndarray) -> float:
        lam1 = np.append(lam, 0.0)
        return float(np.sum(self.coef * np.exp(2 * (lam1[self.inc] - lam1[self.out]))))


def weight_keys(ps: PermutationSpec) -> tuple[str, ...]:
    """Keys counted in the mass: every param of 2 or more dims (biases and batch-norm vectors
    are excluded; Laurent et al. add batch-norm ``gamma^2``, not needed for OptuNet / MLPs)."""
    return tuple(k for k, nd in ps.param_ndims.items() if nd >= 2)


def mass(params: Params, ps: PermutationSpec, keys: tuple[str, ...] | None = None) -> torch.Tensor:
    """Sum of squared weights (biases excluded); batched params give one mass per network."""
    keys = weight_keys(ps) if keys is None else keys
    total = 0.0
    for k in keys:
        t = params[k]
        nb = t.ndim - ps.param_ndims[k]
        total = total + t.pow(2).sum(dim=tuple(range(nb, t.ndim)))
    return total


def mass_terms(params: Params, ps: PermutationSpec, keys: tuple[str, ...] | None = None) -> MassTerms:
    """Collect the mass as a posynomial in the unit scales (one unbatched network)."""
    keys = weight_keys(ps) if keys is None else keys
    offsets, n = {}, 0
    for name, size in ps.perm_sizes.items():
        offsets[name], n = n, n + size
    roles: dict[str, list] = {k: [] for k in keys}  # key -> [(axis, block, offset, sign)]
    for name, axes in ps.perm_to_axes.items():
        incoming, passive = set(ps.incoming.get(name, ())), set(ps.passive.get(name, ()))
        for entry in axes:
            if entry[0] in roles and entry not in passive:
                block = entry[2] if len(entry) > 2 else 1
                roles[entry[0]].append((entry[1], block, offsets[name], 1 if entry in incoming else -1))
    coefs, incs, outs = [], [], []
    for k in keys:
        w2 = params[k].detach().to(torch.float64).pow(2)
        inc = torch.full(w2.shape, n, dtype=torch.int64)
        out = torch.full(w2.shape, n, dtype=torch.int64)
        for axis, block, off, sign in roles[k]:
            shape = [1] * w2.ndim
            shape[axis] = w2.shape[axis]
            idx = (torch.arange(w2.shape[axis]) // block + off).reshape(shape).expand(w2.shape)
            if sign > 0:
                inc = idx.clone()
            else:
                out = idx.clone()
        pair = (inc * (n + 1) + out).reshape(-1)
        uniq, where = torch.unique(pair, return_inverse=True)
        c = torch.zeros(len(uniq), dtype=torch.float64).index_add_(0, where, w2.reshape(-1))
        coefs.append(c)
        incs.append(uniq // (n + 1))
        outs.append(uniq % (n + 1))
    return MassTerms(torch.cat(coefs).numpy(), torch.cat(incs).numpy(), torch.cat(outs).numpy(), n, offsets)


class MinMassSolver:
    """The min-mass geometric program for one architecture, compiled once by cvxpy.

    Variables ``a > 0`` (one per hidden unit, plus one pinned to 1 for the inputs / outputs);
    objective ``sum_k c_k a_inc[k]^2 a_out[k]^-2`` with the coefficients as a cvxpy parameter,
    so solving many networks of the same architecture re-uses the compiled problem.
    """

    def __init__(self, terms: MassTerms):
        try:
            import cvxpy as cp
        except ImportError as err:  # an optional dependency: the methods install without it
            raise ImportError(
                "the min-mass geometric program needs cvxpy: pip install 'bnn-symlib[minmass]' "
                "(or use solve_min_mass_scipy)"
            ) from err

        self._inc, self._out, self.n = terms.inc, terms.out, terms.n
        self._a = cp.Variable(terms.n + 1, pos=True)
        self._c = cp.Parameter(len(terms.coef), pos=True)
        a = self._a
        objective = cp.sum(cp.multiply(self._c, cp.multiply(cp.power(a[terms.inc], 2),
                                                            cp.power(a[terms.out], -2))))
        self._problem = cp.Problem(cp.Minimize(objective), [a[terms.n] == 1])

    def solve(self, terms: MassTerms) -> np.ndarray:
        """Optimal log-scales ``lam`` (length ``n``) for this network's coefficients."""
        if not (np.array_equal(terms.inc, self._inc) and np.array_equal(terms.out, self._out)):
            raise ValueError("terms have another structure than the compiled problem")
        # a coefficient of exactly 0 (dead weights) is not positive: floor it far below the rest
        self._c.value = np.maximum(terms.coef, 1e-300 + 1e-14 * terms.coef.max())
        self._problem.solve(gp=True)
        if self._problem.status not in ("optimal", "optimal_inaccurate"):
            raise RuntimeError(f"min-mass GP not solved: {self._problem.status}")
        a = np.asarray(self._a.value, dtype=np.float64)
        return np.log(a[: self.n] / a[self.n])


def solve_min_mass(terms: MassTerms, solver: MinMassSolver | None = None) -> np.ndarray:
    """Optimal log-scales by cvxpy's geometric programming (Laurent et al.'s choice)."""
    return (solver or MinMassSolver(terms)).solve(terms)


def solve_min_mass_scipy(terms: MassTerms, lam0: np.ndarray | None = None) -> np.ndarray:
    """Optimal log-scales by Newton's method with a trust region (``scipy.optimize``) on
    ``log M(lam)``: a generic convex solver, used to check :func:`solve_min_mass`."""
    from scipy.optimize import minimize

    n = terms.n
    A = np.zeros((len(terms.coef), n + 1))
    np.add.at(A, (np.arange(len(terms.coef)), terms.inc), 2.0)
    np.add.at(A, (np.arange(len(terms.coef)), terms.out), -2.0)
    A = A[:, :n]
    logc = np.log(np.maximum(terms.coef, 1e-300))

    def f(lam):
        z = A @ lam + logc
        m = z.max()
        w = np.exp(z - m)
        s = w.sum()
        p = w / s
        return m + np.log(s), A.T @ p, p

    def fun(lam):
        v, g, _ = f(lam)
        return v, g

    def hess(lam):
        _, _, p = f(lam)
        Ap = A.T @ p
        return (A.T * p) @ A - np.outer(Ap, Ap)

    res = minimize(fun, np.zeros(n) if lam0 is None else lam0, jac=True, hess=hess,
                   method="trust-exact", options={"gtol": 1e-12, "maxiter": 1000})
    return res.x


def closed_form_one_hidden(W1: torch.Tensor, W2: torch.Tensor) -> torch.Tensor:
    """Min-mass log-scales of a one-hidden-layer network (``W1 (H, D)``, ``W2 (O, H)``).

    The mass separates over units: ``a^2 ||W1[i]||^2 + a^-2 ||W2[:, i]||^2`` is smallest at
    ``a_i^4 = ||W2[:, i]||^2 / ||W1[i, :]||^2``, where both terms equal ``||W1[i]|| ||W2[:, i]||``.
    """
    return 0.25 * (W2.pow(2).sum(0).log() - W1.pow(2).sum(1).log())


def scales_from_log(lam: np.ndarray | torch.Tensor, terms: MassTerms, ps: PermutationSpec,
                    dtype=torch.float64) -> dict[str, torch.Tensor]:
    """Split the concatenated log-scales into per-perm scale vectors ``exp(lam)``."""
    lam = torch.as_tensor(np.asarray(lam), dtype=dtype)
    return {name: lam[off: off + ps.perm_sizes[name]].exp() for name, off in terms.offsets.items()}


def min_mass_element(params: Params, ps: PermutationSpec,
                     solver: MinMassSolver | None = None) -> GroupElement:
    """The pure scaling (identity permutations) taking one network to its min-mass point."""
    terms = mass_terms(params, ps)
    lam = solve_min_mass(terms, solver)
    perms = {name: torch.arange(n) for name, n in ps.perm_sizes.items()}
    return GroupElement(perms, None, scales_from_log(lam, terms, ps))


def min_mass(params: Params, ps: PermutationSpec, solver: MinMassSolver | None = None) -> Params:
    """The min-mass equivalent of one (unbatched) network: same function, smallest mass."""
    return apply_group_element(params, ps, min_mass_element(params, ps, solver))
