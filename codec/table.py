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

from operator import itemgetter
from typing import Any, Callable

import msgpack
import numpy as np

from schemas.dsl import Int, ListOf, Map, Str

from . import errors as E
from . import payload

#: items decoded, checked and turned into columns at a time
BATCH = 1 << 15
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
        if isinstance(self.t, Int):
            self.kind = "int"
        elif isinstance(self.t, Str) and _fixed_ascii(self.t):
            self.kind = "ascii"
        elif isinstance(self.t, ListOf) and isinstance(self.t.item, Int):
            self.kind = "ragged"
        else:
            self.kind = "list"

    def add(self, vals: list) -> None:
        """``vals``: one value per row of the batch, ``_MISSING`` where the key is absent."""
        missing = [v is _MISSING for v in vals] if not self.key.required else None
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
            self.chunks.append([None if v is _MISSING else v for v in vals])

    def finish(self, n: int):
        masks = None
        if any(m is not None for m in self.masks):
            masks = np.concatenate([np.ones(len(c[0]) if self.kind == "ragged" else len(c), dtype=bool)
                                    if m is None else m for m, c in zip(self.masks, self.chunks)])
        if self.kind == "list":
            data = [x for c in self.chunks for x in c]
        elif self.kind == "ragged":
            lens = _join([c[0] for c in self.chunks], np.int64)
            data = (lens, _join([c[1] for c in self.chunks], np.uint64 if _int_kind(self.t.item) == "u8" else np.int64))
        else:
            default = f"S{_fixed_ascii(self.t)}" if self.kind == "ascii" else \
                (np.uint64 if _int_kind(self.t) == "u8" else np.int64)
            data = _join(self.chunks, default)
        return data, masks


def _ints(vals: list, kind: str) -> np.ndarray:
    try:
        return np.array(vals, dtype=np.uint64 if kind == "u8" else np.int64)
    except (OverflowError, ValueError, TypeError):
        a = np.empty(len(vals), dtype=object)
        a[:] = vals
        return a


def _join(chunks: list, default) -> np.ndarray:
    if not chunks:
        return np.zeros(0, dtype=default)
    if len({c.dtype for c in chunks}) > 1:
        chunks = [c.astype(object) for c in chunks]
    return np.concatenate(chunks) if len(chunks) > 1 else chunks[0]


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
        if self.keep is not None:
            self.kept.extend(r.get(self.keep) if type(r) is dict else None for r in rows)
        if self.errors:  # already broken: only look for more errors
            self._walk(rows, base, fmt, offset, path, rule, limit)
            return
        cols = self._batch_columns(rows)
        if cols is None:
            self._walk(rows, base, fmt, offset, path, rule, limit)
            if self.errors:
                self._cols = {}
                return
            cols = self._batch_columns(rows, slow=True)
        for name, vals in cols.items():
            self._cols[name].add(vals)

    def _walk(self, rows, base, fmt, offset, path, rule, limit) -> None:
        for j, r in enumerate(rows):
            if len(self.errors) >= limit:
                return
            self.errors.extend(payload.check(self.decl, r, fmt=fmt, offset=offset, path=f"{path}[{base + j}]",
                                             rule=rule, limit=limit - len(self.errors)))

    def _batch_columns(self, rows: list, slow: bool = False) -> dict | None:
        """{key: [value or _MISSING per row]} when every row of the batch is valid (checked
        column by column); None when some row is not (``slow``: the rows were walked and are
        valid, only build the columns)."""
        keys = self.decl.keys
        if set(map(type, rows)) != {dict}:
            return None
        declared = {k.name for k in keys}
        first = rows[0]
        present = [k.name for k in keys if k.name in first]
        uniform = (not slow and len(first) == len(present) and len(set(map(len, rows))) == 1)
        out: dict[str, list] = {}
        if uniform:
            try:
                got = list(map(itemgetter(*present), rows))
            except (KeyError, TypeError):
                uniform = False
            else:
                cols = zip(*got) if len(present) > 1 else (got,)
                out = {name: list(c) for name, c in zip(present, cols)}
                for k in keys:
                    if k.name not in out:
                        out[k.name] = [_MISSING] * len(rows)
        if not uniform:
            out = {k.name: [r.get(k.name, _MISSING) for r in rows] for k in keys}
            base = self.n - len(rows)
            for j, r in enumerate(rows):
                if not declared.issuperset(r):
                    self.extra[base + j] = {k: v for k, v in r.items() if k not in declared}
        if slow:
            return out
        for k in keys:
            vals = out[k.name]
            have = vals if k.required else [v for v in vals if v is not _MISSING]
            if k.required and any(v is _MISSING for v in vals):
                return None
            if have and not payload.column_ok(k.type, have):
                return None
        return out

    def _finish(self) -> "Table":
        if not self.errors:
            for name, col in self._cols.items():
                self._data[name], self._mask[name] = col.finish(self.n)
        self._cols = {}
        return self


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
    hooks = payload._counting_hooks(budget) if length > budget else {}
    lrule = limit_rule or rule
    try:
        with payload.gc_paused():
            # read through a file object: feed() would copy the whole document
            up = msgpack.Unpacker(stream, read_size=max(min(length, 1 << 20), 1), raw=False, strict_map_key=False,
                                  max_buffer_size=max(length, 1), max_array_len=cap, max_map_len=cap, **hooks)
            seen = False
            nkeys = _header(up.read_map_header)
            for _ in range(nkeys or 0):
                key = up.unpack()
                if key != list_key or seen:
                    up.skip()  # undeclared keys are tolerated
                    continue
                n = _header(up.read_array_header)
                if n is None:
                    break
                seen = True
                if not _read_rows(up, n, table, fmt, offset, f"{path}.{list_key}", rule, limit):
                    return table._finish()  # broken beyond use: no need to read on
            else:
                rest = length - up.tell()
                if seen and rest:
                    raise ValueError(f"{rest} trailing bytes after the msgpack object")
            if seen:
                return table._finish()
            # not the expected shape: the exact errors, from the whole document
            obj = payload.unpack_msgpack(whole(), fmt=fmt, offset=offset, path=path, rule=rule, stored=stored,
                                         limit_rule=limit_rule)
            table.errors = payload.check(decl, obj, fmt=fmt, offset=offset, path=path, rule=rule, limit=limit) or [
                E.SchemaError(fmt, offset, f"{path}.{list_key}", rule, "malformed list")]
            return table
    except payload._OverBudget:
        raise payload._over_budget(fmt, offset, path, lrule, "msgpack payload", budget, stored) from None
    except E.FormatError:
        raise
    except ValueError as e:
        if budget < length and ("exceeds max_array_len" in str(e) or "exceeds max_map_len" in str(e)):
            raise payload._over_budget(fmt, offset, path, lrule, "msgpack payload", budget, stored) from None
        raise E.DecodeError(fmt, offset, path, rule, f"invalid msgpack: {type(e).__name__}: {e}") from None
    except Exception as e:  # msgpack raises many unrelated types
        raise E.DecodeError(fmt, offset, path, rule, f"invalid msgpack: {type(e).__name__}: {e}") from None


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


def _kept_ok(table: Table) -> bool:
    return table.keep is None or all(type(x) is str and x for x in table.kept)
