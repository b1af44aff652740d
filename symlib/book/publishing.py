"""Publishing runs: what writes ``published/<tier>/``, the records the book reads
(:mod:`symlib.book.published`).

- :func:`publish` copies a finished run of a tier (its results file and the figures of its
  executed notebook) to ``published/<tier>/``, with the account of where its numbers were
  computed (device, commit, compute time, and from the pieces file how many pieces and minutes
  its latest complete run took; a run re-rendered from the cache takes it from the record it
  replaces or from the pieces file);
- :func:`record_progress` and :func:`record_lost` keep the account of a run still in pieces, or
  of one that lost its state, under ``published/<tier>/progress/``;
- :func:`rehash` re-expresses current records under this version's hash scheme, and
  :func:`seal` writes the integrity digest into records that carry none.

Every record is written whole, sealed with its digest
(:func:`~symlib.book.published.integrity`). The command line is :mod:`symlib.book.records`;
the notebook executor (:mod:`symlib.book.pipeline`) reads glued outputs with :func:`glue_key`.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from symlib.book import pieces
from symlib.book.codehash import (
    HASH_SCHEME,
    chapter_package_dir,
    code_hash,
    combined_code_hash,
    declared,
    stage_code_hash,
    stage_experiments,
)
from symlib.book.equivalence import equivalent, joined
from symlib.book.paths import executed_dir
from symlib.book.published import (
    INTEGRITY,
    TIER,
    TIERS,
    chains_path,
    check_tier,
    damage,
    integrity,
    load,
    lost_path,
    notebook_of,
    progress_path,
    published_dir,
    scheme_of,
    staleness,
    write_chains,
)
from symlib.book.results import results_dir

__all__ = ["glue_key", "publish", "record_lost", "record_progress", "rehash", "rehashed", "seal"]

MAX_FIGURE_BYTES = 2_000_000
"""Figures larger than this are not published (the repository keeps only small files)."""


def publish(chapter: str, *, tier: str = TIER, source: Path | None = None, executed: Path | None = None,
            dest: Path | None = None) -> Path:
    """Copy the finished ``tier`` run of ``chapter`` (results file and figures) to ``dest``
    (default ``published/<tier>/``), with the account of where its numbers were computed: device,
    commit, compute time and, from the chapter's pieces file (:mod:`symlib.book.pieces`), how
    many pieces and minutes of compute its latest complete run took.

    Raises:
        FileNotFoundError: no results file for the chapter.
        ValueError: an unknown tier; the results file is not of a ``tier`` run, or has no provenance.
    """
    check_tier(tier)
    source = Path(source) if source is not None else results_dir()
    executed = Path(executed) if executed is not None else executed_dir()
    dest = Path(dest) if dest is not None else published_dir(tier)
    path = source / f"{chapter}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no results file {path}: run `make chapter CHAPTER={chapter} PROFILE={tier}` first")
    record = json.loads(path.read_text())
    if record.get("profile") != tier:
        raise ValueError(f"{path} is a {record.get('profile')!r} run; only `{tier}` runs are published as {tier}")
    if not record.get("provenance"):
        raise ValueError(f"{path} has no provenance (made by an older version): rerun the chapter")
    record = rehashed(record)
    record["computed"] = _computed(record, load(chapter, dest), path)
    record["published"] = datetime.now(UTC).isoformat(timespec="seconds")
    dest.mkdir(parents=True, exist_ok=True)
    figures = dest / chapter
    shutil.rmtree(figures, ignore_errors=True)
    record["figures"], record["figure_names"] = _extract_figures(executed / f"{chapter}.ipynb", figures)
    out = _write(dest / f"{chapter}.json", record)
    _drop_finished_progress(chapter, tier, dest / "progress", record["computed"])
    return out


def _drop_finished_progress(chapter: str, tier: str, folder: Path, computed: dict | None = None) -> None:
    """Remove ``chapter``'s progress file (and its samplers' file) from ``folder`` once the run it
    accounts for is no longer in progress: its last piece completed it, or every piece it lists
    started no later than the last piece of ``computed`` (the account of the record just
    published: the file is an earlier copy of that run's pieces, recorded before its last piece).
    The record just published now speaks for that run. A run still in progress (a re-render
    published while a new run goes on) keeps its file."""
    path = folder / f"{chapter}.json"
    if not path.is_file():
        return
    entries = json.loads(path.read_text())
    last = ((computed or {}).get("pieces") or {}).get("last")
    covered = bool(last) and bool(entries) and all(str(e.get("started", "")) <= last for e in entries)
    if covered or pieces.in_progress(entries, tier) is None:
        path.unlink()
        (folder / f"{chapter}.chains.json").unlink(missing_ok=True)


def _write(out: Path, record: dict) -> Path:
    """Write a published record whole or not at all (a temporary file, then a rename), sealed
    with its :func:`~symlib.book.published.integrity` digest."""
    record = {**record, INTEGRITY: integrity(record, out.parent / out.stem)}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, allow_nan=False))
    tmp.replace(out)
    return out


def rehash(chapters=None, tiers=None, dest_root: Path | None = None) -> list[tuple[str, str, str]]:
    """Re-express the published records of ``chapters`` (default all) in ``tiers`` (default both)
    under this version's :data:`HASH_SCHEME`, in place, where :func:`rehashed` may (the record is
    current under the scheme it was written with). Nothing is computed or rendered: a finished
    `paper` run, whose cache is gone, keeps its numbers and gains the new scheme's hashes.

    Returns:
        ``(chapter, tier, what happened)`` for every record found.
    """
    done = []
    for tier in tiers or TIERS:
        folder = Path(dest_root) / check_tier(tier) if dest_root is not None else published_dir(tier)
        for path in sorted(folder.glob("*.json")):
            if chapters and path.stem not in chapters:
                continue
            try:
                record = json.loads(path.read_text())
            except (ValueError, UnicodeDecodeError) as err:
                raise ValueError(f"published record {path} is not valid JSON ({err}); restore it from git "
                                 "(`git checkout -- FILE`) or publish the run again") from None
            # a record sealed and then changed is not re-sealed by a rehash
            if record.get(INTEGRITY) and (why := damage(record, path.parent / path.stem)):
                done.append((path.stem, tier, f"left: {why}"))
                continue
            old = scheme_of(record.get("provenance") or {})
            new = rehashed(record)
            if new is not record:
                _write(path, new)
                done.append((path.stem, tier, f"rehashed: scheme {old} -> {HASH_SCHEME}"))
            elif old >= HASH_SCHEME:
                done.append((path.stem, tier, f"already scheme {old}"))
            else:
                done.append((path.stem, tier, (f"left at scheme {old}: not current, so not rehashed "
                                              "(re-run or re-render it and publish)")))
    return done


def rehashed(record: dict, notebook: Path | None = None) -> dict:
    """``record`` with its code hashes re-expressed under this version's :data:`HASH_SCHEME`,
    when it was written under an older one and is current under that one (:func:`~symlib.book.published.staleness` is
    empty: the code that computed it is this code, so both schemes describe the same files). The
    old scheme and hash are kept under ``provenance.rehashed_from``. A stale record, or one of
    a chapter that declares no `full` profile, is returned unchanged: it stays stale."""
    prov = record.get("provenance") or {}
    old = scheme_of(prov)
    chapter = declared(record.get("chapter", ""))
    profile = chapter.profiles.get(record.get("profile", TIER)) if chapter is not None else None
    if old >= HASH_SCHEME or profile is None or staleness(record, profile, notebook):
        return record
    notebook = notebook_of(record, notebook)
    new_prov = dict(prov, hash_scheme=HASH_SCHEME,
                    code_hash=code_hash(chapter_package_dir(profile), notebook),
                    rehashed_from={"hash_scheme": old, "code_hash": prov.get("code_hash")})
    groups = prov.get("computed_with")
    if isinstance(groups, list):
        new_prov["computed_with"] = [part for g in groups for part in _rehashed_group(g, record["chapter"])]
    return dict(record, provenance=new_prov)


def _rehashed_group(group, chapter: str) -> list:
    """A ``computed_with`` group under this scheme's stage code hashes: one group per distinct hash
    its stages have now (a stage may declare its own code); left as it is without a code hash."""
    if not isinstance(group, dict) or not group.get("code_hash"):
        return [group]
    stages = group.get("stages") or []
    if not stages:
        return [dict(group, code_hash=stage_code_hash(chapter))]
    by_hash: dict[str, list[str]] = {}
    for stage in stages:
        by_hash.setdefault(stage_code_hash(stage), []).append(stage)
    if len(by_hash) == 1:
        return [dict(group, code_hash=next(iter(by_hash)))]
    return [dict(group, code_hash=h, stages=sorted(names), entries=None) for h, names in sorted(by_hash.items())]


def _computed(record: dict, previous: dict | None, path: Path) -> dict:
    """Where and when a record's numbers were computed. A run that computed them says so itself
    (its device, commit, code hash and wall time; stages it found cached count as zero). A run
    re-rendered from the cache (``pipeline execute --cached-only``: a GPU run's pages made on a
    machine without one, or a finished run's pages after a change of layout) computed nothing,
    so the account is carried over from the record it replaces when that one's numbers came from
    the same stage code (unless the pieces file holds a complete run of that code newer than the
    account: the same code run again, whose cache was rendered), and otherwise taken from the
    pieces file's latest complete run of that code (the run that computed the cache it was
    rendered from).

    Raises:
        ValueError: a re-rendered run with no earlier published record to take the account from.
    """
    log = pieces.read(record["chapter"], path.parent)
    # what its pieces may have recorded
    mine = _stage_hashes(record) | _combined_hashes(record) | _pieces_of_equivalent_code(log, record)
    if not record.get("rendered_from_cache"):
        prov = record.get("provenance") or {}
        torch_version = (record.get("versions") or {}).get("torch")
        computed = {"device": f"{record.get('device')}" + (f" (torch {torch_version})" if torch_version else ""),
                    "commit": prov.get("commit"), "code_hash": prov.get("code_hash"),
                    "compute_time": f"{record.get('wall_time_s', 0):.0f} s"}
        run = pieces.account(log, record.get("profile", TIER), mine)
        if run is not None:
            computed["pieces"] = run
        return computed
    profile = record.get("profile", TIER)
    complete = [e for e in log if e.get("profile") == profile and e.get("outcome") == "complete"]
    logged = bool(complete) and complete[-1].get("code_hash") in mine
    run = pieces.account(log, profile, mine) if logged else None
    if (previous or {}).get("computed") and _same_stage_code(record, previous):
        stored = previous["computed"].get("pieces") or {}
        before, started = stored.get("last") or "", str(complete[-1].get("started", "")) if logged else ""
        # the same run, whose pieces the log here holds at least all of: its account counted afresh
        # (the stored one may predate a correction of the counting); else the stored account
        same_run = logged and started == before and run["pieces"] >= stored.get("pieces", 0)
        if not (logged and started > before) and not same_run:
            return previous["computed"]
        # or the same code computed again since the account was written (another checkout's run,
        # its cache brought here): the cache holds that run's numbers, so its account is theirs
    if logged:
        return {"device": complete[-1].get("device"), "commit": complete[-1].get("commit"),
                "code_hash": (record.get("provenance") or {}).get("code_hash"),
                "compute_time": f"{run['seconds']:.0f} s", "pieces": run}
    raise ValueError(f"{path} was re-rendered from the cache (--cached-only) and neither an earlier published record "
                     "of the same code nor the pieces file says where its numbers were computed: publish the run "
                     "that computed them first")


def _stage_hashes(record: dict) -> set:
    """The stage code hashes a record's numbers were computed with (``provenance.computed_with``)."""
    groups = (record.get("provenance") or {}).get("computed_with")
    return {g.get("code_hash") for g in groups if isinstance(g, dict) and g.get("code_hash")} \
        if isinstance(groups, list) else set()


def _stage_code(record: dict) -> dict[str, str]:
    """``{stage experiment: code hash}`` of a record's ``provenance.computed_with``."""
    groups = (record.get("provenance") or {}).get("computed_with")
    return {stage: g["code_hash"] for g in groups or [] if isinstance(g, dict) and g.get("code_hash")
            for stage in g.get("stages") or []}


def _same_stage_code(record: dict, previous: dict) -> bool:
    """Whether two records' numbers were computed by the same stage code: the same stages, each
    with the same hash or hashes the registry of equivalences joins (a record re-rendered from
    entries of an older hash scheme names their hashes; the record it replaces, rehashed, the
    new scheme's)."""
    a, b = _stage_code(record), _stage_code(previous)
    if not a or a.keys() != b.keys():
        return _stage_hashes(record) == _stage_hashes(previous)
    return all(equivalent(stage, a[stage], b[stage]) for stage in a)


def _pieces_of_equivalent_code(log: list[dict], record: dict) -> set[str]:
    """The compute code hashes of the pieces in ``log`` that recorded their stages' code hashes
    (``stage_hashes``, :func:`symlib.book.pieces.log_piece`) and ran code that computes
    ``record``'s numbers: every stage at the record's hash for it, or one the registry of
    equivalences joins to it (a stage the record names no entry of, as it caches nothing: this
    checkout's). Pieces logged before stage hashes were recorded are matched by
    :func:`_combined_hashes`."""
    parts, chapter = _stage_code(record), record.get("chapter")
    if not parts or not isinstance(chapter, str):
        return set()
    experiments = set(stage_experiments(chapter))
    out = set()
    for e in log:
        stages = e.get("stage_hashes")
        if not isinstance(stages, dict) or set(stages) != experiments or not e.get("code_hash"):
            continue
        if all(equivalent(s, h, parts.get(s) or stage_code_hash(s)) for s, h in stages.items()):
            out.add(e["code_hash"])
    return out


def _combined_hashes(record: dict, limit: int = 4096) -> set[str]:
    """The compute code hashes (:func:`_combined_hash`) a run's pieces may have recorded for the code
    that computed ``record``: each stage counts with any hash the registry of equivalences joins to
    its recorded hash, or, for a stage the record names no entry of (it caches nothing), to its hash
    in this checkout. A run in pieces may compute some entries under one stage code and the rest
    under code proven equivalent (an entry then names the older hash while the last piece recorded
    this checkout's), and the run that computed the entries may have hashed a stage under an older
    scheme, or before a proven move. Each stage's options start with this checkout's hash, so the
    combination of this checkout's code comes first, within ``limit``."""
    parts = _stage_code(record)
    chapter = record.get("chapter")
    if not parts or not isinstance(chapter, str):
        return set()
    experiments = stage_experiments(chapter)
    missing = [e for e in experiments if e not in parts]
    out = set()
    # the stages the record names at their recorded hashes; the others at any joined to this checkout's
    for combo in itertools.islice(itertools.product(*(sorted(joined(e, stage_code_hash(e))) for e in missing)), limit):
        out.add(combined_code_hash({**parts, **dict(zip(missing, combo, strict=True))}))
    # every stage at any hash joined to its recorded one (this checkout's first, where joined)
    options = []
    for e in experiments:
        now, recorded = stage_code_hash(e), parts.get(e, stage_code_hash(e))
        hashes = joined(e, recorded)
        first = now if now in hashes else recorded
        options.append([first, *sorted(hashes - {first})])
    for combo in itertools.islice(itertools.product(*options), limit):
        out.add(combined_code_hash({**parts, **dict(zip(experiments, combo, strict=True))}))
    # stages that share one hash move together (one module set): each group at any hash joined to
    # its own, so that a piece of code older for every stage is found among a few combinations
    groups: dict[str, list[str]] = {}
    for e in experiments:
        groups.setdefault(parts.get(e, stage_code_hash(e)), []).append(e)
    names = list(groups)
    for combo in itertools.islice(itertools.product(*(sorted(joined(groups[h][0], h)) for h in names)), limit):
        out.add(combined_code_hash({**parts, **{e: c for h, c in zip(names, combo, strict=True) for e in groups[h]}}))
    return out


def _combined_hash(record: dict) -> str | None:
    """The compute code hash a run's pieces record, from its stages' code hashes, for a chapter
    whose stages declare their code (:func:`symlib.book.provenance.combined_code_hash`).

    The record names the stages it read entries of; a stage that caches nothing (chapter 4's
    ``compile``, ``boston`` and ``robust``, which gather or compile) is in no group, and counts
    with this checkout's code hash: the pieces' hash then matches only if that stage's code is
    unchanged since the run too."""
    groups = (record.get("provenance") or {}).get("computed_with")
    parts = {s: g["code_hash"] for g in groups or [] if isinstance(g, dict) and g.get("code_hash")
             for s in g.get("stages") or []}
    if not parts:
        return None
    chapter = record.get("chapter")
    for experiment in stage_experiments(chapter) if isinstance(chapter, str) else []:
        parts.setdefault(experiment, stage_code_hash(experiment))
    return combined_code_hash(parts)


def glue_key(output: dict) -> str | None:
    """The key a notebook output was glued under (``myst_nb.glue``), or None for an output not glued."""
    return ((output.get("metadata") or {}).get("scrapbook") or {}).get("name")


def _extract_figures(notebook: Path, folder: Path) -> tuple[list[str], dict[str, str]]:
    """Write the PNG outputs of an executed notebook as ``figure-<n>.png``: their file names, and
    the glue key -> file name of those glued under a key (the figures the page numbers, which
    a build of another profile can show in front: :func:`symlib.book.tables.front_figure`)."""
    if not notebook.is_file():
        return [], {}
    names, glued = [], {}
    for cell in json.loads(notebook.read_text()).get("cells", []):
        for output in cell.get("outputs", []):
            bundle = output.get("data", {})
            # glued figures (myst_nb.glue, display=False) are stored under papermill's record type
            data = bundle.get("image/png") or bundle.get("application/papermill.record/image/png")
            if not data:
                continue
            raw = base64.b64decode(data if isinstance(data, str) else "".join(data))
            if len(raw) > MAX_FIGURE_BYTES:
                continue
            folder.mkdir(parents=True, exist_ok=True)
            name = f"figure-{len(names) + 1}.png"
            (folder / name).write_bytes(raw)
            names.append(name)
            if key := glue_key(output):
                glued[key] = name
    return names, glued


def seal(tiers=None, dest_root: Path | None = None) -> list[tuple[str, str, str]]:
    """Write the integrity digest into published records that carry none (records published
    before records were sealed); a sealed record is left as it is, checked."""
    done = []
    for tier in tiers or TIERS:
        folder = Path(dest_root) / check_tier(tier) if dest_root is not None else published_dir(tier)
        for path in sorted(folder.glob("*.json")):
            record = json.loads(path.read_text())
            if record.get(INTEGRITY):
                why = damage(record, path.parent / path.stem)
                done.append((path.stem, tier, f"damaged: {why}" if why else "sealed already, intact"))
                continue
            _write(path, record)
            done.append((path.stem, tier, "sealed"))
    return done


def record_progress(chapter: str, pieces_file: Path, *, tier: str = "paper") -> Path:
    """Copy a run's pieces file to :func:`~symlib.book.published.progress_path` (what ``tools/longruns/gpu_piece.sh keep``
    does after each GPU piece).

    Raises:
        ValueError: the file holds no piece of ``tier``'s profile, or is not a pieces file.
    """
    try:
        entries = json.loads(Path(pieces_file).read_text())
    except ValueError:
        entries = None
    if not isinstance(entries, list) or not any(isinstance(e, dict) and e.get("profile") == tier for e in entries):
        raise ValueError(f"{pieces_file} holds no piece of the `{tier}` profile of {chapter}")
    out = progress_path(chapter, tier)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(entries, indent=1) + "\n")
    return out


def record_lost(chapter: str, why: str, *, tier: str = "paper", when: datetime | None = None) -> Path:
    """Record that ``chapter``'s ``tier`` run in progress lost its state (the machine that held its
    checkpoints was replaced, say): its account (:func:`symlib.book.pieces.in_progress` of the
    progress file, and how far each sampler got) moves to :func:`~symlib.book.published.lost_path`, with ``why``, and the
    progress files are removed, since nothing can continue from them; the next piece starts the
    run again. Returns :func:`~symlib.book.published.lost_path`.

    Raises:
        ValueError: no run in progress is recorded for ``chapter``, or ``why`` is empty.
    """
    if not why.strip():
        raise ValueError("say why the state was lost (--why)")
    path = progress_path(chapter, tier)
    run = pieces.in_progress(json.loads(path.read_text()), tier) if path.is_file() else None
    if run is None:
        raise ValueError(f"no `{tier}` run of {chapter} in progress is recorded in {path}")
    chains = chains_path(chapter, tier)
    record = {"recorded": (when or datetime.now(UTC)).isoformat(timespec="seconds"), "why": why.strip(),
              **{k: run[k] for k in ("pieces", "seconds", "minutes", "devices", "first", "last", "commit", "code_hash",
                                     "note")},
              "chains": json.loads(chains.read_text()) if chains.is_file() else []}
    out = lost_path(chapter, tier)
    earlier = json.loads(out.read_text()) if out.is_file() else []
    write_chains(out, [*earlier, record])
    path.unlink()
    chains.unlink(missing_ok=True)
    return out
