"""Fan-out of independent fits: the setting, the order, and results identical to a serial run.

Each chapter's fan-out runs its smoke fits once serially and once two at a time (joblib's loky
worker processes, or a Dask cluster) and must give bit-for-bit the same numbers; only wall
times may differ.
"""

import dataclasses
import os
import subprocess
import sys
import textwrap

import joblib
import numpy as np
import pytest
import torch

from symlib.book import parallel
from symlib.book.runtime import torch_threads
from symlib.chapters import constrained_models as ch4
from symlib.chapters import get_profile
from symlib.chapters.ortho_skip import stages as ch1
from symlib.chapters.posterior_mmd import networks as ch2b
from symlib.chapters.sgm_vi import stages_mnist as ch3
from symlib.nn.convnets import init_optunet, optunet_cross_entropy_batched
from symlib.nn.training import train_batched

TIMING = {
    "train_s",
    "timing",
    "gap_s",
    "time_s",
    "wall_s",
    "build_s",
    "warmup_s",
    "sampling_s",
    "ess_per_s",
}
"""Result fields that measure this machine's wall time, so differ between any two runs."""


def assert_identical(a, b, path="results"):
    """``a`` and ``b`` hold the same values, bit for bit (tensors and arrays: dtype, shape and
    every element, NaNs in the same places), apart from the :data:`TIMING` fields."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            if k not in TIMING:
                assert_identical(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{path}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a.nan_to_num(), b.nan_to_num()), path
        assert torch.equal(a.isnan(), b.isnan()), path
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), path
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), path
    else:
        assert a == b, path


def _task(value: int, offset: int) -> tuple[int, int]:
    return value + offset, torch.get_num_threads()


def _pid() -> int:
    return os.getpid()


def _cached_cell(directory: str, k: int) -> tuple[int, int]:
    from symlib.book.cache import cached

    return cached("03_sgm_vi-cell", "1", {"k": k}, lambda: k * k, directory=directory), os.getpid()


# --------------------------------------------------------------------------- the setting


def test_n_jobs_from_argument_environment_or_joblib(monkeypatch):
    monkeypatch.delenv(parallel.ENV_VAR, raising=False)
    assert parallel.n_jobs() is None  # joblib decides: 1 unless a parallel_config says otherwise
    monkeypatch.setenv(parallel.ENV_VAR, "2")
    assert parallel.n_jobs() == 2
    assert parallel.n_jobs(-1) == -1  # the argument wins
    monkeypatch.setenv(parallel.ENV_VAR, " -1 ")
    assert parallel.n_jobs() == -1
    for bad in ("0", "two", "1.5"):
        monkeypatch.setenv(parallel.ENV_VAR, bad)
        with pytest.raises(ValueError, match=parallel.ENV_VAR):
            parallel.n_jobs()
    for bad in (0, 1.0, True):
        with pytest.raises(ValueError, match="n_jobs"):
            parallel.n_jobs(bad)


def test_long_cpu_profiles_default_to_one_worker_per_core_and_a_users_setting_wins(monkeypatch):
    from symlib.book import pipeline

    assert parallel.default_jobs("full", "cpu") == "-1"
    assert parallel.default_jobs("paper", "cpu") == "-1"
    for profile, device in (("quick", "cpu"), ("smoke", "cpu"), ("full", "cuda"), ("full", "cuda:1")):
        assert parallel.default_jobs(profile, device) is None
    monkeypatch.delenv(parallel.ENV_VAR, raising=False)
    pipeline._default_jobs("quick", "cpu")
    assert parallel.ENV_VAR not in os.environ
    pipeline._default_jobs("full", "cpu")
    assert os.environ[parallel.ENV_VAR] == "-1" and parallel.n_jobs() == -1
    monkeypatch.setenv(parallel.ENV_VAR, "1")
    pipeline._default_jobs("full", "cpu")
    assert os.environ[parallel.ENV_VAR] == "1"


def test_fan_out_keeps_the_task_order_and_sets_threads_in_workers():
    tasks = [(v, 100) for v in range(5)]
    with torch_threads(2):
        serial = parallel.fan_out(_task, tasks, threads=None, jobs=1)
        assert serial == [(v + 100, 2) for v in range(5)]  # in this process, threads left alone
        assert torch.get_num_threads() == 2
        two = parallel.fan_out(_task, tasks, threads=None, jobs=2)
        assert two == [(v + 100, 1) for v in range(5)]  # side by side: one thread per task
        assert parallel.fan_out(_task, tasks, threads=3, jobs=2) == [(v + 100, 3) for v in range(5)]
    assert parallel.fan_out(_pid, [()], jobs=2) == [os.getpid()]  # a lone task runs here
    assert set(parallel.fan_out(_pid, [()] * 4, jobs=2)).isdisjoint({os.getpid()})
    with joblib.parallel_config(n_jobs=2):  # joblib's own setting applies when ours is unset
        assert [t for _, t in parallel.fan_out(_task, tasks, threads=None)] == [1] * 5


def test_cache_entries_of_worker_processes_reach_the_results_file(tmp_path):
    """A results file names the code that computed every stage, those cached in workers too."""
    from symlib.book import cache

    mark = cache.usage_mark()
    out = parallel.fan_out(_cached_cell, [(str(tmp_path), k) for k in range(4)], jobs=2)
    assert [v for v, _ in out] == [0, 1, 4, 9] and os.getpid() not in {pid for _, pid in out}
    assert cache.computed_with("03_sgm_vi", since=mark) == [
        {"code_hash": cache.stage_code_hash("03_sgm_vi"), "data_hash": cache.data_hash(),
         "stages": ["03_sgm_vi-cell"], "entries": 4}
    ]


# --------------------------------------------------------------------------- chapters


def test_chapter3_mnist_cells_two_at_a_time_equal_the_serial_run():
    p = get_profile("03_sgm_vi", "smoke")
    serial = ch3.mnist_experiment(p, 0, jobs=1)
    assert len(serial["cells"]) == len(p.mnist_widths) * (1 + len(p.mnist_ks))
    assert_identical(ch3.mnist_experiment(p, 0, jobs=2), serial)


def test_chapter4_stan_fits_in_worker_processes_equal_the_serial_run(tmp_path):
    """Splits x fits (the authors' angle prior among them), the synthetic fits and the robustness
    stage's fits run in two loky workers of a separate Python,
    which must also exit: httpstan's chain processes inside a worker once kept it from exiting,
    and a worker's clean-up once deleted the other worker's Stan fit before it was read."""
    p = get_profile("04_constrained_models", "smoke")
    out = tmp_path / "fanned.pt"
    script = textwrap.dedent(f"""
        import torch
        from symlib.chapters import get_profile
        from symlib.chapters import constrained_models as ch4
        p = get_profile("04_constrained_models", "smoke")
        torch.set_num_threads(1)
        res = {{"synth": ch4.synthetic_experiment(p, 0), "boston": ch4.boston_experiment(p, 0),
                "robust": ch4.robustness_experiment(p, 0)}}
        torch.save(res, {str(out)!r})
    """)
    env = {**os.environ, parallel.ENV_VAR: "2"}
    # a hang guard, not a timing: the run takes well under a minute on an idle machine
    proc = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        env=env,
        cwd=tmp_path,
        timeout=900,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    fanned = torch.load(out, weights_only=False)
    with torch_threads(p.threads):
        serial = {
            "synth": ch4.synthetic_experiment(p, 0, jobs=1),
            "boston": ch4.boston_experiment(p, 0, jobs=1),
            "robust": ch4.robustness_experiment(p, 0, jobs=1),
        }
    assert len(serial["boston"]["splits"]) == p.boston_splits
    assert ch4.AUTHORS_ANGLES in serial["boston"]["splits"][0] and serial["robust"]["synth"]
    assert_identical(fanned, serial)


@pytest.fixture(scope="module")
def few_digits() -> dict:
    """Chapter 2b's smoke data cut to 640 training and 200 test digits (ten batches)."""
    data = ch2b.load_data(get_profile("02b_posterior_mmd", "smoke"))
    return {k: v[:640] if k in ("x_train", "y_train") else v[:200] for k, v in data.items()}


def test_chapter2b_chunks_two_at_a_time_equal_the_serial_run(few_digits):
    p = get_profile("02b_posterior_mmd", "smoke")
    assert p.train_chunk < p.reference_models + p.ensemble_models  # several chunks, one short
    serial = ch2b.train_networks(p, few_digits, 0, progress=False, jobs=1)
    assert serial["reference"]["W1"].shape[0] == p.reference_models
    assert_identical(ch2b.train_networks(p, few_digits, 0, progress=False, jobs=2), serial)


def test_chapter2b_without_chunks_trains_one_batch_from_the_seed(few_digits):
    """``train_chunk=None`` is the single batch the chapter trained before it had chunks."""
    p = dataclasses.replace(get_profile("02b_posterior_mmd", "smoke"), train_chunk=None)
    x, y = few_digits["x_train"], few_digits["y_train"]
    nets = ch2b.train_networks(p, few_digits, 3, progress=False)
    gen = torch.Generator().manual_seed(3)
    n = p.reference_models + p.ensemble_models
    with torch_threads(p.threads):
        direct = train_batched(ch2b._loss, init_optunet(gen, n), x, y, ch2b.sgd_config(p), gen,
                               batched_loss_fn=optunet_cross_entropy_batched)
    for k, v in direct.items():
        assert torch.equal(torch.cat([nets["reference"][k], nets["ensemble"][k]]), v), k


def test_chapter1_experiments_side_by_side_equal_the_serial_run(monkeypatch):
    p = get_profile("01_ortho_skip", "smoke")
    calls = []

    def fan_out(fn, tasks, **kwargs):  # the chapter's own call, watched
        calls.append((len(tasks), parallel.n_jobs(kwargs.get("jobs"))))
        return parallel.fan_out(fn, tasks, **kwargs)

    monkeypatch.setattr(ch1, "fan_out", fan_out)
    monkeypatch.setenv(parallel.ENV_VAR, "1")
    with torch_threads(1):
        serial = ch1.compute(p, 0, torch.device("cpu"))
    monkeypatch.setenv(parallel.ENV_VAR, "2")
    with torch_threads(1):
        fanned = ch1.compute(p, 0, torch.device("cpu"))
    assert calls == [(2, 1), (2, 2)]  # both experiments as tasks, two at a time the second time
    assert set(serial["timing"]) >= {"train_s", "gap_s", "total_s"}
    assert_identical(fanned, serial)


def test_on_a_dask_cluster_results_equal_the_serial_run():
    """The README's two lines: a ``dask.distributed`` client and joblib's dask backend."""
    distributed = pytest.importorskip("distributed")
    p = get_profile("03_sgm_vi", "smoke")
    with torch_threads(1):  # in-process workers share this process's thread setting
        serial = ch3.mnist_experiment(p, 0, jobs=1)
        with (
            distributed.LocalCluster(
                n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
            joblib.parallel_config(backend="dask"),
            distributed.get_task_stream(client) as stream,
        ):
            on_dask = ch3.mnist_experiment(p, 0)
    assert len(stream.data) >= len(serial["cells"])  # the cells ran as Dask tasks
    assert_identical(on_dask, serial)
