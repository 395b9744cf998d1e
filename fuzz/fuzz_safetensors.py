#!/usr/bin/env python3
"""Coverage-guided fuzz harness (atheris / libFuzzer) for the safetensors reader.

Contract checked for ANY input bytes: opening (``codec.open`` with ``format="safetensors"``,
by content detection, from a bytearray, a memoryview or a file path), ``metadata``,
``describe()``, every listed tensor (``tensors[name]``, ``tensor(name)``, its bytes whole),
``validate(full=True)`` / ``validate()`` and ``close`` either succeed or raise a subclass of
:class:`codec.FormatError`; ``validate_file`` never raises for bad data and reports only
FormatErrors.  Anything else is a bug and is reported as a crash; hangs and huge allocations
are caught by libFuzzer's ``-timeout`` and ``-rss_limit_mb``.

Every input is read in up to three passes: ``raw``; ``fixed`` -- the header length set to the
length of the JSON object that follows (so mutations of the JSON get past the length check);
``count`` -- the header length set to a hostile value (2^31, 2^63, past the file...).

There are no conformance vectors for safetensors: the seeds are written by modelcodec's own
writer (every dtype, metadata, scalars, empty tensors) into ``/dev/shm/fuzz_safetensors-<uid>/
seeds/`` and copied into ``fuzz/corpus_safetensors/`` (git-ignored).

    .venv/bin/python fuzz/fuzz_safetensors.py -max_total_time=600
    .venv/bin/python fuzz/fuzz_safetensors.py --smoke [--smoke-iters 3000] [--smoke-seed 0]
    .venv/bin/python fuzz/fuzz_safetensors.py --repro FILE [FILE...] [--dump-effective DIR]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import _common as C  # noqa: E402

atheris = C.load_codec(["codec.schemas.safetensors", "codec.formats.safetensors"], pre=["numpy", "ml_dtypes"])
import numpy as np  # noqa: E402

import codec  # noqa: E402
from codec.schemas import safetensors as S  # noqa: E402
from codec.engine.records import record_of  # noqa: E402
from codec.formats.safetensors import SafetensorsReader, validate_file, write_safetensors  # noqa: E402

FormatError = codec.FormatError
HDR = record_of(S.Header)


# ====================================================================== seeds
def _seed_models() -> list[tuple[dict, dict | None]]:
    import ml_dtypes
    rng = np.random.default_rng(7)
    out = [({f"t.{dt}": (rng.standard_normal((2, 3)) * 9).astype(dt) for dt in
             ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "bool")}, {"k": "v"}),
           ({"bf": np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16),
             "f8": np.arange(4, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn)}, None),
           ({"scalar": np.array(1.5, np.float32), "empty": np.zeros((0, 3), np.int32)}, {}),
           ({}, {"only": "metadata"})]
    return out


def make_seeds() -> Path:
    d = Path(C.tmp_dir("safetensors")) / "seeds"
    d.mkdir(parents=True, exist_ok=True)
    for i, (t, md) in enumerate(_seed_models()):
        p = d / f"seed-{i}.safetensors"
        if not p.exists():
            write_safetensors(str(p), t, metadata=md)
    return d


class SeedHarness(C.Harness):
    @property
    def vectors(self) -> Path:
        return make_seeds()


# ====================================================================== passes
def fixup(data: bytes) -> bytes | None:
    """The input with its header length set to the length of the JSON object that follows
    (its first balanced {...}); None when nothing changes or there is no such object."""
    if len(data) < 9 or data[8:9] != b"{":
        return None
    try:
        _, end = json.JSONDecoder().raw_decode(data[8:].decode("utf-8", "replace"))
    except ValueError:
        return None
    n = len(data[8:].decode("utf-8", "replace")[:end].encode("utf-8"))
    if int.from_bytes(data[:8], "little") == n:
        return None
    return n.to_bytes(8, "little") + bytes(data[8:])


def passes(data: bytes):
    return C.with_count_variant(C.raw_and_fixed(data, fixup), data, HDR, ("header_length",))


# ====================================================================== the exercise
class OtherFormat(Exception):
    """Auto-detection picked another format: not this harness's business."""


def _open(data: bytes, how: str):
    if how == "auto":
        entry = codec.registry.detect(codec.registry.head_of(data))
        if entry.name != "safetensors":
            raise OtherFormat(entry.name)
        return codec.open(data)
    if how == "bytearray":
        return codec.open(bytearray(data), format="safetensors")
    if how == "memoryview":
        return SafetensorsReader(memoryview(data))
    if how == "path":
        return codec.open(C.write_tmp("safetensors", ".safetensors", data), format="safetensors")
    return codec.open(data, format="safetensors")


def exercise(pname: str, buf: bytes, how: str) -> None:
    try:
        r = _open(buf, how)
    except (FormatError, OtherFormat, codec.errors.UnknownFormatError):
        r = None
    if r is not None:
        try:
            for step in (lambda: r.metadata, r.describe):
                try:
                    step()
                except FormatError:
                    pass
            C.walk_tensors(r)
            C.check_levels(r, must_be_ok=True)
        finally:
            r.close()
    src = C.write_tmp("safetensors", ".safetensors", buf) if how == "path" else buf
    C.check_report(validate_file(src, full=True), "validate_file full")


DICT_TOKENS = [b'{"', b'"dtype"', b'"shape"', b'"data_offsets"', b'"__metadata__"', b'"F32"', b'"BF16"', b'"I64"',
               b'"BOOL"', b'"F8_E4M3"', b"[0,", b"]", b"}", b"{}", b"[]", b" ", b"18446744073709551615",
               b"9223372036854775808", b"-1", b"1e400", b"\\u0000", b"\\ud800"]

HARNESS = SeedHarness(name="safetensors", ext=".safetensors", passes=passes, exercise=exercise,
                      dict_tokens=DICT_TOKENS, synthetic_seed=(2).to_bytes(8, "little") + b"{}",
                      interesting=[2, 8, 100_000_000, 100_000_001])


def TestOneInput(data: bytes) -> None:
    C.test_one_input(HARNESS)(data)


if __name__ == "__main__":
    sys.exit(C.main(HARNESS, atheris))

