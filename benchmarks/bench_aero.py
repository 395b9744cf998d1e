"""AERO against its peers, measured in the same run (warm page cache, medians of interleaved reps).

    .venv/bin/python benchmarks/bench_aero.py            # full: ~1 GiB in 1,000 tensors, 100k tiny tensors
    .venv/bin/python benchmarks/bench_aero.py --quick    # smoke test: 64 MiB, 10k tiny tensors
    .venv/bin/python benchmarks/bench_aero.py --out report.md

Targets (from the AERO performance issue):
 1. write ~1 GiB in 1,000 tensors with hash_b3: <= 1.05x ``ndarray.tofile`` + fsync of the same bytes
    (issue 13), and faster than ``safetensors.numpy.save_file``; 1,000 tensors of 256 KiB with the
    default options: <= 1.05x the same (issue 35).
 2. open + touch every byte of every tensor: <= 1.0x slicing one ``np.memmap`` of the same file;
    with hash_b3 verified, <= 1.1x its floor (the same slices and one BLAKE3 pass over each)
    (issue 35; issue 13 asked 1.2x for both).
 3. ``validate(full=True)``: <= 1.15x two BLAKE3 passes over the file (issue 13: every tensor byte
    is covered by its chunk hash and its hash_b3); peak RSS < 100 MB whatever the shard size
    (fresh child process).
 4. open + list 100,000 tiny tensors: <= 0.8x ``safetensors.safe_open(...).keys()`` (issue 13).
 5. write 100,000 tiny tensors: <= 0.8x ``safetensors.numpy.save_file`` (issues 13, 35).

The "touch" is the same for every contender: ``np.add.reduce(u8, dtype=np.uint8)`` over a uint8 view
of the tensor's bytes (wrapping sum; reads every byte at ~16 GiB/s from RAM here, so it hides little
of a reader's own overhead -- ``u8.sum()`` would run at ~3 GiB/s and flatter every ratio).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # repo root: codec, schemas
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))                   # _harness

import blake3  # noqa: E402
import msgpack  # noqa: E402
import zstandard  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

import _harness as H  # noqa: E402
import codec  # noqa: E402  (main() re-imports it from --codec-root when given)

UUID = b"\0" * 16
AUTO = blake3.blake3.AUTO


# ----------------------------------------------------------------------------- inputs
def make_tensors(total_bytes: int, count: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``count`` tensors of varied size (log-uniform, x64 spread) adding up to ~``total_bytes``;
    mostly f32 with every 4th f16; random (incompressible) contents; C-contiguous, writable."""
    rng = np.random.default_rng(seed)
    w = np.exp(rng.uniform(0, np.log(64), count))
    cols = 256
    dtypes = [np.dtype(np.float16) if i % 4 == 3 else np.dtype(np.float32) for i in range(count)]
    rows = [max(1, int(round(total_bytes * wi / w.sum() / (cols * dt.itemsize)))) for wi, dt in zip(w, dtypes)]
    nbytes = [r * cols * dt.itemsize for r, dt in zip(rows, dtypes)]
    buf = bytearray(rng.bytes(sum(nbytes)))
    out, off = {}, 0
    for i, (r, dt, n) in enumerate(zip(rows, dtypes, nbytes)):
        a = np.frombuffer(buf, dtype=dt, count=r * cols, offset=off).reshape(r, cols)
        # random bytes make some NaN/inf floats: harmless, nobody computes with them
        out[f"model.layers.{i // 10}.block{i % 10}.weight"] = a
        off += n
    return out


def make_tiny(count: int, seed: int = 1) -> dict[str, np.ndarray]:
    """``count`` tensors of 4-16 bytes (f32 of 1-4 elements) with realistic ~35-char names."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 5, count)
    data = rng.random(int(sizes.sum()), dtype=np.float32)
    out, off = {}, 0
    for i, n in enumerate(sizes):
        out[f"model.layers.{i // 100}.mlp.expert{i % 100}.scale"] = data[off:off + n].copy()
        off += n
    return out


def make_uniform(count: int, nbytes: int, seed: int = 2) -> dict[str, np.ndarray]:
    """``count`` f32 tensors of ``nbytes`` each (rows of 256), random (incompressible) contents."""
    buf = bytearray(np.random.default_rng(seed).bytes(count * nbytes))
    n = nbytes // 4
    return {f"model.layers.{i // 10}.block{i % 10}.weight": np.frombuffer(buf, np.float32, n, i * nbytes)
            .reshape(-1, 256) for i in range(count)}


def touch(a: np.ndarray):
    """The one full read every contender gets: a wrapping byte sum over all of the tensor's bytes."""
    return np.add.reduce(a.reshape(-1).view(np.uint8), dtype=np.uint8)


# ----------------------------------------------------------------------------- contenders
def write_tofile(path: str, tensors: dict) -> None:
    with open(path, "wb") as f:
        for a in tensors.values():
            a.tofile(f)
        f.flush()
        os.fsync(f.fileno())


def save_safetensors_fsync(path: str, tensors: dict) -> None:
    save_file(tensors, path)
    H.fsync_path(path)


def read_memmap(path: str, spans: list[tuple[int, int]]) -> int:
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    acc = 0
    for off, n in spans:
        acc += int(touch(mm[off:off + n]))
    del mm
    return acc & 0xFF


def read_memmap_index(path: str, spans: list[tuple[int, int]], tidx: tuple[int, int, int]) -> int:
    """The floor of any reader that checks the file's index before handing out a tensor: the
    memmap slices, after the TIDX chunk alone (``tidx`` = its offset, stored length and inflated
    length, or 0 when stored plain; given) is inflated, BLAKE3-hashed and decoded by the C
    libraries (zstandard, blake3, msgpack) into a name -> entry dict -- no header, TOC or
    manifest read, no field checked."""
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    off, n, ulen = tidx
    data = mm[off:off + n] if not ulen else zstandard.ZstdDecompressor().decompress(mm[off:off + n],
                                                                                    max_output_size=ulen)
    blake3.blake3(data).digest()
    index = {e["name"]: e for e in msgpack.unpackb(data)["tensors"]}
    acc = 0
    for off, n in spans:
        acc += int(touch(mm[off:off + n]))
    del mm, index
    return acc & 0xFF


def read_memmap_b3(path: str, spans: list[tuple[int, int]]) -> int:
    """The verified-read floor: the memmap slices touched, and one BLAKE3 pass over each (with
    BLAKE3's own threads from 1 MiB, as the reader hashes)."""
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    acc = 0
    for off, n in spans:
        v = mm[off:off + n]
        h = blake3.blake3(max_threads=blake3.blake3.AUTO) if n >= (1 << 20) else blake3.blake3()
        h.update(v)
        h.digest()
        acc += int(touch(v))
    del mm
    return acc & 0xFF


def read_aero(path: str, verify: bool) -> int:
    acc = 0
    with codec.open(path) as r:
        for name in r.tensors:
            acc += int(touch(r.tensor(name, verify=verify)))
    return acc & 0xFF


def read_safetensors(path: str) -> int:
    acc = 0
    with safe_open(path, "numpy") as f:
        for k in f.keys():
            acc += int(touch(f.get_tensor(k)))
    return acc & 0xFF


def validate_aero(path: str) -> None:
    with codec.open(path) as r:
        rep = r.validate(full=True, progress=False)
    if not rep.ok:
        raise SystemExit(f"validate reported errors on a file we just wrote: {rep.violations[:3]}")


def blake3_file(path: str) -> bytes:
    return blake3.blake3(max_threads=AUTO).update_mmap(path).digest()


def blake3_file_twice(path: str) -> bytes:
    """The floor of a full AERO validation (issue 13): every byte of tensor data is covered twice,
    by its WTSH chunk hash and by its tensor's hash_b3, so two BLAKE3 passes over the file, each
    with all of BLAKE3's threads (``update_mmap``, one after the other)."""
    return blake3_file(path) + blake3_file(path)


def list_aero(path: str) -> int:
    with codec.open(path) as r:
        return len(list(r.tensors))


def list_safetensors(path: str) -> int:
    with safe_open(path, "numpy") as f:
        return len(list(f.keys()))


CHILD_VALIDATE = """
import sys
import codec
mark()
with codec.open(sys.argv[1]) as r:
    rep = r.validate(full=True, progress=False)
report(ok=rep.ok, shards=sum(1 for c in r.chunks if c.fourcc == b"WTSH"))
"""

CHILD_BLAKE3 = """
import sys
import blake3
mark()
blake3.blake3(max_threads=blake3.blake3.AUTO).update_mmap(sys.argv[1]).digest()
report(ok=True)
"""


# ----------------------------------------------------------------------------- main
def main(argv=None) -> int:
    args = H.parse_args(__doc__.splitlines()[0], argv)
    global codec
    codec = H.import_codec(args.codec_root)
    t_start = time.perf_counter()
    if args.quick:
        total, count, tiny_n, shard_cap = 64 * H.MiB, 200, 10_000, 16 * H.MiB
    else:
        total, count, tiny_n, shard_cap = 1 * H.GiB, 1000, 100_000, 256 * H.MiB
    reps = args.reps
    list_reps = max(reps, 7)
    # (reads of 1 GiB differ by a few ms; the open's cost is ~1% of them: more rounds than the writes)
    read_reps = max(reps, 15)
    env = H.env_info()
    env["codec under test"] = (os.path.dirname(os.path.dirname(os.path.abspath(codec.__file__))) + " @ "
                               + H.git_state(os.path.dirname(os.path.dirname(os.path.abspath(codec.__file__)))))
    watch = H.LoadWatch()
    watch.sample("start")
    print("# environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    table = H.Table("AERO")
    params = {"mode": "quick" if args.quick else "full", "tensors": count,
              "payload": f"{total / H.MiB:.0f} MiB", "tiny tensors": tiny_n,
              "small shard cap": f"{shard_cap // H.MiB} MiB", "timed reps": reps,
              "reps for open+list": list_reps, "reps for open+touch": read_reps,
              "page cache": "warm (1 untimed warm-up round; files read once)"}

    with H.workdir(args.workdir, args.keep) as wd:
        P = {k: os.path.join(wd, f) for k, f in {
            "aero": "m.aero", "aero_nohash": "m_nohash.aero", "raw": "m.bin", "st": "m.safetensors",
            "aero_sharded": "m_sharded.aero", "tiny_aero": "tiny.aero", "tiny_st": "tiny.safetensors"}.items()}

        print(f"# generating {count} tensors, {total / H.MiB:.0f} MiB ...", flush=True)
        tensors = make_tensors(total, count)
        payload = sum(a.nbytes for a in tensors.values())
        params["payload"] = f"{payload / H.MiB:.1f} MiB"

        # ---------------------------------------------------------------- 1. write
        print("# 1. write", flush=True)
        outs = [P["aero"], P["aero_nohash"], P["raw"], P["st"], P["st"] + ".fsync"]
        tw = H.compare({
            "aero": lambda: codec.write(P["aero"], tensors, format="aero", uuid=UUID, tensor_hash=True,
                                        progress=False),
            "aero_nohash": lambda: codec.write(P["aero_nohash"], tensors, format="aero", uuid=UUID,
                                               tensor_hash=False, progress=False),
            "tofile": lambda: write_tofile(P["raw"], tensors),
            "safetensors": lambda: save_file(tensors, P["st"]),
            "safetensors_fsync": lambda: save_safetensors_fsync(P["st"] + ".fsync", tensors),
        }, reps=reps, setup=lambda: H.fresh(*outs))
        # the timed loop deleted the outputs before each call: write the files the later steps read
        codec.write(P["aero"], tensors, format="aero", uuid=UUID, tensor_hash=True, progress=False)
        codec.write(P["aero_nohash"], tensors, format="aero", uuid=UUID, tensor_hash=False, progress=False)
        save_file(tensors, P["st"])
        H.fsync_path(P["st"])
        table.add(H.Row(f"write {count} tensors, {payload / H.GiB:.2f} GiB, tensor_hash=True",
                        tw["aero"].median, "ndarray.tofile + fsync", tw["tofile"].median, "<= 1.05x", 1.05,
                        best=tw["aero"].best, peer_best=tw["tofile"].best))
        table.add(H.Row("same write (tensor_hash=True)", tw["aero"].median, "safetensors.numpy.save_file (no fsync)",
                        tw["safetensors"].median, "< 1x (faster)", 1.0, strict=True,
                        best=tw["aero"].best, peer_best=tw["safetensors"].best))
        table.add(H.Row("write, tensor_hash=False (extra)", tw["aero_nohash"].median, "ndarray.tofile + fsync",
                        tw["tofile"].median, "<= 1.05x", 1.05,
                        best=tw["aero_nohash"].best, peer_best=tw["tofile"].best))
        table.add(H.Row("same write (tensor_hash=True): what the hashes cost (extra)", tw["aero"].median,
                        "the same AERO write, tensor_hash=False", tw["aero_nohash"].median,
                        best=tw["aero"].best, peer_best=tw["aero_nohash"].best))
        table.add(H.Row("same write (tensor_hash=True) (extra, like for like)", tw["aero"].median,
                        "safetensors save_file + fsync", tw["safetensors_fsync"].median,
                        best=tw["aero"].best, peer_best=tw["safetensors_fsync"].best))
        H.rm(P["raw"])

        # ------------------------------------------- 1b. the same count of 256 KiB tensors (issue 35)
        print("# 1b. write tensors of 256 KiB", flush=True)
        uni = make_uniform(count, 256 * 1024)
        uni_bytes = sum(a.nbytes for a in uni.values())
        P["uni_aero"], P["uni_raw"] = os.path.join(wd, "u.aero"), os.path.join(wd, "u.bin")
        tu = H.compare({
            "aero": lambda: codec.write(P["uni_aero"], uni, format="aero", uuid=UUID, progress=False),
            "tofile": lambda: write_tofile(P["uni_raw"], uni),
        }, reps=reps, setup=lambda: H.fresh(P["uni_aero"], P["uni_raw"]))
        table.add(H.Row(f"write {count:,} tensors of 256 KiB ({uni_bytes / H.MiB:.0f} MiB), default options "
                        "(tensor_hash=True)", tu["aero"].median, "ndarray.tofile + fsync", tu["tofile"].median,
                        "<= 1.05x", 1.05, best=tu["aero"].best, peer_best=tu["tofile"].best))
        H.rm(P["uni_aero"])
        H.rm(P["uni_raw"])
        del uni

        # ---------------------------------------------------------------- 2. open + touch every byte
        print("# 2. open + touch every byte", flush=True)
        with codec.open(P["aero"]) as r:
            spans = [(t.offset, t.nbytes) for t in (r.tensors[n] for n in r.tensors)]
            c = r.chunk(b"TIDX")
            tidx = (c.offset, c.length, c.ulen if c.compressed else 0)
        for p in (P["aero"], P["st"]):
            H.warm(p)
        sums = {"memmap": read_memmap(P["aero"], spans), "memmap_b3": read_memmap_b3(P["aero"], spans),
                "memmap_index": read_memmap_index(P["aero"], spans, tidx),
                "aero": read_aero(P["aero"], True),
                "aero_noverify": read_aero(P["aero"], False), "safetensors": read_safetensors(P["st"])}
        if len(set(sums.values())) != 1:
            raise SystemExit(f"contenders read different bytes: {sums}")
        tr = H.compare({
            "memmap": lambda: read_memmap(P["aero"], spans),
            "memmap_b3": lambda: read_memmap_b3(P["aero"], spans),
            "memmap_index": lambda: read_memmap_index(P["aero"], spans, tidx),
            "aero": lambda: read_aero(P["aero"], True),
            "aero_noverify": lambda: read_aero(P["aero"], False),
            "safetensors": lambda: read_safetensors(P["st"]),
        }, reps=read_reps)
        table.add(H.Row("open + touch all, r.tensor(name) (verifies hash_b3 once)", tr["aero"].median,
                        "np.memmap slices + one BLAKE3 pass each (the verified-read floor)", tr["memmap_b3"].median,
                        "<= 1.1x", 1.1, best=tr["aero"].best, peer_best=tr["memmap_b3"].best))
        table.add(H.Row("open + touch all, r.tensor(name) (verifies hash_b3 once) (extra)", tr["aero"].median,
                        "np.memmap once + slices (no hashing)", tr["memmap"].median,
                        best=tr["aero"].best, peer_best=tr["memmap"].best))
        table.add(H.Row("open + touch all, r.tensor(name, verify=False)", tr["aero_noverify"].median,
                        "np.memmap once + slices", tr["memmap"].median, "<= 1.0x", 1.0,
                        best=tr["aero_noverify"].best, peer_best=tr["memmap"].best))
        table.add(H.Row("the TIDX read alone + memmap slices: the index's own cost (extra)",
                        tr["memmap_index"].median, "np.memmap once + slices", tr["memmap"].median,
                        best=tr["memmap_index"].best, peer_best=tr["memmap"].best))
        table.add(H.Row("open + touch all, r.tensor(name, verify=False) (extra, against the index floor)",
                        tr["aero_noverify"].median, "the TIDX read alone + memmap slices", tr["memmap_index"].median,
                        best=tr["aero_noverify"].best, peer_best=tr["memmap_index"].best))
        table.add(H.Row("open + touch all, r.tensor(name) (peer, extra)", tr["aero"].median,
                        "safetensors safe_open + get_tensor", tr["safetensors"].median,
                        best=tr["aero"].best, peer_best=tr["safetensors"].best))
        table.add(H.Row("open + touch all, verify=False (peer, extra)", tr["aero_noverify"].median,
                        "safetensors safe_open + get_tensor", tr["safetensors"].median,
                        best=tr["aero_noverify"].best, peer_best=tr["safetensors"].best))
        H.rm(P["st"])
        watch.sample("after read")

        # ---------------------------------------------------------------- 3. validate --full
        print("# 3. validate --full", flush=True)
        codec.write(P["aero_sharded"], tensors, format="aero", uuid=UUID, tensor_hash=True,
                    max_shard_bytes=shard_cap, progress=False)
        tensors = None  # free the 1 GiB of inputs before validation (RSS children, page cache)
        for p in (P["aero"], P["aero_sharded"], P["aero_nohash"]):
            H.warm(p)
        tv = H.compare({
            "aero": lambda: validate_aero(P["aero"]),
            "aero_nohash": lambda: validate_aero(P["aero_nohash"]),
            "aero_sharded": lambda: validate_aero(P["aero_sharded"]),
            "blake3": lambda: blake3_file(P["aero"]),
            "blake3_sharded": lambda: blake3_file(P["aero_sharded"]),
            "blake3x2": lambda: blake3_file_twice(P["aero"]),
            "blake3x2_sharded": lambda: blake3_file_twice(P["aero_sharded"]),
        }, reps=reps)
        two = "2 x blake3 AUTO update_mmap(file) (the floor)"
        table.add(H.Row("open + validate(full=True), 1 shard", tv["aero"].median,
                        two, tv["blake3x2"].median, "<= 1.15x", 1.15,
                        best=tv["aero"].best, peer_best=tv["blake3x2"].best))
        table.add(H.Row(f"open + validate(full=True), shards of {shard_cap // H.MiB} MiB",
                        tv["aero_sharded"].median, two, tv["blake3x2_sharded"].median,
                        "<= 1.15x", 1.15, best=tv["aero_sharded"].best, peer_best=tv["blake3x2_sharded"].best))
        table.add(H.Row("open + validate(full=True), 1 shard, file written with tensor_hash=False (extra)",
                        tv["aero_nohash"].median, "blake3 AUTO update_mmap(file) (its floor: one hash per byte)",
                        tv["blake3"].median, "<= 1.3x", 1.3, best=tv["aero_nohash"].best, peer_best=tv["blake3"].best))
        table.add(H.Row("open + validate(full=True), 1 shard, vs ONE pass (extra)", tv["aero"].median,
                        "blake3 AUTO update_mmap(file)", tv["blake3"].median,
                        best=tv["aero"].best, peer_best=tv["blake3"].best))
        rss = {}
        for key in ("aero", "aero_sharded"):
            rss[key] = H.child_peak_rss(CHILD_VALIDATE, P[key], pythonpath=args.codec_root)
            if not rss[key]["ok"]:
                raise SystemExit(f"child validate of {key} failed")
        rss["blake3"] = H.child_peak_rss(CHILD_BLAKE3, P["aero"])
        for key, label in (("aero", "1 shard"), ("aero_sharded", f"{rss['aero_sharded']['shards']} shards of "
                                                                 f"<= {shard_cap // H.MiB} MiB")):
            table.add(H.Row(f"validate(full=True) peak RSS, fresh process, {label} "
                            f"(after imports: {rss[key]['base_rss_mb']:.0f} MB)", rss[key]["peak_rss_mb"],
                            "blake3 update_mmap, fresh process", rss["blake3"]["peak_rss_mb"],
                            "< 100 MB", 100.0, strict=True, absolute=True, unit="MB"))
        for p in (P["aero"], P["aero_sharded"], P["aero_nohash"]):
            H.rm(p)

        # ---------------------------------------------------------------- 4. open + list tiny tensors
        print(f"# 4. open + list {tiny_n} tiny tensors", flush=True)
        tiny = make_tiny(tiny_n)
        tt = H.compare({"aero": lambda: codec.write(P["tiny_aero"], tiny, format="aero", uuid=UUID, tensor_hash=True,
                                                    progress=False),
                        "safetensors": lambda: save_file(tiny, P["tiny_st"])},
                       reps=reps, setup=lambda: H.fresh(P["tiny_aero"], P["tiny_st"]))
        codec.write(P["tiny_aero"], tiny, format="aero", uuid=UUID, tensor_hash=True, progress=False)
        save_file(tiny, P["tiny_st"])
        tiny = None
        if list_aero(P["tiny_aero"]) != tiny_n or list_safetensors(P["tiny_st"]) != tiny_n:
            raise SystemExit("tiny files do not list every tensor")
        tl = H.compare({"aero": lambda: list_aero(P["tiny_aero"]),
                        "safetensors": lambda: list_safetensors(P["tiny_st"])}, reps=list_reps, warmup=2)
        table.add(H.Row(f"open + list {tiny_n:,} tiny tensors (with hash_b3)", tl["aero"].median,
                        "safetensors safe_open(...).keys()", tl["safetensors"].median, "<= 0.8x", 0.8,
                        best=tl["aero"].best, peer_best=tl["safetensors"].best))
        table.add(H.Row(f"write {tiny_n:,} tiny tensors (with hash_b3, fsync)", tt["aero"].median,
                        "safetensors.numpy.save_file (no fsync)", tt["safetensors"].median, "<= 0.8x", 0.8,
                        best=tt["aero"].best, peer_best=tt["safetensors"].best))
        watch.sample("end")

    elapsed = time.perf_counter() - t_start
    table.notes += [
        "Times are medians of the timed repetitions (contenders interleaved A B C A B C..., order reversed "
        "every other round); 'best' is the minimum. Ratio = modelcodec / peer; 'met' is judged on the median "
        "ratio.",
        "Warm page cache: every contender gets an untimed warm-up round and read inputs are read once "
        "beforehand. Writes delete their outputs and `sync` before each call (a new file every time; the TRIM of the deleted file stays outside the timing).",
        "Writes: modelcodec writes a temp file, fsyncs it, renames it and fsyncs the directory; the tofile "
        "peer writes the same tensor bytes into one file and fsyncs it; safetensors save_file does not fsync. "
        "With tensor_hash=True (and zstd, the default) the writer hashes every tensor before its first write "
        "(the compressed TIDX ahead of the weights holds the hashes and its length places them), then "
        "writes each byte once with the shard's BLAKE3 on a worker thread: the 'what the hashes cost' row.",
        "Touch = np.add.reduce(uint8 view, dtype=uint8) for every contender; memmap peer = np.memmap of "
        "the AERO file once, sliced at the offsets r.tensors reports (memmap creation is timed). "
        "safetensors get_tensor returns private copies.",
        "validate timings include codec.open. Their floor (issue 13) is two BLAKE3 passes over the file "
        "(every tensor byte is covered by its WTSH chunk hash and its hash_b3): the peer runs "
        "blake3(max_threads=AUTO).update_mmap(file) twice, one pass after the other; the one-pass "
        "ratio is kept as an extra row. Peak RSS = VmHWM of a fresh child that imports codec, "
        "opens and validates (includes the interpreter and imports, and resident mapped file pages).",
    ]
    report = H.render(f"AERO benchmark ({params['mode']})", table, env, watch, params, elapsed)
    H.publish(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
