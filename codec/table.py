"""A msgpack list of maps (a tensor index of a million entries) decoded into columns.

A document ``{"<key>": [ {map}, {map}, ... ], ...}`` whose list items are declared by a
``schemas.dsl.Map`` is decoded one item at a time and kept as columns derived from the
declaration, never as one Python dict per item:

* ``Int``            -> a numpy ``uint64`` column (``int64`` when the declaration allows
  negative values; ``object`` if the values fit neither);
* ``Str``            -> a Python list of str, or a numpy ``S<n>`` column when every value must
  have the same length ``n`` in an ASCII charset (a hex digest);
* ``ListOf(Int)``    -> a ragged column: one length per row and one flat value array;
* anything else      -> a Python list (None where absent);
* optional keys      -> the same column, filled with 0/None, and a presence mask;
* undeclared keys    -> kept per row (maps are forward compatible), in a side dictionary.

Items are checked batch by batch with the vectorised column checks of :mod:`codec.payload`
(derived from the same declaration); a batch that fails is walked item by item so the errors
are exactly those :func:`codec.payload.check` reports, with the item's index in the path.
Decoding stays within the document's decode budget (objects counted as they are built), and
memory within the columns plus one batch, whatever the document holds.
"""
from __future__ import annotations

import traceback
from operator import itemgetter
from collections.abc import Mapping
from typing import Any, Callable

import msgpack
import numpy as np

from schemas.dsl import Int, ListOf, Map, Str

from . import errors as E
from . import io
from . import payload

#: items decoded, checked and turned into columns at a time
BATCH = 1 << 13
_MISSING = payload._MISSING


def _int_kind(t: Int) -> str:
    """uint64 unless the declaration admits negative values."""
    for c in t.valid:
        lo = getattr(c, "lo", None)
        if lo is not None and lo >= 0:
            return "u8"
        values = getattr(c, "values", None)
        if callable(values) and min(values(), default=0) >= 0:
            return "u8"
    return "i8"


def _fixed_ascii(t: Str) -> int | None:
    """The fixed width of a Str column stored as numpy bytes, or None."""
    if t.max_len is not None and t.min_len == t.max_len and t.charset is not None and t.charset.isascii():
        return t.max_len
    return None


class _Col:
    """One column being built: chunks per batch, joined at the end."""

    def __init__(self, key):
        self.key = key
        self.t = key.type
        self.chunks: list = []
        self.masks: list = []
        self.values: dict = {}  # kind "list": row -> value
        self.counts: list = []
        self.n = 0
        if isinstance(self.t, Int):
            self.kind = "int"
        elif isinstance(self.t, Str) and _fixed_ascii(self.t):
            self.kind = "ascii"
        elif isinstance(self.t, ListOf) and isinstance(self.t.item, Int):
            self.kind = "ragged"
        else:
            self.kind = "list"

    def add(self, vals: list | None, count: int, complete: bool) -> None:
        """``vals``: one value per row of the batch of ``count`` rows, ``_MISSING`` where the
        key is absent (none is when ``complete``); None when no row has the key."""
        base = self.n
        self.n += count
        self.counts.append(count)
        if vals is None:
            self.masks.append(np.zeros(count, dtype=bool))
            if self.kind == "int":
                self.chunks.append(np.zeros(count, dtype=np.uint64 if _int_kind(self.t) == "u8" else np.int64))
            elif self.kind == "ascii":
                self.chunks.append(np.zeros(count, dtype=f"S{_fixed_ascii(self.t)}"))
            elif self.kind == "ragged":
                self.chunks.append((np.zeros(count, dtype=np.int64), np.zeros(0, dtype=np.uint64)))
            return
        missing = None if complete else [v is _MISSING for v in vals]
        if missing is not None and any(missing):
            self.masks.append(np.logical_not(np.array(missing, dtype=bool)))
        else:
            self.masks.append(None)
            missing = None
        if self.kind == "int":
            fill = vals if missing is None else [0 if v is _MISSING else v for v in vals]
            self.chunks.append(_ints(fill, _int_kind(self.t)))
        elif self.kind == "ascii":
            fill = vals if missing is None else ["" if v is _MISSING else v for v in vals]
            self.chunks.append(np.array([s.encode("ascii") for s in fill], dtype=f"S{_fixed_ascii(self.t)}"))
        elif self.kind == "ragged":
            fill = vals if missing is None else [() if v is _MISSING else v for v in vals]
            lens = np.fromiter(map(len, fill), dtype=np.int64, count=len(fill))
            flat = [x for v in fill for x in v]
            self.chunks.append((lens, _ints(flat, _int_kind(self.t.item))))
        else:
            self.values.update((base + j, v) for j, v in enumerate(vals) if v is not _MISSING)

    def add_array(self, vals, count: int, base: int) -> None:
        """A batch of ``count`` rows that all have the key, already as this column's type (from
        :mod:`codec.rowscan`): an array, (lengths, flat) for a ragged column, a list otherwise."""
        if vals is None:
            self.add(None, count, True)
            return
        self.n += count
        self.counts.append(count)
        self.masks.append(None)
        if self.kind == "list":
            self.values.update(zip(range(base, base + count), vals))
        else:
            self.chunks.append(vals)

    def finish(self, n: int):
        masks = None
        if any(m is not None for m in self.masks):
            masks = np.ones(n, dtype=bool)
            pos = 0
            for m, c in zip(self.masks, self.counts):
                if m is not None:
                    masks[pos:pos + c] = m
                pos += c
        if self.kind == "list":
            data = _Sparse(n, self.values)
        elif self.kind == "ragged":
            lens = _join([c[0] for c in self.chunks], np.int64)
            data = (lens, _join([c[1] for c in self.chunks], np.uint64 if _int_kind(self.t.item) == "u8" else np.int64))
        else:
            default = f"S{_fixed_ascii(self.t)}" if self.kind == "ascii" else \
                (np.uint64 if _int_kind(self.t) == "u8" else np.int64)
            data = _join(self.chunks, default)
        return data, masks


class _Sparse:
    """A column of Python values (maps, strings of any length) held by row: ``col[i]`` is None
    for the rows without a value (most rows, for the codec parameters of a few packed tensors)."""

    def __init__(self, n: int, values: dict):
        self.n, self.values = n, values

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return self.values.get(i)


def _ints(vals: list, kind: str) -> np.ndarray:
    try:
        return np.array(vals, dtype=np.uint64 if kind == "u8" else np.int64)
    except (OverflowError, ValueError, TypeError):
        a = np.empty(len(vals), dtype=object)
        a[:] = vals
        return a


def _join(chunks: list, default) -> np.ndarray:
    """One array of the chunks, which are released as they are copied (no second copy of the
    whole column ever exists)."""
    if not chunks:
        return np.zeros(0, dtype=default)
    if len(chunks) == 1:
        return chunks.pop()
    dtype = chunks[0].dtype if len({c.dtype for c in chunks}) == 1 else np.dtype(object)
    out = np.empty(sum(len(c) for c in chunks), dtype=dtype)
    pos = 0
    chunks.reverse()
    while chunks:
        c = chunks.pop()
        out[pos:pos + len(c)] = c
        pos += len(c)
    return out


class Table:
    """The items of a decoded list of maps, as columns (see the module docstring).

    ``len(table)`` rows; ``table[i]`` the row as a dict (declared keys in declaration order,
    then undeclared ones); ``column(key)`` / ``present(key)`` / ``ragged(key)`` the columns.
    ``errors``: what the items break (at most ``limit``); when there are any, ``ok`` is False
    and only the ``keep`` column (raw values, whatever their type) is available."""

    def __init__(self, decl: Map, keep: str | None = None):
        self.decl = decl
        self.keep = keep
        self.kept: list = []
        self.errors: list[E.FormatError] = []
        self.n = 0
        self._cols = {k.name: _Col(k) for k in decl.keys}
        self._data: dict[str, Any] = {}
        self._mask: dict[str, np.ndarray | None] = {}
        self._starts: dict[str, np.ndarray] = {}
        self.extra: dict[int, dict] = {}

    @property
    def ok(self) -> bool:
        return not self.errors

    def __len__(self) -> int:
        return self.n

    def _need_ok(self) -> None:
        if self.errors:
            raise self.errors[0]

    def column(self, key: str):
        """The values of ``key`` for every row (0 / "" / None where an optional key is absent)."""
        self._need_ok()
        d = self._data[key]
        return d[0] if isinstance(d, tuple) else d

    def present(self, key: str) -> np.ndarray:
        """Boolean mask: the rows that have ``key``."""
        self._need_ok()
        m = self._mask[key]
        return np.ones(self.n, dtype=bool) if m is None else m

    def ragged(self, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lengths, flat values, start of each row in flat) of a ``ListOf(Int)`` column."""
        self._need_ok()
        lens, flat = self._data[key]
        if key not in self._starts:
            starts = np.zeros(self.n, dtype=np.int64)
            if self.n > 1:
                np.cumsum(lens[:-1], out=starts[1:])
            self._starts[key] = starts
        return lens, flat, self._starts[key]

    def value(self, i: int, key: str, default=None):
        self._need_ok()
        m = self._mask[key]
        if m is not None and not m[i]:
            return default
        d = self._data[key]
        if isinstance(d, tuple):  # ragged
            lens, flat, starts = self.ragged(key)
            return [int(x) for x in flat[starts[i]:starts[i] + lens[i]]]
        x = d[i]
        if isinstance(x, np.bytes_):
            return x.decode("ascii")
        if isinstance(x, np.integer):
            return int(x)
        return x

    def __getitem__(self, i: int) -> dict:
        self._need_ok()
        if not -self.n <= i < self.n:
            raise IndexError(i)
        i %= self.n
        row = {}
        for k in self.decl.keys:
            v = self.value(i, k.name, _MISSING)
            if v is not _MISSING:
                row[k.name] = v
        row.update(self.extra.get(i, {}))
        return row

    def __iter__(self):
        return (self[i] for i in range(self.n))

    # ------------------------------------------------------------------ building
    def _add_batch(self, rows: list, fmt: str, offset: int | None, path: str, rule: str, limit: int) -> None:
        base = self.n
        self.n += len(rows)
        got = None if self.errors else self._batch_columns(rows)
        if self.keep is not None:
            if got is not None and got[1] and got[0].get(self.keep) is not None:
                self.kept.extend(got[0][self.keep])
            else:
                self.kept.extend(r.get(self.keep) if type(r) is dict else None for r in rows)
        if got is None:
            self._walk(rows, base, fmt, offset, path, rule, limit)
            if self.errors:
                self._cols = {}
                return
            got = self._batch_columns(rows, slow=True)
        cols, complete = got
        for name, col in self._cols.items():
            if name == self.keep and col.kind == "list" and col.key.required:
                continue  # (kept holds them)
            col.add(cols.get(name), len(rows), complete)

    def _add_columns(self, cols: dict, count: int) -> None:
        """``count`` valid rows given as columns (see :meth:`_Col.add_array`)."""
        base = self.n
        self.n += count
        if self.keep is not None:
            kept = cols.get(self.keep)
            self.kept.extend(kept if kept is not None else [None] * count)
        for name, col in self._cols.items():
            if name == self.keep and col.kind == "list" and col.key.required:
                continue  # (kept holds them)
            col.add_array(cols.get(name), count, base)

    def _walk(self, rows, base, fmt, offset, path, rule, limit) -> None:
        for j, r in enumerate(rows):
            if len(self.errors) >= limit:
                return
            self.errors.extend(payload.check(self.decl, r, fmt=fmt, offset=offset, path=f"{path}[{base + j}]",
                                             rule=rule, limit=limit - len(self.errors)))

    def _batch_columns(self, rows: list, slow: bool = False) -> tuple[dict, bool] | None:
        """({key: [value or _MISSING per row], or None when no row has it}, complete) when every
        row of the batch is valid (checked column by column); None when some row is not
        (``slow``: the rows were walked and are valid, only build the columns).  ``complete``:
        every row has the same declared keys (no _MISSING in any list)."""
        keys = self.decl.keys
        if set(map(type, rows)) != {dict}:
            return None
        declared = {k.name for k in keys}
        first = rows[0]
        present = [k.name for k in keys if k.name in first]
        uniform = (not slow and len(first) == len(present) and len(set(map(len, rows))) == 1)
        out: dict[str, list | None] = {}
        if uniform:
            try:
                got = list(map(itemgetter(*present), rows))
            except (KeyError, TypeError):
                uniform = False
            else:
                cols = zip(*got) if len(present) > 1 else (got,)
                out = {name: list(c) for name, c in zip(present, cols)}
        if not uniform:
            out = {k.name: [r.get(k.name, _MISSING) for r in rows] for k in keys}
            base = self.n - len(rows)
            for j, r in enumerate(rows):
                if not declared.issuperset(r):
                    self.extra[base + j] = {k: v for k, v in r.items() if k not in declared}
        if slow:
            return out, uniform
        for k in keys:
            vals = out.get(k.name)
            if vals is None:
                if k.required:
                    return None
                continue
            if not uniform:
                have = [v for v in vals if v is not _MISSING]
                if k.required and len(have) != len(vals):
                    return None
                if not have:
                    out[k.name] = None
                    continue
            else:
                have = vals
            if not payload.column_ok(k.type, have):
                return None
        return out, uniform

    def _finish(self) -> "Table":
        if not self.errors:
            for name in list(self._cols):
                col = self._cols.pop(name)
                self._data[name], self._mask[name] = col.finish(self.n)
            if self.keep is not None and self._cols_kept_inline():
                self._data[self.keep] = self.kept  # the same values: one list, not two
        self._cols = {}
        return self

    def _cols_kept_inline(self) -> bool:
        k = next((k for k in self.decl.keys if k.name == self.keep), None)
        return k is not None and k.required and _Col(k).kind == "list"


def unpack_table(stream, length: int, decl: Map, list_key: str, *, whole: Callable[[], bytes], fmt: str,
                 offset: int | None, path: str, rule: str, stored: int | None = None, limit_rule: str | None = None,
                 per_byte: int | None = None, keep: str | None = None, limit: int = 50) -> Table:
    """Decode the msgpack document of ``length`` bytes read from ``stream`` (``read(n)``),
    declared by ``decl`` (a Map with a key ``list_key`` holding a list of maps), into a
    :class:`Table` of that list's items, as it is read: the document is never held whole.

    The document's decode budget (``stored``, ``per_byte``: see :func:`codec.payload.object_budget`)
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
                    up.skip()  # undeclared keys are tolerated
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
        if isinstance(e, payload._OverBudget) or (
                isinstance(e, ValueError) and budget < length
                and ("exceeds max_array_len" in str(e) or "exceeds max_map_len" in str(e))):
            raise payload._over_budget(fmt, offset, path, lrule, "msgpack payload", budget, stored) from None
        raise E.DecodeError(fmt, offset, path, rule, f"invalid msgpack: {type(e).__name__}: {e}") from None


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
            table._add_batch(rows, fmt, offset, path, rule, limit)
            rows = []
            if len(table.errors) >= limit and not _kept_ok(table):
                return False
    if rows:
        table._add_batch(rows, fmt, offset, path, rule, limit)
    return True


#: lists shorter than this are decoded map by map (a layout scan costs a few numpy passes)
SCAN_MIN = 1 << 10
#: bytes of the document held ahead of the decoder while scanning, and searched for rows at once
WINDOW = 4 << 20
REGION = 2 << 20
#: maps decoded one by one before the next scan, after a scan that found none
_BURST = 16


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


def _read_full(stream, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        d = stream.read(n - got)
        if not d:
            break
        parts.append(d)
        got += len(d)
    return b"".join(parts)


def _scan_rows(up, tap: _Tap, n: int, table: Table, make, count, fmt, offset, path, rule, limit):
    """:func:`_read_rows` for long lists: runs of maps that share a layout are decoded straight
    into columns (:mod:`codec.rowscan`), every other map by msgpack.  Returns (completed?, an
    Unpacker positioned after the list, the document offset where that Unpacker starts)."""
    from . import rowscan
    pos = up.tell()  # document offset of buf[0]
    buf = tap.unread(tap.handed - pos)
    if buf is None:
        return _read_rows(up, n, table, fmt, offset, path, rule, limit), up, 0
    q, left, eof = 0, n, False
    layout, burst, w = None, _BURST, None
    slow: list = []

    def read_on(want: int) -> None:
        """Keep buf[q:] and append up to ``want`` more bytes of the document."""
        nonlocal buf, pos, q, w, eof
        more = _read_full(tap.stream, want)
        eof = len(more) < want
        buf, pos, q, w = buf[q:] + more, pos + q, 0, None

    def flush() -> bool:
        nonlocal slow
        for k in range(0, len(slow), BATCH):
            table._add_batch(slow[k:k + BATCH], fmt, offset, path, rule, limit)
            if len(table.errors) >= limit and not _kept_ok(table):
                return False
        slow = []
        return True

    while left:
        if len(buf) - q < WINDOW and not eof:
            read_on(2 * WINDOW - (len(buf) - q))
        if w is None:
            w = np.zeros(len(buf) + rowscan.PAD, np.uint8)
            w[:len(buf)] = np.frombuffer(buf, np.uint8)
        k = 0
        if layout is not None and not table.errors:
            k, e, got = layout.scan(w, len(buf), q, REGION, left)
            if k:
                cols, objects = got
                if count is not None:
                    count.add(objects)
                cols = _typed_columns(table, layout, cols, w)
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
        # a burst of maps the ordinary way (the first ones, or ones the layout does not fit)
        rows, used = _decode_some(buf, q, min(burst, left), make)
        if rows is None:  # the next map is not all in the buffer: read on
            if eof:  # the document ends inside this map: msgpack's own error
                _decode_maps(buf[q:], 1, make)
                raise ValueError("the msgpack list ends before its last item")  # (not reached)
            read_on(max(WINDOW, len(buf)))
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
    rest = buf[q:]
    del buf, w
    io.return_free_memory()  # the windows' and the scans' temporaries (before the columns are joined)
    return True, make(_Prefixed(rest, tap.stream)), pos + q


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


class NameIndex(Mapping):
    """name -> row for a column of distinct names, in a fraction of a dict's memory: the
    names' hashes sorted (8 bytes a row) and the order that sorts them (8 bytes a row), instead
    of a hash table and an int object per row.  Iterates in row order.  Build it with
    :func:`name_index`."""

    def __init__(self, names: list, hashes: np.ndarray, order: np.ndarray):
        self._names, self._hashes, self._order = names, hashes, order

    def get(self, name, default=None):
        try:
            h = hash(name)
        except TypeError:
            return default
        lo = int(np.searchsorted(self._hashes, h, "left"))
        names, hashes, order = self._names, self._hashes, self._order
        while lo < len(hashes) and hashes[lo] == h:
            row = int(order[lo])
            if names[row] == name:
                return row
            lo += 1
        return default

    def __getitem__(self, name) -> int:
        row = self.get(name)
        if row is None:
            raise KeyError(name)
        return row

    def __contains__(self, name) -> bool:
        return self.get(name) is not None

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


#: below this many names a plain dict is as small and faster
_SMALL = 1 << 12


def name_index(names: list) -> Mapping | None:
    """A name -> row mapping of ``names`` (str), or None when some name occurs twice."""
    if len(names) < _SMALL:
        d = dict(zip(names, range(len(names))))
        return d if len(d) == len(names) else None
    hashes = np.fromiter(map(hash, names), dtype=np.int64, count=len(names))
    order = np.argsort(hashes, kind="stable")
    hashes = hashes[order]
    same = np.flatnonzero(hashes[1:] == hashes[:-1])
    for h in np.unique(hashes[same]).tolist():  # equal hashes: equal names, or (rarely) a collision
        lo, hi = np.searchsorted(hashes, h, "left"), np.searchsorted(hashes, h, "right")
        run = [names[r] for r in order[lo:hi].tolist()]
        if len(set(run)) != len(run):
            return None
    return NameIndex(names, hashes, order)
