"""diff of two ~1 GiB models against reading both: time and peak RSS, each run in a fresh process.

    .venv/bin/python benchmarks/bench_diff.py [--quick] [--reps N] [--out FILE]

The checkpoint of ``bench_convert.py`` (~1 GiB of safetensors; a few hundred tensors of 1-64
MiB, float16 / bfloat16 / float32, random bytes) is compared by ``codec.diff``

* with a copy of itself (another file, the same bytes: every tensor ``identical``),
* with the same tensors written as AERO (another format, hash_b3 checked on each read: extra),
* with a copy whose every element has its lowest bit flipped (every element measured: the
  worst case),

against the floor: reading both files through the page cache (16 MiB reads, nothing compared),
and, as the peer, ``safetensors.numpy.load_file`` of both files and ``numpy.array_equal`` of
every tensor's bytes.

Targets (issue 34): two identical files diff in <= 2x the time of reading both; peak RSS
< 300 MB in every case.
"""
from __future__ import annotations

import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _harness, bench_convert

import _harness as H  # noqa: E402
from bench_convert import make_checkpoint  # noqa: E402

DIFF = """
import sys, time
import codec
codec.registry.formats()  # every format module imported before timing
mark()
t0 = time.perf_counter()
d = codec.diff(sys.argv[1], sys.argv[2], progress=False)
seconds = time.perf_counter() - t0
c = d.counts()
assert c[sys.argv[3]] == len(d.tensors), c
report(seconds=seconds)
"""
READ_BOTH = """
import sys, time
mark()
t0 = time.perf_counter()
buf = bytearray(16 << 20)
for p in sys.argv[1:3]:
    with open(p, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
report(seconds=time.perf_counter() - t0)
"""
PEER = """
import sys, time
import numpy as np, ml_dtypes
from safetensors.numpy import load_file
mark()
t0 = time.perf_counter()
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
same = all(np.array_equal(a[k].view(np.uint8), b[k].view(np.uint8)) for k in a)
report(seconds=time.perf_counter() - t0, same=same)
"""


def flipped(src: str, dst: str) -> None:
    """``src`` with the lowest bit of every element flipped (every element differs)."""
    from safetensors.numpy import load_file, save_file
    t = load_file(src)
    out = {}
    for k, a in t.items():
        u = a.view(f"u{a.dtype.itemsize}")
        out[k] = (u ^ np.array(1, u.dtype)).view(a.dtype)
    save_file(out, dst)


def main(argv=None) -> int:
    args = H.parse_args(__doc__.split("\n\n")[0], argv)
    t_start = time.perf_counter()
    total = (128 if args.quick else 1024) * H.MiB
    reps, root = args.reps, args.codec_root
    watch = H.LoadWatch()
    watch.sample("start")
    env = H.env_info()
    table = H.Table("Diff")
    with H.workdir(args.workdir, args.keep) as wd:
        a, same, other, aero = (os.path.join(wd, f) for f in ("a.safetensors", "copy.safetensors",
                                                               "flipped.safetensors", "a.aero"))
        print(f"# writing a {total / H.MiB:.0f} MiB checkpoint, a copy, a flipped copy, the AERO", flush=True)
        n, kinds = make_checkpoint(a, total)
        shutil.copyfile(a, same)
        flipped(a, other)
        sys.path.insert(0, root or H.REPO)
        import codec
        codec.convert(a, aero, progress=False)
        size = os.path.getsize(a)
        for p in (a, same, other, aero):
            H.warm(p)
        print(f"# diff {size / H.MiB:.0f} MiB x 2, {n} tensors ({kinds}), {reps} interleaved runs", flush=True)
        t = H.child_compare({
            "same": (DIFF, a, same, "identical"),
            "read": (READ_BOTH, a, same),
            "peer": (PEER, a, same),
            "aero": (DIFF, a, aero, "identical"),
            "changed": (DIFF, a, other, "different"),
            "read_changed": (READ_BOTH, a, other),
        }, reps=reps, pythonpath=root)
        watch.sample("end")
    s, r, p, x, c, rc = (t[k] for k in ("same", "read", "peer", "aero", "changed", "read_changed"))
    mib = f"{size / H.MiB:.0f} MiB"
    table.add(H.Row(f"codec.diff of two identical {mib} safetensors files ({n} tensors)", s.median,
                    "reading both files (16 MiB reads)", r.median, "<= 2x", 2.0, best=s.best, peer_best=r.best))
    table.add(H.Row("the same (extra)", s.median, "load_file both + numpy.array_equal", p.median,
                    best=s.best, peer_best=p.best))
    table.add(H.Row("codec.diff, safetensors against the same tensors as AERO (hash_b3 checked; extra)",
                    x.median, "reading both files", r.median, best=x.best, peer_best=r.best))
    table.add(H.Row("codec.diff, every element differs (lowest bit flipped)", c.median,
                    "reading both files", rc.median, best=c.best, peer_best=rc.best))
    for what, o in (("identical", s), ("AERO", x), ("every element differs", c)):
        table.add(H.Row(f"peak RSS, {what} (fresh process; imports alone: {o.reports[0]['base_rss_mb']:.0f} MB)",
                        o.rss_median, "load_file both", p.rss_median, "< 300 MB", 300.0, strict=True,
                        absolute=True, unit="MB"))
    table.notes += [
        f"Each contender ran {reps} times in a fresh interpreter (plus one untimed warm-up round), interleaved, "
        "order reversed every other round; medians, best in brackets; ratio = modelcodec / peer on the medians. "
        "Times are taken inside the child after its imports.",
        f"Checkpoint: {n} tensors ({', '.join(f'{v} {k}' for k, v in kinds.items())}) of 1-64 MiB, random "
        "bytes, every file in the page cache. Each diff run checks that every tensor got the expected status.",
        f"Peak RSS = the child's VmHWM (resident mapped file pages count). Reading both: {r.rss_median:.0f} MB.",
    ]
    params = {"mode": "quick" if args.quick else "full", "payload": f"{mib} x 2", "tensors": n,
              "runs per contender": reps}
    H.publish(H.render(f"Diff benchmark ({params['mode']})", table, env, watch, params,
                       time.perf_counter() - t_start), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
