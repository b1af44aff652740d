"""Networks as pure functions of a parameter dictionary.

Every chapter writes its MLPs in the pre-activation form of Kurle et al. (2021, Eq. 1):

    h_0 = x,    h_l = W_l f_l(h_{l-1}) + b_l,    f_1 = id,  f_l = act for l >= 2,

so hidden layer ``l`` (1 <= l <= L) has ``N_l`` units and the network output is ``h_{L+1}``.
Parameters live in a plain ``dict[str, Tensor]`` with keys ``W1, b1, ..., W{L+1}, b{L+1}``
(``W_l`` of shape ``(N_l, N_{l-1})``). Because the forward pass is a pure function of that
dictionary, one architecture serves point estimates, weight samples and ``torch.func.vmap``-ed
ensembles alike: give every tensor a leading batch axis and vmap :func:`mlp_forward`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch

Params = dict[str, torch.Tensor]

__all__ = ["Activation", "MLPSpec", "Params", "activation_fn", "init_mlp", "mlp_forward"]


class Activation(str, enum.Enum):
    """Element-wise non-linearities; which weight-space symmetries each one has is in `symmetry`."""

    RELU = "relu"
    """max(0, x): positively homogeneous, so each hidden unit also has a positive scaling symmetry."""
    TANH = "tanh"
    """Odd, so each hidden unit also has a sign-flip symmetry."""
    SELU = "selu"
    """Neither odd nor homogeneous: permutations only (the chapter-1 network)."""
    IDENTITY = "identity"
    """Linear: any invertible map mixes units; we use only permutations, signs and scalings."""


def activation_fn(act: Activation | str):
    act = Activation(act)
    return {
        Activation.RELU: torch.relu,
        Activation.TANH: torch.tanh,
        Activation.SELU: torch.selu,
        Activation.IDENTITY: lambda x: x,
    }[act]


@dataclass(frozen=True)
class MLPSpec:
    """Architecture of a pre-activation MLP.

    Args:
        widths: ``(N_0, N_1, ..., N_L, N_{L+1})``: input size, hidden widths, output size.
        activation: the non-linearity ``f_l`` applied before every layer but the first.
    """

    widths: tuple[int, ...]
    activation: Activation = Activation.RELU

    def __post_init__(self):
        if len(self.widths) < 2 or any(int(w) < 1 for w in self.widths):
            raise ValueError(f"widths must hold at least input and output sizes >= 1, got {self.widths}")
        object.__setattr__(self, "widths", tuple(int(w) for w in self.widths))
        object.__setattr__(self, "activation", Activation(self.activation))

    @property
    def n_layers(self) -> int:
        """Number of weight layers, L + 1."""
        return len(self.widths) - 1

    @property
    def hidden_widths(self) -> tuple[int, ...]:
        return self.widths[1:-1]

    def shapes(self) -> dict[str, tuple[int, ...]]:
        out = {}
        for l in range(1, self.n_layers + 1):
            out[f"W{l}"] = (self.widths[l], self.widths[l - 1])
            out[f"b{l}"] = (self.widths[l],)
        return out

    @property
    def n_params(self) -> int:
        return sum(math.prod(s) for s in self.shapes().values())


def init_mlp(spec: MLPSpec, generator: torch.Generator, dtype=torch.float32) -> Params:
    """He/LeCun-style initialisation: ``W_l ~ N(0, 1/N_{l-1})``, small random biases."""
    params = {}
    for name, shape in spec.shapes().items():
        if name.startswith("W"):
            params[name] = torch.randn(shape, generator=generator, dtype=dtype) / math.sqrt(shape[1])
        else:
            params[name] = 0.1 * torch.randn(shape, generator=generator, dtype=dtype)
    return params


def mlp_forward(params: Params, x: torch.Tensor, spec: MLPSpec) -> torch.Tensor:
    """Output ``h_{L+1}`` for inputs ``x`` of shape ``(..., N_0)``."""
    f = activation_fn(spec.activation)
    h = x
    for l in range(1, spec.n_layers + 1):
        inp = h if l == 1 else f(h)
        h = inp @ params[f"W{l}"].transpose(-1, -2) + params[f"b{l}"]
    return h
