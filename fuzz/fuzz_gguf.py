#!/usr/bin/env python3
"""Coverage-guided fuzz harness (atheris / libFuzzer) for the GGUF reader.

Contract checked for ANY input bytes: opening (``codec.open`` with ``format="gguf"``, by
content detection, from a bytearray, a memoryview or a file path), ``metadata``,
``meta_types``, ``describe()``, every listed tensor (``tensors[name]``, ``tensor(name)``, its
bytes whole), ``validate(full=True)`` / ``validate()`` and ``close`` either succeed or raise a
subclass of :class:`codec.FormatError`; ``validate_file`` never raises for bad data and reports
only FormatErrors.  Anything else is a bug and is reported as a crash; hangs and huge
allocations are caught by libFuzzer's ``-timeout`` and ``-rss_limit_mb``.

GGUF has no checksum, so there is no repair pass.  Every input is read in up to three passes:
``raw``; ``count`` -- the header's ``tensor_count`` or ``kv_count`` set to a hostile value
(2^31, 2^62, 2^64 - 1, just past the file...); ``length`` -- one string length or array count
of the key/value section (found by walking it, outside the instrumented code) set to one.

There are no conformance vectors for GGUF: the seeds are written by modelcodec's own writer
(every value type, nested and empty arrays, every plain tensor type, quantized tensors,
``general.alignment``) into ``/dev/shm/fuzz_gguf-<uid>/seeds/`` and copied into
``fuzz/corpus_gguf/`` (git-ignored).

    .venv/bin/python fuzz/fuzz_gguf.py -max_total_time=600
    .venv/bin/python fuzz/fuzz_gguf.py --smoke [--smoke-iters 3000] [--smoke-seed 0]
    .venv/bin/python fuzz/fuzz_gguf.py --repro FILE [FILE...] [--dump-effective DIR]
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import _common as C  # noqa: E402

atheris = C.load_codec(["schemas.gguf", "codec.formats.gguf", "codec.values"], pre=["numpy", "ml_dtypes"])
import numpy as np  # noqa: E402

import codec  # noqa: E402
import schemas.gguf as S  # noqa: E402
from codec.engine import record_of  # noqa: E402
from codec.formats.gguf import GgufReader, validate_file, write_gguf  # noqa: E402
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


def make_seeds() -> Path:
    d = Path(C.tmp_dir("gguf")) / "seeds"
    d.mkdir(parents=True, exist_ok=True)
    for i, (t, md) in enumerate(_seed_models()):
        p = d / f"seed-{i}.gguf"
        if not p.exists():
            write_gguf(str(p), t, metadata=md, version=2 if i == 3 else 3)
    return d


class SeedHarness(C.Harness):
    @property
    def vectors(self) -> Path:
        return make_seeds()


# ====================================================================== passes
def length_fields(data: bytes, limit: int = 4096) -> list[int]:
    """Offsets of the u64 string lengths and array counts of the key/value section, found by a
    tolerant walk (stops where the bytes stop making sense)."""
    out: list[int] = []
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def value(t: int, pos: int, depth: int) -> int:
        if t in fixed:
            return pos + fixed[t]
        if t == 8:
            out.append(pos)
            return pos + 8 + struct.unpack_from("<Q", data, pos)[0]
        if t == 9 and depth < 4:
            et = struct.unpack_from("<I", data, pos)[0]
            out.append(pos + 4)
            n = struct.unpack_from("<Q", data, pos + 4)[0]
            pos += 12
            if et in fixed:
                return pos + n * fixed[et]
            for _ in range(min(n, limit)):
                pos = value(et, pos, depth + 1)
            return pos
        raise ValueError(t)

    try:
        pos = 24
        for _ in range(min(struct.unpack_from("<Q", data, 16)[0], limit)):
            out.append(pos)
            pos += 8 + struct.unpack_from("<Q", data, pos)[0]
            t = struct.unpack_from("<I", data, pos)[0]
            pos = value(t, pos + 4, 0)
            if len(out) >= limit or pos > len(data):
                break
    except (struct.error, ValueError, OverflowError):
        pass
    return [p for p in out if p + 8 <= len(data)]


def length_variant(data: bytes) -> bytes | None:
    """One string length or array count set to a hostile value (None: none found)."""
    fields = length_fields(data)
    if not fields:
        return None
    sel = C.selector(data)
    at = fields[sel % len(fields)]
    values = [*C.HOSTILE_COUNTS, len(data) - at, len(data) - at - 7]
    v = values[(sel >> 10) % len(values)]
    return data[:at] + struct.pack("<Q", v % 2**64) + data[at + 8:]


def passes(data: bytes):
    out = C.with_count_variant([("raw", data, C.how_of(data))], data, HDR, ("tensor_count", "kv_count"))
    hostile = length_variant(data)
    if hostile is not None and hostile != data:
        out.append(("length", hostile, C.how_of(data)))
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
                      synthetic_seed=b"GGUF" + struct.pack("<IQQ", 3, 0, 0),
                      interesting=[24, 32, 2**62, 2**63])


def TestOneInput(data: bytes) -> None:
    C.test_one_input(HARNESS)(data)


if __name__ == "__main__":
    sys.exit(C.main(HARNESS, atheris))
