"""What a report says about each tensor's values: min, max, mean, std, NaN/Inf count and zero
fraction, from at most :data:`MAX_SAMPLE` elements (evenly spaced blocks, so that a large tensor
costs a few pages, not a pass over all of it), and their histogram."""
from __future__ import annotations

import inspect
from typing import Callable

import numpy as np

from .. import errors as E
from .html_page import histogram

#: elements a tensor's statistics are computed from at most
MAX_SAMPLE = 1 << 20
#: blocks a sample of a large tensor is taken as (evenly spaced over it)
BLOCKS = 64
#: bytes of each tensor a report fetches over HTTP without --full
REMOTE_SAMPLE_BYTES = 1 << 20

#: hook: ``dequantize(info, packed_bytes) -> float array or None``, for packed (quantized)
#: tensors whose values can be computed; None: their bytes and type are shown, no statistics
dequantize: Callable | None = None


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


def stats_many(arrays: list) -> list[dict]:
    """:func:`stats` of each float64 array, computed for all of them at once (many small
    tensors cost a few vectorised passes, not a few numpy calls each)."""
    out: list = []
    for k in range(0, len(arrays), 4096):
        out.extend(_stats_batch(arrays[k:k + 4096]))
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
    np.minimum.at(lo, seg[finite], v[finite])
    np.maximum.at(hi, seg[finite], v[finite])
    out = []
    for i, n in enumerate(sizes.tolist()):
        has = nfin[i] > 0
        out.append({"count": n, "nan": int(nans[i]), "inf": int(n - nans[i] - nfin[i]),
                    "zero_fraction": float(zeros[i] / n) if n else None,
                    "min": float(lo[i]) if has else None, "max": float(hi[i]) if has else None,
                    "mean": float(mean[i]) if has else None, "std": float(std[i]) if has else None})
    return out


def _numeric(a: np.ndarray) -> np.ndarray | None:
    """The elements as float64, for a dtype with numeric values (bool as 0/1); None otherwise."""
    if a.dtype.kind in "biuf":
        return a.astype(np.float64)
    try:
        return a.astype(np.float64)  # (ml_dtypes' bfloat16, float8 ...)
    except (TypeError, ValueError):
        return None


def _read(reader, name: str, verified: bool) -> np.ndarray:
    """The tensor's array (its digest not checked again when the report's full check did)."""
    if verified and "verify" in inspect.signature(reader.tensor).parameters:
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


def tensor_values(reader, t, *, remote: bool, full: bool, verified: bool) -> tuple[np.ndarray | None, dict]:
    """(the values a tensor's statistics are computed from -- float64, at most MAX_SAMPLE of
    them -- or None, what the report says about them: ``error`` when they cannot be read (the
    report's violations say why), ``sample``, ``packed``)."""
    out: dict = {}
    try:
        if remote and not full and t.nbytes > REMOTE_SAMPLE_BYTES and not t.extra.get("packed"):
            a = _remote_prefix(reader, t, REMOTE_SAMPLE_BYTES)
            if a is None:
                return None, {"error": "not fetched (over 1 MiB; --full reads it)"}
            out["sample"] = f"the first {a.nbytes:,} bytes of {t.nbytes:,} (fetched without --full)"
        else:
            a = _read(reader, t.name, verified)
    except E.FormatError as e:
        return None, {"error": e.render()}
    if t.extra.get("packed"):
        out["packed"] = {k: t.extra[k] for k in ("ggml_type", "block", "block_bytes") if k in t.extra} or \
            dict(t.quant_params or {})
        values = dequantize(t, a) if dequantize is not None else None
        if values is None:
            return None, out
        a = np.asarray(values)
        out["dequantized"] = True
    flat = np.asarray(a).reshape(-1)
    part, sampled = sample(flat)
    values = _numeric(part)
    if values is not None and sampled:
        out.setdefault("sample", f"{part.size:,} of {flat.size:,} elements in {BLOCKS} evenly spaced blocks")
    return values, out


def tensor_stats(reader, t, *, remote: bool, full: bool, verified: bool, bins: int = 48) -> dict:
    """Statistics and histogram (``bins`` 0: none) of one tensor as the report shows them."""
    values, out = tensor_values(reader, t, remote=remote, full=full, verified=verified)
    if values is not None:
        out["stats"] = stats(values)
        h = histogram(values, bins) if bins else None
        if h is not None:
            out["hist"] = h
    return out
