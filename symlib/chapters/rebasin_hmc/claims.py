"""Chapter 5's ledger: the claims of Xiao et al. 2023, judged on this run's numbers.

Thresholds and preconditions are fixed here, before any run. The smoke gate is the contract's
(``judge_field="judge"``). Each claim of Sec. 3 is judged again under every HMC setting the
``robust`` stage ran (:data:`SWEEPS`); the NoT claims do not rest on HMC and are not swept.

Every claim is judged twice with one criterion (:class:`~symlib.book.results.Column`). The
*reproduced* column is gated only by what the paper's own run is shown or stated to have: the
test accuracies of Table 1 (HMC's samples 98.43 %, the ensemble's 98.66 %, VI's 98.11 %) and the
reach of its sampler (Appendix A and the authors' ``HP_hmc.json``); its budget is stated as a
fraction of the paper's, and the verdict is given at that budget. The paper ran ONE HMC chain
and reports no R-hat, ESS or acceptance rate, trained VI for a fixed 50 epochs and reports no
accuracy for the NoT networks: multi-chain mixing (at least :data:`ROBUST_CHAINS` chains, split
R-hat and ESS of the logits), VI's plateau, the NoT networks' accuracy and the number of
``W_init`` seeds gate the *robust* column only.

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
from symlib.book.preconditions import accuracy_reached, chains_mixed, plateaued
from symlib.book.results import Claim, Column, Erratum, Precondition, outcome, precondition
from symlib.chapters.rebasin_hmc.paper import reported
from symlib.chapters.rebasin_hmc.stages import ROBUST_MIN_CHAINS, variant_config

__all__ = ["ACC", "ERRATA", "EXPLORATION_MIN", "PAPER_EXPLORATION", "PAPER_HMC_GRAD_EVALS", "ROBUST_CHAINS",
           "ROBUST_SEEDS", "SECTIONS", "SOURCES", "SWEEPS", "bayes_claims", "claims", "not_claims",
           "robust_run", "robustness_rows"]

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
    "not-monotone-along-path": "Counting",
    "q_r-beats-q_d": "Table 1", "ensemble-q_r-competitive": "Table 1", "ensemble-q_r-beats-hmc-q_r": "Table 1",
    "rebasin-shrinks-sigma": "Figure 3", "bayesian-sigma-near-prior": "Figure 3",
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
    run's column) and the robust column the other run's outcome and measurement."""
    pre = (*(replace(p, column=Column.REPRODUCED) for p in main.preconditions if p.gates(Column.REPRODUCED)),
           *(replace(p, column=Column.ROBUST) for p in other.preconditions if p.gates(Column.ROBUST)))
    return replace(main, preconditions=pre, robust_holds=other.criterion_holds,
                   robust_ours=f"{name!r} run, {chains} chains: {other.ours}")


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
    epochs = f", {config.not_epochs} of 50 SGD epochs (lr {config.not_lr:g}; code: 0.001)" if config is not None else ""
    return precondition(
        "budget", "the NoT experiment's size stated as a fraction of the paper's (3 W_init, NoT(P) over all of "
                  "0..511; code: 50 values, 50 epochs); the verdict is given at this size",
        f"{seeds} of 3 W_init, {values} of 50 NoT values (of {nr['width']} units){epochs}", True,
        column=Column.REPRODUCED, source=SOURCES["not"])


def _hmc_budget(br: dict, config) -> Precondition:
    """HMC's budget, stated as a fraction of the paper's one chain (never a gate: always met)."""
    h = br["hmc"]
    chains, per_chain = int(h["chains"]), int(h["grad_evals_per_chain"])
    total = chains * per_chain
    how = ""
    if config is not None:
        step = (f"step adapted from {config.hmc_step_size:g}" if config.hmc_adapt
                else f"fixed step {config.hmc_step_size:g}")
        jitter = f", jitter {config.hmc_jitter:g}" if config.hmc_jitter else ""
        how = (f"; {config.hmc_burnin} burn-in + {config.hmc_samples} × {config.hmc_thin} transitions of "
               f"{config.hmc_leapfrog} leapfrog steps, {step}{jitter}, {config.hmc_warm_start_epochs} MAP "
               f"warm-start epochs (the paper: none); ensemble {config.ens_epochs} and VI {config.vi_epochs} "
               f"of 50 Adam epochs")
    if "accept_rate" in h:
        how += f"; mean acceptance {float(np.mean(h['accept_rate'])):.2f} (the paper reports none)"
    return precondition(
        "budget", f"HMC's budget stated as a fraction of the paper's one chain of {PAPER_HMC_GRAD_EVALS:,} "
                  "gradient evaluations at a fixed step 0.001; the verdict is given at this budget",
        f"{chains} chain(s) × {per_chain:,} = {total:,} of {PAPER_HMC_GRAD_EVALS:,} gradient evaluations "
        f"({total / PAPER_HMC_GRAD_EVALS:.2%}){how}", True, column=Column.REPRODUCED, source=SOURCES["hmc"])


def not_claims(nr: dict, config=None) -> list[Claim]:
    """Claims of Sec. 2 (Figure 2), judged at this run's size (stated against the paper's). The
    robust column asks every trained network to reach the accuracy precondition (the reference is
    HMC's on the full architecture and data, Table 1; the paper reports none for these SGD-trained
    networks, so it does not gate the reproduced column) and at least :data:`ROBUST_SEEDS` W_init."""
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
    worst = float(min(df["test acc. W_0"].min(), df["test acc. W_1"].min()))
    seeds = df["seed"].nunique() if "seed" in df else 1
    pre = (_not_budget(nr, config),
           _accuracy(100 * worst, "HMC sample", "test accuracy of the worst trained network", column=Column.ROBUST),
           precondition("seeds", f"independent W_init >= {ROBUST_SEEDS}", seeds, seeds >= ROBUST_SEEDS,
                        column=Column.ROBUST))
    return [
        Claim(
            id="not-stable-under-training",
            text="NoT(P') of the rebasin permutation between the two trained networks is almost exactly "
                 "NoT(P) of the initial permutation",
            paper="Fig. 2 (left): NoT(P') ≈ NoT(P) over 0..511",
            ours=f"max |NoT(P') − NoT(P)| = {int(dev.max())} of {n} units, Pearson r = {r:.4f} ({len(df)} pairs)",
            holds=bool(dev.max() <= 0.05 * n and r >= 0.99),
            criterion="max |NoT(P') − NoT(P)| <= 5% of the units and Pearson r >= 0.99",
            preconditions=pre),
        Claim(
            id="not-tracks-distance-and-barrier",
            text="Weight distance and loss barrier after training correlate strongly with NoT(P)",
            paper="Fig. 2 (centre two)",
            ours=f"Spearman ρ(NoT, distance) = {rho_d:.3f}, ρ(NoT, barrier) = {rho_b:.3f}",
            holds=bool(rho_d >= 0.9 and rho_b >= 0.9),
            criterion="Spearman ρ of NoT(P) with the distance and with the barrier both >= 0.9",
            preconditions=pre),
        Claim(
            id="not-monotone-along-path",
            text="NoT of matching W_λ to W_0 stays flat near either trained model and changes "
                 "monotonically in between",
            paper="Fig. 2 (right)",
            ours=f"final epoch, pair NoT(P) = {nr['path_value']}: NoT(P~) over λ = {final_path.tolist()}; "
                 f"monotone: {monotone}; flat near the ends: {flat}",
            holds=bool(monotone and flat),
            criterion="NoT(P~) non-decreasing in λ, and within 5% of the units of its end values for "
                      "λ <= 0.1 and λ >= 0.9",
            preconditions=pre),
    ]


def bayes_claims(br: dict, config=None, *, robust: tuple[str, dict, object] | None = None) -> list[Claim]:
    """Claims of Sec. 3 (Table 1, Figure 3), judged at this run's budget (stated against the
    paper's). Each rests on HMC and on the other methods it compares, which must reach the test
    accuracy of Table 1 (both columns). The robust column also asks for at least
    :data:`ROBUST_CHAINS` chains that mixed (R-hat and ESS of the samples' logits at
    :data:`~symlib.chapters.rebasin_hmc.stages_bayes.MIX_POINTS` test images) and a VI loss that
    levelled off: the paper ran one chain, reports no diagnostics and trained VI for 50 epochs.

    ``robust``: ``(variant, its results, its settings)`` (:func:`robust_run`) to judge the robust
    column on that run instead of ``br`` (both columns are then judged on their own run)."""
    if robust is not None:
        name, other_br, other_config = robust
        others = {c.id: c for c in bayes_claims(other_br, other_config)}
        return [_robust_from(c, others[c.id], name, int(other_br["hmc"]["chains"]))
                for c in bayes_claims(br, config)]
    t = br["table"]
    ag, tv, mu = "agreement with HMC", "TV to HMC", "test acc. of mu_d / mu_r %"
    m = br["hmc"]["mixing"]
    chains = int(br["hmc"]["chains"])
    hmc = (_hmc_budget(br, config),
           _accuracy(t["HMC sample"][ACC], "HMC sample", "HMC's test accuracy"),
           *_robust((precondition("chains", f"independent HMC chains >= {ROBUST_CHAINS}", chains,
                                  chains >= ROBUST_CHAINS),
                     *chains_mixed(m["rhat"], m["bulk_ess"], m["tail_ess"], what="HMC logits"))))
    ens = (_accuracy(t["Ens. sample"][ACC], "Ens. sample", "the ensemble's test accuracy"),)
    vi = (_accuracy(t["VI q"][ACC], "VI q", "VI's test accuracy"), *_robust((plateaued(br["vi"]["loss"], what="VI loss"),)))

    def better(method):
        qd, qr = t[f"{method} q_d"], t[f"{method} q_r"]
        return bool(qr[ag] > qd[ag] and qr[tv] < qd[tv] and qr[mu] > qd[mu])

    comp_acc = t["Ens. sample"][ACC] - t["Ens. q_r"][ACC]
    comp_ag = t["Ens. sample"][ag] - t["Ens. q_r"][ag]
    sds = br["sds"]
    med = {k: float(np.median(v)) for k, v in sds.items()}
    near_one = {k: float(np.mean((sds[k] > 0.8) & (sds[k] < 1.2))) for k in ("HMC sigma_r", "VI sigma")}
    scale = br["hmc"]["exploration_scale"]
    keep = np.asarray(br["prune_keep"])
    low = keep <= 0.5
    pm = {k: float(np.mean(np.asarray(v)[low])) for k, v in br["pruning"].items()}
    stitched = pm["Ensemble mu_r + HMC sigma_r"]
    rivals = {"HMC's own": pm["HMC (mu_r, sigma_r)"], "the ensemble's own": pm["Ensemble (mu_r, sigma_r)"],
              "random order": pm["Ensemble mu_r, random order"]}
    return [
        Claim(
            id="q_r-beats-q_d",
            text="q_r (after rebasin) is much better than q_d (raw moments) for both HMC and the ensemble",
            paper="Table 1, finding (i): agreement 0.82 vs 0.12 (HMC), 0.99 vs 0.52 (ensemble)",
            ours="; ".join(f"{k}: agreement {t[k + ' q_r'][ag]:.3f} vs {t[k + ' q_d'][ag]:.3f}, TV "
                           f"{t[k + ' q_r'][tv]:.3f} vs {t[k + ' q_d'][tv]:.3f}, acc(μ) {t[k + ' q_r'][mu]:.1f} "
                           f"vs {t[k + ' q_d'][mu]:.1f}%" for k in ("HMC", "Ens.")),
            holds=better("HMC") and better("Ens."),
            criterion="q_r better than q_d in agreement, TV and accuracy of its mean, for HMC and the ensemble",
            preconditions=(*hmc, *ens)),
        Claim(
            id="ensemble-q_r-competitive",
            text="The ensemble's q_r is a parameter-efficient representation competitive with the "
                 "ensemble's samples",
            paper="Table 1, finding (iii): accuracy 97.72 vs 98.66%, agreement 0.987 vs 0.993",
            ours=f"accuracy {t['Ens. q_r'][ACC]:.2f} vs {t['Ens. sample'][ACC]:.2f}%, agreement "
                 f"{t['Ens. q_r'][ag]:.3f} vs {t['Ens. sample'][ag]:.3f}",
            holds=bool(comp_acc <= 2.0 and comp_ag <= 0.02),
            criterion="q_r within 2 accuracy points and 0.02 agreement of the ensemble's samples",
            preconditions=(*hmc, *ens)),
        Claim(
            id="ensemble-q_r-beats-hmc-q_r",
            text="The ensemble's q_r agrees better with HMC than HMC's own q_r",
            paper="Table 1, finding (ii): 0.987 vs 0.825",
            ours=f"agreement {t['Ens. q_r'][ag]:.3f} vs {t['HMC q_r'][ag]:.3f}",
            holds=bool(t["Ens. q_r"][ag] > t["HMC q_r"][ag]),
            criterion="agreement with HMC higher for the ensemble's q_r",
            preconditions=(*hmc, *ens)),
        Claim(
            id="rebasin-shrinks-sigma",
            text="Permuting all samples into one basin reduces the per-weight sds overall",
            paper="Fig. 3 (left), observation (i)",
            ours=f"median σ_r vs σ_d: HMC {med['HMC sigma_r']:.3f} vs {med['HMC sigma_d']:.3f}, "
                 f"ensemble {med['Ens. sigma_r']:.3f} vs {med['Ens. sigma_d']:.3f}",
            holds=bool(med["HMC sigma_r"] < med["HMC sigma_d"] and med["Ens. sigma_r"] < med["Ens. sigma_d"]),
            criterion="median σ_r below median σ_d, for HMC and for the ensemble",
            preconditions=(*hmc, *ens)),
        Claim(
            id="bayesian-sigma-near-prior",
            text="HMC and VI leave many weights with a posterior sd close to the prior's 1",
            paper="Fig. 3 (left), observation (ii)",
            ours=f"share of parameters with σ between 0.8 and 1.2: HMC σ_r {near_one['HMC sigma_r']:.1%}, "
                 f"VI {near_one['VI sigma']:.1%}",
            holds=bool(min(near_one.values()) >= 0.25),
            criterion="at least 25% of the parameters with σ in (0.8, 1.2), for HMC's σ_r and for VI",
            preconditions=(*hmc, precondition(
                "exploration", f"HMC exploration scale √T·L·ε >= {EXPLORATION_MIN:g} (the prior sd; the paper's "
                               f"chain: √10,600 · 500 · 0.001 ≈ {PAPER_EXPLORATION:.1f})",
                float(scale), scale >= EXPLORATION_MIN, source=SOURCES["hmc"]), *vi)),
        Claim(
            id="ensemble-means-with-hmc-sigmas-prune-best",
            text="Pruning ensemble means by HMC's sds beats pruning by the ensemble's or HMC's own "
                 "representation, and pruning in a random order",
            paper="Fig. 3 (right): the purple curve is above both green ones, and prunes meaningfully",
            ours=f"mean test accuracy over keep ≤ 50%: stitched {stitched:.1f}%, "
                 + ", ".join(f"{k} {v:.1f}%" for k, v in rivals.items()),
            holds=bool(stitched > max(rivals.values())),
            criterion="mean test accuracy over the levels keeping <= 50% of the weights higher for the "
                      "stitched curve than for each of HMC's, the ensemble's and a random order",
            preconditions=(*hmc, *ens)),
    ]




def robustness_rows(claim_id: str):
    """The rows of claim ``claim_id``'s sweep: its verdict in both columns under every HMC setting
    run (first row: this run), with the failed preconditions (each with the column it gates) and
    the measurement (``ours``) under each."""

    def rows(results: RunResults) -> list[dict]:
        config = results.config
        gate = tuple(sized_to_judge(bool(config.judge)))
        out = []
        for setting, br in [("this run", results["bayes"]), *results["robust"].items()]:
            if setting == "this run":   # both columns as in the ledger (the robust one maybe another run's)
                judged = bayes_claims(br, config, robust=robust_run(results))
            else:
                judged = bayes_claims(br, _variant_config(config, setting))
            (c,) = [c for c in judged if c.id == claim_id]
            c = replace(c, preconditions=(*gate, *c.preconditions))
            failed = [p for p in c.preconditions if not p.met]   # of either column, in their order
            out.append({
                "choice": "this run" if setting == "this run" else "HMC settings", "setting": setting,
                "verdict": outcome(c.holds), "robust verdict": outcome(c.robust),
                "failed preconditions": ", ".join(
                    p.name + ("" if p.column is Column.BOTH else f" ({p.column.value})") for p in failed) or "–",
                "ours": c.ours})
        return out

    return rows


SWEEPS = tuple(
    Sweep(cid, robustness_rows(cid), caption="The claim's verdict under other HMC settings (first row: this run)")
    for cid in ("q_r-beats-q_d", "ensemble-q_r-competitive", "ensemble-q_r-beats-hmc-q_r", "rebasin-shrinks-sigma",
                "bayesian-sigma-near-prior", "ensemble-means-with-hmc-sigmas-prune-best")
)
"""One sweep per claim of Sec. 3, over the HMC settings of the ``robust`` stage."""
