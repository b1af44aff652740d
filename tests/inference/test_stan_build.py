"""Stan builds under concurrency and faults, and processes killed mid-build or mid-sampling.

Every test here uses a private httpstan cache (``XDG_CACHE_HOME`` in a temporary folder). The
session compiles ONE tiny Stan program once (the ``raced_build`` fixture: two processes build it
together from an empty cache, about half a minute of g++; under pytest-xdist the first worker to
need it builds it and the others read its record); the corruption and kill tests copy that model's
folder instead of compiling again. Tests that pay for the compile are marked slow.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import filelock
import pytest

pytest.importorskip("stan")
psutil = pytest.importorskip("psutil")

from symlib.inference import stan_build, stan_processes

TINY = "parameters { real y; } model { y ~ normal(0, 1); }  // symlib's test program\n"
CLIENT_TIMEOUT_S = 3
"""The client timeout the raced build runs under: far shorter than compiling TINY."""

BUILD_AND_SAMPLE = textwrap.dedent(f"""
    import sys
    import aiohttp, aiohttp.client
    # PyStan's HTTP client takes aiohttp's default timeout (300 s): make it shorter than the
    # compile, as a busy machine's slow compile outlasts 300 s
    aiohttp.client.DEFAULT_TIMEOUT = aiohttp.ClientTimeout(total={CLIENT_TIMEOUT_S})
    from symlib.inference import stan as st
    # seeds differ: httpstan names a fit by its request, and a process deletes its own fit's file
    model = st.build("tiny", {{}}, seed=int(sys.argv[2]), code=sys.argv[1])
    fit = model.sample(chains=2, warmup=50, draws=50)
    print("draws", fit.draws["y"].shape, flush=True)
""")


def _env(xdg: Path, temp: Path) -> dict:
    return {**os.environ, "XDG_CACHE_HOME": str(xdg), "TMPDIR": str(temp)}


def _wait_until(condition, timeout_s: float, what: str):
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` after the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"waited {timeout_s} s for {what}")


def _raced_build(root: Path) -> dict:
    """Two processes build and sample TINY at the same time from the empty cache ``root/xdg``,
    with their temporary files in ``root/st`` (short: a Unix socket's path has at most 107 bytes)."""
    xdg, temp = root / "xdg", root / "st"
    xdg.mkdir(parents=True)
    temp.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", BUILD_AND_SAMPLE, TINY, str(seed)],
                              env=_env(xdg, temp), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for seed in (1, 2)]
    outputs = [p.communicate(timeout=900) for p in procs]  # a hang guard
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(xdg)
    try:
        directory, log = stan_build.model_directory(TINY), stan_build.log_path(TINY)
    finally:
        os.environ.pop("XDG_CACHE_HOME") if old is None else os.environ.update(XDG_CACHE_HOME=old)
    return {"results": [[p.returncode, out, err] for p, (out, err) in zip(procs, outputs)],
            "directory": str(directory), "log": str(log), "temp": str(temp)}


@pytest.fixture(scope="session")
def raced_build(tmp_path_factory, worker_id):
    """:func:`_raced_build`, once per test session: under pytest-xdist every worker's base folder
    sits in one session folder, where the first worker to get the lock builds and writes the
    record, and the others read it."""
    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    record = shared / "stan-raced-build" / "record.json"
    with filelock.FileLock(str(shared / "stan-raced-build.lock")):
        if not record.exists():
            shutil.rmtree(record.parent, ignore_errors=True)
            built = _raced_build(record.parent)
            record.write_text(json.dumps(built))
        built = json.loads(record.read_text())
    return {"results": [tuple(r) for r in built["results"]], "directory": Path(built["directory"]),
            "log": Path(built["log"]), "temp": Path(built["temp"])}


@pytest.fixture
def short_temp():
    """A temporary folder with a short path (a Unix socket's path has at most 107 bytes)."""
    temp = Path(tempfile.mkdtemp(prefix="st-"))
    yield temp
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty private httpstan cache for this test; its path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


def _seed_cache(raced_build, xdg: Path) -> Path:
    """Copy the session's compiled TINY into cache ``xdg``; the model folder there."""
    source = raced_build["directory"]
    if stan_build.check_module(source) is not None:
        pytest.fail(f"the session's raced build left no sound model in {source}")
    target = xdg / source.relative_to(source.parents[3])
    shutil.copytree(source, target)
    return target


@pytest.mark.slow  # compiles TINY (the session's one compile)
def test_two_processes_building_one_model_from_an_empty_cache_both_succeed(raced_build):
    """The race that left a truncated library: now one process compiles, the other waits, and
    both sample; the cache holds a module that loads."""
    for status, out, err in raced_build["results"]:
        assert status == 0, err[-3000:]
        assert "draws (2, 50)" in out
    compiles = [err for _, _, err in raced_build["results"] if "compiling Stan model" in err]
    assert len(compiles) == 1, [err[-500:] for _, _, err in raced_build["results"]]
    assert stan_build.check_module(raced_build["directory"]) is None


@pytest.mark.slow
def test_a_compile_longer_than_the_client_timeout_succeeds(raced_build):
    """The raced build ran under a 3-s HTTP client timeout (PyStan's is 300 s; busy machines
    compiled for up to 464 s), yet compiling took longer: the compile is not an HTTP request."""
    line = next(err for _, _, err in raced_build["results"] if "compiling Stan model" in err)
    seconds = float(line.split("done in ")[1].split(" s")[0])
    assert seconds > CLIENT_TIMEOUT_S
    assert all(status == 0 for status, _, _ in raced_build["results"])


@pytest.mark.slow
def test_the_console_gets_one_line_per_compile_and_the_log_the_compiler_output(raced_build):
    """g++'s warnings go to the log file named in the one stderr line, not to the console."""
    err = next(err for _, _, err in raced_build["results"] if "compiling Stan model" in err)
    log = raced_build["log"]
    seconds = err.split("done in ")[1].split(" s")[0]
    assert err.strip().splitlines() == [
        (f"compiling Stan model 'tiny' for the first time (about a minute; compiler output in "
         f"{log})\u2026 done in {seconds} s")]
    assert "warning" in log.read_text()  # Stan's headers always draw some from g++


@pytest.mark.slow
def test_the_raced_build_leaves_no_socket_files_in_the_temp_folder(raced_build):
    assert not list(raced_build["temp"].glob("httpstan_*"))
    assert not list(raced_build["temp"].glob(f"{stan_processes.SOCKET_PREFIX}*"))


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["empty", "cut-in-half", "cut-to-500-KB", "no-stderr-log"])
def test_a_damaged_cached_model_is_removed_with_a_warning_and_compiled_again(
        damage, raced_build, cache, monkeypatch):
    """A compile killed at link time leaves a 0-byte or cut .so (TAPE_ERROR, a dead kernel on
    loading, or a half that imports and fails later), or a .so without httpstan's stderr.log (FileNotFoundError): each is found, its
    folder named and removed, and the program compiled once more (here a copy stands for g++)."""
    folder = _seed_cache(raced_build, cache)
    module = next(folder.glob("*.so"))
    if damage == "empty":
        module.write_bytes(b"")
    elif damage.startswith("cut"):
        keep = module.stat().st_size // 2 if damage == "cut-in-half" else 500_000
        module.write_bytes(module.read_bytes()[:keep])
    else:
        (folder / "stderr.log").unlink()
    compiles = []

    def fake_compile(name, code):
        compiles.append(name)
        shutil.copytree(raced_build["directory"], stan_build.model_directory(code))
        return 0.5

    monkeypatch.setattr(stan_build, "_compile", fake_compile)
    with (pytest.warns(stan_build.StanCacheWarning, match=re.escape(str(folder))) as caught,
          stan_build.compiled("tiny", TINY) as seconds):
        assert seconds == 0.5
    assert "damaged" in str(caught[0].message)
    assert compiles == ["tiny"]
    assert stan_build.check_module(folder) is None


@pytest.mark.slow
def test_a_sound_cached_model_is_used_as_it_is(raced_build, cache, monkeypatch):
    _seed_cache(raced_build, cache)
    monkeypatch.setattr(stan_build, "_compile", lambda *a: pytest.fail("compiled a sound model"))
    with stan_build.compiled("tiny", TINY) as seconds:
        assert seconds == 0.0


def test_a_library_that_does_not_load_is_named_in_the_problem(tmp_path):
    """The check imports the module in a child Python (a cut library can segfault the loader)."""
    so = tmp_path / f"stan_services_model_x{EXTENSION_SUFFIXES[0]}"
    so.write_bytes(b"\x7fELF" + b"\0" * 60)
    for log in ("stanc.log", "stderr.log"):
        (tmp_path / log).write_text("")
    problem = stan_build.check_module(tmp_path)
    assert problem is not None and so.name in problem and "64 bytes" in problem


def test_a_program_stanc_rejects_fails_naming_the_log(cache):
    with (pytest.raises(RuntimeError, match=r"compiling Stan model 'bad' failed.*logs/"),
          stan_build.compiled("bad", "parameters { real y } model { }")):
        pass


def test_the_compiler_gets_pythons_flags_with_debug_information_off_last(cache, tmp_path, monkeypatch):
    """A stand-in g++ records its arguments and fails: the compile of a real program reached it with
    ``-O3`` (as setuptools' default flags have it) and ``-g0`` after every ``-g``."""
    calls = tmp_path / "calls"
    fake = tmp_path / "fake-cxx"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {calls}\necho "--" >> {calls}\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setenv("CXX", str(fake))
    with (pytest.raises(RuntimeError, match="compiling Stan model 'flags' failed"),
          stan_build.compiled("flags", TINY.replace("symlib's test program", "flags"))):
        pass
    first = calls.read_text().split("--\n")[0].split()
    assert "-O3" in first and "-c" in first
    assert [a for a in first if a in ("-g", "-g0")][-1] == "-g0"
    assert stan_build.compile_flags().endswith(" -g0") and "-O3" in stan_build.compile_flags()


def _children(pid: int) -> list:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _kill_and_check_orphans(proc: subprocess.Popen, children: list) -> None:
    """SIGKILL ``proc``; every one of ``children`` must go too (killed here if not, then fail)."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 15
    alive = children
    while alive and time.monotonic() < deadline:
        alive = [c for c in alive if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.1)
    for child in alive:
        child.kill()
    assert not alive, f"orphans of the killed process: {[(c.pid, c.name()) for c in alive]}"


SAMPLE_FOR_EVER = textwrap.dedent("""
    import sys, threading, time
    from symlib.inference import stan as st
    model = st.build("tiny", {}, seed=1, code=sys.argv[1])
    import httpstan.services_stub as stub

    def report():  # the chain processes' ids, once the pool has started them all
        while len(stub.executor._processes) < stub.executor._max_workers:
            time.sleep(0.05)
        # sys.__stdout__: symlib captures sys.stdout while sampling
        print("workers", *stub.executor._processes, file=sys.__stdout__, flush=True)

    threading.Thread(target=report, daemon=True).start()
    model.sample(chains=2, warmup=100, draws=10**9)
""")


@pytest.mark.slow
def test_killing_a_sampling_process_leaves_no_chain_process_and_no_socket(
        raced_build, tmp_path, short_temp):
    """kill -9 during sampling once left httpstan's pool workers (about 285 MB each) running."""
    xdg, temp = tmp_path / "xdg", short_temp
    _seed_cache(raced_build, xdg)
    proc = subprocess.Popen([sys.executable, "-c", SAMPLE_FOR_EVER, TINY], env=_env(xdg, temp),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("workers"), proc.stderr.read()[-3000:] if not line else line
        workers = [psutil.Process(int(pid)) for pid in line.split()[1:]]
        assert {w.pid for w in workers} <= {c.pid for c in _children(proc.pid)}
    finally:
        children = _children(proc.pid)
        _kill_and_check_orphans(proc, children)
    assert not list(temp.glob("httpstan_*"))
    # the killed process's socket folder stays until the next start clears it
    left = temp / f"{stan_processes.SOCKET_PREFIX}{proc.pid}"
    assert list(left.glob("*.sock")) and stan_processes.remove_stale(temp) == [left]
    assert not any(temp.iterdir())


COMPILE = textwrap.dedent("""
    import sys
    from symlib.inference import stan as st
    st.build("doomed", {}, seed=1, code=sys.argv[1])
""")


def test_killing_a_compiling_process_leaves_no_compiler_running(cache, tmp_path):
    """The compile runs in a child Python and g++ in its children: they die with the caller.
    (Killed as soon as g++ runs, so this costs seconds, not a compile.)"""
    code = TINY + f"// {time.time_ns()}\n"   # never in any cache
    proc = subprocess.Popen([sys.executable, "-c", COMPILE, code], env=_env(cache, tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_until(lambda: any(c.name().startswith("cc1plus") for c in _children(proc.pid)
                                if c.is_running()) or proc.poll() is not None, 120, "g++ to start")
        assert proc.poll() is None, proc.stderr.read()[-3000:]
    finally:
        children = _children(proc.pid)
        _kill_and_check_orphans(proc, children)
    assert stan_build.check_module(stan_build.model_directory(code)) is not None
