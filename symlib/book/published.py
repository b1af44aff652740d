"""Published runs: the converged numbers shown in the book beside the quick build's.

``published/<tier>/<chapter>.json`` is the results file of the latest run of a chapter in that
tier (:data:`TIERS`: ``full``, the data that ships here on two CPU cores; ``paper``, the papers'
budgets on one GPU, in pieces): tables, claims with preconditions, robustness, wall time,
device, commit, profile and code hashes, and how many pieces and minutes of compute the run took.
``published/<tier>/<chapter>/`` holds the figures that run drew (PNG, taken from the executed
notebook). Only :func:`publish` writes there (``make publish CHAPTER=...``); the book reads it,
puts the most converged tier in front (:func:`records`), marks a record whose profile or code
changed since (:func:`staleness`) and never fails on that.

Its command line is :mod:`symlib.book.records` (``python -m symlib.book.records publish ...``).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import shutil
import warnings
from datetime import UTC, datetime
from pathlib import Path

from symlib.book import pieces
from symlib.book.codehash import (
    HASH_SCHEME,
    chapter_package_dir,
    code_current,
    code_hash,
    combined_code_hash,
    compute_code_hash,
    declared,
    profile_hash,
    stage_code_hash,
    stage_experiments,
    stale_code_groups,
)
from symlib.book.equivalence import equivalent, joined
from symlib.book.ledger import COLUMNS, column_outcome
from symlib.book.paths import executed_dir, project_root_or_cwd
from symlib.book.pieces import in_progress
from symlib.book.results import outcome, results_dir
from symlib.data import data_hash

__all__ = ["INTEGRITY", "TIER", "TIERS", "DamagedRecordWarning", "chains_path", "damage", "glue_key", "integrity", "load", "lost_path", "pieces_minutes", "progress_path",
           "progress_summary", "publish", "published_dir", "record_lost", "record_progress", "records", "rehash", "rehashed", "restarted", "seal", "staleness",
           "tier_summary", "verdicts_by_tier", "write_chains"]

TIER = "full"
"""The tier published by default: the data that ships here, sized for two CPU cores."""
TIERS = ("full", "paper")
"""The tiers published, least converged first: ``paper`` is the papers' models, budgets and
protocols, run on one GPU in pieces (``published/paper/``)."""
MAX_FIGURE_BYTES = 2_000_000
"""Figures larger than this are not published (the repository keeps only small files)."""


def _check_tier(tier: str) -> str:
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}; got {tier!r}")
    return tier


def published_dir(tier: str = TIER) -> Path:
    """``published/<tier>/`` in the book's checkout (default ``published/full/``)."""
    return project_root_or_cwd() / "published" / _check_tier(tier)


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
    _check_tier(tier)
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
    return _write(dest / f"{chapter}.json", record)


def _write(out: Path, record: dict) -> Path:
    """Write a published record whole or not at all (a temporary file, then a rename), sealed
    with its :func:`integrity` digest."""
    record = {**record, INTEGRITY: integrity(record, out.parent / out.stem)}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, allow_nan=False))
    tmp.replace(out)
    return out


INTEGRITY = "integrity"
"""The field of a published record holding the digest of what it asserts (:func:`integrity`)."""


def integrity(record: dict, figures: Path | None = None) -> str:
    """The SHA-256 of everything a published record asserts: every field but this digest (its
    tables, claims and verdicts, errata, robustness, profile values and provenance) and the
    bytes of each figure it names (in ``figures``, its folder beside the record). Written by
    every writer (:func:`_write`), checked by every reader (:func:`damage`)."""
    h = hashlib.sha256()
    body = {k: v for k, v in record.items() if k != INTEGRITY}
    h.update(json.dumps(body, sort_keys=True, allow_nan=False, separators=(",", ":")).encode())
    for name in record.get("figures") or []:
        path = Path(figures) / name if figures is not None else None
        h.update(name.encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest() if path is not None and path.is_file() else b"missing")
    return h.hexdigest()


def damage(record: dict, figures: Path | None = None) -> str:
    """Why a published record fails its integrity check (``""`` when it passes): no digest, or
    one that does not match what the record now asserts (a changed number or verdict, a bad
    merge, a replaced figure)."""
    recorded = record.get(INTEGRITY)
    if not recorded:
        return "it carries no integrity digest (written before records were sealed, or edited by hand)"
    if recorded != integrity(record, figures):
        return ("its integrity digest does not match what it asserts: a table, claim, verdict, profile value or "
                "figure was changed after it was published (restore it from git, or publish the run again)")
    return ""


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
        folder = Path(dest_root) / _check_tier(tier) if dest_root is not None else published_dir(tier)
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
            old = _scheme(record.get("provenance") or {})
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


def records(chapter: str, tiers=None) -> dict[str, dict]:
    """Every published record of ``chapter`` (of ``tiers``, default all), most converged first
    (``paper`` before ``full``): the first is the run whose numbers a page puts in front."""
    found = {}
    for tier in tiers or reversed(TIERS):
        record = load(chapter, tier=tier)
        if record is not None:
            found[tier] = record
    return found


def _scheme(prov: dict) -> int:
    """The hash scheme a record's provenance ``prov`` was written under: 1 for records from before
    the field (they hashed the whole library)."""
    return prov.get("hash_scheme", 1)


def _notebook(record: dict, notebook: Path | None) -> Path:
    """``notebook``, or by default the record's chapter's ``notebooks/<chapter>.md`` in the checkout."""
    return notebook if notebook is not None else project_root_or_cwd() / "notebooks" / f"{record['chapter']}.md"


def rehashed(record: dict, notebook: Path | None = None) -> dict:
    """``record`` with its code hashes re-expressed under this version's :data:`HASH_SCHEME`,
    when it was written under an older one and is current under that one (:func:`staleness` is
    empty: the code that computed it is this code, so both schemes describe the same files). The
    old scheme and hash are kept under ``provenance.rehashed_from``. A stale record, or one of
    a chapter that declares no `full` profile, is returned unchanged: it stays stale."""
    prov = record.get("provenance") or {}
    old = _scheme(prov)
    chapter = declared(record.get("chapter", ""))
    profile = chapter.profiles.get(record.get("profile", TIER)) if chapter is not None else None
    if old >= HASH_SCHEME or profile is None or staleness(record, profile, notebook):
        return record
    notebook = _notebook(record, notebook)
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
    the same stage code, and otherwise taken from the pieces file's latest complete run of that
    code (the run that computed the cache it was rendered from).

    Raises:
        ValueError: a re-rendered run with no earlier published record to take the account from.
    """
    if not record.get("rendered_from_cache"):
        prov = record.get("provenance") or {}
        torch_version = (record.get("versions") or {}).get("torch")
        computed = {"device": f"{record.get('device')}" + (f" (torch {torch_version})" if torch_version else ""),
                    "commit": prov.get("commit"), "code_hash": prov.get("code_hash"),
                    "compute_time": f"{record.get('wall_time_s', 0):.0f} s"}
        run = pieces.account(pieces.read(record["chapter"], path.parent), record.get("profile", TIER))
        if run is not None:
            computed["pieces"] = run
        return computed
    mine = _stage_hashes(record)
    if (previous or {}).get("computed") and _same_stage_code(record, previous):
        return previous["computed"]
    profile = record.get("profile", TIER)
    log = pieces.read(record["chapter"], path.parent)
    complete = [e for e in log if e.get("profile") == profile and e.get("outcome") == "complete"]
    if complete and complete[-1].get("code_hash") in mine | _combined_hashes(record):
        run = pieces.account(log, profile)
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


def _combined_hashes(record: dict, limit: int = 4096) -> set[str]:
    """The compute code hashes (:func:`_combined_hash`) a run's pieces may have recorded for the code
    that computed ``record``: a stage the record names no entry of (it caches nothing) counts with
    any hash the registry of equivalences joins to its hash in this checkout (the run that computed
    the entries may have hashed it under an older scheme, or before a proven move)."""
    parts = _stage_code(record)
    chapter = record.get("chapter")
    if not parts or not isinstance(chapter, str):
        return set()
    missing = [e for e in stage_experiments(chapter) if e not in parts]
    options = [sorted(joined(e, stage_code_hash(e))) for e in missing]
    out = set()
    for combo in itertools.islice(itertools.product(*options), limit):
        out.add(combined_code_hash({**parts, **dict(zip(missing, combo, strict=True))}))
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


def load(chapter: str, directory: Path | None = None, *, tier: str = TIER) -> dict | None:
    """The published ``tier`` record of ``chapter`` (from ``directory``, default
    ``published/<tier>/``), or None.

    Raises:
        ValueError: the file is not valid JSON (e.g. cut short, or a merge conflict left in it);
            the message names the file and how to restore it.
    """
    path = (Path(directory) if directory is not None else published_dir(tier)) / f"{chapter}.json"
    if not path.is_file():
        return None
    fix = (f"restore it (`git checkout -- {path.name}` in {path.parent}) or republish: "
           f"`make publish CHAPTER={chapter}{'' if tier == TIER else f' TIER={tier}'}`")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError is a ValueError
        raise ValueError(f"published record {path} is not valid JSON ({err}); {fix}") from None
    if why := damage(record, path.parent / chapter):
        warnings.warn(f"published record {path} is damaged: {why}", DamagedRecordWarning, stacklevel=2)
        record["damaged"] = why
    return record


class DamagedRecordWarning(UserWarning):
    """A published record failed its integrity check (:func:`damage`): it is shown as damaged."""


def seal(tiers=None, dest_root: Path | None = None) -> list[tuple[str, str, str]]:
    """Write the integrity digest into published records that carry none (records published
    before records were sealed); a sealed record is left as it is, checked."""
    done = []
    for tier in tiers or TIERS:
        folder = Path(dest_root) / _check_tier(tier) if dest_root is not None else published_dir(tier)
        for path in sorted(folder.glob("*.json")):
            record = json.loads(path.read_text())
            if record.get(INTEGRITY):
                why = damage(record, path.parent / path.stem)
                done.append((path.stem, tier, f"damaged: {why}" if why else "sealed already, intact"))
                continue
            _write(path, record)
            done.append((path.stem, tier, "sealed"))
    return done


def staleness(record: dict, current_profile, notebook: Path | None = None) -> list[str]:
    """Why a published record no longer matches this version ([] when it does).

    Each record is compared under the hash scheme it was written with
    (:data:`symlib.book.provenance.HASH_SCHEME`). Two codes count: the one that rendered the record (``provenance.code_hash``, with the
    notebook) and the ones that computed its numbers (``provenance.computed_with``: the stage
    code and data hashes of the cache entries it was made from, which differ from the first
    when a re-render or ``SYMLIB_KEEP_STALE`` served entries computed earlier). Records older
    than ``computed_with``, and entries older than their hashes, say nothing about the second:
    they are judged by the first alone.

    Args:
        record: a published record (:func:`load`).
        current_profile: the chapter's `full` profile in this version (None: it has none).
        notebook: the chapter's notebook (default ``notebooks/<chapter>.md`` in the checkout).
    """
    prov = record.get("provenance") or {}
    if current_profile is None:
        return ["this version has no `full` profile for the chapter"]
    if record.get("damaged"):
        return [f"damaged: {record['damaged']}"]
    notebook = _notebook(record, notebook)
    reasons = []
    scheme = _scheme(prov)
    if prov.get("profile_hash") != profile_hash(current_profile):
        reasons.append("the `full` profile changed since")
    if not code_current(record["chapter"], prov.get("code_hash"), chapter_package_dir(current_profile), notebook, scheme):
        reasons.append("the code changed since")
    return reasons + _computed_with_reasons(record["chapter"], prov.get("computed_with"), scheme)


def _computed_with_reasons(chapter: str, groups, scheme: int = 1) -> list[str]:
    """Reasons from the code and data hashes a record's numbers were computed with (stage code
    hashes of the record's :data:`~symlib.book.provenance.HASH_SCHEME`)."""
    if not isinstance(groups, list):
        return []  # a record from before computed_with: unknown, not stale on that account
    data_now = data_hash()
    reasons = []
    code = [(g, now) for g, now in stale_code_groups(chapter, groups, scheme=scheme) if g.get("code_hash") is not None]
    data = [(g, data_now) for g in groups if isinstance(g, dict) and g.get("data_hash") not in (None, data_now)]
    for name, other in (("code", code), ("data", data)):
        if other:
            hashes = ", ".join(sorted({g[f"{name}_hash"] for g, _ in other}))
            nows = ", ".join(sorted({now for _, now in other}))
            # the chapter's row or page says whose stages these are: "boston_fits", not
            # "04_constrained_models-boston_fits" (a long unbreakable word widens a table's column)
            stages = ", ".join(sorted({n for g, _ in other for s in g.get("stages") or [] for n in _stage_names(chapter, s)}))
            reasons.append(f"its numbers were computed with other {name} (hash {hashes}; this version's "
                           f"{nows}) in {f'stages {stages}' if stages else 'some stages'}")
    return reasons


def _stage_names(chapter: str, experiment: str) -> list[str]:
    """The stages of ``chapter`` whose cache folder is ``experiment``: ``["main", "robustness"]``
    for chapter 1's ``01_ortho_skip``, which its stages share; else the folder's name less the
    chapter prefix (a stage this version no longer has, or a made-up chapter)."""
    spec = declared(chapter)
    names = [s.name for s in spec.stages if s.experiment_name(chapter) == experiment] if spec is not None else []
    return names or [experiment.removeprefix(f"{chapter}-")]


def _verdict(claim: dict) -> str:
    return claim.get("verdict") or outcome(claim["holds"])


def verdicts_by_tier(quick: dict | None, full: dict | None):
    """One row per claim: the paper's statement, this build's verdict and the published one."""
    import pandas as pd

    rows: dict[str, dict] = {}
    for tier, record in (("quick", quick), (TIER, full)):
        for c in (record or {}).get("claims", []):
            row = rows.setdefault(c["id"], {"claim": c["text"], "paper": c["paper"], "quick": "—", TIER: "—"})
            row[tier] = _verdict(c)
    return pd.DataFrame(list(rows.values()), columns=["claim", "paper", "quick", TIER])


def progress_path(chapter: str, tier: str = "paper") -> Path:
    """``published/<tier>/progress/<chapter>.json``: a copy of the pieces file of a run still in
    progress (:func:`symlib.book.pieces.in_progress`), so that the book says how far it got."""
    return published_dir(tier) / "progress" / f"{chapter}.json"


def record_progress(chapter: str, pieces_file: Path, *, tier: str = "paper") -> Path:
    """Copy a run's pieces file to :func:`progress_path` (what ``tools/longruns/gpu_piece.sh keep``
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


def chains_path(chapter: str, tier: str = "paper") -> Path:
    """``published/<tier>/progress/<chapter>.chains.json``: how far each sampler of a run in progress
    got, read from its checkpoints by the chapter's progress reader (chapter 5:
    :mod:`symlib.chapters.rebasin_hmc.progress`; chapter 6: :mod:`symlib.chapters.synthesis.progress`;
    ``tools/longruns/gpu_piece.sh keep`` runs it): a
    list of ``{run, chains, transitions, total, draws_per_chain, draws_target, rhat, bulk_ess,
    quantity, ...}``."""
    return published_dir(tier) / "progress" / f"{chapter}.chains.json"


def write_chains(out: str | Path, records: list[dict]) -> Path:
    """Write a progress reader's records (the layout :func:`chains_path` names) to ``out`` as a
    JSON list, making its folder."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(records, indent=1) + "\n")
    return out


def lost_path(chapter: str, tier: str = "paper") -> Path:
    """``published/<tier>/progress/<chapter>.lost.json``: the runs in progress whose state was lost
    (:func:`record_lost`), so that the book accounts for them and says the run starts again."""
    return published_dir(tier) / "progress" / f"{chapter}.lost.json"


def record_lost(chapter: str, why: str, *, tier: str = "paper", when: datetime | None = None) -> Path:
    """Record that ``chapter``'s ``tier`` run in progress lost its state (the machine that held its
    checkpoints was replaced, say): its account (:func:`symlib.book.pieces.in_progress` of the
    progress file, and how far each sampler got) moves to :func:`lost_path`, with ``why``, and the
    progress files are removed, since nothing can continue from them; the next piece starts the
    run again. Returns :func:`lost_path`.

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


def _run_dates(run: dict) -> str:
    """The days a run's pieces ran on: ``"2026-11-29"`` or ``"2026-11-28 to 2026-11-29"``."""
    return " to ".join(sorted({(run["first"] or "")[:10], (run["last"] or "")[:10]} - {""}))


def _run_compute(run: dict) -> str:
    """``"3 pieces, 11.9 minutes of device compute on cuda (NVIDIA H200)"``."""
    return (f"{run['pieces']} piece{'s' if run['pieces'] != 1 else ''}, "
            f"{pieces.minutes_phrase(run['minutes'], run['devices'])} on {', '.join(run['devices'])}")


def _lost_line(chapter: str, tier: str) -> str | None:
    """The runs whose state was lost, one clause each, or None."""
    path = lost_path(chapter, tier)
    if not path.is_file():
        return None
    clauses = []
    for r in json.loads(path.read_text()):
        clause = f"{_run_dates(r)}: {_run_compute(r)}"
        clause += "".join(f", {c['run']} run at {c['transitions']:,} of {c['total']:,} transitions" for c in r["chains"])
        clauses.append(f"{clause} ({r['why']})")
    n = len(clauses)
    return (f"the state of {'an earlier run' if n == 1 else f'{n} earlier runs'} was lost and is not counted: "
            + "; ".join(clauses))


def _chains_line(record: dict) -> str:
    """One sampler's progress: its length reached and, where computable, R-hat and ESS so far."""
    n = int(record["chains"])
    line = (f"{record['run']} run: {record['transitions']:,} of {record['total']:,} transitions, {n} chain"
            f"{'s' if n != 1 else ''}, {record['draws_per_chain']:,} of {record['draws_target']:,} draws kept")
    if record.get("rhat") is not None:
        line += (f", split R-hat of {record.get('quantity', 'the draws')} {record['rhat']:.3f}, bulk ESS "
                 f"{record['bulk_ess']:.0f} so far")
    return line


def progress_summary(chapter: str, tier: str = "paper") -> str | None:
    """A one-line account of ``chapter``'s ``tier`` run in progress (pieces, minutes of compute,
    devices, how far the latest piece got, and each sampler's length, R-hat and ESS so far where
    :func:`chains_path` records them), or None when none is recorded or it completed."""
    path = progress_path(chapter, tier)
    lost = _lost_line(chapter, tier)
    run = in_progress(json.loads(path.read_text()), tier) if path.is_file() else None
    if run is None:
        if lost and not path.is_file():   # nothing runs now: the next piece starts the run again
            return f"not running: {lost}; the next piece starts the run again"
        return None
    line = f"in progress: {_run_compute(run)} ({_run_dates(run)}), commit {(run['commit'] or '?')[:12]}"
    if run["note"]:
        line += f"; latest: {run['note'].split('; run again')[0]}"
    if (chains := chains_path(chapter, tier)).is_file():
        line += "".join(f"; {_chains_line(r)}" for r in json.loads(chains.read_text()))
    if _restarts(run, chapter):
        line += (" — from an older version of the code: its checkpoints are not continued, the next piece "
                 "starts the run again")
    return line + (f"; before it, {lost}" if lost else "")


def _restarts(run: dict, chapter: str) -> str | None:
    """This checkout's compute code hash of ``chapter`` where the run in progress ``run``
    (:func:`symlib.book.pieces.in_progress`) ran other code, so that its next piece starts it
    again; None where it continues (or its pieces recorded no code)."""
    if not run["code_hash"]:
        return None
    now = compute_code_hash(chapter)
    return now if now != run["code_hash"] else None


def restarted(tier: str = "paper") -> list[str]:
    """The runs in progress of ``tier`` (``published/<tier>/progress/``) that this checkout's code
    would start again: their latest pieces ran another compute code
    (:func:`~symlib.book.provenance.compute_code_hash`), so their checkpoints are not continued. One
    line each, saying how much compute that drops and how to record it where it is meant (the test
    suite fails on any: a GPU run goes over many pieces, and an edit of its code, a comment
    included, would silently throw its pieces away)."""
    found = []
    for path in sorted((published_dir(tier) / "progress").glob("*.json")):
        chapter = path.stem
        if "." in chapter:   # <chapter>.lost.json, <chapter>.chains.json
            continue
        run = pieces.in_progress(json.loads(path.read_text()), tier)
        if run is None or not (now := _restarts(run, chapter)):
            continue
        found.append(f"{chapter}: its {tier} run in progress ({_run_compute(run)}, {_run_dates(run)}) ran compute "
                     f"code {run['code_hash']}, this checkout's is {now}, so its next piece starts the run again. "
                     f"Undo the edit of the code that computes, or, where the restart is meant, record it: "
                     f"python -m symlib.book.records lost {chapter} --tier {tier} --why \"the code that computes "
                     f"changed: ...\"")
    return found


def pieces_minutes(record: dict) -> str | None:
    """How long a record computed in more than one piece took: ``"22 minutes of device compute"``,
    or ``"22 minutes"`` where only the CPU ran (:func:`symlib.book.pieces.minutes_phrase`); None for a
    run in one piece."""
    computed = record.get("computed") or {}
    run = computed.get("pieces") or {}
    if run.get("pieces", 1) <= 1:
        return None
    return pieces.minutes_phrase(run["minutes"], run.get("devices") or computed.get("device") or record.get("device"))


def tier_summary(record: dict | None, stale: list[str] | None = None) -> str:
    """A one-line account of a record: claims held / not / not judged, device, date, commit."""
    if record is None:
        return "not published"

    claims = [c for c in record["claims"] if c.get("kind", "claim") == "claim"]
    tallies = []
    for column in COLUMNS:
        got = [column_outcome(c, column) for c in claims]
        parts = [f"{got.count(o)} {word}" for o, word in (("holds", "hold"), ("does not hold", "do not"),
                                                         ("not judged", "not judged"), ("not recorded", "not recorded"))
                 if got.count(o) or o != "not recorded"]
        tallies.append(f"{column}: {', '.join(parts)}")
    computed = record.get("computed") or {}
    commit = (computed.get("commit") or (record.get("provenance") or {}).get("commit") or "unknown commit")[:12]
    took = computed.get("compute_time") or f"{record['wall_time_s']:.0f} s"
    if minutes := pieces_minutes(record):
        took = f"{minutes} in {computed['pieces']['pieces']} pieces"
    date = (record.get("published") or "")[:10]
    line = (f"{'; '.join(tallies)} (computed on {computed.get('device') or record['device']} in {took}, "
            f"commit {commit}{f'; published {date}' if date else ''})")
    return line + (f" — from an older version of the code: {'; '.join(stale)}" if stale else "")
