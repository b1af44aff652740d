"""symlib.book.side_by_side: how many chapters run at once, their order, failures and signals."""

import json
import os

import pytest

from symlib.book import side_by_side as sbs


@pytest.fixture(autouse=True)
def _no_user_setting(monkeypatch):
    monkeypatch.delenv(sbs.ENV_VAR, raising=False)


def test_short_profiles_on_the_cpu_run_one_chapter_per_core_and_long_ones_one_at_a_time():
    assert sbs.chapter_jobs("quick", "cpu", 8, cores=2) == 2
    assert sbs.chapter_jobs("smoke", "cpu", 8, cores=16) == 8
    assert sbs.chapter_jobs("quick", "cpu", 1, cores=16) == 1  # never more than the chapters
    assert sbs.chapter_jobs("full", "cpu", 8, cores=2) == 1  # full fans out inside a chapter
    assert sbs.chapter_jobs("paper", "cpu", 8, cores=2) == 1
    assert sbs.chapter_jobs("quick", "cuda", 8, cores=16) == 1  # one CUDA context at a time


def test_a_users_setting_wins_and_a_bad_one_is_refused(monkeypatch):
    monkeypatch.setenv(sbs.ENV_VAR, "1")
    assert sbs.chapter_jobs("quick", "cpu", 8, cores=2) == 1
    monkeypatch.setenv(sbs.ENV_VAR, "3")
    assert sbs.chapter_jobs("full", "cuda", 8, cores=2) == 3
    for bad in ("0", "-1", "two"):
        monkeypatch.setenv(sbs.ENV_VAR, bad)
        with pytest.raises(SystemExit, match=sbs.ENV_VAR):
            sbs.chapter_jobs("quick", "cpu", 8, cores=2)


def test_longest_first_uses_this_checkouts_run_of_the_same_profile(tmp_path):
    names = ["00_symmetries", "02a_symmetry_removal", "04_constrained_models", "new_chapter"]
    assert sbs.longest_first(names, "quick", results=tmp_path) == [
        "04_constrained_models", "02a_symmetry_removal", "00_symmetries", "new_chapter"]
    (tmp_path / "00_symmetries.json").write_text(json.dumps({"profile": "quick", "wall_time_s": 999.0}))
    (tmp_path / "02a_symmetry_removal.json").write_text(json.dumps({"profile": "full", "wall_time_s": 5000.0}))
    (tmp_path / "new_chapter.json").write_text("{not json")
    assert sbs.longest_first(names, "quick", results=tmp_path) == [
        "00_symmetries", "04_constrained_models", "02a_symmetry_removal", "new_chapter"]


def _chapter(name):
    """A stand-in for pipeline.execute: fails like it for 'bad', else returns its pid."""
    if name == "bad":
        raise SystemExit("bad: execution failed (ValueError: boom).")
    return float(os.getpid())


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_failed_chapter_does_not_stop_the_others(jobs):
    seen = []
    times, failures = sbs.run_chapters(_chapter, ["a", "bad", "c"], jobs, lambda *r: seen.append(r))
    assert set(times) == {"a", "c"} and list(failures) == ["bad"]
    assert "ValueError: boom" in failures["bad"]
    assert sorted(r[0] for r in seen) == ["a", "bad", "c"]
    if jobs == 2:  # in worker processes, not in this one
        assert os.getpid() not in set(times.values())


def _terminated(name):
    raise SystemExit(143)  # what the pipeline's SIGTERM handler raises


def test_a_termination_stops_the_run_instead_of_counting_as_a_failure():
    ran = []

    def chapter(name):
        ran.append(name)
        return _terminated(name)

    with pytest.raises(SystemExit) as err:
        sbs.run_chapters(chapter, ["a", "b"], 1, lambda *r: None)
    assert err.value.code == 143 and ran == ["a"]


def test_short_profiles_pin_their_kernels_to_one_thread_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    assert sbs.one_thread_kernels("quick") == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert sbs.one_thread_kernels("full") == {} and sbs.one_thread_kernels("paper") == {}
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert sbs.one_thread_kernels("smoke") == {"MKL_NUM_THREADS": "1"}


def _environ_of(name):
    return float(os.environ.get("SYMLIB_SIDE_BY_SIDE_PROBE", "-1"))


def test_reused_workers_see_the_callers_environment_now(monkeypatch):
    # joblib keeps its workers between calls, with the environment they started with
    monkeypatch.setenv("SYMLIB_SIDE_BY_SIDE_PROBE", "1")
    first, _ = sbs.run_chapters(_environ_of, ["a", "b"], 2, lambda *r: None)
    monkeypatch.setenv("SYMLIB_SIDE_BY_SIDE_PROBE", "2")
    second, _ = sbs.run_chapters(_environ_of, ["a", "b"], 2, lambda *r: None)
    assert set(first.values()) == {1.0} and set(second.values()) == {2.0}
