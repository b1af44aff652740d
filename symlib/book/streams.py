"""Named random streams: every random draw of a chapter comes from a stream with a name.

A stream is named by four things: the run's ``seed``, the ``chapter``, the ``stage`` (the cached
unit of compute that draws from it) and the ``purpose`` of the draws (``"init"``,
``"minibatches"``, ``"mc-noise"``, ...). Its state is derived by hashing a canonical encoding of
the four (SHA-256 of their JSON), never by arithmetic on the seed: with ``seed * 1000 + 2`` two
streams meant to be independent can coincide (seed 0's stream 1002 is seed 1's stream 2), while
two different names here coincide only if SHA-256 collides.

One name gives the same stream in every process and on every machine (no Python ``hash``, no
global state), and in three forms, for the three kinds of consumer:

- :meth:`Stream.torch`: a ``torch.Generator`` on a device, seeded with :meth:`Stream.seed63`;
- :meth:`Stream.numpy`: a ``numpy.random.Generator`` (PCG64) whose ``SeedSequence`` takes all
  256 bits of the hash as entropy;
- :meth:`Stream.seed63` / :meth:`Stream.stan_seed`: a plain integer for libraries that take one,
  63 bits for most, 31 bits for Stan (whose seed is a 32-bit integer).

Generators are passed explicitly to the code that draws (blackjax's habit); this module keeps
no global generator and never touches torch's or numpy's global state::

    from symlib.book.streams import Stream

    init = Stream(seed, "05_rebasin_hmc", "vi", "init").torch(device)
    noise = Stream(seed, "05_rebasin_hmc", "vi", "mc-noise").torch(device)
    stan_seed = Stream(seed, "04_constrained_models", "boston", "nuts").stan_seed()

:func:`check_distinct` is what a chapter's stream-independence test calls on all its names.

Changing :func:`encode` or :data:`DERIVATION` changes every stream, hence every number of every
chapter that draws from one: tests/book/test_streams.py pins golden values so that such a
change cannot go unnoticed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "DERIVATION",
    "SEED_BITS",
    "STAN_SEED_BITS",
    "Stream",
    "check_distinct",
    "encode",
    "numpy_generator",
    "seed63",
    "stan_seed",
    "torch_generator",
]

DERIVATION = "symlib.streams/1"
"""Part of the hashed encoding: a new derivation gets a new tag, so that its streams differ from
every stream of the old one rather than partly coinciding with them."""

SEED_BITS = 63
"""Bits of :meth:`Stream.seed63`: non-negative and below ``2**63``, so it fits
``torch.Generator.manual_seed`` (a signed 64-bit integer) and any library taking an int64."""

STAN_SEED_BITS = 31
"""Bits of :meth:`Stream.stan_seed`. Stan's seed is a 32-bit ``unsigned int``; 31 bits also fit a
signed 32-bit integer, which some interfaces (older CmdStan, R) require."""

_NAME_FIELDS = ("chapter", "stage", "purpose")


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"stream seed must be a non-negative int; got {seed!r} of type {type(seed).__name__}")
    if not 0 <= seed < 2**64:
        raise ValueError(f"stream seed must be in [0, 2**64); got {seed}")
    return seed


def _check_name(field: str, value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"stream {field} must be a string; got {value!r} of type {type(value).__name__}")
    if not value or value != value.strip():
        # " init" and "init" would be two streams that read as one: refuse both blank and padded
        raise ValueError(f"stream {field} must be a non-empty string without surrounding whitespace; got {value!r}")
    return value


def encode(seed: int, chapter: str, stage: str, purpose: str) -> bytes:
    """The canonical bytes a stream's name hashes: JSON with sorted keys, ASCII only.

    JSON quotes each field, so no two different names share an encoding (unlike a joined string,
    where ``("a-b", "c")`` and ``("a", "b-c")`` would).

    Raises:
        TypeError: ``seed`` is not an int (bools and floats are refused) or a name is not a str.
        ValueError: ``seed`` is negative or ``>= 2**64``, or a name is empty or padded with spaces.
    """
    fields = {
        "derivation": DERIVATION,
        "seed": _check_seed(seed),
        **{f: _check_name(f, v) for f, v in zip(_NAME_FIELDS, (chapter, stage, purpose), strict=True)},
    }
    return json.dumps(fields, sort_keys=True, ensure_ascii=True, separators=(",", ":")).encode("ascii")


@dataclass(frozen=True)
class Stream:
    """The random stream named ``(seed, chapter, stage, purpose)``; see the module docstring.

    The fields are checked when the stream is made (:func:`encode` says what is refused).
    Each method returns a fresh generator or integer: two calls give two generators at the start
    of the same stream, not one shared generator.
    """

    seed: int
    chapter: str
    stage: str
    purpose: str

    def __post_init__(self):
        encode(self.seed, self.chapter, self.stage, self.purpose)  # fail now, not at the first draw

    @property
    def digest(self) -> bytes:
        """SHA-256 of :func:`encode` of the name: 32 bytes, all derived seeds come from it."""
        return hashlib.sha256(encode(self.seed, self.chapter, self.stage, self.purpose)).digest()

    def seed63(self) -> int:
        """A plain seed in ``[0, 2**63)`` for a library that takes an integer (the first 63 bits
        of :attr:`digest`)."""
        return int.from_bytes(self.digest[:8], "big") >> (64 - SEED_BITS)

    def stan_seed(self) -> int:
        """A seed for Stan in ``[0, 2**31)`` (:data:`STAN_SEED_BITS`): bits of :attr:`digest` other
        than :meth:`seed63`'s, so the two are not the same number truncated."""
        return int.from_bytes(self.digest[8:12], "big") >> (32 - STAN_SEED_BITS)

    def torch(self, device="cpu"):
        """A ``torch.Generator`` on ``device`` seeded with :meth:`seed63`.

        Args:
            device: where the generator draws (``"cpu"``, ``"cuda"``, a ``torch.device``); it must
                be the device of the tensors it fills.

        Raises:
            ValueError: torch does not know ``device`` or cannot make a generator on it.
        """
        import torch

        try:
            generator = torch.Generator(device=device)
        except (RuntimeError, TypeError) as error:
            raise ValueError(
                f"cannot make a torch.Generator on device {device!r} for stream {self.name}: {error}; "
                "pass the device the run computes on (e.g. run.device)"
            ) from error
        return generator.manual_seed(self.seed63())

    def numpy(self):
        """A ``numpy.random.Generator`` (PCG64) whose ``SeedSequence`` has all of :attr:`digest`
        as entropy."""
        import numpy as np

        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int.from_bytes(self.digest, "big"))))

    @property
    def name(self) -> str:
        """The name as text, for messages: ``seed 0 / 05_rebasin_hmc / vi / init``."""
        return f"seed {self.seed} / {self.chapter} / {self.stage} / {self.purpose}"


def torch_generator(seed: int, chapter: str, stage: str, purpose: str, *, device="cpu"):
    """``Stream(seed, chapter, stage, purpose).torch(device)``."""
    return Stream(seed, chapter, stage, purpose).torch(device)


def numpy_generator(seed: int, chapter: str, stage: str, purpose: str):
    """``Stream(seed, chapter, stage, purpose).numpy()``."""
    return Stream(seed, chapter, stage, purpose).numpy()


def seed63(seed: int, chapter: str, stage: str, purpose: str) -> int:
    """``Stream(seed, chapter, stage, purpose).seed63()``: an integer in ``[0, 2**63)``."""
    return Stream(seed, chapter, stage, purpose).seed63()


def stan_seed(seed: int, chapter: str, stage: str, purpose: str) -> int:
    """``Stream(seed, chapter, stage, purpose).stan_seed()``: an integer in ``[0, 2**31)``."""
    return Stream(seed, chapter, stage, purpose).stan_seed()


def check_distinct(streams: Iterable[Stream]) -> None:
    """Check that no two of ``streams`` coincide: distinct names, distinct :meth:`~Stream.seed63`
    and distinct :meth:`~Stream.stan_seed`.

    A chapter's stream-independence test passes every stream it draws from. The same name
    listed twice is reported too: two stages sharing a name share their draws.

    Raises:
        ValueError: naming the two streams that coincide and in what.
    """
    seen: dict[tuple[str, object], Stream] = {}
    for stream in streams:
        if not isinstance(stream, Stream):
            raise TypeError(f"check_distinct takes Stream objects; got {stream!r} of type {type(stream).__name__}")
        for what, value in (("name", stream.name), ("seed63", stream.seed63()), ("stan_seed", stream.stan_seed())):
            if (what, value) in seen:
                other = seen[what, value]
                raise ValueError(f"streams {other.name!r} and {stream.name!r} coincide (same {what}: {value})")
            seen[what, value] = stream
