"""The papers' own reported numbers, as data with their source.

Chapters show these beside their own measurements; they are never used as "ours". Each table
records the paper, where in it the numbers are (table / section; pages of the published
versions), and the numbers exactly as printed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PAPERS", "ReportedTable", "lookup"]

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


def lookup(tables: Mapping[str, ReportedTable], key: str) -> ReportedTable:
    """The reported table ``key`` among ``tables``; unknown keys fail listing the valid ones."""
    try:
        return tables[key]
    except KeyError:
        raise KeyError(f"no reported table {key!r}; known: {', '.join(sorted(tables))}") from None
