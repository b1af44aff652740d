"""(c) vmapped training of many networks vs a plain per-network torch loop, one thread.

The work: ``M`` independent networks, each trained for the same minibatch SGD steps on its own
batches. Both sides draw the batches from the same ``symlib.nn.training.minibatches``
stream (same seed), so they do exactly the same steps and end at the same weights up to
rounding (checked: ``max |diff|`` of the final weights).

* symlib: ``symlib.nn.training.train_batched``: one step for all networks. For the toy, a
  ``vmap(grad(loss))``; for OptuNet two rows: the same vmap, and the grouped-convolution loss
  ``symlib.nn.convnets.optunet_cross_entropy_batched`` (the model axis folded into the conv's
  groups), the code path chapters 2a and 2b train with.
* loop: what a per-network training script does: one ``nn.Module`` and one
  ``torch.optim.SGD`` per network, ``zero_grad / backward / step`` for each network in turn.

Cases (Laurent et al.'s settings, chapter 2a):

* the 2-2-1 ReLU toy perceptron: 400 points of two Gaussian blobs, batch 10, SGD lr 2;
* OptuNet on MNIST-sized images (random pixels): batch 64, SGD lr 0.04, momentum 0.9,
  weight decay 2e-4, random crops with padding 4; the loop's OptuNet uses ``nn.Conv2d`` as the
  authors' code does (symlib's forward pass is written as unfold + einsum).
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import math

import torch
import torch.nn.functional as F
from torch import nn

from symlib.data import gaussian_blobs
from symlib.nn.convnets import init_optunet, optunet_cross_entropy_batched, optunet_forward
from symlib.nn.mlp import MLPSpec, mlp_forward
from symlib.nn.training import SGDConfig, minibatches, train_batched

NAME = "batched_training"
TOY_SPEC = MLPSpec((2, 2, 1), "relu")


def _toy_loss(params, x, y):
    return F.binary_cross_entropy_with_logits(mlp_forward(params, x, TOY_SPEC)[..., 0], y)


def _optunet_loss(params, x, y):
    return F.cross_entropy(optunet_forward(params, x), y)


def _toy_module(params: dict, m: int) -> nn.Module:
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
    with torch.no_grad():
        for layer, l in ((net[0], 1), (net[2], 2)):
            layer.weight.copy_(params[f"W{l}"][m])
            layer.bias.copy_(params[f"b{l}"][m])
    return net


def _toy_weights(nets: list[nn.Module]) -> dict:
    return {
        f"{kind}{l}": torch.stack([getattr(n[i], attr).detach() for n in nets])
        for l, i in ((1, 0), (2, 2))
        for kind, attr in (("W", "weight"), ("b", "bias"))
    }


class _OptuNet(nn.Module):
    """The authors' OptuNet as an ``nn.Module`` (grouped ``nn.Conv2d``)."""

    def __init__(self, params: dict, m: int):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 2, 4, bias=False)
        self.conv2 = nn.Conv2d(2, 10, 5, groups=2, bias=False)
        self.fc1, self.fc2 = nn.Linear(10, 3), nn.Linear(3, 10)
        with torch.no_grad():
            for target, key in (
                (self.conv1.weight, "W1"),
                (self.conv2.weight, "W2"),
                (self.fc1.weight, "W3"),
                (self.fc1.bias, "b3"),
                (self.fc2.weight, "W4"),
                (self.fc2.bias, "b4"),
            ):
                target.copy_(params[key][m])

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 3)
        h = F.relu(self.conv2(h)).mean(dim=(-2, -1))
        return self.fc2(F.relu(self.fc1(h)))

    def weights(self) -> dict:
        return {
            "W1": self.conv1.weight,
            "W2": self.conv2.weight,
            "W3": self.fc1.weight,
            "b3": self.fc1.bias,
            "W4": self.fc2.weight,
            "b4": self.fc2.bias,
        }


def _loop(make_net, loss_fn, params, x, y, config: SGDConfig, seed: int) -> list[nn.Module]:
    """Per-network SGD on the batches ``train_batched`` would draw with the same seed, on
    ``x``'s device."""
    n_models = next(iter(params.values())).shape[0]
    nets = [make_net(params, m).to(x.device) for m in range(n_models)]
    optims = [
        torch.optim.SGD(
            net.parameters(),
            lr=config.lr,
            momentum=config.momentum,
            weight_decay=config.weight_decay,
        )
        for net in nets
    ]
    batches = minibatches(
        n_models,
        x,
        y,
        config.batch_size,
        torch.Generator(device=x.device).manual_seed(seed),
        crop_padding=config.crop_padding,
        epochs=config.epochs,
    )
    for _, xb, yb in batches:
        for net, opt, xm, ym in zip(nets, optims, xb, yb):
            opt.zero_grad(set_to_none=True)
            loss_fn(net(xm), ym).backward()
            opt.step()
    return nets


def _compare(
    case, label, batched_fn, loop_fn, weights_of, repeats, subject="symlib train_batched (vmap)"
) -> dict:
    trained = batched_fn()
    looped = weights_of(loop_fn())
    diff = max((trained[k] - looped[k]).abs().max().item() for k in trained)
    times = harness.alternate({"symlib": batched_fn, "loop": loop_fn}, repeats)
    return harness.row(
        NAME,
        case,
        subject,
        label,
        subject_s=times["symlib"],
        reference_s=times["loop"],
        ratio=harness.ratios(times["loop"], times["symlib"]),
        ratio_is="loop time / symlib time",
        metrics={"max |diff| of final weights": diff},
    )


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    """The toy perceptron and OptuNet cases."""
    n_models, seed = 16, 3
    repeats = 3 if quick else 5
    gen = torch.Generator().manual_seed(0)
    rows = []

    # --- 2-2-1 toy perceptrons
    x, y = gaussian_blobs(200, ((-3.0, -3.0), (3.0, 3.0)), gen)
    y = y.to(torch.float32)
    params = {
        k: torch.randn((n_models, *s), generator=gen)
        * (1 / math.sqrt(s[1]) if k[0] == "W" else 0.1)
        for k, s in TOY_SPEC.shapes().items()
    }
    cfg = SGDConfig(lr=2.0, epochs=1 if quick else 5, batch_size=10)
    steps = cfg.epochs * (len(x) // cfg.batch_size)
    rows.append(
        _compare(
            f"2-2-1 toy, {n_models} nets x {steps} steps",
            "per-network loop (nn.Sequential + SGD)",
            lambda: train_batched(
                _toy_loss, params, x, y, cfg, torch.Generator().manual_seed(seed)
            ),
            lambda: _loop(
                _toy_module,
                lambda out, t: F.binary_cross_entropy_with_logits(out[:, 0], t),
                params,
                x,
                y,
                cfg,
                seed,
            ),
            _toy_weights,
            repeats,
        )
    )

    # --- OptuNets
    steps = 3 if quick else 20
    xi = (torch.rand(64 * steps, 1, 28, 28, generator=gen) - 0.1307) / 0.3081
    yi = torch.randint(0, 10, (64 * steps,), generator=gen)
    params = init_optunet(gen, n_models)
    cfg = SGDConfig(
        lr=0.04, epochs=1, batch_size=64, weight_decay=2e-4, momentum=0.9, crop_padding=4
    )
    # two batched paths: plain vmap of the per-network loss, and the grouped-convolution loss
    # that chapters 2a and 2b train with (``batched_loss_fn``)
    for label, batched in (("vmap", None), ("grouped conv", optunet_cross_entropy_batched)):
        rows.append(
            _compare(
                f"OptuNet, {n_models} nets x {steps} steps",
                "per-network loop (nn.Conv2d + SGD)",
                lambda batched=batched: train_batched(
                    _optunet_loss,
                    params,
                    xi,
                    yi,
                    cfg,
                    torch.Generator().manual_seed(seed),
                    batched_loss_fn=batched,
                ),
                lambda: _loop(_OptuNet, F.cross_entropy, params, xi, yi, cfg, seed),
                lambda nets: {
                    k: torch.stack([n.weights()[k].detach() for n in nets]) for k in params
                },
                repeats,
                subject=f"symlib train_batched ({label})",
            )
        )
    return rows


if __name__ == "__main__":
    harness.main_for(run, NAME, __doc__.splitlines()[0])
