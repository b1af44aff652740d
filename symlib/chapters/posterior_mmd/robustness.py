"""Chapter 2b's robustness sweeps: the verdicts again under the choices the paper left open.

``"mmd_aggregation"``: Table 1's MMD and NS columns as the median (the paper), mean or maximum
over the kernel bank (App. B.4 says the order does not change); ``"ood_score"``: the OOD columns
under each of :data:`~symlib.chapters.posterior_mmd.evaluation.OOD_SCORES` (the ``robustness``
stage); ``"reading"``: each reading of a claim whose words allow more than one
(:data:`~symlib.chapters.posterior_mmd.claims.READINGS`, judged on the same numbers, in every
profile). The profile's ``robustness`` field names the stage-backed choices swept; a choice it
leaves out gives no rows, so that profile stores no such sweep
(:class:`~symlib.book.chapter.Sweep`).

Each setting is judged on every seed of the run (:func:`~symlib.chapters.posterior_mmd.claims.evaluations`):
its verdict is the first seed's, its robust verdict every seed's, as in the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from symlib.book.chapter import RunResults, Sweep, sized_to_judge
from symlib.book.results import outcome
from symlib.chapters.posterior_mmd.claims import READINGS, combine_seeds, evaluations, judge
from symlib.chapters.posterior_mmd.evaluation import OOD_SCORES

__all__ = ["CLAIM_CHOICES", "OWN_SETTING", "ROBUSTNESS_CLAIMS", "SETTINGS", "SWEEPS", "sweep_rows", "variants"]

ROBUSTNESS_CLAIMS = {"mmd_aggregation": ("multi_mode_closer", "ranking_stable_under_symmetry_removal"),
                     "ood_score": ("multi_mode_better_ood",),
                     "reading": tuple(READINGS)}
"""The claims whose verdict each robustness choice can change."""
SETTINGS = {"mmd_aggregation": ("median", "mean", "max"), "ood_score": tuple(OOD_SCORES)}
"""The settings of each stage-backed choice, in the order they are tried (a reading's: its
:data:`~symlib.chapters.posterior_mmd.claims.READINGS`)."""
OWN_SETTING = {"mmd_aggregation": "median", "ood_score": "max_softmax"}
"""This run's own setting of each stage-backed choice (Table 1's)."""
CLAIM_CHOICES = {claim: tuple(c for c, ids in ROBUSTNESS_CLAIMS.items() if claim in ids)
                 for ids in ROBUSTNESS_CLAIMS.values() for claim in ids}
"""Claim id -> the choices its sweep varies, in order."""


def _variants(evaluation: Mapping, detection, config, choice: str) -> dict[str, list[dict]]:
    """Table 1's rows of one seed's ``evaluation`` under each setting of ``choice``."""
    if choice == "mmd_aggregation":
        values = {how: {(k["mode"], k["method"], k["weights"]): k["value"]
                        for k in evaluation["kernels"] if k["aggregation"] == how}
                  for how in SETTINGS[choice]}
        return {how: [{**r, "MMD": v[r["mode"], r["method"], "MMD"], "NS": v[r["mode"], r["method"], "NS"]}
                      for r in evaluation["rows"]] for how, v in values.items()}
    by = {(d["mode"], d["method"], d["score"]): d for d in detection}
    return {score: [{**r, "AUPR": by[r["mode"], r["method"], score]["AUPR"],
                     "FPR95": by[r["mode"], r["method"], score]["FPR95"]} for r in evaluation["rows"]]
            for score in SETTINGS[choice]}


def _check(results: RunResults, choice: str) -> None:
    if unknown := [c for c in (choice, *results.config.robustness) if c not in SETTINGS]:
        raise ValueError(f"unknown robustness choice {unknown[0]!r}; known: {', '.join(SETTINGS)}")


def variants(results: RunResults, choice: str) -> dict[str, list[dict]]:
    """Table 1's rows (the first seed's) under each setting of ``choice``: ``{setting: rows}``.

    Only the run's own setting (Table 1 itself) when the profile does not sweep ``choice``.
    """
    _check(results, choice)
    if choice not in results.config.robustness:
        return {OWN_SETTING[choice]: results["eval"]["rows"]}
    return _variants(results["eval"], results["robustness"] if choice == "ood_score" else None,
                     results.config, choice)


def _per_seed_variants(results: RunResults, choice: str) -> dict[str, list[list[dict]]]:
    """``{setting: [rows of seed 0, rows of seed 1, ...]}``."""
    _check(results, choice)
    seeds = evaluations(results)
    detections = [results["robustness"] if choice == "ood_score" else None,
                  *(e.get("detection") for e in seeds[1:])]
    per = [_variants(e, d, results.config, choice) for e, d in zip(seeds, detections, strict=True)]
    return {s: [p[s] for p in per] for s in SETTINGS[choice]}


def _settings(results: RunResults, claim_id: str, choice: str):
    """``(setting, this run's?, per-seed evaluations, readings)`` of ``choice`` for ``claim_id``."""
    seeds = evaluations(results)
    if choice == "reading":
        for k, reading in enumerate(READINGS[claim_id]):
            yield reading, k == 0, seeds, {claim_id: reading}
        return
    for setting, tables in _per_seed_variants(results, choice).items():
        yield setting, setting == OWN_SETTING[choice], [{**e, "rows": t} for e, t in zip(seeds, tables, strict=True)], {}


def sweep_rows(claim_id: str, choices: tuple[str, ...]):
    """The rows of the sweep of ``claim_id`` over ``choices``: ``rows(results) -> [{"choice",
    "setting", "this run", "verdict", "robust verdict", "ours"}, ...]``, each choice's own
    setting first.

    Each setting's claim is judged like the ledger's, on every seed, the smoke gate included
    (:func:`~symlib.book.chapter.sized_to_judge`).
    """
    def rows(results: RunResults) -> list[dict]:
        gate = sized_to_judge(bool(results.config.judge))
        out = []
        for choice in choices:
            if choice != "reading" and choice not in results.config.robustness:
                continue  # this profile does not sweep the choice
            for setting, own, seeds, readings in _settings(results, claim_id, choice):
                judged = combine_seeds([judge(e, results.config, readings) for e in seeds])
                claim = next(c for c in judged if c.id == claim_id)
                claim = replace(claim, preconditions=(*claim.preconditions, *gate))
                out.append({"choice": choice, "setting": setting, "this run": own,
                            "verdict": outcome(claim.holds), "robust verdict": outcome(claim.robust),
                            "ours": claim.ours})
        return out

    return rows


SWEEPS = tuple(
    Sweep(claim_id, sweep_rows(claim_id, choices),
          caption=f"Verdict of {claim_id} under each {' and '.join(c.replace('_', ' ') for c in choices)} setting")
    for claim_id, choices in CLAIM_CHOICES.items()
)
"""One sweep per claim some choice can change."""
