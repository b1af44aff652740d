"""Where a chapter's numbers came from: commit, profile and code hashes, device.

Every results file records them, so a published run can be compared with the code and profile
of a later checkout: when either hash differs, the numbers were made by an older version.

- The *profile hash* covers the profile's values (the dataclass, as canonical JSON).
- The *code hash* covers what can change a chapter's numbers and verdicts: the chapter's own
  package, its notebook's code, and the library modules they import, directly or through other
  modules (with the Stan programs and data files beside them), as far as those modules compute or
  judge (:data:`BOOK_ROLES`: the book machinery that runs, stores, lays out and publishes runs is
  in no hash; a golden test of every stage's smoke results checks that it moves no number).
  Other chapters' packages and modules the chapter never imports are left out, and a module
  counts by its code, not its docstrings or comments (:data:`HASH_SCHEME` 5; records written
  under an older scheme are compared under it, or through the registry of equivalences).
- The *stage code hash* (:func:`stage_code_hash`) is what every cache entry records of the code
  that computed it: the chapter's package, the chapter packages it names and the modules they
  import and that compute, without the notebook (stages compute in the library). The cache recomputes an entry
  whose stage code hash is not this checkout's, and results files carry the hashes of the
  entries they were made from, so a published run is compared with the code that computed its
  numbers, not only with the code that rendered them. A chapter may narrow it stage by stage
  (:data:`STAGE_CODE_ATTRIBUTE`): a stage whose code it declares is hashed over those modules and
  what they import only, so that an edit of the chapter's claims or texts leaves the entries of
  its long stages (and their checkpoints) current.
- The *compute code hash* (:func:`compute_code_hash`) is one hash of every stage's: what the
  pieces of a run in pieces record, so that a piece continues the pieces before it exactly when
  none of the code it resumes changed.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from symlib.book.equivalence import equivalent
from symlib.book.paths import project_root

__all__ = [
    "BOOK_ROLES",
    "CHAPTER_FINDER",
    "HASH_SCHEME",
    "chapter_of",
    "chapter_package",
    "chapter_package_dir",
    "code_current",
    "code_hash",
    "code_tree",
    "combined_code_hash",
    "compute_code_hash",
    "declared",
    "declared_stage_code",
    "fingerprint",
    "git_commit",
    "import_closure",
    "notebook_code",
    "package_of_chapter",
    "profile_hash",
    "provenance",
    "role",
    "stage_code_hash",
    "stage_code_hashes",
    "stage_experiments",
    "stale_code_groups",
    "tree_text",
]

SYMLIB = Path(__file__).resolve().parents[1]


def profile_hash(config) -> str:
    """A short hash of a profile's values (any dataclass instance)."""
    values = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config
    text = json.dumps(
        {"type": type(config).__name__, "values": values}, sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def chapter_package_dir(config) -> Path | None:
    """The chapter package a profile belongs to (``symlib/chapters/<name>/``), if it is one."""
    parts = type(config).__module__.split(".")
    if parts[:2] == ["symlib", "chapters"] and len(parts) > 2:
        return SYMLIB / "chapters" / parts[2]
    return None


BOOK_ROLES: dict[str, str] = {
    # compute: code a stage runs to make its numbers (its random streams; the data loaders, symlib.data,
    # compute too, as every module outside symlib/book does)
    "streams": "compute",
    # verdict: turns a run's numbers into its claims' verdicts; in a record's rendering hash
    "chapter": "verdict", "results": "verdict", "preconditions": "verdict",
    # contract: declares stages, runs them, stores and fans out their results; moves no number by
    # design, which tests/golden/smoke_numbers.json checks (every stage's smoke result, bit for bit)
    "__init__": "contract", "cache": "contract", "codehash": "contract", "parallel": "contract", "runtime": "contract",
    "profiles": "contract", "workers": "contract",
    # layout: lays out pages, tables and figures
    "tables": "layout", "words": "layout", "cards": "layout", "ledger": "layout", "plotting": "layout", "reference": "layout",
    "apidoc": "layout", "linkcheck": "layout", "readme": "layout",
    # run: executes, compares and publishes runs; hashes code
    "pipeline": "run", "published": "run", "provenance": "run", "paths": "run", "side_by_side": "run",
    "compare": "run", "pieces": "run", "checkpoints": "run", "equivalence": "run",
    "same_numbers": "run", "rerun": "run", "bridges": "run", "records": "run", "publishing": "run",
    "vi_progress": "run",
}
"""The role of every module of ``symlib/book`` (a test checks that none is missing), which decides
what its code counts for (:data:`HASH_SCHEME` 5):

- ``compute`` modules count in the code hashes of every stage and chapter whose code imports them;
- ``verdict`` modules count in a chapter's code hash (the code that rendered and judged a record),
  not in its stages' (:func:`stage_code_hash`);
- ``contract``, ``layout`` and ``run`` modules count in neither, and a code hash does not follow
  their imports. The contract modules call the stages and store what they return: that they move
  no number is checked by a test of every stage's smoke-profile result against the golden file
  ``tests/golden/smoke_numbers.json``, not by making every cache entry and published run stale.

Modules outside ``symlib/book`` compute, except :data:`OTHER_ROLES`."""

CONTRACT_COMPUTE = ("streams",)
"""The ``compute`` modules of :data:`BOOK_ROLES` that every stage runs through the contract
(``ctx.stream(...)``) without importing them: in every scheme-5 code hash."""

OTHER_ROLES: dict[str, str] = {"files.py": "run"}
"""Roles of modules outside ``symlib/book`` that compute nothing (paths relative to ``symlib/``)."""

RENDERING_ONLY = frozenset(
    f"book/{name}.py" for name in ("tables", "published", "pipeline", "plotting", "provenance", "reference", "paths",
                                     "side_by_side", "linkcheck", "compare", "ledger", "cards", "apidoc", "pieces", "carry",
                                     "workers", "checkpoints", "equivalence", "same_numbers", "readme", "rerun", "bridges")
)
"""The modules schemes 1 to 4 leave out of every code hash (they lay out pages, move files or
start worker processes); kept as it was so that those schemes' hashes of a checkout stay what
they were. Scheme 5 reads :data:`BOOK_ROLES` instead."""


def role(path: Path) -> str:
    """The role of a library file (:data:`BOOK_ROLES`, :data:`OTHER_ROLES`; ``compute`` otherwise,
    data files included)."""
    rel = Path(path).relative_to(SYMLIB).as_posix()
    if rel.startswith("book/") and rel.count("/") == 1 and rel.endswith(".py"):
        return BOOK_ROLES.get(rel[len("book/"):-3], "unclassified")
    return OTHER_ROLES.get(rel, "compute")


HASH_SCHEME = 5
"""How the code hashes are computed; results files record it (``provenance.hash_scheme``).

1 (records without the field): the whole library outside ``chapters/`` (less
:data:`RENDERING_ONLY`), so any change to any module made every published run stale.
2: only the modules a chapter's code imports, directly or through other modules (static
``import`` / ``from ... import`` statements, anywhere in a file), with the package ``__init__``
files on their way and the data files (``.stan``, ``.json``) beside them or in a data folder
their code names (:func:`_data_files`), plus the whole book machinery less
:data:`RENDERING_ONLY`. A package ``__init__`` that re-exports its submodules pulled every
sibling in.
3: as 2, except that a package ``__init__``'s imports of its own submodules are followed only as
far as a chapter asks for them (:func:`import_closure_precise`): ``from symlib.inference import
mfvi`` counts ``inference/__init__.py`` and ``mfvi.py``. A plain ``import symlib.nn`` still counts
every module the ``__init__`` imports (attribute access cannot be traced).
4: as 3, except that the notebook counts by its code (:func:`notebook_code`: its front matter and
code cells, with their options), not its prose. Stage code hashes have no notebook, so they are
scheme 3's.
5: the code that computes, by its meaning. A stage's hash covers its code and the modules it
imports whose role (:data:`BOOK_ROLES`) is ``compute``; a chapter's code hash adds its other
modules, its notebook's code and the ``verdict`` modules; no hash starts from, or follows the
imports of, a ``contract``, ``layout`` or ``run`` module, so the book machinery that executes,
stores and publishes runs can be restructured without making a run stale. A Python module
counts by its syntax tree without docstrings (:func:`fingerprint`): a comment, a docstring or a
line break changes no hash. Records and cache entries of scheme 4 are carried over by the
registry of equivalences (:mod:`symlib.book.bridges`: both schemes' hashes of the same files)."""


def code_hash(chapter_dir: Path | None = None, notebook: Path | None = None, *, scheme: int = HASH_SCHEME) -> str:
    """A short hash of the code behind a chapter's numbers and verdicts: its package, the library
    modules it and its notebook import (:data:`HASH_SCHEME`; less :data:`RENDERING_ONLY`) and the
    notebook. Without a chapter, or with ``scheme=1``, the whole library outside ``chapters/``."""
    if scheme == 1 or chapter_dir is None:
        return _digest([chapter_dir] if chapter_dir is not None else [], notebook)
    return _closure_digest([Path(chapter_dir)], notebook, scheme)


def chapter_of(experiment: str) -> str:
    """The chapter a cache experiment belongs to: its name up to the first ``-``
    (``"04_constrained_models-prior"`` -> ``"04_constrained_models"``)."""
    return experiment.split("-", 1)[0]


def package_of_chapter(chapter: str) -> Path | None:
    """``symlib/chapters/<package>/`` of a chapter named ``<number>_<package>``
    (``"02a_symmetry_removal"`` -> ``symmetry_removal/``), or None when there is no such package."""
    match = re.fullmatch(r"\d+[a-z]?_(\w+)", chapter)
    folder = SYMLIB / "chapters" / match.group(1) if match else None
    return folder if folder is not None and folder.is_dir() else None


CHAPTER_FINDER: list[Callable[[str], ModuleType]] = []
"""How this module finds a chapter's package that is not imported yet: ``finder(chapter name) ->
the package``, installed by :mod:`symlib.book.provenance` (the run layer, which may import
:mod:`symlib.chapters`); empty until then. This module sits below every chapter and imports
none: a chapter in use (a notebook's, a worker's) is found among the imported modules."""


def chapter_package(chapter: str) -> ModuleType | None:
    """The package of ``chapter`` (``symlib.chapters.<package>``, by :func:`package_of_chapter`),
    or None for a name with no package: the imported one, else the one :data:`CHAPTER_FINDER`
    imports.

    Raises:
        LookupError: the package is not imported and no finder is installed.
    """
    folder = package_of_chapter(chapter)
    if folder is None:
        return None
    module = sys.modules.get(f"symlib.chapters.{folder.name}")
    if module is not None:
        return module
    if not CHAPTER_FINDER:
        raise LookupError(f"{chapter}: symlib.chapters.{folder.name} is not imported; import it, or "
                          "symlib.book.provenance, which finds every chapter")
    return CHAPTER_FINDER[-1](chapter)


def declared(chapter: str):
    """The :class:`~symlib.book.chapter.Chapter` that ``chapter``'s package declares as
    ``CHAPTER`` (:func:`chapter_package`), or None for a name with no package (a test's made-up
    record) or a package that declares none."""
    package = chapter_package(chapter)
    value = getattr(package, "CHAPTER", None) if package is not None else None
    return value if hasattr(value, "stages") and hasattr(value, "claims") else None


STAGE_CODE_ATTRIBUTE = "STAGE_CODE"
"""A chapter package may export ``STAGE_CODE``: ``{stage name: (module, ...)}``, the modules
(dotted names, ``"symlib.chapters.<package>.<module>"``) that hold the code a stage runs. Such a
stage's code hash (:func:`stage_code_hash`) covers those modules and what they import (with the
package ``__init__`` files on the way and the book machinery) instead of the whole chapter
package, so that editing the chapter's claims, views or texts leaves its entries, and the
checkpoints keyed by them, current. Declare every module the stage's numbers depend on: the
static import closure follows them, but code reached only through a profile object's methods is
not seen (stages read profile fields through :class:`~symlib.book.chapter.ProfileView`, which
gives fields only). Stages sharing a cache experiment must declare the same modules."""


def declared_stage_code(experiment: str) -> tuple[str, ...] | None:
    """The modules ``experiment``'s stage declares as its code (:data:`STAGE_CODE_ATTRIBUTE`), or
    None when its chapter declares none for it (or ``experiment`` names a chapter, or no stage).

    Raises:
        ValueError: stages sharing the experiment declare different modules, or a declared
            module is not a ``symlib`` module.
    """
    chapter = chapter_of(experiment)
    spec = None if experiment == chapter else declared(chapter)
    if spec is None:
        return None
    table = getattr(chapter_package(chapter), STAGE_CODE_ATTRIBUTE, None)
    if not table:
        return None
    found = {tuple(table[s.name]) for s in spec.stages if s.experiment_name(chapter) == experiment and s.name in table}
    others = [s.name for s in spec.stages if s.experiment_name(chapter) == experiment and s.name not in table]
    if len(found) > 1 or (found and others):
        raise ValueError(f"{experiment}: the stages sharing this cache folder declare different code in "
                         f"{STAGE_CODE_ATTRIBUTE} ({sorted(found)}; undeclared: {others})")
    if not found:
        return None
    (modules,) = found
    for name in modules:
        if _module_file(name, SYMLIB.parent) is None:
            raise ValueError(f"{experiment}: {STAGE_CODE_ATTRIBUTE} names {name!r}, which is not a symlib module")
    return modules


def stage_code_hash(experiment: str, *, scheme: int = HASH_SCHEME) -> str:
    """A short hash of the code behind the cached stages of ``experiment`` (or a chapter name).

    The chapter's package, the chapter packages that package names (``symlib.chapters.<other>``)
    and the library modules they import (:data:`HASH_SCHEME` 2; scheme 1: the whole library
    outside ``chapters/``), less :data:`RENDERING_ONLY`; no notebook. For a stage whose chapter
    declares its code (:data:`STAGE_CODE_ATTRIBUTE`; schemes 2 and up), only the declared
    modules and what they import. An experiment that maps to no chapter package
    (:func:`package_of_chapter`) counts the whole library and every chapter package, so that no
    change can go unnoticed.
    """
    own = package_of_chapter(chapter_of(experiment))
    if own is None:
        return _digest([SYMLIB / "chapters"], None)
    if scheme >= 2 and (modules := declared_stage_code(experiment)) is not None:
        return _closure_digest([_module_file(name, SYMLIB.parent) for name in modules], None, scheme)
    others = set()
    for path in own.rglob("*.py"):
        others.update(re.findall(r"symlib\.chapters\.(\w+)", path.read_text(errors="replace")))
    folders = [f for f in [own, *(SYMLIB / "chapters" / name for name in sorted(others))] if f.is_dir()]
    return _digest(folders, None) if scheme == 1 else _closure_digest(folders, None, scheme)


def compute_code_hash(chapter: str, *, scheme: int = HASH_SCHEME) -> str:
    """One hash of the code behind all of ``chapter``'s stages: its :func:`stage_code_hash` when
    none declares its own code (:data:`STAGE_CODE_ATTRIBUTE`), else a digest of every stage
    experiment's (:func:`stage_code_hashes`). What the pieces of a run record: a piece continues
    the earlier ones (their cached entries and checkpoints) exactly when this is unchanged."""
    parts = stage_code_hashes(chapter, scheme=scheme)
    return stage_code_hash(chapter, scheme=scheme) if parts is None else combined_code_hash(parts)


def stage_code_hashes(chapter: str, *, scheme: int = HASH_SCHEME) -> dict[str, str] | None:
    """``{stage experiment: stage_code_hash}`` of ``chapter``, which :func:`compute_code_hash`
    digests; None when no stage declares its own code (the chapter then has one hash)."""
    experiments = stage_experiments(chapter) if scheme >= 2 else []
    if all(declared_stage_code(e) is None for e in experiments):
        return None
    return {e: stage_code_hash(e, scheme=scheme) for e in experiments}


def stage_experiments(chapter: str) -> list[str]:
    """The cache experiments of ``chapter``'s declared stages (``<chapter>-<stage>``), sorted;
    [] for a name with no package or no declared chapter. :func:`compute_code_hash` digests one
    code hash per experiment here, cached or not."""
    spec = declared(chapter) if package_of_chapter(chapter) is not None else None
    return sorted({s.experiment_name(chapter) for s in spec.stages}) if spec is not None else []


def combined_code_hash(parts: dict[str, str]) -> str:
    """:func:`compute_code_hash` of a chapter whose stages declare their code, from its stage
    experiments' code hashes ``{experiment: hash}`` (a results file's ``computed_with`` gives them)."""
    return hashlib.sha256(json.dumps(dict(sorted(parts.items())), sort_keys=True).encode()).hexdigest()[:16]


def stale_code_groups(chapter: str, groups, *, scheme: int = HASH_SCHEME) -> list[tuple[dict, str]]:
    """The groups of a results file's ``provenance.computed_with`` (``{"code_hash", "stages",
    ...}``) whose code hash is not this checkout's, each with the hash its stages have now:
    every stage (experiment) a group names is compared with its own :func:`stage_code_hash` (a
    group naming none, with the chapter's). Non-dict groups are skipped."""
    out = []
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict):
            continue
        stages = group.get("stages") or [chapter]
        recorded = group.get("code_hash")
        nows = {s: stage_code_hash(s) for s in stages}
        # current: the same hash under the record's scheme, or proven equivalent (registry) to
        # this checkout's hash under the current scheme
        if not all(equivalent(s, recorded, stage_code_hash(s, scheme=scheme)) or equivalent(s, recorded, now)
                   for s, now in nows.items()):
            out.append((group, ", ".join(sorted(set(nows.values())))))
    return out


RENDER_SUFFIX = "#render"
"""A chapter's code hash (:func:`code_hash`, with its notebook) is registered in the registry of
equivalences under ``<chapter>#render`` (stage experiments are ``<chapter>-<stage>``)."""


def code_current(chapter: str, recorded: str | None, chapter_dir: Path | None, notebook: Path | None,
                 scheme: int) -> bool:
    """Whether a record's chapter code hash ``recorded`` (written under ``scheme``) describes this
    checkout's code: equal, or joined by the registry of equivalences, to its hash under that
    scheme or under :data:`HASH_SCHEME`."""
    if equivalent(chapter + RENDER_SUFFIX, recorded, code_hash(chapter_dir, notebook, scheme=scheme)):
        return True
    return equivalent(chapter + RENDER_SUFFIX, recorded, code_hash(chapter_dir, notebook))


def _module_file(name: str, root: Path) -> Path | None:
    """The source file of module ``name`` (``symlib.a.b``) under ``root`` (the folder holding
    ``symlib/``): ``a/b.py`` or ``a/b/__init__.py``; None if it is not a module (a name)."""
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imported_names(path: Path, root: Path) -> set[str]:
    """The ``symlib`` modules (or names in them) a file imports, statically, at any depth."""
    out = set()
    for module, names in _import_statements(path, root):
        out.add(module)
        out.update(f"{module}.{n}" for n in names)
    return out


_FENCE = re.compile(r"^(`{3,}|~{3,})\{code-cell\}")


def notebook_code(notebook: Path) -> str:
    """What of a MyST notebook can change what its run records: the YAML front matter (kernel)
    and every ``{code-cell}`` block, fences and cell options included, in order; no prose.
    A notebook in another format counts whole."""
    text = notebook.read_text(errors="replace")
    if notebook.suffix != ".md":
        return text
    lines = text.splitlines(keepends=True)
    kept, i = [], 0
    if lines and lines[0].rstrip() == "---":  # front matter, up to its closing line
        end = next((j for j in range(1, len(lines)) if lines[j].rstrip() == "---"), len(lines) - 1)
        kept, i = lines[: end + 1], end + 1
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        char, width = fence[1][0], len(fence[1])
        j = i + 1  # the closing fence: the same character, at least as many, nothing else
        while j < len(lines) and not re.fullmatch(rf"{re.escape(char)}{{{width},}}\s*", lines[j]):
            j += 1
        kept += lines[i: j + 1]
        i = j + 1
    return "".join(kept)


def _notebook_imports(text: str) -> set[str]:
    """The ``symlib`` modules that the MyST notebook ``text`` imports (a line-based scan: cells
    may hold IPython syntax that is not Python): :func:`notebook_code` under scheme 4, the whole
    text, prose too, before it."""
    out = set()
    for m in re.finditer(r"^\s*(?:from\s+(symlib[\w.]*)\s+import\s+\(?([\w, ]+)|import\s+(symlib[\w.]*))",
                         text, flags=re.MULTILINE):
        if m[3]:
            out.add(m[3])
        else:
            out.add(m[1])
            out.update(f"{m[1]}.{n.strip()}" for n in m[2].split(",") if n.strip())
    return out


def import_closure(start: list[Path], names: set[str] = frozenset(), *, root: Path | None = None) -> set[Path]:
    """Every source file the files ``start`` (and modules ``names``) need: the modules they
    import, recursively, each package ``__init__`` on the way, and the data files they may read
    (:func:`_data_files`). Static: an import by a computed name is not seen,
    so keep such imports to the book machinery (:func:`declared`), which is hashed whole."""
    root = root or SYMLIB.parent
    files, todo = set(), list(start)
    todo += [f for n in names if (f := _module_file(n, root))]
    while todo:
        path = todo.pop()
        if path in files or not path.is_file():
            continue
        files.add(path)
        rel = path.relative_to(root).parts
        for i in range(1, len(rel)):  # the packages it sits in
            init = root.joinpath(*rel[:i], "__init__.py")
            if init.is_file() and init not in files:
                todo.append(init)
        if path.suffix == ".py":
            todo += [f for n in _imported_names(path, root) if (f := _module_file(n, root))]
    return files | _data_files(files)


DATA_SUFFIXES = (".stan", ".json")
"""Files a module may read as data (a Stan program, a table); hashed with the modules that read them."""


def _data_files(files: set[Path]) -> set[Path]:
    """The data files (:data:`DATA_SUFFIXES`) the modules among ``files`` may read: those beside
    each module, and those in a data folder below a module's folder (one without ``__init__.py``,
    at any depth) whose name the module spells in a string of its code, docstrings aside:
    ``inference/stan.py``'s ``joinpath("stan_models", ...)`` brings ``inference/stan_models/*.stan``
    into the hash of every chapter that imports it, and of no other."""
    modules = [p for p in files if p.suffix == ".py"]
    data = {p for d in {m.parent for m in modules} for p in d.iterdir() if p.suffix in DATA_SUFFIXES and p.is_file()}
    for module in modules:
        folders = [d for d in module.parent.iterdir() if d.is_dir() and not (d / "__init__.py").exists()]
        if not folders:
            continue
        spelled = _code_strings(module)
        for folder in folders:
            if folder.name in spelled:
                data |= {p for p in folder.rglob("*") if p.suffix in DATA_SUFFIXES and p.is_file()}
    return data


_SCANS: dict[tuple, object] = {}
"""What :func:`_import_statements` and :func:`_code_strings` found in a file, keyed by the file's
path and its bytes' SHA-256 (so an edited file is read afresh, whatever its time stamp): every
code hash (each cache lookup computes its stage's) walks the same library files, dozens of
times over, and parsing them was most of a chapter's time outside its stages."""


def _scanned(kind: str, path: Path, root: Path | None, scan):
    """``scan(source text)`` of ``path``, remembered for as long as the file's bytes are the same."""
    data = path.read_bytes()
    key = (kind, str(path), str(root), hashlib.sha256(data).digest())
    if key not in _SCANS:
        _SCANS[key] = scan(data.decode(errors="replace"))
    return _SCANS[key]


def _code_strings(path: Path) -> set[str]:
    """The path parts of the string constants in a module's code (a string statement, i.e. a
    docstring, left out)."""
    return set(_scanned("strings", path, None, _strings_of))


def _strings_of(source: str) -> frozenset[str]:
    tree = ast.parse(source)
    docs = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return frozenset(part for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                     for part in re.split(r"[/\\]", node.value))


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_statements(path: Path, root: Path) -> list[tuple[str, tuple[str, ...]]]:
    """The ``symlib`` imports of a file, statically, at any depth: ``(module, ())`` for ``import
    module`` and ``(module, names)`` for ``from module import names`` (relative imports
    resolved)."""
    package = _module_name(path, root) if path.name == "__init__.py" else _module_name(path, root).rpartition(".")[0]
    return list(_scanned("imports", path, root, lambda source: _imports_of(source, package)))


def _imports_of(source: str, package: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            out.append((base, tuple(a.name for a in node.names)))
    return tuple((m, n) for m, n in out if m == "symlib" or m.startswith("symlib."))


def _inside(module: str, package: str) -> bool:
    """Whether ``module`` is ``package`` or in it (never, for ``package == ""``)."""
    return bool(package) and (module == package or module.startswith(package + "."))


def import_closure_precise(start: list[Path], names: set[str] = frozenset(), *,
                           root: Path | None = None, follow=None) -> set[Path]:
    """:func:`import_closure` with package ``__init__`` files read as re-export tables
    (:data:`HASH_SCHEME` 3): an ``__init__``'s imports from inside its own package are followed
    only for the names some file asks the package for; its other imports always. With
    ``follow(path) -> bool`` (scheme 5), a file for which it is false is neither in the closure
    nor followed."""
    root = root or SYMLIB.parent
    files: set[Path] = set()
    whole: set[Path] = set()          # files whose every import is followed
    asked: set[tuple[Path, str]] = set()
    read: dict[Path, list] = {}       # each file's imports, for this closure
    todo: list[tuple[Path, str | None]] = [(p, None) for p in start]

    def want_module(name: str) -> None:
        if (f := _module_file(name, root)) is not None:
            todo.append((f, None))

    def want_name(module: str, name: str) -> None:
        """``from module import name``: a submodule, or a name the module defines or re-exports."""
        sub = _module_file(f"{module}.{name}", root)
        if sub is not None:
            todo.append((sub, None))
            if (init := _module_file(module, root)) is not None:
                todo.append((init, ""))         # the package's __init__ runs first
            return
        if (f := _module_file(module, root)) is not None:
            todo.append((f, name if f.name == "__init__.py" else None))

    for n in names:
        module, _, attr = n.rpartition(".")
        if _module_file(n, root) is not None:
            want_module(n)
        elif module:
            want_name(module, attr)
    while todo:
        path, name = todo.pop()
        if not path.is_file() or (follow is not None and not follow(path)):
            continue
        is_init = path.suffix == ".py" and path.name == "__init__.py"
        if path not in files:
            files.add(path)
            rel = path.relative_to(root).parts
            for i in range(1, len(rel) - (1 if is_init else 0)):  # the packages it sits in
                init = root.joinpath(*rel[:i], "__init__.py")
                if init.is_file():
                    todo.append((init, ""))
        if path.suffix != ".py":
            continue
        own = _module_name(path, root) if is_init else ""
        if path not in read:                  # a file is visited once per name asked of it: read it once
            read[path] = _import_statements(path, root)
        statements = read[path]
        if not is_init or name is None:       # an ordinary module, or a package imported whole
            if path in whole:
                continue
            whole.add(path)
            mode = "all"
        elif name == "":                      # an __init__ on the way: its outside imports
            if (path, "") in asked:
                continue
            asked.add((path, ""))
            mode = "outside"
        else:                                 # an __init__ asked for one name
            if (path, name) in asked:
                continue
            asked.add((path, name))
            todo.append((path, ""))
            if not any(_inside(m, own) and name in n for m, n in statements):
                todo.append((path, None))     # defined in the __init__ itself: all it imports
                continue
            mode = "name"
        for module, imported in statements:
            if mode == "outside" and _inside(module, own):
                continue
            if mode == "name" and not (_inside(module, own) and name in imported):
                continue
            if not imported:
                want_module(module)
            else:
                for n in ([name] if mode == "name" else imported):
                    want_name(module, n)
    return files | _data_files(files)


def _closure_digest(chapter_dirs: list[Path], notebook: Path | None, scheme: int = HASH_SCHEME) -> str:
    """Hash the chapter packages (or single modules) ``chapter_dirs``, the modules they and
    ``notebook`` import and ``notebook``'s code.

    Schemes 2 to 4 (:func:`import_closure`, less :data:`RENDERING_ONLY`) start from the whole book
    machinery too. Scheme 5 follows the imports of ``compute`` modules (:data:`BOOK_ROLES`), and of
    ``verdict`` modules where there is a notebook (a chapter's code hash; a stage's has none), and
    hashes each Python module by its :func:`fingerprint`."""
    start = [p for d in map(Path, chapter_dirs)
             for p in ([d.resolve()] if d.is_file() else d.resolve().rglob("*"))
             if p.is_file() and p.suffix in (".py", ".stan", ".json")]
    if scheme <= 4:
        start += [p for p in (SYMLIB / "book").glob("*.py")]
    else:  # the contract hands every stage its random streams: their code counts for every stage
        start += [SYMLIB / "book" / f"{name}.py" for name in CONTRACT_COMPUTE]
    has_notebook = notebook is not None and notebook.is_file()
    text = "" if not has_notebook else notebook_code(notebook) if scheme >= 4 else notebook.read_text(errors="replace")
    names = _notebook_imports(text)
    if scheme >= 5:
        counted = ("compute", "verdict", "unclassified") if notebook is not None else ("compute", "unclassified")
        follow = (lambda p: role(p) in counted)
        files = sorted(import_closure_precise(start, names, follow=follow))
        digest = hashlib.sha256(b"scheme 5\0")
        for path in files:
            digest.update(str(path.relative_to(SYMLIB)).encode() + b"\0" + fingerprint(path) + b"\0")
        if has_notebook:
            digest.update(b"notebook\0" + text.encode())
        return digest.hexdigest()[:16]
    closure = import_closure(start, names) if scheme == 2 else import_closure_precise(start, names)
    files = sorted(p for p in closure if p.relative_to(SYMLIB).as_posix() not in RENDERING_ONLY)
    # scheme 4 reads the notebook differently and nothing else: without a notebook (every stage
    # code hash) it hashes as 3 does, so cache entries and checkpoints of scheme 3 stay current
    digest = hashlib.sha256(b"scheme 2\0" if scheme == 2 else b"scheme 3\0")
    for path in files:
        digest.update(str(path.relative_to(SYMLIB)).encode() + b"\0" + path.read_bytes() + b"\0")
    if has_notebook:   # scheme 4 hashes the code it scanned; older schemes the file's bytes
        digest.update(b"notebook\0" + (text.encode() if scheme >= 4 else notebook.read_bytes()))
    return digest.hexdigest()[:16]


def fingerprint(path: Path) -> bytes:
    """What of a file a scheme-5 code hash reads: a Python module's syntax tree, every string
    statement (docstrings, attribute docstrings) left out, written out field by field with the
    empty ones skipped (so that a Python version adding an optional field hashes alike); a
    comment, a docstring or the layout of the code changes nothing. Other files by their bytes."""
    path = Path(path)
    if path.suffix != ".py":
        return path.read_bytes()
    return _scanned("tree", path, None, _tree_text).encode()


def _tree_text(source: str) -> str:
    return tree_text(code_tree(source))


def code_tree(source: str) -> ast.Module:
    """The syntax tree of Python ``source`` that :func:`fingerprint` reads: every string statement
    (docstrings, attribute docstrings) left out, a body left empty by that holding ``pass``."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                kept = [b for b in body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
                                                and isinstance(b.value.value, str))]
                setattr(node, field, kept or [ast.Pass()])
    return tree


def tree_text(value) -> str:
    """A syntax tree written out field by field, the empty fields skipped (positions are not
    fields): what :func:`fingerprint` hashes of a module's :func:`code_tree`."""
    if isinstance(value, ast.AST):
        parts = [f"{f}={tree_text(v)}" for f in value._fields if (v := getattr(value, f, None)) is not None and v != []]
        return f"{type(value).__name__}({','.join(parts)})"
    if isinstance(value, list):
        return "[" + ",".join(tree_text(v) for v in value) + "]"
    return repr(value)


def _digest(chapter_dirs: list[Path], notebook: Path | None) -> str:
    """Hash the library outside ``chapters/`` (less :data:`RENDERING_ONLY`), the chapter
    packages ``chapter_dirs`` and ``notebook``."""
    chapters = SYMLIB / "chapters"
    chapter_dirs = [Path(d).resolve() for d in chapter_dirs]
    files = [
        p
        for p in SYMLIB.rglob("*")
        if p.is_file()
        and p.suffix in (".py", ".stan")
        and p.relative_to(SYMLIB).as_posix() not in RENDERING_ONLY
        and (
            not p.is_relative_to(chapters)
            or p.parent == chapters
            or any(p.is_relative_to(d) for d in chapter_dirs)
        )
    ]
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(str(path.relative_to(SYMLIB)).encode() + b"\0" + path.read_bytes() + b"\0")
    if notebook is not None and notebook.is_file():
        digest.update(b"notebook\0" + notebook.read_bytes())
    return digest.hexdigest()[:16]


def git_commit() -> str | None:
    """The checkout's commit, with ``+dirty`` when symlib/ or notebooks/ has uncommitted changes."""
    root = project_root()
    if root is None or not (root / ".git").exists():
        return None
    try:
        run = lambda *a: subprocess.run(
            ["git", *a], cwd=root, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        commit = run("rev-parse", "HEAD")
        dirty = run("status", "--porcelain", "--", "symlib", "notebooks")
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def provenance(chapter: str, config) -> dict:
    """Commit, profile hash and code hash of a run of ``chapter`` with profile ``config``."""
    root = project_root()
    notebook = root / "notebooks" / f"{chapter}.md" if root is not None else None
    return {
        "commit": git_commit(),
        "hash_scheme": HASH_SCHEME,
        "profile_hash": profile_hash(config),
        "code_hash": code_hash(chapter_package_dir(config), notebook),
        "profile_values": json.loads(
            json.dumps(
                dataclasses.asdict(config) if dataclasses.is_dataclass(config) else None,
                default=str,
            )
        ),
    }
