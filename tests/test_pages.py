"""Scan the built book's pages for what a reader must never see.

A page fails when its visible text (scripts, styles and the page head left out) names the
project's process instead of the science: an issue by number ("issue 27"), "the issue's example",
the papers' notes file ("NOTES.md", "NOTES:", "NOTES §"), the carry folder (".paper-carry"), the
machines a run was made on ("lent machine", "build machine"), a "session", or a criterion "added
after the first quick run" (a reader takes that for a criterion set after seeing results). It
fails too when a list of numbered claims (a chapter's claim cards, the verdict box that opens it,
a chapter's cards on the reproducibility page) is not numbered 1, 2, 3, ... without a gap.

The scanner works on any folder of HTML: ``python tests/test_pages.py [FOLDER]`` (default
``_build/html``) prints each problem and exits 1 if there is one. The checks of the built book
run after ``make book`` with the browser checks (``make browser-test``; this one needs no
browser) and are skipped when ``_build/html`` is absent; the checks that the scanner catches each
leak run on a made-up folder, in the test suite.
"""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static"}  # not pages

LEAKS = {
    "an issue by number": re.compile(r"\bissues? #?\d+", re.IGNORECASE),
    "the issue's example": re.compile(r"\bissue['’]s example", re.IGNORECASE),
    "the notes file (NOTES.md)": re.compile(r"\bNOTES\.md"),
    "the notes file (NOTES:)": re.compile(r"\bNOTES:"),
    "the notes file (NOTES §)": re.compile(r"\bNOTES §"),
    "the carry folder (.paper-carry)": re.compile(r"\.paper-carry"),
    "a lent machine": re.compile(r"\blent (?:\w+ )?machines?\b", re.IGNORECASE),
    "the build machine": re.compile(r"\bbuild machines?\b", re.IGNORECASE),
    "a session": re.compile(r"\bsessions?\b", re.IGNORECASE),
    "a criterion added after a run": re.compile(r"added after the first quick run", re.IGNORECASE),
}
"""What a reader must never see -> the pattern that finds it in a page's visible text."""

HIDDEN = {"script", "style", "head", "template", "noscript"}
BLOCK = {"p", "div", "li", "ul", "ol", "td", "th", "tr", "table", "caption", "dt", "dd", "dl", "pre",
         "section", "article", "aside", "nav", "header", "footer", "figure", "figcaption", "br", "hr",
         "h1", "h2", "h3", "h4", "h5", "h6", "details", "summary", "blockquote"}


NUMBERED = {"symlib-ledger-cards": "claim cards", "symlib-glance": "the verdict box"}
"""Containers whose claims are numbered (their ``span.symlib-claim-no``) -> what a reader calls them.
A ``p.symlib-chapter-head`` inside one starts another chapter's numbers (the reproducibility page)."""


class _Page(HTMLParser):
    """A page's visible text, and the claim numbers of each numbered list of claims on it."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self.hidden = 0
        self.numbered: list[tuple[str, list[str]]] = []   # (what, its "Claim N." labels) per list
        self._divs: list[str | None] = []                  # per open div: the numbered list it opens
        self._claim_no: list[str] | None = None
        self._head: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag in HIDDEN:
            self.hidden += 1
        elif tag in BLOCK:
            self.chunks.append(" ")
        if tag == "div":
            opens = next((what for cls, what in NUMBERED.items() if cls in classes), None)
            self._divs.append(opens)
            if opens:
                self.numbered.append((opens, []))
        if tag == "p" and "symlib-chapter-head" in classes and self._in_numbered():
            self._head = []
        if tag == "span" and "symlib-claim-no" in classes and self._in_numbered():
            self._claim_no = []

    def handle_endtag(self, tag):
        if tag in HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in BLOCK:
            self.chunks.append(" ")
        if tag == "div" and self._divs:
            self._divs.pop()
        if tag == "span" and self._claim_no is not None:
            self.numbered[-1][1].append("".join(self._claim_no).strip())
            self._claim_no = None
        if tag == "p" and self._head is not None:
            kind = self.numbered[-1][0].split(" (")[0]
            self.numbered.append((f"{kind} ({' '.join(''.join(self._head).split())})", []))
            self._head = None

    def handle_data(self, data):
        if self.hidden:
            return
        self.chunks.append(data)
        for part in (self._claim_no, self._head):
            if part is not None:
                part.append(data)

    def _in_numbered(self) -> bool:
        return any(self._divs)

    def text(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.chunks).replace("\xa0", " ")).strip()


def pages(folder: str | Path) -> list[Path]:
    """The HTML pages of a built book (its static files and sources left out)."""
    folder = Path(folder)
    return [p for p in sorted(folder.rglob("*.html")) if not SKIP_DIRS & set(p.relative_to(folder).parts)]


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(errors="replace"))
    page.close()
    return page


def leaks(folder: str | Path) -> list[str]:
    """``"page: what (…the text around it…)"`` for every piece of process wording a reader would see."""
    folder = Path(folder)
    found = []
    for path in pages(folder):
        text = _parse(path).text()
        for what, pattern in LEAKS.items():
            for m in pattern.finditer(text):
                around = text[max(0, m.start() - 50): m.end() + 30]
                found.append(f"{path.relative_to(folder)}: {what} (…{around}…)")
    return found


def claim_number_gaps(folder: str | Path) -> list[str]:
    """``"page: claim cards numbered 1, 2, 4"`` for every numbered list of claims (a chapter's
    claim cards, its verdict box, a chapter's cards on the reproducibility page) not numbered
    1, 2, ..., n."""
    folder = Path(folder)
    found = []
    for path in pages(folder):
        for what, labels in _parse(path).numbered:
            numbers = [int(m[0]) if (m := re.search(r"\d+", label)) else None for label in labels]
            if numbers != list(range(1, len(numbers) + 1)):
                shown = ", ".join("?" if n is None else str(n) for n in numbers)
                found.append(f"{path.relative_to(folder)}: {what} numbered {shown}")
    return found


def scan(folder: str | Path) -> list[str]:
    """Every problem :func:`leaks` and :func:`claim_number_gaps` find in a folder of HTML."""
    return leaks(folder) + claim_number_gaps(folder)


# --------------------------------------------------------------------------- the built book

built = pytest.mark.skipif(not (HTML / "index.html").exists(), reason="the book is not built (make book)")


EXCUSED: dict[str, tuple[str, dict[tuple[str, str], int]]] = {}
"""Published records written before their text was cleaned of the notes file, which the book
shows until the run is made again: record -> (its integrity digest now, the leaks it puts on
each page, by kind and exact count). The excuse holds only while the record is the one pinned
here: a republished record has another digest, and :func:`test_excused_records_are_the_ones_pinned`
fails until its entry is removed."""


def _sealed(rel: str) -> str | None:
    """The integrity digest a published record was sealed with."""
    path = ROOT / rel
    return json.loads(path.read_text()).get("integrity") if path.is_file() else None


def _excused_counts() -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for rel, (digest, leaks_of) in EXCUSED.items():
        if _sealed(rel) == digest:
            for key, n in leaks_of.items():
                counts[key] = counts.get(key, 0) + n
    return counts


def test_excused_records_are_the_ones_pinned():
    for rel, (digest, _) in EXCUSED.items():
        assert _sealed(rel) == digest, f"{rel} was republished: remove its entry from EXCUSED"


@pytest.mark.browser
@built
def test_no_page_shows_process_wording():
    found = leaks(HTML)
    by_kind: dict[tuple[str, str], list[str]] = {}
    for leak in found:
        page, rest = leak.split(": ", 1)
        by_kind.setdefault((page, rest.split(" (…", 1)[0]), []).append(leak)
    excused = _excused_counts()
    unexcused = [leak for key, items in by_kind.items() if len(items) != excused.get(key, 0) for leak in items]
    assert not unexcused, (f"{len(unexcused)} leaks of the project's process into the pages (an excused kind "
                           "counts only at its pinned number):\n" + "\n".join(unexcused))


@pytest.mark.browser
@built
def test_claim_cards_are_numbered_without_gaps():
    found = claim_number_gaps(HTML)
    assert not found, "\n".join(found)


# --------------------------------------------------------------------------- the scanner itself


def _card(number: int) -> str:
    return (f'<div class="symlib-claim-card" id="claim-c{number}"><p class="symlib-claim">'
            f'<span class="symlib-claim-no">Claim {number}.</span> A claim</p></div>')


def _ledger(*numbers: int) -> str:
    return ('<div class="symlib-ledger-cards" id="ledger"><p class="symlib-caption"><span class="caption-number">'
            f'Table 1.3 </span></p>{"".join(_card(n) for n in numbers)}</div>')


def _page(body: str) -> str:
    return (f"<html><head><title>issue 2: a session</title><script>var NOTES = 'NOTES.md'; // session</script>"
            f"<style>.session {{}}</style></head><body><article>{body}</article></body></html>")


SHOWN = {
    "an issue by number": "<p>The check behind a refactor (issue 27): build the book twice.</p>",
    "the issue's example": "<p>as in the issue's example, the networks</p>",
    "the notes file (NOTES.md)": "<li>10 seeds (papers/<code>NOTES.md</code>, 002)</li>",
    "the notes file (NOTES:)": "<td>its MMD column is not scaled (NOTES: [open])</td>",
    "the notes file (NOTES §)": "<p>the paper recipe of App. B / NOTES&nbsp;§001, restart rule</p>",
    "the carry folder (.paper-carry)": "<p>copy <code>.paper-carry/</code> to the GPU</p>",
    "a lent machine": "<p>a lent GPU machine's start not counted</p>",
    "the build machine": "<p>measured on the 2-core build machine</p>",
    "a session": "<p>a GPU run goes over many sessions</p>",
    "a criterion added after a run": "<li>a condition added after the first quick run</li>",
}


def test_the_scanner_names_every_kind_of_leak(tmp_path):
    assert set(SHOWN) == set(LEAKS)
    for i, body in enumerate(SHOWN.values()):
        (tmp_path / f"page{i}.html").write_text(_page(body))
    found = leaks(tmp_path)
    for i, what in enumerate(SHOWN):
        assert any(f.startswith(f"page{i}.html: {what} (") for f in found), (what, found)


def test_the_scanner_reads_only_what_a_reader_sees(tmp_path):
    """Scripts, styles, the page head and the build's static files are not read; words that
    merely contain a banned one are not flagged."""
    clean = _page("<p>Sessional rates, a reissue 2b of the table, the chapter's notes: none.</p>" + _ledger(1, 2, 3))
    (tmp_path / "index.html").write_text(clean)
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "theme.html").write_text(_page("<p>issue 2</p>"))
    (tmp_path / "_sources").mkdir()
    (tmp_path / "_sources" / "page.html").write_text(_page("<p>NOTES.md</p>"))
    assert scan(tmp_path) == []


def _glance(*numbers: int) -> str:
    lines = "".join(f'<li><span class="symlib-claim-no">{n}.</span> <a href="#claim-c{n}">A claim</a></li>'
                    for n in numbers)
    return f'<div class="symlib-glance"><p><strong>Does it reproduce?</strong></p><ul>{lines}</ul></div>'


def _chapters(**cards: tuple[int, ...]) -> str:
    """The reproducibility page: one ledger, each chapter's cards under its head."""
    body = "".join(f'<p class="symlib-chapter-head">{name}</p>{"".join(_card(n) for n in numbers)}'
                   for name, numbers in cards.items())
    return f'<div class="symlib-ledger-cards" id="table-2"><p class="symlib-caption">Table 2</p>{body}</div>'


def test_the_scanner_finds_claim_numbers_with_gaps(tmp_path):
    (tmp_path / "gap.html").write_text(_page(_ledger(1, 2, 4)))
    (tmp_path / "late.html").write_text(_page(_ledger(2, 3)))
    (tmp_path / "two.html").write_text(_page(_glance(1, 2, 3) + "<p>between</p>" + _ledger(1, 2, 3)))
    (tmp_path / "second.html").write_text(_page(_ledger(1) + _ledger(1, 3)))
    (tmp_path / "glance.html").write_text(_page(_glance(1, 2, 4) + _ledger(1, 2, 3, 4)))
    (tmp_path / "repro.html").write_text(_page(_chapters(one=(1, 2), three=(1, 2, 4, 5))))
    assert claim_number_gaps(tmp_path) == [
        "gap.html: claim cards numbered 1, 2, 4",
        "glance.html: the verdict box numbered 1, 2, 4",
        "late.html: claim cards numbered 2, 3",
        "repro.html: claim cards (three) numbered 1, 2, 4, 5",
        "second.html: claim cards numbered 1, 3",
    ]


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else HTML
    if not pages(folder):
        print(f"no HTML pages under {folder}", file=sys.stderr)
        return 2
    found = scan(folder)
    print("\n".join(found) or f"{len(pages(folder))} pages: no process wording, claim cards numbered without gaps")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
