"""Test-wide isolation: no test reads or writes the user's real cache, results or data dirs."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _isolated_symlib_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("symlib-session")
    mp = pytest.MonkeyPatch()
    mp.setenv("SYMLIB_CACHE", str(root / "cache"))
    mp.setenv("SYMLIB_RESULTS", str(root / "results"))
    yield root
    mp.undo()


def pytest_configure(config):
    """Under pytest-xdist (``make test`` runs ``-n auto``) share the cores between the workers:
    torch's default of one intra-op thread per core in every worker oversubscribes the machine,
    and the suite's small-op loops then run many times slower (kernels the tests start inherit
    ``OMP_NUM_THREADS``)."""
    import os

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        threads = max(1, (os.cpu_count() or 1) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        import torch

        torch.set_num_threads(threads)
