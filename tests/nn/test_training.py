"""Batched (vmapped) training equals training each network on its own."""

from functools import partial

import pytest
import torch
import torch.nn.functional as F

from symlib.nn import training as bt
from symlib.nn.convnets import (
    init_optunet,
    optunet_cross_entropy_batched,
    optunet_forward_reference,
)
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward

SPEC = MLPSpec((2, 3, 1), "relu")


def _loss(p, x, y):
    return F.binary_cross_entropy_with_logits(mlp_forward(p, x, SPEC)[..., 0], y)


def _optunet_loss(p, x, y):
    return F.cross_entropy(optunet_forward_reference(p, x), y)


def test_batched_equals_sequential():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(30, 2, generator=gen, dtype=torch.float64)
    y = (x.sum(1) > 0).to(torch.float64)
    nets = [init_mlp(SPEC, gen, dtype=torch.float64) for _ in range(3)]
    params = {k: torch.stack([n[k] for n in nets]) for k in nets[0]}
    cfg = bt.SGDConfig(lr=0.3, epochs=3, batch_size=7, weight_decay=1e-3, momentum=0.5, milestones=(2,))
    out = bt.train_batched(_loss, params, x, y, cfg, torch.Generator().manual_seed(1))
    # sequential reference with plain autograd, replaying the same shuffles
    replay = torch.Generator().manual_seed(1)
    orders = [bt.shuffles(3, 30, replay) for _ in range(cfg.epochs)]
    for m, net in enumerate(nets):
        p = {k: v.clone().requires_grad_(True) for k, v in net.items()}
        vel = {k: torch.zeros_like(v) for k, v in net.items()}
        lr = cfg.lr
        for epoch in range(cfg.epochs):
            if epoch in cfg.milestones:
                lr *= cfg.gamma
            for s in range(30 // cfg.batch_size):
                idx = orders[epoch][m, s * 7:(s + 1) * 7]
                grads = torch.autograd.grad(_loss(p, x[idx], y[idx]), list(p.values()))
                with torch.no_grad():
                    for (k, v), g in zip(p.items(), grads):
                        g = g + cfg.weight_decay * v
                        vel[k] = cfg.momentum * vel[k] + g
                        v -= lr * vel[k]
        for k, v in p.items():
            torch.testing.assert_close(out[k][m], v.detach(), rtol=1e-10, atol=1e-12)


def test_random_crop_shapes_and_content():
    gen = torch.Generator().manual_seed(2)
    x = torch.arange(2 * 1 * 5 * 5, dtype=torch.float32).reshape(2, 1, 5, 5)
    out = bt.random_crop(x, 0, gen)
    torch.testing.assert_close(out, x)
    out = bt.random_crop(x, 2, gen)
    assert out.shape == x.shape
    # every non-zero pixel of a crop comes from the same image
    for i in range(2):
        vals = set(out[i].flatten().tolist()) - {0.0}
        assert vals <= set(x[i].flatten().tolist())


def test_batched_adam_equals_torch_optim_adam():
    """The vmapped Adam update is PyTorch's own ``torch.optim.Adam`` (coupled weight decay)."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(28, 2, generator=gen, dtype=torch.float64)
    y = (x[:, 0] > 0).to(torch.float64)
    nets = [init_mlp(SPEC, gen, dtype=torch.float64) for _ in range(2)]
    params = {k: torch.stack([n[k] for n in nets]) for k in nets[0]}
    cfg = bt.SGDConfig(lr=0.05, epochs=2, batch_size=7, weight_decay=1e-2, milestones=(1,),
                       optimizer="adam")
    out = bt.train_batched(_loss, params, x, y, cfg, torch.Generator().manual_seed(3))
    replay = torch.Generator().manual_seed(3)
    orders = [bt.shuffles(2, 28, replay) for _ in range(cfg.epochs)]
    for m, net in enumerate(nets):
        p = {k: v.clone().requires_grad_(True) for k, v in net.items()}
        opt = torch.optim.Adam(p.values(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        for epoch in range(cfg.epochs):
            if epoch in cfg.milestones:
                for group in opt.param_groups:
                    group["lr"] *= cfg.gamma
            for s in range(4):
                opt.zero_grad()
                _loss(p, x[orders[epoch][m, s * 7:(s + 1) * 7]], y[orders[epoch][m, s * 7:(s + 1) * 7]]).backward()
                opt.step()
        for k, v in p.items():
            torch.testing.assert_close(out[k][m], v.detach(), rtol=1e-9, atol=1e-11)


def test_unknown_optimizer_is_refused():
    with pytest.raises(ValueError, match="optimizer"):
        bt.SGDConfig(lr=0.1, epochs=1, batch_size=4, optimizer="rmsprop")


def test_minibatch_crops_are_windows_of_the_padded_images():
    """Replays the draws (one shuffle per epoch; per batch, row then column offsets of every
    image) and cuts each crop out of the zero-padded image by slicing."""
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(10, 2, 5, 6, generator=gen)
    y = torch.arange(10)
    got = list(
        bt.minibatches(3, x, y, 4, torch.Generator().manual_seed(7), crop_padding=2, epochs=2)
    )
    replay = torch.Generator().manual_seed(7)
    padded = F.pad(x, (2, 2, 2, 2))
    k = 0
    for epoch in range(2):
        order = torch.argsort(torch.rand(3, 10, generator=replay), dim=1)
        for s in range(2):
            idx = order[:, s * 4 : (s + 1) * 4].flatten()
            oy = torch.randint(0, 5, (12,), generator=replay)
            ox = torch.randint(0, 5, (12,), generator=replay)
            want = torch.stack([padded[i, :, a : a + 5, c : c + 6] for i, a, c in zip(idx, oy, ox)])
            assert got[k][0] == epoch
            assert torch.equal(got[k][1], want.view(3, 4, 2, 5, 6))
            assert torch.equal(got[k][2], y[idx].view(3, 4))
            k += 1
    assert k == len(got)
    # random_crop draws and cuts the same way
    replay = torch.Generator().manual_seed(8)
    oy, ox = (torch.randint(0, 5, (10,), generator=replay) for _ in range(2))
    want = torch.stack([padded[i, :, a : a + 5, c : c + 6] for i, a, c in zip(range(10), oy, ox)])
    assert torch.equal(bt.random_crop(x, 2, torch.Generator().manual_seed(8)), want)


def _devices():
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_batched_optunet_training_equals_per_network_loop(optimizer, device):
    """``train_batched`` with the grouped-convolution loss ends where training each OptuNet
    on its own with ``torch.optim`` and the authors' ``F.conv2d`` forward ends."""
    gen = torch.Generator().manual_seed(6)
    n_models, dtype = 3, torch.float64
    x = torch.randn(20, 1, 28, 28, generator=gen, dtype=dtype).to(device)
    y = torch.randint(0, 10, (20,), generator=gen).to(device)
    params = {k: v.to(device) for k, v in init_optunet(gen, n_models, dtype=dtype).items()}
    cfg = bt.SGDConfig(
        lr=0.05,
        epochs=3,
        batch_size=8,
        weight_decay=1e-2,
        momentum=0.9,
        milestones=(2,),
        crop_padding=2,
        optimizer=optimizer,
    )

    def seed():
        return torch.Generator(device=device).manual_seed(9)

    out = bt.train_batched(
        _optunet_loss, params, x, y, cfg, seed(), batched_loss_fn=optunet_cross_entropy_batched
    )
    nets = [
        {k: v[m].clone().requires_grad_(True) for k, v in params.items()} for m in range(n_models)
    ]
    make = (
        partial(torch.optim.Adam, lr=cfg.lr, weight_decay=cfg.weight_decay)
        if optimizer == "adam"
        else partial(
            torch.optim.SGD, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
        )
    )
    opts = [make(net.values()) for net in nets]
    last_epoch = -1
    for epoch, xb, yb in bt.minibatches(
        n_models, x, y, cfg.batch_size, seed(), crop_padding=cfg.crop_padding, epochs=cfg.epochs
    ):
        if epoch != last_epoch and epoch in cfg.milestones:
            for opt in opts:
                for group in opt.param_groups:
                    group["lr"] *= cfg.gamma
        last_epoch = epoch
        for m, (net, opt) in enumerate(zip(nets, opts)):
            opt.zero_grad()
            _optunet_loss(net, xb[m], yb[m]).backward()
            opt.step()
    for k, start in params.items():
        want = torch.stack([net[k].detach() for net in nets])
        assert (want - start).abs().max() > 1e-3  # the networks moved
        torch.testing.assert_close(out[k], want, rtol=1e-9, atol=1e-11)
