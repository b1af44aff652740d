"""(h) captured leapfrog trajectories: chain-gradients per second, eager vs CUDA graph vs compiled.

Issue 30, item 2: on a GPU a small network's gradient is bound by kernel launches, so replaying a
whole leapfrog trajectory as one CUDA graph (``symlib.inference.capture``, mode ``"graph"``) or
compiling it (``"compile"``: ``torch.compile``, ``mode="reduce-overhead"`` on CUDA) should raise
the throughput of chapter 5's sampler at the paper's width (784-512-10 classifier on the 4,000
shipped MNIST training digits, N(0, 1) prior, float32, fp32 forces). Each timed call is one
trajectory of ``L`` leapfrog steps (``C L`` chain-gradients) for 1, 4 and 32 chains (the `paper`
profile's main run has one chain, its robust variants four), from the
same starting points and momenta; the reference is the eager ``hmc.leapfrog`` in the same
alternated rounds, and every captured trajectory is checked against it (largest absolute
difference of the end positions, reported) before it is timed.

Run on a GPU: ``python benchmarks/bench_capture.py --device cuda``. With ``--device cpu`` (the
default without a GPU) eager and compiled trajectories run at small sizes on one thread (CUDA
graphs need a GPU); there the compiled one mostly measures inductor's fusion.
"""

from __future__ import annotations

import harness  # first: puts this checkout's symlib on sys.path  # isort: skip

import torch
from bench_precision import _device, _setup, _sizes, _start, _sync

from symlib.inference import capture, hmc

NAME = "hmc_capture"
CUDA_CHAINS = (1, 4, 32)
"""Chain counts timed on a GPU (chapter 5's `paper` profile: 1 and 4; 32: where the GPU is busy)."""


def _modes(device: torch.device) -> tuple[str, ...]:
    return ("graph", "compile") if device.type == "cuda" else ("compile",)


def run(quick: bool, peers: harness.Peers) -> list[dict]:
    """Per chain count: check every captured trajectory against the eager one, then time them
    in alternated rounds."""
    device = _device()
    if device.type == "cuda" and not torch.cuda.is_available():
        return [harness.skipped_row(NAME, "leapfrog", "captured", "eager", "no CUDA device visible")]
    s = _sizes(quick, device)
    if device.type == "cuda":
        s["chains"] = CUDA_CHAINS
    _spec, _x, _y, _x_test, inits, potential = _setup(s, device)
    L, rows = s["L"], []
    for c in s["chains"]:
        position = _start(inits, c, device)
        gen = torch.Generator().manual_seed(1)
        momentum = {k: torch.randn(v.shape, generator=gen).to(device) for k, v in position.items()}
        _, grad = hmc.value_and_grad(potential, position)
        step = torch.full((c,), 1e-3, dtype=torch.float64, device=device)
        args = (position, momentum, grad, step)
        want = hmc.leapfrog(*args, L, potential)
        fns = {"eager": lambda a=args: (hmc.leapfrog(*a, L, potential), _sync(device))}
        diffs = {}
        for mode in _modes(device):
            f = capture.captured_leapfrog(potential, L, args, mode=mode)
            got = f(*args)
            diffs[mode] = max(float((got[0][k] - want[0][k]).abs().max()) for k in want[0])
            fns[mode] = lambda f=f, a=args: (f(*a), _sync(device))
        times = harness.alternate(fns, s["repeats"])
        for mode in _modes(device):
            rows.append(harness.row(
                NAME, f"{c} chains, width {s['width']}, L={L}", f"symlib {mode}", "symlib eager",
                subject_s=times[mode], reference_s=times["eager"],
                ratio=harness.ratios(times["eager"], times[mode]), ratio_is="speed-up (eager time / captured time)",
                metrics={"chain-grad/s": c * L / min(times[mode]), "eager chain-grad/s": c * L / min(times["eager"]),
                         "max |end position - eager|": diffs[mode]},
                note=f"{device.type}"))
    return rows


if __name__ == "__main__":
    harness.main_for(run, NAME, __doc__.splitlines()[0])
