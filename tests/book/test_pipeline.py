"""The papermill pipeline: parameters reach the notebook, bad ones fail clearly, nothing is lost."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import nbformat
import papermill
import pytest
from joblib.externals.loky import get_reusable_executor

from symlib.book import pieces, pipeline
from symlib.book.results import ChapterResults


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "EXECUTED", tmp_path / "executed")
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "cache"))
    for var in ("SYMLIB_EXECUTED", "SYMLIB_RESULTS_STAGING", "SYMLIB_CACHED_ONLY"):  # and conftest's PROCESS_VARIABLES
        monkeypatch.setenv(var, "")  # recorded, so what a test's pipeline run sets is undone
        monkeypatch.delenv(var)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # our own temp folders only
    return tmp_path


WARNING = (
    "/x/symmetries.py:9: CacheCorruptionWarning: cache entry /c/00/k.pt is invalid: truncated. "
    "Moved it aside to k.pt.corrupt and recomputing."
)


def fake_papermill(monkeypatch, effect=None):
    """Replace the kernel run: copy the notebook, give its last code cell a stderr warning.

    ``effect(kwargs)`` runs after the output is written (e.g. to raise); the calls are recorded.
    """
    calls = []

    def execute_notebook(inp, out, **kwargs):
        calls.append(kwargs)
        nb = nbformat.read(inp, as_version=4)
        cell = [c for c in nb.cells if c.cell_type == "code"][-1]
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stderr", text="progress 1/2\n" + WARNING + "\n"),
            nbformat.v4.new_output(
                "stream", name="stdout", text="CacheCorruptionWarning in stdout\n"
            ),
        ]
        nbformat.write(nb, out)
        if effect is not None:
            effect(kwargs)

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    return calls


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


def test_relative_path_variables_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYMLIB_RESULTS", "myresults")
    monkeypatch.setenv("SYMLIB_CACHE", "~/c")
    monkeypatch.setenv("SYMLIB_DATA", str(tmp_path / "data"))
    pipeline._absolute_path_variables()
    assert os.environ["SYMLIB_RESULTS"] == str(tmp_path / "myresults")
    assert os.environ["SYMLIB_CACHE"] == os.path.expanduser("~/c")
    assert os.environ["SYMLIB_DATA"] == str(tmp_path / "data")


@pytest.mark.slow
def test_relative_results_dir_is_the_users_not_the_notebooks(sandbox, monkeypatch):
    # the issue: the chapter wrote into notebooks/myresults and the reproducibility page, run
    # in book/, found nothing and said "No chapter has been executed"
    user = sandbox / "user"
    user.mkdir()
    monkeypatch.chdir(user)
    monkeypatch.setenv("SYMLIB_RESULTS", "myresults")
    monkeypatch.setenv("SYMLIB_CACHE", "mycache")
    pipeline.main(["execute", "--profile", "smoke", "--device", "cpu", "00_symmetries"])
    assert json.loads((user / "myresults" / "00_symmetries.json").read_text())["profile"] == "smoke"
    assert not (pipeline.NOTEBOOKS / "myresults").exists()
    page = nbformat.read(sandbox / "executed" / "reproducibility.ipynb", as_version=4)
    shown = json.dumps([c.get("outputs", []) for c in page.cells])
    assert "00_symmetries" in shown and "No chapter has been executed" not in shown


@pytest.mark.parametrize("var", ["SYMLIB_RESULTS", "SYMLIB_CACHE"])
@pytest.mark.parametrize("below", [False, True])
def test_unwritable_results_or_cache_fails_before_the_chapter_runs(
    sandbox, monkeypatch, var, below
):
    calls = fake_papermill(monkeypatch)
    blocker = sandbox / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv(var, str(blocker / "sub" if below else blocker))
    with pytest.raises(SystemExit, match=f"^{var}: .*set {var} to a writable directory"):
        pipeline.main(["execute", "--profile", "smoke", "00_symmetries"])
    assert calls == [] and not (sandbox / "executed").exists()


def test_cache_warnings_are_found_in_stderr_only():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("CacheCorruptionWarning in prose"),
        nbformat.v4.new_code_cell("x"),
    ]
    nb.cells[1].outputs = [
        nbformat.v4.new_output(
            "stream", name="stderr", text=["0%|  |\n", WARNING + "\n", "  x = 1\n"]
        ),
        nbformat.v4.new_output("stream", name="stdout", text="CacheCorruptionWarning\n"),
    ]
    assert pipeline._cache_warnings(nb) == [WARNING]


def test_cache_corruption_is_reported_on_the_command_line(sandbox, monkeypatch, capsys):
    fake_papermill(monkeypatch)
    pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    assert capsys.readouterr().err == f"[symlib] 00_symmetries: {WARNING}\n"
    nb = nbformat.read(sandbox / "executed" / "00_symmetries.ipynb", as_version=4)
    assert all(o.name != "stderr" for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_cache_corruption_is_reported_when_the_chapter_fails(sandbox, monkeypatch, capsys):
    def fail(kwargs):
        raise papermill.PapermillExecutionError(0, 1, "x", "ValueError", "boom", [])

    fake_papermill(monkeypatch, fail)
    with pytest.raises(SystemExit, match="execution failed"):
        pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    assert f"[symlib] 00_symmetries: {WARNING}" in capsys.readouterr().err


def _nb_folders(sandbox):
    return list((sandbox / "tmp").glob("symlib-nb-*"))


def test_interrupted_run_leaves_no_temp_folder(sandbox, monkeypatch):
    seen = []

    def interrupt(kwargs):
        seen.extend(_nb_folders(sandbox))
        raise KeyboardInterrupt

    calls = fake_papermill(monkeypatch, interrupt)
    with pytest.raises(KeyboardInterrupt):
        pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    [folder] = seen
    assert folder.name.startswith(f"symlib-nb-{os.getpid()}-")
    # the kernel's connection file was to be written inside that folder
    connection_file = calls[0]["config"]["KernelManager"]["connection_file"]
    assert os.path.dirname(connection_file) == str(folder)
    assert _nb_folders(sandbox) == []


def test_sigterm_exits_cleanly_and_leaves_no_temp_folder(sandbox, monkeypatch):
    before = signal.getsignal(signal.SIGTERM)
    fake_papermill(monkeypatch, lambda kwargs: os.kill(os.getpid(), signal.SIGTERM))
    with pytest.raises(SystemExit) as err:
        pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    assert err.value.code == 128 + signal.SIGTERM
    assert _nb_folders(sandbox) == []
    assert signal.getsignal(signal.SIGTERM) is before
    # logged as a piece, as `compute` logs one (before: execute logged none)
    [piece] = pieces.read("00_symmetries")
    assert piece["outcome"] == "failed" and pieces.TERMINATED in piece["note"]


def test_a_piece_records_each_stages_code_hash_whose_digest_is_its_code_hash(tmp_path, monkeypatch):
    """So that a published run's account can match a piece to its record stage by stage."""
    from symlib.book.provenance import combined_code_hash, compute_code_hash, stage_experiments

    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path))
    pipeline._log_piece("06_synthesis", "paper", 0, "cpu", time.perf_counter(), None, "budget")
    [piece] = pieces.read("06_synthesis", tmp_path)
    assert sorted(piece["stage_hashes"]) == stage_experiments("06_synthesis")
    assert combined_code_hash(piece["stage_hashes"]) == piece["code_hash"]
    # chapter 0's stages declare no code of their own: its code hash digests no stage hashes
    pipeline._log_piece("00_symmetries", "full", 0, "cpu", time.perf_counter(), None, "budget")
    [piece] = pieces.read("00_symmetries", tmp_path)
    assert "stage_hashes" not in piece and piece["code_hash"] == compute_code_hash("00_symmetries")


def test_a_broken_pieces_file_fails_before_any_chapter_runs(sandbox, monkeypatch, capsys):
    """Before: the chapter ran whole, then failed logging its piece (rc 1, no page, no piece)."""
    calls = fake_papermill(monkeypatch)
    path = pieces.pieces_path("00_symmetries")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("<<<<<<< HEAD\n[]\n")
    for command in ("execute", "compute"):
        with pytest.raises(SystemExit, match=r"00_symmetries: .*pieces.*00_symmetries\.json is not valid JSON"):
            pipeline.main([command, "--profile", "smoke", "00_symmetries"])
    assert calls == []


def test_a_chapter_named_twice_runs_once(sandbox, monkeypatch):
    ran = []
    monkeypatch.setattr(pipeline, "_execute_chapters", lambda names, **kw: ran.extend(names))
    pipeline.main(["execute", "--profile", "smoke", "00_symmetries", "00_symmetries"])
    assert ran == ["00_symmetries"]


@pytest.mark.skipif(os.name != "posix", reason="process check is POSIX-only")
def test_stale_temp_folder_of_a_dead_process_is_removed(sandbox, monkeypatch):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    tmp = sandbox / "tmp"
    stale, live, other = (
        tmp / f"symlib-nb-{dead.pid}-abc",
        tmp / f"symlib-nb-{os.getpid()}-def",
        tmp / "symlib-nb-noid1234",  # no pid in the name: not ours to judge
    )
    for folder in (stale, live, other):
        folder.mkdir()
        (folder / "kernel.json").write_text("{}")
    fake_papermill(monkeypatch)
    pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    assert not stale.exists() and live.exists() and other.exists()


@pytest.mark.slow
def test_real_kernel_reports_a_corrupt_cache_entry_and_cleans_up(sandbox, monkeypatch, capsys):
    notebooks = sandbox / "notebooks"
    _notebook(notebooks, "99_corrupt", """
        import sys
        from symlib.book.cache import cache_dir, cached

        cached("99_corrupt", "1", {"a": 1}, lambda: [1.0, 2.0])
        [payload] = (cache_dir() / "99_corrupt").glob("*.pt")
        payload.write_bytes(payload.read_bytes()[:-3])  # truncate: checksum mismatch
        assert cached("99_corrupt", "1", {"a": 1}, lambda: [1.0, 2.0]) == [1.0, 2.0]
        print(sys.argv)
    """)
    monkeypatch.setattr(pipeline, "NOTEBOOKS", notebooks)
    pipeline.execute("99_corrupt", profile="smoke", seed=0, device="cpu")
    err = capsys.readouterr().err
    assert "[symlib] 99_corrupt: " in err and "CacheCorruptionWarning: cache entry " in err
    assert str(sandbox / "cache" / "99_corrupt") in err
    nb = nbformat.read(sandbox / "executed" / "99_corrupt.ipynb", as_version=4)
    argv = "".join(o.text for o in nb.cells[-1].outputs if o.output_type == "stream")
    assert str(sandbox / "tmp" / f"symlib-nb-{os.getpid()}-") in argv  # connection file
    assert _nb_folders(sandbox) == []


def test_a_real_kernel_past_its_budget_is_interrupted_and_keeps_what_it_cached(sandbox, monkeypatch, capsys):
    """$SYMLIB_BUDGET_S for a chapter whose stage has no budget of its own: past the budget (and
    the grace) the pipeline interrupts the kernel; the chapter is a piece stopped at its budget,
    not a failure, and the items it cached before stay for the next piece, which completes it."""
    from symlib.book import pieces

    notebooks = sandbox / "notebooks"
    _notebook(notebooks, "99_slow", """
        import time
        from symlib.book.cache import cache_dir, cached

        cached("99_slow", "1", {"item": 1}, lambda: 1.0)      # a finished item of a fan-out stage
        marker = cache_dir() / "second-piece"
        if not marker.exists():
            marker.touch()
            time.sleep(120)                                     # the budget interrupts this
    """)
    monkeypatch.setattr(pipeline, "NOTEBOOKS", notebooks)
    monkeypatch.setattr(pipeline, "BUDGET_GRACE_S", 0.0)
    monkeypatch.setenv("SYMLIB_BUDGET_S", "30")  # well after the kernel's start, even on a loaded machine
    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as err:
        pipeline.execute("99_slow", profile="smoke", seed=0, device="cpu")
    assert time.perf_counter() - t0 < 110  # a hang guard: the 120-s sleep was cut short, not waited out
    assert pipeline.PIECE_STOPPED in str(err.value) and "interrupted after 30 s + 0 s" in str(err.value)
    assert [e["outcome"] for e in pieces.read("99_slow")] == ["budget"]
    assert not (sandbox / "executed" / "99_slow.ipynb").exists()
    assert len(list((sandbox / "cache" / "99_slow").glob("*.pt"))) == 1
    pipeline.execute("99_slow", profile="smoke", seed=0, device="cpu")   # the next piece completes it
    assert [e["outcome"] for e in pieces.read("99_slow")] == ["budget", "complete"]
    assert (sandbox / "executed" / "99_slow.ipynb").exists()


def test_any_error_after_the_budget_interrupt_is_a_stopped_piece_not_a_failure(sandbox, monkeypatch):
    """An interrupted Stan fit raises no KeyboardInterrupt in its cell (PyStan: an AttributeError
    on ``stan_outputs``): once the watchdog has interrupted the kernel, the chapter is a piece
    stopped at its budget whatever the cell raised; the same error before the budget is a failure."""
    from symlib.book import pieces

    def stan_interrupted(kwargs):
        deadline = time.monotonic() + 30
        while not fired:                      # the kernel "runs" until the watchdog fires
            assert time.monotonic() < deadline, "the budget watchdog did not fire"
            time.sleep(0.01)
        raise papermill.PapermillExecutionError(
            0, 1, "x", "AttributeError", "'NoneType' object has no attribute 'stan_outputs'", [])

    fired = []
    monkeypatch.setattr(pipeline, "_interrupt_kernels", lambda: fired.append(1) or [])
    monkeypatch.setattr(pipeline, "BUDGET_GRACE_S", 0.0)
    monkeypatch.setenv("SYMLIB_BUDGET_S", "0.2")
    fake_papermill(monkeypatch, stan_interrupted)
    with pytest.raises(SystemExit) as err:
        pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    assert pipeline.PIECE_STOPPED in str(err.value) and "the cell raising AttributeError" in str(err.value)
    assert "execution failed" not in str(err.value)
    assert not (sandbox / "executed" / "00_symmetries.failed.ipynb").exists()

    def stan_broken(kwargs):                  # the same error with the budget not yet reached
        raise papermill.PapermillExecutionError(
            0, 1, "x", "AttributeError", "'NoneType' object has no attribute 'stan_outputs'", [])

    monkeypatch.setenv("SYMLIB_BUDGET_S", "600")
    fake_papermill(monkeypatch, stan_broken)
    with pytest.raises(SystemExit, match="execution failed .AttributeError"):
        pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    assert [e["outcome"] for e in pieces.read("00_symmetries")] == ["budget", "failed"]


def test_interrupt_kernels_signals_only_kernel_children(tmp_path):
    """_interrupt_kernels sends SIGINT to this process's children that run ipykernel, no other."""
    ready = tmp_path / "ready"
    # a child inherits an ignored SIGINT (pytest-xdist's workers ignore it); a kernel, like
    # ipykernel, installs Python's handler itself
    script = ("import pathlib, signal, sys, time\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
              "try:\n    pathlib.Path(sys.argv[1] + sys.argv[2]).touch()\n"
              "    time.sleep(60)\nexcept KeyboardInterrupt:\n    sys.exit(7)\n")
    kernel = subprocess.Popen([sys.executable, "-c", script, str(ready), "ipykernel_launcher"])
    other = subprocess.Popen([sys.executable, "-c", script, str(ready), "something-else"])
    try:
        deadline = time.monotonic() + 60  # both inside their try block, however loaded the machine
        while not (Path(f"{ready}ipykernel_launcher").exists() and Path(f"{ready}something-else").exists()):
            assert time.monotonic() < deadline, "the child processes did not start"
            time.sleep(0.05)
        signalled = pipeline._interrupt_kernels()  # (a kernel another test left running would be too)
        assert kernel.pid in signalled and other.pid not in signalled
        assert kernel.wait(timeout=30) == 7
        assert other.poll() is None
    finally:
        for proc in (kernel, other):
            proc.kill()
            proc.wait()


def test_kernel_stderr_reaches_the_console_not_the_page(sandbox, monkeypatch):
    """An experiment's progress bar (kernel stderr) is passed to the console and dropped from the page."""
    import sys

    calls = fake_papermill(monkeypatch)
    pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    assert calls[0]["stderr_file"] is sys.stderr and calls[0]["progress_bar"] is True
    nb = nbformat.read(sandbox / "executed" / "00_symmetries.ipynb", as_version=4)
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.get("name") == "stderr"]


# --------------------------------------------------------------- output folders, commit, failures


def _kernel_writes_results(kwargs):
    """What a chapter's kernel does in its ledger cell: write its results file (where it may)."""
    r = ChapterResults("00_symmetries", "smoke", 0, "cpu")
    r.add_claim("c", "a claim", "paper", "ours", None)
    r.write()


@pytest.mark.parametrize("chapter", ["00_symmetries", "reproducibility"])
@pytest.mark.parametrize("below", [False, True])
def test_unwritable_executed_folder_fails_before_the_chapter_runs(sandbox, monkeypatch, chapter, below):
    # the issue: a read-only checkout ran the whole chapter, then died writing executed/
    calls = fake_papermill(monkeypatch)
    blocker = sandbox / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("SYMLIB_EXECUTED", str(blocker / "sub" if below else blocker))
    with pytest.raises(SystemExit, match="^SYMLIB_EXECUTED: .*set SYMLIB_EXECUTED to a writable directory"):
        pipeline.execute(chapter, profile="smoke", seed=0, device="cpu")
    assert calls == []


def test_executed_folder_can_be_redirected(sandbox, monkeypatch):
    user = sandbox / "user"
    user.mkdir()
    monkeypatch.chdir(user)
    monkeypatch.setenv("SYMLIB_EXECUTED", "pages")  # relative: the user's directory, not notebooks/
    fake_papermill(monkeypatch, _kernel_writes_results)
    pipeline.main(["execute", "--profile", "smoke", "00_symmetries"])
    assert os.environ["SYMLIB_EXECUTED"] == str(user / "pages")
    assert {p.name for p in (user / "pages").iterdir()} == {"00_symmetries.ipynb", "reproducibility.ipynb"}
    assert not (sandbox / "executed").exists()
    assert json.loads((sandbox / "results" / "00_symmetries.json").read_text())["chapter"] == "00_symmetries"


def test_results_and_page_are_put_in_place_together_after_the_notebook(sandbox, monkeypatch):
    seen = {}

    def kernel(kwargs):
        _kernel_writes_results(kwargs)
        # while the notebook runs (its last cells), the results file is only staged
        seen["results"] = sorted(p.name for p in (sandbox / "results").glob("*"))
        seen["staged"] = sorted(p.name for p in Path(os.environ["SYMLIB_RESULTS_STAGING"]).iterdir())

    fake_papermill(monkeypatch, kernel)
    pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    assert seen == {"results": [], "staged": ["00_symmetries.json"]}
    assert (sandbox / "results" / "00_symmetries.json").exists()
    assert (sandbox / "executed" / "00_symmetries.ipynb").exists()
    assert "SYMLIB_RESULTS_STAGING" not in os.environ
    leftovers = [p.name for folder in ("results", "executed") for p in (sandbox / folder).glob(".*")]
    assert leftovers == []


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), SystemExit(143)])
def test_a_run_stopped_after_writing_results_keeps_the_previous_pair(sandbox, monkeypatch, stop):
    (sandbox / "results").mkdir()
    (sandbox / "executed").mkdir()
    (sandbox / "results" / "00_symmetries.json").write_text("previous results")
    (sandbox / "executed" / "00_symmetries.ipynb").write_text("previous page")

    def killed_in_the_last_cells(kwargs):
        _kernel_writes_results(kwargs)
        raise stop

    fake_papermill(monkeypatch, killed_in_the_last_cells)
    with pytest.raises(type(stop)):
        pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    assert (sandbox / "results" / "00_symmetries.json").read_text() == "previous results"
    assert (sandbox / "executed" / "00_symmetries.ipynb").read_text() == "previous page"
    # a SIGTERM's piece is logged (the pieces folder); nothing else is left
    logged = ["pieces"] if isinstance(stop, SystemExit) else []
    assert sorted(p.name for p in (sandbox / "results").iterdir()) == ["00_symmetries.json", *logged]


def test_a_dead_kernel_names_the_chapter_like_an_execution_error(sandbox, monkeypatch):
    from nbclient.exceptions import DeadKernelError

    (sandbox / "executed").mkdir()
    previous = sandbox / "executed" / "00_symmetries.ipynb"
    previous.write_text("previous page")

    def die(kwargs):
        raise DeadKernelError("Kernel died")

    fake_papermill(monkeypatch, die)
    with pytest.raises(SystemExit) as err:
        pipeline.main(["execute", "--profile", "smoke", "00_symmetries"])
    message = str(err.value)
    assert message.startswith("00_symmetries: execution failed (the kernel died, DeadKernelError: Kernel died")
    assert "The failed notebook is at " in message and "00_symmetries.failed.ipynb" in message
    assert "was left as it was" in message and previous.read_text() == "previous page"
    assert (sandbox / "executed" / "00_symmetries.failed.ipynb").exists()


def test_cached_only_does_not_need_a_writable_cache(sandbox, monkeypatch):
    # the issue: --cached-only refused a read-only cache that held every entry; a re-render
    # only reads it (a cache path below a file stands for one no process may write, root included)
    blocker = sandbox / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("SYMLIB_CACHE", str(blocker / "cache"))
    calls = fake_papermill(monkeypatch, _kernel_writes_results)
    with pytest.raises(SystemExit, match="^SYMLIB_CACHE: "):
        pipeline.main(["execute", "--profile", "smoke", "00_symmetries"])
    assert calls == []
    pipeline.main(["execute", "--profile", "smoke", "--cached-only", "00_symmetries"])
    assert len(calls) == 2 and (sandbox / "executed" / "00_symmetries.ipynb").exists()


@pytest.mark.skipif(os.name != "posix", reason="IPC transport and the process check are POSIX-only")
def test_the_kernel_talks_over_ipc_inside_the_run_folder(sandbox, short_tmp, monkeypatch):
    # over TCP ipykernel warns "running over TCP without encryption" on every notebook
    calls = fake_papermill(monkeypatch)
    pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    manager = calls[0]["config"]["KernelManager"]
    folder = os.path.dirname(manager["connection_file"])
    assert manager["transport"] == "ipc" and os.path.dirname(manager["ip"]) == folder
    assert list(short_tmp.iterdir()) == []  # the sockets went with the run's folder


def test_stale_tmp_files_are_removed_on_start(sandbox, monkeypatch):
    from symlib.book import cache

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    old = os.path.getmtime(sandbox) - 2 * cache.STALE_TMP_AGE_S
    stale = [sandbox / "cache" / "00_symmetries" / f".k.pt.{dead.pid}.abcd1234.tmp",
             sandbox / "results" / f".00_symmetries.json.{dead.pid}.commit.tmp",
             sandbox / "executed" / f".00_symmetries.ipynb.{dead.pid}.commit.tmp"]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
        os.utime(path, (old, old))
    fake_papermill(monkeypatch)
    pipeline.execute("00_symmetries", profile="smoke", seed=0, device="cpu")
    assert [p for p in stale if p.exists()] == []


def _notebook(folder, name, *cells):
    header = textwrap.dedent(
        """\
        ---
        jupytext:
          text_representation:
            extension: .md
            format_name: myst
            format_version: 0.13
        kernelspec:
          display_name: Python 3
          language: python
          name: python3
        ---

        ```{code-cell} python
        :tags: [parameters]
        profile = "quick"
        seed = 0
        device = "auto"
        ```
        """
    )
    body = "".join(f"\n```{{code-cell}} python\n{textwrap.dedent(c).strip()}\n```\n" for c in cells)
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.md").write_text(header + body)


WRITE_RESULTS = """
    from symlib.book.results import ChapterResults

    r = ChapterResults("99_real", profile, seed, "cpu")
    r.add_claim("c", "a claim", "paper", "ours", None)
    print(r.write())
"""


@pytest.mark.slow
@pytest.mark.parametrize("last_cell", ["raise RuntimeError('boom in the last cell')",
                                       "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"])
def test_real_kernel_failing_after_its_results_cell_leaves_no_results(sandbox, monkeypatch, last_cell):
    notebooks = sandbox / "notebooks"
    _notebook(notebooks, "99_real", WRITE_RESULTS, last_cell)
    monkeypatch.setattr(pipeline, "NOTEBOOKS", notebooks)
    with pytest.raises(SystemExit) as err:
        pipeline.execute("99_real", profile="smoke", seed=0, device="cpu")
    message = str(err.value)
    died = "SIGKILL" in last_cell
    assert message.startswith("99_real: execution failed (" + ("the kernel died, DeadKernelError" if died else "RuntimeError: boom"))
    assert "was left as it was" in message
    assert not (sandbox / "results" / "99_real.json").exists()  # staged, never put in place
    assert _nb_folders(sandbox) == []


@pytest.fixture
def short_tmp(sandbox, monkeypatch):
    """A short system temp folder: pytest's own paths are too long for the kernel's IPC sockets."""
    folder = tempfile.mkdtemp(prefix="symlib-t", dir="/tmp")
    monkeypatch.setattr(tempfile, "tempdir", folder)
    yield Path(folder)
    monkeypatch.undo()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_real_run_commits_results_and_prints_no_kernel_warning(sandbox, short_tmp, monkeypatch, capfd):
    notebooks = sandbox / "notebooks"
    _notebook(notebooks, "99_real", WRITE_RESULTS)
    monkeypatch.setattr(pipeline, "NOTEBOOKS", notebooks)
    pipeline.execute("99_real", profile="smoke", seed=0, device="cpu")
    console = capfd.readouterr()
    assert "without encryption" not in console.out + console.err
    assert json.loads((sandbox / "results" / "99_real.json").read_text())["profile"] == "smoke"
    nb = nbformat.read(sandbox / "executed" / "99_real.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    assert printed.startswith(str(short_tmp / f"symlib-nb-{os.getpid()}-"))  # the staging folder
    assert list(short_tmp.iterdir()) == []  # the run's folder went, sockets and all


FIGURE = """
    import matplotlib.pyplot as plt
    from myst_nb import glue

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    glue("fig_line", fig, display=False)
    fig
"""


@pytest.mark.slow
def test_figures_are_drawn_whatever_the_callers_matplotlib_backend(sandbox, short_tmp, monkeypatch):
    """A caller with MPLBACKEND=Agg (a headless machine) still gets its figures on the page and
    glued (what publishing takes into published/): the kernels run the inline backend."""
    notebooks = sandbox / "notebooks"
    _notebook(notebooks, "99_real", WRITE_RESULTS, FIGURE)
    monkeypatch.setattr(pipeline, "NOTEBOOKS", notebooks)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    pipeline.execute("99_real", profile="smoke", seed=0, device="cpu")
    assert os.environ["MPLBACKEND"] == "Agg"                   # the caller's own is left as it was
    nb = nbformat.read(sandbox / "executed" / "99_real.ipynb", as_version=4)
    kinds = [k for o in nb.cells[-1].outputs for k in o.get("data", {})]
    assert "application/papermill.record/image/png" in kinds and "image/png" in kinds


def test_build_takes_the_pages_from_the_redirected_folder(sandbox, monkeypatch, capsys):
    # _toc.yml lists executed/ in the checkout: build mirrors $SYMLIB_EXECUTED there
    pages = sandbox / "pages"
    pages.mkdir()
    (pages / "00_symmetries.ipynb").write_text("this run's page")
    (pages / "reproducibility.ipynb").write_text("this run's ledger")
    (pages / "using-symlib.ipynb").write_text("this run's examples")
    (sandbox / "executed").mkdir()
    (sandbox / "executed" / "01_ortho_skip.ipynb").write_text("an older in-tree run")
    monkeypatch.setenv("SYMLIB_EXECUTED", str(pages))
    pipeline._in_tree_pages()
    tree = sandbox / "executed"
    assert (tree / "00_symmetries.ipynb").read_text() == "this run's page"
    assert (tree / "reproducibility.ipynb").read_text() == "this run's ledger"
    assert (tree / "using-symlib.ipynb").read_text() == "this run's examples"
    assert "has not been executed" in (tree / "01_ortho_skip.ipynb").read_text()  # not the older run
    assert "SYMLIB_EXECUTED=" in capsys.readouterr().out


def test_build_executes_a_missing_book_page_first(sandbox, monkeypatch):
    """The "Using symlib" page is executed by the build when no executed copy exists (a fresh
    clone that ran one chapter), in book/, with no results file or pieces file of its own."""
    calls = fake_papermill(monkeypatch)
    pages = sandbox / "pages"
    pages.mkdir()
    (pages / "reproducibility.ipynb").write_text("this run's ledger")
    monkeypatch.setenv("SYMLIB_EXECUTED", str(pages))
    pipeline._in_tree_pages()
    assert [Path(c["cwd"]) for c in calls] == [pipeline.USING_PAGE.parent]
    page = nbformat.read(sandbox / "executed" / "using-symlib.ipynb", as_version=4)
    assert page.cells[0].source.startswith("(using-symlib)=")
    assert (sandbox / "executed" / "reproducibility.ipynb").read_text() == "this run's ledger"
    assert not (sandbox / "results").exists()  # no results file, no pieces file


def test_execute_without_names_runs_every_chapter_and_the_example_page(sandbox, monkeypatch):
    """`make book` (execute, no names) executes the "Using symlib" page beside the chapters, then
    the reproducibility page; naming chapters leaves the example page alone."""
    calls = fake_papermill(monkeypatch, _kernel_writes_results)
    monkeypatch.setattr(pipeline, "chapters", lambda: ["00_symmetries"])
    monkeypatch.setenv("SYMLIB_CHAPTER_JOBS", "1")
    pipeline.main(["execute", "--profile", "smoke"])
    executed = sandbox / "executed"
    assert {p.name for p in executed.iterdir()} == {"00_symmetries.ipynb", "using-symlib.ipynb", "reproducibility.ipynb"}
    assert [Path(c["cwd"]).name for c in calls] == ["notebooks", "book", "book"]
    assert not (sandbox / "results" / "pieces" / "using-symlib.json").exists()
    calls.clear()
    pipeline.main(["execute", "--profile", "smoke", "00_symmetries"])
    assert [Path(c["cwd"]).name for c in calls] == ["notebooks", "book"]  # the chapter, the ledger


def test_build_refuses_a_read_only_checkout_by_name(sandbox, monkeypatch):
    blocker = sandbox / "a-file"
    blocker.write_text("x")
    monkeypatch.setattr(pipeline, "EXECUTED", blocker)
    monkeypatch.setenv("SYMLIB_EXECUTED", str(sandbox / "pages"))
    with pytest.raises(SystemExit, match="build: cannot copy the notebooks of SYMLIB_EXECUTED=.*writable copy of the checkout"):
        pipeline._in_tree_pages()


@pytest.mark.slow
def test_two_chapters_side_by_side_write_their_pages_and_results_where_the_variables_point(
        tmp_path, monkeypatch, capfd):
    # in worker processes: only what the environment says reaches them (no monkeypatched module)
    for var, folder in (("SYMLIB_EXECUTED", "executed"), ("SYMLIB_RESULTS", "results"),
                        ("SYMLIB_CACHE", "cache")):
        monkeypatch.setenv(var, str(tmp_path / folder))
    monkeypatch.setenv("SYMLIB_CHAPTER_JOBS", "2")
    monkeypatch.delenv("SYMLIB_CACHED_ONLY", raising=False)
    pipeline.main(["execute", "--profile", "smoke", "--device", "cpu", "00_symmetries", "01_ortho_skip"])
    out = capfd.readouterr().out
    assert "2 chapters, 2 at a time" in out
    for name in ("00_symmetries", "01_ortho_skip"):
        assert nbformat.read(tmp_path / "executed" / f"{name}.ipynb", as_version=4).cells
        results = json.loads((tmp_path / "results" / f"{name}.json").read_text())
        assert results["profile"] == "smoke"
        assert f"[symlib] {name}: " in out
    assert (tmp_path / "executed" / "reproducibility.ipynb").exists()


def test_a_chapter_stopped_at_its_budget_is_a_piece_to_continue_not_a_failure(sandbox, monkeypatch, capsys):
    """A stage raising BudgetExhausted: the other chapters run, nothing of the stopped one is put in
    place, the command exits 75 saying to run again, and every execution is in the pieces file."""
    from symlib.book import pieces

    (sandbox / "executed").mkdir()
    previous = sandbox / "executed" / "00_symmetries.ipynb"
    previous.write_text("previous page")

    def stop(kwargs):
        if kwargs["cwd"].endswith("notebooks") and stop.first:
            stop.first = False
            raise papermill.PapermillExecutionError(0, 1, "HMC: stopped", "BudgetExhausted", "HMC: stopped", [])

    stop.first = True
    fake_papermill(monkeypatch, stop)
    monkeypatch.setenv("SYMLIB_CHAPTER_JOBS", "1")
    with pytest.raises(SystemExit) as err:
        pipeline.main(["execute", "--profile", "smoke", "00_symmetries", "01_ortho_skip"])
    assert err.value.code == pipeline.BUDGET_EXIT
    printed = capsys.readouterr().err
    assert "00_symmetries: stopped at its time budget (HMC: stopped); run the same command again" in printed
    assert "1 of 2 chapters stopped at their time budget (00_symmetries)" in printed and "FAILED" not in printed
    assert previous.read_text() == "previous page"
    assert (sandbox / "executed" / "01_ortho_skip.ipynb").exists()
    assert not (sandbox / "executed" / "00_symmetries.failed.ipynb").exists()
    assert [e["outcome"] for e in pieces.read("00_symmetries")] == ["budget"]
    assert [e["outcome"] for e in pieces.read("01_ortho_skip")] == ["complete"]
    pipeline.main(["execute", "--profile", "smoke", "00_symmetries"])   # the next piece completes it
    log = pieces.read("00_symmetries")
    assert [e["outcome"] for e in log] == ["budget", "complete"] and {e["profile"] for e in log} == {"smoke"}
    assert pieces.account(log, "smoke")["pieces"] == 2 and log[0]["device"] == "cpu"


def test_a_key_glued_again_replaces_the_earlier_value_on_the_page():
    """_postprocess keeps the last output glued under a key (Jupyter Book warns on duplicates)."""
    def glued(name, text):
        return nbformat.v4.new_output("display_data", data={"text/plain": text},
                                      metadata={"scrapbook": {"name": name, "mime_prefix": ""}})

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("a"), nbformat.v4.new_code_cell("b")]
    nb.cells[0].outputs = [glued("fig", "this build"), glued("other", "kept"),
                           nbformat.v4.new_output("stream", name="stdout", text="shown")]
    nb.cells[1].outputs = [glued("fig", "published")]
    pipeline._postprocess(nb)
    assert [o.get("data", {}).get("text/plain") or o.get("text") for o in nb.cells[0].outputs] == ["kept", "shown"]
    assert [o["data"]["text/plain"] for o in nb.cells[1].outputs] == ["published"]


def test_compute_runs_the_stages_without_a_notebook_and_logs_each_piece(sandbox, monkeypatch, capsys):
    """``pipeline compute``: a chapter's stages into the cache (what its notebook's
    ``CHAPTER.compute`` would compute, same keys), one pieces entry per execution, exit 75 for a
    chapter stopped at its budget; ``$SYMLIB_PIECE_START`` marks each piece's start."""
    from symlib.book import cache, pieces
    from symlib.book.runtime import PIECE_START_ENV
    from symlib.chapters.ortho_skip import CHAPTER
    from symlib.inference.loop import BudgetExhausted

    before = time.time()
    pipeline.main(["compute", "--profile", "smoke", "--device", "cpu", "01_ortho_skip"])
    assert before <= float(os.environ[PIECE_START_ENV]) <= time.time()
    assert [e["outcome"] for e in pieces.read("01_ortho_skip")] == ["complete"]
    assert "execute --cached-only --profile smoke --seed 0 --device cpu 01_ortho_skip" in capsys.readouterr().out
    # what it cached is what the notebook's run finds: nothing is computed a second time
    monkeypatch.setenv(cache.CACHED_ONLY_VARIABLE, "1")
    CHAPTER.compute(CHAPTER.start(profile="smoke", seed=0, device="cpu"))
    monkeypatch.delenv(cache.CACHED_ONLY_VARIABLE)
    cache.clear()
    monkeypatch.setenv(cache.CACHED_ONLY_VARIABLE, "1")
    with pytest.raises(cache.CacheMiss):            # the check above can fail: a miss is refused
        CHAPTER.compute(CHAPTER.start(profile="smoke", seed=0, device="cpu"))
    monkeypatch.delenv(cache.CACHED_ONLY_VARIABLE)

    def stopped(run):
        raise BudgetExhausted("HMC: stopped after piece 1")

    monkeypatch.setattr(type(CHAPTER), "compute", lambda self, run: stopped(run))
    with pytest.raises(SystemExit) as err:
        pipeline.main(["compute", "--profile", "smoke", "--device", "cpu", "01_ortho_skip"])
    assert err.value.code == pipeline.BUDGET_EXIT
    assert "01_ortho_skip: stopped at its time budget (HMC: stopped after piece 1)" in capsys.readouterr().out
    assert [e["outcome"] for e in pieces.read("01_ortho_skip")] == ["complete", "budget"]
    monkeypatch.delenv("SYMLIB_JOBS", raising=False)
    capsys.readouterr()
    with pytest.raises(SystemExit, match="no chapter package for 07_nothing"):
        pipeline.main(["compute", "07_nothing"])
    assert "SYMLIB_JOBS" not in os.environ  # refused before the profile's default jobs were set
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="no chapter package for 07_nothing"):
        pipeline.compute(["07_nothing"], profile="smoke", seed=0, device="cpu")  # the function, too


_CALLS: list[int] = []


def _slow_item(ctx, item):
    """One item of the made-up fan-out stage below (module level: fan-out items must pickle): item
    3 outlasts any budget set, the others take no time."""
    _CALLS.append(item)
    if item == 3 and os.environ.get("SYMLIB_BUDGET_S"):
        time.sleep(120)
    return item * 10


def _slow_chapter(monkeypatch):
    """The made-up chapter ``98_test`` (one fan-out stage of :func:`_slow_item` over ``n`` items),
    declared to the pipeline for this test; returns it and its profile's class."""
    from dataclasses import dataclass

    from symlib.book import provenance
    from symlib.book.chapter import Chapter, Stage

    @dataclass(frozen=True)
    class P:
        n: int = 8

    chapter = Chapter(name="98_test", paper="none", profiles={"smoke": P()}, claims=lambda r: [],
                      stages=(Stage("work", _slow_item, fields=("n",), items=lambda c: list(range(c.n))),))
    monkeypatch.setattr(provenance, "declared", lambda name: chapter if name == "98_test" else None)
    return chapter, P


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_compute_stops_a_fan_out_stage_at_its_budget_keeping_the_items_it_finished(sandbox, monkeypatch, capsys, jobs):
    """A fan-out stage that does not stop at the budget itself (chapter 4's Stan fits) is
    interrupted ``BUDGET_GRACE_S`` after ``$SYMLIB_BUDGET_S`` as ``execute``'s kernel is, in the
    notebook's process (one job) or with joblib's workers killed (two): exit 75 well before the
    item in flight would end, a ``budget`` piece whose note counts the items cached, and the next
    run computes only the rest."""
    from symlib.book import pieces
    from symlib.book.chapter import Chapter, Stage

    chapter, P = _slow_chapter(monkeypatch)
    # two jobs: a longer budget, since each fresh worker hashes and caches its first item on a
    # machine that may be loaded (0 items were cached in 15 s at a load of 8 on 2 cores)
    budget = {"1": 15, "2": 40}[jobs]
    monkeypatch.setenv("SYMLIB_BUDGET_S", str(budget))
    monkeypatch.setenv("SYMLIB_JOBS", jobs)
    monkeypatch.setattr(pipeline, "BUDGET_GRACE_S", 0.0)
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)             # as in some runners' workers
    # joblib's workers are reused across calls: start fresh ones, which see this test's environment
    get_reusable_executor().shutdown(wait=True)
    if jobs == "2":
        # start both workers before the budget's clock: on a loaded machine two fresh workers can
        # take longer than the budget to import this module, and then no item is cached
        from joblib import Parallel, delayed
        assert Parallel(n_jobs=2)(delayed(_slow_item)(None, i) for i in (0, 1)) == [0, 10]
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # not joblib's
    _CALLS.clear()
    try:
        with pytest.raises(SystemExit) as err:
            pipeline.main(["compute", "--profile", "smoke", "--device", "cpu", "98_test"])
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN      # the caller's handler is back
    finally:
        signal.signal(signal.SIGINT, before)
    assert err.value.code == pipeline.BUDGET_EXIT
    (piece,) = pieces.read("98_test")
    assert piece["outcome"] == "budget" and f"interrupted after {budget} s + 0 s" in piece["note"]
    assert piece["seconds"] < budget + 45                           # item 3 would take 120 s
    assert bystander.poll() is None       # only joblib's workers were killed (an httpstan pool lives on)
    bystander.kill()
    bystander.wait()
    done = int(re.search(r"work: (\d) of 8 items cached", piece["note"]).group(1))
    if jobs == "1":                                                # in this process, in order
        assert done == 3 and _CALLS == [0, 1, 2, 3]
    else:                                                          # the other worker went on meanwhile
        assert 3 <= done <= 7
    assert "98_test: stopped at its time budget" in capsys.readouterr().out
    monkeypatch.delenv("SYMLIB_BUDGET_S")
    monkeypatch.setenv("SYMLIB_JOBS", "1")
    _CALLS.clear()
    pipeline.main(["compute", "--profile", "smoke", "--device", "cpu", "98_test"])
    assert _CALLS[0] == 3 and len(_CALLS) == 8 - done               # item 3, lost in flight, and the rest
    assert [e["outcome"] for e in pieces.read("98_test")] == ["budget", "complete"]
    assert pipeline.items_done(chapter, P(), seed=0, device="cpu") == "work: 8 of 8 items cached"
    assert pipeline.items_done(chapter, P(n=9), seed=0, device="cpu") == "work: 0 of 9 items cached"
    assert pipeline.items_done(chapter, P(n=0), seed=0, device="cpu") == "no fan-out stage has items in this profile", \
        "a stage this profile leaves without items is not counted ('0 of 0 items cached'), nor said not to exist"
    single = Chapter(name="98_test", paper="none", profiles={"smoke": P()}, claims=lambda r: [],
                     stages=(Stage("work", _slow_item, fields=("n",)),))
    assert pipeline.items_done(single, P(), seed=0, device="cpu") == "no fan-out stage"


def _sweep_item(ctx, item):
    """An item of the made-up sweep stage below (module level, as fan-out items must be)."""
    return item


def test_items_done_counts_the_items_a_sweep_setting_reruns_through_the_cache(sandbox, monkeypatch):
    """A sweep setting whose field a fan-out stage reads (chapter 2a's OptuNet momentum retrains
    the ten chunks) keeps each rerun item in the cache: a piece stopped inside that one setting
    says how many it kept, so two such pieces are not taken for a stall. A setting with none
    cached yet, or whose field the stage does not read, is not named."""
    from dataclasses import dataclass

    from symlib.book import cache, provenance
    from symlib.book.chapter import Chapter, Stage

    @dataclass(frozen=True)
    class P:
        n: int = 3
        scale: float = 1.0
        other: int = 0
        robustness: tuple = (("scale", 2.0), ("scale", 3.0), ("other", 1))

    work = Stage("work", _slow_item, fields=("n", "scale"), items=lambda c: list(range(c.n)))
    sweep = Stage("robustness", _sweep_item, fields=("n", "scale", "other", "robustness"),
                  items=lambda c: list(c.robustness))
    chapter = Chapter(name="98_test", paper="none", profiles={"smoke": P()}, claims=lambda r: [], stages=(work, sweep))
    monkeypatch.setattr(provenance, "declared", lambda name: chapter if name == "98_test" else None)
    assert pipeline.items_done(chapter, P(), seed=0, device="cpu") == \
        "work: 0 of 3 items cached, robustness: 0 of 3 items cached"
    changed = work.view(P(), "98_test").replace(scale=2.0)
    for item in (0, 2):
        cache.cached("98_test-work", work.version, work.key(changed, 0, "cpu", item=item), lambda item=item: item)
    cache.cached("98_test-work", work.version, work.key(P(), 0, "cpu", item=1), lambda: 1)
    assert pipeline.items_done(chapter, P(), seed=0, device="cpu") == \
        "work: 1 of 3 items cached, work at scale=2.0: 2 of 3 items cached, robustness: 0 of 3 items cached"
    assert pipeline.items_done(chapter, P(), seed=1, device="cpu") == \
        "work: 0 of 3 items cached, robustness: 0 of 3 items cached", "another seed's entries are not this run's"


def test_an_interrupted_execute_names_a_real_chapters_items_cached(sandbox):
    """``execute``'s interrupted pieces count the chapter's fan-out items cached (chapter 4's Stan
    fits, none yet in an empty cache); a notebook with no chapter package says only that they are kept."""
    assert pipeline._items_done_of("04_constrained_models", "smoke", 0, "cpu").startswith(
        "boston_fits: 0 of 6 items cached")
    assert pipeline._items_done_of("99_slow", "smoke", 0, "cpu") == "the stage items it finished are cached"


def test_compute_can_leave_out_a_finished_stage_kept_elsewhere(sandbox, capsys):
    """``compute --skip STAGE``: the stage is not run (its entry kept on another machine), the
    others are, the pieces file says so; a stage another one reads cannot be skipped."""
    from symlib.book import cache, pieces
    from symlib.chapters.rebasin_hmc import CHAPTER as CH5

    pipeline.main(["compute", "--profile", "smoke", "--device", "cpu", "--skip", "robustness", "01_ortho_skip"])
    entries = {p.parent.name for p in cache.cache_dir().rglob("*.pt")}
    assert entries == {"01_ortho_skip-sinc"}               # the main stage's entry (its folder) only
    assert len(list(cache.cache_dir().rglob("*.pt"))) == 1
    (piece,) = pieces.read("01_ortho_skip")
    # robustness was skipped but is computed nowhere yet: the chapter is not complete
    assert piece["outcome"] == "partial" and piece["note"] == (
        "stages robustness skipped (computed before, kept aside); robustness not computed yet, the chapter is not complete")
    pipeline.main(["compute", "--profile", "smoke", "--device", "cpu", "01_ortho_skip"])    # computed, as elsewhere
    pipeline.main(["compute", "--profile", "smoke", "--device", "cpu", "--skip", "robustness", "01_ortho_skip"])
    piece = pieces.read("01_ortho_skip")[-1]
    assert piece["outcome"] == "complete" and piece["note"] == "stages robustness skipped (computed before, kept aside)"
    assert [s.name for s in pipeline.without_stages(CH5, ("bayes",)).stages] == ["not", "ensemble", "vi", "robust"]
    assert pipeline.without_stages(CH5, ()) is CH5
    with pytest.raises(ValueError, match="stage 'bayes' takes 'ensemble' as input"):
        pipeline.without_stages(CH5, ("ensemble",))
    with pytest.raises(ValueError, match="no stage 'nope' to skip"):
        pipeline.main(["compute", "--profile", "smoke", "--device", "cpu", "--skip", "nope", "05_rebasin_hmc"])


def test_compute_killed_from_outside_logs_its_piece_with_the_items_cached(sandbox, monkeypatch):
    """SIGTERM (gpu_piece.sh's ``timeout`` at ``HARD_S``, before the watchdog fires) ends
    ``compute`` with status 143, and the piece is still logged: ``failed``, its seconds counted,
    its note saying it was terminated and which items were cached; the caller's SIGTERM handler
    is back afterwards."""
    import threading

    from symlib.book import pieces

    _slow_chapter(monkeypatch)
    monkeypatch.setenv("SYMLIB_BUDGET_S", "600")    # item 3 sleeps; the watchdog would fire at 600 s
    monkeypatch.setenv("SYMLIB_JOBS", "1")
    before = signal.getsignal(signal.SIGTERM)
    _CALLS.clear()
    kill = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGTERM))
    kill.start()
    try:
        with pytest.raises(SystemExit) as err:
            pipeline.main(["compute", "--profile", "smoke", "--device", "cpu", "98_test"])
    finally:
        kill.cancel()
    assert err.value.code == pipeline.TERMINATED == 143
    assert signal.getsignal(signal.SIGTERM) is before
    assert _CALLS == [0, 1, 2, 3]
    (piece,) = pieces.read("98_test")
    assert piece["outcome"] == "failed" and 2 < piece["seconds"] < 60
    assert piece["note"].startswith(f"{pieces.TERMINATED} after ")
    assert piece["note"].endswith("; work: 3 of 8 items cached")


def test_bad_inputs_fail_before_a_kernel_starts(sandbox, monkeypatch):
    """Before: a device this machine lacks failed inside the kernel, after a full traceback."""
    calls = fake_papermill(monkeypatch)
    with pytest.raises(SystemExit, match="sees no CUDA GPU here|unknown device"):
        pipeline.main(["execute", "--profile", "smoke", "--device", "cuda:7", "00_symmetries"])
    with pytest.raises(SystemExit, match="unknown device 'gpu'"):
        pipeline.main(["compute", "--profile", "smoke", "--device", "gpu", "00_symmetries"])
    assert calls == []


def test_a_cache_without_room_fails_before_anything_computes(sandbox, monkeypatch):
    from symlib import files

    calls = fake_papermill(monkeypatch)
    monkeypatch.setattr(files, "free_bytes", lambda path: 10)
    with pytest.raises(SystemExit, match=r"not enough space for the cache at .*: it needs 1,073,741,824 bytes, 10 are free"):
        pipeline.main(["execute", "--profile", "smoke", "00_symmetries"])
    assert calls == []
