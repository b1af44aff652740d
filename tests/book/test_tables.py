"""The one table helper every chapter uses: numbering, captions, formats, and the full tier."""

import json
import re

import pandas as pd
import pytest

from symlib.book import published, publishing, runtime, tables, words
from symlib.book.provenance import provenance
from symlib.book.results import ChapterResults
from symlib.chapters.ortho_skip.profiles import PROFILES

CHAPTER = "01_ortho_skip"


def _frame(rmse=(0.123456, 0.5)):
    return pd.DataFrame({"variant": ["plain", "skip"], "train RMSE": list(rmse),
                         "RMSE (paper)": [0.2, 0.3], "weights at prior": [1200, 35]})


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path / "results"))
    return runtime.start(CHAPTER, PROFILES, profile="smoke", seed=0, device="cpu")


@pytest.fixture
def publish_fake(tmp_path, monkeypatch):
    """Write a fake published `full` record into a temporary published/full/ folder."""
    folder = tmp_path / "published" / "full"
    monkeypatch.setattr(published, "published_dir",
                        lambda tier="full": folder if tier == "full" else tmp_path / "published" / tier)

    def write(frame, *, config=PROFILES["full"], claims=None, name="sinc_metrics"):
        flat = frame.reset_index() if not isinstance(frame.index, pd.RangeIndex) else frame
        record = {
            "chapter": CHAPTER, "profile": "full", "seed": 0, "device": "cuda", "wall_time_s": 600.0,
            "published": "2026-01-02T03:04:05+00:00", "provenance": provenance(CHAPTER, config) | {"commit": "abcdef1234567890"},
            "tables": {name: {"caption": "c", "source": "", "columns": list(flat.columns),
                              "rows": flat.to_numpy().tolist()}},
            "claims": claims or [], "figures": [],
        }
        folder.mkdir(parents=True, exist_ok=True)
        publishing._write((folder / f"{CHAPTER}.json"), record)
        return record

    return write


def test_chapter_label():
    assert tables.chapter_label("02a_symmetry_removal") == "2a"
    assert tables.chapter_label("00_symmetries") == "0"
    assert tables.chapter_label("06_synthesis") == "6"


def test_format_column_one_format_per_column():
    assert tables.format_column([0.123456, 1.5, 12.0]) == ["0.12", "1.50", "12.00"]
    assert tables.format_column([1200, 35.0]) == ["1,200", "35"]
    assert tables.format_column([1e-5, 0.3]) == ["1.00e-05", "3.00e-01"]
    assert tables.format_column([None, float("nan"), "text"]) == ["—", "—", "text"]
    assert tables.format_column([0.25], "{:.0%}") == ["25%"]


def test_tables_numbered_and_captioned_without_full_run(run, publish_fake):
    first = tables.show_table(run, "sinc_metrics", _frame(), caption="Per-variant metrics").data
    second = tables.show_table(run, "other", _frame(), caption="Again").data
    assert '<caption><span class="caption-number">Table 1.1 </span>' in first
    assert 'id="table-1-1"' in first and 'id="table-1-2"' in second
    assert 'class="symlib-table-scroll"' in first  # a wide table scrolls inside the column
    assert '<th class="symlib-paper">RMSE (paper)</th>' in first  # paper columns set apart
    assert "0.123" in first and "1,200" in first
    assert "full = published run" not in first  # no full run published: nothing claims one
    assert run.results.tables["sinc_metrics"]["caption"] == "Per-variant metrics"


def test_full_numbers_beside_quick_with_provenance(run, publish_fake):
    publish_fake(_frame(rmse=(0.05, 0.06)))
    out = tables.show_table(run, "sinc_metrics", _frame(), caption="Per-variant metrics").data
    # differing numbers: the full run's table in front, numbered; this build's one click away
    front, this_build = out.split('<details class="symlib-other-tier">')
    assert '<span class="caption-number">Table 1.1 </span>' in front and ">0.05" in front and "0.123" not in front
    assert "1 of its columns differ from this build's (train RMSE)" in front
    assert '<span class="caption-number">Table 1.1 (this build) </span>' in this_build and ">0.123<" in this_build
    assert front.count('<th class="symlib-paper">RMSE (paper)</th>') == 1  # paper numbers once per table
    assert "colspan" not in out  # no interleaved quick/full columns
    # the run's provenance is said once per chapter (the glance box); a table points there
    assert "full = the published full run (its provenance:" in out and "abcdef123456" not in out
    assert "computed on cuda at commit <code>abcdef123456</code>, published 2026-01-02" in tables.provenance_line(
        published.load(CHAPTER), [])
    assert "older version" not in out


def test_stale_full_run_is_marked_not_fatal(run, publish_fake):
    import dataclasses

    older = dataclasses.replace(PROFILES["full"], n_steps=PROFILES["full"].n_steps + 1)
    publish_fake(_frame(rmse=(0.05, 0.06)), config=older)
    out = tables.show_table(run, "sinc_metrics", _frame(), caption="Per-variant metrics").data
    assert "from an older version of the code" in out and "symlib-full symlib-stale" in out
    record, stale = tables.published_tier(CHAPTER, run.config)
    assert "profile changed" in tables.provenance_line(record, stale)  # why: said once, at the chapter's top


def test_full_table_of_another_shape_in_front(run, publish_fake):
    publish_fake(_frame().iloc[:1])
    out = tables.show_table(run, "sinc_metrics", _frame(), caption="Per-variant metrics").data
    front, behind = out.split('<details class="symlib-other-tier">')
    assert 'id="table-1-1"' in front and "symlib-full" in front and "other rows or columns" in front
    assert front.count("<tr") == 2  # the full run's one row (and its header)
    assert "Table 1.1 (this build)" in behind and behind.count("<tr") == 1 + len(_frame())


def test_ledger_shows_status_symbols_and_tiers(run, publish_fake, capsys):
    claims = [{"id": "plain-underfits", "text": "t", "paper": "p", "ours": "o", "holds": False,
               "criterion": "", "preconditions": [], "kind": "claim", "verdict": "does not hold"}]
    publish_fake(_frame(), claims=claims)
    run.results.add_claim("plain-underfits", "plain VI underfits", "yes", "it does", True, criterion="x")
    html_out = tables.render_ledger(run.results.to_dict(), label="Table 1.3", anchor="table-1-3",
                                    full_record=published.load(CHAPTER), stale=[],
                                    sections={"plain-underfits": "figure-1-the-four-variants"})
    assert "✓ holds" in html_out and "✗ does not hold" in html_out
    assert 'href="#figure-1-the-four-variants"' in html_out and 'id="claim-plain-underfits"' in html_out


def test_show_ledger_links_sections_and_refuses_unknown_heading(run, publish_fake):
    run.results.add_claim("plain-underfits", "plain VI underfits", "yes", "it does", True)
    with pytest.raises(ValueError, match="no section heading"):
        tables.show_ledger(run, sections={"plain-underfits": "No such heading"})
    meta = tables.show_ledger(run, sections={"plain-underfits": "Figure 1"})
    section = meta["notes"]["claim_sections"]["plain-underfits"]
    assert re.fullmatch(r"figure-1-[a-z0-9-]+", section)


def test_ledger_names_the_full_runs_own_unmet_preconditions(run, publish_fake):
    unmet = {"name": "accuracy", "criterion": "median accuracy >= 0.858", "measured": "0.627", "met": False}
    met = {"name": "splits", "criterion": "enough splits", "measured": "8", "met": True}
    claims = [{"id": "c", "text": "t", "paper": "p", "ours": "o", "holds": None, "criterion": "",
               "preconditions": [unmet, met], "kind": "claim", "verdict": "not judged"}]
    publish_fake(_frame(), claims=claims)
    run.results.add_claim("c", "a claim", "yes", "it does", True, criterion="x")
    out = tables.render_ledger(run.results.to_dict(), label="Table 1.3", anchor="table-1-3",
                               full_record=published.load(CHAPTER), stale=[])
    # the full run's own reason, in one sentence; every precondition one click away
    assert "reached 0.627; judging needs median accuracy ≥ 0.858" in out
    assert "<details><summary>Preconditions</summary>" in out and "✓ enough splits: 8" in out


def test_full_run_unmet_lists_withheld_claims(run, publish_fake):
    assert tables.full_run_unmet(CHAPTER) == ""  # nothing published
    pre = {"name": "rhat", "criterion": "split R-hat <= 1.01", "measured": "2.41", "met": False}
    claims = [{"id": i, "text": "t", "paper": "p", "ours": "o", "holds": None, "criterion": "",
               "preconditions": [pre], "kind": "claim", "verdict": "not judged"} for i in ("a", "b")]
    publish_fake(_frame(), claims=claims)
    out = tables.full_run_unmet(CHAPTER)
    # the claims by their numbers in the ledger's cards, linked to the cards, not by their ids
    assert "split R-hat ≤ 1.01: measured **2.41**, so not judged in both columns: claims [1](#claim-a), [2](#claim-b)" in out
    # a published paper run is listed first, named, and the full run's list follows
    paper = json.loads((published.published_dir() / f"{CHAPTER}.json").read_text())
    paper["profile"] = "paper"
    paper["claims"] = [dict(c, preconditions=[dict(pre, measured="1.30")]) for c in paper["claims"][:1]]
    published.published_dir("paper").mkdir(parents=True)
    publishing._write((published.published_dir("paper") / f"{CHAPTER}.json"), paper)
    both = tables.full_run_unmet(CHAPTER)
    assert both.index("published `paper` run") < both.index("published `full` run")
    assert "measured **1.30**, so not judged in both columns: claim [1](#claim-a)\n" in both
    assert both.endswith(out) and tables.full_run_unmet(CHAPTER, ["full"]) == out
    publish_fake(_frame(), claims=[])
    assert "Every precondition of the published `full` run" in tables.full_run_unmet(CHAPTER)


def test_timing_columns_are_left_out_of_comparisons():
    # the issue: a cached rerun of chapter 6 failed its comparison on "time (s)" (0.0297 vs 0.983)
    frame = pd.DataFrame({"method": ["a"], "TV to gold": [0.1], "time (s)": [0.03], "time (s) se": [0.01],
                          "train time (s)": [2.0], "wall time (s)": [1.0], "size (kB)": [4.0]})
    assert list(tables.without_timing(frame).columns) == ["method", "TV to gold", "size (kB)"]
    rerun = frame.assign(**{"time (s)": [0.98]})
    pd.testing.assert_frame_equal(tables.without_timing(rerun), tables.without_timing(frame))
    assert not tables.is_timing_column("runtime (s)") and not tables.is_timing_column("times")


def test_a_page_says_when_its_numbers_were_computed_by_other_code():
    from symlib.book.provenance import stage_code_hash
    from symlib.data import data_hash

    chapter = "00_symmetries"
    now = {"code_hash": stage_code_hash(chapter), "data_hash": data_hash(), "stages": [chapter], "entries": 2}
    meta = {"chapter": chapter, "provenance": {"computed_with": [now]}}
    assert tables.older_code_note(meta) == ""
    assert tables.older_code_note({"chapter": chapter, "provenance": {}}) == ""
    old = {"code_hash": "0123456789abcdef", "data_hash": now["data_hash"], "stages": [f"{chapter}-brute"], "entries": 1}
    meta["provenance"]["computed_with"].append(old)
    note = tables.older_code_note(meta)
    assert "`00_symmetries-brute` with code `0123456789abcdef`" in note
    assert f"this checkout: code `{now['code_hash']}`" in note
    unknown = dict(old, code_hash=None)
    assert "unrecorded" in tables.older_code_note({"chapter": chapter, "provenance": {"computed_with": [unknown]}})


@pytest.mark.parametrize("name", ["time (s)", "train time (s)", "time (s) se", "seconds", "ESS / s",
                                  "NUTS s", "sampling s", "warmup s", "direct: ms per step"])
def test_columns_that_time_the_machine_are_timing_columns(name):
    assert tables.is_timing_column(name)


@pytest.mark.parametrize("name", ["component sd s", "min ESS params", "a*/s (ours)", "splits", "TV to gold"])
def test_other_columns_are_not(name):
    assert not tables.is_timing_column(name)


def test_the_ledger_shows_both_verdicts_and_marks_each_preconditions_column():
    from symlib.book.results import Claim, precondition

    rhat = precondition("rhat", "split R-hat <= 1.01 (4 chains)", 1.3, False, column="robust")
    accept = precondition("accept", "acceptance in the authors' band", 0.7, True, column="reproduced",
                          source="authors' hmc.py")
    claim = Claim("c", "a claim", "p", "o", holds=True, criterion="x > 1", preconditions=(rhat, accept)).to_dict()
    old = {k: v for k, v in claim.items() if k != "verdicts"}  # a results file from before the two columns
    html_out = tables.render_ledger({"profile": "quick", "claims": [claim]}, label="Table 1.1", anchor="t")
    assert "<th>reproduced</th><th>robust</th>" in html_out and ">quick (this build)</th>" in html_out
    assert "✓ holds" in html_out and "○ not judged" in html_out
    assert "reached 1.3; judging needs split R-hat ≤ 1.01 (4 chains)" in html_out
    assert "(robust column)" in html_out and "(reproduced column; source: authors&#x27; hmc.py)" in html_out
    old_html = tables.render_ledger({"profile": "quick", "claims": [old]}, label="T", anchor="t")
    assert old_html.count(words.status_badge("—")) == 1  # no robust verdict recorded: a dash


def test_a_table_of_many_columns_is_set_compact():
    wide = {"caption": "c", "source": "", "columns": [f"m{i}" for i in range(tables.COMPACT_COLUMNS)],
            "rows": [[1.0] * tables.COMPACT_COLUMNS]}
    narrow = dict(wide, columns=wide["columns"][:3], rows=[[1.0] * 3])
    assert 'class="symlib-table symlib-compact"' in tables.render_table(wide, label="T", anchor="t")
    assert 'class="symlib-table"' in tables.render_table(narrow, label="T", anchor="t")


def test_a_long_table_is_behind_a_toggle_with_its_caption_in_view():
    rows = [[float(i)] for i in range(tables.LONG_TABLE_ROWS + 1)]
    long = {"caption": "per epoch", "source": "", "columns": ["loss"], "rows": rows}
    out = tables.render_table(long, label="Table 2a.5", anchor="t")
    assert out.startswith('<details class="symlib-long-table"><summary>')
    assert "Table 2a.5</span>: per epoch (21 rows; show)</summary>" in out and 'id="t"' in out
    assert out.count("<tr") == 1 + len(rows)
    short = tables.render_table(dict(long, rows=rows[:3]), label="T", anchor="t")
    assert "<details" not in short


def test_a_long_table_with_a_full_run_has_one_toggle(run, publish_fake):
    n = tables.LONG_TABLE_ROWS + 1
    frame = pd.DataFrame({"epoch": range(n), "loss": [1.0 + i for i in range(n)]})
    publish_fake(frame.assign(loss=frame["loss"] * 2), name="curve")
    out = tables.show_table(run, "curve", frame, caption="per epoch").data
    assert out.count('<details class="symlib-long-table">') == 1


def _sweep(verdicts, settings):
    return pd.DataFrame({"choice": ["as run"] + ["lr"] * (len(settings) - 1), "setting": settings,
                         "verdict": verdicts, "robust verdict": verdicts, "ours": [f"v{i}" for i in range(len(settings))]})


def _fake_chapter(frames):
    from types import SimpleNamespace

    sweeps = [SimpleNamespace(claim=c) for c in ("plain-underfits", "skip-ood")]
    return SimpleNamespace(sweeps=sweeps, sweep_frame=lambda s, r: frames.get(s.claim),
                           judged_claims=lambda r: [SimpleNamespace(id="plain-underfits", text="The plain net underfits"),
                                                    SimpleNamespace(id="skip-ood", text="Skips help out of distribution")])


def test_sweeps_frame_one_table_claims_in_words_once_per_group():
    stored = {"columns": ["choice", "setting", "verdict", "failed preconditions"],
              "rows": [["as run", "this profile", "holds", ""], ["lr", "0.1", "not judged", "R-hat"]]}
    frame = tables.sweeps_frame({"plain-underfits": _sweep(["holds", "does not hold"], ["this profile", "0.1"]),
                                 "skip-ood": stored}, {"plain-underfits": "1"})
    assert list(frame.columns) == ["claim", "choice", "setting", "verdict", "robust verdict", "ours", "failed preconditions"]
    assert frame["claim"].tolist() == ["1", "", "skip-ood", ""]  # no label given: the id
    assert frame.loc[2, "robust verdict"] == "" and frame.loc[3, "failed preconditions"] == "R-hat"
    assert tables.sweeps_frame({}, {}) is None


def test_show_sweeps_full_run_in_front_with_one_line_per_claim(run, publish_fake):
    record = publish_fake(_frame())
    full = _sweep(["holds", "does not hold", "holds"], ["this profile", "0.1", "0.2"])
    record["robustness"] = {"plain-underfits": {"caption": "", "source": "", "columns": list(full.columns),
                                                "rows": full.to_numpy().tolist()}}
    path = published.published_dir() / f"{CHAPTER}.json"
    publishing._write(path, record)
    chapter = _fake_chapter({"plain-underfits": _sweep(["holds", "holds"], ["this profile", "0.1"])})
    out = tables.show_sweeps(chapter, run, results=None).data
    summary, out = out.split("<div", 1)
    assert "In the published full run" in summary
    assert '<li value="1"><em>The plain net underfits</em>: depends on lr; holds with this profile, 0.2' in summary
    assert "Skips help" not in summary  # swept by neither run
    front, behind = out.split('<details class="symlib-other-tier">')
    assert "symlib-full" in front and front.count("<tr") == 1 + 3 and "<td>1</td>" in front
    assert "(this build)" in behind and behind.count("<tr") == 1 + 2
    assert "plain-underfits" not in out  # claims in words, not ids
    # a build that sweeps nothing still shows the full run's table, alone
    alone = tables.show_sweeps(_fake_chapter({}), run, results=None).data
    assert "this build's profile computes no such table" in alone and alone.count("<tr") == 1 + 3


def test_show_sweeps_without_any_sweep_says_so(run, publish_fake):
    from IPython.display import Markdown

    publish_fake(_frame())  # a published run without robustness tables
    out = tables.show_sweeps(_fake_chapter({}), run, results=None)
    assert isinstance(out, Markdown) and "no sensitivity sweep" in out.data


def test_the_paper_run_goes_in_front_of_the_full_run(run, publish_fake, tmp_path):
    """With both tiers published: tables and the glance put the paper run's numbers in front (named),
    and each card has a row per published tier, paper first, then this build."""
    from symlib.book import cards

    full = publish_fake(_frame(rmse=(0.3, 0.4)))
    paper_dir = tmp_path / "published" / "paper"
    paper_dir.mkdir(parents=True)
    paper = dict(full, profile="paper", provenance=provenance(CHAPTER, PROFILES["paper"]) | {"commit": "0123456789ab"},
                 tables={"sinc_metrics": dict(full["tables"]["sinc_metrics"],
                                              rows=_frame(rmse=(0.2, 0.25)).to_numpy().tolist())},
                 claims=[{"id": "plain-underfits", "text": "t", "paper": "p", "ours": "paper ours", "holds": True,
                          "criterion": "", "preconditions": [], "kind": "claim", "verdict": "holds"}],
                 computed={"device": "cuda (H100)", "commit": "0123456789ab",
                           "pieces": {"pieces": 3, "minutes": 22.0}})
    publishing._write((paper_dir / f"{CHAPTER}.json"), paper)
    record, stale = tables.published_tier(CHAPTER, run.config)
    assert record["profile"] == "paper" and stale == []
    assert list(tables.published_tiers(CHAPTER, run.config)) == ["paper", "full"]
    assert tables.published_tier(CHAPTER, run.config, "full")[0]["profile"] == "full"
    out = tables.show_table(run, "sinc_metrics", _frame(), caption="Per-variant metrics").data
    assert "Numbers of the published paper run" in out and "paper = the published paper run" in out
    assert "22 minutes of device compute over 3 pieces" in tables.provenance_line(record, [])
    assert "In the published paper run" in cards.glance(CHAPTER, record)
    meta = {"profile": "smoke", "claims": [dict(paper["claims"][0], ours="smoke ours")]}
    html_out = tables.render_ledger(meta, label="Table 1.9", anchor="t",
                                    published_runs=tables.published_tiers(CHAPTER, run.config))
    rows = re.findall(r'<th scope="row">([^<]+)</th>', html_out)
    assert rows == ["paper (published)", "full (published)", "smoke (this build)"]
    assert "ours (paper (published))" in html_out and "paper ours" in html_out


def test_the_published_runs_figure_goes_in_front_and_this_builds_to_the_end(run, publish_fake, tmp_path, monkeypatch):
    """front_figure: in a build of another profile, the figure glued under a key is the published run's
    PNG (glued again under the key, with a caption line naming the run), and this build's figure is
    kept for the end of the page; without a published figure of that key, this build's stays."""
    import matplotlib.pyplot as plt

    record = publish_fake(_frame())
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 20
    folder = published.published_dir() / CHAPTER
    folder.mkdir(parents=True)
    (folder / "figure-1.png").write_bytes(png)
    record["figure_names"] = {"fig_fits": "figure-1.png"}
    publishing._write((published.published_dir() / f"{CHAPTER}.json"), record)
    glued = {}
    import myst_nb

    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.__setitem__(name, value))
    fig = plt.figure()
    tables.front_figure(run, "fig_fits", fig)
    assert glued["fig_fits"].data == png and "published full run" in glued["fig_fits_tier"].data
    tables.front_figure(run, "fig_gap", fig)                       # the published run has no such figure
    assert "fig_gap" not in glued and "This build's run" in glued["fig_gap_tier"].data
    box = tables._build_figures_html(run)
    assert box.count("<figure") == 1 and "This build, figure 1" in box and "smoke" in box
    plt.close(fig)


@pytest.mark.parametrize("full_rows", [1, 30])
def test_a_full_table_in_front_leaves_the_page_s_boxes_balanced(run, publish_fake, full_rows):
    """A published table of another shape in front: every <div> and <details> the table opens it
    closes, also when the full run's table is long enough to be collapsed (an extra </div> once
    closed the page's article and squeezed the text column to nothing)."""
    frame = pd.concat([_frame()] * (full_rows // 2 + 1)).iloc[:full_rows]
    publish_fake(frame)
    out = tables.show_table(run, "sinc_metrics", _frame(), caption="Per-variant metrics").data
    assert out.count("<div") == out.count("</div>") and out.count("<details") == out.count("</details>")
    assert "Numbers of the published full run" in out


def test_two_columns_of_sentences_share_the_text_width(run):
    """One column of sentences gets room to be read (min-width 20-36 em); two or more share it
    (14-24 em each for two, 9-16 for three), so that a sweep's 'failed preconditions' and 'ours', or the
    reproducibility page's three tiers, fit the text column; and together no more than the text
    column leaves (test_sentence_widths_leave_the_other_columns_room)."""
    long = "a precondition that failed, with its source and the value reached, " * 4
    one = tables.show_table(run, "one", pd.DataFrame({"k": ["a"], "why": [long]}), store=False).data
    two = tables.show_table(run, "two", pd.DataFrame({"k": ["a"], "why": [long], "ours": [long]}), store=False).data
    width = len(long) // 14                                      # 19 em: between both floors and caps
    assert re.findall(r"min-width: (\d+)em", one) == ["20"], "one column of sentences: its floor"
    assert re.findall(r"min-width: (\d+)em", two) == [str(width)] * 2
    very = long * 4
    assert re.findall(r"min-width: (\d+)em", tables.show_table(
        run, "three", pd.DataFrame({"k": ["a"], "why": [very]}), store=False).data) == ["36"]
    four = tables.show_table(run, "four", pd.DataFrame({"k": ["a"], "why": [very], "ours": [very]}), store=False).data
    assert re.findall(r"min-width: (\d+)em", four) == ["22", "22"], \
        "two columns at their cap (24 em) leave the text column (50 em, 3 spare) too little for 'k': 22 em each"
    three = pd.DataFrame({"k": ["a"], "why": [very], "ours": [very], "paper": [long]})
    assert re.findall(r"min-width: (\d+)em", tables.show_table(run, "five", three, store=False).data) == ["15"] * 3, \
        "three columns of sentences share two columns' width (16 em each), less what 'k' needs"
    assert re.findall(r"min-width: (\d+)em", tables.show_table(
        run, "six", pd.DataFrame({"k": ["a"], **{c: ["short words " * 10] for c in "wxy"}}), store=False).data) == \
        ["9"] * 3, "three short sentence columns: each at its floor of 28 // 3 em"


def test_the_text_quotes_the_published_runs_numbers_where_it_has_them(run, publish_fake, monkeypatch):
    """glue_quotes: this build's values go into its results file; a published record that has every
    quote (a NaN written as null) is what the text quotes, and the returned line says so; without
    the published quotes, or in a build of a published tier, this build's are glued."""
    import types

    import myst_nb

    glued = {}
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.__setitem__(name, value))
    chapter = types.SimpleNamespace(quotes=[types.SimpleNamespace(name="acc", value=lambda r: r["acc"]),
                                            types.SimpleNamespace(name="which", value=lambda r: "plain, skip")])
    values, line = tables.glue_quotes(run, chapter, {"acc": 0.25}, extra=3)
    assert glued == values == {"acc": 0.25, "which": "plain, skip", "extra": 3.0}
    assert "this build's (profile `smoke`)" in line.data
    assert run.results.notes["quotes"] == values

    record = publish_fake(_frame())
    record["notes"] = {"quotes": {"acc": None, "which": "skip"}}
    publishing._write((published.published_dir() / f"{CHAPTER}.json"), record)
    values, line = tables.glue_quotes(run, chapter, {"acc": 0.25})
    assert glued["which"] == values["which"] == "skip" and glued["acc"] != glued["acc"]  # NaN
    assert "published full run's" in line.data and "older version" not in line.data
    assert run.results.notes["quotes"]["acc"] == 0.25                   # this build's own, for its file

    record["notes"] = {"quotes": {"which": "skip"}}                      # one missing: this build's
    publishing._write((published.published_dir() / f"{CHAPTER}.json"), record)
    assert "this build's" in tables.glue_quotes(run, chapter, {"acc": 0.25})[1].data and glued["acc"] == 0.25
    full = runtime.start(CHAPTER, PROFILES, profile="full", seed=0, device="cpu")
    record["notes"] = {"quotes": {"acc": 0.5, "which": "skip"}}
    publishing._write((published.published_dir() / f"{CHAPTER}.json"), record)
    assert "this build's (profile `full`)" in tables.glue_quotes(full, chapter, {"acc": 0.25})[1].data
    assert glued["acc"] == 0.25


def test_outcome_dependent_sentences_follow_the_published_runs_facts(run, publish_fake):
    """published_facts: this build's facts go into its results file; the published run's come back
    (nested, NaN from null) when its record has every key, else this build's."""
    ours = {"agreement": {"HMC q_r": 0.9, "Ens. q_r": 0.8}, "lambdas": [0.25, 0.5], "monotone": True}
    assert tables.published_facts(run, "table1", ours) is ours                 # nothing published
    assert run.results.notes["facts"]["table1"] is ours
    record = publish_fake(_frame())
    theirs = {"agreement": {"HMC q_r": None, "Ens. q_r": 0.7}, "lambdas": [0.5], "monotone": False, "more": 1}
    record["notes"] = {"facts": {"table1": theirs}}
    publishing._write((published.published_dir() / f"{CHAPTER}.json"), record)
    got = tables.published_facts(run, "table1", ours)
    assert got["agreement"]["Ens. q_r"] == 0.7 and got["agreement"]["HMC q_r"] != got["agreement"]["HMC q_r"]
    assert got["lambdas"] == [0.5] and got["monotone"] is False
    assert tables.published_facts(run, "table1", {**ours, "agreement": {"VI q": 1.0}}) is not theirs  # a key missing
    assert tables.published_facts(run, "table1", {**ours, "agreement": {"VI q": 1.0}})["agreement"] == {"VI q": 1.0}


def test_reader_words_turn_code_identifiers_into_words():
    assert words.reader_words("mnist_init_sd = 0.1") == "MNIST initial sd = 0.1"
    assert words.reader_words("n_train_samples = 8") == "number of train samples = 8"
    assert words.reader_words("n_steps = 80000") == "number of steps = 80000"   # a count, not math
    assert words.reader_words("rhat (robust), bulk_ess (robust)") == "R-hat (robust), bulk ESS (robust)"
    assert words.reader_words("optunet_momentum = 0.0; lr 0.1, this run") == "OptuNet momentum = 0.0; lr 0.1, this run"
    assert words.reader_words("q_r beats q_d; d_h = 20") == "q_r beats q_d; d_h = 20"  # math, not code
    assert words.reader_words("split R-hat <= 1.01, ESS >= 400") == "split R-hat ≤ 1.01, ESS ≥ 400"


def test_show_sweeps_names_settings_in_words_not_code(run, publish_fake):
    publish_fake(_frame())  # no published sweep: this build's in front
    frame = pd.DataFrame({"choice": ["this run", "mnist_init_sd"], "setting": ["this profile", "mnist_init_sd = 0.1"],
                          "verdict": ["holds", "does not hold"], "robust verdict": ["not judged", "not judged"],
                          "failed preconditions": ["rhat (robust)", "rhat (robust), bulk_ess (robust)"]})
    out = tables.show_sweeps(_fake_chapter({"plain-underfits": frame}), run, results=None).data
    assert "depends on MNIST initial sd; holds with this profile" in out
    assert "MNIST initial sd = 0.1" in out and "R-hat (robust), bulk ESS (robust)" in out
    assert "mnist_init_sd" not in out and "bulk_ess" not in out



# --------------------------------------------------------------------------- what a table shows


def _stored(frame: pd.DataFrame) -> dict:
    """``frame`` as a results file stores a table (its index kept as columns)."""
    scratch = ChapterResults(CHAPTER, "smoke", 0, "cpu")
    scratch.add_table("t", frame)
    return scratch.tables["t"]


def _text(cell: str) -> str:
    return re.sub(r"<[^>]+>", "", cell)


def test_a_table_of_numbered_columns_is_shown_turned():
    """Fifteen splits across are shown as fifteen rows (as pandas' transpose has them), each
    model's column in its own format: the paper's 0.37 is no longer printed 0.3700 for sharing a
    column with our 0.0876; its rows become paper columns, shaded."""
    splits = pd.DataFrame({"unconstrained (ours)": [0.0876 + i / 100 for i in range(15)],
                           "unconstrained (paper)": [0.37] * 15, "constrained (ours)": [0.1 * (i + 1) for i in range(15)]},
                          index=pd.Index(range(1, 16), name="split"))
    stored = _stored(splits.T)                                 # as chapter 4 stores it: splits across
    assert stored["columns"] == ["index", *map(str, range(1, 16))]
    columns, paper_rows, _ = tables.shown_columns(stored)
    assert [c.name for c in columns] == ["", *splits.columns]
    assert [_text(x) for x in columns[0].cells] == [str(i) for i in range(1, 16)]
    for c, name in zip(columns[1:], splits.columns, strict=True):
        assert [float(_text(x)) for x in c.cells] == pytest.approx(splits[name].tolist(), abs=5e-4)
    assert _text(columns[2].cells[0]) == "0.370" and [c.paper for c in columns] == [False, False, True, False]
    assert paper_rows == [False] * 15
    few = _stored(splits.iloc[:4].T)                           # four splits: as stored
    assert [c.name for c in tables.shown_columns(few)[0]] == few["columns"]
    out = tables.render_table(stored, label="Table 4.3", anchor="t")
    assert out.count("<tr") == 16 and "symlib-compact" not in out


def test_a_column_and_its_std_read_as_mean_plus_minus_std():
    frame = pd.DataFrame({"NoT(P)": [0, 21], "distance": [0.8, 10.0], "distance (std)": [0.043, 0.087],
                          "barrier": [0.002, 0.007]})
    columns, _, how = tables.shown_columns(_stored(frame))
    assert [c.name for c in columns] == ["NoT(P)", "distance ± std", "barrier"] and how == ""
    assert [_text(x) for x in columns[1].cells] == ["0.8 ± 0.0430", "10.0 ± 0.0870"]
    assert columns[1].kinds == ["spread", "spread"] and columns[0].kinds == ["num", "num"]
    # it breaks only before the ±: each side is kept whole
    assert columns[1].cells[0] == '<span class="symlib-nowrap">0.8</span> <span class="symlib-nowrap">± 0.0430</span>'


def test_many_paper_columns_are_shown_under_ours():
    """Four pairs or more (``X`` or ``X (ours)`` beside ``X (paper)``) become one column each, the
    paper's number on a shaded line under ours; fewer stay side by side."""
    pairs = {"method": ["MFVI", "SGM"]}
    for a in ("0.05", "0.1", "0.15", "0.2"):
        pairs |= {f"a={a} (ours)": ["0.070 ± 0.009", "0.065 ± 0.012"], f"a={a} (paper)": ["0.11±0.22", "0.09±0.19"]}
    columns, _, how = tables.shown_columns(_stored(pd.DataFrame(pairs)))
    assert [c.name for c in columns] == ["method", "a=0.05", "a=0.1", "a=0.15", "a=0.2"]
    assert "paper's number (shaded) is under ours" in how
    cell = columns[1].cells[0]
    assert _text(cell) == "0.070 ± 0.0090.11 ± 0.22" and '<span class="symlib-paper symlib-under">' in cell
    assert columns[1].kinds == ["spread", "spread"]
    three = _stored(pd.DataFrame({k: v for k, v in pairs.items() if "0.2" not in k}))
    assert len(tables.shown_columns(three)[0]) == 7, "three pairs: side by side, as stored"
    metrics = {"method": list("abc"), **{f"{m}{s}": [1.5] * 3 for m in ("MMD", "NS", "Acc", "ECE") for s in ("", " (paper)")},
               "OOD inputs": ["Fashion-MNIST"] * 3, "OOD inputs (paper)": ["Fashion-MNIST"] * 3}
    columns, _, how = tables.shown_columns(_stored(pd.DataFrame(metrics)))
    assert [c.name for c in columns] == ["method", "MMD", "NS", "Acc", "ECE"]
    assert how == ("In each cell, the paper's number (shaded) is under ours. In every row, OOD inputs: Fashion-MNIST; "
                   "OOD inputs (paper): Fashion-MNIST."), "a pair the same in every row is said once, as two plain values"


def test_a_column_of_text_the_same_in_every_row_is_said_once():
    frame = pd.DataFrame({"claim": ["1", "", ""], "setting": ["as run", "lr = 0.01", "lr = 0.1"],
                          "robust verdict": ["not judged"] * 3, "failed preconditions": [""] * 3, "notes": ["–"] * 3,
                          "ours": ["a", "b", "c"], "chains": [4, 4, 4], "mean": ["1.0 ± 0.1"] * 3})
    columns, _, how = tables.shown_columns(_stored(frame))
    assert [c.name for c in columns] == ["claim", "setting", "ours", "chains", "mean"], \
        "text the same in every row goes; numbers (and numbers with spreads) stay; an empty column, or one of dashes, goes unsaid"
    assert how == "In every row, robust verdict: not judged."
    assert len(tables.shown_columns(_stored(frame.iloc[:2]))[0]) == 8, "two rows: every column shown"
    out = tables.render_table(_stored(frame), label="T", anchor="t")
    assert '<span class="symlib-how">In every row, robust verdict: not judged.</span>' in out


def test_cells_break_where_a_reader_expects():
    assert tables.cell_html("02a_symmetry_removal") == "02a_<wbr>symmetry_<wbr>removal"
    assert tables.cell_html("q_r and mu_d") == "q_r and mu_d", "short names (math) are kept whole"
    assert _text(tables.cell_html("88.379±0.023")) == "88.379 ± 0.023"
    assert tables.cell_html("-0.4 ± 0.1 and 3±1") == ('<span class="symlib-nowrap">-0.4</span> <span class="symlib-nowrap">'
                                                     '± 0.1</span> and <span class="symlib-nowrap">3</span> '
                                                     '<span class="symlib-nowrap">± 1</span>')
    assert tables.cell_html("mean ± sd <b>") == "mean ± sd &lt;b&gt;", "escaped; a ± between words is text"
    assert tables.cell_html("x2_3.5±0.1") == "x2_3.5±0.1", "a number inside a word is not a spread"


def test_headers_in_words_and_a_table_too_wide_for_the_text_is_compact():
    errata = _stored(pd.DataFrame({"chapter": ["04_constrained_models"], "paper_says": ["p = 0.009"]}))
    out = tables.render_table(errata, label="T", anchor="t")
    assert '<th class="symlib-paper">paper says</th>' in out and "04_<wbr>constrained_<wbr>models" in out
    spreads = pd.DataFrame({"method": ["MFVI"], **{f"metric {i}": ["-0.253 ± 0.003"] for i in range(10)}})
    assert "symlib-compact" in tables.render_table(_stored(spreads), label="T", anchor="t"), \
        "eleven columns of numbers with spreads: about 60 em at their narrowest"
    assert "symlib-compact" not in tables.render_table(_stored(spreads.iloc[:, :7]), label="T", anchor="t")
    assert "symlib-break-headers" not in tables.render_table(_stored(spreads), label="T", anchor="t"), \
        "compact, it fits with its headers' words whole"
    wider = pd.DataFrame({"method": ["MFVI"], **{f"diagnostic {i}": ["-0.253 ± 0.003"] for i in range(14)}})
    assert "symlib-compact symlib-break-headers" in tables.render_table(_stored(wider), label="T", anchor="t")


def test_numbers_written_as_text_line_up_with_the_numbers_above():
    frame = pd.DataFrame({"claim": ["1", "2", "3"], "test LL": ["-0.253 ± 0.003", "-0.250 ± 0.005", "-0.210"],
                          "setting": ["this run", "0.01", "0.1"], "size": [7.8, 7.8, 7760.0]})
    kinds = {c.name: c.kinds for c in tables.shown_columns(_stored(frame))[0]}
    assert kinds == {"claim": ["", "", ""], "test LL": ["spread", "spread", "num"], "setting": ["", "", ""],
                     "size": ["num"] * 3}, "a number as text is a number among numbers, text among words or labels"


def test_sentence_widths_leave_the_other_columns_room():
    """The columns of sentences take at most what the text column leaves once every other
    column is as narrow as it can be, so their minimum widths never make a table scroll."""
    long = "a measured value with its comparison, and the reading it was judged under " * 3
    frame = pd.DataFrame({"claim": ["1"], "choice": ["HMC settings"], "setting": ["no warm start"],
                          "verdict": ["does not hold"], "failed preconditions": ["R-hat (robust)"], "ours": [long]})
    columns = tables.shown_columns(_stored(frame))[0]
    widths = tables.sentence_widths(columns)
    others = sum(tables._narrowest(c) for i, c in enumerate(columns) if i not in widths)
    assert list(widths) == [5] and 0 < widths[5] < 20, "its floor, 20 em, does not fit beside five columns"
    assert widths[5] + others <= tables.TEXT_COLUMN_EM - tables.ROOM_SLACK
    assert tables.sentence_widths(columns[:1] + columns[5:]) == {1: 20}, "beside one short column: its floor"


def test_a_long_column_of_text_in_a_wide_table_is_shown_under_each_row():
    """Six columns and one of sentences over UNDER_TEXT characters: that column goes under each
    row, across the table, named; the header loses it; a blank cell adds no line; a narrower
    table keeps it as a column."""
    long = "train RMSE plain 0.246, bias-ordered 0.237, ortho-skip 0.378, ortho-skip + bias-ordered 0.378; " \
           "noise floor 0.190 (fit: ≤ 1.1×); test log-lik plain 0.01, skip -0.65 nats/point"
    assert len(long) > tables.UNDER_TEXT
    frame = pd.DataFrame({"claim": ["1", "", "2"], "choice": ["as run", "steps", "as run"],
                          "setting": ["this profile", "n = 8", "this profile"],
                          "verdict": ["holds", "does not hold", "holds"],
                          "robust verdict": ["not judged", "does not hold", "holds"],
                          "ours": [long, "", "short"]})
    out = tables.render_table(_stored(frame), label="T", anchor="t")
    head = out[out.index("<thead>"):out.index("</thead>")]
    assert ">ours<" not in head and head.count("</th>") == 5
    assert out.count('<tr class="symlib-under-row"><td colspan="5">') == 2           # the blank cell adds none
    assert '<span class="symlib-under-name">ours:</span> train RMSE plain 0.246' in out
    narrow = tables.render_table(_stored(frame.drop(columns=["choice"])), label="T", anchor="t")
    assert "symlib-under-row" not in narrow and ">ours</th>" in narrow
