"""The published records' command line: publish finished runs, record a run in progress or one
that lost its state, re-express records under a new hash scheme, seal records.

    python -m symlib.book.records publish [--tier full|paper] [CHAPTER ...]   # after such runs
    python -m symlib.book.records progress CHAPTER PIECES_FILE               # a run in progress
    python -m symlib.book.records lost CHAPTER --why "..."   # a run in progress lost its state
    python -m symlib.book.records rehash [CHAPTER ...]   # current records, under a new hash scheme
    python -m symlib.book.records seal                    # records written before their digest

What writes the records is :mod:`symlib.book.publishing`, what reads them
:mod:`symlib.book.published`; this run-layer module finds the chapters by name (through
:mod:`symlib.book.provenance`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from symlib.book import pieces, provenance  # noqa: F401  (provenance: finds chapters by name)
from symlib.book.published import TIER, TIERS, progress_summary
from symlib.book.publishing import publish, record_lost, record_progress, rehash, seal
from symlib.book.results import results_dir

__all__ = ["main"]


def _committed(path: Path) -> None:
    """Refuse to publish a results file made from uncommitted code: its record would name a
    commit (``...+dirty``) that holds other code than the code that made it."""
    commit = str(((json.loads(path.read_text()) if path.is_file() else {}).get("provenance") or {}).get("commit") or "")
    if commit.endswith("+dirty"):
        raise SystemExit(f"{path.stem}: {path} was made with uncommitted changes under symlib/ or notebooks/ "
                         f"({commit}); commit them, re-render it (`python -m symlib.book.pipeline execute "
                         "--cached-only`) and publish that")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m symlib.book.records", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    pub = sub.add_parser("publish", help="copy finished runs of a tier to published/<tier>/")
    pub.add_argument("chapters", nargs="*", help="default: every chapter with a results file of the tier")
    pub.add_argument("--tier", default=TIER, choices=TIERS, help=f"the profile published (default {TIER})")
    prog = sub.add_parser("progress", help="record a run in progress: copy its pieces file to "
                                           "published/<tier>/progress/<chapter>.json")
    prog.add_argument("chapter")
    prog.add_argument("pieces_file", help="the run's <results>/pieces/<chapter>.json")
    prog.add_argument("--tier", default="paper", choices=TIERS)
    gone = sub.add_parser("lost", help="a run in progress lost its state: move its progress files to "
                                       "published/<tier>/progress/<chapter>.lost.json")
    gone.add_argument("chapter")
    gone.add_argument("--why", required=True, help="what took the state (it is shown in the book)")
    gone.add_argument("--tier", default="paper", choices=TIERS)
    again = sub.add_parser("rehash", help="re-express current published records under this version's "
                                          "hash scheme, in place (nothing is computed)")
    again.add_argument("chapters", nargs="*", help="default: every published chapter")
    again.add_argument("--tier", choices=TIERS, help="default: both tiers")
    sub.add_parser("seal", help="write the integrity digest into published records that carry none")
    args = parser.parse_args(argv)
    if args.command == "seal":
        for chapter, tier, what in seal():
            print(f"[symlib] {tier}/{chapter}: {what}")
        return
    if args.command == "rehash":
        for chapter, tier, what in rehash(args.chapters, [args.tier] if args.tier else None):
            print(f"[symlib] {tier}/{chapter}: {what}")
        return
    if args.command == "lost":
        try:
            out = record_lost(args.chapter, args.why, tier=args.tier)
        except (FileNotFoundError, ValueError) as err:
            raise SystemExit(f"{args.chapter}: {err}") from None
        print(f"[symlib] {args.chapter}: {progress_summary(args.chapter, args.tier)} -> {out}")
        return
    if args.command == "progress":
        try:
            out = record_progress(args.chapter, Path(args.pieces_file), tier=args.tier)
        except (FileNotFoundError, ValueError) as err:
            raise SystemExit(f"{args.chapter}: {err}") from None
        print(f"[symlib] {args.chapter}: {progress_summary(args.chapter, args.tier) or 'complete'} -> {out}")
        warning = pieces.stalled(json.loads(out.read_text()), args.tier)
        if warning:
            print(f"[symlib] WARNING {args.chapter}: {warning}", file=sys.stderr, flush=True)
        return
    chapters = args.chapters or sorted(
        p.stem for p in results_dir().glob("*.json")
        if json.loads(p.read_text()).get("profile") == args.tier and p.stem != "reproducibility"
    )
    if not chapters:
        raise SystemExit(f"no `{args.tier}` results in {results_dir()}: run `make book PROFILE={args.tier}` first")
    for chapter in chapters:
        _committed(results_dir() / f"{chapter}.json")
        try:
            out = publish(chapter, tier=args.tier)
        except (FileNotFoundError, ValueError) as err:
            raise SystemExit(f"{chapter}: {err}") from None
        print(f"[symlib] published {chapter} -> {out}")


if __name__ == "__main__":
    main()
