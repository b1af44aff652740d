"""Provenance of a results file: profile and code hashes change exactly when they should."""

import dataclasses
import json
import pathlib

from symlib.book import provenance as pv
from symlib.book.results import ChapterResults
from symlib.chapters.ortho_skip.profiles import PROFILES as CH1
from symlib.chapters.symmetries.profiles import PROFILES as CH0


def test_profile_hash_follows_the_values():
    quick = CH0["quick"]
    assert pv.profile_hash(quick) == pv.profile_hash(dataclasses.replace(quick))
    assert pv.profile_hash(quick) != pv.profile_hash(
        dataclasses.replace(quick, n_inputs=quick.n_inputs + 1)
    )
    assert pv.profile_hash(quick) != pv.profile_hash(CH0["smoke"])


def test_code_hash_covers_the_chapter_and_shared_code_but_not_other_chapters(tmp_path, monkeypatch):
    fake = tmp_path / "symlib"
    for rel in [
        "nn/mlp.py",
        "book/data.py",
        "book/tables.py",
        "chapters/__init__.py",
        "chapters/a/experiment.py",
        "chapters/b/experiment.py",
    ]:
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(f"# {rel}\n")
    monkeypatch.setattr(pv, "SYMLIB", fake)
    a = fake / "chapters" / "a"
    before = pv.code_hash(a)
    (fake / "chapters/b/experiment.py").write_text("# changed\n")
    assert pv.code_hash(a) == before, "another chapter's code does not make this one stale"
    (fake / "chapters/a/experiment.py").write_text("# changed\n")
    after_own = pv.code_hash(a)
    assert after_own != before
    (fake / "nn/mlp.py").write_text("# changed\n")
    assert pv.code_hash(a) != after_own, "shared library code counts"
    after_lib = pv.code_hash(a)
    (fake / "book/data.py").write_text("# changed\n")
    assert pv.code_hash(a) != after_lib, "the data loaders count"
    after_data = pv.code_hash(a)
    (fake / "book/tables.py").write_text("# changed\n")
    assert pv.code_hash(a) == after_data, "page layout changes no number"
    monkeypatch.chdir(tmp_path)
    assert pv.code_hash(pathlib.Path("symlib/chapters/a")) == pv.code_hash(a), "relative or absolute: one hash"
    notebook = tmp_path / "a.md"
    notebook.write_text("x")
    assert pv.code_hash(a, notebook) != pv.code_hash(a)


def test_results_file_records_provenance(tmp_path):
    results = ChapterResults("01_ortho_skip", "smoke", 0, "cpu", config=CH1["smoke"])
    results.add_claim("c", "text", "paper", "ours", None)
    record = json.loads(results.write(tmp_path).read_text())["provenance"]
    assert record["profile_hash"] == pv.profile_hash(CH1["smoke"])
    assert record["code_hash"] == pv.code_hash(
        pv.chapter_package_dir(CH1["smoke"]), pv.project_root() / "notebooks" / "01_ortho_skip.md"
    )
    assert record["profile_values"]["n_steps"] == CH1["smoke"].n_steps
    assert record["commit"] is None or len(record["commit"].split("+")[0]) == 40
    assert pv.chapter_package_dir(CH1["smoke"]).name == "ortho_skip"
    assert record["computed_with"] == []  # no stage was cached during this run


def test_stage_code_hash_covers_the_chapter_and_the_chapters_it_imports_not_the_notebook(tmp_path, monkeypatch):
    fake = tmp_path / "symlib"
    files = {
        "nn/mlp.py": "# shared\n",
        "book/tables.py": "# layout\n",
        "chapters/__init__.py": "",
        "chapters/symmetries/__init__.py": "BOOK_ARCHITECTURES = []\n",
        "chapters/symmetry_removal/experiment.py": "from symlib.chapters.symmetries import BOOK_ARCHITECTURES\n",
        "chapters/sgm_vi/experiment.py": "# chapter 3\n",
    }
    for rel, text in files.items():
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(text)
    monkeypatch.setattr(pv, "SYMLIB", fake)
    assert pv.package_of_chapter("02a_symmetry_removal") == fake / "chapters" / "symmetry_removal"
    assert pv.package_of_chapter("07_missing") is None and pv.package_of_chapter("exp") is None
    assert pv.chapter_of("02a_symmetry_removal-optunets") == "02a_symmetry_removal"
    stage = lambda: pv.stage_code_hash("02a_symmetry_removal-optunets")
    before, unknown = stage(), pv.stage_code_hash("exp")
    assert stage() == pv.stage_code_hash("02a_symmetry_removal"), "one hash per chapter"
    (fake / "chapters/sgm_vi/experiment.py").write_text("# changed\n")
    assert stage() == before, "another chapter's code does not make this one's entries stale"
    assert pv.stage_code_hash("exp") != unknown, "an experiment of no chapter counts every chapter"
    (fake / "book/tables.py").write_text("# changed\n")
    assert stage() == before, "page layout changes no number"
    (fake / "chapters/symmetries/__init__.py").write_text("BOOK_ARCHITECTURES = [1]\n")
    after_import = stage()
    assert after_import != before, "a chapter package it imports counts"
    (fake / "nn/mlp.py").write_text("# changed\n")
    assert stage() != after_import, "shared library code counts"


def test_every_chapters_stages_map_to_its_own_package():
    """The cache learns a stage's chapter from its experiment name, ``<chapter>[-<stage>]``: every
    declared stage's experiment maps back to its own chapter's package, and no chapter calls
    ``cached`` itself (its stages are cached by the contract, under keys it derives)."""
    import ast

    from symlib.chapters import CHAPTERS, declared

    for name, package in CHAPTERS.items():
        chapter = declared(name)
        assert chapter is not None, f"{name} is not declared through the chapter contract"
        for stage in chapter.stages:
            experiment = stage.experiment_name(name)
            assert pv.chapter_of(experiment) == name, experiment
            assert pv.package_of_chapter(pv.chapter_of(experiment)) == pv.SYMLIB / "chapters" / package
        assert pv.chapter_package_dir(next(iter(chapter.profiles.values()))) == pv.SYMLIB / "chapters" / package
    for path in sorted((pv.SYMLIB / "chapters").rglob("*.py")):
        calls = [node.lineno for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "cached"]
        assert not calls, f"{path} calls cached() itself at lines {calls}; declare a Stage instead"
