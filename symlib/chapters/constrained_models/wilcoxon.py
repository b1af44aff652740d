"""The paired Wilcoxon signed-rank test of chapter 4 (Sec. 4.2), unconstrained against constrained."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from symlib.book.preconditions import min_p_value
from symlib.chapters.constrained_models.paper import PAPER_P

__all__ = ["signed_ranks", "wilcoxon_frame"]


def signed_ranks(d) -> tuple[float, float, float]:
    """Wilcoxon signed-rank sums of paired differences ``d`` and the two-sided p-value.

    ``W+`` sums the ranks of ``|d|`` over positive differences, ``W−`` over negative ones (zero
    differences dropped, ties given mid-ranks, as in R's ``wilcox.test`` and scipy's default);
    the side with the larger sum is the direction the test speaks for. The p-value is scipy's
    (exact for small samples without ties, normal approximation otherwise); NaN when every
    difference is zero or there are fewer than two.
    """
    d = np.asarray(d, dtype=float)
    nz = d[d != 0]
    if len(nz) == 0:
        return 0.0, 0.0, float("nan")
    ranks = stats.rankdata(np.abs(nz))
    w_plus, w_minus = float(ranks[nz > 0].sum()), float(ranks[nz < 0].sum())
    p = float(stats.wilcoxon(d, alternative="two-sided").pvalue) if len(d) >= 2 else float("nan")
    return w_plus, w_minus, p



def wilcoxon_frame(splits: list[dict], constrained: str = "constrained") -> pd.DataFrame:
    """Paired two-sided Wilcoxon signed-rank tests of the Boston ``splits``, unconstrained vs
    ``constrained`` (a key of each split), one row per metric, beside the paper's p-values."""
    rows = []
    for key, name, paper_p in (("mse", "MSE", PAPER_P["mse"]), ("outside", "share outside 95% interval",
                                                                  PAPER_P["outside"])):
        a = np.array([r["unconstrained"][key] for r in splits])
        b = np.array([r[constrained][key] for r in splits])
        w_plus, w_minus, p = signed_ranks(a - b)
        k = len(a)
        rows.append({"metric": name, "splits": k, "constrained better": int((b < a).sum()),
                     "median difference (unc − con)": float(np.median(a - b)),
                     "W+ (unc > con)": w_plus, "W− (con > unc)": w_minus, "p (ours)": p,
                     "smallest attainable p": min_p_value("wilcoxon", k), "p (paper)": paper_p})
    return pd.DataFrame(rows)

