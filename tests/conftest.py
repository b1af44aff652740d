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


PROCESS_VARIABLES = ("SYMLIB_JOBS", "SYMLIB_PIECE_START", "OMP_NUM_THREADS")
"""What ``pipeline execute`` / ``compute`` set in their own process for the kernels and stages
they start (``_default_jobs``, ``_piece_starts``, the short profiles' one torch thread): a test
that calls ``pipeline.main`` in the test process must not hand them to the tests after it (a
leaked ``SYMLIB_JOBS=-1`` sent a later test's sweep to joblib workers started under another
test's ``SYMLIB_CACHE``)."""


@pytest.fixture(autouse=True)
def _restore_process_variables(monkeypatch):
    import os

    for name in PROCESS_VARIABLES:
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])   # recorded: restored after the test
        else:
            monkeypatch.setenv(name, "")                 # recorded as unset, so removed after it
            monkeypatch.delenv(name)


def pytest_configure(config):
    """Under pytest-xdist (``make test`` runs ``-n auto``) share the cores between the workers:
    torch's default of one intra-op thread per core in every worker oversubscribes the machine,
    and the suite's small-op loops then run many times slower (kernels the tests start inherit
    ``OMP_NUM_THREADS``)."""
    import os

    from symlib.book.workers import use_env_aware_workers

    # every test has its own SYMLIB_CACHE: joblib workers an earlier test started would write
    # there (symlib.book.workers)
    use_env_aware_workers()
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        threads = max(1, (os.cpu_count() or 1) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        import torch

        torch.set_num_threads(threads)
