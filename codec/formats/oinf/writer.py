"""OINF v1 writer: metadata value encoding and the streaming, deterministic file writer."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from ...schemas import oinf as S
from ...schemas.oinf import TensorFlags, ValueType

from ... import errors as E
from ...io.writer_io import LazyTensor, as_array, mapping_arg, named_pairs
from ...engine.relations.plan import after, place
from ...io.tensor_writer import check_bools, size_of, write_placed
from .values import (BITSET, HEADER, META, NDARRAY, NP_DTYPES, SIZEVAR, STRING, TAG_OF, TAG_OF_NAME, TENSOR, Bitset,
                     ScalarValue, SizeVar, TensorSpec, UninitializedTensor, _align, _as_type, _type_name)


# =============================================================================== writer
def _check_name(name, what: str) -> bytes:
    if not isinstance(name, str) or not name or any(c not in S.NAME_CHARS for c in name):
        raise E.UsageError(f"{what} name {name!r} must be non-empty and of [A-Za-z0-9._-]")
    return name.encode("ascii")


def _narrow(a: np.ndarray) -> np.ndarray:
    """An integer array in the smallest type of its kind (signed/unsigned) holding its values,
    as the reference writer stores a list."""
    lo, hi = (int(a.min()), int(a.max())) if a.size else (0, 0)
    kinds = (np.int8, np.int16, np.int32, np.int64) if a.dtype.kind == "i" else (np.uint8, np.uint16, np.uint32, np.uint64)
    for dt in kinds:
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return a.astype(dt)
    return a


def _infer_scalar(value) -> tuple[int, Any]:
    """(type tag, value) of a Python/numpy scalar, as the reference writer infers it."""
    if isinstance(value, (bool, np.bool_)):
        return ValueType.BOOL, bool(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.integer):
        v = int(value)
        kinds = (np.uint8, np.uint16, np.uint32, np.uint64) if v >= 0 else (np.int8, np.int16, np.int32, np.int64)
        for dt in kinds:
            info = np.iinfo(dt)
            if info.min <= v <= info.max:
                return TAG_OF[np.dtype(dt).newbyteorder("<")], v
        raise E.UsageError(f"integer {v} does not fit 64 bits")
    if isinstance(value, np.integer):
        return TAG_OF[value.dtype.newbyteorder("<")], int(value)
    if isinstance(value, float) or isinstance(value, np.float64):
        return ValueType.F32, _f32(float(value))  # the reference stores Python floats and np.float64 as f32
    if isinstance(value, np.floating):
        return TAG_OF[value.dtype.newbyteorder("<")], float(value)
    raise E.UsageError(f"no OINF scalar for {type(value).__name__}")


def _f32(v):
    """A float (or float array) as the f32 the reference stores it as; a finite value past f32's
    range is refused (it would be written as infinity: data that was not given)."""
    a = np.asarray(v, dtype=np.float64)
    big = np.isfinite(a) & (np.abs(a) > np.finfo(np.float32).max)
    if big.any():
        raise E.UsageError(f"{float(a[big].flat[0])!r} is past float32's range, and OINF stores Python floats as "
                           "f32: give ScalarValue(value, 'f64') (or an f64 array) to keep it")
    return a.astype(np.float32) if a.ndim else v


def _ndarray_value(value, dtype: str | None = None) -> np.ndarray:
    """An NDARRAY value: an array as it is; a list (or tuple) as the reference writer stores it
    -- floats as f32, integers in the smallest type of their kind; a dtype converts either."""
    if dtype is not None:
        a = _as_type("NDARRAY metadata", value, TAG_OF_NAME[_type_name(dtype)])
    elif isinstance(value, np.ndarray):
        a = value
    else:
        try:
            a = np.array(value)
        except ValueError as e:  # ragged
            raise E.UsageError(f"NDARRAY metadata: cannot make an array of {type(value).__name__}: {e}") from None
        if a.dtype.kind == "f":
            a = _f32(a)
        elif a.dtype.kind in "iu":
            a = _narrow(a)
    tag = TAG_OF.get(a.dtype.newbyteorder("<") if a.dtype.byteorder in "<>=|" else a.dtype)
    if tag is None:
        raise E.UsageError(f"NDARRAY metadata cannot hold {a.dtype}")
    return a.astype(NP_DTYPES[tag])


def encode_value(value) -> tuple[int, bytes, int]:
    """(value type, blob bytes unpadded, value_nbytes) of a metadata value."""
    if isinstance(value, ScalarValue):
        if value.dtype is None:
            return encode_value(value.value)
        if isinstance(value.value, (list, tuple, np.ndarray)):
            return encode_value(_ndarray_value(value.value, value.dtype))
        tag = TAG_OF_NAME[_type_name(value.dtype)]
        raw = _as_type("metadata value", value.value, tag).reshape(1).tobytes()
        return tag, raw, len(raw)
    if isinstance(value, str):
        raw = STRING.build({"text": _string_bytes(value)})
        return ValueType.STRING, raw, len(raw)
    if isinstance(value, Bitset):
        bits = np.array(value.bits, dtype=bool)
        packed = np.packbits(bits, bitorder="little").tobytes() if bits.size else b""
        raw = BITSET.build({"bit_count": bits.size, "byte_count": len(packed), "bits": packed})
        return ValueType.BITSET, raw, len(raw)
    if isinstance(value, (list, tuple, np.ndarray)):
        a = _ndarray_value(value)
        head = NDARRAY.build({"element_type": TAG_OF[a.dtype.newbyteorder("<") if a.dtype.byteorder in "<>=|" else a.dtype],
                              "dims": list(a.shape)})
        raw = head + np.ascontiguousarray(a).tobytes()
        return ValueType.NDARRAY, raw, _align(len(raw))
    tag, v = _infer_scalar(value)
    raw = np.array([v], dtype=NP_DTYPES[tag]).tobytes()
    return tag, raw, len(raw)


def _string_bytes(s: str) -> bytes:
    try:
        b = s.encode("ascii")
    except UnicodeEncodeError:
        raise E.UsageError(f"STRING value {s!r} must be ASCII of [A-Za-z0-9._-]") from None
    if any(c not in S.NAME_CHARS for c in s):
        raise E.UsageError(f"STRING value {s!r} must be of [A-Za-z0-9._-]")
    return b


def write_oinf_file(path, tensors: Mapping[str, Any] | Iterable | None = None, *,
                    sizevars: Mapping[str, int] | None = None, metadata: Mapping[str, Any] | None = None,
                    sort: bool | str = "tables", progress: bool | None = None) -> str:
    """Write an OINF v1 file: deterministic, 8-aligned, atomic, and streamed (tensor bytes go
    from the arrays to the file in pieces).  The tensors keep the order given (the spec lets a
    file list them in any order); the sizevar and metadata tables are sorted by name as the
    reference writer sorts them -- ``sort=True`` sorts the tensors too (the reference's bytes
    exactly), ``sort=False`` keeps every table in the order given.

    ``tensors``: name -> array, TensorSpec, UninitializedTensor or LazyTensor (loaded only
    while it is written).  ``metadata``: key -> int,
    float, bool, str, Bitset, ScalarValue, list or np.ndarray (NDARRAY).
    """
    sv = list(mapping_arg(sizevars, "sizevars").items())
    md = list(mapping_arg(metadata).items())
    ts = list(named_pairs(tensors if tensors is not None else ()))
    for what, items in (("sizevar", sv), ("metadata", md), ("tensor", ts)):
        for n, _ in items:
            _check_name(n, what)
    if sort not in (True, False, "tables"):
        raise E.UsageError(f"sort={sort!r}: True, False or 'tables' (sizevars and metadata sorted, tensors as given)")
    if sort:
        sv.sort(key=lambda kv: kv[0].encode())
        md.sort(key=lambda kv: kv[0].encode())
    if sort is True:
        ts.sort(key=lambda kv: kv[0].encode())
    for what, items in (("sizevar", sv), ("metadata", md), ("tensor", ts)):
        names = [n for n, _ in items]
        if len(set(names)) != len(names):
            raise E.UsageError(f"duplicate {what} name in {names}")
    sv_rows = []
    for n, val in sv:
        val = val.value if isinstance(val, SizeVar) else val
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or not 0 <= int(val) < 2**64:
            raise E.UsageError(f"sizevar {n!r} must be an integer in 0..2^64-1 (got {val!r})")
        sv_rows.append(SIZEVAR.build({"name": _check_name(n, "sizevar"), "value": int(val)}))
    blobs_md = []
    for n, val in md:
        with E.about(f"OINF metadata {n!r}"):
            blobs_md.append((n, *encode_value(val)))
    tens = []
    for n, t in ts:
        if isinstance(t, TensorSpec):
            t = t.resolved(n)
        if isinstance(t, UninitializedTensor):
            tens.append((n, TAG_OF_NAME[t.dtype], t.shape, None))
            continue
        a = t if isinstance(t, LazyTensor) else as_array(n, t)
        tag = TAG_OF.get(a.dtype.newbyteorder("<") if a.dtype.byteorder in "<>=|" else a.dtype)
        if tag is None:
            raise E.UsageError(f"tensor {n!r}: OINF tensors are numeric or bool (got {a.dtype})")
        if a.ndim > S.MAX_NDIM:
            raise E.UsageError(f"tensor {n!r}: ndim over {S.MAX_NDIM}")
        if tag == ValueType.BOOL:  # (its reader refuses a bool byte other than 0 or 1: OINF-BOOL)
            a = (LazyTensor(a.dtype, a.shape, lambda t=a, n=n: check_bools(n, t.materialise(n)))
                 if isinstance(a, LazyTensor) else check_bools(n, a))
        tens.append((n, tag, a.shape, a))
    # layout: header, tables, then metadata blobs and tensor blobs, each where the schema's
    # declarations accept it
    rules = S.RELATIONS + S.DATA_RELATIONS

    def start(column, at):
        return after(rules, column, at, records=S.RECORDS)

    off_sv = start("FileHeader.offset_sizevars", HEADER.size)
    off_md = start("FileHeader.offset_metadata", off_sv + sum(map(len, sv_rows)))
    md_entry_sizes = [len(META.build({"key": _check_name(n, "metadata"), "value_type": tag, "value_nbytes": nb,
                                      "value_offset": 0})) for n, tag, _, nb in blobs_md]
    off_t = start("FileHeader.offset_tensors", off_md + sum(md_entry_sizes))
    t_entry_sizes = [len(TENSOR.build({"name": _check_name(n, "tensor"), "dtype": tag, "flags": 0, "dims": list(shape),
                                       "data_nbytes": 0, "data_offset": 0})) for n, tag, shape, _ in tens]
    off_data = start("FileHeader.offset_data", off_t + sum(t_entry_sizes))
    data = [(n, raw) for n, _, raw, _ in blobs_md] + [(n, a) for n, _, _, a in tens if a is not None]
    at, pos = place(rules, "MetadataEntry.value_offset", [len(raw) for _, _, raw, _ in blobs_md], off_data)
    t_at, file_size = place(rules, "TensorEntry.data_offset", [size_of(v) for _, v in data[len(at):]], pos,
                            pad_end=True)
    at += t_at
    md_rows = [META.build({"key": n.encode(), "value_type": int(tag), "value_nbytes": nb, "value_offset": o})
               for (n, tag, _, nb), o in zip(blobs_md, at)]
    t_rows, t_at = [], iter(at[len(blobs_md):])
    for n, tag, shape, a in tens:
        has = a is not None
        t_rows.append(TENSOR.build({"name": n.encode(), "dtype": int(tag), "flags": int(TensorFlags.HAS_DATA) if has else 0,
                                    "dims": list(shape), "data_nbytes": a.nbytes if has else 0,
                                    "data_offset": next(t_at) if has else 0}))
    head = HEADER.build({"n_sizevars": len(sv_rows), "n_metadata": len(md_rows), "n_tensors": len(t_rows),
                         "offset_sizevars": off_sv, "offset_metadata": off_md, "offset_tensors": off_t,
                         "offset_data": off_data, "file_size": file_size})

    def section(rows, start, end):
        blob = b"".join(rows)
        return blob + bytes(end - start - len(blob))

    control = head + section(sv_rows, off_sv, off_md) + section(md_rows, off_md, off_t) + section(t_rows, off_t, off_data)
    return write_placed(path, control, [(o, v, n) for (n, v), o in zip(data, at)], file_size, progress=progress)

