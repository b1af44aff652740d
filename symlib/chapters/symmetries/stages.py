"""Chapter 0's compute: the stages, each a pure function of its profile fields and streams.

* ``invariance`` (:func:`invariance_table`): networks transformed by sampled group elements
  compute the same function although their weights moved far;
* ``brute`` (:func:`brute_force_counts`): the permutation-equivalent copies of a tiny net,
  enumerated, against the formula;
* ``modes`` (:func:`mode_count_table`): the number of permutation-equivalent modes of every
  architecture in the book;
* ``demo`` (:func:`canonicalisation_demo`): many transformed copies of one network, before and
  after canonicalisation (they collapse onto one point).

The stages take seconds, so they are not cached (``cache=False``). Each draws from its own named
streams (:mod:`symlib.book.streams`), so no two of them begin alike.
"""

from __future__ import annotations

import itertools
import math

import torch

from symlib import symmetry as sym
from symlib.book.chapter import Stage
from symlib.nn.mlp import Activation, MLPSpec, init_mlp, mlp_forward

__all__ = [
    "BOOK_ARCHITECTURES",
    "BRUTE_FORCE_NETS",
    "STAGES",
    "brute_force_counts",
    "brute_force_mode_count",
    "canonicalisation_demo",
    "invariance_table",
    "mode_count_table",
    "optunet_permutation_order",
]

# (chapter, network, widths, activation). OptuNet is a convnet: its count is made from its
# channel structure in `optunet_permutation_order`.
BOOK_ARCHITECTURES = (
    ("1 · Kurle et al.", "sinc regression MLP 1-32x5-1", (1, 32, 32, 32, 32, 32, 1), "selu"),
    ("2 · Laurent et al.", "toy perceptron 2-2-1", (2, 2, 1), "relu"),
    ("3 · Gelberg et al.", "MNIST MLP 784-30-10", (784, 30, 10), "relu"),
    ("4 · Pourzanjani et al.", "synthetic 2-2-1", (2, 2, 1), "relu"),
    ("4 · Pourzanjani et al.", "Boston housing 13-50-1", (13, 50, 1), "relu"),
    ("5 · Xiao et al.", "MNIST MLP 784-512-10", (784, 512, 10), "relu"),
)


def _float64_net(widths, activation, generator):
    spec = MLPSpec(tuple(widths), Activation(activation))
    return spec, init_mlp(spec, generator, dtype=torch.float64)


def _flat(params) -> torch.Tensor:
    return torch.cat([params[k].reshape(-1) for k in sorted(params)])


def invariance_table(config, generator: torch.Generator) -> list[dict]:
    """Max output change vs. weight change under sampled group elements, per activation.

    Every activation gets all the symmetries it admits (permutations always; sign flips when it
    is odd; positive scalings when it is positively homogeneous), in float64.
    """
    rows = []
    gen = generator
    for act in Activation:
        spec, params = _float64_net((3, 16, 12, 2), act, gen)
        x = torch.randn(config.n_inputs, 3, generator=gen, dtype=torch.float64)
        y = mlp_forward(params, x, spec)
        out_change, weight_change = 0.0, math.inf
        for _ in range(config.n_group_samples):
            g = sym.sample_group_element(spec, gen)
            moved = sym.apply_group_element(params, spec, g)
            out_change = max(out_change, (mlp_forward(moved, x, spec) - y).abs().max().item())
            weight_change = min(weight_change, ((_flat(moved) - _flat(params)).norm() / _flat(params).norm()).item())
        rows.append(
            {
                "activation": act.value,
                "symmetries": " + ".join(s.value for s in sorted(sym.allowed_symmetries(act), key=lambda s: s.value)),
                "group elements": config.n_group_samples,
                "max |f(g·w)(x) - f(w)(x)|": out_change,
                "min ||g·w - w|| / ||w||": weight_change,
            }
        )
    return rows


def brute_force_mode_count(widths, activation, generator: torch.Generator) -> int:
    """Distinct weight vectors among all permuted (and, if odd, sign-flipped) copies of one net
    drawn from ``generator``."""
    spec, params = _float64_net(widths, activation, generator)
    odd = sym.Symmetry.SIGN_FLIP in sym.allowed_symmetries(spec.activation)
    hidden = spec.hidden_widths
    perms = itertools.product(*(itertools.permutations(range(n)) for n in hidden))
    signs = itertools.product(*(itertools.product((1.0, -1.0), repeat=n) for n in hidden)) if odd else [None]
    seen = set()
    for p, s in itertools.product(list(perms), list(signs)):
        g = sym.GroupElement(
            perms={f"P{l + 1}": torch.tensor(pl) for l, pl in enumerate(p)},
            signs=None if s is None else {f"P{l + 1}": torch.tensor(sl, dtype=torch.float64) for l, sl in enumerate(s)},
        )
        seen.add(tuple(_flat(sym.apply_group_element(params, spec, g)).round(decimals=12).tolist()))
    return len(seen)


def optunet_permutation_order() -> int:
    """Permutation symmetries of OptuNet (Laurent et al.'s 355-parameter MNIST convnet).

    conv1 (1->2 channels) feeds a grouped conv2 (2->10, groups 2): each of conv1's channels
    feeds its own block of 5 conv2 channels, so conv2's channels may be permuted within their
    block (5!·5!), and the two blocks may be swapped together with conv1's two channels (x2);
    the 3 hidden units of the linear head permute freely (3!). Chapter 2a derives this from the
    permutation spec of the convnet itself.
    """
    return 2 * math.factorial(5) ** 2 * math.factorial(3)


def mode_count_table() -> list[dict]:
    """Number of permutation-equivalent modes of every architecture the book uses."""
    rows = []
    for chapter, name, widths, act in BOOK_ARCHITECTURES:
        spec = MLPSpec(widths, Activation(act))
        rows.append(_mode_row(chapter, name, spec.n_params, sym.log10_permutation_group_order(spec), act))
    rows.insert(2, _mode_row("2 · Laurent et al.", "OptuNet (MNIST convnet)", 355, math.log10(optunet_permutation_order()), "relu"))
    # f(x) = ReLU(w1 x) + ReLU(w2 x): output weights fixed to 1 and no biases, so the swap of
    # the two units is its only symmetry (no rescaling: the output weights cannot compensate).
    rows.insert(3, _mode_row("3 · Gelberg et al.", "two-parameter BNN ReLU(w1 x) + ReLU(w2 x)", 2, math.log10(2), "selu"))
    return rows


def _mode_row(chapter, name, n_params, log10_order, act):
    extra = sorted(s.value for s in sym.allowed_symmetries(act) - {sym.Symmetry.PERMUTATION})
    return {
        "chapter": chapter,
        "network": name,
        "parameters": n_params,
        "log10 #permutation modes": round(log10_order, 1),
        "#permutation modes": f"{10 ** log10_order:,.0f}" if log10_order < 9 else f"≈ 10^{log10_order:.0f}",
        "also": ", ".join(extra) if extra else "none",
    }


DEMO_ACTIVATIONS = (Activation.RELU, Activation.TANH)


def canonicalisation_demo(config, generators: dict[str, torch.Generator]) -> dict:
    """Transformed copies of one ReLU net and one tanh net, raw and canonicalised.

    Args:
        generators: one per activation of :data:`DEMO_ACTIVATIONS`, by its value.

    Returns per activation the flattened raw copies, the canonical copies, and their spreads.
    """
    out = {}
    for act in DEMO_ACTIVATIONS:
        gen = generators[act.value]
        spec, params = _float64_net(config.demo_widths, act, gen)
        raw, canon = [], []
        for _ in range(config.n_copies):
            copy = sym.apply_group_element(params, spec, sym.sample_group_element(spec, gen, log_scale_sd=0.5))
            raw.append(_flat(copy))
            canon.append(_flat(sym.canonicalise(copy, spec)))
        raw, canon = torch.stack(raw), torch.stack(canon)
        out[act.value] = {
            "raw": raw,
            "canonical": canon,
            "raw_spread": (raw - raw.mean(0)).norm(dim=1).max().item(),
            "canonical_spread": (canon - canon.mean(0)).norm(dim=1).max().item(),
            "distinct_raw": len({tuple(r.round(decimals=9).tolist()) for r in raw}),
            "distinct_canonical": len({tuple(r.round(decimals=9).tolist()) for r in canon}),
            "n_params": spec.n_params,
        }
    return out


BRUTE_FORCE_NETS = (((2, 3, 2, 1), "relu"), ((2, 3, 2, 1), "tanh"))
"""The tiny networks (widths, activation) whose copies :func:`brute_force_counts` enumerates."""


def brute_force_counts(generator: torch.Generator) -> dict[str, dict[str, int]]:
    """Per network of :data:`BRUTE_FORCE_NETS` (drawn from ``generator`` in turn): distinct copies
    enumerated, and the formula's count."""
    brute = {}
    for widths, act in BRUTE_FORCE_NETS:
        spec = MLPSpec(widths, Activation(act))
        brute[f"{act} {'-'.join(map(str, widths))}"] = {
            "brute force": brute_force_mode_count(widths, act, generator),
            "formula": sym.discrete_group_order(spec),
        }
    return brute


STAGES = (
    Stage("brute", lambda ctx: brute_force_counts(ctx.stream("nets").torch()), streams=("nets",), cache=False),
    Stage("invariance", lambda ctx: invariance_table(ctx.config, ctx.stream("nets-and-group").torch()),
          fields=("n_inputs", "n_group_samples"), streams=("nets-and-group",), cache=False),
    Stage("modes", lambda ctx: mode_count_table(), cache=False),
    Stage("demo", lambda ctx: canonicalisation_demo(ctx.config, {a.value: ctx.stream(a.value).torch() for a in DEMO_ACTIVATIONS}),
          fields=("demo_widths", "n_copies"), streams=tuple(a.value for a in DEMO_ACTIVATIONS), cache=False),
)
"""Chapter 0's stages; each draws from its own named streams, so their order moves no number."""
