"""The example chapter's ledger: one claim, judged on the run's numbers."""

from symlib.book.results import Cause, Claim, Diagnosis

__all__ = ["MEAN_TOL", "claims"]

MEAN_TOL = 0.5
"""Largest |mean| of the draws for which the claim holds (fixed before the run)."""


def claims(results) -> list[Claim]:
    mean = results["summary"]["mean"]
    return [Claim(id="mean-near-zero", text="Standard normal draws average to about zero",
                  paper="(made up)", ours=f"mean {mean:.3f}", holds=abs(mean) < MEAN_TOL,
                  criterion=f"|mean| < {MEAN_TOL}",
                  # why it would not hold: a small sample's mean strays (every failing claim says why)
                  diagnosis=Diagnosis(Cause.BUDGET, f"{results['summary'].get('n', 'few')} draws"))]
