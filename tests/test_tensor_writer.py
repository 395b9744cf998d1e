"""The engine's shared writer pieces: one element-type table type (codec.engine.dtypes), one streaming
aligned writer (codec.io.tensor_writer), and the bytes the writers built on them produce."""
from __future__ import annotations

import hashlib

import ml_dtypes
import numpy as np
import pytest

import codec
from codec.engine.dtypes import DTypeTable
from codec.io.writer_io import LazyTensor
from codec.io.tensor_writer import write_placed
from codec.schemas.dsl import ElementTypes

DECL = ElementTypes({0: ("F32", "float32", 4), 1: ("BF16", "bfloat16", 2), 2: ("Q", "", 1), 3: ("B", "bool", 1)})


def test_dtype_table_is_derived_from_the_declaration():
    t = DTypeTable(DECL, "TOY")
    assert t.numpy == {0: np.dtype("<f4"), 1: np.dtype(ml_dtypes.bfloat16), 3: np.dtype("?")}  # (no array type: none)
    assert t.itemsize == {0: 4, 1: 2, 2: 1, 3: 1} and t.names[1] == "BF16" and DECL.codes["Q"] == 2
    assert t.code_of(np.dtype(">f4")) == 0 and t.code_of(np.dtype("<f4")) == 0  # either byte order
    assert t.code_of(np.dtype("f8")) is None
    with pytest.raises(codec.UsageError, match=r"w: TOY has no element type for float64 \(it has bfloat16, bool, float32\)"):
        t.code_for("w", np.zeros(2))
    big = np.arange(3, dtype=">f4")
    assert t.stored(big, 0).dtype == np.dtype("<f4") and t.stored(big, 0).tolist() == [0, 1, 2]
    little = np.arange(3, dtype="<f4")
    assert t.stored(little, 0) is little
    assert t.array_names == {"float32", "bfloat16", "bool"}


@pytest.mark.parametrize("bad", [{0: ("F", "float32", 0)}, {0: ("F", "float32")}, {0: ("F", "f4", 4), 1: ("F", "i4", 4)}])
def test_a_malformed_declaration_is_refused_at_import(bad):
    with pytest.raises(TypeError):
        ElementTypes(bad)


def test_a_declared_size_numpy_disagrees_with_is_refused():
    with pytest.raises(AssertionError, match="float64 is 8 bytes, the format says 4"):
        DTypeTable(ElementTypes({0: ("F", "float64", 4)}), "TOY")


def test_write_placed_streams_regions_with_zero_gaps(tmp_path):
    a = np.arange(6, dtype=">i2").reshape(2, 3)[:, ::2]  # big-endian, not contiguous
    lazy = LazyTensor(np.uint8, (3,), lambda: np.array([7, 8, 9], np.uint8))
    p = write_placed(tmp_path / "f.bin", b"HEAD", [(8, a, "a"), (16, b"xy", "blob"), (24, lazy, "lazy")], 32,
                     progress=False)
    data = (tmp_path / "f.bin").read_bytes()
    want = b"HEAD" + bytes(4) + np.array([[0, 2], [3, 5]], "<i2").tobytes() + bytes(0) + b"xy" + bytes(6) \
        + bytes([7, 8, 9]) + bytes(5)
    assert p == str(tmp_path / "f.bin") and data == want and len(data) == 32


def test_a_failed_write_leaves_nothing(tmp_path):
    bad = LazyTensor(np.float32, (2,), lambda: np.zeros(3, np.float32))  # loads a shape it did not declare
    with pytest.raises(codec.UsageError):
        write_placed(tmp_path / "f.bin", b"H", [(8, bad, "bad")], 16, progress=False)
    assert list(tmp_path.iterdir()) == []


# The writers built on these pieces write exactly the bytes they wrote before them (sha256 pins
# taken from the writers of 5c840d9, before the shared writer existed): same input, same file.
def _inputs():
    rng = np.random.default_rng(0)

    def arr(shape, dt):
        return (rng.standard_normal(shape) * 10).astype(dt)
    plain = {"a": arr((3, 5), np.float32), "b": arr((7,), np.float16), "c": arr((2, 3, 4, 5), np.int32),
             "d": arr((1,), np.int8), "e": arr((4, 4), ">f4"), "f": arr((3, 3), np.float32)[:, ::2]}
    return plain, arr((5,), ml_dtypes.bfloat16)


def _write_all(out):
    from codec.formats.gguf import write_gguf
    from codec.formats.mag import write_mag
    from codec.formats.oinf import UninitializedTensor, write_oinf_file
    from codec.formats.safetensors import write_safetensors
    from codec.formats.stb import StbTensor, write_stb
    plain, bf16 = _inputs()
    st = dict(plain, g=bf16, h=np.zeros((0, 3), np.float32), i=np.array(True))
    write_safetensors(out / "x.safetensors", st, metadata={"k": "v"})
    write_safetensors(out / "empty.safetensors", {})
    mag = {k: v for k, v in plain.items() if v.dtype.kind != "i" or v.dtype == np.int32}
    mag["bool"] = np.array([True, False, True])
    write_mag(out / "x.mag", mag, metadata={"n": 3, "lr": 0.5, "t": True})
    write_stb(out / "x.stb", [StbTensor(plain["a"]), StbTensor(plain["c"]), StbTensor(np.zeros((0,), np.float32)),
                              StbTensor(plain["b"], layout=1), StbTensor(plain["d"])])
    write_stb(out / "last_empty.stb", [StbTensor(plain["b"]), StbTensor(np.zeros((0,), np.float32))])
    write_stb(out / "none.stb", [])
    g = {k: v for k, v in plain.items() if k != "c"}
    write_gguf(out / "x.gguf", g, metadata={"general.name": "t", "general.alignment": np.uint32(64)})
    write_gguf(out / "y.gguf", g)
    write_gguf(out / "none.gguf", {}, metadata={"a": 1})
    write_oinf_file(out / "x.oinf", {"a": plain["a"], "u": UninitializedTensor("f32", (2, 3)), "b": plain["b"],
                                     "lz": LazyTensor(np.float32, (2, 2), lambda: np.ones((2, 2), np.float32)),
                                     "e": plain["e"]},
                    sizevars={"N": 3}, metadata={"s": "hi", "i": 5, "f": 1.5, "arr": np.arange(5, dtype=np.int16)})
    write_oinf_file(out / "none.oinf")


PINS = {
    "empty.safetensors": "9bbcbf73561f6bc5", "last_empty.stb": "a2988615be5eb948", "none.gguf": "3cc9ee0499d4ad4c",
    "none.oinf": "623b4b14597ddea8", "none.stb": "ea076bc8db0fd5ea", "x.gguf": "99a9fbdc4f60193e",
    "x.mag": "67499d2463e29730", "x.oinf": "29dd781f9e625e20", "x.stb": "34876375bfc2914f",
    "y.gguf": "3baf80da0f30e2a6", "x.safetensors": "44ac24e9ae293376",
}


def test_the_writers_bytes_are_unchanged(tmp_path):
    _write_all(tmp_path)
    got = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in tmp_path.iterdir()}
    assert got == PINS
    with codec.open(tmp_path / "x.safetensors") as r:  # (and what they hold reads back exactly)
        for k, v in _inputs()[0].items():
            assert np.array_equal(r.tensor(k), v) and r.tensor(k).dtype == v.dtype.newbyteorder("<")


@pytest.mark.parametrize("range_ok", [True, False])
def test_writeback_queues_pages_without_a_commit_per_step(tmp_path, monkeypatch, range_ok):
    """The writer's background writeback (issue 35): every RANGE_STEP bytes it queues the file's
    dirty pages for the disk with sync_file_range (no journal commit or cache flush per step);
    where that call fails, fdatasync as before.  Either way the file holds what was written."""
    import os
    from codec.io import writer_io as W
    calls = []

    def fake_range(fd, off, n, flags):
        calls.append(("range", off, n, flags))
        return 0 if range_ok else -1
    monkeypatch.setattr(W, "_sync_file_range", lambda: fake_range)
    monkeypatch.setattr(os, "fdatasync", lambda fd: calls.append(("fdatasync",)))
    p = tmp_path / "f.bin"
    piece = bytes(range(256)) * 4096  # 1 MiB
    with open(p, "wb", buffering=0) as f:
        with W.Writeback(f, step=128 << 20) as wb:
            assert wb._step == W.Writeback.RANGE_STEP
            for _ in range(40):
                W.write_all(f, piece)
                wb.wrote(len(piece))
    assert p.read_bytes() == piece * 40
    assert calls and calls[0] == ("range", 0, 0, W._SYNC_FILE_RANGE_WRITE)
    if range_ok:
        assert ("fdatasync",) not in calls
    else:  # the first failure turns it off for the rest of the file
        assert calls.count(("range", 0, 0, 2)) == 1 and ("fdatasync",) in calls
