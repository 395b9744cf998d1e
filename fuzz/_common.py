"""Shared driver of the fuzz harnesses (fuzz_aero.py, fuzz_mag.py, fuzz_stb.py, fuzz_oinf.py).

Everything format-specific (how an input is read, which passes it gets, the seeds, the
dictionary) lives in the harness and is handed over as a :class:`Harness`.

Import order matters: this module never imports ``codec`` at import time (it is
never instrumented itself).  A harness imports it first and then calls :func:`load_codec`,
which imports -- under atheris inside ``atheris.instrument_imports(include=["codec"])`` -- the codec modules it names, before anything can import them uninstrumented.

Modes every harness gets from :func:`main`::

    fuzz_<fmt>.py [libFuzzer flags] [CORPUS_DIR...]      # atheris / libFuzzer
    fuzz_<fmt>.py --smoke [--smoke-iters 3000] [--smoke-seed 0] [--seed-corpus DIR]
    fuzz_<fmt>.py --repro FILE [FILE...] [--dump-effective DIR]

With no corpus directory the harness creates ``fuzz/corpus_<fmt>/`` (git-ignored), copies the
conformance vectors ``<repo>/../shared/vectors/<fmt>/**/*.<fmt>`` into it, writes a token
dictionary to a temp file and passes both to libFuzzer; ``-rss_limit_mb=2048 -timeout=10
-artifact_prefix=fuzz/findings/<fmt>/`` are added unless given.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib
import os
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VECTORS_ROOT = REPO.parent / "shared" / "vectors"


#: imported (and, under atheris, instrumented) by every harness, besides its own modules
BASE_MODULES = ["codec", "codec.schemas", "codec.schemas.dsl", "codec.engine.records", "codec.errors", "codec.io", "codec.model",
                "codec.registry"]

#: set by load_codec()
FormatError = None  # codec.FormatError, once load_codec() ran


def load_codec(modules: list[str], pre: list[str] = ()):
    """Import atheris (optional in --smoke / --repro), then ``pre`` (C extensions and helpers
    of the harness: never instrumented), then :data:`BASE_MODULES` + ``modules`` -- under
    atheris inside ``instrument_imports(include=["codec"])`` -- and resolve the
    registry's lazy imports inside the same block.  Returns the atheris module or None."""
    global FormatError
    want_atheris = not any(a in ("--smoke", "--repro") for a in sys.argv[1:])
    try:
        import atheris
    except ImportError:  # --smoke / --repro work without it
        atheris = None
        if want_atheris:
            sys.exit("atheris is not installed: pip install 'modelcodec[fuzz]' (or use --smoke)")
    for m in pre:
        importlib.import_module(m)
    names = list(dict.fromkeys(BASE_MODULES + list(modules)))
    if atheris is not None:
        with atheris.instrument_imports(include=["codec"]):
            for m in names:
                importlib.import_module(m)
            sys.modules["codec.registry"].formats()  # resolves the lazy imports inside the block
    else:
        for m in names:
            importlib.import_module(m)
        sys.modules["codec.registry"].formats()
    FormatError = sys.modules["codec"].FormatError
    return atheris


class ContractViolation(AssertionError):
    """A result that is not an exception but still breaks the contract."""


@dataclass
class Harness:
    name: str                                     # "mag"
    ext: str                                      # ".mag"
    #: [(pass name, bytes fed to the reader, how)] for one input
    passes: Callable[[bytes], list]
    #: exercise(pass name, buf, how): raises anything but FormatError on a contract violation
    exercise: Callable[[str, bytes, str], None]
    dict_tokens: list = field(default_factory=list)
    synthetic_seed: bytes = b""
    interesting: list = field(default_factory=list)

    @property
    def vectors(self) -> Path:
        return VECTORS_ROOT / self.name

    @property
    def corpus(self) -> Path:
        return HERE / f"corpus_{self.name}"

    @property
    def findings(self) -> Path:
        return HERE / "findings" / self.name

    @property
    def tag(self) -> str:
        return f"fuzz_{self.name}"


# ====================================================================== scratch files
_TMPDIR: dict[str, str] = {}
_ATEXIT: set[str] = set()


def tmp_dir(name: str) -> str:
    """One reused scratch directory per harness (libFuzzer exits without running atexit, so
    per-run temp dirs would pile up): files carry the pid; those of dead processes go here."""
    d = _TMPDIR.get(name)
    if d is None:
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
        d = _TMPDIR[name] = os.path.join(base, f"fuzz_{name}-{os.getuid()}")
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            pid = f.split(".")[0].rpartition("-")[2]
            if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
                try:
                    os.unlink(os.path.join(d, f))
                except OSError:
                    pass
    return d


def tmp_path(name: str, ext: str, tag: str = "input") -> str:
    p = os.path.join(tmp_dir(name), f"{tag}-{os.getpid()}{ext}")
    if p not in _ATEXIT:
        atexit.register(lambda: os.path.exists(p) and os.unlink(p))
        _ATEXIT.add(p)
    return p


def write_tmp(name: str, ext: str, data: bytes, tag: str = "input") -> str:
    p = tmp_path(name, ext, tag)
    with open(p, "wb") as f:
        f.write(data)
    return p


def how_of(data: bytes) -> str:
    """How the buffer is handed to the reader (deterministic per input, so crashes reproduce)."""
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


def selector(data: bytes) -> int:
    """A second deterministic choice word, independent of :func:`how_of`'s low bits."""
    return zlib.crc32(data, 0x5EED) >> 4


def check_report(rep, level: str) -> None:
    if not isinstance(rep.ok, bool):
        raise ContractViolation(f"validate({level}).ok is {type(rep.ok).__name__}, not bool")
    for v in rep.violations:
        if not isinstance(v, FormatError):
            raise ContractViolation(f"validate({level}) violation is a {type(v).__name__}, not a FormatError: {v!r}")
        str(v)
    rep.as_dict()  # (every violation's as_dict(), with its consequences)


def check_levels(r, levels=(({"full": True}, "full"), ({}, "structure")), *, must_be_ok: bool = False) -> None:
    """Validate an open reader at each level: every report well-formed; with ``must_be_ok``
    (the reader opened this buffer itself) no level may report an error."""
    for kw, level in levels:
        try:
            rep = r.validate(**kw)
        except FormatError:
            continue
        check_report(rep, level)
        if must_be_ok and not rep.ok:
            raise ContractViolation(f"open succeeded but validate({level}) reports {rep.errors[0]}")


def walk_tensors(r, *, skip=None, tolerate=None, key=None, check=None, index_only_ok: bool = True) -> bool:
    """The reader contract over every listed tensor: ``len`` and ``in`` agree with the listing;
    each TensorInfo's fields read; each tensor reads (or raises one of ``skip`` — FormatError by
    default — or an exception ``tolerate(e)`` accepts) and its bytes come out whole.
    ``key(name)`` is what ``tensor()`` is called with; ``check(name, info, array)`` adds the
    harness's own checks and returns False when the array has no bytes to take (placeholders).
    NotFoundError for a listed name breaks the contract; so does NotLocalError, except for the
    tensors of an index-only AERO file (an AEROSET's index.aero), whose bytes the reader refuses
    on purpose, when ``index_only_ok``.  Returns False when some tensor was skipped."""
    not_local = sys.modules["codec"].NotLocalError
    skip = skip or (FormatError,)
    names = list(r.tensors)
    if len(r) != len(names):
        raise ContractViolation(f"len(reader) {len(r)} != {len(names)} listed tensors")
    all_ok = True
    for name in names:
        if name not in r:
            raise ContractViolation(f"listed tensor {name!r} is not `in` the reader")
        try:
            info = r.tensors[name]
            info.dtype_name, info.shape, info.nbytes, info.offset  # noqa: B018
        except skip:
            all_ok = False
            continue
        try:
            a = r.tensor(key(name) if key else name)
        except skip:
            all_ok = False
            continue
        except not_local as e:
            index_only = index_only_ok and getattr(r, "index_only", False) is True and info.offset is None
            if not index_only and (tolerate is None or not tolerate(e)):
                raise
            all_ok = False
            continue
        except Exception as e:
            if tolerate is None or not tolerate(e):
                raise
            all_ok = False
            continue
        if check is not None and check(name, info, a) is False:
            continue
        b = a.tobytes(order="A")  # bounded by the input size: tensors are views into it
        if len(b) != a.nbytes:
            raise ContractViolation(f"{name!r}: tobytes() gave {len(b)} bytes for nbytes {a.nbytes}")
    return all_ok


def fix_file_size(data: bytes, header) -> bytes | None:
    """The input with its header record's ``file_size`` set to the real length; None when
    nothing changes or the header does not parse (a helper of the harness, never a finding)."""
    try:
        if len(data) < header.size:
            return None
        h = header.parse(data, 0)
        if h["file_size"] == len(data):
            return None
        return header.build(dict(h, file_size=len(data))) + bytes(data[header.size:])
    except Exception:
        return None


def raw_and_fixed(data: bytes, fixup) -> list:
    """The usual passes: the input as produced, and (when it differs) with its integrity
    fields repaired by ``fixup`` (None when nothing parses)."""
    how = how_of(data)
    out = [("raw", data, how)]
    fixed = fixup(data)
    if fixed is not None and fixed != data:
        out.append(("fixed", fixed, how))
    return out


# ====================================================================== count-targeted headers
#: values a count, size or offset field is set to: the largest of each width, the edges of the
#: signed ranges, sizes no file can have -- what every allocation bound must refuse
HOSTILE_COUNTS = (2**8 - 1, 2**16 - 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**47, 2**47 - 1, 2**53 + 1, 2**62,
                  2**63 - 1, 2**63, 2**64 - 1)


def count_variant(data: bytes, header, fields: tuple, fixup=None) -> bytes | None:
    """The input with one of its header record's ``fields`` (counts, sizes, offsets; chosen by
    the input's CRC) set to a hostile value that fits the field -- or to a size just past what
    the input holds -- then ``fixup`` applied (file_size, checksums) unless the field is the one
    it repairs.  None when the header does not parse (a helper of the harness, never a finding)."""
    try:
        if len(data) < header.size:
            return None
        h = header.parse(data, 0)
        sel = selector(data)
        name = fields[sel % len(fields)]
        top = (1 << (8 * header.by_name[name].size)) - 1
        values = [v for v in HOSTILE_COUNTS if v <= top] + [min(len(data) + 1, top), min(h[name] * 2 + 1, top)]
        out = header.build(dict(h, **{name: values[(sel >> 8) % len(values)]})) + bytes(data[header.size:])
        if fixup is not None and name != "file_size":
            out = fixup(out) or out
        return out
    except Exception:
        return None


def with_count_variant(out: list, data: bytes, header, fields: tuple, fixup=None) -> list:
    """``out`` (the passes of ``data``) plus a "count" pass when the header parses."""
    hostile = count_variant(data, header, fields, fixup)
    if hostile is not None and hostile != data:
        out.append(("count", hostile, how_of(data)))
    return out


# ====================================================================== budget-targeted payloads
def _rows(n: int, pre: bytes, post: bytes, width: int, digits: bool = False) -> bytes:
    """``pre + key(i) + post`` for i in range(n), built as one (n, row) uint8 matrix (a few
    bytes per row, not a Python object per row: the 60 MiB documents cost the harness ~1.4 GB
    and 2 s each that way).  The key is i as a ``width``-byte big-endian integer, or as
    ``width`` decimal digits."""
    i = np.arange(n, dtype=np.uint64)
    rows = np.empty((n, len(pre) + width + len(post)), dtype=np.uint8)
    rows[:, :len(pre)] = np.frombuffer(pre, dtype=np.uint8)
    for k in range(width):  # one column at a time: the most significant byte / digit first
        e = width - 1 - k
        rows[:, len(pre) + k] = (i // 10 ** e) % 10 + 48 if digits else (i >> np.uint64(8 * e)) & 0xFF
    rows[:, len(pre) + width:] = np.frombuffer(post, dtype=np.uint8)
    return rows.tobytes()


#: hostile msgpack documents, each made for ``n`` elements: deep nesting, counts and lengths
#: the bytes cannot hold, and many tiny objects (1-6 bytes each in msgpack, 50-200 bytes each
#: as Python objects).  Compressed, the big ones are a few KB on disk and tens of MB inflated.
_MSGPACK_BOMBS = [
    ("nested-arrays", lambda n: b"\x91" * n + b"\xc0"),
    ("nested-maps", lambda n: b"\x81\xc0" * n + b"\xc0"),
    ("array32-huge", lambda n: b"\xdd\xff\xff\xff\xff" + b"\xc0" * 16),
    ("map32-huge", lambda n: b"\xdf\xff\xff\xff\xff" + b"\xc0" * 16),
    ("str32-huge", lambda n: b"\xdb\xff\xff\xff\xff" + b"a" * 16),
    ("bin32-huge", lambda n: b"\xc6\xff\xff\xff\xff" + b"\x00" * 16),
    ("ext32-huge", lambda n: b"\xc9\xff\xff\xff\xff\x01" + b"\x00" * 16),
    ("many-empty-arrays", lambda n: b"\x81\xa7tensors\xdd" + n.to_bytes(4, "big") + b"\x90" * n),
    ("many-empty-maps", lambda n: b"\x81\xa7tensors\xdd" + n.to_bytes(4, "big") + b"\x80" * n),
    ("many-tensor-entries", lambda n: b"\x81\xa7tensors\xdd" + n.to_bytes(4, "big")
     + b"\x84\xa4name\xa1x\xa5dtype\x00\xa5shape\x90\xa8shard_id\x00" * n),
    ("many-keys", lambda n: b"\xdf" + n.to_bytes(4, "big") + _rows(n, b"\xce", b"\xc0", 4)),
]

#: the same idea for JSON documents
_JSON_BOMBS = [
    ("nested-arrays", lambda n: b"[" * n + b"]" * n),
    ("nested-objects", lambda n: b'{"a":' * n + b"null" + b"}" * n),
    ("long-integer", lambda n: b"1" * n),
    ("huge-exponent", lambda n: b"1e999999999"),
    ("many-empty-objects", lambda n: b"[" + b"{}," * n + b"{}]"),
    ("many-keys", lambda n: b'{"' + _rows(n, b"", b'":0,"', 8, digits=True)[:-2] + b"}"),
    ("lone-surrogate", lambda n: b'{"\\ud800": "\\udfff"}'),
]

#: bytes a plain document stays under, and that a compressed one inflates to (under the 64 MiB
#: a metadata chunk may declare)
PLAIN_BYTES, COMPRESSED_BYTES = 1 << 20, 60 << 20
_FRAMES: dict = {}


def hostile_document(sel: int, kind: str = "msgpack", compress=None, digest=None):
    """A budget-targeted document chosen by ``sel``: (name, bytes).  ``kind`` is "msgpack" or
    "json".  With ``compress`` (bytes -> zstd frame with the content size) and ``digest``
    (bytes -> hash), the second item is (frame, inflated length, digest of the inflated bytes)
    of a big document, made once per document and kept; without, a plain document of about
    1 MB at most."""
    docs = _MSGPACK_BOMBS if kind == "msgpack" else _JSON_BOMBS
    name, make = docs[sel % len(docs)]
    per = max(len(make(1000)) / 1000, 1.0)  # bytes per element
    if compress is None:
        return name, make(int(PLAIN_BYTES // per) - 64)
    key = (kind, name)
    if key not in _FRAMES:
        raw = make(int(COMPRESSED_BYTES // per) - 64)
        _FRAMES[key] = (compress(raw), len(raw), digest(raw))
    return name, _FRAMES[key]


# ====================================================================== seeds, dict
def seed_files(h: Harness, src: Path | None = None) -> list[Path]:
    src = h.vectors if src is None else src
    return sorted(p for p in src.rglob(f"*{h.ext}") if p.is_file())


def seed_corpus(h: Harness, dst: Path, src: Path | None = None) -> int:
    files = seed_files(h, src)
    if not files:
        print(f"{h.tag}: WARNING no *{h.ext} seeds under {src or h.vectors}", file=sys.stderr)
    dst.mkdir(parents=True, exist_ok=True)
    n = 0
    for p in files:
        data = p.read_bytes()
        target = dst / f"seed-{p.stem}-{hashlib.sha1(data).hexdigest()[:12]}"
        if not target.exists():
            target.write_bytes(data)
            n += 1
    return n


def write_dict(h: Harness, path: str) -> None:
    with open(path, "w") as f:
        for i, t in enumerate(h.dict_tokens):
            f.write(f'kw{i}="' + "".join(f"\\x{b:02x}" for b in t) + '"\n')


def take(argv: list[str], flag: str, default=None):
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


def has_flag(argv, name) -> bool:
    return any(a == f"-{name}" or a.startswith(f"-{name}=") for a in argv)


# ====================================================================== libFuzzer entry
def test_one_input(h: Harness) -> Callable[[bytes], None]:
    def TestOneInput(data: bytes) -> None:
        for pname, buf, how in h.passes(data):
            try:
                h.exercise(pname, buf, how)
            except BaseException as e:
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                e.add_note(f"[{h.tag}] pass={pname} how={how} len={len(buf)} "
                           f"sha1={hashlib.sha1(buf).hexdigest()} (see --repro --dump-effective)")
                raise
    return TestOneInput


# ====================================================================== smoke (no atheris)
BASE_INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                    1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 64, 1_000_000]


def mutate(rng: random.Random, data: bytes, seeds: list[bytes], interesting: list[int]) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
        op = rng.randrange(10)
        if op == 0 and b:  # bit flip
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:  # random byte
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2 and b:  # truncate
            del b[rng.randrange(len(b)):]
        elif op == 3:  # extend
            b += bytes(rng.randrange(1, 64)) if rng.random() < 0.5 else rng.randbytes(rng.randrange(1, 64))
        elif op in (4, 9) and len(b) >= 8:  # interesting little-endian integer, aligned or not
            w = rng.choice((1, 2, 4, 8))
            i = rng.randrange(0, len(b) - w + 1)
            if op == 4:
                i = i // w * w
            v = rng.choice(interesting) & ((1 << (8 * w)) - 1)
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


def _run_checked(h: Harness, data: bytes, label: str, failures: list, limit_s: int) -> None:
    for pname, buf, how in h.passes(data):
        signal.alarm(limit_s)
        try:
            h.exercise(pname, buf, how)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - any escape is a contract violation
            tb = traceback.format_exception(e)
            failures.append((label, pname, how, buf, type(e).__name__, "".join(tb)))
        finally:
            signal.alarm(0)


def smoke(h: Harness, argv: list[str]) -> int:
    iters = int(take(argv, "--smoke-iters", "3000"))
    seed = int(take(argv, "--smoke-seed", "0"))
    src = Path(take(argv, "--seed-corpus", str(h.vectors)))
    files = seed_files(h, src)
    seeds = [p.read_bytes() for p in files]
    if not seeds:
        print(f"{h.tag} --smoke: no *{h.ext} seeds under {src}; using a synthetic one", file=sys.stderr)
        seeds = [h.synthetic_seed]
    signal.signal(signal.SIGALRM, _alarm)
    failures: list = []
    for p, d in zip(files, seeds):
        _run_checked(h, d, f"seed {p}", failures, 10)
    rng = random.Random(seed)
    interesting = sorted(set(BASE_INTERESTING) | set(h.interesting))
    for k in range(iters):
        d = mutate(rng, rng.choice(seeds), seeds, interesting)
        _run_checked(h, d, f"mutation #{k} (seed {seed})", failures, 10)
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
    print(f"{h.tag} --smoke: {len(seeds)} seeds + {iters} mutations, "
          f"{len(failures)} contract violations ({len(kinds)} distinct)", file=sys.stderr)
    return 1 if failures else 0


def _peak_rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def repro(h: Harness, argv: list[str]) -> int:
    dump = take(argv, "--dump-effective")
    files = [a for a in argv if not a.startswith("-")]
    bad = 0
    for f in files:
        data = Path(f).read_bytes()
        t0 = time.perf_counter()
        passes = h.passes(data)  # the harness' own work, reported apart from the reader's
        print(f"{f}: {len(passes)} passes made in {time.perf_counter() - t0:.2f} s, peak RSS {_peak_rss_mb()} MB")
        for pname, buf, how in passes:
            sha = hashlib.sha1(buf).hexdigest()
            t0 = time.perf_counter()
            if dump:
                Path(dump).mkdir(parents=True, exist_ok=True)
                (Path(dump) / f"{Path(f).name}.{pname}").write_bytes(buf)
            try:
                h.exercise(pname, buf, how)
                cost = f"{time.perf_counter() - t0:.2f} s, peak RSS {_peak_rss_mb()} MB"
                print(f"{f} pass={pname} how={how} len={len(buf)} sha1={sha}: OK in {cost}")
            except BaseException as e:  # noqa: BLE001
                bad += 1
                print(f"{f} pass={pname} how={how} len={len(buf)} sha1={sha}: {type(e).__name__}: {e}")
                traceback.print_exception(e)
    return 1 if bad else 0


def main(h: Harness, atheris_mod) -> int:
    argv = sys.argv[1:]
    if "--smoke" in argv:
        argv.remove("--smoke")
        return smoke(h, argv)
    if "--repro" in argv:
        argv.remove("--repro")
        return repro(h, argv)

    no_seed = "--no-seed" in argv
    if no_seed:
        argv.remove("--no-seed")
    seed_src = take(argv, "--seed-corpus")
    positional = [a for a in argv if not a.startswith("-")]
    if not positional:  # default: our corpus directory, seeded from the vectors
        if not no_seed:
            n = seed_corpus(h, h.corpus, Path(seed_src) if seed_src else None)
            print(f"{h.tag}: corpus {h.corpus} (+{n} seeds)", file=sys.stderr)
        else:
            h.corpus.mkdir(parents=True, exist_ok=True)
        argv.append(str(h.corpus))
    elif seed_src and not no_seed:  # explicit corpus dirs: seed them too when asked
        for d in positional:
            if os.path.isdir(d) or not os.path.exists(d):
                seed_corpus(h, Path(d), Path(seed_src))
    if not has_flag(argv, "rss_limit_mb"):
        argv.insert(0, "-rss_limit_mb=2048")
    if not has_flag(argv, "timeout"):
        argv.insert(0, "-timeout=10")
    if not has_flag(argv, "artifact_prefix"):
        h.findings.mkdir(parents=True, exist_ok=True)
        argv.insert(0, f"-artifact_prefix={h.findings}/")
    if not has_flag(argv, "dict") and h.dict_tokens:
        dpath = os.path.join(tmp_dir(h.name), f"{h.name}-{os.getpid()}.dict")
        write_dict(h, dpath)
        argv.insert(0, f"-dict={dpath}")
    # atheris' "RegEx" hook leaks memory: off by default (FUZZ_<FMT>_HOOKS=RegEx,str enables it)
    for hook in filter(None, os.environ.get(f"FUZZ_{h.name.upper()}_HOOKS", "str").split(",")):
        atheris_mod.enabled_hooks.add(hook)
    atheris_mod.Setup([sys.argv[0]] + argv, test_one_input(h))
    atheris_mod.Fuzz()
    return 0
