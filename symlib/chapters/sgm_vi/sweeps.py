"""Chapter 3's robustness sweeps: the verdicts again under the choices the paper left open.

Each ``(field, values)`` of the profile's ``robustness`` reruns the experiment the field belongs
to with that one field changed (the ``robustness`` stage, each variant cached on its own) and
judges the claims resting on that experiment again; ``interp_band`` only rereads ``a*`` off the
same fits. Code checks are left out: they hold by construction. A claim none of whose choices
the profile varies gets no rows: that profile runs no sweep of it (nothing stored or appended).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from symlib.book.chapter import Sweep, sized_to_judge
from symlib.book.results import Column, Kind, outcome, robustness_summary
from symlib.chapters.sgm_vi.claims import CLAIM_PARTS, claims
from symlib.chapters.sgm_vi.stages import part_of
from symlib.chapters.sgm_vi.stages_geometry import with_band

__all__ = ["SWEEPS", "SWEPT_CLAIMS", "sweep_rows", "sweep_summary"]

SWEPT_CLAIMS = ("mean-seeking-threshold", "toy-mfvi-interpolates", "toy-symmetrised-elbo", "toy-test-mse",
                "mnist-gain-grows-with-width", "mnist-sgm-beats-mfvi")
"""The claims that rest on a choice the paper left open (the `quick` and `paper` profiles vary
one for each)."""


def _setting(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _judged(results: Mapping, config) -> dict:
    """The claims judged on ``results`` (run under ``config``), with the smoke gate, by id."""
    gate = sized_to_judge(bool(config.judge))
    return {c.id: replace(c, preconditions=(*c.preconditions, *gate)) if c.kind is Kind.CLAIM else c
            for c in claims(results, config)}


def _row(choice: str, setting: str, own: bool, claim) -> dict:
    return {"choice": choice, "setting": setting, "this run": own, "verdict": outcome(claim.holds),
            "robust verdict": outcome(claim.robust), "detail": claim.verdict,
            "robust detail": claim.column_verdict(Column.ROBUST), "ours": claim.ours}


def sweep_rows(results, claim_id: str) -> list[dict]:
    """The verdict of ``claim_id`` under each setting of the profile's ``robustness`` that changes
    the experiment it rests on, the run's own setting first for each choice.

    Returns:
        No rows when the profile varies no choice the claim rests on; else rows with ``choice``
        (the profile field), ``setting`` (its value, as text), ``this run``, ``verdict`` and
        ``robust verdict`` (holds / does not hold / not judged, the reproduced and the robust
        column), ``detail`` and ``robust detail`` (each with the unmet preconditions) and ``ours``
        (the measurement under that setting).
    """
    config, part = results.config, CLAIM_PARTS[claim_id]
    stages = dict(results.items())
    own_claim = _judged(stages, config)[claim_id]
    rows = []
    for field, values in config.robustness:
        if part_of(field) != part:
            continue
        own = getattr(config, field)
        rows.append(_row(field, _setting(own), True, own_claim))
        for value in values:
            if value == own:
                continue
            if field == "interp_band":
                variant = {**stages, "interp": with_band(stages["interp"], value)}
            else:
                variant = {**stages, part: stages["robustness"][(field, value)]}
            rows.append(_row(field, _setting(value), False,
                             _judged(variant, replace(config, **{field: value}))[claim_id]))
    return rows


def sweep_summary(frame) -> str:
    """Per choice, whether the verdict stays the same or "depends on <choice>" with the verdict at
    each setting (:func:`symlib.book.results.robustness_summary` on a sweep's rows)."""
    return robustness_summary([{"choice": r["choice"], "value": r["setting"], "outcome": r["verdict"]}
                               for r in frame.to_dict("records")])


SWEEPS = tuple(
    Sweep(claim_id, lambda results, claim_id=claim_id: sweep_rows(results, claim_id),
          caption=f"Verdict of {claim_id} under each setting")
    for claim_id in SWEPT_CLAIMS
)
"""One sweep per claim that rests on an open choice."""
