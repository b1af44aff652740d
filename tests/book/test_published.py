"""Reading published runs (symlib.book.published): telling when a record is from an older
version, its integrity digest, and the account of a run in progress."""

import dataclasses
import json
from datetime import UTC, datetime

import pytest

from symlib.book import pieces, published, publishing
from symlib.book.provenance import compute_code_hash
from tests.book.test_publishing import PNG, _run


def test_a_changed_profile_or_code_marks_the_record_stale(tmp_path, monkeypatch):
    config = _run(tmp_path)
    publishing.publish(
        "01_ortho_skip",
        source=tmp_path / "results",
        executed=tmp_path / "executed",
        dest=tmp_path / "published",
    )
    record = published.load("01_ortho_skip", tmp_path / "published")
    changed = dataclasses.replace(config, n_steps=config.n_steps + 1)
    assert published.staleness(record, changed) == ["the `full` profile changed since"]
    monkeypatch.setattr(published, "code_current", lambda *a, **k: False)
    assert published.staleness(record, config) == ["the code changed since"]
    assert "from an older version of the code" in published.tier_summary(
        record, published.staleness(record, config)
    )
    assert published.staleness(record, None) == ["this version has no `full` profile for the chapter"]


def test_verdicts_side_by_side(tmp_path):
    _run(tmp_path)
    full = json.loads((tmp_path / "results" / "01_ortho_skip.json").read_text())
    quick = dict(full, claims=[dict(full["claims"][0], verdict="does not hold", holds=False)])
    frame = published.verdicts_by_tier(quick, full)
    assert list(frame["quick"]) == ["does not hold", "—"]
    assert frame["full"][1].startswith("not judged: ELBO plateaued")
    assert published.tier_summary(None) == "not published"


def test_staleness_compares_the_code_and_data_that_computed_the_numbers(tmp_path, monkeypatch):
    """A re-render (or SYMLIB_KEEP_STALE) that served entries computed by older code gets the
    render-time code hash of today: the record's computed_with still says it is stale."""
    from symlib.book import cache

    config = _run(tmp_path)
    publishing.publish("01_ortho_skip", source=tmp_path / "results", executed=tmp_path / "executed",
                dest=tmp_path / "published")
    record = published.load("01_ortho_skip", tmp_path / "published")
    assert record["provenance"]["computed_with"] == [] and published.staleness(record, config) == []
    from symlib.chapters.ortho_skip.stages import EXPERIMENT  # the cache folder both stages share

    now = {"code_hash": cache.stage_code_hash(EXPERIMENT), "data_hash": cache.data_hash()}
    group = lambda **hashes: {**now, "stages": [EXPERIMENT], "entries": 1, **hashes}
    fresh = dict(record, provenance={**record["provenance"], "computed_with": [group()]})
    assert published.staleness(fresh, config) == []
    unknown = dict(record, provenance={**record["provenance"], "computed_with": [group(code_hash=None, data_hash=None)]})
    assert published.staleness(unknown, config) == [], "entries from before the hashes: unknown, judged as before"
    old = dict(record, provenance={**record["provenance"], "computed_with": [
        group(), {**group(code_hash="0123456789abcdef"), "stages": ["01_ortho_skip-gap"]}]})
    (reason,) = published.staleness(old, config)
    assert "computed with other code (hash 0123456789abcdef" in reason and reason.endswith("in stages gap"), reason
    assert "from an older version of the code" in published.tier_summary(old, published.staleness(old, config))
    other_data = dict(record, provenance={**record["provenance"], "computed_with": [group(data_hash="feedfacefeedface")]})
    assert published.staleness(other_data, config) == [
        (f"its numbers were computed with other data (hash feedfacefeedface; this version's {now['data_hash']}) "
        "in stages main, robustness")
    ], "chapter 1's stages share the chapter's cache folder: named by their own names, not the folder's"


def test_minutes_are_device_minutes_only_where_a_device_ran():
    """A run on the CPU alone counts the machine's minutes; one with an accelerator, minutes of device compute."""
    assert pieces.minutes_phrase(12.2, ["cpu (torch 2.13.0+cpu)"]) == "12.2 minutes"
    assert pieces.minutes_phrase(22.0, "cpu") == "22 minutes"
    assert pieces.minutes_phrase(1.0, "cpu") == "1 minute"
    assert pieces.minutes_phrase(4.0, ["cuda (NVIDIA H200)"]) == "4 minutes of device compute"
    assert pieces.minutes_phrase(4.0, ["cpu", "cuda (H100)"]) == "4 minutes of device compute"
    assert pieces.minutes_phrase(1.0, []) == "1 minute of device compute", "unknown devices: not claimed to be the CPU"


def test_published_records_with_or_without_computed_with_stay_valid():
    """Records from before computed_with are judged as before (no reason from it); newer ones
    carry it; staleness reads both without failing."""
    import importlib

    for path in sorted(published.published_dir().glob("*.json")):
        record = json.loads(path.read_text())
        package = importlib.import_module(f"symlib.chapters.{path.stem.split('_', 1)[1]}")
        published.staleness(record, package.PROFILES.get("full"))  # does not raise
        older = dict(record, provenance={k: v for k, v in record["provenance"].items() if k != "computed_with"})
        assert published._computed_with_reasons(older["chapter"], older["provenance"].get("computed_with")) == []
        published.staleness(older, package.PROFILES.get("full"))


def test_an_unparsable_record_names_its_file(tmp_path):
    # the issue: a broken published/full/*.json failed without saying which file
    (tmp_path / "01_ortho_skip.json").write_text('{"chapter": "01_ortho_skip", <<<<<<< HEAD')
    with pytest.raises(ValueError, match=r"published record .*01_ortho_skip\.json is not valid JSON.*make publish"):
        published.load("01_ortho_skip", tmp_path)
    assert published.load("02a_symmetry_removal", tmp_path) is None


def test_a_code_change_that_restarts_a_run_in_progress_is_named_until_it_is_recorded(tmp_path, monkeypatch):
    from symlib.book import pieces

    monkeypatch.setattr(published, "project_root_or_cwd", lambda: tmp_path)
    results = tmp_path / "results"
    src = pieces.pieces_path("05_rebasin_hmc", results)
    assert published.restarted() == []   # nothing in progress
    pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (H100)", seconds=480, outcome="budget",
                     directory=results, code_hash=compute_code_hash("05_rebasin_hmc"),
                     started=datetime(2026, 12, 6, 9, 0, tzinfo=UTC))
    publishing.record_progress("05_rebasin_hmc", src)
    assert published.restarted() == []   # this code's run: the next piece continues it
    pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (H100)", seconds=420, outcome="budget",
                     directory=results, code_hash="0123456789abcdef", started=datetime(2026, 12, 7, 9, 0, tzinfo=UTC))
    publishing.record_progress("05_rebasin_hmc", src)
    (line,) = published.restarted()
    assert line.startswith("05_rebasin_hmc: its paper run in progress (1 piece, 7 minutes of device compute on "
                           "cuda (H100), 2026-12-07) ran compute code 0123456789abcdef, this checkout's is "
                           f"{compute_code_hash('05_rebasin_hmc')}")
    assert line.endswith('python -m symlib.book.records lost 05_rebasin_hmc --tier paper --why "the code '
                         'that computes changed: ..."')
    assert published.restarted("full") == []
    publishing.record_lost("05_rebasin_hmc", "the code that computes changed: a test")
    assert published.restarted() == []   # recorded: the book says the run starts again
    pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (H100)", seconds=60, outcome="complete",
                     directory=results, code_hash="0123456789abcdef")
    publishing.record_progress("05_rebasin_hmc", src)
    assert published.restarted() == []   # a complete run restarts nothing



def test_a_run_continued_under_proven_equivalent_code_keeps_its_pieces_and_is_not_restarted(tmp_path, monkeypatch):
    """A code change that the registry of equivalences proves computes the same numbers (what
    ``same_numbers`` registers) continues the run in progress: its pieces under the old code
    still count, and no restart is named; without the proof the same change restarts it."""
    from symlib.book import equivalence
    from symlib.book.codehash import stage_code_hashes

    chapter = "01_ortho_skip"
    monkeypatch.setattr(published, "project_root_or_cwd", lambda: tmp_path)
    registry = tmp_path / "registry.json"
    monkeypatch.setattr(equivalence, "registry_path", lambda root=None: registry)
    current = stage_code_hashes(chapter)
    assert current   # chapter 1 declares its stages' code
    old = {s: f"{i:016x}" for i, s in enumerate(sorted(current))}
    results = tmp_path / "results"
    src = pieces.pieces_path(chapter, results)
    pieces.log_piece(chapter, profile="paper", device="cpu", seconds=600, outcome="budget", directory=results,
                     code_hash="0123456789abcdef", stage_hashes=old, started=datetime(2026, 12, 7, 9, 0, tzinfo=UTC))
    publishing.record_progress(chapter, src)
    (line,) = published.restarted()   # unproven: the next piece starts the run again
    assert line.startswith(f"{chapter}: its paper run in progress (1 piece, 10 minutes on cpu")
    equivalence.add([(s, old[s], current[s]) for s in current], "a test")
    assert published.restarted() == []
    assert "from an older version" not in published.progress_summary(chapter)
    # the next piece runs the new code: the run counts both pieces
    pieces.log_piece(chapter, profile="paper", device="cpu", seconds=300, outcome="budget", directory=results,
                     code_hash=compute_code_hash(chapter), stage_hashes=current,
                     started=datetime(2026, 12, 8, 9, 0, tzinfo=UTC))
    entries = pieces.read(chapter, results)
    run = pieces.in_progress(entries, "paper")
    assert run["pieces"] == 2 and run["seconds"] == 900 and run["abandoned"] == 0
    registry.unlink()   # without the proof the old piece was abandoned with its checkpoints
    run = pieces.in_progress(entries, "paper")
    assert run["pieces"] == 1 and run["seconds"] == 300 and run["abandoned"] == 1


def test_no_change_restarts_a_published_run_in_progress_unrecorded():
    for tier in published.TIERS:
        assert published.restarted(tier) == []


# --- integrity: every published record is sealed with a digest of what it asserts -------------

def test_every_published_record_passes_its_integrity_check():
    """A bad merge of published/*/*.json, or a number changed by hand, fails here."""
    for tier in published.TIERS:
        for path in sorted(published.published_dir(tier).glob("*.json")):
            record = json.loads(path.read_text())
            assert published.damage(record, path.parent / path.stem) == "", path


@pytest.mark.parametrize("tamper", [
    lambda r: r["tables"][next(iter(r["tables"]))]["rows"][0].__setitem__(0, "9.99"),   # a table number
    lambda r: r["claims"][0]["verdicts"]["reproduced"].__setitem__("holds", False),     # a flipped verdict
    lambda r: r["provenance"].__setitem__("profile_values", {"n": 1}),                  # profile values, old hash
])
def test_a_tampered_record_is_shown_as_damaged_never_current(tmp_path, tamper):
    """Before: a changed number, a flipped `holds` or changed profile values under the old
    profile hash all read as current."""
    config = _run(tmp_path)
    results = tmp_path / "results" / "01_ortho_skip.json"
    record = json.loads(results.read_text())
    record["tables"] = {"t": {"caption": "", "source": "", "columns": ["x"], "rows": [["1.0"]]}}
    results.write_text(json.dumps(record))
    publishing.publish("01_ortho_skip", source=tmp_path / "results", executed=tmp_path / "executed",
                dest=tmp_path / "published")
    path = tmp_path / "published" / "01_ortho_skip.json"
    intact = published.load("01_ortho_skip", tmp_path / "published")
    assert "damaged" not in intact and published.staleness(intact, config) == []
    record = json.loads(path.read_text())
    tamper(record)
    path.write_text(json.dumps(record))
    with pytest.warns(published.DamagedRecordWarning, match="does not match what it asserts"):
        damaged = published.load("01_ortho_skip", tmp_path / "published")
    assert published.staleness(damaged, config)[0].startswith("damaged: ")


def test_a_replaced_figure_damages_the_record(tmp_path):
    _run(tmp_path)
    publishing.publish("01_ortho_skip", source=tmp_path / "results", executed=tmp_path / "executed",
                dest=tmp_path / "published")
    (tmp_path / "published" / "01_ortho_skip" / "figure-1.png").write_bytes(PNG + b"x")
    with pytest.warns(published.DamagedRecordWarning):
        assert "damaged" in published.load("01_ortho_skip", tmp_path / "published")
