"""The README a newcomer reads: short, its conclusions written from the published records (never
typed), its example runs, and no word of how the project is run behind the scenes; the same for
the book's pages about running it."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from symlib.book import readme

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [REPO / "book" / f"{name}.md" for name in ("running-long-tiers", "configuration", "data", "run-times",
                                                    "contributing")]
# how the project organises its own work: nothing a reader of the README or the book needs
PROCESS_WORDS = re.compile(r"\bissues? \d+|#\d{2}\b|\bsessions?\b|lent machine|build machine|NOTES\.md|\.paper-carry"
                           r"|\bstop \d+|\brounds? \d", re.IGNORECASE)


def _titles(text: str) -> list[str]:
    """The ``# `` headings of a Markdown text, outside fenced code."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return [line for line in prose.splitlines() if line.startswith("# ")]


def test_the_readmes_counts_are_those_of_the_published_records():
    assert readme.outdated(REPO) == [], "run `python -m symlib.book.readme` and commit README.md, book/run-times.md"


def test_the_conclusions_name_each_tier_and_every_published_chapter():
    text = README.read_text()
    block = text[text.index("<!-- conclusions:start"):text.index("<!-- conclusions:end -->")]
    for tier in ("full", "paper"):
        for path in (REPO / "published" / tier).glob("*.json"):
            title = readme.ledger.chapter_title(path.stem)
            assert re.search(rf"^\| {re.escape(title)} \| `{tier}` \|", block, re.MULTILINE), (tier, path.stem)
    assert "**`full` tier**" in block and "reproduced:" in block and "robust:" in block


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the rest belongs in the book's pages"
    assert lines[0].startswith("# ") and _titles(README.read_text()) == [lines[0]]


def test_the_readmes_example_runs():
    code = re.search(r"## A taste of symlib\n.*?```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert code, "the README's example is a ```python block under `## A taste of symlib`"
    assert len(code[1].strip().splitlines()) <= 12
    done = subprocess.run([sys.executable, "-c", code[1]], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_the_readme_names_what_a_newcomer_needs():
    text = README.read_text()
    for needed in ("make test", "make book", "Python ≥ 3.11.5", "g++", "macOS", "GB of disk", "CITATION.cff",
                   "LICENSE", "make compare", "python -m symlib.book.compare", "GitHub Pages"):
        assert needed in text, needed


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.name)
def test_no_process_wording_where_a_reader_looks(path):
    found = PROCESS_WORDS.findall(path.read_text())
    assert not found, f"{path.name}: {found}"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_each_page_has_one_title_and_is_in_the_table_of_contents(path):
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# ") and _titles(path.read_text()) == [lines[0]]
    assert f"file: book/{path.stem}\n" in (REPO / "_toc.yml").read_text()


# --------------------------------------------------------------------------- the module


def test_replace_block_writes_between_the_markers_and_refuses_without_them():
    start, end = readme._markers("x")
    text = f"before\n{start}\nold\n{end}\nafter\n"
    once = readme.replace_block(text, "x", "new")
    assert once == f"before\n{start}\nnew\n{end}\nafter\n"
    assert readme.replace_block(once, "x", "new") == once
    with pytest.raises(ValueError, match="expected one block `y`"):
        readme.replace_block(text, "y", "new")


def test_a_stale_record_is_named_by_the_kind_of_change_not_its_hashes():
    assert readme.stale_phrase([]) == ""
    assert readme.stale_phrase(["the code changed since"]) == "its chapter's code changed since"
    phrase = readme.stale_phrase(["the `full` profile changed since", "the code changed since",
                                  "its numbers were computed with other code (hash ab12; this version's cd34) in stages x"])
    assert phrase == "its profile changed since; its numbers were computed by older code"
    assert "ab12" not in phrase


def test_the_blocks_follow_the_records(tmp_path, monkeypatch):
    """A made-up checkout: one published full record; republishing it with a verdict flipped
    changes the README's counts, and check mode says the README is out of date until rewritten."""
    claim = {"id": "c", "text": "t", "paper": "p", "ours": "o", "holds": True,
             "verdicts": {"reproduced": {"holds": True, "preconditions": []},
                          "robust": {"holds": None, "preconditions": [{"met": False, "criterion": "4 chains",
                                                                       "measured": "1"}]}}}
    record = {"chapter": "01_ortho_skip", "profile": "full", "claims": [claim], "published": "2026-01-02T00:00:00",
              "computed": {"device": "cpu", "pieces": {"pieces": 2, "minutes": 150.0, "first": "2026-01-01",
                                                        "last": "2026-01-02"}}}
    (tmp_path / "published" / "full").mkdir(parents=True)
    (tmp_path / "book").mkdir()
    path = tmp_path / "published" / "full" / "01_ortho_skip.json"
    path.write_text(json.dumps(record))
    for rel, (name, _) in readme.BLOCKS.items():
        start, end = readme._markers(name)
        (tmp_path / rel).write_text(f"# x\n\n{start}\n{end}\n")
    monkeypatch.setattr(readme, "_chapters", lambda: ["01_ortho_skip"])
    monkeypatch.setattr(readme.published, "load", lambda chapter, directory, tier: json.loads(p.read_text())
                        if (p := Path(directory) / f"{chapter}.json").is_file() else None)
    monkeypatch.setattr(readme.published, "staleness", lambda record, profile, notebook: [])
    assert len(readme.outdated(tmp_path)) == 2
    readme.write(tmp_path)
    assert readme.outdated(tmp_path) == []
    text = (tmp_path / "README.md").read_text()
    assert "reproduced: 1 hold, 0 do not hold, 0 not judged; robust: 0 hold, 0 do not hold, 1 not judged" in text
    assert "| `full` | 1 | 1 | 0 | 0 | 0 | 0 | 1 | 2026-01-02 (CPU, 2.5 h) |" in text
    assert "nothing published yet" in text  # the paper tier
    assert "| `full` | 2.5 h | 2 | CPU (machine not recorded) | 2026-01-01 to 2026-01-02 |" in (
        tmp_path / "book" / "run-times.md").read_text()
    assert "Added up: `full` 2.5 h for 1 chapter." in (tmp_path / "book" / "run-times.md").read_text()
    claim["verdicts"]["reproduced"]["holds"] = False
    path.write_text(json.dumps(record))
    assert readme.outdated(tmp_path) == [tmp_path / "README.md"]


def test_which_claims_lists_the_front_runs_claims_and_why_each_does_not_hold(tmp_path, monkeypatch):
    """Made-up records: the `paper` run stands in front of the `full` one; a claim that does not
    hold is followed by its diagnosis's distinct causes, in order; a claim that holds by none."""
    def claim(cid, holds, causes=()):
        return {"id": cid, "text": "t", "paper": "p", "ours": "o", "holds": holds,
                "diagnosis": [{"cause": c, "detail": "d", "sweep": None} for c in causes],
                "verdicts": {"reproduced": {"holds": holds, "preconditions": []},
                             "robust": {"holds": None, "preconditions": []}}}
    records = {
        "full": [claim("a", False, ("budget",)), claim("b", True)],
        "paper": [claim("a", True, ("data",)), claim("b", False, ("budget", "data", "budget")), claim("c", None),
                  {**claim("check", True), "kind": "check"}],
    }
    for tier, claims in records.items():
        (tmp_path / "published" / tier).mkdir(parents=True)
        (tmp_path / "published" / tier / "01_ortho_skip.json").write_text(json.dumps(
            {"chapter": "01_ortho_skip", "profile": tier, "claims": claims}))
    monkeypatch.setattr(readme, "_chapters", lambda: ["00_symmetries", "01_ortho_skip"])
    monkeypatch.setattr(readme.published, "load", lambda chapter, directory, tier: json.loads(p.read_text())
                        if (p := Path(directory) / f"{chapter}.json").is_file() else None)
    monkeypatch.setattr(readme.published, "staleness", lambda record, profile, notebook: ["the code changed since"])
    lines = readme.which_claims(tmp_path)
    assert lines[1:] == ["", (f"- {readme.ledger.chapter_title('01_ortho_skip')} (`paper`, stale): "
                              "✓ `a`; ✗ `b` (budget, data); ○ `c`")]
    (tmp_path / "published" / "paper" / "01_ortho_skip.json").unlink()
    assert lines != readme.which_claims(tmp_path)
    assert readme.which_claims(tmp_path)[-1].endswith("(`full`, stale): ✓ `b`; ✗ `a` (budget)")
    (tmp_path / "published" / "full" / "01_ortho_skip.json").unlink()
    assert readme.which_claims(tmp_path) == []
