"""Carry cache entries and published runs across a change of hash, without computing.

Two changes alter code hashes without altering the code that computes, and each has a proof here
that registers the old and new hashes in the registry of equivalences
(:mod:`symlib.book.equivalence`), one entry per stage experiment and one for the chapter's code
hash with its notebook (``<chapter>#render``), so that the records and cache entries made under the
old hash stay current. Nothing is computed.

**A new hash scheme** (``python -m symlib.book.bridges --from-scheme 4``). A new
:data:`~symlib.book.provenance.HASH_SCHEME` hashes the same files differently, so every cache
entry, checkpoint and published run recorded under the old one would read as computed by other
code. Both schemes' hashes of the checkout's files describe the same code: the bridge registers
them, with the commit as evidence. A record of the old scheme stays current exactly when its hash
is the old-scheme hash of the bridged commit's files, or is joined to it by proven entries; from
then on, the new scheme decides what a change of code makes stale.

**A move or rename** (``python -m symlib.book.bridges --static --from REV [--rename
old.module=new.module ...]``). For every chapter's stage experiments and its ``#render`` hash, the
code the hash covers at commit ``REV`` (exported with ``git archive``; the repository is only read)
and in the checkout is compared: the files are those the hash function itself reads (each tree's
own :mod:`~symlib.book.codehash`, run in a process of its own with that tree on ``PYTHONPATH``).
The proof holds when, with the module names of ``REV`` mapped through the renames,

- both hashes cover the same modules (and the same data files, byte for byte);
- each module has the same syntax tree (:func:`~symlib.book.codehash.code_tree`: docstrings
  aside) once its imports are written one name per statement, relative ones made absolute, and
  the dotted names that spell a renamed module (``symlib.book.data.load_mnist``) are renamed;
  top-level assignments to ``__version__`` are set aside (metadata: they compute nothing), and an
  import of a renamed module may change place within its block of imports (an import sorter
  moves it when its name changes) unless another import of the block binds the same name;
- the notebook's code (``#render`` only) is the same, a renamed module's name renamed in it.

Where it holds, the two hashes are registered with evidence naming both commits and the renames
("static proof: ... the same modules, same syntax trees (...); nothing computed"); where not,
nothing is registered for that experiment and the command names the module that differs (and
exits 1).

What it proves: the code that ran under ``REV`` and the checkout's are the same program, statement
for statement, up to the names of modules. What it does not prove, and what to check by hand:

- a string constant that spells a renamed module's name as a dotted word is renamed too (an
  error message's ``python -m symlib.book.data``, a module named to ``importlib``): the command
  lists every such string; one that feeds a number (a stream's name, a key) would be a change;
- an import of a renamed module that changed place runs that module's top-level code a little
  earlier or later: the same, for a module whose import only defines names (the command lists
  the modules where it happened);
- code that reads its own location (``__name__``, ``__file__``, a class's ``__module__``) sees
  the new one: a module that finds files beside itself, or names a stream after itself, computes
  otherwise after a move, and pickles of a moved module's classes (in a cache entry) name the old
  module and no longer load;
- a module split in two, or two merged, is not a rename: it is refused (prove it with
  :mod:`symlib.book.same_numbers`, which computes).

The command refuses a checkout whose ``symlib/`` or ``notebooks/`` has uncommitted changes (the
evidence names a commit).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import io
import json
import os
import platform
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from symlib.book import equivalence, provenance
from symlib.book.paths import project_root_or_cwd

__all__ = ["Covered", "Reading", "StaticProof", "bridge_pairs", "covered_code", "main", "normalised_tree", "static_proof"]


def bridge_pairs(chapters, old_scheme: int) -> list[tuple[str, str, str]]:
    """``(experiment, hash under old_scheme, hash under the current scheme)`` for every stage
    experiment of ``chapters``, the chapter itself (a stage group naming no stage) and its code
    hash with its notebook (``<chapter>#render``), of this checkout's files."""
    root = project_root_or_cwd()
    out = []
    for chapter in chapters:
        for experiment in [chapter, *provenance.stage_experiments(chapter)]:
            out.append((experiment, provenance.stage_code_hash(experiment, scheme=old_scheme),
                        provenance.stage_code_hash(experiment)))
        package = provenance.package_of_chapter(chapter)
        notebook = root / "notebooks" / f"{chapter}.md"
        out.append((chapter + provenance.RENDER_SUFFIX, provenance.code_hash(package, notebook, scheme=old_scheme),
                    provenance.code_hash(package, notebook)))
    return out


@dataclasses.dataclass(frozen=True)
class Covered:
    """The code one hash covers: the hash, every file it read (path in the tree -> bytes) and,
    for a ``#render`` hash, the notebook's code (:func:`~symlib.book.codehash.notebook_code`)."""

    hash: str
    files: dict[str, bytes]
    notebook: str | None = None


@dataclasses.dataclass
class StaticProof:
    """What :func:`static_proof` found: the pairs it proves ``(experiment, old hash, new hash)``,
    the experiments it refuses (-> why), the strings it read as names of renamed modules
    (``path: old -> new``) and the modules whose imports of renamed modules changed place."""

    pairs: list[tuple[str, str, str]]
    refused: dict[str, str]
    strings: list[str]
    reordered: list[str] = dataclasses.field(default_factory=list)


_SNAPSHOT = r"""
import json, sys
from pathlib import Path
from symlib.book import codehash, provenance  # provenance: every chapter findable by name
root = Path.cwd().resolve()
if codehash.SYMLIB.resolve() != root / "symlib":
    sys.exit(f"symlib imported from {codehash.SYMLIB}, not from {root}")
read, fingerprint = [], codehash.fingerprint
def recording(path):
    read.append(Path(path).resolve().relative_to(root).as_posix())
    return fingerprint(path)
codehash.fingerprint = recording   # every file a scheme-5 hash reads passes through it
def covered(hash_of):
    read.clear()
    return {"hash": hash_of(), "files": sorted(set(read))}
out = {}
for chapter in json.loads(sys.argv[1]):
    if codehash.package_of_chapter(chapter) is None:
        continue
    for experiment in [chapter, *codehash.stage_experiments(chapter)]:
        out[experiment] = covered(lambda: codehash.stage_code_hash(experiment))
    notebook = root / "notebooks" / f"{chapter}.md"
    entry = covered(lambda: codehash.code_hash(codehash.package_of_chapter(chapter), notebook))
    entry["notebook"] = codehash.notebook_code(notebook) if notebook.is_file() else None
    out[chapter + codehash.RENDER_SUFFIX] = entry
print(json.dumps({"scheme": codehash.HASH_SCHEME, "experiments": out}))
"""
"""Run in a tree (its ``symlib`` on ``PYTHONPATH``): each hash of its chapters, and the files
that hash read, recorded as the hash function fingerprints them."""


def covered_code(tree: Path, chapters: list[str]) -> dict[str, Covered]:
    """Every stage experiment's and ``#render`` hash of ``chapters`` in the checkout ``tree`` (one
    with ``symlib/`` and ``notebooks/``), hashed by that tree's own code, with what each covers.

    Raises:
        RuntimeError: the tree's code could not hash, or hashes under another scheme.
    """
    tree = Path(tree).resolve()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYMLIB_")} | {"PYTHONPATH": str(tree)}
    run = subprocess.run([sys.executable, "-c", _SNAPSHOT, json.dumps(chapters)], cwd=tree, env=env,
                         capture_output=True, text=True, check=False)
    if run.returncode:
        raise RuntimeError(f"hashing the code of {tree} failed:\n{run.stderr[-3000:]}")
    found = json.loads(run.stdout.strip().splitlines()[-1])
    if found["scheme"] != provenance.HASH_SCHEME:
        raise RuntimeError(f"{tree} hashes under scheme {found['scheme']}, this checkout under "
                           f"{provenance.HASH_SCHEME}: bridge the schemes with --from-scheme")
    return {x: Covered(e["hash"], {f: (tree / f).read_bytes() for f in e["files"]}, e.get("notebook"))
            for x, e in found["experiments"].items()}


def _renamed(name: str, renames: dict[str, str]) -> str:
    """``name`` with its longest leading module that ``renames`` maps, mapped."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in renames:
            return ".".join([renames[head], *parts[i:]])
    return name


def _renamed_text(text: str, renames: dict[str, str]) -> str:
    """``text`` with each renamed module's name, written as a dotted word, renamed."""
    for old in sorted(renames, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", renames[old], text)
    return text


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` of a name or a chain of attributes on a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


class _Canonical(ast.NodeTransformer):
    """Imports one name per statement and absolute, renamed modules' names renamed (in imports,
    dotted names and strings; each string renamed is noted)."""

    def __init__(self, package: str, renames: dict[str, str]):
        self.package, self.renames, self.strings = package, renames, []

    def visit_Import(self, node):
        return [ast.Import(names=[ast.alias(name=_renamed(a.name, self.renames), asname=a.asname)])
                for a in node.names]

    def visit_ImportFrom(self, node):
        base = node.module or ""
        if node.level:
            parts = self.package.split(".")
            parent = ".".join(parts[: len(parts) - node.level + 1])
            base = f"{parent}.{base}" if base else parent
        out = []
        for a in node.names:
            if a.name == "*":
                out.append(ast.ImportFrom(module=_renamed(base, self.renames), names=[ast.alias(name="*")], level=0))
                continue
            module, _, name = _renamed(f"{base}.{a.name}", self.renames).rpartition(".")
            out.append(ast.ImportFrom(module=module, names=[ast.alias(name=name, asname=a.asname or a.name)], level=0))
        return out

    def _name(self, node):
        dotted = _dotted(node)
        if dotted is None or (renamed := _renamed(dotted, self.renames)) == dotted:
            return self.generic_visit(node)
        head, *attrs = renamed.split(".")
        out = ast.Name(id=head, ctx=ast.Load())
        for attr in attrs:
            out = ast.Attribute(value=out, attr=attr, ctx=ast.Load())
        out.ctx = node.ctx
        return out

    visit_Name = visit_Attribute = _name

    def visit_Constant(self, node):
        if isinstance(node.value, str) and (text := _renamed_text(node.value, self.renames)) != node.value:
            self.strings.append(f"{node.value!r} -> {text!r}")
            return ast.Constant(value=text, kind=node.kind)
        return node


class Reading(NamedTuple):
    """What :func:`static_proof` compares of a module (:func:`normalised_tree`)."""

    statements: list[str]
    """Its top-level statements, each written out, imports of renamed modules gathered."""
    exact: str
    """The whole module written out, every import in its place."""
    strings: list[str]
    """The strings it renamed (``'old' -> 'new'``)."""


def normalised_tree(source: str, module: str, *, package: bool = False, renames: dict[str, str] | None = None,
                    movable=()) -> Reading:
    """What :func:`static_proof` compares of a module: its :func:`~symlib.book.codehash.code_tree`
    with ``__version__`` assignments left out, its imports canonical (one name each, absolute) and
    ``renames`` applied, written out (:func:`~symlib.book.codehash.tree_text`). In ``statements``,
    the imports of the modules ``movable`` (the renamed modules' new names) are gathered at the end
    of their block of imports, each that binds a name no other import of the block binds: an
    import sorter moves them when their name changes. ``module`` is the module's name
    (``package``: it is a package's ``__init__``), which relative imports start from."""
    tree = provenance.code_tree(source)
    tree.body = [s for s in tree.body if not _is_version(s)] or [ast.Pass()]
    canonical = _Canonical(module if package else module.rpartition(".")[0], renames or {})
    tree = canonical.visit(tree)
    exact = provenance.tree_text(tree)
    _gather(tree, tuple(movable))
    return Reading([provenance.tree_text(s) for s in tree.body], exact, canonical.strings)


def _import(statement: ast.stmt) -> tuple[str, str | None] | None:
    """``(what it imports, the name it binds)`` of a canonical import statement, else None."""
    if isinstance(statement, ast.Import):
        alias = statement.names[0]
        return alias.name, alias.asname or alias.name.split(".")[0]
    if isinstance(statement, ast.ImportFrom):
        alias = statement.names[0]
        return f"{statement.module}.{alias.name}", alias.asname
    return None


def _gather(tree: ast.AST, movable: tuple[str, ...]) -> None:
    """Move each import of a module in ``movable`` to the end of its block of imports, in order
    of its text, unless another import of the block binds the same name."""
    under = lambda name: any(name == m or name.startswith(m + ".") for m in movable)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not (isinstance(body, list) and body and isinstance(body[0], ast.stmt)):
                continue
            out, block = [], []
            for statement in [*body, None]:
                if statement is not None and _import(statement) is not None:
                    block.append(statement)
                    continue
                bound = Counter(_import(b)[1] for b in block)
                free = [b for b in block if under(_import(b)[0]) and bound[_import(b)[1]] == 1]
                out += [b for b in block if b not in free] + sorted(free, key=provenance.tree_text)
                out += [statement] if statement is not None else []
                block = []
            setattr(node, field, out)


def _is_version(statement: ast.stmt) -> bool:
    targets = statement.targets if isinstance(statement, ast.Assign) else (
        [statement.target] if isinstance(statement, ast.AnnAssign) else [])
    return bool(targets) and all(isinstance(t, ast.Name) and t.id == "__version__" for t in targets)


def _module_of(path: str) -> tuple[str, bool]:
    """``("symlib.a.b", is a package)`` of ``symlib/a/b.py`` or ``symlib/a/b/__init__.py``."""
    parts = Path(path).with_suffix("").parts
    return (".".join(parts[:-1]), True) if parts[-1] == "__init__" else (".".join(parts), False)


def _key(path: str, renames: dict[str, str]) -> str:
    """The name a covered file is matched by: its module's (renamed), or a data file's folder as a
    module name (renamed) and the file's name."""
    if path.endswith(".py"):
        return _renamed(_module_of(path)[0], renames)
    folder, _, name = path.rpartition("/")
    return _renamed(folder.replace("/", "."), renames) + "/" + name


def _label(statement: str) -> str:
    """A few words naming a top-level statement written out by :func:`normalised_tree`."""
    kind = statement.split("(", 1)[0]
    if (name := re.match(r"\w+\(name='(\w+)'", statement)) and kind in ("FunctionDef", "AsyncFunctionDef", "ClassDef"):
        return f"{'class' if kind == 'ClassDef' else 'def'} {name[1]}"
    if (target := re.search(r"Name\(id='(\w+)'", statement)) and kind in ("Assign", "AnnAssign", "AugAssign"):
        return f"the assignment to {target[1]}"
    return {"Import": "an import", "ImportFrom": "an import"}.get(kind, f"a statement ({kind})")


def _module_difference(old: Reading, new: Reading) -> str | None:
    a, b = old.statements, new.statements
    if a == b:
        return None
    i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    where = _label(a[i] if i < len(a) else b[i])
    return f"{where} differs" if i < len(a) and i < len(b) else f"{where} is only in one of them"


def static_proof(old: dict[str, Covered], new: dict[str, Covered], renames: dict[str, str]) -> StaticProof:
    """Compare the code each hash covers before (``old``) and now (``new``), experiment by
    experiment, module names of ``old`` mapped through ``renames`` (module -> module, a package's
    renaming its submodules too): see the module's docstring for what counts as the same."""
    pairs, refused, strings, reordered = [], {}, [], []
    trees: dict[tuple[str, str], Reading] = {}

    def tree(side: str, path: str, data: bytes, names: dict[str, str]) -> Reading:
        if (side, path) not in trees:
            module, package = _module_of(path)
            trees[side, path] = normalised_tree(data.decode(), module, package=package, renames=names,
                                                movable=renames.values())
        return trees[side, path]

    for experiment in sorted(old):
        if experiment not in new:
            refused[experiment] = "no such experiment now"
            continue
        a, b = old[experiment], new[experiment]
        was = {_key(p, renames): p for p in a.files}
        now = {_key(p, {}): p for p in b.files}
        if len(was) != len(a.files):
            refused[experiment] = "the renames map two modules to one name"
            continue
        if was.keys() != now.keys():
            gone, added = sorted(was.keys() - now.keys()), sorted(now.keys() - was.keys())
            refused[experiment] = "not the same modules: " + "; ".join(
                f"{what}: {', '.join(names)}" for what, names in (("only before (renamed)", gone), ("only now", added))
                if names)
            continue
        why = None
        for key in sorted(was):
            p, q = was[key], now[key]
            if p.endswith(".py"):
                before, after = tree("old", p, a.files[p], renames), tree("new", q, b.files[q], {})
                if (diff := _module_difference(before, after)) is not None:
                    why = f"{q} (was {p}): {diff}"
                    break
                strings += [f"{q}: {s}" for s in before.strings if f"{q}: {s}" not in strings]
                if before.exact != after.exact and q not in reordered:
                    reordered.append(q)
            elif a.files[p] != b.files[q]:
                why = f"{q} (was {p}): other bytes"
                break
        if why is None and (a.notebook is None) != (b.notebook is None):
            why = "the notebook is only on one side"
        elif why is None and a.notebook is not None and _renamed_text(a.notebook, renames) != b.notebook:
            why = "the notebook's code differs"
        if why is not None:
            refused[experiment] = why
        else:
            pairs.append((experiment, a.hash, b.hash))
    return StaticProof(pairs, refused, strings, sorted(reordered))


def _export(rev: str, into: Path) -> str:
    """``symlib/``, ``notebooks/`` and ``_toc.yml`` of commit ``rev`` of the checkout, written under
    ``into`` (``git archive``: nothing in the repository is written); returns the full hash."""
    root = project_root_or_cwd()
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                            capture_output=True, text=True, check=False)
    if commit.returncode:
        raise SystemExit(f"no commit {rev!r} in {root}: {commit.stderr.strip()}")
    commit = commit.stdout.strip()
    tar = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", commit, "symlib", "notebooks", "_toc.yml"],
                         capture_output=True, check=True)
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as archive:
        archive.extractall(into, filter="data")
    return commit


def _clean_commit() -> str:
    root = project_root_or_cwd()
    run = lambda *a: subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
    if run("status", "--porcelain", "--", "symlib", "notebooks"):
        raise SystemExit("symlib/ or notebooks/ has uncommitted changes: commit first, so that the "
                         "evidence names the code that was hashed")
    return run("rev-parse", "HEAD")


def _static(rev: str, renames: dict[str, str], chapters: list[str], dry_run: bool) -> int:
    root = project_root_or_cwd()
    commit = "the working tree" if dry_run else _clean_commit()
    with tempfile.TemporaryDirectory(prefix="symlib-bridge-") as tmp:
        old_commit = _export(rev, Path(tmp))
        proof = static_proof(covered_code(Path(tmp), chapters), covered_code(root, chapters), renames)
    shown = ", ".join(f"{a} -> {b}" for a, b in renames.items()) or "none"
    for experiment, a, b in proof.pairs:
        print(f"bridged  {experiment}: {a} -> {b}" + (" (the same hash)" if a == b else ""))
    for experiment, why in proof.refused.items():
        print(f"refused  {experiment}: {why}")
    for string in proof.strings:
        print(f"string read as a module's name: {string}")
    for path in proof.reordered:
        print(f"an import of a renamed module changed place in its block: {path}")
    if dry_run:
        print(f"dry run: nothing registered ({len(proof.pairs)} proven, {len(proof.refused)} refused)")
        return 1 if proof.refused else 0
    new_commit = commit[:12]
    evidence = (f"static proof: the code each hash covers at {old_commit[:12]} and at {new_commit}, module names "
                f"renamed {shown}: the same modules, same syntax trees (imports canonical, docstrings and "
                f"__version__ set aside"
                + (f"; {len(proof.strings)} strings naming a renamed module renamed with it" if proof.strings else "")
                + (f"; imports of renamed modules moved within their block in {len(proof.reordered)} modules"
                   if proof.reordered else "")
                + f"); nothing computed ({platform.python_implementation()} {platform.python_version()})")
    new = equivalence.add(proof.pairs, evidence)
    print(f"registered {len(new)} bridges in {equivalence.registry_path()} "
          f"({len(proof.pairs) - len(new)} already there or equal; {len(proof.refused)} refused)")
    return 1 if proof.refused else 0


def _rename(text: str) -> tuple[str, str]:
    old, sep, new = text.partition("=")
    dotted = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
    if not sep or not dotted.fullmatch(old) or not dotted.fullmatch(new):
        raise argparse.ArgumentTypeError(f"expected old.module=new.module, got {text!r}")
    return old, new


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m symlib.book.bridges", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--from-scheme", type=int, help="the hash scheme to carry over")
    mode.add_argument("--static", action="store_true",
                      help="prove that the code at --from is the checkout's, up to renamed modules")
    parser.add_argument("--from", dest="rev", metavar="REV", help="with --static: the commit whose hashes are kept")
    parser.add_argument("--rename", type=_rename, action="append", default=[], metavar="OLD=NEW",
                        help="with --static: a module (or package) renamed since REV; repeat for each")
    parser.add_argument("chapters", nargs="*", help="chapter names (default: all)")
    parser.add_argument("--dry-run", action="store_true", help="print the pairs; register nothing")
    args = parser.parse_args(argv)
    if args.static and not args.rev:
        parser.error("--static needs --from REV")
    if not args.static and (args.rev or args.rename):
        parser.error("--from and --rename go with --static")
    if not args.static and not 1 < args.from_scheme < provenance.HASH_SCHEME:
        parser.error(f"--from-scheme must be between 2 and {provenance.HASH_SCHEME - 1}")
    chapters = sorted(p.stem for p in (project_root_or_cwd() / "notebooks").glob("[0-9][0-9]*_*.md")
                      if provenance.package_of_chapter(p.stem) is not None)
    unknown = sorted(set(args.chapters) - set(chapters))
    if unknown:
        parser.error(f"unknown chapters {unknown}; known: {chapters}")
    if args.static:
        return _static(args.rev, dict(args.rename), args.chapters or chapters, args.dry_run)
    pairs = bridge_pairs(args.chapters or chapters, args.from_scheme)
    if args.dry_run:
        for pair in pairs:
            print(*pair)
        return 0
    commit = _clean_commit()
    evidence = (f"the same files (commit {commit[:12]}) hashed under scheme {args.from_scheme} and scheme "
                f"{provenance.HASH_SCHEME}; nothing computed ({platform.python_implementation()} "
                f"{platform.python_version()})")
    new = equivalence.add(pairs, evidence)
    print(f"registered {len(new)} bridges ({len(pairs) - len(new)} already there or equal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
