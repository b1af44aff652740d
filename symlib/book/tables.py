"""How a chapter shows its tables and its claims ledger: one helper for every chapter.

:func:`show_table` stores a table in the chapter's results file and renders it as HTML with a
numbered ``<caption>`` (chapter 2a's third table is "Table 2a" + ".3"), inside a scroll
container so a wide table never runs past the text column, with one number format per column
(three significant digits), the paper's columns set apart from ours, and, when a `full` run of
the chapter is published (:mod:`symlib.book.published`), its numbers beside this build's. A
published run made by an older profile or code is marked "from an older version of the code";
nothing here fails on it. :func:`show_ledger` does the same for the claims ledger (status by
colour and symbol, this build's verdict beside the published one) and shows the published run's
figures.

A table is shown so that it fits the text column of a desktop window without scrolling, its
stored form unchanged: :func:`shown_columns` turns a table of splits, puts a spread beside its
mean and the paper's many numbers under ours, and says a column that is the same in every row
once; :func:`cell_html` lets cells break where a reader expects; an estimate of the table's
narrowest width (:func:`too_wide`) sets the widths of its columns of sentences and its compact
type.

    table = pd.DataFrame(...)
    tables.show_table(run, "table1_mnist", table, caption="MNIST / OptuNet, ours beside the paper's")

Prose refers to a table by number through the glued ``tab_<name>`` (``{glue:md}`tab_table1_mnist```),
so a renumbered table never leaves a stale reference behind.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
import sys
from pathlib import Path
from typing import NamedTuple

import myst_nb
from docutils.nodes import make_id
from IPython.display import HTML, Image, Markdown, display

from symlib.book import published
from symlib.book.cards import claim_numbers, ledger_cards
from symlib.book.codehash import compute_code_hash, stale_code_groups
from symlib.book.paths import project_root_or_cwd
from symlib.book.results import ChapterResults, depends_on
from symlib.book.words import reader_words
from symlib.data import data_hash

__all__ = [
    "Column",
    "cell_html",
    "chapter_label",
    "format_column",
    "front_figure",
    "glue_quotes",
    "older_code_note",
    "provenance_line",
    "published_facts",
    "published_tier",
    "published_tiers",
    "render_ledger",
    "render_table",
    "sentence_widths",
    "show_ledger",
    "show_table",
    "shown_columns",
    "table_anchor",
    "tier_of",
    "too_wide",
    "without_timing",
]


TIMING_COLUMN = re.compile(r"\btime \(s\)|\bseconds\b|/ s\b|\b(?:NUTS|sampling|warm-?up|wall|build) s\b|\bms per\b")
"""How a table names a column that times the machine: ``"time (s)"``, ``"train time (s)"``,
``"wall time (s)"``, ``"time (s) se"``, ``"seconds"``, ``"ESS / s"``, ``"NUTS s"``,
``"sampling s"``, ``"ms per step"``. Such a column measures the machine, not the method: two runs
of the same numbers (a rerun, a run resumed from the cache, a serial and a parallel run) differ in
it (``"component sd s"``, a standard deviation, is not one)."""


LONG_TEXT = 80
"""A column with a cell longer than this (characters) gets a minimum width
(:func:`sentence_widths`)."""
UNDER_TEXT = 120
"""In a table of :data:`UNDER_COLUMNS` columns or more, the column of text with the longest cell,
if that is longer than this (characters), is shown under each row across the table's width
instead of as a column: squeezed beside five others, such a sentence makes every row a tall,
mostly white strip (a sweep's measured values beside its settings and verdicts)."""
UNDER_COLUMNS = 6
LONG_TABLE_ROWS = 20
"""Tables of more rows than this are shown behind a toggle (their caption stays visible)."""
COMPACT_COLUMNS = 12
"""Tables with at least this many columns shown, or estimated too wide for the text column
(:func:`too_wide`), are set compact (smaller type, tighter cells), so that one run's table of a
paper's many metrics fits the text column."""


def is_timing_column(name) -> bool:
    """Whether the column ``name`` holds wall-clock times (:data:`TIMING_COLUMN`)."""
    return bool(TIMING_COLUMN.search(str(name)))


def without_timing(frame):
    """``frame`` without its wall-clock columns: what "the same results" means when two runs
    are compared (their timings are shown, never compared)."""
    return frame.drop(columns=[c for c in frame.columns if is_timing_column(c)])


def chapter_label(chapter: str) -> str:
    """The chapter's number as the book prints it: ``"02a_symmetry_removal"`` -> ``"2a"``."""
    m = re.match(r"(\d+)([a-z]?)_", chapter)
    return f"{int(m[1])}{m[2]}" if m else chapter


def table_anchor(chapter: str, number: int) -> str:
    """The HTML id of a chapter's table ``number`` (``table-2a-3``)."""
    return f"table-{chapter_label(chapter)}-{number}"


# --------------------------------------------------------------------------- numbers


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def format_column(values, fmt: str | None = None) -> list[str]:
    """One format for a whole column, so its numbers line up and compare at a glance.

    Integers (and floats that are all whole numbers) get thousands separators; other floats
    three significant digits at the column's typical magnitude, fixed-point, or scientific
    notation when the column spans numbers below 0.001 or above 100,000. Missing values
    (None, NaN) show as "—"; strings are left as they are. ``fmt`` (``"{:.0%}"``) overrides.
    """
    values = list(values)
    nums = [v for v in values if _is_number(v) and math.isfinite(v)]

    def show(v, number_fmt):
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return "—"
        if not _is_number(v):
            return str(v)
        return number_fmt.format(v)

    if fmt is not None:
        return [show(v, fmt) for v in values]
    if not nums:
        return [show(v, "{}") for v in values]
    if all(float(v).is_integer() and abs(v) < 1e15 for v in nums):
        return [show(v if not _is_number(v) else int(v), "{:,}") for v in values]
    mags = sorted(abs(v) for v in nums if v != 0)
    if not mags:
        return [show(v, "{:.0f}") for v in values]
    if mags[0] < 1e-3 or mags[-1] >= 1e5:
        return [show(v, "{:.2e}") for v in values]
    typical = mags[len(mags) // 2]
    decimals = min(4, max(0, 2 - math.floor(math.log10(typical))))
    return [show(v, f"{{:.{decimals}f}}") for v in values]


# --------------------------------------------------------------------------- tiers


def published_tier(chapter: str, config=None, tier: str | None = None) -> tuple[dict | None, list[str]]:
    """A published record of ``chapter`` and why it is stale ([] when current): the ``tier``'s,
    or by default the most converged one published (``paper`` before ``full``), whose numbers a
    page puts in front.

    ``config`` is any profile of the chapter (the run's): its module holds the chapter's
    ``PROFILES``, whose entry of the record's tier the record is compared with (the book
    machinery does not import the chapters).
    """
    tiers = published_tiers(chapter, config, [tier] if tier is not None else None)
    return next(iter(tiers.values()), (None, []))


def published_tiers(chapter: str, config=None, tiers=None) -> dict[str, tuple[dict, list[str]]]:
    """Every published record of ``chapter`` (of ``tiers``, default all), most converged first:
    tier -> ``(record, why it is stale)``."""
    profiles = getattr(sys.modules.get(type(config).__module__), "PROFILES", None) or {}
    return {tier: (record, published.staleness(record, profiles.get(tier)))
            for tier, record in published.records(chapter, tiers).items()}


def tier_of(record: dict | None) -> str:
    """The tier a published record belongs to (its profile): ``full`` or ``paper``."""
    return str((record or {}).get("profile") or published.TIER)


def provenance_line(record: dict, stale: list[str]) -> str:
    """``full`` run: profile, device, date, commit (and why it is from older code)."""
    prov = record.get("provenance") or {}
    computed = record.get("computed") or {}
    commit = (computed.get("commit") or prov.get("commit") or "unknown commit")[:12]
    date = (record.get("published") or "")[:10] or "undated"
    device = computed.get("device") or record.get("device")
    took = f" in {html.escape(str(computed['compute_time']))}" if computed.get("compute_time") else ""
    if minutes := published.pieces_minutes(record):
        took = f" in {minutes} over {computed['pieces']['pieces']} pieces"
    line = (f"{html.escape(tier_of(record))} = published run: profile <code>{html.escape(str(record.get('profile')))}</code>, "
            f"computed on {html.escape(str(device))}{took} at commit <code>{html.escape(commit)}</code>, "
            f"published {date}")
    rendered = (prov.get("commit") or "")[:12]
    if rendered and rendered != commit:
        line += f" (pages rendered from its cache at <code>{html.escape(rendered)}</code>)"
    if stale:
        line += (' — <strong class="symlib-stale">from an older version of the code</strong> ('
                 + html.escape("; ".join(stale)) + ")")
    return line


def tier_note(stale: list[str], tier: str = published.TIER) -> str:
    """The short line under a table with the published run's numbers: the run's provenance is
    stated once, at the top of the chapter (:meth:`symlib.book.chapter.Chapter.glance`) and
    under its ledger; only a stale run is marked again here."""
    line = f"{tier} = the published {tier} run (its provenance: “Does it reproduce?” at the top of the chapter)"
    if stale:
        line += ' — <strong class="symlib-stale">from an older version of the code</strong>'
    return line


def _aligned(quick: dict, full: dict) -> bool:
    """Whether the published table has this build's shape: same columns, rows, row labels."""
    if quick["columns"] != full["columns"] or len(quick["rows"]) != len(full["rows"]):
        return False
    return all(q[0] == f[0] for q, f in zip(quick["rows"], full["rows"], strict=True))


def _is_paper(column: str, paper_columns) -> bool:
    return column in paper_columns if paper_columns is not None else "paper" in column.lower()


def _is_paper_row(row: list) -> bool:
    """A row of the paper's numbers: a leading label is "paper" or ends in "(paper)"."""
    labels = [str(v).strip().lower() for v in row[:2] if isinstance(v, str)]
    return any(v == "paper" or v.endswith("(paper)") or v.startswith("paper") for v in labels)


# --------------------------------------------------------------------------- rendering


def _cells(table: dict, formats: dict, other: dict | None = None) -> tuple[dict, dict]:
    """Each column's cells as text, with ``other``'s (same columns) in the same format."""
    n = len(table["rows"])
    rows = table["rows"] + (other["rows"] if other else [])
    cells = {c: format_column([row[i] for row in rows], formats.get(c)) for i, c in enumerate(table["columns"])}
    return {c: v[:n] for c, v in cells.items()}, {c: v[n:] for c, v in cells.items()}


# --------------------------------------------------------------------------- what a table shows


TURN_COLUMNS = 5
"""A table whose columns after the first are numbered 1, 2, ..., n (one per split or seed), n at
least this and more than its rows, is shown turned: one row per number. Fifteen splits across
do not fit the text column, and a column then holds one model's numbers, in one format. The
numbers' column keeps the header the rows' labels had (none for pandas' ``"index"``, the name
of an index without one)."""
SPREAD_SUFFIX = " (std)"
"""A column ``"X (std)"`` beside ``"X"`` is shown in X's cells, as ``mean ± std``."""
PAPER_SUFFIX, OURS_SUFFIX = " (paper)", " (ours)"
"""A column ``"X (paper)"`` beside ``"X"`` or ``"X (ours)"`` makes a pair."""
PAPER_PAIRS = 4
"""In a table of this many pairs (:data:`PAPER_SUFFIX`) or more, each pair is shown as one
column, the paper's number under ours: a paper's many metrics or settings, ours and theirs one
column each, are too many for the text column."""
SAME_ROWS = 3
"""A column of text with the same value in each of this many rows or more is said once, under
the caption ("In every row, robust verdict: not judged."), not in every row; one with nothing
in it (blank, or a dash) is left out."""
LONG_WORD = 16
"""A word longer than this (characters) that joins its parts with "_" (a chapter's name, an
identifier) may break after each "_": unbroken, it widens its column past the text."""
TEXT_COLUMN_EM = 50
"""The text column at a 1280-px window (683 px, 676 beside a scroll bar) in ems of a table's
type (0.85 of 16 px)."""
COMPACT = (0.85 / 0.74, 0.6, 0.06)
"""A compact table (book/_static/symlib.css): its em is 0.74/0.85 of a table's, so the text
column holds this many times more of them; its cells' padding (0.3 em a side); and the
error of :func:`too_wide`'s estimate (fitted: 6%)."""
ROOM_SLACK = 3
"""Em of the text column that :func:`sentence_widths` leaves free for the error of its estimate."""
CHAR_EM, BOLD, PAD_EM = 0.57, 1.05, 1.0
"""For :func:`too_wide`: a character of the tables' type, in em; how much wider a header's bold
type is; a cell's padding (0.5 em a side, book/_static/symlib.css). Fitted to the narrowest
widths Chromium gives nine of the book's tables (``width: min-content``): the estimates fall
within 6% of them."""
_NUMBER = r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?%?"
PLUS_MINUS = re.compile(rf"(?<![\w.])([-+−]?{_NUMBER})\s*±\s*({_NUMBER})")
"""A number with its spread in a cell of text (``"0.070 ± 0.009"``, ``"88.379±0.023"``)."""
NUMBER = re.compile(rf"[-+−]?{_NUMBER}")
"""A number written as text (``"-0.210"``, ``"5.1e-04"``, ``"1,234"``)."""


KINDS = ("", "num", "spread")
"""The kinds of a shown cell (:class:`Column`), in the order a merged cell takes the larger."""


class Column(NamedTuple):
    """A column as shown: its header, each cell's HTML and kind (``"num"``: a number; ``"spread"``:
    a number with its spread, ``mean ± sd``; ``""``: text), whether it holds the paper's numbers,
    each cell's length in characters (for :func:`_th`) and the characters of its widest piece
    that cannot break (for :func:`too_wide`)."""
    name: str
    cells: list[str]
    kinds: list[str]
    paper: bool
    lengths: list[int]
    widest: int


def shown_columns(table: dict, *, formats: dict | None = None, paper_columns=None,
                  hide: tuple = ()) -> tuple[list[Column], list[bool], str]:
    """What :func:`render_table` shows of a stored table: its columns, without ``hide``, turned
    when they are numbered (:data:`TURN_COLUMNS`), a spread in its mean's cells
    (:data:`SPREAD_SUFFIX`), the paper's numbers under ours in a table of many pairs
    (:data:`PAPER_PAIRS`) and a column of text that is the same in every row said once
    (:data:`SAME_ROWS`); which rows are the paper's; and a note (HTML, "" when there is nothing
    to say) on how the cells read and what every row holds. The stored table is not changed:
    its results file and comparisons see every column."""
    formats = formats or {}
    keep = [i for i, c in enumerate(table["columns"]) if c not in hide]
    names = [table["columns"][i] for i in keep]
    rows = [[row[i] for i in keep] for row in table["rows"]]
    turned = _numbered(names, rows)
    if turned:
        labels = [str(row[0]) for row in rows]
        rows = [[c, *(row[j] for row in rows)] for j, c in enumerate(names[1:], 1)]
        names = ["" if names[0] == "index" else names[0], *labels]
    columns = []
    for j, name in enumerate(names):
        values = [row[j] for row in rows]
        texts = format_column(values, formats.get(name))
        paper = _is_paper_row([name]) if turned and j else _is_paper(name, paper_columns)
        kinds = _kinds(values, texts, labels=j == 0)
        columns.append(Column(name, [cell_html(t) for t in texts], kinds, paper, [len(t) for t in texts],
                              max((_unbreakable(t, k) for t, k in zip(texts, kinds, strict=True)), default=0)))
    columns, same = _without_same(_with_spreads(columns))
    how = [f"In every row, {same}."] if same else []
    stacked = _papers_under_ours(columns)
    if len(columns) - len(stacked) >= PAPER_PAIRS:
        columns = stacked
        how.insert(0, "In each cell, the paper's number (shaded) is under ours.")
    paper_rows = [False] * len(rows) if turned else [_is_paper_row(row) for row in rows]
    return columns, paper_rows, " ".join(how)


def _kinds(values: list, texts: list[str], *, labels: bool = False) -> list[str]:
    """The kinds of a column's cells (:class:`Column`). A number stored as its text (a row of
    single values in a column of ``mean ± se``) is a number where the column holds nothing but
    numbers, with or without spreads, and blanks; beside words, or in the first column (the
    rows' labels: a claim's number, a split's), it is text."""
    def kind(value, text):
        if _is_number(value):
            return "num"
        return "text-num" if NUMBER.fullmatch(text) else "spread" if PLUS_MINUS.fullmatch(text) else ""
    kinds = [kind(v, t) for v, t in zip(values, texts, strict=True)]
    words = labels or any(k == "" and t.strip() not in ("", "—") for k, t in zip(kinds, texts, strict=True))
    return [("" if words else "num") if k == "text-num" else k for k in kinds]


def _numbered(names: list[str], rows: list[list]) -> bool:
    """Whether a table's columns after the first are numbered 1..n with n at least
    :data:`TURN_COLUMNS` and more than its rows, its first column being the rows' labels."""
    n = len(names) - 1
    return (n >= TURN_COLUMNS and n > len(rows) and names[1:] == [str(i) for i in range(1, n + 1)]
            and all(isinstance(row[0], str) for row in rows))


def _with_spreads(columns: list[Column]) -> list[Column]:
    """``"X"`` and ``"X (std)"`` as one column ``"X ± std"`` whose cells read ``mean ± std``."""
    by_name = {c.name: c for c in columns}
    out = []
    for c in columns:
        spread = by_name.get(c.name + SPREAD_SUFFIX)
        if c.name.endswith(SPREAD_SUFFIX) and c.name[: -len(SPREAD_SUFFIX)] in by_name:
            continue
        if spread is None:
            out.append(c)
            continue
        cells = [m if s == "—" else _plus_minus(m, s) for m, s in zip(c.cells, spread.cells, strict=True)]
        out.append(c._replace(name=f"{c.name} ± std", cells=cells, kinds=["spread" if k else k for k in c.kinds],
                              lengths=[a + b + 3 for a, b in zip(c.lengths, spread.lengths, strict=True)],
                              widest=max(c.widest, spread.widest + 2)))
    return out


def _papers_under_ours(columns: list[Column]) -> list[Column]:
    """Each ``"X (paper)"`` column in the cells of ``"X"`` (or ``"X (ours)"``, then named ``"X"``),
    the paper's number on a shaded line under ours."""
    by_name = {c.name: c for c in columns}

    def ours_of(name):
        base = name[: -len(PAPER_SUFFIX)]
        return by_name.get(base) or by_name.get(base + OURS_SUFFIX)

    papers = {ours.name: c for c in columns if c.name.endswith(PAPER_SUFFIX) and (ours := ours_of(c.name))}
    out = []
    for c in columns:
        if c.name.endswith(PAPER_SUFFIX) and ours_of(c.name) is not None:
            continue
        paper = papers.get(c.name)
        if paper is None:
            out.append(c)
            continue
        cells = [f'{o}<span class="symlib-paper symlib-under">{t}</span>' for o, t in zip(c.cells, paper.cells, strict=True)]
        out.append(c._replace(name=c.name.removesuffix(OURS_SUFFIX), cells=cells,
                              kinds=[max(a, b, key=KINDS.index) for a, b in zip(c.kinds, paper.kinds, strict=True)],
                              lengths=[max(a, b) for a, b in zip(c.lengths, paper.lengths, strict=True)],
                              widest=max(c.widest, paper.widest)))
    return out


def _without_same(columns: list[Column]) -> tuple[list[Column], str]:
    """The columns but the first without those of text that hold one value in every row (at
    least :data:`SAME_ROWS`), and those values as ``"name: value; ..."`` (a column empty or of
    dashes in every row is left out unsaid)."""
    same = [c for c in columns[1:] if len(c.cells) >= SAME_ROWS and not any(c.kinds) and len(set(c.cells)) == 1]
    said = "; ".join(f"{html.escape(reader_words(c.name))}: {c.cells[0]}" for c in same
                     if c.cells[0].strip() not in ("", "—", "–", "-"))
    return [c for c in columns if c not in same], said


def _unbreakable(text: str, kind: str) -> int:
    """The characters of the widest piece of a cell's text that cannot break (as
    :func:`cell_html` lets it break)."""
    if kind == "num":
        return len(text)
    if kind == "spread" and (m := PLUS_MINUS.fullmatch(text)):
        return max(len(m[1]), len(m[2]) + 2)
    words = [piece for word in text.split() for piece in
             (word.split("_") if len(word) > LONG_WORD else [word]) for piece in re.split(r"(?<=-)", piece)]
    return max(map(len, words), default=0)


def _narrowest(column: Column, pad: float = PAD_EM) -> float:
    """The narrowest a column can be, estimated in em: its widest unbreakable piece (header or
    cell) and its padding (:data:`CHAR_EM`)."""
    header = max(map(len, reader_words(column.name).split()), default=0) * BOLD
    return CHAR_EM * max(column.widest, header) + pad


def too_wide(columns: list[Column], *, compact: bool = False) -> bool:
    """Whether the columns, each as narrow as it can be, are estimated wider than the text
    column (:data:`TEXT_COLUMN_EM`): such a table is set compact. With ``compact``: whether
    they are, set compact (:data:`COMPACT`), clearly wider (by more than the estimate's error):
    such a table's headers break inside words too."""
    if not compact:
        return sum(map(_narrowest, columns)) > TEXT_COLUMN_EM
    scale, pad, error = COMPACT
    return sum(_narrowest(c, pad) for c in columns) > TEXT_COLUMN_EM * scale * (1 + error)


def sentence_widths(columns: list[Column]) -> dict[int, int]:
    """The minimum width, in em, of each column of sentences (a cell longer than
    :data:`LONG_TEXT`), by its index: squeezed beside short columns, a sentence becomes a tall,
    mostly white row. One such column gets 20-36 em, more the longer its sentences; two or more
    share two columns' 28-48 em (three at 24 em each overflowed the reproducibility page's table
    of tiers). Together they take no more than the text column leaves once the other columns
    are as narrow as they can be (:func:`_narrowest`, less :data:`ROOM_SLACK` for the estimate's
    error): a minimum past that makes the table scroll."""
    sentences = {i: max(c.lengths) for i, c in enumerate(columns) if max(c.lengths, default=0) > LONG_TEXT}
    if not sentences:
        return {}
    n = len(sentences)
    floor, cap = (20, 36) if n < 2 else (28 // n, 48 // n)
    want = {i: min(max(floor, longest // 14), cap) for i, longest in sentences.items()}
    room = TEXT_COLUMN_EM - ROOM_SLACK - sum(_narrowest(c) for i, c in enumerate(columns) if i not in sentences)
    if sum(want.values()) > room:
        want = {i: math.floor(w * max(room, 0) / sum(want.values())) for i, w in want.items()}
    return {i: w for i, w in want.items() if w > 0}


def under_column(columns: list[Column]) -> int | None:
    """The index of the column shown under each row (:data:`UNDER_TEXT`), or None."""
    if len(columns) < UNDER_COLUMNS:
        return None
    text = {i: max(c.lengths, default=0) for i, c in enumerate(columns) if i > 0 and not any(c.kinds)}
    longest = max(text, key=text.get, default=None)
    return longest if longest is not None and text[longest] > UNDER_TEXT else None


def _plus_minus(mean: str, spread: str) -> str:
    """``mean ± spread`` (HTML) that breaks, if it must, only before the "±"."""
    return f'<span class="symlib-nowrap">{mean}</span> <span class="symlib-nowrap">± {spread}</span>'


def cell_html(text: str) -> str:
    """A cell's text as HTML that wraps where a reader expects: a number with its spread
    (``0.070 ± 0.009``) only before the "±", a long word joined by "_" after each "_"
    (:data:`LONG_WORD`)."""
    out = re.sub(rf"(?<![\w-])(?=[\w-]{{{LONG_WORD + 1},}})\w*_[\w-]*",
                 lambda m: m[0].replace("_", "_<wbr>"), html.escape(text))
    return PLUS_MINUS.sub(lambda m: _plus_minus(m[1], m[2]), out)


def _compact_classes(columns: list[Column]) -> str:
    """The classes that set a table compact (:data:`COMPACT_COLUMNS`, :func:`too_wide`) and let
    its headers break inside words (only where even compact it is too wide: "accurac-y" is
    harder to read than a whole word)."""
    if len(columns) < COMPACT_COLUMNS and not too_wide(columns):
        return ""
    return " symlib-compact symlib-break-headers" if too_wide(columns, compact=True) else " symlib-compact"


def _th(column: Column, min_em: int | None) -> str:
    """A header cell, at least ``min_em`` wide (:func:`sentence_widths`)."""
    style = f' style="min-width: {min_em}em"' if min_em else ""
    paper = ' class="symlib-paper"' if column.paper else ""
    return f"<th{style}{paper}>{html.escape(reader_words(column.name))}</th>"


def render_table(table: dict, *, label: str, anchor: str, full: dict | None = None,
                 full_record: dict | None = None, stale: list[str] | None = None,
                 formats: dict | None = None, paper_columns=None, hide: tuple = ()) -> str:
    """A stored table (``{"caption", "source", "columns", "rows"}``) as captioned HTML.

    Args:
        table: this build's table, as :meth:`ChapterResults.add_table` stores it.
        label: its number as printed (``f"Table {chapter_label(chapter)}.{n}"``).
        anchor: the HTML id prose links to.
        full: the same table from the published `full` run, if there is one: a column whose
            values differ between the runs shows both ("quick" / "full"); a table of another
            shape is shown below this build's.
        full_record, stale: the published record (for its provenance line) and why it is stale.
        formats: column -> format string, overriding :func:`format_column`'s choice.
        paper_columns: the paper's columns (default: those whose name contains "paper").
        hide: columns not shown (still stored).
    """
    if len(table["rows"]) > LONG_TABLE_ROWS and not table.get("_shown_whole"):
        # a long table (per-epoch curves, per-setting runs) behind a toggle: the page stays short
        whole = render_table(dict(table, _shown_whole=True), label=label, anchor=anchor, full=full,
                             full_record=full_record, stale=stale, formats=formats, paper_columns=paper_columns,
                             hide=hide)
        return (f'<details class="symlib-long-table"><summary><span class="symlib-summary-label">{html.escape(label)}'
                f'</span>: {html.escape(table.get("caption") or "")} ({len(table["rows"])} rows; show)</summary>'
                f"{whole}</details>")
    formats = formats or {}
    cols = [c for c in table["columns"] if c not in hide]
    merged = full is not None and _aligned(table, full)
    quick, other = _cells(table, formats, full if merged else None)
    both = [c for c in cols if merged and other[c] != quick[c]]
    if both:  # the published run in front, this build's numbers one click away: one tier at a time
        return _full_in_front(table, full, label=label, anchor=anchor, full_record=full_record, stale=stale,
                              formats=formats, paper_columns=paper_columns, hide=hide, differ=both)

    shown, paper_rows, how = shown_columns(table, formats=formats, paper_columns=paper_columns, hide=hide)
    under = shown.pop(at) if (at := under_column(shown)) is not None else None
    widths = sentence_widths(shown)
    head = ["<thead><tr>", *(_th(c, widths.get(i)) for i, c in enumerate(shown)), "</tr></thead>"]
    body = ["<tbody>"]
    for i, paper_row in enumerate(paper_rows):
        body.append('<tr class="symlib-paper">' if paper_row else "<tr>")
        for c in shown:
            classes = " ".join(k for k, on in (("symlib-paper", c.paper), ("symlib-num", c.kinds[i] == "num"),
                                               ("symlib-spread", c.kinds[i] == "spread")) if on)
            body.append(f'<td class="{classes}">{c.cells[i]}</td>' if classes else f"<td>{c.cells[i]}</td>")
        body.append("</tr>")
        if under is not None and under.cells[i].strip():
            body.append(f'<tr class="symlib-under-row"><td colspan="{len(shown)}"><span class="symlib-under-name">'
                        f"{html.escape(reader_words(under.name))}:</span> {under.cells[i]}</td></tr>")
    body.append("</tbody>")
    caption = html.escape(table.get("caption") or "")
    source = f' <span class="symlib-source">Source: {html.escape(table["source"])}.</span>' if table.get("source") else ""
    source += f' <span class="symlib-how">{how}</span>' if how else ""
    parts = [
        f'<div class="symlib-table-scroll" id="{anchor}">',
        f'<table class="symlib-table{_compact_classes(shown)}">',
        f'<caption><span class="caption-number">{label} </span><span class="caption-text">{caption}</span>{source}</caption>',
        *head, *body, "</table>",
    ]
    if full_record is not None:
        note = tier_note(stale or [], tier_of(full_record))
        if full is None:
            note += "; this table is not in it"
        elif not merged:  # other rows or columns (e.g. a sweep of more settings): the full run in front
            return _full_in_front(table, full, label=label, anchor=anchor, full_record=full_record, stale=stale,
                                  formats=formats, paper_columns=paper_columns, hide=hide, differ=None)
        elif not both:
            note += "; its numbers are the same as this build's"
        parts.append(f'<p class="symlib-tier-note">{note}</p>')
    parts.append("</div>")
    return "\n".join(p for p in parts if p)


def show_table(run, name: str, frame, *, caption: str | None = None, source: str | None = None, formats: dict | None = None,
               paper_columns=None, hide: tuple = (), store: bool = True, index: bool = True, full_frame=None):
    """Store ``frame`` as table ``name`` of the chapter, number it, and return it for display.

    The table gets the chapter's next number (``f"Table {chapter_label(chapter)}.{n}"``), shown in its ``<caption>``; the
    glue key ``tab_<name>`` holds a link to it for the prose. With ``store=False`` the table is
    shown but not written to the results file (it is stored elsewhere: robustness, errata).
    ``caption`` and ``source`` default to those the table was stored with earlier, if it was.
    ``index=False`` drops the frame's index (by default a named or non-range index is kept as
    leading columns, as :meth:`ChapterResults.add_table` does). ``full_frame``: the published
    `full` run's version of a table it does not store under ``name`` (``store=False``; a
    robustness table built from its record), shown as a stored one would be; ``frame=None``
    with a ``full_frame``: this build has no such table, and the full run's is shown alone.
    """

    scratch = ChapterResults(run.chapter, run.profile, run.seed, str(run.device))

    def unstored(f, key):
        scratch.add_table(key, f.reset_index(drop=True) if not index else f, caption=caption, source=source)
        return scratch.tables[key]

    if frame is not None and not index:
        frame = frame.reset_index(drop=True)
    stored = run.results.tables.get(name, {})
    caption = caption if caption is not None else stored.get("caption", "")
    source = source if source is not None else stored.get("source", "")
    if frame is None:
        table = None
    elif store:
        run.results.add_table(name, frame, caption=caption, source=source)
        table = run.results.tables[name]
    else:
        table = unstored(frame, name)
    shown = _shown(run)
    shown.append(name)
    number = len(shown)
    label = f"Table {chapter_label(run.chapter)}.{number}"
    anchor = table_anchor(run.chapter, number)
    record, stale = published_tier(run.chapter, run.config)
    if store:
        full = (record or {}).get("tables", {}).get(name)
    else:
        full = unstored(full_frame, f"{name} (full)") if full_frame is not None and record is not None else None
    if table is None:
        if full is None:
            raise ValueError(f"table {name!r}: neither this build nor a published run has it")
        out = _as_published(render_table(full, label=label, anchor=anchor, formats=formats or {},
                                         paper_columns=paper_columns, hide=hide), stale)
        out = _inside_last_box(out, f'<p class="symlib-tier-note">Numbers of the published {tier_of(record)} run; this '
                               "build's profile computes no such table. " + tier_note(stale or [], tier_of(record)) + "</p>")
    else:
        out = render_table(table, label=label, anchor=anchor, full=full,
                           full_record=record if (store or full is not None) else None,
                           stale=stale, formats=formats, paper_columns=paper_columns, hide=hide)
    myst_nb.glue(f"tab_{name}", Markdown(f'<a class="reference internal" href="#{anchor}">{label}</a>'), display=False)
    return HTML(out)


def _shown(run) -> list:
    """The names of the tables a run has shown so far, in order (kept on the run object)."""
    if not hasattr(run, "_symlib_shown"):
        object.__setattr__(run, "_symlib_shown", [])
    return run._symlib_shown


# --------------------------------------------------------------------------- ledger


def _as_published(rendered: str, stale: list[str] | None) -> str:
    """A rendered table marked as a published run's (and as stale, when it is)."""
    stale_cls = " symlib-stale" if stale else ""
    return rendered.replace('<div class="symlib-table-scroll"', f'<div class="symlib-table-scroll symlib-full{stale_cls}"', 1)


def _inside_last_box(rendered: str, extra: str) -> str:
    """``extra`` (a note) inside the last ``<div>`` of a rendered table, before its closing tag: a
    long table is wrapped in a ``<details>`` box after that div, so the note must not simply
    replace a trailing ``</div>`` (an unbalanced one closed the page's article early and
    squeezed its text column to nothing)."""
    i = rendered.rfind("</div>")
    if i < 0 or rendered.rstrip().endswith("</details>"):  # a collapsed long table: the note after it, in view
        return rendered + extra
    return rendered[:i] + extra + rendered[i:]


def _full_in_front(table: dict, full: dict, *, label: str, anchor: str, full_record: dict | None,
                   stale: list[str] | None, formats: dict, paper_columns, hide: tuple,
                   differ: list[str] | None) -> str:
    """A table whose numbers differ between this build and the published `full` run: the full
    run's, numbered and in front (its differing cells marked), then this build's in a collapsed
    box. One tier at a time keeps the table as wide as one run's, not two interleaved.
    ``differ=None``: the two tables have other rows or columns (the full run swept more
    settings, say), so the full run's is in front whole."""
    # the published run's own caption and source: they name what that run used (its OOD set,
    # its sizes), which this build's may not
    front = dict(full, caption=full.get("caption") or table.get("caption", ""),
                 source=full.get("source") or table.get("source", ""),
                 _shown_whole=table.get("_shown_whole", False))
    shown = _as_published(render_table(front, label=label, anchor=anchor, formats=formats,
                                       paper_columns=paper_columns, hide=hide), stale)
    how = (f'{len(differ)} of its columns differ from this build\'s ({", ".join(html.escape(c) for c in differ)}). '
           if differ is not None else "this build's table has other rows or columns. ")
    name = tier_of(full_record) if full_record is not None else published.TIER
    tier = (f'<p class="symlib-tier-note">Numbers of the published {name} run (the most converged); ' + how
            + (tier_note(stale or [], name) if full_record is not None else "") + "</p>")
    this = render_table(table, label=f"{label} (this build)", anchor=f"{anchor}-this-build", formats=formats,
                        paper_columns=paper_columns, hide=hide)
    return (_inside_last_box(shown, tier)
            + f'<details class="symlib-other-tier"><summary>This build\'s numbers for {html.escape(label)}</summary>'
            + this + "</details>")


def section_ids(chapter: str, root: Path | None = None) -> dict[str, str]:
    """The chapter notebook's ``##`` headings -> their HTML ids (as Sphinx makes them)."""

    source = (root or project_root_or_cwd()) / "notebooks" / f"{chapter}.md"
    if not source.is_file():
        return {}
    heads = re.findall(r"^##+ (.+)$", source.read_text(), flags=re.MULTILINE)
    return {h.strip(): make_id(h.strip()) for h in heads}


def render_ledger(meta: dict, *, label: str, anchor: str, full_record: dict | None = None,
                  stale: list[str] | None = None, sections: dict[str, str] | None = None,
                  link_prefix: str = "", published_runs: dict | None = None) -> str:
    """A chapter's claims as captioned cards (:func:`symlib.book.cards.ledger_cards`): per claim
    the paper's value, ours per tier, and both verdicts of this build and the published runs
    (``published_runs``: tier -> ``(record, stale)``, most converged first, as
    :func:`published_tiers` gives; or one ``full_record``)."""
    if published_runs is None:
        published_runs = {tier_of(full_record): (full_record, stale or [])} if full_record else {}
    note = "<br>".join(provenance_line(r, st) for r, st in published_runs.values())
    return ledger_cards(meta, label=label, anchor=anchor, published_runs=published_runs, sections=sections,
                        link_prefix=link_prefix, note=note)


def _figures_html(chapter: str, record: dict, stale: list[str]) -> str:
    tier = tier_of(record)
    folder = published.published_dir(tier) / chapter
    imgs = []
    for i, name in enumerate(record.get("figures") or [], 1):
        path = folder / name
        if path.is_file():
            data = base64.b64encode(path.read_bytes()).decode()
            imgs.append(f'<figure class="symlib-full-figure"><img src="data:image/png;base64,{data}" '
                        f'alt="figure {i} of the published {tier} run"><figcaption>'
                        f'<span class="caption-number">{tier.capitalize()} run, figure {i} </span>(in the order of this page)'
                        '</figcaption></figure>')
    if not imgs:
        return ""
    return (f'<details class="symlib-full-figures"><summary>Figures of the published {tier} run</summary>'
            f'<p class="symlib-tier-note">{provenance_line(record, stale)}</p>{"".join(imgs)}</details>')


def front_figure(run, name: str, fig) -> None:
    """Show the most converged run's figure ``name`` in front: where a published run of a tier
    this build is not (``full`` or ``paper`` in a ``quick`` build) drew the figure glued under
    ``name``, glue its PNG under ``name`` again (the pipeline keeps the last value of a key), and
    keep ``fig``, this build's, for the end of the page (:func:`show_ledger`). Glues
    ``f"{name}_tier"``, a line for the figure's caption saying which run it shows
    (``{glue:md}`` in the caption). Call it right after :meth:`~symlib.book.chapter.Chapter.show`.
    """
    record, stale = published_tier(run.chapter, run.config)
    file = ((record or {}).get("figure_names") or {}).get(name)
    tier = tier_of(record)
    path = published.published_dir(tier) / run.chapter / file if file else None
    if run.profile in published.TIERS or path is None or not path.is_file():
        myst_nb.glue(f"{name}_tier", Markdown(f"(This build's run, profile `{run.profile}`.)"), display=False)
        return
    myst_nb.glue(name, Image(data=path.read_bytes(), format="png"), display=False)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    _build_figures(run).append((name, buffer.getvalue()))
    older = ", from an older version of the code" if stale else ""
    myst_nb.glue(f"{name}_tier", Markdown(f"(The published {tier} run{older}; this build's figure, profile `{run.profile}`, "
                                  "is at the end of the page.)"), display=False)


def glue_quotes(run, chapter, results, **extra):
    """Glue every number the prose quotes (``chapter.quotes``, ``{glue:text}`name```, and the
    ``extra`` values a notebook computes itself), from the most converged run, as
    :func:`front_figure` does for figures.

    This build's values go into its results file (``notes["quotes"]``), so that a published record
    carries them; in a build of another profile than a published run's (``quick`` beside a
    published ``full``) the text quotes the published run's values, where its record has every one.

    Returns:
        ``(values, line)``: the values glued (for sentences a notebook words by them) and the
        page's line saying whose numbers the text quotes.
    """
    values = {**{q.name: q.value(results) for q in chapter.quotes}, **extra}
    values = {k: v if isinstance(v, str) else float(v) for k, v in values.items()}
    run.results.notes["quotes"] = values
    theirs, record, stale = _published_notes(run, "quotes", values)
    if theirs is not None:
        values = theirs
        older = ", from an older version of the code" if stale else ""
        line = (f"*The numbers the text quotes are the published {tier_of(record)} run's{older}; this build's "
                f"(profile `{run.profile}`) are in its results file.*")
    else:
        line = f"*The numbers the text quotes are this build's (profile `{run.profile}`).*"
    for name, value in values.items():
        myst_nb.glue(name, value, display=False)
    return values, Markdown(line)


def published_facts(run, name: str, facts: dict) -> dict:
    """The facts a notebook words outcome-dependent sentences by (``facts``: this build's, a dict
    with text keys), from the most converged run: this build's go into its results file
    (``notes["facts"][name]``), and in a build of another profile the published run's are
    returned, where its record has every key (see :func:`glue_quotes`, whose line names the run)."""
    run.results.notes.setdefault("facts", {})[name] = facts
    theirs, _, _ = _published_notes(run, "facts", {name: facts})
    return facts if theirs is None else theirs[name]


def _published_notes(run, kind: str, values: dict):
    """``(values, record, stale)`` from the published run in front: its ``notes[kind]`` restricted
    to ``values``' keys (a nested dict must have every key too; nulls, written for NaN, back as NaN),
    or ``None`` for those when this build is of a published tier or the record lacks any of them."""
    record, stale = published_tier(run.chapter, run.config)
    theirs = ((record or {}).get("notes") or {}).get(kind) or {}
    if run.profile in published.TIERS or not values or not _covers(theirs, values):
        return None, record, stale
    return {k: _nan_for_null(theirs[k]) for k in values}, record, stale


def _covers(theirs, ours) -> bool:
    if isinstance(ours, dict):
        return isinstance(theirs, dict) and all(str(k) in theirs and _covers(theirs[str(k)], v) for k, v in ours.items())
    return True


def _nan_for_null(value):
    if value is None:
        return float("nan")
    if isinstance(value, dict):
        return {k: _nan_for_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_for_null(v) for v in value]
    return value


def _build_figures(run) -> list:
    """This build's figures that :func:`front_figure` replaced in front, in order (on the run)."""
    if not hasattr(run, "_symlib_build_figures"):
        object.__setattr__(run, "_symlib_build_figures", [])
    return run._symlib_build_figures


def _build_figures_html(run) -> str:
    imgs = [f'<figure class="symlib-full-figure"><img src="data:image/png;base64,{base64.b64encode(png).decode()}" '
            f'alt="this build\'s {html.escape(name)}"><figcaption><span class="caption-number">This build, figure {i} '
            f"</span>(profile <code>{html.escape(run.profile)}</code>; the page shows the published run's)</figcaption></figure>"
            for i, (name, png) in enumerate(_build_figures(run), 1)]
    if not imgs:
        return ""
    return (f'<details class="symlib-full-figures"><summary>This build\'s figures (profile {html.escape(run.profile)})'
            f'</summary>{"".join(imgs)}</details>')


def show_ledger(run, *, sections: dict[str, str] | None = None):
    """Write the chapter's results file, then show its claims ledger (and the full run's figures).

    ``sections`` maps a claim id to the start of the ``##`` heading of the section that
    measures it (``{"not-min-mass": "Figure 2"}``); the ledger and the book's ledger page link
    there. Returns the written results record (``dict``).

    Raises:
        ValueError: a heading in ``sections`` is not in the chapter's notebook.
    """
    ids = section_ids(run.chapter)
    anchors = {}
    for cid, start in (sections or {}).items():
        match = [hid for head, hid in ids.items() if head.startswith(start)]
        if not match:
            raise ValueError(f"{run.chapter}: no section heading starts with {start!r} (claim {cid!r})")
        anchors[cid] = match[0]
    run.results.notes["claim_sections"] = anchors
    meta = json.loads(run.finish().read_text())
    shown = _shown(run)
    shown.append("claims ledger")
    label = f"Table {chapter_label(run.chapter)}.{len(shown)}"
    anchor = table_anchor(run.chapter, len(shown))
    runs = published_tiers(run.chapter, run.config)
    record, stale = next(iter(runs.values()), (None, []))
    myst_nb.glue("tab_ledger", Markdown(f'<a class="reference internal" href="#{anchor}">{label}</a>'), display=False)
    display(HTML(render_ledger(meta, label=label, anchor=anchor, sections=anchors, published_runs=runs)))
    older = older_code_note(meta)
    if older:
        display(Markdown(older))
    if record is not None:
        # the figures the page does not show in front: this build's where the published run's
        # are in front (front_figure), else the published run's
        figures = _build_figures_html(run) or _figures_html(run.chapter, record, stale)
        if figures:
            display(HTML(figures))
    else:
        display(Markdown(f"*No `{published.TIER}` run of this chapter is published yet: the numbers above are "
                         f"this build's (profile `{run.profile}`) and the paper's.*"))
    return meta


def older_code_note(meta: dict) -> str:
    """Markdown saying which of this run's numbers were computed by other code or data than this
    checkout's (cache entries kept with ``SYMLIB_KEEP_STALE=1`` or re-rendered with
    ``--cached-only``), from the results file's ``provenance.computed_with``; "" when none."""
    groups = (meta.get("provenance") or {}).get("computed_with") or []
    code, data = compute_code_hash(meta["chapter"]), data_hash()
    other_code = {id(g) for g, _ in stale_code_groups(meta["chapter"], groups)}
    older = [g for g in groups if id(g) in other_code or g.get("data_hash") != data]
    if not older:
        return ""

    def shown(value):
        return f"`{value}`" if value else "unrecorded (an entry older than the fingerprints)"

    parts = [f"{', '.join(f'`{s}`' for s in g.get('stages', []))} with code {shown(g.get('code_hash'))} "
             f"and data {shown(g.get('data_hash'))}" for g in older]
    return (f"**Computed by other code or data than this page's.** Cached stages of this run were kept "
            f"from an earlier computation: {'; '.join(parts)} (this checkout: code `{code}`, data "
            f"`{data}`). Rerun without `SYMLIB_KEEP_STALE` or `--cached-only` to recompute them.")


def full_run_unmet(chapter: str, tiers=None) -> str:
    """Markdown: which preconditions each published run of ``chapter`` (of ``tiers``, default all,
    most converged first: ``paper`` before ``full``) did not meet, with the values it measured,
    the verdict column each gates and the claims it withholds there ("" when no run is
    published). Each run is named, so that a page whose text and verdicts come from the run in
    front says what stopped that run and the other alike."""
    parts = [_unmet(record) for record in published.records(chapter, tiers).values()]
    return "\n\n".join(parts)


def _unmet(record: dict) -> str:
    """:func:`full_run_unmet` of one published record."""
    tier = tier_of(record)
    where = {"both": "in both columns", "reproduced": "in the reproduced column", "robust": "in the robust column"}
    unmet: dict[tuple[str, str, str], list[str]] = {}
    for claim in record.get("claims", []):
        for pre in claim.get("preconditions") or []:
            if not pre["met"]:
                column = pre.get("column", "both")
                unmet.setdefault((pre["criterion"], str(pre["measured"]), column), []).append(claim["id"])
    if not unmet:
        return f"*Every precondition of the published `{tier}` run was met.*"
    numbers = claim_numbers(record.get("claims", []))

    kinds = {c["id"]: c.get("kind", "claim") for c in record.get("claims", [])}

    def named(ids: list[str]) -> str:  # by label, as the ledger's cards show them, linked to the card
        parts = []
        for kind, noun in (("claim", "claim"), ("code check", "code check")):
            links = [f"[{numbers[c]}](#claim-{c})" for c in dict.fromkeys(ids) if kinds[c] == kind]
            if links:
                parts.append(f"{noun}{'s' if len(links) > 1 else ''} {', '.join(links)}")
        return "; ".join(parts)

    lines = [f"- {reader_words(criterion)}: measured **{reader_words(measured)}**, so not judged {where[column]}: "
             f"{named(ids)}"
             for (criterion, measured, column), ids in unmet.items()]
    device = (record.get("computed") or {}).get("device") or record.get("device")
    return (f"In the published `{tier}` run ({device}), these preconditions "
            "were not met (claims numbered as in the ledger's cards):\n\n" + "\n".join(lines))


# --------------------------------------------------------------------------- robustness


SWEEP_WORDED = ("choice", "setting", "failed preconditions", "ours")
"""The columns of a sweep whose values may name code (profile fields, preconditions): shown in words."""


def _sweep_in_words(frame):
    """A sweep's frame (or stored table) as a DataFrame with :data:`SWEEP_WORDED` in words."""
    import pandas as pd

    if isinstance(frame, dict):
        frame = pd.DataFrame(frame["rows"], columns=frame["columns"])
    frame = frame.copy()
    for column in SWEEP_WORDED:
        if column in frame:
            frame[column] = [reader_words(v) if isinstance(v, str) else v for v in frame[column]]
    return frame


def sweeps_frame(frames: dict, labels: dict[str, str]):
    """Every claim's sensitivity sweep in one frame: a leading ``claim`` column with the claim's
    label (its number in the list above the table; on each claim's first row only, so a claim's
    settings read as one group), then the sweeps' columns in first-seen order (a column one sweep
    lacks is left empty). ``frames``: claim id -> a sweep's DataFrame or a stored table
    (``{"columns", "rows"}``, as a results file keeps it); None when there are none. A claim's
    words go in the list, not in the table: a column of sentences beside the sweep's own would
    make the table far wider than the text."""
    import pandas as pd

    parts = []
    for claim, frame in frames.items():
        if isinstance(frame, dict):
            frame = pd.DataFrame(frame["rows"], columns=frame["columns"])
        part = frame.reset_index(drop=True).copy()
        part.insert(0, "claim", [labels.get(claim, claim)] + [""] * (len(part) - 1))
        parts.append(part)
    if not parts:
        return None
    return pd.concat(parts, ignore_index=True).astype(object).where(lambda f: f.notna(), "")


def show_sweeps(chapter, run, results, *, summary=None, caption: str | None = None, columns=None):
    """A chapter's sensitivity sweeps as one numbered robustness table (the published run's in
    front where there is one, this build's one click away), after a numbered list with one line
    per claim, in words, saying whether its verdict depends on the settings tried; the table's
    first column gives the claim's number.

    Args:
        chapter: the chapter's :class:`~symlib.book.chapter.Chapter`.
        run, results: the notebook's run and its :meth:`~symlib.book.chapter.Chapter.compute`.
        summary: a sweep frame -> its one-line summary (default
            :func:`symlib.book.results.depends_on`).
        caption: the table's caption.
        columns: the sweep columns to show (default all, in first-seen order).
    Returns:
        The summary and the table as one HTML, or a line saying that no run swept anything.
    """

    summary = summary or depends_on
    # the settings in words, not as the profile fields they set (the summary reads the same rows)
    frames = {s.claim: _sweep_in_words(f) for s in chapter.sweeps if (f := chapter.sweep_frame(s, results)) is not None}
    record, _stale = published_tier(run.chapter, run.config)
    full = {claim: _sweep_in_words(f) for claim, f in ((record or {}).get("robustness") or {}).items()}
    if not frames and not full:
        return Markdown("*This profile runs no sensitivity sweep, and no published run has one.*")
    texts = {c["id"]: c["text"] for c in (record or {}).get("claims", [])}
    texts.update({c.id: c.text for c in chapter.judged_claims(results)})
    front, tier = (full, f"In the published {tier_of(record)} run") if full else (frames, "In this build")
    labels = {claim: str(i) for i, claim in enumerate(dict.fromkeys([*front, *frames, *full]), 1)}
    items = []
    for claim, label in labels.items():
        frame = front.get(claim)
        said = summary(frame) if frame is not None else f"swept in this build only ({summary(frames[claim])})"
        items.append(f'<li value="{label}"><em>{html.escape(texts.get(claim, claim))}</em>: '
                     f"{html.escape(said)}.</li>")
    lines = (f'<p class="symlib-sweep-summary">{tier}, each claim\'s verdict under the settings tried (numbered as '
             f'in the table\'s first column):</p><ol class="symlib-sweep-summary">{"".join(items)}</ol>')

    def pick(frame):
        return frame if frame is None or columns is None else frame[["claim", *[c for c in columns if c in frame]]]

    this, published_frame = pick(sweeps_frame(frames, labels)), pick(sweeps_frame(full, labels))
    table = show_table(run, "robustness", this, store=False, index=False, full_frame=published_frame,
                       caption=caption or "Each claim's verdicts under each setting of its sensitivity sweep")
    return HTML(lines + table.data)

