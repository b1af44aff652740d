"""Check every internal link of the built book, offline: the page exists and so does its anchor.

    python -m symlib.book.linkcheck [_build/html]

Sphinx's own ``linkcheck`` builder reports relative links as "local" without opening them, and
never sees links written in raw HTML (the tables' and the ledger's), so the book checks its
built pages directly: every ``href`` and ``src`` without a scheme must name a file of the build,
and every ``#fragment`` an ``id`` (or ``name``) on the page it points at. External links are not
followed (the check runs without a network).
"""

from __future__ import annotations

import argparse
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["broken_links"]

SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static"}


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag != "meta" else ():
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag in ("a", "link") and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag in ("img", "script") and attrs.get("src"):
            self.links.append(attrs["src"])


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(errors="replace"))
    return page


def broken_links(root: str | Path) -> list[str]:
    """``"page: link (why)"`` for every internal link of the built book that does not resolve."""
    root = Path(root).resolve()
    pages = [p for p in sorted(root.rglob("*.html")) if not SKIP_DIRS & set(p.relative_to(root).parts)]
    parsed: dict[Path, _Page] = {}

    def page(path: Path) -> _Page:
        if path not in parsed:
            parsed[path] = _parse(path)
        return parsed[path]

    problems = []
    for source in pages:
        for link in page(source).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = (source.parent / unquote(parts.path)).resolve() if parts.path else source
            if target.is_dir():
                target = target / "index.html"
            rel = source.relative_to(root).as_posix()
            if not target.is_relative_to(root) or not target.exists():
                problems.append(f"{rel}: {link} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in page(target).ids:
                problems.append(f"{rel}: {link} (no anchor #{parts.fragment})")
    return problems


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m symlib.book.linkcheck", description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="_build/html")
    args = parser.parse_args(argv)
    if not (Path(args.root) / "index.html").exists():
        raise SystemExit(f"no built book at {args.root}: run `make book` first")
    problems = broken_links(args.root)
    for line in problems:
        print(line, file=sys.stderr)
    print(f"[symlib] linkcheck: {len(problems)} broken internal link(s)")
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
