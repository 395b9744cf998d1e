#!/usr/bin/env python3
"""Coverage-guided fuzz harness (atheris / libFuzzer) for AEROSET: the set's index JSON, and
``open_partial`` (how a part of a remote set is opened from byte ranges).

The first input byte chooses the target; the rest of the input is its payload:

* mode byte even -- **index**: the payload becomes ``model.aeroset.json`` in a scratch copy of a
  valid set (set ``(byte >> 1) % 3``: ``aeroset_ref``, ``aeroset_global``,
  ``bug_aeroset_writer_asis`` of ``<repo>/../shared/vectors/aero/``; their ``.aero`` files are
  copied once per process into ``/dev/shm/fuzz_aeroset-<uid>/set-<pid>/<set>/``, only the index
  is written per run).  Contract: ``AeroSet(dir)`` succeeds or raises a
  :class:`codec.ModelcodecError` (FormatError / UsageError / NotFoundError); on success
  ``metadata``, ``describe()``, every listed tensor (``tensors[name]``, ``tensor(name)``:
  FormatError or UsageError only -- never a NotFoundError for a listed name), ``validate()`` and
  ``validate(full=True)`` (FormatError / UsageError only; reports hold FormatErrors only);
  ``AeroSet.validate_file(dir)`` raises nothing but UsageError, and reports an error whenever
  ``AeroSet(dir)`` raised a FormatError.  How the set is opened (its directory, its index path,
  ``codec.open(dir)``) is chosen from a CRC of the input.

  No network, ever: every open passes ``remote=False`` (with the default ``remote=None`` a local
  index whose ``global_tidx.path`` is an http(s) URL is read *remotely* -- see
  ``AeroSet._settle_store``), so a URL path is a local UsageError.  As a safety net the harness
  replaces ``socket.getaddrinfo`` / ``create_connection`` / ``socket.connect`` by a function
  that records the attempt and raises; any attempt is a contract violation.

* mode byte odd -- **partial**: the payload is an AERO file, opened twice: by
  ``open_partial("mem", len(data), read, prefix=P)`` with ``read = lambda spans: [data[a:a+n]
  for a, n in spans]`` and ``P = (64, 200, 4096, 262144)[(byte >> 1) & 3]``, and by
  ``AeroReader(data)``.  Contract: each succeeds or raises a ModelcodecError; both raise (same
  class and rule id) or both open with the same tensor names (same order), the same
  ``index_only``, and for each tensor the same TensorInfo (dtype, shape, offset, nbytes) -- or
  the same error class and rule from ``tensors[name]``; ``read`` is only ever asked for spans
  ``0 <= a``, ``0 <= n``, ``a + n <= len(data)``.
  Every partial input is read twice when that makes a difference: ``raw``, and ``fixed`` -- the
  payload with its integrity fields repaired by ``fuzz_aero.fixup`` (TOC BLAKE3, hash_b3, PHSH,
  IHSH), so mutations get past the chunk-hash check at open.

Run the fuzzer (single worker; libFuzzer flags pass straight through)::

    .venv/bin/python fuzz/fuzz_aeroset.py -max_total_time=600
    .venv/bin/python fuzz/fuzz_aeroset.py --only index   -max_total_time=480   # one target
    .venv/bin/python fuzz/fuzz_aeroset.py --only partial -max_total_time=480

``--only index|partial`` (or FUZZ_AEROSET_ONLY) skips the inputs of the other target (they are
not changed, so a crash reproduces with or without it), seeds only that target's seeds and uses
``fuzz/corpus_aeroset_<target>/`` as the default corpus.

Seeds are generated (mode byte + file) into ``/dev/shm/fuzz_aeroset-<uid>/seeds/{index,partial}/``
from the conformance vectors: the three index files named above (``aeroset_global`` gets both
``model.aeroset.json`` and ``model_v02.aeroset.json``), and every ``*.aero`` under
``../shared/vectors/aero/`` (``invalid/`` and the sets' parts included) once per prefix P.
With no corpus directory on the command line the harness creates ``fuzz/corpus_aeroset/``
(git-ignored, never committed) and copies those seeds into it; ``--seed-corpus DIR`` seeds from
DIR's ``*.seed`` files instead.  ``-rss_limit_mb=2048 -timeout=10
-artifact_prefix=fuzz/findings/aeroset/`` are added unless given.

Other modes (no atheris needed)::

    .venv/bin/python fuzz/fuzz_aeroset.py --smoke [--smoke-iters 3000] [--smoke-seed 0]
    .venv/bin/python fuzz/fuzz_aeroset.py --repro FILE [FILE...] [--dump-effective DIR]
    .venv/bin/python fuzz/fuzz_aeroset.py fuzz/findings/aeroset/crash-XXXX   # libFuzzer re-run

A finding is saved as the whole input (mode byte included): ``printf '\\x00' | cat - index.json``
makes an index input for set 0, ``printf '\\x01' | cat - file.aero`` a partial one with P=64.
"""
from __future__ import annotations

import json

import os
import shutil
import socket
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from anywhere without an install
sys.path.insert(0, str(HERE))         # _common

import _common as C  # noqa: E402  (never instrumented; imports no codec module itself)

# C extensions and helpers of the harness itself: imported first, never instrumented; then codec /
# schemas inside atheris.instrument_imports (plain imports in --smoke / --repro without atheris)
atheris = C.load_codec(["codec.schemas.aero", "codec.schemas.aeroset", "codec.io.integrity", "codec.engine.payload", "codec.ui.progress",
                        "codec.io.cache", "codec.io.remote", "codec.formats.aero", "codec.formats.aeroset"],
                       pre=["blake3", "msgpack", "zstandard", "numpy"])
import codec  # noqa: E402  (already imported, instrumented under atheris, by load_codec)
from codec import errors as E  # noqa: E402
from codec.formats.aero import AeroReader, open_partial  # noqa: E402
from codec.formats.aeroset import AeroSet  # noqa: E402

import fuzz_aero  # noqa: E402  (its fixup and AERO tokens; its own load_codec call is a no-op now)

FormatError = codec.FormatError
ModelcodecError = E.ModelcodecError
ContractViolation = C.ContractViolation

#: the sets whose .aero files back the index target (index of the set = (mode byte >> 1) % 3)
SETS = ["aeroset_ref", "aeroset_global", "bug_aeroset_writer_asis"]
#: index files seeded per set (the brief's three: ref, global, global v0.2; plus the as-is writer's)
SET_INDEXES = {"aeroset_ref": ["model.aeroset.json"],
               "aeroset_global": ["model.aeroset.json", "model_v02.aeroset.json"],
               "bug_aeroset_writer_asis": ["model.aeroset.json"]}
PREFIXES = (64, 200, 4096, 262144)
MODES = ("index", "partial")
#: --only index|partial (or FUZZ_AEROSET_ONLY): skip the other target's inputs
ONLY = os.environ.get("FUZZ_AEROSET_ONLY") or None


def mode_of(data: bytes) -> str:
    return "partial" if data and data[0] & 1 else "index"


# ====================================================================== no network, ever
NET_ATTEMPTS: list = []


def _no_network(*args, **kwargs):
    NET_ATTEMPTS.append(args[:2])
    raise ContractViolation(f"network access attempted: {args[:2]!r}")


socket.getaddrinfo = _no_network
socket.create_connection = _no_network
socket.socket.connect = _no_network
socket.socket.connect_ex = _no_network


# ====================================================================== scratch sets, seeds
def _pid_of(name: str) -> int | None:
    tail = name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else None


_SET_ROOT: str | None = None


def set_dir(k: int) -> str:
    """This process's scratch copy of SETS[k] (.aero files only; the index is written per run)."""
    global _SET_ROOT
    if _SET_ROOT is None:
        base = C.tmp_dir("aeroset")
        for f in os.listdir(base):  # scratch sets of dead processes
            pid = _pid_of(f)
            if f.startswith("set-") and pid is not None and pid != os.getpid() and not os.path.exists(f"/proc/{pid}"):
                shutil.rmtree(os.path.join(base, f), ignore_errors=True)
        root = os.path.join(base, f"set-{os.getpid()}")
        shutil.rmtree(root, ignore_errors=True)
        for name in SETS:
            d = os.path.join(root, name)
            os.makedirs(d)
            for p in sorted((C.VECTORS_ROOT / "aero" / name).glob("*.aero")):
                shutil.copyfile(p, os.path.join(d, p.name))
        import atexit
        atexit.register(shutil.rmtree, root, True)
        _SET_ROOT = root
    return os.path.join(_SET_ROOT, SETS[k])


def _write_atomic(path: Path, data: bytes) -> None:
    if path.exists() and path.read_bytes() == data:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def make_seeds() -> Path:
    """(Re)generate the seed files (deterministic contents) and return their root directory."""
    root = Path(C.tmp_dir("aeroset")) / "seeds"
    vec = C.VECTORS_ROOT / "aero"
    for m in MODES:
        (root / m).mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(SETS):
        for idx in SET_INDEXES[name]:
            p = vec / name / idx
            if p.is_file():
                _write_atomic(root / "index" / f"{name}-{idx.removesuffix('.aeroset.json')}.seed",
                              bytes([k << 1]) + p.read_bytes())
    for p in sorted(vec.rglob("*.aero")):
        rel = str(p.relative_to(vec)).replace(os.sep, "_").removesuffix(".aero")
        for j, pre in enumerate(PREFIXES):
            _write_atomic(root / "partial" / f"{rel}-p{pre}.seed", bytes([1 | j << 1]) + p.read_bytes())
    return root


class SetHarness(C.Harness):
    @property
    def vectors(self) -> Path:
        root = make_seeds()
        return root / ONLY if ONLY else root

    @property
    def corpus(self) -> Path:
        return HERE / (f"corpus_aeroset_{ONLY}" if ONLY else "corpus_aeroset")


# ====================================================================== index target
def _open_set(d: str, how: str):
    if how == "path":
        return AeroSet(os.path.join(d, "model.aeroset.json"), remote=False)
    if how == "auto":
        return codec.open(d, remote=False)
    return AeroSet(d, remote=False)


def _check_set_report(rep, level: str) -> None:
    C.check_report(rep, level)
    if rep.format != "aeroset":
        raise ContractViolation(f"validate({level}) report format is {rep.format!r}")


def exercise_index(payload: bytes, k: int, how: str, sel: int) -> None:
    d = set_dir(k)
    with open(os.path.join(d, "model.aeroset.json"), "wb") as f:
        f.write(payload)
    opened_error = None
    try:
        s = _open_set(d, how)
    except ModelcodecError as e:
        opened_error = e
        s = None
    if s is not None:
        try:
            for step in (lambda: s.metadata, s.describe, lambda: s.remote):
                step()
            if s.remote is not False:
                raise ContractViolation("a set opened with remote=False says remote")
            def check(name, info, a):
                if a.nbytes != info.nbytes:
                    raise ContractViolation(f"{name!r}: array of {a.nbytes} B for nbytes {info.nbytes}")
            C.walk_tensors(s, skip=(FormatError, E.UsageError), check=check, index_only_ok=False)
            for kw, level in ((dict(progress=False), "structure"), (dict(full=True, progress=False), "full")):
                try:
                    rep = s.validate(**kw)
                except (FormatError, E.UsageError):
                    continue
                _check_set_report(rep, level)
        finally:
            s.close()
    full = bool(sel & 1)
    try:
        rep = AeroSet.validate_file(d, full=full, remote=False, progress=False)
    except E.UsageError:
        return
    _check_set_report(rep, f"validate_file full={full}")
    if isinstance(opened_error, FormatError) and rep.ok:
        raise ContractViolation(f"AeroSet() raised {type(opened_error).__name__} [{opened_error.rule}] but "
                                f"validate_file(full={full}) reports no error")


# ====================================================================== partial target
def _outcome_of(make) -> tuple:
    """('error', class, rule) or ('ok', names, index_only, [per-tensor info or error])."""
    try:
        r = make()
    except ModelcodecError as e:
        return ("error", type(e).__name__, getattr(e, "rule", None))
    try:
        names = list(r.tensors)
        infos = []
        for n in names:
            try:
                t = r.tensors[n]
                infos.append((t.dtype, tuple(t.shape), t.offset, t.nbytes))
            except ModelcodecError as e:
                infos.append(("error", type(e).__name__, getattr(e, "rule", None)))
        return ("ok", names, r.index_only, infos)
    finally:
        r.close()


def exercise_partial(payload: bytes, prefix: int) -> None:
    size = len(payload)
    calls: list = []

    def read(spans):
        if not isinstance(spans, list):
            raise ContractViolation(f"read() got {type(spans).__name__}, not a list of spans")
        calls.append(list(spans))
        for a, n in spans:
            if not (isinstance(a, int) and isinstance(n, int) and 0 <= a and 0 <= n and a + n <= size):
                raise ContractViolation(f"read() asked for span ({a!r}, {n!r}) of a {size}-byte file")
        return [payload[a:a + n] for a, n in spans]

    part = _outcome_of(lambda: open_partial("mem", size, read, prefix=prefix))
    whole = _outcome_of(lambda: AeroReader(payload))
    if part != whole:
        raise ContractViolation(f"open_partial(prefix={prefix}) and AeroReader disagree:\n"
                                f"  partial: {_show(part)}\n  whole:   {_show(whole)}")


def _show(o: tuple) -> str:
    if o[0] == "error":
        return f"raises {o[1]} [{o[2]}]"
    _, names, index_only, infos = o
    return f"opens, index_only={index_only}, {len(names)} tensors: " + \
        ", ".join(f"{n!r}={i}" for n, i in list(zip(names, infos))[:8])


# ====================================================================== the exercise
def exercise(pname: str, data: bytes, how: str) -> None:
    if not data:
        return
    m = mode_of(data)
    if ONLY and m != ONLY:
        return
    del NET_ATTEMPTS[:]
    if m == "index":
        exercise_index(data[1:], (data[0] >> 1) % len(SETS), how, C.selector(data))
    else:
        exercise_partial(data[1:], PREFIXES[(data[0] >> 1) & 3])
    if NET_ATTEMPTS:
        raise ContractViolation(f"network access attempted (and swallowed): {NET_ATTEMPTS[:3]!r}")


def _fix(data: bytes) -> bytes | None:
    if mode_of(data) != "partial":
        return None
    fixed = fuzz_aero.fixup(data[1:])
    return None if fixed is None else data[:1] + fixed


#: sizes an index may claim for a file: the hostile counts, and what JSON can say besides
_HOSTILE_SIZES = C.HOSTILE_COUNTS + (2**64, 2**128, -1, 0, 1.5, 1e308, "12", None, True)


def size_variant(data: bytes) -> bytes | None:
    """An index input with one file's ``size_bytes`` (a part's or index.aero's, chosen by the
    input's CRC) set to a hostile value; None when the payload is not an index JSON object
    with files (a helper of the harness, never a finding)."""
    if mode_of(data) != "index":
        return None
    try:
        obj = json.loads(data[1:])
        refs = [obj["global_tidx"]] + list(obj["parts"])
        refs = [r for r in refs if isinstance(r, dict)]
        if not refs:
            return None
        sel = C.selector(data)
        ref = refs[sel % len(refs)]
        ref["size_bytes"] = _HOSTILE_SIZES[(sel >> 8) % len(_HOSTILE_SIZES)]
        return data[:1] + json.dumps(obj).encode()
    except Exception:
        return None


def passes(data: bytes):
    """[(pass name, bytes fed to the reader, how)] for one input: as produced, repaired, and
    (index inputs) with a file's size_bytes set to a hostile value."""
    out = C.raw_and_fixed(data, _fix)
    hostile = size_variant(data)
    if hostile is not None and hostile != data:
        out.append(("size", hostile, C.how_of(data)))
    return out


# ====================================================================== dict, CLI
DICT_TOKENS = [
    b'"format"', b'"name"', b'"AEROSET"', b'"version"', b"[0, 1]", b"[0, 2]", b'"model"', b'"architecture"',
    b'"base_url"', b'"parts"', b'"path"', b'"sha256"', b'"size_bytes"', b'"shards"', b'"global_tidx"',
    b'"cache"', b'"enabled"', b'"recommended"', b"false", b"true", b"null", b"{}", b"[]",
    b'"index.aero"', b'"part-000.aero"', b'"part-001.aero"', b'"part-002.aero"', b'"."', b'".."', b'"./"',
    b"../", b"/", b"\\\\", b"\\u0000", b"\\ud800", b"C:", b"http://", b"https://", b"file://", b"://",
    b"18446744073709551615", b"18446744073709551616", b"9223372036854775808", b"-1", b"1e400", b"1.5", b"NaN",
    b"Infinity", b"-0", b"0" * 64, b"f" * 64,
] + fuzz_aero.DICT_TOKENS

HARNESS = SetHarness(
    name="aeroset", ext=".seed", passes=passes, exercise=exercise, dict_tokens=DICT_TOKENS,
    synthetic_seed=b"\x00{}",
    interesting=[16, 96, 112, 619, 1152, 1_000_001],
)


def TestOneInput(data: bytes) -> None:
    C.test_one_input(HARNESS)(data)


def _only_flag(argv: list[str]) -> None:
    """``--only index|partial`` (any mode): set ONLY; under libFuzzer, seed that target only."""
    global ONLY
    v = C.take(argv, "--only")
    if v is not None:
        ONLY = v
    if ONLY is not None and ONLY not in MODES:
        sys.exit(f"--only: expected one of {MODES}, got {ONLY!r}")
    if ONLY and not any(a in ("--smoke", "--repro") for a in argv) and \
            not any(a == "--seed-corpus" or a.startswith("--seed-corpus=") for a in argv):
        argv.append(f"--seed-corpus={make_seeds() / ONLY}")


if __name__ == "__main__":
    _only_flag(sys.argv)
    sys.exit(C.main(HARNESS, atheris))
