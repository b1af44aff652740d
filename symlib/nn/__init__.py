"""Networks as pure functions of a parameter dictionary, and training many of them at once.

- :mod:`~symlib.nn.mlp`: the pre-activation MLP every chapter uses;
- :mod:`~symlib.nn.orthoskip`: MLPs with fixed orthogonal skip connections (Kurle et al., 2021);
- :mod:`~symlib.nn.convnets`: OptuNet and ResNet-18 (Laurent et al., 2024);
- :mod:`~symlib.nn.constrained`: chapter 4's Stan programs as torch log densities
  (Pourzanjani et al., 2017), term for term; import it as a module (its names are generic);
- :mod:`~symlib.nn.training`: one vmapped SGD/Adam step for many networks at once.
"""

from symlib.nn import constrained, convnets, mlp, orthoskip, training
from symlib.nn.convnets import (
    OPTUNET_GROUPS,
    OPTUNET_SHAPES,
    ResNetSpec,
    init_optunet,
    init_resnet,
    optunet_cross_entropy_batched,
    optunet_forward,
    optunet_forward_batched,
    optunet_forward_reference,
    resnet_forward,
)
from symlib.nn.mlp import (
    Activation,
    MLPSpec,
    Params,
    activation_fn,
    init_mlp,
    mlp_forward,
)
from symlib.nn.orthoskip import (
    SkipPlacement,
    orthoskip_forward,
    semi_orthogonal,
    skip_layers,
    skip_matrices,
)
from symlib.nn.training import (
    SGDConfig,
    minibatches,
    optimizer_state,
    optimizer_step,
    random_crop,
    shuffles,
    train_batched,
)

__all__ = [
    "OPTUNET_GROUPS",
    "OPTUNET_SHAPES",
    "Activation",
    "MLPSpec",
    "Params",
    "ResNetSpec",
    "SGDConfig",
    "SkipPlacement",
    "activation_fn",
    "constrained",
    "convnets",
    "init_mlp",
    "init_optunet",
    "init_resnet",
    "minibatches",
    "mlp",
    "mlp_forward",
    "optimizer_state",
    "optimizer_step",
    "optunet_cross_entropy_batched",
    "optunet_forward",
    "optunet_forward_batched",
    "optunet_forward_reference",
    "orthoskip",
    "orthoskip_forward",
    "random_crop",
    "resnet_forward",
    "semi_orthogonal",
    "shuffles",
    "skip_layers",
    "skip_matrices",
    "train_batched",
    "training",
]
