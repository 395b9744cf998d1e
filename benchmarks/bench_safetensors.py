"""safetensors: open + touch every tensor against safetensors.safe_open and the floor, each run in a fresh process.

    .venv/bin/python benchmarks/bench_safetensors.py [--quick] [--reps N] [--out FILE] [--tensors N]

"Touch" = read one element of every tensor (its first, as a float, summed): what a loader pays
to reach each tensor.  Contenders: ``codec.open(path)`` + ``r.tensor(name)``;
``safetensors.safe_open(path, framework="numpy")`` + ``get_tensor(name)`` (the peer; it
returns a private copy of each tensor); the floor: ``mmap`` of the file, ``json.loads`` of its
header, one byte read at each tensor's offset.

1. 10,000 small tensors (64 B - 64 KiB; float32, float16, bfloat16, int64; ~45-character
   names): the header dominates.  Target: at least as fast as safe_open (ratio <= 1.0x).
2. a ~1 GiB checkpoint (the one ``bench_convert.py`` converts: a few hundred tensors of 1-64
   MiB): the peer copies every tensor, modelcodec hands out views.
3. when the real checkpoint the tests use is on disk (``$MODELCODEC_TEST_INPUTS/minilm/
   model.safetensors``, 91 MB, 104 tensors; see tests/test_real_files.py, never downloaded
   here): the same.

Every contender runs in its own fresh interpreter, interleaved, time measured inside the child
after its imports; peak RSS = the child's VmHWM.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _harness

import _harness as H  # noqa: E402
from bench_convert import make_checkpoint  # noqa: E402

OURS = """
import sys, time
import codec
codec.registry.formats()  # every format module imported before timing, as the peer's are
mark()
t0 = time.perf_counter()
s, k = 0.0, 0
with codec.open(sys.argv[1]) as r:
    for n in r.tensors:
        a = r.tensor(n)
        if a.size:
            s += float(a.reshape(-1)[0])
        k += 1
report(seconds=time.perf_counter() - t0, tensors=k, sum=s)
"""
PEER = """
import sys, time
import ml_dtypes  # (numpy knows bfloat16 through it)
from safetensors import safe_open
mark()
t0 = time.perf_counter()
s, k = 0.0, 0
with safe_open(sys.argv[1], framework="numpy") as f:
    for n in f.keys():
        a = f.get_tensor(n)
        if a.size:
            s += float(a.reshape(-1)[0])
        k += 1
report(seconds=time.perf_counter() - t0, tensors=k, sum=s)
"""
FLOOR = """
import sys, time, mmap, json
mark()
t0 = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
n = int.from_bytes(m[:8], "little")
h = json.loads(m[8:8 + n])
base = 8 + n
s = 0
for key, e in h.items():
    if key != "__metadata__" and e["data_offsets"][1] > e["data_offsets"][0]:
        s += m[base + e["data_offsets"][0]]
m.close()
report(seconds=time.perf_counter() - t0, tensors=len(h) - ("__metadata__" in h))
"""

REAL = Path(os.environ.get("MODELCODEC_TEST_INPUTS", Path.home() / ".cache" / "modelcodec-test-inputs"))
REAL_FILE = REAL / "minilm" / "model.safetensors"


def make_small(path: str, count: int, seed: int = 0) -> dict:
    """``count`` tensors of 64 B - 64 KiB (log-uniform), mixed dtypes, realistic names."""
    import ml_dtypes
    from safetensors.numpy import save_file
    rng = np.random.default_rng(seed)
    kinds = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.int64))
    sizes = np.exp(rng.uniform(np.log(64), np.log(64 * 1024), count)).astype(np.int64)
    out, counts = {}, {}
    for i, nb in enumerate(sizes.tolist()):
        dt = kinds[i % 4] if i % 13 else kinds[3]
        n = max(1, nb // dt.itemsize)
        a = np.frombuffer(rng.bytes(n * dt.itemsize), dtype=dt)
        if dt.kind == "f":  # finite values (a NaN first element would make every sum NaN)
            a = rng.standard_normal(n).astype(dt)
        out[f"model.layers.{i // 40}.experts.{i % 40}.ffn.scale_{i % 3}"] = a
        counts[dt.name] = counts.get(dt.name, 0) + 1
    save_file(out, path)
    return counts


def rows(table: H.Table, label: str, path: str, reps: int, root: str | None, *, target: bool = False) -> None:
    H.warm(path)
    t = H.child_compare({"ours": (OURS, path), "peer": (PEER, path), "floor": (FLOOR, path)}, reps=reps,
                        pythonpath=root)
    o, p, f = t["ours"], t["peer"], t["floor"]
    if o.reports[0]["tensors"] != p.reports[0]["tensors"] or o.reports[0]["tensors"] != f.reports[0]["tensors"]:
        raise SystemExit(f"{label}: the contenders saw different tensor counts")
    a, b = o.reports[0]["sum"], p.reports[0]["sum"]
    if not (a == b or (a != a and b != b)):  # (NaN == NaN for this check)
        raise SystemExit(f"{label}: the contenders read different values ({a} vs {b})")
    table.add(H.Row(f"{label}: open + touch every tensor", o.median, "safe_open(numpy) + get_tensor", p.median,
                    "<= 1.0x" if target else "", 1.0 if target else None, best=o.best, peer_best=p.best))
    table.add(H.Row("the same, vs the floor (mmap + json header + one byte per tensor)", o.median, "floor",
                    f.median, best=o.best, peer_best=f.best))
    table.add(H.Row("the same, peak RSS (extra)", o.rss_median, "safe_open(numpy) + get_tensor", p.rss_median,
                    unit="MB"))


def main(argv=None) -> int:
    args = H.parse_args(__doc__.split("\n\n")[0], argv, extra=lambda p: p.add_argument(
        "--tensors", type=int, default=None, help="small tensors (default 10,000; quick 2,000)"))
    t_start = time.perf_counter()
    n_small = args.tensors or (2_000 if args.quick else 10_000)
    total = (128 if args.quick else 1024) * H.MiB
    reps, root = max(args.reps, 5), args.codec_root
    watch = H.LoadWatch()
    watch.sample("start")
    env = H.env_info()
    table = H.Table("safetensors")
    with H.workdir(args.workdir, args.keep) as wd:
        small = os.path.join(wd, "small.safetensors")
        kinds = make_small(small, n_small)
        print(f"# 1. {n_small} small tensors ({reps} interleaved runs per contender)", flush=True)
        rows(table, f"{n_small:,} small tensors ({os.path.getsize(small) / 1e6:.0f} MB)", small, reps, root,
             target=True)
        H.rm(small)
        watch.sample("after small")
        big = os.path.join(wd, "big.safetensors")
        n_big, _ = make_checkpoint(big, total)
        print(f"# 2. checkpoint of {n_big} tensors", flush=True)
        rows(table, f"checkpoint, {os.path.getsize(big) / H.MiB:.0f} MiB in {n_big} tensors of 1-64 MiB", big, reps,
             root)
        H.rm(big)
        watch.sample("after checkpoint")
        if REAL_FILE.is_file():
            print(f"# 3. real file {REAL_FILE}", flush=True)
            rows(table, f"real file: all-MiniLM-L6-v2 model.safetensors ({REAL_FILE.stat().st_size / 1e6:.0f} MB, "
                        "104 tensors)", str(REAL_FILE), reps, root)
        else:
            table.notes.append(f"Real-file rows skipped: {REAL_FILE} is not on disk (tests/test_real_files.py "
                               "downloads it).")
        watch.sample("end")
    table.notes[:0] = [
        f"Each contender ran {reps} times in a fresh interpreter (plus one untimed warm-up round), interleaved, "
        "order reversed every other round; medians, best in brackets; ratio = modelcodec / peer on the medians "
        "(best / best second). Times are taken inside the child after its imports (modelcodec imports every "
        "format module first).",
        f"Small tensors: {', '.join(f'{v:,} {k}' for k, v in kinds.items())}; the checkpoint: float16, bfloat16 and "
        "float32 in equal numbers, random bytes. Files in the page cache. The sum of the first elements is checked "
        "equal between modelcodec and the peer.",
        "safe_open's get_tensor returns a private copy of each tensor (it reads all of its bytes); codec's "
        "r.tensor is a read-only view into the mapping (touching one element faults in one page).",
    ]
    params = {"mode": "quick" if args.quick else "full", "small tensors": n_small,
              "checkpoint": f"{total / H.MiB:.0f} MiB", "runs per contender": reps}
    H.publish(H.render(f"safetensors benchmark ({params['mode']})", table, env, watch, params,
                       time.perf_counter() - t_start), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
