"""Chapter 2a's robustness: the claims' verdicts under the settings the paper left open.

The ``robustness`` stage (:func:`~symlib.chapters.symmetry_removal.stages.sweep_setting`) reruns,
per setting of the profile's ``robustness``, the stages that read the field it changes. Here
each claim's :class:`~symlib.book.chapter.Sweep` judges the claim again on the run's results with
those stages' results swapped in: the first row is the run as is, then one row per setting that
reruns a stage the claim rests on. permutations-rare-late's sweep also judges, on the run as
is, Figure 4's other sort keys and the other readings of "nearly never permute in the last
phase" (:class:`~symlib.chapters.symmetry_removal.claims.Reading`), which rerun nothing.
"""

from __future__ import annotations

import dataclasses

from symlib.book.chapter import RunResults, Sweep, sized_to_judge
from symlib.book.results import outcome
from symlib.chapters.symmetry_removal.claims import (
    READING_CHOICE,
    SECTIONS,
    SORT_KEY_CHOICE,
    Reading,
    claims,
)
from symlib.chapters.symmetry_removal.optunets import REPRODUCED_SORT_KEY, SortKey
from symlib.chapters.symmetry_removal.stages import ROBUSTNESS_CHOICES

__all__ = ["GROUP_CLAIMS", "SWEEPS", "paper_only_settings", "sweep_rows"]

GROUP_CLAIMS = {
    "toy": ("toy-duplicated-modes", "identical-marginals"),
    "optunets": ("not-min-mass", "permutations-rare-late", "identical-marginals-optunet"),
}
"""The claims that rest on each group of stages a setting may rerun (:data:`ROBUSTNESS_CHOICES`)."""


def _row(results: RunResults, claim_id: str, choice: str, setting: str, **reading) -> dict:
    """Claim ``claim_id`` judged on ``results`` (with the smoke gate, as the ledger judges it);
    ``reading``: permutations-rare-late's ``sort_key`` or ``reading`` (:func:`claims`)."""
    (claim,) = [c for c in claims(results, **reading) if c.id == claim_id]
    claim = dataclasses.replace(claim, preconditions=(*claim.preconditions,
                                                      *sized_to_judge(bool(results.config.judge))))
    return {"choice": choice, "setting": setting, "verdict": outcome(claim.holds),
            "robust verdict": outcome(claim.robust),
            "failed preconditions": "; ".join(f"{p.criterion} ({p.measured})" for p in claim.failed_preconditions),
            "ours": claim.ours}


def sweep_rows(results: RunResults, claim_id: str) -> list[dict]:
    """Claim ``claim_id``'s verdict as run, then under each setting that reruns a stage it rests on.

    Returns:
        Rows with ``choice``, ``setting``, ``verdict`` (holds / does not hold / not judged),
        ``failed preconditions`` and ``ours``, in the order run.
    """
    main = {k: v for k, v in results.stages.items() if k != "robustness"}
    rows = [_row(results, claim_id, "as run", "this profile")]
    if claim_id == "permutations-rare-late":  # the readings the paper's words allow, on the run as is
        rows += [_row(results, claim_id, SORT_KEY_CHOICE, key.value, sort_key=key)
                 for key in SortKey if key is not REPRODUCED_SORT_KEY]
        rows += [_row(results, claim_id, READING_CHOICE, reading.value, reading=reading)
                 for reading in Reading if reading is not Reading.NEVER]
    for (field, value), rerun in results["robustness"].items():
        choice, group = ROBUSTNESS_CHOICES[field]
        if claim_id not in GROUP_CLAIMS[group]:
            continue
        setting = RunResults({**main, **rerun}, config=dataclasses.replace(results.config, **{field: value}),
                             seed=results.seed, device=results.device)
        rows.append(_row(setting, claim_id, choice, f"{field} = {value}"))
    # a claim no setting of this profile reruns has no sweep here (one "as run" row would read as robust)
    return rows if len(rows) > 1 else []


def _sweep(claim_id: str) -> Sweep:
    return Sweep(claim_id, lambda results: sweep_rows(results, claim_id),
                 caption=f"Verdict of {claim_id} under each setting")


SWEEPS = tuple(_sweep(cid) for cid in SECTIONS)  # the ledger's order
"""One sweep per claim; a profile whose settings rerun no stage of a claim gives it no rows, so it
stores no sweep of it."""


def paper_only_settings(config, paper) -> list[str]:
    """The settings of the ``paper`` profile's sweep that ``config`` leaves out, in words."""
    return [f"{ROBUSTNESS_CHOICES[f][0]} = {v}" for f, v in paper.robustness if (f, v) not in config.robustness]
