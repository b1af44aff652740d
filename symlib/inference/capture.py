"""Captured steps: a fixed-shape step function replayed as one CUDA graph or compiled, with the
eager function as the fallback.

On a GPU, a small network's step (a leapfrog trajectory, a training step of chapter 1's sinc
network, a batched OptuNet step) is bound by kernel launches, not arithmetic: tens of small
kernels per gradient, each a few microseconds of work behind a launch of similar cost.
:func:`capture` removes the launches:

- ``"graph"`` (CUDA only): the step is run a few times on a side stream (warm-up: autograd and
  cuBLAS allocate their workspaces), then recorded once with :class:`torch.cuda.CUDAGraph` on
  static input buffers. Each call copies its arguments into those buffers and replays the whole
  recording as one launch. The step must have fixed shapes, draw no random numbers (pass them in
  as arguments, drawn from the caller's generator) and take no data-dependent branch on the
  host (no ``.item()``, no Python ``if`` on a tensor): a replay repeats exactly the recorded
  kernels;
- ``"compile"``: :func:`torch.compile` with fixed shapes (``mode="reduce-overhead"`` on CUDA,
  which adds CUDA graphs of its own; the default mode on the CPU, where it fuses element-wise
  work). Graph breaks (``torch.autograd.grad`` inside the step) fall back to eager for that part;
- ``"eager"``: the function itself;
- ``"auto"``: ``"graph"`` on CUDA, ``"eager"`` on the CPU (where launches cost little).

A captured step computes what the eager step computes: the same kernels on the same inputs
(``"graph"``: bit for bit up to cuBLAS's choice of algorithm; ``"compile"``: up to the
reassociation of fused float sums). ``tests/inference/test_capture.py`` checks both against
:func:`symlib.inference.hmc.leapfrog` run eagerly.

Public: :func:`capture`, :func:`captured_leapfrog`, :data:`MODES`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

MODES = ("auto", "graph", "compile", "eager")
"""The capture modes (module docstring)."""

WARMUP_CALLS = 3
"""Eager calls on a side stream before a CUDA graph is recorded (PyTorch's recipe: autograd and
cuBLAS create their state on the first calls, which must not be recorded)."""


def _device_of(args) -> torch.device:
    leaves = [x for x in tree_flatten(args)[0] if isinstance(x, torch.Tensor)]
    if not leaves:
        raise ValueError("capture: the example arguments hold no tensor, so there is nothing to capture")
    devices = {x.device for x in leaves}
    if len(devices) > 1:
        raise ValueError(f"capture: the example arguments live on several devices ({sorted(map(str, devices))})")
    return leaves[0].device


def capture(fn: Callable[..., Any], example_args: tuple, *, mode: str = "auto",
            clone_outputs: bool = True) -> Callable[..., Any]:
    """``fn`` as a captured step (module docstring), for arguments shaped like ``example_args``.

    Args:
        fn: a step ``fn(*args) -> outputs``; ``args`` and ``outputs`` are tensors or nested
            tuples, lists and dicts of them, of fixed shapes, dtypes and device.
        example_args: arguments to warm up and record with (``"graph"``); their values do not
            matter, their shapes do. ``fn`` is called with them ``WARMUP_CALLS + 1`` times.
        mode: ``"auto"``, ``"graph"``, ``"compile"`` or ``"eager"``.
        clone_outputs: ``"graph"`` only: return copies of the static output buffers (default);
            with False, the tensors returned are overwritten by the next call.

    Returns:
        A function with ``fn``'s signature. A ``"graph"`` step refuses arguments of another
        structure, shape, dtype or device, with a message naming the first that differs.

    Raises:
        ValueError: an unknown mode, ``"graph"`` off CUDA, or example arguments without tensors
            or on several devices.
    """
    if mode not in MODES:
        raise ValueError(f"capture: mode must be one of {', '.join(MODES)}; got {mode!r}")
    device = _device_of(example_args)
    if mode == "auto":
        mode = "graph" if device.type == "cuda" else "eager"
    if mode == "eager":
        return fn
    if mode == "compile":
        compiled = torch.compile(fn, dynamic=False, mode="reduce-overhead" if device.type == "cuda" else None)
        return functools.wraps(fn)(compiled)
    if device.type != "cuda":
        raise ValueError(f"capture: mode 'graph' needs CUDA tensors; the example arguments are on {device} "
                         "(use mode='auto', which runs eagerly there, or 'compile')")
    return _graphed(fn, example_args, device, clone_outputs)


def _graphed(fn, example_args, device, clone_outputs):
    static_in = tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, example_args)
    in_leaves, in_spec = tree_flatten(static_in)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(WARMUP_CALLS):
            fn(*static_in)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn(*static_in)
    out_leaves, out_spec = tree_flatten(static_out)

    @functools.wraps(fn)
    def step(*args):
        leaves, spec = tree_flatten(args)
        if spec != in_spec:
            raise ValueError(f"captured step: arguments of another structure than the recorded ones ({spec} vs {in_spec})")
        for i, (dst, src) in enumerate(zip(in_leaves, leaves, strict=True)):
            if isinstance(dst, torch.Tensor):
                if not isinstance(src, torch.Tensor) or src.shape != dst.shape or src.dtype != dst.dtype \
                        or src.device != dst.device:
                    got = (tuple(src.shape), src.dtype, str(src.device)) if isinstance(src, torch.Tensor) else type(src)
                    raise ValueError(f"captured step: argument leaf {i} must be {tuple(dst.shape)} {dst.dtype} on "
                                     f"{dst.device}; got {got}")
                dst.copy_(src)
            elif src != dst:
                raise ValueError(f"captured step: argument leaf {i} was recorded as {dst!r}; got {src!r}")
        graph.replay()
        outs = [o.clone() if clone_outputs and isinstance(o, torch.Tensor) else o for o in out_leaves]
        return tree_unflatten(outs, out_spec)

    step.graph = graph  # kept alive with the step (its memory pool holds the static buffers)
    return step


def captured_leapfrog(potential_fn, n_steps: int, example: tuple, *, mode: str = "auto"):
    """:func:`symlib.inference.hmc.leapfrog` with full-precision forces as one captured step:
    ``step(position, momentum, grad, step_size) -> (position, momentum, potential, grad)``.

    Args:
        potential_fn: the chains' potential (``dict -> (C,)``), as for ``hmc.leapfrog``.
        n_steps: leapfrog steps per call (fixed: it is part of the recording).
        example: ``(position, momentum, grad, step_size)`` shaped as the calls will be.
        mode: as for :func:`capture`.
    """
    from symlib.inference import hmc

    def trajectory(position, momentum, grad, step_size):
        return hmc.leapfrog(position, momentum, grad, step_size, n_steps, potential_fn)

    return capture(trajectory, example, mode=mode)
