"""safetensors -> AERO conversion: time and peak RSS against the peer and the floor, each run in a fresh process.

    .venv/bin/python benchmarks/bench_convert.py [--quick] [--reps N] [--out FILE]

A ~1 GiB safetensors checkpoint (``safetensors.numpy.save_file``; a few hundred tensors of
1-64 MiB, float16 / bfloat16 / float32, random bytes) is converted to AERO with
``codec.convert(src, dst)`` and, as the peer, read and written back by
``safetensors.numpy.load_file`` + ``save_file``.  The floor is a copy of the same bytes
through the page cache (16 MiB reads and writes), with and without fsync.

Targets (issue 12): convert peak RSS < 300 MB, time <= 1.1x the peer.

Every contender runs in its own fresh interpreter, interleaved (A B C D, D C B A, ...); time
is measured inside the child after its imports (modelcodec imports every format module
first, as the peers import theirs), peak RSS is the child's VmHWM (mapped file pages
included), and the parent also takes each child's whole wall time (start-up and imports
included).  Outputs are deleted and ``sync``ed before every run; the source stays in the
page cache.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _harness

import _harness as H  # noqa: E402

CONVERT = """
import sys, time
import codec
codec.registry.formats()  # every format module imported before timing, as the peers' are
mark()
t0 = time.perf_counter()
codec.convert(sys.argv[1], sys.argv[2], progress=False)
report(seconds=time.perf_counter() - t0)
"""
PEER = """
import sys, time, os
import ml_dtypes  # (numpy knows bfloat16 through it)
from safetensors.numpy import load_file, save_file
mark()
t0 = time.perf_counter()
save_file(load_file(sys.argv[1]), sys.argv[2])
if sys.argv[3] == "fsync":
    fd = os.open(sys.argv[2], os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
report(seconds=time.perf_counter() - t0)
"""
COPY = """
import sys, time, os
mark()
t0 = time.perf_counter()
with open(sys.argv[1], "rb", buffering=0) as f, open(sys.argv[2], "wb", buffering=0) as g:
    buf = bytearray(16 << 20)
    view = memoryview(buf)
    while True:
        n = f.readinto(buf)
        if not n:
            break
        g.write(view[:n])
    if sys.argv[3] == "fsync":
        os.fsync(g.fileno())
report(seconds=time.perf_counter() - t0)
"""

#: tensor sizes (MiB) and how often each occurs: mostly 1-4 MiB projections, some 8-16 MiB MLP
#: blocks, now and then a 64 MiB one (plus two 64 MiB embeddings up front)
SIZES_MIB = (1, 2, 4, 8, 16, 64)
WEIGHTS = (0.40, 0.30, 0.18, 0.08, 0.03, 0.01)
PARTS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
         "mlp.up_proj", "mlp.down_proj")


def make_checkpoint(path: str, total: int, seed: int = 0) -> tuple[int, dict]:
    """Write a safetensors file of ~``total`` bytes; returns (tensor count, {dtype: count})."""
    import ml_dtypes
    from safetensors.numpy import save_file
    rng = np.random.default_rng(seed)
    kinds = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32))
    tensors, size, i = {}, 0, 0
    sizes = [64, 64] if total >= 512 * H.MiB else []
    while size < total:
        mib = sizes.pop(0) if sizes else int(rng.choice(SIZES_MIB, p=WEIGHTS))
        mib = min(mib, max(1, (total - size) // H.MiB))
        dt = kinds[i % 3]
        cols = 2048 if dt.itemsize == 2 else 1024
        a = np.frombuffer(rng.bytes(mib * H.MiB), dtype=dt).reshape(-1, cols)
        name = ("model.embed_tokens.weight" if i == 0 else "lm_head.weight" if i == 1 else
                f"model.layers.{(i - 2) // len(PARTS)}.{PARTS[(i - 2) % len(PARTS)]}.weight")
        tensors[name] = a
        size += a.nbytes
        i += 1
    save_file(tensors, path)
    counts: dict = {}
    for a in tensors.values():
        counts[a.dtype.name] = counts.get(a.dtype.name, 0) + 1
    return len(tensors), counts


def check_same(src: str, dst: str) -> None:
    """The AERO file holds every tensor of the source, bit for bit (checked once, untimed)."""
    import codec
    with codec.open(src) as a, codec.open(dst) as b:
        if list(a.tensors) != list(b.tensors):
            raise SystemExit("convert: the AERO file lists other tensors than the source")
        for n in a.tensors:
            x, y = a.tensor(n), b.tensor(n)
            if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x.view(np.uint8), y.view(np.uint8)):
                raise SystemExit(f"convert: tensor {n!r} differs")


def main(argv=None) -> int:
    args = H.parse_args(__doc__.split("\n\n")[0], argv)
    t_start = time.perf_counter()
    total = (128 if args.quick else 1024) * H.MiB
    reps, root = args.reps, args.codec_root
    watch = H.LoadWatch()
    watch.sample("start")
    env = H.env_info()
    table = H.Table("Conversion")
    with H.workdir(args.workdir, args.keep) as wd:
        src = os.path.join(wd, "m.safetensors")
        out = {k: os.path.join(wd, f) for k, f in (("ours", "m.aero"), ("peer", "peer.safetensors"),
                                                    ("peer_fsync", "peer2.safetensors"), ("copy", "copy.bin"),
                                                    ("copy_fsync", "copy2.bin"))}
        print(f"# writing a {total / H.MiB:.0f} MiB checkpoint", flush=True)
        n, kinds = make_checkpoint(src, total)
        size = os.path.getsize(src)
        H.warm(src)
        print(f"# convert {size / H.MiB:.0f} MiB, {n} tensors ({kinds}), {reps} interleaved runs", flush=True)
        t = H.child_compare({
            "ours": (CONVERT, src, out["ours"]),
            "peer": (PEER, src, out["peer"], "-"),
            "peer_fsync": (PEER, src, out["peer_fsync"], "fsync"),
            "copy": (COPY, src, out["copy"], "-"),
            "copy_fsync": (COPY, src, out["copy_fsync"], "fsync"),
        }, reps=reps, setup=lambda: H.fresh(*out.values()), pythonpath=root)
        # (each run deleted every output first: convert once more, untimed, to check the result)
        H.fresh(*out.values())
        sys.path.insert(0, root or H.REPO)
        import codec
        codec.convert(src, out["ours"], progress=False)
        check_same(src, out["ours"])
        H.fresh(*out.values())
        watch.sample("end")
    o, p, pf, c, cf = (t[k] for k in ("ours", "peer", "peer_fsync", "copy", "copy_fsync"))
    what = f"safetensors -> AERO, {size / H.MiB:.0f} MiB in {n} tensors: codec.convert"
    table.add(H.Row(what, o.median, "load_file + save_file (no fsync)", p.median, "<= 1.1x", 1.1,
                    best=o.best, peer_best=p.best))
    table.add(H.Row("the same (extra, like for like: both durable)", o.median, "load_file + save_file + fsync",
                    pf.median, best=o.best, peer_best=pf.best))
    table.add(H.Row("the same, vs the floor", o.median, "copy through the page cache + fsync", cf.median,
                    best=o.best, peer_best=cf.best))
    table.add(H.Row("the same, vs the floor without fsync (extra)", o.median, "copy through the page cache",
                    c.median, best=o.best, peer_best=c.best))
    table.add(H.Row("the same, peak RSS (fresh process; imports alone: "
                    f"{o.reports[0]['base_rss_mb']:.0f} MB; runs {min(o.rss):.0f}-{max(o.rss):.0f} MB)",
                    o.rss_median, "load_file + save_file",
                    p.rss_median, "< 300 MB", 300.0, strict=True, absolute=True, unit="MB"))
    table.add(H.Row("the same, whole process (start-up and imports included; extra)", o.wall_median,
                    "load_file + save_file (no fsync)", p.wall_median, best=min(o.wall), peer_best=min(p.wall)))
    table.notes += [
        f"Each contender ran {reps} times in a fresh interpreter (plus one untimed warm-up round), interleaved, "
        "order reversed every other round; medians, best in brackets; ratio = modelcodec / peer on the medians "
        "(best / best second). Times are taken inside the child after its imports.",
        f"Checkpoint: {n} tensors ({', '.join(f'{v} {k}' for k, v in kinds.items())}) of 1-64 MiB, random bytes, "
        "in the page cache; the AERO output was checked bit for bit against the source once, untimed.",
        "codec.convert writes AERO with its defaults (hash_b3 per tensor, shard BLAKE3, page digests), to a temp "
        "file it fsyncs and renames; load_file + save_file does not fsync (row 2 adds it).",
        f"Peak RSS = the child's VmHWM (resident mapped file pages count). Copy floor: "
        f"{c.rss_median:.0f} MB; load_file + save_file + fsync: {pf.rss_median:.0f} MB.",
    ]
    params = {"mode": "quick" if args.quick else "full", "payload": f"{size / H.MiB:.0f} MiB", "tensors": n,
              "runs per contender": reps}
    H.publish(H.render(f"Conversion benchmark ({params['mode']})", table, env, watch, params,
                       time.perf_counter() - t_start), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
