"""The C++17 reader (cpp/): generated from the schemas, and reading exactly what the Python reader
reads -- same bytes for every valid conformance vector, same rule id for every invalid one, no
sanitizer finding over thousands of mutated files, and an installed package a consumer project
outside the repository builds against.

The C++ code is built once per test session (shared by the xdist workers, under a file lock) in
pytest's temporary directory: a test build with AddressSanitizer + UndefinedBehaviorSanitizer
(library, ``aero_dump``, ctest programs, the example) and a plain release build of the library
for the install test.  Without cmake or g++ these tests skip, saying so (CI installs them).
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import blake3
import numpy as np
import pytest

from codec import errors as E
from codec.formats.aero import AeroReader
from codec.formats.aeroset import AeroSet, write_aeroset

from .conftest import ROOT, manifest, vectors_dir

CPP = ROOT / "cpp"
#: mutated inputs for the sanitizer run (each AERO mutation gives 1-3 files: raw, hash-repaired, budget)
N_MUTANT_FILES = int(os.environ.get("MODELCODEC_CPP_MUTANTS", "3000"))
N_MUTANT_SETS = int(os.environ.get("MODELCODEC_CPP_MUTANT_SETS", "300"))
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=86:allocator_may_return_null=0",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=87"}


def test_generated_header_is_current():
    """cpp/include/aero/generated.hpp is exactly what `python -m codec.tools.cgen` makes from the schemas."""
    r = subprocess.run([sys.executable, "-m", "codec.tools.cgen", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_generated_header_carries_the_schema():
    """Spot checks that the header says what schemas.aero says (layout, limits, rule ids, names)."""
    from codec.schemas import aero as S
    text = (CPP / "include" / "aero" / "generated.hpp").read_text()
    assert f"inline constexpr std::uint64_t MAX_ENTRY_COUNT = UINT64_C({S.MAX_ENTRY_COUNT});" in text
    assert f'inline constexpr char CHUNK_BOUNDS[] = "{S.Rule.CHUNK_BOUNDS}";' in text
    assert "inline constexpr std::size_t TocEntry_blake3_256_OFFSET = 48;" in text
    assert '{UINT64_C(2), "bfloat16"}' in text and '{UINT64_C(32768), "packed"}' in text


#: the most lines a C++ source of the reader may have (issue 31: split along the engine's lines)
MAX_CPP_LINES = 900


def test_cpp_sources_stay_small():
    """No C++ source under cpp/ (the library, its headers -- the generated one included --, tools,
    tests, examples; not the vendored third_party/) is over MAX_CPP_LINES lines."""
    sources = [p for p in CPP.rglob("*") if p.suffix in {".cpp", ".hpp", ".h", ".cc", ".c"}
               and "third_party" not in p.relative_to(CPP).parts]
    assert any(p.name == "generated.hpp" for p in sources) and len(sources) > 5
    long = {str(p.relative_to(ROOT)): n for p in sources if (n := len(p.read_text().splitlines())) > MAX_CPP_LINES}
    assert not long, f"C++ sources over {MAX_CPP_LINES} lines: {long}"


# ============================================================================ builds
def _tools_or_skip():
    missing = [t for t in ("cmake", "g++", "c++") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"C++ TOOLCHAIN MISSING ({', '.join(missing)}): the C++ reader is not tested here -- install "
                    "cmake g++ libzstd-dev libmsgpack-cxx-dev nlohmann-json3-dev librust-blake3-dev libssl-dev "
                    "(the README's test command and .ci/run do)")


def _run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return p


def _shared_dir(tmp_path_factory) -> Path:
    """One directory for every xdist worker of this session (the parent of each worker's basetemp)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _build_once(tmp_path_factory, name: str, args: list[str], targets: list[str] | None = None) -> Path:
    _tools_or_skip()
    root = _shared_dir(tmp_path_factory) / "cpp-builds"
    root.mkdir(exist_ok=True)
    build = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = build / ".built"
        if not done.exists():
            shutil.rmtree(build, ignore_errors=True)
            _run(["cmake", "-S", str(CPP), "-B", str(build), f"-DAERO_VECTORS_DIR={ROOT.parent / 'shared' / 'vectors'}",
                  *args], timeout=600)
            cmd = ["cmake", "--build", str(build), "-j", "2"]
            for t in targets or []:
                cmd += ["--target", t]
            _run(cmd, timeout=1200)
            done.write_text("ok")
        return build


@pytest.fixture(scope="session")
def san_build(tmp_path_factory) -> Path:
    """The sanitized test build (ASan + UBSan): library, aero_dump, ctest programs, example."""
    return _build_once(tmp_path_factory, "asan", ["-DCMAKE_BUILD_TYPE=None", "-DCMAKE_CXX_FLAGS=-O1 -g1",
                                                  "-DCMAKE_C_FLAGS=-O1", "-DAERO_SANITIZE=ON"])


@pytest.fixture(scope="session")
def release_build(tmp_path_factory) -> Path:
    """A plain optimised build of the library alone, for installing."""
    return _build_once(tmp_path_factory, "release", ["-DCMAKE_BUILD_TYPE=Release", "-DAERO_BUILD_TESTS=OFF"])


def _dump(build: Path, lines: list[str], tmp: Path) -> list[dict]:
    """aero_dump --batch over ``lines``: one result per line; any sanitizer report or crash fails."""
    lst = tmp / "list.txt"
    lst.write_text("\n".join(lines) + "\n")
    return _dump_list(build, lst)


def _dump_list(build: Path, lst: Path) -> list[dict]:
    p = subprocess.run([str(build / "aero_dump"), "--batch", str(lst)], capture_output=True, text=True,
                       env={**os.environ, **SAN_ENV}, timeout=900)
    started = [ln for ln in p.stderr.splitlines() if ln.startswith("start ")]
    report = [ln for ln in p.stderr.splitlines() if not ln.startswith("start ")]
    assert p.returncode == 0 and not report, (
        f"aero_dump exited {p.returncode} on {started[-1][6:] if started else '?'}:\n" + "\n".join(report)[-6000:])
    out = [json.loads(ln) for ln in p.stdout.splitlines()]
    assert len(out) == len(lst.read_text().splitlines())
    return out


# ============================================================================ the Python side
def _err(e: E.FormatError) -> dict:
    return {"kind": type(e).__name__, "rule": e.rule, "path": e.path, "offset": e.offset, "message": e.message}


def py_dump(path: str, is_set: bool) -> dict:
    """What the Python reader makes of a file, in aero_dump's terms: open; read every tensor (its
    hash_b3 checked) in index order until one fails; full validation."""
    out = {"open": None, "tensors": [], "read": None, "validate": None}
    try:
        r = AeroSet(path) if is_set else AeroReader(path)
    except E.FormatError as e:
        out["open"] = _err(e)
    except (E.UsageError, E.NotFoundError, E.NotLocalError) as e:
        out["open"] = {"kind": type(e).__name__, "rule": None}
    else:
        with r:
            for name in list(r.tensors):
                try:
                    t = r.tensors[name]
                    data = r.read_tensor_bytes(name) if is_set else r.tensor(name).tobytes()
                    out["tensors"].append({"name": name, "dtype": t.common_dtype, "format_dtype": t.dtype_name,
                                           "shape": list(t.shape), "nbytes": t.nbytes,
                                           "b3": blake3.blake3(data).hexdigest()})
                except E.FormatError as e:
                    out["read"] = dict(_err(e), tensor=name)
                    break
                except (E.NotFoundError, E.NotLocalError) as e:
                    out["read"] = {"kind": type(e).__name__, "rule": None, "tensor": name}
                    break
            rep = r.validate(full=True)
            out["validate"] = {"ok": rep.ok, "errors": [_err(v) for v in rep.errors],
                               "warnings": [_err(v) for v in rep.warnings]}
    out["verdict"] = out["open"] or out["read"] or (out["validate"]["errors"] or ["ok"])[0]
    return out


def _strip(e: dict) -> dict:
    """A finding of aero_dump's as ``_err`` makes one of the Python reader's."""
    return {k: e[k] for k in ("kind", "rule", "path", "offset", "message")}


def _stage(d: dict) -> str:
    return "open" if d["open"] else "read" if d["read"] else "validate" if d["validate"]["errors"] else "ok"


def _key(d: dict):
    v = d["verdict"]
    return (_stage(d),) + (("ok",) if v == "ok" else (v["kind"], v["rule"]))


VDIR = vectors_dir("aero")
ENTRIES = manifest("aero")["vectors"]


def _vector_lines(expect: str) -> list[tuple[str, str]]:
    out = []
    for v in ENTRIES:
        if v["expect"] == expect:
            out.append(("set" if v["file"].endswith(".aeroset.json") else "file", str(VDIR / v["file"])))
    return out


# ============================================================================ tests
def test_ctest_passes(san_build):
    """ctest: hostile headers built in C++, the error model, every conformance vector against the
    manifest (sha256 of each tensor), the example on two sets -- all under the sanitizers."""
    p = subprocess.run(["ctest", "--output-on-failure"], cwd=san_build, capture_output=True, text=True,
                       env={**os.environ, **SAN_ENV}, timeout=600)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-3000:]
    assert "100% tests passed" in p.stdout and "example_read_set" in p.stdout and "vectors" in p.stdout


def test_valid_vectors_give_the_python_readers_bytes(san_build, tmp_path):
    """Every valid AERO and AEROSET vector: the C++ reader lists the same tensors (name, dtype
    names, shape, byte length) and gives exactly the bytes the Python reader gives (compared by
    BLAKE3 of each tensor's bytes), and full validation is clean in both."""
    lines = _vector_lines("valid")
    assert len(lines) >= 14
    got = _dump(san_build, [f"{k}\t{p}" for k, p in lines], tmp_path)
    for (kind, path), cpp in zip(lines, got):
        py = py_dump(path, kind == "set")
        assert cpp["verdict"] == "ok" == py["verdict"], (path, cpp["verdict"], py["verdict"])
        assert cpp["tensors"] == py["tensors"], path
        assert cpp["tensors"], path


def test_invalid_vectors_are_refused_with_the_python_readers_rule(san_build, tmp_path):
    """Every invalid vector: refused at the same stage (open / reading a tensor / full validation),
    with the same error class and the same rule id as the Python reader (run on the same file,
    not only the manifest); the full validations list the same rule ids."""
    lines = _vector_lines("invalid")
    assert len(lines) >= 17
    got = _dump(san_build, [f"{k}\t{p}" for k, p in lines], tmp_path)
    for (kind, path), cpp in zip(lines, got):
        py = py_dump(path, kind == "set")
        assert _key(py)[0] != "ok", path
        assert _key(cpp) == _key(py), (path, cpp["verdict"], py["verdict"])
        if cpp["validate"] is not None:
            assert [e["rule"] for e in cpp["validate"]["errors"]] == [e["rule"] for e in py["validate"]["errors"]], path
        if cpp["verdict"]["kind"] not in ("NotFoundError", "NotLocalError"):
            assert cpp["verdict"]["path"] == py["verdict"]["path"], path
            assert cpp["verdict"]["offset"] == py["verdict"]["offset"], path


#: header fields set to values that break the header's relations (schemas.aero.HEADER_RELATIONS and
#: TOC_HEADER_RELATIONS) in minimal_f32.aero: header [0, 96), TOC [96, 432), string table [432, 480)
HEADER_CASES = [
    {"toc_length": 256},                       # not 16 + 80 x entry_count
    {"toc_length": 8}, {"toc_length": 0},      # shorter than the TOC header
    {"toc_offset": 856}, {"toc_offset": 2**64 - 8}, {"toc_length": 2**64 - 1},  # past the end
    {"toc_offset": 40},                        # inside the header
    {"toc_offset": 850, "toc_length": 8},      # past the end and too short
    {"string_table_offset": 0}, {"string_table_offset": 88},   # inside the header (and the TOC)
    {"string_table_offset": 200}, {"string_table_offset": 96, "string_table_length": 0},
    {"string_table_length": 10_000}, {"string_table_offset": 2**64 - 8},
    {"string_table_offset": 0, "string_table_length": 0},
]
#: chunk kinds (schemas.aero.CHUNK_RELATIONS) in minimal_f32.aero, whose chunks are MJSN, MMSG,
#: TIDX, WTSH: the fourccs of TOC entries set to these (an unknown kind is a warning of validate)
CHUNK_CASES = [{2: b"XIDX"}, {0: b"ABCD"}, {0: b"ABCD", 3: b"\0\0\0\0"}, {2: b"MJSN"}]
#: chunk names (schemas.aero.NAME_RELATIONS): ("name", entry, byte) set to a value -- not UTF-8, a
#: NUL inside, a sequence cut short, a surrogate
NAME_CASES = [{("name", 0, 0): 0xFF}, {("name", 1, 3): 0}, {("name", 2, 6): 0xE2}, {("name", 3, 0): 0xED, ("name", 3, 1): 0xA0},
              {("name", 0, 2): 0xC0, ("name", 1, 0): 0xF4, ("name", 1, 1): 0x90}]
#: padding (schemas.aero.PADDING_RELATIONS): ("byte", offset) set to a value, ("append",) bytes
#: added at the end -- the string table after its names [474, 480), the gaps before MMSG [526, 528)
#: and TIDX [745, 752), bytes after the last chunk
PADDING_CASES = [{("byte", 478): 1}, {("byte", 527): 7, ("byte", 750): 9, ("byte", 751): 9},
                 {("append",): b"\0\0\5"}, {("byte", 475): 1, ("append",): b"\1"}, {("append",): bytes(64)}]
CASES = HEADER_CASES + CHUNK_CASES + NAME_CASES + PADDING_CASES


def _patched(tmp_path) -> list[Path]:
    from codec.formats.aero.reader import HEADER, TOC_ENTRY
    from codec.schemas.aero import TOC_HEADER_SIZE
    data = (VDIR / "minimal_f32.aero").read_bytes()
    h = HEADER.parse(data, 0, "FileHeader")
    toc = h["toc_offset"] + TOC_HEADER_SIZE  # (the first entry)
    out = []
    for k, case in enumerate(CASES):
        b = bytearray(data)
        for key, value in case.items():
            if isinstance(key, str):  # a header field
                f = HEADER.by_name[key]
                b[f.offset:f.offset + 8] = value.to_bytes(8, "little")
            elif isinstance(key, int):  # TOC entry `key`'s fourcc
                at = toc + key * TOC_ENTRY.size + TOC_ENTRY.by_name["fourcc"].offset
                b[at:at + 4] = value
            elif key[0] == "byte":
                b[key[1]] = value
            elif key[0] == "append":
                b += value
            else:  # byte key[2] of TOC entry key[1]'s name
                entry = TOC_ENTRY.parse(data, toc + key[1] * TOC_ENTRY.size, "e")
                assert key[2] < entry["name_len"]
                b[h["string_table_offset"] + entry["name_off"] + key[2]] = value
        out.append(tmp_path / f"h{k}.aero")
        out[-1].write_bytes(b)
    return out


def test_header_chunk_name_and_padding_relations_give_the_python_readers_findings(san_build, tmp_path):
    """Each header field set to break a relation of the header, TOC entries set to a missing or
    unknown chunk kind, chunk names that are not UTF-8 text, padding that is not zero: the C++
    reader (which evaluates the generated relations) refuses the file, or reports it in
    validation, with the Python reader's error class, rule id, field path, byte offset and message --
    warnings included."""
    paths = _patched(tmp_path)
    got = _dump(san_build, [f"file\t{p}" for p in paths], tmp_path)
    warned = padded = 0
    for case, path, cpp in zip(CASES, paths, got):
        py = py_dump(str(path), False)
        if case in HEADER_CASES or case == CHUNK_CASES[0] or case in NAME_CASES:
            assert py["open"] is not None, case
        if py["open"] is not None:
            assert _strip(cpp["verdict"]) == py["open"], case
            continue
        for k in ("errors", "warnings"):
            assert [_strip(e) for e in cpp["validate"][k]] == py["validate"][k], (case, k)
        warned += len(py["validate"]["warnings"])
        padded += sum(e["rule"] == "AERO-PADDING" for e in py["validate"]["errors"])
    assert warned >= 3 and padded >= 6


def _disagreeing_set(d: Path, ours: dict, theirs: dict) -> Path:
    """A set of ``ours`` whose index.aero is that of a set of ``theirs`` (its sha256 and size in
    the index JSON made to match: the index is consistent, index.aero and the part are not)."""
    import hashlib
    write_aeroset(str(d / "a"), ours)
    write_aeroset(str(d / "b"), theirs)
    shutil.copy(d / "b" / "index.aero", d / "a" / "index.aero")
    index = next((d / "a").glob("*.aeroset.json"))
    doc = json.loads(index.read_text())
    blob = (d / "a" / "index.aero").read_bytes()
    doc["global_tidx"].update(sha256=hashlib.sha256(blob).hexdigest(), size_bytes=len(blob))
    index.write_text(json.dumps(doc))
    return index


def test_a_part_that_describes_a_tensor_differently_from_index_aero_is_refused(san_build, tmp_path):
    """index.aero (index-only, as sets are written) and the part holding a tensor's shard describe
    it differently -- shape, dtype, bytes (hash_b3) -- or the part lacks it: the C++ set reader
    refuses it at the same stage with the Python reader's class, rule and path (it compares the
    fields schemas.aeroset.TENSORS declares), and reads the tensors that agree."""
    w = np.arange(6, dtype=np.float32)
    b = np.ones(4, np.float32)
    cases = {"shape": ({"w": w.reshape(2, 3), "b": b}, {"w": w.reshape(3, 2), "b": b}),
             "dtype": ({"w": w, "b": b}, {"w": w.view(np.int32), "b": b}),
             "bytes": ({"w": w, "b": b}, {"w": w + 1, "b": b}),
             "missing": ({"w": w, "b": b}, {"w": w, "b": b, "x": b})}
    paths = [_disagreeing_set(tmp_path / k, *v) for k, v in cases.items()]
    got = _dump(san_build, [f"set\t{p}" for p in paths], tmp_path)
    for case, path, cpp in zip(cases, paths, got):
        py = py_dump(str(path), True)
        assert _key(py) == ("read", "StructureError", "AEROSET-TENSOR"), (case, py["verdict"])
        assert _key(cpp) == _key(py), (case, cpp["verdict"], py["verdict"])
        assert cpp["verdict"]["path"] == py["verdict"]["path"], case
        assert cpp["tensors"] == py["tensors"], case  # (the tensors read before it: alike)


@pytest.mark.parametrize("change, at", [("grown", "size_bytes"), ("last byte", "sha256"), ("magic", "sha256")])
def test_a_part_failing_its_check_gives_the_python_readers_one_finding(san_build, tmp_path, change, at):
    """A part holding several tensors, one byte longer than the index says, or of its size with
    other bytes (its last one, or its magic: then it does not open): a full validation lists the
    Python reader's findings, in the same order -- the part's AEROSET-PART-HASH once, by its size
    alone (not also its sha256) or by its sha256, with no byte offset, and each of the part's own
    findings once, not once per tensor it holds -- and both read the same tensors, or refuse the
    same one alike."""
    d = tmp_path / "set"
    shutil.copytree(VDIR / "aeroset_global", d)
    part = d / "part-001.aero"
    data = bytearray(part.read_bytes())
    if change == "grown":
        data += b"\1"
    else:
        data[-1 if change == "last byte" else 0] ^= 0x5A
    part.write_bytes(bytes(data))
    index = d / "model.aeroset.json"
    cpp = _dump(san_build, [f"set\t{index}"], tmp_path)[0]
    py = py_dump(str(index), True)
    assert [_strip(e) for e in cpp["validate"]["errors"]] == py["validate"]["errors"]
    said = [(e["kind"], e["rule"], e["path"], e["offset"]) for e in py["validate"]["errors"]]
    assert len(said) == len(set(said)), said
    assert [(e["path"], e["offset"]) for e in py["validate"]["errors"] if e["rule"] == "AEROSET-PART-HASH"] == \
        [(f"index.parts[1].{at}", None)]
    assert cpp["tensors"] == py["tensors"] and cpp["tensors"]
    assert (cpp["read"] and _strip(cpp["read"])) == (py["read"] and {k: py["read"][k] for k in _strip(py["read"])})
    assert (py["read"] is not None) == (change == "magic")


def test_bool_bytes_other_than_0_or_1_give_the_python_readers_warning(san_build, tmp_path):
    """A bool tensor whose bytes are only 0 and 1: no finding in either reader; one holding other
    bytes (2, 255), in an AERO file (one shard or several) or a set's part: the C++ full validation
    warns of it as the Python one does (AERO-BOOL, declared a warning by schemas.aero.WARNINGS):
    same class, rule, path, byte offset and message, and the file stays valid in both."""
    from codec.formats.aero import write_aero
    odd = np.frombuffer(b"\x01\x00\x01\x02\x01\xff", bool)
    cases = {"file-01": ({"w": np.arange(8, dtype=np.float32), "m": odd != 0}, {}),
             "file-2": ({"w": np.arange(8, dtype=np.float32), "m": odd}, {}),
             "file-2-shards": ({"w": np.arange(30, dtype=np.float32), "z": np.zeros(5, bool), "m": odd},
                               {"max_shard_bytes": 64}),
             "set-01": ({"a": np.ones(3, np.int8), "m": odd != 0}, None),
             "set-2": ({"a": np.ones(3, np.int8), "m": odd}, None)}
    lines = []
    for k, (tensors, opts) in cases.items():
        if opts is None:
            (tmp_path / k).mkdir()
            write_aeroset(str(tmp_path / k), tensors)
            lines.append(("set", str(next((tmp_path / k).glob("*.aeroset.json")))))
        else:
            lines.append(("file", str(write_aero(tmp_path / f"{k}.aero", tensors, **opts))))
    got = _dump(san_build, [f"{kind}\t{p}" for kind, p in lines], tmp_path)
    for k, (kind, path), cpp in zip(cases, lines, got):
        py = py_dump(path, kind == "set")
        assert py["verdict"] == "ok" == cpp["verdict"] and cpp["validate"]["ok"], (k, cpp["verdict"])
        want = [] if k.endswith("01") else ["AERO-BOOL"]
        assert [e["rule"] for e in py["validate"]["warnings"]] == want, k
        assert [_strip(e) for e in cpp["validate"]["warnings"]] == py["validate"]["warnings"], k
        assert not cpp["validate"]["errors"] and cpp["tensors"] == py["tensors"], k
        if want:
            assert py["validate"]["warnings"][0]["message"].startswith("tensor 'm': bool element 3 is the byte 2 ")


#: messages that start like a library's but are the reader's own words (compared in full)
LIB_WORDED = ("invalid JSON: 'utf-8' codec", "zstd: frame decoded to")


def _reads_while_replaced(build: Path, tmp_path: Path) -> tuple[int, dict, list]:
    """aero_dump reads the set ``tmp_path/set`` (every tensor, then full validation), a batch of
    reads at a time, while the three writers of tests/test_aeroset_concurrency.py replace it:
    (whole reads, {typed failure: count}, mixes)."""
    import multiprocessing
    import time

    from . import test_aeroset_concurrency as C
    d = str(tmp_path / "set")
    C._write(d, 9)
    writer_of = {blake3.blake3(C._tensors(k)[C.NAMES[0]].tobytes()).hexdigest(): k for k in (1, 2, 3, 9)}
    lst = tmp_path / "reads.txt"
    lst.write_text(f"set\t{d}\n" * 40)
    ctx = multiprocessing.get_context("spawn")
    go, stop, out, writes = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Value("i", 0)
    procs = [ctx.Process(target=C._writer, args=(d, k, go, stop, writes, out)) for k in (1, 2, 3)]
    ok, typed, mixes, started = 0, {}, [], []
    try:
        for p in procs:
            p.start()
            started.append(p)
        go.set()
        end = time.monotonic() + C.AT_MOST
        while writes.value < 3 and time.monotonic() < end:  # (the writers are under way)
            time.sleep(0.01)
        first = writes.value
        while (ok + sum(typed.values()) + len(mixes) < C.READS or writes.value - first < C.WRITES) \
                and time.monotonic() < end:
            for r in _dump_list(build, lst):
                ks = {writer_of.get(t["b3"], "?") for t in r["tensors"]}
                if r.get("metadata"):
                    ks.add(int(r["metadata"]["name"].removeprefix("writer")))
                if len(ks) > 1:
                    mixes.append(sorted(map(str, ks)))
                elif r["verdict"] == "ok" and len(r["tensors"]) == len(C.NAMES):
                    ok += 1
                else:
                    v = r["verdict"]
                    key = f"{v['kind']}: {v['message'][:160]}" if v != "ok" else f"{len(r['tensors'])} tensors"
                    typed[key] = typed.get(key, 0) + 1
        stop.set()
        writers = [out.get(timeout=60) for _ in procs]
    finally:
        stop.set()
        go.set()
        for p in started:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert all(err is None and n > 0 for _, _, n, err in writers), writers
    return ok, typed, mixes


def test_a_set_replaced_while_the_cpp_reader_reads_it_is_read_whole(san_build, tmp_path):
    """Three writers replace a set in a loop (real processes) while aero_dump opens it again and
    again, reads every tensor and validates it whole: every read is one writer's set (the index's
    model name and every tensor), never a mix; at least 99% of the reads succeed, the rest are
    typed refusals -- the C++ reader holds the set's directory and every file its index lists, as
    the Python reader does, and opens the set again when it was replaced meanwhile."""
    ok, typed, mixes = _reads_while_replaced(san_build, tmp_path)
    assert mixes == [], f"{len(mixes)} reads saw a mix of sets: {mixes[:5]}"
    failed = sum(typed.values())
    assert ok >= 1 and failed <= 0.01 * (ok + failed), (ok, typed)


def test_mutated_files_run_clean_under_the_sanitizers(san_build, tmp_path):
    """A few thousand files made by the Python fuzz mutators (raw, hash-repaired, budget documents)
    and a few hundred mutated sets: the C++ reader, built with ASan + UBSan, opens, reads every
    tensor and fully validates each -- a typed refusal is fine, a sanitizer report or any other
    exception is a failure.  And for every input the verdict is the Python reader's: the same
    stage, error class and rule id, or both read it to the end with the same bytes; a set's full
    validation lists the Python reader's findings.  Every file is also validated without being
    opened first (``AeroFile::validate_file``, Python's ``validate_file``): both list the same
    findings, errors and warnings, each with the same class, rule, path, offset and message (but
    for the words of zstd's, json's and msgpack's own errors)."""
    out = tmp_path / "mutants"
    _run([sys.executable, str(ROOT / "tests" / "cpp_mutants.py"), str(out), str(N_MUTANT_FILES), str(N_MUTANT_SETS),
          "20261126"], timeout=600, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    lst = out / "list.txt"
    lines = lst.read_text().splitlines()
    assert len(lines) >= N_MUTANT_FILES + N_MUTANT_SETS
    lines += ["collect\t" + ln.split("\t", 1)[1] for ln in lines if ln.startswith("file\t")]
    lst.write_text("\n".join(lines) + "\n")
    got = _dump_list(san_build, lst)
    findings = lambda vs: [(v["kind"], v["rule"], v["path"], v["offset"]) for v in vs]  # noqa: E731
    refused, differ, listed, worded = 0, [], 0, 0
    for line, cpp in zip(lines, got):
        kind, path = line.split("\t", 1)
        if kind == "collect":
            rep = AeroReader.validate_file(path, full=True)
            for k in ("errors", "warnings"):
                py_k = [(type(v).__name__, v.rule, v.path, v.offset) for v in getattr(rep, k)]
                if findings(cpp["validate"][k]) != py_k:
                    differ.append((path, "validate_file " + k, findings(cpp["validate"][k])[:3], py_k[:3]))
                    continue
                # the same message, but for what a decoding library words: a zstd decoding error
                # (python-zstandard's text differs by the API the Python reader calls), a JSON or
                # msgpack syntax error (Python's json module, msgpack's unpacker)
                for c, v in zip(cpp["validate"][k], getattr(rep, k)):
                    lib = next((p for p in ("zstd: ", "invalid JSON: ", "invalid msgpack: ") if v.message.startswith(p)),
                               None)
                    if lib is None or not c["message"].startswith(lib) or v.message.startswith(LIB_WORDED):
                        worded += 1
                        if c["message"] != v.message:
                            differ.append((path, "message", c["message"], v.message))
            listed += len(rep.violations)
            continue
        refused += cpp["verdict"] != "ok"
        py = py_dump(path, kind == "set")
        if _key(cpp) != _key(py):
            differ.append((path, _key(cpp), _key(py)))
        elif cpp["verdict"] == "ok":
            assert cpp["tensors"] == py["tensors"], path
        if kind == "set" and cpp["validate"] is not None and py["validate"] is not None:
            for k in ("errors", "warnings"):
                if findings(cpp["validate"][k]) != findings(py["validate"][k]):
                    differ.append((path, "set validation " + k, findings(cpp["validate"][k])[:3],
                                   findings(py["validate"][k])[:3]))
    print(f"{len(lines)} mutated inputs, {refused} refused with typed errors, {listed} findings of validate_file "
          f"({worded} messages compared), {len(differ)} differ")
    assert 0 < refused < len(lines) and listed > N_MUTANT_FILES and worded > listed // 2
    # the same stage, error class and rule id as the Python reader, for every mutated input
    assert not differ, differ[:10]


README = ROOT / "docs" / "cpp.md"  # (the C++ reader's page of the documentation)


def _readme_example() -> str:
    m = re.search(r"<!-- cpp/examples/read_set.cpp -->\n```cpp\n(.*?)```", README.read_text(), re.S)
    assert m, "docs/cpp.md: the C++ reader page shows cpp/examples/read_set.cpp"
    return m.group(1)


def test_readme_example_is_the_example_file():
    """The documentation's C++ example is cpp/examples/read_set.cpp, verbatim (the file is what CI builds)."""
    assert _readme_example() == (CPP / "examples" / "read_set.cpp").read_text()


def test_installed_package_builds_a_consumer_outside_the_repository(release_build, tmp_path):
    """cmake --install into a temporary prefix; a consumer project written here (find_package(aero),
    target_link_libraries(app aero::aero), the README example) builds against it and reads a set
    written by the Python writer: every tensor's bytes as the writer was given them."""
    prefix = tmp_path / "prefix"
    _run(["cmake", "--install", str(release_build), "--prefix", str(prefix)], timeout=300)
    assert (prefix / "include" / "aero" / "aero.hpp").exists()
    assert list(prefix.glob("lib*/cmake/aero/aeroConfig.cmake"))
    rng = np.random.default_rng(7)
    tensors = {
        "embed.weight": rng.standard_normal((64, 32)).astype(np.float32),
        "layer.0.bias": rng.standard_normal(96).astype(np.float16),
        "layer.0.idx": np.arange(300, dtype=np.int64).reshape(3, 100),
        "layer.1.mask": rng.integers(0, 2, (5, 7)).astype(bool),
        "scalar": np.array(3.5, dtype=np.float64),
        "empty": np.zeros((0, 4), dtype=np.int32),
    }
    set_dir = tmp_path / "model"
    write_aeroset(str(set_dir), tensors, model_name="consumer-test", architecture="mlp", max_shard_bytes=4096,
                  max_part_shards=1)
    assert len(list(set_dir.glob("part-*.aero"))) >= 2
    app = tmp_path / "consumer"
    app.mkdir()
    (app / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(consumer CXX)\nset(CMAKE_CXX_STANDARD 17)\n"
        "find_package(aero CONFIG REQUIRED)\nadd_executable(app main.cpp)\ntarget_link_libraries(app aero::aero)\n")
    (app / "main.cpp").write_text(_readme_example())
    _run(["cmake", "-S", str(app), "-B", str(app / "build"), f"-DCMAKE_PREFIX_PATH={prefix}"], timeout=300)
    _run(["cmake", "--build", str(app / "build"), "-j", "2"], timeout=600)
    p = _run([str(app / "build" / "app"), str(set_dir)], timeout=120)
    lines = p.stdout.splitlines()
    assert lines[-1] == "valid"
    got = {ln.split()[0]: ln.split()[-1].removeprefix("b3=") for ln in lines[:-1]}
    want = {n: blake3.blake3(np.ascontiguousarray(a).tobytes()).hexdigest() for n, a in tensors.items()}
    assert got == want
    assert "embed.weight float32 [64,32] 8192 bytes" in p.stdout
    assert "layer.1.mask bool [5,7] 35 bytes" in p.stdout
