"""Rows every format benchmark shares: write N tensors vs ``ndarray.tofile`` + fsync, and open +
touch every byte vs slicing one ``np.memmap`` — measured in the same run, interleaved."""
from __future__ import annotations

import os

import _harness as H
from bench_aero import make_tensors, read_memmap, touch, write_tofile


def write_and_read(table: H.Table, fmt: str, *, tensors: dict, write, open_, reps: int, wd: str,
                   limit: float = 1.2) -> str:
    """Adds the write row and the read row to ``table``; returns the written file's path."""
    path, raw = os.path.join(wd, f"m.{fmt}"), os.path.join(wd, "m.bin")
    payload = sum(a.nbytes for a in tensors.values())
    tw = H.compare({fmt: lambda: write(path, tensors), "tofile": lambda: write_tofile(raw, tensors)},
                   reps=reps, setup=lambda: H.fresh(path, raw))
    write(path, tensors)
    H.rm(raw)
    table.add(H.Row(f"write {len(tensors)} tensors, {payload / H.MiB:.0f} MiB", tw[fmt].median,
                    "ndarray.tofile + fsync", tw["tofile"].median, f"<= {limit}x", limit,
                    best=tw[fmt].best, peer_best=tw["tofile"].best))
    with open_(path) as r:
        spans = [(t.offset, t.nbytes) for t in (r.tensors[n] for n in r.tensors) if t.offset is not None]
    H.warm(path)

    def read():
        acc = 0
        with open_(path) as r:
            for n in r.tensors:
                acc += int(touch(r.tensor(n)))
        return acc & 0xFF
    if read() != read_memmap(path, spans):
        raise SystemExit(f"{fmt}: reader and memmap read different bytes")
    tr = H.compare({fmt: read, "memmap": lambda: read_memmap(path, spans)}, reps=reps)
    table.add(H.Row("open + touch every byte of every tensor", tr[fmt].median, "np.memmap once + slices",
                    tr["memmap"].median, f"<= {limit}x", limit, best=tr[fmt].best, peer_best=tr["memmap"].best))
    return path


def main_for(fmt: str, doc: str, count: int, argv, extra_rows=None, transform=None) -> int:
    """The whole benchmark of one format: ~256 MiB in ``count`` tensors (``--quick``: 32 MiB)."""
    import time
    import codec
    args = H.parse_args(doc.splitlines()[0], argv)
    t0 = time.perf_counter()
    total = (32 if args.quick else 256) * H.MiB
    env, watch = H.env_info(), H.LoadWatch()
    watch.sample("start")
    table = H.Table(fmt.upper())
    tensors = make_tensors(total, count)
    if transform:
        tensors = transform(tensors)
    params = {"mode": "quick" if args.quick else "full", "tensors": count,
              "payload": f"{sum(a.nbytes for a in tensors.values()) / H.MiB:.1f} MiB", "timed reps": args.reps,
              "page cache": "warm"}
    with H.workdir(args.workdir, args.keep) as wd:
        path = write_and_read(table, fmt, tensors=tensors, reps=args.reps, wd=wd,
                              write=lambda p, t: codec.write(p, t, format=fmt, progress=False),
                              open_=lambda p: codec.open(p))
        if extra_rows:
            extra_rows(table, path=path, tensors=tensors, args=args, wd=wd)
        watch.sample("end")
    table.notes += ["Medians of interleaved repetitions (best in brackets); ratio = modelcodec / peer.",
                    "Writes: modelcodec writes a temp file, fsyncs, renames and fsyncs the directory; the peer "
                    "writes the same tensor bytes with ndarray.tofile into one file and fsyncs it.",
                    "Touch = np.add.reduce(uint8 view) over every tensor; the memmap peer maps the same file "
                    "once and slices it at the offsets the reader reports."]
    report = H.render(f"{fmt.upper()} benchmark ({params['mode']})", table, env, watch, params,
                      time.perf_counter() - t0)
    H.publish(report, args.out)
    return 0
