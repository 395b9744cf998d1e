"""The C++ reader against hostile input, beside tests/test_cpp.py (whose sanitizer build it shares):
one JSON grammar and one set of limits for both readers (issue 30 §5), and the libFuzzer harnesses
of fuzz/cpp/ (issue 30 §4): they build with clang, run clean on their seeds, and every input a
campaign found (fuzz/findings/cpp_*/) reads with the Python reader's verdict."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codec.engine import payload
from codec.engine.nesting import MAX_NESTING
from tests.test_hostile_decode import _file

from .conftest import ROOT

from .test_cpp import VDIR, _dump, _key, py_dump, san_build  # noqa: F401  (the shared sanitizer build)

#: JSON texts Python's json refuses or accepts where nlohmann differs (key: what the case is)
JSON_CASES = {
    "minus NaN": (b'{"a": -NaN}', False),
    "NaN then a digit": (b'{"a": [NaN1]}', False),
    "a digit then NaN": (b'{"a": [1NaN]}', False),
    "a UTF-8 BOM": (b'\xef\xbb\xbf{"a": 1}', False),
    "a 401-digit integer": (b'{"a": ' + b"7" * 401 + b"}", True),
    "a negative integer of JSON_MAX_INT_DIGITS digits": (b'{"a": -' + b"7" * payload.JSON_MAX_INT_DIGITS + b"}", True),
    "an integer of one digit more": (b'{"a": ' + b"7" * (payload.JSON_MAX_INT_DIGITS + 1) + b"}", False),
    "NaN and the infinities": (b'{"a": NaN, "b": -Infinity, "c": Infinity, "d": 1e400}', True),
    "a lone surrogate": (b'{"a": "\\ud800"}', False),  # (text that is not Unicode: refused where MJSN is read)
    "a control character in a string": (b'{"a": "\x01"}', False),
    "a trailing comma": (b'{"a": 1,}', False),
    "an unknown escape": (b'{"a": "\\x"}', False),
    "extra data": (b'{"a": 1} x', False),
    "whitespace around": (b' \r\n{"a": 1}\t', True),
    "nested one deeper than MAX_NESTING": (b'{"a":' + b"[" * MAX_NESTING + b"]" * MAX_NESTING + b"}", False),
}
#: MAX_NESTING deep: both readers read it, whatever the depth of the caller's stack
AT_MAX_DEPTH = b'{"a":' + b"[" * (MAX_NESTING - 1) + b"]" * (MAX_NESTING - 1) + b"}"


def _compare(build, tmp_path, lines):
    got = _dump(build, [f"{k}\t{p}" for k, p in lines], tmp_path)
    return [(str(p), _key(cpp), _key(py_dump(str(p), k == "set"))) for (k, p), cpp in zip(lines, got)]


@pytest.mark.parametrize("compressed", [False, True], ids=["stored", "zstd"])
def test_an_mjsn_chunk_is_json_to_both_readers_alike(san_build, tmp_path, compressed):
    """Each text in an MJSN chunk (stored and compressed): the C++ reader accepts exactly what the
    Python reader accepts and refuses the rest with its class and rule (AERO-PAYLOAD)."""
    lines = []
    for k, (text, _) in enumerate(JSON_CASES.values()):
        p = tmp_path / f"j{k}.aero"
        p.write_bytes(_file(b"MJSN", text, compress=compressed))
        lines.append(("file", p))
    for (case, (_, accepted)), (path, cpp, py) in zip(JSON_CASES.items(), _compare(san_build, tmp_path, lines)):
        assert (py == ("ok", "ok")) == accepted, (case, py)
        assert cpp == py, (case, cpp, py)
    p = tmp_path / "deep.aero"
    p.write_bytes(_file(b"MJSN", AT_MAX_DEPTH, compress=compressed))
    assert _key(_dump(san_build, [f"file\t{p}"], tmp_path)[0]) == ("ok", "ok")


def _set_with_index(tmp_path, name: str, text: bytes) -> Path:
    d = tmp_path / name
    shutil.copytree(VDIR / "aeroset_ref", d)
    for f in [d, *d.iterdir()]:
        f.chmod(0o755 if f.is_dir() else 0o644)
    (d / "model.aeroset.json").write_bytes(text)
    return d / "model.aeroset.json"


def _as_index(text: bytes, base: bytes) -> bytes:
    """A set's index JSON ``base`` with what makes ``text`` (an object) what it is: its members
    put first, its BOM, the whitespace or data around it."""
    if text.startswith(b"\xef\xbb\xbf"):
        return text[:3] + base
    end = text.rindex(b"}")
    start = text.index(b"{")
    return text[:start] + base.replace(b"{", b"{" + text[start + 1:end] + b", ", 1) + text[end + 1:]


def test_a_set_index_is_json_to_both_readers_alike(san_build, tmp_path):
    """The same texts as an undeclared key of a set's index JSON: same verdict in both readers."""
    base = (VDIR / "aeroset_ref" / "model.aeroset.json").read_bytes()
    lines = []
    for k, (text, _) in enumerate(JSON_CASES.values()):
        doc = _as_index(text, base)
        lines.append(("set", _set_with_index(tmp_path, f"s{k}", doc)))
    for (case, (_, accepted)), (path, cpp, py) in zip(JSON_CASES.items(), _compare(san_build, tmp_path, lines)):
        # (a string under an undeclared key of the index is not read as text; a path is: below)
        accepted = accepted or case == "a lone surrogate"
        assert (py == ("ok", "ok")) == accepted, (case, py)
        assert cpp == py, (case, cpp, py)


@pytest.mark.parametrize("where", ["parts[1]", "parts[0]", "global_tidx"])
@pytest.mark.parametrize("escape", ["\\ud800", "\\udc80"])
def test_a_part_path_with_a_lone_surrogate_names_no_file_in_either_reader(san_build, tmp_path, where, escape):
    """A part path "\\ud800.aero" (or the surrogate-escape "\\udc80", which Python's file system
    encoding would turn into the byte 0x80) names no file: AEROSET-PATH at open in both readers --
    even when a file named by U+FFFD (what the C++ reader's JSON text held) exists beside it."""
    doc = json.loads((VDIR / "aeroset_ref" / "model.aeroset.json").read_text())
    ref = doc["global_tidx"] if where == "global_tidx" else doc["parts"][int(where[-2])]
    victim = ref["path"]
    ref["path"] = "@"
    text = json.dumps(doc).replace('"@"', f'"{escape}.aero"').encode()
    index = _set_with_index(tmp_path, "s", text)
    for name in ("\ufffd.aero", "\udc80.aero".encode("utf-8", "surrogateescape").decode("utf-8", "replace")):
        shutil.copy(index.parent / victim, index.parent / name)
    [(_, cpp, py)] = _compare(san_build, tmp_path, [("set", index)])
    assert py == ("open", "DecodeError", "AEROSET-PATH")  # (not text: the declared check refuses it)
    assert cpp == py


# ============================================================================ zstd
#: one byte of a vector's compressed MMSG frame changed (found by tests/cpp_mutants.py among 9,000
#: mutants): zstd 1.5.7 finds each frame corrupt, while zstd 1.5.4 (Debian 12's libzstd) decodes the
#: first to the very bytes its chunk hash names and the second to other bytes
CORRUPT_FRAMES = [("multishard.aero", 203, 34), ("ihsh.aero", 204, 12)]


def test_the_cpp_reader_decodes_zstd_with_the_python_readers_zstd():
    """cpp/third_party/zstd is the zstd release python-zstandard bundles (the C++ library compiles
    it in by default): both readers run the same decoder on every frame."""
    import zstandard
    text = (ROOT / "cpp" / "third_party" / "zstd" / "zstd.h").read_text()
    got = tuple(int(text.split(f"#define ZSTD_VERSION_{k}")[1].split()[0]) for k in ("MAJOR", "MINOR", "RELEASE"))
    assert got == zstandard.ZSTD_VERSION


def test_a_corrupt_zstd_frame_gets_the_python_readers_verdict(san_build, tmp_path):
    """Frames that one zstd release decodes and another refuses: the C++ reader's verdict is the
    Python reader's (AERO-ZSTD at open) -- whatever zstd the system has."""
    from codec.formats.aero import AeroReader
    lines = []
    for vec, at, byte in CORRUPT_FRAMES:
        with AeroReader(str(VDIR / vec)) as r:
            off = r.chunk(b"MMSG").offset
        data = bytearray((VDIR / vec).read_bytes())
        assert data[off + at] != byte
        data[off + at] = byte
        p = tmp_path / vec
        p.write_bytes(data)
        lines.append(("file", p))
    for path, cpp, py in _compare(san_build, tmp_path, lines):
        assert py == ("open", "CompressionError", "AERO-ZSTD"), path
        assert cpp == py, path


# ============================================================================ msgpack nesting
def _tidx_with_deep_list(depth: int, beside: bool) -> bytes:
    """A TIDX whose one row (or, ``beside``, the map around the rows) has an undeclared key holding
    a list ``depth`` deep."""
    from codec.schemas import aero as S
    import msgpack
    row = msgpack.packb({"name": "w", "dtype": int(S.DType.F32), "shape": [1], "shard_id": 0, "data_off": 0,
                         "data_len": 4})
    deep = b"\xa1k" + b"\x91" * (depth - 1) + b"\x90"
    if beside:
        return b"\x82\xa7tensors\x91" + row + deep
    return b"\x81\xa7tensors\x91" + bytes([row[0] + 1]) + row[1:] + deep


@pytest.mark.parametrize("beside", [False, True], ids=["in a row", "beside the rows"])
def test_msgpack_nesting_has_one_limit_in_both_readers(san_build, tmp_path, beside):
    """A TIDX row -- or a value beside the rows -- with an undeclared key holding a list nested
    around MAX_NESTING and around MSGPACK_MAX_DEPTH (counting from what Python unpacks on its own:
    the row, the value): both readers give the same verdict at every depth, a shallow list opens
    and a deep one is AERO-LIMIT-DECODE (the C++ reader refused a 1,023-deep list in a row that
    Python opened: it counted from the document's top)."""
    depths = [2, *range(MAX_NESTING - 3, MAX_NESTING + 3), *range(payload.MSGPACK_MAX_DEPTH - 2,
                                                                   payload.MSGPACK_MAX_DEPTH + 2)]
    lines = []
    for depth in depths:
        p = tmp_path / f"d{depth}.aero"
        p.write_bytes(_file(b"TIDX", _tidx_with_deep_list(depth, beside), compress=False))
        lines.append(("file", p))
    got = _compare(san_build, tmp_path, lines)
    for depth, (_, cpp, py) in zip(depths, got):
        assert cpp == py, depth
    assert got[0][2] == ("ok", "ok") and got[-1][2] == ("open", "LimitError", "AERO-LIMIT-DECODE")


# ============================================================================ the libFuzzer harnesses
sys.path.insert(0, str(ROOT / "fuzz"))
import _cpp  # noqa: E402  (fuzz/_cpp.py: the C++ harnesses' build, seeds and commands)


def test_run_py_knows_the_cpp_harnesses_and_reports_each_target():
    """fuzz/run.py runs the C++ harnesses as campaigns cpp_<x> and its summary gives each group of
    campaigns its own target and command."""
    spec = __import__("importlib.util").util.spec_from_file_location("fuzz_run_cpp", ROOT / "fuzz" / "run.py")
    run = __import__("importlib.util").util.module_from_spec(spec)
    sys.modules["fuzz_run_cpp"] = run
    spec.loader.exec_module(run)
    assert _cpp.harnesses() == ["cpp_aero_file", "cpp_aeroset_file"]
    camps = [run.Campaign("aero", runs=2_000_000, rounds=60, seconds=100.0, target=2_000_000),
             run.Campaign("cpp_aero_file", runs=1_000_000, rounds=20, seconds=100.0, target=1_000_000)]
    text = run.table(camps, 1_000_000, "fuzz/campaign.json")
    assert text.startswith("Targets: 2,000,000 executions per harness for aero (`python fuzz/run.py --runs 2000000 "
                           "--only aero --state fuzz/campaign.json`); 1,000,000 executions per harness for cpp_aero_file")
    assert "| cpp_aero_file | 1,000,000 | 20 |" in text


def test_a_set_packed_for_the_set_harness_holds_the_set(tmp_path):
    """A cpp_aeroset_file seed is the index JSON and each file of the set behind it, unpacked by
    the harness into a directory that the Python reader reads as the set."""
    from codec.formats.aeroset import AeroSet
    seeds = tmp_path / "seeds"
    assert _cpp.make_seeds("cpp_aeroset_file", seeds) >= 4
    data = _cpp.pack_set((VDIR / "aeroset_ref" / "model.aeroset.json").read_bytes(),
                         {p.name: p.read_bytes() for p in (VDIR / "aeroset_ref").glob("*.aero")})
    assert (seeds / f"seed-{__import__('hashlib').sha1(data).hexdigest()}").read_bytes() == data
    d = _cpp.unpack_set(data, tmp_path / "set").parent
    assert sorted(p.name for p in d.iterdir()) == sorted(p.name for p in (VDIR / "aeroset_ref").iterdir())
    with AeroSet(str(d), remote=False) as s:
        assert s.validate(full=True).ok and len(list(s.tensors)) == 6


@pytest.fixture(scope="session")
def fuzz_build(tmp_path_factory) -> Path:
    """The libFuzzer harnesses, built with clang as fuzz/run.py builds them."""
    missing = [t for t in ("cmake", "clang", "clang++") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"CLANG MISSING ({', '.join(missing)}): the C++ fuzz harnesses are not built here -- "
                    "apt-get install clang libclang-rt-14-dev")
    build = tmp_path_factory.mktemp("cpp-fuzz-build")
    _cpp.build(build)
    return build


def test_the_harnesses_run_clean_on_their_seeds_and_every_finding(fuzz_build, tmp_path):
    """Each harness, built with -fsanitize=fuzzer,address,undefined, runs every seed fuzz/run.py
    gives it, a few hundred mutations of them, and every input a campaign saved in
    fuzz/findings/cpp_*/ (each one fixed and kept as a regression input), without a finding."""
    for name in _cpp.harnesses():
        seeds = tmp_path / f"seeds_{name}"
        assert _cpp.make_seeds(name, seeds) > 0
        corpus = tmp_path / f"corpus_{name}"
        corpus.mkdir()
        exe = _cpp.binary(name, fuzz_build)
        r = subprocess.run([str(exe), "-runs=400", "-seed=1", f"-artifact_prefix={tmp_path}/", "-rss_limit_mb=2048",
                            str(corpus), str(seeds)], capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-4000:]
        assert "Done 400 runs" in r.stderr or "DONE" in r.stderr, r.stderr[-2000:]
        found = sorted((ROOT / "fuzz" / "findings" / name).glob("*"))
        found = [p for p in found if p.is_file()]
        if found:
            r = subprocess.run([str(exe), *map(str, found)], capture_output=True, text=True, timeout=900)
            assert r.returncode == 0, r.stderr[-4000:]


def test_every_cpp_finding_gets_the_python_readers_verdict(san_build, tmp_path):
    """Every input a C++ campaign saved (fuzz/findings/cpp_*/) -- an AERO file, or a set unpacked
    as the set harness unpacks it -- gets the Python reader's verdict from the C++ reader."""
    lines = []
    for p in sorted((ROOT / "fuzz" / "findings" / "cpp_aero_file").glob("*")):
        lines.append(("file", p))
    for k, p in enumerate(sorted((ROOT / "fuzz" / "findings" / "cpp_aeroset_file").glob("*"))):
        lines.append(("set", _cpp.unpack_set(p.read_bytes(), tmp_path / f"set{k}")))
    assert lines, "no finding saved yet"
    for path, cpp, py in _compare(san_build, tmp_path, lines):
        assert cpp == py, path
