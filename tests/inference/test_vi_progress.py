"""How far a VI fit in pieces got (symlib.book.vi_progress), and how the book says it
(symlib.book.published.progress_summary): against the steps the test itself had the fit take."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from symlib.book import pieces, published, publishing, vi_progress
from symlib.inference.mfvi_graph import fit_resumable
from tests.inference.test_one_loop import _vi_args, _vi_problem

NAME = "01_ortho_skip-sinc-learning_rate_0.003-" + "0123456789abcdef" + ".pt"


def _stopped_fit(path, pieces_taken: int) -> None:
    """A fit of 20 steps stopped at a spent budget ``pieces_taken`` times: one step each."""
    for _ in range(pieces_taken):
        res = fit_resumable(*_vi_problem(), checkpoint=path, mode="replay", budget_s=0.0, **_vi_args())
    assert not res.complete


def test_a_checkpoint_says_the_steps_done_of_the_total(tmp_path):
    path = tmp_path / NAME
    _stopped_fit(path, 3)
    got = vi_progress.fit_progress(path)
    assert (got["run"], got["digest"], got["steps"], got["total"], got["pieces"]) == (
        "VI fit sinc-learning_rate_0.003", "0123456789abcdef", 3, 20, 3)
    # the newer of two checkpoints of one run is the one read; runs listed by name
    older = tmp_path / NAME.replace("0123456789abcdef", "fedcba9876543210")
    _stopped_fit(older, 1)
    os.utime(older, (1, 1))
    other = tmp_path / NAME.replace("learning_rate_0.003", "init_sd_0.1")
    _stopped_fit(other, 2)
    out = vi_progress.write_progress(tmp_path / "progress" / "fits.json", [older, path, other])
    assert [(r["run"], r["steps"]) for r in json.loads(out.read_text())] == [
        ("VI fit sinc-init_sd_0.1", 2), ("VI fit sinc-learning_rate_0.003", 3)]


def test_what_is_not_a_vi_checkpoint_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not a checkpoint name"):
        vi_progress.fit_progress(tmp_path / "fit.pt")
    path = tmp_path / NAME
    import torch
    torch.save({"format": 1, "it": 5, "settings": {"n_samples": 10}}, path)   # an HMC run's
    with pytest.raises(ValueError, match="not a checkpoint of a VI fit"):
        vi_progress.fit_progress(path)


def test_the_book_says_how_far_each_fit_got(tmp_path, monkeypatch):
    """The progress line names every fit in flight with its steps (a stopped piece's note names
    one), keeps the note's clauses but "run again ...", and a lost run counts its fits too."""
    monkeypatch.setattr(published, "project_root_or_cwd", lambda: tmp_path)
    results = tmp_path / "results"
    pieces.log_piece("01_ortho_skip", profile="paper", device="cpu", seconds=3600, outcome="budget",
                     directory=results, note="VI fit stopped at its time budget after 27051 steps; run again to "
                     "continue from its checkpoint; stages main skipped (computed before, kept aside)",
                     started=datetime(2026, 12, 7, 22, tzinfo=UTC))
    publishing.record_progress("01_ortho_skip", pieces.pieces_path("01_ortho_skip", results))
    path = tmp_path / NAME
    _stopped_fit(path, 3)
    vi_progress.write_progress(published.chains_path("01_ortho_skip"), [path])
    line = published.progress_summary("01_ortho_skip")
    assert line.endswith("latest: VI fit stopped at its time budget after 27051 steps; stages main skipped "
                         "(computed before, kept aside); VI fit sinc-learning_rate_0.003: 3 of 20 steps")
    publishing.record_lost("01_ortho_skip", "the machine was replaced")
    assert published.progress_summary("01_ortho_skip").endswith(
        "VI fit sinc-learning_rate_0.003 at 3 of 20 steps (the machine was replaced); the next piece starts the run again")
