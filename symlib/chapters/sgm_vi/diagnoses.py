"""Chapter 3's diagnoses: why a claim does not hold, computed from the run.

:func:`diagnoses` is the chapter's ``diagnoses=`` callable (:class:`symlib.book.chapter.Chapter`):
for every claim that can fail and does in either column (its criterion fails at the run's own
setting, or under a setting of its sensitivity sweep), the causes in words:

* **budget**: the run's size per fit against the paper's (Figure 3's steps and draws per fit;
  MNIST's steps per network and seeds), stated only where smaller;
* **data**: MNIST on the digits that ship here rather than the paper's 60,000 / 10,000;
* **open choice**: a choice the paper leaves open on which the verdict turns (its settings in the
  sensitivity sweep give different verdicts), named by the sweep's ``choice``; for MNIST also the
  initial posterior sd whenever SGM and MFVI trained identically (the mechanism it decides);
* **the paper's claim fails here**: the criterion fails at the paper's budget under the readings
  of the authors' code (Figure 3), or under every setting the sweep tried (the toy), or for the
  exact distances of Theorem 3.1.

The criteria are the claims' own (:mod:`symlib.chapters.sgm_vi.claims`); nothing here changes a
verdict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from symlib.book.results import Cause, Diagnosis
from symlib.chapters.sgm_vi.claims import (
    DIRECTION_WORDS,
    INIT_WORDS,
    PAPER_INTERP,
    PAPER_MNIST,
    PAPER_TOY,
    claims,
    interp_reading,
)
from symlib.chapters.sgm_vi.stages_geometry import proximity_table, threshold_table
from symlib.chapters.sgm_vi.stages_mnist import mnist_identical
from symlib.chapters.sgm_vi.sweeps import SWEPT_CLAIMS, sweep_rows

__all__ = ["CHOICE_WORDS", "FAILABLE", "choice_verdicts", "diagnoses", "share"]

FAILABLE = ("mean-seeking-threshold", "equivalent-modes-closer", "toy-mfvi-interpolates", "toy-symmetrised-elbo",
            "toy-test-mse", "mnist-gain-grows-with-width", "mnist-sgm-beats-mfvi")
"""The claims (not code checks) that a run can find not to hold."""

CHOICE_WORDS = {
    "interp_direction": "the direction of u (Sec. 3 says only \"u is a unit vector\"; the authors' notebook "
                        "uses u = e_1)",
    "interp_init": "where q starts (Sec. 3: N(0, I), \"corresponding to p's mixture component\", which it is "
                   "only for s = 1; the authors' notebook starts at N(0, I) for every s)",
    "interp_band": "where interpolating ends (the band |ratio - 1/2| <= band that defines a*; the paper "
                   "gives none)",
    "interp_steps": "Figure 3's Adam steps per fit",
    "toy_noise_sd": "the toy's noise sd, of the data and the likelihood (not stated by the paper)",
    "toy_init_sd": "the toy's initial posterior sd (not stated by the paper)",
    "toy_init_mean_sd": "the spread of the toy's initial means (not stated by the paper)",
    "toy_epochs": "the toy's number of epochs (the paper: 10)",
    "mnist_init_sd": "the MNIST networks' initial posterior sd (not stated by the paper)",
}
"""Each swept profile field, in words: what the paper says of it."""

_BUDGET_CHOICES = frozenset({"interp_steps", "toy_epochs"})
"""Swept fields that size the run rather than read the paper: a verdict turning on one is stated
with the budget, not as an open choice."""


def share(ours: float, paper: float) -> str:
    """``ours`` as a percentage of ``paper``, two digits: ``"33 %"``, ``"6.7 %"``, ``"0.4 %"``."""
    pct = 100.0 * ours / paper
    return f"{pct:.0f} %" if pct >= 10 else f"{pct:.2g} %"


def choice_verdicts(rows: list[dict]) -> dict[str, list[tuple[str, str, str, bool]]]:
    """Per swept choice, ``(setting, reproduced verdict, robust verdict, this run)`` of each row."""
    out: dict[str, list[tuple[str, str, str, bool]]] = {}
    for r in rows:
        out.setdefault(str(r["choice"]), []).append(
            (str(r["setting"]), str(r["verdict"]), str(r["robust verdict"]), bool(r["this run"])))
    return out


def _turns(settings: list[tuple[str, str, str, bool]]) -> bool:
    """Whether the judged verdicts of one choice differ between its settings (either column)."""
    for column in (1, 2):
        judged = {s[column] for s in settings if s[column] != "not judged"}
        if len(judged) > 1:
            return True
    return False


def _listing(settings: list[tuple[str, str, str, bool]], words: Mapping[str, str] | None = None) -> str:
    """``"0.25 (this run): does not hold; 0.5: holds"`` (the reproduced column's verdicts; the robust
    column's where it judged otherwise)."""
    parts = []
    for setting, verdict, robust, own in settings:
        name = (words or {}).get(setting, setting) + (" (this run)" if own else "")
        parts.append(f"{name}: {verdict}" + (f" (robust: {robust})" if robust not in (verdict, "not judged") else ""))
    return "; ".join(parts)


def _open_choices(rows: list[dict], *, always: tuple[str, ...] = (), words=None) -> list[Diagnosis]:
    """An open-choice diagnosis per swept choice whose verdict turns on its setting (and per choice
    of ``always`` that the sweep varies)."""
    out = []
    for choice, settings in choice_verdicts(rows).items():
        if choice in _BUDGET_CHOICES or not (choice in always or _turns(settings)):
            continue
        out.append(Diagnosis(Cause.OPEN_CHOICE,
                             f"{CHOICE_WORDS.get(choice, choice)}: {_listing(settings, (words or {}).get(choice))}",
                             sweep=choice))
    return out


def _fails_anywhere(claim, rows: list[dict]) -> bool:
    """The criterion fails at the run's own setting or a sweep row says "does not hold"."""
    return claim.criterion_holds is False or any(
        "does not hold" in (r["verdict"], r["robust verdict"]) for r in rows)


def _rows(results, claim_id: str) -> list[dict]:
    """The sweep rows of ``claim_id``: the frame the chapter's ledger already judged where it has
    one (``results.sweep_frames``), else :func:`~symlib.chapters.sgm_vi.sweeps.sweep_rows`."""
    for sweep, frame in getattr(results, "sweep_frames", {}).items():
        if getattr(sweep, "claim", None) == claim_id:
            return [] if frame is None else frame.to_dict("records")
    return sweep_rows(results, claim_id)


def diagnoses(results) -> dict[str, tuple[Diagnosis, ...]]:
    """``{claim id: (Diagnosis, ...)}`` for every claim of :data:`FAILABLE` that fails in this run
    (at its own setting or under a setting of its sweep); see the module docstring."""
    config = getattr(results, "config", None)
    judged = {c.id: c for c in claims(results, config)}
    out = {}
    for cid in FAILABLE:
        rows = _rows(results, cid) if cid in SWEPT_CLAIMS and config is not None else []
        claim = judged[cid]
        if not _fails_anywhere(claim, rows):
            continue
        if cid == "mean-seeking-threshold":
            found = _interp(results["interp"], config, claim, rows)
        elif cid == "equivalent-modes-closer":
            found = _prox(results["prox"])
        elif cid.startswith("toy-"):
            found = _toy(results["toy"], config, claim, rows)
        else:
            found = _mnist(results["mnist"], config, claim, rows)
        if not found:  # a failure none of the above explains
            found = [Diagnosis(Cause.CLAIM_FAILS, "the criterion fails at this run's own setting")]
        out[cid] = tuple(found)
    return out


def _interp(interp: dict, config, claim, rows: list[dict]) -> list[Diagnosis]:
    steps = getattr(config, "interp_steps", None) or len(interp[interp["dims"][0]].get("loss_curve", ()))
    samples = getattr(config, "interp_samples", None)
    n_a = len(interp["a_over_sd"])
    out = []
    small = [(f"{steps:,} of the paper's {PAPER_INTERP['steps']:,} Adam steps per fit "
             f"({share(steps, PAPER_INTERP['steps'])})")] if steps and steps < PAPER_INTERP["steps"] else []
    if samples and samples < PAPER_INTERP["samples"]:
        small.append(f"{samples:,} of its {PAPER_INTERP['samples']:,} Monte Carlo draws per step "
                     f"({share(samples, PAPER_INTERP['samples'])})")
    if n_a < PAPER_INTERP["grid"]:
        small.append(f"{n_a} of the authors' {PAPER_INTERP['grid']} values of a/s (grid step "
                     f"{10 / n_a:g} against 0.1)")
    words = {"interp_direction": DIRECTION_WORDS, "interp_init": INIT_WORDS}
    choices = _open_choices(rows, words=words)
    failed = ""
    if claim.criterion_holds is False:
        t = threshold_table(interp)
        far = t[(t["a*/s (ours)"] < 4.5) | (t["a*/s (ours)"] > 5.5) | ~np.isfinite(t["a*/s (ours)"])]
        where = ", ".join(f"{v:g} at (D, s) = ({d:g}, {s:g})"
                          for d, s, v in zip(far["D"], far["component sd s"], far["a*/s (ours)"]))
        failed = (f"with {interp_reading(interp)}: a*/s = {where}" if where else
                  f"with {interp_reading(interp)}: a fit below a* leaves the band, or a*/s varies by more than ×1.5")
    authors = interp.get("direction", "diagonal") == "axis" and interp.get("init", "unit") == "unit"
    if small:
        out.append(Diagnosis(Cause.BUDGET, "; ".join(small) + (f"; at this budget, {failed}" if failed else "")))
    elif failed and authors:
        out.append(Diagnosis(Cause.CLAIM_FAILS, f"at the paper's budget, {failed}"))
    elif failed:
        out.append(Diagnosis(Cause.PROTOCOL, f"judged under another reading than the authors' notebook's, {failed}"))
    return out + choices


def _prox(prox_results: dict) -> list[Diagnosis]:
    """Exact distances: a failure is the theorem's statement failing on these networks."""
    prox = proximity_table(prox_results)
    out = []
    for (di, do), g in prox.groupby(["d_i", "d_o"]):
        g = g.sort_values("width")
        rises = [f"{a} to {b}" for a, b, da, db in zip(g["width"], g["width"].iloc[1:], g["mean"], g["mean"].iloc[1:])
                 if db >= da]
        if rises:
            out.append(Diagnosis(Cause.CLAIM_FAILS, f"(d_i, d_o) = ({di}, {do}): the mean relative distance over "
                                                    f"the random networks does not fall from width {', '.join(rises)}"))
    over = prox[(prox["max"] > prox["theorem 3.1 bound"]) | (prox["max"] > prox["sqrt(8/d_h)"])]
    if len(over):
        out.append(Diagnosis(Cause.CLAIM_FAILS, "a random network lies beyond the theorem's bound or √(8/d_h) at "
                                                f"widths {', '.join(str(w) for w in over['width'])}"))
    return out


def _toy(toy: dict, config, claim, rows: list[dict]) -> list[Diagnosis]:
    seeds = int(np.shape(toy["MFVI"]["mse"])[-1])
    curve = toy["MFVI"].get("objective_curve")
    epochs = getattr(config, "toy_epochs", None) or (np.shape(curve)[-1] if curve is not None else None)
    out = []
    small = []
    if epochs is not None and epochs < PAPER_TOY["epochs"]:
        small.append(f"{epochs} of the paper's {PAPER_TOY['epochs']} epochs per fit ({share(epochs, PAPER_TOY['epochs'])})")
    if seeds < PAPER_TOY["seeds"]:
        small.append(f"{seeds} of its {PAPER_TOY['seeds']} seeds")
    if small:
        out.append(Diagnosis(Cause.BUDGET, "; ".join(small)))
    choices = _open_choices(rows)
    out += choices
    if claim.criterion_holds is False and not small and not choices:
        at = f"at the paper's {PAPER_TOY['epochs']} epochs of batches of {PAPER_TOY['batch']} and {seeds} seeds"
        longer = {c: v for c, v in choice_verdicts(rows).items() if c in _BUDGET_CHOICES and _turns(v)}
        if longer:
            where = "; ".join(f"{CHOICE_WORDS.get(c, c)}: {_listing(v)}" for c, v in longer.items())
            out.append(Diagnosis(Cause.CLAIM_FAILS, f"{at}; it turns only with more training ({where})"))
        elif rows:
            tried = sorted({str(r["choice"]) for r in rows})
            out.append(Diagnosis(Cause.CLAIM_FAILS, f"{at}, under every setting tried ({len(rows)} settings of "
                                                    f"{', '.join(tried)})"))
        else:
            out.append(Diagnosis(Cause.CLAIM_FAILS, f"{at} (no sensitivity sweep in this profile)"))
    return out


def _mnist(mnist: dict, config, claim, rows: list[dict]) -> list[Diagnosis]:
    out = []
    n, n_test = mnist.get("n_train"), mnist.get("n_test")
    if n is not None and n < PAPER_MNIST["n_train"]:
        out.append(Diagnosis(Cause.DATA, f"MNIST: {n:,} of the paper's 60,000 training digits"
                                         + (f" and {n_test:,} of its 10,000 test digits" if n_test else "")
                                         + " (the digits that ship here)"))
    first = mnist["cells"][0]
    seeds = len(first["accuracy"])
    curve = first.get("objective_curve")
    epochs = getattr(config, "mnist_epochs", None) or (np.shape(curve)[-1] if curve is not None else None)
    batch = getattr(config, "mnist_batch_size", None) or PAPER_MNIST["batch"]
    paper_steps = PAPER_MNIST["epochs"] * math.ceil(PAPER_MNIST["n_train"] / PAPER_MNIST["batch"])
    small = []
    if n is not None and epochs is not None:
        steps = epochs * math.ceil(n / batch)
        if steps < paper_steps:
            small.append(f"{steps:,} of the paper's {paper_steps:,} Adam steps per network ({share(steps, paper_steps)}; "
                         f"{epochs} epochs of {math.ceil(n / batch)} batches of {batch})")
    if seeds < PAPER_MNIST["seeds"]:
        small.append(f"{seeds} of its {PAPER_MNIST['seeds']} seeds per cell")
    if small:
        out.append(Diagnosis(Cause.BUDGET, "; ".join(small)))
    identical = mnist_identical(mnist)
    out += _open_choices(rows, always=("mnist_init_sd",) if identical else ())
    if identical:
        why = (f"at {getattr(config, 'mnist_init_sd', 'this run')} SGM and MFVI trained identically: every sampled "
               "permuted copy of q is negligible at the draws, so the entropy term had no gradient")
        given = [d for d in out if d.sweep == "mnist_init_sd"]
        out = [Diagnosis(d.cause, f"{d.detail} ({why})", d.sweep) if d in given else d for d in out]
        if not given:  # no sweep of it in this profile
            out.append(Diagnosis(Cause.OPEN_CHOICE, f"{CHOICE_WORDS['mnist_init_sd']}: {why}; not swept in this "
                                                    "profile", sweep="mnist_init_sd"))
    if claim.criterion_holds is False and not out:
        out.append(Diagnosis(Cause.CLAIM_FAILS, "at the paper's budget and data, the gain is not resolved above "
                                                "2 standard errors"))
    return out
