"""Convolutional networks of Laurent et al. (2024) as pure functions of a parameter dict.

* **OptuNet**, the authors' MNIST convnet. The paper says 392 parameters (Sec. 4); the authors'
  public OptuNet ("optuMNIST v1") has 355, and that is the one built here::

      Conv(1->2, k4, no bias) - ReLU - MaxPool(3) - Conv(2->10, k5, groups 2, no bias) - ReLU
      - global average pool - Linear(10->3) - ReLU - Linear(3->10)

  Keys ``W1 (2,1,4,4)``, ``W2 (10,1,5,5)``, ``W3 (3,10)``, ``b3``, ``W4 (10,3)``, ``b4``.
  :func:`optunet_forward` takes one network; ``torch.func.vmap`` it over a leading model axis.
  :func:`optunet_forward_batched` computes many networks at once with grouped convolutions
  (batched training, :mod:`symlib.batched_training`).
* **ResNet-18** (CIFAR stem: 3x3 conv, no max-pool), with batch norm in evaluation mode: a
  permutation spec for counting modes and a small-width forward pass that lets the tests check
  the spec's permutations and scalings on residual blocks and batch norm.

Their symmetries are described as data in :mod:`symlib.symmetry.conv_specs`
(:func:`~symlib.symmetry.optunet_permutation_spec`, :func:`~symlib.symmetry.resnet_permutation_spec`),
so :mod:`symlib.symmetry` permutes, rescales and canonicalises them and finds their min-mass
scaling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from symlib.nn.mlp import Params

__all__ = [
    "OPTUNET_GROUPS",
    "OPTUNET_SHAPES",
    "ResNetSpec",
    "init_optunet",
    "init_resnet",
    "optunet_cross_entropy_batched",
    "optunet_forward",
    "optunet_forward_batched",
    "optunet_forward_reference",
    "resnet_forward",
]

OPTUNET_SHAPES: dict[str, tuple[int, ...]] = {
    "W1": (2, 1, 4, 4),
    "W2": (10, 1, 5, 5),
    "W3": (3, 10),
    "b3": (3,),
    "W4": (10, 3),
    "b4": (10,),
}
OPTUNET_GROUPS = 2
"""conv2's channel groups."""
_GROUPS = OPTUNET_GROUPS


def init_optunet(generator: torch.Generator, n_models: int | None = None,
                 dtype=torch.float32) -> Params:
    """PyTorch's default init, ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` for weights and biases.

    Args:
        generator: the only source of randomness.
        n_models: if given, a leading axis of that many independent networks.
    """
    fan_in = {"W1": 16, "W2": 25, "W3": 10, "b3": 10, "W4": 3, "b4": 3}
    lead = () if n_models is None else (n_models,)
    return {
        k: (2 * torch.rand(lead + s, generator=generator, device=generator.device, dtype=dtype) - 1)
        / math.sqrt(fan_in[k])
        for k, s in OPTUNET_SHAPES.items()
    }


def optunet_forward(params: Params, x: torch.Tensor) -> torch.Tensor:
    """Logits ``(B, 10)`` for images ``x`` of shape ``(B, 1, 28, 28)`` (one network).

    The convolutions are written as unfold + einsum (im2col): the same function as
    ``F.conv2d`` (checked in the tests), about 3x faster under ``vmap`` on a CPU, where a
    vmapped grouped convolution's backward pass is slow.
    """
    b = x.shape[0]
    h = torch.einsum("ck,bkp->bcp", params["W1"].reshape(2, 16), F.unfold(x, 4))
    h = F.max_pool2d(torch.relu(h.reshape(b, 2, 25, 25)), 3)  # (B, 2, 8, 8)
    u = F.unfold(h, 5).reshape(b, _GROUPS, 25, 16)  # per group: its input channel's patches
    h = torch.einsum("gok,bgkp->bgop", params["W2"].reshape(_GROUPS, 5, 25), u)
    h = torch.relu(h.reshape(b, 10, 16)).mean(dim=-1)
    h = torch.relu(h @ params["W3"].T + params["b3"])
    return h @ params["W4"].T + params["b4"]


def optunet_forward_reference(params: Params, x: torch.Tensor) -> torch.Tensor:
    """:func:`optunet_forward` written with ``F.conv2d`` (``groups=2``), as the authors' code."""
    h = F.max_pool2d(torch.relu(F.conv2d(x, params["W1"])), 3)
    h = torch.relu(F.conv2d(h, params["W2"], groups=_GROUPS)).mean(dim=(-2, -1))
    h = torch.relu(h @ params["W3"].T + params["b3"])
    return h @ params["W4"].T + params["b4"]


def optunet_forward_batched(params: Params, x: torch.Tensor) -> torch.Tensor:
    """Logits ``(M, B, 10)`` of ``M`` OptuNets, network ``m`` on its own images ``x[m]``.

    The function of ``vmap(optunet_forward)`` (checked in the tests), computed with one
    convolution per layer for all networks: their images are stacked as channels and each
    network's filters see only its own channel (``groups=M``), so a single kernel call serves
    all of them on a CPU or a GPU, with no loop over networks. Channels-last layout, where
    CPU (oneDNN) grouped convolutions and max pooling are several times faster.

    Args:
        params: OptuNet parameters with a leading model axis ``M``.
        x: images ``(M, B, 1, 28, 28)``.
    """
    m, b = x.shape[:2]
    # conv1's last row and column fall outside the 3x3 pooling windows, so its input is
    # cropped to 27x27, in the same copy that moves the model axis last (channels-last).
    h = x[:, :, 0, :27, :27].permute(1, 2, 3, 0).contiguous().permute(0, 3, 1, 2)
    h = F.conv2d(h, params["W1"].reshape(2 * m, 1, 4, 4), groups=m)  # (B, 2M, 24, 24)
    # pooling before ReLU is the same function and gradient (ReLU is monotone), on 9x
    # fewer values
    h = torch.relu(F.max_pool2d(h, 3))
    h = F.conv2d(h, params["W2"].reshape(10 * m, 1, 5, 5), groups=_GROUPS * m)
    h = torch.relu(h).mean(dim=(-2, -1)).reshape(b, m, 10)
    h = torch.relu(torch.einsum("bmi,moi->mbo", h, params["W3"]) + params["b3"][:, None])
    return torch.einsum("mbi,moi->mbo", h, params["W4"]) + params["b4"][:, None]


def optunet_cross_entropy_batched(params: Params, x: torch.Tensor, y: torch.Tensor):
    """Each network's mean cross-entropy ``(M,)`` on its own batch: ``x (M, B, 1, 28, 28)``,
    labels ``y (M, B)``; the ``batched_loss_fn`` of
    :func:`symlib.batched_training.train_batched` for OptuNets."""
    logits = optunet_forward_batched(params, x).flatten(0, 1)
    return F.cross_entropy(logits, y.flatten(), reduction="none").view(y.shape).mean(-1)


# --- ResNet-18 ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ResNetSpec:
    """A CIFAR-style ResNet: 3x3 stem, stages of basic blocks, global pool, linear head.

    Defaults are ResNet-18 for CIFAR-100 (He et al., 2016; Laurent et al., Sec. 4).
    """

    widths: tuple[int, ...] = (64, 128, 256, 512)
    blocks: tuple[int, ...] = (2, 2, 2, 2)
    in_channels: int = 3
    n_classes: int = 100

    def shapes(self) -> dict[str, tuple[int, ...]]:
        out: dict[str, tuple[int, ...]] = {}

        def conv_bn(name, c_out, c_in, k):
            out[f"{name}.conv"] = (c_out, c_in, k, k)
            for stat in ("weight", "bias", "mean", "var"):
                out[f"{name}.bn.{stat}"] = (c_out,)

        conv_bn("stem", self.widths[0], self.in_channels, 3)
        c_in = self.widths[0]
        for s, (w, nb) in enumerate(zip(self.widths, self.blocks)):
            for b in range(nb):
                pre = f"s{s}.b{b}"
                conv_bn(f"{pre}.c1", w, c_in, 3)
                conv_bn(f"{pre}.c2", w, w, 3)
                if c_in != w or (s > 0 and b == 0):
                    conv_bn(f"{pre}.down", w, c_in, 1)
                c_in = w
        out["fc.weight"] = (self.n_classes, c_in)
        out["fc.bias"] = (self.n_classes,)
        return out

    @property
    def n_params(self) -> int:
        """Trainable parameters (batch-norm running statistics excluded)."""
        return sum(math.prod(v) for k, v in self.shapes().items()
                   if not k.endswith((".mean", ".var")))


def init_resnet(spec: ResNetSpec, generator: torch.Generator, dtype=torch.float64) -> Params:
    """Random weights and random (positive-variance) batch-norm statistics, for tests."""
    params = {}
    for k, s in spec.shapes().items():
        if k.endswith(".var"):
            params[k] = 0.5 + torch.rand(s, generator=generator, dtype=dtype)
        elif k.endswith(".conv") or k == "fc.weight":
            params[k] = torch.randn(s, generator=generator, dtype=dtype) / math.sqrt(math.prod(s[1:]))
        else:
            params[k] = (1.0 if k.endswith(".weight") else 0.0) + 0.3 * torch.randn(
                s, generator=generator, dtype=dtype)
    return params


def _conv_bn(params, name, x, stride, pad):
    h = F.conv2d(x, params[f"{name}.conv"], stride=stride, padding=pad)
    return F.batch_norm(h, params[f"{name}.bn.mean"], params[f"{name}.bn.var"],
                        params[f"{name}.bn.weight"], params[f"{name}.bn.bias"], training=False)


def resnet_forward(params: Params, x: torch.Tensor, spec: ResNetSpec) -> torch.Tensor:
    """Logits for images ``x`` of shape ``(B, C, H, W)``; batch norm in evaluation mode."""
    h = torch.relu(_conv_bn(params, "stem", x, 1, 1))
    for s, nb in enumerate(spec.blocks):
        for b in range(nb):
            pre, stride = f"s{s}.b{b}", 2 if (s > 0 and b == 0) else 1
            out = torch.relu(_conv_bn(params, f"{pre}.c1", h, stride, 1))
            out = _conv_bn(params, f"{pre}.c2", out, 1, 1)
            short = _conv_bn(params, f"{pre}.down", h, stride, 0) if f"{pre}.down.conv" in params else h
            h = torch.relu(out + short)
    return h.mean(dim=(-2, -1)) @ params["fc.weight"].T + params["fc.bias"]
