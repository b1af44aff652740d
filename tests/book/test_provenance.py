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
