"""The numbers the paper of chapter 5 reports, as data with their source.

Shown beside the chapter's own measurements, never used as "ours".
"""

from __future__ import annotations

from symlib.book.reference import ReportedTable, lookup

__all__ = ["PAPER_SETTINGS", "REPORTED", "reported"]

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


PAPER_SETTINGS: dict[str, str] = {
    "data (train/test)": "MNIST 60,000/10,000 [paper]",
    "NoT nets: hidden units": "512 [paper]",
    "NoT nets: W_init seeds x NoT(P) values": "3 x every value 0..511 [paper]; code: 50 values",
    "NoT nets: SGD epochs, lr, momentum, batch": "50, 0.001, 0.9, 64 [code]",
    "NoT nets: points on the linear path": "not stated; code: 11 (MNIST_net_matching.py)",
    "Bayesian MLP": "784-512-10, ReLU, N(0, 1) prior [paper]",
    "ensemble: members, Adam epochs, lr, batch": "5, 50 [paper]; 0.001, 100 [code]",
    "VI: Adam epochs, lr, batch, initial sd": "50 [paper]; 0.001 [code]; batch not stated; 0.05 [code]",
    "HMC: chains": "1 [paper]",
    "HMC: MAP warm-start epochs": "none [paper]",
    "HMC: burn-in transitions": "600 [paper]; code: 100",
    "HMC: step size": "0.001, fixed (no adaptation) [code]; paper: not stated",
    "HMC: kept samples per chain, thinning": "1,000, 10 [paper]; code: 10,000, 1, evaluating 1,000 evenly spaced",
    "HMC: leapfrog steps": "500 [paper, code]",
    "HMC: step-size jitter per transition": "none [code]",
    "HMC: gradient evaluations per chain": "5,300,000 [paper: (600 + 1,000 x 10) x 500]",
    "predictive samples of q_d, q_r, VI": "100 [paper]",
    "training images for activation matching": "not stated",
}
"""The settings of the paper and its code (Xiao et al. App. A and the authors' code), as the settings table's "paper" column:
written down from the sources, not read from the `paper` profile, so the profile's departures
show. Tags: [paper] the paper's text, [code] the authors' code."""


def reported(key: str) -> ReportedTable:
    """The reported table ``key``; unknown keys fail listing the valid ones."""
    return lookup(REPORTED, key)
