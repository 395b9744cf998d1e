"""GGUF: files the official gguf package writes read exactly (metadata of every type, plain
tensors as arrays, quantized ones as their packed bytes) and files we write read exactly by it;
typed metadata and quantized tensors survive GGUF -> AERO -> GGUF; every rule is enforced with a
typed error, hostile counts and lengths end at once within bounds, and the writer refuses what
GGUF cannot hold with a UsageError before writing anything."""
import os
import struct

import ml_dtypes

import gguf
import numpy as np
import pytest
from gguf.quants import quantize

import codec
from codec import errors as E
from codec.engine import values
from codec.model import Packed
from codec.schemas import gguf as S

from codec.tools import cli

from .test_dequantize import _reference, _same_bits, nvfp4_blocks
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

#: every quantized ggml type both the gguf package and we know, written as random packed bytes
PACKED_TYPES = [t for t in gguf.GGMLQuantizationType if t.value in S.GGML_TYPES and S.GGML_TYPES[t.value][3] is None]


def _packed(code: int, rows: int = 2, blocks: int = 2, seed: int = 0) -> tuple[np.ndarray, tuple]:
    _, block, per, _ = S.GGML_TYPES[code]
    data = np.random.default_rng(seed + code).integers(0, 256, size=(rows, blocks * per), dtype=np.uint8)
    return data, (rows, blocks * block)


#: one metadata value of every GGUF value type (and arrays of each, nested, empty), typed
TYPED = {
    "general.architecture": "llama", "u8": np.uint8(200), "i8": np.int8(-3), "u16": np.uint16(60000),
    "i16": np.int16(-300), "u32": np.uint32(7), "i32": np.int32(-7), "f32": np.float32(0.1), "b": True,
    "s": "héllo", "u64": np.uint64(2**63 + 5), "i64": np.int64(-2**40), "f64": np.float64(1e-9),
    "a.u8": np.arange(3, dtype=np.uint8), "a.i16": np.array([-1, 2], dtype=np.int16),
    "a.f32": np.array([0.1, 2.5], dtype=np.float32), "a.f64": np.array([1e-300], dtype=np.float64),
    "a.bool": np.array([True, False]), "a.u64": np.array([2**64 - 1], dtype=np.uint64),
    "a.s": ["a", "bc", ""], "a.empty": np.zeros(0, dtype=np.int32), "a.nested": [[1, 2], [3]],
    "a.mixed": [np.array([1], dtype=np.uint8), ["x"]], "plain.int": 5, "plain.big": 2**40, "plain.float": 0.1,
}
WANT_TYPES = {"u8": "UINT8", "i8": "INT8", "u16": "UINT16", "i16": "INT16", "u32": "UINT32", "i32": "INT32",
              "f32": "FLOAT32", "b": "BOOL", "s": "STRING", "u64": "UINT64", "i64": "INT64", "f64": "FLOAT64",
              "plain.int": "INT32", "plain.big": "INT64", "plain.float": "FLOAT64"}
PLAIN = {"f32": np.arange(12, dtype=np.float32).reshape(3, 4), "f16": np.arange(8, dtype=np.float16),
         "bf16": np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(1, 2, 3),
         "f64": np.linspace(0, 1, 5), "i8": np.arange(-4, 4, dtype=np.int8), "i16": np.arange(3, dtype=np.int16),
         "i32": np.arange(6, dtype=np.int32).reshape(2, 3), "i64": np.arange(2, dtype=np.int64).reshape(1, 1, 1, 2)}


def _fields(path) -> list:
    """(key, value types, contents) of every key/value, as the gguf package reads them."""
    r = gguf.GGUFReader(str(path))
    return [(f.name, [gguf.GGUFValueType(t).name for t in f.types], f.contents()) for f in r.fields.values()
            if not f.name.startswith("GGUF.")]


def _tensors(path) -> dict:
    r = gguf.GGUFReader(str(path))
    return {t.name: (t.tensor_type.name, [int(d) for d in t.shape], t.data.tobytes()) for t in r.tensors}


def test_what_we_write_the_gguf_package_reads_exactly(tmp_path):
    tensors = dict(PLAIN)
    for t in PACKED_TYPES:
        data, shape = _packed(t.value)
        tensors[f"q.{t.name}"] = Packed(data, shape, {"ggml_type": t.value})
    p = codec.write(str(tmp_path / "m.gguf"), tensors, format="gguf", metadata=TYPED)
    fields = {k: (ty, v) for k, ty, v in _fields(p)}
    assert list(fields) == list(TYPED)
    for k, ty in WANT_TYPES.items():
        assert fields[k][0] == [ty], k
    assert fields["a.u8"][0] == ["ARRAY", "UINT8"] and fields["a.s"][0] == ["ARRAY", "STRING"]
    assert fields["a.nested"][0][:2] == ["ARRAY", "ARRAY"]
    for k, v in TYPED.items():
        if k not in ("a.nested", "a.mixed"):  # (the gguf package flattens arrays of arrays)
            want = v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v
            assert fields[k][1] == want or (np.float32(fields[k][1]) == np.float32(want)), k
    got = _tensors(p)
    assert list(got) == list(tensors)
    for n, a in PLAIN.items():
        assert got[n][1] == list(reversed(a.shape)) and got[n][2] == a.tobytes(), n
    for t in PACKED_TYPES:
        data, shape = _packed(t.value)
        assert got[f"q.{t.name}"] == (t.name, [shape[1], shape[0]], data.tobytes())
    with codec.open(p) as r:  # and we read back exactly what we wrote, types included
        assert r.validate(full=True).ok
        for k, v in TYPED.items():
            assert r.meta_types[k] == values.describe(v), k
            assert values.plain(r.metadata[k]) == values.plain(v), k
        for n, a in PLAIN.items():
            assert r.tensor(n).dtype == a.dtype and r.tensor(n).shape == a.shape and r.tensor(n).tobytes() == a.tobytes()


def test_the_writer_is_deterministic_aligned_and_writes_version_2(tmp_path):
    a = codec.write(str(tmp_path / "a.gguf"), PLAIN, format="gguf", metadata=TYPED)
    b = codec.write(str(tmp_path / "b.gguf"), PLAIN, format="gguf", metadata=TYPED)
    assert open(a, "rb").read() == open(b, "rb").read()
    c = codec.write(str(tmp_path / "c.gguf"), PLAIN, format="gguf",
                    metadata={"general.alignment": np.uint32(256)}, version=2)
    ref = gguf.GGUFReader(c)
    assert int(ref.fields["GGUF.version"].contents()) == 2
    assert all(t.data_offset % 256 == 0 for t in ref.tensors)
    assert _tensors(c) == _tensors(a)


@pytest.mark.parametrize("fmt", ["aero", "aeroset"])
def test_typed_metadata_and_quantized_tensors_survive_a_round_trip_through(tmp_path, fmt):
    """GGUF (written by the gguf package) -> AERO -> GGUF: every key keeps its value type, value
    and place; every tensor (plain and quantized) its type, shape and bytes."""
    p = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(p), "llama")
    w.add_uint8("u8", 200); w.add_uint32("u32", 200); w.add_float32("f32", 0.25); w.add_float64("f64", 0.25)
    w.add_int64("i64", 5); w.add_bool("b", False); w.add_string("s", "x")
    w.add_array("ints", [1, 2, 3]); w.add_array("words", ["a", "bc"]); w.add_array("nested", [[1, 2], [3]])
    w.add_custom_alignment(64)
    for n, a in PLAIN.items():
        if a.dtype != ml_dtypes.bfloat16:
            w.add_tensor(n, a)
    for t in PACKED_TYPES:
        data, _ = _packed(t.value)
        w.add_tensor(f"q.{t.name}", data, raw_dtype=t)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    mid = codec.convert(str(p), str(tmp_path / ("m.aero" if fmt == "aero" else "set/m.aeroset.json")))
    with codec.open(mid) as r:
        assert r.tensors["q.Q4_0"].common_dtype == "packed" and r.tensors["q.Q4_0"].quant_params == {"ggml_type": 2}
        assert r.metadata["u8"] == 200 and r.metadata["f32"] == 0.25
    back = codec.convert(mid, str(tmp_path / "back.gguf"))
    assert _fields(back) == _fields(p)
    assert _tensors(back) == _tensors(p)


def test_safetensors_metadata_comes_back_identical_through_every_format_that_keeps_text(tmp_path):
    md = {"format": "pt", "note": "v1.0_final", "empty": "", "n": "3"}
    src = codec.write(str(tmp_path / "m.safetensors"), {"w": np.arange(4, dtype=np.float32)}, metadata=md)
    odd = codec.write(str(tmp_path / "odd.safetensors"), {"w": np.arange(4, dtype=np.float32)}, metadata={"n": "héllo"})
    with pytest.raises(codec.UsageError, match=r"metadata 'n': OINF text matches .* 'héllo' does not"):
        codec.convert(odd, str(tmp_path / "odd.oinf"))  # (OINF text is [A-Za-z0-9._-] only)
    for target in ("m.aero", "set/m.aeroset.json", "m.oinf", "m.gguf"):
        mid = codec.convert(src, str(tmp_path / target))
        back = codec.convert(mid, str(tmp_path / f"back-{target.split('.')[-1]}.safetensors"))
        with codec.open(back) as r:
            assert r.metadata == md, target  # (an empty value too)
            assert r.tensor("w").tobytes() == np.arange(4, dtype=np.float32).tobytes()


def test_quantized_tensors_are_refused_by_formats_without_packed_data(tmp_path):
    data, shape = _packed(8)
    p = codec.write(str(tmp_path / "q.gguf"), {"q": Packed(data, shape, {"ggml_type": 8})}, format="gguf")
    for target in ("q.safetensors", "q.oinf", "q.mag", "q.stb"):
        with pytest.raises(codec.UsageError, match=r"tensor 'q'.*packed.*nothing was written"):
            codec.convert(p, str(tmp_path / target), drop_metadata=True, rename="index")
        assert not os.path.exists(tmp_path / target)
    aero = codec.write(str(tmp_path / "other.aero"), {"q": Packed(data, shape, {"codec": "x"})})
    with pytest.raises(codec.UsageError, match="ggml_type"):
        codec.convert(aero, str(tmp_path / "other.gguf"))
    assert not os.path.exists(tmp_path / "other.gguf")


@pytest.mark.parametrize("tensors,metadata,match", [
    ({"s": np.float32(1)}, None, "rank 0"),
    ({"r5": np.zeros((1, 1, 1, 1, 1), np.float32)}, None, "rank 5"),
    ({"u": np.zeros(2, np.uint16)}, None, "no tensor type for uint16"),
    ({"x" * 64: np.zeros(2, np.float32)}, None, "over 63 bytes"),
    ({"": np.zeros(2, np.float32)}, None, "non-empty"),
    ({"q": Packed(np.zeros(10, np.uint8), (1, 32), {"ggml_type": 8})}, None, "takes 34 bytes"),
    ({"q": Packed(np.zeros(34, np.uint8), (1, 31), {"ggml_type": 8})}, None, "multiple of 32"),
    ({"q": Packed(np.zeros(34, np.uint8), (1, 32), {})}, None, "ggml_type"),
    ({}, {"d": {"a": 1}}, "not a typed metadata value"),
    ({}, {"m": [1, "a"]}, "mixes"),
    ({}, {"general.alignment": 64}, "uint32 power of two"),
    ({}, {"general.alignment": np.uint32(48)}, "uint32 power of two"),
    ({}, {"big": 2**64}, "does not fit 64 bits"),
    ({}, {"s": "\ud800"}, "UTF-8"),
])
def test_the_writer_refuses_what_gguf_cannot_hold_and_writes_nothing(tmp_path, tensors, metadata, match):
    p = tmp_path / "x.gguf"
    with pytest.raises(codec.UsageError, match=match):
        codec.write(str(p), tensors, format="gguf", metadata=metadata)
    assert os.listdir(tmp_path) == []


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


CASES = [
    (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "GGUF-VERSION", E.EnumError),
    (_gguf(_s("k") + struct.pack("<I", 99), 1), "GGUF-VALUE-TYPE", E.EnumError),
    (_gguf(_s("k") + struct.pack("<II", 4, 1) + _s("k") + struct.pack("<II", 4, 2), 2), "GGUF-KEY", E.StructureError),
    (_gguf(b"\x02\x00\x00\x00\x00\x00\x00\x00\xff\xfe" + struct.pack("<II", 4, 1), 1), "GGUF-STRING", E.DecodeError),
    (_gguf(_s("general.alignment") + struct.pack("<II", 4, 24), 1), "GGUF-ALIGNMENT", E.ConstraintError),
    (_gguf(infos=_info("w", [4], 77, 0), n_t=1, data=bytes(16)), "GGUF-TENSOR-TYPE", E.EnumError),
    (_gguf(infos=_info("w", [4, 1, 1, 1, 1], F32, 0), n_t=1, data=bytes(16)), "GGUF-DIMS", E.RangeError),
    (_gguf(infos=_info("q", [33], 8, 0), n_t=1, data=bytes(64)), "GGUF-DIMS", E.AlignmentError),
    (_gguf(infos=_info("w", [4], F32, 0) + _info("w", [4], F32, 32), n_t=2, data=bytes(48)), "GGUF-DUPLICATE",
     E.StructureError),
    (_gguf(infos=_info("w", [4], F32, 4), n_t=1, data=bytes(32)), "GGUF-DATA-ALIGN", E.AlignmentError),
    (_gguf(infos=_info("w", [4], F32, 32), n_t=1, data=bytes(40)), "GGUF-BOUNDS", E.TruncatedError),
    (_gguf(infos=_info("w", [16], F32, 0) + _info("v", [4], F32, 32), n_t=2, data=bytes(64)), "GGUF-OVERLAP",
     E.OverlapError),
]


@pytest.mark.parametrize("data,rule,cls", CASES)
def test_each_rule_is_enforced(tmp_path, data, rule, cls):
    p = tmp_path / "bad.gguf"
    p.write_bytes(data)
    rep = codec.validate(str(p))
    hits = [e for e in rep.errors for e in [e, *e.consequences] if e.rule == rule]
    assert hits and isinstance(hits[0], cls), [str(e) for e in rep.violations]
    with pytest.raises(E.FormatError):
        codec.open(str(p)).close()


def test_a_tensor_info_finding_points_at_its_field():
    """A finding about a tensor info's type, data offset or extents is at that field's bytes."""
    for data, rule, width, value in [(CASES[5][0], "GGUF-TENSOR-TYPE", 4, 77), (CASES[9][0], "GGUF-DATA-ALIGN", 8, 4),
                                     (CASES[7][0], "GGUF-DIMS", 8, 33)]:
        e = next(e for e in codec.validate(data, format="gguf").violations if e.rule == rule)
        assert int.from_bytes(data[e.offset:e.offset + width], "little") == value, e


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


def test_an_empty_tensor_past_the_cut_padding_reads_as_empty(tmp_path):
    """A fuzzing finding: an empty tensor whose (aligned) data start lies past the end of a file
    whose padding was cut -- its view used to raise numpy's ValueError."""
    data = _gguf(infos=_info("one", [0], F32, 0), n_t=1)[:-1]  # the header padding cut by a byte
    with codec.open(bytearray(data)) as r:
        assert r.data_start > len(data)
        a = r.tensor("one")
        assert a.shape == (0,) and a.dtype == np.float32 and not a.flags.writeable
        assert r.validate(full=True).ok


# ------------------------------------------------------------------ NVFP4 and Q1_0 (ggml types 40, 41)
NVFP4, Q1_0 = gguf.GGMLQuantizationType.NVFP4, gguf.GGMLQuantizationType.Q1_0


def _fp4_tensors() -> tuple[np.ndarray, np.ndarray]:
    """An NVFP4 tensor quantized from random floats (a 0 and a 0x7F scale byte among its
    scales, and subnormal ones) and random Q1_0 blocks with finite scales: (rows, bytes) each."""
    x = np.random.default_rng(4).normal(0, 1, (3, 128)).astype(np.float32)
    nv = nvfp4_blocks(x)
    nv[0, :2] = 0, 0x7F
    nv[2, 1] = 5  # (a subnormal E4M3 scale: exponent bits 0)
    q1 = np.random.default_rng(5).integers(0, 256, (3, 18), dtype=np.uint8)
    q1[:, :2] = np.array([0.5, -2.0, 6e-8], np.float16).view(np.uint8).reshape(3, 2)  # (a subnormal half too)
    return nv, q1


def _gguf_py_fp4_file(path, *tensors) -> str:
    w = gguf.GGUFWriter(str(path), "llama")
    for name, data, t in tensors:
        w.add_tensor(name, data, raw_dtype=t)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    return str(path)


def test_nvfp4_and_q1_0_tensors_the_gguf_package_writes_read_and_dequantize_exactly(tmp_path):
    nv, q1 = _fp4_tensors()
    p = _gguf_py_fp4_file(tmp_path / "m.gguf", ("nv", nv, NVFP4), ("q1", q1, Q1_0))
    with codec.open(p) as r:
        assert r.validate(full=True).ok
        for name, data, code in (("nv", nv, 40), ("q1", q1, 41)):
            info = r.tensors[name]
            assert (info.extra["dtype_name"], info.extra["quant_params"], info.shape) == (
                gguf.GGMLQuantizationType(code).name, {"ggml_type": code}, (3, 128))
            assert r.tensor(name).tobytes() == data.tobytes()
    got = codec.load(p)
    assert _same_bits(codec.dequantize(got["nv"]), gguf.quants.dequantize(nv, NVFP4))
    assert _same_bits(codec.dequantize(got["q1"]), _reference(41, q1).reshape(3, 128))


def test_what_we_write_with_nvfp4_and_q1_0_the_gguf_package_reads_exactly(tmp_path):
    nv, q1 = _fp4_tensors()
    p = codec.write(str(tmp_path / "m.gguf"), {"nv": Packed(nv.reshape(-1), (3, 128), {"ggml_type": 40}),
                                                 "q1": Packed(q1, (3, 128), {"ggml_type": 41})}, format="gguf")
    assert _tensors(p) == {"nv": ("NVFP4", [128, 3], nv.tobytes()), "q1": ("Q1_0", [128, 3], q1.tobytes())}
    (t, _) = gguf.GGUFReader(p).tensors
    assert _same_bits(gguf.quants.dequantize(np.asarray(t.data), NVFP4), codec.dequantize(codec.load(p)["nv"]))


def test_an_nvfp4_gguf_converts_to_aero_and_back_bit_exactly_and_dequantizes_as_gguf_py_does(tmp_path):
    nv, q1 = _fp4_tensors()
    p = _gguf_py_fp4_file(tmp_path / "m.gguf", ("nv", nv, NVFP4), ("q1", q1, Q1_0))
    aero = codec.convert(p, str(tmp_path / "m.aero"))
    with codec.open(aero) as r:
        assert r.tensors["nv"].common_dtype == "packed" and r.tensors["nv"].quant_params == {"ggml_type": 40}
    back = codec.convert(aero, str(tmp_path / "back.gguf"))
    assert _tensors(back) == _tensors(p)
    out = tmp_path / "m.safetensors"
    assert cli.main(["convert", aero, str(out), "--cast", "packed=float32", "--drop-metadata"]) == 0
    with codec.open(str(out)) as r:
        assert _same_bits(np.array(r.tensor("nv")), gguf.quants.dequantize(nv, NVFP4))
        assert _same_bits(np.array(r.tensor("q1")), _reference(41, q1).reshape(3, 128))


def test_a_truncated_nvfp4_tensor_is_refused_with_the_bounds_error(tmp_path):
    nv, _ = _fp4_tensors()
    p = _gguf_py_fp4_file(tmp_path / "m.gguf", ("nv", nv, NVFP4))
    cut = open(p, "rb").read()[:gguf.GGUFReader(p).tensors[0].data_offset + 200]  # (200 of its 216 bytes)
    for data in (cut, _gguf(infos=_info("w", [64], 40, 0), n_t=1, data=bytes(35))):
        rep = codec.validate(data, format="gguf")
        assert [e.rule for e in rep.violations] == ["GGUF-BOUNDS"], [str(e) for e in rep.violations]
        assert isinstance(rep.violations[0], E.TruncatedError)
        p = tmp_path / "cut.gguf"
        p.write_bytes(data)
        with pytest.raises(E.TruncatedError, match="GGUF-BOUNDS"):
            codec.open(str(p)).close()
