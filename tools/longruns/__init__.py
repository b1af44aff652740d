"""Running a long profile in pieces on machines lent for minutes, carrying its state through git.

The library already runs a long profile in pieces on any machine: a stage stops at the time budget
(``SYMLIB_BUDGET_S``), its finished items are cached and its fit left a checkpoint, and the pieces
file records every execution (:mod:`symlib.book.pieces`). What is here serves one situation only: a
GPU machine lent for a few minutes at a time, bare each time, reached by sending it the working
tree and fetching a few files back, both under a size limit.

- :mod:`tools.longruns.carry`: a chapter's cache entries, checkpoints and pieces file to and from
  the tracked ``carry/`` folder, so that the state survives the machine;
- :mod:`tools.longruns.checkpoint_names`: which checkpoints a run continues, so that those a code
  change left behind are neither carried nor read as the run in progress;
- ``gpu_prepare.sh`` (the wheels and data a bare machine lacks), ``gpu_piece.sh`` (one piece, and
  ``keep``: its state back into ``carry/``), ``gpu_session.sh`` (the GPU tests and benchmarks);
- ``carry_size.py``, ``carry_size_gold.py``: how large chapter 5's and chapter 6's `paper` state is as carried.

``book/running-long-tiers.md`` explains how they are used.
"""
