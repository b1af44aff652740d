"""The preconditions every chapter's claims use: one standard, thresholds fixed here.

A claim is judged only when the run it rests on has reached what the claim needs (see
:class:`symlib.book.results.Precondition`). The same kinds of precondition recur in every
chapter, so they are defined once, with their thresholds:

- networks trained to at least :data:`ACCURACY_SHARE` of the accuracy their architecture
  reaches on this data (a reference value the chapter states and cites);
- MCMC chains mixed: split R-hat (the larger of bulk and folded) at most :data:`RHAT_MAX`, bulk
  and tail ESS at least :data:`ESS_MIN` (Vehtari et al., 2021);
- an optimisation (ELBO, loss) that has plateaued: its mean over the last :data:`PLATEAU_WINDOW`
  of the recorded curve moved by at most :data:`PLATEAU_TOL` (relative) against the window
  before it;
- a reference that has mixed (:func:`reference_converged`): the HMC run, gold standard or NUTS
  fit a claim is judged against gates the robust column, unless the paper reported its
  convergence; the reproduced column shows its diagnostics beside the verdict;
- replicated (:func:`replicated`): a robust "holds" rests on at least :data:`MIN_REPLICATES`
  seeds or splits;
- a test that can reach significance: the smallest p-value it can return with this many
  samples is below the level ``alpha`` (a sign or Wilcoxon test on 3 pairs cannot reach 0.05,
  whatever the data).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from symlib.book.results import Column, Precondition, precondition

__all__ = [
    "ACCURACY_SHARE",
    "ESS_MIN",
    "MIN_REPLICATES",
    "PLATEAU_TOL",
    "PLATEAU_WINDOW",
    "REFERENCE_SOURCE",
    "RHAT_MAX",
    "accuracy_reached",
    "chains_mixed",
    "min_p_value",
    "plateaued",
    "reference_converged",
    "replicated",
    "test_can_reach",
]

ACCURACY_SHARE = 0.9
"""Share of the architecture's reference accuracy a network must reach."""
RHAT_MAX = 1.01
"""Largest split R-hat (max of bulk and folded) of mixed chains (Vehtari et al., 2021)."""
ESS_MIN = 400
"""Smallest bulk and tail ESS, over all chains together (Vehtari et al., 2021: 100 per chain x 4)."""
MIN_REPLICATES = 3
"""Fewest independent seeds or splits behind a robust "holds" (today's standard: one training
run cannot tell a finding from its seed)."""
REFERENCE_SOURCE = ("today's standard (Vehtari et al. 2021): a reference that has not mixed cannot tell a method's "
                    "error from its own; the paper reports no convergence of its reference")
"""The source of :func:`reference_converged`'s robust preconditions."""
PLATEAU_WINDOW = 0.1
"""Share of the recorded curve compared with the share before it."""
PLATEAU_TOL = 0.01
"""Largest relative change between the two windows of a plateaued curve."""


def accuracy_reached(
    accuracy: float, reference: float, *, what: str = "test accuracy", reference_source: str = "",
    share: float = ACCURACY_SHARE,
) -> Precondition:
    """``accuracy >= share * reference`` (accuracies as fractions or percentages, both alike)."""
    src = f", {reference_source}" if reference_source else ""
    return precondition(
        "accuracy",
        f"{what} >= {share:.0%} of {reference:.3g}{src}",
        float(accuracy),
        accuracy >= share * reference,
    )


def chains_mixed(
    rhat: float, bulk_ess: float, tail_ess: float | None = None, *, what: str = "",
    rhat_max: float = RHAT_MAX, ess_min: float = ESS_MIN,
) -> list[Precondition]:
    """R-hat and ESS preconditions of MCMC draws (worst values over the quantities judged)."""
    of = f" of {what}" if what else ""
    # a quantity whose chains never move has no R-hat (NaN) and an ESS that counts every draw:
    # the ESS gates fail with the R-hat, or an ESS gate alone would pass a stuck chain
    stuck = bool(np.isnan(float(rhat)))
    out = [
        precondition("rhat", f"split R-hat{of} <= {rhat_max}", _diagnostic(rhat),
                     bool(np.isfinite(rhat) and rhat <= rhat_max)),
        precondition("bulk_ess", f"bulk ESS{of} >= {ess_min:g}", _ess(bulk_ess, stuck),
                     bool(not stuck and np.isfinite(bulk_ess) and bulk_ess >= ess_min)),
    ]
    if tail_ess is not None:
        out.append(precondition("tail_ess", f"tail ESS{of} >= {ess_min:g}", _ess(tail_ess, stuck),
                                bool(not stuck and np.isfinite(tail_ess) and tail_ess >= ess_min)))
    return out


def _ess(value: float, stuck: bool) -> float | str:
    """An ESS as measured; with a stuck chain (R-hat NaN), why it does not count."""
    if stuck:
        return f"{float(value):.3g}, not counted: R-hat is NaN (a quantity never moved)"
    return _diagnostic(value)


def reference_converged(
    what: str, *, rhat: float, bulk_ess: float, tail_ess: float | None = None, chains: int | None = None,
    depth_share: float | None = None, reported: str = "",
) -> tuple[list[Precondition], str]:
    """The rule for a reference that may not have mixed (an HMC run, a gold standard, NUTS).

    Returns the preconditions on the reference's convergence (split R-hat, bulk and tail ESS,
    :func:`chains_mixed`) and its diagnostics in words for the claim's
    :attr:`~symlib.book.results.Claim.reference`, shown beside the reproduced verdict. The
    preconditions gate the robust column only, unless the paper ``reported`` its reference's
    convergence (where, e.g. "Table 3: R-hat <= 1.1"): a property of the paper's own run, they
    then gate both columns, citing it. ``depth_share``: the share of NUTS iterations at the
    maximum tree depth, shown with the rest.
    """
    pre = chains_mixed(rhat, bulk_ess, tail_ess, what=what)
    column, source = (Column.BOTH, reported) if reported else (Column.ROBUST, REFERENCE_SOURCE)
    pre = [replace(p, column=column, source=source) for p in pre]
    parts = [f"split R-hat {_fmt(rhat)}", f"bulk ESS {_fmt(bulk_ess, 0)}"]
    if tail_ess is not None:
        parts.append(f"tail ESS {_fmt(tail_ess, 0)}")
    if chains is not None:
        parts.append(f"{chains} chain{'s' if chains != 1 else ''}")
    if depth_share is not None:
        parts.append(f"{depth_share:.0%} of iterations at the maximum tree depth")
    mixed = all(p.met for p in pre)
    words = f"{what}: {', '.join(parts)} ({'mixed' if mixed else 'not mixed'} by today's standard)"
    return pre, words


def _fmt(value: float, digits: int | None = None) -> str:
    value = float(value)
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else str(value)
    return f"{value:,.{digits}f}" if digits is not None else f"{value:.3g}"


def replicated(n: int, *, what: str = "seeds") -> Precondition:
    """A robust "holds" rests on at least :data:`MIN_REPLICATES` independent ``what`` (seeds,
    splits); gates the robust column only."""
    return precondition("replicates", f"{what} >= {MIN_REPLICATES}", n, n >= MIN_REPLICATES, column=Column.ROBUST,
                        source="today's standard: a finding replicated over independent seeds or splits")


def _diagnostic(value: float) -> float | str:
    """A diagnostic as measured; a non-finite one says why it fails (a stuck chain, usually)."""
    value = float(value)
    if math.isnan(value):
        return "NaN (not computable: a quantity never moved, e.g. a stuck chain)"
    return value


def plateaued(
    curve: Sequence[float], *, what: str = "objective", window: float = PLATEAU_WINDOW,
    tol: float = PLATEAU_TOL,
) -> Precondition:
    """The curve's last ``window`` share moved by at most ``tol`` (relative) from the one before."""
    y = np.asarray(curve, dtype=float)
    k = max(1, round(window * len(y)))
    if len(y) < 2 * k or not np.isfinite(y[-2 * k:]).all():
        return precondition("plateau", f"{what} plateaued (needs a recorded curve)", "too short", False)
    last, before = y[-k:].mean(), y[-2 * k:-k].mean()
    change = abs(last - before) / max(abs(before), 1e-12)
    return precondition(
        "plateau", f"{what}: relative change over the last {window:.0%} <= {tol:g}", float(change), change <= tol
    )


def min_p_value(test: str, n: int, m: int | None = None) -> float:
    """The smallest two-sided p-value a rank test can return with ``n`` (and ``m``) samples.

    ``"wilcoxon"`` / ``"sign"``: paired, ``2 / 2**n``; ``"mannwhitney"``: two samples of sizes
    ``n`` and ``m``, ``2 / C(n + m, n)``; ``"t"``: any n >= 2 can reach any level.
    """
    if test in ("wilcoxon", "sign"):
        return min(1.0, 2.0 / 2.0**n)
    if test == "mannwhitney":
        if m is None:
            raise ValueError("mannwhitney needs both sample sizes")
        return min(1.0, 2.0 / math.comb(n + m, n))
    if test == "t":
        return 0.0 if n >= 2 else 1.0
    raise ValueError(f"unknown test {test!r}; known: wilcoxon, sign, mannwhitney, t")


def test_can_reach(test: str, n: int, m: int | None = None, *, alpha: float = 0.05) -> Precondition:
    """Whether the test can reach ``p < alpha`` with these sample sizes at all."""
    sizes = f"n = {n}" + (f", m = {m}" if m is not None else "")
    p_min = min_p_value(test, n, m)
    return precondition(
        "power", f"{test} test can reach p < {alpha:g} (smallest p with {sizes})", p_min, p_min < alpha
    )


test_can_reach.__test__ = False  # not a pytest test, despite its name
