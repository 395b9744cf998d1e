"""OINF v1 reader: the declared records and relations (schemas.oinf) parsed and evaluated by
the engine; what each value holds decoded here."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...schemas import oinf as S
from ...schemas.oinf import Rule, TensorFlags, ValueType

from ... import errors as E
from ...engine import relations, values
from ...model import Reader, Report, StopCheck, TensorInfo, checks_open, closed_error, numpy_can_hold
from .values import (BITSET, FMT, HEADER, META, NDARRAY, NP_DTYPES, SIZEVAR, STRING, TENSOR, _NAME_SET, Bitset,
                     UninitializedTensor, _align, _err)

_VALUE_TYPES = frozenset(ValueType)


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
        ctx = self._layout = relations.Context(FMT, size, h, HEADER)
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
        # blob bounds, HAS_DATA, numel x size: declared in schemas.oinf.DATA_RELATIONS; each
        # row's findings are reported with that row, before its value is decoded
        data = relations.check(S.DATA_RELATIONS, ctx, buf)
        rows_of = relations.by_row(data)
        self._metadata(v, parsed["metadata"], rows_of)
        self._tensor_table(v, parsed["tensors"], rows_of, data.bad.get(TENSOR.name, set()))

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

    def _metadata(self, v, rows, rows_of: dict):
        seen: dict = {}
        for i, (off, r) in enumerate(rows):
            p = f"metadata[{i}]"
            key = self._name(v, off, r, "key", p, seen)
            t, nb, bo = r["value_type"], r["value_nbytes"], r["value_offset"]
            if t not in _VALUE_TYPES or bo % S.ALIGN:  # (its own constraint reports it)
                continue
            if ("metadata", i) in rows_of:  # its blob is outside the data section
                v.extend(rows_of["metadata", i])
                continue
            try:
                value, want = self._value(t, bo, nb, f"{p}.value")
            except E.FormatError as e:
                v.append(e)
                continue
            if want != nb:
                v.append(_err(E.StructureError, off + META.field_offsets(r)["value_nbytes"], f"{p}.value_nbytes",
                              Rule.VALUE_NBYTES, f"{S.TYPE_NAMES[t]} value needs value_nbytes {want} (got {nb})"))
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

    def _tensor_table(self, v, rows, rows_of: dict, bad: set):
        seen: dict = {}
        for i, (off, r) in enumerate(rows):
            p = f"tensors[{i}]"
            name = self._name(v, off, r, "name", p, seen)
            v.extend(rows_of.get(("tensors", i), ()))  # shape, size, HAS_DATA, bounds
            has = bool(r["flags"] & TensorFlags.HAS_DATA)
            ok = i not in bad and not (has and r["data_offset"] % S.ALIGN)
            if ok and has and r["dtype"] == ValueType.BOOL and r["data_nbytes"] and np.frombuffer(
                    self._src.buf, np.uint8, r["data_nbytes"], r["data_offset"]).max() > 1:
                v.append(_err(E.ConstraintError, r["data_offset"], f"{p}.data", Rule.BOOL, "bool bytes must be 0 or 1"))
                ok = False
            if name is not None:
                self._index[name] = len(self._entries)
                self._entries.append(dict(r, ok=ok, has_data=has, entry_offset=off, name=name))

    # ------------------------------------------------------------------ public reading
    def _info(self, i: int) -> TensorInfo:
        r = self._entries[i]
        if not r["ok"]:
            raise self._unreadable(repr(r["name"]), r["entry_offset"], f"tensors[{i}]", Rule.NBYTES)
        return TensorInfo(r["name"], NP_DTYPES[r["dtype"]], tuple(r["dims"]),
                          r["data_offset"] if r["has_data"] else None, r["data_nbytes"],
                          {"dtype_name": S.TYPE_NAMES[r["dtype"]], "has_data": r["has_data"], "type_tag": r["dtype"]})

    @checks_open
    def tensor(self, name: str):
        """A read-only zero-copy view, or an UninitializedTensor for a tensor without data."""
        if self._closed:
            raise closed_error(self, "tensor")
        t = self.tensors[name]
        if not t.extra["has_data"]:
            return UninitializedTensor(t.extra["dtype_name"], t.shape)
        if t.nbytes:  # (an entry read is ok: its data_nbytes is its dims')
            return self._src.view(t.dtype, t.shape, t.offset, t.nbytes)
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

    def _own_types(self) -> dict[str, str]:
        """Each value's type in :mod:`codec.engine.values`' vocabulary, where it has one there (a
        typed number, text, a bitset as an array of bools, a one-dimensional NDARRAY)."""
        arrays = {S.DTYPES.names[c]: name for c, (name, _) in S.DTYPES.arrays().items()}
        out = {}
        for k, t in self.meta_types.items():
            v = self._meta.get(k)
            d = ("string" if t == "str" else "array[bool]" if t == "bitset" else
                 f"array[{v.dtype.name}]" if t == "ndarray" and isinstance(v, np.ndarray) and v.ndim == 1 else
                 arrays.get(t))
            if d is not None and d.removeprefix("array[").rstrip("]") in values.SCALARS:
                out[k] = d
        return out

    def _regions(self) -> list:
        """The tables, the data section and each metadata value's blob in it."""
        out = super()._regions()
        if "offset_data" in self.header:
            at = int(self.header["offset_data"])
            out.append(("section", "data", at, max(self._src.size - at, 0), {}))
        meta = self._layout.tables.get(META.name) if self._layout is not None else None
        for _, r in (meta.rows if meta is not None else []):
            if r["value_offset"] and r["value_nbytes"]:
                out.append(("metadata", f"metadata[{r['key'].decode('ascii', 'replace')!r}]", int(r["value_offset"]),
                            int(r["value_nbytes"]), {}))
        return out

    def describe(self) -> dict:
        d = super().describe()
        d.update({"version": str(self.header.get("version")), "file_size": self._src.size,
                  "sizevars": dict(self.sizevars), "metadata_types": dict(self.meta_types)})
        return d


validate_file = OinfReader.validate_file

