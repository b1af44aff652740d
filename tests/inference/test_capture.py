"""Captured steps agree with eager ones (issue 30, item 2): symlib/inference/capture.py.

On the CPU: ``auto`` is the eager step itself, ``compile`` (inductor) agrees with the eager
leapfrog trajectory to float rounding, ``graph`` refuses with a message. On a GPU (skipped
here): a CUDA-graph replay equals the eager trajectory for new inputs at every call, and a
functional training step replays as the eager one does.
"""

from __future__ import annotations

import pytest
import torch

from symlib.inference import capture, hmc
from symlib.nn.mlp import MLPSpec, init_mlp

CUDA = torch.cuda.is_available()


def _problem(device="cpu", chains=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    spec = MLPSpec((3, 8, 4))
    x = torch.randn(32, 3, generator=gen)
    y = torch.randint(0, 4, (32,), generator=gen)
    potential = hmc.mlp_classification_potential(spec, x.to(device), y.to(device))
    one = [init_mlp(spec, gen) for _ in range(chains)]
    position = {k: torch.stack([p[k] for p in one]).to(device) for k in one[0]}
    momentum = {k: torch.randn(v.shape, generator=gen).to(device) for k, v in position.items()}
    _, grad = hmc.value_and_grad(potential, position)
    step = torch.full((chains,), 0.01, dtype=torch.float64, device=device)
    return potential, (position, momentum, grad, step)


def _eager(potential, args, n_steps):
    return hmc.leapfrog(*args, n_steps, potential)


def _assert_close(got, want, **tol):
    for g, w in zip(got, want, strict=True):
        if isinstance(w, dict):
            for k in w:
                torch.testing.assert_close(g[k], w[k], **tol)
        else:
            torch.testing.assert_close(g, w, **tol)


def test_auto_on_the_cpu_is_the_eager_step():
    potential, args = _problem()
    step = capture.captured_leapfrog(potential, 3, args, mode="auto")
    _assert_close(step(*args), _eager(potential, args, 3), rtol=0, atol=0)
    def double(a):
        return a * 2

    assert capture.capture(double, (torch.ones(2),)) is double


def test_compiled_leapfrog_agrees_with_the_eager_one_on_the_cpu():
    potential, args = _problem()
    step = capture.captured_leapfrog(potential, 3, args, mode="compile")
    got, want = step(*args), _eager(potential, args, 3)
    assert (got[0]["W1"] - args[0]["W1"]).abs().max() > 1e-4          # the trajectory moved
    _assert_close(got, want, rtol=1e-5, atol=1e-6)
    _, other = _problem(seed=1)                                       # new values, same shapes
    _assert_close(step(*other), _eager(potential, other, 3), rtol=1e-5, atol=1e-6)


def test_bad_modes_and_arguments_are_refused_with_a_message():
    _, args = _problem()
    with pytest.raises(ValueError, match="needs CUDA tensors.*compile"):
        capture.capture(lambda *a: a, args, mode="graph")
    with pytest.raises(ValueError, match="mode must be one of"):
        capture.capture(lambda *a: a, args, mode="fast")
    with pytest.raises(ValueError, match="no tensor"):
        capture.capture(lambda *a: a, (1, 2.0))


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need a GPU")
def test_graph_replay_equals_the_eager_trajectory_for_new_inputs():
    potential, args = _problem("cuda")
    step = capture.captured_leapfrog(potential, 5, args, mode="graph")
    for seed in (1, 2, 3):
        _, other = _problem("cuda", seed=seed)
        _assert_close(step(*other), _eager(potential, other, 5), rtol=1e-6, atol=1e-6)
    first = step(*args)
    _ = step(*_problem("cuda", seed=4)[1])
    _assert_close(first, _eager(potential, args, 5), rtol=1e-6, atol=1e-6)   # outputs are copies
    bad = (dict(args[0], W1=args[0]["W1"][:2]), *args[1:])
    with pytest.raises(ValueError, match="argument leaf"):
        step(*bad)


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need a GPU")
def test_a_functional_training_step_replays_as_the_eager_one():
    spec = MLPSpec((1, 16, 16, 1))
    gen = torch.Generator().manual_seed(0)
    params = {k: v.cuda() for k, v in init_mlp(spec, gen).items()}
    x, noise = torch.randn(64, 1, generator=gen).cuda(), torch.randn(64, 1, generator=gen).cuda()
    from symlib.nn.mlp import mlp_forward

    def loss(p, x, y):
        return (mlp_forward(p, x, spec) - y).square().mean()

    def train_step(p, x, noise, lr):
        y = torch.sin(3 * x) + 0.1 * noise
        g = torch.func.grad(loss)(p, x, y)
        return {k: p[k] - lr * g[k] for k in p}

    lr = torch.tensor(0.05, device="cuda")
    step = capture.capture(train_step, (params, x, noise, lr), mode="graph")
    eager = captured = params
    for _ in range(20):
        eager, captured = train_step(eager, x, noise, lr), step(captured, x, noise, lr)
    for k in eager:
        torch.testing.assert_close(captured[k], eager[k], rtol=1e-5, atol=1e-6)
