"""Published runs, as the book reads them: the converged numbers shown beside the quick build's.

``published/<tier>/<chapter>.json`` is the results file of the latest run of a chapter in that
tier (:data:`TIERS`: ``full``, the data that ships here on two CPU cores; ``paper``, the papers'
budgets on one GPU, in pieces): tables, claims with preconditions, robustness, wall time,
device, commit, profile and code hashes, and how many pieces and minutes of compute the run took.
``published/<tier>/<chapter>/`` holds the figures that run drew (PNG, taken from the executed
notebook), and ``published/<tier>/progress/`` the account of a run still in pieces
(:func:`progress_path`, :func:`chains_path`, :func:`lost_path`).

This module reads them: it loads a record and checks its integrity digest (:func:`load`,
:func:`damage`), puts the most converged tier in front (:func:`records`), marks a record whose
profile or code changed since (:func:`staleness`) and never fails on that, and sums a record or
a run in progress up in a line (:func:`tier_summary`, :func:`progress_summary`). What writes
them is :mod:`symlib.book.publishing` (``make publish CHAPTER=...``), whose command line is
:mod:`symlib.book.records`. :func:`write_chains` is here, below the run layer, because a
chapter's progress reader (:mod:`symlib.chapters.synthesis.progress`) writes with it, and the
chapters import no run-layer module.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

from symlib.book import pieces
from symlib.book.codehash import (
    chapter_package_dir,
    code_current,
    compute_code_hash,
    declared,
    profile_hash,
    stage_code_hashes,
    stale_code_groups,
)
from symlib.book.ledger import COLUMNS, column_outcome
from symlib.book.paths import project_root_or_cwd
from symlib.book.pieces import in_progress
from symlib.book.results import outcome
from symlib.data import data_hash

__all__ = ["INTEGRITY", "TIER", "TIERS", "DamagedRecordWarning", "chains_path", "check_tier", "damage", "integrity", "load",
           "lost_path", "notebook_of", "pieces_minutes", "progress_path", "progress_summary", "published_dir", "records",
           "restarted", "scheme_of", "staleness", "tier_summary", "verdicts_by_tier", "write_chains"]

TIER = "full"
"""The tier published by default: the data that ships here, sized for two CPU cores."""
TIERS = ("full", "paper")
"""The tiers published, least converged first: ``paper`` is the papers' models, budgets and
protocols, run on one GPU in pieces (``published/paper/``)."""


def check_tier(tier: str) -> str:
    """``tier``, if it is one of :data:`TIERS`.

    Raises:
        ValueError: it is not.
    """
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}; got {tier!r}")
    return tier


def published_dir(tier: str = TIER) -> Path:
    """``published/<tier>/`` in the book's checkout (default ``published/full/``)."""
    return project_root_or_cwd() / "published" / check_tier(tier)


INTEGRITY = "integrity"
"""The field of a published record holding the digest of what it asserts (:func:`integrity`)."""


def integrity(record: dict, figures: Path | None = None) -> str:
    """The SHA-256 of everything a published record asserts: every field but this digest (its
    tables, claims and verdicts, errata, robustness, profile values and provenance) and the
    bytes of each figure it names (in ``figures``, its folder beside the record). Written by
    every writer (:mod:`symlib.book.publishing`), checked by every reader (:func:`damage`)."""
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


def records(chapter: str, tiers=None) -> dict[str, dict]:
    """Every published record of ``chapter`` (of ``tiers``, default all), most converged first
    (``paper`` before ``full``): the first is the run whose numbers a page puts in front."""
    found = {}
    for tier in tiers or reversed(TIERS):
        record = load(chapter, tier=tier)
        if record is not None:
            found[tier] = record
    return found


def scheme_of(prov: dict) -> int:
    """The hash scheme a record's provenance ``prov`` was written under: 1 for records from before
    the field (they hashed the whole library)."""
    return prov.get("hash_scheme", 1)


def notebook_of(record: dict, notebook: Path | None = None) -> Path:
    """``notebook``, or by default the record's chapter's ``notebooks/<chapter>.md`` in the checkout."""
    return notebook if notebook is not None else project_root_or_cwd() / "notebooks" / f"{record['chapter']}.md"


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
    notebook = notebook_of(record, notebook)
    reasons = []
    scheme = scheme_of(prov)
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


def chains_path(chapter: str, tier: str = "paper") -> Path:
    """``published/<tier>/progress/<chapter>.chains.json``: how far each sampler of a run in progress
    got, read from its checkpoints by the chapter's progress reader (chapter 5:
    :mod:`symlib.chapters.rebasin_hmc.progress`; chapter 6: :mod:`symlib.chapters.synthesis.progress`;
    ``tools/longruns/gpu_piece.sh keep`` runs it): a
    list of ``{run, chains, transitions, total, draws_per_chain, draws_target, rhat, bulk_ess,
    quantity, ...}``; a VI fit's (chapter 1: :mod:`symlib.book.vi_progress`) ``{run, steps, total, ...}``."""
    return published_dir(tier) / "progress" / f"{chapter}.chains.json"


def write_chains(out: str | Path, records: list[dict]) -> Path:
    """Write a progress reader's records (the layout :func:`chains_path` names) to ``out`` as a
    JSON list, making its folder: what a chapter's progress reader writes, and
    :func:`symlib.book.publishing.record_lost` with them."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(records, indent=1) + "\n")
    return out


def lost_path(chapter: str, tier: str = "paper") -> Path:
    """``published/<tier>/progress/<chapter>.lost.json``: the runs in progress whose state was lost
    (:func:`symlib.book.publishing.record_lost`), so that the book accounts for them and says the
    run starts again."""
    return published_dir(tier) / "progress" / f"{chapter}.lost.json"


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
        clause += "".join(f", {_reached(c)}" for c in r["chains"])
        clauses.append(f"{clause} ({r['why']})")
    n = len(clauses)
    return (f"the state of {'an earlier run' if n == 1 else f'{n} earlier runs'} was lost and is not counted: "
            + "; ".join(clauses))


def _reached(record: dict) -> str:
    """How far one run of a progress reader's records got: ``"main run at 1,335 of 10,600
    transitions"`` (a sampler) or ``"VI fit sinc-main at 27,051 of 200,000 steps"`` (a VI fit)."""
    if "steps" in record:
        return f"{record['run']} at {record['steps']:,} of {record['total']:,} steps"
    return f"{record['run']} run at {record['transitions']:,} of {record['total']:,} transitions"


def _chains_line(record: dict) -> str:
    """One sampler's progress: its length reached and, where computable, R-hat and ESS so far; a
    VI fit's (:mod:`symlib.book.vi_progress`): its steps done of its total."""
    if "steps" in record:
        return f"{record['run']}: {record['steps']:,} of {record['total']:,} steps"
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
    :func:`chains_path` records them), or of one whose last piece completed it but that is not yet
    published (:func:`_unpublished_line`), or None when none is recorded or it was published."""
    path = progress_path(chapter, tier)
    lost = _lost_line(chapter, tier)
    entries = json.loads(path.read_text()) if path.is_file() else []
    run = in_progress(entries, tier)
    if run is None:
        if lost and not path.is_file():   # nothing runs now: the next piece starts the run again
            return f"not running: {lost}; the next piece starts the run again"
        return _unpublished_line(chapter, tier, entries)
    line = f"in progress: {_run_compute(run)} ({_run_dates(run)}), commit {(run['commit'] or '?')[:12]}"
    if run["note"]:
        line += "; latest: " + "; ".join(c for c in run["note"].split("; ") if not c.startswith("run again"))
    if (chains := chains_path(chapter, tier)).is_file():
        line += "".join(f"; {_chains_line(r)}" for r in json.loads(chains.read_text()))
    if _restarts(run, chapter):
        line += (" — from an older version of the code: its checkpoints are not continued, the next piece "
                 "starts the run again")
    return line + (f"; before it, {lost}" if lost else "")


def _unpublished_line(chapter: str, tier: str, entries: list[dict]) -> str | None:
    """``"computed, not yet published: ..."`` where the progress file's ``entries`` hold a complete
    ``tier`` run (:func:`symlib.book.pieces.account`) later than the published record's, else None:
    its numbers are in a cache or a carried folder and wait to be rendered and published."""
    done = pieces.account(entries, tier)
    if done is None:
        return None
    record = load(chapter, tier=tier)
    shown = ((record or {}).get("computed") or {}).get("pieces") or {}
    if shown.get("last") and str(shown["last"]) >= str(done["last"]):
        return None
    return (f"computed, not yet published: {_run_compute(done)} ({_run_dates(done)}); its cache is rendered "
            f"and published with `execute --cached-only`, then `make publish CHAPTER={chapter} TIER={tier}`")


def _restarts(run: dict, chapter: str) -> str | None:
    """This checkout's compute code hash of ``chapter`` where the run in progress ``run``
    (:func:`symlib.book.pieces.in_progress`) ran other code, so that its next piece starts it
    again; None where it continues: the same code, code the registry of proven equivalences joins
    to its latest piece's stage by stage, or pieces that recorded no code."""
    if not run["code_hash"]:
        return None
    now = compute_code_hash(chapter)
    if now == run["code_hash"] or pieces.same_stage_code(run.get("stage_hashes"), stage_code_hashes(chapter)):
        return None
    return now


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
