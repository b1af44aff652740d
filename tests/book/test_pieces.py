"""The pieces file of a chapter and the account of its latest complete run (symlib/book/pieces.py)."""

import pytest

from symlib.book import pieces


def _log(tmp_path, *runs):
    for profile, seconds, outcome in runs:
        pieces.log_piece("05_rebasin_hmc", profile=profile, device="cuda (H100)", seconds=seconds, outcome=outcome,
                         directory=tmp_path)
    return pieces.read("05_rebasin_hmc", tmp_path)


def test_account_counts_the_pieces_of_the_latest_complete_run(tmp_path):
    log = _log(tmp_path, ("paper", 600, "budget"), ("paper", 300, "complete"),          # an earlier run
               ("paper", 590, "budget"), ("paper", 20, "failed"), ("full", 99, "complete"),
               ("paper", 600, "budget"), ("paper", 120, "complete"), ("paper", 5, "rendered"))
    got = pieces.account(log, "paper")
    assert got["pieces"] == 4 and got["seconds"] == 590 + 20 + 600 + 120 and got["minutes"] == 22.2
    assert got["stopped_at_budget"] == 2 and got["failed"] == 1 and got["devices"] == ["cuda (H100)"]
    assert got["abandoned"] == 0
    assert pieces.account(log, "full")["pieces"] == 1
    assert pieces.account(log, "quick") is None
    assert pieces.account(_log(tmp_path / "other", ("paper", 600, "budget")), "paper") is None  # not done yet


def test_a_piece_killed_from_outside_is_counted_as_terminated_not_failed(tmp_path):
    """A piece killed by SIGTERM (a GPU piece's hard timeout, or a person restarting the run) is
    logged ``failed`` with a note beginning with TERMINATED: the account counts it apart."""
    for seconds, outcome, note in ((600, "budget", None), (300, "failed", f"{pieces.TERMINATED} after 300 s"),
                                   (20, "failed", None), (100, "complete", None)):
        pieces.log_piece("06_synthesis", profile="paper", device="cpu", seconds=seconds, outcome=outcome,
                         note=note, directory=tmp_path)
    got = pieces.account(pieces.read("06_synthesis", tmp_path), "paper")
    assert got["pieces"] == 4 and got["seconds"] == 1020
    assert (got["stopped_at_budget"], got["terminated"], got["failed"]) == (1, 1, 1)


def test_pieces_run_with_other_code_are_not_part_of_the_complete_run(tmp_path):
    """A run abandoned when the chapter's code changed (its cache entries recomputed under the new
    code) is left out of the account, and counted as abandoned; entries with no hash (older
    files) count as before."""
    def log(seconds, outcome, code):
        pieces.log_piece("04_constrained_models", profile="full", device="cpu", seconds=seconds,
                         outcome=outcome, directory=tmp_path, code_hash=code)

    pieces.log_piece("04_constrained_models", profile="full", device="cpu", seconds=50, outcome="budget",
                     directory=tmp_path)                                  # before hashes were recorded
    log(3000, "budget", "old"), log(1500, "failed", "old"), log(900, "budget", "new"), log(400, "complete", "new")
    entries = pieces.read("04_constrained_models", tmp_path)
    assert [e.get("code_hash") for e in entries] == [None, "old", "old", "new", "new"]
    got = pieces.account(entries, "full")
    assert got["pieces"] == 3 and got["seconds"] == 50 + 900 + 400 and got["abandoned"] == 2
    assert got["stopped_at_budget"] == 2 and got["failed"] == 0
    # the old code proven equivalent to the new (its entries kept): its pieces are the run's
    joined = pieces.account(entries, "full", {"old"})
    assert joined["pieces"] == 5 and joined["seconds"] == 50 + 3000 + 1500 + 900 + 400 and joined["abandoned"] == 0
    assert joined["stopped_at_budget"] == 3 and joined["failed"] == 1
    assert pieces.account(entries, "full", {"other"}) == got


def test_entries_are_appended_with_what_they_need(tmp_path):
    log = _log(tmp_path, ("paper", 12.34, "complete"))
    assert set(log[0]) == {"started", "seconds", "device", "host", "profile", "commit", "outcome"}
    assert log[0]["seconds"] == 12.3
    with pytest.raises(ValueError, match="outcome must be one of"):
        pieces.log_piece("x", profile="paper", device="cpu", seconds=1, outcome="killed", directory=tmp_path)
    (tmp_path / "pieces" / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        pieces.read("bad", tmp_path)


def test_the_commit_is_the_checkouts_head_unless_one_is_given(tmp_path, monkeypatch):
    import subprocess

    monkeypatch.delenv(pieces.COMMIT_ENV, raising=False)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert pieces.read("x", pieces.log_piece("x", profile="paper", device="cpu", seconds=1, outcome="budget",
                                             directory=tmp_path).parent.parent)[-1]["commit"] == head[:12]
    monkeypatch.setenv(pieces.COMMIT_ENV, "0123456789abcdef0123")
    pieces.log_piece("x", profile="paper", device="cpu", seconds=1, outcome="budget", directory=tmp_path)
    assert pieces.read("x", tmp_path)[-1]["commit"] == "0123456789ab"


def test_a_run_in_progress_is_accounted_with_how_far_it_got(tmp_path):
    def log(seconds, outcome, code, note=None, profile="paper"):
        pieces.log_piece("05_rebasin_hmc", profile=profile, device="cuda (H100)", seconds=seconds, outcome=outcome,
                         directory=tmp_path, code_hash=code, note=note)
        return pieces.read("05_rebasin_hmc", tmp_path)

    assert pieces.in_progress([], "paper") is None
    log(600, "budget", "a", "HMC: 10 of 99 transitions done"), log(100, "complete", "a")
    assert pieces.in_progress(log(5, "rendered", "a"), "paper") is None          # the last run completed
    log(500, "budget", "old", "HMC: 473 of 10600 transitions done")              # abandoned: code changed
    log(260, "budget", "new", "HMC: 727 of 10600 transitions done")
    entries = log(50, "complete", "new", profile="full")                          # another profile
    entries = log(150, "budget", "new", "HMC: 1335 of 10600 transitions done")
    assert entries[-1]["note"] == "HMC: 1335 of 10600 transitions done" and "note" not in entries[1]
    got = pieces.in_progress(entries, "paper")
    assert got["pieces"] == 2 and got["seconds"] == 410 and got["abandoned"] == 1
    assert got["note"] == "HMC: 1335 of 10600 transitions done" and got["devices"] == ["cuda (H100)"]
    assert pieces.in_progress(entries, "full") is None


_CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R)   Processor
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq
processor\t: 1
model name\t: Intel(R) Xeon(R)   Processor
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq
"""


@pytest.mark.parametrize(("flags", "isa"), [("avx avx2 avx512f", " (AVX-512)"), ("sse2 avx avx2", " (AVX2)"),
                                            ("sse2 avx", " (AVX)"), ("sse2", "")])
def test_host_names_the_cpu_model_its_widest_vector_instructions_and_cores(tmp_path, monkeypatch, flags, isa):
    info = tmp_path / "cpuinfo"
    info.write_text(_CPUINFO.replace("fpu sse2 avx avx2 fma avx512f avx512dq", flags))
    monkeypatch.setattr(pieces.os, "cpu_count", lambda: 16)
    assert pieces.host(info) == f"Intel(R) Xeon(R) Processor{isa}, 16 cores"


def test_host_without_cpuinfo_falls_back_to_the_platform(tmp_path, monkeypatch):
    monkeypatch.setattr(pieces.platform, "processor", lambda: "")
    monkeypatch.setattr(pieces.platform, "machine", lambda: "arm64")
    monkeypatch.setattr(pieces.os, "cpu_count", lambda: 1)
    assert pieces.host(tmp_path / "absent") == "arm64, 1 core"


def test_each_piece_records_its_host_and_the_account_lists_every_host_of_the_run(tmp_path, monkeypatch):
    """A run whose pieces ran on two machines names both (the same seeds can give other draws on
    other hardware); pieces of an earlier run and entries written before hosts were recorded
    add none."""
    hosts = iter(["old machine", "machine A", "machine B", "machine A"])
    monkeypatch.setattr(pieces, "host", lambda: next(hosts))
    log = _log(tmp_path, ("paper", 10, "complete"), ("paper", 600, "budget"), ("paper", 600, "budget"),
               ("paper", 120, "complete"))
    assert [e["host"] for e in log] == ["old machine", "machine A", "machine B", "machine A"]
    assert pieces.account(log, "paper")["hosts"] == ["machine A", "machine B"]
    del log[1]["host"], log[2]["host"], log[3]["host"]
    assert pieces.account(log, "paper")["hosts"] == []
    monkeypatch.setattr(pieces, "host", lambda: "machine C")
    log = _log(tmp_path / "other", ("paper", 600, "budget"))
    assert pieces.in_progress(log, "paper")["hosts"] == ["machine C"]


def test_a_run_is_stalled_when_two_pieces_lose_the_same_unit_in_flight(tmp_path):
    """Two pieces in a row stopped inside a unit that keeps no checkpoint (the watchdog's
    interruption, or ``timeout``'s SIGTERM), with the same items cached after each: nothing was
    kept in between, and the warning says so with both pieces' budgets. A stage that stopped at
    the budget itself (its checkpoint kept), items cached in between, another code hash, a single
    piece or a completed run: no warning."""
    def log(outcome, note, code="h", profile="paper"):
        pieces.log_piece("02a_symmetry_removal", profile=profile, device="cuda (H100)", seconds=540,
                         outcome=outcome, directory=tmp_path, code_hash=code, note=note)
        return pieces.read("02a_symmetry_removal", tmp_path)

    lost = f"{pieces.INTERRUPTED} 470 s + 60 s, raising KeyboardInterrupt; optunet_chunks: 4 of 100 items cached"
    killed = f"{pieces.TERMINATED} after 538 s; optunet_chunks: 4 of 100 items cached"
    assert pieces.stalled([], "paper") is None
    assert pieces.stalled(log("budget", lost), "paper") is None                  # one piece
    warning = pieces.stalled(log("failed", killed), "paper")
    assert "same items cached (optunet_chunks: 4 of 100 items cached)" in warning
    assert f"{pieces.INTERRUPTED} 470 s + 60 s, raising KeyboardInterrupt; {pieces.TERMINATED} after 538 s" in warning
    assert pieces.stalled(log("complete", None, profile="full"), "paper") == warning   # another profile
    assert pieces.stalled(log("budget", lost.replace("4 of", "5 of")), "paper") is None   # one more cached
    assert pieces.stalled(log("budget", lost.replace("4 of", "5 of")), "paper") is not None
    assert pieces.stalled(log("budget", "chapter 5's HMC: 1335 of 10600 transitions done"), "paper") is None
    assert pieces.stalled(log("budget", lost, code="new"), "paper") is None       # the old code's pieces are abandoned
    assert pieces.stalled(log("budget", lost, code="new"), "paper") is not None
    assert pieces.stalled(log("complete", None, code="new"), "paper") is None     # done
