"""C++ reader benchmark: ``read_tensor_bytes`` of every tensor of a ~250 MiB AEROSET written by the
Python writer, against a plain ``pread()`` of the same bytes into a fresh buffer per tensor (the
floor: no parsing, no checks, no hashing).

    .venv/bin/python benchmarks/bench_cpp.py [--quick] [--out FILE] [--build-dir DIR]

Builds cpp/ (Release, no sanitizers) into the work directory unless ``--build-dir`` names an
existing build with ``aero_bench``.  Each timed pass is one run of ``aero_bench`` (the time is
taken inside it, after its start-up); the contenders run interleaved on a warm page cache.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import _harness as H

CPP = os.path.join(H.REPO, "cpp")


def build(where: str) -> str:
    subprocess.run(["cmake", "-S", CPP, "-B", where, "-DCMAKE_BUILD_TYPE=Release"], check=True,
                   capture_output=True)
    subprocess.run(["cmake", "--build", where, "-j", "2", "--target", "aero_bench"], check=True, capture_output=True)
    return where


def run(exe: str, set_dir: str, mode: str) -> dict:
    p = subprocess.run([exe, set_dir, mode], check=True, capture_output=True, text=True)
    return json.loads(p.stdout)


def main(argv=None) -> int:
    a = H.parse_args(__doc__.splitlines()[0], argv,
                     extra=lambda p: p.add_argument("--build-dir", default=None, help="an existing cpp/ build"))
    sys.path.insert(0, a.codec_root or H.REPO)
    import numpy as np
    from codec.formats.aeroset import write_aeroset

    t_start = time.perf_counter()
    watch = H.LoadWatch()
    watch.sample("start")
    n, each = (20, 1 * H.MiB) if a.quick else (100, 5 * H.MiB // 2)  # ~250 MiB in the full run
    with H.workdir(a.workdir, a.keep) as wd:
        bdir = a.build_dir or build(os.path.join(wd, "build"))
        exe = os.path.join(bdir, "aero_bench")
        rng = np.random.default_rng(0)
        dtypes = [np.float32, np.float16, np.int64, np.uint8]
        tensors = {f"layer.{i}.weight": rng.integers(0, 255, each, dtype=np.uint8).view(dtypes[i % 4])
                   for i in range(n)}
        set_dir = os.path.join(wd, "model")
        write_aeroset(set_dir, tensors, model_name="bench", max_shard_bytes=64 * H.MiB, max_part_shards=1)
        total = sum(t.nbytes for t in tensors.values())
        for f in sorted(os.listdir(set_dir)):
            H.warm(os.path.join(set_dir, f))
        modes = ["read", "read_noverify", "floor"]
        for m in modes:  # warm-up (and the three read the same number of bytes)
            assert run(exe, set_dir, m)["bytes"] == total
        times = {m: [] for m in modes}
        for r in range(a.reps):
            for m in (modes if r % 2 == 0 else modes[::-1]):
                times[m].append(run(exe, set_dir, m)["seconds"])
        watch.sample("end")
        med = {m: statistics.median(v) for m, v in times.items()}
        best = {m: min(v) for m, v in times.items()}
        parts = len([f for f in os.listdir(set_dir) if f.startswith("part-")])
        table = H.Table("C++ reader")
        what = f"{n} tensors, {total / H.MiB:.0f} MiB, {parts} parts"
        table.add(H.Row(f"read_tensor_bytes every tensor ({what}), hash_b3 checked", med["read"],
                        "pread() of the same bytes", med["floor"], best=best["read"], peer_best=best["floor"],
                        target="— (hashes every byte once)"))
        table.add(H.Row(f"read_tensor_bytes every tensor ({what}), verify=false", med["read_noverify"],
                        "pread() of the same bytes", med["floor"], target="<= 1.2x", limit=1.2,
                        best=best["read_noverify"], peer_best=best["floor"]))
        table.notes += [
            "Medians of interleaved repetitions (best in brackets); ratio = C++ reader / floor; each pass is one run "
            "of cpp/tools/aero_bench (Release build), timed inside it.",
            "The reader's pass includes opening the set (index JSON, index.aero, each part's structure and TIDX) and "
            "copying each tensor out of the mapping into a new std::vector; the floor opens each part and pread()s each "
            "tensor's range into a new std::vector (ranges planned before its clock starts).",
            "hash_b3: BLAKE3 (official C implementation, one thread, SIMD chosen at run time) of every tensor's bytes "
            "before they are returned.",
            f"Set written by codec.formats.aeroset.write_aeroset (max_shard_bytes 64 MiB, one shard per part); page "
            f"cache warm; git {H.git_state(paths=('cpp', 'codec', 'schemas'))}.",
        ]
        params = {"mode": "quick" if a.quick else "full", "tensors": n, "payload": f"{total / H.MiB:.1f} MiB",
                  "timed reps": a.reps, "page cache": "warm"}
        report = H.render(f"C++ reader benchmark ({params['mode']})", table, H.env_info(), watch, params,
                          time.perf_counter() - t_start)
        H.publish(report, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
