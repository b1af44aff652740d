"""Execute the book's notebooks with papermill and build the book with Jupyter Book.

    python -m symlib.book.pipeline execute [--profile quick] [--seed 0] [--device auto] [CHAPTER ...]
    python -m symlib.book.pipeline build
    python -m symlib.book.pipeline chapters

``execute`` turns each MyST notebook (``notebooks/NN_name.md``, jupytext) into an ``.ipynb``,
runs it with papermill (parameters ``profile``, ``seed``, ``device``) and post-processes it into
``executed/NN_name.ipynb``: the parameter cells are hidden from the page and stderr (progress
bars, warnings) is dropped. A failed run leaves the previous executed notebook untouched and
keeps the failed one as ``executed/NN_name.failed.ipynb`` for inspection. The reproducibility
page (``book/reproducibility.md``) is executed last so it sees every chapter's results file.
``build`` copies MathJax from its registry package into ``book/_static`` (the book renders
math offline), writes a placeholder for any chapter not executed in this checkout, and runs
``jupyter-book build --all -W --keep-going``.
"""

from __future__ import annotations

import argparse
import os
import shutil
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
PROFILES = ("smoke", "quick", "paper")

HIDDEN_TAGS = {"parameters", "injected-parameters"}


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


def _postprocess(nb) -> None:
    """Hide parameter cells from the page and drop stderr outputs."""
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if tags & HIDDEN_TAGS:
            cell.metadata["tags"] = sorted(tags | {"remove-cell"})
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]


def execute(name: str, *, profile: str, seed: int, device: str) -> float:
    """Execute one notebook into ``executed/``; returns its wall time in seconds."""
    import jupytext
    import nbformat
    import papermill

    source = _source(name)
    EXECUTED.mkdir(exist_ok=True)
    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    target = EXECUTED / f"{name}.ipynb"
    failed = EXECUTED / f"{name}.failed.ipynb"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="symlib-nb-") as tmp:
        inp, out = Path(tmp) / "input.ipynb", Path(tmp) / "output.ipynb"
        nbformat.write(nb, inp)
        try:
            papermill.execute_notebook(
                str(inp),
                str(out),
                parameters={"profile": profile, "seed": seed, "device": device},
                kernel_name="python3",
                cwd=str(source.parent),
                progress_bar=False,
                log_output=False,
            )
        except papermill.PapermillExecutionError as err:
            if out.exists():
                shutil.copyfile(out, failed)
            raise SystemExit(
                f"{name}: execution failed ({err.ename}: {err.evalue}).\n"
                f"The failed notebook is at {_shown(failed)}; {_shown(target)} was left as it was."
            ) from None
        executed = nbformat.read(out, as_version=4)
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m symlib.book.pipeline", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("execute", help="execute chapters with papermill into executed/")
    ex.add_argument("chapters", nargs="*", help=f"default: all ({', '.join(chapters())})")
    ex.add_argument("--profile", default="quick", choices=PROFILES)
    ex.add_argument("--seed", type=int, default=0)
    ex.add_argument("--device", default="auto")
    sub.add_parser("build", help="build the book into _build/html")
    sub.add_parser("chapters", help="list chapter names")
    args = parser.parse_args(argv)
    if args.command == "chapters":
        print("\n".join(chapters()))
    elif args.command == "execute":
        names = args.chapters or chapters()
        for name in names:
            _source(name)  # fail on a typo before running anything
        times = {}
        for name in names + ["reproducibility"]:
            print(f"[symlib] executing {name} (profile={args.profile}, seed={args.seed}, device={args.device}) ...", flush=True)
            times[name] = execute(name, profile=args.profile, seed=args.seed, device=args.device)
            print(f"[symlib] {name}: {times[name]:.1f} s", flush=True)
    elif args.command == "build":
        build()


if __name__ == "__main__":
    main()
