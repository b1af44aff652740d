"""Results files and the claims ledger.

Each executed chapter writes ``results/<chapter>.json``: how it ran (profile, seed, device, wall
time, library versions), its tables with the paper's numbers beside ours, and a *claims ledger*:
for every claim of the paper, what the paper says, what this run measured, and whether the claim
held (``True``/``False``), or ``None`` when this run cannot judge it (e.g. the ``smoke`` profile).
The book's reproducibility page aggregates all ledgers with :func:`ledger_frame`.
"""

from __future__ import annotations

import enum
import json
import math
import os
import platform
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy
import torch

from symlib import __version__
from symlib.book.cache import cached_only, computed_with, usage_mark
from symlib.book.codehash import provenance
from symlib.book.paths import project_root_or_cwd

__all__ = [
    "SAME",
    "Cause",
    "ChapterResults",
    "Claim",
    "Column",
    "Diagnosis",
    "Erratum",
    "Kind",
    "Precondition",
    "check_writable",
    "depends_on",
    "errata_frame",
    "ledger_frame",
    "load_all",
    "outcome",
    "precondition",
    "results_dir",
    "robust_verdict",
    "robustness_summary",
]

ENV_VAR = "SYMLIB_RESULTS"
STAGING_VAR = "SYMLIB_RESULTS_STAGING"
"""Set by ``python -m symlib.book.pipeline`` for its kernels: where :meth:`ChapterResults.write`
puts the results file until the pipeline moves it into place with the executed notebook."""


def results_dir() -> Path:
    """``$SYMLIB_RESULTS`` if set and not empty, else ``results/`` in the book's checkout
    (or the working directory outside one, :mod:`symlib.book.paths`); always absolute.

    ``~`` is expanded (as for ``SYMLIB_CACHE`` and ``SYMLIB_DATA``) and a relative path is taken
    against the current directory. ``python -m symlib.book.pipeline`` makes the variable absolute
    before it starts a kernel, since kernels run in ``notebooks/`` or ``book/``.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().absolute()
    return project_root_or_cwd() / "results"


def check_writable(directory: str | Path | None = None, *, variable: str = ENV_VAR, what: str = "results") -> Path:
    """Create ``directory`` (default :func:`results_dir`) and check a file can be written there.

    Called before a chapter's work starts, so a bad ``SYMLIB_RESULTS`` fails at once, not after
    the run when :meth:`ChapterResults.write` would.

    Returns:
        The directory.

    Raises:
        OSError: it is not a directory or cannot be written; the message names ``variable``
            (default ``SYMLIB_RESULTS``; the pipeline checks ``SYMLIB_CACHE`` the same way).
    """
    directory = Path(directory) if directory is not None else results_dir()
    fix = f"set {variable} to a writable directory"
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"cannot write {what} to {directory}: not a directory; {fix}")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as err:
        raise OSError(
            f"cannot write {what} to {directory} ({err.strerror or err}); {fix}"
        ) from err
    return directory


class _Same:
    """The robust column judges the reproduced column's measurement (:data:`SAME`)."""

    def __repr__(self) -> str:
        return "SAME"

    def __reduce__(self):
        return "SAME"


SAME = _Same()


class Kind(str, enum.Enum):
    """What a ledger entry is."""

    CLAIM = "claim"
    """A claim of the paper, at the paper's strength; counts as reproduced or not."""
    CODE_CHECK = "code check"
    """Holds by construction of the method (a theorem, a parametrisation): a check of our code,
    shown in the ledger but never counted as a reproduced claim."""


class Column(str, enum.Enum):
    """The verdict column a precondition gates (The Turing Way's distinction).

    A claim is judged twice with one criterion: *reproduced*, under the paper's own protocol,
    gated only by properties the paper's own run is shown or stated to have (each citing where);
    *robust*, under today's standard (at least 4 chains, rank-normalised split R-hat <= 1.01 bulk
    and folded, ESS >= 400 in function space, several seeds, the sensitivity sweeps).
    """

    REPRODUCED = "reproduced"
    """Gates the reproduced column only (a property of the paper's run that the robust protocol
    replaces with a stronger one)."""
    ROBUST = "robust"
    """Gates the robust column only: today's standard, which the paper's run did not apply."""
    BOTH = "both"
    """Gates both columns (what any judgement needs, e.g. a run sized to judge claims)."""


@dataclass(frozen=True)
class Precondition:
    """What a run must reach for a claim to be judged, fixed in code before the run.

    ``criterion`` states the threshold in words (e.g. ``"split R-hat <= 1.01"``), ``measured``
    the value the run reached, ``met`` whether it meets the criterion. ``column`` says which
    verdict it gates (:class:`Column`); ``source`` cites where the paper's run is shown or stated
    to have the property (table, section, the authors' code file), for the reproduced column.
    """

    name: str
    criterion: str
    measured: str
    met: bool
    column: Column = Column.BOTH
    source: str = ""

    def __post_init__(self):
        for name in ("name", "criterion", "measured"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise TypeError(f"precondition field {name!r} must be a non-empty string")
        if not isinstance(self.met, bool):
            raise TypeError(f"precondition {self.name!r}: met must be True or False, got {self.met!r}")
        try:
            object.__setattr__(self, "column", Column(self.column))
        except ValueError:  # enum's own message names no choices
            raise ValueError(f"precondition {self.name!r}: column must be one of "
                             f"{[c.value for c in Column]}, got {self.column!r}") from None
        if not isinstance(self.source, str):
            raise TypeError(f"precondition {self.name!r}: source must be a string")

    def gates(self, column: Column) -> bool:
        """Whether this precondition gates the verdict of ``column`` (REPRODUCED or ROBUST)."""
        return self.column in (Column.BOTH, column)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["column"] = self.column.value
        return out


def precondition(name: str, criterion: str, measured, met, *, column: Column | str = Column.BOTH,
                 source: str = "") -> Precondition:
    """A :class:`Precondition`; a float ``measured`` is shown with 3 significant digits, or more
    where a failed one would otherwise read as a bound of its criterion ("≤ 1.01 (reached: 1.01)"
    for an R-hat of 1.012 shows 1.012)."""
    if isinstance(measured, float):
        measured = _shown(measured, criterion, met)
    return Precondition(name=name, criterion=criterion, measured=str(measured), met=bool(met),
                        column=column, source=source)


def _shown(value: float, criterion: str, met) -> str:
    """``value`` with 3 significant digits; if not ``met``, up to 6, until it differs from every
    number written in ``criterion``."""
    bounds = {float(n) for n in re.findall(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", criterion.replace(",", ""))}
    text = f"{value:.3g}"
    for digits in range(4, 7):
        if met or not math.isfinite(value) or float(text) not in bounds:
            break
        text = f"{value:.{digits}g}"
    return text


class Cause(str, enum.Enum):
    """Why a claim does not hold (:class:`Diagnosis`): each "does not hold" names one or more."""

    BUDGET = "budget"
    """Our run is smaller than the paper's: the detail gives the fraction, per chain or fit,
    against the paper's own (e.g. "40,000 of 200,000 steps per fit, 20 %")."""
    DATA = "data"
    """Our data differ from the paper's: the detail says how (a subset, a stand-in)."""
    PROTOCOL = "protocol departure"
    """We ran the paper's experiment otherwise than it did: the detail names the departure."""
    OPEN_CHOICE = "open choice"
    """The paper left a choice open and the verdict may turn on it: the detail names the choice
    and :attr:`Diagnosis.sweep` the sensitivity sweep's choice that varies it."""
    CLAIM_FAILS = "the paper's claim fails here"
    """At the paper's protocol and budget, on our data, the claim does not hold."""


@dataclass(frozen=True)
class Diagnosis:
    """Why a claim does not hold: a :class:`Cause` and what it is in this run, in words.

    Stored with the claim and shown on its card. An :attr:`Cause.OPEN_CHOICE` names the ``sweep``
    choice (a robustness sweep's ``choice`` column) that varies it, so the robust column's
    sensitivity sweep tries the other readings.
    """

    cause: Cause
    detail: str
    sweep: str = ""

    def __post_init__(self):
        try:
            object.__setattr__(self, "cause", Cause(self.cause))
        except ValueError:
            raise ValueError(f"diagnosis cause must be one of {[c.value for c in Cause]}, got {self.cause!r}") from None
        if not isinstance(self.detail, str) or not self.detail:
            raise TypeError("a diagnosis needs a non-empty detail: what the cause is in this run")
        if self.cause is Cause.OPEN_CHOICE and not self.sweep:
            raise ValueError(f"an open-choice diagnosis names the sweep choice that varies it ({self.detail!r})")

    def to_dict(self) -> dict:
        return {"cause": self.cause.value, "detail": self.detail, "sweep": self.sweep}

    def words(self) -> str:
        """The diagnosis as a reader reads it: ``budget: 40,000 of 200,000 steps per fit``."""
        return f"{self.cause.value}: {self.detail}"


def outcome(holds: bool | None) -> str:
    """A criterion's outcome in words: ``holds`` / ``does not hold`` / ``not judged`` (no reasons)."""
    return {True: "holds", False: "does not hold", None: "not judged"}[holds]


@dataclass(frozen=True)
class Claim:
    """One row of the claims ledger, judged twice with one criterion (:class:`Column`).

    ``holds`` is the criterion's outcome under the paper's protocol (True / False), and ``ours``
    what it was measured on. A claim whose robust protocol measures something else (more
    chains, several seeds) gives that outcome and measurement as ``robust_holds`` and
    ``robust_ours``; otherwise the robust column judges the same measurement. Each column is
    gated by its own preconditions (:meth:`Precondition.gates`): with one that is not met, that
    column is *not judged*, whatever the criterion gave, and names the failed precondition.
    ``holds`` and :attr:`verdict` are the reproduced column's (as the single verdict was before
    the two columns; an old results file reads the same).
    """

    id: str
    text: str
    paper: str
    ours: str
    holds: bool | None
    criterion: str = ""
    """How the verdict is decided, stated before the run (e.g. ``"p < 0.05, Wilcoxon"``); the
    same for both columns."""
    preconditions: tuple[Precondition, ...] = ()
    kind: Kind = Kind.CLAIM
    robust_holds: bool | None | _Same = SAME
    """The criterion's outcome under the robust protocol, when it measures something else."""
    robust_ours: str | None = None
    """What the robust protocol measured (with ``robust_holds``)."""
    criterion_holds: bool | None | _Same = SAME
    """The criterion's outcome before the reproduced column's gate (filled in from ``holds``;
    kept so that adding a precondition later, :func:`dataclasses.replace`, gates it again)."""
    diagnosis: tuple[Diagnosis, ...] = ()
    """Why the claim does not hold, where a column says it does not (:class:`Diagnosis`; a
    chapter gives one for every claim that can fail, checked by
    :meth:`symlib.book.chapter.Chapter.judged_claims`)."""
    reference: str = ""
    """The convergence of the reference the claim is judged against (an HMC run, a gold
    standard, NUTS at its depth cap), in words, shown next to the reproduced verdict
    (:func:`symlib.book.preconditions.reference_converged`)."""
    robust_refuted: str = ""
    """The settings under which the claim fails with every robust precondition met (set by
    :func:`symlib.book.chapter.swept`): the robust column then says "does not hold" even if a
    precondition of another setting (the sweep judged in full, say) is unmet."""

    def __post_init__(self):
        for name in ("id", "text", "paper", "ours"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise TypeError(f"claim field {name!r} must be a non-empty string")
        for name, value in (("holds", self.holds), ("robust_holds", self.robust_holds)):
            if value is not SAME and not isinstance(value, (bool, type(None))):
                raise TypeError(f"claim {self.id!r}: {name} must be True, False or None, got {value!r}")
        if (self.robust_holds is SAME) != (self.robust_ours is None):
            raise TypeError(f"claim {self.id!r}: give robust_holds and robust_ours together (the robust "
                            "protocol's outcome and what it measured), or neither")
        pre = tuple(p if isinstance(p, Precondition) else Precondition(**p) for p in self.preconditions)
        object.__setattr__(self, "preconditions", pre)
        diagnosis = (self.diagnosis,) if isinstance(self.diagnosis, (Diagnosis, dict)) else tuple(self.diagnosis)
        object.__setattr__(self, "diagnosis",
                           tuple(d if isinstance(d, Diagnosis) else Diagnosis(**d) for d in diagnosis))
        for name in ("reference", "robust_refuted"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"claim {self.id!r}: {name} must be a string")
        object.__setattr__(self, "kind", Kind(self.kind))
        if self.criterion_holds is SAME:
            object.__setattr__(self, "criterion_holds", self.holds)
        # the gate: no verdict on an unmet precondition of the column
        object.__setattr__(self, "holds", None if self.failed(Column.REPRODUCED) else self.criterion_holds)

    @property
    def robust(self) -> bool | None:
        """The robust column's outcome: the robust protocol's (or the criterion's), gated; "does
        not hold" where a fully gated setting refutes it (:attr:`robust_refuted`)."""
        if self.robust_refuted:
            return False
        if self.failed(Column.ROBUST):
            return None
        return self.criterion_holds if self.robust_holds is SAME else self.robust_holds

    def failed(self, column: Column) -> tuple[Precondition, ...]:
        """The preconditions of ``column`` that the run did not meet."""
        return tuple(p for p in self.preconditions if p.gates(column) and not p.met)

    @property
    def failed_preconditions(self) -> tuple[Precondition, ...]:
        """The reproduced column's failed preconditions."""
        return self.failed(Column.REPRODUCED)

    def column_verdict(self, column: Column) -> str:
        """``holds`` / ``does not hold`` / ``not judged: <failed preconditions>`` of ``column``."""
        if column is Column.ROBUST and self.robust_refuted:
            return outcome(False)
        if failed := self.failed(column):
            return "not judged: " + "; ".join(f"{p.criterion} (measured {p.measured})" for p in failed)
        return outcome(self.holds if column is Column.REPRODUCED else self.robust)

    @property
    def verdict(self) -> str:
        """The reproduced column's verdict (:meth:`column_verdict`)."""
        return self.column_verdict(Column.REPRODUCED)

    @property
    def verdicts(self) -> dict[str, dict]:
        """Both columns: per column its verdict, outcome, what was measured and its preconditions."""
        out = {}
        for column in (Column.REPRODUCED, Column.ROBUST):
            holds = self.holds if column is Column.REPRODUCED else self.robust
            measured = self.ours if column is Column.REPRODUCED or self.robust_ours is None else self.robust_ours
            out[column.value] = {
                "verdict": self.column_verdict(column), "holds": holds, "measured": measured,
                "preconditions": [p.to_dict() for p in self.preconditions if p.gates(column)],
            }
        if self.robust_refuted:
            out[Column.ROBUST.value]["refuted_under"] = self.robust_refuted
        return out

    @property
    def fails(self) -> bool:
        """Whether either column says "does not hold" (the claim then needs a diagnosis)."""
        return self.kind is Kind.CLAIM and (self.holds is False or self.robust is False)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["kind"] = self.kind.value
        out["preconditions"] = [p.to_dict() for p in self.preconditions]
        for internal in ("robust_holds", "robust_ours", "criterion_holds", "robust_refuted"):
            out.pop(internal)
        out["diagnosis"] = [d.to_dict() for d in self.diagnosis]
        out["verdict"] = self.verdict
        out["verdicts"] = self.verdicts
        return out


@dataclass(frozen=True)
class Erratum:
    """A typo or inconsistency of the paper that the chapter corrects (not a claim)."""

    id: str
    paper_says: str
    correction: str
    where: str = ""


def _versions() -> dict[str, str]:

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "symlib": __version__,
    }


def _jsonable(value):
    """Plain JSON for tables: NaN/inf become None, numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass
class ChapterResults:
    """The ledger of one chapter run; :meth:`write` stores it as JSON."""

    chapter: str
    profile: str
    seed: int
    device: str
    tables: dict[str, dict] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    errata: list[Erratum] = field(default_factory=list)
    robustness: dict[str, dict] = field(default_factory=dict)
    notes: dict[str, object] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    config: object = None
    """The profile the run used (recorded with its hash and the code's, see :mod:`.provenance`)."""
    cache_mark: int = field(default_factory=usage_mark, repr=False)
    """Where this run's cache entries start (:func:`symlib.book.cache.usage_mark`): the results
    file names the code and data hashes of the entries served or written since."""

    def add_table(self, name: str, frame, *, caption: str = "", source: str = "") -> None:
        """Store a table (a pandas DataFrame; its index is kept as columns)."""
        import pandas as pd

        flat = frame if isinstance(frame.index, pd.RangeIndex) else frame.reset_index()
        self.tables[name] = {
            "caption": caption,
            "source": source,
            "columns": [str(c) for c in flat.columns],
            "rows": _jsonable(flat.to_numpy().tolist()),
        }

    def add_claim(
        self, id: str, text: str, paper: str, ours: str, holds: bool | None, *,
        criterion: str = "", preconditions=(), kind: Kind | str = Kind.CLAIM,
        robust_holds: bool | None | _Same = SAME, robust_ours: str | None = None,
        diagnosis=(), reference: str = "", robust_refuted: str = "",
    ) -> Claim:
        return self._append(Claim(id=id, text=text, paper=paper, ours=ours, holds=holds, criterion=criterion,
                                  preconditions=tuple(preconditions), kind=kind, robust_holds=robust_holds,
                                  robust_ours=robust_ours, diagnosis=diagnosis, reference=reference,
                                  robust_refuted=robust_refuted))

    def _append(self, claim: Claim) -> Claim:
        if any(c.id == claim.id for c in self.claims):
            raise ValueError(f"claim id {claim.id!r} is already in the ledger")
        self.claims.append(claim)
        return claim

    def add_claims(self, claims) -> None:
        """Add :class:`Claim` s (or the fields of one as a dict, without the derived verdicts)."""
        for c in claims:
            if isinstance(c, Claim):
                self._append(c)
            else:  # a written claim: its robust column from its verdicts
                fields = dict(c)
                fields.pop("verdict", None)
                if robust := (fields.pop("verdicts", None) or {}).get("robust"):
                    fields.update(robust_holds=robust["holds"], robust_ours=robust["measured"],
                                  robust_refuted=robust.get("refuted_under", ""))
                self.add_claim(**fields)

    def add_erratum(self, id: str, paper_says: str, correction: str, where: str = "") -> Erratum:
        """Record a typo of the paper that the chapter corrects (shown apart from the claims)."""
        erratum = Erratum(id=id, paper_says=paper_says, correction=correction, where=where)
        self.errata.append(erratum)
        return erratum

    def add_robustness(self, claim_id: str, frame, *, caption: str = "") -> None:
        """The verdict of ``claim_id`` under each setting of the choices the paper left open."""
        self.add_table(f"robustness:{claim_id}", frame, caption=caption)
        self.robustness[claim_id] = self.tables.pop(f"robustness:{claim_id}")

    def to_dict(self) -> dict:
        return {
            "chapter": self.chapter,
            "profile": self.profile,
            "seed": self.seed,
            "device": self.device,
            "wall_time_s": round(time.perf_counter() - self.started, 2),
            # True: re-rendered from a finished run's cache (wall_time_s is then the rendering's)
            "rendered_from_cache": cached_only(),
            # computed_with: the code and data hashes the run's cached stages were computed with,
            # which differ from code_hash's checkout when stale entries were kept
            "provenance": {
                **provenance(self.chapter, self.config),
                "computed_with": computed_with(self.chapter, since=self.cache_mark),
            },
            "versions": _versions(),
            "tables": self.tables,
            "claims": [c.to_dict() for c in self.claims],
            "errata": [asdict(e) for e in self.errata],
            "robustness": self.robustness,
            "notes": _jsonable(self.notes),
        }

    def write(self, directory: str | Path | None = None) -> Path:
        """Atomically write ``<directory>/<chapter>.json``.

        The default directory is :func:`results_dir`, except under the book's pipeline: it sets
        ``$SYMLIB_RESULTS_STAGING`` to a folder of its own, and moves the file from there into
        :func:`results_dir` together with the executed notebook once the whole notebook has run,
        so that a run killed in its last cells leaves neither (the previous run's results and
        page stay, a matching pair). A notebook run by hand writes to :func:`results_dir`.
        """
        if not self.claims:
            raise ValueError(f"{self.chapter}: refusing to write a results file with an empty claims ledger")
        if directory is None:
            directory = os.environ.get(STAGING_VAR) or results_dir()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.chapter}.json"
        # the pid lets a later run remove this file if the process is killed mid-write
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{self.chapter}.json.{os.getpid()}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(self.to_dict(), fh, indent=2, allow_nan=False)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path


def load_all(directory: str | Path | None = None) -> list[dict]:
    """Every ``*.json`` results file in ``directory``, sorted by chapter."""
    directory = Path(directory) if directory is not None else results_dir()
    if not directory.is_dir():
        return []
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def _claim_verdict(c: dict) -> str:
    """A stored claim's verdict (results files older than the preconditions lack the field)."""
    return c.get("verdict") or outcome(c["holds"])


def robust_verdict(c: dict) -> str:
    """A stored claim's robust verdict ("—" in results files older than the two columns)."""
    return ((c.get("verdicts") or {}).get("robust") or {}).get("verdict") or "—"


_COLUMN_MARK = {"both": "", "reproduced": " [reproduced only]", "robust": " [robust only]"}


def _preconditions_text(c: dict) -> str:
    pre = c.get("preconditions") or []
    if not pre:
        return "none stated"
    met = sum(p["met"] for p in pre)
    marks = "; ".join(f"{'✓' if p['met'] else '✗'} {p['criterion']} ({p['measured']})"
                      f"{_COLUMN_MARK[p.get('column', 'both')]}" + (f" [{p['source']}]" if p.get("source") else "")
                      for p in pre)
    return f"{met}/{len(pre)} met: {marks}"


def ledger_frame(all_results: list[dict]):
    """One row per ledger entry over all chapters: the reproducibility page's table."""
    import pandas as pd

    rows = [
        {
            "chapter": r["chapter"],
            "claim": c["text"],
            "kind": c.get("kind", "claim"),
            "paper": c["paper"],
            "ours": c["ours"],
            "verdict": _claim_verdict(c),
            "robust": robust_verdict(c),
            "preconditions": _preconditions_text(c),
            "robustness": "yes" if c["id"] in (r.get("robustness") or {}) else "",
            "profile": r["profile"],
            "wall time (s)": r["wall_time_s"],
        }
        for r in all_results
        for c in r["claims"]
    ]
    columns = ["chapter", "claim", "kind", "paper", "ours", "verdict", "preconditions", "robustness",
               "profile", "wall time (s)"]
    return pd.DataFrame(rows, columns=columns)


def errata_frame(all_results: list[dict]):
    """Every chapter's errata: what the paper printed and what the chapter uses instead."""
    import pandas as pd

    rows = [{"chapter": r["chapter"], **e} for r in all_results for e in r.get("errata", [])]
    return pd.DataFrame(rows, columns=["chapter", "id", "where", "paper_says", "correction"])


def depends_on(frame) -> str:
    """One line on a robustness table: whether the verdict changes with the open choices.

    A verdict *depends on* a choice when the settings reach both "holds" and "does not hold"
    (a setting where the claim is not judged flips nothing); the line then names the choices
    whose settings moved the verdict away from the run's own, and the settings under which the
    claim holds, i.e. reproduces the paper.
    """
    base = frame["verdict"].iloc[0]
    judged = frame[frame["verdict"] != "not judged"]
    unjudged = frame.loc[frame["verdict"] == "not judged", "setting"].tolist()
    tail = f"; not judged with {', '.join(unjudged)}" if unjudged else ""
    verdicts = set(judged["verdict"])
    if not verdicts:
        return "not judged under any setting tried"
    if len(verdicts) == 1:
        return f"{verdicts.pop()} under every setting judged{tail}"
    moved = judged if base == "not judged" else judged[judged["verdict"] != base]
    choices = ", ".join(dict.fromkeys(moved["choice"]))
    holds = ", ".join(judged.loc[judged["verdict"] == "holds", "setting"])
    return f"depends on {choices}; holds with {holds}{tail}"


# --------------------------------------------------------------------------- figures


def robustness_summary(rows: list[dict]) -> str:
    """Per choice, whether the outcome (holds / does not hold / not judged) stays the same, or
    "depends on <choice>" with the outcome at each value; "holds" is the setting that reproduces
    the paper. ``rows`` hold ``choice``, ``value`` and ``outcome``, in the order run."""
    lines = []
    for choice in dict.fromkeys(r["choice"] for r in rows):
        sub = [r for r in rows if r["choice"] == choice]
        if len({r["outcome"] for r in sub}) == 1:
            lines.append(f"{choice}: {sub[0]['outcome']} at every value")
            continue
        at = ", ".join(f"{r['outcome']} at {_setting(r['value'])}" for r in sub)
        lines.append(f"depends on {choice} ({at})")
    return "; ".join(lines)


def _setting(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
