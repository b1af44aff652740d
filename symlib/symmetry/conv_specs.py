"""Permutation specs of the convolutional networks of :mod:`symlib.nn.convnets`.

The symmetries of OptuNet and ResNet-18 as data (:class:`~symlib.symmetry.PermutationSpec`),
so the same code that permutes, rescales and canonicalises MLPs serves them (App. D.4 of
Laurent et al., 2024).
"""

from __future__ import annotations

from symlib.nn.convnets import OPTUNET_GROUPS, OPTUNET_SHAPES, ResNetSpec
from symlib.symmetry.group import PermutationSpec

__all__ = ["optunet_permutation_spec", "resnet_permutation_spec"]


def optunet_permutation_spec() -> PermutationSpec:
    """OptuNet's symmetries (ReLU: permutations and positive scalings).

    * ``P1``: conv1's 2 channels. Each feeds its own group of conv2, so swapping them moves
      conv2's two blocks of 5 output channels (and the matching columns of ``W3``) along.
    * ``P2``: conv2's 10 channels, permuted within their group only (App. D.4.2).
    * ``P3``: the 3 hidden units of the linear head.

    Order ``2 * (5!)^2 * 3! = 172,800``.
    """
    axes = {
        "P1": (("W1", 0), ("W2", 0, 5), ("W3", 1, 5)),
        "P2": (("W2", 0), ("W3", 1)),
        "P3": (("W3", 0), ("b3", 0), ("W4", 1)),
    }
    incoming = {"P1": (("W1", 0),), "P2": (("W2", 0),), "P3": (("W3", 0), ("b3", 0))}
    passive = {"P1": (("W3", 1, 5),)}  # conv2's outputs move with their group, unscaled
    return PermutationSpec(
        axes, {"P1": 2, "P2": 10, "P3": 3}, incoming,
        {k: len(s) for k, s in OPTUNET_SHAPES.items()}, passive, {"P2": OPTUNET_GROUPS},
    )


def resnet_permutation_spec(spec: ResNetSpec = ResNetSpec()) -> PermutationSpec:  # noqa: B008 (frozen)
    """Permutations (and scalings through batch norm) of a ResNet.

    Residual connections tie every layer writing into a stage's stream to one permutation
    (App. D.4.4): ``S{s}`` covers the stem or the stage's first shortcut and every block's
    second conv. Each block's inner channels get their own ``I{s}.{b}``. A unit's scale acts
    on its batch-norm ``weight``/``bias`` (incoming) and the next convs' input axis (outgoing);
    the conv feeding a batch norm and the running statistics are only permuted (the
    normalisation makes the conv's own scale a separate symmetry, not modelled here).
    """
    shapes = spec.shapes()
    axes, sizes, incoming, passive = {}, {}, {}, {}

    def writer(name):
        inc = ((f"{name}.bn.weight", 0), (f"{name}.bn.bias", 0))
        pas = ((f"{name}.conv", 0), (f"{name}.bn.mean", 0), (f"{name}.bn.var", 0))
        return inc, pas

    def add(perm, n, writers, readers):
        inc, pas = (), ()
        for w in writers:
            i, p = writer(w)
            inc, pas = inc + i, pas + p
        axes[perm], sizes[perm] = inc + pas + tuple(readers), n
        incoming[perm], passive[perm] = inc, pas

    stream_writers, stream_readers = ["stem"], []
    for s, (w, nb) in enumerate(zip(spec.widths, spec.blocks)):
        for b in range(nb):
            pre = f"s{s}.b{b}"
            down = f"{pre}.down.conv" in shapes
            stream_readers.append((f"{pre}.c1.conv", 1))
            if down:
                stream_readers.append((f"{pre}.down.conv", 1))
                add(f"S{s - 1}" if s else "S_stem", shapes[f"{pre}.c1.conv"][1],
                    stream_writers, stream_readers)
                stream_writers, stream_readers = [f"{pre}.down"], []
            add(f"I{s}.{b}", w, [f"{pre}.c1"], [(f"{pre}.c2.conv", 1)])
            stream_writers.append(f"{pre}.c2")
    stream_readers.append(("fc.weight", 1))
    add(f"S{len(spec.widths) - 1}", spec.widths[-1], stream_writers, stream_readers)
    # forward order for canonicalisation: streams before the blocks reading them is not
    # needed for counting; keep insertion order (stem stream first).
    return PermutationSpec(axes, sizes, incoming, {k: len(v) for k, v in shapes.items()}, passive)
