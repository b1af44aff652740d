"""The generated blocks of the README and the "Run times" page, written from the published records.

README.md says what the book concludes: how many claims hold, do not hold or are not judged, in
each verdict column, per chapter and per tier, then which claims, each "does not hold" with the
causes its diagnosis names (:func:`which_claims`). None of it is typed: it sits between
marker comments and is written from ``published/<tier>/<chapter>.json`` by this module, which a
test runs in check mode, so a republished run that leaves the README behind fails the tests::

    <!-- conclusions:start ... -->
    ...written here...
    <!-- conclusions:end -->

The same goes for the table of the published runs' compute times on ``book/run-times.md``
(``published-times``). A record computed by an older version of its chapter's code or profile
(:func:`symlib.book.published.staleness`) is marked *stale*, with the kind of change (not its
hashes, which would move with every edit)::

    python -m symlib.book.readme            # rewrite the blocks
    python -m symlib.book.readme --check    # exit 1, naming them, when a block is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from symlib.book import ledger, published
from symlib.book.paths import project_root_or_cwd
from symlib.chapters import CHAPTERS, get_profile

__all__ = ["BLOCKS", "conclusions", "main", "outdated", "replace_block", "run_times", "stale_phrase", "which_claims",
           "write"]

SYMBOLS = {"holds": "✓", "does not hold": "✗", "not judged": "○"}
"""How the tables mark each outcome."""
TIER_WHAT = {
    "full": "sized to judge the claims on the data that ships here, on 2 CPU cores",
    "paper": "the papers' models, budgets and protocols",
}


def _chapters() -> list[str]:
    """The book's chapters in order (:data:`symlib.chapters.CHAPTERS`)."""
    return list(CHAPTERS)


def _profile(chapter: str, tier: str):
    """The chapter's profile of ``tier`` in this version, or None when it has none."""
    try:
        return get_profile(chapter, tier)
    except ValueError:
        return None


def stale_phrase(reasons: list[str]) -> str:
    """What kind of change makes a record stale, in a few words ("" when it is current):
    the reasons of :func:`symlib.book.published.staleness` without their hashes."""
    if any(r.startswith("damaged") for r in reasons):
        return "the record is damaged"
    if any("has no" in r and "profile" in r for r in reasons):
        return "the chapter has no such profile now"
    kinds = []
    if any("profile changed" in r for r in reasons):
        kinds.append("its profile changed since")
    if any("computed with other code" in r or "computed with other data" in r for r in reasons):
        what = "code and data" if sum("computed with other" in r for r in reasons) > 1 else (
            "data" if any("computed with other data" in r for r in reasons) else "code")
        kinds.append(f"its numbers were computed by older {what}")
    elif any("code changed" in r for r in reasons):
        kinds.append("its chapter's code changed since")
    if reasons and not kinds:
        kinds.append("changed since")
    return "; ".join(kinds)


def _records(tier: str, root: Path, *, stale: bool = True) -> dict[str, tuple[dict, list[str]]]:
    """Every published record of ``tier`` (chapter -> (record, why it is stale; [] unless
    ``stale``)), in book order."""
    out = {}
    for chapter in _chapters():
        record = published.load(chapter, root / "published" / tier, tier=tier)
        if record is not None:
            why = published.staleness(record, _profile(chapter, tier), root / "notebooks" / f"{chapter}.md") if stale else []
            out[chapter] = (record, why)
    return out


def _date(record: Mapping) -> str:
    return str(record.get("published") or "")[:10] or "undated"


def conclusions(root: Path | None = None) -> str:
    """The README's block: one sentence of totals per tier, then a table per chapter and tier of
    both columns' counts, with each run's date and whether it is stale."""
    root = Path(root) if root is not None else project_root_or_cwd()
    n_chapters = len(_chapters())
    lines, rows = [], []
    for tier in published.TIERS:
        records = _records(tier, root)
        if not records:
            lines.append(f"- **`{tier}` tier** ({TIER_WHAT.get(tier, tier)}): nothing published yet.")
            continue
        plain = {chapter: record for chapter, (record, _) in records.items()}
        what = f"the published `{tier}` runs"
        so_far = "" if len(records) == n_chapters else f"; {len(records)} of {n_chapters} chapters so far"
        stale = sum(bool(why) for _, why in records.values())
        marked = ("" if not stale else " The run is stale (below)." if len(records) == 1
                  else f" All {stale} runs are stale (below)." if stale == len(records)
                  else f" {stale} of the {len(records)} runs {'is' if stale == 1 else 'are'} stale (below).")
        totals = ledger.totals_sentence(plain, what=what)
        lines.append(f"- **`{tier}` tier** ({TIER_WHAT.get(tier, tier)}{so_far}): "
                     f"{totals[0].lower()}{totals[1:]}{marked}")
        frame = ledger.counts(plain).set_index("chapter")
        for chapter, (record, why) in records.items():
            row = frame.loc[chapter]
            cells = [int(row[f"{col}: {o}"]) for col in ledger.COLUMNS for o in ledger.OUTCOMES]
            run = (f"{_date(record)} ({_device(record)}, {_took(_minutes(record))})"
                   + (f", **stale**: {stale_phrase(why)}" if why else ""))
            rows.append((chapter, tier, int(row["claims"]), cells, run))
    rows.sort(key=lambda r: (_chapters().index(r[0]), published.TIERS.index(r[1])))
    head = ["chapter", "tier", "claims", *(f"{col} {SYMBOLS[o]}" if o == "holds" else SYMBOLS[o]
                                            for col in ledger.COLUMNS for o in ledger.OUTCOMES),
            "published (computed on, compute time)"]
    table = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for chapter, tier, n, cells, run in rows:
        table.append(f"| {ledger.chapter_title(chapter)} | `{tier}` | {n} | "
                     + " | ".join(str(c) for c in cells) + f" | {run} |")
    legend = ("✓ holds, ✗ does not hold, ○ not judged (the run lacks what the column needs). A *stale* "
              "run was computed before its chapter's code or profile last changed: its verdicts may move "
              "when it is run again.")
    return "\n".join([*lines, "", *table, "", legend, "", *which_claims(root)])


def _causes(claim: Mapping) -> str:
    """The distinct causes a claim's diagnosis names, in its order ("" when it names none)."""
    causes = dict.fromkeys(str(d["cause"]) for d in claim.get("diagnosis") or [])
    return ", ".join(causes)


def which_claims(root: Path) -> list[str]:
    """Per chapter, its claims (by the ids the records and the reproducibility page use) under the
    reproduced column of its front run (the `paper` run where one is published, else `full`), each
    "does not hold" with the causes its diagnosis names."""
    front: dict[str, tuple[str, dict, list[str]]] = {}
    for tier in reversed(published.TIERS):  # the last tier (`paper`) wins
        for chapter, (record, why) in _records(tier, root).items():
            front.setdefault(chapter, (tier, record, why))
    lines = []
    for chapter in _chapters():
        if chapter not in front or not ledger._claims(front[chapter][1]):
            continue
        tier, record, why = front[chapter]
        parts = []
        for outcome in ledger.OUTCOMES:
            claims = [c for c in ledger._claims(record)
                      if ledger.column_outcome(c, ledger.COLUMNS[0]) == outcome]
            if claims:
                parts.append(f"{SYMBOLS[outcome]} " + ", ".join(
                    f"`{c['id']}`" + (f" ({causes})" if outcome == "does not hold" and (causes := _causes(c)) else "")
                    for c in claims))
        lines.append(f"- {ledger.chapter_title(chapter)} (`{tier}`{', stale' if why else ''}): " + "; ".join(parts))
    if not lines:
        return []
    head = ("Which claims, reproduced column, from each chapter's `paper` run where one is published, "
            "else its `full` run; after a claim that does not hold, the causes its diagnosis names. The "
            "book's reproducibility page gives each claim's text, the paper's value, ours and both verdicts:")
    return [head, "", *lines]


def _minutes(record: Mapping) -> float | None:
    computed = record.get("computed") or {}
    run = computed.get("pieces") or {}
    if run.get("minutes") is not None:
        return float(run["minutes"])
    m = re.match(r"([\d.]+) s", str(computed.get("compute_time") or ""))
    return float(m[1]) / 60 if m else None


def _device(record: Mapping) -> str:
    """Where a published run computed: ``CPU`` or ``GPU`` (or the device as recorded)."""
    computed = record.get("computed") or {}
    device = str(computed.get("device") or record.get("device") or "cpu").split(" ")[0]
    return {"cpu": "CPU", "cuda": "GPU"}.get(device.split(":")[0], device)


def _took(minutes: float | None) -> str:
    if minutes is None:
        return "not recorded"
    if minutes >= 90:
        return f"{minutes / 60:.1f} h"
    return f"{minutes:.0f} min" if minutes >= 2 else f"{minutes * 60:.0f} s"


def run_times(root: Path | None = None) -> str:
    """The "Run times" page's block: per published run, where and how long its numbers took
    (whether it is stale is the README's and the chapters' to say)."""
    root = Path(root) if root is not None else project_root_or_cwd()
    rows = ["| chapter | tier | compute time | pieces | computed on | dates |", "| --- | --- | --- | --- | --- | --- |"]
    totals = []
    for tier in published.TIERS:
        records = _records(tier, root, stale=False)
        if records:
            minutes = [m for record, _ in records.values() if (m := _minutes(record)) is not None]
            totals.append(f"`{tier}` {_took(sum(minutes))} for {len(minutes)} chapter{'s' * (len(minutes) != 1)}")
        for chapter, (record, _) in records.items():
            computed = record.get("computed") or {}
            run = computed.get("pieces") or {}
            device = _device(record)
            hosts = ", ".join(run.get("hosts") or []) or "machine not recorded"
            first, last = str(run.get("first") or "")[:10], str(run.get("last") or "")[:10]
            dates = first if first == last else f"{first} to {last}"
            rows.append(f"| {ledger.chapter_title(chapter)} | `{tier}` | {_took(_minutes(record))} | "
                        f"{run.get('pieces', 1)} | {device} ({hosts}) | {dates or _date(record)} |")
    table = "\n".join(["```{table} Where and how long each published run computed its numbers",
                         ":name: table-published-runs", "", *rows, "```"])
    return table + ("\n\nAdded up: " + "; ".join(totals) + "." if totals else "")


BLOCKS: dict[str, tuple[str, Callable[[Path], str]]] = {
    "README.md": ("conclusions", conclusions),
    "book/run-times.md": ("published-times", run_times),
}
"""File (relative to the checkout) -> (the block's name, the function that writes it)."""


def _markers(name: str) -> tuple[str, str]:
    return (f"<!-- {name}:start (written by `python -m symlib.book.readme` from published/: do not edit) -->",
            f"<!-- {name}:end -->")


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the block ``name`` (between its marker comments) holding ``body``.

    Raises:
        ValueError: the text lacks the block's markers (or holds them more than once).
    """
    pattern = re.compile(rf"^<!-- {re.escape(name)}:start\b.*?-->\n.*?^<!-- {re.escape(name)}:end -->$",
                         re.MULTILINE | re.DOTALL)
    found = pattern.findall(text)
    if len(found) != 1:
        raise ValueError(f"expected one block `{name}` between `<!-- {name}:start ... -->` and "
                         f"`<!-- {name}:end -->`; found {len(found)}")
    start, end = _markers(name)
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", text)


def _rendered(root: Path) -> dict[Path, tuple[str, str]]:
    """Each file of :data:`BLOCKS`: (its text now, its text with the blocks written)."""
    out = {}
    for rel, (name, make) in BLOCKS.items():
        path = root / rel
        text = path.read_text(encoding="utf-8")
        out[path] = (text, replace_block(text, name, make(root)))
    return out


def outdated(root: Path | None = None) -> list[Path]:
    """The files whose generated block differs from what the published records give."""
    root = Path(root) if root is not None else project_root_or_cwd()
    return [path for path, (now, want) in _rendered(root).items() if now != want]


def write(root: Path | None = None) -> list[Path]:
    """Rewrite every generated block; returns the files that changed."""
    root = Path(root) if root is not None else project_root_or_cwd()
    changed = []
    for path, (now, want) in _rendered(root).items():
        if now != want:
            path.write_text(want, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m symlib.book.readme", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a block is out of date")
    args = parser.parse_args(argv)
    root = project_root_or_cwd()
    if args.check:
        stale = outdated(root)
        for path in stale:
            print(f"{path.relative_to(root)}: its generated block differs from the published records; "
                  "run `python -m symlib.book.readme`", file=sys.stderr)
        return 1 if stale else 0
    for path in write(root):
        print(f"[symlib] rewrote {path.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
