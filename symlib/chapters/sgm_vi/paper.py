"""The numbers the paper of chapter 3 reports, as data with their source.

Shown beside the chapter's own measurements, never used as "ours"; ``NOTES.md`` in the shared
papers folder lists how each was recovered.
"""

from __future__ import annotations

from symlib.book.reference import ReportedTable, lookup

__all__ = ["REPORTED", "reported"]

REPORTED: dict[str, ReportedTable] = {
    "gelberg2024/table1_mnist": ReportedTable(
        "gelberg2024",
        "Table 1 (Sec. 5), MNIST test accuracy %, mean ± sd over 10 seeds",
        ("method", "width 5", "width 10", "width 20", "width 30"),
        (
            ("MFVI", "88.379±0.023", "93.217±0.022", "94.836±0.025", "95.432±0.023"),
            ("SGM K=5", "88.423±0.027", "93.221±0.021", "94.899±0.035", "95.534±0.033"),
            ("SGM K=10", "88.405±0.034", "93.220±0.023", "94.896±0.026", "95.540±0.025"),
            ("SGM K=20", "88.408±0.026", "93.221±0.027", "94.905±0.024", "95.552±0.023"),
        ),
    ),
    "gelberg2024/table2_toy_mse": ReportedTable(
        "gelberg2024",
        "Table 2 (Sec. 5), two-parameter BNN, test MSE",
        ("method", "a=0.05", "a=0.1", "a=0.15", "a=0.2"),
        (
            ("MFVI", "0.11±0.22", "0.12±0.16", "0.13±0.15", "0.18±0.19"),
            ("SGM K=2", "0.09±0.19", "0.09±0.17", "0.10±0.15", "0.12±0.16"),
        ),
    ),
    "gelberg2024/table3_toy_elbo": ReportedTable(
        "gelberg2024",
        "Table 3 (Sec. 5), two-parameter BNN, normalised ELBOs",
        ("method", "objective", "a=0.05", "a=0.1", "a=0.15", "a=0.2"),
        (
            ("MFVI", "L_VI", -0.022, -0.025, -0.032, -0.042),
            ("MFVI", "L^G", -0.009, -0.013, -0.021, -0.031),
            ("SGM", "L_VI", -0.023, -0.029, -0.035, -0.043),
            ("SGM", "L^G", -0.004, -0.007, -0.012, -0.019),
        ),
    ),
}


def reported(key: str) -> ReportedTable:
    """The reported table ``key``; unknown keys fail listing the valid ones."""
    return lookup(REPORTED, key)
