"""A tiny chapter that lives in the tests: the pattern a new chapter follows.

It is declared through the chapter contract (:mod:`symlib.book.chapter`) exactly like the book's
chapters, one file per job: ``profiles`` (sizes), ``stages`` (compute), ``claims`` (ledger),
``views`` (tables and quoted numbers). Its notebook, ``99_example.md`` beside this file, runs
through :func:`symlib.book.pipeline.execute` in tests/book/test_example_chapter.py. To start a new
chapter, copy this folder to ``symlib/chapters/<package>/`` and the notebook to
``notebooks/NN_<package>.md``, and replace the stages, claims and views.
"""

from example_chapter.claims import claims
from example_chapter.profiles import PROFILES, ExampleProfile
from example_chapter.stages import STAGES
from example_chapter.views import QUOTES, SWEEPS, VIEWS
from symlib.book.chapter import Chapter

__all__ = ["CHAPTER", "PROFILES", "ExampleProfile"]

CHAPTER = Chapter(
    name="99_example",
    paper="none: a made-up chapter that proves the contract (issue 27, item 6)",
    profiles=PROFILES,
    stages=STAGES,
    claims=claims,
    sweeps=SWEEPS,
    views=VIEWS,
    quotes=QUOTES,
    judge_field="judge",
)
