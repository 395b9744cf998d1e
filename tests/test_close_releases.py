"""A closed reader lets go of its files' mappings at once -- not at the cyclic collector's next
pass (it may not run for a long time, or ever: the checks below run with it disabled) -- keeping
only the mapping an array the caller still holds needs, valid and unchanged, until that array
goes.  Every format, single files and models in several files; the reader dropped, and the reader
still held (a ``with`` block's name outlives the block)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT

CHILD = r"""
import gc, json, os, sys
gc.disable()  # (only reference counts free anything from here on)
import numpy as np
import codec

fmt, where, keep_reader = sys.argv[1], sys.argv[2], sys.argv[3] == "held"
a = np.arange(50_000, dtype=np.float32)
b = np.ones((200, 300), np.float32)
opts = {}
if fmt == "stb":
    tensors = [a, b]
elif fmt in ("safetensors-sharded", "gguf-split"):
    tensors, opts = {"a": a, "b": b}, {"max_shard_size": "100KB"}
elif fmt == "aeroset":
    tensors, opts = {"a": a, "b": b}, {"format": "aeroset", "max_shard_bytes": 100_000, "max_part_shards": 1}
else:
    tensors = {"a": a, "b": b}
ext = {"aeroset": "set", "safetensors-sharded": "m.safetensors", "gguf-split": "m.gguf"}.get(fmt, "m." + fmt)
path = codec.write(os.path.join(where, ext), tensors, **opts)
files = sorted(os.path.realpath(os.path.join(dp, f)) for dp, _, fs in os.walk(where) for f in fs)
assert len(files) >= (2 if fmt in ("aeroset", "safetensors-sharded", "gguf-split") else 1), files

def mapped():
    # the mappings of the model's files in this process (one line per mapping)
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if line.rstrip().split(" ")[-1] in files)

first = 0 if fmt == "stb" else "a"
with codec.open(path) as r:
    for n in r.tensors:
        float(r.tensor(n).sum())
    if hasattr(r, "validate"):
        assert r.validate(full=True, progress=False).ok
    kept = r.tensor(first)
    while_open = mapped()
if not keep_reader:
    del r
with_array = mapped()
same = bool(np.array_equal(kept, a))
del kept
print(json.dumps({"while_open": while_open, "with_array": with_array, "after": mapped(), "same": same}))
"""

FORMATS = ["aero", "aeroset", "safetensors", "safetensors-sharded", "gguf", "gguf-split", "oinf", "mag", "stb"]


@pytest.mark.parametrize("reader", ["dropped", "held"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_closed_reader_frees_its_mappings_without_the_collector(fmt, reader, tmp_path):
    out = subprocess.run([sys.executable, "-c", CHILD, fmt, str(tmp_path), reader], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["while_open"] >= 1  # (the check sees the mappings it is about)
    assert got["same"]  # the array kept is intact after close
    assert got["with_array"] <= 1  # only the kept array's file stays mapped ...
    assert got["after"] == 0  # ... and nothing once it is gone


REMOTE_CHILD = r"""
import gc, json, mmap, os, sys, weakref
gc.disable()
import numpy as np
import codec
from codec.io.http_server import serve

fmt, where = sys.argv[1], sys.argv[2]
a = np.arange(400_000, dtype=np.float32)  # (1.6 MB: a remote file's ranges in a mapping of their own)
b = np.ones(400_000, np.float32)
opts = {"max_shard_size": "2MB"} if fmt in ("safetensors-sharded", "gguf-split") else {}
if fmt == "aeroset":
    opts = {"format": "aeroset"}
name = {"aeroset": "set", "safetensors-sharded": "m.safetensors", "gguf-split": "m.gguf"}.get(fmt, "m." + fmt)
path = codec.write(os.path.join(where, name), {"a": a, "b": b}, **opts)
rel = {"aeroset": "set/model.aeroset.json", "safetensors-sharded": "m.safetensors.index.json"}.get(
    fmt, os.path.basename(path))

def holder(x):
    # what holds an array's bytes (through its bases and the buffers they view): a mapping, or
    # an array owning its memory
    while True:
        up = x.base if isinstance(x, np.ndarray) else x.obj if isinstance(x, memoryview) else None
        if up is None or isinstance(x, mmap.mmap):
            return x
        x = up

def mapped(m):
    if not isinstance(m, mmap.mmap):
        return True  # (the array's own memory)
    at = np.frombuffer(m, np.uint8, 1).__array_interface__["data"][0]
    with open("/proc/self/maps") as f:
        return any(int(lo, 16) <= at < int(hi, 16) for lo, hi in (line.split(" ")[0].split("-") for line in f))

with serve(where) as url:
    with codec.open(url + "/" + rel) as r:
        kept = r.tensor("a")
        m = holder(kept)
        seen = isinstance(m, (mmap.mmap, np.ndarray)) and len(memoryview(m).cast("B")) >= a.nbytes and mapped(m)
        m = weakref.ref(m)
    same = bool(np.array_equal(kept, a))
    with_array = m() is not None and not getattr(m(), "closed", False)
    del kept
    print(json.dumps({"seen": seen, "same": same, "with_array": with_array, "after": m() is not None}))
"""


@pytest.mark.parametrize("fmt", ["aero", "aeroset", "safetensors", "safetensors-sharded", "gguf", "gguf-split"])
def test_a_closed_remote_reader_still_held_frees_the_ranges_it_read(fmt, tmp_path):
    """Over HTTP the bytes read are held in memory of the reader's own (a mapping for a big file;
    an AEROSET's tensors own theirs): once closed, the reader -- still held, as a ``with``
    block's name is -- keeps none of it: an array viewing it keeps it valid until that array
    goes, no longer."""
    out = subprocess.run([sys.executable, "-c", REMOTE_CHILD, fmt, str(tmp_path)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["seen"]  # (the check sees the memory it is about)
    assert got["same"] and got["with_array"]  # the array kept is intact after close ...
    assert not got["after"]  # ... and that memory goes with it


@pytest.mark.parametrize("fmt", ["aero", "aeroset", "gguf", "oinf", "mag"])
def test_the_metadata_of_a_closed_reader_is_its_values_or_a_usage_error(fmt, tmp_path):
    """Metadata not read before close (AERO's, a set's index.aero's: read when first asked for)
    is a UsageError saying the reader is closed, not the ValueError of a released buffer; read
    before, it stays."""
    import numpy as np
    import codec
    from codec import errors as E
    md = {"n": 3} if fmt == "mag" else {"model_name": "tiny", "n": 3}
    path = codec.write(str(tmp_path / ("set/" if fmt == "aeroset" else f"m.{fmt}")),
                       {"w": np.arange(6, dtype=np.float32)}, metadata=md,
                       **({"format": "aeroset"} if fmt == "aeroset" else {}))
    with codec.open(path) as r:
        pass
    for get in (lambda: r.metadata, lambda: r.raw_metadata, lambda: r.value_types, r.describe):
        try:
            got = get()
        except E.UsageError as e:
            assert str(e).startswith(f"metadata: the {fmt} reader of ") and str(e).endswith(" is closed"), e
        else:  # (a format that holds its metadata in memory: the values, their types, the description)
            assert isinstance(got, dict), got
    with codec.open(path) as r:
        before = dict(r.metadata)
    assert dict(r.metadata) == before and md.items() <= before.items()
