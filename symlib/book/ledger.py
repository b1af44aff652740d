"""The book-wide answer to "does this claim reproduce?": both verdict columns over every chapter.

Each chapter's results file judges its claims twice with one criterion
(:class:`symlib.book.results.Column`): *reproduced*, under the paper's own protocol, and *robust*,
under today's standard. This module reads the stored ledgers (results files or published
records, as plain dicts) and gives

- :func:`counts`: per chapter and in total, how many claims hold, do not hold or are not judged
  in each column (code checks are not claims and are not counted);
- :func:`claim_rows`: one row per claim, with the paper's value, ours, both verdicts and, for a
  claim not judged, what stops it (the failed preconditions with the values reached);
- :func:`totals_sentence`: the totals in one sentence, for the landing page.

A record written before the two columns existed has no robust verdict: its robust column reads
``not recorded`` and is counted apart, never as a verdict.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping

from symlib.book.cards import claim_card, claim_numbers
from symlib.book.paths import project_root_or_cwd
from symlib.book.results import Column, outcome

__all__ = ["COLUMNS", "NOT_RECORDED", "OUTCOMES", "chapter_title", "claim_rows", "claims_html", "column_outcome", "counts",
           "counts_html", "totals_sentence", "what_stops"]

COLUMNS = (Column.REPRODUCED.value, Column.ROBUST.value)
"""The two verdict columns, in the order shown."""
OUTCOMES = ("holds", "does not hold", "not judged")
"""A column's outcomes, in the order counted."""
NOT_RECORDED = "not recorded"
"""The robust column of a record written before the two columns (it judged one column only)."""


def chapter_title(chapter: str) -> str:
    """A chapter's title as its page shows it: the first ``# `` heading of
    ``notebooks/<chapter>.md`` ("1 · Orthogonal skip connections ..."), or the chapter's name
    when there is no such notebook (a made-up record in a test, a checkout without notebooks)."""
    notebook = project_root_or_cwd() / "notebooks" / f"{chapter}.md"
    if notebook.is_file():
        for line in notebook.read_text(errors="replace").splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return chapter


def _claims(record: Mapping | None) -> list[dict]:
    """The record's claims (code checks left out); none for a missing record."""
    if record is None:
        return []
    return [c for c in record.get("claims", []) if c.get("kind", "claim") == "claim"]


def column_outcome(claim: Mapping, column: str) -> str:
    """``holds`` / ``does not hold`` / ``not judged`` of ``column`` (``reproduced`` or ``robust``)
    for a stored claim, or :data:`NOT_RECORDED` for a robust column an old record lacks."""
    column = Column(column).value
    verdicts = claim.get("verdicts") or {}
    if column in verdicts:
        return outcome(verdicts[column]["holds"])
    if column == Column.REPRODUCED.value:  # an old record: its single verdict is the reproduced one
        return outcome(claim["holds"])
    return NOT_RECORDED


def what_stops(claim: Mapping, column: str) -> str:
    """For a claim ``column`` does not judge, the preconditions that stop it, each as
    ``criterion (reached: value)``; ``""`` when the column judged it (or did not record it)."""
    if column_outcome(claim, column) != "not judged":
        return ""
    verdicts = claim.get("verdicts") or {}
    if column in verdicts:
        pre = verdicts[column]["preconditions"]
    else:  # an old record: every precondition gated its one column
        pre = claim.get("preconditions") or []
    failed = [p for p in pre if not p["met"]]
    if not failed:  # an old record whose criterion could not be evaluated at all
        return "no precondition recorded as failed"
    return "; ".join(f"{p['criterion']} (reached: {p['measured']})" for p in failed)


def counts(records: Mapping[str, Mapping | None]):
    """Per chapter (``records``: chapter -> its record, None when there is none) and in total
    (row ``all chapters``): the number of claims and, per column, of each outcome (columns
    ``"reproduced: holds"`` ...); a robust column an old record lacks is counted under
    ``"robust: not recorded"`` (shown only when some record lacks it)."""
    import pandas as pd

    keys = [f"{col}: {o}" for col in COLUMNS for o in (*OUTCOMES, *((NOT_RECORDED,) if col == "robust" else ()))]
    rows = []
    for chapter, record in records.items():
        claims = _claims(record)
        row = {"chapter": chapter, "claims": len(claims), **dict.fromkeys(keys, 0)}
        for claim in claims:
            for col in COLUMNS:
                row[f"{col}: {column_outcome(claim, col)}"] += 1
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["chapter", "claims", *keys])
    total = {"chapter": "all chapters", **frame[["claims", *keys]].sum().astype(int).to_dict()}
    frame = pd.concat([frame, pd.DataFrame([total])], ignore_index=True)
    if not frame[f"robust: {NOT_RECORDED}"].any():
        frame = frame.drop(columns=f"robust: {NOT_RECORDED}")
    return frame


def claim_rows(records: Mapping[str, Mapping | None]):
    """One row per claim of every record: chapter, claim, the paper's value, ours, the
    reproduced and robust outcomes, and what stops each column that does not judge it."""
    import pandas as pd

    rows = []
    for chapter, record in records.items():
        for claim in _claims(record):
            verdicts = claim.get("verdicts") or {}
            robust_measured = (verdicts.get("robust") or {}).get("measured", claim["ours"])
            stops = [f"{col}: {why}" for col in COLUMNS if (why := what_stops(claim, col))]
            rows.append({
                "chapter": chapter,
                "id": claim["id"],
                "claim": claim["text"],
                "paper": claim["paper"],
                "ours": claim["ours"] if robust_measured == claim["ours"]
                else f"{claim['ours']} (robust protocol: {robust_measured})",
                "reproduced": column_outcome(claim, "reproduced"),
                "robust": column_outcome(claim, "robust"),
                "what stops a verdict": "; ".join(stops),
                "why it does not hold": "; ".join(f"{d['cause']}: {d['detail']}" for d in claim.get("diagnosis") or [])
                if "does not hold" in (column_outcome(claim, "reproduced"), column_outcome(claim, "robust")) else "",
            })
    return pd.DataFrame(rows, columns=["chapter", "id", "claim", "paper", "ours", "reproduced", "robust",
                                       "what stops a verdict", "why it does not hold"])


def totals_sentence(records: Mapping[str, Mapping | None], *, what: str = "the published full runs") -> str:
    """The totals of :func:`counts` in one sentence (for the landing page)."""
    total = counts(records).iloc[-1]
    n = int(total["claims"])
    if n == 0:
        return f"No claim is judged yet in {what}."
    parts = []
    for col in COLUMNS:
        plural = {"holds": "hold", "does not hold": "do not hold", "not judged": "not judged"}
        got = ", ".join(f"{int(total[f'{col}: {o}'])} {plural[o]}" for o in OUTCOMES)
        missing = int(total.get(f"{col}: {NOT_RECORDED}", 0))
        if missing:
            got += f", {missing} {NOT_RECORDED} (published before the two columns)"
        parts.append(f"{col}: {got}")
    return f"Of the {n} claims in {what}, " + "; ".join(parts) + "."


def _table(label: str, anchor: str, caption: str, head: list[str], rows: list[list[str]], *, cls: str = "") -> str:
    """Captioned HTML in the book's table style; ``rows`` hold HTML cells (already escaped)."""
    def attrs(h):
        return ' class="symlib-paper"' if h == "paper" else ""

    def width(i):  # a column of sentences: wide enough to read (symlib.book.tables.LONG_TEXT)
        longest = max((len(re.sub(r"<[^>]+>", "", row[i])) for row in rows), default=0)
        return ' style="min-width: 20em"' if longest > 80 else ""

    ths = "".join(f"<th{attrs(h)}{width(i)}>{html.escape(h)}</th>" for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f"<td{attrs(h)}>{x}</td>" for h, x in zip(head, row, strict=True)) + "</tr>"
                   for row in rows)
    return (f'<div class="symlib-table-scroll" id="{anchor}"><table class="symlib-table{cls}">'
            f'<caption>{f"""<span class="caption-number">{html.escape(label)} </span>""" if label else ""}'
            f'<span class="caption-text">{html.escape(caption)}</span></caption>'
            f"<thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table></div>")


def counts_html(records: Mapping[str, Mapping | None], *, label: str, anchor: str, caption: str,
                link_prefix: str | None = None) -> str:
    """:func:`counts` as a captioned table: per chapter and column, ✓ holds / ✗ does not hold /
    ○ not judged (two header rows: the column, then the outcome); with ``link_prefix``, each
    chapter links to ``<link_prefix><chapter>.html`` (``label`` may be empty: an unnumbered table)."""
    frame = counts(records)
    extra = f"robust: {NOT_RECORDED}" in frame.columns
    head = ('<tr><th rowspan="2">chapter</th><th rowspan="2">claims</th>'
            + "".join(f'<th colspan="{3 + (extra and col == "robust")}">{col}</th>' for col in COLUMNS) + "</tr><tr>"
            + "".join(f'<th title="{o}">{sym}</th>' for _ in COLUMNS for sym, o in zip("✓✗○", OUTCOMES, strict=True))
            + ('<th title="published before the two columns">not recorded</th>' if extra else "") + "</tr>")
    body = []
    for _, r in frame.iterrows():
        name = html.escape(chapter_title(str(r["chapter"])) if r["chapter"] in records else str(r["chapter"]))
        if link_prefix is not None and r["chapter"] in records:
            href = f"{html.escape(link_prefix)}{html.escape(str(r['chapter']))}.html"
            name = f'<a class="reference internal" href="{href}">{name}</a>'
        cells = [name, str(int(r["claims"]))]
        cells += [str(int(r[f"{col}: {o}"])) for col in COLUMNS for o in OUTCOMES]
        if extra:
            cells.append(str(int(r[f"robust: {NOT_RECORDED}"])))
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    caption += " (✓ holds, ✗ does not hold, ○ not judged)"
    number = f'<span class="caption-number">{html.escape(label)} </span>' if label else ""
    return (f'<div class="symlib-table-scroll" id="{anchor}"><table class="symlib-table symlib-counts">'
            f'<caption>{number}<span class="caption-text">{html.escape(caption)}</span></caption>'
            f'<thead>{head}</thead><tbody>{"".join(body)}</tbody></table></div>')


def claims_html(records: Mapping[str, Mapping | None], *, label: str, anchor: str, caption: str) -> str:
    """:func:`claim_rows` as captioned cards (:func:`symlib.book.cards.claim_card`), one per
    claim, grouped by chapter: the claim (linked to the section of its chapter that measures it,
    the record's ``notes.claim_sections``), the paper's value, ours, both verdicts and, for a
    column that does not judge it, what stops it. Cards, not a table: five columns of sentences
    do not fit a text column."""
    parts = []
    for chapter, record in records.items():
        claims = _claims(record)
        if not claims:
            continue
        sections = ((record or {}).get("notes") or {}).get("claim_sections") or {}
        numbers = claim_numbers(record.get("claims", []))  # as the chapter's own ledger numbers them
        cards = "".join(claim_card(c, tiers={"full (published)": c}, number=numbers[c["id"]],
                                   href=f"{chapter}.html#{sections[c['id']]}" if c["id"] in sections else "")
                        for c in claims)
        head = f'<a class="reference internal" href="{html.escape(chapter)}.html">{html.escape(chapter_title(chapter))}</a>'
        parts.append(f'<p class="symlib-chapter-head">{head}</p>{cards}')
    body = "".join(parts) or "<p>No claim is published yet.</p>"
    return (f'<div class="symlib-ledger-cards" id="{anchor}"><p class="symlib-caption"><span class="caption-number">'
            f'{html.escape(label)} </span><span class="caption-text">{html.escape(caption)}</span></p>{body}</div>')
