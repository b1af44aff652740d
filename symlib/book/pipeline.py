"""Execute the book's notebooks with papermill and build the book with Jupyter Book.

    python -m symlib.book.pipeline execute [--profile quick] [--seed 0] [--device auto] [CHAPTER ...]
    python -m symlib.book.pipeline compute [--profile paper] [--seed 0] [--device auto] CHAPTER ...
    python -m symlib.book.pipeline build
    python -m symlib.book.pipeline chapters
    python -m symlib.book.pipeline clean

``execute`` turns each MyST notebook (``notebooks/NN_name.md``, jupytext) into an ``.ipynb``,
runs it with papermill (parameters ``profile``, ``seed``, ``device``) and post-processes it into
``executed/NN_name.ipynb`` (``$SYMLIB_EXECUTED`` if set): the parameter cells are hidden from
the page and stderr (progress bars, warnings) is dropped, after any cache-corruption warning in
it has been printed. The kernel writes the chapter's results file into a staging folder
(``$SYMLIB_RESULTS_STAGING``); only once the whole notebook has run are the results file and the
executed notebook moved into place, one right after the other (SIGINT and SIGTERM held back
meanwhile), so an interrupted run leaves the previous run's pair, never a mix. A failed run
(an error in a cell, or a kernel that died) leaves both untouched, names the chapter and keeps
the failed notebook as ``executed/NN_name.failed.ipynb`` for inspection. The reproducibility page
(``book/reproducibility.md``) is executed last so it sees every chapter's results file. The
"Using symlib" page (``book/using-symlib.md``, examples of the library's methods) is executed
beside the chapters when every chapter is, or when named (``execute using-symlib``); ``build``
executes either page when its executed notebook is missing (:data:`BOOK_PAGES`).

A long run goes in pieces of at most ``$SYMLIB_BUDGET_S`` seconds per chapter: a stage that
reaches that budget raises :class:`~symlib.inference.loop.BudgetExhausted` with its
checkpoint written, and a chapter still running :data:`BUDGET_GRACE_S` after it has its kernel
interrupted (a fan-out stage keeps every item it finished, each cached on its own, and loses the
ones in flight). The chapter is then reported as *stopped at its time budget*, not as failed,
nothing of it is put in place, and ``execute`` exits with status 75 once the other chapters have
run: run the same command again to continue. Every execution of a chapter appends a line to its pieces file
(:mod:`symlib.book.pieces`), from which a published run states how many pieces and device
minutes it took.

``compute`` runs a chapter's stages into the cache without executing its notebook, for a GPU
machine without Jupyter: the same stages, keys and pieces file as ``execute`` (a stage stopped at
``$SYMLIB_BUDGET_S`` exits 75 the same way); ``execute --cached-only`` with the same profile, seed
and device then renders the pages from that cache on any machine.

``build`` copies MathJax from its registry package into ``book/_static`` (the book renders
math offline), writes a placeholder for any chapter not executed, and runs
``jupyter-book build --all -W --keep-going``. The book is built inside the checkout
(``_toc.yml`` points at ``executed/``, the pages go to ``_build/``): with ``$SYMLIB_EXECUTED``
set, ``build`` first mirrors that folder's notebooks into the checkout's ``executed/``.

``clean`` removes the build, the executed notebooks, the results files and the cache, wherever
``SYMLIB_EXECUTED``, ``SYMLIB_RESULTS`` and ``SYMLIB_CACHE`` point (in a folder of the user's
only the files the book writes there).

Relative ``SYMLIB_CACHE``, ``SYMLIB_RESULTS``, ``SYMLIB_EXECUTED`` and ``SYMLIB_DATA`` are taken
relative to the directory the command was run from (kernels run in ``notebooks/`` or
``book/``), and the executed, results and cache directories must be writable before a chapter
starts (the cache need not be with ``--cached-only``, which only reads it). Each kernel runs in a
``symlib-nb-<pid>-*`` temporary folder (with its connection file and, on POSIX, its IPC
sockets), removed when the run ends, fails or is interrupted (Ctrl-C, SIGTERM); one left by a
killed run is removed by the next, as are the temporary files of killed writers in the cache,
results and executed folders (:func:`symlib.book.cache.remove_stale_tmp`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import mathjax
import psutil
import torch

from symlib.book import parallel, pieces, provenance, side_by_side
from symlib.book.cache import (
    CACHED_ONLY_VARIABLE,
    cache_dir,
    cached,
    cached_only,
    clear,
    pid_alive,
    remove_stale_tmp,
)
from symlib.book.paths import EXECUTED_VARIABLE, project_root_or_cwd
from symlib.book.pieces import log_piece
from symlib.book.provenance import compute_code_hash, stage_code_hashes
from symlib.book.publishing import glue_key
from symlib.book.results import STAGING_VAR, check_writable, results_dir
from symlib.book.runtime import PIECE_START_ENV, budget_from_env, resolve_device
from symlib.book.workers import use_env_aware_workers
from symlib.files import DiskFullError, require_free
from symlib.inference.loop import BudgetExhausted

ROOT = project_root_or_cwd()
NOTEBOOKS = ROOT / "notebooks"
EXECUTED = ROOT / "executed"
"""The checkout's executed notebooks: the default of ``$SYMLIB_EXECUTED``, and what ``_toc.yml`` builds."""
REPRO_PAGE = ROOT / "book" / "reproducibility.md"
USING_PAGE = ROOT / "book" / "using-symlib.md"
BOOK_PAGES = {"reproducibility": REPRO_PAGE, "using-symlib": USING_PAGE}
"""Pages of ``book/`` executed as the chapters are, into ``executed/<name>.ipynb``: they write no
results file and keep no pieces file."""
EXAMPLE_PAGES = ("using-symlib",)
"""Book pages that ``execute`` without chapter names runs beside the chapters (they need no results)."""
MATHJAX_DEST = ROOT / "book" / "_static" / "mathjax"
PROFILES = ("smoke", "quick", "full", "paper")

HIDDEN_TAGS = {"parameters", "injected-parameters"}
PATH_VARIABLES = ("SYMLIB_CACHE", "SYMLIB_RESULTS", "SYMLIB_DATA", EXECUTED_VARIABLE)
TMP_PREFIX = "symlib-nb-"
MAX_IPC_PATH = 100  # a Unix socket path holds at most 107 bytes; ZeroMQ appends "-<n>"


def chapters() -> list[str]:
    """Chapter names (``NN_name``) in book order."""
    return sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]*_*.md"))


def _source(name: str) -> Path:
    if name in BOOK_PAGES:
        return BOOK_PAGES[name]
    path = NOTEBOOKS / f"{name}.md"
    if not path.exists():
        raise SystemExit(f"unknown chapter {name!r}; valid chapters: {', '.join(chapters())}")
    return path


def executed_dir() -> Path:
    """``$SYMLIB_EXECUTED`` (absolute) if set and not empty, else :data:`EXECUTED`."""
    env = os.environ.get(EXECUTED_VARIABLE)
    return Path(env).expanduser().absolute() if env else EXECUTED


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _absolute_path_variables() -> None:
    """Make relative ``SYMLIB_CACHE`` / ``SYMLIB_RESULTS`` / ``SYMLIB_EXECUTED`` / ``SYMLIB_DATA`` absolute.

    Kernels inherit the environment but run in ``notebooks/`` (``book/`` for the
    reproducibility page), where a relative path would point somewhere else than where the user
    typed the command.
    """
    for var in PATH_VARIABLES:
        value = os.environ.get(var)
        if value:
            os.environ[var] = os.path.abspath(os.path.expanduser(value))


def _check_writable(var: str, default: Path) -> None:
    """Fail before a chapter runs if the directory ``$var`` (else ``default``) is not writable."""
    try:
        check_writable(Path(os.environ.get(var) or default), variable=var, what=var)
    except OSError as err:
        raise SystemExit(f"{var}: {err}") from None


def _remove_stale_tmp() -> None:
    """Remove what killed runs left: ``symlib-nb-<pid>-*`` folders of ours whose process is gone,
    and temporary files of dead writers in the cache, results and executed folders."""
    for folder in {cache_dir(), results_dir(), executed_dir()}:
        remove_stale_tmp(folder)
    for path in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*-*"):
        pid = path.name[len(TMP_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or pid_alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            if path.is_dir() and path.stat().st_uid == os.getuid():
                shutil.rmtree(path)


@contextlib.contextmanager
def _sigterm_exits():
    """Turn SIGTERM into ``SystemExit(143)`` so ``finally`` blocks run and clean up.

    On its way out the exception passes papermill's client, which shuts its kernel down, and
    the temporary folder's cleanup; by default SIGTERM would end the process on the spot.
    """

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: signals cannot be handled here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _cache_warnings(nb) -> list[str]:
    """Lines of the notebook's stderr outputs that report a corrupt cache entry."""
    return [
        line.strip()
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
        if o.get("output_type") == "stream" and o.get("name") == "stderr"
        for line in "".join(o.get("text", "")).splitlines()
        if "CacheCorruptionWarning" in line
    ]


def _report_cache_warnings(name: str, nb) -> None:
    # the kernel's stderr is dropped from the page, so this is the only place a user sees them
    for line in _cache_warnings(nb):
        print(f"[symlib] {name}: {line}", file=sys.stderr, flush=True)


def _postprocess(nb) -> None:
    """Hide parameter cells from the page, drop stderr outputs, and keep only the last value glued
    under each key (a page may glue a key again to replace it, e.g. a figure by the published
    run's: :func:`symlib.book.tables.front_figure`; Jupyter Book warns on a key glued twice)."""
    last = {}
    for i, cell in enumerate(nb.cells):
        for j, output in enumerate(cell.get("outputs", []) if cell.cell_type == "code" else []):
            if (key := glue_key(output)) is not None:
                last[key] = (i, j)
    for i, cell in enumerate(nb.cells):
        tags = set(cell.get("metadata", {}).get("tags", []))
        if tags & HIDDEN_TAGS:
            cell.metadata["tags"] = sorted(tags | {"remove-cell"})
        if cell.cell_type == "code":
            cell.outputs = [o for j, o in enumerate(cell.outputs)
                            if not (o.get("output_type") == "stream" and o.get("name") == "stderr")
                            and (glue_key(o) is None or last[glue_key(o)] == (i, j))]


def _kernel_config(folder: Path):
    """The kernel's connection file inside ``folder`` (so nothing outlives the run) and, on
    POSIX, IPC transport with its sockets there too: over TCP ipykernel warns on every notebook
    that it runs "without encryption"; IPC sockets are files only this user can reach."""
    from traitlets.config import Config

    manager = {"connection_file": str(folder / "kernel.json")}
    ipc = folder / "ipc"
    if os.name == "posix" and len(str(ipc)) <= MAX_IPC_PATH:  # else TCP: it works, with the warning
        manager.update(transport="ipc", ip=str(ipc))
    return Config({"KernelManager": manager})


@contextlib.contextmanager
def _environ(name: str, value: str):
    """Set ``$name`` for what starts inside the block (the kernel inherits it), then restore it."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _failure(name: str, reason: str, out: Path, failed: Path, target: Path) -> SystemExit:
    """The "execution failed" exit naming the chapter; keeps the failed notebook if one was saved."""
    import nbformat

    if out.exists():
        _report_cache_warnings(name, nbformat.read(out, as_version=4))
        shutil.copyfile(out, failed)
        kept = f"The failed notebook is at {_shown(failed)}"
    else:
        kept = "No notebook was saved"
    return SystemExit(f"{name}: execution failed ({reason}).\n{kept}; {_shown(target)} was left as it was.")


@contextlib.contextmanager
def _signals_held():
    """Hold SIGINT and SIGTERM back (delivered on exit), so two renames are not split by them."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _durable_copy(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    with open(dst, "rb+") as fh:
        os.fsync(fh.fileno())


def _commit(nb, staging: Path, target: Path, results: Path) -> list[Path]:
    """Move the run's results files (from ``staging``) and its executed notebook into place.

    Everything is first written beside its destination as ``.<name>.<pid>.commit.tmp`` (the
    pid lets a later run remove them if this one is killed), then renamed into place, results
    first, with SIGINT/SIGTERM held back so both renames happen or, failing before, neither.

    Returns:
        The files put in place.
    """
    import nbformat

    tag = f"{os.getpid()}.commit.tmp"
    pending: list[tuple[Path, Path]] = []
    try:
        for staged in sorted(staging.glob("*.json")):
            results.mkdir(parents=True, exist_ok=True)
            pending.append((results / f".{staged.name}.{tag}", results / staged.name))
            _durable_copy(staged, pending[-1][0])
        pending.append((target.parent / f".{target.name}.{tag}", target))
        nbformat.write(nb, pending[-1][0])
        with _signals_held():
            for tmp, dest in pending:
                os.replace(tmp, dest)  # atomic: a reader never sees half a file
    finally:
        for tmp, _ in pending:
            tmp.unlink(missing_ok=True)
    return [dest for _, dest in pending]


def execute(name: str, *, profile: str, seed: int, device: str) -> float:
    """Execute one notebook into :func:`executed_dir`; returns its wall time in seconds.

    Relative path variables are made absolute against the current directory first (this
    changes ``os.environ``), and a chapter refuses to start if its executed, results or cache
    directory cannot be written (the cache may be read-only with ``--cached-only``). The
    chapter's results file and executed notebook are put in place together once the notebook
    has run (:func:`_commit`).
    """
    import jupytext
    import nbformat
    import papermill
    from nbclient.exceptions import DeadKernelError

    source = _source(name)
    _absolute_path_variables()
    if name not in BOOK_PAGES:  # the pages write no results and compute no stage
        _check_writable("SYMLIB_RESULTS", ROOT / "results")
        if not cached_only():  # a re-render only reads the cache: a read-only one will do
            _check_writable("SYMLIB_CACHE", ROOT / ".cache" / "symlib")
    _check_writable(EXECUTED_VARIABLE, EXECUTED)
    _remove_stale_tmp()
    executed_folder = executed_dir()
    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    target = executed_folder / f"{name}.ipynb"
    failed = executed_folder / f"{name}.failed.ipynb"
    budget = _budget()
    start, started = time.perf_counter(), datetime.now(UTC)
    # the pid in the name lets a later run tell a killed run's folder from a running one's
    with (
        _sigterm_exits(),
        tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}{os.getpid()}-") as tmp,
        _budget_watchdog(budget) as interrupted,
    ):
        inp, out, staging = Path(tmp) / "input.ipynb", Path(tmp) / "output.ipynb", Path(tmp) / "results"
        nbformat.write(nb, inp)
        staging.mkdir()
        try:
            # the inline backend whatever the caller's MPLBACKEND says: with Agg (usual on a headless
            # machine) a kernel renders no figure and the page and published run would have none
            with _environ(STAGING_VAR, str(staging)), _environ("MPLBACKEND", INLINE_BACKEND):
                papermill.execute_notebook(
                    str(inp),
                    str(out),
                    parameters={"profile": profile, "seed": seed, "device": device},
                    kernel_name="python3",
                    cwd=str(source.parent),
                    progress_bar=True,  # which cell of which chapter, on the console (item: silent builds)
                    log_output=False,
                    # the kernel's stderr (an experiment's tqdm bar, warnings) goes to the console as it
                    # comes; the page drops it (_postprocess)
                    stderr_file=sys.stderr,
                    config=_kernel_config(Path(tmp)),
                )
        except papermill.PapermillExecutionError as err:
            # once the watchdog has interrupted the kernel, whatever the cell then raised is the
            # interruption: KeyboardInterrupt from Python code, but an interrupted Stan fit surfaces
            # in PyStan as another error (AttributeError: 'NoneType' object has no attribute
            # 'stan_outputs'), which is no failure of the chapter
            if err.ename == BUDGET_ERROR or interrupted.is_set():
                # a piece of a long run: its stages kept their checkpoints and finished items
                why = err.evalue if err.ename == BUDGET_ERROR else (
                    f"{pieces.INTERRUPTED} {budget:g} s + {BUDGET_GRACE_S:g} s, the cell raising {err.ename}; "
                    + _items_done_of(name, profile, seed, device))
                _log_piece(name, profile, seed, device, start, started, "budget", why)
                raise SystemExit(f"{name}: {PIECE_STOPPED} ({why}); run the same command again "
                                 f"to continue. {_shown(target)} was left as it was.") from None
            _log_piece(name, profile, seed, device, start, started, "failed")
            raise _failure(name, f"{err.ename}: {err.evalue}", out, failed, target) from None
        except DeadKernelError as err:
            _log_piece(name, profile, seed, device, start, started, "failed")
            reason = (f"the kernel died, {type(err).__name__}: {err}; out of memory, a crash in "
                      "compiled code (e.g. a damaged compiled Stan model) or a kill")
            raise _failure(name, reason, out, failed, target) from None
        except SystemExit as err:
            if err.code == TERMINATED:
                # killed from outside: the piece is logged as `compute` logs it, its time counted
                _log_piece(name, profile, seed, device, start, started, "failed",
                           f"{pieces.TERMINATED} after {time.perf_counter() - start:.0f} s")
            raise
        executed = nbformat.read(out, as_version=4)
        _report_cache_warnings(name, executed)
        _postprocess(executed)
        _commit(executed, staging, target, results_dir())
    failed.unlink(missing_ok=True)
    _log_piece(name, profile, seed, device, start, started, "rendered" if cached_only() else "complete")
    return time.perf_counter() - start


BUDGET_GRACE_S = 60.0
"""Seconds past ``$SYMLIB_BUDGET_S`` that a chapter still running is given before its kernel is
interrupted: time for a stage that stops at the budget itself to write its checkpoint."""


def _budget() -> float | None:
    """``$SYMLIB_BUDGET_S`` (None: no budget); a bad value fails before any chapter starts."""
    return budget_from_env()


@contextlib.contextmanager
def _budget_watchdog(budget_s: float | None, grace_s: float | None = None, *, interrupt=None):
    """Interrupt this process's Jupyter kernel (or call ``interrupt()``) once ``budget_s`` plus
    ``grace_s`` (default :data:`BUDGET_GRACE_S`) seconds have passed; yields an event set when it did."""
    fired = threading.Event()
    if budget_s is None:
        yield fired
        return
    action = _interrupt_kernels if interrupt is None else interrupt

    def fire():
        fired.set()
        action()

    timer = threading.Timer(budget_s + (BUDGET_GRACE_S if grace_s is None else grace_s), fire)
    timer.daemon = True
    timer.start()
    try:
        yield fired
    finally:
        timer.cancel()


def _interrupt_kernels() -> list[int]:
    """SIGINT to the Jupyter kernels among this process's children (a cell then raises
    KeyboardInterrupt, and joblib stops its workers); their pids."""
    pids = []
    for child in psutil.Process().children():
        try:
            if any("ipykernel" in part for part in child.cmdline()):
                child.send_signal(signal.SIGINT)
                pids.append(child.pid)
        except psutil.Error:  # gone meanwhile
            continue
    return pids


BUDGET_ERROR = "BudgetExhausted"
"""The exception (:class:`symlib.inference.loop.BudgetExhausted`) with which a stage
stops at its time budget, its checkpoint written."""

PIECE_STOPPED = "stopped at its time budget"
"""How a chapter that stopped at its budget is reported (not a failure: run again to go on)."""

INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
"""The kernels' matplotlib backend (``$MPLBACKEND``), whatever the caller's environment says."""

BUDGET_EXIT = 75
"""Exit status of an ``execute`` in which every chapter either finished or stopped at its budget,
and at least one stopped (``EX_TEMPFAIL``: run the same command again)."""

TERMINATED = 128 + signal.SIGTERM
"""``compute``'s exit status when SIGTERM ended it (a ``timeout`` around a piece): the piece is
logged as ``failed``, its note starting with :data:`symlib.book.pieces.TERMINATED` and saying
which items were cached (:func:`items_done`)."""


def _device_name(device: str) -> str:
    """The device a chapter ran on, for its pieces file: ``cpu``, or ``cuda (NVIDIA H100 ...)``."""
    resolved = resolve_device(device)
    if resolved.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(resolved)})"
    return resolved.type


def _log_piece(name: str, profile: str, seed: int, device: str, start: float, started, outcome: str,
               note: str | None = None) -> None:
    """One line in the chapter's pieces file (:mod:`symlib.book.pieces`); the reproducibility
    page and the other book pages are not chapters and keep none."""
    if name in BOOK_PAGES:
        return

    log_piece(name, profile=profile, device=_device_name(device), seconds=time.perf_counter() - start,
              outcome=outcome, started=started, code_hash=compute_code_hash(name), note=note,
              seed=seed, stage_hashes=stage_code_hashes(name))


def _placeholder(name: str, folder: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    title = name.split("_", 1)[1].replace("_", " ").capitalize()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            f"# {title}\n\nThis chapter has not been executed in this checkout. Run\n\n"
            f"```\nmake chapter CHAPTER={name}\n```\n\nto execute it and rebuild the book."
        )
    ]
    nbformat.write(nb, folder / f"{name}.ipynb")


def copy_mathjax() -> Path:
    """Copy MathJax 3 (package ``django-static-mathjax``) next to the book's pages."""
    src = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (src / "tex-chtml.js").exists():
        raise SystemExit(f"MathJax not found at {src}; install the book extra: pip install -e '.[book]'")
    if not (MATHJAX_DEST / "tex-chtml.js").exists():
        shutil.rmtree(MATHJAX_DEST, ignore_errors=True)
        shutil.copytree(src, MATHJAX_DEST, ignore=shutil.ignore_patterns("*.map", "sre", "node-main*"))
    return MATHJAX_DEST


def _in_tree_pages() -> None:
    """Put the pages to build into the checkout's ``executed/`` (what ``_toc.yml`` lists).

    With ``$SYMLIB_EXECUTED`` set, its notebooks are copied in; a chapter it lacks gets a
    placeholder (the build shows what that folder holds, not an older in-tree run). The
    book pages (:data:`BOOK_PAGES`: the reproducibility page, "Using symlib") are executed first
    if they are missing.
    """
    _absolute_path_variables()
    source = executed_dir()
    mirrored = source.resolve() != EXECUTED.resolve()
    if mirrored:
        try:
            EXECUTED.mkdir(exist_ok=True)
            with tempfile.TemporaryFile(dir=EXECUTED):
                pass
        except OSError as err:
            raise SystemExit(
                f"build: cannot copy the notebooks of {EXECUTED_VARIABLE}={source} into {EXECUTED} "
                f"({err.strerror or err}). The book is built inside the checkout (_toc.yml lists "
                "executed/, the pages go to _build/): build from a writable copy of the checkout"
            ) from None
        print(f"[symlib] build: {EXECUTED_VARIABLE}={source}: copying its notebooks into {_shown(EXECUTED)} "
              "(_toc.yml lists the pages there)", flush=True)
    EXECUTED.mkdir(exist_ok=True)
    for name in BOOK_PAGES:
        if not (source / f"{name}.ipynb").exists():
            execute(name, profile="quick", seed=0, device="cpu")
    for name in chapters() + list(BOOK_PAGES):
        page = source / f"{name}.ipynb"
        if not page.exists():
            _placeholder(name, EXECUTED)
        elif mirrored:
            shutil.copyfile(page, EXECUTED / page.name)


def build() -> None:
    copy_mathjax()
    shutil.rmtree(ROOT / "_build" / "html", ignore_errors=True)  # no stale pages from earlier builds
    _in_tree_pages()
    cmd = [sys.executable, "-m", "jupyter_book", "build", str(ROOT), "--all", "-W", "--keep-going"]
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    if jb:
        cmd = [jb, "build", str(ROOT), "--all", "-W", "--keep-going"]
    subprocess.run(cmd, check=True, cwd=ROOT)


def _remove_outputs(folder: Path, names: list[str], suffixes: tuple[str, ...], *, whole: bool) -> None:
    """Remove the book's outputs from ``folder``: all of it when it is the checkout's own
    (``whole``), else only ``<name><suffix>`` files and our temporary files, then the folder if
    left empty (a mistyped variable pointing at a folder of the user's cannot wipe it)."""
    if whole:
        if folder.exists():
            shutil.rmtree(folder)
        return
    if not folder.is_dir():
        return
    for name in names:
        for suffix in suffixes:
            (folder / f"{name}{suffix}").unlink(missing_ok=True)
    for tmp in folder.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


def clean() -> list[Path]:
    """Remove the build, MathJax's copy, the executed notebooks, the results files and the cache.

    The folders ``SYMLIB_EXECUTED``, ``SYMLIB_RESULTS`` and ``SYMLIB_CACHE`` name are cleaned as
    well as the checkout's own; in a folder a variable names only the book's own files go
    (:func:`symlib.book.cache.clear` for the cache). The checkout's ``executed/`` and
    ``results/`` go whole. Errors are raised,
    not hidden. Returns the folders cleaned.
    """
    _absolute_path_variables()
    names = chapters() + list(BOOK_PAGES)
    for folder in (ROOT / "_build", MATHJAX_DEST):
        _remove_outputs(folder, [], (), whole=True)
    # the checkout's own folders too: an earlier run's, and the build's copies of the pages
    executed = sorted({EXECUTED, executed_dir()})
    results = sorted({ROOT / "results", results_dir()})
    caches = sorted({ROOT / ".cache" / "symlib", cache_dir()})
    for folder in executed:
        _remove_outputs(folder, names, (".ipynb", ".failed.ipynb"), whole=folder == EXECUTED)
    for folder in results:
        _remove_outputs(folder / "pieces", names, (".json",), whole=False)  # the chapters' pieces files
        _remove_outputs(folder, names, (".json",), whole=folder == ROOT / "results")
    for folder in caches:
        clear(folder)  # only the cache's own files, wherever it is
    return [ROOT / "_build", MATHJAX_DEST, *executed, *results, *caches]


def _default_jobs(profile: str, device: str) -> None:
    """Set ``$SYMLIB_JOBS`` for the kernels (which inherit it) when unset and the profile wants it."""
    if os.environ.get(parallel.ENV_VAR):
        return
    jobs = parallel.default_jobs(profile, resolve_device(device).type)
    if jobs is not None:
        os.environ[parallel.ENV_VAR] = jobs
        print(f"[symlib] {parallel.ENV_VAR} unset: profile {profile} on the CPU runs independent fits side by "
              f"side, one per core ({parallel.ENV_VAR}={jobs}; set it to 1 for one at a time)", flush=True)


def _announce(name: str, profile: str, seed: int, device: str) -> None:
    print(f"[symlib] executing {name} (profile={profile}, seed={seed}, device={device}) ...", flush=True)


def _piece_starts() -> None:
    """Mark the start of a chapter's piece for its stages (``$SYMLIB_PIECE_START``, inherited by
    its kernel): a stage that starts late gets only what is left of ``$SYMLIB_BUDGET_S``."""
    os.environ[PIECE_START_ENV] = repr(time.time())


def _execute_announced(name: str, *, profile: str, seed: int, device: str) -> float:
    _announce(name, profile, seed, device)
    _piece_starts()
    return execute(name, profile=profile, seed=seed, device=device)


def _report(name: str, seconds: float | None, error: str | None) -> None:
    if error is None:
        print(f"[symlib] {name}: {seconds:.1f} s", flush=True)
    elif PIECE_STOPPED in error:
        print(f"[symlib] {name}: {PIECE_STOPPED}, its checkpoints kept (run again to continue)",
              file=sys.stderr, flush=True)
    else:
        print(f"[symlib] {name}: FAILED (the message follows when every chapter has run)",
              file=sys.stderr, flush=True)


def _execute_chapters(names: list[str], *, profile: str, seed: int, device: str) -> dict[str, float]:
    """Execute ``names`` (side by side where :func:`side_by_side.chapter_jobs` says so), then the
    reproducibility page; every chapter runs even if one fails, and the failures end the run."""
    _absolute_path_variables()  # before the workers start: they inherit the environment
    os.environ.update(side_by_side.one_thread_kernels(profile))
    jobs = side_by_side.chapter_jobs(profile, resolve_device(device).type, len(names))
    if jobs > 1:
        names = side_by_side.longest_first(names, profile, results=results_dir())
        print(f"[symlib] executing {len(names)} chapters, {jobs} at a time, longest first "
              f"({side_by_side.ENV_VAR}=1 for one at a time)", flush=True)
    run = functools.partial(_execute_announced, profile=profile, seed=seed, device=device)
    with _sigterm_exits():  # stops the workers too: their kernels then exit with them
        times, failures = side_by_side.run_chapters(run, names, jobs, _report)
    stopped = {n: m for n, m in failures.items() if PIECE_STOPPED in m}
    failures = {n: m for n, m in failures.items() if n not in stopped}
    if failures:
        raise SystemExit("\n".join([*failures.values(), *stopped.values()]) + (
            f"\n{len(failures)} of {len(names)} chapters failed ({', '.join(failures)}); the others ran; "
            "the reproducibility page was not updated"))
    if stopped:
        print("\n".join(stopped.values()) + f"\n[symlib] {len(stopped)} of {len(names)} chapters stopped at their "
              f"time budget ({', '.join(stopped)}): run the same command again to continue from their checkpoints; "
              "the reproducibility page was not updated", file=sys.stderr, flush=True)
        raise SystemExit(BUDGET_EXIT)
    times["reproducibility"] = run("reproducibility")
    _report("reproducibility", times["reproducibility"], None)
    return times


def _declared(names: list[str]) -> dict:
    """``{name: its declared Chapter}``.

    Raises:
        ValueError: a name that is no chapter with a package.
    """
    chapters_ = {name: provenance.declared(name) for name in names}
    missing = [name for name, ch in chapters_.items() if ch is None]
    if missing:
        raise ValueError(f"no chapter package for {', '.join(missing)}; chapters: {', '.join(chapters())}")
    return chapters_


def compute(names: list[str], *, profile: str, seed: int, device: str, skip: tuple[str, ...] = ()) -> list[str]:
    """Run each chapter's stages into the cache (``compute``, module docstring), as its notebook
    would (:meth:`~symlib.book.chapter.Chapter.start`, :meth:`~symlib.book.chapter.Chapter.compute`),
    logging every execution as a piece. Returns the chapters stopped at their time budget.

    ``skip``: stages left out (:func:`without_stages`): a long run in pieces whose finished stage's
    entry is kept on the home machine, not carried to the GPU one (``tools/longruns/gpu_piece.sh
    aside``); the pieces file notes them.

    Raises:
        ValueError: a name that is no chapter with a package, or a ``skip`` that
            :func:`without_stages` refuses.
    """
    budget_exhausted = BudgetExhausted
    # each chapter sets its own $SYMLIB_PIECE_START: joblib workers a chapter before started would
    # keep the earlier one (and count its budget from there) unless they start afresh
    use_env_aware_workers()

    declared = _declared(names)
    chapters_ = {name: without_stages(chapter, skip) for name, chapter in declared.items()}
    skipped = f"stages {', '.join(skip)} skipped (computed before, kept aside)" if skip else None
    budget = _budget()
    stopped = []
    for name, chapter in chapters_.items():
        started, start = datetime.now(UTC), time.perf_counter()
        _piece_starts()
        run = chapter.start(profile=profile, seed=seed, device=device)
        print(f"[symlib] computing {name} (profile={profile}, seed={seed}, device={run.device}) ...", flush=True)
        try:
            with _sigterm_exits(), _main_thread_watchdog(budget) as fired:
                chapter.compute(run)
            why = None
        except budget_exhausted as err:
            why = str(err)
        except BaseException as err:
            if not fired.is_set():
                killed = None
                if isinstance(err, SystemExit) and err.code == TERMINATED:
                    # killed from outside (gpu_piece.sh's `timeout` at HARD_S): the piece is
                    # logged all the same, its device time counted and how far it got said
                    _stop_children()
                    killed = (f"{pieces.TERMINATED} after {time.perf_counter() - start:.0f} s; "
                              + items_done(chapter, run.config, seed=seed, device=run.device))
                    print(f"[symlib] {name}: {killed}", flush=True)
                _log_piece(name, profile, seed, device, start, started, "failed", "; ".join(filter(None, (killed, skipped))))
                raise
            # once the watchdog has fired, whatever the stage then raised is the interruption (an
            # interrupted Stan fit surfaces in PyStan as another error than KeyboardInterrupt)
            _stop_children()
            why = (f"{pieces.INTERRUPTED} {budget:g} s + {BUDGET_GRACE_S:g} s, raising {type(err).__name__}; "
                   + items_done(chapter, run.config, seed=seed, device=run.device))
        if why is not None:
            _log_piece(name, profile, seed, device, start, started, "budget", "; ".join(filter(None, (why, skipped))))
            print(f"[symlib] {name}: {PIECE_STOPPED} ({why}); run the same command again to continue", flush=True)
            stopped.append(name)
            continue
        missing = [s for s in skip if not _stage_cached(declared[name], s, run.config, seed=seed, device=run.device)]
        if missing:   # the skipped stages run elsewhere: this piece did not complete the chapter
            note = f"{skipped}; {', '.join(missing)} not computed yet, the chapter is not complete"
            _log_piece(name, profile, seed, device, start, started, "partial", note)
            print(f"[symlib] {name}: its stages computed in {time.perf_counter() - start:.0f} s but for "
                  f"{', '.join(missing)}, skipped and not computed yet", flush=True)
            continue
        _log_piece(name, profile, seed, device, start, started, "complete", skipped)
        print(f"[symlib] {name}: every stage computed in {time.perf_counter() - start:.0f} s; render it with "
              f"`execute --cached-only --profile {profile} --seed {seed} --device {device} {name}`", flush=True)
    return stopped


@contextlib.contextmanager
def _main_thread_watchdog(budget_s: float | None, grace_s: float | None = None):
    """``compute``'s :func:`_budget_watchdog`: SIGINT to this process's main thread
    (KeyboardInterrupt; call it from the main thread) once the budget and grace have passed, so
    that a stage that does not stop at the budget itself (a fan-out of Stan fits) stops as
    ``execute``'s interrupted kernel does; yields an event set when it fired."""
    if budget_s is None:
        with _budget_watchdog(None) as fired:
            yield fired
        return
    # Python's own SIGINT handler for the while (raising KeyboardInterrupt), whatever one the
    # caller had set (SIG_IGN in some test runners' workers)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with _budget_watchdog(budget_s, grace_s, interrupt=_sigint_main_thread) as fired:
            yield fired
    finally:
        signal.signal(signal.SIGINT, previous)


def _sigint_main_thread() -> None:
    """A real SIGINT sent to the main thread: ``_thread.interrupt_main()`` is seen only between
    bytecodes and ``signal.raise_signal()`` from a timer would go to the timer's thread, so a main
    thread blocked in a sleep, a wait on joblib's workers or a Stan call would not stop."""
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def _stop_children() -> None:
    """Kill joblib's worker processes (loky's, told by their command line) and what they started
    (e.g. Stan's chains): the items they had in flight are lost, as in an interrupted kernel.
    Other children of this process (httpstan's own pool of a Stan fit run here, a caller's) are
    left alone: a later chapter or test in this process still uses them."""
    workers = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if any("popen_loky" in part for part in child.cmdline()):
                workers.append(child)
    doomed = list(workers)
    for worker in workers:
        with contextlib.suppress(psutil.Error):
            doomed.extend(worker.children(recursive=True))
    for proc in doomed:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(doomed, timeout=30)


class _Missing(Exception):
    """Raised in place of computing an entry that :func:`items_done` only looks up."""


def _items_done_of(name: str, profile: str, seed: int, device: str) -> str:
    """:func:`items_done` for chapter ``name`` in ``profile`` on ``device`` (as the kernel resolved it)."""
    chapter = provenance.declared(name)
    if chapter is None or profile not in chapter.profiles:
        return "the stage items it finished are cached"
    return items_done(chapter, chapter.profiles[profile], seed=seed, device=resolve_device(device))


def items_done(chapter, config, *, seed: int, device) -> str:
    """How far each fan-out stage of ``chapter`` got: ``"<stage>: k of n items cached"`` for every
    stage with items, the entries counted as the cache would serve them (this code, these data),
    computing none; ``"no fan-out stage"`` where the chapter has none (``"no fan-out stage has
    items in this profile"`` where its profile gives them none). Items a sweep setting reruns
    through the cache count too (:func:`_swept_items_done`). Shown in a stopped piece's note, so
    that a run in pieces says how far it got."""
    parts, fan_outs = [], 0
    for stage in chapter.stages:
        if stage.items is None or not stage.cache:
            continue
        fan_outs += 1
        view = stage.view(config, chapter.name)
        items = list(stage.items(view))
        if not items:  # a stage this profile leaves empty (chapter 4's robustness fits outside `paper`)
            continue
        done = _cached_items(chapter, stage, view, items, seed=seed, device=device)
        parts.append(f"{stage.name}: {done} of {len(items)} items cached")
        parts += _swept_items_done(chapter, stage, config, seed=seed, device=device)
    return ", ".join(parts) or ("no fan-out stage" if not fan_outs else "no fan-out stage has items in this profile")


def _swept_items_done(chapter, stage, config, *, seed: int, device) -> list[str]:
    """How far a sweep got inside ``stage``: a sweep setting (an item ``(field, value)`` of another
    fan-out stage, ``robustness``) whose field ``stage`` reads may rerun ``stage``'s items through
    the cache under the changed field (chapter 2a's OptuNet settings retrain their chunks), so that
    a piece stopped inside that one setting still kept its finished items. One part per such
    setting with at least one item cached: ``"<stage> at <field>=<value>: k of n items cached"``.
    A setting none of whose items is cached yet is not named (a sweep may compute it otherwise);
    it counts among the sweep stage's items not cached."""
    parts = []
    view = stage.view(config, chapter.name)
    for other in chapter.stages:
        if other is stage or other.items is None or not other.cache:
            continue
        for setting in other.items(other.view(config, chapter.name)):
            if not (isinstance(setting, tuple) and len(setting) == 2 and isinstance(setting[0], str)
                    and setting[0] in stage.fields):
                continue
            field, value = setting
            try:
                changed = view.replace(**{field: value})
                items = list(stage.items(changed))
            except (AttributeError, TypeError, ValueError):  # a value this stage cannot take alone
                continue
            if done := _cached_items(chapter, stage, changed, items, seed=seed, device=device):
                parts.append(f"{stage.name} at {field}={value!r}: {done} of {len(items)} items cached")
    return parts


def _stage_cached(chapter, name: str, config, *, seed: int, device) -> bool:
    """Whether stage ``name`` of ``chapter`` is in the cache as this code would serve it: its
    entry, or every item of a fan-out; a stage that is not cached (a timing, computed at every
    render) counts as computed."""
    stage = chapter.stage(name)
    if not stage.cache:
        return True
    view = stage.view(config, chapter.name)
    if stage.items is None:
        return _cached_items(chapter, stage, view, [_WHOLE], seed=seed, device=device) == 1
    items = list(stage.items(view))
    return _cached_items(chapter, stage, view, items, seed=seed, device=device) == len(items)


_WHOLE = object()
"""The "item" of a stage that does not fan out (its one entry), for :func:`_cached_items`."""


def _cached_items(chapter, stage, view, items, *, seed: int, device) -> int:
    """How many of ``stage``'s ``items`` under ``view`` the cache would serve (this code, these
    data), computing none."""
    def missing():
        raise _Missing

    done = 0
    for item in items:
        try:
            key = stage.key(view, seed, device) if item is _WHOLE else stage.key(view, seed, device, item=item)
            cached(stage.experiment_name(chapter.name), stage.version, key, missing)
            done += 1
        except _Missing:
            pass
    return done


def without_stages(chapter, skip) -> object:
    """``chapter`` with the stages named in ``skip`` left out (itself when none).

    Raises:
        ValueError: a name that is no stage of the chapter, or a stage kept that takes a skipped
            one as input (it would have nothing to read).
    """
    if not skip:
        return chapter
    names = [s.name for s in chapter.stages]
    if unknown := sorted(set(skip) - set(names)):
        raise ValueError(f"{chapter.name} has no stage {', '.join(map(repr, unknown))} to skip; stages: {', '.join(names)}")
    kept = tuple(s for s in chapter.stages if s.name not in skip)
    for stage in kept:
        if needed := sorted(set(stage.needs) & set(skip)):
            raise ValueError(f"{chapter.name}: stage {stage.name!r} takes {', '.join(map(repr, needed))} as input; "
                             "it cannot be skipped")
    return dataclasses.replace(chapter, stages=kept)


MIN_FREE_BYTES = 1 << 30
"""Space the cache's file system must have free before a chapter starts computing (1 GiB: the
largest cache entry or checkpoint any chapter writes is a few hundred MB); less fails at once,
naming the folder, not hours later in the middle of a write."""


def _check_inputs(names: list[str], *, profile: str, device: str, computing: bool) -> None:
    """Everything a run needs that can be checked before a kernel starts: each chapter has the
    profile, the device exists here, and (``computing``) the cache has room. Exits with one line
    naming what is wrong."""
    try:
        resolve_device(device)
    except (TypeError, ValueError) as err:
        raise SystemExit(f"[symlib] {err}") from None
    for name in names:
        chapter = provenance.declared(name) if name not in BOOK_PAGES else None
        if chapter is not None and profile not in chapter.profiles:
            raise SystemExit(f"[symlib] {name} has no {profile!r} profile; its profiles: {', '.join(chapter.profiles)}")
    if computing and not cached_only():
        try:
            require_free(cache_dir(), MIN_FREE_BYTES, what="the cache")
        except DiskFullError as err:
            raise SystemExit(f"[symlib] {err.strerror}") from None


def _check_pieces_files(names: list[str]) -> None:
    """Read each chapter's pieces file before anything runs: a broken one (a merge conflict, a
    file cut short) fails now, naming it, not after the chapter has computed for hours and its
    piece could not be logged."""
    for name in names:
        if name in BOOK_PAGES:
            continue
        try:
            pieces.read(name)
        except ValueError as err:
            raise SystemExit(f"{name}: {err}") from None


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m symlib.book.pipeline", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("execute", help="execute chapters with papermill into executed/")
    ex.add_argument("chapters", nargs="*", help=f"default: all ({', '.join(chapters())}) and {', '.join(EXAMPLE_PAGES)}")
    ex.add_argument("--profile", default="quick", choices=PROFILES)
    ex.add_argument("--seed", type=int, default=0)
    ex.add_argument("--device", default="auto")
    ex.add_argument("--cached-only", action="store_true",
                    help="re-render from the cache: every stage must be cached (a GPU run's pages "
                         "on a machine without one); a miss fails the chapter")
    co = sub.add_parser("compute", help="run chapters' stages into the cache, no notebook (a GPU machine "
                                        "without Jupyter); render them later with execute --cached-only")
    co.add_argument("chapters", nargs="+")
    co.add_argument("--profile", default="paper", choices=PROFILES)
    co.add_argument("--seed", type=int, default=0)
    co.add_argument("--device", default="auto")
    co.add_argument("--skip", action="append", default=[], metavar="STAGE",
                    help="leave a stage out (repeatable): its finished entry is kept on another machine")
    sub.add_parser("build", help="build the book into _build/html")
    sub.add_parser("chapters", help="list chapter names")
    sub.add_parser("clean", help="remove the build, executed notebooks, results and cache "
                                 "(honours SYMLIB_EXECUTED, SYMLIB_RESULTS, SYMLIB_CACHE)")
    args = parser.parse_args(argv)
    if args.command == "chapters":
        print("\n".join(chapters()))
    elif args.command == "clean":
        for folder in clean():
            print(f"[symlib] clean: {_shown(folder)}", flush=True)
    elif args.command == "execute":
        if args.cached_only:
            os.environ[CACHED_ONLY_VARIABLE] = "1"  # the kernels inherit it
        # a name given twice runs once; without names, every chapter and the example pages
        names = list(dict.fromkeys(args.chapters)) or chapters() + list(EXAMPLE_PAGES)
        for name in names:
            _source(name)  # fail on a typo before running anything
        _check_pieces_files(names)
        _check_inputs(names, profile=args.profile, device=args.device, computing=True)
        _default_jobs(args.profile, args.device)
        _execute_chapters(names, profile=args.profile, seed=args.seed, device=args.device)
    elif args.command == "compute":
        args.chapters = list(dict.fromkeys(args.chapters))  # a name given twice runs once
        try:
            _declared(args.chapters)  # before the jobs line below, so that a typo prints only the error
        except ValueError as err:
            raise SystemExit(str(err)) from None
        _check_pieces_files(args.chapters)
        _check_inputs(args.chapters, profile=args.profile, device=args.device, computing=True)
        _default_jobs(args.profile, args.device)
        if compute(args.chapters, profile=args.profile, seed=args.seed, device=args.device, skip=tuple(args.skip)):
            sys.exit(BUDGET_EXIT)
    elif args.command == "build":
        build()


if __name__ == "__main__":
    main()
