"""What only the book needs: running chapters, their results ledgers, caching, data, figures.

- :mod:`~symlib.book.chapter`: the chapter contract (stages, claims, views), and how a chapter is built;
- :mod:`~symlib.book.runtime`: a chapter run's validated parameters (profile, seed, device);
- :mod:`~symlib.book.profiles`: the `smoke` / `quick` / `paper` tiers and how one is selected;
- :mod:`~symlib.book.results`: results files and the claims ledger;
- :mod:`~symlib.book.tables`: how a chapter shows its tables and ledger (numbered captions, paper
  vs ours, the published `full` run beside this build);
- :mod:`~symlib.book.reference`: the papers, and their reported tables as data;
- :mod:`~symlib.book.cache`: the on-disk cache of expensive results;
- :mod:`~symlib.book.parallel`: independent fits fanned out through joblib (a cluster via Dask);
- :mod:`~symlib.book.data`: the book's datasets, all available offline;
- :mod:`~symlib.book.plotting`: the house style;
- :mod:`~symlib.book.pipeline`: ``python -m symlib.book.pipeline`` executes notebooks and builds
  the book (needs the ``book`` extra).
"""

__all__ = ["cache", "chapter", "data", "parallel", "pipeline", "plotting", "profiles", "reference", "results", "runtime", "tables"]
