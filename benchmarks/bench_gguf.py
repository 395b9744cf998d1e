"""GGUF: open + list many tensors, and read all of their data, against gguf.GGUFReader and the floor, each run in a fresh process.

    .venv/bin/python benchmarks/bench_gguf.py [--quick] [--reps N] [--out FILE] [--tensors N] [--vocab N]

The file is written by the ``gguf`` package (``gguf.GGUFWriter``): 10,000 small tensors (F32,
F16, I32 and Q8_0 given as raw packed bytes; 64-4,096 elements each) and a tokenizer-like
key/value section (a 100,000-string ``tokenizer.ggml.tokens`` array, its float32 scores and
int32 token types, a handful of scalars).

1. open + list every tensor's name, shape and type (modelcodec: ``codec.open`` then iterating
   ``r.tensors``, its metadata decoded at open; peer: ``gguf.GGUFReader(path)`` and its
   ``tensors``).  Target (issue 12): modelcodec >= 10x faster (ratio <= 0.1x).  Floor: reading
   the bytes before the tensor data (the header, key/values and tensor infos).
2. open + read every tensor's data (a wrapping byte sum over each tensor's bytes, as in
   ``bench_aero.py``): ``r.tensor(name)`` vs GGUFReader's ``tensor.data``; floor: one
   ``np.memmap`` of the file, sliced at the offsets (given to it).
3. When the real vocab-only GGUF files the tests use are on disk
   (``$MODELCODEC_TEST_INPUTS/llama-vocab/``, see tests/test_real_files.py; never downloaded
   here): open + metadata of ``ggml-vocab-llama-bpe.gguf`` (128,256 tokens, 280,147 merges).

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

OURS_LIST = """
import sys, time
import codec
codec.registry.formats()  # every format module imported before timing, as the peer's are
mark()
t0 = time.perf_counter()
with codec.open(sys.argv[1]) as r:
    rows = [(n, t.shape, t.dtype_name) for n, t in r.tensors.items()]
    md = r.metadata
report(seconds=time.perf_counter() - t0, tensors=len(rows), keys=len(md))
"""
PEER_LIST = """
import sys, time
import gguf
mark()
t0 = time.perf_counter()
r = gguf.GGUFReader(sys.argv[1])
rows = [(t.name, tuple(t.shape), t.tensor_type.name) for t in r.tensors]
report(seconds=time.perf_counter() - t0, tensors=len(rows), keys=len(r.fields))
"""
FLOOR_LIST = """
import sys, time
mark()
t0 = time.perf_counter()
with open(sys.argv[1], "rb", buffering=0) as f:
    b = f.read(int(sys.argv[2]))
report(seconds=time.perf_counter() - t0)
"""
TOUCH = "def touch(a):\n    return int(np.add.reduce(a.reshape(-1).view(np.uint8), dtype=np.uint8))\n"
OURS_READ = """
import sys, time
import numpy as np
import codec
codec.registry.formats()
""" + TOUCH + """
mark()
t0 = time.perf_counter()
acc = 0
with codec.open(sys.argv[1]) as r:
    t1 = time.perf_counter()
    for n in r.tensors:
        acc += touch(r.tensor(n))
    t2 = time.perf_counter()
report(seconds=time.perf_counter() - t0, read_seconds=t2 - t1, sum=acc & 0xFF)
"""
PEER_READ = """
import sys, time
import numpy as np
import gguf
""" + TOUCH + """
mark()
t0 = time.perf_counter()
acc = 0
r = gguf.GGUFReader(sys.argv[1])
t1 = time.perf_counter()
for t in r.tensors:
    acc += touch(t.data)
t2 = time.perf_counter()
report(seconds=time.perf_counter() - t0, read_seconds=t2 - t1, sum=acc & 0xFF)
"""
FLOOR_READ = """
import sys, time
import numpy as np
""" + TOUCH + """
spans = np.load(sys.argv[2])
mark()
t0 = time.perf_counter()
acc = 0
mm = np.memmap(sys.argv[1], dtype=np.uint8, mode="r")
for off, n in spans.tolist():
    acc += touch(mm[off:off + n])
del mm
report(seconds=time.perf_counter() - t0, sum=acc & 0xFF)
"""

REAL = Path(os.environ.get("MODELCODEC_TEST_INPUTS", Path.home() / ".cache" / "modelcodec-test-inputs"))
REAL_FILE = REAL / "llama-vocab" / "ggml-vocab-llama-bpe.gguf"


def make_vocab(n: int, rng) -> list[str]:
    """``n`` distinct token-like strings (BPE-ish: 'Ġ' word starts, pieces of 1-10 letters, some
    non-ASCII)."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzéèüöñ的是一不了人"))
    lens = rng.integers(1, 11, n)
    picks = rng.integers(0, len(letters), int(lens.sum()))
    out, off = [], 0
    for i, k in enumerate(lens.tolist()):
        s = "".join(letters[picks[off:off + k]])
        off += k
        out.append(("Ġ" if i % 3 == 0 else "") + s + f"{i:x}")  # the suffix keeps them distinct
    return out


def make_gguf(path: str, n_tensors: int, vocab: int, seed: int = 0) -> dict:
    """Write the benchmark's GGUF with gguf-py; returns what it holds."""
    import gguf
    from gguf.quants import quantize
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("bench")
    w.add_context_length(4096)
    w.add_embedding_length(4096)
    w.add_block_count(n_tensors // 9)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(make_vocab(vocab, rng))
    w.add_token_scores(rng.standard_normal(vocab).astype(np.float32).tolist())
    w.add_token_types(rng.integers(1, 4, vocab).astype(np.int32).tolist())
    q = quantize(rng.standard_normal((4, 256)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    kinds = {}
    for i in range(n_tensors):
        k = i % 8
        name = f"blk.{i // 8}.t{k}.weight"
        if k in (0, 1, 2):
            a, kind = rng.standard_normal((int(rng.integers(1, 17)), 64)).astype(np.float32), "F32"
        elif k in (3, 4, 5):
            a, kind = rng.standard_normal((int(rng.integers(1, 65)), 64)).astype(np.float16), "F16"
        elif k == 6:
            a, kind = rng.integers(-9, 9, 64, dtype=np.int32), "I32"
        else:
            a, kind = q, "Q8_0"
        if kind == "Q8_0":
            w.add_tensor(name, a, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, a)
        kinds[kind] = kinds.get(kind, 0) + 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return kinds


def layout(path: str) -> tuple[int, np.ndarray]:
    """(data start, [(offset, nbytes)] of every tensor) as gguf-py reads them (untimed)."""
    import gguf
    r = gguf.GGUFReader(path)
    spans = np.array([(t.data_offset, t.n_bytes) for t in r.tensors], dtype=np.int64).reshape(-1, 2)
    return int(spans[:, 0].min()) if len(spans) else os.path.getsize(path), spans


def main(argv=None) -> int:
    def extra(p):
        p.add_argument("--tensors", type=int, default=None, help="tensors in the file (default 10,000; quick 2,000)")
        p.add_argument("--vocab", type=int, default=None, help="strings in the vocabulary (default 100,000; quick 20,000)")
    args = H.parse_args(__doc__.split("\n\n")[0], argv, extra=extra)
    t_start = time.perf_counter()
    n_t = args.tensors or (2_000 if args.quick else 10_000)
    vocab = args.vocab or (20_000 if args.quick else 100_000)
    reps, root = max(args.reps, 5), args.codec_root
    watch = H.LoadWatch()
    watch.sample("start")
    env = H.env_info()
    table = H.Table("GGUF")
    with H.workdir(args.workdir, args.keep) as wd:
        g = os.path.join(wd, "many.gguf")
        print(f"# writing a GGUF of {n_t} tensors and a {vocab}-string vocabulary with gguf-py", flush=True)
        kinds = make_gguf(g, n_t, vocab)
        size = os.path.getsize(g)
        head, spans = layout(g)
        spans_path = os.path.join(wd, "spans.npy")
        np.save(spans_path, spans)
        H.warm(g)

        print(f"# 1. open + list ({reps} interleaved runs per contender)", flush=True)
        tl = H.child_compare({"ours": (OURS_LIST, g), "peer": (PEER_LIST, g), "floor": (FLOOR_LIST, g, str(head))},
                             reps=reps, pythonpath=root)
        if tl["ours"].reports[0]["tensors"] != n_t or tl["peer"].reports[0]["tensors"] != n_t:
            raise SystemExit("GGUF: a contender did not list every tensor")
        o, p, f = tl["ours"], tl["peer"], tl["floor"]
        table.add(H.Row(f"open + list {n_t:,} tensors (name, shape, type), {vocab:,}-string vocabulary",
                        o.median, "gguf.GGUFReader", p.median, "<= 0.1x (10x faster)", 0.1, best=o.best,
                        peer_best=p.best))
        table.add(H.Row(f"the same, vs the floor (read the {head / 1e6:.1f} MB before the tensor data)", o.median,
                        "read()", f.median, best=o.best, peer_best=f.best))
        table.add(H.Row("the same, peak RSS (extra)", o.rss_median, "gguf.GGUFReader", p.rss_median, unit="MB"))
        watch.sample("after list")

        print("# 2. open + read every tensor's data", flush=True)
        tr = H.child_compare({"ours": (OURS_READ, g), "peer": (PEER_READ, g), "floor": (FLOOR_READ, g, spans_path)},
                             reps=reps, pythonpath=root)
        sums = {k: v.reports[0]["sum"] for k, v in tr.items()}
        if len(set(sums.values())) != 1:
            raise SystemExit(f"GGUF: the contenders read different bytes: {sums}")
        o, p, f = tr["ours"], tr["peer"], tr["floor"]
        table.add(H.Row(f"open + read all {n_t:,} tensors' data ({spans[:, 1].sum() / H.MiB:.1f} MiB; byte sum each)",
                        o.median, "gguf.GGUFReader + tensor.data", p.median, best=o.best, peer_best=p.best))
        table.add(H.Row("the same, vs the floor", o.median, "np.memmap once + slices (offsets given)", f.median,
                        best=o.best, peer_best=f.best))
        ro, rp = ([x["read_seconds"] for x in v.reports] for v in (o, p))
        table.add(H.Row("the reading alone, after the open (breakdown of row 4)", float(np.median(ro)),
                        "tensor.data of every GGUFReader tensor", float(np.median(rp)), best=min(ro), peer_best=min(rp)))
        watch.sample("after read")

        if REAL_FILE.is_file():
            print(f"# 3. real file {REAL_FILE.name}", flush=True)
            rh, _ = layout(str(REAL_FILE))
            H.warm(str(REAL_FILE))
            tx = H.child_compare({"ours": (OURS_LIST, str(REAL_FILE)), "peer": (PEER_LIST, str(REAL_FILE)),
                                  "floor": (FLOOR_LIST, str(REAL_FILE), str(rh))}, reps=reps, pythonpath=root)
            o, p, f = tx["ours"], tx["peer"], tx["floor"]
            table.add(H.Row(f"real file: open + metadata of {REAL_FILE.name} ({os.path.getsize(REAL_FILE) / 1e6:.1f} MB, "
                            f"{o.reports[0]['keys']} keys, no tensors)", o.median, "gguf.GGUFReader", p.median,
                            best=o.best, peer_best=p.best))
            table.add(H.Row("the same, vs the floor (read the file)", o.median, "read()", f.median, best=o.best,
                            peer_best=f.best))
        else:
            table.notes.append(f"Real-file row skipped: {REAL_FILE} is not on disk (tests/test_real_files.py "
                               "downloads it).")
        watch.sample("end")
    table.notes[:0] = [
        f"Each contender ran {reps} times in a fresh interpreter (plus one untimed warm-up round), interleaved, "
        "order reversed every other round; medians, best in brackets; ratio = modelcodec / peer on the medians "
        "(best / best second). Times are taken inside the child after its imports (modelcodec imports every "
        "format module first).",
        f"File: {size / 1e6:.1f} MB written by gguf.GGUFWriter, {n_t:,} tensors "
        f"({', '.join(f'{v:,} {k}' for k, v in kinds.items())}; 64-4,096 elements each), a {vocab:,}-string "
        "tokens array, float32 scores and int32 token types; in the page cache.",
        "modelcodec decodes every key/value at open (the vocabulary as Python strings; metadata read once in the "
        "timed region); GGUFReader builds numpy views of every field part and decodes no string.",
        "Read = np.add.reduce over a uint8 view of each tensor (wrapping byte sum), checked equal across "
        "contenders; Q8_0 tensors read as their packed bytes by all three.",
    ]
    params = {"mode": "quick" if args.quick else "full", "tensors": n_t, "vocabulary": vocab,
              "file": f"{size / 1e6:.1f} MB", "runs per contender": reps}
    H.publish(H.render(f"GGUF benchmark ({params['mode']})", table, env, watch, params,
                       time.perf_counter() - t_start), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
