"""Carry cache entries and published runs across a change of hash scheme, without computing.

A new :data:`~symlib.book.provenance.HASH_SCHEME` hashes the same files differently, so every
cache entry, checkpoint and published run recorded under the old one would read as computed by
other code. Where the checkout's code is the code that computed them, both schemes' hashes of its
files describe the same code: ``python -m symlib.book.bridges --from-scheme 4`` writes, for every
chapter, one entry per stage experiment (its stage code hash under both schemes) and one for the
chapter's code hash with its notebook (``<chapter>#render``), into the registry of equivalences
(:mod:`symlib.book.equivalence`), with the commit as evidence. Nothing is computed: the two
hashes are of one set of files. It refuses a checkout whose ``symlib/`` or ``notebooks/`` has
uncommitted changes (the evidence names a commit).

A record or entry of the old scheme stays current exactly when its hash is the old-scheme hash of
the bridged commit's files, or is joined to it by proven entries; from then on, the new scheme
decides what a change of code makes stale.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys

from symlib.book import equivalence, provenance
from symlib.book.paths import project_root_or_cwd

__all__ = ["bridge_pairs", "main"]


def bridge_pairs(chapters, old_scheme: int) -> list[tuple[str, str, str]]:
    """``(experiment, hash under old_scheme, hash under the current scheme)`` for every stage
    experiment of ``chapters``, the chapter itself (a stage group naming no stage) and its code
    hash with its notebook (``<chapter>#render``), of this checkout's files."""
    root = project_root_or_cwd()
    out = []
    for chapter in chapters:
        for experiment in [chapter, *provenance.stage_experiments(chapter)]:
            out.append((experiment, provenance.stage_code_hash(experiment, scheme=old_scheme),
                        provenance.stage_code_hash(experiment)))
        package = provenance.package_of_chapter(chapter)
        notebook = root / "notebooks" / f"{chapter}.md"
        out.append((chapter + provenance.RENDER_SUFFIX, provenance.code_hash(package, notebook, scheme=old_scheme),
                    provenance.code_hash(package, notebook)))
    return out


def _clean_commit() -> str:
    root = project_root_or_cwd()
    run = lambda *a: subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
    if run("status", "--porcelain", "--", "symlib", "notebooks"):
        raise SystemExit("symlib/ or notebooks/ has uncommitted changes: commit first, so that the "
                         "evidence names the code that was hashed")
    return run("rev-parse", "HEAD")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m symlib.book.bridges", description=__doc__.splitlines()[0])
    parser.add_argument("--from-scheme", type=int, required=True, help="the hash scheme to carry over")
    parser.add_argument("chapters", nargs="*", help="chapter names (default: all)")
    parser.add_argument("--dry-run", action="store_true", help="print the pairs; register nothing")
    args = parser.parse_args(argv)
    if not 1 < args.from_scheme < provenance.HASH_SCHEME:
        parser.error(f"--from-scheme must be between 2 and {provenance.HASH_SCHEME - 1}")
    chapters = sorted(p.stem for p in (project_root_or_cwd() / "notebooks").glob("[0-9][0-9]*_*.md")
                      if provenance.package_of_chapter(p.stem) is not None)
    unknown = sorted(set(args.chapters) - set(chapters))
    if unknown:
        parser.error(f"unknown chapters {unknown}; known: {chapters}")
    pairs = bridge_pairs(args.chapters or chapters, args.from_scheme)
    if args.dry_run:
        for pair in pairs:
            print(*pair)
        return 0
    commit = _clean_commit()
    evidence = (f"the same files (commit {commit[:12]}) hashed under scheme {args.from_scheme} and scheme "
                f"{provenance.HASH_SCHEME}; nothing computed ({platform.python_implementation()} "
                f"{platform.python_version()})")
    new = equivalence.add(pairs, evidence)
    print(f"registered {len(new)} bridges ({len(pairs) - len(new)} already there or equal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
