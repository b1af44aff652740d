"""Check a rerun of a chapter against its published record, and say what moved::

    python -m symlib.book.rerun CHAPTER [CHAPTER ...] [--tier full] [--rtol 0] [-v]
    make compare CHAPTER=... [TIER=full] [RTOL=0]

The rerun is ``<results>/<chapter>.json`` (``$SYMLIB_RESULTS``, default ``results/``), made by
``make chapter CHAPTER=... PROFILE=<tier>``; the record is ``published/<tier>/<chapter>.json``.
What only a published record holds (its figures, their names, its integrity digest) is left
out; the rest is compared by :func:`symlib.book.compare.compare_records` (numbers exactly unless
``--rtol`` is given; wall times, provenance and what measures the machine aside). Printed per
chapter: the verdicts that moved (claim, column, published -> rerun), then every other number
or text that moved. Exit status 0 when nothing moved, 1 when something did, 2 when a file is
missing or the rerun is of another profile than the tier.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from symlib.book import ledger, published
from symlib.book.compare import compare_records
from symlib.book.results import results_dir

__all__ = ["PUBLISHED_ONLY", "main", "moved_verdicts", "report"]

PUBLISHED_ONLY = frozenset({"figures", "figure_names", published.INTEGRITY, "damaged"})
"""Fields a published record adds to its run's results file (besides those the comparison
already ignores: ``computed``, ``published``)."""


def moved_verdicts(before: dict, after: dict) -> list[str]:
    """``claim: column published -> rerun`` for every verdict that differs, and the claims only
    one of the two records holds (code checks left out, as the ledger counts them)."""
    def claims(record):
        return {c["id"]: c for c in record.get("claims", []) if c.get("kind", "claim") == "claim"}

    a, b = claims(before), claims(after)
    lines = []
    for cid in [*a, *(c for c in b if c not in a)]:
        if cid not in b or cid not in a:
            lines.append(f"{cid}: only in the {'published record' if cid in a else 'rerun'}")
            continue
        for column in ledger.COLUMNS:
            was, now = ledger.column_outcome(a[cid], column), ledger.column_outcome(b[cid], column)
            if was != now:
                lines.append(f"{cid}: {column} {was} -> {now}")
    return lines


def report(chapter: str, *, tier: str = published.TIER, rtol: float = 0.0, verbose: bool = False,
           results: Path | None = None, published_root: Path | None = None) -> tuple[int, list[str]]:
    """(exit status, lines to print) for one chapter: 0 nothing moved, 1 something did, 2 the
    comparison cannot be made (a file is missing, the rerun is of another profile)."""
    results = Path(results) if results is not None else results_dir()
    rerun_path = results / f"{chapter}.json"
    record = published.load(chapter, published_root, tier=tier)
    if record is None:
        where = (Path(published_root) if published_root is not None else published.published_dir(tier))
        return 2, [f"{chapter}: no published `{tier}` record ({where / f'{chapter}.json'})"]
    if not rerun_path.is_file():
        return 2, [(f"{chapter}: no rerun to compare: {rerun_path} is missing "
                   f"(make chapter CHAPTER={chapter} PROFILE={tier})")]
    rerun = json.loads(rerun_path.read_text())
    if rerun.get("profile") != tier:
        return 2, [(f"{chapter}: {rerun_path} is a `{rerun.get('profile')}` run; the published record is "
                   f"`{tier}` (make chapter CHAPTER={chapter} PROFILE={tier}, or TIER={rerun.get('profile')})")]
    base = {k: v for k, v in record.items() if k not in PUBLISHED_ONLY}
    rerun = {k: v for k, v in rerun.items() if k not in PUBLISHED_ONLY}
    comparison = compare_records(base, rerun, rtol=rtol)
    date = str(record.get("published") or "")[:10]
    head = f"{chapter} ({tier}, published {date or 'undated'}, against {rerun_path})"
    if comparison.identical:
        machine = len(comparison.machine_differences)
        lines = [f"{head}: nothing moved" + (f" ({machine} machine-measured values differ, not counted)"
                                              if machine else "")]
        return 0, lines + ([f"  [machine] {d}" for d in comparison.machine_differences] if verbose else [])
    verdicts = moved_verdicts(base, rerun)
    lines = [f"{head}: {_count(len(comparison.differences), 'value')} moved; "
             + (f"{_count(len(verdicts), 'verdict')} moved" if verdicts else "no verdict moved")]
    lines += [f"  verdict {v}" for v in verdicts]
    lines += [f"  {d}" for d in comparison.differences]
    if verbose:
        lines += [f"  [machine] {d}" for d in comparison.machine_differences]
    return 1, lines


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m symlib.book.rerun", description=__doc__.splitlines()[0].rstrip(":"))
    parser.add_argument("chapters", nargs="+", help="chapter names (make chapters lists them)")
    parser.add_argument("--tier", default=published.TIER, choices=published.TIERS,
                        help=f"the published record to compare with (default {published.TIER})")
    parser.add_argument("--rtol", type=float, default=0.0,
                        help="relative tolerance for numbers (default 0: exact, as on the machine that published)")
    parser.add_argument("-v", "--verbose", action="store_true", help="also list the machine-measured differences")
    args = parser.parse_args(argv)
    if args.rtol < 0:
        parser.error(f"--rtol must be >= 0; got {args.rtol}")
    status = 0
    for chapter in args.chapters:
        code, lines = report(chapter, tier=args.tier, rtol=args.rtol, verbose=args.verbose)
        print("\n".join(lines), file=sys.stderr if code == 2 else sys.stdout)
        status = max(status, code)
    return status


if __name__ == "__main__":
    sys.exit(main())
