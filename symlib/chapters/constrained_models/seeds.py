"""Chapter 4's random numbers, as they were before the chapter contract.

Every generator of the chapter is derived from the run seed, a stream index (:data:`STREAMS`)
and further integers (a fit's index, a split) through numpy's ``SeedSequence``, so two draws
share no stream and the order in which fits run moves no number. The stages declare the run
seed itself as their ``legacy_seed``; moving them onto :class:`symlib.book.streams.Stream`
would move numbers, so it is a change of its own.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["STREAMS", "generator", "stan_seed"]

STREAMS = {"prior": 0, "synth_data": 1, "advi": 2, "predictive": 3, "boston_split": 4,
           "stan": 5, "advi_draws": 6}
"""Stream index per purpose (the second entry of every ``SeedSequence``)."""


def stan_seed(seed: int, index: int) -> int:
    """The seed of Stan fit ``index`` for run seed ``seed`` (in ``[1, 2**31 - 2]``, as Stan wants)."""
    state = np.random.SeedSequence([int(seed), STREAMS["stan"], int(index)]).generate_state(1)
    return int(state[0] % (2**31 - 2)) + 1


def generator(seed: int, stream: str, *extra: int) -> torch.Generator:
    """An independent generator per (run seed, stream, extra ints), via numpy's SeedSequence."""
    entropy = [int(seed), STREAMS[stream], *(int(e) for e in extra)]
    state = np.random.SeedSequence(entropy).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))
