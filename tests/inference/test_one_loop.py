"""The samplers' and the VI fit's numbers pinned bit for bit, and runs in pieces equal to one run.

``tests/golden/one_loop.pt`` holds what :func:`symlib.inference.hmc.sample`,
:func:`symlib.inference.hmc_resumable.sample_resumable`,
:func:`symlib.inference.mfvi_graph.fit_resumable` and
:func:`~symlib.inference.mfvi_graph.fit_captured` returned on small problems (CPU, float32) at
commit 2eeb7f5, before they shared one resumable loop, together with two checkpoints that code
wrote mid-run. Every case must return exactly those tensors (``torch.equal``), and the old
checkpoints must continue to the numbers of the uninterrupted run.

The numbers are pinned per CPU vendor (:func:`tests.pinned.cpu_vendor`): torch's matrix products
go to MKL and oneDNN, which round the last bits differently on Intel and AMD processors. The
Intel set was recorded at 2eeb7f5 on an Intel Xeon; the AMD set by the same script at 965db4d
(the code of 2eeb7f5 and this module) on an AMD EPYC, 2026-12-06, and the current code gave
exactly those numbers there too.

The file is written by running this module as a script (``python tests/inference/test_one_loop.py``,
which records this machine's vendor and drops the others; ``--add-platform`` adds this vendor's
set and keeps the others, for the same code on another machine); rewrite it only for a change
that is meant to move these numbers, and say so in the commit.
The recorded numbers are those of torch's AVX2 and AVX512 CPU kernels (the same on both, checked
with ``ATEN_CPU_CAPABILITY``; the scalar kernels round the networks' products otherwise), so the
comparisons with them are skipped on other CPU arithmetic, another torch release or a vendor with
no set (:data:`ARITHMETIC`); the runs in pieces are compared with a fresh uninterrupted run
everywhere.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import torch

from symlib.inference import hmc, mfvi
from symlib.inference.hmc_resumable import sample_resumable
from symlib.inference.mfvi_graph import fit_captured, fit_resumable
from symlib.nn.mlp import Activation, MLPSpec, init_mlp
from tests.inference.test_hmc_resumable import _problem
from tests.pinned import cpu_vendor

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "one_loop.pt"

SPEC = MLPSpec((4, 3, 2))
RES_ARGS = {"n_burnin": 6, "n_samples": 5, "n_leapfrog": 4, "step_size": 0.05, "thin": 2}
ARITHMETIC = ("AVX2", "AVX512")
"""The CPU capabilities (``torch.backends.cpu.get_cpu_capability()``) whose kernels give the
recorded numbers."""
CHECKPOINT_AFTER = 5
"""Transitions (HMC) and steps (VI) done when the stored mid-run checkpoints were written."""


# ---------------------------------------------------------------- problems

def _gaussian():
    """A correlated 3-d Gaussian, three chains started apart (elementwise arithmetic only)."""
    prec = torch.tensor([[2.0, 0.6, 0.0], [0.6, 1.0, 0.3], [0.0, 0.3, 0.5]])

    def potential(p):
        x = p["x"]
        return 0.5 * (x[:, :, None] * prec * x[:, None, :]).sum((1, 2)).to(torch.float64)

    start = {"x": torch.tensor([[1.0, -1.0, 0.5], [0.0, 2.0, -1.0], [-1.5, 0.5, 1.0]])}
    return potential, start


def _mlp():
    """Three chains of a small MLP classifier: the problem the resumable sampler's tests use."""
    return _problem()


class _Sums:
    """A small accumulator: the running sum and sum of squares of the kept positions, and a count."""

    def __init__(self):
        self.count, self.total, self.squares = 0, None, None

    def update(self, position):
        flat = torch.cat([v.reshape(v.shape[0], -1) for v in position.values()], 1).to(torch.float64)
        self.total = flat.clone() if self.total is None else self.total + flat
        self.squares = flat.square() if self.squares is None else self.squares + flat.square()
        self.count += 1

    def state_dict(self):
        return {"count": self.count, "total": self.total, "squares": self.squares}

    def load_state_dict(self, state):
        self.count, self.total, self.squares = state["count"], state["total"], state["squares"]


def _vi_problem():
    from symlib.nn.orthoskip import skip_matrices

    spec = MLPSpec((1, 6, 6, 1), Activation.SELU)
    gen = torch.Generator().manual_seed(0)
    skips = skip_matrices(spec, gen)
    has_skip = torch.tensor([False, True, False, True])
    skips = {k: torch.where(has_skip[:, None, None], o, torch.zeros_like(o)) for k, o in skips.items()}
    model = mfvi.BayesMLP(spec, skips, torch.tensor([False, False, True, True]))
    base = init_mlp(spec, gen)
    params = {k: v.expand(4, *v.shape).clone() for k, v in base.items()}
    q0 = mfvi.mean_field_from_params(model, params, init_sd=1e-2)
    x = torch.rand(16, 1, generator=gen) * 2 - 1
    y = torch.sin(3 * x) + 0.1 * torch.randn(16, 1, generator=gen)
    return model, q0, x, y


def _vi_args(**kw):
    return {"n_steps": 20, "n_samples": 3, "lr": 1e-2, "generator": torch.Generator().manual_seed(7),
            "noise_sd": 0.2, "anneal_fraction": 0.5, "record_every": 4, "progress": False,
            "average_records": True, "learn_noise": True} | kw


# ---------------------------------------------------------------- the cases and what is kept of them

def _sample_result(res: hmc.HMCResult, generator: torch.Generator) -> dict:
    rows = res.samples.batch(range(len(res.samples)))
    return {"samples": rows, "chains": torch.from_numpy(res.samples.chains[: len(res.samples)].copy()),
            "step_size": res.step_size, "accept_rate": res.accept_rate,
            "history": {k: torch.from_numpy(np.asarray(v).copy()) for k, v in res.history.items()},
            "n_grad_evals": res.n_grad_evals, "force_precision": res.force_precision,
            "generator": generator.get_state()}


def _resumable_result(res, generator: torch.Generator, accumulator=None) -> dict:
    out = {"complete": res.complete, "kept": res.kept, "step_size": res.step_size, "accept_rate": res.accept_rate,
           "history": {k: torch.from_numpy(np.asarray(v).copy()) for k, v in res.history.items()},
           "transitions": res.transitions, "n_grad_evals": res.n_grad_evals,
           "state": {"position": res.state.position, "potential": res.state.potential, "grad": res.state.grad},
           "capture": res.capture, "generator": generator.get_state()}
    if accumulator is not None:
        out["accumulated"] = accumulator.state_dict()
    return out


def _fit_result(fit: mfvi.FitResult) -> dict:
    return {"mean": fit.q.mean, "log_sd": fit.q.log_sd, "log_noise_sd": fit.log_noise_sd,
            "history": {k: torch.from_numpy(np.asarray(v).copy()) for k, v in fit.history.items()}}


def case_sample_adapted_jittered():
    potential, start = _gaussian()
    g = torch.Generator().manual_seed(11)
    res = hmc.sample(potential, start, n_burnin=12, n_samples=6, n_leapfrog=4, step_size=0.4, thin=2,
                     generator=g, progress=False)
    return _sample_result(res, g)


def case_sample_fixed_step():
    potential, start = _gaussian()
    g = torch.Generator().manual_seed(12)
    res = hmc.sample(potential, start, n_burnin=3, n_samples=8, n_leapfrog=3,
                     step_size=torch.tensor([0.2, 0.3, 0.5]), jitter=0.0, adapt=False, generator=g,
                     progress=False)
    return _sample_result(res, g)


def case_sample_mlp_on_disk():
    potential, start = _mlp()
    g = torch.Generator().manual_seed(13)
    res = hmc.sample(potential, start, n_burnin=5, n_samples=4, n_leapfrog=3, step_size=0.05,
                     generator=g, max_memory_bytes=0, progress=False)
    assert res.samples.on_disk
    return _sample_result(res, g)


def case_sample_mlp_bf16():
    potential, start = _mlp()
    g = torch.Generator().manual_seed(14)
    res = hmc.sample(potential, start, n_burnin=5, n_samples=4, n_leapfrog=3, step_size=0.05,
                     generator=g, force_precision="bf16", progress=False)
    return _sample_result(res, g)


def case_resumable_positions(tmp: Path):
    potential, start = _mlp()
    g = torch.Generator().manual_seed(7)
    res = sample_resumable(potential, start, checkpoint=tmp / "positions.pt", generator=g, budget_s=None,
                           **RES_ARGS)
    return _resumable_result(res, g)


def _resumable_summaries(path: Path, budget_s=None):
    potential, start = _mlp()
    g, acc = torch.Generator().manual_seed(8), _Sums()
    res = sample_resumable(potential, start, checkpoint=path, generator=g, budget_s=budget_s,
                           summarize=lambda q: q["b2"].sum(-1), accumulate=acc, jitter=0.3, **RES_ARGS)
    return res, g, acc


def case_resumable_summaries(tmp: Path):
    return _resumable_result(*_resumable_summaries(tmp / "summaries.pt"))


def case_fit_resumable(tmp: Path):
    res = fit_resumable(*_vi_problem(), checkpoint=tmp / "vi.pt", mode="replay", budget_s=None, **_vi_args())
    return _fit_result(res.fit) | {"steps": res.steps, "complete": res.complete}


def case_fit_captured_replay():
    return _fit_result(fit_captured(*_vi_problem(), mode="replay", **_vi_args(average_records=False,
                                                                               learn_noise=False)))


CASES = {
    "sample_adapted_jittered": case_sample_adapted_jittered,
    "sample_fixed_step": case_sample_fixed_step,
    "sample_mlp_on_disk": case_sample_mlp_on_disk,
    "sample_mlp_bf16": case_sample_mlp_bf16,
    "resumable_positions": case_resumable_positions,
    "resumable_summaries": case_resumable_summaries,
    "fit_resumable": case_fit_resumable,
    "fit_captured_replay": case_fit_captured_replay,
}


def _run(name: str, tmp: Path):
    fn = CASES[name]
    return fn(tmp) if fn.__code__.co_argcount else fn()


def _hmc_checkpoint(tmp: Path) -> bytes:
    """The checkpoint of :func:`_resumable_summaries` after :data:`CHECKPOINT_AFTER` transitions
    (one per piece, each stopped at a spent budget)."""
    path = tmp / "hmc-mid.pt"
    for _ in range(CHECKPOINT_AFTER):
        res, _, _ = _resumable_summaries(path, budget_s=1e-9)
    assert not res.complete and res.transitions == CHECKPOINT_AFTER
    return path.read_bytes()


def _vi_checkpoint(tmp: Path) -> bytes:
    path = tmp / "vi-mid.pt"
    for _ in range(CHECKPOINT_AFTER):
        res = fit_resumable(*_vi_problem(), checkpoint=path, mode="replay", budget_s=0.0, **_vi_args())
    assert not res.complete and res.steps == CHECKPOINT_AFTER
    return path.read_bytes()


def record() -> dict:
    """Every case and the two mid-run checkpoints, computed here, with torch's version."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        out = {"cases": {name: _run(name, tmp) for name in CASES},
               "hmc_checkpoint": _hmc_checkpoint(tmp), "vi_checkpoint": _vi_checkpoint(tmp)}
    out["torch"] = torch.__version__.split("+")[0]
    return out


def write(path: Path = GOLDEN, *, add_platform: bool = False) -> None:
    """Record this machine's set (:func:`record`) into ``path`` under its CPU vendor: with
    ``add_platform`` beside the other vendors' sets, else in their place."""
    sets = torch.load(path, weights_only=False)["by vendor"] if add_platform and path.is_file() else {}
    buffer = io.BytesIO()
    torch.save({"by vendor": {**sets, cpu_vendor(): record()}}, buffer)
    path.write_bytes(buffer.getvalue())


# ---------------------------------------------------------------- the tests

def _golden() -> dict:
    """The recorded numbers; the test is skipped where torch computes with other arithmetic."""
    import pytest

    sets = torch.load(GOLDEN, weights_only=False)["by vendor"]
    capability, version = torch.backends.cpu.get_cpu_capability(), torch.__version__.split("+")[0]
    golden = sets.get(cpu_vendor())
    if capability not in ARITHMETIC or golden is None or version != golden["torch"]:
        pytest.skip(f"recorded with torch {sorted({g['torch'] for g in sets.values()})} on "
                    f"{'/'.join(ARITHMETIC)} kernels of {sorted(sets)} processors; this is torch {version} "
                    f"on {capability} of a {cpu_vendor()} processor")
    return golden


def _assert_equal(got, want, where: str) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (where, sorted(got), sorted(want))
        for k in want:
            _assert_equal(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype and got.shape == want.shape, where
        assert torch.equal(got, want), where
    else:
        assert got == want, (where, got, want)


def _case_test(name):
    def test(tmp_path):
        _assert_equal(_run(name, tmp_path), _golden()["cases"][name], name)

    test.__name__ = f"test_{name}_gives_the_recorded_numbers"
    test.__doc__ = f"Case ``{name}`` returns exactly the tensors recorded at commit 2eeb7f5."
    return test


for _name in CASES:
    globals()[f"test_{_name}_gives_the_recorded_numbers"] = _case_test(_name)


def test_a_recorded_hmc_checkpoint_continues_to_the_uninterrupted_numbers(tmp_path):
    path = tmp_path / "old.pt"
    path.write_bytes(_golden()["hmc_checkpoint"])
    res, g, acc = _resumable_summaries(path)
    assert res.complete and res.pieces == CHECKPOINT_AFTER + 1
    _assert_equal(_resumable_result(res, g, acc), _golden()["cases"]["resumable_summaries"], "continued")


def test_a_recorded_vi_checkpoint_continues_to_the_uninterrupted_numbers(tmp_path):
    path = tmp_path / "old.pt"
    path.write_bytes(_golden()["vi_checkpoint"])
    res = fit_resumable(*_vi_problem(), checkpoint=path, mode="replay", budget_s=None, **_vi_args())
    assert res.complete and res.pieces == CHECKPOINT_AFTER + 1
    _assert_equal(_fit_result(res.fit) | {"steps": res.steps, "complete": res.complete},
                  _golden()["cases"]["fit_resumable"], "continued")


def test_hmc_stopped_at_every_transition_equals_the_uninterrupted_run(tmp_path):
    """Stopped at a spent budget after each transition and continued: the recorded numbers."""
    path, pieces = tmp_path / "pieces.pt", 0
    while True:
        res, g, acc = _resumable_summaries(path, budget_s=1e-9)
        pieces += 1
        if res.complete:
            break
    total = RES_ARGS["n_burnin"] + RES_ARGS["n_samples"] * RES_ARGS["thin"]
    assert pieces == total == res.pieces
    whole = case_resumable_summaries(tmp_path)
    got = _resumable_result(res, g, acc)
    assert got["accumulated"]["count"] == RES_ARGS["n_samples"]
    _assert_equal(got, whole, "pieces")


def test_vi_stopped_at_every_step_equals_the_uninterrupted_fit(tmp_path):
    path, pieces = tmp_path / "pieces.pt", 0
    while True:
        res = fit_resumable(*_vi_problem(), checkpoint=path, mode="replay", budget_s=0.0, **_vi_args())
        pieces += 1
        if res.complete:
            break
    assert pieces == _vi_args()["n_steps"] == res.pieces
    _assert_equal(_fit_result(res.fit) | {"steps": res.steps, "complete": res.complete},
                  case_fit_resumable(tmp_path), "pieces")


def test_a_changed_sampler_would_be_caught(tmp_path):
    """The comparison can fail: another seed gives other numbers."""
    import pytest

    potential, start = _gaussian()
    g = torch.Generator().manual_seed(99)
    res = hmc.sample(potential, start, n_burnin=12, n_samples=6, n_leapfrog=4, step_size=0.4, thin=2,
                     generator=g, progress=False)
    with pytest.raises(AssertionError):
        _assert_equal(_sample_result(res, g), _golden()["cases"]["sample_adapted_jittered"], "other seed")


if __name__ == "__main__":
    add = "--add-platform" in sys.argv
    paths = [a for a in sys.argv[1:] if a != "--add-platform"]
    target = Path(paths[0]) if paths else GOLDEN
    write(target, add_platform=add)
    print(f"wrote the numbers of this {cpu_vendor()} processor to {target}")
