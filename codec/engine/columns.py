"""The items of a list of maps (a tensor index of a million entries) held as columns.

A list whose items are declared by a ``schemas.dsl.Map`` is kept as columns derived from the
declaration, never as one Python dict per item:

* ``Int``            -> a numpy ``uint64`` column (``int64`` when the declaration allows
  negative values; ``object`` if the values fit neither);
* ``Str``            -> a Python list of str, or a numpy ``S<n>`` column when every value must
  have the same length ``n`` in an ASCII charset (a hex digest);
* ``ListOf(Int)``    -> a ragged column: one length per row and one flat value array;
* anything else      -> a Python list (None where absent);
* optional keys      -> the same column, filled with 0/None, and a presence mask;
* undeclared keys    -> kept per row (maps are forward compatible), in a side dictionary.

Items are added batch by batch (decoded maps, or columns the vectorised decoder of
:mod:`codec.engine.rowscan` read straight from the bytes) and checked with the vectorised column checks
of :mod:`codec.engine.payload` (derived from the same declaration); a batch that fails is walked item
by item so the errors are exactly those :func:`codec.engine.payload.check` reports, with the item's
index in the path.  :class:`NameIndex` maps a column of distinct names to rows.

The decoding of a msgpack document into a :class:`Table` is :mod:`codec.engine.table`.
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from operator import itemgetter
from typing import Any

import numpy as np

from ..schemas.dsl import Int, ListOf, Map, Str

from .. import errors as E
from . import payload

_MISSING = payload._MISSING


@lru_cache(maxsize=None)
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
        :mod:`codec.engine.rowscan`): an array, (lengths, flat) for a ragged column, a list otherwise."""
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
        return self._value(i, key, default)

    def values(self, i: int, keys: tuple) -> list:
        """:meth:`value` of each of ``keys`` in row ``i`` (None where absent), in one call."""
        self._need_ok()
        return [self._value(i, k, None) for k in keys]

    def _value(self, i: int, key: str, default):
        m = self._mask[key]
        if m is not None and not m[i]:
            return default
        d = self._data[key]
        if type(d) is np.ndarray and d.dtype.kind in "iuS":  # (one call: a Python int, or a text's bytes)
            x = d.item(i)
            return x.decode("ascii") if type(x) is bytes else x
        if isinstance(d, tuple):  # ragged
            starts = self._starts.get(key)
            if starts is None:
                starts = self.ragged(key)[2]
            a = starts.item(i)
            return d[1][a:a + d[0].item(i)].tolist()
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
            v = self._value(i, k.name, _MISSING)
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


class NameIndex(Mapping):
    """name -> row for a column of distinct names, in a fraction of a dict's memory: one sorted
    array of keys (8 bytes a row), each the high bits of a name's hash above its row number,
    instead of a hash table and an int object per row, and where each run of keys sharing their
    top bits begins (2-4 bytes a row: a lookup reads a key or two, no search).  Iterates in row
    order.  Build it with :func:`name_index`."""

    def __init__(self, names: list, keys: np.ndarray, bits: int):
        self._names, self._keys, self._bits = names, keys, bits
        self._low = (1 << bits) - 1
        # 1-2 keys a run: the run of a hash is its top ``64 - shift`` bits (hash bits: within the top 64 - bits)
        self._shift = 64 - max(min(bits - 1, 64 - bits), 0)
        self._runs: np.ndarray | None = None  # (made by the first lookup: listing names needs none)

    def _make_runs(self) -> np.ndarray:
        top = 64 - self._shift
        counts = np.bincount((self._keys >> np.uint64(self._shift)).astype(np.intp), minlength=1 << top)
        runs = self._runs = np.zeros((1 << top) + 1, dtype=np.uint32 if len(self._keys) < 1 << 32 else np.uint64)
        np.cumsum(counts, out=runs[1:])
        return runs

    def get(self, name, default=None):
        try:
            h = hash(name) & 0xFFFFFFFFFFFFFFFF
        except TypeError:  # (an unhashable name is no row's)
            return default
        keys, bits, runs = self._keys, self._bits, self._runs
        if runs is None:
            runs = self._make_runs()
        want = h >> bits  # (the key's hash part)
        b = h >> self._shift
        for lo in range(runs.item(b), runs.item(b + 1)):
            k = keys.item(lo)
            if k >> bits == want:
                row = k & self._low
                if self._names[row] == name:
                    return row
            elif k >> bits > want:
                break
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
    n = len(names)
    if n < _SMALL:
        d = dict(zip(names, range(n)))
        return d if len(d) == n else None
    # one sort of (high bits of the hash, row): no argsort, no second gather
    bits = (n - 1).bit_length()
    keys = np.fromiter(map(hash, names), dtype=np.int64, count=n).view(np.uint64)
    keys >>= np.uint64(bits)
    keys <<= np.uint64(bits)
    keys |= np.arange(n, dtype=np.uint64)
    keys.sort()
    hashes = keys >> np.uint64(bits)
    same = np.flatnonzero(hashes[1:] == hashes[:-1])
    # equal hash parts: equal names, or (rarely) a collision
    for h in np.unique(hashes[same]).tolist():
        lo, hi = np.searchsorted(hashes, h, "left"), np.searchsorted(hashes, h, "right")
        run = [names[r] for r in (keys[lo:hi] & np.uint64((1 << bits) - 1)).tolist()]
        if len(set(run)) != len(run):
            return None
    return NameIndex(names, keys, bits)
