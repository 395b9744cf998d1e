"""What a report says about each tensor's values: min, max, mean, std, NaN/Inf count and zero
fraction, from at most :data:`MAX_SAMPLE` elements (evenly spaced blocks, so that a large tensor
costs a few pages, not a pass over all of it; fewer when the model is large, :func:`limit_for`),
and their histogram."""
from __future__ import annotations

import inspect
from typing import Callable

import numpy as np

from .. import errors as E
from .html_page import histogram

#: elements a tensor's statistics are computed from at most
MAX_SAMPLE = 1 << 20
#: elements sampled over a whole model at most (its tensors share them; each gets MIN_SAMPLE at least)
TOTAL_SAMPLE = 1 << 24
MIN_SAMPLE = 1 << 16
#: blocks a sample of a large tensor is taken as (evenly spaced over it)
BLOCKS = 64
#: bytes of each tensor a report fetches over HTTP without --full
REMOTE_SAMPLE_BYTES = 1 << 20

#: hook: ``dequantize(info, packed_bytes) -> float array or None``, for packed (quantized)
#: tensors whose values can be computed; None: their bytes and type are shown, no statistics
dequantize: Callable | None = None


def limit_for(count: int) -> int:
    """Elements sampled of each of ``count`` tensors: MAX_SAMPLE, or fewer (MIN_SAMPLE at
    least) so that the model's statistics cost about TOTAL_SAMPLE elements."""
    return max(MIN_SAMPLE, min(MAX_SAMPLE, TOTAL_SAMPLE // max(count, 1)))


def sample(flat: np.ndarray, limit: int = MAX_SAMPLE) -> tuple[np.ndarray, bool]:
    """At most ``limit`` elements of ``flat``: all of them, or :data:`BLOCKS` evenly spaced
    contiguous blocks (True: a sample)."""
    n = flat.size
    if n <= limit:
        return flat, False
    per = limit // BLOCKS
    starts = np.linspace(0, n - per, BLOCKS).astype(np.int64)
    return np.concatenate([flat[s:s + per] for s in starts.tolist()]), True


def stats(values: np.ndarray) -> dict:
    """min, max, mean, std over the finite values; NaN and Inf counts; the fraction of zeros."""
    return stats_many([values])[0]


#: arrays of fewer elements have their statistics computed together (one pass over all of them)
SMALL = 1 << 16


def stats_many(arrays: list) -> list[dict]:
    """:func:`stats` of each numeric array: a large one by itself, the small ones all at once
    (many small tensors cost a few vectorised passes, not a few numpy calls each).  A sum past
    float64's range gives an infinite mean or std (the report shows none)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _stats_many(arrays)


def _stats_many(arrays: list) -> list[dict]:
    out: list = [None] * len(arrays)
    small = [i for i, a in enumerate(arrays) if a.size < SMALL]
    for k in range(0, len(small), 4096):
        part = small[k:k + 4096]
        for i, st in zip(part, _stats_batch([arrays[i] for i in part])):
            out[i] = st
    for i, a in enumerate(arrays):
        if out[i] is None:
            out[i] = _stats_one(a.reshape(-1))
    return out


def _stats_one(v: np.ndarray) -> dict:
    """The statistics of one large array (float64 accumulation, no float64 copy of it)."""
    n = int(v.size)
    if v.dtype.kind == "f":
        finite = np.isfinite(v)
        every = bool(finite.all())
        nan = 0 if every else int(np.count_nonzero(np.isnan(v)))
        f = v if every else v[finite]
    else:
        nan, f = 0, v
    out = {"count": n, "nan": nan, "inf": n - nan - int(f.size), "zero_fraction": float(np.count_nonzero(v == 0) / n),
           "min": None, "max": None, "mean": None, "std": None}
    if f.size:
        out.update(min=float(f.min()), max=float(f.max()), mean=float(f.mean(dtype=np.float64)),
                   std=float(f.std(dtype=np.float64)))
    return out


def _stats_batch(arrays: list) -> list[dict]:
    sizes = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    v = np.concatenate([a.reshape(-1) for a in arrays]) if len(arrays) > 1 else arrays[0].reshape(-1)
    v = v.astype(np.float64, copy=False)
    seg = np.repeat(np.arange(len(arrays)), sizes)
    finite = np.isfinite(v)
    nans = np.bincount(seg, np.isnan(v), len(arrays))
    nfin = np.bincount(seg, finite, len(arrays))
    zeros = np.bincount(seg, v == 0, len(arrays))
    f = np.where(finite, v, 0.0)
    mean = np.bincount(seg, f, len(arrays)) / np.maximum(nfin, 1)
    dev = np.where(finite, v - mean[seg], 0.0)
    std = np.sqrt(np.bincount(seg, dev * dev, len(arrays)) / np.maximum(nfin, 1))
    lo = np.full(len(arrays), np.inf)
    hi = np.full(len(arrays), -np.inf)
    some = np.flatnonzero(sizes)  # (reduceat over the non-empty ones: an empty one would take its neighbour's)
    if some.size:
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))[some]
        lo[some] = np.minimum.reduceat(np.where(finite, v, np.inf), starts)
        hi[some] = np.maximum.reduceat(np.where(finite, v, -np.inf), starts)
    out = []
    for i, n in enumerate(sizes.tolist()):
        has = nfin[i] > 0
        out.append({"count": n, "nan": int(nans[i]), "inf": int(n - nans[i] - nfin[i]),
                    "zero_fraction": float(zeros[i] / n) if n else None,
                    "min": float(lo[i]) if has else None, "max": float(hi[i]) if has else None,
                    "mean": float(mean[i]) if has else None, "std": float(std[i]) if has else None})
    return out


def _numeric(a: np.ndarray) -> np.ndarray | None:
    """The elements as numpy computes with them: ints and floats as they are (native byte
    order), bool and ml_dtypes' bfloat16, float8 ... as float32; None for other elements."""
    if a.dtype.kind in "iuf" and a.dtype.isnative:
        return a
    try:
        return a.astype(np.float32 if a.dtype.kind not in "iuf" else a.dtype.newbyteorder("="))
    except (TypeError, ValueError):
        return None


def _read(reader, name: str) -> np.ndarray:
    """The tensor's array, its digest not checked on the way: the report's check says whether
    the bytes are sound (``--full`` checks every digest), and a sample touches only its blocks."""
    if "verify" in inspect.signature(reader.tensor).parameters:
        return reader.tensor(name, verify=False)
    return reader.tensor(name)


def _remote_prefix(reader, t, limit: int) -> np.ndarray | None:
    """The first ``limit`` bytes of a tensor of a remote file, as its elements (None: not a plain
    array in the file)."""
    fetch = getattr(reader, "_read", None)
    if fetch is None or t.offset is None or t.extra.get("packed") or t.dtype.itemsize == 0:
        return None
    n = limit - limit % t.dtype.itemsize
    raw = fetch([(t.offset, n)])[0]
    return np.frombuffer(bytes(raw), dtype=t.dtype, count=len(raw) // t.dtype.itemsize)


def tensor_values(reader, t, *, remote: bool, full: bool, limit: int = MAX_SAMPLE) -> tuple[np.ndarray | None, dict]:
    """(the values a tensor's statistics are computed from -- at most ``limit`` of them -- or
    None; what the report says about them: ``error`` when they cannot be read (the report's
    violations say why), ``sample``, ``packed`` (its codec's parameters), ``dequantized``).
    A packed tensor's bytes are read only for :data:`dequantize`; a URL's tensor over
    :data:`REMOTE_SAMPLE_BYTES` is sampled from its first bytes unless ``full``."""
    out: dict = {}
    packed = bool(t.extra.get("packed"))
    if packed:
        out["packed"] = t.quant_params or {}
        if dequantize is None or (remote and not full and t.nbytes > REMOTE_SAMPLE_BYTES):
            return None, out
    try:
        if remote and not full and t.nbytes > REMOTE_SAMPLE_BYTES and not packed:
            a = _remote_prefix(reader, t, REMOTE_SAMPLE_BYTES)
            if a is None:
                return None, {"error": "not fetched (over 1 MiB; --full reads it)"}
            out["sample"] = f"the first {a.nbytes:,} bytes of {t.nbytes:,} (fetched without --full)"
        else:
            a = _read(reader, t.name)
    except E.FormatError as e:
        return None, {**out, "error": e.render()}
    except E.NotLocalError:  # (listed here, its bytes in other files: an index of a set)
        return None, {**out, "error": "its bytes are not in this file"}
    if packed:
        values = dequantize(t, a)
        if values is None:
            return None, out
        a = np.asarray(values)
        out["dequantized"] = True
    flat = np.asarray(a).reshape(-1)
    part, sampled = sample(flat, limit)
    values = _numeric(part)
    if values is not None and sampled:
        out.setdefault("sample", f"{part.size:,} of {flat.size:,} elements in {BLOCKS} evenly spaced blocks")
    return values, out


def tensor_stats(reader, t, *, remote: bool, full: bool, bins: int = 48) -> dict:
    """Statistics and histogram (``bins`` 0: none) of one tensor as the report shows them."""
    values, out = tensor_values(reader, t, remote=remote, full=full)
    if values is not None:
        out["stats"] = stats(values)
        h = histogram(values, bins) if bins else None
        if h is not None:
            out["hist"] = h
    return out
