#!/usr/bin/env python3
"""Coverage-guided fuzz harness (atheris / libFuzzer) for the AERO reader.

Contract checked for ANY input bytes: opening, reading metadata / describe / manifest /
quant_descriptors, every tensor, ``validate(full=True)``, ``validate(control=True)`` and
``close`` either succeed or raise a subclass of :class:`codec.FormatError`.  Anything else
(KeyError, IndexError, struct.error, ValueError, OverflowError, MemoryError, TypeError,
RecursionError, codec.NotFoundError for a listed name, a report violation that is not a
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

The one ``codec.NotFoundError`` allowed for a listed name is the documented one: the tensors of
an index-only file (an AEROSET ``index.aero``: no WTSH and an MMSG that lists no shards) live in
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
        # forbid codec.NotFoundError from tensor(name) even for the index-only case above.
    .venv/bin/python fuzz/fuzz_aero.py fuzz/findings/aero/crash-XXXX   # libFuzzer re-run
"""
from __future__ import annotations

import atexit
import hashlib
import os
import random
import signal
import sys
import tempfile
import traceback
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # run from anywhere without an install

VECTORS = Path(__file__).resolve().parents[1].parent / "shared" / "vectors" / "aero"
CORPUS = HERE / "corpus_aero"
FINDINGS = HERE / "findings" / "aero"

# C extensions and helpers of the harness itself: not instrumented
import blake3  # noqa: E402
import msgpack  # noqa: E402
import zstandard  # noqa: E402

_WANT_ATHERIS = not any(a in ("--smoke", "--repro") for a in sys.argv[1:])

try:
    import atheris
except ImportError:  # --smoke / --repro work without it
    atheris = None
    if _WANT_ATHERIS:
        sys.exit("atheris is not installed: pip install 'modelcodec[fuzz]' (or use --smoke)")

if atheris is not None:
    with atheris.instrument_imports(include=["codec", "schemas"]):
        import codec
        import schemas
        import schemas.aero
        import schemas.dsl
        import codec.engine
        import codec.errors
        import codec.integrity
        import codec.io
        import codec.model
        import codec.payload
        import codec.progress
        import codec.registry
        import codec.formats.aero
        codec.registry.formats()  # resolves the lazy imports inside the block
else:
    import codec
    import schemas
    import schemas.aero
    import codec.registry
    import codec.formats.aero
    codec.registry.formats()

FormatError = codec.FormatError
#: see exercise(); cleared by --strict-index-only or FUZZ_AERO_ALLOW_INDEX_ONLY=0
ALLOW_INDEX_ONLY = os.environ.get("FUZZ_AERO_ALLOW_INDEX_ONLY", "1") != "0"

# ====================================================================== integrity repair
# the layout comes from the schemas through the engine (never a second struct format here)
from codec.engine import record_of  # noqa: E402

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
_TMPDIR: str | None = None


def _tmp_dir() -> str:
    """One reused scratch directory (libFuzzer exits without running atexit, so per-run temp
    dirs would pile up): files carry the pid; those of dead processes are removed here."""
    global _TMPDIR
    if _TMPDIR is None:
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
        _TMPDIR = os.path.join(base, f"fuzz_aero-{os.getuid()}")
        os.makedirs(_TMPDIR, exist_ok=True)
        for f in os.listdir(_TMPDIR):
            pid = f.split(".")[0].rpartition("-")[2]
            if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
                try:
                    os.unlink(os.path.join(_TMPDIR, f))
                except OSError:
                    pass
    return _TMPDIR


def _tmp_path() -> str:
    p = os.path.join(_tmp_dir(), f"input-{os.getpid()}.aero")
    if not atexit_registered[0]:
        atexit.register(lambda: os.path.exists(p) and os.unlink(p))
        atexit_registered[0] = True
    return p


atexit_registered = [False]


def _how(data: bytes) -> str:
    """How the buffer is handed over (deterministic per input)."""
    k = zlib.crc32(data) & 15
    if k == 0:
        return "path"
    if k in (1, 2, 3):
        return "auto"
    if k == 4:
        return "bytearray"
    if k == 5:
        return "memoryview"
    return "bytes"


class ContractViolation(AssertionError):
    """A result that is not an exception but still breaks the contract."""


def _open(data: bytes, how: str):
    if how == "auto":
        return codec.open(data)
    if how == "bytearray":
        return codec.open(bytearray(data), format="aero")
    if how == "memoryview":
        return codec.open(memoryview(data), format="aero")
    if how == "path":
        p = _tmp_path()
        with open(p, "wb") as f:
            f.write(data)
        return codec.open(p, format="aero")
    return codec.open(data, format="aero")


def _check_report(rep, level: str) -> None:
    if not isinstance(rep.ok, bool):
        raise ContractViolation(f"validate({level}).ok is {type(rep.ok).__name__}, not bool")
    for v in rep.violations:
        if not isinstance(v, FormatError):
            raise ContractViolation(f"validate({level}) violation is a {type(v).__name__}, not a FormatError: {v!r}")
        str(v)
        v.as_dict()
    rep.as_dict()


def exercise(data: bytes, how: str) -> None:
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
        names = list(r.tensors)
        if len(r) != len(names):
            raise ContractViolation(f"len(reader) {len(r)} != {len(names)} listed tensors")
        for name in names:
            if name not in r:
                raise ContractViolation(f"listed tensor {name!r} is not `in` the reader")
            try:
                info = r.tensors[name]
                info.dtype_name, info.shape, info.nbytes, info.offset  # noqa: B018
            except FormatError:
                continue
            try:
                a = r.tensor(name)
            except FormatError:  # hash_b3 mismatch and the like
                continue
            except codec.NotFoundError:
                # The contract forbids NotFoundError for a listed name.  The reader raises it on
                # purpose for the tensors of an index-only file (AEROSET index.aero): that case,
                # and nothing else, is tolerated unless --strict-index-only.
                if ALLOW_INDEX_ONLY and getattr(r, "index_only", False) is True and info.offset is None:
                    continue
                raise
            b = a.tobytes()  # bounded by the input size: tensors are views into it
            if len(b) != a.nbytes:
                raise ContractViolation(f"{name!r}: tobytes() gave {len(b)} bytes for nbytes {a.nbytes}")
        for kw, level in (({"full": True}, "full"), ({"control": True}, "control"), ({}, "structure")):
            try:
                rep = r.validate(progress=False, **kw)
            except FormatError:
                continue
            _check_report(rep, level)
    finally:
        r.close()


def passes(data: bytes):
    """[(pass name, bytes fed to the reader, how)] for one input."""
    how = _how(data)
    out = [("raw", data, how)]
    fixed = fixup(data)
    if fixed is not None and fixed != data:
        out.append(("fixed", fixed, how))
    return out


def TestOneInput(data: bytes) -> None:
    for name, buf, how in passes(data):
        try:
            exercise(buf, how)
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            e.add_note(f"[fuzz_aero] pass={name} how={how} len={len(buf)} "
                       f"sha1={hashlib.sha1(buf).hexdigest()} (see --repro --dump-effective)")
            raise


# ====================================================================== seeds, dict, CLI
def seed_files(src: Path = VECTORS) -> list[Path]:
    return sorted(p for p in src.rglob("*.aero") if p.is_file())


def seed_corpus(dst: Path, src: Path = VECTORS) -> int:
    files = seed_files(src)
    if not files:
        print(f"fuzz_aero: WARNING no *.aero seeds under {src}", file=sys.stderr)
    dst.mkdir(parents=True, exist_ok=True)
    n = 0
    for p in files:
        data = p.read_bytes()
        target = dst / f"seed-{p.stem}-{hashlib.sha1(data).hexdigest()[:12]}"
        if not target.exists():
            target.write_bytes(data)
            n += 1
    return n


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


def write_dict(path: str) -> None:
    with open(path, "w") as f:
        for i, t in enumerate(DICT_TOKENS):
            f.write(f'kw{i}="' + "".join(f"\\x{b:02x}" for b in t) + '"\n')


def _take(argv: list[str], flag: str, default=None):
    """Remove ``flag VALUE`` / ``flag=VALUE`` from argv; returns the value."""
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            v = argv[i + 1]
            del argv[i:i + 2]
            return v
        if a.startswith(flag + "="):
            del argv[i]
            return a.split("=", 1)[1]
    return default


def _has_flag(argv, name) -> bool:
    return any(a == f"-{name}" or a.startswith(f"-{name}=") for a in argv)


# ------------------------------------------------------------------ smoke (no atheris)
INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
               1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 16, 96, 112, 1_000_000, 1_000_001]


def mutate(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
        op = rng.randrange(9)
        if op == 0 and b:  # bit flip
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:  # random byte
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2 and b:  # truncate
            del b[rng.randrange(len(b)):]
        elif op == 3:  # extend
            b += bytes(rng.randrange(1, 64)) if rng.random() < 0.5 else rng.randbytes(rng.randrange(1, 64))
        elif op == 4 and len(b) >= 8:  # interesting little-endian integer on an aligned field
            w = rng.choice((2, 4, 8))
            i = rng.randrange(0, len(b) - w + 1) // w * w
            v = rng.choice(INTERESTING) & ((1 << (8 * w)) - 1)
            b[i:i + w] = v.to_bytes(w, "little")
        elif op == 5 and b:  # delete a range
            i = rng.randrange(len(b))
            del b[i:i + rng.randrange(1, 32)]
        elif op == 6 and b:  # insert bytes
            i = rng.randrange(len(b) + 1)
            b[i:i] = rng.randbytes(rng.randrange(1, 16))
        elif op == 7 and seeds:  # splice with another seed
            o = rng.choice(seeds)
            i = rng.randrange(len(b) + 1)
            j = rng.randrange(len(o) + 1)
            b = b[:i] + bytearray(o[j:])
        elif op == 8 and len(b) > 4:  # copy a block within the input
            i, j = rng.randrange(len(b)), rng.randrange(len(b))
            n = rng.randrange(1, 33)
            b[j:j + n] = b[i:i + n]
    return bytes(b)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout("input took more than the per-input time limit")


def _run_checked(data: bytes, label: str, failures: list, limit_s: int) -> None:
    for pname, buf, how in passes(data):
        signal.alarm(limit_s)
        try:
            exercise(buf, how)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - any escape is a contract violation
            tb = traceback.format_exception(e)
            failures.append((label, pname, how, buf, type(e).__name__, "".join(tb)))
        finally:
            signal.alarm(0)


def smoke(argv: list[str]) -> int:
    iters = int(_take(argv, "--smoke-iters", "3000"))
    seed = int(_take(argv, "--smoke-seed", "0"))
    src = Path(_take(argv, "--seed-corpus", str(VECTORS)))
    files = seed_files(src)
    seeds = [p.read_bytes() for p in files]
    if not seeds:
        print(f"fuzz_aero --smoke: no *.aero seeds under {src}; using a synthetic one", file=sys.stderr)
        seeds = [b"AERO" + bytes(92)]
    signal.signal(signal.SIGALRM, _alarm)
    failures: list = []
    for p, d in zip(files, seeds):
        _run_checked(d, f"seed {p}", failures, 10)
    rng = random.Random(seed)
    for k in range(iters):
        d = mutate(rng, rng.choice(seeds), seeds)
        _run_checked(d, f"mutation #{k} (seed {seed})", failures, 10)
    kinds: dict = {}
    for f in failures:
        kinds.setdefault((f[4], f[5].strip().splitlines()[-1][:200]), []).append(f)
    for (etype, last), group in kinds.items():
        label, pname, how, buf, _, tb = group[0]
        print(f"=== CONTRACT VIOLATION x{len(group)}: {etype} (first: {label}, pass={pname}, how={how}, "
              f"{len(buf)} bytes, sha1 {hashlib.sha1(buf).hexdigest()})", file=sys.stderr)
        print(tb, file=sys.stderr)
        if len(buf) <= 4096:
            print(f"input hex: {buf.hex()}", file=sys.stderr)
    print(f"fuzz_aero --smoke: {len(seeds)} seeds + {iters} mutations, "
          f"{len(failures)} contract violations ({len(kinds)} distinct)", file=sys.stderr)
    return 1 if failures else 0


def repro(argv: list[str]) -> int:
    dump = _take(argv, "--dump-effective")
    files = [a for a in argv if not a.startswith("-")]
    bad = 0
    for f in files:
        data = Path(f).read_bytes()
        for pname, buf, how in passes(data):
            sha = hashlib.sha1(buf).hexdigest()
            if dump:
                Path(dump).mkdir(parents=True, exist_ok=True)
                (Path(dump) / f"{Path(f).name}.{pname}").write_bytes(buf)
            try:
                exercise(buf, how)
                print(f"{f} pass={pname} how={how} len={len(buf)} sha1={sha}: OK")
            except BaseException as e:  # noqa: BLE001
                bad += 1
                print(f"{f} pass={pname} how={how} len={len(buf)} sha1={sha}: {type(e).__name__}: {e}")
                traceback.print_exception(e)
    return 1 if bad else 0


def main() -> int:
    global ALLOW_INDEX_ONLY
    argv = sys.argv[1:]
    if "--allow-index-only" in argv:  # the default; kept for old command lines
        argv.remove("--allow-index-only")
    if "--strict-index-only" in argv:
        argv.remove("--strict-index-only")
        ALLOW_INDEX_ONLY = False
    if "--smoke" in argv:
        argv.remove("--smoke")
        return smoke(argv)
    if "--repro" in argv:
        argv.remove("--repro")
        return repro(argv)

    no_seed = "--no-seed" in argv
    if no_seed:
        argv.remove("--no-seed")
    seed_src = _take(argv, "--seed-corpus")
    positional = [a for a in argv if not a.startswith("-")]
    if not positional:  # default: our corpus directory, seeded from the vectors
        if not no_seed:
            n = seed_corpus(CORPUS, Path(seed_src) if seed_src else VECTORS)
            print(f"fuzz_aero: corpus {CORPUS} (+{n} seeds)", file=sys.stderr)
        else:
            CORPUS.mkdir(parents=True, exist_ok=True)
        argv.append(str(CORPUS))
    elif seed_src and not no_seed:  # explicit corpus dirs: seed them too when asked
        for d in positional:
            if os.path.isdir(d) or not os.path.exists(d):
                seed_corpus(Path(d), Path(seed_src))
    if not _has_flag(argv, "rss_limit_mb"):
        argv.insert(0, "-rss_limit_mb=2048")
    if not _has_flag(argv, "timeout"):
        argv.insert(0, "-timeout=10")
    if not _has_flag(argv, "artifact_prefix"):
        FINDINGS.mkdir(parents=True, exist_ok=True)
        argv.insert(0, f"-artifact_prefix={FINDINGS}/")
    if not _has_flag(argv, "dict"):
        dpath = os.path.join(_tmp_dir(), f"aero-{os.getpid()}.dict")
        write_dict(dpath)
        argv.insert(0, f"-dict={dpath}")
    # atheris' "RegEx" hook leaks memory here (~900 MB in 15 s, trips -rss_limit_mb): off by default
    for hook in filter(None, os.environ.get("FUZZ_AERO_HOOKS", "str").split(",")):
        atheris.enabled_hooks.add(hook)
    atheris.Setup([sys.argv[0]] + argv, TestOneInput)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
