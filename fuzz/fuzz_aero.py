#!/usr/bin/env python3
"""Coverage-guided fuzz harness (atheris / libFuzzer) for the AERO reader.

Contract checked for ANY input bytes: opening, reading metadata / describe / manifest /
quant_descriptors, every tensor, ``validate(full=True)``, ``validate(control=True)`` and
``close`` either succeed or raise a subclass of :class:`codec.FormatError`.  Anything else
(KeyError, IndexError, struct.error, ValueError, OverflowError, MemoryError, TypeError,
RecursionError, codec.NotFoundError (or NotLocalError) for a listed name, a report violation that is not a
FormatError...) is a bug and is reported as a crash; hangs and huge allocations are caught by
libFuzzer's ``-timeout`` and ``-rss_limit_mb``.

Every input is read twice when that makes a difference:

* ``raw``   -- the bytes exactly as libFuzzer produced them;
* ``fixed`` -- the same bytes after best-effort repair of every integrity field the mutator
  cannot forge (TOC BLAKE3 of each chunk, TIDX ``hash_b3`` in uncompressed TIDX, PHSH page
  digests, the IHSH control digest).  Without it almost every mutation of a payload would be
  rejected by the chunk-hash check at open and the TIDX/MMSG/PHSH/IHSH logic behind it would
  never be reached.  The repair is done in place (same length), outside the instrumented code.

How the buffer is handed to the reader (bytes with ``format="aero"``, auto-detection,
bytearray, memoryview, or a temporary file opened by path -> mmap) is chosen from a CRC of the
input, so every run of the same input is identical (crashes reproduce).

Run the fuzzer for 10 minutes (single worker; libFuzzer flags pass straight through)::

    .venv/bin/python fuzz/fuzz_aero.py -max_total_time=600 -rss_limit_mb=2048 -timeout=10

No ``codec.NotFoundError`` is allowed for a listed name; the one ``codec.NotLocalError``
allowed is the documented one: the tensors of an index-only file (an AEROSET ``index.aero``: no WTSH and an MMSG that lists no shards) live in
the set's parts.  ``--strict-index-only`` (or FUZZ_AERO_ALLOW_INDEX_ONLY=0) forbids even that.

Memory: atheris 3.0 leaks the result of every instrumented comparison that returns a numpy
array (``a > k`` in codec: ~200 B each; measured ~1.3 KB of RSS per execution, ~1.1-1.4 GB
after 10 minutes / ~800k runs here).  The leak is atheris', not the library's (the same inputs
without instrumentation stay flat); for runs much longer than 10 minutes raise -rss_limit_mb or
run in slices of -max_total_time over the same corpus directory.

With no corpus directory on the command line the harness creates ``fuzz/corpus_aero/``
(git-ignored, never committed), copies the conformance vectors
``<repo>/../shared/vectors/aero/**/*.aero`` into it, writes a token dictionary to a temp file
and passes both to libFuzzer.  ``--seed-corpus DIR`` seeds from DIR's ``*.aero`` files instead
(and also when explicit corpus directories are given: they are seeded too).
``-rss_limit_mb=2048 -timeout=10 -artifact_prefix=fuzz/findings/aero/`` are added unless given.
atheris' ``str`` comparison hooks are on; ``FUZZ_AERO_HOOKS=RegEx,str`` also enables the regex
hook (it leaks memory with this target and soon trips -rss_limit_mb, hence off by default).

Other modes (no atheris needed)::

    .venv/bin/python fuzz/fuzz_aero.py --smoke [--smoke-iters 3000] [--smoke-seed 0]
        # every seed + N random mutations (bit flips, truncations, int-field overwrites,
        # splices); exit 1 on any contract violation.  Cheap enough for CI.
    .venv/bin/python fuzz/fuzz_aero.py --repro FILE [FILE...] [--dump-effective DIR]
        # run inputs (e.g. crash artifacts) pass by pass, print what each pass raised, and
        # optionally write the bytes each pass actually fed to the reader.
    ... --strict-index-only   (any mode; or FUZZ_AERO_ALLOW_INDEX_ONLY=0)
        # forbid codec.NotLocalError from tensor(name) even for the index-only case above.
    .venv/bin/python fuzz/fuzz_aero.py fuzz/findings/aero/crash-XXXX   # libFuzzer re-run
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from anywhere without an install
sys.path.insert(0, str(HERE))         # _common

import _common as C  # noqa: E402  (never instrumented; imports no codec module itself)

# C extensions and helpers of the harness itself (blake3, msgpack, zstandard): imported first,
# never instrumented; then codec / schemas inside atheris.instrument_imports
atheris = C.load_codec(["codec.schemas.aero", "codec.io.integrity", "codec.engine.payload", "codec.ui.progress", "codec.engine.table",
                        "codec.engine.columns", "codec.engine.rowscan", "codec.formats.aero"],
                       pre=["blake3", "msgpack", "zstandard"])
import blake3  # noqa: E402
import msgpack  # noqa: E402
import zstandard  # noqa: E402
import codec  # noqa: E402  (already imported, instrumented under atheris, by load_codec)
from codec import schemas  # noqa: E402
import codec.schemas.aero  # noqa: E402

FormatError = codec.FormatError
#: see exercise(); cleared by --strict-index-only or FUZZ_AERO_ALLOW_INDEX_ONLY=0
ALLOW_INDEX_ONLY = os.environ.get("FUZZ_AERO_ALLOW_INDEX_ONLY", "1") != "0"

# ====================================================================== integrity repair
# the layout comes from the schemas through the engine (never a second struct format here)
from codec.engine.records import record_of  # noqa: E402

_HDR = record_of(schemas.aero.FileHeader)
_TOCH = record_of(schemas.aero.TocHeader)
_ENT = record_of(schemas.aero.TocEntry)
_HASH = slice(_ENT.by_name["blake3_256"].offset, _ENT.by_name["blake3_256"].offset + 32)
_MAX_FIX_ENTRIES = 4096
_MAX_FIX_ULEN = 1 << 22


def _chunks(buf: bytearray):
    """(index, entry_offset, fourcc, flags, offset, length, ulen, name) of every TOC entry that
    lies inside the buffer (best effort, never raises for well-sized buffers)."""
    if len(buf) < _HDR.size or bytes(buf[:4]) != schemas.aero.MAGIC:
        return None
    h = _HDR.parse(bytes(buf[:_HDR.size]))
    toc_off, st_off, st_len = h["toc_offset"], h["string_table_offset"], h["string_table_length"]
    if toc_off + _TOCH.size > len(buf):
        return None
    n = _TOCH.parse(bytes(buf), toc_off)["entry_count"]
    base = toc_off + _TOCH.size
    n = max(0, min(n, (len(buf) - base) // _ENT.size, _MAX_FIX_ENTRIES))
    tab = _ENT.view(bytes(buf), base, n)
    out = []
    for i in range(n):
        e = tab[i]
        name_off, name_len = int(e["name_off"]), int(e["name_len"])
        name = None
        if st_off + st_len <= len(buf) and name_off + name_len <= st_len:
            try:
                name = bytes(buf[st_off + name_off:st_off + name_off + name_len]).decode("utf-8")
            except UnicodeError:
                pass
        out.append((i, base + i * _ENT.size, bytes(e["fourcc"]), int(e["chunk_flags"]), int(e["chunk_offset"]),
                    int(e["chunk_length"]), int(e["chunk_ulen"]), name))
    return out


def _inside(buf, off, ln) -> bool:
    return 0 <= off <= len(buf) and 0 <= ln <= len(buf) - off


def _replace_once(buf: bytearray, lo: int, hi: int, old: bytes, new: bytes, start: int) -> int:
    """Replace the first ``old`` in buf[start:hi] (start >= lo) by ``new`` (same length)."""
    p = bytes(buf[lo:hi]).find(old, max(0, start - lo))
    if p < 0:
        return start
    buf[lo + p:lo + p + len(new)] = new
    return lo + p + len(new)


def _unpack_prefix(raw: bytes):
    up = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(raw), 1))
    up.feed(raw)
    return up.unpack()


def fixup(data: bytes) -> bytes | None:
    """Best-effort in-place repair of the integrity fields; None when nothing parses."""
    try:
        return _fixup(bytearray(data))
    except Exception:  # the repair is a helper of the harness, never a finding
        return None


def _fixup(buf: bytearray) -> bytes | None:
    ents = _chunks(buf)
    if not ents:
        return None
    wtsh = {e[7]: e for e in ents if e[2] == b"WTSH" and e[7] is not None and _inside(buf, e[4], e[5])}

    # 1. TIDX hash_b3 (uncompressed TIDX only: str8 of 64 hex chars, same length)
    for (_, _, fc, flags, off, ln, _, _) in ents:
        if fc != b"TIDX" or flags & 1 or not _inside(buf, off, ln):
            continue
        try:
            obj = msgpack.unpackb(bytes(buf[off:off + ln]), raw=False, strict_map_key=False)
        except Exception:
            continue
        ts = obj.get("tensors") if isinstance(obj, dict) else None
        pos = off
        for t in ts if isinstance(ts, list) else []:
            if not isinstance(t, dict):
                continue
            h, sid, doff, dlen = t.get("hash_b3"), t.get("shard_id"), t.get("data_off"), t.get("data_len")
            if not (isinstance(h, str) and len(h) == 64 and all(isinstance(x, int) for x in (sid, doff, dlen))):
                continue
            sh = wtsh.get(f"weights.shard{sid}")
            if sh is None or doff < 0 or dlen < 0 or doff + dlen > sh[5]:
                continue
            new = blake3.blake3(bytes(buf[sh[4] + doff:sh[4] + doff + dlen])).hexdigest()
            if h.lower() != new:
                pos = _replace_once(buf, off, off + ln, h.encode("ascii", "replace"), new.encode(), pos)
        break

    # 2. PHSH page digests (bin8 of 32 bytes each)
    for (_, _, fc, flags, off, ln, _, _) in ents:
        if fc != b"PHSH" or flags & 1 or not _inside(buf, off, ln):
            continue
        try:
            obj = msgpack.unpackb(bytes(buf[off:off + ln]), raw=False, strict_map_key=False)
        except Exception:
            continue
        if not isinstance(obj, dict):
            continue
        sh = wtsh.get(obj.get("shard_name")) if isinstance(obj.get("shard_name"), str) else None
        ps, digs = obj.get("page_size"), obj.get("digests")
        if sh is None or not isinstance(ps, int) or ps < 1 or not isinstance(digs, list):
            continue
        n_pages = -(-sh[5] // ps)
        if n_pages != len(digs) or n_pages > 100_000:
            continue
        pos = off
        for k, old in enumerate(digs):
            s = sh[4] + k * ps
            new = blake3.blake3(bytes(buf[s:min(s + ps, sh[4] + sh[5])])).digest()
            if isinstance(old, bytes) and len(old) == 32 and old != new:
                pos = _replace_once(buf, off, off + ln, b"\xc4\x20" + old, b"\xc4\x20" + new, pos)

    # 3. IHSH control digest (header + TOC + string table with the TOC hashes zeroed)
    for (_, _, fc, flags, off, ln, _, _) in ents:
        if fc != b"IHSH" or flags & 1 or not _inside(buf, off, ln):
            continue
        try:
            obj = _unpack_prefix(bytes(buf[off:off + ln]))
        except Exception:
            break
        old = obj.get("digest") if isinstance(obj, dict) else None
        if not (isinstance(old, bytes) and len(old) == 32):
            break
        h = _HDR.parse(bytes(buf[:_HDR.size]))
        a = schemas.aero.CHUNK_ALIGN
        end = -(-max(h["toc_offset"] + h["toc_length"], h["string_table_offset"] + h["string_table_length"]) // a) * a
        region = bytearray(buf[:min(end, len(buf))])
        for e in ents:  # exactly as the reader builds it (may extend the region, like the reader)
            region[e[1] + _HASH.start:e[1] + _HASH.stop] = bytes(32)
        new = blake3.blake3(bytes(region)).digest()
        if new != old:
            _replace_once(buf, off, off + ln, b"\xc4\x20" + old, b"\xc4\x20" + new, off)
        break

    # 4. TOC BLAKE3 of every chunk payload (decompressed when zstd and small enough)
    for (_, eo, fc, flags, off, ln, ulen, _) in ents:
        if not _inside(buf, off, ln):
            continue
        raw = bytes(buf[off:off + ln])
        if flags & 1:
            if ulen > _MAX_FIX_ULEN:
                continue
            try:
                raw = zstandard.ZstdDecompressor().decompress(raw, max_output_size=max(ulen, 1))
            except Exception:
                continue
        buf[eo + _HASH.start:eo + _HASH.stop] = blake3.blake3(raw).digest()
    return bytes(buf)


# ====================================================================== the exercise
ContractViolation = C.ContractViolation


def _open(data: bytes, how: str):
    if how == "auto":
        return codec.open(data)
    if how == "bytearray":
        return codec.open(bytearray(data), format="aero")
    if how == "memoryview":
        return codec.open(memoryview(data), format="aero")
    if how == "path":
        return codec.open(C.write_tmp("aero", ".aero", data), format="aero")
    return codec.open(data, format="aero")


def exercise(pname: str, data: bytes, how: str) -> None:
    """Run the whole public reading API over one buffer; FormatError is the only allowed
    exception (each step is independent, so one bad chunk does not hide the others)."""
    try:
        r = _open(data, how)
    except FormatError:
        return
    try:
        for step in (lambda: r.metadata, r.describe, lambda: r.manifest, lambda: r.quant_descriptors):
            try:
                step()
            except FormatError:
                pass
        # NotLocalError for the tensors of an index-only file (AEROSET index.aero) is tolerated
        # unless --strict-index-only
        C.walk_tensors(r, index_only_ok=ALLOW_INDEX_ONLY)
        C.check_levels(r, ((dict(full=True, progress=False), "full"), (dict(control=True, progress=False), "control"),
                           (dict(progress=False), "structure")))
    finally:
        r.close()


_DOC_CHUNKS = {b"MMSG": "msgpack", b"TIDX": "msgpack", b"MJSN": "json"}
_ZSTD = zstandard.ZstdCompressor(level=3, write_content_size=True)


def budget_variant(data: bytes) -> bytes | None:
    """The input rebuilt with one of its metadata chunks (MMSG, TIDX, MJSN) replaced by a
    budget-targeted document (see ``_common.hostile_document``), stored plain or zstd-compressed,
    every length and hash made consistent -- so only the decode budgets stand between the
    document and the reader.  None when the input's chunks cannot be taken apart."""
    try:
        buf = bytearray(data)
        ents = _chunks(buf)
        if not ents or any(e[7] is None or not _inside(buf, e[4], e[5]) for e in ents):
            return None
        docs = [e for e in ents if e[2] in _DOC_CHUNKS]
        if not docs:
            return None
        sel = C.selector(data)
        target = docs[sel % len(docs)]
        kind = _DOC_CHUNKS[target[2]]
        if (sel >> 12) & 1:
            _, (stored, ulen, b3) = C.hostile_document(sel >> 4, kind, _ZSTD.compress,
                                                       lambda b: blake3.blake3(b).digest())
            flags_on, flags_off = 1, 0
        else:
            _, stored = C.hostile_document(sel >> 4, kind)
            ulen, b3, flags_on, flags_off = len(stored), None, 0, 1
        chunks = []
        for (_, _, fc, flags, off, ln, old_ulen, name) in ents:
            if fc == target[2] and off == target[4]:
                ch = (fc, name, (flags | flags_on) & ~flags_off, stored, ulen)
                chunks.append(ch if b3 is None else ch + (b3,))
            else:
                chunks.append((fc, name, flags, bytes(buf[off:off + ln]), old_ulen))
        uuid = _HDR.parse(bytes(buf[:_HDR.size]))["uuid"]
        return sys.modules["codec.formats.aero"].build_container(chunks, uuid=uuid)
    except Exception:  # a helper of the harness, never a finding
        return None


#: one input in BUDGET_EVERY also gets the budget pass (it inflates documents of up to 60 MiB,
#: ~50x the cost of the other passes; at every input it held the harness to ~80 exec/s)
BUDGET_EVERY = 16


#: the reader's threshold for the vectorised TIDX decoder (codec.engine.rowscan) and the number of
#: entries it decodes map by map before it scans, as shipped
SCAN_MIN, BURST = codec.engine.table.SCAN_MIN, codec.engine.table._BURST


def passes(data: bytes):
    """[(pass name, bytes fed to the reader, how)] for one input: as produced, repaired, and
    (one input in :data:`BUDGET_EVERY`) with a metadata chunk replaced by a budget-targeted
    document.  Half the inputs (by a selector bit) are read with every tensor index decoded by
    the vectorised decoder, whatever its length (it takes over from SCAN_MIN entries otherwise,
    which few fuzz inputs reach: the scan starts after the first entry); the others as shipped."""
    scan = (C.selector(data) >> 8) & 1
    codec.engine.table.SCAN_MIN, codec.engine.table._BURST = (1, 1) if scan else (SCAN_MIN, BURST)
    out = C.raw_and_fixed(data, fixup)
    if (C.selector(data) >> 20) % BUDGET_EVERY:
        return out
    hostile = budget_variant(out[-1][1])
    if hostile is not None:
        out.append(("budget", hostile, out[-1][2]))
    return out


# ====================================================================== dict, CLI
DICT_TOKENS = [
    b"AERO", b"IHSH", b"MJSN", b"MMSG", b"PHSH", b"TIDX", b"WTSH",
    b"weights.shard0", b"weights.shard1", b"weights.shard0.phsh", b"tensors", b"manifest", b"meta.json",
    b"control.integrity", b"\xa4name", b"\xa5dtype", b"\xa5shape", b"\xa8shard_id", b"\xa8data_off",
    b"\xa8data_len", b"\xa5flags", b"\xa7hash_b3", b"\xa8quant_id", b"\xacquant_params", b"\xa6format",
    b"\xa5model", b"\xa6chunks", b"\xa6shards", b"\xb1quant_descriptors", b"\xa4algo", b"\xaablake3-256",
    b"\xaecovered_ranges", b"\xa6digest", b"\xaashard_name", b"\xa9page_size", b"\xa7digests",
    b"\x28\xb5\x2f\xfd", b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff", b"\xd3\x80\x00\x00\x00\x00\x00\x00\x00",
    b"\x00\x80", b"\xff\xff\xff\xff\xff\xff\xff\xff", b"\x00\x00\x00\x00\x00\x00\x00\x80",
    b"\x60\x00\x00\x00\x00\x00\x00\x00", b"\x40\x42\x0f\x00", b"\x41\x42\x0f\x00",
]


HARNESS = C.Harness(
    name="aero", ext=".aero", passes=passes, exercise=exercise, dict_tokens=DICT_TOKENS,
    synthetic_seed=b"AERO" + bytes(92),
    interesting=[16, 96, 112, 1_000_001],
)


def TestOneInput(data: bytes) -> None:
    C.test_one_input(HARNESS)(data)


def _index_only_flags(argv: list[str]) -> None:
    """Remove ``--allow-index-only`` (the default; kept for old command lines) and
    ``--strict-index-only`` from argv (any mode); the latter clears ALLOW_INDEX_ONLY."""
    global ALLOW_INDEX_ONLY
    while "--allow-index-only" in argv:
        argv.remove("--allow-index-only")
    while "--strict-index-only" in argv:
        argv.remove("--strict-index-only")
        ALLOW_INDEX_ONLY = False


if __name__ == "__main__":
    _index_only_flags(sys.argv)
    sys.exit(C.main(HARNESS, atheris))
