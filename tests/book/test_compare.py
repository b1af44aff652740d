"""symlib.book.compare: two results records differ when a number, verdict or text moved, not
when only timings or the run's bookkeeping did."""

import copy
import json
from pathlib import Path

import pytest

from symlib.book import compare
from symlib.book.compare import compare_dirs, compare_records

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "quick-results"


def _record(chapter="09_example") -> dict:
    return {
        "chapter": chapter,
        "profile": "quick",
        "seed": 0,
        "device": "cpu",
        "wall_time_s": 12.5,
        "rendered_from_cache": False,
        "provenance": {"commit": "abc", "profile_hash": "p1", "code_hash": "c1", "computed_with": {}},
        "versions": {"python": "3.11.7", "torch": "2.13.0+cpu"},
        "tables": {
            "table1": {
                "caption": "ours beside the paper's",
                "source": "",
                "columns": ["method", "TV to gold", "time (s)", "train seconds", "ESS / s"],
                "rows": [["MFVI", 0.25, 3.1, 2.0, 10.0], ["SGM-VI", 0.125, 4.2, 2.5, 11.0]],
            }
        },
        "claims": [
            {"id": "sgm-beats-mfvi", "text": "SGM-VI is closer to gold", "paper": "Table 1", "ours": "TV 0.125 vs 0.25",
             "holds": True, "criterion": "lower TV", "kind": "claim", "verdict": "holds",
             "preconditions": [{"name": "rhat", "criterion": "R-hat <= 1.01", "measured": "1.003", "met": True}]},
            {"id": "second", "text": "t", "paper": "p", "ours": "o", "holds": None, "criterion": "", "kind": "claim",
             "verdict": "not judged", "preconditions": []},
        ],
        "errata": [{"id": "typo", "paper_says": "a", "correction": "b", "where": "Sec. 2"}],
        "robustness": {
            "sgm-beats-mfvi": {"caption": "", "source": "", "columns": ["choice", "verdict", "ours"],
                               "rows": [["this run", "holds", "TV 0.125 vs 0.25"]]}
        },
        "notes": {"timings_s": {"VI": 7.9}, "gold": {"wall_s": 6.3, "step_size": 0.005}, "claim_sections": {"x": "y"}},
    }


def test_identical_records_are_identical():
    result = compare_records(_record(), _record())
    assert result.identical and result.differences == [] and result.machine_differences == []


def test_bookkeeping_is_ignored():
    other = _record()
    other.update(wall_time_s=99.0, rendered_from_cache=True, provenance={"commit": "def"}, versions={},
                 computed={"commit": "x"}, published="2026-11-26T00:00:00+00:00")
    result = compare_records(_record(), other)
    assert result.identical and result.machine_differences == []


def test_a_changed_number_differs_and_is_named():
    other = _record()
    other["tables"]["table1"]["rows"][1][1] = 0.126
    result = compare_records(_record(), other)
    assert not result.identical
    assert result.differences == ["tables.table1.rows[1] (\"SGM-VI\")['TV to gold']: 0.125 -> 0.126"]


def test_a_changed_timing_only_is_identical_but_listed():
    other = _record()
    for row in other["tables"]["table1"]["rows"]:
        row[2:] = [v * 3 for v in row[2:]]  # time (s), seconds, ESS / s
    other["notes"]["timings_s"]["VI"] = 1.0
    other["notes"]["gold"]["wall_s"] = 60.0
    result = compare_records(_record(), other)
    assert result.identical
    assert len(result.machine_differences) == 8
    assert "notes.gold.wall_s: 6.3 -> 60.0" in result.machine_differences


def test_a_note_that_is_not_a_timing_counts():
    other = _record()
    other["notes"]["gold"]["step_size"] = 0.006
    assert compare_records(_record(), other).differences == ["notes.gold.step_size: 0.005 -> 0.006"]


def test_a_changed_verdict_differs():
    other = _record()
    claim = other["claims"][0]
    claim.update(holds=False, verdict="does not hold")
    result = compare_records(_record(), other)
    assert result.differences == [
        "claims[sgm-beats-mfvi].holds: true -> false",
        'claims[sgm-beats-mfvi].verdict: "holds" -> "does not hold"',
    ]


def test_preconditions_errata_robustness_and_run_settings_are_compared():
    other = _record()
    other["claims"][0]["preconditions"][0]["measured"] = "1.004"
    other["errata"][0]["correction"] = "c"
    other["robustness"]["sgm-beats-mfvi"]["rows"][0][1] = "does not hold"
    other["seed"] = 1
    assert compare_records(_record(), other).differences == [
        "seed: 0 -> 1",
        "claims[sgm-beats-mfvi].preconditions[0].measured: \"1.003\" -> \"1.004\"",
        'errata[typo].correction: "b" -> "c"',
        "robustness.sgm-beats-mfvi.rows[0] (\"this run\")['verdict']: \"holds\" -> \"does not hold\"",
    ]


def test_items_added_removed_or_reordered_differ():
    other = _record()
    other["claims"].reverse()
    other["tables"]["table2"] = other["tables"]["table1"]
    del other["errata"][0]
    other["notes"]["new"] = 1
    assert compare_records(_record(), other).differences == [
        "tables.table2: only in B",
        "claims: same items in another order",
        "errata[typo]: only in A",
        "notes.new: only in B",
    ]


def test_a_number_is_not_a_bool_and_rtol_is_opt_in():
    other = _record()
    other["tables"]["table1"]["rows"][0][1] = 0.25 * (1 + 1e-12)
    assert not compare_records(_record(), other).identical
    assert compare_records(_record(), other, rtol=1e-9).identical
    other = _record()
    other["claims"][0]["holds"] = 1
    assert not compare_records(_record(), other).identical


def test_a_dropped_timing_column_is_a_machine_difference_other_columns_still_compare():
    other = _record()
    table = other["tables"]["table1"]
    table["columns"] = table["columns"][:2]
    table["rows"] = [[row[0], row[1]] for row in table["rows"]]
    result = compare_records(_record(), other)
    assert result.identical and len(result.machine_differences) == 1
    table["rows"][0][1] = 0.3
    assert len(compare_records(_record(), other).differences) == 1


def test_per_chapter_machine_tables_claims_and_phrases():
    a, b = _record("03_sgm_vi"), _record("03_sgm_vi")
    b["claims"][0]["id"] = a["claims"][0]["id"] = "cost-linear-in-K"
    b["claims"][0].update(holds=False, verdict="does not hold", ours="slope 0.1 ms")
    a["tables"]["cost_per_step"] = {"caption": "", "source": "", "columns": ["K", "× MFVI"], "rows": [[1, 1.0]]}
    b["tables"]["cost_per_step"] = {"caption": "", "source": "", "columns": ["K", "× MFVI"], "rows": [[1, 1.7]]}
    result = compare_records(a, b)
    assert result.identical and len(result.machine_differences) == 4

    a, b = _record("04_constrained_models"), _record("04_constrained_models")
    a["claims"][1]["ours"] = "median bulk ESS 9 vs 8; per second 0.9 vs 1.2; robustness: none"
    b["claims"][1]["ours"] = "median bulk ESS 9 vs 8; per second 2.5 vs 2.3; robustness: none"
    assert compare_records(a, b).identical
    b["claims"][1]["ours"] = "median bulk ESS 9 vs 7; per second 2.5 vs 2.3; robustness: none"
    assert not compare_records(a, b).identical


def _write(folder: Path, *records) -> Path:
    folder.mkdir()
    for record in records:
        (folder / f"{record['chapter']}.json").write_text(json.dumps(record))
    return folder


def test_command_line_prints_per_chapter_and_exits_1_on_a_difference(tmp_path, capsys):
    changed = _record("01_b")
    changed["claims"][0].update(holds=False, verdict="does not hold")
    a = _write(tmp_path / "a", _record("00_a"), _record("01_b"), _record("02_c"))
    b = _write(tmp_path / "b", _record("00_a"), changed)
    assert compare.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "00_a: identical"
    assert out[1] == "01_b: 2 differences"
    assert out[2] == "  claims[sgm-beats-mfvi].holds: true -> false"
    assert out[4].startswith("02_c: 1 differences") and f"no 02_c.json in {b}" in out[5]
    assert compare.main([str(a), str(a)]) == 0
    assert capsys.readouterr().out.splitlines() == ["00_a: identical", "01_b: identical", "02_c: identical"]


def test_command_line_refuses_a_missing_folder_clearly(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        compare.main([str(tmp_path / "nowhere"), str(tmp_path)])
    assert exit_.value.code == 2
    assert "nowhere is not a folder of results files" in capsys.readouterr().err


def test_an_unreadable_results_file_is_named(tmp_path):
    a = _write(tmp_path / "a", _record("00_a"))
    b = _write(tmp_path / "b")
    (b / "00_a.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"cannot read results file .*b/00_a.json"):
        compare_dirs(a, b)


def test_records_must_be_dicts():
    with pytest.raises(TypeError, match="results record B must be a dict"):
        compare_records(_record(), [])


def test_the_quick_baseline_is_identical_with_itself_and_a_moved_number_shows():
    files = sorted(GOLDEN.glob("*.json"))
    assert len(files) == 8, f"expected the 8 chapters' quick results in {GOLDEN}"
    assert all(c.identical and not c.machine_differences for c in compare_dirs(GOLDEN, GOLDEN).values())
    record = json.loads(files[-1].read_text())
    moved = copy.deepcopy(record)
    name, table = next(iter(moved["tables"].items()))
    column = next(i for i, v in enumerate(table["rows"][0])
                  if isinstance(v, float) and not compare._machine_column(table["columns"][i]))
    value = table["rows"][0][column]
    table["rows"][0][column] = value + max(abs(value), 1.0) * 1e-9  # one number moved by a hair
    [difference] = compare_records(record, moved).differences
    assert difference.startswith(f"tables.{name}.rows[0]")
