"""Metrics against values computed by hand."""

import math

import pytest
import torch

from symlib import metrics

P = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.4, 0.4, 0.2], [0.2, 0.5, 0.3]])
Q = torch.tensor([[0.5, 0.4, 0.1], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.1, 0.8, 0.1]])


def test_accuracy():
    assert metrics.accuracy(P, torch.tensor([0, 2, 1, 1])) == 0.75  # row 2 ties -> argmax 0


def test_agreement_by_hand():
    # argmax P: 0, 2, 0, 1; argmax Q: 0, 0, 1, 1 -> agree on rows 0 and 3
    assert metrics.agreement(P, Q) == 0.5
    assert metrics.agreement(P, P) == 1.0


def test_total_variation_by_hand():
    # row TVs: 0.5*(.2+.2+0)=.2, 0.5*(.5+0+.5)=.5, 0.5*(.2+.3+.1)=.3, 0.5*(.1+.3+.2)=.3
    assert metrics.total_variation(P, Q) == pytest.approx((0.2 + 0.5 + 0.3 + 0.3) / 4)
    assert metrics.total_variation(P, P) == 0.0
    assert metrics.total_variation(P, Q) == pytest.approx(metrics.total_variation(Q, P))


def test_shape_mismatch_raises():
    with pytest.raises(ValueError):
        metrics.agreement(P, Q[:2])
    with pytest.raises(ValueError):
        metrics.total_variation(P, Q[:, :2])


def test_predictive_probs_averages_softmaxes():
    logits = torch.tensor([[[0.0, 0.0]], [[math.log(3.0), 0.0]]])  # softmaxes (.5,.5) and (.75,.25)
    torch.testing.assert_close(metrics.predictive_probs(logits), torch.tensor([[0.625, 0.375]]))


def test_mean_cross_entropy_matches_torch():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 20, 5, generator=gen)
    y = torch.randint(0, 5, (20,), generator=gen)
    expected = torch.stack([torch.nn.functional.cross_entropy(l, y) for l in logits])
    torch.testing.assert_close(metrics.mean_cross_entropy(logits, y), expected)


def test_loss_barrier_by_hand():
    assert metrics.loss_barrier([1.0, 3.0, 2.0]) == pytest.approx(3.0 - 1.5)
    assert metrics.loss_barrier([1.0, 0.5, 1.0]) == 0.0  # maximum at the ends
    with pytest.raises(ValueError):
        metrics.loss_barrier([1.0])
