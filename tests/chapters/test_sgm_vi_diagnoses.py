"""Chapter 3's diagnoses (why a claim does not hold) and its O(K) code check, on made-up results."""

import dataclasses

import pandas as pd

from symlib.book.results import Cause
from symlib.chapters import get_profile
from symlib.chapters.sgm_vi import claims, diagnoses, sweeps
from tests.chapters.test_sgm_vi import _made_up

QUICK = get_profile("03_sgm_vi", "quick")


class _Results(dict):
    """Made-up stage results with a profile and the sweep frames a ledger would have judged (none
    but ``frames``)."""

    def __init__(self, stages, config=None, frames=None):
        super().__init__(stages)
        self.config = config
        self.sweep_frames = {s: None for s in sweeps.SWEEPS} | (frames or {})


def _causes(found):
    return [d.cause for d in found]


def test_claims_that_hold_get_no_diagnosis():
    assert diagnoses.diagnoses(_made_up()) == {}


def test_each_failing_claim_says_why_from_the_run():
    made_up = _made_up(a_star=4.0, toy_gain=-0.01, mfvi_mean="mode", mnist_gain=0.0)
    made_up["prox"]["rows"][-1]["mean"] = 0.5                          # the mean rises from width 16 to 64
    found = diagnoses.diagnoses(made_up)
    assert set(found) == set(diagnoses.FAILABLE)
    # Figure 3: its budget per fit against the paper's, with the values that missed 5 s
    (budget,) = found["mean-seeking-threshold"]
    assert budget.cause is Cause.BUDGET
    assert "100 of the paper's 3,000 Adam steps per fit (3.3 %)" in budget.detail
    assert "20 of the authors' 100 values of a/s" in budget.detail and "a*/s = 4 at (D, s) = (2, 0.5)" in budget.detail
    # the toy at the paper's 10 epochs and 10 seeds, with no sweep: the paper's claim fails here
    for claim in ("toy-mfvi-interpolates", "toy-symmetrised-elbo", "toy-test-mse"):
        assert _causes(found[claim]) == [Cause.CLAIM_FAILS], claim
        assert "10 epochs of batches of 10 and 10 seeds" in found[claim][0].detail
    # MNIST: the digits, the steps per network, and the initial sd that made SGM train as MFVI
    for claim in ("mnist-gain-grows-with-width", "mnist-sgm-beats-mfvi"):
        data, budget, choice = found[claim]
        assert data.cause is Cause.DATA and "4,000 of the paper's 60,000 training digits" in data.detail
        assert budget.cause is Cause.BUDGET and "400 of the paper's 6,000 Adam steps per network (6.7 %" in budget.detail
        assert choice.cause is Cause.OPEN_CHOICE and choice.sweep == "mnist_init_sd"
        assert "trained identically" in choice.detail
    (prox,) = found["equivalent-modes-closer"]
    assert prox.cause is Cause.CLAIM_FAILS and "width 16 to 64" in prox.detail


def _frame(rows):
    return pd.DataFrame([{"choice": c, "setting": s, "this run": own, "verdict": v, "robust verdict": r}
                         for c, s, own, v, r in rows])


def test_an_open_choice_names_the_sweep_setting_the_verdict_turns_on():
    sweep = next(s for s in sweeps.SWEEPS if s.claim == "mean-seeking-threshold")
    frame = _frame([("interp_direction", "axis", True, "holds", "not judged"),
                    ("interp_direction", "diagonal", False, "does not hold", "does not hold"),
                    ("interp_band", "0.25", True, "holds", "not judged"),
                    ("interp_band", "0.4", False, "holds", "not judged")])
    found = diagnoses.diagnoses(_Results(_made_up(), QUICK, {sweep: frame}))
    # the claim holds at its own setting, but not under the other reading of u
    assert list(found) == ["mean-seeking-threshold"]
    budget, choice = found["mean-seeking-threshold"]
    assert budget.cause is Cause.BUDGET and "1,000 of the paper's 3,000 Adam steps per fit (33 %)" in budget.detail
    assert choice.cause is Cause.OPEN_CHOICE and choice.sweep == "interp_direction"   # the band changes nothing
    assert "u = e_1 (this run): holds" in choice.detail and "u = (1, …, 1)/√D: does not hold" in choice.detail
    assert "u is a unit vector" in choice.detail


def test_toy_choices_that_turn_the_verdict_are_named_and_a_claim_failing_everywhere_fails():
    sweep = next(s for s in sweeps.SWEEPS if s.claim == "toy-test-mse")
    failing = _made_up(toy_gain=-0.01)
    turns = _frame([("toy_noise_sd", "0.25", True, "does not hold", "not judged"),
                    ("toy_noise_sd", "0.5", False, "holds", "not judged"),
                    ("toy_init_sd", "0.05", True, "does not hold", "not judged"),
                    ("toy_init_sd", "0.5", False, "does not hold", "not judged")])
    (choice,) = diagnoses.diagnoses(_Results(failing, QUICK, {sweep: turns}))["toy-test-mse"]
    assert choice.cause is Cause.OPEN_CHOICE and choice.sweep == "toy_noise_sd"
    assert "0.25 (this run): does not hold; 0.5: holds" in choice.detail
    nowhere = _frame([("toy_noise_sd", "0.25", True, "does not hold", "not judged"),
                      ("toy_noise_sd", "0.5", False, "does not hold", "does not hold")])
    (fails,) = diagnoses.diagnoses(_Results(failing, QUICK, {sweep: nowhere}))["toy-test-mse"]
    assert fails.cause is Cause.CLAIM_FAILS and "under every setting tried (2 settings of toy_noise_sd)" in fails.detail
    # fewer epochs than the paper's: the budget is stated first
    small = dataclasses.replace(QUICK, toy_epochs=5)
    found = diagnoses.diagnoses(_Results(failing, small, {sweep: nowhere}))["toy-test-mse"]
    assert _causes(found) == [Cause.BUDGET] and "5 of the paper's 10 epochs per fit (50 %)" in found[0].detail


def test_share():
    assert diagnoses.share(1000, 3000) == "33 %" and diagnoses.share(24, 6000) == "0.4 %"


def _cost(times):
    return {"rows": [{"path": p, "K": k, "ms per step": t} for p in ("direct", "unit_pairs")
                     for k, t in times.items()]}


def test_cost_code_check_asks_for_no_faster_than_linear_growth():
    # a fixed estimator overhead from K = 2 on and a small slope: O(K), though no straight line
    # through K = 1 fits it (the published full run's shape, R^2 = 0.26)
    step = _cost({1: 2.1, 2: 4.6, 5: 4.35, 10: 4.6, 20: 4.7, 50: 4.9, 100: 5.1})
    growth, _ = claims.cost_growth(step)
    assert growth < 1
    check = {c.id: c for c in claims.claims({**_made_up(), "cost": step})}["cost-linear-in-K"]
    assert check.holds is True and "R² = " in check.ours
    linear = _cost({k: 1.0 + 0.5 * k for k in (1, 2, 5, 10, 20)})
    assert claims.cost_growth(linear)[0] <= 1
    quadratic = _cost({k: 1.0 + 0.1 * k * k for k in (1, 2, 5, 10, 20)})
    growth, pair = claims.cost_growth(quadratic)
    assert growth > claims.COST_GROWTH_MAX and pair[1] == 20
    assert {c.id: c for c in claims.claims({**_made_up(), "cost": quadratic})}["cost-linear-in-K"].holds is False


def test_a_toy_claim_that_turns_only_with_more_epochs_fails_at_the_papers_budget():
    sweep = next(s for s in sweeps.SWEEPS if s.claim == "toy-test-mse")
    longer = _frame([("toy_epochs", "10", True, "does not hold", "not judged"),
                     ("toy_epochs", "100", False, "holds", "holds")])
    (fails,) = diagnoses.diagnoses(_Results(_made_up(toy_gain=-0.01), QUICK, {sweep: longer}))["toy-test-mse"]
    assert fails.cause is Cause.CLAIM_FAILS and "turns only with more training" in fails.detail
    assert "100: holds" in fails.detail
