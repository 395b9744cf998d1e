"""A msgpack list of maps (a tensor index of a million entries) decoded into columns, as read.

A document ``{"<key>": [ {map}, {map}, ... ], ...}`` whose list items are declared by a
``schemas.dsl.Map`` is read from a stream and its items turned into a :class:`codec.engine.columns.Table`
a batch at a time: the document is never held whole.  Long lists go through the vectorised
decoder of :mod:`codec.engine.rowscan` (runs of maps that share a layout, decoded straight into
columns), every other map through msgpack.  A document of another shape is decoded whole and
judged against its declaration.

Decoding stays within the document's decode budget (objects counted as they are built), and
memory within the columns plus one batch, whatever the document holds.  The thresholds and
window sizes below are module globals read at each decode (tests and the fuzz harness set them).
"""
from __future__ import annotations

import sys
import traceback
from itertools import chain
from typing import Callable

import msgpack
import numpy as np

from ..schemas.dsl import Map

from .. import errors as E
from . import payload
from .nesting import MAX_NESTING, nesting
from .columns import _MISSING, _SMALL, NameIndex, Table, _Col, _fixed_ascii, _int_kind, _ints, _join, _Sparse, name_index

#: items decoded, checked and turned into columns at a time
BATCH = 1 << 13


_TRIM: list = []


def return_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing
    elsewhere).  After a decode that made and dropped many megabyte-sized temporaries, glibc keeps
    them (its mmap threshold rises with the first big buffer freed, so later ones come from the
    heap): 40 MB of a 1 M-entry index's open stayed resident as free heap without this."""
    if not _TRIM:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes
                fn = ctypes.CDLL(None).malloc_trim
                fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _TRIM.append(fn)
    if _TRIM[0] is not None:
        _TRIM[0](0)


def unpack_table(stream, length: int, decl: Map, list_key: str, *, whole: Callable[[], bytes], fmt: str,
                 offset: int | None, path: str, rule: str, stored: int | None = None, limit_rule: str | None = None,
                 per_byte: int | None = None, keep: str | None = None, limit: int = 50) -> Table:
    """Decode the msgpack document of ``length`` bytes read from ``stream`` (``read(n)``),
    declared by ``decl`` (a Map with a key ``list_key`` holding a list of maps), into a
    :class:`Table` of that list's items, as it is read: the document is never held whole.

    The document's decode budget (``stored``, ``per_byte``: see :func:`codec.engine.payload.object_budget`)
    bounds the objects built; malformed msgpack raises DecodeError, a budget overrun LimitError.
    A document whose top level is not a map with ``list_key`` holding a list is decoded whole
    within the default budget (``whole()`` gives its bytes) and checked against ``decl``: its
    errors are the table's."""
    stored = length if stored is None else stored
    item_decl = next(k for k in decl.keys if k.name == list_key).type.item
    table = Table(item_decl, keep)
    budget = payload.object_budget(stored, per_byte)
    cap = max(min(length, budget), 1)
    count = payload.ObjectCount(budget) if length > budget else None
    hooks = payload._counting_hooks(budget, count) if count is not None else {}
    lrule = limit_rule or rule

    def make(src, size: int | None = None):
        """An Unpacker of this document's limits (reading ``src``, or fed ``size`` bytes)."""
        room = size or max(length, 1)
        return msgpack.Unpacker(src, read_size=min(max(min(length, 1 << 20), 1), room), raw=False,
                                strict_map_key=False, max_buffer_size=room, max_array_len=cap, max_map_len=cap, **hooks)
    try:
        with payload.gc_paused():
            # read through a file object: feed() would copy the whole document
            tap = _Tap(stream)
            up = make(tap)
            base = 0  # document offset where ``up`` started reading
            seen = False
            nkeys = _header(up.read_map_header)
            if nkeys is not None and nkeys > len(decl.keys) + _EXTRA_KEYS:
                nkeys = None  # not the declared shape: one Python step per key would be the cost
            for _ in range(nkeys or 0):
                key = up.unpack()
                if key != list_key or seen:
                    _nested(up.unpack(), 1)  # undeclared keys are tolerated (within the nesting limit)
                    continue
                n = _header(up.read_array_header)
                if n is None:
                    break
                seen = True
                if n >= SCAN_MIN:
                    done, up, base = _scan_rows(up, tap, n, table, make, count, fmt, offset, f"{path}.{list_key}",
                                                rule, limit)
                else:
                    done = _read_rows(up, n, table, fmt, offset, f"{path}.{list_key}", rule, limit)
                if not done:
                    return table._finish()  # broken beyond use: no need to read on
            else:
                rest = length - base - up.tell()
                if seen and rest:
                    raise ValueError(f"{rest} trailing bytes after the msgpack object")
            if seen:
                return table._finish()
            # not the expected shape: the exact errors, from the whole document
            obj = payload.unpack_msgpack(whole(), fmt=fmt, offset=offset, path=path, rule=rule, stored=stored,
                                         limit_rule=limit_rule)
            table.errors = payload.check(decl, obj, fmt=fmt, offset=offset, path=path, rule=rule, limit=limit)
            if not table.errors:  # valid after all (many undeclared keys): its list, as columns
                rows = obj[list_key]
                for k in range(0, len(rows), BATCH):
                    table._add_batch(rows[k:k + BATCH], fmt, offset, f"{path}.{list_key}", rule, limit)
                return table._finish()
            return table
    except Exception as e:  # msgpack raises many unrelated types
        # the decoder's frames hold its buffers (megabytes): released now, not when a cycle
        # through the error someone keeps is collected
        traceback.clear_frames(e.__traceback__)
        if isinstance(e, E.FormatError):
            raise
        if isinstance(e, _TooDeep):
            raise payload.too_deep(fmt, offset, path, lrule, "msgpack payload", e.args[0]) from None
        if isinstance(e, msgpack.exceptions.StackError):  # (msgpack's own stack, as payload.unpack_msgpack says)
            raise payload.too_deep(fmt, offset, path, lrule, "msgpack payload", f"over {MAX_NESTING}") from None
        if isinstance(e, payload._OverBudget) or (
                isinstance(e, ValueError) and budget < length
                and ("exceeds max_array_len" in str(e) or "exceeds max_map_len" in str(e))):
            raise payload._over_budget(fmt, offset, path, lrule, "msgpack payload", budget, stored) from None
        raise E.DecodeError(fmt, offset, path, rule, f"invalid msgpack: {type(e).__name__}: {e}") from None


class _TooDeep(Exception):
    """(how deep) a value of the document nests deeper than MAX_NESTING."""


def _nested(values, outer: int, many: bool = False) -> None:
    """_TooDeep when a value (``many``: any of a list of values) held ``outer`` containers deep
    in the document nests past MAX_NESTING (the rows msgpack builds: the declared columns that
    rowscan reads hold no nesting)."""
    if many and _shallow(values):
        return
    d = max(map(nesting, values), default=0) if many else nesting(values)
    if d + outer > MAX_NESTING:
        raise _TooDeep(d + outer)


#: value types that are never containers (exactly these: a subclass may be one)
_LEAVES = frozenset((int, float, str, bytes, bool, type(None)))


def _shallow(rows: list) -> bool:
    """Is every row a map of plain values and lists of plain values (at most 2 deep: the common
    row, found in a few passes at C speed instead of a walk of each)?"""
    if set(map(type, rows)) != {dict}:
        return False
    vals = list(chain.from_iterable(map(dict.values, rows)))
    kinds = set(map(type, vals))
    if not kinds <= _LEAVES | {list}:
        return False
    return list not in kinds or set(map(type, chain.from_iterable([v for v in vals if type(v) is list]))) <= _LEAVES


#: undeclared keys tolerated beside the list (forward compatibility) before the document is
#: judged as a whole instead
_EXTRA_KEYS = 64


def _header(read):
    """A map/array header, or None when the next object is something else."""
    try:
        return read()
    except Exception:  # msgpack says "unexpected type" in several ways
        return None


def _read_rows(up, n: int, table: Table, fmt, offset, path, rule, limit) -> bool:
    """Decode ``n`` list items into ``table``, a batch at a time; False when it stopped early
    (as many errors as reported, and the kept column unusable)."""
    rows: list = []
    unpack = up.unpack
    for _ in range(n):
        rows.append(unpack())
        if len(rows) == BATCH:
            _nested(rows, 2, many=True)  # (the document's map, its list)
            table._add_batch(rows, fmt, offset, path, rule, limit)
            rows = []
            if len(table.errors) >= limit and not _kept_ok(table):
                return False
    if rows:
        _nested(rows, 2, many=True)
        table._add_batch(rows, fmt, offset, path, rule, limit)
    return True


#: lists shorter than this are decoded map by map (a layout scan costs a few numpy passes)
SCAN_MIN = 1 << 9
#: bytes of the document held ahead of the decoder while scanning, and searched for rows at once
WINDOW = 4 << 20
REGION = 2 << 20
#: maps decoded one by one before the next scan, after a scan that found none
_BURST = 16
#: a document of at least this many bytes gives the C heap's free pages back once decoded (its
#: scans' temporaries are megabytes); a smaller one leaves at most a few MB for the heap to reuse
TRIM_MIN = 1 << 20


class _Tap:
    """A stream that keeps the last pieces it handed out (the msgpack Unpacker reads ahead: what
    it has not consumed yet is still here when the scanner takes over)."""

    def __init__(self, stream):
        self.stream = stream
        self.handed = 0
        self.tail: list = []

    def read(self, n: int) -> bytes:
        d = self.stream.read(n)
        self.handed += len(d)
        self.tail = self.tail[-1:] + [d]
        return d

    def unread(self, k: int) -> bytes | None:
        """The last ``k`` bytes handed out, or None when they are no longer here."""
        if k == 0:
            return b""
        kept = b"".join(self.tail)
        return kept[-k:] if k <= len(kept) else None


class _Prefixed:
    """``prefix``, then the rest of ``stream``."""

    def __init__(self, prefix: bytes, stream):
        self.prefix, self.stream = memoryview(prefix), stream

    def read(self, n: int) -> bytes:
        if self.prefix:
            d, self.prefix = bytes(self.prefix[:n]), self.prefix[n:]
            return d
        return self.stream.read(n)


def _scan_rows(up, tap: _Tap, n: int, table: Table, make, count, fmt, offset, path, rule, limit):
    """:func:`_read_rows` for long lists: runs of maps that share a layout are decoded straight
    into columns (:mod:`codec.engine.rowscan`), every other map by msgpack.  Returns (completed?, an
    Unpacker positioned after the list, the document offset where that Unpacker starts)."""
    from . import rowscan
    pos = up.tell()  # document offset of w[0]
    head = tap.unread(tap.handed - pos)
    if head is None:
        return _read_rows(up, n, table, fmt, offset, path, rule, limit), up, 0
    # the window: one array, reused (the bytes not decoded yet moved to its front, the next ones
    # read in behind them), PAD zero bytes after the ``size`` valid ones
    w = np.empty(max(2 * WINDOW, len(head)) + rowscan.PAD, np.uint8)
    size = len(head)
    w[:size] = np.frombuffer(head, np.uint8)
    w[size:size + rowscan.PAD] = 0
    del head
    q, left, eof = 0, n, False
    layout, burst, peeked = None, 1, False
    slow: list = []

    def read_on(want: int) -> None:
        """Keep w[q:size] and append up to ``want`` more bytes of the document."""
        nonlocal w, size, pos, q, eof
        keep = size - q
        if keep + want + rowscan.PAD > len(w):
            grown = np.empty(keep + want + rowscan.PAD, np.uint8)
            grown[:keep] = w[q:size]
            w = grown
        elif q:
            w[:keep] = w[q:size]  # (numpy copies overlapping ranges correctly)
        got = _read_into(tap.stream, w, keep, want)
        eof = got < want
        size, pos, q = keep + got, pos + q, 0
        w[size:size + rowscan.PAD] = 0

    def flush() -> bool:
        nonlocal slow
        for k in range(0, len(slow), BATCH):
            _nested(slow[k:k + BATCH], 2, many=True)
            table._add_batch(slow[k:k + BATCH], fmt, offset, path, rule, limit)
            if len(table.errors) >= limit and not _kept_ok(table):
                return False
        slow = []
        return True

    while left:
        if size - q < WINDOW and not eof:
            read_on(2 * WINDOW - (size - q))
        view = w[:size + rowscan.PAD]
        buf = view.data[:size]  # (what msgpack decodes: it copies what it is fed)
        k = 0
        if layout is not None and not table.errors:
            k, e, got = layout.scan(view, size, q, REGION, left)
            if k:
                cols, objects = got
                if count is not None:
                    count.add(objects)
                cols = _typed_columns(table, layout, cols, view)  # (copies: the window is reused)
                if cols is None:  # a value the columns' checks refuse: the exact errors, map by map
                    slow.extend(_decode_maps(buf[q:e], k, make))
                else:
                    if slow and not flush():
                        return False, up, 0
                    table._add_columns(cols, k)
                q, left = e, left - k
                burst = _BURST
                continue
            burst = min(burst * 2, BATCH)
        # a burst of maps the ordinary way (the first one, or ones the layout does not fit)
        before = count.n if count is not None else 0
        rows, used = _decode_some(buf, q, min(burst, left), make)
        if rows is None:  # the next map is not all in the buffer: read on
            if eof:  # the document ends inside this map: msgpack's own error
                _decode_maps(buf[q:], 1, make)
                raise ValueError("the msgpack list ends before its last item")  # (not reached)
            read_on(max(WINDOW, size))
            continue
        if not peeked:  # the first map only shows the layout: the scan reads it again, with the rest
            peeked, layout = True, rowscan.Layout.of(table.decl, rows[-1])
            if layout is not None:
                if count is not None:
                    count.n = before  # (counted when the scan reads it)
                continue
        slow.extend(rows)
        q, left = q + used, left - len(rows)
        if len(slow) >= BATCH and not flush():
            return False, up, 0
        nxt = rowscan.Layout.of(table.decl, rows[-1])
        if nxt is not None and (layout is None or nxt.signature != layout.signature):
            layout = nxt
    if slow and not flush():
        return False, up, 0
    rest = w[q:size].tobytes()
    view = buf = w = None
    if pos + q >= TRIM_MIN:
        return_free_memory()  # the window's and the scans' temporaries (before the columns are joined)
    return True, make(_Prefixed(rest, tap.stream)), pos + q


def _read_into(stream, w: np.ndarray, at: int, n: int) -> int:
    """Up to ``n`` bytes of ``stream`` copied into ``w[at:]``: how many (fewer only at its end)."""
    got = 0
    while got < n:
        d = stream.read(n - got)
        if not d:
            break
        w[at + got:at + got + len(d)] = np.frombuffer(d, np.uint8)
        got += len(d)
    return got


def _decode_some(buf: bytes, q: int, most: int, make):
    """Up to ``most`` maps decoded from ``buf[q:]`` (at least one): (maps, bytes used), or
    (None, 0) when not even one is complete there."""
    size = min(len(buf) - q, 1 << 18)
    while True:
        u = make(None, max(size, 1))
        u.feed(memoryview(buf)[q:q + size])
        rows, used = [], 0
        try:
            for _ in range(most):
                rows.append(u.unpack())
                used = u.tell()  # (after OutOfData, tell() counts the incomplete object's bytes too)
        except msgpack.OutOfData:
            pass
        if rows:
            return rows, used
        if q + size >= len(buf):
            return None, 0
        size = min(size * 4, len(buf) - q)


def _decode_maps(data: bytes, k: int, make) -> list:
    u = make(None, max(len(data), 1))
    u.feed(data)
    return [u.unpack() for _ in range(k)]


def _typed_columns(table: Table, layout, cols: dict, w: np.ndarray) -> dict | None:
    """The scanned columns as the table's column types (strings decoded, fixed-width ASCII ones
    as numpy bytes), or None when a value breaks its declaration (the caller then decodes those
    maps the ordinary way, for the exact errors)."""
    from . import rowscan
    out = {}
    for name, key, kind, _ in layout.fields:
        v = cols[name]
        if kind != "str":
            out[name] = v
            continue
        starts, lens = v
        t, width = key.type, _fixed_ascii(key.type)
        if width:
            if (lens != width).any():
                return None
            raw = np.ascontiguousarray(rowscan._gather(w, starts, width))
            if raw.tobytes().translate(None, t.charset.encode("ascii")):  # (what is left: a byte not allowed)
                return None
            out[name] = raw.view(f"S{width}").ravel()
            continue
        strs, ascii_only = rowscan.strings(w, starts, lens)
        if strs is None:
            return None
        if not ascii_only or t.max_len is not None or t.charset is not None:
            if not payload.column_ok(t, strs):
                return None
        out[name] = strs
    return out


def _kept_ok(table: Table) -> bool:
    return table.keep is None or all(type(x) is str and x for x in table.kept)
