"""Chapter 2b's evaluation: Table 1, App. B.4's kernel aggregations, functional collapse and
the OOD scores of the robustness sweep.

The distance between the reference checkpoints and a method's samples is the layer-wise
kernel-bank MMD of :mod:`symlib.metrics.mmd`, on raw weights ("MMD") and after symmetry removal
("NS": each hidden unit's incoming weights normalised, units sorted, output biases centred;
:func:`symlib.symmetry.canonicalise`).
"""

from __future__ import annotations

import torch
from scipy import stats

from symlib import metrics
from symlib import symmetry as sym
from symlib.chapters.posterior_mmd.networks import sample_probs
from symlib.metrics import mmd
from symlib.symmetry import optunet_permutation_spec

__all__ = [
    "EVAL_FIELDS",
    "LAYERS",
    "OOD_SCORES",
    "evaluate",
    "functional_collapse",
    "method_metrics",
    "ood_detection",
    "remove_symmetries",
]

LAYERS = {"conv1": ("W1",), "conv2": ("W2",), "fc1": ("W3", "b3"), "fc2": ("W4", "b4")}
"""The paper's "layers" (a weight and its bias form one), in the order of the network."""
EVAL_FIELDS = ("ood_source", "ood_points", "collapse_pairs", "mmd_kernels")
"""The profile fields the evaluation depends on beyond the samples' (:func:`evaluate`)."""

OOD_SCORES = {
    "max_softmax": lambda probs: 1 - probs.mean(0).max(-1).values,
    "entropy": lambda probs: metrics.predictive_entropy(probs.mean(0)),
    "mutual_information": metrics.mutual_information,
}
"""OOD scores (higher = more likely OOD) of per-sample class probabilities ``(S, N, K)``. The
paper cites Hendrycks & Gimpel's baseline without naming a score; ``max_softmax`` (the baseline,
used in Table 1) is ours, the predictive entropy and the mutual information are the usual
alternatives for Bayesian methods."""


def _layers(params: dict) -> dict[str, torch.Tensor]:
    """``{layer: (S, n_params)}``, weights and biases of a layer concatenated."""
    return {name: torch.cat([params[k].reshape(params[k].shape[0], -1) for k in keys], 1)
            for name, keys in LAYERS.items()}


def remove_symmetries(params: dict) -> dict:
    """NS: normalise each unit's incoming weights, sort units, centre the output biases."""
    p64 = {k: v.double() for k, v in params.items()}
    return sym.centre_output_bias(sym.canonicalise(p64, optunet_permutation_spec()), "b4")


def method_metrics(probs: torch.Tensor, probs_ood: torch.Tensor, y: torch.Tensor) -> dict:
    """Table 1's metric columns for one method, from per-sample class probabilities.

    The predictive is the mean over samples; OOD detection scores each input by ``1 - max_k
    p_k`` of the predictive (the maximum-softmax baseline of Hendrycks & Gimpel 2017, which the
    paper cites), with OOD inputs as the positive class.
    """
    p, p_ood = probs.mean(0), probs_ood.mean(0)
    return {
        "Acc": 100 * metrics.accuracy(p, y),
        "ECE": 100 * metrics.expected_calibration_error(p, y),
        "Brier": 100 * metrics.brier_score(p, y),
        "AUPR": 100 * metrics.aupr(1 - p.max(-1).values, 1 - p_ood.max(-1).values),
        "FPR95": 100 * metrics.fpr_at_95_tpr(1 - p.max(-1).values, 1 - p_ood.max(-1).values),
        "IDMI": 100 * metrics.mutual_information(probs).mean().item(),
        "OODMI": 100 * metrics.mutual_information(probs_ood).mean().item(),
    }


def functional_collapse(probs: torch.Tensor, probs_ood: torch.Tensor, n_pairs: int,
                        seed: int) -> dict:
    """Fig. 3 / 7: mean mutual information of pairs of checkpoints, in and out of distribution.

    For a pair ``(i, j)``, ``MI_ij`` is the mean over inputs of the mutual information of the
    two-member ensemble (:func:`symlib.metrics.mutual_information`): 0 when the two networks
    predict alike. Returns the per-pair values, their Pearson correlation and its p-value.
    """
    n = probs.shape[0]
    pairs = torch.combinations(torch.arange(n), 2)
    if len(pairs) > n_pairs:
        pick = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(seed))[:n_pairs]
        pairs = pairs[pick]

    def pairwise(p):
        both = torch.stack([p[pairs[:, 0]], p[pairs[:, 1]]], 1)  # (pairs, 2, N, K)
        return torch.vmap(metrics.mutual_information)(both).mean(-1)

    mi_id, mi_ood = pairwise(probs), pairwise(probs_ood)
    r, p_value = stats.pearsonr(mi_id.numpy(), mi_ood.numpy())
    return {"id": mi_id, "ood": mi_ood, "pearson_r": float(r), "p_value": float(p_value),
            "n_pairs": len(pairs)}


def evaluate(config, data: dict, nets: dict, samples: dict, seed: int,
             device: torch.device | str = "cpu") -> dict:
    """Table 1 rows, App. B.4's kernel aggregations and the functional-collapse numbers.

    The kernel banks and the predictions run on ``device`` (batched on a GPU when given one).
    """
    def layers(params):
        return {k: v.to(device) for k, v in _layers(params).items()}

    ref_raw = layers({k: v.double() for k, v in nets["reference"].items()})
    ref_ns = layers(remove_symmetries(nets["reference"]))
    counts = {k: v.shape[1] for k, v in ref_raw.items()}
    rows, kernels = [], []
    for entry in samples["rows"]:
        mode, method, params = entry["mode"], entry["method"], entry["params"]
        banks = {
            "MMD": mmd.layer_banks(ref_raw, layers({k: v.double() for k, v in params.items()}),
                                   n=config.mmd_kernels),
            "NS": mmd.layer_banks(ref_ns, layers(remove_symmetries(params)),
                                  n=config.mmd_kernels),
        }
        row = {"mode": mode, "method": method, "samples": next(iter(params.values())).shape[0]}
        for col, bank in banks.items():
            row[col] = 100 * mmd.combine_layers(bank, counts, "median").weighted
            for how in ("median", "mean", "max"):
                kernels.append({"mode": mode, "method": method, "weights": col,
                                "aggregation": how,
                                "value": 100 * mmd.combine_layers(bank, counts, how).weighted})
        at = entry.get("centre")  # Laplace: the linearised network predicts
        row.update(method_metrics(sample_probs(params, data["x_test"], device=device, centre=at),
                                  sample_probs(params, data["x_ood"], device=device, centre=at),
                                  data["y_test"]))
        rows.append(row)
    ref_probs = sample_probs(nets["reference"], data["x_test"], device=device)
    ref_probs_ood = sample_probs(nets["reference"], data["x_ood"], device=device)
    reference_row = method_metrics(ref_probs, ref_probs_ood, data["y_test"])
    collapse = functional_collapse(ref_probs, ref_probs_ood, config.collapse_pairs, seed)
    return {"rows": rows, "kernels": kernels, "reference": reference_row,
            "modes_used": samples["modes_used"], "dropout_accuracy": samples["dropout_accuracy"],
            "dropout_used": samples["dropout_used"],
            "collapse": collapse,
            "reference_accuracy": nets["reference_accuracy"],
            "ensemble_accuracy": nets["ensemble_accuracy"],
            "reference_restarts": nets["reference_restarts"],
            "ensemble_restarts": nets["ensemble_restarts"]}



def ood_detection(data: dict, samples: dict, device: torch.device | str = "cpu") -> list[dict]:
    """AUPR and FPR95 (x100) of every row of Table 1 under each of :data:`OOD_SCORES`."""
    out = []
    for entry in samples["rows"]:
        at = entry.get("centre")
        probs = sample_probs(entry["params"], data["x_test"], device=device, centre=at)
        probs_ood = sample_probs(entry["params"], data["x_ood"], device=device, centre=at)
        for score, fn in OOD_SCORES.items():
            s_in, s_out = fn(probs), fn(probs_ood)
            out.append({"mode": entry["mode"], "method": entry["method"], "score": score,
                        "AUPR": 100 * metrics.aupr(s_in, s_out),
                        "FPR95": 100 * metrics.fpr_at_95_tpr(s_in, s_out)})
    return out

