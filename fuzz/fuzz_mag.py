#!/usr/bin/env python3
"""Coverage-guided fuzz harness (atheris / libFuzzer) for the MAG reader.

Contract checked for ANY input bytes: opening (``codec.open`` / ``MagReader``), reading
``metadata`` / ``meta_types`` / ``describe()`` / ``records_end`` / ``checksum_ok``, every listed
tensor (``tensors[name]``, ``tensor(name)``, ``tobytes()``), ``validate(full=True)``,
``validate()`` and ``close`` either succeed or raise a subclass of :class:`codec.FormatError`;
``validate_file(data, full=True)`` never raises at all and reports only FormatErrors.  Anything
else (KeyError, IndexError, struct.error, ValueError, OverflowError, MemoryError, TypeError,
RecursionError, NotFoundError for a listed name...) is a bug and is reported as a crash; hangs
and huge allocations are caught by libFuzzer's ``-timeout`` and ``-rss_limit_mb``.

Every input is read in up to three passes:

* ``raw``    -- the bytes exactly as libFuzzer produced them;
* ``fixed``  -- the same bytes with the header checksum (CRC-32C over [12, end of the last
  tensor record)) recomputed, when the records can be delimited.  Without it nearly every
  mutation of a record would be rejected by MAG-CHECKSUM at open and the record logic behind it
  (metadata types, shapes, numel, offsets, overlap, duplicate keys) would only be reached via
  ``validate_file``.  The records are walked with the engine's records (``record_of``), the
  header is rebuilt with ``HDR.build`` -- no second struct format, no hand-written offsets;
* ``flip-raw`` / ``flip-fixed`` -- when a pass's checksum holds (magic "MAG!", version 1, records
  delimited), one byte inside the checksummed range [12, records end) is XORed with a non-zero
  mask (position and mask derived from the input).  Opening that MUST fail with an
  ``IntegrityError`` of rule MAG-CHECKSUM (the reader reports the checksum before anything it
  covers), and ``validate_file`` must list MAG-CHECKSUM as its first error.

How the buffer is handed to the reader (bytes with ``format="mag"``, auto-detection, bytearray,
memoryview, ``MagReader`` directly, or a temporary file opened by path -> mmap) is chosen from
a CRC of the input, so every run of the same input is identical (crashes reproduce).

Run the fuzzer for 10 minutes (single worker; libFuzzer flags pass straight through)::

    .venv/bin/python fuzz/fuzz_mag.py -max_total_time=600

With no corpus directory on the command line the harness creates ``fuzz/corpus_mag/``
(git-ignored, never committed), copies the conformance vectors ``<repo>/../shared/vectors/mag/
**/*.mag`` into it, writes a token dictionary to a temp file and passes both to libFuzzer.
``--seed-corpus DIR`` seeds from DIR's ``*.mag`` files instead.
``-rss_limit_mb=2048 -timeout=10 -artifact_prefix=fuzz/findings/mag/`` are added unless given.

Memory: atheris 3.0 leaks the result of every instrumented comparison that returns a numpy
array (see fuzz_aero.py).  The MAG reader does few such comparisons, but for runs much longer
than 10 minutes raise -rss_limit_mb or run in slices of -max_total_time over the same corpus.

Other modes (no atheris needed)::

    .venv/bin/python fuzz/fuzz_mag.py --smoke [--smoke-iters 3000] [--smoke-seed 0]
    .venv/bin/python fuzz/fuzz_mag.py --repro FILE [FILE...] [--dump-effective DIR]
    .venv/bin/python fuzz/fuzz_mag.py fuzz/findings/mag/crash-XXXX   # libFuzzer re-run
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from anywhere without an install
sys.path.insert(0, str(HERE))         # _common

import _common as C  # noqa: E402  (never instrumented; imports no codec module itself)

# C extensions (google_crc32c, numpy): imported first, never instrumented; then codec / schemas
# inside atheris.instrument_imports (plain imports in --smoke / --repro without atheris)
atheris = C.load_codec(["codec.schemas.mag", "codec.io.integrity", "codec.formats.mag"],
                       pre=["google_crc32c", "numpy"])
import codec  # noqa: E402  (already imported, instrumented under atheris, by load_codec)
from codec import schemas  # noqa: E402
import codec.schemas.mag  # noqa: E402
from codec.engine.records import record_of  # noqa: E402
from codec.formats.mag import MagReader, validate_file as mag_validate  # noqa: E402
from codec.io.integrity import checksum  # noqa: E402

FormatError = codec.FormatError
IntegrityError = codec.IntegrityError
S = schemas.mag
CHECKSUM_RULE = S.HEADER_CHECKSUM.rule

# ====================================================================== checksum repair
# the layout comes from the schemas through the engine (never a second struct format here)
HDR = record_of(S.FileHeader)
META = record_of(S.MetadataRecord)
TENSOR = record_of(S.TensorRecord)
_MAX_FIX_RECORDS = 4096


def records_end(buf: bytes) -> tuple[dict, int] | None:
    """(header, end of the last tensor record) when the header and every record parse; None
    otherwise (best effort, bounded; a helper of the harness, never a finding)."""
    try:
        if len(buf) < HDR.size or bytes(buf[:4]) != S.MAGIC:
            return None
        h = HDR.parse(buf, 0)
        if h["num_meta_kv"] + h["num_tensors"] > _MAX_FIX_RECORDS:
            return None
        pos = HDR.size
        for rec, n in ((META, h["num_meta_kv"]), (TENSOR, h["num_tensors"])):
            for at, row in rec.iter_parse(buf, pos, n, rec.name):
                pos = at + rec.size_of(row)
        return h, pos
    except Exception:
        return None


def analyse(data: bytes) -> tuple[bytes | None, bytes | None, int | None]:
    """(fixed, flip_base, end): ``fixed`` is the input with its header checksum recomputed
    (None when the records do not delimit or the checksum already holds); ``flip_base`` is the
    buffer whose checksum holds and that open gets far enough to compare (version 1), with
    ``end`` its records end -- the raw input when its checksum holds, else ``fixed``."""
    got = records_end(data)
    if got is None:
        return None, None, None
    h, end = got
    try:
        crc = checksum(S.HEADER_CHECKSUM, data, end)
        fixed = None if crc == h["checksum"] else HDR.build(dict(h, checksum=crc)) + bytes(data[HDR.size:])
    except Exception:  # a helper of the harness, never a finding
        return None, None, None
    if h["version"] != S.VERSION:
        return fixed, None, None
    return fixed, (data if fixed is None else fixed), end


def fixup(data: bytes) -> bytes | None:
    """The input with its header checksum recomputed; None when the records do not delimit
    or when nothing changes."""
    return analyse(data)[0]


def flip(buf: bytes, end: int, sel: int) -> tuple[bytes, int, int]:
    """XOR one byte of [start, end) with a non-zero mask; returns (bytes, position, mask)."""
    start = S.HEADER_CHECKSUM.start
    pos = start + sel % (end - start)
    mask = (sel >> 16) % 255 + 1
    b = bytearray(buf)
    b[pos] ^= mask
    return bytes(b), pos, mask


# ====================================================================== the exercise
ContractViolation = C.ContractViolation


class OtherFormat(Exception):
    """Auto-detection picked another format: not this harness's business."""


def _open(data: bytes, how: str):
    if how == "auto":
        # auto-detection itself is exercised for every input; the reader of another format
        # (its magic) is left to that format's own harness, so the fuzzer stays on MAG
        entry = codec.registry.detect(codec.registry.head_of(data))
        if entry.name != "mag":
            raise OtherFormat(entry.name)
        return codec.open(data)
    if how == "bytearray":
        return codec.open(bytearray(data), format="mag")
    if how == "memoryview":
        return MagReader(memoryview(data))
    if how == "path":
        return codec.open(C.write_tmp("mag", ".mag", data), format="mag")
    return codec.open(data, format="mag")


def exercise_reader(data: bytes, how: str) -> None:
    """Run the whole public reading API over one buffer; FormatError is the only allowed
    exception (each step is independent, so one bad tensor does not hide the others)."""
    try:
        r = _open(data, how)
    except (FormatError, OtherFormat):
        return
    try:
        is_mag = isinstance(r, MagReader)
        for step in (lambda: r.metadata, r.describe, lambda: r.meta_types, lambda: r.records_end,
                     lambda: r.checksum_ok):
            try:
                step()
            except FormatError:
                pass
        if is_mag:
            if r.checksum_ok is not True:
                raise ContractViolation(f"open succeeded with checksum_ok={r.checksum_ok!r}")
            if not isinstance(r.records_end, int) or not S.HEADER_CHECKSUM.start <= r.records_end <= len(data):
                raise ContractViolation(f"open succeeded with records_end={r.records_end!r} (file {len(data)} B)")
        def check(name, info, a):
            if is_mag and (a.nbytes != info.nbytes or a.size != math.prod(info.shape)):
                raise ContractViolation(f"{name!r}: array of {a.size} items / {a.nbytes} B for shape "
                                        f"{info.shape} / nbytes {info.nbytes}")
        C.walk_tensors(r, check=check)  # (index-only: auto-detection of an AEROSET index.aero)
        C.check_levels(r, must_be_ok=is_mag)
    finally:
        r.close()


def exercise_validate(data: bytes, how: str):
    """validate_file never raises for bad data and reports FormatErrors only."""
    src = C.write_tmp("mag", ".mag", data) if how == "path" else data
    rep = mag_validate(src, full=True)
    C.check_report(rep, "validate_file full")
    return rep


def exercise_flip(data: bytes, how: str) -> None:
    """``data`` is a buffer whose checksum held before one byte of its range was flipped."""
    try:
        r = _open(data, how)
    except IntegrityError as e:
        if e.rule != CHECKSUM_RULE:
            raise ContractViolation(f"flipped byte in the checksummed range: IntegrityError of rule "
                                    f"{e.rule}, expected {CHECKSUM_RULE}: {e}") from None
    except FormatError as e:
        raise ContractViolation(f"flipped byte in the checksummed range surfaced as {type(e).__name__} "
                                f"[{e.rule}], expected IntegrityError [{CHECKSUM_RULE}]: {e}") from None
    else:
        r.close()
        raise ContractViolation("flipped byte in the checksummed range: the file opened")
    rep = exercise_validate(data, how)
    if not rep.errors or rep.errors[0].rule != CHECKSUM_RULE:
        first = rep.errors[0] if rep.errors else None
        raise ContractViolation(f"flipped byte: validate_file's first error is {first}, expected {CHECKSUM_RULE}")


def exercise(pname: str, buf: bytes, how: str) -> None:
    if pname.startswith("flip"):
        exercise_flip(buf, how)
        return
    exercise_reader(buf, how)
    exercise_validate(buf, how)


def passes(data: bytes):
    """[(pass name, bytes fed to the reader, how)] for one input."""
    how = C.how_of(data)
    out = [("raw", data, how)]
    fixed, base, end = analyse(data)
    if fixed is not None:
        out.append(("fixed", fixed, how))
    if base is not None and end > S.HEADER_CHECKSUM.start:
        flipped, _, _ = flip(base, end, C.selector(data))
        out.append(("flip-raw" if base is data else "flip-fixed", flipped, how))
    # one count of the header set to a hostile value, the checksum repaired when the records
    # still delimit (else the count itself is what stops the reader)
    return C.with_count_variant(out, data, HDR, ("num_tensors", "num_meta_kv"), fixup)


# ====================================================================== seeds, dict, CLI
def _le(v: int, n: int) -> bytes:
    return v.to_bytes(n, "little")


DICT_TOKENS = [
    S.MAGIC, S.MAGIC + _le(S.VERSION, 4), _le(S.VERSION_NEWER, 4),
    # metadata aux words (type 1 i64 / 2 f64, reserved 0) and tensor aux words (dtype, rank, 0)
    b"\x01\x00\x00\x00", b"\x02\x00\x00\x00", b"\x03\x00\x00\x00",
    b"\x00\x01\x00\x00", b"\x01\x02\x00\x00", b"\x02\x03\x00\x00", b"\x03\x04\x00\x00",
    b"\x00\x40\x00\x00", b"\x00\x41\x00\x00", b"\x00\xff\x00\x00", b"\x00\x00\x00\x00",
    _le(64, 8), _le(128, 8), _le(1, 8), _le(0, 8), _le(2**63 - 1, 8), _le(2**63, 8), _le(2**64 - 1, 8),
    _le(0xFFFF, 4), _le(0x10000, 4), _le(0xFFFFFFFF, 4),
    b"\x00\x00\x00\x00\x00\x00\xf0\x7f", b"\x00\x00\x00\x00\x00\x00\xf8\x7f",  # f64 inf / nan
    b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"weight", b"bias", b"\xc3\xa9",
]

HARNESS = C.Harness(
    name="mag", ext=".mag", passes=passes, exercise=exercise, dict_tokens=DICT_TOKENS,
    synthetic_seed=fixup(HDR.build({"checksum": 0, "num_tensors": 0, "num_meta_kv": 0})) or S.MAGIC,
    interesting=[24, 28, 36, 40, 44, 255, 256, 65535, 65536, 2**63 - 64],
)


def TestOneInput(data: bytes) -> None:
    C.test_one_input(HARNESS)(data)


if __name__ == "__main__":
    sys.exit(C.main(HARNESS, atheris))
