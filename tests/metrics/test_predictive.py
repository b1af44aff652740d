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


# --------------------------------------------------------------------------- ECE, Brier, OOD, MI
# (Laurent et al. 2024, Table 1 metrics)

CAL_P = torch.tensor([[0.9, 0.05, 0.05], [0.85, 0.1, 0.05], [0.3, 0.5, 0.2], [0.1, 0.2, 0.7],
                      [0.45, 0.35, 0.2]])
CAL_Y = torch.tensor([0, 1, 1, 0, 1])


def test_ece_by_hand():
    # 5 bins: (.8,1]: conf .9 (right), .85 (wrong) -> |.5 - .875| * 2/5 = .15;
    # (.6,.8]: .7 (wrong) -> .7 * 1/5 = .14; (.4,.6]: .5 (right), .45 (wrong) -> .025 * 2/5 = .01
    assert metrics.expected_calibration_error(CAL_P, CAL_Y, n_bins=5) == pytest.approx(0.30)
    # one bin: |accuracy - mean confidence| = |2/5 - 3.4/5|
    assert metrics.expected_calibration_error(CAL_P, CAL_Y, n_bins=1) == pytest.approx(0.28)
    # 15 bins of width 1/15: each point alone in its bin -> mean |correct - conf|
    by_point = (0.1 + 0.85 + 0.5 + 0.7 + 0.45) / 5
    assert metrics.expected_calibration_error(CAL_P, CAL_Y) == pytest.approx(by_point)


def test_ece_zero_when_calibrated():
    probs = torch.tensor([[0.75, 0.25]] * 4)
    assert metrics.expected_calibration_error(probs, torch.tensor([0, 0, 0, 1])) == pytest.approx(0)


def test_brier_by_hand():
    # rows: .015, .85^2+.9^2+.05^2 = 1.535, .38, 1.34, .665
    assert metrics.brier_score(CAL_P, CAL_Y) == pytest.approx(3.935 / 5)
    assert metrics.brier_score(torch.eye(3), torch.arange(3)) == 0.0
    assert metrics.brier_score(torch.eye(2), torch.tensor([1, 0])) == pytest.approx(2.0)


def _ood_scores(seed, ties):
    gen = torch.Generator().manual_seed(seed)
    s_in = torch.randn(60, generator=gen)
    s_out = torch.randn(40, generator=gen) + 1.0
    if ties:
        s_in, s_out = s_in.round(), s_out.round()
    return s_in, s_out


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("ties", [False, True])
def test_aupr_matches_sklearn(seed, ties):
    from sklearn.metrics import average_precision_score

    s_in, s_out = _ood_scores(seed, ties)
    labels = [0] * len(s_in) + [1] * len(s_out)  # OOD positive
    expected = average_precision_score(labels, torch.cat([s_in, s_out]).numpy())
    assert metrics.aupr(s_in, s_out) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("ties", [False, True])
def test_fpr95_matches_sklearn_roc(seed, ties):
    import numpy as np
    from sklearn.metrics import roc_curve

    s_in, s_out = _ood_scores(seed, ties)
    labels = [0] * len(s_in) + [1] * len(s_out)
    fpr, tpr, _ = roc_curve(labels, torch.cat([s_in, s_out]).numpy(), drop_intermediate=False)
    expected = fpr[np.argmax(tpr >= 0.95)]
    assert metrics.fpr_at_95_tpr(s_in, s_out) == pytest.approx(expected, abs=1e-12)


def test_ood_metrics_by_hand():
    s_in, s_out = torch.tensor([0.0, 1.0, 2.0]), torch.tensor([3.0, 4.0])
    assert metrics.aupr(s_in, s_out) == 1.0  # perfectly separated
    assert metrics.fpr_at_95_tpr(s_in, s_out) == 0.0
    # negated scores: OOD ranked last; precision at recall 1/2 is 1/4, at recall 1 is 2/5
    assert metrics.aupr(-s_in, -s_out) == pytest.approx(0.5 * 1 / 4 + 0.5 * 2 / 5)
    assert metrics.fpr_at_95_tpr(-s_in, -s_out) == 1.0


def test_predictive_entropy():
    p = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(metrics.predictive_entropy(p),
                               torch.tensor([math.log(4), 0.0], dtype=torch.float64))


def test_mutual_information_by_hand():
    sample_probs = torch.tensor([[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [1.0, 0.0]]])  # (2, 2, 2)
    h_mean = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    expected = torch.tensor([math.log(2), h_mean - 0.5 * math.log(2)], dtype=torch.float64)
    torch.testing.assert_close(metrics.mutual_information(sample_probs), expected)


def test_mutual_information_bounds_and_agreement():
    gen = torch.Generator().manual_seed(0)
    probs = torch.softmax(3.0 * torch.randn(50, 40, 7, generator=gen), -1)
    mi = metrics.mutual_information(probs)
    assert mi.shape == (40,)
    assert (mi >= 0).all()
    assert (mi <= math.log(7) + 1e-12).all()
    same = probs[:1].expand(5, -1, -1)  # every sample agrees -> no epistemic uncertainty
    torch.testing.assert_close(metrics.mutual_information(same), torch.zeros(40, dtype=torch.float64))


def test_regression_total_variation_against_quadrature():
    from scipy import integrate, stats

    g = torch.Generator().manual_seed(0)
    f = torch.randn(5, 3, generator=g)
    f_ref = 0.5 * torch.randn(7, 3, generator=g) + 0.3
    sd = 0.4

    def tv(i):
        def gap(y):
            p = stats.norm.pdf(y, f[:, i].numpy(), sd).mean()
            q = stats.norm.pdf(y, f_ref[:, i].numpy(), sd).mean()
            return abs(p - q)
        return 0.5 * integrate.quad(gap, -10, 10, limit=200)[0]

    expected = sum(tv(i) for i in range(3)) / 3
    assert metrics.regression_total_variation(f, f_ref, sd, n_grid=4096) == pytest.approx(expected, abs=1e-5)
    assert metrics.regression_total_variation(f, f, sd) == 0.0
    far = metrics.regression_total_variation(f, f + 100.0, sd)
    assert far == pytest.approx(1.0, abs=1e-6)
