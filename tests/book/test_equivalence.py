"""Code changes proven not to move numbers (symlib.book.equivalence, symlib.book.same_numbers):
the registry, its use by the cache and by published staleness, and the exact comparison."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from symlib.book import cache, equivalence, same_numbers
from symlib.book.cache import cached
from symlib.book.provenance import stale_code_groups

EXP = "04_constrained_models-boston_fits"


@pytest.fixture
def registry(tmp_path, monkeypatch):
    path = tmp_path / "published" / equivalence.REGISTRY_NAME
    monkeypatch.setattr(equivalence, "registry_path", lambda root=None: path)
    return path


def test_equivalence_is_the_same_hash_or_a_chain_of_proven_pairs(registry):
    assert equivalence.equivalent(EXP, "a", "a") and not equivalence.equivalent(EXP, "a", "b")
    equivalence.add([(EXP, "a", "b"), (EXP, "b", "c")], "made up")
    assert equivalence.equivalent(EXP, "a", "c") and equivalence.equivalent(EXP, "c", "a")  # both ways, chained
    assert not equivalence.equivalent("03_sgm_vi-toy", "a", "c")                                # per experiment
    assert not equivalence.equivalent(EXP, None, "a")
    assert equivalence.add([(EXP, "a", "b")], "again") == []                                    # not added twice
    registry.write_text("[{")
    with pytest.raises(ValueError, match=f"{registry.name} is not valid JSON"):
        equivalence.entries()


def test_the_cache_serves_an_entry_of_proven_equivalent_code_and_recomputes_otherwise(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "cache"))
    real = cache.fingerprint
    cached(EXP, "1", {"fit": 0}, lambda: {"mse": 0.5})
    old = real(EXP)["code_hash"]
    monkeypatch.setattr(cache, "fingerprint", lambda e: real(e) | {"code_hash": "new0000000000000"})
    assert cached(EXP, "1", {"fit": 0}, lambda: {"mse": 9.0}) == {"mse": 9.0}       # other code: recomputed
    cached(EXP, "1", {"fit": 1}, lambda: {"mse": 0.25})
    monkeypatch.setattr(cache, "fingerprint", lambda e: real(e) | {"code_hash": "newer00000000000"})
    equivalence.add([(EXP, "new0000000000000", "newer00000000000")], "made up")
    assert cached(EXP, "1", {"fit": 1}, lambda: pytest.fail("recomputed")) == {"mse": 0.25}  # proven: served
    assert old  # the real hash is another: no entry joins it


def test_published_numbers_of_proven_equivalent_code_are_current(registry):
    from symlib.book.provenance import stage_code_hash

    now = stage_code_hash(EXP)
    group = {"code_hash": "old0000000000000", "stages": [EXP]}
    assert stale_code_groups("04_constrained_models", [group])
    equivalence.add([(EXP, "old0000000000000", now)], "made up")
    assert stale_code_groups("04_constrained_models", [group]) == []


def test_identical_is_exact():
    nan = float("nan")
    a = {"x": torch.tensor([1.0, nan]), "y": np.array([1, 2]), "z": [0.5, (nan, "s")]}
    assert same_numbers.identical(a, {"x": torch.tensor([1.0, nan]), "y": np.array([1, 2]), "z": [0.5, (nan, "s")]})
    assert not same_numbers.identical(a["x"], torch.tensor([1.0, 2.0]))
    assert not same_numbers.identical(torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64))
    assert not same_numbers.identical(np.array([1, 2]), np.array([1.0, 2.0]))
    assert not same_numbers.identical(0.1 + 0.2, 0.3)
    assert not same_numbers.identical({"a": 1}, {"a": 1, "b": 2})


def test_two_caches_are_compared_entry_by_entry(tmp_path, monkeypatch):
    for side, value in (("old", 0.5), ("new", 0.5)):
        monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / side))
        cached(EXP, "1", {"fit": 0}, lambda v=value: {"mse": torch.tensor(v)})
        cached(EXP, "1", {"fit": 1}, lambda: {"mse": torch.tensor(1.0)})
    n, diffs, hashes = same_numbers.compare_caches(tmp_path / "old", tmp_path / "new", "04_constrained_models")
    assert n == 2 and diffs == [] and set(hashes) == {EXP}
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "new"))
    cached(EXP, "1", {"fit": 1}, lambda: {"mse": torch.tensor(1.0 + 1e-12, dtype=torch.float64)}, refresh=True)
    cached(EXP, "1", {"fit": 2}, lambda: {"mse": torch.tensor(2.0)})
    n, diffs, _ = same_numbers.compare_caches(tmp_path / "old", tmp_path / "new", "04_constrained_models")
    assert n == 2 and len(diffs) == 2 and any(d.startswith("different: ") for d in diffs)
    assert any(d.startswith("only under the new code: ") for d in diffs)


def test_the_command_refuses_an_unknown_chapter_and_revision(capsys):
    with pytest.raises(SystemExit):
        same_numbers.main(["04_constrained_model", "--from", "HEAD"])
    assert "valid chapters: 00_symmetries" in capsys.readouterr().err
    assert same_numbers.main(["04_constrained_models", "--from", "no-such-rev", "--dry-run"]) == 1
    assert "no commit 'no-such-rev'" in capsys.readouterr().err


def test_the_registry_shipped_is_valid():
    for entry in equivalence.entries():
        assert entry["evidence"] and entry["from"] != entry["to"]
    json.dumps(equivalence.entries())


def test_wall_clock_timings_are_set_aside_and_named():
    a = {"fit": {"draws": torch.ones(3), "warmup_s": 0.02, "seconds": 1.5, "time (s)": 0.1}, "n_steps": 10}
    b = {"fit": {"draws": torch.ones(3), "warmup_s": 0.03, "seconds": 1.7, "time (s)": 0.2}, "n_steps": 10}
    assert same_numbers.identical(a, b) and same_numbers.first_difference(a, b) is None
    assert {"warmup_s", "seconds", "time (s)"} <= same_numbers._TIMINGS_SEEN
    b["n_steps"] = 11  # 'steps' is no timing
    assert same_numbers.first_difference(a, b) == "['n_steps']: int 10 against int 11"


def test_each_side_of_a_proof_compiles_its_stan_programs_in_a_cache_of_its_own(registry, monkeypatch):
    """httpstan keys a compiled program by its text, not by the flags that compiled it: a shared
    cache would let the new code sample with the old code's build. Each side computes with its own
    XDG_CACHE_HOME (the compiles stubbed here: only the environments are checked)."""
    seen = []

    def fake_export(rev, into):
        into.mkdir(parents=True)
        return rev * 40

    def fake_run(tree, args, env):
        seen.append((tree.name, env))
        return type("Done", (), {"returncode": 0, "stdout": "{}", "stderr": ""})()

    monkeypatch.setattr(same_numbers, "_export", fake_export)
    monkeypatch.setattr(same_numbers, "_run", fake_run)
    monkeypatch.setattr(same_numbers, "compare_caches", lambda a, b, chapter: (1, [], {}))
    monkeypatch.setenv("XDG_CACHE_HOME", "/the/callers/cache")
    same_numbers.prove("04_constrained_models", "a", "b", profiles=("smoke", "quick"), register=False)
    computes = [(side, env["XDG_CACHE_HOME"]) for side, env in seen if "SYMLIB_RESULTS" in env]
    assert [side for side, _ in computes] == ["old", "new", "old", "new"]
    xdg = dict(computes)
    assert xdg["old"] != xdg["new"] and "/the/callers/cache" not in xdg.values()
    assert {side: x for side, x in computes[2:]} == xdg       # one build per side, reused across profiles


def test_two_renders_are_compared_value_by_value_with_what_no_code_reproduces_set_aside(tmp_path):
    """The render proof: old and new results files must agree value by value (provenance aside);
    a value that two renders of the new code also disagree on (a timing of this machine) is set
    aside and named, any other difference is reported with its path."""
    base = {"provenance": {"code_hash": "old"}, "wall_time_s": 3.0,
            "claims": [{"id": "a", "reproduced": True, "ours": 0.5, "nan": float("nan")}],
            "tables": {"cost": {"rows": [[1, 0.12], [5, 0.31]]}}}

    def write(name, **changes):
        record = json.loads(json.dumps(base))
        for path, value in changes.items():
            *keys, last = path.split("/")
            node = record
            for k in keys:
                node = node[int(k)] if isinstance(node, list) else node[k]
            node[int(last) if isinstance(node, list) else last] = value
        (tmp_path / f"{name}.json").write_text(json.dumps(record))
        return tmp_path / f"{name}.json"

    old = write("old")
    new = write("new", **{"provenance/code_hash": "new", "wall_time_s": 4.0, "tables/cost/rows/1/1": 0.29})
    again = write("again", **{"provenance/code_hash": "new", "wall_time_s": 5.0, "tables/cost/rows/1/1": 0.33})
    diffs, aside = same_numbers.compare_renders(old, new, again)
    assert diffs == [] and aside == ["['wall_time_s']", "['tables']['cost']['rows'][1][1]"]
    moved = write("moved", **{"claims/0/reproduced": False, "wall_time_s": 4.5})
    moved_again = write("moved_again", **{"claims/0/reproduced": False, "wall_time_s": 5.5})
    diffs, _ = same_numbers.compare_renders(old, moved, moved_again)
    assert diffs == ["['claims'][0]['reproduced']"]
    # a verdict is never set aside: one that two renders of the new code disagree on is not proven,
    # even where the old render agrees with one of them (here a timing-based claim flipping)
    shaky = write("shaky", **{"claims/0/verdicts": {"robust": {"verdict": "holds", "measured": 0.4}}})
    flips = write("flips", **{"claims/0/verdicts": {"robust": {"verdict": "does not hold", "measured": 0.6}}})
    base["claims"][0]["verdicts"] = {"robust": {"verdict": "holds", "measured": 0.5}}
    old_verdict = write("old_verdict")
    diffs, aside = same_numbers.compare_renders(old_verdict, shaky, flips)
    assert diffs == ["unsteady verdict: ['claims'][0]['verdicts']['robust']['verdict']"]
    assert aside == ["['claims'][0]['verdicts']['robust']['measured']"]
    base["robustness"] = {"a": {"columns": ["setting", "verdict", "ours"], "rows": [["x", "holds", 0.1]]}}
    rows = write("rows", **{"robustness/a/rows/0/2": 0.2})
    rows_flip = write("rows_flip", **{"robustness/a/rows/0/1": "does not hold", "robustness/a/rows/0/2": 0.3})
    diffs, aside = same_numbers.compare_renders(write("rows_old"), rows, rows_flip)
    assert diffs == ["unsteady verdict: ['robustness']['a']['rows'][0][1]"]
    assert aside == ["['robustness']['a']['rows'][0][2]"]
    assert same_numbers.leaf_differences([1, 2], [1, 2, 3], "x") == ["x"]
    assert same_numbers.leaf_differences(1, 1.0) == ["the value"]   # 1 and 1.0 are other JSON


@pytest.mark.parametrize("agree", [True, False])
def test_a_render_proof_registers_the_chapters_render_hash_only_when_the_renders_agree(registry, monkeypatch, agree):
    """prove(render=True) renders each code from the new side's cache (the new code twice) and registers
    ``<chapter>#render`` beside the stage hashes when the results agree; nothing when they do not
    (the computes and renders are stubbed: only what is compared and registered is checked)."""
    calls = []

    def fake_export(rev, into):
        into.mkdir(parents=True)
        return rev * 40

    def fake_run(tree, args, env):
        calls.append((tree.name, args[:2]))
        out = "{}"
        if args[0] == "-c":
            out = json.dumps(f"render-{tree.name}") if "code_hash(package" in args[1] else json.dumps(
                {EXP: f"stage-{tree.name}"})
        elif args[1] == "symlib.book.pipeline" and args[2] == "execute":
            assert env["SYMLIB_CACHE"].endswith("cache-new-smoke")   # one cache for every render
            results = Path(env["SYMLIB_RESULTS"])
            results.mkdir(parents=True)
            moved = agree or "rendered-old" not in str(results)
            (results / "04_constrained_models.json").write_text(json.dumps({"claims": [{"ok": moved}]}))
        return type("Done", (), {"returncode": 0, "stdout": out, "stderr": ""})()

    monkeypatch.setattr(same_numbers, "_export", fake_export)
    monkeypatch.setattr(same_numbers, "_run", fake_run)
    monkeypatch.setattr(same_numbers, "compare_caches", lambda a, b, chapter: (1, [], {}))
    result = same_numbers.prove("04_constrained_models", "a", "b", profiles=("smoke",), render=True)
    renders = [tree for tree, args in calls if args == ["-m", "symlib.book.pipeline"]][2:]
    assert renders == ["old", "new", "new"]
    got = {(e["experiment"], e["from"], e["to"]) for e in equivalence.entries()}
    if agree:
        assert result["differences"] == [] and result["rendered values set aside"] == {"smoke": 0}
        assert got == {(EXP, "stage-old", "stage-new"), ("04_constrained_models#render", "render-old", "render-new")}
        assert "rendered by each code from one cache" in equivalence.entries()[-1]["evidence"]
    else:
        assert result["differences"] == ["smoke render: ['claims'][0]['ok']"] and got == set()


def test_the_render_hash_of_a_tree_is_what_its_records_provenance_records():
    """_render_hash runs in a process of the tree's own code: on this checkout it gives the code
    hash with the notebook that a results file's provenance records."""
    import os

    from symlib.book import provenance
    from symlib.book.paths import project_root_or_cwd

    root = project_root_or_cwd()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYMLIB_")}
    want = provenance.code_hash(provenance.package_of_chapter("03_sgm_vi"), root / "notebooks" / "03_sgm_vi.md")
    assert same_numbers._render_hash(root, "03_sgm_vi", env) == want
