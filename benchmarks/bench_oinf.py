"""OINF benchmark: write and read ~256 MiB in 500 tensors against raw tofile / np.memmap,
``verify`` against the same statistics computed with plain numpy, and the writer's peak RSS.

    .venv/bin/python benchmarks/bench_oinf.py [--quick] [--out FILE]
"""
import os
import sys

import numpy as np

import _harness as H
from _rows import main_for

CHILD_WRITE = r"""
import sys, numpy as np
from codec.formats.oinf import write_oinf_file
from codec.io import LazyTensor
mark()
path, total, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per = total // count // 4
def make(i):
    return lambda: np.random.default_rng(i).standard_normal(per, dtype=np.float32)
write_oinf_file(path, tensors={f"t{i:04d}": LazyTensor(np.float32, (per,), make(i)) for i in range(count)})
report(largest=per * 4)
"""


def numpy_stats(path: str) -> None:
    """What verify computes, with plain numpy, for every tensor of the file (memmap)."""
    import codec
    with codec.open(path) as r:
        spans = [(r.tensors[n].offset, r.tensors[n].shape, r.tensors[n].dtype) for n in r.tensors]
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    for off, shape, dt in spans:
        x = mm[off:off + int(np.prod(shape)) * dt.itemsize].view(dt).astype(np.float64)
        x.min(), x.max(), x.mean(), np.median(x), x.std(), np.histogram(x, bins=10)


def verify(path: str) -> None:
    import codec
    from codec.tools.verify import render
    with codec.open(path) as r:
        render(r)


def extra(table, *, path, tensors, args, wd):
    t = H.compare({"verify": lambda: verify(path), "numpy": lambda: numpy_stats(path)}, reps=args.reps)
    table.add(H.Row("verify (previews, stats, histogram of every tensor)", t["verify"].median,
                    "same statistics with plain numpy", t["numpy"].median, "<= 2x", 2.0,
                    best=t["verify"].best, peer_best=t["numpy"].best))
    total = sum(a.nbytes for a in tensors.values())
    out = os.path.join(wd, "lazy.oinf")
    res = H.child_peak_rss(CHILD_WRITE, out, str(total), str(len(tensors)))
    largest_mb = res["largest"] / H.MiB
    limit = res["base_rss_mb"] + largest_mb + 64
    table.add(H.Row(f"writer peak RSS, {total / H.MiB:.0f} MiB in {len(tensors)} lazily loaded tensors "
                    f"(interpreter + imports: {res['base_rss_mb']:.0f} MB)", res["peak_rss_mb"], "", None,
                    f"<= imports + largest tensor ({largest_mb:.1f} MB) + 64 MB", limit, absolute=True, unit="MB"))


def finite(tensors: dict) -> dict:
    """Real-looking weights (random bytes make NaN/Inf floats, which verify reports separately)."""
    rng = np.random.default_rng(0)
    return {k: rng.standard_normal(a.shape, dtype=np.float32).astype(a.dtype) for k, a in tensors.items()}


if __name__ == "__main__":
    sys.exit(main_for("oinf", __doc__, 500, sys.argv[1:], extra_rows=extra, transform=finite))
