"""``codec.diff(a, b)``: two models compared tensor by tensor, in any two formats (files, sets,
URLs), streamed in bounded memory; the result (:class:`Diff`) is data that ``modelcodec diff``
renders (:mod:`codec.tools.diff`).

Each tensor is matched by name and ends in one status (:data:`STATUSES`):

* ``identical``: same dtype and shape, every byte the same;
* ``equal``: same dtype and shape, some bits differ but every element has the same value
  (-0.0 and 0.0; two NaNs, whatever their payloads) or lies within the tolerances;
* ``different``: same dtype and shape, some element differs beyond the tolerances;
* ``dtype_changed``: same shape, another element type (values still compared, exactly across
  the two types: :func:`codec.convert.same_values`; packed bytes are not compared with numbers);
* ``shape_changed``: another shape (values not compared);
* ``only_a`` / ``only_b``: the name is in one model only;
* ``unreadable``: a side's bytes could not be read (the format's error is kept).

A tensor declared without data (a reader's ``has_data`` False) has no elements to compare: two such
tensors of one dtype and shape are ``identical``; against one with data, ``different``.

An element is within the tolerances when ``|a - b| <= atol + rtol * |b|`` (B is the
reference, as for ``numpy.isclose``); a NaN against a number is never within them.
Differences are computed in float64 (integers of the same type exactly as far as float64
holds them: the difference itself, not the two values, is rounded).  Packed (quantized) bytes
and other element types without numbers are compared byte by byte.

Memory: each tensor is read through its reader's zero-copy view (a remote single file is
fetched once into a temporary file first, as :func:`codec.convert` does) in pieces of
:data:`PIECE_BYTES`; a local file's mapped pages are dropped once compared, and only the
elements whose bits differ are converted and measured.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import os
from dataclasses import asdict, dataclass, field

import ml_dtypes
import numpy as np

from . import api, errors as E
from .convert import same_values
from .engine.values import plain
from .io.writer_io import _page_dropper
from .ui.display import finite as _json_number
from .ui.progress import Progress

#: what each side's tensors are compared in, bytes of the wider side per piece
PIECE_BYTES = 1 << 20
#: elements measured at a time (their float64 temporaries stay in the CPU's caches: 2-3x faster
#: than measuring a whole piece)
_BLOCK = 1 << 15
#: the statuses a tensor can have, in the order the summary counts them
STATUSES = ("identical", "equal", "different", "dtype_changed", "shape_changed", "only_a", "only_b",
            "unreadable")
#: the histogram of |a - b| per changed tensor: decades, [0, 1e-12), [1e-12, 1e-11), ...,
#: [1e11, 1e12), [1e12, inf] -- the edges, len(counts) + 1 of them
HISTOGRAM_EDGES = (0.0, *(float(f"1e{k}") for k in range(-12, 13)), math.inf)
_EDGES = np.array(HISTOGRAM_EDGES)
_BIN_LOW, _BIN_HIGH = -13, 12  # floor(log10) of the first bin's values (below 1e-12) and of the last one's


@dataclass
class Side:
    """What was compared on one side: where from, its format, its tensors and their bytes."""
    source: str
    format: str
    tensors: int
    nbytes: int


@dataclass
class TensorDiff:
    """One tensor name's comparison.  ``compared`` counts elements (bytes when ``bytewise``);
    ``bits_differ`` the elements whose bytes differ (same dtype only); ``differing`` those
    beyond the tolerances (a NaN against a number among them, also counted in
    ``nan_mismatches``); ``max_abs``/``max_rel`` the largest ``|a - b|`` and ``|a - b| / |b|``
    over the elements whose values differ (NaN mismatches aside; ``|b| = 0`` makes it inf), at
    index ``max_at`` where A holds ``a_value`` and B ``b_value``; ``histogram`` counts those
    elements' ``|a - b|`` over :data:`HISTOGRAM_EDGES`."""
    name: str
    status: str
    dtype_a: str | None = None
    dtype_b: str | None = None
    shape_a: tuple | None = None
    shape_b: tuple | None = None
    compared: int = 0
    bytewise: bool = False
    bits_differ: int | None = None
    differing: int = 0
    nan_mismatches: int = 0
    max_abs: float | None = None
    max_rel: float | None = None
    max_at: tuple | None = None
    a_value: float | int | None = None
    b_value: float | int | None = None
    histogram: tuple | None = None
    error: str | None = None

    @property
    def equal(self) -> bool:
        """Whether this tensor counts as equal (bit-identical, or every element within the tolerances)."""
        return self.status in ("identical", "equal")

    def as_dict(self) -> dict:
        d = {k: _json_number(v) for k, v in asdict(self).items()}
        for k in ("shape_a", "shape_b", "max_at"):
            if d[k] is not None:
                d[k] = list(d[k])
        if self.histogram is not None:
            d["histogram"] = list(self.histogram)
        return d


@dataclass
class Diff:
    """What :func:`diff` found.  ``equal`` is the verdict (every tensor equal; metadata is
    reported, not judged); ``metadata_added`` holds the keys only B has, ``metadata_removed``
    those only A has, ``metadata_changed`` key -> (A's value, B's value)."""
    a: Side
    b: Side
    rtol: float
    atol: float
    tensors: list = field(default_factory=list)
    metadata_added: dict = field(default_factory=dict)
    metadata_removed: dict = field(default_factory=dict)
    metadata_changed: dict = field(default_factory=dict)

    @property
    def equal(self) -> bool:
        return all(t.equal for t in self.tensors)

    @property
    def metadata_equal(self) -> bool:
        return not (self.metadata_added or self.metadata_removed or self.metadata_changed)

    @property
    def changed(self) -> list:
        """The tensors that are not bit-identical (what the human output lists)."""
        return [t for t in self.tensors if t.status != "identical"]

    def counts(self) -> dict[str, int]:
        """How many tensors have each status (every status, zeros included)."""
        out = dict.fromkeys(STATUSES, 0)
        for t in self.tensors:
            out[t.status] += 1
        return out

    def __bool__(self) -> bool:
        """``if codec.diff(a, b):`` reads as "if they are equal"."""
        return self.equal

    def as_dict(self) -> dict:
        """The JSON document ``modelcodec diff --json`` prints (non-finite numbers as the
        strings "inf", "-inf", "nan")."""
        return {"a": asdict(self.a), "b": asdict(self.b), "rtol": self.rtol, "atol": self.atol,
                "equal": self.equal, "counts": self.counts(),
                "histogram_edges": [_json_number(x) for x in HISTOGRAM_EDGES],
                "tensors": [t.as_dict() for t in self.tensors],
                "metadata": {"equal": self.metadata_equal, "added": _json_number(self.metadata_added),
                             "removed": _json_number(self.metadata_removed),
                             "changed": {k: {"a": _json_number(a), "b": _json_number(b)}
                                         for k, (a, b) in self.metadata_changed.items()}}}


def _tolerance(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)) or v < 0:
        raise E.UsageError(f"{name}={v!r}: a tolerance is a finite number >= 0")
    return float(v)


# ---------------------------------------------------------------------------- the comparison
def diff(a, b, *, rtol: float = 0.0, atol: float = 0.0, progress: bool | None = None) -> Diff:
    """Compare the models ``a`` and ``b`` (anything :func:`codec.open` takes: files of any
    format, sets, http(s) URLs, buffers) tensor by tensor and their metadata key by key; see
    :mod:`codec.compare` for what each status means.  Tensors pass when bit-identical or
    every element satisfies ``|a - b| <= atol + rtol * |b|``.  Streams: memory stays at a few
    pieces whatever the models' sizes."""
    rtol, atol = _tolerance("rtol", rtol), _tolerance("atol", atol)
    with contextlib.ExitStack() as stack:
        ra = stack.enter_context(api.open_whole(a, progress))  # (as convert: from a server without
        rb = stack.enter_context(api.open_whole(b, progress))  # Range requests, one download)
        out = Diff(_side(a, ra), _side(b, rb), rtol, atol)
        _metadata(out, ra.metadata, rb.metadata)
        common = [n for n in ra.tensors if n in rb.tensors]
        total = sum(ra.tensors[n].nbytes for n in common)
        with Progress(total, "diff", enabled=progress) as bar:
            for name in ra.tensors:
                if name not in rb.tensors:
                    t = ra.tensors[name]
                    out.tensors.append(TensorDiff(name, "only_a", t.common_dtype, None, tuple(t.shape)))
                    continue
                out.tensors.append(_tensor(name, ra, rb, rtol, atol))
                bar.update(ra.tensors[name].nbytes)
        for name in rb.tensors:
            if name not in ra.tensors:
                t = rb.tensors[name]
                out.tensors.append(TensorDiff(name, "only_b", None, t.common_dtype, None, tuple(t.shape)))
        return out


def _side(src, r) -> Side:
    shown = os.fspath(src) if isinstance(src, (str, os.PathLike)) else "<buffer>"
    return Side(shown, r.format, len(r.tensors), sum(r.tensors[n].nbytes for n in r.tensors))


def _same_value(x, y) -> bool:
    """Two metadata values are the same: equal numbers, texts, lists and maps (a bool is not
    a number; NaN is NaN)."""
    x, y = plain(x), plain(y)
    if isinstance(x, bool) != isinstance(y, bool):
        return False
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same_value(p, q) for p, q in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same_value(x[k], y[k]) for k in x)
    try:
        return bool(x == y)
    except Exception:  # (an object whose == gives no truth value)
        return x is y


def _metadata(out: Diff, ma: dict, mb: dict) -> None:
    for k, v in ma.items():
        if k not in mb:
            out.metadata_removed[k] = plain(v)
        elif not _same_value(v, mb[k]):
            out.metadata_changed[k] = (plain(v), plain(mb[k]))
    for k, v in mb.items():
        if k not in ma:
            out.metadata_added[k] = plain(v)


def _kind(dt: np.dtype) -> str | None:
    """"b", "i", "u" or "f" (numpy's floats and ml_dtypes' bfloat16 and float8 types, whatever
    numpy calls their kind); None for elements without numbers."""
    if dt.kind in "biuf":
        return dt.kind
    try:
        ml_dtypes.finfo(dt)
        return "f"
    except (ValueError, TypeError, KeyError):
        return None


def _numeric(t) -> bool:
    return t.common_dtype != "packed" and _kind(t.dtype) is not None


def _tensor(name: str, ra, rb, rtol: float, atol: float) -> TensorDiff:
    ta, tb = ra.tensors[name], rb.tensors[name]
    d = TensorDiff(name, "identical", ta.common_dtype, tb.common_dtype, tuple(ta.shape), tuple(tb.shape))
    if d.shape_a != d.shape_b:
        d.status = "shape_changed"
        return d
    same_type = d.dtype_a == d.dtype_b and (d.dtype_a != "packed" or ta.quant_params == tb.quant_params)
    bare_a, bare_b = _without_data(ta), _without_data(tb)
    if bare_a or bare_b:  # (declared without data: no values to compare)
        if bare_a != bare_b:
            d.status, d.error = "different", f"{'A' if bare_a else 'B'} declares it without data"
        elif not same_type:
            d.status = "dtype_changed"
        return d
    values = _numeric(ta) and _numeric(tb)
    if not same_type and not values:  # (packed against numbers, or two codecs: nothing to compare)
        d.status = "dtype_changed"
        return d
    try:
        xa, xb = _flat(ra, name), _flat(rb, name)
        if xa.nbytes != xb.nbytes and same_type:
            d.status = "shape_changed"  # (packed data of one codec and shape, stored in other sizes)
            return d
        _compare(d, xa, xb, same_type, values, rtol, atol)
    except E.FormatError as e:
        d.status, d.error = "unreadable", e.render()
        return d
    if not same_type:
        d.status = "dtype_changed"
    elif d.differing:
        d.status = "different"
    elif d.bits_differ:
        d.status = "equal"
    return d


def _without_data(t) -> bool:
    """Whether the tensor is declared without data (a reader's ``has_data`` False): a dtype and
    shape, no elements."""
    return t.extra.get("has_data") is False


def _flat(r, name: str) -> np.ndarray:
    """The tensor's elements (a packed tensor's bytes) as a 1-d zero-copy view."""
    a = r.tensor(name)
    return a.reshape(-1)


class _Acc:
    """The measures of one tensor, gathered piece by piece."""

    def __init__(self):
        self.bits = 0
        self.differing = 0
        self.nan = 0
        self.max_abs = -1.0
        self.max_rel = 0.0
        self.at = None
        self.hist = np.zeros(len(HISTOGRAM_EDGES) - 1, np.int64)


def _compare(d: TensorDiff, xa: np.ndarray, xb: np.ndarray, same_type: bool, values: bool,
             rtol: float, atol: float) -> None:
    bytewise = not values
    if bytewise:  # (packed bytes, or elements without numbers: bytes against bytes)
        xa, xb = xa.view(np.uint8), xb.view(np.uint8)
    d.bytewise = bytewise
    n = xa.size
    d.compared = n
    step = max(1, PIECE_BYTES // max(xa.itemsize, xb.itemsize, 1))
    drops = [_page_dropper(x) if x.nbytes >= PIECE_BYTES else None for x in (xa, xb)]
    unit = np.dtype(f"u{xa.itemsize}") if same_type and xa.itemsize in (1, 2, 4, 8) else None
    acc = _Acc()
    for s in range(0, n, step):
        pa, pb = xa[s:s + step], xb[s:s + step]
        if same_type:
            neq = pa.view(unit) != pb.view(unit) if unit is not None else \
                (pa.view(np.uint8).reshape(len(pa), -1) != pb.view(np.uint8).reshape(len(pb), -1)).any(axis=1)
            idx = np.flatnonzero(neq)
            del neq
            acc.bits += idx.size
            if idx.size and bytewise:
                acc.differing += idx.size
            elif idx.size == len(pa):  # (every element: no gathering)
                for k in range(0, len(pa), _BLOCK):
                    _measure(acc, pa[k:k + _BLOCK], pb[k:k + _BLOCK], None, s + k, rtol, atol)
            else:
                for k in range(0, idx.size, _BLOCK):
                    sub = idx[k:k + _BLOCK]
                    _measure(acc, pa[sub], pb[sub], sub, s, rtol, atol)
        else:
            for k in range(0, len(pa), _BLOCK):
                _measure(acc, pa[k:k + _BLOCK], pb[k:k + _BLOCK], None, s + k, rtol, atol)
        for drop, x in zip(drops, (pa, pb)):
            if drop is not None:
                drop(s * x.itemsize, x.nbytes)
    d.bits_differ = acc.bits if same_type else None
    d.differing, d.nan_mismatches = acc.differing, acc.nan
    if acc.max_abs >= 0:
        d.max_abs, d.max_rel = acc.max_abs, math.inf if acc.max_abs == math.inf else acc.max_rel
        k, va, vb = acc.at
        d.max_at = _unravel(k, d.shape_a)
        d.a_value, d.b_value = va, vb
    if not bytewise and (acc.hist.any() or acc.nan):
        d.histogram = tuple(int(c) for c in acc.hist)


def _as_float(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.bool_:
        x = x.view(np.uint8) != 0
    with np.errstate(all="ignore"):
        return x.astype(np.float64)


def _absdiff(x: np.ndarray, y: np.ndarray, fx: np.ndarray, fy: np.ndarray) -> np.ndarray:
    """|x - y| in float64: for two integer arrays the exact difference rounded once (never the
    two values rounded first), else the difference of the float64 values."""
    if x.dtype.kind in "iu" and y.dtype.kind in "iu" and np.dtype(np.uint64) not in (x.dtype, y.dtype):
        x, y = x.astype(np.int64), y.astype(np.int64)
        hi, lo = np.maximum(x, y), np.minimum(x, y)
        return (hi.astype(np.uint64) - lo.astype(np.uint64)).astype(np.float64)  # (wraps to the exact difference)
    if x.dtype == y.dtype == np.dtype(np.uint64):
        hi, lo = np.maximum(x, y), np.minimum(x, y)
        return (hi - lo).astype(np.float64)
    with np.errstate(all="ignore"):
        return np.abs(fx - fy)


def _measure(acc: _Acc, x: np.ndarray, y: np.ndarray, where: np.ndarray | None, start: int, rtol: float,
             atol: float) -> None:
    """Measure the elements ``x`` (A) and ``y`` (B) whose bits differ (or, across two types,
    whose values may), at flat indices ``start + where`` (``where`` None: ``x`` is the piece at
    ``start``)."""
    fx, fy = _as_float(x), _as_float(y)
    n = len(x)
    with np.errstate(all="ignore"):
        if x.dtype == y.dtype and _kind(x.dtype) in ("i", "u"):  # (their bits differ: so do their values)
            same = nan = None
        elif x.dtype == y.dtype and _kind(x.dtype) == "f":
            nx, ny = np.isnan(fx), np.isnan(fy)
            same, nan = (fx == fy) | (nx & ny), nx ^ ny
        else:  # (exact for any two types: float64 rounds neither side's value)
            same, nan = same_values(x, y), np.isnan(fx) ^ np.isnan(fy)
        diff = _absdiff(x, y, fx, fy)
        if atol == 0 and rtol == 0:  # (only the same value passes: also a difference float64 rounds to 0)
            acc.differing += n - (0 if same is None else int(np.count_nonzero(same)))
        else:
            within = diff <= atol + rtol * np.abs(fy)  # (False for a NaN against a number)
            if same is not None:
                within |= same
            acc.differing += n - int(np.count_nonzero(within))
        if same is None:
            keep = None
        else:
            acc.nan += int(np.count_nonzero(nan))
            keep = ~(same | nan)
            if keep.all():
                keep = None
            elif not keep.any():
                return
        dk = diff if keep is None else diff[keep]
        fyk = np.abs(fy if keep is None else fy[keep])
        i = int(np.argmax(dk))
        if dk[i] > acc.max_abs:
            j = i if keep is None else int(np.flatnonzero(keep)[i])
            acc.max_abs = float(dk[i])
            acc.at = (start + int(j if where is None else where[j]), _scalar(x[j]), _scalar(y[j]))
        acc.max_rel = max(acc.max_rel, float(np.fmax.reduce(dk / fyk)))  # (x / 0 is inf; NaN from inf / inf skipped)
        # the decade of each difference: log10 says it, the edges settle the last ulp
        k = np.floor(np.log10(dk))
        np.clip(k, _BIN_LOW, _BIN_HIGH, out=k)
        k = k.astype(np.int64) - _BIN_LOW
        k -= dk < _EDGES[k]
        k += dk >= _EDGES[k + 1]
        np.clip(k, 0, len(acc.hist) - 1, out=k)
        acc.hist += np.bincount(k, minlength=len(acc.hist))


def _scalar(v) -> float | int:
    if isinstance(v, (np.bool_, bool)):
        return int(bool(v))
    if isinstance(v, np.integer):
        return int(v)
    return float(v)


def _unravel(k: int, shape: tuple) -> tuple:
    """The index of flat element ``k`` in an array of ``shape`` (C order)."""
    out = []
    for n in reversed(shape):
        k, r = divmod(k, n) if n else (k, 0)
        out.append(r)
    return tuple(reversed(out))
