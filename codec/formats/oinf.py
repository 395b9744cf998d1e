"""OINF v1: reader, validation, writer, and the seed's dataclass API.

Records (header, the three tables, STRING/BITSET/NDARRAY payload headers) are declared in
:mod:`schemas.oinf` and parsed by the engine; this module adds the relations (section order,
blob bounds, value_nbytes semantics, HAS_DATA, numel x size), typed metadata values, the
streaming writer, and the dataclass export of the reference tool (``TensorSpec``,
``UninitializedTensor``, ``write_oinf``, ``dataclass_to_oinf``, ``SizeVar``, ``Bitset``,
``ScalarValue``) — its two seed examples come out byte-identical to the reference files.
"""
from __future__ import annotations

import collections
import collections.abc
import dataclasses
import math
import os
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from schemas import oinf as S
from schemas.oinf import Rule, TensorFlags, ValueType

from .. import errors as E
from .. import relations
from ..engine import record_of
from ..io import LazyTensor, array_pieces, as_array, atomic_write, write_all
from ..model import Reader, Report, StopCheck, TensorInfo, numpy_can_hold
from ..progress import Progress

FMT = S.FORMAT
HEADER = record_of(S.FileHeader)
SIZEVAR = record_of(S.SizeVar)
META = record_of(S.MetadataEntry)
TENSOR = record_of(S.TensorEntry)
STRING = record_of(S.StringPayload)
BITSET = record_of(S.BitsetPayload)
NDARRAY = record_of(S.NdarrayHeader)

#: value type tag -> numpy dtype (numeric and bool types)
NP_DTYPES = {1: np.dtype("i1"), 2: np.dtype("<i2"), 3: np.dtype("<i4"), 4: np.dtype("<i8"), 5: np.dtype("u1"),
             6: np.dtype("<u2"), 7: np.dtype("<u4"), 8: np.dtype("<u8"), 9: np.dtype("<f2"), 10: np.dtype("<f4"),
             11: np.dtype("<f8"), 12: np.dtype("?")}
for _t, _d in NP_DTYPES.items():
    assert _d.itemsize == S.TYPE_SIZE[_t]
TAG_OF = {d: t for t, d in NP_DTYPES.items()}
TAG_OF_NAME = {S.TYPE_NAMES[t]: t for t in NP_DTYPES}
_NAME_SET = frozenset(S.NAME_CHARS)


def _align(x: int) -> int:
    return -(-x // S.ALIGN) * S.ALIGN


def _err(cls, offset, path, rule, msg) -> E.FormatError:
    return cls(FMT, offset, path, rule, msg)


class _Offsets:
    """A record's field offsets, computed on first use (only error messages need them)."""

    def __init__(self, rec, r):
        self._rec, self._r, self._d = rec, r, None

    def __getitem__(self, name: str) -> int:
        if self._d is None:
            self._d = self._rec.field_offsets(self._r)
        return self._d[name]


# =============================================================================== values
@dataclass(frozen=True)
class UninitializedTensor:
    """A tensor declared without data (HAS_DATA = 0): its dtype and shape only; ``name``
    renames a dataclass field's tensor."""
    dtype: Any
    shape: tuple = ()
    name: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "dtype", _type_name(self.dtype))
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))


class TensorSpec:
    """A tensor value: ``data`` (anything np.asarray takes), ``dtype`` (an OINF type name or
    tag 1-12) to convert it to, ``name`` to rename a dataclass field's tensor.  Arguments as
    in openinfer-oinf's ``TensorSpec(data, dtype=None, name=None)``; ``array=`` is ``data``."""

    def __init__(self, data: Any = None, dtype: Any = None, name: str | None = None, *, array: Any = None):
        if array is not None:
            if data is not None:
                raise E.UsageError("TensorSpec: give data or array=, not both")
            data = array
        self.data = data
        self.dtype = None if dtype is None else _type_name(dtype)
        self.name = name

    @property
    def array(self) -> Any:
        return self.data

    def resolved(self, what: str) -> np.ndarray:
        """The data as an array, converted to ``dtype`` when one is given."""
        if self.dtype is None:
            return self.data
        return _as_type(f"tensor {what!r}", self.data, TAG_OF_NAME[self.dtype])

    def __eq__(self, other) -> bool:
        return (isinstance(other, TensorSpec) and self.dtype == other.dtype and self.name == other.name
                and np.array_equal(np.asarray(self.data), np.asarray(other.data)))

    __hash__ = None

    def __repr__(self) -> str:
        return f"TensorSpec({self.data!r}, dtype={self.dtype!r}, name={self.name!r})"


@dataclass(frozen=True)
class SizeVar:
    """Marks a size variable (an unsigned 64-bit value)."""
    value: int


@dataclass(frozen=True)
class Bitset:
    """A BITSET metadata value: ``bits`` as booleans, stored LSB-first."""
    bits: tuple

    def __post_init__(self):
        object.__setattr__(self, "bits", tuple(bool(b) for b in self.bits))


@dataclass(frozen=True)
class ScalarValue:
    """A metadata value with an explicit type (a scalar, or a list/array for NDARRAY); without
    ``dtype`` the type is inferred as for a plain value."""
    value: Any
    dtype: str | None = None


#: openinfer-oinf's names of its later types (tags 16-25), which OINF v1 does not have
_LATER_TYPES = {"bf16": 16, "f8": 17, "f8e5m2": 17, "float8e5m2": 17, "i4": 18, "i2": 19, "i1": 20, "u4": 21,
                "u2": 22, "u1": 23, "t2": 24, "t1": 25}


def _type_name(dt) -> str:
    """The OINF type name of a dtype argument: a type name (``"f32"``; case and surrounding
    spaces ignored) or a type tag 1-12 -- what openinfer-oinf takes.  Its later types (bf16,
    f8, i4 ... t1: tags 16-25) are refused: OINF v1 has tags 1-15, tensors 1-12 only."""
    if isinstance(dt, str):
        key = dt.strip().lower()
        if key in TAG_OF_NAME:
            return key
        if key in _LATER_TYPES:
            raise E.UsageError(f"OINF v1 has no type {dt!r} (tag {_LATER_TYPES[key]} is not one of the spec's "
                               f"tags 1-15); numeric types: {', '.join(TAG_OF_NAME)}")
    elif isinstance(dt, (int, np.integer)) and not isinstance(dt, (bool, np.bool_)) and int(dt) in NP_DTYPES:
        return S.TYPE_NAMES[int(dt)]
    hint = ""
    if dt is not None and not isinstance(dt, (str, int)):  # a numpy dtype: name its OINF type
        try:
            tag = TAG_OF.get(np.dtype(dt).newbyteorder("<"))
            hint = f" (for {np.dtype(dt)} give {S.TYPE_NAMES[tag]!r})" if tag else ""
        except (TypeError, ValueError):
            pass
    raise E.UsageError(f"OINF has no type {dt!r}: give a type name ({', '.join(TAG_OF_NAME)}) or its tag 1-12{hint}")


def _as_type(what: str, value, tag: int) -> np.ndarray:
    """``value`` as an array of OINF type ``tag``.  Floats to integers truncate (numpy's
    astype), but a value the integer type cannot hold -- out of its range, NaN or infinite --
    is a UsageError: numpy would wrap it (300 -> 44 in u8) and write data that was not given."""
    dt = NP_DTYPES[tag]
    try:
        a = np.asarray(value)
        if a.dtype == object:
            raise ValueError("not a numeric value or a homogeneous array of them")
        if dt.kind in "iu" and a.size and a.dtype.kind in "iuf":
            if a.dtype.kind == "f":
                if not np.isfinite(a).all():
                    raise ValueError("NaN or infinity has no integer value")
                lo, hi = int(np.trunc(a.min())), int(np.trunc(a.max()))
            else:
                lo, hi = int(a.min()), int(a.max())
            info = np.iinfo(dt)
            if lo < info.min or hi > info.max:
                raise ValueError(f"{lo if lo < info.min else hi} is outside {S.TYPE_NAMES[tag]}'s range "
                                 f"[{info.min}, {info.max}]")
        return a.astype(dt)
    except (TypeError, ValueError, OverflowError) as e:
        raise E.UsageError(f"{what}: cannot convert to {S.TYPE_NAMES[tag]}: {e}") from None


# =============================================================================== reader
class OinfReader(Reader):
    """Reads an OINF v1 file from a path (mmap) or a buffer.

    ``.sizevars`` (name -> int), ``.metadata`` (key -> int, float, bool, str, Bitset or
    np.ndarray) with ``.meta_types`` (key -> type name), ``.tensors``; ``tensor(name)`` is a
    read-only zero-copy view, or an :class:`UninitializedTensor` for a tensor without data.
    """
    format = "oinf"
    FMT = FMT

    def __init__(self, source, *, strict: bool = True, _collect: bool = False):
        self.strict = strict
        self.header: dict = {}
        self.sizevars: dict[str, int] = {}
        self._meta: dict[str, Any] = {}
        self.meta_types: dict[str, str] = {}
        self._entries: list[dict] = []
        self._index: dict[str, int] = {}
        self._open(source, _collect)

    # ------------------------------------------------------------------ structure
    def _parse(self, v):
        buf, size = self._src.buf, self._src.size
        h = self._read_header(v, HEADER, Rule.TRUNCATED)
        # sections, tables, paddings and names: the rules between fields are declared in
        # schemas.oinf.RELATIONS; what each value holds is checked here
        ctx = relations.Context(FMT, size, h, HEADER)
        found = relations.check(S.RELATIONS, ctx, buf)
        parsed = {}
        for rec, path in ((SIZEVAR, "sizevars"), (META, "metadata"), (TENSOR, "tensors")):
            t = ctx.tables.get(rec.name)
            rows = t.rows if t is not None else []
            v.extend(rec.check_rows(rows, path))
            parsed[path] = rows
        if found.stopped:
            v.extend(found.errors)
            raise StopCheck
        v.extend(found.errors)
        self._sizevars(v, parsed["sizevars"])
        self._metadata(v, parsed["metadata"])
        self._tensor_table(v, parsed["tensors"])

    def _zero_gap(self, v, a: int, b: int, what: str) -> None:
        if b > a and np.frombuffer(self._src.buf, np.uint8, b - a, a).any():
            v.append(_err(E.ReservedError, a, what, Rule.PADDING, f"bytes [{a}, {b}) must be zero"))

    def _name(self, v, off, r, field, path, seen: dict) -> str | None:
        try:
            name = r[field].decode("ascii")
        except UnicodeDecodeError:
            return None  # the charset constraint already reported it
        if not name or not _NAME_SET.issuperset(name):
            return None
        if name in seen:  # (a repeated name: the relations report it)
            return None
        seen[name] = True
        return name

    def _sizevars(self, v, rows):
        seen: dict = {}
        for i, (off, r) in enumerate(rows):
            name = self._name(v, off, r, "name", f"sizevars[{i}]", seen)
            if name is not None:
                self.sizevars[name] = r["value"]

    def _blob(self, v, off, path, field_offset, blob_off, nbytes) -> bool:
        h, size = self.header, self._src.size
        end = min(h["file_size"], size)
        if blob_off < h["offset_data"] or blob_off > end or nbytes > end - blob_off:
            field_offset = field_offset() if callable(field_offset) else field_offset
            past_end = blob_off >= h["offset_data"] and blob_off + nbytes <= h["file_size"]  # only the cut
            v.append(_err(E.TruncatedError if past_end else E.BoundsError, field_offset, path, Rule.BLOB_BOUNDS,
                          f"blob [{blob_off}, +{nbytes}) is outside the data section [{h['offset_data']}, {end})"))
            return False
        return True

    def _metadata(self, v, rows):
        seen: dict = {}
        for i, (off, r) in enumerate(rows):
            p = f"metadata[{i}]"
            key = self._name(v, off, r, "key", p, seen)
            t, nb, bo = r["value_type"], r["value_nbytes"], r["value_offset"]
            fo = META.field_offsets(r)
            if t not in tuple(ValueType) or bo % S.ALIGN:
                continue
            if not self._blob(v, off, f"{p}.value_offset", off + fo["value_offset"], bo, nb):
                continue
            nb_path, nb_off = f"{p}.value_nbytes", off + fo["value_nbytes"]
            try:
                value, want = self._value(t, bo, nb, f"{p}.value")
            except E.FormatError as e:
                v.append(e)
                continue
            if want != nb:
                v.append(_err(E.StructureError, nb_off, nb_path, Rule.VALUE_NBYTES,
                              f"{S.TYPE_NAMES[t]} value needs value_nbytes {want} (got {nb})"))
                continue
            if key is not None:
                self._meta[key] = value
                self.meta_types[key] = S.TYPE_NAMES[t] if t != ValueType.NDARRAY else "ndarray"

    def _value(self, t: int, off: int, nbytes: int, path: str):
        """(decoded value, the value_nbytes it must have) of a metadata blob."""
        buf = self._src.buf
        end = off + nbytes
        if t in NP_DTYPES:
            size = S.TYPE_SIZE[t]
            if nbytes != size:
                return None, size
            a = np.frombuffer(buf, NP_DTYPES[t], 1, off)
            if t == ValueType.BOOL:
                b = buf[off]
                if b > 1:
                    raise _err(E.ConstraintError, off, path, Rule.BOOL, f"bool byte must be 0 or 1 (got {b})")
                return bool(b), 1
            return a[0].item(), size
        limit = buf[:min(self.header["file_size"], self._src.size)]
        if t == ValueType.STRING:
            r, nxt = STRING.parse_at(limit, off, path)
            for e in STRING.check(r, off, path):
                raise e
            return r["text"].decode("ascii"), nxt - off
        if t == ValueType.BITSET:
            r, nxt = BITSET.parse_at(limit, off, path)
            for e in BITSET.check(r, off, path):
                raise e
            if r["byte_count"] != -(-r["bit_count"] // 8):
                raise _err(E.StructureError, off + 4, f"{path}.byte_count", Rule.BITSET,
                           f"must be ceil({r['bit_count']} / 8) (got {r['byte_count']})")
            bits = np.unpackbits(np.frombuffer(r["bits"], np.uint8), bitorder="little")[:r["bit_count"]]
            return Bitset(tuple(bits.astype(bool).tolist())), nxt - off
        # NDARRAY
        r, nxt = NDARRAY.parse_at(buf[:end], off, path)
        for e in NDARRAY.check(r, off, path):
            raise e
        if not numpy_can_hold(r["dims"], S.TYPE_SIZE.get(r["element_type"], 1)):
            raise _err(E.RangeError, off + 8, f"{path}.dims", Rule.DIM, f"no array has the shape {list(r['dims'])}")
        numel = math.prod(r["dims"])
        dt = NP_DTYPES[r["element_type"]]
        need = numel * dt.itemsize
        if need > end - nxt:
            raise _err(E.BoundsError, nxt, f"{path}.data", Rule.NDARRAY,
                       f"{S.TYPE_NAMES[r['element_type']]}{list(r['dims'])} needs {need} bytes, value_nbytes leaves {end - nxt}")
        a = self._src.array(dt, numel, nxt).reshape(tuple(r["dims"]))
        if dt == np.bool_ and np.frombuffer(buf, np.uint8, numel, nxt).max(initial=0) > 1:
            raise _err(E.ConstraintError, nxt, f"{path}.data", Rule.BOOL, "bool bytes must be 0 or 1")
        return a, _align(nxt + need) - off

    def _tensor_table(self, v, rows):
        seen: dict = {}
        for i, (off, r) in enumerate(rows):
            p = f"tensors[{i}]"
            name = self._name(v, off, r, "name", p, seen)
            fo = _Offsets(TENSOR, r)  # field positions, computed only when an error needs one
            ok = r["dtype"] in NP_DTYPES and r["ndim"] <= S.MAX_NDIM
            if not numpy_can_hold(r["dims"], S.TYPE_SIZE.get(r["dtype"], 1)):
                v.append(_err(E.RangeError, off + fo["dims"], f"{p}.dims", Rule.DIM,
                              f"no array has the shape {list(r['dims'])}"))
                ok = False
            has = bool(r["flags"] & TensorFlags.HAS_DATA)
            if not has:
                if r["data_offset"] or r["data_nbytes"]:
                    v.append(_err(E.StructureError, off + fo["data_nbytes"], f"{p}.data_nbytes", Rule.NO_DATA,
                                  f"without HAS_DATA, data_offset and data_nbytes must be 0 "
                                  f"(got {r['data_offset']}, {r['data_nbytes']})"))
                    ok = False
            elif ok:
                want = math.prod(r["dims"]) * S.TYPE_SIZE[r["dtype"]]
                if want != r["data_nbytes"]:
                    v.append(_err(E.StructureError, off + fo["data_nbytes"], f"{p}.data_nbytes", Rule.NBYTES,
                                  f"{S.TYPE_NAMES[r['dtype']]}{list(r['dims'])} needs {E.show_int(want)} bytes (got {r['data_nbytes']})"))
                    ok = False
                elif r["data_offset"] % S.ALIGN or not self._blob(
                        v, off, f"{p}.data_offset", lambda: off + fo["data_offset"], r["data_offset"], r["data_nbytes"]):
                    ok = False
                elif r["dtype"] == ValueType.BOOL and r["data_nbytes"] and np.frombuffer(
                        self._src.buf, np.uint8, r["data_nbytes"], r["data_offset"]).max() > 1:
                    v.append(_err(E.ConstraintError, r["data_offset"], f"{p}.data", Rule.BOOL,
                                  "bool bytes must be 0 or 1"))
                    ok = False
            if name is not None:
                self._index[name] = len(self._entries)
                self._entries.append(dict(r, ok=ok, has_data=has, entry_offset=off, name=name))

    # ------------------------------------------------------------------ public reading
    @property
    def metadata(self) -> dict:
        return dict(self._meta)

    def _info(self, i: int) -> TensorInfo:
        r = self._entries[i]
        if not r["ok"]:
            raise _err(E.StructureError, r["entry_offset"], f"tensors[{i}]", Rule.NBYTES,
                       f"tensor {r['name']!r} is unreadable (see validate)").with_source(self.source)
        return TensorInfo(r["name"], NP_DTYPES[r["dtype"]], tuple(r["dims"]),
                          r["data_offset"] if r["has_data"] else None, r["data_nbytes"],
                          {"dtype_name": S.TYPE_NAMES[r["dtype"]], "has_data": r["has_data"], "type_tag": r["dtype"]})

    def tensor(self, name: str):
        """A read-only zero-copy view, or an UninitializedTensor for a tensor without data."""
        t = self.tensors[name]
        if not t.extra["has_data"]:
            return UninitializedTensor(t.extra["dtype_name"], t.shape)
        return self._src.array(t.dtype, math.prod(t.shape), t.offset).reshape(t.shape)

    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        rep = self._report("full" if full else "structure")
        if self.header:
            rep.checked.append(f"header, {len(self.sizevars)} sizevars, {len(self._meta)} metadata values, "
                               f"{len(self._entries)} tensors (the OINF spec's validation checklist)")
        if full:
            rep.notes.append("OINF stores no checksum: tensor data cannot be verified")
        return self._finish(rep)

    def inspect_notes(self, t: TensorInfo) -> dict:
        return {} if t.extra["has_data"] else {"uninitialized": True}

    def describe(self) -> dict:
        d = super().describe()
        d.update({"version": str(self.header.get("version")), "file_size": self._src.size,
                  "sizevars": dict(self.sizevars), "metadata_types": dict(self.meta_types)})
        return d


validate_file = OinfReader.validate_file


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
        return ValueType.F32, float(value)  # the reference stores Python floats and np.float64 as f32
    if isinstance(value, np.floating):
        return TAG_OF[value.dtype.newbyteorder("<")], float(value)
    raise E.UsageError(f"no OINF scalar for {type(value).__name__}")


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
            a = a.astype(np.float32)
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
                    sort: bool = True, progress: bool | None = None) -> str:
    """Write an OINF v1 file: deterministic (tables sorted by name unless ``sort=False``),
    8-aligned, atomic, and streamed (tensor bytes go from the arrays to the file in pieces).

    ``tensors``: name -> array, TensorSpec, UninitializedTensor or LazyTensor (loaded only
    while it is written).  ``metadata``: key -> int,
    float, bool, str, Bitset, ScalarValue, list or np.ndarray (NDARRAY).
    """
    sv = list((sizevars or {}).items())
    md = list((metadata or {}).items())
    ts = list(tensors.items()) if isinstance(tensors, Mapping) else list(tensors or ())
    for what, items in (("sizevar", sv), ("metadata", md), ("tensor", ts)):
        for n, _ in items:
            _check_name(n, what)
    if sort:
        sv.sort(key=lambda kv: kv[0].encode())
        md.sort(key=lambda kv: kv[0].encode())
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
    blobs_md = [(n, *encode_value(val)) for n, val in md]
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
        tens.append((n, tag, a.shape, a))
    # layout: header, tables, then metadata blobs and tensor blobs, each 8-aligned
    off_sv = HEADER.size
    off_md = _align(off_sv + sum(map(len, sv_rows)))
    md_entry_sizes = [len(META.build({"key": _check_name(n, "metadata"), "value_type": tag, "value_nbytes": nb,
                                      "value_offset": 0})) for n, tag, _, nb in blobs_md]
    off_t = _align(off_md + sum(md_entry_sizes))
    t_entry_sizes = [len(TENSOR.build({"name": _check_name(n, "tensor"), "dtype": tag, "flags": 0, "dims": list(shape),
                                       "data_nbytes": 0, "data_offset": 0})) for n, tag, shape, _ in tens]
    off_data = _align(off_t + sum(t_entry_sizes))
    pos = off_data
    md_rows, md_at = [], []
    for n, tag, raw, nb in blobs_md:
        md_rows.append(META.build({"key": n.encode(), "value_type": int(tag), "value_nbytes": nb, "value_offset": pos}))
        md_at.append(pos)
        pos = _align(pos + len(raw))
    t_rows, t_at = [], []
    for n, tag, shape, a in tens:
        if a is None:
            t_rows.append(TENSOR.build({"name": n.encode(), "dtype": int(tag), "flags": 0, "dims": list(shape),
                                        "data_nbytes": 0, "data_offset": 0}))
            t_at.append(None)
            continue
        t_rows.append(TENSOR.build({"name": n.encode(), "dtype": int(tag), "flags": int(TensorFlags.HAS_DATA),
                                    "dims": list(shape), "data_nbytes": a.nbytes, "data_offset": pos}))
        t_at.append(pos)
        pos = _align(pos + a.nbytes)
    file_size = pos
    head = HEADER.build({"n_sizevars": len(sv_rows), "n_metadata": len(md_rows), "n_tensors": len(t_rows),
                         "offset_sizevars": off_sv, "offset_metadata": off_md, "offset_tensors": off_t,
                         "offset_data": off_data, "file_size": file_size})

    def section(rows, start, end):
        blob = b"".join(rows)
        return blob + bytes(end - start - len(blob))

    control = head + section(sv_rows, off_sv, off_md) + section(md_rows, off_md, off_t) + section(t_rows, off_t, off_data)
    total = sum(a.nbytes for *_, a in tens if a is not None)
    with Progress(total, f"write {os.path.basename(os.fspath(path))}", enabled=progress) as bar, \
            atomic_write(path) as f:
        write_all(f, control)
        at = off_data
        for (n, tag, raw, nb), o in zip(blobs_md, md_at):
            write_all(f, bytes(o - at) + raw)
            at = o + len(raw)
        for (n, tag, shape, a), o in zip(tens, t_at):
            if a is None:
                continue
            if o > at:
                write_all(f, bytes(o - at))
            if isinstance(a, LazyTensor):
                a = a.materialise(n)  # one lazy tensor in memory at a time
            for p in array_pieces(a)():
                write_all(f, p)
                bar.update(len(p))
            at = o + a.nbytes
        if file_size > at:
            write_all(f, bytes(file_size - at))
    return os.fspath(path)


# =============================================================================== dataclasses
@dataclass
class OinfModel:
    """What a dataclass instance becomes: the three tables, in file order."""
    sizevars: dict
    metadata: dict
    tensors: dict


#: dataclass fields whose dict value contributes its items to the table of the same name
_TABLE_FIELDS = ("sizevars", "metadata", "tensors")


def _field_meta(annotation, field_metadata) -> dict:
    """What a field declares about itself: ``Annotated`` extras (a string is a flag, a mapping
    is merged) and then ``field(metadata=...)`` -- keys "sizevar", "tensor", "dtype", "shape"."""
    meta: dict = {}
    if typing.get_origin(annotation) is typing.Annotated:
        for extra in typing.get_args(annotation)[1:]:
            if isinstance(extra, str):
                meta[extra] = True
            elif isinstance(extra, Mapping):
                meta.update(extra)
    meta.update(field_metadata or {})
    return meta


def _base_type(annotation):
    """The annotation without ``Annotated[...]`` or ``Optional[...]`` around it."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return typing.get_args(annotation)[0]
    if origin is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


# The reference validates the instance against its annotations before exporting it (pydantic,
# lax mode): a value is converted to its field's type -- which changes what is written -- or
# refused.  The conversions below are those, for the annotations a model dataclass uses.
_TRUE_TEXT = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE_TEXT = frozenset({"0", "off", "f", "false", "n", "no"})
_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?\s*")
_ITERABLES = (list, tuple, set, frozenset, collections.deque, range, np.ndarray, types.GeneratorType,
              collections.abc.KeysView, collections.abc.ValuesView)
_I64 = 2**63


class _NoFit(Exception):
    """A value its field's annotation does not take."""


def _text(v):
    if isinstance(v, bytes):
        try:
            return v.decode()
        except UnicodeDecodeError:
            raise _NoFit from None
    return v


def _lax_int(v) -> int:
    if isinstance(v, (bool, np.bool_, int)):
        return int(v)
    if isinstance(v, np.integer) and -_I64 <= int(v) < _I64:
        return int(v)
    if isinstance(v, (float, np.floating)) and math.isfinite(v) and float(v).is_integer() and -_I64 <= v < _I64:
        return int(v)
    v = _text(v)
    if isinstance(v, str) and _INT_TEXT.fullmatch(v):
        return int(v.strip().split(".")[0])
    raise _NoFit


def _lax_float(v) -> float:
    v = _text(v)
    if isinstance(v, (bool, np.bool_, int, np.integer, float, np.floating, str)):
        try:
            return float(v)
        except (ValueError, OverflowError):
            pass
    raise _NoFit


def _lax_bool(v) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer, float, np.floating)) and v in (0, 1):
        return bool(v)
    v = _text(v)
    if isinstance(v, str) and v.lower() in _TRUE_TEXT | _FALSE_TEXT:
        return v.lower() in _TRUE_TEXT
    raise _NoFit


def _lax_str(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        try:
            return bytes(v).decode()
        except UnicodeDecodeError:
            raise _NoFit from None
    if isinstance(v, str):
        return str(v)
    raise _NoFit


_LAX = {int: _lax_int, float: _lax_float, bool: _lax_bool, str: _lax_str}


def _lax(value, ann):
    """``value`` as the reference's validation makes it for the annotation ``ann``: int, float,
    bool and str convert (``True`` -> 1 for int, 1 -> 1.0 for float, "yes" -> True for bool, a
    str stays a str); list / tuple / dict convert their items; a class takes its instances;
    ``Optional`` also None; ``Any``, unions of several types and the rest take anything."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:
        return _lax(value, args[0])
    if origin is typing.Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        return _lax(value, rest[0]) if len(rest) == 1 else value
    if ann is typing.Any or ann is object:
        return value
    if ann in _LAX:
        return _LAX[ann](value)
    kind = origin or ann
    if kind in (list, tuple):
        if not isinstance(value, _ITERABLES):
            raise _NoFit
        items = list(value)
        if kind is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(items):
                raise _NoFit
            items = [_lax(v, a) for v, a in zip(items, args)]
        elif args:
            items = [_lax(v, args[0]) for v in items]
        return kind(items)
    if kind is dict:
        if not isinstance(value, dict):
            raise _NoFit
        return {_lax(k, args[0]): _lax(v, args[1]) for k, v in value.items()} if len(args) == 2 else value
    if isinstance(kind, type):
        if isinstance(value, kind):
            return value
        raise _NoFit
    return value


def _declared_dtype(name: str, meta: dict):
    """A field's declared dtype (None without one); one that is no type name or tag at all is
    refused, whatever the field holds (the type is checked where it is used)."""
    if "dtype" not in meta:
        return None
    dt = meta["dtype"]
    if not (isinstance(dt, int) or (isinstance(dt, str) and dt.strip().lower() in _LATER_TYPES)):
        _type_name(dt)
    return dt


def _native(what: str, a) -> None:
    """An array not in the machine's byte order is refused, as the reference does."""
    if isinstance(a, np.ndarray) and a.dtype.byteorder not in "=|" and a.dtype != a.dtype.newbyteorder("="):
        raise E.UsageError(f"{what}: a {a.dtype.str} array is not in this machine's byte order; pass "
                           f"a.astype(a.dtype.newbyteorder('='))")


def _sizevar_value(name: str, value, from_dict: bool) -> int:
    """A size variable's value.  A bool is 1/0 in a ``sizevars`` dict and refused in a field,
    as in the reference; a fractional number is refused (the reference truncates 3.7 to 3)."""
    if isinstance(value, SizeVar):
        value = value.value
    if value is None or (isinstance(value, bool) and not from_dict):
        raise E.UsageError(f"sizevar {name!r} cannot be {value!r}")
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise E.UsageError(f"sizevar {name!r} must be an integer (got {value!r}): it is not truncated")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise E.UsageError(f"sizevar {name!r} must be an integer (got {value!r})") from None


def _metadata_value(name: str, value, dtype=None):
    """A field's value as the writer's metadata value, typed as the reference types it: a bool,
    str or Bitset as such (a declared dtype does not apply); an integer (numpy's too) in the
    smallest type holding it, a float f32, a list NDARRAY (see ``_ndarray_value``), an array
    NDARRAY of its own type -- or as the declared dtype; ``ScalarValue`` declares one."""
    if isinstance(value, ScalarValue):
        return _metadata_value(name, value.value, value.dtype if value.dtype is not None else dtype)
    if isinstance(value, (bool, Bitset)):
        return value
    if isinstance(value, str):
        if not value:
            raise E.UsageError(f"metadata {name!r}: an empty string is not exported (openinfer-oinf refuses it too)")
        return value
    if isinstance(value, (int, np.integer)):
        return int(value) if dtype is None else ScalarValue(int(value), dtype)
    if isinstance(value, (float, np.floating)):
        return float(value) if dtype is None else ScalarValue(float(value), dtype)
    if isinstance(value, (list, tuple, np.ndarray)):
        if dtype is None:
            _native(f"metadata {name!r}", value)
        return value if dtype is None else ScalarValue(value, dtype)
    if isinstance(value, np.bool_):
        raise E.UsageError(f"metadata {name!r}: a numpy bool is not exported as metadata (as in openinfer-oinf); "
                           "give bool(value) or annotate the field `bool`")
    raise E.UsageError(f"metadata {name!r}: OINF has no value type for {type(value).__name__}")


def _tensor_value(name: str, value, meta: dict):
    """(tensor name, writer value) of a field that is a tensor."""
    if isinstance(value, (TensorSpec, UninitializedTensor)):
        if isinstance(value, TensorSpec) and value.dtype is None:
            _native(f"tensor {name!r}", value.data)
        return value.name or name, value
    if isinstance(value, np.ndarray):
        _native(f"tensor {name!r}", value)
        return name, value
    dtype = meta.get("dtype")
    if isinstance(value, (list, tuple)):
        return name, TensorSpec(value, dtype)
    if value is None:  # a declared tensor without a value: its dtype and shape, no data
        if dtype is None or meta.get("shape") is None:
            raise E.UsageError(f"tensor {name!r} is None: declare its dtype and shape "
                               "(field(metadata={'dtype': ..., 'shape': ...})) or give it a value")
        return name, UninitializedTensor(dtype, tuple(meta["shape"]))
    raise E.UsageError(f"tensor {name!r}: OINF cannot store a {type(value).__name__} as a tensor")


def dataclass_to_oinf(instance) -> OinfModel:
    """Map a dataclass instance onto OINF tables with openinfer-oinf's rules (differential
    tests in ``tests/test_oinf_parity.py``; the deliberate differences are in the README):

    * each field's value is first converted to its annotation as the reference's validation
      does (``_lax``: an ``int`` field takes True as 1, a ``float`` field 3 as 3.0, a ``bool``
      field 1 or "yes" as True, a ``str`` field only text; a class annotation its instances)
      -- a value that does not convert is refused;
    * a field annotated ``int`` (``Optional[int]``, ``SizeVar``, or declaring "sizevar"), or
      holding a ``SizeVar``, is a size variable;
    * a field holding a ``TensorSpec``, ``UninitializedTensor`` or numpy array, declaring
      "tensor" (``Annotated[list, "tensor"]``, ``field(metadata={"tensor": True})``), or a
      list/tuple with a declared dtype is a tensor (``TensorSpec``/``UninitializedTensor``
      ``name`` renames it; None with a declared dtype and shape is a tensor without data);
      two tensors of one name are refused;
    * anything else is metadata (see ``_metadata_value``);
    * fields named ``sizevars``, ``metadata`` and ``tensors`` holding a dict contribute its
      items (a field of the same name replaces an item).

    Each table is written sorted by field name (a renamed tensor stays at its field's place)."""
    if not dataclasses.is_dataclass(instance) or isinstance(instance, type):
        raise E.UsageError(f"expected a dataclass instance, got {type(instance).__name__}")
    try:
        hints = typing.get_type_hints(type(instance), include_extras=True)
    except Exception:
        hints = {}
    fields = dataclasses.fields(instance)
    values = {}
    for f in fields:
        ann = hints.get(f.name, f.type)
        value = getattr(instance, f.name)
        try:
            values[f.name] = _lax(value, ann)
        except _NoFit:
            shown = repr(value) if len(repr(value)) <= 60 else f"a {type(value).__name__} value"
            typ = ann.__name__ if typing.get_origin(ann) is None and hasattr(ann, "__name__") else str(ann)
            raise E.UsageError(f"field {f.name!r}: {shown} is not a valid {typ}") from None
    sv: dict = {}
    md: dict = {}
    ts: dict = {}
    for table, into in zip(_TABLE_FIELDS, (sv, md, ts)):
        items = values[table] if table in values else getattr(instance, table, None)
        if isinstance(items, dict):
            into.update((k, (v, {})) for k, v in items.items())
    for f in fields:
        if f.name in _TABLE_FIELDS:
            continue
        ann = hints.get(f.name, f.type)
        meta, base, value = _field_meta(ann, f.metadata), _base_type(ann), values[f.name]
        if isinstance(value, SizeVar) or meta.get("sizevar") or base in (int, SizeVar):
            sv[f.name] = (value, None)
            continue
        if isinstance(value, ScalarValue):
            md[f.name] = (value, meta)
            continue
        declared = _declared_dtype(f.name, meta) is not None
        if meta.get("tensor") or isinstance(value, (TensorSpec, UninitializedTensor, np.ndarray)) or \
                (isinstance(value, (list, tuple)) and declared):
            ts[f.name] = (value, meta)
        else:
            md[f.name] = (value, meta)
    tensors: dict = {}
    for k, (v, m) in sorted(ts.items()):
        name, t = _tensor_value(k, v, m)
        if name in tensors:
            raise E.UsageError(f"two tensors named {name!r}: names are unique in OINF's tensor table")
        tensors[name] = t
    return OinfModel({k: _sizevar_value(k, v, m is not None) for k, (v, m) in sorted(sv.items())},
                     {k: _metadata_value(k, v, m.get("dtype")) for k, (v, m) in sorted(md.items())},
                     tensors)


def write_oinf(instance, path, *, progress: bool | None = None) -> str:
    """Write a dataclass instance as OINF (the seed's API; byte-identical to the reference)."""
    m = dataclass_to_oinf(instance)
    return write_oinf_file(path, sizevars=m.sizevars, metadata=m.metadata, tensors=m.tensors, sort=False,
                           progress=progress)


def load_dataclass(spec: str, json_path: str | None = None):
    """``MODULE:CLASS`` (+ optional JSON of field values) -> a dataclass instance, as the
    reference CLI does: with JSON, ``CLASS(**data)``; without, ``CLASS()`` or else the module's
    one ``build*()`` function that returns a CLASS."""
    import importlib
    import json
    import sys
    mod_name, _, cls_name = spec.partition(":")
    if not mod_name or not cls_name:
        raise E.UsageError(f"--input must be MODULE:CLASS (got {spec!r})")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise E.UsageError(f"cannot import {mod_name!r}: {e}") from None
    cls = getattr(mod, cls_name, None)
    if cls is None or not dataclasses.is_dataclass(cls):
        raise E.UsageError(f"{spec!r} is not a dataclass")
    if json_path is not None:
        try:
            with open(json_path, encoding="utf-8") as f:
                data = json.load(f)
        except ValueError as e:
            raise E.UsageError(f"{json_path}: not JSON: {e}") from None
        if not isinstance(data, dict):
            raise E.UsageError(f"{json_path}: expected a JSON object of field values")
        try:
            return cls(**data)
        except TypeError as e:
            raise E.UsageError(f"{json_path}: {e}") from None
    try:
        return cls()
    except TypeError:
        builders = [f for n, f in vars(mod).items() if n.startswith("build") and callable(f)]
        for b in builders:
            try:
                inst = b()
            except TypeError:
                continue
            if isinstance(inst, cls):
                return inst
    raise E.UsageError(f"{cls_name} needs field values: pass --json DATA.json (or give the module a build*() function)")


# =============================================================================== registry
def _demo(out_dir: str, model: dict) -> list:
    """The sample with size variables, typed metadata and an uninitialized tensor."""
    import ml_dtypes
    from ..demo import show
    tensors = {}
    for n, a in model.items():
        if a.dtype == ml_dtypes.bfloat16 or a.dtype == np.float64:
            a = a.astype(np.float32)
        tensors[n.replace("_", ".")] = a
    p = os.path.join(out_dir, "tiny-mlp.oinf")
    write_oinf_file(p, sizevars={"D": 64, "V": 256}, metadata={"activation": "relu", "lr": 3e-4, "tied": False},
                    tensors={**tensors, "kv.cache": UninitializedTensor("f16", (2, 64))})
    return show(p)


def cmd_from_dataclass(a) -> int:
    """``modelcodec oinf from-dataclass``: the seed tool's dataclass_to_oinf on the command line."""
    inst = load_dataclass(a.input, a.json)
    write_oinf(inst, a.output)
    print(f"wrote {a.output}")
    return 0


def _commands(sub) -> None:
    s = sub.add_parser("oinf", help="OINF tools")
    oinf_sub = s.add_subparsers(dest="oinf_cmd", required=True)
    o = oinf_sub.add_parser("from-dataclass", help="write a dataclass instance as OINF (the dataclass_to_oinf API)")
    o.add_argument("--input", required=True, metavar="MODULE:CLASS")
    o.add_argument("--json", metavar="DATA.json", help="field values (else CLASS() or the module's build*())")
    o.add_argument("--output", required=True, metavar="OUT")
    o.set_defaults(func=cmd_from_dataclass)


from ..registry import Capabilities, FormatDescriptor  # noqa: E402

DESCRIPTOR = FormatDescriptor("oinf", S, OinfReader, write_oinf_file, magic=S.MAGIC, demo=_demo,
                              capabilities=Capabilities(frozenset(d.name for d in NP_DTYPES.values()),
                                                        max_rank=S.MAX_NDIM, names="[A-Za-z0-9._-]+",
                                                        names_doc="made of [A-Za-z0-9._-]", metadata="typed",
                                                        text="[A-Za-z0-9._-]+"),
                              commands=_commands,
                              summary="Open Infer Neural Format v1: sizevars, typed metadata")
