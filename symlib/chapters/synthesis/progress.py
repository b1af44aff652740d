"""How far chapter 6's gold standards got in a run still in pieces, read from their checkpoints.

A gold standard stopped at its time budget leaves a checkpoint
(:func:`~symlib.chapters.synthesis.stages.gold_checkpoint`: the chains and the
:class:`~symlib.chapters.synthesis.gold.GoldRecord` gathered so far). :func:`checkpoint_progress`
reads one without resuming it: transitions done of the total, draws kept per chain, mean
acceptance, and the mixing of the draws kept so far (split R-hat, bulk and tail ESS of the
predictions at the profile's ``diag_points`` test inputs, the quantity the claims gate on). So a
gold standard short of its length is published with the length and R-hat it reached
(``tools/longruns/gpu_piece.sh keep``)::

    python -m symlib.chapters.synthesis.progress OUT.json CHECKPOINT.pt [...]

Public: :func:`checkpoint_progress`, :func:`write_progress`.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import torch

from symlib.book.published import write_chains
from symlib.metrics.mcmc import summary

__all__ = ["checkpoint_progress", "write_progress"]

_NAME = re.compile(r"^(?P<chapter>.+)-gold-(?P<benchmark>[A-Za-z0-9_]+)-(?P<digest>[0-9a-f]{16})\.pt$")
MIN_DRAWS = 4
"""Fewest draws per chain for which R-hat and ESS are reported (split R-hat halves each chain)."""


def checkpoint_progress(path: str | Path) -> dict:
    """One gold-standard checkpoint's progress: ``run`` (``"gold <benchmark>"``), ``digest``,
    ``chains``, ``transitions`` done of ``total`` (``burn_in`` of them burn-in),
    ``draws_per_chain`` kept of ``draws_target``, mean ``accept`` over the sampling transitions
    done (None before any), ``rhat`` / ``bulk_ess`` / ``tail_ess`` of the kept draws'
    predictions (None with fewer than :data:`MIN_DRAWS` per chain) and ``quantity`` (what they
    are of).

    Raises:
        ValueError: ``path`` is not a chapter-6 gold-standard checkpoint (name or content).
    """
    path = Path(path)
    m = _NAME.match(path.name)
    if m is None:
        raise ValueError(f"{path.name}: not a chapter-6 gold-standard checkpoint name "
                         "(<chapter>-gold-<benchmark>-<digest>.pt)")
    saved = torch.load(path, map_location="cpu", weights_only=False)
    acc = saved.get("accumulated") if isinstance(saved, dict) else None
    if not isinstance(acc, dict) or "pred" not in acc or "settings" not in saved:
        raise ValueError(f"{path}: not a checkpoint of chapter 6's gold standard (no settings or GoldRecord state)")
    s = saved["settings"]
    chains, done, burn = int(s["n_chains"]), int(saved["it"]), int(s["n_burnin"])
    total = burn + int(s["n_samples"]) * int(s["thin"])
    sampling = np.asarray(saved["history"]["accept_prob"])[burn:done]
    j = int(acc["j"])
    pred = acc["pred"][:j].transpose(0, 1).double().numpy()      # (chains, draws, points)
    mixed = summary(pred)._asdict() if j >= MIN_DRAWS else {}

    def num(x):
        return None if x is None or not math.isfinite(x) else float(x)

    return {
        "run": f"gold {m['benchmark']}", "digest": m["digest"], "chains": chains,
        "transitions": done, "total": total, "burn_in": burn,
        "draws_per_chain": j, "draws_target": int(s["n_samples"]),
        "accept": num(float(sampling.mean())) if sampling.size else None,
        "rhat": num(mixed.get("rhat_max")), "bulk_ess": num(mixed.get("bulk_ess_min")),
        "tail_ess": num(mixed.get("tail_ess_min")),
        "quantity": f"the predictions at {pred.shape[2]} test inputs",
    }


def write_progress(out: str | Path, checkpoints) -> Path:
    """Write :func:`checkpoint_progress` of each benchmark's newest checkpoint (by modification
    time: an older one of the same benchmark is of other settings or code, abandoned) to ``out``
    (a JSON list, by run)."""
    newest: dict[str, tuple[float, dict]] = {}
    for p in checkpoints:
        record, when = checkpoint_progress(p), Path(p).stat().st_mtime
        if record["run"] not in newest or when > newest[record["run"]][0]:
            newest[record["run"]] = (when, record)
    records = [newest[run][1] for run in sorted(newest)]
    return write_chains(out, records)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m symlib.chapters.synthesis.progress OUT.json [CHECKPOINT.pt ...]")
    print(write_progress(sys.argv[1], sys.argv[2:]).read_text())
