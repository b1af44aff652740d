"""The numbers the paper of chapter 5 reports, as data with their source.

Shown beside the chapter's own measurements, never used as "ours"; ``NOTES.md`` in the shared
papers folder lists how each was recovered.
"""

from __future__ import annotations

from symlib.book.reference import ReportedTable, lookup

__all__ = ["REPORTED", "reported"]

REPORTED: dict[str, ReportedTable] = {
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
    return lookup(REPORTED, key)
