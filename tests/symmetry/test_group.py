"""Property tests for `symlib.symmetry`: invariance, group laws, canonicalisation, mode counts."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symlib.nn.mlp import Activation, MLPSpec, init_mlp, mlp_forward
from symlib.symmetry import (
    GroupElement,
    PermutationSpec,
    Symmetry,
    allowed_symmetries,
    apply_group_element,
    canonicalise,
    canonicalising_element,
    compose,
    discrete_group_order,
    identity_element,
    inverse,
    log10_permutation_group_order,
    mlp_permutation_spec,
    permutation_group_order,
    sample_group_element,
)

FEW = settings(max_examples=25, deadline=None)
ODD = (Activation.TANH, Activation.IDENTITY)
HOMOGENEOUS = (Activation.RELU, Activation.IDENTITY)


@st.composite
def nets(draw, activations=tuple(Activation)):
    """(spec, params, seed): 1-3 hidden layers of width 1-5, float64 weights."""
    widths = tuple(draw(st.lists(st.integers(1, 5), min_size=3, max_size=5)))
    spec = MLPSpec(widths, draw(st.sampled_from(activations)))
    seed = draw(st.integers(0, 2**31 - 1))
    return spec, init_mlp(spec, torch.Generator().manual_seed(seed), dtype=torch.float64), seed


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def inputs(spec: MLPSpec, seed: int) -> torch.Tensor:
    return torch.randn(16, spec.widths[0], generator=gen(seed), dtype=torch.float64)


def assert_params_close(a, b, rtol=1e-9, atol=1e-11):
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=rtol, atol=atol, msg=k)


def by_name(names, parts) -> dict[str, torch.Tensor]:
    return dict(zip(names, map(torch.tensor, parts), strict=True))


def flat(params) -> tuple[float, ...]:
    return tuple(torch.cat([params[k].reshape(-1) for k in sorted(params)]).tolist())


# --- the group and its action -------------------------------------------------------------


def test_allowed_symmetries():
    P, S, A = Symmetry.PERMUTATION, Symmetry.SIGN_FLIP, Symmetry.SCALING
    assert allowed_symmetries("relu") == {P, A}
    assert allowed_symmetries(Activation.TANH) == {P, S}
    assert allowed_symmetries("selu") == {P}
    assert allowed_symmetries("identity") == {P, S, A}


def test_mlp_permutation_spec():
    ps = mlp_permutation_spec(MLPSpec((3, 4, 5, 2)))
    assert isinstance(ps, PermutationSpec)
    assert ps.perm_to_axes == {"P1": (("W1", 0), ("b1", 0), ("W2", 1)),
                               "P2": (("W2", 0), ("b2", 0), ("W3", 1))}
    assert ps.incoming == {"P1": (("W1", 0), ("b1", 0)), "P2": (("W2", 0), ("b2", 0))}
    assert ps.perm_sizes == {"P1": 4, "P2": 5}


@FEW
@given(nets(), st.integers(0, 2**31 - 1))
def test_function_invariant_under_group(net, gseed):
    spec, w, seed = net
    g = sample_group_element(spec, gen(gseed))
    x = inputs(spec, seed)
    torch.testing.assert_close(mlp_forward(apply_group_element(w, spec, g), x, spec),
                               mlp_forward(w, x, spec), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("activation", list(Activation))
def test_sampling_respects_activation(activation):
    spec = MLPSpec((2, 4, 3, 1), activation)
    allowed = allowed_symmetries(activation)
    g = sample_group_element(spec, gen(0))
    assert (g.signs is not None) == (Symmetry.SIGN_FLIP in allowed)
    assert (g.scales is not None) == (Symmetry.SCALING in allowed)
    for flag, sym in (("signs", Symmetry.SIGN_FLIP), ("scales", Symmetry.SCALING)):
        if sym in allowed:
            assert getattr(sample_group_element(spec, gen(0), **{flag: False}), flag) is None
        else:
            with pytest.raises(ValueError, match=activation.value):
                sample_group_element(spec, gen(0), **{flag: True})
    for name, n in mlp_permutation_spec(spec).perm_sizes.items():
        assert sorted(g.perms[name].tolist()) == list(range(n))
        if g.signs is not None:
            assert set(g.signs[name].tolist()) <= {-1.0, 1.0}
        if g.scales is not None:
            assert (g.scales[name] > 0).all()


def test_sampling_reproducible_and_seed_dependent():
    spec = MLPSpec((2, 8, 8, 1), Activation.IDENTITY)
    a, b, c = (sample_group_element(spec, gen(s)) for s in (7, 7, 8))
    for part in ("perms", "signs", "scales"):
        for name in ("P1", "P2"):
            assert torch.equal(getattr(a, part)[name], getattr(b, part)[name])
    assert any(not torch.equal(a.perms[k], c.perms[k]) for k in a.perms)
    assert any(not torch.equal(a.scales[k], c.scales[k]) for k in a.scales)


@FEW
@given(nets(), st.integers(0, 2**31 - 1))
def test_group_laws(net, gseed):
    spec, w, _ = net
    g1 = sample_group_element(spec, gen(gseed))
    g2 = sample_group_element(spec, gen(gseed + 1))

    def act(g, p):
        return apply_group_element(p, spec, g)

    assert_params_close(act(identity_element(spec), w), w, rtol=0, atol=0)
    assert_params_close(act(inverse(g1, spec), act(g1, w)), w)
    assert_params_close(act(g1, act(inverse(g1, spec), w)), w)
    assert_params_close(act(compose(g2, g1, spec), w), act(g2, act(g1, w)))
    assert_params_close(act(compose(inverse(g1, spec), g1, spec), w), w)


@FEW
@given(nets(), st.integers(0, 2**31 - 1))
def test_batched_apply_matches_per_sample(net, gseed):
    spec, w, _ = net
    g1 = sample_group_element(spec, gen(gseed))
    g2 = sample_group_element(spec, gen(gseed + 1))
    w1 = apply_group_element(w, spec, g1)
    batch = {k: torch.stack([w[k], w1[k]]) for k in w}
    # one element for the whole batch, then one element per sample
    shared = apply_group_element(batch, spec, g2)
    stacked = GroupElement(*({k: torch.stack([d[k], e[k]]) for k in d} if d else None
                             for d, e in ((g1.perms, g2.perms), (g1.signs, g2.signs),
                                          (g1.scales, g2.scales))))
    per_sample = apply_group_element(batch, spec, stacked)
    for i, (gi, wi) in enumerate(((g2, w), (g2, w1))):
        assert_params_close({k: v[i] for k, v in shared.items()}, apply_group_element(wi, spec, gi))
    for i, (gi, wi) in enumerate(((g1, w), (g2, w1))):
        assert_params_close({k: v[i] for k, v in per_sample.items()},
                            apply_group_element(wi, spec, gi))
    canon = canonicalise(batch, spec)
    for i, wi in enumerate((w, w1)):
        assert_params_close({k: v[i] for k, v in canon.items()}, canonicalise(wi, spec))


@FEW
@given(nets(), st.integers(0, 2**31 - 1))
def test_params_not_mutated(net, gseed):
    spec, w, _ = net
    before = {k: v.clone() for k, v in w.items()}
    apply_group_element(w, spec, sample_group_element(spec, gen(gseed)))
    canonicalise(w, spec)
    canonicalising_element(w, spec)
    assert_params_close(w, before, rtol=0, atol=0)


# --- canonicalisation --------------------------------------------------------------------


@FEW
@given(nets(), st.integers(0, 2**31 - 1), st.floats(0.1, 10.0))
def test_canonicalise(net, gseed, target):
    spec, w, seed = net
    c = canonicalise(w, spec, target_norm=target)
    x = inputs(spec, seed)
    torch.testing.assert_close(mlp_forward(c, x, spec), mlp_forward(w, x, spec),
                               rtol=1e-10, atol=1e-12)
    assert_params_close(canonicalise(c, spec, target_norm=target), c)
    g = canonicalising_element(w, spec, target_norm=target)
    assert_params_close(apply_group_element(w, spec, g), c, rtol=0, atol=0)
    # every copy of the network on its orbit has the same canonical form
    h = sample_group_element(spec, gen(gseed))
    assert_params_close(canonicalise(apply_group_element(w, spec, h), spec, target_norm=target), c)
    for layer in range(1, len(spec.hidden_widths) + 1):
        first = c[f"W{layer}"][:, 0]
        assert (first[:-1] >= first[1:] - 1e-12).all()
        if spec.activation in ODD:
            assert (first >= 0).all()
        if spec.activation in HOMOGENEOUS:
            torch.testing.assert_close(torch.linalg.vector_norm(c[f"W{layer}"], dim=1),
                                       torch.full_like(first, target))


@FEW
@given(nets(activations=HOMOGENEOUS), st.integers(0, 2**31 - 1))
def test_canonicalise_without_normalising_keeps_scales(net, gseed):
    spec, w, _ = net
    c = canonicalise(w, spec, normalise=False)
    assert canonicalising_element(w, spec, normalise=False).scales is None
    # sorting and flipping only: the multiset of incoming row norms is unchanged
    for key in (f"W{layer}" for layer in range(1, len(spec.hidden_widths) + 1)):
        torch.testing.assert_close(torch.linalg.vector_norm(c[key], dim=1).sort().values,
                                   torch.linalg.vector_norm(w[key], dim=1).sort().values)
    g = sample_group_element(spec, gen(gseed), scales=False)
    assert_params_close(canonicalise(apply_group_element(w, spec, g), spec, normalise=False), c)


# --- counting modes ----------------------------------------------------------------------


@pytest.mark.parametrize("widths", [(2, 3, 2, 1), (1, 2, 3, 1), (3, 4, 2)])
@pytest.mark.parametrize("activation", list(Activation))
def test_mode_count_by_brute_force(widths, activation):
    """Every discrete symmetry gives a distinct parameter vector: orbit size = group order."""
    spec = MLPSpec(widths, activation)
    w = init_mlp(spec, gen(0), dtype=torch.float64)
    names, hidden = tuple(mlp_permutation_spec(spec).perm_sizes), spec.hidden_widths
    all_perms = itertools.product(*(itertools.permutations(range(n)) for n in hidden))
    with_signs = Symmetry.SIGN_FLIP in allowed_symmetries(activation)
    sign_sets = (itertools.product(*(itertools.product((-1.0, 1.0), repeat=n) for n in hidden))
                 if with_signs else [None])
    seen = set()
    for perms, signs in itertools.product(list(all_perms), list(sign_sets)):
        g = GroupElement(by_name(names, perms), None if signs is None else by_name(names, signs))
        seen.add(flat(apply_group_element(w, spec, g)))
    assert len(seen) == discrete_group_order(spec)
    assert discrete_group_order(spec) == permutation_group_order(spec) * (
        2 ** sum(hidden) if with_signs else 1)
    assert permutation_group_order(widths) == math.prod(math.factorial(n) for n in hidden)


@pytest.mark.parametrize("widths", [(2, 3, 2, 1), (1, 1), (784, 1000, 1000, 10), (5, 64, 3)])
def test_log10_group_order(widths):
    exact = permutation_group_order(widths)
    assert exact == permutation_group_order(MLPSpec(widths))
    assert log10_permutation_group_order(widths) == pytest.approx(math.log10(exact), rel=1e-12,
                                                                  abs=1e-12)


# --- chapter 2a additions: softmax shift, block / grouped / passive axes -------------------

import symlib.symmetry as symm


def test_softmax_additive_symmetry_and_centring():
    from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward

    spec = MLPSpec((3, 4, 5), "relu")
    p = init_mlp(spec, torch.Generator().manual_seed(0), dtype=torch.float64)
    x = torch.randn(7, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    shifted = symm.shift_output_bias(p, "b2", 3.7)
    probs = lambda q: torch.softmax(mlp_forward(q, x, spec), -1)
    torch.testing.assert_close(probs(shifted), probs(p))
    assert not torch.allclose(shifted["b2"], p["b2"])
    c1, c2 = symm.centre_output_bias(p, "b2"), symm.centre_output_bias(shifted, "b2")
    torch.testing.assert_close(c1["b2"], c2["b2"])
    assert abs(c1["b2"].mean().item()) < 1e-12
    batched = {k: torch.stack([v, v]) for k, v in p.items()}
    out = symm.shift_output_bias(batched, "b2", torch.tensor([0.0, 1.0], dtype=torch.float64))
    torch.testing.assert_close(out["b2"][1] - out["b2"][0], torch.ones(5, dtype=torch.float64))


def test_block_axis_moves_blocks_and_passive_axis_is_not_scaled():
    ps = symm.PermutationSpec(
        {"P": (("A", 0), ("B", 0, 3), ("C", 0, 3))}, {"P": 2}, {"P": (("A", 0),)},
        {"A": 1, "B": 1, "C": 1}, passive={"P": (("C", 0, 3),)},
    )
    params = {"A": torch.tensor([1.0, 2.0]), "B": torch.arange(6.0), "C": torch.arange(6.0)}
    g = symm.GroupElement({"P": torch.tensor([1, 0])}, None, {"P": torch.tensor([2.0, 4.0])})
    out = symm.apply_group_element(params, ps, g)
    torch.testing.assert_close(out["A"], torch.tensor([4.0, 4.0]))
    torch.testing.assert_close(out["B"], torch.tensor([1.5, 2.0, 2.5, 0.0, 0.25, 0.5]))
    torch.testing.assert_close(out["C"], torch.tensor([3.0, 4.0, 5.0, 0.0, 1.0, 2.0]))


def test_grouped_perms_stay_in_their_group():
    ps = symm.PermutationSpec({"P": (("A", 0),)}, {"P": 6}, {"P": (("A", 0),)}, {"A": 2},
                             groups={"P": 2})
    gen = torch.Generator().manual_seed(0)
    for _ in range(10):
        perm = symm.sample_spec_element(ps, gen).perms["P"]
        assert set(perm[:3].tolist()) == {0, 1, 2} and set(perm[3:].tolist()) == {3, 4, 5}
    a = torch.randn(6, 2, generator=gen)
    g = symm.canonicalising_element({"A": a}, ps, normalise=False)
    perm = g.perms["P"]
    assert set(perm[:3].tolist()) == {0, 1, 2}
    assert (a[perm[:3], 0].diff() <= 0).all() and (a[perm[3:], 0].diff() <= 0).all()
    assert symm.spec_log10_order(ps) == pytest.approx(2 * math.log10(6))


# --- canonicalisation of degenerate units ---------------------------------------------------

FIRST_ZERO, DEAD, ALL_ZERO = "first weight 0", "zero row, bias kept", "row and bias 0"


@st.composite
def nets_with_degenerate_units(draw):
    """(spec, params, seed, all-zero units per perm): ReLU / tanh / identity nets with fan-in >= 2
    where each hidden layer may hold one unit of each kind: first incoming weight exactly 0
    (the weight from the previous layer's canonical unit 0), zero weight row with its bias kept,
    and zero row and bias. One of a kind per layer: two would tie on every sort key (fan-in 1
    would make a "first weight 0" unit a second dead one)."""
    widths = (
        draw(st.integers(2, 4)),
        *draw(st.lists(st.integers(2, 5), min_size=1, max_size=3)),
        draw(st.integers(1, 3)),
    )
    spec = MLPSpec(widths, draw(st.sampled_from(ODD + HOMOGENEOUS)))
    seed = draw(st.integers(0, 2**31 - 1))
    w = init_mlp(spec, gen(seed), dtype=torch.float64)
    all_zero = {}
    for layer, n in enumerate(spec.hidden_widths, start=1):
        units = draw(st.permutations(range(n)))
        kinds = draw(
            st.lists(
                st.sampled_from((FIRST_ZERO, DEAD, ALL_ZERO, None)), min_size=n, max_size=n
            ).filter(lambda ks: all(ks.count(k) <= 1 for k in (FIRST_ZERO, DEAD, ALL_ZERO)))
        )
        # the previous layers are final, so their canonical unit 0 is known
        first = 0 if layer == 1 else int(canonicalising_element(w, spec).perms[f"P{layer - 1}"][0])
        for unit, kind in zip(units, kinds):
            if kind == FIRST_ZERO:
                w[f"W{layer}"][unit, first] = 0.0
            elif kind in (DEAD, ALL_ZERO):
                w[f"W{layer}"][unit] = 0.0
            if kind == ALL_ZERO:
                w[f"b{layer}"][unit] = 0.0
                all_zero[f"P{layer}"] = unit
    return spec, w, seed, all_zero


def _sparing(g: GroupElement, units: dict[str, int]) -> GroupElement:
    """``g`` with sign +1 and scale 1 on the given (old) units: new unit i is old perms[i]."""
    signs, scales = (None if d is None else dict(d) for d in (g.signs, g.scales))
    for name, unit in units.items():
        keep = g.perms[name] == unit
        for d in (signs, scales):
            if d is not None:
                d[name] = torch.where(keep, 1.0, d[name])
    return GroupElement(g.perms, signs, scales)


@settings(max_examples=60, deadline=None)
@given(nets_with_degenerate_units(), st.integers(0, 2**31 - 1), st.sampled_from([1.0, 2.5]))
def test_canonicalise_degenerate_units(net, gseed, target):
    spec, w, seed, all_zero = net
    c = canonicalise(w, spec, target_norm=target)
    x = inputs(spec, seed)
    torch.testing.assert_close(
        mlp_forward(c, x, spec), mlp_forward(w, x, spec), rtol=1e-10, atol=1e-12
    )
    assert_params_close(canonicalise(c, spec, target_norm=target), c)  # idempotent
    h = _sparing(sample_group_element(spec, gen(gseed)), all_zero)
    assert_params_close(canonicalise(apply_group_element(w, spec, h), spec, target_norm=target), c)
    for layer in range(1, len(spec.hidden_widths) + 1):
        wl, bl = c[f"W{layer}"], c[f"b{layer}"]
        dead = (wl == 0).all(dim=1)
        if spec.activation in ODD:  # the first non-zero incoming entry is positive
            for row in torch.cat([wl, bl[:, None]], dim=1):
                assert row[row != 0][:1].ge(0).all()
        if spec.activation in HOMOGENEOUS:  # live rows, then dead units' biases, at the target
            norms = torch.where(dead, bl.abs(), torch.linalg.vector_norm(wl, dim=1))
            torch.testing.assert_close(norms[norms > 0], torch.full_like(norms[norms > 0], target))


@pytest.mark.parametrize("target", [1.0, 2.5])
def test_all_zero_unit_is_left_alone(target):
    """A unit with zero row and bias is neither flipped nor rescaled: its outgoing weights keep
    their values (up to the sort), whatever the target norm."""
    for activation in (Activation.RELU, Activation.TANH):
        spec = MLPSpec((3, 4, 2), activation)
        w = init_mlp(spec, gen(0), dtype=torch.float64)
        w["W1"][2], w["b1"][2] = 0.0, 0.0
        g = canonicalising_element(w, spec, target_norm=target)
        new = int((g.perms["P1"] == 2).nonzero())
        for d in (g.signs, g.scales):
            if d is not None:
                assert d["P1"][new] == 1.0
        c = apply_group_element(w, spec, g)
        assert torch.equal(c["W2"][:, new], w["W2"][:, 2])
        assert (c["W1"][new] == 0).all() and c["b1"][new] == 0


def test_tanh_unit_with_first_weight_zero_and_its_flipped_copy():
    spec = MLPSpec((3, 4, 2), Activation.TANH)
    w = init_mlp(spec, gen(1), dtype=torch.float64)
    w["W1"][1, 0] = 0.0
    flipped = apply_group_element(
        w, spec, GroupElement({"P1": torch.arange(4)}, {"P1": torch.tensor([1.0, -1.0, 1.0, 1.0])})
    )
    assert_params_close(canonicalise(flipped, spec), canonicalise(w, spec), rtol=0, atol=0)


def test_dead_optunet_channel_canonicalises_idempotently_and_invariantly():
    from symlib.nn.convnets import init_optunet
    from symlib.symmetry import optunet_permutation_spec

    ps = optunet_permutation_spec()
    w = init_optunet(gen(0), dtype=torch.float64)
    w["W2"][7] = 0.0  # a dead conv2 channel: no bias, so no scale to fix
    w["W3"][1] = 0.0  # a dead head unit, its bias kept
    c = canonicalise(w, ps, target_norm=2.5)
    assert_params_close(canonicalise(c, ps, target_norm=2.5), c)
    for s in range(5):
        h = symm.sample_spec_element(ps, gen(s))
        # P1 moves conv2's blocks before P2 acts: find where the dead channel lands
        moved = apply_group_element(w, ps, GroupElement(h.perms))["W2"]
        h.scales["P2"][(moved.flatten(1) == 0).all(1)] = 1.0
        assert_params_close(canonicalise(apply_group_element(w, ps, h), ps, target_norm=2.5), c)
