"""The static proof of a move (symlib.book.bridges --static): a rename of modules is bridged, a
change of what the code computes is refused, experiment by experiment."""

import pytest

from symlib.book.bridges import Covered, normalised_tree, static_proof

LOADER = '''"""Loaders."""
import torch

SCALE = 1.0


def load(n, scale=1.0):
    """n draws."""
    return torch.arange(n) * scale * SCALE


def usage():
    raise SystemExit("run python -m symlib.book.data download")
'''

STAGES_BEFORE = '''from symlib.book.data import load
from symlib.book import data as bd
import symlib.book.data


def stage(n):
    return load(n) + bd.load(n) + symlib.book.data.load(n)
'''

STAGES_AFTER = '''"""Stages, documented now."""
from symlib.data import load
from symlib import data as bd
import symlib.data


def stage(n):
    return load(n) + bd.load(n) + symlib.data.load(n)
'''

MOVE = {"symlib.book.data": "symlib.data"}


def _before(**changed) -> dict[str, Covered]:
    files = {"symlib/book/data.py": LOADER, "symlib/chapters/a/stages.py": STAGES_BEFORE,
             "symlib/__init__.py": '__version__ = "0.1.0"\n'} | changed
    return {"01_a-fit": Covered("aaaa", {k: v.encode() for k, v in files.items()})}


def _after(**changed) -> dict[str, Covered]:
    moved = LOADER.replace("symlib.book.data", "symlib.data").replace('"""Loaders."""', '"""The loaders, moved."""')
    files = {"symlib/data/__init__.py": moved, "symlib/chapters/a/stages.py": STAGES_AFTER,
             "symlib/__init__.py": '__version__ = "0.1.0"\n'} | changed
    return {"01_a-fit": Covered("bbbb", {k: v.encode() for k, v in files.items()})}


def test_a_pure_move_is_bridged_and_the_strings_naming_the_module_are_listed():
    proof = static_proof(_before(), _after(), MOVE)
    assert proof.pairs == [("01_a-fit", "aaaa", "bbbb")] and proof.refused == {}
    assert proof.strings == [("symlib/data/__init__.py: 'run python -m symlib.book.data download' -> "
                              "'run python -m symlib.data download'")]


def test_without_the_rename_a_move_is_refused():
    proof = static_proof(_before(), _after(), {})
    assert proof.pairs == [] and "not the same modules" in proof.refused["01_a-fit"]
    assert "symlib.book.data" in proof.refused["01_a-fit"] and "symlib.data" in proof.refused["01_a-fit"]


@pytest.mark.parametrize(("old", "new", "where"), [
    ("SCALE = 1.0", "SCALE = 1.5", "the assignment to SCALE"),
    ("def load(n, scale=1.0):", "def load(n, scale=2.0):", "def load"),
    ("    return torch.arange(n) * scale * SCALE", "    return torch.arange(n) * SCALE * scale", "def load"),
])
def test_a_changed_constant_default_or_expression_is_refused_naming_the_module(old, new, where):
    moved = LOADER.replace("symlib.book.data", "symlib.data").replace(old, new)
    assert moved != LOADER.replace("symlib.book.data", "symlib.data")
    proof = static_proof(_before(), _after(**{"symlib/data/__init__.py": moved}), MOVE)
    assert proof.pairs == []
    assert proof.refused["01_a-fit"] == f"symlib/data/__init__.py (was symlib/book/data.py): {where} differs"


def test_a_new_import_of_a_computing_module_is_refused():
    stages = "from symlib.nn import mlp\n" + STAGES_AFTER
    proof = static_proof(_before(), _after(**{"symlib/chapters/a/stages.py": stages, "symlib/nn/__init__.py": "",
                                              "symlib/nn/mlp.py": "W = 1\n"}), MOVE)
    assert proof.refused["01_a-fit"] == "not the same modules: only now: symlib.nn, symlib.nn.mlp"
    # the same import of a module already covered changes the importing module's tree
    before = _before(**{"symlib/nn/mlp.py": "W = 1\n"})
    proof = static_proof(before, _after(**{"symlib/chapters/a/stages.py": stages, "symlib/nn/mlp.py": "W = 1\n"}), MOVE)
    assert proof.refused["01_a-fit"].startswith("symlib/chapters/a/stages.py")


def test_a_version_bump_alone_is_bridged_and_another_assignment_beside_it_is_not():
    bumped = _after(**{"symlib/__init__.py": '"""Now with a docstring."""\n__version__ = "0.2.0"\n'})
    assert static_proof(_before(), bumped, MOVE).pairs == [("01_a-fit", "aaaa", "bbbb")]
    also = _after(**{"symlib/__init__.py": '__version__ = "0.2.0"\nDEBUG = True\n'})
    assert static_proof(_before(), also, MOVE).refused["01_a-fit"].startswith("symlib/__init__.py")


def test_another_string_data_file_or_notebook_is_refused():
    other = LOADER.replace("symlib.book.data", "symlib.data").replace("download", "fetch")
    assert "symlib/data/__init__.py" in static_proof(
        _before(), _after(**{"symlib/data/__init__.py": other}), MOVE).refused["01_a-fit"]
    renames = MOVE | {"symlib.pkg": "symlib.methods"}
    stan = {"symlib/pkg/models/m.stan": "model {}"}
    moved = {"symlib/methods/models/m.stan": "model { }"}
    assert static_proof(_before(**stan), _after(**moved), renames).refused["01_a-fit"].endswith("other bytes")
    same = {"symlib/methods/models/m.stan": "model {}"}
    assert static_proof(_before(**stan), _after(**same), renames).pairs, "a data folder moves with its package"
    old = {"x#render": Covered("a", {}, "from symlib.book.data import load\n")}
    assert static_proof(old, {"x#render": Covered("b", {}, "from symlib.data import load\n")}, MOVE).pairs
    assert static_proof(old, {"x#render": Covered("b", {}, "from symlib.data import load2\n")}, MOVE).refused


def test_relative_imports_are_read_from_the_modules_own_package():
    old = normalised_tree("from . import data\nfrom .data import load\n", "symlib.book.cache", renames=MOVE)
    new = normalised_tree("from symlib import data\nfrom symlib.data import load\n", "symlib.book.cache")
    assert old == new
    inside = normalised_tree("from .loaders import load\n", "symlib.book", package=True,
                             renames={"symlib.book": "symlib.datasets"})
    assert inside == normalised_tree("from symlib.datasets.loaders import load\n", "symlib.datasets", package=True)
    assert normalised_tree("import os, sys\n", "m") == normalised_tree("import os\nimport sys\n", "m")
    assert normalised_tree("from os import sep as s\n", "m") != normalised_tree("from os import sep\n", "m")


def test_an_import_of_a_renamed_module_may_change_place_in_its_block_and_no_other_may():
    before = "import torch\nfrom symlib.book.cache import cached\nfrom symlib.book.data import load\nfrom symlib.nn import mlp\n"
    sorted_ = "import torch\nfrom symlib.book.cache import cached\nfrom symlib.nn import mlp\nfrom symlib.data import load\n"
    use = "\n\ndef stage(n):\n    return load(n)\n"
    proof = static_proof(_before(**{"symlib/chapters/a/stages.py": before + use}),
                         _after(**{"symlib/chapters/a/stages.py": sorted_ + use}), MOVE)
    assert proof.pairs and proof.reordered == ["symlib/chapters/a/stages.py"]
    swapped = "import torch\nfrom symlib.nn import mlp\nfrom symlib.book.cache import cached\nfrom symlib.data import load\n"
    proof = static_proof(_before(**{"symlib/chapters/a/stages.py": before + use}),
                         _after(**{"symlib/chapters/a/stages.py": swapped + use}), MOVE)
    assert proof.refused["01_a-fit"] == "symlib/chapters/a/stages.py (was symlib/chapters/a/stages.py): an import differs"
    rebound = "from symlib.book.data import load\nfrom symlib.nn.mlp import load\n"
    proof = static_proof(_before(**{"symlib/chapters/a/stages.py": rebound}),
                         _after(**{"symlib/chapters/a/stages.py": "from symlib.nn.mlp import load\nfrom symlib.data import load\n"}),
                         MOVE)
    assert proof.refused, "which of two imports binding one name comes last decides what it names"
    assert not static_proof(_before(), _after(), MOVE).reordered


def test_two_modules_renamed_onto_one_name_are_refused():
    before = _before(**{"symlib/data/__init__.py": "X = 1\n"})
    assert static_proof(before, _after(), MOVE).refused["01_a-fit"] == "the renames map two modules to one name"


@pytest.mark.slow
def test_the_command_bridges_a_commit_that_renames_a_package_and_refuses_one_that_edits_it(tmp_path, monkeypatch,
                                                                                           capsys):
    """End to end, on a copy of the library in a repository of its own: each commit's hashes are
    computed by its own code, the rename is registered with its evidence, an edit is not."""
    import json
    import re
    import shutil
    import subprocess
    from pathlib import Path

    from symlib.book import bridges

    here = Path(__file__).resolve().parents[2]
    repo = tmp_path / "repo"
    shutil.copytree(here / "symlib", repo / "symlib", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "notebooks").mkdir()
    shutil.copy(here / "notebooks" / "01_ortho_skip.md", repo / "notebooks")
    shutil.copy(here / "_toc.yml", repo)
    git = lambda *a: subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *a],
                                    check=True, capture_output=True)
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "before")
    git("mv", "symlib/data", "symlib/datasets")
    for path in (repo / "symlib").rglob("*.py"):
        text = path.read_text()
        path.write_text(re.sub(r"symlib\.data\b", "symlib.datasets", text).replace(
            "from symlib import data as", "from symlib import datasets as"))
    git("commit", "-qam", "renamed")
    monkeypatch.chdir(repo)
    registry = repo / "published" / "code_equivalences.json"

    assert bridges.main(["--static", "--from", "HEAD~1", "--rename", "symlib.data=symlib.datasets", "01_ortho_skip"]) == 0
    entries = json.loads(registry.read_text())
    assert {e["experiment"] for e in entries} == {"01_ortho_skip", "01_ortho_skip-sinc", "01_ortho_skip#render"}
    assert all("same syntax trees" in e["evidence"] and "nothing computed" in e["evidence"] for e in entries)
    assert "symlib.data -> symlib.datasets" in entries[0]["evidence"]
    assert "python -m symlib.datasets download" in capsys.readouterr().out, "the renamed strings are listed"

    loaders = repo / "symlib" / "datasets" / "__init__.py"
    loaders.write_text(loaders.read_text().replace("frequency: float = 4.0", "frequency: float = 4.5"))
    git("commit", "-qam", "edited")
    assert bridges.main(["--static", "--from", "HEAD~1", "01_ortho_skip"]) == 1
    out = capsys.readouterr().out
    assert "refused  01_ortho_skip-sinc: symlib/datasets/__init__.py (was symlib/datasets/__init__.py): " \
           "def sinc_function differs" in out
    assert len(json.loads(registry.read_text())) == len(entries), "nothing registered for an edit"
