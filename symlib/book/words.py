"""How the book words a verdict and a code name for the reader: the status badge of a verdict
(symbol and colour class, :func:`status_badge`) and a code identifier in words
(:func:`reader_words`). The ledger's cards (:mod:`symlib.book.cards`) and the chapter tables
(:mod:`symlib.book.tables`) both use them.
"""

from __future__ import annotations

import html
import re

__all__ = ["READER_WORDS", "STATUS", "reader_words", "status_badge"]

STATUS = {
    "holds": ("✓", "holds"),
    "does not hold": ("✗", "fails"),
    "not judged": ("○", "unjudged"),
    "code check": ("⚙", "codecheck"),
    "—": ("·", "absent"),
}
"""Verdict -> (symbol, CSS class suffix): the ledger never relies on colour alone."""


def _status(verdict: str, kind: str = "claim") -> tuple[str, str]:
    key = "not judged" if verdict.startswith("not judged") else verdict
    symbol, cls = STATUS.get(key, STATUS["—"])
    if kind == "code check" and key == "holds":
        symbol, cls = STATUS["code check"]
    return symbol, cls


def status_badge(verdict: str, kind: str = "claim") -> str:
    """A verdict as a coloured badge with its symbol (``✓ holds``); the text keeps the detail."""
    symbol, cls = _status(verdict, kind)
    return f'<span class="symlib-status symlib-{cls}">{symbol} {html.escape(verdict)}</span>'


READER_WORDS = {"rhat": "R-hat", "ess": "ESS", "mnist": "MNIST", "optunet": "OptuNet", "mmd": "MMD", "ood": "OOD",
                "init": "initial", "hmc": "HMC", "mfvi": "MFVI", "sgm": "SGM", "mc": "MC", "kl": "KL", "tv": "TV",
                "nuts": "NUTS", "advi": "ADVI", "swag": "SWAG", "lr": "learning rate", "w": "weight", "n": "number of"}
"""How the parts of a code identifier read in words (:func:`reader_words`); a part not listed
reads as itself."""

_IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b|\b(?:rhat)\b")


def reader_words(text: str) -> str:
    """``text`` with each code identifier (a snake_case name: a profile field a sweep varies, a
    precondition's name) in words: ``mnist_init_sd = 0.1`` -> ``MNIST initial sd = 0.1``,
    ``rhat (robust), bulk_ess (robust)`` -> ``R-hat (robust), bulk ESS (robust)``. A name with a
    one-letter part of two is math, not code, and stays: ``q_r``, ``d_h``, ``prod_l`` (but a count
    ``n_steps`` reads "number of steps"). Comparisons,
    written in code as ``<=`` and ``>=``, read as math: ``≤`` and ``≥``."""
    def words(m):
        parts = m[0].split("_")
        if len(parts) == 2 and min(map(len, parts)) < 2 and not (parts[0] == "n" and len(parts[1]) > 2):
            return m[0]   # math (q_r, d_h), but a count named n_<word> (n_steps) reads in words
        return " ".join(READER_WORDS.get(part, part) for part in parts)

    return _IDENTIFIER.sub(words, text).replace("<=", "≤").replace(">=", "≥")
