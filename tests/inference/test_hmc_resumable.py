"""Resumable HMC (issue 30, item 3): a run stopped at a budget or killed, then resumed, gives
exactly the numbers of an uninterrupted run, and those are ``hmc.sample``'s."""

from __future__ import annotations

import signal

import numpy as np
import pytest
import torch
from killing import kill_after_checkpoint

from symlib.inference import hmc
from symlib.inference.hmc_resumable import sample_resumable
from symlib.nn.mlp import MLPSpec, init_mlp

SPEC = MLPSpec((4, 3, 2))
ARGS = {"n_burnin": 6, "n_samples": 5, "n_leapfrog": 4, "step_size": 0.05, "thin": 2}


def _problem():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20, 4, generator=g)
    y = torch.randint(0, 2, (20,), generator=g)
    start = {k: torch.stack([init_mlp(SPEC, g)[k] for _ in range(3)]) for k in SPEC.shapes()}
    # three different chains
    start = {k: v + 0.1 * torch.randn(v.shape, generator=g) for k, v in start.items()}
    return hmc.mlp_classification_potential(SPEC, x, y), start


def _run(path, **kw):
    potential, start = _problem()
    return sample_resumable(potential, start, checkpoint=path, generator=torch.Generator().manual_seed(7),
                            **(ARGS | kw))


def _same(a, b):
    assert a.complete and b.complete
    torch.testing.assert_close(a.kept, b.kept, rtol=0, atol=0)
    for k in a.history:
        np.testing.assert_array_equal(a.history[k], b.history[k], err_msg=k)
    torch.testing.assert_close(a.step_size, b.step_size, rtol=0, atol=0)


def test_an_uninterrupted_run_is_hmc_sample_bit_for_bit(tmp_path):
    potential, start = _problem()
    ref = hmc.sample(potential, start, generator=torch.Generator().manual_seed(7), progress=False, **ARGS)
    got = _run(tmp_path / "ck.pt")
    assert got.complete and got.pieces == 1 and got.transitions == 6 + 5 * 2
    rows = ref.samples.batch(range(len(ref.samples)))
    flat = torch.cat([rows[k].reshape(len(ref.samples), -1) for k in SPEC.shapes()], 1).reshape(5, 3, -1)
    torch.testing.assert_close(got.kept, flat, rtol=0, atol=0)
    for k in ("accept_prob", "energy_error", "potential", "step_size", "phase"):
        np.testing.assert_array_equal(got.history[k], ref.history[k], err_msg=k)
    torch.testing.assert_close(got.step_size, ref.step_size, rtol=0, atol=0)
    assert got.n_grad_evals == ref.n_grad_evals


def test_a_run_stopped_at_its_budget_and_resumed_equals_an_uninterrupted_one(tmp_path):
    ref = _run(tmp_path / "ref.pt")
    pieces = []
    while True:   # a zero budget: one transition per piece, a checkpoint after each
        res = _run(tmp_path / "ck.pt", budget_s=1e-9)
        pieces.append(res.transitions)
        if res.complete:
            break
    assert pieces == list(range(1, 17)) and res.pieces == 16
    _same(res, ref)
    stamp = (tmp_path / "ck.pt").stat().st_mtime_ns
    again = _run(tmp_path / "ck.pt")      # a finished run is returned, not sampled again
    _same(again, ref)
    assert again.transitions == 16 and again.pieces == 16 and again.wall_time_s == res.wall_time_s
    assert (tmp_path / "ck.pt").stat().st_mtime_ns == stamp   # nor written again


def test_a_stage_refuses_a_partial_run_with_budget_exhausted(tmp_path):
    from symlib.inference.hmc_resumable import BudgetExhausted

    part = _run(tmp_path / "ck.pt", budget_s=1e-9)
    assert not part.complete
    with pytest.raises(BudgetExhausted, match="piece 1, 1 transitions done; run again"):
        part.require_complete("chapter 5's HMC")
    done = _run(tmp_path / "done.pt")
    assert done.require_complete() is done


def test_a_killed_run_resumes_to_the_same_numbers(tmp_path):
    ref = _run(tmp_path / "ref.pt", n_samples=40)
    path = tmp_path / "ck.pt"
    returncode = kill_after_checkpoint(
        __file__, f"t._run({str(path)!r}, n_samples=40, every_s=0)",
        "symlib.inference.hmc:hmc_step", path, linger_s=0.6)
    assert returncode == -signal.SIGKILL          # killed, not finished
    partial = torch.load(path, weights_only=False)["it"]
    assert 0 < partial < 6 + 40 * 2
    res = _run(path, n_samples=40)
    assert res.pieces == 2
    _same(res, ref)


def test_a_checkpoint_of_other_settings_is_refused_by_name(tmp_path):
    _run(tmp_path / "ck.pt", budget_s=1e-9)
    with pytest.raises(ValueError, match="n_leapfrog"):
        _run(tmp_path / "ck.pt", n_leapfrog=5)


def test_an_oversized_checkpoint_is_refused_and_summaries_keep_it_small(tmp_path):
    with pytest.raises(ValueError, match="summarize"):
        _run(tmp_path / "big.pt", max_checkpoint_bytes=2_000)
    res = _run(tmp_path / "small.pt", summarize=lambda q: q["b2"].sum(-1), max_checkpoint_bytes=20_000)
    assert res.complete and res.kept.shape == (5, 3)


def test_no_budget_runs_to_the_end_whatever_the_environment_says(monkeypatch, tmp_path):
    """The budget is an argument: ``$SYMLIB_BUDGET_S`` is the run layer's to read
    (``tests/book/test_runtime.py``), not the sampler's."""
    monkeypatch.setenv("SYMLIB_BUDGET_S", "1e-9")
    res = _run(tmp_path / "ck.pt")
    assert res.complete and res.pieces == 1


def test_a_run_started_after_its_deadline_takes_one_transition_and_stops(tmp_path):
    import time

    from symlib.inference.loop import seconds_left

    assert seconds_left(None) is None
    assert 29.0 < seconds_left(time.time() + 30) <= 30.0
    assert 0 < seconds_left(time.time() - 60) < 1e-6          # past it: stop at once, checkpoint written
    res = _run(tmp_path / "late.pt", budget_s=seconds_left(time.time() - 60))
    assert not res.complete and res.transitions == 1 and (tmp_path / "late.pt").is_file()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_on_a_gpu_with_a_gpu_generator_pieces_resume_to_the_same_numbers(tmp_path):
    _, start = _problem()
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(20, 4, generator=g).cuda(), torch.randint(0, 2, (20,), generator=g).cuda()
    potential = hmc.mlp_classification_potential(SPEC, x, y)
    start = {k: v.cuda() for k, v in start.items()}

    def run(path, **kw):
        return sample_resumable(potential, start, checkpoint=path, generator=torch.Generator("cuda").manual_seed(7),
                                force_precision="bf16", **(ARGS | kw))

    ref = run(tmp_path / "ref.pt")
    while not (res := run(tmp_path / "ck.pt", budget_s=1e-9)).complete:
        pass
    assert res.pieces == 16
    _same(res, ref)


def test_capture_modes_are_checked_and_recorded(tmp_path):
    with pytest.raises(ValueError, match="capture must be one of"):
        _run(tmp_path / "a.pt", capture="jit")
    with pytest.raises(ValueError, match="needs CUDA"):
        _run(tmp_path / "b.pt", capture="graph")   # the CPU problem
    res = _run(tmp_path / "c.pt")
    assert res.capture == "eager"   # "auto" on the CPU
    assert torch.load(tmp_path / "c.pt", weights_only=False)["settings"]["capture"] == "eager"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_on_a_gpu_captured_trajectories_give_the_eager_chains(tmp_path, precision):
    """The graph replays the eager trajectory's kernels: the same chains, up to cuBLAS's choice of
    algorithm (a tolerance far below the run's own spread); in pieces the graph is recorded again
    in each and the resumed run equals the uninterrupted captured one."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 4, generator=g).cuda(), torch.randint(0, 2, (64,), generator=g).cuda()
    potential = hmc.mlp_classification_potential(SPEC, x, y)
    _, start = _problem()
    start = {k: v.cuda() for k, v in start.items()}

    def run(path, **kw):
        return sample_resumable(potential, start, checkpoint=path, generator=torch.Generator("cuda").manual_seed(7),
                                force_precision=precision, jitter=0.2, **(ARGS | kw))

    eager, graph = run(tmp_path / "e.pt", capture="eager"), run(tmp_path / "g.pt")
    assert (eager.capture, graph.capture) == ("eager", "graph")
    torch.testing.assert_close(graph.kept, eager.kept, rtol=1e-4, atol=1e-5)
    for k in ("accept_prob", "potential", "step_size"):
        np.testing.assert_allclose(graph.history[k], eager.history[k], rtol=1e-4, atol=1e-5, err_msg=k)
    assert not torch.equal(graph.kept[0], graph.kept[-1]), "the chains moved"
    while not (res := run(tmp_path / "p.pt", budget_s=1e-9)).complete:
        pass
    torch.testing.assert_close(res.kept, graph.kept, rtol=1e-6, atol=1e-7)
