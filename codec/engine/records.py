"""The generic schema engine: one object per declared record, everything derived from it.

For any ``schemas.dsl.record`` Struct, :func:`record_of` returns a :class:`Record` that

* parses and builds with the same construct object (compiled when construct can compile it),
  turning every construct/struct failure into a typed :class:`~codec.errors.FormatError` with
  field path and absolute offset;
* evaluates the declared constraints (construct checks none of them; their meaning and the
  checks are :mod:`codec.engine.constraints`) — ``check`` returns every violation, callers that read
  raise the first;
* for fixed-size records, derives a numpy structured dtype, so whole tables are zero-copy views
  checked with vectorised constraint evaluation (``view`` + ``check_table``);
* for runs of variable-size records of plain fields (numbers, and bytes or arrays whose length
  a field before them gives), derives a scanner that reads them straight from the buffer
  (``iter_parse``), construct re-parsing only a record that does not fit, for its exact error;
* renders its field table for docs and the ``schema`` command (``rows``).

Nothing in here knows any particular format.
"""
from __future__ import annotations

import functools
import io
import re
import struct
from dataclasses import dataclass
from typing import Iterable

import construct as cs
import numpy as np

from ..schemas.dsl import Eq, OneOf, Range, Zero, constraints_of

from .. import errors as E
from .constraints import MAX_PER_RULE, RecordChecks, _mask, _show, column_holds, describe, error_class, holds, violation


_FMT_TO_NP = {"b": "i1", "B": "u1", "h": "i2", "H": "u2", "i": "i4", "I": "u4", "l": "i4",
              "L": "u4", "q": "i8", "Q": "u8", "e": "f2", "f": "f4", "d": "f8", "?": "?"}
#: numpy dtype (little-endian or one byte) -> its struct code ("l"/"L" are the same as "i"/"I")
_NP_TO_FMT = {np.dtype(n).newbyteorder("<"): c for c, n in _FMT_TO_NP.items() if c not in "lL"}


def struct_of(dtype) -> struct.Struct:
    """A numpy scalar type as a little-endian struct (reading one value: ~0.2 us; a numpy view
    ~1 us), through the engine's one table of struct codes and numpy types."""
    return struct.Struct("<" + _NP_TO_FMT[np.dtype(dtype).newbyteorder("<")])


_FMT_TO_NAME = {"b": "i8", "B": "u8", "h": "i16", "H": "u16", "i": "i32", "I": "u32",
                "l": "i32", "L": "u32", "q": "i64", "Q": "u64", "e": "f16", "f": "f32",
                "d": "f64", "?": "bool"}


def _scan_step(kind: str, name, n, item, limits: dict):
    """One step of :meth:`Record._scan_steps`: a function ``(buf, pos, end, row) -> pos`` that
    reads its field(s) into ``row``, or raises IndexError when the bytes left are too few.
    ``name``: the field (a tuple of them for numbers); ``n``: the length, or the field giving
    it, or a construct expression of the row's fields (a padding's length); ``item``: the struct
    format of the numbers, or the array's element."""
    if kind == "numbers":
        st = struct.Struct(item)
        size, unpack = st.size, st.unpack_from
        if len(name) == 1:
            one = name[0]

            def numbers(buf, p, end, row):
                if size > end - p:
                    raise IndexError
                row[one] = unpack(buf, p)[0]
                return p + size
            return numbers

        def several(buf, p, end, row):
            if size > end - p:
                raise IndexError
            row.update(zip(name, unpack(buf, p)))
            return p + size
        return several
    if kind == "bytes":
        if callable(n):  # (an expression: anything it cannot evaluate goes to construct)
            def computed(buf, p, end, row):
                try:
                    k = n(row)
                except Exception:
                    raise IndexError from None
                if not isinstance(k, int) or not 0 <= k <= end - p:
                    raise IndexError
                row[name] = bytes(buf[p:p + k])
                return p + k
            return computed

        def raw(buf, p, end, row):
            k = n if isinstance(n, int) else row[n]
            if k > end - p:
                raise IndexError
            row[name] = bytes(buf[p:p + k])
            return p + k
        return raw
    code, width, limit = item.fmtstr[-1], item.sizeof(), limits.get(name)

    def array(buf, p, end, row):
        k = n if isinstance(n, int) else row[n]
        if limit is not None and k > limit:  # (guarded: nothing is read; check() reports the count)
            row[name] = []
            return p
        if k * width > end - p:
            raise IndexError
        row[name] = list(struct.unpack_from(f"<{k}{code}", buf, p))
        return p + k * width
    return array


@dataclass(frozen=True)
class Field:
    name: str
    subcon: cs.Construct          # the inner construct (Renamed stripped)
    doc: str
    valid: tuple
    offset: int | None            # offset inside the record (None after a variable field)
    size: int | None              # None when variable

    @functools.cached_property
    def kind(self) -> str:
        """'int', 'float', 'bytes' or 'other'."""
        sc = self.subcon
        if isinstance(sc, cs.FormatField):
            return "float" if sc.fmtstr[-1] in "efd" else "int"
        if isinstance(sc, cs.Bytes) and isinstance(sc.length, int):
            return "bytes"
        if isinstance(sc, cs.Array) and isinstance(sc.count, int) and isinstance(sc.subcon, cs.FormatField):
            return "array"
        return "other"

    @functools.cached_property
    def number(self) -> struct.Struct:
        """A number field as a struct (its declared code and byte order): for readers that
        read or pack one value at a time, where construct per value would dominate."""
        if not isinstance(self.subcon, cs.FormatField):
            raise TypeError(f"{self.name} is not a number field")
        return struct.Struct(self.subcon.fmtstr)

    def int_bounds(self) -> tuple[int, int]:
        sc = self.subcon
        n = sc.sizeof() * 8
        if sc.fmtstr[-1] in "bhilq":
            return -(1 << (n - 1)), (1 << (n - 1)) - 1
        return 0, (1 << n) - 1

    @property
    def type_name(self) -> str:
        sc = self.subcon
        if isinstance(sc, cs.FormatField):
            return _FMT_TO_NAME.get(sc.fmtstr[-1], sc.fmtstr)
        if self.kind == "bytes":
            return f"bytes[{sc.length}]"
        if self.kind == "array":
            return f"{_FMT_TO_NAME.get(sc.subcon.fmtstr[-1])}[{sc.count}]"
        return type(sc).__name__


class Record(RecordChecks):
    """Everything the engine derives from one declared record (its constraint checks:
    :class:`codec.engine.constraints.RecordChecks`)."""

    def __init__(self, struct: cs.Struct):
        self.struct = struct
        self.name: str = getattr(struct, "mc_name", "record")
        self.format: str = getattr(struct, "mc_format", "?")
        self.doc: str = getattr(struct, "mc_doc", "")
        fields, off = [], 0
        for sc in struct.subcons:
            inner = sc.subcon if isinstance(sc, cs.Renamed) else sc
            try:
                size = inner.sizeof()
            except (cs.SizeofError, AttributeError):
                size = None
            fields.append(Field(sc.name, inner, getattr(sc, "docs", "") or "", constraints_of(sc),
                                off, size))
            off = None if (off is None or size is None) else off + size
        self.fields: tuple[Field, ...] = tuple(fields)
        self.by_name = {f.name: f for f in fields}
        # fields whose length is an expression of earlier fields (verified on every parse)
        self.sized = tuple(f for f in fields if callable(getattr(f.subcon, "length", None))
                           or callable(getattr(f.subcon, "count", None)))
        # zero padding of computed length: filled in on build when not given
        self.zero_fill = tuple(f for f in self.sized if any(isinstance(c, Zero) for c in f.valid))
        # length/count fields: "key_length" sizes "key" -> derived on build, verified on parse
        self.derived: dict[str, str] = {}
        for f in fields:
            expr = getattr(f.subcon, "count", None) if isinstance(f.subcon, cs.Array) else \
                getattr(f.subcon, "length", None) if isinstance(f.subcon, cs.Bytes) else None
            m = re.fullmatch(r"this\['(\w+)'\]", str(expr)) if callable(expr) else None
            if m and m.group(1) in self.by_name:
                self.derived[m.group(1)] = f.name
        try:
            self.size: int | None = struct.sizeof()
        except cs.SizeofError:
            self.size = None
        self.count_limits = self._count_limits()
        self._min_size: int | None = None
        self._steps = self._scan_steps()
        self._guarded = self._guard(struct) if self.count_limits else struct
        self._parser = _compiled(self._guarded)
        self._builder = _compiled(struct) if self._guarded is not struct else self._parser
        self.dtype: np.dtype | None = self._derive_dtype()

    # ------------------------------------------------------------------ derivations
    def _count_limits(self) -> dict[str, int]:
        """Array fields whose count field has a declared upper bound: {array field: bound}."""
        out = {}
        for count, data in self.derived.items():
            if isinstance(self.by_name[data].subcon, cs.Array):
                his = [c.hi for c in self.by_name[count].valid if isinstance(c, Range) and c.hi is not None]
                if his:
                    out[data] = min(his)
        return out

    def _scan_steps(self) -> tuple | None:
        """How :meth:`iter_parse` reads a record of plain fields straight from the buffer (no
        construct objects per record): one function per step -- a run of fixed-size numbers as
        one struct, bytes or an array of numbers of a fixed length or of the length a field
        before it gives -- each checking the bytes left before it reads; ``step(buf, pos, end,
        row) -> pos``; bytes of a length computed from the fields before them (padding) too.
        None when a field is of another kind (construct reads such records)."""
        sized_by = {data: count for count, data in self.derived.items()}
        plan: list = []

        def plain(sc) -> bool:  # a little-endian number (or one byte)
            return isinstance(sc, cs.FormatField) and (sc.fmtstr[0] == "<" or sc.sizeof() == 1)

        def length(sc, name):  # a fixed length, or the field giving it
            n = sc.length if isinstance(sc, cs.Bytes) else sc.count
            return n if isinstance(n, int) else sized_by.get(name)
        for f in self.fields:
            sc = f.subcon
            if plain(sc):
                if plan and plan[-1][0] == "numbers":
                    plan[-1] = ("numbers", plan[-1][1] + (f.name,), None, plan[-1][3] + sc.fmtstr[-1])
                else:
                    plan.append(("numbers", (f.name,), None, "<" + sc.fmtstr[-1]))
            elif isinstance(sc, cs.Bytes) and length(sc, f.name) is not None:
                plan.append(("bytes", f.name, length(sc, f.name), None))
            elif isinstance(sc, cs.Bytes) and callable(sc.length):
                plan.append(("bytes", f.name, sc.length, None))
            elif isinstance(sc, cs.Array) and plain(sc.subcon) and length(sc, f.name) is not None:
                plan.append(("array", f.name, length(sc, f.name), sc.subcon))
            else:
                return None
        return tuple(_scan_step(*step, self.count_limits) for step in plan)

    def _scan(self, buf, offset: int, count: int, path: str):
        """:meth:`iter_parse` for records of plain fields (:meth:`_scan_steps`); the first
        record that does not fit is re-parsed by construct (:meth:`parse_at`) for its exact
        error."""
        end, pos, steps = len(buf), offset, self._steps
        for i in range(count):
            row: dict = {}
            p = pos
            try:
                for step in steps:
                    p = step(buf, p, end, row)
            except IndexError:
                row, p = self.parse_at(buf, pos, f"{path}[{i}]")  # raises the exact error
            yield pos, row
            pos = p

    def _guard(self, struct: cs.Struct) -> cs.Struct:
        """The parser's copy of the record: an array whose count breaks its declared bound reads
        nothing (so a count of 2^32 never drives a read loop); the check then names the rule."""
        sized_by = {data: count for count, data in self.derived.items()}
        subs = []
        for sc, f in zip(struct.subcons, self.fields):
            if f.name in self.count_limits:
                cnt = cs.this[sized_by[f.name]]
                sc = cs.Renamed(cs.Array(cnt * (cnt <= self.count_limits[f.name]), f.subcon.subcon), newname=f.name)
            subs.append(sc)
        return cs.Struct(*subs)

    def _derive_dtype(self) -> np.dtype | None:
        if self.size is None:
            return None
        names, formats, offsets = [], [], []
        for f in self.fields:
            if f.kind in ("int", "float"):
                formats.append("<" + _FMT_TO_NP[f.subcon.fmtstr[-1]])
            elif f.kind == "bytes":
                formats.append(("u1", (f.subcon.length,)))
            elif f.kind == "array":
                formats.append(("<" + _FMT_TO_NP[f.subcon.subcon.fmtstr[-1]], (f.subcon.count,)))
            else:
                return None
            names.append(f.name)
            offsets.append(f.offset)
        return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                         "itemsize": self.size})

    def defaults(self) -> dict:
        """Values of fields that the caller never supplies (Eq constants, zero reserved)."""
        out = {}
        for f in self.fields:
            for c in f.valid:
                if isinstance(c, Eq):
                    out[f.name] = c.value
                elif isinstance(c, Zero) and f.size is not None:
                    out[f.name] = bytes(f.size) if f.kind == "bytes" else 0
        return out

    def rows(self) -> list[tuple]:
        """(offset, size, field, type, constraint, description) for every field."""
        sized_by = {data: count for count, data in self.derived.items()}
        out = []
        for f in self.fields:
            typ = f.type_name
            if f.name in sized_by:
                sc = f.subcon
                inner = Field("", sc.subcon, "", (), None, None).type_name if isinstance(sc, cs.Array) else "u8"
                typ = f"{inner}[{sized_by[f.name]}]"
            out.append((f.offset, f.size, f.name, typ, "; ".join(describe(c) for c in f.valid), f.doc))
        return out

    # ------------------------------------------------------------------ parse / build
    def parse(self, buf, offset: int = 0, path: str | None = None) -> dict:
        """Parse one record at ``buf[offset:]``.  Raises TruncatedError / DecodeError."""
        path = path or self.name
        avail = len(buf) - offset
        if self.size is not None:
            if offset < 0 or avail < self.size:
                short = next((f for f in self.fields if f.offset + f.size > max(avail, 0)), self.fields[0])
                raise E.TruncatedError(
                    self.format, offset + short.offset, f"{path}.{short.name}", f"{self.format}-TRUNCATED",
                    f"needs {self.size} bytes for {self.name}, {max(avail, 0)} available")
            data = bytes(buf[offset:offset + self.size])
            try:
                obj = self._parser.parse(data)
            except Exception as e:  # compiled parsers raise struct.error and friends
                raise E.DecodeError(self.format, offset, path, f"{self.format}-DECODE", str(e)) from None
        else:
            obj, _ = self.parse_at(buf, offset, path)
        obj.pop("_io", None)
        return dict(obj)

    def parse_at(self, buf, offset: int, path: str | None = None) -> tuple[dict, int]:
        """Parse one (possibly variable-size) record at ``offset``; returns (record, end offset)."""
        path = path or self.name
        stream = _MemStream(buf, offset)
        try:
            obj = self._parser.parse_stream(stream)
        except Exception:
            # compiled parsers fail with bare struct errors: the interpreted parser names the field
            stream.seek(offset)
            try:
                obj = self._guarded.parse_stream(stream)
            except cs.ConstructError as e:
                fpath = str(getattr(e, "path", "") or "").replace("(parsing) -> ", "").replace(" -> ", ".")
                at, need = self._field_span(buf, offset, fpath)
                if isinstance(e, cs.StreamError):  # (how many bytes the field needs, how many are left)
                    raise E.TruncatedError(self.format, offset + at, f"{path}.{fpath}" if fpath else path,
                                           f"{self.format}-TRUNCATED", "the data ends inside this field",
                                           expected=need, actual=max(len(buf) - offset - at, 0)) from None
                raise E.DecodeError(self.format, offset + at, f"{path}.{fpath}" if fpath else path,
                                    f"{self.format}-DECODE", str(e).splitlines()[-1]) from None
            except Exception as e:
                raise E.DecodeError(self.format, offset, path, f"{self.format}-DECODE",
                                    f"{type(e).__name__}: {e}") from None
        obj.pop("_io", None)
        for f in self.sized:  # compiled Bytes reads short silently: every length must be met
            want = (f.subcon.length if isinstance(f.subcon, cs.Bytes) else f.subcon.count)(obj)
            if f.name in self.count_limits and want > self.count_limits[f.name]:
                continue  # guarded: nothing was read; check() reports the count's rule
            if len(obj[f.name]) != want:
                at, need = self._field_span(buf, offset, f.name)
                left = max(len(buf) - offset - at, 0)
                raise E.TruncatedError(self.format, offset + at, f"{path}.{f.name}", f"{self.format}-TRUNCATED",
                                       f"needs {E.show_int(need)} bytes, the data ends after {left}",
                                       expected=need, actual=left)
        return dict(obj), stream.tell()

    def _field_span(self, buf, offset: int, name: str) -> tuple[int, int | None]:
        """Where field ``name`` starts inside a record at ``offset`` (the sizes of the fields
        before it, as parsed) and how many bytes it needs (None: unknown)."""
        pos = 0
        ctx = cs.Container()
        stream = _MemStream(buf, offset)
        for f, sc in zip(self.fields, self._guarded.subcons):
            if f.name == name:
                try:
                    return pos, sc.subcon.sizeof(**ctx)
                except Exception:  # (a size construct cannot tell)
                    return pos, None
            try:
                ctx[f.name] = sc.subcon.parse_stream(stream, **ctx)
            except Exception:
                return pos, None
            pos = stream.tell() - offset
        return pos, None

    def iter_parse(self, buf, offset: int, count: int, path: str, window: int = 1 << 16):
        """Parse ``count`` consecutive records; yields (offset, record) and stops at the first
        that cannot be parsed (raising its typed error).

        Records are read from a copy of a window of the buffer through io.BytesIO (C-speed
        reads); a record that runs past the window grows it, and any failure is re-parsed
        through :meth:`parse_at` for the exact error.  Records of plain fields are read by
        :meth:`_scan` instead (the same records, a few times faster)."""
        if self._steps is not None:
            yield from self._scan(buf, offset, count, path)
            return
        base, data = offset, b""
        stream = io.BytesIO(data)
        for i in range(count):
            pos = offset - base
            while True:
                if len(data) - pos < window and base + len(data) < len(buf):  # refill the window
                    base, data = offset, bytes(buf[offset:offset + max(window, 2 * (len(data) - pos))])
                    pos = 0
                    stream = io.BytesIO(data)
                stream.seek(pos)
                try:
                    obj = self._parser.parse_stream(stream)
                    obj.pop("_io", None)
                    # a short read leaves the stream at the end of the window: only then can a
                    # computed-length field have come back short
                    good = stream.tell() < len(data) or all(
                        len(obj[f.name]) == (f.subcon.length if isinstance(f.subcon, cs.Bytes) else f.subcon.count)(obj)
                        for f in self.sized
                        if not (f.name in self.count_limits and f.subcon.count(obj) > self.count_limits[f.name]))
                except Exception:
                    good = False
                if good and stream.tell() <= len(data):
                    break
                if base + len(data) >= len(buf):  # nothing more to read: exact error (or record)
                    rec, end = self.parse_at(buf, offset, f"{path}[{i}]")
                    yield offset, rec
                    offset = end
                    obj = None
                    break
                window *= 2
            if obj is None:
                continue
            end = base + stream.tell()
            yield offset, dict(obj)
            offset = end

    def min_size(self) -> int:
        """The smallest size a record can have under its declared constraints (bounds counts
        before anything is allocated)."""
        if self.size is not None:
            return self.size
        if self._min_size is None:  # (a property of the declaration: worked out once)
            self._min_size = self._smallest()
        return self._min_size

    def _smallest(self) -> int:
        ctx = cs.Container()
        for f in self.fields:
            sc = f.subcon
            if f.kind == "int":
                lo = f.int_bounds()[0]
                for c in f.valid:
                    if isinstance(c, Range) and c.lo is not None:
                        lo = max(lo, c.lo)
                    elif isinstance(c, OneOf):
                        lo = max(lo, min(c.values()))
                ctx[f.name] = max(lo, 0)
            elif isinstance(sc, cs.Array):
                n = sc.count(ctx) if callable(sc.count) else sc.count
                ctx[f.name] = [0] * n
            elif isinstance(sc, cs.Bytes):
                n = sc.length(ctx) if callable(sc.length) else sc.length
                ctx[f.name] = bytes(n)
            else:
                raise TypeError(f"min_size: unsupported field {f.name}")
        return len(self.struct.build(ctx))

    def build(self, obj: dict) -> bytes:
        """Build bytes; constant and reserved fields are filled in when not given."""
        full = self.defaults()
        full.update(obj)
        for count_field, data_field in self.derived.items():
            if data_field in full:
                full[count_field] = len(full[data_field])
        for f in self.zero_fill:
            if full.get(f.name) is None:
                full[f.name] = bytes(f.subcon.length(full))
        try:
            return self._builder.build(full)
        except Exception as e:
            raise E.UsageError(f"cannot build {self.format} {self.name}: {e}") from None

    # ------------------------------------------------------------------ layout of one record
    def size_of(self, rec: dict) -> int:
        """The byte size of this particular record."""
        if self.size is not None:
            return self.size
        return self.field_offsets(rec, with_end=True)["__end__"]

    @functools.cached_property
    def _widths(self) -> tuple:
        """Per field: (name, its fixed size or None, an array's element size or None, the
        parser's subcon) -- what :meth:`field_offsets` adds up, worked out once."""
        return tuple((f.name, f.size, f.subcon.subcon.sizeof() if isinstance(f.subcon, cs.Array) and
                      isinstance(f.subcon.subcon, cs.FormatField) else None, sc)
                     for f, sc in zip(self.fields, self._guarded.subcons))

    def field_offsets(self, rec: dict, with_end: bool = False) -> dict[str, int]:
        """Offset of every field inside this particular record (variable records included)."""
        if self.size is not None:
            return {f.name: f.offset for f in self.fields}
        out, pos = {}, 0
        for name, size, item, sc in self._widths:
            out[name] = pos
            v = rec[name]
            if size is not None:
                pos += size
            elif isinstance(v, (bytes, bytearray)):
                pos += len(v)
            elif item is not None:
                pos += len(v) * item
            else:
                pos += len(sc.subcon.build(v, **rec))
        if with_end:
            out["__end__"] = pos
        return out

    def view(self, buf, offset: int, count: int) -> np.ndarray:
        """A zero-copy structured array of ``count`` records at ``offset`` (bounds checked)."""
        if self.dtype is None:
            raise TypeError(f"{self.name} is not a fixed-size record")
        need = count * self.size
        if offset < 0 or count < 0 or offset + need > len(buf):
            raise E.TruncatedError(self.format, offset, f"{self.name}[]", f"{self.format}-TRUNCATED",
                                   f"{count} x {self.size} bytes do not fit in {len(buf) - offset}")
        return np.frombuffer(buf, dtype=self.dtype, count=count, offset=offset)


def _compiled(struct: cs.Struct):
    try:
        return struct.compile()
    except Exception:  # construct refuses some constructs; interpreted is still correct
        return struct



class _MemStream(io.RawIOBase):
    """A read-only, seekable stream over a memoryview: construct reads records from a big
    mapped file without the region ever being copied (reads return at most what exists)."""

    def __init__(self, buf, pos: int = 0):
        self._buf = buf
        self._pos = pos

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        end = len(self._buf) if n is None or n < 0 else min(len(self._buf), self._pos + n)
        out = bytes(self._buf[self._pos:end])
        self._pos = max(self._pos, end)
        return out

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = pos if whence == 0 else (self._pos + pos if whence == 1 else len(self._buf) + pos)
        return self._pos


_CACHE: dict[int, Record] = {}


def record_of(struct: cs.Struct) -> Record:
    """The engine's (cached) view of a declared record."""
    r = _CACHE.get(id(struct))
    if r is None or r.struct is not struct:
        r = _CACHE[id(struct)] = Record(struct)
    return r


def first_error(violations: Iterable[E.FormatError], strict: bool = True) -> E.FormatError | None:
    """The first finding that is an error for a strict (or lenient) reader (codec.engine.severity)."""
    from . import severity
    for v in violations:
        if severity.of(v.rule, strict) == "error":
            return v
    return None


def raise_first(violations: Iterable[E.FormatError], strict: bool = True) -> None:
    v = first_error(violations, strict)
    if v is not None:
        raise v
