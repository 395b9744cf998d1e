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
import json
import re
from contextlib import contextmanager
from functools import lru_cache
from itertools import chain
from operator import itemgetter

import msgpack
import numpy as np

from ..schemas.dsl import AnyValue, Bin, Bool, Int, ListOf, Map, MapOf, Str

from .. import errors as E
from .records import column_holds, holds, violation
from .nesting import MAX_NESTING, json_loads as _json_loads, json_shape, nesting

_MISSING = object()


@lru_cache(maxsize=None)
def _regex(p: str):
    return re.compile(p)


def _type_error(fmt, offset, path, rule, want, v) -> E.FormatError:
    return E.SchemaError(fmt, offset, path, rule, f"must be {want} (got {type(v).__name__})")


def text_error(s: str) -> str | None:
    """Why ``s`` is not text a file can hold (None: it is): every string a reader decodes or a
    writer encodes is valid Unicode -- a lone surrogate (which a JSON ``\\ud800`` escape decodes
    to, and UTF-8 cannot encode) is not."""
    if s.isascii():
        return None
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"is not valid Unicode text (a lone surrogate U+{ord(s[e.start]):04X} at {e.start})"
    return None


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
    elif isinstance(d, MapOf):
        rule = d.rule or rule
        if not isinstance(v, dict):
            out.append(_type_error(fmt, off, path, rule, "a map", v))
            return
        for k, x in v.items():
            if not isinstance(k, str):
                out.append(_type_error(fmt, off, f"{path}[{k!r}]", rule, "a text key", k))
            elif text_error(k):
                out.append(E.DecodeError(fmt, off, f"{path}[{k!r}]", rule, f"the key {text_error(k)}"))
            else:
                _walk(d.value, x, fmt, off, f"{path}[{k!r}]", rule, out, limit)
            if len(out) >= limit:
                return
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
        before = len(out)
        for i, item in enumerate(v):
            _walk(d.item, item, fmt, off, f"{path}[{i}]", rule, out, limit)
            if len(out) >= limit:
                return
        if d.ascending and len(out) == before and any(a > b for a, b in zip(v, v[1:])):
            out.append(E.StructureError(fmt, off, path, r, f"must be in ascending order (got {_show_list(v)})"))
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
        if text_error(v):
            out.append(E.DecodeError(fmt, off, path, r, text_error(v)))
            return
        if d.one_of is not None:
            if v not in d.one_of:
                out.append(E.EnumError(fmt, off, path, r, f"{v[:70]!r} is not one of {', '.join(d.one_of)}"))
        elif len(v) < d.min_len or (d.max_len is not None and len(v) > d.max_len):
            out.append(E.RangeError(fmt, off, path, r, f"length must be {d.min_len}..{d.max_len} (got {len(v)})"))
        elif d.charset is not None and not set(v) <= set(d.charset):
            out.append(E.ConstraintError(fmt, off, path, r,
                                         f"must be {d.pattern_doc or 'made of ' + repr(d.charset)} (got {v[:70]!r})"))
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


def _show_list(v) -> str:
    return str(list(v[:8]))[:-1] + (", ...]" if len(v) > 8 else "]")


def fast_ok(d: ListOf, items) -> bool:
    """Vectorised "is every item of a list of maps valid?" derived from the declaration."""
    return fast_columns(d, items) is not None


def fast_columns(d: ListOf, items) -> dict | None:
    """Check a list of maps column by column, derived from the declaration of its items, and
    return the columns (key -> tuple, None for an optional key no item has).

    Handles Int (with constraints), Str (length, pattern), ListOf(Int) and AnyValue keys; any
    other key type, or any doubt, answers None so the exact walk decides.
    """
    if not isinstance(items, list) or not isinstance(d.item, Map):
        return None
    if len(items) < d.min_len or (d.max_len is not None and len(items) > d.max_len):
        return None
    keys = d.item.keys
    if not items:
        return {k.name: () for k in keys}
    if set(map(type, items)) != {dict}:
        return None
    cols: dict[str, tuple | None] = {}
    uniform = False
    # common case: every item has the same keys -> one itemgetter pass over the list
    if len(set(map(len, items))) == 1:
        present = [k.name for k in keys if k.name in items[0]]
        try:
            rows = list(map(itemgetter(*present), items)) if present else []
            uniform = bool(present)
        except (KeyError, TypeError):
            rows = None
        if uniform:
            cols = dict(zip(present, zip(*rows))) if len(present) > 1 else {present[0]: tuple(rows)}
    if not uniform:
        cols = {k.name: tuple(it.get(k.name, _MISSING) for it in items) for k in keys}
    for k in keys:
        col = cols.get(k.name)
        if not uniform and col is not None:
            have = [x for x in col if x is not _MISSING]
            if len(have) != len(col) and k.required:
                return None
            if not have:
                col = None
            elif len(have) != len(col):
                col = have
        if col is None:
            if k.required:
                return None
            cols[k.name] = None
            continue
        if not column_ok(k.type, col):
            return None
    return cols


def column_ok(t, col) -> bool:
    """Do all the values of ``col`` (no absent ones) satisfy the declared type ``t``?  A
    vectorised check; False also when it cannot decide (the exact walk then does)."""
    if isinstance(t, Int):
        if set(map(type, col)) != {int}:
            return False
        return _fast_ints(t, col)
    if isinstance(t, Str):
        if set(map(type, col)) != {str}:
            return False
        if t.one_of is not None:
            return set(col) <= set(t.one_of)
        if not all(map(str.isascii, col)) and any(map(text_error, col)):
            return False
        lens = np.fromiter(map(len, col), dtype=np.int64, count=len(col))
        if (lens < t.min_len).any() or (t.max_len is not None and (lens > t.max_len).any()):
            return False
        if t.charset is not None:
            try:
                joined = "".join(col).encode("ascii")
                allowed = t.charset.encode("ascii")
            except UnicodeEncodeError:
                return False
            if joined.translate(None, allowed):  # anything left is outside the charset
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
        flat = list(chain.from_iterable(col))
        if flat and set(map(type, flat)) != {int}:
            return False
        if t.ascending and not _fast_ascending(lens, flat):
            return False
        return _fast_ints(t.item, flat)
    if isinstance(t, AnyValue):
        return not t.map_only or set(map(type, col)) == {dict}
    return False


def _fast_ascending(lens: np.ndarray, flat: list) -> bool:
    """Is every list (``lens`` items each, back to back in ``flat``) in ascending order?"""
    if len(flat) < 2:
        return True
    try:
        a = np.array(flat, dtype=np.uint64) if min(flat) >= 0 else np.array(flat, dtype=np.int64)
    except OverflowError:
        return False
    down = a[1:] < a[:-1]
    ends = np.cumsum(lens)[:-1] - 1  # (a list's last item vs the next list's first: not compared)
    down[ends[(ends >= 0) & (ends < len(down))]] = False
    return not down.any()


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
    """The cyclic collector paused while many small objects are made: decoding big msgpack trees
    is 3-7x slower with it running, and a writer building 10^5 TIDX rows pays the same."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# --------------------------------------------------------------------------- decode budget
#: A decoded document (msgpack or JSON) may hold at most DECODE_OBJECTS_ALLOWANCE objects plus
#: ``per_byte`` (default DECODE_OBJECTS_PER_BYTE) for each byte the file stores it in: its
#: Python objects (50-250 bytes each) then stay within a constant factor of the input, whatever
#: it inflates to.  A zstd frame of 60 MiB of empty arrays (64 M objects, ~4 GB as Python lists)
#: is refused before it is built.  A schema may declare a larger factor for a document that
#: legitimately compresses better (a tensor index of many small entries).
DECODE_OBJECTS_ALLOWANCE = 1 << 18
DECODE_OBJECTS_PER_BYTE = 2

#: The decoders' own limits, which the C++ reader (codec.tools.cgen -> generated.hpp) applies as the
#: same numbers: a JSON document nests at most JSON_MAX_DEPTH containers (json's recursion, which
#: Python bounds by the interpreter's stack -- 990 is what a reader can always reach) and holds
#: integers of at most JSON_MAX_INT_DIGITS digits (int()'s default sys.get_int_max_str_digits());
#: msgpack-python's unpacker nests at most MSGPACK_MAX_DEPTH containers in one object it unpacks
#: (a whole document; a row of a table document, codec.engine.table, and each value beside it).
JSON_MAX_DEPTH = 990
JSON_MAX_INT_DIGITS = 4300
MSGPACK_MAX_DEPTH = 1024


def object_budget(stored_bytes: int, per_byte: int | None = None) -> int:
    """How many objects a document stored in ``stored_bytes`` of the file may decode to."""
    k = DECODE_OBJECTS_PER_BYTE if per_byte is None else per_byte
    return DECODE_OBJECTS_ALLOWANCE + k * max(int(stored_bytes), 0)


def too_deep(fmt, offset, path, rule, what: str, depth: int) -> E.LimitError:
    """The LimitError of a document nesting past MAX_NESTING (every reader words it so)."""
    return E.LimitError(fmt, offset, path, rule, f"{what} nests {depth} deep, deeper than MAX_NESTING "
                                                 f"({MAX_NESTING}) (refused before walking it)")


def container_budget(stored_bytes: int, bytes_per_container: int) -> int:
    """How many containers (lists, maps) a document stored in ``stored_bytes`` may decode to
    when its format declares that an honest document spends at least ``bytes_per_container``
    bytes on each: DECODE_OBJECTS_ALLOWANCE plus one per that many bytes."""
    return DECODE_OBJECTS_ALLOWANCE + max(int(stored_bytes), 0) // bytes_per_container


def _too_many_containers(fmt, offset, path, rule, what: str, n: int, budget: int, stored: int) -> E.LimitError:
    return E.LimitError(fmt, offset, path, rule,
                        f"{what} opens {n:,} lists and maps, more than {budget:,}, the budget for the {stored:,} "
                        f"bytes that store it (refused before building them)")


class _OverBudget(Exception):
    pass


class ObjectCount:
    """Objects decoded so far against a budget: ``add(k)`` raises _OverBudget past it."""

    def __init__(self, budget: int):
        self.n, self.budget = 0, budget

    def add(self, k: int) -> None:
        self.n += k
        if self.n > self.budget:
            raise _OverBudget(self.n)

    def hook(self, obj):
        self.add(1 + len(obj))
        return obj


def _counting_hooks(budget: int, count: ObjectCount | None = None) -> dict:
    """msgpack hooks that count every container and its items as they are built, and stop the
    decoder once more than ``budget`` objects exist (every object lives in some container, and a
    container is counted as soon as it is complete, so at most one budget is ever built).
    ``count``: share a count (several decoders of one document)."""
    hook = (count or ObjectCount(budget)).hook
    return {"list_hook": hook, "object_hook": hook}


def _over_budget(fmt, offset, path, rule, what: str, budget: int, stored: int) -> E.LimitError:
    return E.LimitError(fmt, offset, path, rule,
                        f"{what} decodes to more than {budget:,} objects, the budget for the {stored:,} bytes "
                        f"that store it (refused before building them)")


def unpack_msgpack(data, *, fmt: str, offset: int | None, path: str, rule: str, allow_trailing_zeros=False,
                   stored: int | None = None, limit_rule: str | None = None, per_byte: int | None = None):
    """Decode one msgpack object within the decode budget of the ``stored`` bytes that hold it
    (default: ``len(data)``); every failure is a DecodeError, an object count over the budget
    a LimitError (rule ``limit_rule``, default ``rule``).

    Every msgpack object takes at least one byte, so a document no longer than its budget needs
    no counting; lengths and counts are bounded by ``len(data)`` (the Unpacker's limits) and
    nesting by msgpack's stack."""
    stored = len(data) if stored is None else stored
    budget = object_budget(stored, per_byte)
    hooks = _counting_hooks(budget) if len(data) > budget else {}
    try:
        with gc_paused():
            # no single container may hold more items than the budget either: its items are
            # counted only when it is complete
            cap = max(min(len(data), budget), 1)
            up = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1),
                                  max_array_len=cap, max_map_len=cap, **hooks)
            up.feed(data)
            obj = up.unpack()
            rest = len(data) - up.tell()
            if rest and (not allow_trailing_zeros or any(memoryview(data)[up.tell():])):
                raise ValueError(f"{rest} trailing bytes after the msgpack object"
                                 + (" are not zero" if allow_trailing_zeros else ""))
        depth = nesting(obj)
        if depth > MAX_NESTING:
            raise too_deep(fmt, offset, path, limit_rule or rule, "msgpack payload", depth)
        return obj
    except E.FormatError:
        raise
    except _OverBudget:
        raise _over_budget(fmt, offset, path, limit_rule or rule, "msgpack payload", budget, stored) from None
    except ValueError as e:  # a container over the cap: over the budget when the budget is the cap
        if budget < len(data) and ("exceeds max_array_len" in str(e) or "exceeds max_map_len" in str(e)):
            raise _over_budget(fmt, offset, path, limit_rule or rule, "msgpack payload", budget, stored) from None
        if isinstance(e, msgpack.exceptions.StackError):  # (msgpack's own stack: far deeper than MAX_NESTING)
            raise too_deep(fmt, offset, path, limit_rule or rule, "msgpack payload", f"over {MAX_NESTING}")
        raise E.DecodeError(fmt, offset, path, rule, f"invalid msgpack: {type(e).__name__}: {e}") from None
    except Exception as e:  # msgpack raises many unrelated types (ValueError, UnicodeDecodeError, ...)
        raise E.DecodeError(fmt, offset, path, rule, f"invalid msgpack: {type(e).__name__}: {e}") from None


def loads_json(data, *, fmt: str, offset: int | None, path: str, rule: str, stored: int | None = None,
               limit_rule: str | None = None):
    """Decode one UTF-8 JSON document within the decode budget of the ``stored`` bytes that hold
    it; every failure is a DecodeError, an object count over the budget a LimitError.  Objects
    are counted (upper bound: one per ``,`` ``:`` ``[`` ``{``, plus one) before decoding, only
    when the document is longer than its budget."""
    stored = len(data) if stored is None else stored
    budget = object_budget(stored)
    raw = bytes(data)
    if len(raw) > budget and sum(map(raw.count, (b",", b":", b"[", b"{"))) + 1 > budget:
        raise _over_budget(fmt, offset, path, limit_rule or rule, "JSON document", budget, stored)
    depth, _ = json_shape(raw)
    if depth > MAX_NESTING:
        raise too_deep(fmt, offset, path, limit_rule or rule, "JSON document", depth)
    try:
        obj = _json_loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise E.DecodeError(fmt, offset, path, rule, f"invalid JSON: {e}") from None
    if _SURROGATE_ESCAPE.search(raw):  # (only an escape makes one: UTF-8 cannot hold a surrogate)
        why = _bad_text_in(obj)
        if why:
            raise E.DecodeError(fmt, offset, path, rule, f"invalid JSON text: {why}")
    return obj


#: a JSON escape of a UTF-16 surrogate (a pair is text; one alone is not)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _bad_text_in(obj) -> str | None:
    """Why a decoded JSON value holds a string that is not text, else None: the first such
    string in document order (keys and values) and its first lone surrogate -- words the C++
    reader gives too.  Iterative (the document's own depth, not the caller's stack)."""
    todo = [obj]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                todo += (x, k)
        elif isinstance(v, list):
            todo.extend(reversed(v))
        elif isinstance(v, str) and text_error(v):
            lone = next(c for c in v if 0xD800 <= ord(c) <= 0xDFFF)
            return f"a string is not valid Unicode text (a lone surrogate U+{ord(lone):04X})"
    return None


def json_object(raw: bytes, *, fmt: str, offset: int, path: str, rule: str, limit_rule: str | None = None,
                bytes_per_container: int | None = None) -> tuple[dict, list[str]]:
    """A JSON document that must be one object, and the keys that appear twice in any of its
    objects (the first of a repeated key counts).  Not UTF-8 JSON is a DecodeError, another
    value a SchemaError; a document nesting deeper than MAX_NESTING, or (``bytes_per_container``:
    the format's declared density) opening more lists and maps than its container budget, a
    LimitError (rule ``limit_rule``, default ``rule``) before it is decoded."""
    lrule = limit_rule or rule
    depth, opened = json_shape(raw)
    if depth > MAX_NESTING:
        raise too_deep(fmt, offset, path, lrule, f"the {path}", depth)
    if bytes_per_container is not None and opened > container_budget(len(raw), bytes_per_container):
        raise _too_many_containers(fmt, offset, path, lrule, f"the {path}", opened,
                                   container_budget(len(raw), bytes_per_container), len(raw))
    first = raw.lstrip(b" \t\r\n")[:1]
    if first and first in b'["-0123456789tfn':  # another value: refused without building it
        raise E.SchemaError(fmt, offset, path, rule, f"the {path} must be a JSON object (it starts with {first!r})")
    dups: list[str] = []

    def pairs(items):
        d = dict(items)  # (C speed; the last of a repeated key wins here...)
        if len(d) == len(items):
            return d
        d = {}
        for k, v in items:
            if k in d:
                dups.append(k)
                continue  # (...so a repeated key is redone here: the first one counts)
            d[k] = v
        return d
    try:
        obj = _json_loads(raw.decode("utf-8"), object_pairs_hook=pairs)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise E.DecodeError(fmt, offset, path, rule, f"the {path} is not UTF-8 JSON: {e}") from None
    if not isinstance(obj, dict):
        raise E.SchemaError(fmt, offset, path, rule, f"the {path} must be an object (got {type(obj).__name__})")
    return obj, dups
