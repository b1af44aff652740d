"""Laplace on OptuNet against independent code: the `posteriors` package (0.1.3) for the exact
Hessian and the GGN, an explicit Jacobian for the linearised predictive, and the reference
precision for the sample covariance."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import jacrev, vmap

from symlib.inference import posteriors as P
from symlib.nn.convnets import init_optunet, optunet_forward

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # tensordict's notes on dataclass defaults
    posteriors = pytest.importorskip("posteriors")
    from optree.integrations.torch import tree_ravel

N_POINTS, N_DATA, PRIOR = 24, 100, 0.8


@pytest.fixture(scope="module")
def problem():
    """An OptuNet (float64) on 24 digit-like images, its parameters in our flat order, and the
    permutation from `posteriors`' flat order (optree sorts dict keys) to ours."""
    g = torch.Generator().manual_seed(0)
    params = init_optunet(g, 1, dtype=torch.float64)
    x = torch.rand(N_POINTS, 1, 28, 28, generator=g, dtype=torch.float64)
    y = torch.randint(0, 10, (N_POINTS,), generator=g)
    one = {k: v[0] for k, v in params.items()}
    index, start = {}, 0
    for k, v in one.items():
        index[k] = torch.arange(start, start + v.numel(), dtype=torch.float64).reshape(v.shape)
        start += v.numel()
    theirs_to_ours = torch.argsort(tree_ravel(index)[0].long())
    return params, one, x, y, theirs_to_ours


def _reorder(matrix, perm):
    return matrix[perm][:, perm]


def _reference_precision(transform, one, x, y, perm):
    state = transform.init(one)
    for i in range(0, N_POINTS, 8):
        state = transform.update(state, (x[i:i + 8], y[i:i + 8]))[0]
    return _reorder(state.prec.double(), perm)


def test_full_hessian_matches_posteriors_dense_hessian_clipped(problem):
    params, one, x, y, perm = problem

    def log_posterior(p, batch):
        return -F.cross_entropy(optunet_forward(p, batch[0]), batch[1], reduction="sum"), torch.tensor([])

    # the data's Hessian alone (init_prec 0), summed over the subset and scaled to N_DATA points
    transform = posteriors.laplace.dense_hessian.build(log_posterior, rescale=N_DATA / N_POINTS)
    hessian = _reference_precision(transform, one, x, y, perm).numpy()
    evals, evecs = np.linalg.eigh((hessian + hessian.T) / 2)
    assert (evals < -1e-6 * abs(evals).max()).sum() > 0  # an untrained net: clipping matters
    expected = evecs @ np.diag(np.clip(evals, 0, None)) @ evecs.T + PRIOR * np.eye(355)
    ours = P.fit_laplace(optunet_forward, params, x, y, PRIOR, "full", chunk_size=5, n_data=N_DATA)
    torch.testing.assert_close(ours.precision[0], torch.from_numpy(expected), rtol=1e-9, atol=1e-9)


def test_ggn_matches_posteriors_dense_ggn(problem):
    params, one, x, y, perm = problem

    def forward(p, batch):
        return optunet_forward(p, batch[0]), torch.tensor([])

    def log_likelihood(logits, batch):
        return -F.cross_entropy(logits, batch[1], reduction="sum")

    transform = posteriors.laplace.dense_ggn.build(forward, log_likelihood)
    expected = _reference_precision(transform, one, x, y, perm) * N_DATA / N_POINTS
    expected = expected + PRIOR * torch.eye(355, dtype=torch.float64)
    ours = P.fit_laplace(optunet_forward, params, x, y, PRIOR, "ggn", chunk_size=5, n_data=N_DATA)
    torch.testing.assert_close(ours.precision[0], expected, rtol=1e-9, atol=1e-9)


def test_samples_have_the_inverse_of_the_reference_precision_as_covariance(problem):
    params, one, x, y, perm = problem

    def forward(p, batch):
        return optunet_forward(p, batch[0]), torch.tensor([])

    def log_likelihood(logits, batch):
        return -F.cross_entropy(logits, batch[1], reduction="sum")

    transform = posteriors.laplace.dense_ggn.build(forward, log_likelihood, init_prec=PRIOR)
    precision = _reference_precision(transform, one, x, y, perm)
    state = P.fit_laplace(optunet_forward, params, x, y, PRIOR, "ggn")
    n = 20_000
    draws = P._flatten(P.laplace_sample(state, n, torch.Generator().manual_seed(1)), 2)[0]
    # whitened by the reference's Cholesky factor, the deviations must be N(0, I): entries of
    # the empirical covariance have sd 1/sqrt(n) (off-diagonal) and sqrt(2/n) (diagonal)
    white = (draws - state.mean[0]) @ torch.linalg.cholesky(precision)
    tol = 6 * np.sqrt(2 / n)
    torch.testing.assert_close(white.mean(0), torch.zeros(355, dtype=torch.float64),
                               atol=tol, rtol=0)
    torch.testing.assert_close(torch.cov(white.T), torch.eye(355, dtype=torch.float64),
                               atol=tol, rtol=0)


def test_linearised_predictive_matches_an_explicit_jacobian(problem):
    params, one, x, _, _ = problem
    g = torch.Generator().manual_seed(2)
    samples = {k: v[:, None] + 0.3 * torch.randn(1, 4, *v.shape[1:], generator=g,
                                                  dtype=torch.float64)
               for k, v in params.items()}
    centres = {k: v[:, None] for k, v in params.items()}
    probs = P.linearised_predictive_probs(optunet_forward, samples, centres, x, batch_size=7,
                                          nets_per_chunk=3)
    shapes = P._shapes(params, 1)
    theta = P._flatten(params, 1)[0]

    def logits(t, xi):
        return optunet_forward(P._unflatten(t, shapes), xi[None])[0]

    jac = vmap(jacrev(logits), in_dims=(None, 0))(theta, x)  # (B, C, P)
    delta = P._flatten(samples, 2)[0] - theta
    expected = torch.softmax(optunet_forward(one, x) + torch.einsum("bcp,sp->sbc", jac, delta), -1)
    torch.testing.assert_close(probs[0], expected)
    # at its centre the linearised network is the network itself
    at_centre = P.linearised_predictive_probs(optunet_forward, centres, centres, x)
    torch.testing.assert_close(at_centre[0, 0], torch.softmax(optunet_forward(one, x), -1))
