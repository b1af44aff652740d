"""The papermill pipeline: parameters reach the notebook, bad ones fail clearly, nothing is lost."""

import json

import nbformat
import pytest

from symlib.book import pipeline


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "EXECUTED", tmp_path / "executed")
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_chapters_are_discovered():
    assert "00_symmetries" in pipeline.chapters()


def test_unknown_chapter_lists_valid(sandbox):
    with pytest.raises(SystemExit, match="valid chapters: .*00_symmetries"):
        pipeline.main(["execute", "--profile", "smoke", "00_nope"])


def test_unknown_profile_rejected_by_cli(sandbox, capsys):
    with pytest.raises(SystemExit):
        pipeline.main(["execute", "--profile", "fast", "00_symmetries"])
    assert "invalid choice: 'fast'" in capsys.readouterr().err


@pytest.mark.slow
def test_smoke_run_hides_parameters_and_writes_results(sandbox):
    pipeline.execute("00_symmetries", profile="smoke", seed=1, device="cpu")
    nb = nbformat.read(sandbox / "executed" / "00_symmetries.ipynb", as_version=4)
    tagged = [c for c in nb.cells if {"parameters", "injected-parameters"} & set(c.metadata.get("tags", []))]
    assert len(tagged) == 2 and all("remove-cell" in c.metadata["tags"] for c in tagged)
    injected = next(c for c in tagged if "injected-parameters" in c.metadata["tags"])
    assert "profile = \"smoke\"" in injected.source and "seed = 1" in injected.source
    streams = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "stream"]
    assert all(o.name != "stderr" for o in streams)
    results = json.loads((sandbox / "results" / "00_symmetries.json").read_text())
    assert results["profile"] == "smoke" and results["seed"] == 1 and results["claims"]


@pytest.mark.slow
def test_wrongly_typed_parameter_fails_clearly_and_keeps_previous_output(sandbox):
    executed = sandbox / "executed"
    executed.mkdir()
    previous = executed / "00_symmetries.ipynb"
    previous.write_text("previous run")
    with pytest.raises(SystemExit, match="profile must be a string") as err:
        pipeline.execute("00_symmetries", profile=3, seed=0, device="cpu")
    assert "left as it was" in str(err.value)
    assert previous.read_text() == "previous run"
    assert (executed / "00_symmetries.failed.ipynb").exists()
    assert not (sandbox / "results" / "00_symmetries.json").exists()
