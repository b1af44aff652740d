"""GPU/CPU agreement of every chapter that computes on ``device`` (skipped without a GPU).

Chapters 2a and 2b draw all their randomness from CPU generators and move only the arithmetic,
so their GPU runs must equal their CPU runs up to rounding. Chapters 1, 3 and 5 draw on the
device (the GPU's random streams differ from the CPU's), so their smoke runs must give results
of the same structure and shapes, finite where the CPU's are, and summary numbers of the
same size. Chapter 0 is symbolic and chapter 4 runs Stan, on the CPU only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from symlib.chapters import get_profile
from symlib.chapters import ortho_skip as ch1
from symlib.chapters import posterior_mmd as ch2b
from symlib.chapters import rebasin_hmc as ch5
from symlib.chapters import sgm_vi as ch3
from symlib.chapters import symmetry_removal as ch2a

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def _close(a: dict, b: dict, rtol: float, atol: float) -> None:
    assert a.keys() == b.keys()
    for k, value in a.items():
        assert value.device.type == "cpu" and b[k].device.type == "cpu", k  # results come back
        torch.testing.assert_close(value, b[k], rtol=rtol, atol=atol, msg=k)


def _same_structure(cpu, gpu, where: str = "results") -> None:
    """Same keys, lengths and shapes everywhere; finite on the GPU wherever finite on the CPU."""
    if isinstance(cpu, dict):
        assert set(cpu) == set(gpu), where
        for k in cpu:
            if k in ("device", "wall_time", "seconds", "time_s"):
                continue
            _same_structure(cpu[k], gpu[k], f"{where}[{k!r}]")
    elif isinstance(cpu, list | tuple):
        assert len(cpu) == len(gpu), where
        for i, (a, b) in enumerate(zip(cpu, gpu)):
            _same_structure(a, b, f"{where}[{i}]")
    elif isinstance(cpu, torch.Tensor | np.ndarray):
        assert tuple(cpu.shape) == tuple(gpu.shape), where
        if isinstance(gpu, torch.Tensor):
            assert gpu.device.type == "cpu", f"{where} left on the GPU"
        a, b = torch.as_tensor(np.asarray(cpu)), torch.as_tensor(np.asarray(gpu))
        if a.is_floating_point():
            assert bool(torch.isfinite(b[torch.isfinite(a)]).all()), where
    elif isinstance(cpu, float) and math.isfinite(cpu):
        assert isinstance(gpu, float | int) and math.isfinite(gpu), where


def test_chapter_2a_trains_the_same_networks_on_the_gpu():
    cfg = get_profile("02a_symmetry_removal", "smoke")
    cpu, gpu = ch2a.train_optunets(cfg, 0), ch2a.train_optunets(cfg, 0, "cuda")
    # a training epoch amplifies float32 rounding (cuDNN vs CPU convolutions) to ~1e-4
    _close(cpu["params"], gpu["params"], rtol=1e-2, atol=2e-3)
    assert torch.allclose(cpu["accuracy"], gpu["accuracy"], atol=0.01)
    assert (cpu["perms"] == gpu["perms"]).float().mean() > 0.99  # near-ties may swap
    toy_cpu, toy_gpu = ch2a.toy_posterior(cfg, 0), ch2a.toy_posterior(cfg, 0, "cuda")
    assert abs(toy_cpu["n_kept"] - toy_gpu["n_kept"]) <= 0.01 * toy_cpu["n_trained"]
    if toy_cpu["n_kept"] == toy_gpu["n_kept"]:
        torch.testing.assert_close(toy_cpu["raw"], toy_gpu["raw"], rtol=1e-3, atol=1e-3)


def test_chapter_2b_trains_and_samples_the_same_on_the_gpu():
    # Adam divides by sqrt(v): a near-zero gradient's rounding flips a whole lr-sized step, so
    # weights trained with Adam agree only in what they compute, not weight by weight
    cfg = get_profile("02b_posterior_mmd", "smoke")
    data = ch2b.load_data(cfg)
    nets_cpu = ch2b.train_networks(cfg, data, 0, progress=False)
    nets_gpu = ch2b.train_networks(cfg, data, 0, progress=False, device="cuda")
    for part in ("reference", "ensemble"):
        assert nets_gpu[part]["W1"].device.type == "cpu"
        assert torch.allclose(nets_cpu[f"{part}_accuracy"], nets_gpu[f"{part}_accuracy"], atol=0.05)
    # both sample around the CPU's networks; SWAG and Laplace (no Adam) agree weight by weight
    s_cpu = ch2b.posterior_samples(cfg, data, nets_cpu, 1, progress=False)
    s_gpu = ch2b.posterior_samples(cfg, data, nets_cpu, 1, progress=False, device="cuda")
    for a, b in zip(s_cpu["rows"], s_gpu["rows"]):
        assert (a["mode"], a["method"]) == (b["mode"], b["method"])
        if a["method"] in ("SWAG", "Laplace", "DE"):
            _close(a["params"], b["params"], rtol=1e-2, atol=1e-3)
        acc_a = (ch2b.sample_probs(a["params"], data["x_test"]).argmax(-1) == data["y_test"]).double().mean()
        acc_b = (ch2b.sample_probs(b["params"], data["x_test"]).argmax(-1) == data["y_test"]).double().mean()
        assert abs(acc_a - acc_b) < 0.05, (a["mode"], a["method"])


def test_chapter_1_runs_on_the_gpu():
    cpu, gpu = _smoke_stages(ch1, "cpu")["main"], _smoke_stages(ch1, "cuda")["main"]
    _same_structure(cpu["metrics"], gpu["metrics"], "metrics")
    _same_structure(cpu["fits"], gpu["fits"], "fits")
    for a, b in zip(cpu["metrics"], gpu["metrics"]):
        assert b["train_rmse"] == pytest.approx(a["train_rmse"], rel=0.5), a["variant"]


def _smoke_stages(module, device):
    """Every stage of a declared chapter in the smoke profile (seed 0) on ``device``."""
    chapter = module.CHAPTER
    return chapter.run_stages(get_profile(chapter.name, "smoke"), seed=0, device=device)


def test_chapter_3_runs_on_the_gpu():
    cpu, gpu = _smoke_stages(ch3, "cpu"), _smoke_stages(ch3, "cuda")
    for part in ("interp", "toy", "mnist"):
        _same_structure(cpu[part], gpu[part], part)


def test_chapter_5_runs_on_the_gpu():
    cpu, gpu = _smoke_stages(ch5, "cpu"), _smoke_stages(ch5, "cuda")
    _same_structure(cpu["not"], gpu["not"], "not")
    _same_structure(cpu["bayes"], gpu["bayes"], "bayes")
