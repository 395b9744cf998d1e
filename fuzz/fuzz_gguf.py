#!/usr/bin/env python3
"""Coverage-guided fuzz harness (atheris / libFuzzer) for the GGUF reader.

Contract checked for ANY input bytes: opening (``codec.open`` with ``format="gguf"``, by
content detection, from a bytearray, a memoryview or a file path), ``metadata``,
``meta_types``, ``describe()``, every listed tensor (``tensors[name]``, ``tensor(name)``, its
bytes whole), ``validate(full=True)`` / ``validate()`` and ``close`` either succeed or raise a
subclass of :class:`codec.FormatError`; ``validate_file`` never raises for bad data and reports
only FormatErrors.  Anything else is a bug and is reported as a crash; hangs and huge
allocations are caught by libFuzzer's ``-timeout`` and ``-rss_limit_mb``.

GGUF has no checksum, so there is no repair pass.  Every input is read in up to four passes:
``raw``; ``count`` -- the header's ``tensor_count`` or ``kv_count`` set to a hostile value
(2^31, 2^32 - 1, 2^60, 2^63, 2^64 - 1..., or the largest count the bytes after the header
could hold and one more: just past the file); ``length`` -- one key or string length, array
count or value type of the key/value section; ``info`` -- one field of a tensor info (its name
length, n_dims, an extent, its ggml type or its offset).  The fields of the last two passes are
found by walking the file outside the instrumented code; each is set to a hostile value that
fits its width, or to the size just past the bytes after it (and the largest that still fits).

There are no conformance vectors for GGUF: the seeds are written into
``/dev/shm/fuzz_gguf-<uid>/seeds/`` (then copied into ``fuzz/corpus_gguf/``, git-ignored) by two
writers: modelcodec's own (every value type, nested and empty arrays, every plain tensor type,
quantized tensors, ``general.alignment``, v2) and the reference one, the ``gguf`` package's
``GGUFWriter`` (every value type incl. nested arrays and 64-bit typed arrays, every plain ggml
type, quantized tensors given as raw packed bytes with their ggml type, a custom alignment, a
big-endian file).

    .venv/bin/python fuzz/fuzz_gguf.py -max_total_time=600
    .venv/bin/python fuzz/fuzz_gguf.py --smoke [--smoke-iters 3000] [--smoke-seed 0]
    .venv/bin/python fuzz/fuzz_gguf.py --repro FILE [FILE...] [--dump-effective DIR]
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import _common as C  # noqa: E402

atheris = C.load_codec(["codec.schemas.gguf", "codec.formats.gguf", "codec.engine.values"], pre=["numpy", "ml_dtypes", "gguf"])
import numpy as np  # noqa: E402

import codec  # noqa: E402
from codec.schemas import gguf as S  # noqa: E402
from codec.engine.records import record_of  # noqa: E402
from codec.formats.gguf import (  # noqa: E402
    _MIN_KV, ARRAY, INFO, KV, NP_VALUE, STRING, GgufReader, validate_file, write_gguf)
from codec.model import Packed  # noqa: E402

FormatError = codec.FormatError
HDR = record_of(S.Header)


# ====================================================================== seeds
def _seed_models() -> list[tuple[dict, dict | None]]:
    import ml_dtypes
    rng = np.random.default_rng(11)
    plain = {f"t.{dt}": (rng.standard_normal((2, 3)) * 9).astype(dt) for dt in
             ("float16", "float32", "float64", "int8", "int16", "int32", "int64")}
    plain["t.bf16"] = np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16)
    typed = {"general.architecture": "llama", "u8": np.uint8(7), "i8": np.int8(-7), "u16": np.uint16(9),
             "i16": np.int16(-9), "u32": np.uint32(5), "i32": np.int32(-5), "f32": np.float32(0.5), "b": True,
             "s": "héllo", "u64": np.uint64(2**40), "i64": np.int64(-2**40), "f64": 0.1,
             "a.u8": np.arange(5, dtype=np.uint8), "a.s": ["a", "", "bc"], "a.nested": [[1, 2], [3]],
             "a.mixed": [np.array([1], np.uint16), ["x"]], "a.empty": [], "a.f32": np.array([0.5, 1.5], np.float32)}
    packed = {}
    for code in (2, 8, 12, 14):  # Q4_0, Q8_0, Q4_K, Q6_K
        _, block, per, _ = S.GGML_TYPES[code]
        packed[f"q.{code}"] = Packed(rng.integers(0, 256, 2 * per, dtype=np.uint8), (1, 2 * block),
                                     {S.QUANT_TYPE_KEY: code})
    return [(plain, typed), (packed, {"general.alignment": np.uint32(64)}), ({}, {"only": "metadata"}),
            ({"one": np.zeros(1, np.float32)}, None)]


def _reference_seeds() -> list:
    """Writers of seeds by the reference implementation, gguf-py's GGUFWriter: (name, fill(w)),
    each fills a fresh writer with key/values and tensors."""
    import gguf
    from gguf.quants import quantize
    Q, V = gguf.GGMLQuantizationType, gguf.GGUFValueType
    rng = np.random.default_rng(12)

    def every_value(w):
        w.add_uint8("u8", 200); w.add_int8("i8", -3); w.add_uint16("u16", 60000); w.add_int16("i16", -300)  # noqa: E702
        w.add_uint32("u32", 7); w.add_int32("i32", -7); w.add_float32("f32", 0.25); w.add_bool("b", True)  # noqa: E702
        w.add_string("s", "héllo"); w.add_uint64("u64", 2**40); w.add_int64("i64", -2**40)  # noqa: E702
        w.add_float64("f64", 1e-9)
        w.add_array("a.i32", [1, 2, 3]); w.add_array("a.f32", [0.5, 1.5]); w.add_array("a.s", ["a", "bc", ""])  # noqa: E702
        w.add_array("a.b", [True, False]); w.add_array("a.nested", [[1, 2], [3]])  # noqa: E702
        w.add_array("a.deep", [[["x"], ["y", "z"]], [["w"]]]); w.add_array("a.bytes", b"\x00\x01\xff")  # noqa: E702
        w.add_key_value("a.u64", [2**63, 1], V.ARRAY, sub_type=V.UINT64)
        w.add_key_value("a.f64", [0.1, -2.5], V.ARRAY, sub_type=V.FLOAT64)
        w.add_key_value("a.i8", [-1, 1], V.ARRAY, sub_type=V.INT8)
        w.add_tensor("one", np.ones(3, np.float32))

    def every_plain_type(w):
        for dt in ("float32", "float16", "float64", "int8", "int16", "int32", "int64"):
            w.add_tensor(f"t.{dt}", (rng.standard_normal((2, 3)) * 9).astype(dt))
        w.add_tensor("t.bf16", rng.integers(0, 2**16, (2, 4), dtype=np.uint16), raw_dtype=Q.BF16)

    def quantized(w):
        for q in (Q.Q8_0, Q.Q4_0, Q.Q4_K, Q.Q6_K):
            try:
                packed = quantize(rng.standard_normal((2, 256)).astype(np.float32), q)
            except NotImplementedError:  # (a type gguf-py cannot quantize: raw bytes of the right size)
                block, per = gguf.GGML_QUANT_SIZES[q]
                packed = rng.integers(0, 256, (2, 256 // block * per), dtype=np.uint8)
            w.add_tensor(f"q.{q.name}", packed, raw_dtype=q)
        w.add_tensor("norm", np.ones(256, np.float32))

    def aligned(w):
        w.add_custom_alignment(64)
        w.add_tensor("a", np.arange(5, dtype=np.float32))
        w.add_tensor("b", np.arange(3, dtype=np.int16).reshape(3, 1))

    def vocab(w):
        w.add_tokenizer_model("llama")
        w.add_token_list([f"tok{i}" for i in range(300)] + ["▁é", "<0x00>", ""])
        w.add_token_scores([float(i) for i in range(303)])
        w.add_token_types([1] * 303)

    return [("values", every_value), ("plain", every_plain_type), ("quantized", quantized), ("aligned", aligned),
            ("vocab", vocab), ("big-endian", every_plain_type)]


def make_seeds() -> Path:
    d = Path(C.tmp_dir("gguf")) / "seeds"
    d.mkdir(parents=True, exist_ok=True)
    for i, (t, md) in enumerate(_seed_models()):
        p = d / f"seed-{i}.gguf"
        if not p.exists():
            write_gguf(str(p), t, metadata=md, version=2 if i == 3 else 3)
    import gguf
    for name, fill in _reference_seeds():
        p = d / f"seed-gguf-py-{name}.gguf"
        if p.exists():
            continue
        tmp = d / f".{p.name}.{os.getpid()}"
        endian = gguf.GGUFEndian.BIG if name == "big-endian" else gguf.GGUFEndian.LITTLE
        w = gguf.GGUFWriter(str(tmp), "llama", endianess=endian)
        fill(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, p)  # (two harness processes may make the seeds at once)
    return d


class SeedHarness(C.Harness):
    @property
    def vectors(self) -> Path:
        return make_seeds()


# ====================================================================== passes
#: values a u64 count, length, extent or offset is set to (besides "fits exactly" and "just past")
U64_VALUES = (0, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**47, 2**53 + 1, 2**60, 2**62, 2**63 - 1, 2**63, 2**64 - 1)
#: values a u32 type code or n_dims is set to: unknown value types (13+), ggml codes that are gaps
#: in the table (4, 5, 31-33, 36-38) or just past it, the widths' edges
TYPE_VALUES = {"value-type": (13, 31, 2**31, 2**32 - 1),
               "ggml-type": (4, 5, 31, 33, 36, 38, max(S.GGML_TYPES) + 1, 2**31, 2**32 - 1),
               "n_dims": (0, 5, 2**31, 2**32 - 1)}
#: the widths the walk steps by, all from the declarations (schemas.gguf): a fixed-size value by
#: its type, a string's length, a value type, an array's count, a tensor info's fields
_FIXED = {int(t): dt.itemsize for t, dt in NP_VALUE.items()}
_LEN, _VTYPE = STRING.by_name["text_length"].size, KV.by_name["value_type"].size
_ATYPE, _ACOUNT = ARRAY.by_name["type"].size, ARRAY.by_name["count"].size
_NDIMS, _TYPE, _OFFSET = (INFO.by_name[f].size for f in ("n_dims", "type", "offset"))
_DIM = INFO.by_name["dims"].subcon.subcon.sizeof()


def walk(data: bytes, limit: int = 4096) -> tuple[list, list]:
    """The fields a hostile value is worth trying in: ([(offset, width, kind, per)] of the
    key/value section, [...] of the tensor infos), found by a tolerant walk that stops where the
    bytes stop making sense.  ``per``: the bytes each unit of a count or length takes at least
    (for "just past the file").  Plain Python over ``data``: never instrumented."""
    kv: list = []
    infos: list = []

    def num(at: int, width: int) -> int:
        if at + width > len(data):
            raise ValueError("past the end")
        return int.from_bytes(data[at:at + width], "little")

    def value(t: int, pos: int, depth: int) -> int:
        if t in _FIXED:
            return pos + _FIXED[t]
        if t == S.ValueType.STRING:
            kv.append((pos, _LEN, "length", 1))
            return pos + _LEN + num(pos, _LEN)
        if t == S.ValueType.ARRAY and depth < S.MAX_ARRAY_DEPTH:
            et, n = num(pos, _ATYPE), num(pos + _ATYPE, _ACOUNT)
            kv.append((pos, _ATYPE, "value-type", 0))
            kv.append((pos + _ATYPE, _ACOUNT, "count", _FIXED.get(et, STRING.min_size())))
            pos += _ATYPE + _ACOUNT
            if et in _FIXED:
                return pos + n * _FIXED[et]
            for _ in range(min(n, limit)):
                pos = value(et, pos, depth + 1)
                if pos > len(data) or len(kv) >= limit:
                    raise ValueError("past the end")
            return pos
        raise ValueError(t)

    try:
        h = HDR.parse(data, 0)
        pos = HDR.size
        for _ in range(min(h["kv_count"], limit)):
            kv.append((pos, _LEN, "length", 1))
            pos += _LEN + num(pos, _LEN)
            kv.append((pos, _VTYPE, "value-type", 0))
            pos = value(num(pos, _VTYPE), pos + _VTYPE, 0)
            if pos > len(data) or len(kv) >= limit:
                raise ValueError("past the end")
        for _ in range(min(h["tensor_count"], limit)):
            infos.append((pos, _LEN, "length", 1))
            pos += _LEN + num(pos, _LEN)
            nd = num(pos, _NDIMS)
            infos.append((pos, _NDIMS, "n_dims", 0))
            if not 1 <= nd <= S.MAX_DIMS:
                break
            infos.extend((pos + _NDIMS + _DIM * k, _DIM, "extent", 1) for k in range(nd))
            pos += _NDIMS + _DIM * nd
            infos.append((pos, _TYPE, "ggml-type", 0))
            infos.append((pos + _TYPE, _OFFSET, "offset", 1))
            pos += _TYPE + _OFFSET
            if pos > len(data) or len(infos) >= limit:
                break
    except (FormatError, ValueError, OverflowError):
        pass
    return ([f for f in kv if f[0] + f[1] <= len(data)], [f for f in infos if f[0] + f[1] <= len(data)])


def field_variant(data: bytes, fields: list, salt: int) -> bytes | None:
    """One of ``fields`` (chosen by the input's CRC) set to a hostile value that fits it: for a
    type code or n_dims an unknown or out-of-range one; for a u64 one of :data:`U64_VALUES`, the
    largest count the bytes after it can hold or one more (just past the file)."""
    if not fields:
        return None
    import zlib
    sel = zlib.crc32(data, salt)
    at, width, kind, per = fields[sel % len(fields)]
    if width == 4:
        values = TYPE_VALUES[kind]
    else:
        left = len(data) - at - 8
        fits = left // per if per else left
        values = U64_VALUES + (fits, fits + 1)
        if kind == "offset":
            values += (1, 16, len(data), 2**64 - 32)
        elif kind == "extent":
            values += (2**61 + 1, 2**32 + 1, 3)
    v = values[(sel >> 12) % len(values)]
    return data[:at] + v.to_bytes(width, "little") + data[at + width:]


def count_variant(data: bytes) -> bytes | None:
    """The header's ``tensor_count`` or ``kv_count`` set to a hostile value, to the largest count
    the bytes after the header could hold (the smallest key/value and tensor info, as the
    reader's bound) or to one more (just past the file).  None: no header."""
    if len(data) < S.HEADER_SIZE:
        return None
    try:
        h = HDR.parse(data, 0)
    except Exception:  # (the harness's helper never reports: only the reader can)
        return None
    sel = C.selector(data)
    name = ("tensor_count", "kv_count")[sel % 2]
    left = len(data) - S.HEADER_SIZE
    if name == "tensor_count":
        fits = max(left - h["kv_count"] * _MIN_KV, 0) // INFO.min_size()
    else:
        fits = max(left - h["tensor_count"] * INFO.min_size(), 0) // _MIN_KV
    values = U64_VALUES + (fits, fits + 1, (h[name] * 2 + 1) % 2**64)
    v = values[(sel >> 8) % len(values)]
    return HDR.build(dict(h, **{name: v})) + bytes(data[S.HEADER_SIZE:])


def passes(data: bytes):
    how = C.how_of(data)
    out = [("raw", data, how)]
    kv, infos = walk(data)
    for pname, made in (("count", count_variant(data)), ("length", field_variant(data, kv, 0x6B76)),
                        ("info", field_variant(data, infos, 0x7469))):
        if made is not None and made != data:
            out.append((pname, made, how))
    return out


# ====================================================================== the exercise
class OtherFormat(Exception):
    """Auto-detection picked another format: not this harness's business."""


def _open(data: bytes, how: str):
    if how == "auto":
        entry = codec.registry.detect(codec.registry.head_of(data))
        if entry.name != "gguf":
            raise OtherFormat(entry.name)
        return codec.open(data)
    if how == "bytearray":
        return codec.open(bytearray(data), format="gguf")
    if how == "memoryview":
        return GgufReader(memoryview(data))
    if how == "path":
        return codec.open(C.write_tmp("gguf", ".gguf", data), format="gguf")
    return codec.open(data, format="gguf")


def exercise(pname: str, buf: bytes, how: str) -> None:
    try:
        r = _open(buf, how)
    except (FormatError, OtherFormat, codec.errors.UnknownFormatError):
        r = None
    if r is not None:
        try:
            for step in (lambda: r.metadata, lambda: r.meta_types, lambda: r.value_types, r.describe):
                try:
                    step()
                except FormatError:
                    pass
            C.walk_tensors(r)
            C.check_levels(r, must_be_ok=True)
        finally:
            r.close()
    src = C.write_tmp("gguf", ".gguf", buf) if how == "path" else buf
    C.check_report(validate_file(src, full=True), "validate_file full")


DICT_TOKENS = [b"GGUF", b"\x03\x00\x00\x00", b"\x02\x00\x00\x00", b"general.alignment", b"general.architecture",
               b"\x08\x00\x00\x00", b"\x09\x00\x00\x00", b"\x0c\x00\x00\x00", b"\x1e\x00\x00\x00",
               b"\xff\xff\xff\xff\xff\xff\xff\xff", b"\x00\x00\x00\x00\x00\x00\x00\x80", b"\x20\x00\x00\x00"]

HARNESS = SeedHarness(name="gguf", ext=".gguf", passes=passes, exercise=exercise, dict_tokens=DICT_TOKENS,
                      synthetic_seed=HDR.build({"magic": S.MAGIC, "version": 3, "tensor_count": 0, "kv_count": 0}),
                      interesting=[24, 32, 2**62, 2**63])


def TestOneInput(data: bytes) -> None:
    C.test_one_input(HARNESS)(data)


if __name__ == "__main__":
    sys.exit(C.main(HARNESS, atheris))
