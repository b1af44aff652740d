"""OptuNet and ResNet: parameter counts, forward passes, symmetries (function unchanged)."""

import math

import pytest
import torch
import torch.nn.functional as F

from symlib import symmetry as sym
from symlib.nn import convnets as cn


def test_optunet_has_355_parameters_and_matches_conv2d():
    gen = torch.Generator().manual_seed(0)
    p = cn.init_optunet(gen, dtype=torch.float64)
    assert sum(v.numel() for v in p.values()) == 355
    x = torch.randn(3, 1, 28, 28, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(cn.optunet_forward(p, x), cn.optunet_forward_reference(p, x))
    assert cn.optunet_forward(p, x).shape == (3, 10)


def test_optunet_vmaps_over_models():
    gen = torch.Generator().manual_seed(1)
    p = cn.init_optunet(gen, 4)
    x = torch.randn(5, 1, 28, 28, generator=gen)
    out = torch.vmap(cn.optunet_forward, in_dims=(0, None))(p, x)
    for m in range(4):
        torch.testing.assert_close(out[m], cn.optunet_forward({k: v[m] for k, v in p.items()}, x))


def test_optunet_symmetries_keep_function():
    gen = torch.Generator().manual_seed(2)
    p = cn.init_optunet(gen, dtype=torch.float64)
    ps = sym.optunet_permutation_spec()
    x = torch.randn(6, 1, 28, 28, generator=gen, dtype=torch.float64)
    y = cn.optunet_forward(p, x)
    for swap in (torch.tensor([0, 1]), torch.tensor([1, 0])):
        g = sym.sample_spec_element(ps, gen)
        g = sym.GroupElement({**g.perms, "P1": swap}, None, g.scales)
        moved = sym.apply_group_element(p, ps, g)
        assert max((moved[k] - p[k]).abs().max().item() for k in p) > 1e-2
        torch.testing.assert_close(cn.optunet_forward(moved, x), y, rtol=1e-10, atol=1e-10)
    assert round(10 ** sym.spec_log10_order(ps)) == 2 * math.factorial(5) ** 2 * math.factorial(3)


def test_optunet_canonicalisation_invariant_and_idempotent():
    gen = torch.Generator().manual_seed(3)
    p = cn.init_optunet(gen, dtype=torch.float64)
    ps = sym.optunet_permutation_spec()
    x = torch.randn(4, 1, 28, 28, generator=gen, dtype=torch.float64)
    c = sym.canonicalise(p, ps)
    torch.testing.assert_close(cn.optunet_forward(c, x), cn.optunet_forward(p, x))
    moved = sym.apply_group_element(p, ps, sym.sample_spec_element(ps, gen))
    c2 = sym.canonicalise(moved, ps)
    for k in c:
        torch.testing.assert_close(c2[k], c[k])
        torch.testing.assert_close(sym.canonicalise(c, ps)[k], c[k])


def test_resnet_symmetries_keep_function():
    gen = torch.Generator().manual_seed(4)
    spec = cn.ResNetSpec(widths=(2, 3, 4, 5), n_classes=7)
    p = cn.init_resnet(spec, gen)
    ps = sym.resnet_permutation_spec(spec)
    x = torch.randn(3, 3, 8, 8, generator=gen, dtype=torch.float64)
    y = cn.resnet_forward(p, x, spec)
    moved = sym.apply_group_element(p, ps, sym.sample_spec_element(ps, gen))
    assert max((moved[k] - p[k]).abs().max().item() for k in p) > 1e-2
    torch.testing.assert_close(cn.resnet_forward(moved, x, spec), y, rtol=1e-10, atol=1e-10)


def test_resnet18_size_and_modes():
    spec = cn.ResNetSpec()
    assert 11.1e6 < spec.n_params < 11.3e6  # ResNet-18 for CIFAR-100
    ps = sym.resnet_permutation_spec(spec)
    # 4 residual streams + 2 inner perms per stage
    assert sorted(ps.perm_sizes.values()) == sorted([64, 128, 256, 512] * 3)
    assert sym.spec_log10_order(ps) > 5000


def _per_network_grads(p, x, y):
    """Each network's gradient by plain autograd through the authors' ``F.conv2d`` form."""
    out = []
    for m in range(x.shape[0]):
        one = {k: v[m].detach().clone().requires_grad_(True) for k, v in p.items()}
        loss = F.cross_entropy(cn.optunet_forward_reference(one, x[m]), y[m])
        out.append(dict(zip(one, torch.autograd.grad(loss, list(one.values())))))
    return {k: torch.stack([g[k] for g in out]) for k in p}


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 2e-6)])
def test_optunet_batched_forward_and_gradients_match_each_network(dtype, tol):
    """Grouped convolutions over the model axis (float32: oneDNN's channels-last kernels) give
    each network its own logits and gradient. Half the pixels are zero, as MNIST's background,
    so the max-pooling windows hold ties."""
    gen = torch.Generator().manual_seed(5)
    m, b = 4, 6
    p = cn.init_optunet(gen, m, dtype=dtype)
    x = torch.randn(m, b, 1, 28, 28, generator=gen, dtype=dtype)
    x = x * (torch.rand(m, b, 1, 28, 28, generator=gen) < 0.5)
    y = torch.randint(0, 10, (m, b), generator=gen)
    logits = cn.optunet_forward_batched(p, x)
    assert logits.shape == (m, b, 10)
    for i in range(m):
        one = {k: v[i] for k, v in p.items()}
        torch.testing.assert_close(
            logits[i], cn.optunet_forward_reference(one, x[i]), rtol=tol, atol=tol
        )
    torch.testing.assert_close(logits, torch.vmap(cn.optunet_forward)(p, x), rtol=tol, atol=tol)

    leaves = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    losses = cn.optunet_cross_entropy_batched(leaves, x, y)
    grads = dict(zip(leaves, torch.autograd.grad(losses.sum(), list(leaves.values()))))
    expected = _per_network_grads(p, x, y)
    for k in p:
        assert expected[k].abs().max() > 1e-4  # not trivially zero
        torch.testing.assert_close(grads[k], expected[k], rtol=tol, atol=tol)
