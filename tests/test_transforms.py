"""The ordered transform: monotone, invertible, log-Jacobian equal to autograd's."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from symlib.transforms import (
    ordered_from_unconstrained,
    ordered_log_abs_det_jacobian,
    unconstrained_from_ordered,
)

vectors = st.integers(1, 8).flatmap(
    lambda k: arrays(np.float64, (k,), elements=st.floats(-4.0, 4.0, allow_nan=False))
)


@settings(max_examples=60, deadline=None)
@given(vectors)
def test_ordered_is_strictly_increasing_and_round_trips(y):
    y = torch.as_tensor(y)
    x = ordered_from_unconstrained(y)
    assert torch.all(x[1:] > x[:-1])
    assert x[0] == y[0]
    assert torch.allclose(unconstrained_from_ordered(x), y, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(vectors)
def test_log_jacobian_matches_autograd(y):
    y = torch.as_tensor(y)
    jac = torch.autograd.functional.jacobian(ordered_from_unconstrained, y)
    sign, logdet = torch.linalg.slogdet(jac)
    assert sign > 0
    assert torch.allclose(ordered_log_abs_det_jacobian(y), logdet, atol=1e-9)


def test_matches_the_definition_and_broadcasts_over_batches():
    y = torch.tensor([[0.5, 0.0, -1.0], [-2.0, 1.0, 2.0]], dtype=torch.float64)
    x = ordered_from_unconstrained(y)
    expected = torch.tensor(
        [[0.5, 0.5 + 1.0, 0.5 + 1.0 + np.exp(-1.0)], [-2.0, -2.0 + np.e, -2.0 + np.e + np.exp(2.0)]],
        dtype=torch.float64,
    )
    assert torch.allclose(x, expected)
    assert torch.allclose(ordered_log_abs_det_jacobian(y), torch.tensor([-1.0, 3.0], dtype=torch.float64))
    assert torch.allclose(unconstrained_from_ordered(x), y)


def test_inverse_rejects_unordered_input():
    with pytest.raises(ValueError, match="strictly increasing"):
        unconstrained_from_ordered(torch.tensor([0.0, 1.0, 1.0]))
