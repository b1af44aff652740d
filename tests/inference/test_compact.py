"""Compact representations q_d / q_r, pruning and Monte Carlo predictives."""

import pytest
import torch

from symlib.inference import compact
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward
from symlib.symmetry import apply_group_element, sample_group_element
from symlib.symmetry.rebasin import number_of_transpositions

SPEC = MLPSpec((5, 8, 3))


def _stack(nets):
    return {k: torch.stack([n[k] for n in nets]) for k in nets[0]}


def test_moments_match_torch_and_stream():
    gen = torch.Generator().manual_seed(0)
    batch = _stack([init_mlp(SPEC, gen) for _ in range(7)])
    whole = compact.moments(batch)
    chunks = compact.moments([{k: v[:3] for k, v in batch.items()}, {k: v[3:] for k, v in batch.items()}])
    for k, v in batch.items():
        torch.testing.assert_close(whole.mean[k], v.mean(0))
        torch.testing.assert_close(whole.sd[k], v.std(0), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(chunks.sd[k], whole.sd[k])
    with pytest.raises(ValueError):
        compact.moments({k: v[:1] for k, v in batch.items()})


@pytest.mark.parametrize("method", ["weight", "activation"])
def test_rebasing_permuted_copies_collapses_q_r(method):
    gen = torch.Generator().manual_seed(1)
    ref = init_mlp(SPEC, gen, torch.float64)
    elements = [sample_group_element(SPEC, gen, scales=False) for _ in range(5)]
    copies = _stack([apply_group_element(ref, SPEC, g) for g in elements])
    x = torch.randn(100, 5, generator=gen, dtype=torch.float64)  # every unit active somewhere
    q_d = compact.moments(copies)
    q_r, nots = compact.rebased_moments(copies, ref, SPEC, method, x=x)
    assert max(v.max().item() for v in q_r.sd.values()) < 1e-6
    assert max(v.max().item() for v in q_d.sd.values()) > 0.1
    for k in ref:
        torch.testing.assert_close(q_r.mean[k].double(), ref[k])
    assert nots == [number_of_transpositions(g.perms["P1"]) for g in elements]


def test_align_brings_a_permuted_representation_back():
    gen = torch.Generator().manual_seed(2)
    mean = init_mlp(SPEC, gen)
    sd = {k: torch.rand(v.shape, generator=gen) for k, v in mean.items()}
    g = sample_group_element(SPEC, gen, scales=False)
    q = compact.DiagonalGaussian(apply_group_element(mean, SPEC, g), apply_group_element(sd, SPEC, g))
    back = compact.align(q, mean, SPEC, "weight")
    for k in mean:
        torch.testing.assert_close(back.mean[k], mean[k])
        torch.testing.assert_close(back.sd[k], sd[k])


def test_prune_by_sd_keeps_the_lowest_sd_weights():
    mean = {"W1": torch.ones(2, 3), "b1": torch.ones(2), "W2": torch.ones(1, 2), "b2": torch.ones(1)}
    sd = {"W1": torch.tensor([[0.1, 0.9, 0.5], [0.3, 0.8, 0.2]]), "b1": torch.tensor([5.0, 5.0]),
          "W2": torch.tensor([[0.4, 0.7]]), "b2": torch.tensor([9.0])}
    pruned = compact.prune_by_sd(mean, sd, 0.5)  # 8 weights -> keep 4: 0.1, 0.2, 0.3, 0.4
    assert pruned["W1"].tolist() == [[1, 0, 0], [1, 0, 1]]
    assert pruned["W2"].tolist() == [[1, 0]]
    assert torch.equal(pruned["b1"], mean["b1"]) and torch.equal(pruned["b2"], mean["b2"])
    assert sum(v.sum().item() for k, v in compact.prune_by_sd(mean, sd, 1.0).items() if k[0] == "W") == 8
    assert sum(v.sum().item() for k, v in compact.prune_by_sd(mean, sd, 0.0).items() if k[0] == "W") == 0
    with pytest.raises(ValueError):
        compact.prune_by_sd(mean, sd, 1.5)


def test_sample_diagonal_moments_and_zero_sd_predictive():
    gen = torch.Generator().manual_seed(3)
    mean = init_mlp(SPEC, gen)
    sd = {k: torch.full_like(v, 0.5) for k, v in mean.items()}
    draws = compact.sample_diagonal(compact.DiagonalGaussian(mean, sd), 4000, gen)
    torch.testing.assert_close(draws["W1"].mean(0), mean["W1"], atol=0.05, rtol=0)
    torch.testing.assert_close(draws["W1"].std(0), sd["W1"], atol=0.05, rtol=0)
    x = torch.randn(10, 5, generator=gen)
    zero = compact.DiagonalGaussian(mean, {k: torch.zeros_like(v) for k, v in mean.items()})
    torch.testing.assert_close(compact.diagonal_predictive(zero, x, SPEC, 7, gen, chunk=3),
                               torch.softmax(mlp_forward(mean, x, SPEC), -1))


def test_samples_predictive_averages_member_softmaxes():
    gen = torch.Generator().manual_seed(4)
    nets = [init_mlp(SPEC, gen) for _ in range(3)]
    x = torch.randn(6, 5, generator=gen)
    expected = sum(torch.softmax(mlp_forward(n, x, SPEC), -1) for n in nets) / 3
    torch.testing.assert_close(compact.samples_predictive(_stack(nets), x, SPEC), expected)
