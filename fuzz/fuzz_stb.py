#!/usr/bin/env python3
"""Coverage-guided fuzz harness (atheris / libFuzzer) for the STB reader and its KHANARY glyph
words.

Contract checked for ANY input bytes, in both strict modes (``strict=True`` and
``strict=False``) and with a shape table chosen per input (none, the small one of the
conformance vectors ``{0: (2,3,4,2), 1: (1,2,3,4,5), 2: (2,3,4,2)}``, its list / manifest forms,
or odd ones: rank 8, zero extents, extents whose product overflows): opening (``codec.open`` /
``StbReader``), ``metadata`` / ``describe()``, every listed tensor (``tensors[name]``,
``tensor(name)`` by string and by int, ``tobytes()``), ``validate(full=True)``, ``validate()``
and ``close`` either succeed or raise a subclass of :class:`codec.FormatError`;
``validate_file(data, strict=..., shape_table=...)`` never raises at all and reports only
FormatErrors.  Anything else (KeyError, IndexError, ValueError from a reshape, OverflowError,
MemoryError, TypeError, RecursionError, NotFoundError for a listed name...) is a bug and is
reported as a crash; hangs and huge allocations are caught by ``-timeout`` / ``-rss_limit_mb``.

KHANARY: the first 4 bytes of every input, as a little-endian u32, go through
``khanary.decode``: it returns a word or raises ``GlyphError``; a word that decodes must encode
back to itself (``encode(g.glyph, g.bin_file_id, g.shape_id, auth_class=, arity=, flags=)``).
When the STB opens in some mode, a ``BinFileTable`` mapping bin_file_id 0 to the input (a temp
file; optional size / alignment / dtype checks chosen per input) runs G_LOAD_BIN_TENSOR for the
listed tensor ids < 16, G_MMAP_BIN_REGION, G_PREFETCH_BIN and the input's own word: each either
works or raises a FormatError.

Every input is read in up to two passes: ``raw`` (the bytes as produced) and ``fixed`` (the
header's ``file_size`` set to the real length, rebuilt with the engine's ``Header`` record --
no struct format, no hand-written offsets -- so length-changing mutations still reach the
descriptor logic behind STB-3-FILE-SIZE at open).  How the buffer is handed over (bytes,
bytearray, memoryview, auto-detection via ``codec.open``, or a temp file opened by path -> mmap),
the shape table, the tensor key type and the BinFileTable options are chosen from CRCs of the
input, so every run of the same input is identical (crashes reproduce).

Run the fuzzer for 10 minutes (single worker; libFuzzer flags pass straight through)::

    .venv/bin/python fuzz/fuzz_stb.py -max_total_time=600

With no corpus directory on the command line the harness creates ``fuzz/corpus_stb/``
(git-ignored, never committed), copies the conformance vectors ``<repo>/../shared/vectors/stb/
**/*.stb`` into it, writes a token dictionary (magic, enum bytes, interesting u32/u64, the valid
KNU words of knu_vectors.json) to a temp file and passes both to libFuzzer.
``-rss_limit_mb=2048 -timeout=10 -artifact_prefix=fuzz/findings/stb/`` are added unless given.

Memory: atheris 3.0 leaks the result of every instrumented comparison that returns a numpy
array (see fuzz_aero.py).  The STB reader checks its descriptor table with numpy column
comparisons, so RSS grows steadily under atheris (not in --smoke / --repro); for runs much longer
than 10 minutes raise -rss_limit_mb or run in slices of -max_total_time over the same corpus.

Other modes (no atheris needed)::

    .venv/bin/python fuzz/fuzz_stb.py --smoke [--smoke-iters 3000] [--smoke-seed 0]
    .venv/bin/python fuzz/fuzz_stb.py --repro FILE [FILE...] [--dump-effective DIR]
    .venv/bin/python fuzz/fuzz_stb.py fuzz/findings/stb/crash-XXXX   # libFuzzer re-run
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from anywhere without an install
sys.path.insert(0, str(HERE))         # _common

import _common as C  # noqa: E402  (never instrumented; imports no codec module itself)

# C extensions (numpy): imported first, never instrumented; then codec / schemas
# inside atheris.instrument_imports (plain imports in --smoke / --repro without atheris)
atheris = C.load_codec(["codec.schemas.khanary", "codec.schemas.stb", "codec.formats.khanary", "codec.formats.stb"],
                       pre=["numpy"])
import numpy as np  # noqa: E402  (C extension: not instrumented)
import codec  # noqa: E402  (already imported, instrumented under atheris, by load_codec)
from codec import schemas  # noqa: E402
import codec.schemas.khanary  # noqa: E402
import codec.schemas.stb  # noqa: E402
from codec.engine.records import record_of  # noqa: E402
from codec.formats.khanary import BinFile, BinFileTable, GlyphError, decode, encode  # noqa: E402
from codec.formats.stb import StbReader, validate_file as stb_validate  # noqa: E402

FormatError = codec.FormatError
S = schemas.stb
K = schemas.khanary
Glyph = K.Glyph
ContractViolation = C.ContractViolation

HDR = record_of(S.Header)

# ====================================================================== per-input choices
SMALL_TABLE = {0: (2, 3, 4, 2), 1: (1, 2, 3, 4, 5), 2: (2, 3, 4, 2)}
SHAPE_TABLES = [
    None,
    None,
    SMALL_TABLE,
    SMALL_TABLE,
    [(2, 3, 4, 2), (1, 2, 3, 4, 5)],                                             # list form
    [{"index": 0, "dims": [2, 3, 4, 2]}, {"index": 1, "dims": [1, 2, 3, 4, 5]}],  # manifest form
    {0: (1,) * 8, 1: (0, 2, 3, 4), 2: (2,) * 6, 3: (1,) * 7, 7: (4, 4, 4, 4), 255: (3, 1, 1, 2)},
    # products no size_bytes can match (an entry numpy cannot make at all, e.g. (0, 2**32, 2**32, 2**32),
    # is a caller error the reader does not check yet: see the report, not fuzzed here)
    {0: (2**31, 2**31, 2**31, 2**31), 1: (65536,) * 5, 2: (2**32 - 1,) * 8, 3: (0,) * 8},
]
BIN_OPTIONS = [
    {},
    {},
    {"alignment": 64},
    {"alignment": 4096},
    {"dtype": "float32"},
    {"dtype": "int8"},
    {"size": "exact"},
    {"size": 0},
]


def _choices(data: bytes) -> dict:
    sel = C.selector(data)
    return {
        "shape_table": SHAPE_TABLES[sel % len(SHAPE_TABLES)],
        "int_keys": bool(sel >> 3 & 1),
        "bin": BIN_OPTIONS[(sel >> 4) % len(BIN_OPTIONS)],
        "bin_strict": bool(sel >> 7 & 1),
    }


# ====================================================================== file_size repair
def fixup(data: bytes) -> bytes | None:
    """The input with Header.file_size set to its real length; None when nothing changes."""
    return C.fix_file_size(data, HDR)


# ====================================================================== the exercise
class OtherFormat(Exception):
    """Auto-detection picked another format: not this harness's business."""


def _open(data: bytes, how: str, strict: bool, table):
    if how == "auto":
        # auto-detection itself is exercised for every input; the reader of another format
        # (its magic) is left to that format's own harness, so the fuzzer stays on STB
        entry = codec.registry.detect(codec.registry.head_of(data))
        if entry.name != "stb":
            raise OtherFormat(entry.name)
        return codec.open(data, strict=strict)  # codec.open takes no shape table
    if how == "bytearray":
        return StbReader(bytearray(data), strict=strict, shape_table=table)
    if how == "memoryview":
        return StbReader(memoryview(data), strict=strict, shape_table=table)
    if how == "path":
        return StbReader(C.tmp_path("stb", ".stb"), strict=strict, shape_table=table)
    return StbReader(data, strict=strict, shape_table=table)


def exercise_reader(data: bytes, how: str, strict: bool, ch: dict) -> list[str] | None:
    """The whole public reading API in one mode; returns the listed names when it opened."""
    try:
        r = _open(data, how, strict, ch["shape_table"])
    except (FormatError, OtherFormat):
        return None
    try:
        is_stb = isinstance(r, StbReader)
        for step in (lambda: r.metadata, r.describe):
            try:
                step()
            except FormatError:
                pass
        names = list(r.tensors)

        def check(name, info, a):
            if is_stb and (a.nbytes != info.nbytes or tuple(a.shape) != tuple(info.shape)):
                raise ContractViolation(f"{name!r}: array {a.shape} / {a.nbytes} B for shape {info.shape} / "
                                        f"nbytes {info.nbytes}")
        C.walk_tensors(r, key=int if is_stb and ch["int_keys"] else None, check=check)
        C.check_levels(r, must_be_ok=is_stb)
        return names if is_stb else None
    finally:
        r.close()


def exercise_validate(data: bytes, how: str, strict: bool, ch: dict) -> None:
    """validate_file never raises for bad data and reports FormatErrors only."""
    src = C.tmp_path("stb", ".stb") if how == "path" else data
    rep = stb_validate(src, full=True, strict=strict, shape_table=ch["shape_table"])
    C.check_report(rep, f"validate_file strict={strict}")


def exercise_word(word: int):
    """decode() returns or raises GlyphError; a decoded word encodes back to itself."""
    try:
        g = decode(word)
    except GlyphError:
        return None
    try:
        back = encode(g.glyph, g.bin_file_id, g.shape_id, auth_class=g.auth_class, arity=g.arity, flags=g.flags)
    except FormatError as e:
        raise ContractViolation(f"decode(0x{word:08X}) worked but encode() of its fields raised {e!r}") from None
    if back != word:
        raise ContractViolation(f"decode(0x{word:08X}) -> encode() gave 0x{back:08X}")
    return g


def exercise_bin_table(data: bytes, how: str, names: list[str], word_g, ch: dict) -> None:
    """Run glyphs against a one-entry bin file table holding the input."""
    path = C.tmp_path("stb", ".stb")
    if how != "path":
        C.write_tmp("stb", ".stb", data)
    opts = dict(ch["bin"])
    if opts.get("size") == "exact":
        opts["size"] = len(data)
    table = {0: BinFile(path, mmap_required=True, **opts)}
    shape_tables = {0: ch["shape_table"]} if ch["shape_table"] is not None else None
    words = [encode(Glyph.G_LOAD_BIN_TENSOR, 0, int(n)) for n in names if int(n) < 16][:4]
    words += [encode(Glyph.G_MMAP_BIN_REGION, 0), encode(Glyph.G_PREFETCH_BIN, 0)]
    if word_g is not None:
        words.append(word_g.word)
    with BinFileTable(table, strict=ch["bin_strict"], shape_tables=shape_tables) as t:
        for w in words:
            try:
                out = t.run(w)
            except FormatError:
                continue
            if isinstance(out, np.ndarray):
                out.tobytes(order="A")
            elif isinstance(out, tuple):
                start, length = out
                if start < 0 or length < 0:
                    raise ContractViolation(f"G_PREFETCH_BIN gave a negative range {out}")
            else:
                bytes(out.buf[out.data_offset:out.file_size])


def exercise(pname: str, buf: bytes, how: str) -> None:
    ch = _choices(buf)
    if how == "path":
        C.write_tmp("stb", ".stb", buf)
    opened = None
    for strict in (True, False):
        names = exercise_reader(buf, how, strict, ch)
        if names is not None and opened is None:
            opened = names
        exercise_validate(buf, how, strict, ch)
    g = exercise_word(int.from_bytes(buf[:4], "little"))
    if opened is not None:
        exercise_bin_table(buf, how, opened, g, ch)


#: the header fields the "count" pass sets to hostile values (allocation and bounds budgets)
COUNT_FIELDS = ("tensor_count", "data_offset", "file_size")


def passes(data: bytes):
    """[(pass name, bytes fed to the reader, how)] for one input: as produced, repaired, and
    with one count/size/offset field of its header set to a hostile value."""
    return C.with_count_variant(C.raw_and_fixed(data, fixup), data, HDR, COUNT_FIELDS, fixup)


# ====================================================================== seeds, dict, CLI
def _le(v: int, n: int) -> bytes:
    return v.to_bytes(n, "little")


def _knu_words() -> list[bytes]:
    try:
        knu = json.loads((C.VECTORS_ROOT / "stb" / "knu_vectors.json").read_text())
        return sorted({_le(int(w["word"], 16), 4) for w in knu["words"] if w.get("expect") == "valid"})[:24]
    except (OSError, ValueError, KeyError):
        return []


DICT_TOKENS = [
    S.MAGIC, S.MAGIC + _le(S.VERSION, 1), b"\x01\x00", b"\x00\x01", _le(S.MAX_TENSORS, 2), _le(S.MAX_TENSORS + 1, 2),
    # descriptor heads: tensor_id, dtype, rank, layout
    b"\x00\x00\x03\x00", b"\x01\x01\x02\x01", b"\x02\x02\x04\x02", b"\x03\x03\x05\x00", b"\x00\x00\x08\x00",
    b"\x00\x00\x09\x00", b"\x00\x04\x00\x03",
    _le(64, 8), _le(128, 8), _le(320, 8), _le(0, 8), _le(2**63, 8), _le(2**64 - 64, 8), _le(2**64 - 1, 8),
    _le(0xFFFFFFFF, 4), _le(0x80000000, 4), _le(65536, 4),
    # dims triples: an empty tensor whose other extents no array can have; extents near 2^31
    _le(0, 4) + _le(0xFFFFFFFF, 4) * 2, _le(0xFFFFFFFF, 4) + _le(0, 4) + _le(0xFFFFFFFF, 4),
    _le(0x80000000, 4) * 2 + _le(0, 4),
] + _knu_words()

HARNESS = C.Harness(
    name="stb", ext=".stb", passes=passes, exercise=exercise, dict_tokens=DICT_TOKENS,
    synthetic_seed=HDR.build({"tensor_count": 0, "data_offset": 64, "file_size": 64}) + bytes(32),
    interesting=[32, 63, 96, 255, 256, 257, 2**64 - 64],
)


def TestOneInput(data: bytes) -> None:
    C.test_one_input(HARNESS)(data)


if __name__ == "__main__":
    sys.exit(C.main(HARNESS, atheris))
