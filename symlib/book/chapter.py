"""The chapter contract: what a chapter of the book is, declared as data.

How a chapter is built
======================

A chapter is one package, ``symlib/chapters/<package>/``, with one file per job, and one
MyST notebook, ``notebooks/NN_<package>.md``, that holds the page's prose:

``profiles.py``
    A frozen dataclass of the chapter's sizes and ``PROFILES = {"smoke": ..., "quick": ...,
    "full": ..., "paper": ...}`` (:mod:`symlib.book.profiles`).
``stages.py``
    The compute: pure functions, and one :class:`Stage` per cached, seeded unit of compute.
    A stage declares the profile ``fields`` it reads, a ``version``, the random ``streams`` it
    draws from (by purpose) and the earlier stages whose results it ``needs``. Its ``compute``
    takes one :class:`StageContext` and returns the stage's result. A stage of many independent
    fits (one per benchmark, setting, seed) is a fan-out stage (``items``): each item is cached
    on its own and the items run side by side under ``$SYMLIB_JOBS``. Split long compute into
    topic modules (``stages_<topic>.py``) so that no file grows past about 400 lines.
``claims.py``
    ``claims(results: RunResults) -> list[Claim]``: the ledger, judged on this run's numbers;
    thresholds and preconditions fixed in code before the run. Also the chapter's ``ERRATA``
    (:class:`~symlib.book.results.Erratum` data, or a function of the results when an erratum
    quotes the run), its robustness :class:`Sweep` s (one shape: rows with ``choice``,
    ``setting``, ``verdict``) and ``SECTIONS`` (claim id -> the heading that measures it).
``views.py``
    :class:`Table` and :class:`Figure` views built from the results, and :class:`Quote` numbers
    that the prose quotes (myst-nb ``glue``).
``paper.py``
    The paper's reported numbers as data, where the chapter has a paper.
``__init__.py``
    ``CHAPTER = Chapter(name=..., paper=..., profiles=PROFILES, stages=STAGES, claims=claims,
    views=VIEWS, ...)``: the declaration that the notebook, the pipeline's helpers (the order of
    a side-by-side build, :mod:`symlib.book.compare`) and the tests use; no code outside the
    package names the chapter.

The notebook talks to the chapter through the contract only::

    run = CHAPTER.start(profile=profile, seed=seed, device=device)   # parameters cell's values
    results = CHAPTER.compute(run)        # every stage, cached, in order
    CHAPTER.glue(results)                 # the numbers the prose quotes
    CHAPTER.show(run, results, "invariance")   # a table (numbered, stored in the results file)
    fig = CHAPTER.show(run, results, "fig_canonicalisation")   # a figure
    CHAPTER.show_robustness(run, results) # each sweep's summary and table
    record = CHAPTER.ledger(run, results) # claims, errata, robustness, notes; writes results/<name>.json
    CHAPTER.show_errata(run, record)      # the errata table, if any
    display(CHAPTER.footer(record))       # profile, seed, device, wall time, versions

To add a chapter: copy ``tests/book/example_chapter/`` (a complete chapter that runs through
the pipeline in the tests), rename it, and replace its stages, claims and views.

Cache keys
----------
A stage's result is cached with :func:`symlib.book.cache.cached` under the experiment
``<chapter>-<stage>`` (or the stage's ``experiment``) and the stage's ``version``; its key is
exactly ``{"seed": <run seed>, <each declared field>: <its value>, **device_key(device)}``
(:meth:`Stage.key`). Adding a field to a profile changes no key until a stage declares it; a
stage that reads a field it did not declare fails loudly (it is handed a :class:`ProfileView`
that holds only its fields), so no key can omit what a result depends on. Two declared
additions only: ``key_data`` adds what follows from the fields but is not one of them (the
fingerprints of the data files a field names), and a fan-out stage (``items``) caches each
item on its own under the key plus ``{"item": item}``, so a long stage resumes where it stopped. A stage that needs
earlier stages must declare their fields too (checked when the chapter is declared), since its
result depends on theirs. Bump ``version`` whenever the stage's code changes its numbers, and
the versions of the stages that need it.

Random streams
--------------
A new stage draws from named streams, ``ctx.stream("init").torch(device)``:
:class:`symlib.book.streams.Stream` ``(seed, chapter, stage, purpose)``, one per purpose the stage
declares; no two of a chapter's streams coincide (:meth:`Chapter.streams`, checked by the tests).
A stage migrated from before the contract may instead declare ``legacy_seed``, a function of the
run seed giving the integer seed it used before, so that the migration moves no number
; it reads it as ``ctx.seed``. Switching a legacy stage to named streams moves its numbers: a
separate and visible change that bumps the stage's version. :meth:`Chapter.legacy_aliases` lists the legacy stages that share a seed.

The smoke gate
--------------
A chapter whose profiles have a boolean field saying whether the run is sized to judge claims
(``judge``, False in `smoke`) names it as ``judge_field``; :meth:`Chapter.judged_claims` then adds
:func:`sized_to_judge`'s precondition to every claim (not to code checks), so no chapter
writes the gate itself.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import myst_nb
from IPython.display import HTML, Markdown, display

from symlib.book import cards, parallel, runtime, tables
from symlib.book.cache import cached, device_key
from symlib.book.results import (
    SAME,
    Cause,
    Claim,
    Column,
    Erratum,
    Kind,
    Precondition,
    depends_on,
    errata_frame,
    precondition,
)
from symlib.book.streams import Stream, check_distinct

__all__ = [
    "SWEEP_SOURCE",
    "Chapter",
    "Figure",
    "ProfileView",
    "Quote",
    "RunResults",
    "Stage",
    "StageContext",
    "Sweep",
    "Table",
    "sized_to_judge",
    "swept",
]


class ProfileView:
    """The fields of a profile that one stage declared, and only those.

    Reading any other field raises :class:`AttributeError` naming the stage and the fix, so a
    stage cannot depend on a field its cache key leaves out.
    """

    __slots__ = ("_values", "_where")

    def __init__(self, profile: Any, fields: tuple[str, ...], where: str):
        object.__setattr__(self, "_values", {f: getattr(profile, f) for f in fields})
        object.__setattr__(self, "_where", where)

    def __getattr__(self, name: str):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        where = object.__getattribute__(self, "_where")
        raise AttributeError(
            f"{where} read profile field {name!r}, which it did not declare (declared: "
            f"{', '.join(values) or 'none'}); add {name!r} to the stage's fields=(...) so that its "
            "cache key includes it"
        )

    def __setattr__(self, name, value):
        raise AttributeError(f"a profile is read-only; {object.__getattribute__(self, '_where')} tried to set {name!r}")

    def __repr__(self) -> str:
        return f"ProfileView({object.__getattribute__(self, '_values')!r})"

    def __reduce__(self):  # a fan-out stage's items may run in joblib workers
        return (_profile_view, (object.__getattribute__(self, "_values"), object.__getattribute__(self, "_where")))

    def fields(self) -> dict:
        """The declared fields and their values."""
        return dict(object.__getattribute__(self, "_values"))

    def replace(self, **changes) -> ProfileView:
        """This view with some declared fields changed (a robustness setting, say); changing a
        field the stage did not declare fails like reading one."""
        values = self.fields()
        for name in changes:
            if name not in values:
                self.__getattr__(name)  # raises, naming the stage and the fix
        return _profile_view({**values, **changes}, object.__getattribute__(self, "_where"))


def _profile_view(values: dict, where: str) -> ProfileView:
    view = ProfileView.__new__(ProfileView)
    object.__setattr__(view, "_values", dict(values))
    object.__setattr__(view, "_where", where)
    return view


@dataclass(frozen=True)
class StageContext:
    """What a stage's ``compute`` receives: its profile fields, randomness, device and inputs."""

    chapter: str
    stage: Stage
    config: ProfileView
    """Only the profile fields the stage declared (:class:`ProfileView`)."""
    device: Any
    inputs: Mapping[str, Any]
    """The results of the stages it ``needs``, by stage name."""
    run_seed: int
    deadline: float | None = None
    """When the run's piece must stop, in seconds since the epoch (:func:`time.time`, the same
    in every process a fan-out starts); None: no time limit. The run layer sets it
    (:func:`symlib.book.runtime.piece_deadline`, from ``$SYMLIB_BUDGET_S``); a stage that can
    stop early passes what is left of it down
    (:func:`symlib.inference.loop.seconds_left`), and raises
    :class:`~symlib.inference.loop.BudgetExhausted` when it stopped. It is no part of a cache key."""

    @property
    def seed(self) -> int:
        """The stage's legacy seed, ``stage.legacy_seed(run_seed)`` (migrated stages only)."""
        if self.stage.legacy_seed is None:
            raise AttributeError(
                f"stage {self.stage.name!r} of {self.chapter} has no legacy_seed; draw from a named "
                f"stream instead: ctx.stream(purpose) with purpose one of {list(self.stage.streams)}"
            )
        return self.stage.legacy_seed(self.run_seed)

    def stream(self, purpose: str, item: Any = None) -> Stream:
        """The named stream ``(run seed, chapter, stage, purpose)``; ``purpose`` must be declared.

        In a fan-out stage, ``item`` gives each item its own stream: the purpose becomes
        ``"<purpose>[<item>]"`` (the item as canonical JSON, so ``("a", 1)`` and ``["a", 1]`` agree)."""
        if purpose not in self.stage.streams:
            raise ValueError(
                f"stage {self.stage.name!r} of {self.chapter} draws from stream {purpose!r}, which it did "
                f"not declare (declared: {list(self.stage.streams)}); add it to the stage's streams=(...)"
            )
        if item is not None:
            purpose = f"{purpose}[{json.dumps(item, sort_keys=True, separators=(',', ':'))}]"
        return Stream(self.run_seed, self.chapter, self.stage.name, purpose)


_NO_ITEM = object()


@dataclass(frozen=True)
class Stage:
    """A cached, seeded unit of compute: a function of its declared profile fields, its random
    streams (or legacy seed) and the device.

    Attributes:
        name: unique in the chapter; part of the cache experiment and of its streams' names.
        compute: ``compute(ctx: StageContext) -> result``; the result must be ``torch.save``-able.
        fields: the profile fields it reads; with the run seed, the version and the device they
            are its cache key, exactly.
        version: bump it when the code changes the stage's numbers.
        streams: the purposes of the named streams it draws from (``"init"``, ``"noise"``, ...).
        needs: earlier stages whose results it takes (``ctx.inputs[name]``).
        legacy_seed: for a stage migrated from before the contract, ``run seed -> the seed it used
            then``; switching to ``streams`` moves its numbers (a change of its own).
        cache: False for a stage cheaper than a cache round trip (seconds); its key is still
            derived, so making it cached later is a change of this flag only.
        experiment: the cache folder, default ``<chapter>-<name>``; a migrated stage keeps its old one
            (stages may share one if their versions or field names differ, checked when declared).
        key_data: ``key_data(config) -> dict`` of further key parts that follow from the declared
            fields but are not among them: the fingerprints of the data files a field names
            (``{}`` for the shipped data). ``config`` is the stage's :class:`ProfileView`.
        items: a fan-out stage: ``items(config) -> [item, ...]`` (hashable, distinct: a name, a
            tuple of names). ``compute(ctx, item)`` then runs once per item, each cached on its own
            under the stage's key plus ``{"item": item}`` and fanned out through
            :func:`symlib.book.parallel.fan_out` (so an interrupted stage resumes where it stopped,
            and independent fits run side by side under ``$SYMLIB_JOBS``); the stage's result is
            ``{item: result}``. ``compute`` must then be a module-level function.
    """

    name: str
    compute: Callable[[StageContext], Any]
    fields: tuple[str, ...] = ()
    version: str = "1"
    streams: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    legacy_seed: Callable[[int], int] | None = None
    cache: bool = True
    experiment: str | None = None
    key_data: Callable[[ProfileView], Mapping[str, Any]] | None = None
    items: Callable[[ProfileView], Any] | None = None

    def __post_init__(self):
        for attr in ("fields", "streams", "needs"):
            value = getattr(self, attr)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise TypeError(f"stage {self.name!r}: {attr} must be a tuple of names; got {value!r}")
            object.__setattr__(self, attr, tuple(value))
            if len(set(value)) != len(value):
                raise ValueError(f"stage {self.name!r}: {attr} lists a name twice: {value!r}")
        if self.legacy_seed is not None and self.streams:
            raise ValueError(f"stage {self.name!r}: declare either legacy_seed or streams, not both")

    def experiment_name(self, chapter: str) -> str:
        """The cache experiment (folder) of this stage in ``chapter``."""
        return self.experiment or f"{chapter}-{self.name}"

    def view(self, config: Any, chapter: str = "a chapter") -> ProfileView:
        """``config`` as this stage sees it: its declared fields only."""
        return ProfileView(config, self.fields, f"{chapter}: stage {self.name!r}")

    def key(self, config: Any, seed: int, device: Any = "cpu", *, item: Any = _NO_ITEM) -> dict:
        """The stage's cache key: the run seed, each declared field's value, the device, the
        ``key_data`` parts and, for one item of a fan-out stage, the item."""
        view = config if isinstance(config, ProfileView) else self.view(config)
        key = {"seed": seed, **view.fields(), **device_key(device)}
        if self.key_data is not None:
            extra = dict(self.key_data(view))
            if clash := sorted(set(extra) & (set(key) | {"item"})):
                raise ValueError(f"stage {self.name!r}: key_data gives {clash}, which the key already has")
            key.update(extra)
        if item is not _NO_ITEM:
            key["item"] = item
        return key


@dataclass(frozen=True)
class Table:
    """A table view: ``build(results)`` gives a DataFrame, shown and stored as table ``name``.

    ``paper_columns`` are shaded as the paper's numbers; ``index=False`` drops the frame's index
    (:func:`symlib.book.tables.show_table`)."""

    name: str
    build: Callable[[RunResults], Any]
    caption: str | Callable[[RunResults], str] = ""
    """The caption, or ``caption(results)`` for one that says what this run used (the data
    set a chapter found, say)."""
    formats: Mapping[str, str] | None = None
    source: str = ""
    paper_columns: tuple[str, ...] = ()
    index: bool = True
    store: bool = True
    """False for a table shown but stored elsewhere in the results file (the robustness
    overview, the errata)."""


@dataclass(frozen=True)
class Figure:
    """A figure view: ``build(results)`` gives a matplotlib figure, glued as ``name``."""

    name: str
    build: Callable[[RunResults], Any]


@dataclass(frozen=True)
class Quote:
    """A number the prose quotes: ``value(results)``, glued as ``name`` (``{glue:text}`name```):
    as a float, or as text when ``value`` gives a string (a list of names, say)."""

    name: str
    value: Callable[[RunResults], float]


@dataclass(frozen=True)
class Sweep:
    """A robustness sweep: the verdict of claim ``claim`` under the settings the paper left open.

    ``rows(results)`` gives one dict per setting, in the order run, with at least ``choice``
    (what was varied), ``setting`` (its value, as text), ``verdict`` (the reproduced column's
    outcome there: ``holds`` / ``does not hold`` / ``not judged``) and ``robust verdict`` (the
    robust column's, :attr:`symlib.book.results.Claim.robust`); the first row is the run's own
    setting (or the row whose optional ``this run`` is true). The ledger stores the table and
    appends its one-line summary
    (:func:`symlib.book.results.depends_on`) to the claim's ``ours``.

    The sweep feeds the claim's robust column (:meth:`Chapter.judged_claims`): the claim is
    robust only if it also holds under every other setting (one that does not hold makes the
    robust outcome "does not hold"), and a robust precondition asks that every setting was
    judged. No rows (``[]``) means the profile runs no such sweep: nothing is stored or
    appended, and that precondition is unmet ("not run in this profile").
    """

    claim: str
    rows: Callable[[RunResults], list[dict]]
    caption: str = ""


@dataclass
class RunResults(Mapping):
    """The results of a chapter's stages, by stage name, with the run they came from.

    What claims, views, quotes and sweeps take. ``config`` is the whole profile (claims may read
    any field: they are not cached).
    """

    stages: dict[str, Any]
    config: Any = None
    seed: int = 0
    device: Any = "cpu"
    sweep_frames: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    """Each sweep's frame once computed (:meth:`Chapter.sweep_frame`): the ledger, its summary in
    the claims and the page's robustness tables read the same rows. Not carried by
    :func:`dataclasses.replace`, so results with another config judge again."""

    def __getitem__(self, name: str):
        try:
            return self.stages[name]
        except KeyError:
            raise KeyError(f"no stage {name!r} in these results; stages: {', '.join(self.stages)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)


SWEEP_SOURCE = ("today's standard: a claim is robust when it holds under the choices its paper left open "
                "(the chapter's sensitivity sweep); the papers ran one setting")
"""The source of the sweep's robust precondition (:func:`swept`)."""


def swept(claim: Claim, frame) -> Claim:
    """``claim`` with its sensitivity sweep (a :meth:`Chapter.sweep_frame`, None: not run) in its
    robust column.

    Adds a robust precondition: every setting of the sweep judged (unmet when the profile runs
    no sweep). The robust outcome is the run's own (``robust_holds`` or the criterion's), except
    that a setting under which the claim does not hold makes it "does not hold": a claim that
    holds under one choice the paper left open and fails under another is not robust. A claim
    that fails under any fully gated setting (a sweep row whose robust verdict is "does not
    hold", or the run's own setting with every other robust precondition met) does not hold in
    the robust column even where other settings were not judged (:attr:`Claim.robust_refuted`):
    one refutation under today's standard needs no more settings. A code check is returned
    unchanged. The sweep's one-line summary is appended to ``ours``.
    """
    if claim.kind is not Kind.CLAIM:
        return claim
    if frame is None:
        gate = precondition("sweep", "the claim judged under every setting of its sensitivity sweep",
                            "not run in this profile", False, column=Column.ROBUST, source=SWEEP_SOURCE)
        return replace(claim, preconditions=(*claim.preconditions, gate))
    # the run's own setting: the row marked "this run" where the sweep marks one, else the first
    own_row = (frame["this run"].astype(bool) if "this run" in frame.columns
               else frame.index == frame.index[0])
    others = list(frame.loc[~own_row, "robust verdict"])
    settings = list(frame.loc[~own_row, "setting"])
    judged = [o for o in others if o != "not judged"]
    gate = precondition("sweep", f"the claim judged under every setting of its sensitivity sweep ({len(others)})",
                        f"{len(judged)} of {len(others)} judged", len(judged) == len(others),
                        column=Column.ROBUST, source=SWEEP_SOURCE)
    summary = depends_on(frame)
    own = claim.criterion_holds if claim.robust_holds is SAME else claim.robust_holds
    # the run's own setting refutes the claim when the criterion fails there with every robust
    # precondition met but this one (the other settings judged): "does not hold", not "not judged"
    own_gated = not claim.failed(Column.ROBUST)
    refuted = ([own_setting(frame, own_row)] if own is False and own_gated else []) + \
        [s for s, o in zip(settings, others, strict=True) if o == "does not hold"]
    robust = {}
    if own is True and "does not hold" in judged:
        robust = {"robust_holds": False,
                  "robust_ours": f"{claim.robust_ours or claim.ours}; does not hold under "
                                 f"{', '.join(s for s, o in zip(settings, others, strict=True) if o == 'does not hold')}"}
    return replace(claim, ours=f"{claim.ours}; robustness: {summary}", preconditions=(*claim.preconditions, gate),
                   robust_refuted="; ".join(refuted), **robust)


def own_setting(frame, own_row) -> str:
    """The run's own setting of a sweep frame, in words (its ``setting``, or "this run's setting")."""
    rows = frame.loc[own_row, "setting"]
    return f"this run's setting ({rows.iloc[0]})" if len(rows) else "this run's setting"


def sized_to_judge(judge: bool) -> list[Precondition]:
    """The smoke gate: a run not sized to judge claims (`smoke`) judges none of them."""
    return [] if judge else [precondition("profile", "profile sized to judge the claims",
                                          "no: sized to test the code", False,
                                          source="the profile: `smoke` runs exercise the code on tiny sizes")]


@dataclass(frozen=True)
class Chapter:
    """A chapter of the book, declared as data (see the module docstring).

    Attributes:
        name: the notebook's file name, ``NN_package``.
        paper: the paper the chapter reproduces (or what the chapter is, if none).
        profiles: ``{profile name: profile}``, all of one frozen dataclass.
        stages: run in order; a stage may need only earlier ones.
        claims: ``claims(results) -> list[Claim]``.
        errata: the paper's typos the chapter corrects: ``Erratum`` data, or
            ``errata(results) -> [Erratum, ...]`` when an erratum quotes this run's evidence.
        sweeps: robustness sweeps, one per claim at most.
        views: tables and figures, by unique name.
        quotes: the numbers the prose quotes.
        sections: claim id -> the start of the heading of the section that measures it.
        judge_field: the profile's boolean field saying whether the run is sized to judge claims.
        quick_seconds: the quick profile's wall time on the project's 2-core machine, measured
            by CI on a fresh machine (compiles included): only the order in which a fresh clone's
            build starts the chapters (:mod:`symlib.book.side_by_side`).
        machine_tables: tables that time this machine (their numbers differ between machines
            and runs; :mod:`symlib.book.compare` counts them apart).
        machine_claims: claims judged on this machine's timings.
        machine_text: a regular expression for the phrases of a claim's or robustness row's text
            that quote this machine's rates (masked before two texts are compared).
        notes: ``notes(results) -> dict`` of facts about the run that are neither tables nor
            claims (sampler statistics, compile times), written to the results file's ``notes``.
        diagnoses: ``diagnoses(results) -> {claim id: (Diagnosis, ...)}``: why each claim would
            not hold in this run (budget fraction per chain, data, protocol departure, open
            choice, or the paper's claim failing), given to the claims that carry none of their
            own. Every claim a column says "does not hold" must have one
            (:meth:`judged_claims` raises otherwise).
    """

    name: str
    paper: str
    profiles: Mapping[str, Any]
    stages: tuple[Stage, ...]
    claims: Callable[[RunResults], list[Claim]]
    errata: tuple[Erratum, ...] | Callable[[RunResults], Any] = ()
    sweeps: tuple[Sweep, ...] = ()
    views: tuple[Table | Figure, ...] = ()
    quotes: tuple[Quote, ...] = ()
    sections: Mapping[str, str] = field(default_factory=dict)
    judge_field: str | None = None
    quick_seconds: float = 0.0
    machine_tables: frozenset[str] = frozenset()
    machine_claims: frozenset[str] = frozenset()
    machine_text: str | None = None
    notes: Callable[[RunResults], Mapping[str, Any]] | None = None
    diagnoses: Callable[[RunResults], Mapping[str, Any]] | None = None

    def __post_init__(self):
        object.__setattr__(self, "stages", tuple(self.stages))
        kinds = {type(p) for p in self.profiles.values()}
        if not self.profiles or len(kinds) != 1 or not dataclasses.is_dataclass(next(iter(kinds))):
            raise TypeError(f"{self.name}: profiles must be instances of one dataclass; got {sorted(map(str, kinds))}")
        known = {f.name for f in dataclasses.fields(next(iter(kinds)))}
        seen: list[str] = []
        for stage in self.stages:
            where = f"{self.name}: stage {stage.name!r}"
            if stage.name in seen:
                raise ValueError(f"{where} is declared twice")
            if unknown := [f for f in stage.fields if f not in known]:
                raise ValueError(f"{where} declares fields {unknown} that the profile does not have ({', '.join(sorted(known))})")
            if missing := [n for n in stage.needs if n not in seen]:
                raise ValueError(f"{where} needs {missing}, which are not earlier stages ({', '.join(seen) or 'none'})")
            # its result depends on what its inputs depend on: a key without their fields would
            # serve a result computed from other inputs
            inherited = {f for n in stage.needs for f in self.stage(n).fields} - set(stage.fields)
            if inherited:
                raise ValueError(f"{where} needs {list(stage.needs)} but does not declare their fields "
                                 f"{sorted(inherited)}; add them to its fields=(...) (its cache key must include them)")
            seen.append(stage.name)
        slots: dict[tuple, str] = {}
        for stage in self.stages:  # same folder, version and field names: same keys, one entry for two results
            slot = (stage.experiment_name(self.name), stage.version, frozenset(stage.fields), stage.items is None)
            if slot in slots:
                raise ValueError(f"{self.name}: stages {slots[slot]!r} and {stage.name!r} would share their cache "
                                 f"entries ({slot[0]}, version {slot[1]}, the same fields); give one another experiment")
            slots[slot] = stage.name
        names = [v.name for v in (*self.views, *self.quotes)]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: a view or quote name is used twice: {names}")
        if self.judge_field is not None and self.judge_field not in known:
            raise ValueError(f"{self.name}: judge_field {self.judge_field!r} is not a profile field")
        self.streams(0)  # fails now if two named streams coincide

    # --- compute ----------------------------------------------------------------------

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"{self.name} has no stage {name!r}; stages: {', '.join(s.name for s in self.stages)}")

    def run_stages(self, config: Any, *, seed: int, device: Any = "cpu", refresh: bool = False,
                   deadline: float | None = None) -> RunResults:
        """Run every stage in order (through the cache where ``stage.cache``) and return the
        results; ``deadline``: when the stages must stop (:attr:`StageContext.deadline`)."""
        out: dict[str, Any] = {}
        for stage in self.stages:
            ctx = StageContext(
                chapter=self.name, stage=stage, device=device, run_seed=seed,
                config=stage.view(config, self.name), inputs={n: out[n] for n in stage.needs}, deadline=deadline,
            )
            if stage.items is not None:
                out[stage.name] = self._fan_out(stage, ctx, refresh=refresh)
            elif stage.cache:
                out[stage.name] = cached(stage.experiment_name(self.name), stage.version,
                                         stage.key(ctx.config, seed, device), functools.partial(stage.compute, ctx),
                                         refresh=refresh)
            else:
                out[stage.name] = stage.compute(ctx)
        return RunResults(out, config=config, seed=seed, device=device)

    def _fan_out(self, stage: Stage, ctx: StageContext, *, refresh: bool) -> dict:
        """A fan-out stage: one cached task per item, through :func:`symlib.book.parallel.fan_out`."""
        items = list(stage.items(ctx.config))
        if len(set(items)) != len(items):
            raise ValueError(f"{self.name}: stage {stage.name!r} lists an item twice: {items!r}")
        values = parallel.fan_out(_stage_item, [(ctx, item, refresh) for item in items], threads=None,
                         progress=len(items) > 1, desc=f"{self.name}: {stage.name}")
        return dict(zip(items, values, strict=True))

    def start(self, *, profile: str, seed: int, device: str):
        """:func:`symlib.book.runtime.start` for this chapter: the notebook's validated run."""
        return runtime.start(self.name, self.profiles, profile=profile, seed=seed, device=device)

    def glance(self, run):
        """The box that opens the chapter's page: each claim's two verdicts in the published run
        in front (``paper`` where published, else ``full``: :func:`symlib.book.cards.glance`),
        linked to its card in the ledger."""

        record, stale = tables.published_tier(self.name, run.config)
        line = tables.provenance_line(record, stale) if record is not None else ""
        return HTML(cards.glance(self.name, record, stale=stale, provenance=line))

    def compute(self, run) -> RunResults:
        """:meth:`run_stages` with a notebook run's profile, seed, device and deadline."""
        return self.run_stages(run.config, seed=run.seed, device=run.device, deadline=run.deadline)

    # --- streams ----------------------------------------------------------------------

    def streams(self, seed: int) -> list[Stream]:
        """Every named stream the chapter's stages declare for run seed ``seed``; checked distinct.

        Raises:
            ValueError: two of them coincide (:func:`symlib.book.streams.check_distinct`).
        """
        out = [Stream(seed, self.name, s.name, p) for s in self.stages for p in s.streams]
        check_distinct(out)
        return out

    def legacy_aliases(self, seed: int) -> list[tuple[str, str]]:
        """Pairs of legacy stages that use the same seed for run seed ``seed`` (their draws start
        alike); named streams would separate them."""
        legacy = [(s.name, s.legacy_seed(seed)) for s in self.stages if s.legacy_seed is not None]
        return [(a, b) for i, (a, sa) in enumerate(legacy) for b, sb in legacy[i + 1:] if sa == sb]

    # --- ledger -----------------------------------------------------------------------

    def judged_claims(self, results: RunResults) -> list[Claim]:
        """The chapter's claims with the smoke gate and the robustness sweeps applied (:func:`swept`).

        Raises:
            ValueError: a claim's precondition gates the reproduced column (``column`` reproduced
                or both) and cites no ``source``: that column is gated only by properties the
                paper's own run is shown or stated to have, each citing where.
        """
        claims = self.claims(results)
        if not isinstance(claims, list) or not all(isinstance(c, Claim) for c in claims):
            raise TypeError(f"{self.name}: claims(results) must return a list of symlib.book.results.Claim; "
                            f"got {[type(c).__name__ for c in claims] if isinstance(claims, list) else type(claims).__name__}")
        if self.judge_field is not None:
            gate = sized_to_judge(bool(getattr(results.config, self.judge_field)))
            claims = [replace(c, preconditions=(*c.preconditions, *gate)) if c.kind is Kind.CLAIM else c for c in claims]
        ids = {c.id for c in claims}
        for sweep in self.sweeps:
            if sweep.claim not in ids:
                raise ValueError(f"{self.name}: robustness sweep of {sweep.claim!r}, which is not a claim ({', '.join(ids)})")
            frame = self.sweep_frame(sweep, results)
            claims = [swept(c, frame) if c.id == sweep.claim else c for c in claims]
        if self.diagnoses is not None:
            given = self.diagnoses(results)
            if unknown := set(given) - ids:
                raise ValueError(f"{self.name}: diagnoses of {sorted(unknown)}, which are not claims ({', '.join(ids)})")
            claims = [replace(c, diagnosis=given[c.id]) if c.id in given and not c.diagnosis else c for c in claims]
        undiagnosed = [c.id for c in claims if c.fails and not c.diagnosis]
        if undiagnosed:
            raise ValueError(f"{self.name}: every claim that does not hold says why (Claim.diagnosis: budget, data, "
                             f"protocol departure, open choice or the paper's claim failing); none for "
                             f"{', '.join(undiagnosed)}")
        for c in claims:
            swept_choices = self._sweep_choices(c.id, results)
            for d in c.diagnosis:
                if d.cause is Cause.OPEN_CHOICE and swept_choices is not None and d.sweep not in swept_choices:
                    raise ValueError(f"{self.name}: claim {c.id!r} names the open choice {d.sweep!r}, which its "
                                     f"sensitivity sweep does not vary ({', '.join(sorted(swept_choices)) or 'none'})")
        unsourced = [f"{c.id}: {p.name}" for c in claims if c.kind is Kind.CLAIM
                     for p in c.preconditions if p.gates(Column.REPRODUCED) and not p.source]
        if unsourced:
            raise ValueError(f"{self.name}: a precondition of the reproduced column must cite where the paper's run is "
                             f"shown or stated to have it (Precondition.source); none given for {', '.join(unsourced)}")
        return claims

    def _sweep_choices(self, claim_id: str, results: RunResults) -> set[str] | None:
        """The choices the sweep of ``claim_id`` varies in this run; None when it runs none (no
        sweep, or a profile that runs no such sweep): an open choice is then not checked."""
        for sweep in self.sweeps:
            if sweep.claim == claim_id:
                frame = self.sweep_frame(sweep, results)
                return None if frame is None else {str(c) for c in frame["choice"]}
        return None

    def errata_of(self, results: RunResults) -> tuple[Erratum, ...]:
        """The errata this run records (:attr:`errata`, called on ``results`` if it is a function)."""
        errata = self.errata(results) if callable(self.errata) else self.errata
        if not all(isinstance(e, Erratum) for e in errata):
            raise TypeError(f"{self.name}: errata must be symlib.book.results.Erratum; got {[type(e).__name__ for e in errata]}")
        return tuple(errata)

    def sweep_frame(self, sweep: Sweep, results: RunResults):
        """A sweep's rows as a DataFrame, checked for the one shape; None when it gives no rows
        (the profile runs no such sweep). Computed once per sweep and results."""
        import pandas as pd

        if sweep in results.sweep_frames:
            return results.sweep_frames[sweep]
        rows = sweep.rows(results)
        frame = pd.DataFrame(rows) if len(rows) else None
        if frame is not None and (missing := {"choice", "setting", "verdict", "robust verdict"} - set(frame.columns)):
            raise ValueError(f"{self.name}: sweep of {sweep.claim!r} must give rows with choice, setting, verdict "
                             f"and robust verdict; missing {sorted(missing)}")
        results.sweep_frames[sweep] = frame
        return frame

    def ledger(self, run, results: RunResults) -> dict:
        """Add claims, errata and robustness to ``run``'s results, write them, show the ledger.

        Returns:
            The written results record (:func:`symlib.book.tables.show_ledger`).
        """
        run.results.add_claims(self.judged_claims(results))
        if self.notes is not None:
            run.results.notes.update(self.notes(results))
        for erratum in self.errata_of(results):
            run.results.add_erratum(**dataclasses.asdict(erratum))
        for sweep in self.sweeps:
            if (frame := self.sweep_frame(sweep, results)) is not None:
                run.results.add_robustness(sweep.claim, frame, caption=sweep.caption)
        return tables.show_ledger(run, sections=dict(self.sections))

    # --- views ------------------------------------------------------------------------

    def view(self, name: str) -> Table | Figure:
        for view in self.views:
            if view.name == name:
                return view
        raise KeyError(f"{self.name} has no view {name!r}; views: {', '.join(v.name for v in self.views)}")

    def show(self, run, results: RunResults, name: str):
        """Show view ``name``: a table is numbered and stored in the results file (returns its
        HTML); a figure is glued as ``name`` and returned (the page shows it through a
        ``glue:figure`` directive; close it after)."""
        view = self.view(name)
        if isinstance(view, Table):
            caption = view.caption(results) if callable(view.caption) else view.caption
            return tables.show_table(run, view.name, view.build(results), caption=caption,
                                     source=view.source, formats=dict(view.formats) if view.formats else None,
                                     paper_columns=list(view.paper_columns) or None, index=view.index,
                                     store=view.store)

        fig = view.build(results)
        myst_nb.glue(view.name, fig, display=False)
        return fig

    def show_robustness(self, run, results: RunResults) -> None:
        """Show every sweep this profile runs: its one-line summary and its table (the ledger
        stores them; :meth:`ledger`)."""

        for sweep in self.sweeps:
            frame = self.sweep_frame(sweep, results)
            if frame is None:
                continue
            display(Markdown(f"**{sweep.claim}**: {depends_on(frame)}."))
            display(tables.show_table(run, f"robustness {sweep.claim}", frame, store=False,
                                      caption=sweep.caption or f"Verdict of {sweep.claim} under each setting"))

    def show_errata(self, run, record: Mapping):
        """The errata table of a written results ``record`` (:meth:`ledger`'s return), or None
        when the chapter records none."""
        if not record.get("errata"):
            return None
        return tables.show_table(run, "errata", errata_frame([record])[["id", "where", "paper_says", "correction"]],
                                 caption="Errata: what the paper printed and what this chapter uses", store=False)

    def footer(self, record: Mapping, extra: str = ""):
        """The page's last line: profile, seed, device, wall time, versions and results file of a
        written results ``record``; ``extra`` is added after the wall time."""
        extra = f" ({extra})" if extra else ""
        return Markdown(
            f"*Reproducibility: profile `{record['profile']}`, seed {record['seed']}, device `{record['device']}`, "
            f"wall time {record['wall_time_s']:.1f} s{extra}, torch {record['versions']['torch']}, "
            f"symlib {record['versions']['symlib']}. Results file: `results/{record['chapter']}.json`.*"
        )

    def glue(self, results: RunResults) -> None:
        """Glue every quote as a float or text (``display=False``), for ``{glue:text}`` in the prose.

        Returns None, so that a notebook cell ending with this call shows nothing."""
        for quote in self.quotes:
            value = quote.value(results)
            myst_nb.glue(quote.name, value if isinstance(value, str) else float(value), display=False)


def _stage_item(ctx: StageContext, item: Any, refresh: bool):
    """One item of a fan-out stage, through the cache where ``stage.cache`` (a joblib task)."""
    stage = ctx.stage
    if not stage.cache:
        return stage.compute(ctx, item)
    key = stage.key(ctx.config, ctx.run_seed, ctx.device, item=item)
    return cached(stage.experiment_name(ctx.chapter), stage.version, key,
                  functools.partial(stage.compute, ctx, item), refresh=refresh)
