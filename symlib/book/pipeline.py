"""Execute the book's notebooks with papermill and build the book with Jupyter Book.

    python -m symlib.book.pipeline execute [--profile quick] [--seed 0] [--device auto] [CHAPTER ...]
    python -m symlib.book.pipeline build
    python -m symlib.book.pipeline chapters

``execute`` turns each MyST notebook (``notebooks/NN_name.md``, jupytext) into an ``.ipynb``,
runs it with papermill (parameters ``profile``, ``seed``, ``device``) and post-processes it into
``executed/NN_name.ipynb``: the parameter cells are hidden from the page and stderr (progress
bars, warnings) is dropped, after any cache-corruption warning in it has been printed. A failed
run leaves the previous executed notebook untouched and keeps the failed one as
``executed/NN_name.failed.ipynb`` for inspection. The reproducibility page
(``book/reproducibility.md``) is executed last so it sees every chapter's results file.

``build`` copies MathJax from its registry package into ``book/_static`` (the book renders
math offline), writes a placeholder for any chapter not executed in this checkout, and runs
``jupyter-book build --all -W --keep-going``.

Relative ``SYMLIB_CACHE``, ``SYMLIB_RESULTS`` and ``SYMLIB_DATA`` are taken relative to the
directory the command was run from (kernels run in ``notebooks/`` or ``book/``), and the
results and cache directories must be writable before a chapter starts. Each kernel runs in a
``symlib-nb-<pid>-*`` temporary folder (with its connection file), removed when the run ends,
fails or is interrupted (Ctrl-C, SIGTERM); one left by a killed run is removed by the next.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from symlib.book.paths import project_root_or_cwd

ROOT = project_root_or_cwd()
NOTEBOOKS = ROOT / "notebooks"
EXECUTED = ROOT / "executed"
REPRO_PAGE = ROOT / "book" / "reproducibility.md"
MATHJAX_DEST = ROOT / "book" / "_static" / "mathjax"
PROFILES = ("smoke", "quick", "full", "paper")

HIDDEN_TAGS = {"parameters", "injected-parameters"}
PATH_VARIABLES = ("SYMLIB_CACHE", "SYMLIB_RESULTS", "SYMLIB_DATA")
TMP_PREFIX = "symlib-nb-"


def chapters() -> list[str]:
    """Chapter names (``NN_name``) in book order."""
    return sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]*_*.md"))


def _source(name: str) -> Path:
    if name == "reproducibility":
        return REPRO_PAGE
    path = NOTEBOOKS / f"{name}.md"
    if not path.exists():
        raise SystemExit(f"unknown chapter {name!r}; valid chapters: {', '.join(chapters())}")
    return path


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _absolute_path_variables() -> None:
    """Make relative ``SYMLIB_CACHE`` / ``SYMLIB_RESULTS`` / ``SYMLIB_DATA`` absolute.

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
    from symlib.book.results import check_writable

    try:
        check_writable(Path(os.environ.get(var) or default), variable=var, what=var)
    except OSError as err:
        raise SystemExit(f"{var}: {err}") from None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _remove_stale_tmp() -> None:
    """Remove ``symlib-nb-<pid>-*`` folders of ours whose process is gone (a killed run's)."""
    if os.name != "posix":  # os.kill(pid, 0) would terminate the process on Windows
        return
    for path in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*-*"):
        pid = path.name[len(TMP_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or _pid_alive(int(pid)):
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
    """Hide parameter cells from the page and drop stderr outputs."""
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if tags & HIDDEN_TAGS:
            cell.metadata["tags"] = sorted(tags | {"remove-cell"})
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]


def execute(name: str, *, profile: str, seed: int, device: str) -> float:
    """Execute one notebook into ``executed/``; returns its wall time in seconds.

    Relative path variables are made absolute against the current directory first (this
    changes ``os.environ``), and a chapter refuses to start if its results or cache directory
    cannot be written.
    """
    import jupytext
    import nbformat
    import papermill
    from traitlets.config import Config

    source = _source(name)
    _absolute_path_variables()
    if name != "reproducibility":  # the page only reads results
        _check_writable("SYMLIB_RESULTS", ROOT / "results")
        _check_writable("SYMLIB_CACHE", ROOT / ".cache" / "symlib")
    _remove_stale_tmp()
    EXECUTED.mkdir(exist_ok=True)
    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    target = EXECUTED / f"{name}.ipynb"
    failed = EXECUTED / f"{name}.failed.ipynb"
    start = time.perf_counter()
    # the pid in the name lets a later run tell a killed run's folder from a running one's
    with (
        _sigterm_exits(),
        tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}{os.getpid()}-") as tmp,
    ):
        inp, out = Path(tmp) / "input.ipynb", Path(tmp) / "output.ipynb"
        nbformat.write(nb, inp)
        # the kernel's connection file goes into the folder too, so nothing outlives it
        kernel_file = Config({"KernelManager": {"connection_file": str(Path(tmp) / "kernel.json")}})
        try:
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
                config=kernel_file,
            )
        except papermill.PapermillExecutionError as err:
            if out.exists():
                _report_cache_warnings(name, nbformat.read(out, as_version=4))
                shutil.copyfile(out, failed)
            raise SystemExit(
                f"{name}: execution failed ({err.ename}: {err.evalue}).\n"
                f"The failed notebook is at {_shown(failed)}; {_shown(target)} was left as it was."
            ) from None
        executed = nbformat.read(out, as_version=4)
        _report_cache_warnings(name, executed)
        _postprocess(executed)
        staged = EXECUTED / f".{name}.ipynb.tmp"
        nbformat.write(executed, staged)
        os.replace(staged, target)  # atomic: a reader never sees half a notebook
    failed.unlink(missing_ok=True)
    return time.perf_counter() - start


def _placeholder(name: str) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    title = name.split("_", 1)[1].replace("_", " ").capitalize()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            f"# {title}\n\nThis chapter has not been executed in this checkout. Run\n\n"
            f"```\nmake chapter CHAPTER={name}\n```\n\nto execute it and rebuild the book."
        )
    ]
    nbformat.write(nb, EXECUTED / f"{name}.ipynb")


def copy_mathjax() -> Path:
    """Copy MathJax 3 (package ``django-static-mathjax``) next to the book's pages."""
    import mathjax

    src = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (src / "tex-chtml.js").exists():
        raise SystemExit(f"MathJax not found at {src}; install the book extra: pip install -e '.[book]'")
    if not (MATHJAX_DEST / "tex-chtml.js").exists():
        shutil.rmtree(MATHJAX_DEST, ignore_errors=True)
        shutil.copytree(src, MATHJAX_DEST, ignore=shutil.ignore_patterns("*.map", "sre", "node-main*"))
    return MATHJAX_DEST


def build() -> None:
    copy_mathjax()
    shutil.rmtree(ROOT / "_build" / "html", ignore_errors=True)  # no stale pages from earlier builds
    EXECUTED.mkdir(exist_ok=True)
    for name in chapters() + ["reproducibility"]:
        if not (EXECUTED / f"{name}.ipynb").exists():
            if name == "reproducibility":
                execute(name, profile="quick", seed=0, device="cpu")
            else:
                _placeholder(name)
    cmd = [sys.executable, "-m", "jupyter_book", "build", str(ROOT), "--all", "-W", "--keep-going"]
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    if jb:
        cmd = [jb, "build", str(ROOT), "--all", "-W", "--keep-going"]
    subprocess.run(cmd, check=True, cwd=ROOT)


def _default_jobs(profile: str, device: str) -> None:
    """Set ``$SYMLIB_JOBS`` for the kernels (which inherit it) when unset and the profile wants it."""
    from symlib.book.parallel import ENV_VAR, default_jobs
    from symlib.book.runtime import resolve_device

    if os.environ.get(ENV_VAR):
        return
    jobs = default_jobs(profile, resolve_device(device).type)
    if jobs is not None:
        os.environ[ENV_VAR] = jobs
        print(f"[symlib] {ENV_VAR} unset: profile {profile} on the CPU runs independent fits side by "
              f"side, one per core ({ENV_VAR}={jobs}; set it to 1 for one at a time)", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m symlib.book.pipeline", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("execute", help="execute chapters with papermill into executed/")
    ex.add_argument("chapters", nargs="*", help=f"default: all ({', '.join(chapters())})")
    ex.add_argument("--profile", default="quick", choices=PROFILES)
    ex.add_argument("--seed", type=int, default=0)
    ex.add_argument("--device", default="auto")
    ex.add_argument("--cached-only", action="store_true",
                    help="re-render from the cache: every stage must be cached (a GPU run's pages "
                         "on a machine without one); a miss fails the chapter")
    sub.add_parser("build", help="build the book into _build/html")
    sub.add_parser("chapters", help="list chapter names")
    args = parser.parse_args(argv)
    if args.command == "chapters":
        print("\n".join(chapters()))
    elif args.command == "execute":
        if args.cached_only:
            from symlib.book.cache import CACHED_ONLY_VARIABLE

            os.environ[CACHED_ONLY_VARIABLE] = "1"  # the kernels inherit it
        names = args.chapters or chapters()
        for name in names:
            _source(name)  # fail on a typo before running anything
        _default_jobs(args.profile, args.device)
        times = {}
        for name in names + ["reproducibility"]:
            print(f"[symlib] executing {name} (profile={args.profile}, seed={args.seed}, device={args.device}) ...", flush=True)
            times[name] = execute(name, profile=args.profile, seed=args.seed, device=args.device)
            print(f"[symlib] {name}: {times[name]:.1f} s", flush=True)
    elif args.command == "build":
        build()


if __name__ == "__main__":
    main()
