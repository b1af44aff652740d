"""Chapter 0's ledger: three code checks, judged on this run's numbers.

All three entries hold by construction (the group action is exact, the count is
combinatorics, the canonical form is an algorithm's invariant): they check our code, so they
are *code checks*, never counted as reproduced claims. Their preconditions make each check
non-trivial: the sampled group elements must move the weights, and the copies to canonicalise
must differ. Thresholds are multiples of float64 rounding on these small networks.

Two verdicts (:class:`symlib.book.results.Column`): a code check is no claim of a paper, so there
is no paper's run to reproduce and no stronger protocol to apply; both columns judge the one
check. Its preconditions therefore gate both columns (the default), and each one's ``source``
says what it guards against (:data:`MOVED_SOURCE`, :data:`DISTINCT_SOURCE`) rather than citing a
paper's run.
"""

from __future__ import annotations

from collections.abc import Mapping

from symlib.book.results import Claim, Column, Kind, precondition

__all__ = ["CANONICAL_TOL", "DISTINCT_SOURCE", "INVARIANCE_TOL", "MOVED_MIN", "MOVED_SOURCE", "SECTIONS", "claims"]

INVARIANCE_TOL = 1e-10
"""Largest output change of a transformed network that counts as the same function (float64)."""
MOVED_MIN = 1e-3
"""Smallest relative weight change for the invariance check to be non-trivial."""
CANONICAL_TOL = 1e-9
"""Largest spread of canonicalised copies that counts as one point (float64)."""

MOVED_SOURCE = ("construction of the check, both columns: every sampled group element must move the weights, "
                "else an unchanged output is vacuous (the identity passes any invariance test)")
DISTINCT_SOURCE = ("construction of the check, both columns: the copies must differ before canonicalisation, "
                   "else one representative is vacuous (identical copies collapse under any map)")

SECTIONS = {"function-invariance": "The same function", "mode-count": "How many",
            "canonicalisation": "Canonicalisation"}
"""Claim id -> the start of the heading of the notebook section that measures it."""


def claims(results: Mapping) -> list[Claim]:
    """The chapter's ledger from the results of the stages ``invariance``, ``brute`` and ``demo``."""
    invariance, brute, demo = results["invariance"], results["brute"], results["demo"]
    worst = max(r["max |f(g·w)(x) - f(w)(x)|"] for r in invariance)
    moved = min(r["min ||g·w - w|| / ||w||"] for r in invariance)
    spread = max(d["canonical_spread"] for d in demo.values())
    raw_spread = min(d["raw_spread"] for d in demo.values())
    distinct = min(d["distinct_raw"] for d in demo.values())
    counts_ok = all(b["brute force"] == b["formula"] for b in brute.values())
    check = Kind.CODE_CHECK
    return [
        Claim(
            id="function-invariance",
            text="Permuting hidden units (and flipping signs for odd, rescaling for ReLU activations) leaves the network function unchanged",
            paper="Kurle et al. Eq. (2); Laurent et al. Sec. 3",
            ours=f"max output change {worst:.1e} (float64) while weights moved ≥ {moved:.2f} of their norm",
            holds=bool(worst < INVARIANCE_TOL),
            criterion=f"largest output change < {INVARIANCE_TOL:g} (float64) over all activations and group elements",
            preconditions=(precondition("weights_moved", f"every group element moved the weights by >= {MOVED_MIN:g} "
                                        "of their norm", moved, moved >= MOVED_MIN, column=Column.BOTH,
                                        source=MOVED_SOURCE),),
            kind=check,
        ),
        Claim(
            id="mode-count",
            text="An MLP with hidden widths N_1..N_L has prod_l N_l! permutation-equivalent parametrisations",
            paper="Kurle et al. Sec. 2.1; Laurent et al. Sec. 3",
            ours="; ".join(f"{k}: {v['brute force']} enumerated vs {v['formula']} by formula" for k, v in brute.items()),
            holds=counts_ok,
            criterion="distinct weight vectors among all enumerated copies == the formula, for every network",
            kind=check,
        ),
        Claim(
            id="canonicalisation",
            text="Sorting units by their first incoming weight (after normalising scales / signs) maps every equivalent copy to one representative",
            paper="Laurent et al. Sec. 3 (symmetry removal)",
            ours=f"spread of canonicalised copies {spread:.1e} vs {raw_spread:.2f} before",
            holds=bool(spread < CANONICAL_TOL),
            criterion=f"largest distance of a canonicalised copy to their mean < {CANONICAL_TOL:g}",
            preconditions=(precondition("copies_differ", "the transformed copies differ before canonicalisation "
                                        "(distinct copies > 1 per activation)", distinct, distinct > 1,
                                        column=Column.BOTH, source=DISTINCT_SOURCE),),
            kind=check,
        ),
    ]
