"""The C++ reader's libFuzzer harnesses (``fuzz/cpp/fuzz_*.cpp``) for fuzz/run.py.

A harness ``fuzz/cpp/fuzz_<x>.cpp`` is the campaign ``cpp_<x>`` (``cpp_aero_file``:
``aero::AeroFile``; ``cpp_aeroset_file``: ``aero::AeroSetFile``).  It is built with clang
(``-fsanitize=fuzzer,address,undefined``; the library with ``fuzzer-no-link``) by CMake's
``AERO_FUZZ`` option into ``fuzz/build-cpp/`` (git-ignored), the first time a round needs it::

    cmake -S cpp -B fuzz/build-cpp -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \\
          -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS='-O1 -g' -DAERO_FUZZ=ON -DAERO_BUILD_TESTS=OFF
    cmake --build fuzz/build-cpp -j2

and run on ``fuzz/corpus_cpp_<x>/`` (git-ignored), seeded in its first round from what the
Python harnesses seed from and from their corpora when they exist (:func:`make_seeds`).
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VECTORS = REPO.parent / "shared" / "vectors" / "aero"
BUILD = HERE / "build-cpp"
#: the separator of the files of a set in one cpp_aeroset_file input (fuzz/cpp/fuzz_aeroset_file.cpp)
SET_SEP = b"\n@@FILE "
#: the sets of fuzz_aeroset.py's index target, in its order (mode byte >> 1) % 3
SETS = ["aeroset_ref", "aeroset_global", "bug_aeroset_writer_asis"]


def harnesses() -> list[str]:
    return sorted("cpp_" + p.stem[len("fuzz_"):] for p in (HERE / "cpp").glob("fuzz_*.cpp"))


def binary(name: str, build: Path = BUILD) -> Path:
    return build / ("fuzz_" + name[len("cpp_"):])


def build(build: Path = BUILD) -> None:
    """Configure (once) and build the harnesses; raises CalledProcessError with CMake's output."""
    if not (build / "CMakeCache.txt").exists():
        subprocess.run(["cmake", "-S", str(REPO / "cpp"), "-B", str(build), "-DCMAKE_C_COMPILER=clang",
                        "-DCMAKE_CXX_COMPILER=clang++", "-DCMAKE_BUILD_TYPE=None", "-DCMAKE_CXX_FLAGS=-O1 -g",
                        "-DCMAKE_C_FLAGS=-O2", "-DAERO_FUZZ=ON", "-DAERO_BUILD_TESTS=OFF"],
                       check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "-j", "2"], check=True, capture_output=True)


def pack_set(index: bytes, files: dict[str, bytes]) -> bytes:
    """One cpp_aeroset_file input: the index JSON and the named files beside it."""
    return index + b"".join(SET_SEP + name.encode() + b"\n" + data for name, data in sorted(files.items()))


def unpack_set(data: bytes, d: Path) -> Path:
    """Write one cpp_aeroset_file input into directory ``d`` as the harness does (the index as
    ``model.aeroset.json``, each file whose name is [A-Za-z0-9._-]{1,64} -- not ".", "..", the
    index's -- beside it, a later one of a name winning); returns the index's path."""
    index, *sections = data.split(SET_SEP)
    d.mkdir(parents=True, exist_ok=True)
    files = {}
    for sec in sections:
        name, nl, body = sec.partition(b"\n")
        if not nl:
            break
        ok = 0 < len(name) <= 64 and name not in (b".", b"..", b"model.aeroset.json") and \
            all(chr(c).isalnum() and c < 128 or c in b"._-" for c in name)
        if ok:
            files[name.decode()] = body
    (d / "model.aeroset.json").write_bytes(index)
    for name, body in files.items():
        (d / name).write_bytes(body)
    return d / "model.aeroset.json"


def _set_files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.glob("*.aero"))}


def make_seeds(name: str, dst: Path) -> int:
    """Write the seeds of harness ``name`` into ``dst``; returns how many.

    cpp_aero_file: every ``*.aero`` of the conformance vectors (invalid ones and the sets' parts
    included), the Python ``aero`` corpus and the AERO files of the Python ``aeroset`` corpus
    (its ``partial`` inputs, mode byte dropped).  cpp_aeroset_file: each conformance set (every
    index JSON of it) packed with its files, and each ``index`` input of the Python ``aeroset``
    corpus packed with the files of the set it names."""
    dst.mkdir(parents=True, exist_ok=True)
    seeds: list[bytes] = []
    py_set = [p.read_bytes() for p in sorted((HERE / "corpus_aeroset").glob("*")) if p.is_file()]
    if name == "cpp_aero_file":
        seeds += [p.read_bytes() for p in sorted(VECTORS.rglob("*.aero"))]
        seeds += [p.read_bytes() for p in sorted((HERE / "corpus_aero").glob("*")) if p.is_file()]
        seeds += [d[1:] for d in py_set if d and d[0] & 1]
    elif name == "cpp_aeroset_file":
        for s in SETS:
            for index in sorted((VECTORS / s).glob("*.aeroset.json")):
                seeds.append(pack_set(index.read_bytes(), _set_files(VECTORS / s)))
        seeds += [pack_set(d[1:], _set_files(VECTORS / SETS[(d[0] >> 1) % len(SETS)]))
                  for d in py_set if d and not d[0] & 1]
    else:
        raise ValueError(f"unknown C++ harness {name!r}")
    for data in seeds:
        (dst / f"seed-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
    return len(seeds)


def command(name: str, n: int, rss_limit_mb: int, timeout: int, first_round: bool) -> list[str]:
    """The libFuzzer command of one round of ``n`` executions (built and seeded when needed)."""
    exe = binary(name)
    try:
        build()  # (incremental: every round runs the checkout's code)
    except subprocess.CalledProcessError:
        if not exe.exists():
            raise
    corpus = HERE / f"corpus_{name}"
    findings = HERE / "findings" / name
    findings.mkdir(parents=True, exist_ok=True)
    cmd = [str(exe), f"-runs={n}", "-print_final_stats=1", f"-rss_limit_mb={rss_limit_mb}", f"-timeout={timeout}",
           f"-artifact_prefix={findings}/", str(corpus)]
    if first_round or not corpus.is_dir() or not any(corpus.iterdir()):
        seeds = HERE / f"corpus_{name}" / ".." / f"corpus_{name}_seeds"
        shutil.rmtree(seeds, ignore_errors=True)
        make_seeds(name, seeds)
        corpus.mkdir(parents=True, exist_ok=True)
        cmd.append(str(seeds.resolve()))
    return cmd
