"""Chapter 2b's out-of-distribution inputs: Fashion-MNIST's test images, as in the paper, or the
grey-patch stand-in where Fashion-MNIST's files are absent, decided when the chapter runs.

``ood_source`` (a profile field) is ``"fashion"`` (Fashion-MNIST's IDX files, an error when
absent), ``"patches"`` (:func:`symlib.data.ood_patches`, always) or ``"auto"``: Fashion-MNIST
when :func:`symlib.data.idx_available` finds its files (``$SYMLIB_FASHION_MNIST``,
``<data root>/fashion-mnist/`` or Debian's ``/usr/share/datasets/fashion-mnist/``), else the
stand-in. Every profile but `smoke` says ``"auto"``. The set used (:func:`resolve`) enters the
stages' cache keys (:func:`key_data`), the ``eval`` stage's result (:func:`record`), the claims
that rest on OOD metrics and the table captions (:func:`describe`).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from symlib.chapters.symmetry_removal.reference import mnist_source
from symlib.data import data_fingerprint, idx_available, load_fashion_mnist, ood_patches

__all__ = ["OOD_SOURCES", "describe", "inputs", "key_data", "of", "record", "resolve"]

OOD_SOURCES = ("auto", "fashion", "patches")
"""The values of the profile field ``ood_source``."""


def resolve(ood_source: str) -> str:
    """The OOD set a run with ``ood_source`` uses now: ``"fashion"`` or ``"patches"``."""
    if ood_source not in OOD_SOURCES:
        raise ValueError(f"ood_source must be one of {', '.join(map(repr, OOD_SOURCES))}, not {ood_source!r}")
    if ood_source == "auto":
        return "fashion" if idx_available("fashion-mnist") else "patches"
    return ood_source


def inputs(ood_source: str, points: int) -> torch.Tensor:
    """``points`` OOD images ``(N, 1, 28, 28)`` in ``[0, 1]``: the first ``points`` of
    Fashion-MNIST's test images, or as many grey patches (seed 0)."""
    if resolve(ood_source) == "fashion":
        return load_fashion_mnist(flatten=False)["x_test"][:points]
    return ood_patches(points, seed=0).reshape(-1, 1, 28, 28)


def key_data(config) -> dict:
    """The cache-key parts of a stage that sees the OOD inputs: the digits' and Fashion-MNIST's
    file fingerprints (:func:`symlib.data.data_fingerprint`, the digits' source resolved by
    :func:`~symlib.chapters.symmetry_removal.reference.mnist_source`) and, for ``"auto"``, the set
    it resolved to (a run with the files and one without never share an entry)."""
    used = resolve(config.ood_source)
    out = data_fingerprint(mnist_source(config), fashion=used == "fashion")
    if config.ood_source == "auto":
        out["ood_set"] = used
    return out


def record(ood_source: str, points: int) -> dict:
    """What the ``eval`` stage stores of its OOD inputs: ``{"set", "source", "points"}``."""
    return {"set": resolve(ood_source), "source": ood_source, "points": int(points)}


def of(evaluation: Mapping, config=None) -> dict | None:
    """The OOD record of an ``eval`` result; for a result cached before it carried one, the
    record ``config`` implies where it is unambiguous (``"fashion"`` or ``"patches"``), else None."""
    if "ood" in evaluation:
        return evaluation["ood"]
    if config is not None and config.ood_source in ("fashion", "patches"):
        return {"set": config.ood_source, "source": config.ood_source, "points": int(config.ood_points)}
    return None


def describe(ood: Mapping | None) -> str:
    """The OOD set in words, for claims and captions (``""`` for an unknown one)."""
    if ood is None:
        return ""
    if ood["set"] == "fashion":
        return f"OOD: Fashion-MNIST test images (the first {ood['points']:,} of 10,000)"
    why = ("Fashion-MNIST's files not found" if ood["source"] == "auto"
           else "as the profile asks")
    return (f"OOD: grey-patch stand-in ({ood['points']:,} patches of scikit-learn's sample "
            f"photographs; {why})")
