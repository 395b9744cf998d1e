"""Structured payloads (msgpack / JSON) checked against ``schemas.dsl`` Map declarations.

``check(decl, value, ...)`` walks a decoded value and returns every violation with its field
path (``TIDX.tensors[3].data_off``).  A decoded payload has no byte offsets of its own, so
violations carry the absolute offset of the chunk that holds it.

Big lists of maps (a TIDX of 10^5 tensors) first go through :func:`fast_ok`, a vectorised
check derived from the same declaration that only answers "all good?"; the exact walk runs only
when it says no, so the error report is always the precise one.
"""
from __future__ import annotations

import gc
import re
from contextlib import contextmanager
from functools import lru_cache

import msgpack
import numpy as np

from schemas.dsl import AnyValue, Bin, Bool, Int, ListOf, Map, Str

from . import errors as E
from .engine import column_holds, holds, violation

_MISSING = object()


@lru_cache(maxsize=None)
def _regex(p: str):
    return re.compile(p)


def _type_error(fmt, offset, path, rule, want, v) -> E.FormatError:
    return E.SchemaError(fmt, offset, path, rule, f"must be {want} (got {type(v).__name__})")


def check(decl, v, *, fmt: str, offset: int | None, path: str, rule: str = "",
          limit: int = 50) -> list[E.FormatError]:
    out: list[E.FormatError] = []
    _walk(decl, v, fmt, offset, path, rule, out, limit)
    return out


def _walk(d, v, fmt, off, path, rule, out, limit):
    if len(out) >= limit:
        return
    if isinstance(d, Map):
        rule = d.rule or rule
        if not isinstance(v, dict):
            out.append(_type_error(fmt, off, path, rule, "a map", v))
            return
        for k in d.keys:
            sub = v.get(k.name, _MISSING)
            if sub is _MISSING:
                if k.required:
                    out.append(E.SchemaError(fmt, off, f"{path}.{k.name}", rule, "required key is missing"))
                continue
            _walk(k.type, sub, fmt, off, f"{path}.{k.name}", rule, out, limit)
    elif isinstance(d, ListOf):
        r = d.rule or rule
        if not isinstance(v, (list, tuple)):
            out.append(_type_error(fmt, off, path, r, "a list", v))
            return
        if len(v) < d.min_len or (d.max_len is not None and len(v) > d.max_len):
            out.append(E.LimitError(fmt, off, path, r,
                                    f"must have {d.min_len}..{d.max_len if d.max_len is not None else 'any'} "
                                    f"items (got {len(v)})"))
            return
        for i, item in enumerate(v):
            _walk(d.item, item, fmt, off, f"{path}[{i}]", rule, out, limit)
            if len(out) >= limit:
                return
    elif isinstance(d, Int):
        if type(v) is not int:
            out.append(_type_error(fmt, off, path, rule, "an integer", v))
            return
        for c in d.valid:
            if not holds(c, v):
                out.append(violation(fmt, c, v, off, path))
    elif isinstance(d, Str):
        r = d.rule or rule
        if not isinstance(v, str):
            out.append(_type_error(fmt, off, path, r, "a string", v))
            return
        if len(v) < d.min_len or (d.max_len is not None and len(v) > d.max_len):
            out.append(E.RangeError(fmt, off, path, r, f"length must be {d.min_len}..{d.max_len} (got {len(v)})"))
        elif d.pattern is not None and not _regex(d.pattern).fullmatch(v):
            out.append(E.ConstraintError(fmt, off, path, r,
                                         f"must be {d.pattern_doc or d.pattern!r} (got {v[:70]!r})"))
    elif isinstance(d, Bin):
        r = d.rule or rule
        if not isinstance(v, (bytes, bytearray)):
            out.append(_type_error(fmt, off, path, r, "bytes", v))
        elif d.length is not None and len(v) != d.length:
            out.append(E.RangeError(fmt, off, path, r, f"must be {d.length} bytes (got {len(v)})"))
    elif isinstance(d, Bool):
        if not isinstance(v, bool):
            out.append(_type_error(fmt, off, path, rule, "a bool", v))
    elif isinstance(d, AnyValue):
        if d.map_only and not isinstance(v, dict):
            out.append(_type_error(fmt, off, path, rule, "a map", v))
    else:
        raise TypeError(d)


def fast_ok(d: ListOf, items) -> bool:
    """Vectorised "is every item of a list of maps valid?" derived from the declaration.

    Handles Int (with constraints), Str (length, pattern), ListOf(Int) and AnyValue keys; any
    other key type, or any doubt, answers False so the exact walk decides.
    """
    if not isinstance(items, list) or not isinstance(d.item, Map):
        return False
    if len(items) < d.min_len or (d.max_len is not None and len(items) > d.max_len):
        return False
    if not items:
        return True
    if set(map(type, items)) != {dict}:
        return False
    for k in d.item.keys:
        col = [it.get(k.name, _MISSING) for it in items]
        present = col
        if k.required:
            if _MISSING in col:
                return False
        else:
            present = [x for x in col if x is not _MISSING]
            if not present:
                continue
        if not _fast_col(k.type, present):
            return False
    return True


def _fast_col(t, col) -> bool:
    if isinstance(t, Int):
        if set(map(type, col)) != {int}:
            return False
        return _fast_ints(t, col)
    if isinstance(t, Str):
        if set(map(type, col)) != {str}:
            return False
        lens = np.fromiter(map(len, col), dtype=np.int64, count=len(col))
        if (lens < t.min_len).any() or (t.max_len is not None and (lens > t.max_len).any()):
            return False
        if t.pattern is not None:
            return all(map(_regex(t.pattern).fullmatch, col))
        return True
    if isinstance(t, ListOf) and isinstance(t.item, Int):
        if set(map(type, col)) - {list}:
            return False
        lens = np.fromiter(map(len, col), dtype=np.int64, count=len(col))
        if (lens < t.min_len).any() or (t.max_len is not None and (lens > t.max_len).any()):
            return False
        flat = [x for sub in col for x in sub]
        if flat and set(map(type, flat)) != {int}:
            return False
        return _fast_ints(t.item, flat)
    if isinstance(t, AnyValue):
        return not t.map_only or set(map(type, col)) == {dict}
    return False


def _fast_ints(t: Int, col) -> bool:
    if not col or not t.valid:
        return True
    try:
        arr = np.array(col, dtype=np.uint64) if min(col) >= 0 else np.array(col, dtype=np.int64)
    except OverflowError:
        return False
    for c in t.valid:
        try:
            if not column_holds(c, arr).all():
                return False
        except (TypeError, OverflowError):
            return False
    return True


# --------------------------------------------------------------------------- decoding
@contextmanager
def gc_paused():
    """Decoding big msgpack trees is 3-7x slower with the cyclic GC running."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def unpack_msgpack(data, *, fmt: str, offset: int | None, path: str, rule: str, allow_trailing_zeros=False):
    """Decode one msgpack object; every failure is a DecodeError."""
    try:
        with gc_paused():
            if allow_trailing_zeros:
                up = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1))
                up.feed(data)
                obj = up.unpack()
                rest = len(data) - up.tell()
                if rest and any(memoryview(data)[up.tell():]):
                    raise ValueError(f"{rest} trailing bytes after the msgpack object are not zero")
                return obj
            return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises many unrelated types (ValueError, UnicodeDecodeError, ...)
        raise E.DecodeError(fmt, offset, path, rule, f"invalid msgpack: {type(e).__name__}: {e}") from None
