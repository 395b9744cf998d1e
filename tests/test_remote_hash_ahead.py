"""Whole-file work on a remote single file (load, convert, validate --full) hashes what its
reader checks while the download writes it: the reader over the downloaded copy finds those
digests made (over the very bytes it reads) and compares them with the hashes it trusts, with
no second pass over the bytes; a hostile file is refused with the same typed errors, and a
byte written twice voids every digest made ahead."""
import collections
import os
import threading

import blake3
import numpy as np
import pytest

import codec
from codec import errors as E
from codec.io.remote import HttpOptions

from .servers import Nginx

pytestmark = pytest.mark.timeout(120)

FAST = HttpOptions(connect_timeout=2, read_timeout=2.0, retries=1, backoff=0.01, grace=0.5, min_rate=1024)
#: bytes of tensor data in the model (several of the download's pieces)
BIG = 2 * 1024 * 1024


def _tensors():
    rng = np.random.default_rng(5)
    return {f"w{i}": rng.standard_normal(BIG // 4).astype(np.float32) for i in range(20)} | \
        {"ids": np.arange(1000, dtype=np.int64)}


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    r = tmp_path_factory.mktemp("www-hash-ahead")
    t = _tensors()
    codec.write(str(r / "m.aero"), t)
    with codec.open(str(r / "m.aero")) as rd:
        at = rd.tensors["w7"].offset
    raw = bytearray((r / "m.aero").read_bytes())
    raw[at + 11] ^= 0x08
    (r / "bad.aero").write_bytes(bytes(raw))
    (r / "overlapping.aero").write_bytes(_overlapping())
    return r


#: the hostile file: one shard of SHARD + SLIDE bytes, TENSORS tensors of SHARD bytes each, at
#: every 16 bytes of its first SLIDE (overlapping ranges: together many times the file)
SHARD, SLIDE = 8 << 20, 4096
TENSORS = SLIDE // 16


def _overlapping() -> bytes:
    import msgpack
    from codec.formats.aero import build_container
    entries = [{"name": f"t{i}", "dtype": 5, "shape": [SHARD], "shard_id": 0, "data_off": 16 * i,
                "data_len": SHARD, "flags": 0, "hash_b3": "00" * 32} for i in range(TENSORS)]
    return build_container([(b"MMSG", "manifest", 0, msgpack.packb({"format": {"name": "AERO", "version": [0, 1]}})),
                            (b"TIDX", "tensors", 4, msgpack.packb({"tensors": entries})),
                            (b"WTSH", "weights.shard0", 2, bytes(SHARD + SLIDE))])


@pytest.fixture(scope="module")
def nginx(www):
    with Nginx(www) as n:
        yield n


@pytest.fixture
def hashed(monkeypatch):
    """Bytes given to BLAKE3 per thread name (every hasher the library makes)."""
    real, seen, lock = blake3.blake3, collections.Counter(), threading.Lock()

    class Spy:
        AUTO = real.AUTO

        def __init__(self, *a, **k):
            self._h = real(*a, **k)

        def update(self, data):
            with lock:
                seen[threading.current_thread().name] += memoryview(data).nbytes
            self._h.update(data)
            return self

        def digest(self, *a, **k):
            return self._h.digest(*a, **k)

        def hexdigest(self, *a, **k):
            return self._h.hexdigest(*a, **k)
    monkeypatch.setattr(blake3, "blake3", Spy)
    return seen


def _mine(seen) -> int:
    """Bytes hashed on this (the caller's) thread."""
    return seen[threading.current_thread().name]


def test_load_hashes_each_tensor_as_it_arrives_not_after(nginx, hashed):
    t = _tensors()
    got = codec.load(f"{nginx.url}/m.aero", http=FAST)
    assert set(got) == set(t) and all(got[k].tobytes() == t[k].tobytes() for k in t)
    data = sum(a.nbytes for a in t.values())
    ahead = sum(n for name, n in hashed.items() if name.startswith("modelcodec-hash-ahead"))
    assert ahead >= data  # every tensor's bytes, hashed beside the download
    assert _mine(hashed) < BIG  # the reader of the copy hashed no tensor again (its metadata only)


def test_validate_full_uses_the_digests_made_during_the_download(nginx, www, hashed):
    rep = codec.validate(f"{nginx.url}/m.aero", full=True, http=FAST)
    assert rep.ok, rep.violations
    assert any("hash_b3" in c for c in rep.checked) and any("BLAKE3 of" in c for c in rep.checked)
    assert _mine(hashed) < BIG  # the chunk hash and every tensor's: made as the bytes came


def test_a_damaged_tensor_is_the_same_integrity_error_as_locally(nginx, www, hashed):
    rep = codec.validate(f"{nginx.url}/bad.aero", full=True, http=FAST)
    with pytest.raises(E.IntegrityError) as ei:
        codec.load(f"{nginx.url}/bad.aero", http=FAST)
    assert _mine(hashed) < 2 * BIG  # (the digests made ahead were what the readers compared)
    local = codec.validate(str(www / "bad.aero"), full=True)
    key = [(type(v), v.rule, v.offset, v.path) for v in local.violations]
    assert key and [(type(v), v.rule, v.offset, v.path) for v in rep.violations] == key
    with pytest.raises(E.IntegrityError) as el:
        codec.load(str(www / "bad.aero"))
    assert (ei.value.rule, ei.value.offset, ei.value.path) == (el.value.rule, el.value.offset, el.value.path)
    with codec.open(f"{nginx.url}/bad.aero", http=FAST) as r:
        with pytest.raises(E.IntegrityError):
            with r.whole() as w:
                w.tensor("w7")


def test_overlapping_ranges_cannot_make_the_hashing_ahead_outgrow_the_file(nginx, www, hashed):
    size = (www / "overlapping.aero").stat().st_size
    assert TENSORS * SHARD > 2 * size + (256 << 20)  # (what the ranges ask for, together)
    with pytest.raises(E.IntegrityError) as ei:  # the first tensor's hash_b3 is wrong: it fails there
        codec.load(f"{nginx.url}/overlapping.aero", http=FAST)
    with pytest.raises(E.IntegrityError) as el:
        codec.load(str(www / "overlapping.aero"))
    assert (ei.value.rule, ei.value.offset, ei.value.path) == (el.value.rule, el.value.offset, el.value.path)
    ahead = sum(n for name, n in hashed.items() if name.startswith("modelcodec-hash-ahead"))
    assert SHARD <= ahead <= 2 * size + (256 << 20)


def test_a_byte_written_twice_voids_every_digest_made_ahead(tmp_path):
    from codec.remote_file import _HashAhead
    good = os.urandom(1 << 20)
    p = str(tmp_path / "file")
    with open(p, "wb") as f:
        f.truncate(len(good))
        ahead = _HashAhead("memory://x/file", p, len(good), spans=[("blake3", 0, len(good))])
        try:
            os.pwrite(f.fileno(), good, 0)
            ahead.arrivals.wrote(0, len(good))
            os.pwrite(f.fileno(), bytes(4096), 8192)  # (a range fetched again, other bytes this time)
            ahead.arrivals.wrote(8192, 4096)
            assert ahead.source(p) == p  # no digest handed on: the file is hashed again by its reader
        finally:
            ahead.close()
    with open(p, "wb") as f:  # the same, each byte written once: the digest is handed on
        f.truncate(len(good))
        ahead = _HashAhead("memory://x/file", p, len(good), spans=[("blake3", 0, len(good))])
        try:
            for at in (len(good) // 2, 0):
                os.pwrite(f.fileno(), good[at:at + len(good) // 2], at)
                ahead.arrivals.wrote(at, len(good) // 2)
            src = ahead.source(p)
            assert src.digests == {("blake3", 0, len(good)): blake3.blake3(good).digest()}
            src.close()
        finally:
            ahead.close()


def test_a_failed_download_stops_the_hashing_and_leaves_nothing(tmp_path, monkeypatch):
    import tempfile
    import fsspec
    from codec.io import store_fsspec
    t = _tensors()
    codec.write(str(tmp_path / "m.aero"), t)
    fsspec.filesystem("memory").pipe_file("/hash-ahead/m.aero", (tmp_path / "m.aero").read_bytes())
    real = store_fsspec.FsspecStore.read_into
    hashing = []  # at the failure: whether the hashing was under way beside the download

    def failing(self, url, start, length, size, write):
        if start > 0:
            hashing.append(any(th.name.startswith("modelcodec-hash-ahead") for th in threading.enumerate()))
            raise E.RemoteError("http", start, "", "remote.status", "the connection dropped")
        return real(self, url, start, length, size, write)
    monkeypatch.setattr(store_fsspec.FsspecStore, "read_into", failing)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = set(os.listdir(tmp_path))
    try:
        with pytest.raises(E.RemoteError):
            codec.load("memory://hash-ahead/m.aero")
    finally:
        fsspec.filesystem("memory").rm("/hash-ahead", recursive=True)
    assert hashing and all(hashing)
    assert set(os.listdir(tmp_path)) == before  # the temporary copy is gone
    assert not [th for th in threading.enumerate() if th.name.startswith("modelcodec-hash-ahead")]
