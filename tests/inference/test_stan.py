"""symlib.inference.stan's clean-up of httpstan's stored fits (no Stan needed)."""

import gzip

from symlib.inference import stan as st


def test_only_this_calls_fit_files_are_deleted(tmp_path):
    """Another process sampling the same model may have written a fit meanwhile that it has not
    read yet: only the files holding this call's own chain outputs go."""
    ours, theirs = b'{"topic": "sample", "values": [1]}\n', b'{"topic": "sample", "values": [2]}\n'
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.write_bytes(gzip.compress(ours))
    other.write_bytes(gzip.compress(theirs))
    partial = tmp_path / "partial"
    partial.write_bytes(gzip.compress(theirs)[:7])  # still being written by its process
    st._delete_fits({mine, other, partial, tmp_path / "gone"}, (ours,))
    assert not mine.exists()
    assert other.exists() and partial.exists()
