"""Provenance of a results file: profile and code hashes change exactly when they should."""

import dataclasses
import json
import pathlib

import pytest

from symlib.book import codehash as pv
from symlib.book import provenance  # noqa: F401 (installs the finder: every chapter findable by name)
from symlib.book.results import ChapterResults
from symlib.chapters.ortho_skip.profiles import PROFILES as CH1
from symlib.chapters.symmetries.profiles import PROFILES as CH0

REPO = pathlib.Path(__file__).resolve().parents[2]


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
        "inference/hmc.py",
        "data/__init__.py",
        "book/tables.py",
        "chapters/__init__.py",
        "chapters/a/experiment.py",
        "chapters/b/experiment.py",
    ]:
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(f"# {rel}\n")
    (fake / "chapters/a/experiment.py").write_text("from symlib.nn import mlp\nfrom symlib import data\n")
    monkeypatch.setattr(pv, "SYMLIB", fake)
    a = fake / "chapters" / "a"
    before = pv.code_hash(a)
    (fake / "chapters/b/experiment.py").write_text("CHANGED = 1\n")
    assert pv.code_hash(a) == before, "another chapter's code does not make this one stale"
    (fake / "inference/hmc.py").write_text("CHANGED = 1\n")
    assert pv.code_hash(a) == before, "a library module the chapter does not import does not make it stale"
    assert pv.code_hash(a, scheme=1) != pv.code_hash(a), "(the whole-library hash of old records counts it)"
    (fake / "chapters/a/experiment.py").write_text("from symlib.nn import mlp\nfrom symlib import data\nCHANGED = 1\n")
    after_own = pv.code_hash(a)
    assert after_own != before
    (fake / "nn/mlp.py").write_text("CHANGED = 1\n")
    assert pv.code_hash(a) != after_own, "shared library code it imports counts"
    after_lib = pv.code_hash(a)
    (fake / "data/__init__.py").write_text("CHANGED = 1\n")
    assert pv.code_hash(a) != after_lib, "the data loaders it imports count"
    after_data = pv.code_hash(a)
    (fake / "book/tables.py").write_text("CHANGED = 1\n")
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
        "chapters/symmetry_removal/experiment.py": ("from symlib.chapters.symmetries import BOOK_ARCHITECTURES\n"
                                                    "from symlib.nn import mlp\n"),
        "chapters/sgm_vi/experiment.py": "# chapter 3\n",
    }
    for rel, text in files.items():
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(text)
    monkeypatch.setattr(pv, "SYMLIB", fake)
    # the chapter-wide hash, as for a chapter that declares no stage code (2a now declares its own)
    monkeypatch.setattr(pv, "declared_stage_code", lambda experiment: None)
    assert pv.package_of_chapter("02a_symmetry_removal") == fake / "chapters" / "symmetry_removal"
    assert pv.package_of_chapter("07_missing") is None and pv.package_of_chapter("exp") is None
    assert pv.chapter_of("02a_symmetry_removal-optunets") == "02a_symmetry_removal"
    stage = lambda: pv.stage_code_hash("02a_symmetry_removal-optunets")
    before, unknown = stage(), pv.stage_code_hash("exp")
    assert stage() == pv.stage_code_hash("02a_symmetry_removal"), "one hash per chapter"
    (fake / "chapters/sgm_vi/experiment.py").write_text("CHANGED = 1\n")
    assert stage() == before, "another chapter's code does not make this one's entries stale"
    assert pv.stage_code_hash("exp") != unknown, "an experiment of no chapter counts every chapter"
    (fake / "book/tables.py").write_text("CHANGED = 1\n")
    assert stage() == before, "page layout changes no number"
    (fake / "chapters/symmetries/__init__.py").write_text("BOOK_ARCHITECTURES = [1]\n")
    after_import = stage()
    assert after_import != before, "a chapter package it imports counts"
    (fake / "nn/mlp.py").write_text("CHANGED = 1\n")
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


def test_import_closure_follows_static_imports_only(tmp_path):
    from symlib.book.provenance import import_closure

    pkg = tmp_path / "symlib"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from symlib.b import f\nfrom . import c\n\ndef g():\n    import symlib.sub.e\n",
        "b.py": "def f():\n    pass\n",
        "c.py": "",
        "d.py": "import symlib.a\n",  # imports a, but nothing imports d
        "sub/__init__.py": "",
        "sub/e.py": "",
        "sub/model.stan": "model {}",
        "unrelated.json": "{}",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    got = {p.relative_to(pkg).as_posix() for p in import_closure([pkg / "a.py"], root=tmp_path)}
    assert got == {"__init__.py", "a.py", "b.py", "c.py", "sub/__init__.py", "sub/e.py", "sub/model.stan",
                   "unrelated.json"}  # data files beside a module it needs count too; d.py does not


def test_a_file_edited_between_two_closures_is_read_afresh(tmp_path):
    """The scans of a file are remembered by its bytes, not its path or time stamp: an import or
    a data folder's name added to a file, with the time stamp put back and the size unchanged,
    still shows in the next closure (the memo that keeps code hashes cheap cannot hide an edit)."""
    import os

    from symlib.book.provenance import import_closure, import_closure_precise

    pkg = tmp_path / "symlib"
    (pkg / "data").mkdir(parents=True)
    for name, text in {"__init__.py": "", "b.py": "", "c.py": "", "data/x.json": "{}"}.items():
        (pkg / name).write_text(text)
    a = pkg / "a.py"
    before, after = "from symlib import b\nX = 'nada'\n", "from symlib import c\nX = 'data'\n"
    assert len(before) == len(after)
    for fn in (import_closure, import_closure_precise):
        a.write_text(before)
        os.utime(a, ns=(10**18, 10**18))
        got = {p.relative_to(pkg).as_posix() for p in fn([a], root=tmp_path)}
        assert "b.py" in got and "c.py" not in got and "data/x.json" not in got, (fn.__name__, got)
        a.write_text(after)
        os.utime(a, ns=(10**18, 10**18))
        got = {p.relative_to(pkg).as_posix() for p in fn([a], root=tmp_path)}
        assert "c.py" in got and "b.py" not in got and "data/x.json" in got, (fn.__name__, got)


def test_the_precise_closure_reads_a_package_init_as_a_re_export_table(tmp_path):
    from symlib.book.provenance import import_closure, import_closure_precise

    pkg = tmp_path / "symlib"
    (pkg / "lib").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "lib/__init__.py": "from symlib.lib import hmc, mfvi\nfrom symlib.lib.mlp import MLPSpec\n"
                           "from .defs import helper\nimport symlib.outside\n",
        "lib/hmc.py": "",
        "lib/mfvi.py": "from symlib.lib import MLPSpec\n",
        "lib/mlp.py": "",
        "lib/defs.py": "",
        "outside.py": "",
        "uses_mfvi.py": "from symlib.lib import mfvi\n",
        "uses_spec.py": "from symlib.lib import MLPSpec\n",
        "uses_whole.py": "import symlib.lib\n",
        "uses_helper.py": "from symlib.lib import helper\n",
        "lib/own.py": "",
        "lib2/__init__.py": "from symlib.lib2 import own\nX = 1\n",
        "lib2/own.py": "",
        "uses_defined.py": "from symlib.lib2 import X\n",
    }
    (pkg / "lib2").mkdir()
    for name, text in files.items():
        (pkg / name).write_text(text)

    def closure(start, fn=import_closure_precise):
        return {p.relative_to(pkg).as_posix() for p in fn([pkg / start], root=tmp_path)}

    base = {"__init__.py", "lib/__init__.py", "outside.py"}   # the __init__ and its imports from outside
    assert closure("uses_mfvi.py") == base | {"uses_mfvi.py", "lib/mfvi.py", "lib/mlp.py"}   # not hmc
    assert closure("uses_spec.py") == base | {"uses_spec.py", "lib/mlp.py"}
    assert closure("uses_helper.py") == base | {"uses_helper.py", "lib/defs.py"}
    every = base | {"lib/hmc.py", "lib/mfvi.py", "lib/mlp.py", "lib/defs.py"}
    assert closure("uses_whole.py") == every | {"uses_whole.py"}   # attribute access is not traced
    # a name the __init__ defines itself: everything that __init__ imports
    assert closure("uses_defined.py") == {"__init__.py", "lib2/__init__.py", "lib2/own.py", "uses_defined.py"}
    # never more than scheme 2's closure
    for start in ("uses_mfvi.py", "uses_spec.py", "uses_whole.py", "uses_helper.py", "uses_defined.py"):
        assert closure(start) <= closure(start, import_closure)


def test_a_data_folder_counts_for_the_modules_that_name_it_in_code(tmp_path):
    """A data folder below a module (``stan_models/``: no ``__init__.py``) is hashed with the module
    whose code spells its name, not with a sibling that names it in a docstring only; a package
    is no data folder. (The Stan programs escaped chapter 4's hash this way until this rule.)"""
    from symlib.book.provenance import import_closure, import_closure_precise

    pkg = tmp_path / "symlib"
    files = {
        "__init__.py": "",
        "inf/__init__.py": '"""The programs live in ``inf/models``."""\n',
        "inf/reader.py": 'from importlib import resources\n\ndef program(name):\n'
                         '    return resources.files("symlib.inf").joinpath("models", name).read_text()\n',
        "inf/other.py": '"""Not ``models``, not ``sub``: a docstring is no read."""\nX = "unrelated"\n',
        "inf/models/a.stan": "model {}",
        "inf/models/deeper/b.json": "{}",
        "inf/models/notes.txt": "not data",
        "inf/sub/__init__.py": "",
        "inf/sub/c.stan": "model {}",
        "uses_reader.py": "from symlib.inf import reader\n",
        "uses_other.py": "from symlib.inf import other\n",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    for fn in (import_closure, import_closure_precise):
        reader = {p.relative_to(pkg).as_posix() for p in fn([pkg / "uses_reader.py"], root=tmp_path)}
        other = {p.relative_to(pkg).as_posix() for p in fn([pkg / "uses_other.py"], root=tmp_path)}
        assert {"inf/models/a.stan", "inf/models/deeper/b.json"} <= reader, fn.__name__
        assert "inf/models/notes.txt" not in reader
        assert not any(f.startswith("inf/models/") for f in other), fn.__name__
        assert "inf/sub/c.stan" not in reader | other   # a package is imported, not read as data


def test_the_stan_programs_are_in_chapter_4s_stage_hash_and_no_other():
    from symlib.book.provenance import SYMLIB, import_closure_precise, package_of_chapter

    programs = {f"inference/stan_models/{m}.stan" for m in ("unconstrained", "ordered", "constrained")}
    for chapter in ("04_constrained_models", "05_rebasin_hmc", "06_synthesis"):
        start = [p for p in package_of_chapter(chapter).rglob("*.py")] + list((SYMLIB / "book").glob("*.py"))
        files = {p.relative_to(SYMLIB).as_posix() for p in import_closure_precise(start)}
        assert (programs <= files) == (chapter == "04_constrained_models"), chapter
        assert (programs & files) in (set(), programs), chapter


def test_under_scheme_3_a_change_to_hmc_leaves_chapters_that_do_not_import_it_current():
    """``symlib.inference``'s ``__init__`` re-exports ``hmc``; a chapter importing a sibling from it
    (3: ``sgm``) or none (2a) is not made stale by it; nor is chapter 1, whose VI runs through
    ``mfvi_graph.fit_resumable`` in the loop HMC shares (``symlib.inference.loop``), not in HMC.
    The book machinery it starts from is the part below the chapters: the run layer
    (:data:`symlib.book.LAYERS`) imports the chapters' registry and the sampler itself, so a
    scheme-3 hash of this checkout covers every chapter's code."""
    from symlib.book import LAYERS
    from symlib.book.provenance import (
        SYMLIB,
        _notebook_imports,
        import_closure_precise,
        notebook_code,
        package_of_chapter,
    )

    for chapter, needs_hmc in (("01_ortho_skip", False), ("02a_symmetry_removal", False), ("03_sgm_vi", False),
                               ("05_rebasin_hmc", True)):
        package = package_of_chapter(chapter)
        start = [p for p in package.rglob("*.py")] + [p for p in (SYMLIB / "book").glob("*.py")
                                                         if p.stem not in LAYERS["run"]]
        notebook = REPO / "notebooks" / f"{chapter}.md"
        files = {p.relative_to(SYMLIB).as_posix()
                 for p in import_closure_precise(start, _notebook_imports(notebook_code(notebook)))}
        assert ("inference/hmc.py" in files) == needs_hmc, chapter
        assert "nn/mlp.py" in files, chapter


def test_a_chapters_code_hash_covers_what_it_imports_not_the_whole_library():
    """From the chapter's package and the book machinery below the chapters (the run layer of
    :data:`symlib.book.LAYERS` imports the chapters' registry and the methods)."""
    from symlib.book import LAYERS
    from symlib.book.provenance import (
        SYMLIB,
        _notebook_imports,
        import_closure,
        notebook_code,
        package_of_chapter,
    )

    chapter = package_of_chapter("00_symmetries")
    start = [p for p in chapter.rglob("*.py")] + [p for p in (SYMLIB / "book").glob("*.py")
                                                  if p.stem not in LAYERS["run"]]
    notebook = REPO / "notebooks" / "00_symmetries.md"
    files = {p.relative_to(SYMLIB).as_posix() for p in import_closure(start, _notebook_imports(notebook_code(notebook)))}
    assert "symmetry/group.py" in files and "chapters/symmetries/stages.py" in files
    assert not any(f.startswith("inference/") for f in files)  # chapter 0 fits nothing: HMC changes leave it current
    assert not any(f.startswith("chapters/ortho_skip/") for f in files)


def test_records_are_compared_under_the_hash_scheme_they_were_written_with():
    from symlib.book import published
    from symlib.book.provenance import chapter_package_dir, code_hash, profile_hash
    from symlib.chapters import get_profile

    config = get_profile("00_symmetries", "full")
    notebook = REPO / "notebooks" / "00_symmetries.md"

    def record(scheme):
        prov = {"profile_hash": profile_hash(config),
                "code_hash": code_hash(chapter_package_dir(config), notebook, scheme=scheme or 1)}
        if scheme:
            prov["hash_scheme"] = scheme
        return {"chapter": "00_symmetries", "provenance": prov}

    assert published.staleness(record(None), config, notebook) == []  # an old record: the whole-library hash
    assert published.staleness(record(2), config, notebook) == []
    assert published.staleness(record(3), config, notebook) == []
    assert published.staleness(record(4), config, notebook) == []
    assert record(3)["provenance"]["code_hash"] != record(2)["provenance"]["code_hash"]
    assert record(4)["provenance"]["code_hash"] != record(3)["provenance"]["code_hash"]
    mixed = record(2)
    mixed["provenance"].pop("hash_scheme")  # a scheme-2 hash read as scheme 1 does not match
    assert published.staleness(mixed, config, notebook) == ["the code changed since"]


def test_a_current_record_of_an_older_scheme_is_rehashed_at_publish_and_a_stale_one_is_not():
    from symlib.book import published, publishing
    from symlib.book.provenance import (
        HASH_SCHEME,
        chapter_package_dir,
        code_hash,
        profile_hash,
        stage_code_hash,
    )
    from symlib.chapters import get_profile

    config = get_profile("00_symmetries", "full")
    notebook = REPO / "notebooks" / "00_symmetries.md"
    old_stage = stage_code_hash("00_symmetries", scheme=2)
    prov = {"hash_scheme": 2, "profile_hash": profile_hash(config),
            "code_hash": code_hash(chapter_package_dir(config), notebook, scheme=2),
            "computed_with": [{"code_hash": old_stage, "data_hash": None, "stages": ["00_symmetries-x"]}]}
    record = {"chapter": "00_symmetries", "provenance": prov}
    new = publishing.rehashed(record, notebook)
    assert new["provenance"]["hash_scheme"] == HASH_SCHEME == 5
    assert new["provenance"]["rehashed_from"] == {"hash_scheme": 2, "code_hash": prov["code_hash"]}
    assert new["provenance"]["computed_with"][0]["code_hash"] == stage_code_hash("00_symmetries") != old_stage
    assert published.staleness(new, config, notebook) == []
    stale = {"chapter": "00_symmetries", "provenance": dict(prov, code_hash="0" * 16)}
    assert publishing.rehashed(stale, notebook) is stale
    assert published.staleness(stale, config, notebook) == ["the code changed since"]


def test_the_rendering_modules_pull_no_library_module_into_the_chapters_hashes():
    """Every chapter's code hash follows the static imports of the book machinery, the rendering
    modules included (they are left out of the hash, their imports are not): a static import of,
    say, symlib.inference there once made every chapter's hash, and so every published run and
    cache entry, stale. What they import must stay inside symlib/book. The run layer
    (:data:`symlib.book.LAYERS`) is the exception: it sits above the chapters and imports their
    registry and the methods, which scheme 5 (no hash follows a run module's imports) allows."""
    from symlib.book import LAYERS
    from symlib.book import provenance as prov

    rendering = [prov.SYMLIB / name for name in sorted(prov.RENDERING_ONLY)
                 if name.removeprefix("book/").removesuffix(".py") not in LAYERS["run"]]
    closure = prov.import_closure_precise(rendering)
    # symlib/files.py, the whole-or-nothing writer, is imported by the cache, which every
    # chapter's hash covers already: the rendering modules' import of it adds nothing
    outside = sorted(p.relative_to(prov.SYMLIB).as_posix() for p in closure
                     if not p.is_relative_to(prov.SYMLIB / "book") and p.name != "__init__.py"
                     and p != prov.SYMLIB / "files.py")
    assert outside == []


def _copy_of_symlib(tmp_path, monkeypatch):
    """A copy of the library's sources that the hashes read (chapters are still imported from the
    real package: their declarations, not their files)."""
    import shutil

    fake = tmp_path / "symlib"
    shutil.copytree(pv.SYMLIB, fake, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    monkeypatch.setattr(pv, "SYMLIB", fake)
    return fake


def test_an_edit_of_the_data_loaders_changes_the_stage_hashes_of_the_stages_that_load_data(tmp_path, monkeypatch):
    """The data loaders (:mod:`symlib.data`, a package beside the methods) compute: the hash of
    every stage whose code imports them follows them, and of no other."""
    fake = _copy_of_symlib(tmp_path, monkeypatch)
    assert pv.role(fake / "data" / "__init__.py") == "compute"
    loading = ["01_ortho_skip-sinc", "02a_symmetry_removal-toy", "02b_posterior_mmd-train", "03_sgm_vi-mnist",
               "04_constrained_models-boston_fits", "05_rebasin_hmc-not", "06_synthesis-benchmarks"]
    experiments = [*loading, "00_symmetries-brute"]
    before = {x: pv.stage_code_hash(x) for x in experiments}
    source = (fake / "data" / "__init__.py").read_text()
    assert "frequency: float = 4.0" in source
    (fake / "data" / "__init__.py").write_text(source.replace("frequency: float = 4.0", "frequency: float = 4.5"))
    assert [x for x in experiments if pv.stage_code_hash(x) != before[x]] == loading


def test_a_stage_that_declares_its_code_is_hashed_over_that_code_only(tmp_path, monkeypatch):
    """Chapter 5 declares its stages' code (``STAGE_CODE``): editing its claims leaves its entries
    and checkpoints current, editing its sampler does not; a chapter declaring nothing keeps one
    hash for all its stages."""
    assert pv.declared_stage_code("05_rebasin_hmc-bayes") == ("symlib.chapters.rebasin_hmc.stages",)
    assert pv.declared_stage_code("05_rebasin_hmc") is None        # a chapter, not a stage
    assert pv.declared_stage_code("00_symmetries-brute") is None    # chapter 0 declares none
    fake = _copy_of_symlib(tmp_path, monkeypatch)
    stage = lambda: pv.stage_code_hash("05_rebasin_hmc-bayes")
    whole = lambda: pv.stage_code_hash("05_rebasin_hmc")
    ch0 = lambda: pv.stage_code_hash("00_symmetries-brute")
    before = {"stage": stage(), "not": pv.stage_code_hash("05_rebasin_hmc-not"), "whole": whole(),
              "compute": pv.compute_code_hash("05_rebasin_hmc"), "ch0": ch0()}
    assert before["stage"] != before["whole"] and before["stage"] == before["not"]   # all declare one module
    assert ch0() == pv.stage_code_hash("00_symmetries") == pv.compute_code_hash("00_symmetries")
    with open(fake / "chapters/rebasin_hmc/claims.py", "a") as f:
        f.write("WORDING = 'changed'\n")
    assert stage() == before["stage"] and pv.compute_code_hash("05_rebasin_hmc") == before["compute"]
    assert whole() != before["whole"], "the chapter's own hash still sees the claims"
    with open(fake / "chapters/rebasin_hmc/stages_bayes.py", "a") as f:
        f.write("EVALUATION = 'changed'\n")
    assert stage() != before["stage"] and pv.compute_code_hash("05_rebasin_hmc") != before["compute"]
    assert ch0() == before["ch0"]
    with open(fake / "inference/hmc_resumable.py", "a") as f:
        f.write("SAMPLER = 'changed'\n")
    changed = stage()
    assert changed != before["stage"]
    with open(fake / "chapters/rebasin_hmc/views.py", "a") as f:
        f.write("LAYOUT = 'changed'\n")
    assert stage() == changed


def test_computed_with_groups_are_compared_stage_by_stage():
    bayes, ens = pv.stage_code_hash("05_rebasin_hmc-bayes"), pv.stage_code_hash("05_rebasin_hmc-ensemble")
    now = [{"code_hash": bayes, "stages": ["05_rebasin_hmc-bayes", "05_rebasin_hmc-ensemble"]},
           {"code_hash": pv.stage_code_hash("00_symmetries"), "stages": []}]
    assert bayes == ens and pv.stale_code_groups("05_rebasin_hmc", now[:1]) == []
    assert pv.stale_code_groups("00_symmetries", now[1:]) == []
    old = {"code_hash": "0123456789abcdef", "stages": ["05_rebasin_hmc-vi"]}
    assert pv.stale_code_groups("05_rebasin_hmc", [*now[:1], old, "junk"]) == [(old, bayes)]
    # a chapter-wide hash (an entry from before the declaration) is stale for a declaring stage
    wide = {"code_hash": pv.stage_code_hash("05_rebasin_hmc"), "stages": ["05_rebasin_hmc-bayes"]}
    assert pv.stale_code_groups("05_rebasin_hmc", [wide]) == [(wide, bayes)]


@pytest.mark.parametrize("chapter", ["01_ortho_skip", "02a_symmetry_removal", "02b_posterior_mmd", "03_sgm_vi",
                                     "04_constrained_models", "05_rebasin_hmc", "06_synthesis"])
def test_a_declared_stage_code_covers_every_stage_function_and_no_claim_or_text(chapter):
    """Each chapter that declares its stages' code (``STAGE_CODE``) declares every stage, and the
    closure of what it declares holds the module that defines each stage's function (a stage
    computed in a module outside it would go unhashed), and neither the claims, the views nor
    the figures (whose edits must leave a GPU run in pieces current)."""
    import functools
    import inspect

    spec = pv.declared(chapter)
    package = pv.package_of_chapter(chapter)
    closures = set()
    for stage in spec.stages:
        modules = pv.declared_stage_code(stage.experiment_name(chapter))
        assert modules, (chapter, stage.name)
        closure = pv.import_closure_precise([pv._module_file(m, pv.SYMLIB.parent) for m in modules])
        fn = stage.compute.func if isinstance(stage.compute, functools.partial) else stage.compute
        assert pathlib.Path(inspect.getsourcefile(fn)).resolve() in {p.resolve() for p in closure}, (chapter, stage.name)
        closures.add(frozenset(closure))
    for closure in closures:
        names = {p.name for p in closure if p.parent == package}
        assert not names & {"claims.py", "views.py", "figures.py"}, (chapter, sorted(names))
    assert pv.stage_code_hash(spec.stages[0].experiment_name(chapter)) != pv.stage_code_hash(chapter)


NOTEBOOK = """---
jupytext:
  text_representation:
    format_name: myst
---

# A chapter

Some prose, with an example that is not code: `from symlib.inference import hmc`.

```{code-cell} python
:tags: [hide-input]
from symlib.chapters.symmetries import CHAPTER
x = 1
```

More prose.

````{code-cell} python
print("```")  # a longer fence holds a shorter one
````
"""


def test_notebook_code_keeps_the_front_matter_and_code_cells_and_drops_the_prose(tmp_path):
    notebook = tmp_path / "n.md"
    notebook.write_text(NOTEBOOK)
    code = pv.notebook_code(notebook)
    assert code.startswith("---\njupytext:") and code.count("---\n") == 2
    assert ":tags: [hide-input]\nfrom symlib.chapters.symmetries import CHAPTER\nx = 1\n```\n" in code
    assert 'print("```")  # a longer fence holds a shorter one\n````\n' in code
    assert "prose" not in code and "# A chapter" not in code and "symlib.inference" not in code
    other = tmp_path / "n.py"
    other.write_text(NOTEBOOK)
    assert pv.notebook_code(other) == NOTEBOOK  # another format counts whole


def test_under_scheme_4_a_prose_edit_leaves_the_code_hash_and_a_code_or_option_edit_changes_it(tmp_path):
    from symlib.book.provenance import chapter_package_dir, code_hash
    from symlib.chapters import get_profile

    chapter = chapter_package_dir(get_profile("00_symmetries", "full"))
    notebook = tmp_path / "00_symmetries.md"

    def hashes(text):
        notebook.write_text(text)
        return code_hash(chapter, notebook, scheme=3), code_hash(chapter, notebook)

    before = hashes(NOTEBOOK)
    prose = hashes(NOTEBOOK.replace("More prose.", "More prose, rewritten."))
    assert prose[1] == before[1] and prose[0] != before[0]  # scheme 3 counted the prose
    # prose that names a module is not an import under scheme 4 (scheme 3 followed it)
    assert hashes(NOTEBOOK.replace("`from symlib.inference import hmc`", "nothing"))[1] == before[1]
    for edit in [("x = 1", "x = 2"), (":tags: [hide-input]", ":tags: [raises-exception]"),
                 ("format_name: myst", "format_name: myst\n  format_version: 0.13")]:
        assert hashes(NOTEBOOK.replace(*edit))[1] != before[1], edit


def test_scheme_4_leaves_every_stage_code_hash_as_scheme_3_had_it():
    # cache entries and checkpoints record stage code hashes: a new scheme must not restart them
    for notebook in sorted((REPO / "notebooks").glob("*.md")):
        chapter = notebook.stem
        assert pv.compute_code_hash(chapter, scheme=4) == pv.compute_code_hash(chapter, scheme=3), chapter
        for experiment in pv.stage_experiments(chapter):
            assert pv.stage_code_hash(experiment, scheme=4) == pv.stage_code_hash(experiment, scheme=3), experiment


def test_rehash_rewrites_current_records_in_place_and_leaves_stale_ones(tmp_path):
    from symlib.book import published, publishing
    from symlib.book.provenance import chapter_package_dir, code_hash, profile_hash
    from symlib.chapters import get_profile

    notebook = REPO / "notebooks" / "00_symmetries.md"
    config = get_profile("00_symmetries", "full")  # chapter 0 has no paper profile: both records are `full` runs
    prov = {"hash_scheme": 3, "profile_hash": profile_hash(config),
            "code_hash": code_hash(chapter_package_dir(config), notebook, scheme=3)}
    for tier in published.TIERS:
        (tmp_path / tier).mkdir()
        (tmp_path / tier / "00_symmetries.json").write_text(json.dumps(
            {"chapter": "00_symmetries", "profile": "full", "provenance": prov, "tables": {"t": [1.5]}}))
    stale = json.loads((tmp_path / "paper" / "00_symmetries.json").read_text())
    stale["provenance"]["code_hash"] = "0" * 16
    (tmp_path / "paper" / "00_symmetries.json").write_text(json.dumps(stale))

    done = publishing.rehash(dest_root=tmp_path)
    assert done == [("00_symmetries", "full", "rehashed: scheme 3 -> 5"),
                    ("00_symmetries", "paper", ("left at scheme 3: not current, so not rehashed "
                                               "(re-run or re-render it and publish)"))]
    new = json.loads((tmp_path / "full" / "00_symmetries.json").read_text())
    assert new["provenance"]["hash_scheme"] == 5 and new["tables"] == {"t": [1.5]}
    assert new["provenance"]["code_hash"] == code_hash(chapter_package_dir(config), notebook)
    assert json.loads((tmp_path / "paper" / "00_symmetries.json").read_text()) == stale
    assert publishing.rehash(dest_root=tmp_path, tiers=["full"]) == [
        ("00_symmetries", "full", "already scheme 5")]
    assert publishing.rehash(["01_ortho_skip"], dest_root=tmp_path) == []
    with pytest.raises(ValueError, match="tier must be one of"):   # a misspelt tier is not "nothing found"
        publishing.rehash(dest_root=tmp_path, tiers=["papers"])


def test_no_published_record_is_left_to_rehash():
    # a current record left on an older scheme would be made stale by a prose edit of its notebook,
    # which a finished paper run (its cache deleted) cannot undo: `python -m symlib.book.records rehash`
    from symlib.book import published, publishing

    for tier in published.TIERS:
        for path in sorted((REPO / "published" / tier).glob("*.json")):
            record = json.loads(path.read_text())
            assert publishing.rehashed(record) is record, f"{tier}/{path.stem}: run `published rehash`"


def test_every_book_module_has_a_role():
    """Scheme 5 decides what a module counts for by its role: a module added without one would
    count as computing (safe, but every run would go stale), so each must be named."""
    names = {p.stem for p in (pv.SYMLIB / "book").glob("*.py")}
    assert names == set(pv.BOOK_ROLES), "name each module of symlib/book in provenance.BOOK_ROLES"
    assert set(pv.BOOK_ROLES.values()) == {"compute", "verdict", "contract", "layout", "run"}
    assert set(pv.CONTRACT_COMPUTE) <= {n for n, r in pv.BOOK_ROLES.items() if r == "compute"}
    assert pv.role(pv.SYMLIB / "book" / "cache.py") == "contract"
    assert pv.role(pv.SYMLIB / "inference" / "hmc.py") == pv.role(pv.SYMLIB / "chapters" / "__init__.py") == "compute"
    assert pv.role(pv.SYMLIB / "files.py") == "run"


def test_a_fingerprint_reads_the_code_not_its_docstrings_comments_or_layout(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""Module doc."""\nimport os\n\n\ndef f(x):\n    """Doc."""\n    return x + 1  # one\n\n\n'
                 'A = 1\n"""What A is."""\n')
    base = pv.fingerprint(f)
    f.write_text('"""Another doc."""\nimport os\ndef f(x):\n    return (x +\n            1)\nA = 1\n')
    assert pv.fingerprint(f) == base
    f.write_text('import os\ndef f(x):\n    return x + 2\nA = 1\n')
    assert pv.fingerprint(f) != base, "a changed constant is a changed computation"
    f.write_text('import os\ndef f(x):\n    return x + 1\nA = "1"\n')
    assert pv.fingerprint(f) != base, "a string that is a value counts"
    data = tmp_path / "model.stan"
    data.write_text("// a comment\n")
    assert pv.fingerprint(data) == data.read_bytes(), "other files count by their bytes"


def test_under_scheme_5_the_machinery_that_runs_stages_makes_no_run_stale(tmp_path, monkeypatch):
    """The contract, layout and run modules are in no hash; verdict modules are in the chapter's
    (rendering) hash only; compute modules, the streams every stage draws from included, in both."""
    fake = _copy_of_symlib(tmp_path, monkeypatch)
    notebook = REPO / "notebooks" / "05_rebasin_hmc.md"
    hashes = lambda: (pv.stage_code_hash("05_rebasin_hmc-bayes"), pv.code_hash(fake / "chapters" / "rebasin_hmc", notebook))
    before = hashes()
    for name in ("cache", "parallel", "runtime", "pipeline", "published", "tables", "cards"):
        with open(fake / "book" / f"{name}.py", "a") as f:
            f.write("CHANGED = 1\n")
    assert hashes() == before
    with open(fake / "book" / "results.py", "a") as f:
        f.write("CHANGED = 1\n")
    stage, render = hashes()
    assert stage == before[0] and render != before[1], "a verdict rule counts for the record, not for its numbers"
    with open(fake / "book" / "streams.py", "a") as f:
        f.write("CHANGED = 1\n")
    assert hashes()[0] != stage, "the random streams count for every stage"


def test_a_bridge_carries_an_older_schemes_runs_across_a_change_of_machinery(tmp_path, monkeypatch):
    """Registered on unchanged files (:mod:`symlib.book.bridges`), the two schemes' hashes keep a
    scheme-4 stage group and chapter code hash current after a change scheme 4 counted and scheme
    5 does not; a change of computing code still makes them stale."""
    from symlib.book import bridges, equivalence

    registry = tmp_path / "code_equivalences.json"
    monkeypatch.setattr(equivalence, "registry_path", lambda root=None: registry)
    fake = _copy_of_symlib(tmp_path, monkeypatch)
    chapter, experiment = "05_rebasin_hmc", "05_rebasin_hmc-bayes"
    notebook = REPO / "notebooks" / f"{chapter}.md"
    package = fake / "chapters" / "rebasin_hmc"
    group = {"code_hash": pv.stage_code_hash(experiment, scheme=4), "stages": [experiment]}
    rendered = pv.code_hash(package, notebook, scheme=4)
    current = lambda: (pv.stale_code_groups(chapter, [group], scheme=4) == [],
                       pv.code_current(chapter, rendered, package, notebook, 4))
    assert current() == (True, True)
    pairs = bridges.bridge_pairs([chapter], 4)
    assert (experiment, group["code_hash"], pv.stage_code_hash(experiment)) in pairs
    assert (chapter + pv.RENDER_SUFFIX, rendered, pv.code_hash(package, notebook)) in pairs
    with open(fake / "book" / "cache.py", "a") as f:
        f.write("CHANGED = 1\n")
    assert current() == (False, False), "without a bridge, scheme 4 sees the change"
    equivalence.add(pairs, "test: the same files under both schemes")
    assert current() == (True, True)
    with open(fake / "inference" / "hmc.py", "a") as f:
        f.write("CHANGED = 1\n")
    assert current() == (False, False), "a change of the sampler is a change of numbers"
