"""Start a chapter run: validate the papermill parameters, pick the device, open the ledger.

Every notebook begins with the same three parameters (``profile``, ``seed``, ``device``) which
papermill may overwrite. :func:`start` checks them all before any work is done, so a typo or a
wrongly typed value fails at the top of the page with an error that names the fix, and nothing
that an earlier run wrote is touched.

It also reads the run's time limit (:func:`piece_deadline`: ``$SYMLIB_BUDGET_S`` seconds from
``$SYMLIB_PIECE_START``), the one place a chapter's stages get it from: the run carries it as a
deadline to :meth:`symlib.book.chapter.Chapter.compute`, which hands it to every stage
(:attr:`symlib.book.chapter.StageContext.deadline`).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from symlib.book.cache import cached_only
from symlib.book.profiles import select_profile
from symlib.book.results import ChapterResults, check_writable

__all__ = ["BUDGET_ENV", "PIECE_START_ENV", "ChapterRun", "budget_from_env", "check_seed", "piece_deadline",
           "resolve_device", "start", "torch_threads"]

BUDGET_ENV = "SYMLIB_BUDGET_S"
"""Seconds each chapter of a command may compute (unset: no limit)."""
PIECE_START_ENV = "SYMLIB_PIECE_START"
"""When the chapter's piece began (seconds since the epoch): set by ``pipeline execute`` /
``compute`` for each chapter (its kernel inherits it), so that its budget counts from there."""

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?|mps)$")
SEED_LIMIT = 2**32
"""Seeds are below 2**32: chapters derive generator seeds by arithmetic on the run's seed (chapter
5: ``seed * 1000 + k``), which must still fit torch's signed 64-bit generator seed, and numpy's
legacy ``RandomState`` takes no more than 32 bits."""


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Turn ``"auto" | "cpu" | "cuda" | "cuda:N" | "mps"`` into an available ``torch.device``.

    ``"auto"`` picks the first CUDA GPU when torch sees one, else the CPU.

    Raises:
        TypeError: ``device`` is not a string or ``torch.device``.
        ValueError: unknown name, or a GPU was asked for that this machine / torch build lacks.
    """
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise TypeError(
            f"device must be a string such as 'auto', 'cpu' or 'cuda'; got {device!r} of type "
            f"{type(device).__name__} (papermill: -p device cpu)"
        )
    name = device.strip().lower()
    if not _DEVICE_RE.match(name):
        raise ValueError(f"unknown device {device!r}; valid: 'auto', 'cpu', 'cuda', 'cuda:N', 'mps'")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if cached_only():  # re-rendering a GPU run from its cache: the device is a cache key only
            return torch.device(name)
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {device!r} was requested but torch {torch.__version__} sees no CUDA GPU here; "
                "use device='cpu' or 'auto' (on a GPU machine install a CUDA build of torch, see README)"
            )
        index = int(name.split(":")[1]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) visible")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' was requested but is not available; use 'cpu' or 'auto'")
    return torch.device(name)


@contextlib.contextmanager
def torch_threads(n: int | None):
    """Temporarily set torch's intra-op threads to ``n`` (``None``: leave them), then restore.

    Small-op training loops run faster on one thread on a 2-core machine; restoring keeps the
    setting from leaking into the rest of a notebook or a test run.
    """
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def check_seed(seed) -> int:
    """The run's seed as an ``int`` in ``[0, 2**32)`` (bools and floats are refused, not rounded).

    The bound (:data:`SEED_LIMIT`) leaves room for the arithmetic chapters do on the seed before
    it reaches ``torch.Generator.manual_seed`` (a signed 64-bit integer); a larger seed would
    otherwise pass here and fail mid-run with "Overflow when unpacking long long".
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be a non-negative integer; got {seed!r} of type {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed}")
    if seed >= SEED_LIMIT:
        raise ValueError(
            f"seed must be below 2**32 = {SEED_LIMIT}; got {seed}. Chapters derive further seeds "
            "from it (e.g. seed * 1000 + k), which must still fit torch's 64-bit generator seed; "
            "pick a smaller seed (papermill: -p seed 1)"
        )
    return seed


def budget_from_env() -> float | None:
    """``$SYMLIB_BUDGET_S`` as seconds (unset or empty: no budget).

    Raises:
        ValueError: the variable is not a positive number.
    """
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{BUDGET_ENV}={raw!r}: give the seconds a piece may run, a positive number")
    return value


def piece_deadline() -> float | None:
    """When this chapter's piece must stop (seconds since the epoch): ``$SYMLIB_PIECE_START``
    (or now, when unset) plus :func:`budget_from_env`; None without a budget.

    Raises:
        ValueError: either variable is not a number (the budget: not a positive one).
    """
    budget = budget_from_env()
    if budget is None:
        return None
    raw = os.environ.get(PIECE_START_ENV, "").strip()
    try:
        started = float(raw) if raw else time.time()
    except ValueError:
        raise ValueError(f"{PIECE_START_ENV}={raw!r}: the piece's start in seconds since the epoch") from None
    return started + budget


@dataclass
class ChapterRun:
    """What a notebook needs after its parameters cell: validated settings and the ledger."""

    chapter: str
    profile: str
    config: object
    seed: int
    device: torch.device
    results: ChapterResults
    deadline: float | None = None
    """When the run's stages must stop (:func:`piece_deadline`); None: no time limit."""

    def generator(self, offset: int = 0) -> torch.Generator:
        """A fresh CPU generator seeded with ``seed + offset`` (explicit randomness, no global RNG)."""
        return torch.Generator().manual_seed(self.seed + offset)

    def finish(self):
        """Write ``results/<chapter>.json`` and return its path."""
        return self.results.write()


def start(
    chapter: str, profiles: Mapping[str, object], *, profile: str, seed: int, device: str
) -> ChapterRun:
    """Validate a notebook's parameters and open its results ledger.

    ``profiles`` are the chapter's own (``symlib.chapters.<chapter>.PROFILES``).

    Raises TypeError / ValueError naming the fix for an unknown profile or device, a GPU that is
    not there, a parameter of the wrong type or a bad ``$SYMLIB_BUDGET_S``, and OSError if the
    results directory (``SYMLIB_RESULTS``) cannot be written.
    """
    config = select_profile(chapter, profiles, profile)
    seed = check_seed(seed)
    dev = resolve_device(device)
    check_writable()  # now, not after the chapter has run
    results = ChapterResults(chapter=chapter, profile=profile, seed=seed, device=str(dev), config=config)
    return ChapterRun(chapter=chapter, profile=profile, config=config, seed=seed, device=dev, results=results,
                      deadline=piece_deadline())
