"""What only the book needs: running chapters, their results ledgers, caching, figures.

- :mod:`~symlib.book.chapter`: the chapter contract (stages, claims, views), and how a chapter is built;
- :mod:`~symlib.book.runtime`: a chapter run's validated parameters (profile, seed, device);
- :mod:`~symlib.book.profiles`: the `smoke` / `quick` / `paper` tiers and how one is selected;
- :mod:`~symlib.book.results`: results files and the claims ledger;
- :mod:`~symlib.book.tables`: how a chapter shows its tables and ledger (numbered captions, paper
  vs ours, the published `full` run beside this build);
- :mod:`~symlib.book.reference`: the papers, and their reported tables as data;
- :mod:`~symlib.book.cache`: the on-disk cache of expensive results;
- :mod:`~symlib.book.parallel`: independent fits fanned out through joblib (a cluster via Dask);
- :mod:`~symlib.book.plotting`: the house style;
- :mod:`~symlib.book.pipeline`: ``python -m symlib.book.pipeline`` executes notebooks and builds
  the book (needs the ``book`` extra).

The modules form layers (:data:`LAYERS`), each importing only those below it; only the top one,
``run``, may import :mod:`symlib.chapters` (the chapters sit between it and the rest, and import
the layers below). ``pyproject.toml``'s import-linter contract (``make lint``) and
``tests/test_layout.py`` check it.
"""

__all__ = ["cache", "chapter", "parallel", "pipeline", "plotting", "profiles", "reference", "results", "runtime", "tables"]

LAYERS = {
    "run": ("pipeline", "apidoc", "readme", "rerun", "same_numbers", "bridges", "compare", "side_by_side",
            "provenance", "linkcheck", "records", "publishing", "vi_progress"),
    "chapter": ("chapter",),
    "render": ("tables", "published", "ledger", "cards", "words"),
    "contract": ("runtime", "parallel", "checkpoints", "preconditions", "pieces", "results", "cache", "codehash"),
    "base": ("paths", "equivalence", "profiles", "workers", "plotting", "reference", "streams"),
}
"""The layers of :mod:`symlib.book`, top to bottom, each a module may import from those below it
and its own:

- ``run``: executes, compares and publishes runs, writes the generated pages; the only
  layer that imports :mod:`symlib.chapters` (to find a chapter by name) and the methods directly;
- ``chapter``: the chapter contract (:mod:`~symlib.book.chapter`), which the chapters import;
- ``render``: tables, claim cards, the ledger and the published records a page shows;
- ``contract``: what runs a stage and stores what it returns: cache, code hashes, results files,
  claims and preconditions, fan-out, a run's parameters;
- ``base``: paths, profiles, streams, house style, equivalences.

The datasets are a package of their own, :mod:`symlib.data`, beside the methods: any layer may
import it, and it imports nothing of the book.
"""
