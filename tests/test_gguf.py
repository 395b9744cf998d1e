"""GGUF (read): files the official gguf package writes read exactly (metadata of every type,
plain tensors as arrays, quantized ones as their packed bytes), every rule is enforced with a
typed error, and hostile counts and lengths end at once within bounds."""
import struct

import gguf
import numpy as np
import pytest
from gguf.quants import quantize

import codec
from codec import errors as E

from .test_hostile_decode import RSS_LIMIT_MB, _run


def _reference_file(path):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint8("u8", 200); w.add_int8("i8", -3); w.add_uint16("u16", 60000); w.add_int16("i16", -300)
    w.add_uint32("u32", 7); w.add_int32("i32", -7); w.add_float32("f32", 0.25); w.add_bool("b", True)
    w.add_string("s", "héllo"); w.add_uint64("u64", 2**40); w.add_int64("i64", -2**40); w.add_float64("f64", 1e-9)
    w.add_array("ints", [1, 2, 3]); w.add_array("floats", [0.5, 1.5]); w.add_array("words", ["a", "bc", ""])
    tensors = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "h": np.arange(8, dtype=np.float16),
               "i8": np.arange(-4, 4, dtype=np.int8), "i32": np.arange(6, dtype=np.int32).reshape(2, 3),
               "f64": np.linspace(0, 1, 5)}
    for n, a in tensors.items():
        w.add_tensor(n, a)
    q = quantize(np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("q", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    return tensors, q


def test_what_the_gguf_package_writes_reads_exactly(tmp_path):
    p = tmp_path / "m.gguf"
    tensors, q = _reference_file(p)
    ref = gguf.GGUFReader(str(p))
    with codec.open(str(p)) as r:
        assert r.format == "gguf" and r.validate(full=True).ok
        for f in ref.fields.values():
            if f.name.startswith("GGUF."):
                continue
            got = r.metadata[f.name]
            want = f.contents()
            assert (got.tolist() if isinstance(got, np.ndarray) else got) == pytest.approx(want) if not isinstance(
                want, (str, list)) or (isinstance(want, list) and want and not isinstance(want[0], str)) else got == want
        assert list(r.tensors) == [t.name for t in ref.tensors]
        for t in ref.tensors:
            info = r.tensors[t.name]
            assert info.nbytes == t.n_bytes and info.offset == t.data_offset
            assert r.tensor(t.name).tobytes() == t.data.tobytes()
        for n, a in tensors.items():
            assert r.tensor(n).dtype == a.dtype and r.tensor(n).shape == a.shape
        assert r.tensors["q"].extra["dtype_name"] == "Q8_0" and r.tensor("q").tobytes() == q.tobytes()


def test_plain_tensors_convert_bit_identically(tmp_path):
    p = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(p), "x")
    w.add_tensor("a", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.add_tensor("b", np.arange(4, dtype=np.int32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    out = codec.convert(str(p), str(tmp_path / "m.safetensors"), drop_metadata=True)
    with codec.open(out) as r:
        assert r.tensor("a").tobytes() == np.arange(6, dtype=np.float32).tobytes() and r.tensor("a").shape == (2, 3)
    with pytest.raises(codec.UsageError, match="not implemented yet"):
        codec.write(str(tmp_path / "x.gguf"), {"a": np.ones(2)})


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def _gguf(kvs: bytes = b"", n_kv: int = 0, infos: bytes = b"", n_t: int = 0, data: bytes = b"", version: int = 3,
          align: int = 32) -> bytes:
    head = b"GGUF" + struct.pack("<IQQ", version, n_t, n_kv) + kvs + infos
    return head + bytes(-len(head) % align) + data


def _info(name: str, dims: list, t: int, off: int) -> bytes:
    return _s(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", t, off)


F32 = 0


@pytest.mark.parametrize("data,rule,cls", [
    (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "GGUF-VERSION", E.EnumError),
    (_gguf(_s("k") + struct.pack("<I", 99), 1), "GGUF-VALUE-TYPE", E.EnumError),
    (_gguf(_s("k") + struct.pack("<II", 4, 1) + _s("k") + struct.pack("<II", 4, 2), 2), "GGUF-KEY", E.StructureError),
    (_gguf(b"\x02\x00\x00\x00\x00\x00\x00\x00\xff\xfe" + struct.pack("<II", 4, 1), 1), "GGUF-STRING", E.DecodeError),
    (_gguf(_s("general.alignment") + struct.pack("<II", 4, 24), 1), "GGUF-ALIGNMENT", E.ConstraintError),
    (_gguf(infos=_info("w", [4], 77, 0), n_t=1, data=bytes(16)), "GGUF-TENSOR-TYPE", E.EnumError),
    (_gguf(infos=_info("w", [4, 1, 1, 1, 1], F32, 0), n_t=1, data=bytes(16)), "GGUF-DIMS", E.RangeError),
    (_gguf(infos=_info("q", [33], 8, 0), n_t=1, data=bytes(64)), "GGUF-DIMS", E.RangeError),
    (_gguf(infos=_info("w", [4], F32, 0) + _info("w", [4], F32, 32), n_t=2, data=bytes(48)), "GGUF-DUPLICATE",
     E.StructureError),
    (_gguf(infos=_info("w", [4], F32, 4), n_t=1, data=bytes(32)), "GGUF-DATA-ALIGN", E.AlignmentError),
    (_gguf(infos=_info("w", [4], F32, 32), n_t=1, data=bytes(40)), "GGUF-BOUNDS", E.TruncatedError),
    (_gguf(infos=_info("w", [16], F32, 0) + _info("v", [4], F32, 32), n_t=2, data=bytes(64)), "GGUF-OVERLAP",
     E.OverlapError),
])
def test_each_rule_is_enforced(tmp_path, data, rule, cls):
    p = tmp_path / "bad.gguf"
    p.write_bytes(data)
    rep = codec.validate(str(p))
    hits = [e for e in rep.errors for e in [e, *e.consequences] if e.rule == rule]
    assert hits and isinstance(hits[0], cls), [str(e) for e in rep.violations]
    with pytest.raises(E.FormatError):
        codec.open(str(p)).close()


@pytest.mark.parametrize("data", [
    _gguf(n_kv=2**62),                                                    # a count the bytes cannot hold
    _gguf(struct.pack("<Q", 2**60) + b"k", 1),                           # a key of 2^60 bytes
    _gguf(_s("a") + struct.pack("<IIQ", 9, 4, 2**62), 1),                # an array of 2^62 u32
    _gguf(_s("a") + struct.pack("<IIQ", 9, 8, 2**40), 1),                # an array of 2^40 strings
    _gguf(_s("a") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 50, 1),  # arrays nested 50 deep
])
def test_hostile_counts_and_lengths_end_at_once_within_bounds(tmp_path, data):
    got = _run(tmp_path, data, "codec.open(path)")
    assert got.get("rule") in ("GGUF-TRUNCATED", "GGUF-VALUE-TYPE") and got["rss_mb"] < RSS_LIMIT_MB, got
