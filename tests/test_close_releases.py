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
