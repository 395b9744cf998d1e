"""Open + list an AERO file of very many tiny tensors: peak RSS and time, in a fresh process.

    .venv/bin/python benchmarks/bench_open_many.py [--quick] [--out FILE] [--tensors N]

Target (issue "hostile input"): a valid 1,000,000-tensor AERO opens and lists in <= 400 MB and
(issue "performance") <= 1 s.  The file is written once (hash_b3 on, the default); the child
measures its own VmHWM after its imports (base: codec and its format modules, whose import time
is reported apart) and after ``codec.open`` + ``list(r.tensors)`` + one tensor's info (peak).
"""
import os
import sys
import time

import numpy as np

import _harness as H

CHILD = """
import sys, time
import codec
from codec import registry
t0 = time.perf_counter()
registry.formats()  # the format modules, which the first open of a process imports
imports = time.perf_counter() - t0
mark()
t0 = time.perf_counter()
with codec.open(sys.argv[1]) as r:
    names = list(r.tensors)
    info = r.tensors[names[-1]]
    c = r.chunk(b"TIDX")
report(seconds=time.perf_counter() - t0, imports=imports, tensors=len(names), tidx_stored=c.length,
       tidx_inflated=c.ulen)
"""


def main(argv=None) -> int:
    args = H.parse_args(__doc__.split("\n\n")[0], argv,
                        extra=lambda p: p.add_argument("--tensors", type=int, default=None))
    n = args.tensors or (100_000 if args.quick else 1_000_000)
    t_start = time.perf_counter()
    watch = H.LoadWatch()
    with H.workdir(args.workdir, args.keep) as d:
        path = os.path.join(d, "many.aero")
        sys.path.insert(0, args.codec_root or H.REPO)
        import codec
        t0 = time.perf_counter()
        one = np.zeros(1, np.float32)
        codec.write(path, ((f"layer.{i // 16}.t{i % 16}", one) for i in range(n)), format="aero", uuid=bytes(16))
        write_s = time.perf_counter() - t0
        runs = [H.child_peak_rss(CHILD, path, pythonpath=args.codec_root) for _ in range(args.reps)]
        size = os.path.getsize(path)
    runs.sort(key=lambda r: r["seconds"])
    med = runs[len(runs) // 2]
    peak = sorted(r["peak_rss_mb"] for r in runs)[len(runs) // 2]
    lines = [f"## Open + list {n:,} tiny tensors (AERO, hash_b3 on)", "",
             "Environment: " + ", ".join(f"{k} {v}" for k, v in H.env_info().items()), "",
             "| measure | median | best | target |", "|---|---:|---:|---:|",
             f"| open + list, seconds | {med['seconds']:.2f} | {runs[0]['seconds']:.2f} | <= 1.0 |",
             f"| peak RSS, MB (imports alone: {med['base_rss_mb']:.0f}) | {peak:.0f} | "
             f"{min(r['peak_rss_mb'] for r in runs):.0f} | <= 400 |", "",
             f"- File: {size / 1e6:.1f} MB; TIDX {med['tidx_stored'] / 1e6:.2f} MB stored, "
             f"{med['tidx_inflated'] / 1e6:.1f} MB inflated; written in {write_s:.1f} s.",
             f"- The child imports codec and its format modules before the clock starts (the first open "
             f"of a process imports the format modules: "
             f"{sorted(r['imports'] for r in runs)[len(runs) // 2]:.2f} s more here, median; PYTHONDONTWRITEBYTECODE="
             f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}).",
             f"- Repetitions: {args.reps}, each in a fresh process.",
             f"- Machine load: {watch.verdict()}.",
             f"- Total benchmark time: {time.perf_counter() - t_start:.0f} s."]
    H.publish("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
