"""``{verdict-totals}``: the published full runs' verdicts at a glance, for the landing page.

Reads ``published/full/*.json`` when the book is built (the pages are rebuilt whenever a run is
published) and renders one sentence of totals and a table per chapter of both verdict columns
(:mod:`symlib.book.ledger`), each chapter linking to its page. Sphinx is told the page depends
on the published records, so republishing one rebuilds the landing page.
"""

from __future__ import annotations

import html
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

ROOT = Path(__file__).resolve().parents[2]


class VerdictTotals(Directive):
    has_content = False

    def run(self):
        from symlib.book import ledger, published
        from symlib.chapters import CHAPTERS

        directory = ROOT / "published" / published.TIER
        records = {chapter: published.load(chapter, directory) for chapter in CHAPTERS}
        env = self.state.document.settings.env
        for chapter in CHAPTERS:
            env.note_dependency(str(directory / f"{chapter}.json"))
        docdir = Path(env.doc2path(env.docname)).parent
        prefix = Path(*[".."] * len(docdir.relative_to(env.srcdir).parts), "executed").as_posix() + "/"
        out = (f'<p class="symlib-totals">{html.escape(ledger.totals_sentence(records))}</p>'
               + ledger.counts_html(records, label="", anchor="verdict-totals", link_prefix=prefix,
                                    caption="Each chapter's claims in its published full run, judged under the "
                                            "paper's own protocol (reproduced) and today's standard (robust)"))
        paper_dir = ROOT / "published" / "paper"
        papers = {chapter: published.load(chapter, paper_dir, tier="paper") for chapter in CHAPTERS}
        for chapter in CHAPTERS:
            env.note_dependency(str(paper_dir / f"{chapter}.json"))
        if any(papers.values()):  # the papers' budgets, where a chapter's has been run
            done = {c: r for c, r in papers.items() if r is not None}
            out += (f'<p class="symlib-totals">{html.escape(ledger.totals_sentence(done, what="the published paper runs"))}'
                    f" ({len(done)} of {len(CHAPTERS)} chapters so far)</p>")
        return [nodes.raw("", out, format="html")]


def setup(app):
    app.add_directive("verdict-totals", VerdictTotals)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
