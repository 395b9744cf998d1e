"""Writing a real checkpoint as AERO and as AEROSET against safetensors, measured in the same run
(warm page cache, medians of interleaved reps; every write creates a new file).

    .venv/bin/python benchmarks/bench_write.py              # the 91 MB MiniLM checkpoint (104 tensors)
    .venv/bin/python benchmarks/bench_write.py --quick      # smoke test: fewer reps
    .venv/bin/python benchmarks/bench_write.py --out benchmarks/results/write.md
    .venv/bin/python benchmarks/bench_write.py --checkpoint other.safetensors

Targets (issue 13):
 1. AERO write of the checkpoint <= 1.0x ``safetensors.numpy.save_file`` of the same tensors.
 2. AEROSET write (``write_aeroset`` defaults: one part, index.aero, index JSON) <= 1.1x the AERO
    write of the same tensors.

The tensors are loaded once with ``safetensors.numpy.load_file`` (in memory, outside the timing).
Extra rows: the AERO write without zstd (``compress=False``: the TIDX's length is known before
its hashes, so the weights are hashed as they are written, one pass per byte), and a set in parts.
modelcodec's writers are durable (temp file, fsync, rename, fsync of the directory; the set: every
file and the directories); ``save_file`` does not fsync, so a like-for-like row adds one.
"""
from __future__ import annotations

import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # repo root: codec, schemas
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))                   # _harness

from safetensors.numpy import load_file, save_file  # noqa: E402

import _harness as H  # noqa: E402
import codec  # noqa: E402, F401  (main() re-imports it from --codec-root when given)

CHECKPOINT = os.path.expanduser("~/.cache/modelcodec-test-inputs/minilm/model.safetensors")
UUID = b"\0" * 16


def _extra(p) -> None:
    p.add_argument("--checkpoint", default=CHECKPOINT, help=f"a .safetensors file (default {CHECKPOINT})")


def main(argv=None) -> int:
    args = H.parse_args(__doc__.splitlines()[0], argv, extra=_extra)
    global codec
    codec = H.import_codec(args.codec_root)
    from codec.formats.aeroset import write_aeroset
    if not os.path.isfile(args.checkpoint):
        raise SystemExit(f"no checkpoint at {args.checkpoint} (pass --checkpoint FILE.safetensors)")
    t_start = time.perf_counter()
    reps = args.reps
    env = H.env_info()
    root = os.path.dirname(os.path.dirname(os.path.abspath(codec.__file__)))
    env["codec under test"] = root + " @ " + H.git_state(root)
    watch = H.LoadWatch()
    watch.sample("start")
    print("# environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    tensors = load_file(args.checkpoint)
    payload = sum(a.nbytes for a in tensors.values())
    params = {"mode": "quick" if args.quick else "full", "checkpoint": os.path.basename(os.path.dirname(args.checkpoint))
              + "/" + os.path.basename(args.checkpoint), "tensors": len(tensors),
              "payload": f"{payload / H.MiB:.1f} MiB", "timed reps": reps,
              "page cache": "warm (1 untimed warm-up round)"}
    table = H.Table("write")
    with H.workdir(args.workdir, args.keep) as wd:
        P = {k: os.path.join(wd, f) for k, f in {"aero": "m.aero", "aero_plain": "p.aero", "st": "m.safetensors", "st_fsync": "f.safetensors",
                                                  "set": "set", "set_parts": "set_parts"}.items()}

        def setup() -> None:
            H.fresh(P["aero"], P["aero_plain"], P["st"], P["st_fsync"])
            for d in (P["set"], P["set_parts"]):
                shutil.rmtree(d, ignore_errors=True)

        def save_fsync() -> None:
            save_file(tensors, P["st_fsync"])
            H.fsync_path(P["st_fsync"])

        print(f"# write {len(tensors)} tensors, {payload / H.MiB:.1f} MiB", flush=True)
        tw = H.compare({
            "aero": lambda: codec.write(P["aero"], tensors, format="aero", progress=False),
            "aero_plain": lambda: codec.write(P["aero_plain"], tensors, format="aero", compress=False, progress=False),
            "aeroset": lambda: write_aeroset(P["set"], tensors, progress=False),
            "aeroset_parts": lambda: write_aeroset(P["set_parts"], tensors, max_shard_bytes=16 * H.MiB,
                                                   max_part_shards=2, progress=False),
            "safetensors": lambda: save_file(tensors, P["st"]),
            "safetensors_fsync": save_fsync,
        }, reps=reps, setup=setup)
        setup()
        write_aeroset(P["set_parts"], tensors, max_shard_bytes=16 * H.MiB, max_part_shards=2, progress=False)
        n_parts = len([f for f in os.listdir(P["set_parts"]) if f.startswith("part-")])
        shutil.rmtree(P["set_parts"])

        def row(what, key, peer, peer_key, target="", limit=None):
            table.add(H.Row(what, tw[key].median, peer, tw[peer_key].median, target, limit,
                            best=tw[key].best, peer_best=tw[peer_key].best))

        row(f"AERO write, {len(tensors)} tensors, {payload / H.MiB:.0f} MiB (defaults: tensor_hash, fsync)", "aero",
            "safetensors.numpy.save_file (no fsync)", "safetensors", "<= 1.0x", 1.0)
        row("same AERO write (extra, like for like)", "aero", "save_file + fsync", "safetensors_fsync")
        row("AERO write, compress=False: one pass per byte (extra, like for like)", "aero_plain", "save_file + fsync",
            "safetensors_fsync")
        row("AEROSET write (defaults: 1 part + index.aero + index JSON)", "aeroset", "AERO write of the same tensors",
            "aero", "<= 1.1x", 1.1)
        row(f"AEROSET write, shards of 16 MiB, 2 per part ({n_parts} parts) (extra)", "aeroset_parts",
            "AERO write of the same tensors", "aero")
        row("AEROSET write (defaults) (extra)", "aeroset", "safetensors.numpy.save_file (no fsync)", "safetensors")
        watch.sample("end")
    elapsed = time.perf_counter() - t_start
    table.notes += [
        "Times are medians of the timed repetitions (contenders interleaved, order reversed every other round); "
        "'best' is the minimum. Ratio = modelcodec / peer; 'met' is judged on the median ratio.",
        "Every call writes a new file (outputs deleted before each call, outside the timing). modelcodec "
        "writes through temp files it fsyncs and renames (the set: into a temp directory renamed into place); "
        "save_file does not fsync (the like-for-like row adds one fsync of the file).",
    ]
    H.publish(H.render(f"write benchmark ({params['mode']})", table, env, watch, params, elapsed), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
