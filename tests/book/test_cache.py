"""Tests for symlib.book.cache: keys, hits and misses, corruption detection, atomicity."""

from __future__ import annotations

import enum
import json
import pathlib
import pickle
import re
import subprocess
import sys
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


def entry_files(
    directory: pathlib.Path, experiment: str = "exp"
) -> tuple[pathlib.Path, pathlib.Path]:
    (payload,) = (directory / experiment).glob("*.pt")
    return payload, payload.with_suffix(".json")


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


def test_sidecar_is_readable_json(tmp_path):
    cached("exp", "1", Config(), lambda: 1.5, directory=tmp_path)
    payload, meta_path = entry_files(tmp_path)
    meta = json.loads(meta_path.read_text())
    assert meta["config"]["width"] == 8 and meta["config"]["__dataclass__"] == "Config"
    assert meta["key"] == payload.stem == config_key("exp", "1", Config())
    assert not list((tmp_path / "exp").glob("*.tmp"))


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
    payload, _ = entry_files(tmp_path)
    corrupt(payload)
    with pytest.warns(CacheCorruptionWarning, match=str(payload.name)):
        again = cached("exp", "1", Config(), compute, directory=tmp_path)
    assert compute.calls == 2
    assert torch.equal(again["w"], value["w"]) and again["loss"] == [0.5, 0.25]
    assert payload.with_name(payload.name + ".corrupt").exists()
    # the fresh entry is valid again: a hit, no warning
    loaded = cached("exp", "1", Config(), compute, directory=tmp_path)
    assert compute.calls == 2 and torch.equal(loaded["w"], value["w"])


def test_unreadable_sidecar_is_corruption(tmp_path):
    compute = Counter(3)
    cached("exp", "1", {}, compute, directory=tmp_path)
    _, meta_path = entry_files(tmp_path)
    meta_path.write_text('{"sha2')
    with pytest.warns(CacheCorruptionWarning):
        assert cached("exp", "1", {}, compute, directory=tmp_path) == 3
    assert compute.calls == 2


def test_payload_without_sidecar_is_a_miss(tmp_path):
    """What an interrupt between the two atomic writes leaves: recomputed, no warning."""
    compute = Counter(3)
    cached("exp", "1", {}, compute, directory=tmp_path)
    _, meta_path = entry_files(tmp_path)
    meta_path.unlink()
    assert cached("exp", "1", {}, compute, directory=tmp_path) == 3
    assert compute.calls == 2


def test_crash_during_compute_leaves_no_entry(tmp_path):
    def boom():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cached("exp", "1", {}, boom, directory=tmp_path)
    assert not list(tmp_path.rglob("*.pt")) and not list(tmp_path.rglob("*.json"))
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
