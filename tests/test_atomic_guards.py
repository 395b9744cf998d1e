"""A write that fails part-way leaves the directory as it was: the target untouched and no
temporary file behind, for every writer (the failure injected at the fsync of the new file)."""
import errno
import os

import numpy as np
import pytest

import codec
from codec import registry


@pytest.mark.parametrize("fmt", sorted(d.name for d in registry.formats() if d.writer is not None))
def test_a_failed_write_leaves_the_target_and_no_temporary(fmt, tmp_path, monkeypatch):
    name = "m.aeroset.json" if fmt == "aeroset" else f"m.{fmt}"
    ids = registry.get(fmt).capabilities.ids
    t = {(0 if ids else "w"): np.arange(12, dtype=np.float32).reshape(3, 4)}
    d = tmp_path / "d"
    d.mkdir()
    codec.write(str(d / name), t)  # (the name says the format)
    before = {p: (d / p).read_bytes() for p in os.listdir(d) if (d / p).is_file()}
    real = os.fsync

    def full(fd):
        if os.path.isfile(f"/proc/self/fd/{fd}"):  # a file, not the directory
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises((OSError, codec.errors.ModelcodecError)):
        codec.write(str(d / name), {k: v + 1 for k, v in t.items()})
    monkeypatch.setattr(os, "fsync", real)
    assert sorted(os.listdir(d)) == sorted(before)
    for p, data in before.items():
        assert (d / p).read_bytes() == data, p
    assert os.listdir(tmp_path) == ["d"]  # (a set's temporary directory is made beside it)
