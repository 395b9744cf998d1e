"""Every source kind x every writer: what is written holds the source's bytes, and no array a
reader returned (or a writer was given) changes while it is written.

Source kinds: a local file, a caller's buffer (bytes, or a mapping of its own), a single remote file over HTTP (nginx), a
remote AEROSET, and a single file and a set on object storage (fsspec's memory:// filesystem,
read through the same store interface as s3://).  A remote file of 64 MiB or more is held in an anonymous sparse mapping
(``codec.io.sources._SPARSE_FROM``); dropping pages of such a mapping (as a writer does for a
file mapping, to keep resident memory flat) would replace the data by zeros -- the tests run
the remote kinds with that mapping forced on for small files, and once at the real size.
"""
import mmap
import os

import gguf
import numpy as np
import pytest

import codec
from codec import registry
from codec.io import sources
from codec.formats.aeroset import write_aeroset
from codec.io.remote import HttpOptions

from .budgets import convert_peak_growth_mb
from .servers import Nginx

pytestmark = pytest.mark.timeout(300)

FAST = HttpOptions(connect_timeout=2, read_timeout=5.0, retries=1, backoff=0.01)
#: every format a model can be written to
WRITERS = sorted(d.name for d in registry.formats() if d.writer is not None and d.capabilities is not None)
#: the source formats that can be read from every source kind
SOURCES = ("aero", "safetensors", "gguf")
#: a target's file name
_NAME = {"aeroset": "out.aeroset.json"}


def _tensors() -> dict:
    """Tensors every writer holds as they are (names that are STB ids too), each bigger than a
    few pages where it matters (a writer drops pages of arrays of 64 KiB and more)."""
    rng = np.random.default_rng(30)
    return {"0": rng.standard_normal((256, 300)).astype(np.float32),
            "1": rng.integers(-2**31, 2**31 - 1, 70_000, dtype=np.int32),
            "2": rng.standard_normal(64).astype(np.float16)}


def _write_source(fmt: str, path: str, tensors: dict) -> None:
    if fmt == "gguf":  # written by the gguf package, the format's own tools
        w = gguf.GGUFWriter(path, "llama")
        for n, a in tensors.items():
            w.add_tensor(n, a)
        w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    else:
        codec.write(path, tensors, format=fmt)


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    root = tmp_path_factory.mktemp("seams-www")
    t = _tensors()
    for fmt in SOURCES:
        _write_source(fmt, str(root / f"m.{fmt}"), t)
    write_aeroset(str(root / "set"), t, max_shard_bytes=200_000, max_part_shards=1)
    return root


@pytest.fixture(scope="module")
def objects(www):
    """The same files on object storage (memory://seams/...)."""
    import fsspec
    fs = fsspec.filesystem("memory")
    for d, _, names in os.walk(www):
        for n in names:
            fs.pipe_file("/seams/" + os.path.relpath(os.path.join(d, n), www), open(os.path.join(d, n), "rb").read())
    yield "memory://seams"
    fs.rm("/seams", recursive=True)


@pytest.fixture(scope="module")
def nginx(www):
    with Nginx(www) as n:
        yield n


@pytest.fixture
def sparse(monkeypatch):
    """Remote files of any size held in the anonymous sparse mapping big ones get."""
    monkeypatch.setattr(sources, "_SPARSE_FROM", 0)


def _source(kind: str, fmt: str, www, nginx, objects=None):
    """(what codec.open takes, its options) for a source of ``kind``."""
    if kind == "file":
        return str(www / f"m.{fmt}"), {}
    if kind == "buffer":
        return (www / f"m.{fmt}").read_bytes(), {}
    if kind == "mapped-buffer":  # a caller's own anonymous mapping, read-only to us
        data = (www / f"m.{fmt}").read_bytes()
        mm = mmap.mmap(-1, len(data), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        mm[:] = data
        return memoryview(mm).toreadonly(), {}
    if kind == "remote-file":
        return f"{nginx.url}/m.{fmt}", {"http": FAST}
    index = next(n for n in os.listdir(www / 'set') if n.endswith('.aeroset.json'))
    if kind == "object-file":
        return f"{objects}/m.{fmt}", {}
    if kind == "object-set":
        return f"{objects}/set/{index}", {}
    assert kind == "remote-set"
    return f"{nginx.url}/set/{index}", {}


def _held(r) -> dict:
    """The reader's arrays (views) and a copy of their bytes."""
    views = {n: r.tensor(n) for n in r.tensors}
    return views, {n: (a.dtype, a.shape, a.tobytes()) for n, a in views.items()}


def _check_written(out: str, want: dict) -> None:
    with codec.open(out) as w:
        got = {n: (a.dtype, a.shape, a.tobytes()) for n, a in ((n, w.tensor(n)) for n in w.tensors)}
    assert got.keys() == want.keys()
    for n in want:
        assert got[n] == want[n], f"tensor {n!r} written wrong"


def _unchanged(views: dict, copies: dict) -> None:
    for n, a in views.items():
        assert a.tobytes() == copies[n][2], f"the reader's array {n!r} changed while it was written"


KINDS = [(k, f) for k in ("file", "buffer", "mapped-buffer") for f in SOURCES] + \
        [("remote-file", f) for f in SOURCES] + [("remote-set", "aeroset")] + \
        [("object-file", f) for f in SOURCES] + [("object-set", "aeroset")]


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("kind,fmt", KINDS, ids=[f"{k}-{f}" for k, f in KINDS])
def test_convert_from_every_source_kind_to_every_writer(kind, fmt, writer, www, nginx, objects, sparse, tmp_path):
    src, opts = _source(kind, fmt, www, nginx, objects)
    out = str(tmp_path / _NAME.get(writer, f"out.{writer}"))
    with codec.open(src, **opts) as r:
        views, copies = _held(r)
        out = codec.convert(src, out, drop_metadata=True, **opts)
        _unchanged(views, copies)
        for n in r.tensors:  # and the reader still reads the same bytes
            assert r.tensor(n).tobytes() == copies[n][2], n
    _check_written(out, copies)


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("kind,fmt", KINDS, ids=[f"{k}-{f}" for k, f in KINDS])
def test_write_of_a_readers_arrays_leaves_them_unchanged(kind, fmt, writer, www, nginx, objects, sparse, tmp_path):
    src, opts = _source(kind, fmt, www, nginx, objects)
    out = str(tmp_path / _NAME.get(writer, f"out.{writer}"))
    ids = registry.get(writer).capabilities.ids
    with codec.open(src, **opts) as r:
        views, copies = _held(r)
        res = codec.write(out, {(int(n) if ids else n): a for n, a in views.items()}, format=writer)
        out = res if isinstance(res, str) else out  # (a set: its directory)
        _unchanged(views, copies)
    _check_written(out, copies)


def test_a_remote_file_at_the_sparse_size_converts_exactly(tmp_path):
    """The real threshold, nothing forced: a 64 MiB+ remote safetensors file to AERO and to an
    AEROSET, and a view taken before the write keeps its bytes."""
    rng = np.random.default_rng(31)
    big = {"w": rng.standard_normal((sources._SPARSE_FROM // 4 // 1024 + 16, 1024)).astype(np.float32)}
    root = tmp_path / "www"
    root.mkdir()
    codec.write(str(root / "big.safetensors"), big)
    want = big["w"].tobytes()
    del big
    with Nginx(root) as ngx:
        url = f"{ngx.url}/big.safetensors"
        with codec.open(url, http=FAST) as r:
            assert isinstance(r.inner._src, sources.PartialSource) and r.inner._src._mm is not None
            w = r["w"]
            codec.write(str(tmp_path / "u.aero"), {"w": w})
            assert w.tobytes() == want
            assert r["w"].tobytes() == want
        codec.convert(url, str(tmp_path / "c.aero"), http=FAST)
        s = codec.convert(url, str(tmp_path / "s" / "s.aeroset.json"), http=FAST)
    for out in (str(tmp_path / "u.aero"), str(tmp_path / "c.aero"), s):
        assert codec.validate(out, full=True).ok, out
        _check_written(out, {"w": (np.dtype(np.float32), (len(want) // 4096, 1024), want)})


def test_a_remote_file_converts_in_memory_far_below_its_size(tmp_path):
    """Converting a remote file reads all of it: it is fetched once into a temporary file and
    converted from there, so the converting process' peak RSS grows by far less than the file
    (the ranges held for a remote file could never leave memory: +the whole file before)."""
    root = tmp_path / "www"
    root.mkdir()
    rng = np.random.default_rng(32)
    codec.save({f"w{i}": rng.integers(0, 255, 16 << 20, dtype=np.uint8).view(np.float32) for i in range(10)},
               str(root / "big.safetensors"))
    size_mb = (root / "big.safetensors").stat().st_size >> 20
    with Nginx(root) as ngx:
        grew = convert_peak_growth_mb(f"{ngx.url}/big.safetensors", str(tmp_path / "big.aero"))
    assert grew < size_mb / 2, (grew, size_mb)
    with codec.open(str(root / "big.safetensors")) as a, codec.open(str(tmp_path / "big.aero")) as b:
        assert all(a.tensor(n).tobytes() == b.tensor(n).tobytes() for n in a.tensors)
