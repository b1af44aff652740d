"""The numbers the paper of chapter 4 reports, as data with their source.

Shown beside the chapter's own measurements, never used as "ours"; each value names the table
or figure of the paper it was read from.
"""

from __future__ import annotations

from symlib.book.reference import ReportedTable, lookup

__all__ = ["PAPER_P", "REPORTED", "reported"]

REPORTED: dict[str, ReportedTable] = {
    "pourzanjani2017/table1_boston_mse": ReportedTable(
        "pourzanjani2017",
        "Table 1 (Sec. 4), Boston housing, test MSE per split",
        ("split", "unconstrained", "constrained"),
        tuple(
            zip(
                range(1, 16),
                (0.37, 0.31, 0.30, 0.39, 0.34, 0.42, 0.43, 0.34, 0.46, 0.33, 0.38, 0.47, 0.42, 0.37, 0.36),
                (0.36, 0.28, 0.28, 0.31, 0.29, 0.31, 0.39, 0.31, 0.45, 0.29, 0.38, 0.31, 0.37, 0.27, 0.27),
            )
        ),
    ),
    "pourzanjani2017/table2_boston_coverage": ReportedTable(
        "pourzanjani2017",
        "Table 2 (Sec. 4), Boston housing, share of test points outside the 95% interval",
        ("split", "unconstrained", "constrained"),
        tuple(
            zip(
                range(1, 16),
                (0.05, 0.08, 0.11, 0.09, 0.13, 0.13, 0.12, 0.09, 0.15, 0.06, 0.13, 0.11, 0.13, 0.10, 0.13),
                (0.08, 0.05, 0.05, 0.06, 0.08, 0.10, 0.04, 0.11, 0.07, 0.06, 0.09, 0.03, 0.12, 0.05, 0.09),
            )
        ),
    ),
}

PAPER_P = {"mse": 0.009, "outside": 0.003}
"""The paper's Wilcoxon p-values (Sec. 4.2), MSE and coverage."""


def reported(key: str) -> ReportedTable:
    """The reported table ``key``; unknown keys fail listing the valid ones."""
    return lookup(REPORTED, key)
