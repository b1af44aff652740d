"""Compare two runs' results files: did any number, verdict or text move?

The check behind a refactor that must move no number: build the book before and
after, then compare the two ``results/`` folders::

    python -m symlib.book.compare tests/golden/quick-results results

prints, per chapter, ``identical`` or the differences, and exits with status 1 when any chapter
differs (2 on a usage error). :func:`compare_records` does the same for two records in Python.

Compared: every field of a results record (tables, claims with their verdicts, measured values and
preconditions, errata, robustness sweeps, notes, the chapter's profile, seed and device), numbers
exactly unless ``rtol`` is given. Not compared, because two runs of the same numbers differ in them:

- the run's bookkeeping: :data:`IGNORED_FIELDS` (wall time, provenance, library versions, a
  published run's ``computed`` / ``published`` blocks, ``rendered_from_cache``);
- what measures the machine rather than the method: columns in seconds or per second
  (:func:`symlib.book.tables.is_timing_column`), notes in seconds (:func:`is_timing_note`), and the few tables,
  claims and phrases each chapter declares (``Chapter.machine_tables``, ``machine_claims``,
  ``machine_text``: :func:`machine_tables`, ...). Their differences are counted apart (``machine_differences``) and never
  make two runs differ; ``-v`` lists them.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from symlib.book import provenance
from symlib.book.tables import is_timing_column

__all__ = [
    "IGNORED_FIELDS",
    "Comparison",
    "compare_dirs",
    "compare_records",
    "is_timing_note",
    "machine_claims",
    "machine_tables",
    "machine_text",
    "main",
]

IGNORED_FIELDS = frozenset(
    {"wall_time_s", "rendered_from_cache", "provenance", "versions", "computed", "published"}
)
"""Top-level fields of a results record that describe the run, not its numbers."""

def machine_tables(chapter: str) -> frozenset[str]:
    """Whole tables that time this machine (chapter 3's milliseconds per step and their ratios),
    as the chapter declares them (``Chapter.machine_tables``)."""
    declared = _declared(chapter)
    return declared.machine_tables if declared is not None else frozenset()


def machine_claims(chapter: str) -> frozenset[str]:
    """Claims judged on this machine's timings (``Chapter.machine_claims``)."""
    declared = _declared(chapter)
    return declared.machine_claims if declared is not None else frozenset()


def machine_text(chapter: str) -> re.Pattern | None:
    """Phrases with rates per second inside a chapter's texts (claims' and robustness rows'
    ``ours``), masked before two texts are compared (``Chapter.machine_text``)."""
    declared = _declared(chapter)
    return re.compile(declared.machine_text) if declared is not None and declared.machine_text else None


def _declared(chapter: str):
    return provenance.declared(chapter)


_MASK = "‹machine›"


def is_timing_note(key: str) -> bool:
    """Whether a notes key holds seconds or a rate per second (``train_s``, ``timings_s``,
    ``hmc_grad_evals_per_s``, ``wall_s``, ``timing``): the whole value under it is timing."""
    return key in ("timing", "timings") or key.endswith("_s")


@dataclass
class Comparison:
    """What differs between two records of one chapter.

    ``differences`` make the two runs differ; ``machine_differences`` are differences in what
    measures the machine (see the module docstring), listed but not counted.
    """

    chapter: str
    differences: list[str] = field(default_factory=list)
    machine_differences: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences


@dataclass
class _Context:
    chapter: str
    rtol: float
    out: Comparison

    def report(self, path: str, message: str, machine: bool) -> None:
        (self.out.machine_differences if machine else self.out.differences).append(f"{path}: {message}")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _same(a, b, rtol: float) -> bool:
    if _is_number(a) and _is_number(b):
        if a == b:
            return True
        if rtol and math.isfinite(a) and math.isfinite(b):
            return abs(a - b) <= rtol * max(abs(a), abs(b))
        return False
    return type(a) is type(b) and a == b


def _show(v) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 200 else text[:197] + "..."


def _diff(a, b, path: str, ctx: _Context, machine: bool = False, notes: bool = False) -> None:
    """Report every difference between the JSON values ``a`` and ``b`` under ``path``; in
    ``notes``, a key that :func:`is_timing_note` makes its whole value a machine difference."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{key}" if path else str(key)
            timing = machine or (notes and is_timing_note(str(key)))
            if key not in b:
                ctx.report(sub, "only in A", timing)
            elif key not in a:
                ctx.report(sub, "only in B", timing)
            else:
                _diff(a[key], b[key], sub, ctx, timing, notes)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            ctx.report(path, f"{len(a)} items in A, {len(b)} in B", machine)
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", ctx, machine, notes)
    elif isinstance(a, str) and isinstance(b, str) and (pattern := machine_text(ctx.chapter)) is not None:
        masked = [pattern.sub(_MASK, s) for s in (a, b)]
        if masked[0] != masked[1]:
            ctx.report(path, f"{_show(a)} -> {_show(b)}", machine)
        elif a != b:
            ctx.report(path, f"{_show(a)} -> {_show(b)}", True)
    elif not _same(a, b, ctx.rtol):
        ctx.report(path, f"{_show(a)} -> {_show(b)}", machine)


def _machine_column(name: str) -> bool:
    return is_timing_column(name)


def _diff_table(a: dict, b: dict, path: str, ctx: _Context, machine: bool) -> None:
    """A table cell by cell, its timing columns apart; a cell is named by its row's first cell."""
    _diff({k: v for k, v in a.items() if k not in ("columns", "rows")},
          {k: v for k, v in b.items() if k not in ("columns", "rows")}, path, ctx, machine)
    cols_a, cols_b = a.get("columns", []), b.get("columns", [])
    rows_a, rows_b = a.get("rows", []), b.get("rows", [])
    if cols_a != cols_b:
        # only timing columns added or dropped: a machine difference, the other cells still compare
        kept_same = [c for c in cols_a if not _machine_column(c)] == [c for c in cols_b if not _machine_column(c)]
        ctx.report(f"{path}.columns", f"{_show(cols_a)} -> {_show(cols_b)}", machine or kept_same)
        if not kept_same:
            return
    if len(rows_a) != len(rows_b):
        ctx.report(f"{path}.rows", f"{len(rows_a)} rows in A, {len(rows_b)} in B", machine)
    index_b = {c: i for i, c in enumerate(cols_b)}
    for r, (row_a, row_b) in enumerate(zip(rows_a, rows_b)):
        label = f"{path}.rows[{r}]" + (f" ({_show(row_a[0])})" if row_a else "")
        if len(row_a) != len(cols_a) or len(row_b) != len(cols_b):
            _diff(row_a, row_b, label, ctx, machine)
            continue
        for c, name in enumerate(cols_a):
            j = c if cols_a == cols_b else index_b.get(name)  # by position unless columns moved
            if j is not None:
                _diff(row_a[c], row_b[j], f"{label}[{name!r}]", ctx, machine or _machine_column(name))


def _diff_tables(a: dict, b: dict, path: str, ctx: _Context) -> None:
    whole = machine_tables(ctx.chapter)
    for name in sorted(set(a) | set(b)):
        sub = f"{path}.{name}"
        if name not in b or name not in a:
            ctx.report(sub, "only in A" if name in a else "only in B", False)
        elif not (isinstance(a[name], dict) and isinstance(b[name], dict)):
            _diff(a[name], b[name], sub, ctx)
        else:
            _diff_table(a[name], b[name], sub, ctx, name in whole)


def _by_id(items) -> dict | None:
    """A list of records with distinct ``id`` as a dict by id; None if it is not one."""
    if not isinstance(items, list) or not all(isinstance(i, dict) and "id" in i for i in items):
        return None
    ids = [i["id"] for i in items]
    if len(set(ids)) != len(ids):
        return None
    return dict(zip(ids, items))


def _diff_keyed(a, b, path: str, ctx: _Context, machine_ids=frozenset()) -> None:
    """Claims or errata, matched by ``id`` so that one inserted item reads as one difference."""
    by_a, by_b = _by_id(a), _by_id(b)
    if by_a is None or by_b is None:
        _diff(a, b, path, ctx)
        return
    for key in list(by_a) + [k for k in by_b if k not in by_a]:
        sub = f"{path}[{key}]"
        if key not in by_b or key not in by_a:
            ctx.report(sub, "only in A" if key in by_a else "only in B", False)
        else:
            _diff(by_a[key], by_b[key], sub, ctx, key in machine_ids)
    common = [k for k in by_a if k in by_b]
    if common != [k for k in by_b if k in by_a]:
        ctx.report(path, "same items in another order", False)


_FIELD_ORDER = ("chapter", "profile", "seed", "device", "tables", "claims", "errata", "robustness", "notes")


def _field_order(key: str):
    """Fields in the order a results file lists them; unknown fields (compared too) last."""
    return (_FIELD_ORDER.index(key) if key in _FIELD_ORDER else len(_FIELD_ORDER), key)


def compare_records(a: dict, b: dict, *, rtol: float = 0.0) -> Comparison:
    """The differences between two results records of one chapter (A, then B).

    Args:
        a, b: results records as :meth:`symlib.book.results.ChapterResults.to_dict` writes them
            (or published records, :mod:`symlib.book.published`).
        rtol: relative tolerance for numbers; 0 (the default) compares them exactly, which is
            what "no number moves" means on one machine.

    Returns:
        A :class:`Comparison`: ``identical`` when nothing but the run's bookkeeping and the
        machine's timings differs.
    """
    for name, record in (("A", a), ("B", b)):
        if not isinstance(record, dict):
            raise TypeError(f"results record {name} must be a dict (a parsed results/<chapter>.json); "
                            f"got {type(record).__name__}")
    chapter = str(a.get("chapter") or b.get("chapter") or "?")
    ctx = _Context(chapter=chapter, rtol=rtol, out=Comparison(chapter))
    for key in sorted((set(a) | set(b)) - IGNORED_FIELDS, key=_field_order):
        if key not in a or key not in b:
            ctx.report(key, "only in A" if key in a else "only in B", False)
        elif key in ("tables", "robustness") and isinstance(a[key], dict) and isinstance(b[key], dict):
            _diff_tables(a[key], b[key], key, ctx)
        elif key == "claims":
            _diff_keyed(a[key], b[key], key, ctx, machine_claims(chapter))
        elif key == "errata":
            _diff_keyed(a[key], b[key], key, ctx)
        elif key == "notes":
            _diff(a[key], b[key], key, ctx, notes=True)
        else:
            _diff(a[key], b[key], key, ctx)
    return ctx.out


def _results_files(directory: Path) -> dict[str, Path]:
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a folder of results files (results/<chapter>.json)")
    return {p.stem: p for p in sorted(directory.glob("*.json")) if not p.name.startswith(".")}


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read results file {path}: {error}") from error


def compare_dirs(dir_a: str | Path, dir_b: str | Path, *, rtol: float = 0.0) -> dict[str, Comparison]:
    """:func:`compare_records` for every chapter in either folder (a chapter missing from one
    folder is a difference), by chapter name in sorted order."""
    files_a, files_b = _results_files(Path(dir_a)), _results_files(Path(dir_b))
    out = {}
    for chapter in sorted(set(files_a) | set(files_b)):
        if chapter not in files_b or chapter not in files_a:
            missing = dir_b if chapter not in files_b else dir_a
            out[chapter] = Comparison(chapter, [f"no {chapter}.json in {missing}"])
        else:
            out[chapter] = compare_records(_load(files_a[chapter]), _load(files_b[chapter]), rtol=rtol)
    return out


def _format(comparison: Comparison, verbose: bool, limit: int) -> list[str]:
    machine = comparison.machine_differences
    note = f" ({len(machine)} machine-measured values differ, not counted)" if machine else ""
    lines = [f"{comparison.chapter}: " + ("identical" if comparison.identical
                                           else f"{len(comparison.differences)} differences") + note]
    shown = comparison.differences if limit <= 0 else comparison.differences[:limit]
    lines += [f"  {d}" for d in shown]
    if len(shown) < len(comparison.differences):
        lines.append(f"  ... and {len(comparison.differences) - len(shown)} more (--limit 0 shows all)")
    if verbose:
        lines += [f"  [machine] {d}" for d in machine]
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m symlib.book.compare DIR_A DIR_B``: 0 when every chapter is identical, else 1."""
    parser = argparse.ArgumentParser(
        prog="python -m symlib.book.compare",
        description="Compare two folders of results files (results/<chapter>.json) chapter by chapter, "
                    "timings and provenance aside; exit status 1 when any chapter differs.",
    )
    parser.add_argument("dir_a", type=Path, help="the reference folder (e.g. tests/golden/quick-results)")
    parser.add_argument("dir_b", type=Path, help="the folder to check (e.g. results)")
    parser.add_argument("--rtol", type=float, default=0.0, help="relative tolerance for numbers (default 0: exact)")
    parser.add_argument("--limit", type=int, default=20, help="differences shown per chapter (0: all; default 20)")
    parser.add_argument("-v", "--verbose", action="store_true", help="also list the machine-measured differences")
    args = parser.parse_args(argv)
    if args.rtol < 0:
        parser.error(f"--rtol must be >= 0; got {args.rtol}")
    try:
        comparisons = compare_dirs(args.dir_a, args.dir_b, rtol=args.rtol)
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    if not comparisons:
        parser.error(f"no results files (*.json) in {args.dir_a} or {args.dir_b}")
    for comparison in comparisons.values():
        print("\n".join(_format(comparison, args.verbose, args.limit)))
    return 0 if all(c.identical for c in comparisons.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
