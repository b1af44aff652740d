"""`make compare`: a rerun's results file against its published record, and what moved."""

import json
import shutil

from symlib.book import published, publishing, rerun


def _claim(cid, reproduced, robust):
    return {"id": cid, "text": cid, "paper": "p", "ours": "o", "holds": reproduced,
            "verdicts": {"reproduced": {"holds": reproduced, "preconditions": []},
                         "robust": {"holds": robust, "preconditions": []}}}


def _record(**changes):
    record = {"chapter": "01_ortho_skip", "profile": "full", "seed": 0, "device": "cpu",
              "tables": {"t": {"columns": ["a"], "rows": [[1.0]]}},
              "claims": [_claim("gap", True, None), _claim("skip", False, False)], "wall_time_s": 10.0}
    record.update(changes)
    return record


def _publish(tmp_path, record):
    """``record`` as a published record (sealed, with a figure), in ``tmp_path/published``."""
    folder = tmp_path / "published"
    (folder / record["chapter"]).mkdir(parents=True)
    (folder / record["chapter"] / "fig.png").write_bytes(b"png")
    sealed = {**record, "figures": ["fig.png"], "figure_names": {"fig.png": "Figure 1"},
              "computed": {"device": "cpu"}, "published": "2026-01-02T00:00:00"}
    publishing._write(folder / f"{record['chapter']}.json", sealed)
    return folder


def _rerun(tmp_path, record):
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    (results / f"{record['chapter']}.json").write_text(json.dumps(record))
    return results


def test_an_identical_rerun_moved_nothing(tmp_path):
    folder = _publish(tmp_path, _record())
    results = _rerun(tmp_path, _record(wall_time_s=99.0))  # timings are not compared
    code, lines = rerun.report("01_ortho_skip", results=results, published_root=folder)
    assert code == 0 and lines[0].endswith("nothing moved"), lines


def test_a_moved_verdict_is_named_first_then_every_moved_value(tmp_path):
    folder = _publish(tmp_path, _record())
    moved = _record(claims=[_claim("gap", False, None), _claim("skip", False, False)],
                    tables={"t": {"columns": ["a"], "rows": [[1.5]]}})
    code, lines = rerun.report("01_ortho_skip", results=_rerun(tmp_path, moved), published_root=folder)
    assert code == 1
    assert "3 values moved; 1 verdict moved" in lines[0]
    assert lines[1] == "  verdict gap: reproduced holds -> does not hold"
    assert any("tables" in line and "1.5" in line for line in lines[2:]), lines
    # within a tolerance, the table's number has not moved
    close = _record(tables={"t": {"columns": ["a"], "rows": [[1.0 + 1e-9]]}})
    code, _ = rerun.report("01_ortho_skip", results=_rerun(tmp_path, close), published_root=folder, rtol=1e-6)
    assert code == 0


def test_it_says_what_is_missing(tmp_path):
    folder = _publish(tmp_path, _record())
    code, lines = rerun.report("01_ortho_skip", results=tmp_path / "nowhere", published_root=folder)
    assert code == 2 and "make chapter CHAPTER=01_ortho_skip PROFILE=full" in lines[0]
    code, lines = rerun.report("01_ortho_skip", results=_rerun(tmp_path, _record(profile="quick")),
                               published_root=folder)
    assert code == 2 and "is a `quick` run" in lines[0]
    shutil.rmtree(folder)
    code, lines = rerun.report("01_ortho_skip", results=tmp_path / "results", published_root=folder)
    assert code == 2 and "no published `full` record" in lines[0]


def test_the_command_line_exits_with_the_worst_status(tmp_path, monkeypatch, capsys):
    folder = _publish(tmp_path, _record())
    monkeypatch.setenv("SYMLIB_RESULTS", str(_rerun(tmp_path, _record())))
    monkeypatch.setattr(published, "published_dir", lambda tier="full": folder)
    assert rerun.main(["01_ortho_skip"]) == 0
    assert "nothing moved" in capsys.readouterr().out
    assert rerun.main(["01_ortho_skip", "03_sgm_vi"]) == 2
