"""The pieces a chapter's run took: one line per execution, for the account a published run gives.

A `paper` run on a GPU rarely fits one allocation: it runs in pieces, each stopped at its time
budget (``$SYMLIB_BUDGET_S``; a stage raises
:class:`~symlib.inference.loop.BudgetExhausted` and keeps its checkpoint) and continued
by the same command, until a piece completes the chapter. ``python -m symlib.book.pipeline
execute`` appends one entry per execution to ``<results>/pieces/<chapter>.json``: when it
started, how long it ran, on which device and host (:func:`host`: the CPU model, its widest
vector instructions and its cores), profile, seed, commit and compute code hash
(:func:`symlib.book.provenance.compute_code_hash`), and how it ended (``complete``, ``budget``,
``failed``, or ``rendered`` for a ``--cached-only`` re-render, which computes nothing).
:func:`account` reads the entries of a chapter's latest complete run, which
:func:`symlib.book.publishing.publish` stores with the record: pieces, minutes of compute, devices.
A piece run with other code than the complete one (a run abandoned when the chapter's code
changed: its cache entries were recomputed) is not part of that run.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path

from symlib.book.equivalence import equivalent
from symlib.book.paths import project_root_or_cwd
from symlib.book.results import results_dir

__all__ = ["COMMIT_ENV", "INTERRUPTED", "OUTCOMES", "TERMINATED", "account", "equivalent_to_latest", "host",
           "in_progress", "log_piece", "minutes_phrase", "pieces_path", "read", "same_stage_code", "stalled"]

OUTCOMES = ("complete", "budget", "failed", "rendered", "partial")
"""How an execution ended (module docstring); ``partial``: ``compute --skip`` ran every stage it
was given, but a stage it skipped is not computed yet (it runs elsewhere, beside it), so the
chapter is not complete."""

INTERRUPTED = "interrupted after"
"""How the note of a piece begins whose stage did not stop at the budget itself and was interrupted
once the grace had passed too (``pipeline``'s watchdog); what was in flight is lost."""

TERMINATED = "terminated (SIGTERM)"
"""How the note of a piece begins that was killed from outside (``tools/longruns/gpu_piece.sh``'s
``timeout`` at ``HARD_S``); what was in flight is lost."""


def pieces_path(chapter: str, directory: Path | None = None) -> Path:
    """``<results>/pieces/<chapter>.json`` (``directory``: the results folder; default
    :func:`symlib.book.results.results_dir`)."""
    if directory is None:
        directory = results_dir()
    return Path(directory) / "pieces" / f"{chapter}.json"


def read(chapter: str, directory: Path | None = None) -> list[dict]:
    """The chapter's entries, oldest first ([] when it has none)."""
    path = pieces_path(chapter, directory)
    if not path.is_file():
        return []
    try:
        entries = json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path} is not valid JSON ({err}): move it away; it only counts pieces") from None
    return entries if isinstance(entries, list) else []


COMMIT_ENV = "SYMLIB_COMMIT"
"""The commit to record instead of the checkout's ``HEAD``: a GPU machine is sent a copy of the
working tree whose ``HEAD`` need not be the commit it holds (``tools/longruns/gpu_piece.sh``)."""


def _commit() -> str:
    if os.environ.get(COMMIT_ENV, "").strip():
        return os.environ[COMMIT_ENV].strip()
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], check=False, cwd=project_root_or_cwd(), capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def host(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The machine a piece ran on, as far as its numbers can depend on it: the CPU model, its
    widest vector instructions and its cores, e.g. ``"Intel(R) Xeon(R) Processor (AVX-512), 2
    cores"``. Compiled samplers (Stan's NUTS through PyStan) and BLAS kernels take other
    floating-point paths on other instruction sets, so the same seeds can give other draws on
    another machine (Stan promises identical draws only for the same hardware, operating system
    and compiler); this names the machines a run's pieces took. ``cpuinfo``: Linux's
    ``/proc/cpuinfo``; elsewhere, or where it names no model, :func:`platform.processor` or the
    machine type."""
    model, flags = "", set()
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = " ".join(value.split())
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    isa = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX")) if flag in flags),
               None)
    cores = os.cpu_count()
    return f"{model}{f' ({isa})' if isa else ''}, {cores} core{'s' if cores != 1 else ''}"


def log_piece(chapter: str, *, profile: str, device: str, seconds: float, outcome: str,
              directory: Path | None = None, started: datetime | None = None,
              code_hash: str | None = None, note: str | None = None, seed: int | None = None,
              stage_hashes: dict[str, str] | None = None) -> Path:
    """Append one execution of ``chapter`` to its pieces file (atomically) and return the file.

    ``code_hash``: the chapter's compute code hash the execution ran with (recorded when given).
    ``note``: how far it got, for a ``budget`` piece (the stage's message, e.g. "chapter 5's HMC:
    ... 1335 transitions done"; recorded when given).
    ``seed``: the run seed (recorded when given: which checkpoints the run continues depends on
    it, :mod:`symlib.book.checkpoints`; entries without it ran with seed 0).
    ``stage_hashes``: ``{stage experiment: stage code hash}`` the execution ran with, of which
    ``code_hash`` is the digest (recorded when given: a chapter whose stages declare their code,
    :func:`symlib.book.codehash.stage_code_hashes`), so that a published run's account can
    compare a piece with its record stage by stage (:mod:`symlib.book.publishing`).

    Raises:
        ValueError: ``outcome`` is not one of :data:`OUTCOMES`.
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}; got {outcome!r}")
    path = pieces_path(chapter, directory)
    entries = read(chapter, directory)
    started = started or datetime.now(UTC)
    entries.append({"started": started.isoformat(timespec="seconds"), "seconds": round(float(seconds), 1),
                    "device": device, "host": host(), "profile": profile, "commit": _commit()[:12],
                    "outcome": outcome})
    if code_hash is not None:
        entries[-1]["code_hash"] = code_hash
    if note:
        entries[-1]["note"] = str(note)
    if seed is not None:
        entries[-1]["seed"] = int(seed)
    if stage_hashes:
        entries[-1]["stage_hashes"] = dict(sorted(stage_hashes.items()))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(entries, f, indent=1)
    os.replace(tmp, path)
    return path


def account(entries: list[dict], profile: str, codes: Collection[str] = ()) -> dict | None:
    """The latest complete run of ``profile`` in ``entries``: the executions that computed it
    (its ``complete`` piece and the ``budget`` or ``failed`` pieces since the previous complete
    run of that profile; re-renders compute nothing and are left out, and so are pieces whose
    recorded code hash is neither the complete piece's nor one of ``codes``, as ``abandoned``),
    or None when no piece of that profile completed. ``codes``: the compute code hashes proven
    equivalent to the complete piece's (the registry of equivalences joins their stages' hashes),
    whose pieces computed entries the run kept.

    Returns:
        ``{"pieces", "seconds", "minutes", "devices", "hosts", "first", "last",
        "stopped_at_budget", "terminated", "failed", "abandoned"}`` (``hosts``: :func:`host` of
        every piece that recorded one; ``terminated``: pieces killed from outside, their note
        beginning with :data:`TERMINATED`, logged ``failed`` but no failure of the chapter;
        ``failed``: the others that failed).
    """
    mine = [e for e in entries if e.get("profile") == profile and e.get("outcome") != "rendered"]
    ends = [i for i, e in enumerate(mine) if e.get("outcome") == "complete"]
    if not ends:
        return None
    last = ends[-1]
    first = ends[-2] + 1 if len(ends) > 1 else 0
    run, summary = _summary(mine[first:last + 1], codes)
    killed = [e.get("outcome") == "failed" and str(e.get("note") or "").startswith(TERMINATED) for e in run]
    return summary | {"stopped_at_budget": sum(e.get("outcome") == "budget" for e in run),
                      "terminated": sum(killed),
                      "failed": sum(e.get("outcome") == "failed" for e in run) - sum(killed)}


def _summary(since: list[dict], codes: Collection[str] = ()) -> tuple[list[dict], dict]:
    """The pieces of ``since`` run with its last piece's code or one of ``codes`` (entries with no
    hash count too), and their account: pieces, seconds, minutes, devices, hosts, first, last,
    abandoned (the others)."""
    code = since[-1].get("code_hash")
    mine = {None, code, *codes}
    run = [e for e in since if code is None or e.get("code_hash") in mine]
    seconds = sum(float(e.get("seconds", 0.0)) for e in run)
    return run, {"pieces": len(run), "seconds": round(seconds, 1), "minutes": round(seconds / 60, 1),
                 "devices": sorted({str(e.get("device")) for e in run}),
                 "hosts": sorted({str(e["host"]) for e in run if e.get("host")}), "first": run[0].get("started"),
                 "last": run[-1].get("started"), "abandoned": len(since) - len(run)}


def in_progress(entries: list[dict], profile: str) -> dict | None:
    """The run of ``profile`` still in progress in ``entries``: its pieces since the last complete
    one, of the latest piece's code hash or of code proven to compute the same numbers
    (:func:`equivalent_to_latest`; other code's pieces were abandoned with their checkpoints), or
    None when its last piece completed the chapter or there is none.

    Returns:
        ``{"pieces", "seconds", "minutes", "devices", "hosts", "first", "last", "commit", "code_hash", "note",
        "abandoned", "stage_hashes"}``: ``note`` is how far the latest piece got (its stage's message);
        ``stage_hashes`` its stages' code hashes (None where it recorded none).
    """
    since = _since_complete(entries, profile)
    if since is None:
        return None
    run, summary = _summary(since, equivalent_to_latest(since))
    return summary | {"commit": run[-1].get("commit"), "code_hash": run[-1].get("code_hash"), "note": run[-1].get("note"),
                      "stage_hashes": run[-1].get("stage_hashes")}


def equivalent_to_latest(since: list[dict]) -> set[str]:
    """The compute code hashes of the pieces in ``since`` whose every stage ran code that the
    registry of proven equivalences (:mod:`symlib.book.equivalence`) joins to the last piece's
    code for it (both recorded ``stage_hashes``): the same run, continued after a change proven
    not to move its numbers, whose checkpoints the carry folder renames for the new code."""
    latest = since[-1].get("stage_hashes") if since else None
    return {e["code_hash"] for e in since if e.get("code_hash") and same_stage_code(e.get("stage_hashes"), latest)}


def same_stage_code(ran: dict | None, current: dict | None) -> bool:
    """Whether two ``{stage experiment: stage code hash}`` maps (a piece's ``stage_hashes``, or
    :func:`symlib.book.codehash.stage_code_hashes`) name the same stages, each at the same hash or
    at one the registry of proven equivalences joins to it; False when either is missing or empty."""
    return (isinstance(ran, dict) and isinstance(current, dict) and bool(current) and set(ran) == set(current)
            and all(equivalent(s, h, current[s]) for s, h in ran.items()))


def _since_complete(entries: list[dict], profile: str) -> list[dict] | None:
    """``profile``'s pieces since its last complete one (re-renders left out), or None when its
    last piece completed the chapter or there is none."""
    mine = [e for e in entries if e.get("profile") == profile and e.get("outcome") != "rendered"]
    if not mine or mine[-1].get("outcome") == "complete":
        return None
    ends = [i for i, e in enumerate(mine) if e.get("outcome") == "complete"]
    return mine[ends[-1] + 1:] if ends else mine


def stalled(entries: list[dict], profile: str) -> str | None:
    """A warning when ``profile``'s run in progress is stalled, else None: its last two pieces were
    both stopped inside a unit that keeps no checkpoint (their notes begin with :data:`INTERRUPTED`
    or :data:`TERMINATED`) with the same items cached at the end of each (the note's part after
    its first ``"; "``, ``pipeline.items_done``'s count). Nothing was kept in between, so a third
    piece of the same length starts the same unit again and loses it again, unless the unit was
    started late in one of them (the notes give each piece's budget)."""
    since = _since_complete(entries, profile)
    run = [] if since is None else _summary(since, equivalent_to_latest(since))[0]   # as in_progress counts them
    if len(run) < 2:
        return None
    notes = [str(e.get("note") or "") for e in run[-2:]]
    if not all(n.startswith((INTERRUPTED, TERMINATED)) and "; " in n for n in notes):
        return None
    cached = [n.split("; ", 1)[1] for n in notes]
    if cached[0] != cached[1]:
        return None
    return (f"the last two pieces were both stopped inside a unit that keeps no checkpoint, with the same items "
            f"cached ({cached[1]}): a piece of this length loses that unit again unless it starts it earlier. "
            f"The two pieces: {notes[0].split('; ', 1)[0]}; {notes[1].split('; ', 1)[0]}. "
            "Give the next piece more time (PIECE_S, HARD_S) or run the unit where it fits")


def minutes_phrase(minutes: float, devices) -> str:
    """``"22 minutes of device compute"`` for a run with an accelerator among ``devices`` (the
    device names the pieces logged, e.g. ``"cuda (NVIDIA H200)"``), ``"22 minutes"`` for one on
    the CPU alone (its minutes are the machine's, not a device's). The minutes are the pieces'
    own seconds (what ``log_piece`` records): a remote machine's start and the transfers to and
    from it are not in them."""
    devices = [devices] if isinstance(devices, str) else list(devices or [])
    cpu_only = bool(devices) and all(str(d).split(" ")[0] == "cpu" for d in devices)
    unit = "minute" if minutes == 1 else "minutes"
    return f"{minutes:g} {unit}" if cpu_only else f"{minutes:g} {unit} of device compute"
