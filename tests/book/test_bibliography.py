"""The references page labels entries as the text cites them (book/_ext/symbook_bibliography.py)."""

import sys
from pathlib import Path

import pytest

pybtex = pytest.importorskip("pybtex")
from pybtex.database import parse_string

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import symbook_bibliography as bib

BIB = r"""
@article{one, author = {Sch{\"o}lkopf, Bernhard}, title = {A}, journal = {J}, year = {2012}}
@article{two, author = {Hendrycks, Dan and Gimpel, Kevin}, title = {B}, journal = {J}, year = {2017}}
@article{many, author = {Gelberg, Yoav and van der Ouderaa, Tycho F. A. and Gal, Yarin}, title = {C}, journal = {J}, year = {2024}}
@article{twin1, author = {Chen, An and Lu, Haw}, title = {D}, journal = {J}, year = {1993}}
@article{twin2, author = {Chen, An and Lu, Haw}, title = {E}, journal = {J}, year = {1993}}
"""


def test_author_year_labels_with_accents_and_suffixes():
    labels = {e.key: e.label for e in bib.AuthorYearStyle().format_bibliography(parse_string(BIB, "bibtex"))}
    assert labels["one"] == "Schölkopf, 2012"
    assert labels["two"] == "Hendrycks and Gimpel, 2017"
    assert labels["many"] == "Gelberg et al., 2024"
    assert sorted([labels["twin1"], labels["twin2"]]) == ["Chen and Lu, 1993a", "Chen and Lu, 1993b"]


def test_the_book_selects_the_style():
    config = (ROOT / "_config.yml").read_text()
    assert "bibtex_default_style: symbook" in config
    assert "symbook_bibliography: book/_ext" in config


def test_every_book_reference_gets_a_readable_label():
    db = pybtex.database.parse_file(str(ROOT / "book" / "references.bib"))
    labels = [e.label for e in bib.AuthorYearStyle().format_bibliography(db)]
    assert len(labels) == len(set(labels)) == len(db.entries)
    assert all("," in label and label.split(", ")[-1][:4].isdigit() for label in labels)


# The five papers the book reruns. A DOI is given where one is established: arXiv's DOI
# (10.48550/arXiv.<id>) for the three on arXiv. For the two Bayesian deep learning workshop papers
# (NIPS 2017, NeurIPS 2021) neither their texts nor a search gave a DOI or an arXiv identifier:
# none is given rather than one guessed.
PAPER_DOIS = {
    "kurle2021": None,
    "laurent2024": "10.48550/arXiv.2310.08287",
    "gelberg2024": "10.48550/arXiv.2408.05496",
    "pourzanjani2017": None,
    "xiao2023": "10.48550/arXiv.2401.00611",
}


def test_the_five_papers_carry_their_dois():
    db = pybtex.database.parse_file(str(ROOT / "book" / "references.bib"))
    assert {key: db.entries[key].fields.get("doi") for key in PAPER_DOIS} == PAPER_DOIS
    for entry in db.entries.values():
        if "doi" in entry.fields:
            assert entry.fields["doi"].startswith("10.") and " " not in entry.fields["doi"]


def test_the_citation_file_gives_the_same_dois():
    import yaml

    refs = yaml.safe_load((ROOT / "CITATION.cff").read_text())["references"]
    assert {r["doi"] for r in refs if "doi" in r} == {d for d in PAPER_DOIS.values() if d}
