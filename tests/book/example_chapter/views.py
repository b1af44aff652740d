"""The example chapter's views: one table, one quoted number, one robustness sweep."""

import pandas as pd

from symlib.book.chapter import Quote, Sweep, Table

__all__ = ["QUOTES", "SWEEPS", "VIEWS", "summary_frame", "tolerance_rows"]


def summary_frame(results) -> pd.DataFrame:
    return pd.DataFrame([results["summary"]])


def tolerance_rows(results) -> list[dict]:
    """The claim's verdict under other tolerances (the choice a paper would leave open)."""
    mean = abs(results["summary"]["mean"])
    rows = []
    for tol in (0.5, 1e-9):
        verdict = "holds" if mean < tol else "does not hold"
        rows.append({"choice": "tolerance", "setting": f"{tol:g}", "verdict": verdict, "robust verdict": verdict})
    return rows


VIEWS = (Table("summary", summary_frame, caption="Summary of the draws", formats={"mean": "{:.3f}"}),)
QUOTES = (Quote("mean", lambda results: results["summary"]["mean"]),)
SWEEPS = (Sweep("mean-near-zero", tolerance_rows, caption="The verdict under other tolerances"),)
