"""The papers' own reported numbers, as data with their source.

Chapters show these beside their own measurements; they are never used as "ours". Each table
records the paper, where in it the numbers are (table / section; pages of the published
versions), and the numbers exactly as printed. ``NOTES.md`` in the shared papers folder lists
how each was recovered.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PAPERS", "REPORTED", "ReportedTable", "reported"]

PAPERS = {
    "kurle2021": "Kurle, Januschowski, Gasthaus, Wang (2021). On symmetries in variational Bayesian neural nets. NeurIPS BDL workshop.",
    "laurent2024": "Laurent, Aldea, Franchi (2024). A symmetry-aware exploration of Bayesian neural network posteriors. ICLR.",
    "gelberg2024": "Gelberg, van der Ouderaa, van der Wilk, Gal (2024). Variational inference failures under model symmetries. ICML GRaM workshop.",
    "pourzanjani2017": "Pourzanjani, Jiang, Petzold (2017). Improving the identifiability of neural networks for Bayesian inference. NIPS BDL workshop.",
    "xiao2023": "Xiao, Liu, Bamler (2023). A compact representation for Bayesian neural networks by removing permutation symmetry. NeurIPS UniReps workshop.",
}


@dataclass(frozen=True)
class ReportedTable:
    """Numbers as a paper printed them."""

    paper: str
    """Key into :data:`PAPERS`."""
    where: str
    """Location in the paper, e.g. ``"Table 1 (Sec. 4)"``."""
    columns: tuple[str, ...]
    rows: tuple[tuple, ...]

    @property
    def source(self) -> str:
        return f"{PAPERS[self.paper].split('.')[0]}, {self.where}"

    def frame(self):
        import pandas as pd

        return pd.DataFrame(list(self.rows), columns=list(self.columns))


_LAURENT_COLS = ("modes", "method", "MMD", "NS", "Acc", "ECE", "Brier", "AUPR", "FPR95", "IDMI", "OODMI")

REPORTED: dict[str, ReportedTable] = {
    "laurent2024/table1_mnist": ReportedTable(
        "laurent2024",
        "Table 1 (Sec. 4), MNIST / OptuNet",
        _LAURENT_COLS,
        (
            ("one", "Dropout", 15.0, 14.3, 83.3, 33.4, 26.1, 96.4, 98.6, 26.1, 22.2),
            ("one", "BNN", 18.8, 17.1, 78.1, 7.4, 30.9, 67.9, 93.7, 0.1, 0.1),
            ("one", "SGHMC", 16.7, 17.7, 95.1, 7.6, 2.8, 73.7, 98.4, 4.3, 14.5),
            ("one", "SWAG", 16.0, 14.6, 88.3, 17.7, 4.9, 73.4, 68.6, 4.0, 8.7),
            ("one", "Laplace", 10.6, 9.5, 87.9, 18.1, 4.8, 48.2, 74.6, 6.2, 5.9),
            ("multi", "Dropout", 2.1, 2.1, 92.1, 29.2, 36.8, 97.2, 78.2, 36.6, 52.5),
            ("multi", "BNN", 2.8, 2.5, 86.5, 17.5, 24.4, 96.9, 27.2, 21.1, 52.3),
            ("multi", "SWAG", 1.8, 1.3, 95.0, 13.1, 17.5, 88.7, 24.6, 27.6, 62.2),
            ("multi", "Laplace", 1.8, 0.8, 94.8, 12.8, 15.8, 95.4, 32.1, 21.1, 52.2),
            ("multi", "DE", 0.0, 0.0, 95.3, 10.7, 13.5, 95.7, 12.8, 19.3, 62.6),
        ),
    ),
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
    "xiao2023/table1": ReportedTable(
        "xiao2023",
        "Table 1 (Sec. 4), MNIST MLP 784-512-10",
        ("metric", "HMC sample", "HMC q_d", "HMC q_r", "Ens. sample", "Ens. q_d", "Ens. q_r", "VI q"),
        (
            ("agreement with HMC", 1.0, 0.1212, 0.8249, 0.9931, 0.5239, 0.9868, 0.9885),
            ("TV to HMC", 0.0, 0.8641, 0.6570, 0.0229, 0.7210, 0.0495, 0.0235),
            ("test acc. of samples %", 98.43, 11.11, 82.34, 98.66, 52.25, 97.72, 98.11),
            ("test acc. of mu_d / mu_r %", None, 28.06, 92.25, None, 86.40, 97.97, 98.04),
        ),
    ),
}


def reported(key: str) -> ReportedTable:
    """The reported table ``key``; unknown keys fail listing the valid ones."""
    try:
        return REPORTED[key]
    except KeyError:
        raise KeyError(f"no reported table {key!r}; known: {', '.join(sorted(REPORTED))}") from None
