"""Chapter 2b's robustness sweeps: the verdicts again under the choices the paper left open.

``"mmd_aggregation"``: Table 1's MMD and NS columns as the median (the paper), mean or maximum
over the kernel bank (App. B.4 says the order does not change); ``"ood_score"``: the OOD columns
under each of :data:`~symlib.chapters.posterior_mmd.evaluation.OOD_SCORES` (the ``robustness``
stage). The profile's ``robustness`` field names the choices swept; a choice it leaves out gives no rows,
so that profile stores no such sweep (:class:`~symlib.book.chapter.Sweep`).
"""

from __future__ import annotations

from dataclasses import replace

from symlib.book.chapter import RunResults, Sweep, sized_to_judge
from symlib.book.results import outcome
from symlib.chapters.posterior_mmd.claims import judge
from symlib.chapters.posterior_mmd.evaluation import OOD_SCORES

__all__ = ["OWN_SETTING", "ROBUSTNESS_CLAIMS", "SETTINGS", "SWEEPS", "sweep_rows", "variants"]

ROBUSTNESS_CLAIMS = {"mmd_aggregation": ("multi_mode_closer", "ranking_stable_under_symmetry_removal"),
                     "ood_score": ("multi_mode_better_ood",)}
"""The claims whose verdict each robustness choice can change."""
SETTINGS = {"mmd_aggregation": ("median", "mean", "max"), "ood_score": tuple(OOD_SCORES)}
"""The settings of each choice, in the order they are tried."""
OWN_SETTING = {"mmd_aggregation": "median", "ood_score": "max_softmax"}
"""This run's own setting of each choice (Table 1's)."""


def variants(results: RunResults, choice: str) -> dict[str, list[dict]]:
    """Table 1's rows under each setting of ``choice``: ``{setting: rows}``.

    Only the run's own setting (Table 1 itself) when the profile does not sweep ``choice``.
    """
    evaluation = results["eval"]
    if unknown := [c for c in (choice, *results.config.robustness) if c not in SETTINGS]:
        raise ValueError(f"unknown robustness choice {unknown[0]!r}; known: {', '.join(SETTINGS)}")
    if choice not in results.config.robustness:
        return {OWN_SETTING[choice]: evaluation["rows"]}
    if choice == "mmd_aggregation":
        values = {how: {(k["mode"], k["method"], k["weights"]): k["value"]
                        for k in evaluation["kernels"] if k["aggregation"] == how}
                  for how in SETTINGS[choice]}
        return {how: [{**r, "MMD": v[r["mode"], r["method"], "MMD"], "NS": v[r["mode"], r["method"], "NS"]}
                      for r in evaluation["rows"]] for how, v in values.items()}
    by = {(d["mode"], d["method"], d["score"]): d for d in results["robustness"]}
    return {score: [{**r, "AUPR": by[r["mode"], r["method"], score]["AUPR"],
                     "FPR95": by[r["mode"], r["method"], score]["FPR95"]} for r in evaluation["rows"]]
            for score in SETTINGS[choice]}


def sweep_rows(claim_id: str, choice: str):
    """The rows of the sweep of ``claim_id`` over ``choice``: ``rows(results) -> [{"choice",
    "setting", "this run", "verdict", "ours"}, ...]``, the run's own setting first.

    Each setting's claim is judged like the ledger's, the smoke gate included
    (:func:`~symlib.book.chapter.sized_to_judge`).
    """
    def rows(results: RunResults) -> list[dict]:
        if choice not in results.config.robustness:
            return []  # this profile does not sweep the choice
        gate = sized_to_judge(bool(results.config.judge))
        out = []
        for setting, table in variants(results, choice).items():
            claim = next(c for c in judge({**results["eval"], "rows": table}, results.config) if c.id == claim_id)
            claim = replace(claim, preconditions=(*claim.preconditions, *gate))
            out.append({"choice": choice, "setting": setting, "this run": setting == OWN_SETTING[choice],
                        "verdict": outcome(claim.holds), "robust verdict": outcome(claim.robust),
                        "ours": claim.ours})
        return out

    return rows


SWEEPS = tuple(
    Sweep(claim_id, sweep_rows(claim_id, choice),
          caption=f"Verdict of {claim_id} under each {choice.replace('_', ' ')} setting")
    for choice, claim_ids in ROBUSTNESS_CLAIMS.items() for claim_id in claim_ids
)
"""One sweep per claim a choice can change, in the order the chapter ran them before the contract."""
