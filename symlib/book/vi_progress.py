"""How far the VI fits of a run in pieces got, read from their checkpoints without resuming them.

A VI fit stopped at its time budget leaves a checkpoint (chapter 1's sinc fits, named by
:func:`symlib.chapters.ortho_skip.stages.checkpoint_path`; the layout
:mod:`symlib.inference.mfvi_graph` and :mod:`symlib.inference.mfvi_batched` write).
:func:`fit_progress` reads the steps done of the fit's total, so that the book says how far each
fit of a run in progress came (``published/<tier>/progress/<chapter>.chains.json``,
:func:`symlib.book.published.chains_path`)::

    python -m symlib.book.vi_progress OUT.json CHECKPOINT.pt [...]

Public: :func:`fit_progress`, :func:`write_progress`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import torch

from symlib.book.published import write_chains

__all__ = ["fit_progress", "write_progress"]

_NAME = re.compile(r"^(?P<chapter>[^-]+)-(?P<run>.+)-(?P<digest>[0-9a-f]{16})\.pt$")


def fit_progress(path: str | Path) -> dict:
    """How far the VI fit of a checkpoint got: ``{"run": "VI fit <stage>-<run>", "digest", "steps"
    (done), "total" (the fit's ``n_steps``), "pieces", "wall_s"}``, read from the checkpoint's
    ``done`` and ``settings["n_steps"]``.

    Raises:
        ValueError: ``path`` is not a checkpoint of a VI fit (its name or its content).
    """
    path = Path(path)
    m = _NAME.match(path.name)
    if m is None:
        raise ValueError(f"{path.name}: not a checkpoint name (<chapter>-<stage>-<run>-<digest>.pt)")
    saved = torch.load(path, map_location="cpu", weights_only=False)
    settings = saved.get("settings") if isinstance(saved, dict) else None
    if not isinstance(settings, dict) or "n_steps" not in settings or "done" not in saved:
        raise ValueError(f"{path}: not a checkpoint of a VI fit (no steps done, or no n_steps in its settings)")
    return {"run": f"VI fit {m['run']}", "digest": m["digest"], "steps": int(saved["done"]),
            "total": int(settings["n_steps"]), "pieces": int(saved.get("pieces") or 0),
            "wall_s": float(saved.get("wall_s") or 0.0)}


def write_progress(out: str | Path, checkpoints) -> Path:
    """Write :func:`fit_progress` of each checkpoint to ``out`` (a JSON list, by run; of two
    checkpoints of one run the newer, by modification time: the older is of other settings or
    code, abandoned)."""
    newest: dict[str, tuple[float, dict]] = {}
    for p in checkpoints:
        record, when = fit_progress(p), Path(p).stat().st_mtime
        if record["run"] not in newest or when > newest[record["run"]][0]:
            newest[record["run"]] = (when, record)
    return write_chains(out, [newest[run][1] for run in sorted(newest)])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m symlib.book.vi_progress OUT.json [CHECKPOINT.pt ...]")
    print(write_progress(sys.argv[1], sys.argv[2:]).read_text())
