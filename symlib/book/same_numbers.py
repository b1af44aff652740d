"""Prove that two versions of the code compute the same numbers for a chapter, and register it.

``python -m symlib.book.same_numbers CHAPTER --from REV [--to REV] [--profiles smoke quick]``
exports both commits (``git archive``), computes the chapter's stages under each (``python -m
symlib.book.pipeline compute``, each tree importing its own ``symlib``, each with a cache of its own
and an httpstan cache of its own, so that each side's Stan programs are compiled by its own code and
a change of compile flags is proven too), and compares every cache entry, exactly: the same entries,
and in each the same tensors, arrays and numbers (NaN equal to NaN), wall-clock timings aside (dict
keys that name a duration, :data:`TIMING_KEY`: two runs of the same code on one machine differ
there, and the evidence names every key set aside). Only when all are identical does it write one
entry per stage experiment into the registry (:mod:`symlib.book.equivalence`), so that cache
entries, carried state and published runs computed under the old code stay current. A difference is
printed and nothing is registered.

With ``--render`` it also renders the chapter under each code (``pipeline execute --cached-only``)
from the same cache, the new side's (its entries just proven identical to the old side's but for
wall-clock timings, which each side measured on its own), and compares the two results files: every
claim, table and ledger, value by value, the provenance (which names the code) aside, and aside too
every value in which two renders of the new code differ (the stages not cached, such as chapter 3's
timings of this machine: named in the evidence), but never a verdict: one that two renders of the new code
disagree on is a difference. Only when the renders agree too is the chapter's code hash with
its notebook (``<chapter>#render``) registered, so that a published record of the old code, whose
numbers the proof shows the new code renders the same, stays current rather than reading stale.

It proves what the profiles exercise: the `smoke` and `quick` profiles run every stage of the
chapter on small sizes; a change that moves numbers only at another profile's sizes (a branch
on a size) would pass here, so keep to moves, renames and edits of code that computes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import platform
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import torch

from symlib.book import cache, equivalence
from symlib.book.codehash import RENDER_SUFFIX
from symlib.book.paths import project_root_or_cwd
from symlib.book.provenance import chapter_of
from symlib.chapters import CHAPTERS

__all__ = ["compare_caches", "identical", "main", "prove", "value_digest"]

TIMING_KEY = re.compile(r"((^|_)(s|ms|sec|secs|seconds|time|times|timing|timings|wall|elapsed)$)|(^time\b)|(\((s|ms|min)\)$)")
"""Dict keys holding a wall-clock duration (``warmup_s``, ``seconds``, ``sample_time``): left out
of the comparison, named in the evidence."""

PROFILES = ("smoke", "quick")
"""The profiles computed under both codes by default."""


def identical(a, b) -> bool:
    """Exact equality of two results: tensors and arrays of the same dtype, shape and values
    (NaN equal to NaN), numbers, strings, and containers of them, recursively; other objects
    by their attributes."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b) or (
            a.is_floating_point() and torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))
            and torch.equal(a.isnan(), b.isnan())))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(identical(a[k], b[k]) for k in a if not _timing(k))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "__dict__") and not isinstance(a, type):
        return identical(vars(a), vars(b))
    return a == b


def value_digest(value) -> str:
    """A short digest of a result that two results share exactly when they are :func:`identical`
    (NaN equal to NaN, ``-0.0`` to ``0.0``, wall-clock timings set aside), for pinning results
    in a golden file."""
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()[:16]


def _feed(digest, v) -> None:
    put = (lambda *parts: digest.update("\0".join(map(str, parts)).encode() + b"\1"))
    if isinstance(v, torch.Tensor):
        v = v.detach().cpu()
        put("tensor", v.dtype, tuple(v.shape))
        if v.is_floating_point() or v.is_complex():
            put(v.isnan().numpy().tobytes().hex())
            v = torch.nan_to_num(v.to(torch.float64) if v.dtype == torch.bfloat16 else v, nan=0.0) + 0
        digest.update(v.contiguous().numpy().tobytes())
    elif isinstance(v, np.ndarray):
        put("array", v.dtype, v.shape)
        if v.dtype.kind in "fc":
            put(np.isnan(v).tobytes().hex())
            v = np.nan_to_num(v, nan=0.0) + 0
        digest.update(np.ascontiguousarray(v).tobytes() if v.dtype != object else repr(v.tolist()).encode())
    elif isinstance(v, float):
        put("float", "nan" if math.isnan(v) else repr(v + 0.0))
    elif isinstance(v, dict):
        put("dict", type(v).__name__, len(v))
        for k in sorted(v, key=repr):
            if not _timing(k):
                put("key", repr(k))
                _feed(digest, v[k])
    elif isinstance(v, list | tuple):
        put(type(v).__name__, len(v))
        for x in v:
            _feed(digest, x)
    elif hasattr(v, "__dict__") and not isinstance(v, type):
        put("object", type(v).__name__)
        _feed(digest, vars(v))
    else:
        put(type(v).__name__, repr(v))


_TIMINGS_SEEN: set[str] = set()


def _timing(key) -> bool:
    """Whether a dict key names a wall-clock duration (noted, for the evidence)."""
    if isinstance(key, str) and TIMING_KEY.search(key):
        _TIMINGS_SEEN.add(key)
        return True
    return False


def first_difference(a, b, where: str = "") -> str | None:
    """Where two results first differ (a path such as ``["fits"][0].rhat``), or None when
    :func:`identical`."""
    if identical(a, b):
        return None
    if type(a) is type(b) and isinstance(a, dict) and a.keys() == b.keys():
        return next(d for k in a if not _timing(k) and (d := first_difference(a[k], b[k], f"{where}[{k!r}]")) is not None)
    if type(a) is type(b) and isinstance(a, list | tuple) and len(a) == len(b):
        return next(d for i, (x, y) in enumerate(zip(a, b, strict=True))
                    if (d := first_difference(x, y, f"{where}[{i}]")) is not None)
    if type(a) is type(b) and hasattr(a, "__dict__") and not isinstance(a, type | torch.Tensor | np.ndarray):
        return first_difference(vars(a), vars(b), f"{where}.")
    shown = (lambda v: f"{type(v).__name__} {v!r}"[:80])
    return f"{where or 'the value'}: {shown(a)} against {shown(b)}"


RENDER_ASIDE = ("provenance",)
"""Top-level keys of a results file that name the code and commit that rendered it, not what the
run found: left out when two renders are compared."""


def leaf_differences(a, b, where: str = "") -> list[str]:
    """Every path (``['tables']['cost'][3][1]``) at which two JSON values differ: a leaf, or a
    container whose keys or length differ (NaN equal to NaN)."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return [d for k in a for d in leaf_differences(a[k], b[k], f"{where}[{k!r}]")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in leaf_differences(x, y, f"{where}[{i}]")]
    same = type(a) is type(b) and (a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))
    return [] if same else [where or "the value"]


VERDICT_KEYS = ("holds", "verdict")
"""Keys that hold a verdict, at any depth of a claim in a results file (its own and each column's
under ``verdicts``); the measured values beside them may be timings, and are not verdicts."""


def verdict_paths(record: dict) -> set[str]:
    """The paths (as :func:`leaf_differences` writes them) of every verdict in a results file: the
    leaves under each claim's :data:`VERDICT_KEYS`, at any depth, and each robustness row's cells
    in a column whose name says verdict."""
    found: set[str] = set()
    for i, claim in enumerate(record.get("claims") or []):
        found |= {p for p in _leaves(claim, f"['claims'][{i}]")
                  if any(f"[{k!r}]" in p for k in VERDICT_KEYS)}
    for claim_id, sweep in (record.get("robustness") or {}).items():
        columns = sweep.get("columns", []) if isinstance(sweep, dict) else []
        for r, row in enumerate(sweep.get("rows", []) if isinstance(sweep, dict) else []):
            found |= {f"['robustness'][{claim_id!r}]['rows'][{r}][{c}]" for c, name in enumerate(columns)
                      if "verdict" in str(name) and c < len(row)}
    return found


def _leaves(value, where: str) -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, f"{where}[{k!r}]")] or [where]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, f"{where}[{i}]")] or [where]
    return [where]


def compare_renders(old: Path, new: Path, again: Path) -> tuple[list[str], list[str]]:
    """``(differences, set aside)`` between results files ``old`` and ``new`` (the same chapter
    rendered by each code from its own cache), :data:`RENDER_ASIDE` left out: ``set aside`` are
    the paths at which ``new`` and ``again`` (the new code rendered twice from one cache) differ
    too, which no code reproduces, and are not counted as differences -- except a verdict
    (:func:`verdict_paths`): one that two renders of the new code disagree on is not proven
    unchanged, and is a difference (``unsteady verdict: PATH``) whether or not the old code's
    render agrees with it."""
    a, b, c = ({k: v for k, v in json.loads(Path(f).read_text()).items() if k not in RENDER_ASIDE}
               for f in (old, new, again))
    unsteady = leaf_differences(b, c)
    verdicts = verdict_paths(b) | verdict_paths(c)
    is_verdict = {d: d in verdicts or _under(d, verdicts) for d in unsteady}
    shaky = [f"unsteady verdict: {d}" for d in unsteady if is_verdict[d]]
    aside = [d for d in unsteady if not is_verdict[d]]
    return shaky + [d for d in leaf_differences(a, b) if d not in set(unsteady)], aside


def _under(path: str, verdicts: set[str]) -> bool:
    """Whether ``path`` (a container whose keys or length differ) holds a verdict."""
    return any(v.startswith(path + "[") for v in verdicts)


def _entries(root: Path, chapter: str) -> dict[tuple[str, str], Path]:
    return {(p.parent.name, p.stem): p for p in sorted(root.glob("*/*.pt"))
            if p.parent.name != "checkpoints" and chapter_of(p.parent.name) == chapter}


def compare_caches(old: Path, new: Path, chapter: str) -> tuple[int, list[str], dict[str, str]]:
    """``(entries compared, differences, {experiment: code hash the old entries record})``."""
    a, b = _entries(old, chapter), _entries(new, chapter)
    diffs = [f"only under the old code: {x}/{k}" for x, k in sorted(a.keys() - b.keys())]
    diffs += [f"only under the new code: {x}/{k}" for x, k in sorted(b.keys() - a.keys())]
    hashes: dict[str, str] = {}
    for place in sorted(a.keys() & b.keys()):
        ok_a, value_a, meta_a = cache._load(a[place], quarantine=False)
        ok_b, value_b, _ = cache._load(b[place], quarantine=False)
        if not (ok_a and ok_b):
            diffs.append(f"unreadable: {place[0]}/{place[1]}")
            continue
        hashes[place[0]] = meta_a["computed_with"]["code_hash"]
        if (where := first_difference(value_a, value_b)) is not None:
            diffs.append(f"different: {place[0]}/{place[1]} at {where}")
    return len(a.keys() & b.keys()), diffs, hashes


def _export(rev: str, into: Path) -> str:
    """The checkout's commit ``rev`` written under ``into``; returns its full hash."""
    root = project_root_or_cwd()
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                            capture_output=True, text=True, check=False)
    if commit.returncode:
        raise ValueError(f"no commit {rev!r} in {root}: {commit.stderr.strip()}")
    tar = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", commit.stdout.strip()],
                         capture_output=True, check=True)
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as archive:
        archive.extractall(into, filter="data")
    return commit.stdout.strip()


def _run(tree: Path, args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=tree, env={**env, "PYTHONPATH": str(tree)},
                          capture_output=True, text=True, check=False)


def _stage_hashes(tree: Path, chapter: str, env: dict) -> dict[str, str]:
    code = ("import json, sys\nfrom symlib.book.provenance import stage_code_hash, stage_experiments\n"
            f"print(json.dumps({{e: stage_code_hash(e) for e in stage_experiments({chapter!r})}}))")
    out = _run(tree, ["-c", code], env)
    if out.returncode:
        raise RuntimeError(f"stage code hashes in {tree}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _render_hash(tree: Path, chapter: str, env: dict) -> str:
    """The chapter's code hash with its notebook in ``tree`` (what a results file's provenance
    records), computed by that tree's own code."""
    code = ("import json\nfrom pathlib import Path\nfrom symlib.book import provenance\n"
            f"package = provenance.package_of_chapter({chapter!r})\n"
            f"print(json.dumps(provenance.code_hash(package, Path({str(tree / 'notebooks' / (chapter + '.md'))!r}))))")
    out = _run(tree, ["-c", code], env)
    if out.returncode:
        raise RuntimeError(f"render code hash in {tree}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def prove(chapter: str, old_rev: str, new_rev: str = "HEAD", *, profiles=PROFILES, seed: int = 0,
          register: bool = True, render: bool = False) -> dict:
    """Compute ``chapter``'s stages under both commits in ``profiles`` and compare every entry;
    register the stage hashes as equivalent where all are identical. With ``render``, also render
    the chapter under each code from the new side's cache (the new code twice) and compare the results files
    (:func:`compare_renders`); where they agree, register the chapter's ``#render`` hash too.
    Returns what was compared."""
    _TIMINGS_SEEN.clear()
    with tempfile.TemporaryDirectory(prefix="symlib-same-") as tmp:
        tmp = Path(tmp)
        old_commit, new_commit = _export(old_rev, tmp / "old"), _export(new_rev, tmp / "new")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SYMLIB_")}
        if "SYMLIB_DATA" in os.environ:
            env["SYMLIB_DATA"] = os.environ["SYMLIB_DATA"]
        n, diffs, aside = 0, [], {}
        # the hashes first: a tree that cannot hash fails before the computes, not after them
        old_hashes, new_hashes = _stage_hashes(tmp / "old", chapter, env), _stage_hashes(tmp / "new", chapter, env)
        if render:
            old_hashes[chapter + RENDER_SUFFIX] = _render_hash(tmp / "old", chapter, env)
            new_hashes[chapter + RENDER_SUFFIX] = _render_hash(tmp / "new", chapter, env)
        for profile in profiles:
            for side in ("old", "new"):
                side_env = {**env, "SYMLIB_CACHE": str(tmp / f"cache-{side}-{profile}"),
                            "SYMLIB_RESULTS": str(tmp / f"results-{side}-{profile}"),
                            "XDG_CACHE_HOME": str(tmp / f"xdg-{side}")}
                print(f"[symlib] {chapter}: computing the {profile} stages under the {side} code "
                      f"({(old_commit if side == 'old' else new_commit)[:12]}) ...", flush=True)
                out = _run(tmp / side, ["-m", "symlib.book.pipeline", "compute", "--profile", profile, "--seed",
                                        str(seed), "--device", "cpu", chapter], side_env)
                if out.returncode:
                    raise RuntimeError(f"{chapter} {profile} under the {side} code failed:\n{out.stderr[-3000:]}")
            count, found, _ = compare_caches(tmp / f"cache-old-{profile}", tmp / f"cache-new-{profile}", chapter)
            n += count
            diffs += [f"{profile}: {d}" for d in found]
            if render:
                for side, name in (("old", "old"), ("new", "new"), ("new", "again")):
                    # every render reads the new side's cache (a re-render serves entries of any
                    # code): the entries are proven identical but for timings, which each side
                    # measured on its own; so only the rendering code can tell the renders apart
                    side_env = {**env, "SYMLIB_CACHE": str(tmp / f"cache-new-{profile}"),
                                "SYMLIB_RESULTS": str(tmp / f"rendered-{name}-{profile}"),
                                "SYMLIB_EXECUTED": str(tmp / f"executed-{name}-{profile}"),
                                "XDG_CACHE_HOME": str(tmp / f"xdg-{side}")}
                    print(f"[symlib] {chapter}: rendering the {profile} run under the {side} code"
                          f"{' again' if name == 'again' else ''} ...", flush=True)
                    out = _run(tmp / side, ["-m", "symlib.book.pipeline", "execute", "--cached-only", "--profile",
                                            profile, "--seed", str(seed), "--device", "cpu", chapter], side_env)
                    if out.returncode:
                        raise RuntimeError(f"rendering {chapter} {profile} under the {side} code failed:\n"
                                           f"{out.stderr[-3000:]}")
                found, unsteady = compare_renders(*(tmp / f"rendered-{name}-{profile}" / f"{chapter}.json"
                                                    for name in ("old", "new", "again")))
                diffs += [f"{profile} render: {d}" for d in found]
                aside[profile] = unsteady
    result = {"chapter": chapter, "from": old_commit, "to": new_commit, "profiles": list(profiles),
              "entries compared": n, "timings set aside": sorted(_TIMINGS_SEEN), "differences": diffs,
              "registered": []}
    if render:
        result["rendered values set aside"] = {p: len(v) for p, v in aside.items()}
    if diffs or n == 0 or not register:
        return result
    evidence = (f"{chapter}: every stage computed under the code of {old_commit[:12]} and of {new_commit[:12]} in "
                f"profiles {', '.join(profiles)} (seed {seed}, CPU, {platform.machine()} Linux, torch {torch.__version__}); "
                f"all {n} cache entries identical (every tensor, array and number equal; wall-clock timings set "
                f"aside: {', '.join(sorted(_TIMINGS_SEEN)) or 'none'})")
    if render:
        shown = sorted({d for v in aside.values() for d in v})
        evidence += (f"; the chapter rendered by each code from one cache in the same profiles, results files identical "
                     f"(provenance aside) but for {sum(map(len, aside.values()))} values in which two renders of the "
                     f"new code differ too ({', '.join(shown[:6]) + (' ...' if len(shown) > 6 else '') or 'none'})")
    pairs = [(x, old_hashes[x], new_hashes[x]) for x in sorted(new_hashes) if x in old_hashes]
    result["registered"] = equivalence.add(pairs, evidence)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m symlib.book.same_numbers", description=__doc__.splitlines()[0])
    p.add_argument("chapter")
    p.add_argument("--from", dest="old", required=True, metavar="REV", help="the commit whose numbers are kept")
    p.add_argument("--to", dest="new", default="HEAD", metavar="REV", help="the new code (default HEAD)")
    p.add_argument("--profiles", nargs="+", default=list(PROFILES))
    p.add_argument("--dry-run", action="store_true", help="compare only; register nothing")
    p.add_argument("--render", action="store_true",
                   help="also render the chapter under both codes and, where the results agree, register its "
                        "code hash with its notebook (a published record of the old code stays current)")
    args = p.parse_args(argv)
    if args.chapter not in CHAPTERS:
        p.error(f"unknown chapter {args.chapter!r}; valid chapters: {', '.join(sorted(CHAPTERS))}")
    try:
        result = prove(args.chapter, args.old, args.new, profiles=tuple(args.profiles), register=not args.dry_run,
                       render=args.render)
    except (ValueError, RuntimeError) as err:
        print(f"[symlib] {err}", file=sys.stderr)
        return 1
    print(json.dumps({k: v for k, v in result.items() if k != "registered"}, indent=1))
    if result["differences"]:
        print(f"[symlib] {args.chapter}: the two codes compute different numbers; nothing registered", file=sys.stderr)
        return 1
    print(f"[symlib] {args.chapter}: {result['entries compared']} entries identical; "
          f"{len(result['registered'])} equivalences registered in {equivalence.registry_path()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
