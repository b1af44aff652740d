"""``python -m symlib.data download NAME``: download an IDX dataset and verify its checksums
(:func:`symlib.data.download_idx_dataset`, the one function of the package that uses the network)."""

from symlib.data import _main

_main()
