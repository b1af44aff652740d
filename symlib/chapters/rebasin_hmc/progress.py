"""How far chapter 5's HMC got in a run still in pieces, read from its checkpoints.

A `paper` run takes many GPU pieces; between them each HMC run's state is a checkpoint
(:func:`~symlib.chapters.rebasin_hmc.stages.checkpoint_path`: the chains and
:class:`~symlib.chapters.rebasin_hmc.hmc_summary.HMCSummary`'s running sums).
:func:`checkpoint_progress` reads one without resuming it: transitions done of the total, draws
kept per chain, mean acceptance, and the mixing of the draws kept so far (split R-hat, bulk and
tail ESS of their logits at :data:`~symlib.chapters.rebasin_hmc.stages_bayes.MIX_POINTS` test
images, as the claims read them) with their mean test accuracy. So a chain still short of its
length is published with the length and R-hat it reached (``tools/longruns/gpu_piece.sh keep``)::

    python -m symlib.chapters.rebasin_hmc.progress OUT.json CHECKPOINT.pt [...]

Public: :func:`checkpoint_progress`, :func:`write_progress`.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

from symlib.chapters.rebasin_hmc.hmc_summary import HMCSummary
from symlib.chapters.rebasin_hmc.stages import checkpoint_run
from symlib.chapters.rebasin_hmc.stages_bayes import mixing

__all__ = ["checkpoint_progress", "write_progress"]


def checkpoint_progress(path: str | Path) -> dict:
    """One HMC checkpoint's progress: ``run`` (``"main"`` or the variant's name), ``digest``,
    ``chains``, ``transitions`` done of ``total`` (``burn_in`` of them burn-in),
    ``draws_per_chain`` kept of ``draws_target``, ``grad_evals_per_chain``, mean ``accept``
    over the sampling transitions done (None before any), ``rhat`` / ``bulk_ess`` / ``tail_ess``
    of the kept draws' logits (None with fewer than 4 per chain, 8 for one chain), and
    ``accuracy`` (the kept draws' mean test accuracy, %; None before any), ``quantity`` (what
    R-hat and ESS are of).

    Raises:
        ValueError: ``path`` is not a chapter-5 HMC checkpoint (name or content).
    """
    path = Path(path)
    run, digest = checkpoint_run(path)
    saved = torch.load(path, map_location="cpu", weights_only=False)
    acc = saved.get("accumulated") if isinstance(saved, dict) else None
    if not isinstance(acc, dict) or "logits" not in acc or "settings" not in saved:
        raise ValueError(f"{path}: not a checkpoint of chapter 5's HMC (no settings or HMCSummary state)")
    s = saved["settings"]
    chains, done = int(s["n_chains"]), int(saved["it"])
    total = int(s["n_burnin"]) + int(s["n_samples"]) * int(s["thin"])
    sampling = np.asarray(saved["history"]["accept_prob"])[int(s["n_burnin"]):done]
    draws = HMCSummary.kept_draws(acc)
    logits, chain_of, accuracy = draws["logits"], draws["chains"], draws["accuracy"]
    mixed = mixing(logits, chain_of, chains) if len(chain_of) else {"rhat": math.nan}

    def num(x):
        return None if x is None or not math.isfinite(x) else float(x)

    return {
        "run": run, "digest": digest, "chains": chains,
        "transitions": done, "total": total, "burn_in": int(s["n_burnin"]),
        "draws_per_chain": len(chain_of) // chains, "draws_target": int(s["n_samples"]),
        "grad_evals_per_chain": int(saved["n_grad"]), "leapfrog": int(s["n_leapfrog"]),
        "accept": num(float(sampling.mean())) if sampling.size else None,
        "rhat": num(mixed.get("rhat")), "bulk_ess": num(mixed.get("bulk_ess")),
        "tail_ess": num(mixed.get("tail_ess")),
        "accuracy": num(100 * float(accuracy.mean())) if accuracy.size else None,
        "quantity": f"the logits at {logits.shape[1] if logits.ndim == 3 else 0} test images",
    }


def write_progress(out: str | Path, checkpoints) -> Path:
    """Write :func:`checkpoint_progress` of every checkpoint to ``out`` (a JSON list, by run)."""
    records = sorted((checkpoint_progress(p) for p in checkpoints), key=lambda r: (r["run"] != "main", r["run"]))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(records, indent=1) + "\n")
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m symlib.chapters.rebasin_hmc.progress OUT.json [CHECKPOINT.pt ...]")
    print(write_progress(sys.argv[1], sys.argv[2:]).read_text())
