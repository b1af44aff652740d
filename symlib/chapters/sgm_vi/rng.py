"""Chapter 3's random generators, as they were before the chapter contract.

Every generator of the chapter comes from one numpy ``SeedSequence`` per ``(run seed, stream,
extra ints)``: the stream's number in :data:`LEGACY_STREAMS` and, for MNIST, the hidden width.
Stages therefore declare the run seed itself as their ``legacy_seed`` and build their generators
here, in the order they did before, so that the migration moves no number. Moving them onto the
contract's named streams (:class:`symlib.book.streams.Stream`) would move numbers: a change of
its own.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["LEGACY_STREAMS", "generator", "run_seed"]

LEGACY_STREAMS = {"interp": 0, "prox": 1, "toy_data": 2, "toy_init": 3, "toy_noise": 4, "toy_perm": 5,
                  "toy_order": 6, "toy_eval": 7, "mnist_init": 8, "mnist_noise": 9, "mnist_perm": 10,
                  "mnist_order": 11, "mnist_eval": 12, "cost": 13}
"""Stream name -> the integer that makes its SeedSequence differ from every other stream's."""


def run_seed(seed: int) -> int:
    """Every stage's ``legacy_seed``: the run seed itself (the streams differ by their entropy)."""
    return seed


def generator(seed: int, stream: str, *extra: int, device: torch.device | str = "cpu") -> torch.Generator:
    """An independent generator per (run seed, stream, extra ints), via numpy's SeedSequence.

    Raises:
        KeyError: ``stream`` is not one of :data:`LEGACY_STREAMS`.
    """
    if stream not in LEGACY_STREAMS:
        raise KeyError(f"unknown stream {stream!r}; chapter 3's streams: {', '.join(LEGACY_STREAMS)}")
    entropy = [int(seed), LEGACY_STREAMS[stream], *(int(e) for e in extra)]
    state = np.random.SeedSequence(entropy).generate_state(2, dtype=np.uint32)
    return torch.Generator(device=device).manual_seed(int(state[0]) << 32 | int(state[1]))
