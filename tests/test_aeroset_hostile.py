"""AEROSET files that are not files, and sizes no file can have: typed errors, at once."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import codec
from codec.io.cache import RangeCache
from codec.formats.aeroset import write_aeroset


@pytest.fixture
def a_set(tmp_path):
    d = tmp_path / "set"
    write_aeroset(d, {"w": np.arange(16, dtype=np.float32)})
    return d


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)


def test_fifo_index_part_and_index_dir_end_at_once(a_set, tmp_path):
    fifo_index = tmp_path / "x.aeroset.json"
    os.mkfifo(fifo_index)
    r = _run(f"import codec\ntry:\n    codec.open({str(fifo_index)!r})\nexcept codec.UsageError as e:\n    print(e)")
    assert "is a FIFO, not a regular file" in r.stdout, r.stdout + r.stderr
    part = a_set / "part-000.aero"
    part.unlink()
    os.mkfifo(part)
    r = _run(f"import codec\nrep = codec.validate({str(a_set)!r}, full=True)\n"
             "print(sorted({v.rule for v in rep.violations}), [str(v) for v in rep.violations])")
    assert "AEROSET-MISSING" in r.stdout and "not a regular file" in r.stdout, r.stdout + r.stderr
    r = _run(f"import codec\ntry:\n    codec.open({str(a_set)!r}).tensor('w')\nexcept codec.FormatError as e:\n"
             "    print(e.rule)")
    assert "AEROSET-MISSING" in r.stdout, r.stdout + r.stderr
    (tmp_path / "dir.aeroset.json").mkdir()
    with pytest.raises(codec.UsageError):
        codec.open(tmp_path / "dir.aeroset.json")


@pytest.mark.parametrize("size", [2**47, 2**63, 2**64 - 1])
def test_sizes_no_file_can_have_are_typed_errors(a_set, size):
    idx = a_set / "model.aeroset.json"
    obj = json.loads(idx.read_text())
    obj["parts"][0]["size_bytes"] = size
    idx.write_text(json.dumps(obj))
    rep = codec.validate(a_set, full=True)
    assert not rep.ok and "AEROSET-LIMIT" in {v.rule for v in rep.violations}, rep.violations
    with pytest.raises(codec.FormatError) as ei:
        with codec.open(a_set) as r:
            r.tensor("w")
    assert ei.value.rule == "AEROSET-LIMIT"


def test_a_fifo_planted_in_the_cache_is_a_miss(tmp_path):
    c = RangeCache(tmp_path / "cache", max_bytes=1 << 20)
    key = c.key("http://h/x", 0, 4, "tag")
    c.put(key, b"abcd")
    assert bytes(c.get(key, 4)) == b"abcd"
    path = c._path(key)
    os.unlink(path)
    os.mkfifo(path)
    r = _run(f"from codec.io.cache import RangeCache\nc = RangeCache({str(tmp_path / 'cache')!r}, max_bytes=1 << 20)\n"
             f"print(c.get({key!r}, 4))")
    assert r.stdout.strip() == "None", r.stdout + r.stderr
    assert not os.path.lexists(path)


def test_a_deep_index_is_a_limit_whatever_the_callers_stack(a_set):
    """An index nesting past MAX_NESTING is AEROSET-LIMIT, told before it is decoded: the same
    verdict from a caller deep in its own stack (where the decoder's recursion would fail)."""
    from codec.engine.nesting import MAX_NESTING
    index = a_set / "model.aeroset.json"
    obj = json.loads(index.read_text())
    index.write_text(json.dumps(obj)[:-1] + ', "extra": ' + "[" * 2000 + "]" * 2000 + "}")

    def verdict():
        rep = codec.validate(str(a_set))
        return sorted({v.rule for v in rep.violations})
    assert verdict() == ["AEROSET-LIMIT"]

    def deep_call(n):
        return verdict() if n == 0 else deep_call(n - 1)
    assert deep_call(sys.getrecursionlimit() - 100) == ["AEROSET-LIMIT"]
    obj["extra"] = json.loads("[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1))
    index.write_text(json.dumps(obj))
    assert codec.validate(str(a_set)).ok
