"""The numbers the paper of chapter 3 reports, as data with their source.

Shown beside the chapter's own measurements, never used as "ours".
"""

from __future__ import annotations

import math

from symlib.book.reference import ReportedTable, lookup

__all__ = ["REPORTED", "reported", "table1_accuracy", "table1_gain", "toy_lg_gain", "toy_mse_gain"]

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


def _mean(text) -> float:
    """The mean of a reported ``"mean±sd"`` entry (or a bare number)."""
    return float(str(text).split("±")[0])


def table1_accuracy(method: str, width: int) -> float:
    """The paper's mean MNIST test accuracy (%) of ``method`` at ``width`` (Table 1)."""
    return _mean(reported("gelberg2024/table1_mnist").frame().set_index("method").loc[method, f"width {width}"])


def table1_gain(method: str, width: int) -> float:
    """The paper's accuracy gain of ``method`` over MFVI at ``width``: the difference of its
    Table 1 means (NaN for a method the paper did not run)."""
    paper = reported("gelberg2024/table1_mnist").frame().set_index("method")
    if method not in paper.index:
        return math.nan
    return _mean(paper.loc[method, f"width {width}"]) - _mean(paper.loc["MFVI", f"width {width}"])


def toy_mse_gain(a: float) -> float:
    """The paper's test-MSE advantage of SGM on the two-parameter BNN at slope ``a``:
    MSE(MFVI) - MSE(SGM K=2), the difference of its Table 2 means."""
    paper = reported("gelberg2024/table2_toy_mse").frame().set_index("method")
    return _mean(paper.loc["MFVI", f"a={a:g}"]) - _mean(paper.loc["SGM K=2", f"a={a:g}"])


def toy_lg_gain(a: float) -> float:
    """The paper's symmetrised-ELBO advantage of SGM at slope ``a``: L^G(SGM) - L^G(MFVI),
    from its Table 3 (normalised ELBOs)."""
    paper = reported("gelberg2024/table3_toy_elbo").frame().set_index(["method", "objective"])
    return float(paper.loc[("SGM", "L^G"), f"a={a:g}"] - paper.loc[("MFVI", "L^G"), f"a={a:g}"])
