"""A write that fails part-way leaves the directory as it was: the target untouched and no
temporary file behind, for every writer (the failure injected at the fsync of the new file),
and says so in a UsageError naming the target; a set is never written to a URL's look-alike
local path."""
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
    with pytest.raises(codec.errors.UsageError) as ei:  # naming what was written, never a temporary
        codec.write(str(d / name), {k: v + 1 for k, v in t.items()})
    assert "No space left on device" in str(ei.value) and codec.io.atomic.TEMP_MARK not in str(ei.value)
    assert str(ei.value).startswith(str(d / name) if fmt != "aeroset" else str(d))
    monkeypatch.setattr(os, "fsync", real)
    assert sorted(os.listdir(d)) == sorted(before)
    for p, data in before.items():
        assert (d / p).read_bytes() == data, p
    assert os.listdir(tmp_path) == ["d"]  # (a set's temporary directory is made beside it)


def test_a_set_written_to_a_url_is_a_usage_error_and_makes_no_local_directory(tmp_path, monkeypatch):
    from codec.formats.aeroset import write_aeroset
    monkeypatch.chdir(tmp_path)
    with pytest.raises(codec.errors.UsageError, match=r"s3://"):
        write_aeroset("s3://bucket/k/model", {"w": np.zeros(3, np.float32)})
    assert os.listdir(tmp_path) == []
