"""Conversion and the new formats: time and peak RSS, each in a fresh process, with the peers and the floor.

    .venv/bin/python benchmarks/bench_convert.py [--quick] [--reps N] [--out FILE]

1. safetensors -> AERO of a ~1 GiB checkpoint (a few hundred tensors of 1-64 MiB, float16,
   bfloat16 and float32) with ``codec.convert`` vs ``safetensors.numpy.load_file`` +
   ``save_file`` of the same file (the peer), and the floor: the same bytes read and written
   (a copy through the page cache).  Targets: time <= 1.1x the peer, peak RSS < 300 MB.
2. GGUF open + list (names, shapes, types) of a file of many tensors and a 100 k-string
   vocabulary vs ``gguf.GGUFReader`` (target: >= 10x faster), and the floor (reading its
   header bytes).
3. safetensors open + touch every tensor (one element each) vs ``safetensors.safe_open``
   (framework numpy).

Every contender runs in its own fresh interpreter (time measured inside it, after imports;
peak RSS = the child's VmHWM, which counts the file pages it maps).
"""
import os
import sys
import time

import numpy as np

import _harness as H

CONVERT = """
import sys, time
import codec
codec.registry.formats()  # every format module imported before timing, as the peers' are
mark()
t0 = time.perf_counter()
codec.convert(sys.argv[1], sys.argv[2], progress=False)
report(seconds=time.perf_counter() - t0)
"""
PEER_CONVERT = """
import sys, time
import ml_dtypes  # (numpy knows bfloat16 through it)
from safetensors.numpy import load_file, save_file
mark()
t0 = time.perf_counter()
save_file(load_file(sys.argv[1]), sys.argv[2])
report(seconds=time.perf_counter() - t0)
"""
COPY = """
import sys, time, os
mark()
t0 = time.perf_counter()
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "wb") as g:
    while True:
        b = f.read(16 << 20)
        if not b:
            break
        g.write(b)
    g.flush()
    os.fsync(g.fileno())
report(seconds=time.perf_counter() - t0)
"""
LIST = """
import sys, time
import codec
codec.registry.formats()  # every format module imported before timing, as the peers' are
mark()
t0 = time.perf_counter()
with codec.open(sys.argv[1]) as r:
    rows = [(n, t.shape, t.dtype_name) for n, t in r.tensors.items()]
    md = r.metadata
report(seconds=time.perf_counter() - t0, tensors=len(rows))
"""
PEER_LIST = """
import sys, time
import gguf
mark()
t0 = time.perf_counter()
r = gguf.GGUFReader(sys.argv[1])
rows = [(t.name, t.shape, t.tensor_type) for t in r.tensors]
report(seconds=time.perf_counter() - t0, tensors=len(rows))
"""
HEAD = """
import sys, time
mark()
t0 = time.perf_counter()
n = int(sys.argv[2])
with open(sys.argv[1], "rb") as f:
    b = f.read(n)
report(seconds=time.perf_counter() - t0)
"""
TOUCH = """
import sys, time
import codec
codec.registry.formats()  # every format module imported before timing, as the peers' are
mark()
t0 = time.perf_counter()
s = 0.0
with codec.open(sys.argv[1]) as r:
    for n in r.tensors:
        a = r.tensor(n)
        s += float(a.reshape(-1)[0]) if a.size else 0.0
report(seconds=time.perf_counter() - t0)
"""
PEER_TOUCH = """
import sys, time
from safetensors import safe_open
mark()
t0 = time.perf_counter()
s = 0.0
with safe_open(sys.argv[1], framework="numpy") as f:
    for n in f.keys():
        a = f.get_tensor(n)
        s += float(a.reshape(-1)[0]) if a.size else 0.0
report(seconds=time.perf_counter() - t0)
"""
MMAP_TOUCH = """
import sys, time, mmap, json
mark()
t0 = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    n = int.from_bytes(m[:8], "little")
    h = json.loads(m[8:8 + n])
    s = sum(m[8 + n + e["data_offsets"][0]] for k, e in h.items() if k != "__metadata__" and e["data_offsets"][1] > e["data_offsets"][0])
report(seconds=time.perf_counter() - t0)
"""


def runs(code: str, *args: str, reps: int, root: str | None, cleanup=None) -> H.Timing:
    t = H.Timing(code.strip().splitlines()[1])
    t.rss = []
    for _ in range(reps):
        if cleanup:
            cleanup()
        r = H.child_peak_rss(code, *args, pythonpath=root)
        t.times.append(r["seconds"])
        t.rss.append(r["peak_rss_mb"])
    return t


def checkpoint(path: str, total: int) -> int:
    """A safetensors file of ~``total`` bytes: tensors of 1-64 MiB, float16 / bfloat16 / float32."""
    import ml_dtypes
    from safetensors.numpy import save_file
    rng = np.random.default_rng(0)
    tensors, size, i = {}, 0, 0
    kinds = [np.float16, ml_dtypes.bfloat16, np.float32]
    while size < total:
        mib = int(rng.choice([1, 2, 4, 8, 16, 64]))
        dt = np.dtype(kinds[i % 3])
        n = mib * H.MiB // dt.itemsize
        tensors[f"layers.{i // 8}.w{i % 8}"] = rng.integers(0, 2**15, n, dtype=np.uint16 if dt.itemsize == 2 else
                                                             np.uint32).view(dt).reshape(-1, 256)
        size += n * dt.itemsize
        i += 1
    save_file(tensors, path)
    return len(tensors)


def gguf_file(path: str, n_tensors: int, vocab: int) -> None:
    import gguf
    w = gguf.GGUFWriter(path, "llama")
    w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(vocab)])
    w.add_array("tokenizer.ggml.scores", [float(i) for i in range(vocab)])
    one = np.zeros((4, 8), np.float32)
    for i in range(n_tensors):
        w.add_tensor(f"blk.{i // 9}.t{i % 9}.weight", one)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv=None) -> int:
    args = H.parse_args(__doc__.split("\n\n")[0], argv)
    t_start = time.perf_counter()
    total, n_gguf, vocab = ((128 * H.MiB, 2_000, 20_000) if args.quick else (1 * H.GiB, 10_000, 100_000))
    reps, root = args.reps, args.codec_root
    watch = H.LoadWatch()
    watch.sample("start")
    env = H.env_info()
    table = H.Table("Conversion, GGUF and safetensors")
    with H.workdir(args.workdir, args.keep) as wd:
        src, dst, peer_dst, copy_dst = (os.path.join(wd, f) for f in ("m.safetensors", "m.aero", "peer.safetensors",
                                                                       "copy.bin"))
        n = checkpoint(src, total)
        size = os.path.getsize(src)
        H.warm(src)
        print(f"# 1. convert {size / H.MiB:.0f} MiB, {n} tensors", flush=True)
        clean = lambda: [H.rm(p) for p in (dst, peer_dst, copy_dst)]  # noqa: E731
        ours = runs(CONVERT, src, dst, reps=reps, root=root, cleanup=clean)
        peer = runs(PEER_CONVERT, src, peer_dst, reps=reps, root=root, cleanup=clean)
        floor = runs(COPY, src, copy_dst, reps=reps, root=root, cleanup=clean)
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        table.add(H.Row(f"safetensors -> AERO, {size / H.MiB:.0f} MiB, {n} tensors: codec.convert", ours.median,
                        "load_file + save_file", peer.median, "<= 1.1x", 1.1, best=ours.best, peer_best=peer.best))
        table.add(H.Row("the same, vs the floor (read + write + fsync of the same bytes)", ours.median,
                        "copy", floor.median, best=ours.best, peer_best=floor.best))
        table.add(H.Row("the same, peak RSS", med(ours.rss), "load_file + save_file", med(peer.rss), "< 300 MB",
                        300.0, strict=True, absolute=True, unit="MB"))
        clean()
        H.rm(src)
        watch.sample("after convert")

        g = os.path.join(wd, "many.gguf")
        gguf_file(g, n_gguf, vocab)
        head = str(os.path.getsize(g) - n_gguf * 128)  # (the tensors' data comes last)
        print(f"# 2. GGUF open + list, {n_gguf} tensors, {vocab} tokens", flush=True)
        ours = runs(LIST, g, reps=reps, root=root)
        peer = runs(PEER_LIST, g, reps=reps, root=root)
        floor = runs(HEAD, g, head, reps=reps, root=root)
        table.add(H.Row(f"GGUF open + list {n_gguf:,} tensors and a {vocab:,}-token vocabulary", ours.median,
                        "gguf.GGUFReader", peer.median, "<= 0.1x (10x faster)", 0.1, best=ours.best,
                        peer_best=peer.best))
        table.add(H.Row("the same, vs the floor (read the header bytes)", ours.median, "read()", floor.median,
                        best=ours.best, peer_best=floor.best))
        H.rm(g)
        watch.sample("after gguf")

        s = os.path.join(wd, "many.safetensors")
        from safetensors.numpy import save_file
        save_file({f"t{i}": np.full((16, 16), i, np.float32) for i in range(n_gguf)}, s)
        print(f"# 3. safetensors open + touch {n_gguf} tensors", flush=True)
        ours = runs(TOUCH, s, reps=reps, root=root)
        peer = runs(PEER_TOUCH, s, reps=reps, root=root)
        floor = runs(MMAP_TOUCH, s, reps=reps, root=root)
        table.add(H.Row(f"safetensors open + touch {n_gguf:,} tensors", ours.median, "safe_open (numpy)",
                        peer.median, "<= 1.0x", 1.0, best=ours.best, peer_best=peer.best))
        table.add(H.Row("the same, vs the floor (mmap, json header, one byte per tensor)", ours.median,
                        "mmap + json", floor.median, best=ours.best, peer_best=floor.best))
        watch.sample("end")
    table.notes.append(f"Each run in a fresh interpreter, {reps} runs per contender, medians (best in brackets); "
                       "times measured inside the child after its imports (for modelcodec: every format module, as "
                       "the peers' imports); source files in the page cache.")
    params = {"mode": "quick" if args.quick else "full", "runs": reps}
    H.publish(H.render("Conversion, GGUF and safetensors", table, env, watch, params, time.perf_counter() - t_start),
              args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
