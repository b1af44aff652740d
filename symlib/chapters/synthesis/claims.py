"""Chapter 6's ledger: claims, criteria and preconditions, fixed here before the run.

A claim about closeness to the gold standard is judged only where the gold standard's
predictions have mixed (:func:`~symlib.book.preconditions.chains_mixed`), every criterion needs a
standard error (at least three seeds), and a claim about a fit needs its objective to have
plateaued. Those preconditions also keep the `smoke` profile (two seeds, very short chains) from
judging anything, so the chapter names no ``judge_field``.
"""

from __future__ import annotations

import math

from symlib.book.chapter import RunResults
from symlib.book.preconditions import chains_mixed
from symlib.book.results import Claim, Precondition, precondition
from symlib.chapters.synthesis.benchmarks import BENCHMARKS
from symlib.chapters.synthesis.remedies import METHODS
from symlib.chapters.synthesis.stages import GOLD

__all__ = ["SECTIONS", "claims", "paired_gap"]

SECTIONS = {"sgm_tv": "Quality against cost", "multimodal_tv": "Quality against cost", "skip_ll": "Regression",
            "ns_mmd": "Regression", "qr_ensemble_tv": "Classification"}
"""Claim id -> the start of the heading of the notebook section that measures it."""


def _gold_preconditions(benchmarks: dict, names) -> list[Precondition]:
    out = []
    for n in names:
        s = benchmarks[n]["gold"]["diagnostics"]["predictions"]
        out += chains_mixed(s["rhat_max"], s["bulk_ess_min"], s["tail_ess_min"], what=f"{n} gold predictions")
    return out


def _seeds_precondition(config) -> Precondition:
    return precondition("seeds", "at least 3 seeds per remedy (a 2-SE criterion needs a standard error)",
                        config.n_seeds, config.n_seeds >= 3)


def _plateau_preconditions(benchmarks: dict, names, keys) -> list[Precondition]:
    out = []
    for n in names:
        for k in keys:
            ps = benchmarks[n]["plateaus"].get(k, [])
            if not ps:
                continue
            worst = max(ps, key=lambda p: float(p.measured) if p.measured != "too short" else math.inf)
            out.append(precondition("plateau", f"{n}: {METHODS[k]} {worst.criterion.split(': ', 1)[-1]} "
                                    f"(worst of {len(ps)} seeds)", worst.measured, all(p.met for p in ps)))
    return out


def paired_gap(benchmark: dict, better: str, worse: str, metric: str, higher_is_better=False) -> tuple[float, float]:
    """Mean over seeds of ``worse - better`` (sign so that positive favours ``better``) and its SE.

    Args:
        benchmark: one benchmark's record of stage ``benchmarks`` (its ``rows`` are paired by seed).
        better: the method key expected to do better.
        worse: the method key it is compared with.
        metric: a column of the rows.
        higher_is_better: whether a larger ``metric`` is better.
    """
    rows = benchmark["rows"]
    a = rows[rows.key == better].sort_values("seed")[metric].to_numpy()
    c = rows[rows.key == worse].sort_values("seed")[metric].to_numpy()
    diff = (a - c) if higher_is_better else (c - a)
    se = diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else math.nan
    return float(diff.mean()), float(se)


def claims(results: RunResults) -> list[Claim]:
    """This chapter's claims, judged on the results of stage ``benchmarks`` and the run's profile."""
    config = results.config
    benchmarks = results["benchmarks"]
    names = list(benchmarks)
    regression = [n for n in names if BENCHMARKS[n] == "regression"]
    out = []

    def gap_claim(cid, text, paper, pairs, metric, higher=False, plateau_keys=("mfvi",), where=names):
        gaps = {(n, bt): paired_gap(benchmarks[n], bt, wt, metric, higher) for n in where for bt, wt in pairs}
        holds = all(g > 2 * se for g, se in gaps.values()) if gaps else None
        ours = "; ".join(f"{n}, {METHODS[bt]}: {g:+.3g} ± {se:.2g}" for (n, bt), (g, se) in gaps.items())
        pre = [_seeds_precondition(config)]
        if metric != "test LL":
            pre += _gold_preconditions(benchmarks, where)
        pre += _plateau_preconditions(benchmarks, where, plateau_keys)
        out.append(Claim(id=cid, text=text, paper=paper, ours=ours or "no benchmark run", holds=holds,
                         criterion=f"on every benchmark, the mean paired gain in {metric} over seeds exceeds "
                                   "2 standard errors", preconditions=tuple(pre)))

    gap_claim("sgm_tv", f"SGM-VI (K = {config.sgm_ks[-1]}) closes part of the gap between MFVI and the gold "
              "standard in predictive TV",
              "the issue's example; Gelberg et al. report better predictive metrics than MFVI",
              [("sgm20", "mfvi")], "TV to gold", plateau_keys=("mfvi", "sgm20"))
    gap_claim("multimodal_tv", "Multi-modal approximations (deep ensemble, multi-mode MFVI) are closer to the "
              "gold standard in predictive TV than single-mode MFVI",
              "Laurent et al. (Sec. 5): multi-mode methods approximate the posterior better",
              [("ensemble", "mfvi"), ("multimode", "mfvi")], "TV to gold", plateau_keys=("mfvi", "multimode"))
    gap_claim("skip_ll", "Orthogonal skips raise MFVI's test log-likelihood on regression",
              "Kurle et al.: skips reduce underfitting of mean-field VI", [("skip", "mfvi")], "test LL",
              higher=True, plateau_keys=("mfvi", "skip"), where=regression)
    # symmetry removal: NS lowers the weight-space MMD for every method on every benchmark
    cells = {}
    for n in names:
        t = benchmarks[n]["table"]
        for _, r in t[t.method != GOLD].iterrows():
            cells[(n, r["method"])] = (r["MMD raw"], r["MMD NS"])
    lowered = sum(ns < raw for raw, ns in cells.values())
    out.append(Claim(id="ns_mmd", text="Symmetry removal (NS) lowers every method's weight-space MMD to the "
                     "gold standard", paper="Laurent et al. (Sec. 4): symmetry removal makes MMD between "
                     "posteriors meaningful", ours=f"lower after NS in {lowered} of {len(cells)} "
                     "(benchmark, method) cells", holds=bool(lowered == len(cells)),
                     criterion="mean MMD after NS < mean raw MMD in every (benchmark, method) cell",
                     preconditions=tuple(_gold_preconditions(benchmarks, names))))
    if "digits" in names:
        gap_claim("qr_ensemble_tv", "The rebasin-compact q_r of the ensemble predicts closer to the gold standard "
                  "than the q_r of HMC", "Xiao et al., Table 1: TV to HMC 0.0495 (ensemble q_r) vs 0.657 "
                  "(HMC q_r)", [("qr_ensemble", "qr_hmc")], "TV to gold", plateau_keys=(), where=["digits"])
    return out
