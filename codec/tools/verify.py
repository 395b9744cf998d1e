"""``modelcodec verify``: the seed's human-readable view of a model file.

Layout (the seed's "Verifier Output Examples", DECISIONS.md "Verifier printout"; the
details the seed leaves open follow the reference verifier's ``*.verify.txt``)::

    B := 1024                                   size variables, when the format has them
    D := 128

    mode: str = "clamp_up"                      metadata, file order: key: TYPE = VALUE

    W.0: f32[128] = { 0.48424, 1.61435, -0.782165, -0.0947963, 1.15624, ..., 0.897275 }
    - [nbytes: 512, min: -3.19735, max: 2.8745, mean: 0.093444, median: 0.16931, std: 1.02064]
    - hist:
        [-3.19735,-2.59016):1
        ...
        [2.26732,2.8745]:2                      the last bin is closed: "]" (numpy.histogram)

    kernel: u8[128, 128] = {                    ndim >= 2: rows of reshape(shape[0], -1),
    { 163, 255, 148, 186, 142, ..., 15 } ,      at most 2, then "..."
    ...
    }

    x: f32 = 10.35                              one element (the reference: ndim 0 or numel 1)

    y: i16[] -- uninitialized                   a tensor declared without data

Blocks are separated by one blank line.  Numbers print like C++ iostream defaults (6
significant digits, ``format(v, ".6g")``); integers exactly; bools ``true``/``false``.
Previews show the first 5 and last 5 elements with ``...`` between when there are more than
10.  Statistics and the 10 equal-width bins are over the finite values; a tensor holding NaN
or +-Inf gets a ``- non-finite: N (nan a, +inf b, -inf c)`` line after the stats line.  An
empty tensor prints ``= {  }`` (the reference's empty form) and ``- [nbytes: 0, no elements]``.

Metadata, typed by the reader's ``meta_types``: typed scalars ``key: i32 = 5``,
``key: f32 = 0.125``, ``key: bool = true``, strings quoted, array values as
``key: i16[2, 3] = { ... }`` (always braced, as the reference), and bitsets as
``key: bitset[N] = { 1, 0, 1, ... }``: bit 0 (the LSB of the first byte) first, previewed
like an array.  Untyped (JSON) metadata is typed by its JSON kind (``str``, ``int``,
``float``, ``bool``, ``null``, ``list``, ``object``), lists and objects as compact JSON cut
after 200 characters.

Every format uses the same tensor view.  A packed (quantized) tensor is named by its codec
(``w: Q8_0[576, 49152] = { ... }``) and, where a format can dequantize it (ggml's block
types), previewed with the statistics of its dequantized float32 values (``nbytes`` stays
the stored bytes); one that cannot be dequantized prints
``-- packed: N bytes of quantized blocks (quant_id ...)`` (no statistics),
tensors whose bytes are in another file ``-- data not in this file``, and a tensor whose
shape cannot be resolved (the reader's ``unresolved_shape``) ``-- shape unknown: ...``.  Anything else
wrong with a file raises its :class:`codec.FormatError` (the CLI prints it on one line).

Statistics are vectorised numpy, each computed once: min, max (NaN/Inf detected from them, so
a finite tensor costs no extra pass), a float64-accumulated mean, a median by
``np.partition`` on one scratch copy, the standard deviation reusing that scratch buffer,
and ``np.histogram`` with the known range.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .. import errors as E, registry

PREVIEW = 5          # first / last elements shown
MAX_ROWS = 2         # rows of a >= 2-D tensor shown
BINS = 10
JSON_CUT = 200

_SHORT = {"bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
          "uint16": "u16", "uint32": "u32", "uint64": "u64", "float16": "f16", "float32": "f32",
          "float64": "f64", "bfloat16": "bf16"}


# ------------------------------------------------------------------ numbers
def fmt_float(v: float) -> str:
    """C++ iostream default: 6 significant digits, %g style."""
    return format(float(v), ".6g")


def _fmt_values(values: list) -> list[str]:
    out = []
    for v in values:
        if isinstance(v, (bool, np.bool_)):
            out.append("true" if v else "false")
        elif isinstance(v, (int, np.integer)):
            out.append(str(int(v)))
        else:
            out.append(fmt_float(v))
    return out


def _plain(a: np.ndarray) -> np.ndarray:
    """A small slice as something ``tolist`` turns into bool/int/float (bf16 etc. -> f32)."""
    if a.dtype.kind not in "biuf":
        return a.astype(np.float32)
    return a


def _brace(flat: np.ndarray) -> str:
    """``{ a, b, c, d, e, ..., v, w, x, y, z }`` of a 1-D array (the reference's "{  }" if empty)."""
    n = flat.shape[0]
    if n > 2 * PREVIEW:
        items = _fmt_values(_plain(flat[:PREVIEW]).tolist()) + ["..."] + _fmt_values(_plain(flat[-PREVIEW:]).tolist())
    else:
        items = _fmt_values(_plain(flat).tolist())
    return "{ " + ", ".join(items) + " }"


def fmt_shape(shape) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def preview(a: np.ndarray, shape: tuple) -> str:
    """The ``{ ... }`` value of an array of logical ``shape`` (``a`` may be squeezed or flat,
    e.g. a tensor of a rank numpy cannot hold; ``a.size`` equals the product of ``shape``)."""
    shape = tuple(int(d) for d in shape)
    numel = a.size
    if numel == 0 or len(shape) <= 1:
        return _brace(a.reshape(-1) if a.ndim != 1 else a)
    rows, per = shape[0], numel // shape[0]
    lines = []
    for i in range(min(rows, MAX_ROWS)):
        if a.ndim == len(shape):
            row = a[i].reshape(-1)              # a copy of one row at most (e.g. Fortran order)
        else:
            row = a.reshape(-1)[i * per:(i + 1) * per]
        lines.append(_brace(row) + " ,")
    if rows > MAX_ROWS:
        lines.append("...")
    return "{\n" + "\n".join(lines) + "\n}"


# ------------------------------------------------------------------ statistics
def _numeric(a: np.ndarray) -> np.ndarray:
    """A flat view (or, for f16/bf16/bool, a converted copy) to compute statistics on."""
    flat = a.reshape(-1) if a.flags.c_contiguous else a.ravel(order="K")
    if flat.dtype == np.bool_:
        return flat.view(np.uint8)
    if flat.dtype == np.float16 or flat.dtype.kind not in "iuf":
        return flat.astype(np.float32)
    return flat


def _moments(x: np.ndarray, is_float: bool, lo: float, hi: float):
    """(mean, median, std, hist counts, hist edges) of a flat finite array, each computed once."""
    n = x.size
    mean = float(x.mean(dtype=np.float64))
    scratch = x.copy()                  # median: partition one scratch copy; std reuses it
    h = n // 2
    if n % 2:
        scratch.partition(h)
        median = scratch[h].item()
    else:
        scratch.partition((h - 1, h))
        pair = scratch[h - 1:h + 1].tolist()
        median = (pair[0] + pair[1]) / 2      # Python int/float: exact for 64-bit integers
    if is_float:
        np.subtract(x, scratch.dtype.type(mean), out=scratch)
        np.multiply(scratch, scratch, out=scratch)
        var = float(scratch.sum(dtype=np.float64)) / n
    else:
        del scratch
        d = x.astype(np.float64)
        d -= mean
        np.multiply(d, d, out=d)
        var = float(d.sum()) / n
    try:
        counts, edges = np.histogram(x, bins=BINS, range=(lo, hi))
    except ValueError:
        # a range too narrow for BINS distinct float edges (e.g. two adjacent floats): count
        # everything in one bin [lo, hi] and leave the others empty
        edges = np.linspace(lo, hi, BINS + 1)
        counts = np.zeros(BINS, dtype=np.int64)
        counts[-1] = x.size
    return mean, float(median), math.sqrt(var), counts, edges


def stats_lines(a: np.ndarray, nbytes: int) -> list[str]:
    """The ``- [nbytes: ..., min: ...]`` line, a ``- non-finite`` line if any, and the hist block."""
    x = _numeric(a)
    if x.size == 0:
        return [f"- [nbytes: {nbytes}, no elements]"]
    is_float = x.dtype.kind == "f"
    mn, mx = x.min(), x.max()
    extra = []
    if is_float and not (math.isfinite(mn) and math.isfinite(mx)):
        nan = int(np.count_nonzero(np.isnan(x)))
        pinf = int(np.count_nonzero(x == np.inf))
        ninf = int(np.count_nonzero(x == -np.inf))
        extra.append(f"- non-finite: {nan + pinf + ninf} (nan {nan}, +inf {pinf}, -inf {ninf})")
        x = x[np.isfinite(x)]
        if x.size == 0:
            return [f"- [nbytes: {nbytes}, no finite values]"] + extra
        mn, mx = x.min(), x.max()
    lo, hi = (float(mn), float(mx)) if is_float else (int(mn), int(mx))
    big = max(abs(lo), abs(hi))
    if is_float and big > (1e150 if x.dtype.itemsize > 4 else 1e18):
        # squares (or the range) would overflow: work in float64 scaled by a power of two
        k = math.frexp(big)[1]
        y = np.ldexp(x.astype(np.float64), -k)
        mean, median, std, counts, edges = _moments(y, True, math.ldexp(lo, -k), math.ldexp(hi, -k))
        mean, median, std = (math.ldexp(v, k) for v in (mean, median, std))
        edges = np.ldexp(edges, k)
        edges[0], edges[-1] = lo, hi          # tiny ends may have underflowed in the scaling
    else:
        mean, median, std, counts, edges = _moments(x, is_float, float(mn), float(mx))
    fmt_mm = fmt_float if is_float else str
    out = [f"- [nbytes: {nbytes}, min: {fmt_mm(lo)}, max: {fmt_mm(hi)}, mean: {fmt_float(mean)}, "
           f"median: {fmt_float(median)}, std: {fmt_float(std)}]"]
    out += extra
    out.append("- hist:")
    e = [fmt_float(v) for v in edges.tolist()]
    c = counts.tolist()
    for i in range(BINS):
        close = "]" if i == BINS - 1 else ")"
        out.append(f"    [{e[i]},{e[i + 1]}{close}:{c[i]}")
    return out


# ------------------------------------------------------------------ metadata
def _dtype_short(dtype: np.dtype, name: str | None = None) -> str:
    if name in _SHORT.values() or name == "packed":
        return name
    return _SHORT.get(np.dtype(dtype).name, name or str(dtype))


def _json_text(v) -> str:
    s = json.dumps(v, ensure_ascii=False, separators=(", ", ": "), default=str)
    if len(s) > JSON_CUT:
        s = s[:JSON_CUT] + f" ... ({len(s)} characters)"
    return s


def _meta_typed(key: str, value: Any, typ: str) -> str:
    """A metadata value whose format types it (``meta_types``): arrays and bitsets shown as such."""
    if isinstance(value, np.ndarray):
        return f"{key}: {_dtype_short(value.dtype)}{fmt_shape(value.shape)} = {preview(value, value.shape)}"
    bits = getattr(value, "bits", None)
    if isinstance(bits, tuple):  # a bitset
        arr = np.frombuffer(bytes(bits), np.uint8) if bits else np.zeros(0, np.uint8)
        return f"{key}: bitset[{len(bits)}] = {_brace(arr)}"
    return f"{key}: {typ} = {_scalar(value)}"


def _scalar(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return fmt_float(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "0x" + bytes(value).hex()
    return _json_text(value)


def _json_kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, (list, tuple)):
        return "list"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def metadata_lines(r) -> list[str]:
    """One line per metadata entry: typed by the format where it types its values
    (``meta_types``), by their JSON kind otherwise."""
    md = r.metadata or {}
    types = getattr(r, "meta_types", None) or {}
    out = []
    for k, v in md.items():
        if k in types:
            out.append(_meta_typed(k, v, types[k]))
        elif v is None:
            out.append(f"{k}: null = null")
        elif isinstance(v, (list, tuple, dict)):
            out.append(f"{k}: {_json_kind(v)} = {_json_text(v)}")
        else:
            out.append(f"{k}: {_json_kind(v)} = {_scalar(v)}")
    return out


# ------------------------------------------------------------------ tensors
def tensor_block(r, name: str) -> str:
    try:
        t = r.tensors[name]
    except E.FormatError as e:
        if e.rule in r.UNRESOLVED_SHAPE_RULES:
            return f"{name}: -- shape unknown: {e.message}"
        raise
    codec = registry.packed_codec(t.quant_params) if t.common_dtype == "packed" else None
    dt = "packed" if t.common_dtype == "packed" else _dtype_short(t.dtype, t.extra.get("dtype_name"))
    head = f"{name}: {codec.name if codec is not None else dt}"
    if t.extra.get("has_data") is False:  # declared without data
        return f"{head}{fmt_shape(t.shape)} -- uninitialized"
    if t.offset is None:
        return f"{head}{fmt_shape(t.shape)} -- data not in this file ({t.extra.get('elsewhere', 'elsewhere')})"
    a = r.tensor(name)
    why = ""
    if codec is not None and codec.decode is not None:  # its values, not its packed bytes
        try:
            a = codec.decode(a, tuple(t.shape), "float32", f"tensor {name!r}")
            dt = "float32"
        except E.UsageError as e:  # (a shape its blocks do not fit: shown as bytes, and why)
            why = f"; not dequantized: {e}"
    if dt == "packed":
        q = "".join(f", {k} {t.extra[k]}" for k in ("quant_id", "quant_params") if k in t.extra)
        return f"{head}{fmt_shape(t.shape)} -- packed: {a.nbytes} bytes of quantized blocks{q}{why}"
    numel = math.prod(int(d) for d in t.shape)
    if numel == 1:                      # the reference prints ndim 0 and numel-1 tensors as scalars
        return f"{head} = {_fmt_values(_plain(a.reshape(-1)).tolist())[0]}"
    lines = [f"{head}{fmt_shape(t.shape)} = {preview(a, t.shape)}"]
    lines += stats_lines(a, t.nbytes)
    return "\n".join(lines)


def render(reader) -> str:
    """The whole view of an open reader, ending with a newline ("" for a file with nothing in it)."""
    blocks = []
    sv = getattr(reader, "sizevars", None)
    if sv:
        blocks.append("\n".join(f"{k} := {int(v)}" for k, v in sv.items()))
    md = metadata_lines(reader)
    if md:
        blocks.append("\n".join(md))
    for name in reader.tensors:
        blocks.append(tensor_block(reader, name))
    return "\n\n".join(blocks) + "\n" if blocks else ""
