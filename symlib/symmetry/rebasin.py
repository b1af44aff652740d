"""Rebasin (git re-basin, Ainsworth et al. 2023) and the number of transpositions (Xiao et al. 2023).

**Number of transpositions.** Every permutation is a product of disjoint cycles, and a cycle of
length ``k`` is a product of ``k - 1`` transpositions, which is minimal (Xiao et al., Sec. 2).
Hence

    NoT(P) = n - (number of cycles of P),

e.g. ``1->4, 2->1, 3->5, 4->2, 5->3`` is ``(1 4 2)(3 5)`` and has ``NoT = 5 - 2 = 3``
(:func:`number_of_transpositions`). :func:`permutation_with_not` draws a permutation with a
prescribed NoT, as Figure 2 of Xiao et al. needs.

**Weight matching** (:func:`weight_matching`, Ainsworth et al., Alg. 1). Find the element ``g`` of
the permutation group that brings network ``B`` closest to ``A``,

    max_g  sum_key <W_key^A, (g . W^B)_key>   (= min ||W^A - g . W^B||^2),

by coordinate descent over the hidden layers: fixing every permutation but ``P_l``, the objective
is linear in ``P_l``,

    max_{P_l} <P_l, C_l>,   C_l = sum_{(key, axis) touched by P_l} W_key^A[axis] (W_key^B[axis], other perms applied)^T,

(rows, biases and outgoing columns alike), an exact linear assignment problem solved by
``scipy.optimize.linear_sum_assignment``. Layers are visited in random order until no step
improves. With one hidden layer the first step is already the global optimum.

Convnets use the same step: every axis but the permuted one is flattened (a conv kernel's
input channels and spatial taps alike). An axis entry with a block size contributes the inner
product of whole blocks; where two perms act on one axis (OptuNet's channel swap and the perm
within each conv group), the objective stays linear in either: with ``g . W = Q_after P Q_before
W`` on that axis, ``<W^A, g . W^B> = <Q_after^-1 W^A, P (Q_before W^B)>``. A perm with
``groups`` is assigned group by group, so it never leaves its group.

**Activation matching** (:func:`activation_matching`, Ainsworth et al., Sec. 3.1): for each hidden
layer ``l`` independently, ``max_{P_l} <P_l, Z_l^A (Z_l^B)^T>`` with ``Z_l`` the post-activation
features ``f(h_l)`` of the units on a set of inputs (units x inputs).

The permutations are :class:`symlib.symmetry.GroupElement` objects in the convention of
:mod:`symlib.symmetry` (new unit ``i`` is old unit ``perms[name][i]``), so the matched copy of
``B`` is ``apply_group_element(params_b, spec, g)``. Everything is driven by a
:class:`~symlib.symmetry.PermutationSpec`, so MLPs of any depth and convnets share the code.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from symlib.nn.mlp import MLPSpec, Params, activation_fn
from symlib.symmetry.group import GroupElement, PermutationSpec, mlp_permutation_spec

__all__ = [
    "activation_matching",
    "cycles",
    "hidden_activations",
    "interpolate",
    "matching_objective",
    "number_of_transpositions",
    "permutation_with_not",
    "total_not",
    "weight_matching",
]


# --------------------------------------------------------------------------- NoT


def cycles(perm) -> list[tuple[int, ...]]:
    """Disjoint cycles of the map ``i -> perm[i]`` (0-based), fixed points included."""
    p = _as_index_array(perm)
    seen = np.zeros(len(p), dtype=bool)
    out = []
    for start in range(len(p)):
        if seen[start]:
            continue
        cycle, i = [], start
        while not seen[i]:
            seen[i] = True
            cycle.append(i)
            i = int(p[i])
        out.append(tuple(cycle))
    return out


def number_of_transpositions(perm) -> int:
    """Minimal number of pairwise swaps composing to ``perm``: ``n - #cycles`` (Xiao et al., Sec. 2).

    Args:
        perm: a permutation of ``0..n-1`` as a sequence, array or 1-D tensor.

    Raises:
        ValueError: ``perm`` is not a permutation.
    """
    return len(_as_index_array(perm)) - len(cycles(perm))


def total_not(g: GroupElement) -> int:
    """Sum of :func:`number_of_transpositions` over the hidden layers' permutations of ``g``."""
    return sum(number_of_transpositions(p) for p in g.perms.values())


def permutation_with_not(n: int, k: int, generator: torch.Generator) -> Tensor:
    """A random permutation of ``n`` items with exactly ``k`` transpositions (``0 <= k < n``).

    The items are shuffled and cut at ``n - k - 1`` uniformly chosen gaps into ``n - k`` runs;
    each run becomes one cycle. So the permutation has ``n - k`` cycles, i.e. ``NoT = k``.
    """
    if not 0 <= k < max(n, 1):
        raise ValueError(f"NoT must be in [0, {n - 1}] for n = {n}; got {k}")
    order = torch.randperm(n, generator=generator).tolist()
    n_cycles = n - k
    gaps = torch.randperm(n - 1, generator=generator)[: n_cycles - 1] + 1 if n > 1 else torch.zeros(0)
    cuts = [0, *sorted(int(c) for c in gaps), n]
    perm = list(range(n))
    for lo, hi in itertools.pairwise(cuts):
        run = order[lo:hi]
        for j, item in enumerate(run):
            perm[item] = run[(j + 1) % len(run)]
    return torch.tensor(perm, dtype=torch.long)


# --------------------------------------------------------------------------- weight matching


def weight_matching(
    params_a: Params,
    params_b: Params,
    spec: MLPSpec | PermutationSpec,
    *,
    max_iter: int = 100,
    init: GroupElement | None = None,
    generator: torch.Generator | None = None,
) -> GroupElement:
    """Permutations ``g`` maximising ``<W^A, g . W^B>`` by coordinate descent (module docstring).

    Args:
        params_a: the reference network (unbatched).
        params_b: the network to match; unbatched, or with leading batch axes (then every
            network is matched separately and the perms carry the batch axes).
        spec: the architecture or its permutation spec.
        max_iter: passes over all hidden layers at most.
        init: starting permutations (default: identity).
        generator: order in which layers are visited each pass (default: forward order). The
            result is a coordinate-wise optimum; with one hidden layer it is the global one.

    Returns:
        ``g`` with ``apply_group_element(params_b, spec, g)`` the matched copy of ``B``.

    Raises:
        ValueError: an axis entry of the spec does not fit its parameter (axis length not
            ``units * block``).
    """
    ps = _pspec(spec)
    nb = _n_batch(params_b, ps)
    if nb:
        return _batched(lambda b: weight_matching(params_a, b, ps, max_iter=max_iter, init=init,
                                                  generator=generator), params_b, ps, nb)
    names = list(ps.perm_to_axes)
    perms = {name: torch.arange(n) for name, n in ps.perm_sizes.items()}
    if init is not None:
        perms.update({k: v.clone() for k, v in init.perms.items()})
    a = {k: v.detach().to(torch.float64).cpu() for k, v in params_a.items()}
    b = {k: v.detach().to(torch.float64).cpu() for k, v in params_b.items()}
    _check_axis_sizes(a, ps)
    for _ in range(max_iter):
        improved = False
        order = (torch.randperm(len(names), generator=generator).tolist() if generator is not None
                 else range(len(names)))
        for idx in order:
            name = names[idx]
            cost = _weight_cost(a, b, ps, name, perms).numpy()
            cols = _assign(cost, ps.groups.get(name, 1))
            rows = np.arange(len(cols))
            old = cost[rows, perms[name].numpy()].sum()
            new = cost[rows, cols].sum()
            if new > old + 1e-12 * max(1.0, abs(old)):
                perms[name] = torch.as_tensor(cols, dtype=torch.long)
                improved = True
        if not improved or len(names) == 1:  # one layer: the first assignment is already exact
            break
    return GroupElement(perms)


def matching_objective(params_a: Params, params_b: Params, spec, g: GroupElement) -> float:
    """``sum_key <W_key^A, (g . W^B)_key>`` over every parameter a permutation touches."""
    from symlib.symmetry.group import apply_group_element

    ps = _pspec(spec)
    moved = apply_group_element(params_b, ps, g)
    keys = {entry[0] for axes in ps.perm_to_axes.values() for entry in axes}
    return float(sum((params_a[k].double() * moved[k].double()).sum() for k in keys))


# --------------------------------------------------------------------------- activation matching


def hidden_activations(params: Params, x: Tensor, spec: MLPSpec) -> list[Tensor]:
    """Post-activation features ``f(h_l)`` of hidden layers ``l = 1..L`` at inputs ``x``, each ``(n, N_l)``."""
    f = activation_fn(spec.activation)
    h, out = x, []
    for l in range(1, spec.n_layers):
        inp = h if l == 1 else f(h)
        h = inp @ params[f"W{l}"].transpose(-1, -2) + params[f"b{l}"]
        out.append(f(h))
    return out


def activation_matching(
    params_a: Params,
    params_b: Params,
    spec: MLPSpec,
    x: Tensor,
    *,
    reference_activations: list[Tensor] | None = None,
    chunk: int = 64,
) -> GroupElement:
    """Per hidden layer, the permutation maximising ``<P_l, Z_l^A (Z_l^B)^T>`` (module docstring).

    Args:
        params_a: the reference network (unbatched).
        params_b: the network(s) to match: unbatched, or with one leading batch axis ``S``
            (then the perms have shape ``(S, N_l)``).
        spec: the MLP.
        x: inputs ``(n, N_0)`` on which the features are compared (e.g. training images).
        reference_activations: ``hidden_activations(params_a, x, spec)`` if already computed.
        chunk: networks of a batch whose features are computed at once (bounds memory).
    """
    ps = mlp_permutation_spec(spec)
    with torch.no_grad():
        ref = reference_activations or hidden_activations(params_a, x, spec)
        ref = [z.to(torch.float64) for z in ref]
        nb = _n_batch(params_b, ps)
        if nb > 1:
            raise ValueError("activation_matching takes at most one batch axis")
        batch = {k: v.unsqueeze(0) for k, v in params_b.items()} if nb == 0 else params_b
        n_nets = batch["W1"].shape[0]
        perms: dict[str, list[Tensor]] = {name: [] for name in ps.perm_to_axes}
        feats = torch.func.vmap(hidden_activations, in_dims=(0, None, None))
        for lo in range(0, n_nets, chunk):
            part = {k: v[lo: lo + chunk] for k, v in batch.items()}
            zb = feats(part, x, spec)
            for layer, name in enumerate(ps.perm_to_axes):
                costs = torch.einsum("ni,snj->sij", ref[layer], zb[layer].to(torch.float64))
                for cost in costs.cpu().numpy():
                    _, cols = linear_sum_assignment(cost, maximize=True)
                    perms[name].append(torch.as_tensor(cols, dtype=torch.long))
    stacked = {name: torch.stack(p) for name, p in perms.items()}
    if nb == 0:
        stacked = {name: p[0] for name, p in stacked.items()}
    return GroupElement(stacked)


# --------------------------------------------------------------------------- paths


def interpolate(params_a: Params, params_b: Params, lambdas) -> Params:
    """The linear path ``W_lambda = (1 - lambda) W_a + lambda W_b``, with a leading lambda axis."""
    lam = torch.as_tensor(lambdas, dtype=params_a["W1"].dtype, device=params_a["W1"].device)
    out = {}
    for key, wa in params_a.items():
        shape = (-1,) + (1,) * wa.ndim
        out[key] = (1 - lam.reshape(shape)) * wa + lam.reshape(shape) * params_b[key]
    return out


# --------------------------------------------------------------------------- internals


def _as_index_array(perm) -> np.ndarray:
    p = perm.detach().cpu().numpy() if isinstance(perm, Tensor) else np.asarray(perm)
    p = p.astype(np.int64).reshape(-1)
    if not np.array_equal(np.sort(p), np.arange(len(p))):
        raise ValueError(f"not a permutation of 0..{len(p) - 1}: {p[:20].tolist()}...")
    return p


def _pspec(spec) -> PermutationSpec:
    return spec if isinstance(spec, PermutationSpec) else mlp_permutation_spec(spec)


def _n_batch(params: Params, ps: PermutationSpec) -> int:
    key = next(k for k in params if k in ps.param_ndims)
    return params[key].ndim - ps.param_ndims[key]


def _entries(ps: PermutationSpec, name: str) -> list[tuple[str, int, int]]:
    """``(key, axis, block)`` for every axis entry of ``name`` (block 1 where the spec has none)."""
    return [(e[0], e[1], e[2] if len(e) > 2 else 1) for e in ps.perm_to_axes[name]]


def _check_axis_sizes(params: Params, ps: PermutationSpec) -> None:
    for name, n in ps.perm_sizes.items():
        for key, axis, block in _entries(ps, name):
            size = params[key].shape[axis]
            if size != n * block:
                raise ValueError(
                    f"axis entry {(key, axis, block)} of perm {name!r}: axis has "
                    f"{size} entries, not {n} units x block {block}"
                )


def _weight_cost(a, b, ps, name, perms) -> Tensor:
    """``C_l``: sum over the axes touched by ``name`` of ``W^A[axis] (g' . W^B)[axis]^T``.

    ``g'`` is the current element without ``name``; rows and columns are whole blocks, every
    other axis is flattened. On an axis ``name`` shares with other perms, those listed before it
    act first and are applied to ``B``; those listed after act on its result, and are undone on
    ``A`` instead (in reverse order), which leaves the objective linear in ``name``.
    """
    n = ps.perm_sizes[name]
    names = list(ps.perm_to_axes)
    cost = torch.zeros(n, n, dtype=torch.float64)
    for key, axis, block in _entries(ps, name):
        wa, wb, after = a[key], b[key], []
        for other in names:
            for okey, oaxis, oblock in _entries(ps, other):
                if okey != key or (other == name and oaxis == axis):
                    continue
                # a perm of blocks, as the perm of the axis' entries it makes
                p = (perms[other].unsqueeze(-1) * oblock + torch.arange(oblock)).flatten()
                if oaxis != axis or names.index(other) < names.index(name):
                    wb = wb.index_select(oaxis, p)
                else:
                    after.append(p)
        for p in reversed(after):
            wa = wa.index_select(axis, torch.argsort(p))
        cost += wa.movedim(axis, 0).reshape(n, -1) @ wb.movedim(axis, 0).reshape(n, -1).T
    return cost


def _assign(cost: np.ndarray, n_groups: int) -> np.ndarray:
    """Maximising assignment, each of ``n_groups`` contiguous blocks of units onto itself."""
    size = len(cost) // n_groups
    cols = []
    for lo in range(0, len(cost), size):
        _, c = linear_sum_assignment(cost[lo : lo + size, lo : lo + size], maximize=True)
        cols.append(c + lo)
    return np.concatenate(cols)


def _batched(match_one, params_b: Params, ps: PermutationSpec, nb: int) -> GroupElement:
    first = next(iter(params_b.values()))
    batch_shape = first.shape[:nb]
    flat = {k: v.reshape(-1, *v.shape[nb:]) for k, v in params_b.items()}
    n_nets = next(iter(flat.values())).shape[0]
    results = [match_one({k: v[i] for k, v in flat.items()}) for i in range(n_nets)]
    perms = {name: torch.stack([r.perms[name] for r in results]).reshape(*batch_shape, -1)
             for name in ps.perm_to_axes}
    return GroupElement(perms)
