"""Weight-space symmetries of MLPs: permutations, sign flips and positive scalings.

Symmetries are described as data, in the spirit of git re-basin's ``PermutationSpec``
(Ainsworth et al., 2023): a :class:`PermutationSpec` lists, for every hidden layer, the weight
axes its permutation touches, so one code path serves MLPs and (later) convnets. A
:class:`GroupElement` holds one permutation per hidden layer plus optional per-unit signs and
scales. With ``pi = perms[name]``, ``s = signs[name]`` and ``a = scales[name]`` it acts as

    incoming axes:  w'[..., i, ...] = s_i * a_i * w[..., pi_i, ...]
    outgoing axes:  w'[..., i, ...] = s_i / a_i * w[..., pi_i, ...]

i.e. new unit ``i`` is old unit ``pi_i``, sign-flipped and rescaled. This leaves the network
function unchanged when the activation allows it (odd -> signs, positively homogeneous ->
scales; see :func:`allowed_symmetries`).

:func:`canonicalise` removes the symmetries (Laurent et al., 2024, "symmetry removal"): flip
signs, normalise incoming rows and sort units, one hidden layer after the other.

Beyond MLPs (chapter 2a): axis entries with a block size, passive axes and grouped perms let a
spec describe convolutions, grouped convolutions, batch norm and residual streams
(:mod:`symlib.nn.convnets` builds OptuNet's and ResNet-18's); :func:`sample_spec_element`,
:func:`spec_log10_order` and :func:`canonicalise` work on any spec. The softmax additive
symmetry is :func:`shift_output_bias` / :func:`centre_output_bias`; the min-mass scaling is in
:mod:`symlib.symmetry.minmass`.

Randomness is explicit: :func:`sample_group_element` draws only from the ``torch.Generator``
it is given.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from symlib.nn.mlp import Activation, MLPSpec, Params

__all__ = [
    "GroupElement",
    "PermutationSpec",
    "Symmetry",
    "allowed_symmetries",
    "apply_group_element",
    "canonicalise",
    "canonicalising_element",
    "centre_output_bias",
    "compose",
    "discrete_group_order",
    "identity_element",
    "inverse",
    "log10_permutation_group_order",
    "mlp_permutation_spec",
    "permutation_group_order",
    "sample_group_element",
    "sample_spec_element",
    "shift_output_bias",
    "spec_log10_order",
]


class Symmetry(str, enum.Enum):
    """Kinds of hidden-unit symmetry of a layered network."""

    PERMUTATION = "permutation"
    """Reorder the units of a hidden layer (with their incoming and outgoing weights)."""
    SIGN_FLIP = "sign_flip"
    """Negate a unit's incoming and outgoing weights: needs an odd activation, f(-x) = -f(x)."""
    SCALING = "scaling"
    """Multiply incoming weights by a > 0, outgoing by 1/a: needs f(a x) = a f(x) for a > 0."""


_ALLOWED = {
    Activation.RELU: frozenset({Symmetry.PERMUTATION, Symmetry.SCALING}),
    Activation.TANH: frozenset({Symmetry.PERMUTATION, Symmetry.SIGN_FLIP}),
    Activation.SELU: frozenset({Symmetry.PERMUTATION}),
    Activation.IDENTITY: frozenset(Symmetry),
}


def allowed_symmetries(activation: Activation | str) -> frozenset[Symmetry]:
    """The per-unit symmetries that leave an MLP with this activation's function unchanged."""
    return _ALLOWED[Activation(activation)]


@dataclass(frozen=True)
class PermutationSpec:
    """Which weight axes each hidden permutation touches (git re-basin style).

    Attributes:
        perm_to_axes: perm name -> ``((param key, axis), ...)``, every axis indexed by the
            permuted units. Perms must be listed in forward order (canonicalisation relies on it).
        perm_sizes: perm name -> number of units.
        incoming: perm name -> the subset of ``perm_to_axes[name]`` holding the units' incoming
            weights and biases (multiplied by ``s * a``); the rest are outgoing (``s / a``). The
            first entry must be the incoming weight: canonicalisation reads it.
        param_ndims: param key -> number of dims of one unbatched tensor, so leading batch axes
            can be detected. Keys left out are taken as unbatched.
        passive: perm name -> the subset of ``perm_to_axes[name]`` that is permuted but neither
            sign-flipped nor rescaled (batch-norm running statistics are rescaled by hand; the
            outputs of a grouped conv that a swap of its input groups moves).
        groups: perm name -> number of contiguous blocks of equal size that the perm must map
            onto themselves (the units feed, or are produced by, a grouped convolution with
            that many groups). Missing: 1, any permutation.

    An axis entry is ``(key, axis)`` or ``(key, axis, block)``: with a block size the perm of
    ``n`` units acts on an axis of ``n * block`` entries by moving contiguous blocks (a grouped
    conv's per-group output channels move with the input channel of their group). With such
    entries two perms may touch the same axis; :func:`apply_group_element` then applies them
    in the listed order (a semidirect product), which :func:`compose` and :func:`inverse`,
    written for perms on disjoint axes, do not model.
    """

    perm_to_axes: dict[str, tuple[tuple, ...]]
    perm_sizes: dict[str, int]
    incoming: dict[str, tuple[tuple, ...]]
    param_ndims: dict[str, int] = field(default_factory=dict)
    passive: dict[str, tuple[tuple, ...]] = field(default_factory=dict)
    groups: dict[str, int] = field(default_factory=dict)


def mlp_permutation_spec(spec: MLPSpec) -> PermutationSpec:
    """Perms ``P1..PL``: ``P_l`` touches ``W_l`` axis 0, ``b_l`` axis 0 (incoming), ``W_{l+1}``
    axis 1 (outgoing). The output layer is never permuted."""
    axes, sizes, incoming = {}, {}, {}
    for layer, n in enumerate(spec.hidden_widths, start=1):
        name = f"P{layer}"
        incoming[name] = ((f"W{layer}", 0), (f"b{layer}", 0))
        axes[name] = incoming[name] + ((f"W{layer + 1}", 1),)
        sizes[name] = n
    ndims = {key: len(shape) for key, shape in spec.shapes().items()}
    return PermutationSpec(axes, sizes, incoming, ndims)


@dataclass(frozen=True)
class GroupElement:
    """One element of the hidden-unit symmetry group, per perm name.

    Attributes:
        perms: LongTensor per perm name; new unit ``i`` is old unit ``perms[name][i]``.
        signs: +-1 per (new) unit, for odd activations; ``None`` means all +1.
        scales: > 0 per (new) unit, for positively homogeneous activations; ``None`` means all 1.

    Tensors may carry leading batch axes matching those of the params (one element per sample).
    Names missing from a dict act as the identity.
    """

    perms: dict[str, torch.Tensor]
    signs: dict[str, torch.Tensor] | None = None
    scales: dict[str, torch.Tensor] | None = None


def identity_element(spec: MLPSpec | PermutationSpec) -> GroupElement:
    """The identity: every perm is ``arange``, no signs, no scales."""
    return GroupElement({k: torch.arange(n) for k, n in _pspec(spec).perm_sizes.items()})


def sample_group_element(
    spec: MLPSpec,
    generator: torch.Generator,
    *,
    signs: bool | None = None,
    scales: bool | None = None,
    log_scale_sd: float = 1.0,
) -> GroupElement:
    """Uniform random permutations, plus random signs / log-normal scales.

    Args:
        spec: the architecture; its activation decides which symmetries exist.
        generator: the only source of randomness.
        signs: include uniform +-1 signs. ``None``: exactly when the activation is odd.
        scales: include scales ``exp(log_scale_sd * z)``, ``z ~ N(0, 1)``. ``None``: exactly
            when the activation is positively homogeneous.
        log_scale_sd: standard deviation of ``log a``.

    Raises:
        ValueError: ``signs`` or ``scales`` is True but the activation lacks that symmetry.
    """
    allowed = allowed_symmetries(spec.activation)
    want = {}
    for sym, flag in ((Symmetry.SIGN_FLIP, signs), (Symmetry.SCALING, scales)):
        if flag and sym not in allowed:
            raise ValueError(f"activation {spec.activation.value!r} has no {sym.value} symmetry")
        want[sym] = sym in allowed if flag is None else flag
    perms, sgn, scl = {}, {}, {}
    for name, n in mlp_permutation_spec(spec).perm_sizes.items():
        perms[name] = torch.randperm(n, generator=generator)
        if want[Symmetry.SIGN_FLIP]:
            bits = torch.randint(0, 2, (n,), generator=generator)
            sgn[name] = (2 * bits - 1).to(torch.float64)
        if want[Symmetry.SCALING]:
            z = torch.randn(n, generator=generator, dtype=torch.float64)
            scl[name] = torch.exp(log_scale_sd * z)
    return GroupElement(perms, sgn or None, scl or None)


def apply_group_element(
    params: Params, spec: MLPSpec | PermutationSpec, g: GroupElement
) -> Params:
    """Transform the weights by ``g`` (formula in the module docstring).

    Returns a new dict and never mutates ``params``; tensors no perm touches are shared, not
    copied. Params may carry leading batch axes; ``g`` may be unbatched (same element for every
    sample) or batched like the params.
    """
    ps = _pspec(spec)
    out = dict(params)
    for name, axes in ps.perm_to_axes.items():
        perm, sign, scale = _get(g.perms, name), _get(g.signs, name), _get(g.scales, name)
        if perm is None and sign is None and scale is None:
            continue
        incoming = set(ps.incoming.get(name, ()))
        passive = set(ps.passive.get(name, ()))
        for entry in axes:
            key, axis = entry[0], entry[1]
            block = entry[2] if len(entry) > 2 else 1
            t = out[key]
            nb = _n_batch(t, key, ps)
            dim = nb + axis
            if perm is not None:
                p = _expand_blocks(perm.to(t.device), block)
                t = (t.index_select(dim, p) if p.ndim == 1
                     else torch.take_along_dim(t, _along(p, t, nb, dim), dim))
            factor = None if entry in passive else _factor(sign, scale, entry in incoming, t)
            if factor is not None:
                factor = factor.repeat_interleave(block, dim=-1) if block > 1 else factor
            out[key] = t if factor is None else t * _along(factor, t, nb, dim)
    return out


def compose(
    g2: GroupElement, g1: GroupElement, spec: MLPSpec | PermutationSpec
) -> GroupElement:
    """The element ``g2 g1``: ``apply(compose(g2, g1)) == apply(g2, apply(g1, .))``.

    With ``w1[i] = d1[i] w[pi1[i]]`` and ``w2[i] = d2[i] w1[pi2[i]]``: ``pi = pi1[pi2]``,
    ``d = d2 * d1[pi2]`` (separately for signs and scales).
    """
    perms, signs, scales = {}, {}, {}
    for name, n in _pspec(spec).perm_sizes.items():
        p1, p2 = _get(g1.perms, name), _get(g2.perms, name)
        p1 = torch.arange(n) if p1 is None else p1
        p2 = torch.arange(n, device=p1.device) if p2 is None else p2
        perms[name] = _take(p1, p2)
        for out, d1, d2 in ((signs, g1.signs, g2.signs), (scales, g1.scales, g2.scales)):
            a1, a2 = _get(d1, name), _get(d2, name)
            if a1 is not None and a2 is not None:
                out[name] = a2 * _take(a1, p2)
            elif a1 is not None:
                out[name] = _take(a1, p2)
            elif a2 is not None:
                out[name] = a2
    return GroupElement(perms, signs or None, scales or None)


def inverse(g: GroupElement, spec: MLPSpec | PermutationSpec) -> GroupElement:
    """The element undoing ``g``: ``pi^-1 = argsort(pi)``, ``d^-1 = 1 / d[pi^-1]``."""
    perms, signs, scales = {}, {}, {}
    for name, n in _pspec(spec).perm_sizes.items():
        p = _get(g.perms, name)
        inv = torch.arange(n) if p is None else torch.argsort(p, dim=-1)
        perms[name] = inv
        if (s := _get(g.signs, name)) is not None:
            signs[name] = _take(s, inv)  # 1 / s == s for s = +-1
        if (a := _get(g.scales, name)) is not None:
            scales[name] = 1.0 / _take(a, inv)
    return GroupElement(perms, signs or None, scales or None)


def permutation_group_order(widths_or_spec: MLPSpec | Sequence[int]) -> int:
    """``prod_l N_l!`` over hidden layers, as an exact int.

    Args:
        widths_or_spec: an :class:`MLPSpec` or its full ``widths`` ``(N_0, ..., N_{L+1})``.
    """
    return math.prod(math.factorial(n) for n in _hidden(widths_or_spec))


def log10_permutation_group_order(widths_or_spec: MLPSpec | Sequence[int]) -> float:
    """``log10 prod_l N_l!`` via ``lgamma``, usable where the int would be astronomically big."""
    return sum(math.lgamma(n + 1) for n in _hidden(widths_or_spec)) / math.log(10)


def discrete_group_order(spec: MLPSpec) -> int:
    """Size of the finite symmetry group: permutations, times ``2^(sum_l N_l)`` sign patterns
    when the activation is odd. Scalings are continuous and not counted."""
    order = permutation_group_order(spec)
    if Symmetry.SIGN_FLIP in allowed_symmetries(spec.activation):
        order *= 2 ** sum(spec.hidden_widths)
    return order


def canonicalise(
    params: Params, spec: MLPSpec | PermutationSpec, *, normalise: bool = True,
    target_norm: float = 1.0,
) -> Params:
    """One representative per symmetry orbit (Laurent et al., 2024, "symmetry removal").

    Hidden layers ``l = 1..L`` are processed in order, each on the network already transformed
    by the earlier layers' steps:

    1. if the activation is odd, flip each unit so its first non-zero incoming entry is
       positive: ``W_l[i, 0]`` for an ordinary unit; if that is 0, the next non-zero entry of
       the row, then the bias;
    2. if it is positively homogeneous and ``normalise``, rescale each unit so its incoming
       weight row ``W_l[i, :]`` has norm ``target_norm`` (the bias is rescaled with it but not
       counted in the norm), compensating in ``W_{l+1}[:, i]``. A dead unit (zero row) is
       rescaled so its bias has magnitude ``target_norm`` instead;
    3. sort units by descending first incoming weight, biases and outgoing columns following.

    The output layer keeps its order. For other weight shapes (e.g. conv ``(out, in, kh, kw)``)
    the "first incoming weight" is the first entry of the flattened non-unit axes, and "the
    bias" is every other incoming entry of the spec. Ties in it are broken by the bias (the next
    incoming entry), then by the current order. They are exact and certain for a normalised layer
    of fan-in 1 (every key is +-1) and among dead units (key 0; a rescaled dead unit's bias key is
    +-1); otherwise they have measure zero. A tie the bias cannot break leaves the result
    dependent on the input's order. Batched params are canonicalised sample by sample.

    A unit whose incoming weights and bias are all zero outputs ``f(0) = 0`` whatever its
    outgoing weights. It is left alone: not flipped, not rescaled (its outgoing weights keep
    their scale for any ``target_norm``), and sorted with keys 0. Its sign and scale cannot be
    fixed from its outgoing weights: the next layer's steps permute, flip and rescale those
    afterwards, so such a rule would break idempotence. Hence ``canonicalise`` is idempotent for
    every network, and returns one point for every copy ``g . params`` whose ``g`` leaves the
    sign and scale of all-zero units alone, provided no two units of a layer tie on all keys
    (e.g. two all-zero units, or two dead units whose biases end up equal: under ReLU when they
    have the same sign, with an activation that is odd and homogeneous always).

    ``spec`` may also be a :class:`PermutationSpec` (convnets, :mod:`symlib.nn.convnets`); the
    network is then taken to be a ReLU network (no sign flips; rescaling when ``normalise``),
    and perms with ``groups`` are sorted within each group.
    """
    return apply_group_element(
        params, spec, canonicalising_element(params, spec, normalise=normalise,
                                             target_norm=target_norm))


def canonicalising_element(
    params: Params, spec: MLPSpec | PermutationSpec, *, normalise: bool = True,
    target_norm: float = 1.0,
) -> GroupElement:
    """The ``g`` with ``apply_group_element(params, spec, g) == canonicalise(params, spec)``."""
    if isinstance(spec, PermutationSpec):
        return _canonicalising_element(params, spec, flip=False, rescale=normalise,
                                       target_norm=target_norm)
    allowed = allowed_symmetries(spec.activation)
    return _canonicalising_element(
        params,
        mlp_permutation_spec(spec),
        flip=Symmetry.SIGN_FLIP in allowed,
        rescale=normalise and Symmetry.SCALING in allowed,
        target_norm=target_norm,
    )


def spec_log10_order(ps: PermutationSpec) -> float:
    """``log10`` of the number of permutation symmetries a :class:`PermutationSpec` allows.

    A perm of ``n`` units with ``G`` groups contributes ``((n / G)!)^G`` (Laurent et al.,
    App. D.4.2); a swap of whole groups is a separate perm in the spec (OptuNet's conv1).
    """
    total = 0.0
    for name, n in ps.perm_sizes.items():
        g = ps.groups.get(name, 1)
        total += g * math.lgamma(n // g + 1)
    return total / math.log(10)


def sample_spec_element(
    ps: PermutationSpec, generator: torch.Generator, *, scales: bool = True,
    log_scale_sd: float = 1.0, dtype: torch.dtype = torch.float64,
) -> GroupElement:
    """A uniformly random permutation per perm (within groups) and, optionally, log-normal
    scales ``exp(log_scale_sd * z)``, for any :class:`PermutationSpec` (ReLU networks)."""
    perms, scl = {}, {}
    for name, n in ps.perm_sizes.items():
        g = ps.groups.get(name, 1)
        size = n // g
        perms[name] = torch.cat([torch.randperm(size, generator=generator) + k * size
                                 for k in range(g)])
        if scales:
            scl[name] = torch.exp(log_scale_sd * torch.randn(n, generator=generator, dtype=dtype))
    return GroupElement(perms, None, scl or None)


def shift_output_bias(params: Params, key: str, c: float | torch.Tensor) -> Params:
    """Softmax additive symmetry: add ``c`` to every output logit's bias ``params[key]``.

    ``softmax(z + c 1) = softmax(z)``, so the predictive distribution is unchanged. ``c`` may
    carry the params' batch axes (one shift per sample, broadcast over the last axis).
    """
    out = dict(params)
    c = torch.as_tensor(c, dtype=params[key].dtype, device=params[key].device)
    out[key] = params[key] + c.unsqueeze(-1) if c.ndim else params[key] + c
    return out


def centre_output_bias(params: Params, key: str) -> Params:
    """Remove the softmax additive symmetry: shift the output biases to mean zero."""
    return shift_output_bias(params, key, -params[key].mean(-1))


# --- internals ---------------------------------------------------------------------------


def _canonicalising_element(
    params: Params, ps: PermutationSpec, *, flip: bool, rescale: bool, target_norm: float
) -> GroupElement:
    cur = dict(params)
    perms, signs, scales = {}, {}, {}
    for name in ps.perm_to_axes:
        entries = [_unit_rows(cur, key, axis, ps) for key, axis in ps.incoming[name]]
        rows = entries[0]  # (*batch, units, fan_in): the incoming weight
        first = rows[..., 0]
        incoming = torch.cat(entries, -1)  # all of a unit's incoming entries, its row first
        s = _sign_of_first_nonzero(incoming) if flip else torch.ones_like(first)
        norm = torch.linalg.vector_norm(rows, dim=-1) if rescale else torch.ones_like(first)
        if rescale:  # a dead unit (zero row) takes its scale from its other incoming entries
            rest = torch.linalg.vector_norm(incoming[..., rows.shape[-1] :], dim=-1)
            norm = torch.where(norm > 0, norm, rest)
        # a unit with no non-zero incoming entry has no scale to fix: leave it alone (factor 1)
        live = norm > 0
        norm = torch.where(live, norm, torch.ones_like(norm))
        # Sort keys are computed as s * x / norm, not s * (target / norm) * x: with fan-in 1 the
        # former is exactly +-1 for every unit, so the tie is exact and the bias (next incoming
        # entry) breaks it the same way on every copy of the network.
        keys = [s * e[..., 0] / norm for e in entries]
        n_groups = ps.groups.get(name, 1)
        if n_groups > 1:  # grouped conv: sort within each group, groups stay in place
            n = rows.shape[-2]
            group = torch.arange(n, device=rows.device) // (n // n_groups)
            keys = [(-group).to(rows.dtype).expand_as(first)] + keys
        perm = _lexsort_descending(keys)
        perms[name] = perm
        if flip:
            signs[name] = torch.take_along_dim(s, perm, -1)
        if rescale:
            factor = torch.where(live, target_norm / norm, torch.ones_like(norm))
            scales[name] = torch.take_along_dim(factor, perm, -1)
        step = GroupElement({name: perm}, _pick(signs, name), _pick(scales, name))
        # the next layer's "first incoming weight" refers to this layer's canonical unit 0
        cur = apply_group_element(cur, ps, step)
    return GroupElement(perms, signs or None, scales or None)


def _sign_of_first_nonzero(x: torch.Tensor) -> torch.Tensor:
    """-1 where the first non-zero entry along the last axis is negative, else +1 (all zero)."""
    lead = x.take_along_dim((x != 0).to(x.dtype).argmax(-1, keepdim=True), -1).squeeze(-1)
    return torch.where(lead < 0, -1.0, 1.0).to(x.dtype)


def _unit_rows(params: Params, key: str, axis: int, ps: PermutationSpec) -> torch.Tensor:
    """``params[key]`` as ``(*batch, units, rest)``, the unit axis first, the others flattened."""
    t = params[key]
    nb = _n_batch(t, key, ps)
    rest = math.prod(t.shape[nb:]) // t.shape[nb + axis]  # explicit: works for 0 samples too
    return t.movedim(nb + axis, nb).reshape(*t.shape[:nb], t.shape[nb + axis], rest)


def _lexsort_descending(keys: list[torch.Tensor]) -> torch.Tensor:
    """Order sorting by ``keys[0]`` descending, ties broken by ``keys[1]``, and so on."""
    order = torch.argsort(keys[-1], dim=-1, descending=True, stable=True)
    for k in reversed(keys[:-1]):
        order = order.take_along_dim(
            torch.argsort(k.take_along_dim(order, -1), dim=-1, descending=True, stable=True), -1)
    return order


def _expand_blocks(perm: torch.Tensor, block: int) -> torch.Tensor:
    """Perm of ``n`` blocks -> perm of ``n * block`` entries moving whole blocks."""
    if block == 1:
        return perm
    offs = torch.arange(block, device=perm.device)
    return (perm.unsqueeze(-1) * block + offs).flatten(-2)


def _pspec(spec: MLPSpec | PermutationSpec) -> PermutationSpec:
    return spec if isinstance(spec, PermutationSpec) else mlp_permutation_spec(spec)


def _hidden(widths_or_spec: MLPSpec | Sequence[int]) -> tuple[int, ...]:
    if isinstance(widths_or_spec, MLPSpec):
        return widths_or_spec.hidden_widths
    return tuple(int(n) for n in widths_or_spec)[1:-1]


def _get(d: dict[str, torch.Tensor] | None, name: str) -> torch.Tensor | None:
    return None if d is None else d.get(name)


def _pick(d: dict[str, torch.Tensor], name: str) -> dict[str, torch.Tensor] | None:
    return {name: d[name]} if name in d else None


def _n_batch(t: torch.Tensor, key: str, ps: PermutationSpec) -> int:
    return t.ndim - ps.param_ndims.get(key, t.ndim)


def _factor(sign, scale, incoming: bool, t: torch.Tensor) -> torch.Tensor | None:
    """Per-unit multiplier: ``s * a`` on incoming axes, ``s / a`` on outgoing ones."""
    f = None if sign is None else sign.to(t)
    if scale is not None:
        scale = scale.to(t) if incoming else 1.0 / scale.to(t)
        f = scale if f is None else f * scale
    return f


def _along(v: torch.Tensor, t: torch.Tensor, nb: int, dim: int) -> torch.Tensor:
    """Reshape per-unit ``v`` of shape ``(*batch, N)`` to broadcast against ``t`` along ``dim``."""
    shape = [1] * t.ndim
    batch = v.shape[:-1]
    if len(batch) > nb:
        raise ValueError(f"group element has {len(batch)} batch dims, params only {nb}")
    shape[nb - len(batch): nb] = batch
    shape[dim] = v.shape[-1]
    return v.reshape(shape)


def _take(v: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``v[..., idx]`` along the last axis, broadcasting batch axes of either argument."""
    while v.ndim < idx.ndim:
        v = v.unsqueeze(0)
    while idx.ndim < v.ndim:
        idx = idx.unsqueeze(0)
    return torch.take_along_dim(v, idx.to(v.device), -1)
