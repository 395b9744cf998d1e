"""The AERO writer's one pass (issue 35): where the weights' place is known before their hashes
(``compress=False``), every tensor's hash_b3 is taken on a worker thread from the buffers being
written, while this thread writes them -- the same hashes as the two-pass write, no second read,
and an error on the worker surfaces as itself with nothing left behind.  Where the zstd TIDX
holds them (the default), the first pass hashes array-backed tensors on two threads and reads a
streamed source only on the caller's, in order."""
from __future__ import annotations

import threading

import blake3
import numpy as np
import pytest

import codec
from codec.formats.aero import TensorSpec, write_aero
from codec.formats.aero import items as I
from codec.formats.aero import writer as W


def _tensors():
    rng = np.random.default_rng(35)
    stream = rng.integers(0, 255, 700_000, dtype=np.uint8)
    return [
        ("big", rng.integers(0, 255, 3 << 20, dtype=np.uint8)),            # one piece, written alone
        *[(f"mid{i}", rng.integers(0, 255, 300_000 + i, dtype=np.uint8)) for i in range(6)],  # gathered
        ("tiny", rng.standard_normal(5).astype(np.float32)),               # whole, hashed at once
        ("streamed", TensorSpec(lambda: (stream[k:k + 90_000] for k in range(0, stream.size, 90_000)),
                                dtype=np.uint8, shape=(stream.size,))),     # small pieces across buffers
        ("huge", rng.integers(0, 255, (17 << 20) + 5, dtype=np.uint8)),    # two pieces
        ("be", rng.standard_normal((300, 300)).astype(">f4")),            # converted piece by piece
    ], stream


def _expected(tensors, stream) -> dict:
    out = {}
    for name, t in tensors:
        if isinstance(t, TensorSpec):
            out[name] = blake3.blake3(stream.tobytes()).hexdigest()
        else:
            out[name] = blake3.blake3(np.ascontiguousarray(t.astype(t.dtype.newbyteorder("<")))
                                      .tobytes()).hexdigest()
    return out


def test_one_pass_hashes_tensors_on_a_worker_while_writing(tmp_path, monkeypatch):
    tensors, stream = _tensors()
    threads: dict[int, set] = {}

    class Recorder:
        def __init__(self, *a):
            self.h = blake3.blake3(*a)

        def update(self, p):
            if len(p) >= (256 << 10):
                threads.setdefault(id(self), set()).add(threading.current_thread() is threading.main_thread())
            self.h.update(p)
            return self

        def hexdigest(self):
            return self.h.hexdigest()
    monkeypatch.setattr(W, "blake3_hasher", Recorder)
    write_aero(tmp_path / "one.aero", tensors, compress=False, progress=False)
    monkeypatch.undo()
    write_aero(tmp_path / "two.aero", tensors, progress=False)  # two passes (zstd TIDX)
    want = _expected(tensors, stream)
    for f in ("one.aero", "two.aero"):
        with codec.open(tmp_path / f) as r:
            assert {n: r.tensors[n].extra["hash_b3"] for n in r.tensors} == want
            assert r.validate(full=True, progress=False).ok
    # every large buffer of tensor bytes was hashed off the main thread, while it was written
    assert threads and all(s == {False} for s in threads.values())


def test_an_error_on_the_hashing_worker_surfaces_and_leaves_nothing(tmp_path, monkeypatch):
    tensors, _ = _tensors()

    class Failing:
        def __init__(self, *a):
            self.h = blake3.blake3(*a)

        def update(self, p):
            if len(p) >= (1 << 20) and threading.current_thread() is not threading.main_thread():
                raise codec.UsageError("hasher broke")
            self.h.update(p)

        def hexdigest(self):
            return self.h.hexdigest()
    monkeypatch.setattr(W, "blake3_hasher", Failing)
    with pytest.raises(codec.UsageError, match="hasher broke"):
        write_aero(tmp_path / "m.aero", tensors, compress=False, progress=False)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()

    def broken():  # a source failing while the worker hashes what came before
        yield np.zeros(2 << 20, np.uint8)
        raise codec.UsageError("source broke")
    tensors.insert(1, ("broken", TensorSpec(broken, dtype=np.uint8, shape=(4 << 20,))))
    with pytest.raises(codec.UsageError, match="source broke"):
        write_aero(tmp_path / "m.aero", tensors, compress=False, progress=False)
    assert list(tmp_path.iterdir()) == []



def test_the_first_pass_hashes_array_tensors_on_two_threads_and_streamed_ones_here_in_order(tmp_path, monkeypatch):
    # (the zstd TIDX ahead of the weights holds their hashes: with it, every hash_b3 is taken in
    # a first pass; the array-backed tensors at the end, about half the bytes, on a second thread)
    tensors, stream = _tensors()
    reads = []

    def streamed():
        for k in range(0, stream.size, 90_000):
            reads.append((threading.current_thread() is threading.main_thread(), k))
            yield stream[k:k + 90_000]
    tensors[8] = ("streamed", TensorSpec(streamed, dtype=np.uint8, shape=(stream.size,)))
    on = set()

    class Recorder:
        def __init__(self, *a, **k):
            self.h = blake3.blake3(*a, **k)

        def update(self, p):
            on.add(threading.current_thread() is threading.main_thread())
            self.h.update(p)

        def hexdigest(self):
            return self.h.hexdigest()
    monkeypatch.setattr(I, "blake3_hasher", Recorder)
    monkeypatch.setattr(I, "new_hasher", lambda max_threads: Recorder(max_threads=max_threads))
    write_aero(tmp_path / "m.aero", tensors, progress=False)
    assert on == {True, False}  # both threads hashed tensors
    first_pass = reads[:len(reads) // 2]  # (the second pass writes it: read again)
    assert first_pass == [(True, k) for k in range(0, stream.size, 90_000)]
    with codec.open(tmp_path / "m.aero") as r:
        assert {n: r.tensors[n].extra["hash_b3"] for n in r.tensors} == _expected(tensors, stream)
        assert r.validate(full=True, progress=False).ok


@pytest.mark.parametrize("where", ["worker", "source"])
def test_an_error_in_the_first_pass_surfaces_stops_the_other_thread_and_leaves_nothing(where, tmp_path,
                                                                                     monkeypatch):
    tensors, _ = _tensors()
    if where == "worker":
        class Failing:
            def __init__(self, *a, **k):
                self.h = blake3.blake3(*a, **k)

            def update(self, p):
                if threading.current_thread() is not threading.main_thread():
                    raise codec.UsageError("hasher broke")
                self.h.update(p)

            def hexdigest(self):
                return self.h.hexdigest()
        monkeypatch.setattr(I, "new_hasher", lambda max_threads: Failing(max_threads=max_threads))
        monkeypatch.setattr(I, "blake3_hasher", Failing)
    else:
        def broken():
            yield np.zeros(2 << 20, np.uint8)
            raise codec.UsageError("source broke")
        tensors.insert(1, ("broken", TensorSpec(broken, dtype=np.uint8, shape=(4 << 20,))))
    with pytest.raises(codec.UsageError, match=f"{'hasher' if where == 'worker' else 'source'} broke"):
        write_aero(tmp_path / "m.aero", tensors, progress=False)
    assert list(tmp_path.iterdir()) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("modelcodec-hash")]
