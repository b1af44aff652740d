"""The shared preconditions, each on made-up data where the answer is known."""

import math

import numpy as np
import pytest
from scipy import stats

from symlib.book import preconditions as pc


def test_accuracy_share():
    assert pc.accuracy_reached(0.90, 0.95).met is True  # 0.90 >= 0.855
    low = pc.accuracy_reached(0.486, 0.95, reference_source="Laurent et al. Table 1")
    assert low.met is False and "Laurent" in low.criterion and low.measured == "0.486"


def test_chains_mixed_thresholds():
    good = pc.chains_mixed(1.005, 800, 600)
    assert all(p.met for p in good) and len(good) == 3
    bad = {p.name: p.met for p in pc.chains_mixed(2.1, 800, 50)}
    assert bad == {"rhat": False, "bulk_ess": True, "tail_ess": False}


def test_plateau_on_known_curves():
    t = np.arange(1000)
    assert pc.plateaued(-np.exp(-t / 50.0) - 1.0).met is True    # converged long before the end
    assert pc.plateaued(-1.0 + 1e-3 * t).met is False              # still climbing linearly
    assert pc.plateaued([1.0]).measured == "too short"


@pytest.mark.parametrize("n", [3, 5, 6, 10])
def test_min_p_of_wilcoxon_matches_scipy_on_the_most_extreme_data(n):
    diffs = np.arange(1, n + 1, dtype=float)  # every difference positive: the most extreme ranks
    exact = stats.wilcoxon(diffs, alternative="two-sided", method="exact").pvalue
    assert pc.min_p_value("wilcoxon", n) == pytest.approx(exact)
    assert pc.test_can_reach("wilcoxon", n).met == bool(exact < 0.05)


def test_min_p_of_mann_whitney_matches_scipy():
    x, y = np.arange(4.0), np.arange(10.0, 14.0)
    exact = stats.mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue
    assert pc.min_p_value("mannwhitney", 4, 4) == pytest.approx(exact) == pytest.approx(2 / math.comb(8, 4))


def test_three_splits_cannot_reach_significance():
    gate = pc.test_can_reach("wilcoxon", 3)
    assert gate.met is False and gate.measured == "0.25"


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_diagnostic_fails_and_is_shown_as_such(bad):
    rhat, bulk, tail = pc.chains_mixed(bad, bad, bad)
    assert not (rhat.met or bulk.met or tail.met)
    if np.isnan(bad):
        assert rhat.measured.startswith("NaN") and "stuck" in rhat.measured
    else:
        assert rhat.measured == "inf"
