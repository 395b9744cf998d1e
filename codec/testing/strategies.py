"""Hypothesis strategies derived from the schema declarations (no per-field hand-written ones).

``records(struct)`` draws dicts that satisfy every declared constraint of a binary record;
``records(struct, valid=False)`` draws any value of each field's type (for byte-level round
trips and negative tests); ``payloads(map_decl)`` draws values of a declared payload map.

Whole tables, whose declared relations (``RELATIONS`` in ``schemas/<fmt>.py``) hold by
construction -- generated files satisfy them:

* ``tables(RELATIONS, table)`` draws the columns of a table the reader builds itself
  (the entries of a JSON or key/value header): Member, Unique, Aligned, NBytes, Region, Disjoint
  and Tiles hold.
* ``record_tables(...)`` (:mod:`codec.testing.record_strategies`) draws the rows
  of a table of binary records.
"""
from __future__ import annotations

import math

import construct as cs
import numpy as np

try:
    from hypothesis import strategies as st
except ImportError:  # not a runtime dependency
    raise ImportError("codec.testing.strategies needs hypothesis: pip install 'modelcodec[testing]'") from None

from ..schemas.dsl import AnyValue, Bin, Bool, Chars, Eq, Int, KnownFlags, ListOf, Map, MapOf, Multiple, OneOf, Range, Str, Zero

from ..engine.records import Field, record_of
from ..io.tensor_writer import align_up


def _int_strategy(lo: int, hi: int, valid: tuple) -> st.SearchStrategy:
    step = 1
    choices = None
    mask = None
    for c in valid:
        if isinstance(c, Eq):
            return st.just(c.value)
        if isinstance(c, Zero):
            return st.just(0)
        if isinstance(c, Range):
            lo = lo if c.lo is None else max(lo, c.lo)
            hi = hi if c.hi is None else min(hi, c.hi)
        elif isinstance(c, Multiple):
            step = step * c.n // math.gcd(step, c.n)
        elif isinstance(c, OneOf):
            choices = c.values()
        elif isinstance(c, KnownFlags):
            mask = c.mask()
    if choices is not None:
        ok = [v for v in choices if lo <= v <= hi and v % step == 0]
        return st.sampled_from(ok)
    base = st.integers(-(-lo // step), hi // step).map(lambda k: k * step)
    if mask is not None:
        base = st.integers(0, mask).map(lambda v: v & mask)
    return base


def field_strategy(f: Field, valid: bool = True) -> st.SearchStrategy:
    cons = f.valid if valid else ()
    if f.kind == "int":
        lo, hi = f.int_bounds()
        return _int_strategy(lo, hi, cons)
    if f.kind == "float":
        width = f.subcon.sizeof() * 8
        return st.floats(width=width, allow_nan=False)
    if f.kind == "array":
        sc = f.subcon
        inner = Field(f.name, sc.subcon, "", (), None, sc.subcon.sizeof())
        return st.lists(field_strategy(inner, valid), min_size=sc.count, max_size=sc.count)
    if f.kind == "bytes":
        n = f.subcon.length
        for c in cons:
            if isinstance(c, Eq):
                return st.just(c.value)
            if isinstance(c, Zero):
                return st.just(bytes(n))
        return st.binary(min_size=n, max_size=n)
    raise TypeError(f"no derived strategy for field {f.name} ({f.type_name})")


#: variable parts (arrays, byte strings) are drawn at most this long
VAR_MAX = 12


def _count_bounds(rec, count_field: str, valid: bool) -> tuple[int, int]:
    f = rec.by_name[count_field]
    lo, hi = 0, VAR_MAX
    if valid:
        for c in f.valid:
            if isinstance(c, Range):
                lo = max(lo, c.lo or 0)
                hi = min(hi, c.hi) if c.hi is not None else hi
    return lo, max(lo, hi)


def _clip(text: str, most: int) -> bytes:
    """The UTF-8 of the longest prefix of ``text`` that fits in ``most`` bytes."""
    out = text.encode()
    while len(out) > most:
        text = text[:-1]
        out = text.encode()
    return out


def _sized(rec, f: Field, count: str, valid: bool, alphabet=None) -> st.SearchStrategy:
    """Values of the field ``f`` whose length is the count field ``count`` (in that field's
    bounds): an array of its items, bytes of its characters (``Chars``), or text of
    ``alphabet`` (UTF-8 encoded; the count bounds its bytes), or any bytes."""
    lo, hi = _count_bounds(rec, count, valid)
    if f.name in rec.count_limits:  # (longer, the parser reads nothing: no bytes hold such a record)
        hi = max(lo, min(hi, rec.count_limits[f.name]))
    sc = f.subcon
    chars = next((c.chars for c in f.valid if isinstance(c, Chars)), None) if valid else None
    if isinstance(sc, cs.Array):
        inner = Field(f.name, sc.subcon, "", (), None, sc.subcon.sizeof())
        return st.lists(field_strategy(inner, valid), min_size=lo, max_size=hi)
    if chars is not None:
        return st.text(st.sampled_from(chars), min_size=lo, max_size=hi).map(str.encode)
    if alphabet is not None:  # characters while they fit in hi bytes
        return st.text(alphabet, min_size=lo, max_size=hi).map(lambda t: _clip(t, hi)).filter(lambda b: len(b) >= lo)
    return st.binary(min_size=lo, max_size=hi)


def records(struct, valid: bool = True) -> st.SearchStrategy:
    """Records of ``struct``; length/count fields are derived from the data they size."""
    rec = record_of(struct)
    sizes = {data: count for count, data in rec.derived.items()}
    parts = {}
    zero_fill = {f.name for f in rec.zero_fill}
    for f in rec.fields:
        if f.name in rec.derived or (f.name in zero_fill and valid):
            continue
        if f.name in sizes:
            parts[f.name] = _sized(rec, f, sizes[f.name], valid)
        elif f.size is None:  # computed-length bytes (padding): any bytes of the computed length
            parts[f.name] = st.binary(min_size=0, max_size=64)
        else:
            parts[f.name] = field_strategy(f, valid)

    def derive(d):
        for count, data in rec.derived.items():
            d[count] = len(d[data])
        for f in rec.fields:
            if f.size is None and f.name not in sizes and f.name not in rec.derived:
                n = f.subcon.length(d)
                d[f.name] = bytes(n) if valid else (d.get(f.name, b"") * (n + 1))[:n].ljust(n, b"\xff")
        return {f.name: d[f.name] for f in rec.fields}
    return st.fixed_dictionaries(parts).map(derive)


def payloads(decl, depth: int = 0) -> st.SearchStrategy:
    """Values that satisfy a payload declaration (optional keys sometimes present)."""
    if isinstance(decl, Map):
        req = {k.name: payloads(k.type, depth + 1) for k in decl.keys if k.required}
        opt = {k.name: payloads(k.type, depth + 1) for k in decl.keys if not k.required}
        return st.fixed_dictionaries(req, optional=opt)
    if isinstance(decl, MapOf):
        return st.dictionaries(st.text(max_size=8), payloads(decl.value, depth + 1), max_size=3)
    if isinstance(decl, ListOf):
        hi = decl.max_len if decl.max_len is not None else decl.min_len + 4
        items = st.lists(payloads(decl.item, depth + 1), min_size=decl.min_len, max_size=min(hi, decl.min_len + 4))
        return items.map(sorted) if decl.ascending else items
    if isinstance(decl, Int):
        return _int_strategy(-(2**63), 2**64 - 1, decl.valid)
    if isinstance(decl, Str):
        if decl.one_of is not None:
            return st.sampled_from(decl.one_of)
        if decl.charset is not None:
            return st.text(st.sampled_from(decl.charset), min_size=decl.min_len,
                           max_size=decl.max_len if decl.max_len is not None else decl.min_len + 20)
        if decl.pattern is not None:
            return st.from_regex(decl.pattern, fullmatch=True).filter(
                lambda s: decl.min_len <= len(s) <= (decl.max_len or len(s)))
        return st.text(min_size=decl.min_len, max_size=decl.max_len or 20)
    if isinstance(decl, Bin):
        n = decl.length
        return st.binary(min_size=n or 0, max_size=n if n is not None else 16)
    if isinstance(decl, Bool):
        return st.booleans()
    if isinstance(decl, AnyValue):
        scalar = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8), st.booleans())
        return st.dictionaries(st.text(max_size=8), scalar, max_size=3) if decl.map_only or depth > 2 \
            else st.one_of(scalar, st.dictionaries(st.text(max_size=8), scalar, max_size=3))
    raise TypeError(decl)


# --------------------------------------------------------------------------- tables from relations
def _terms(r) -> list[str]:
    return [v for v in vars(r).values() if isinstance(v, str) and "." in v]


class Drawn:
    """A table drawn to satisfy the relations declared on it: its ``columns`` (numpy arrays; a
    list of extents per row as ``(lengths, flat)``; names as a list), ``n`` rows, the ``$``
    ``values`` its terms use and the file ``size`` (FILE_END).  ``context(fmt)`` is the relation
    engine's view of it."""

    def __init__(self, table: str, columns: dict, n: int, values: dict, size: int):
        self.table, self.columns, self.n, self.values, self.size = table, columns, n, values, size

    def context(self, fmt: str):
        from ..engine.relations import Context
        ctx = Context(fmt, self.size)
        ctx.add_table(self.table, self.table.lower(), dict(self.columns), self.n, 0, lambda i, f: 0)
        ctx.values.update(self.values)
        return ctx


def tables(relations, table: str, *, max_rows: int = 6) -> st.SearchStrategy:
    """Tables of ``table`` that satisfy, by construction, every relation of ``relations`` over
    it (a strategy of :class:`Drawn`): values drawn from a ``Member`` set, unique ``Unique``
    columns, ``Aligned`` columns at multiples of their alignment, lengths that are ``NBytes``
    of a drawn dtype and shape, and regions laid out in a random order that keep inside their
    ``Region`` bounds, never overlap (``Disjoint``) and tile their range exactly (``Tiles``).
    Relations on other tables are ignored; a relation over this table of a kind it cannot
    satisfy by construction is a TypeError (so a test never silently covers less)."""
    from ..schemas.dsl import Aligned, Disjoint, Member, NBytes, Region, Tiles, Unique
    mine = [r for r in relations if any(t.split(".")[0] == table for t in _terms(r))]
    for r in mine:
        if not isinstance(r, (Aligned, Disjoint, Member, NBytes, Region, Tiles, Unique)):
            raise TypeError(f"no table strategy for {type(r).__name__} over {table}")
    def col(term: str) -> str:
        return term.split(".", 1)[1]
    regions = [r for r in mine if isinstance(r, (Region, Disjoint, Tiles))]
    offset = {col(r.offset) for r in regions}
    length = {col(r.length) for r in regions}
    if len(offset) > 1 or len(length) > 1:
        raise TypeError(f"{table}: one region per row is drawn (offset {offset}, length {length})")

    @st.composite
    def draw(d):
        n = d(st.integers(0, max_rows))
        cols: dict = {}
        values: dict = {}

        def value(term, choices=(1, 2, 8, 32, 64)):
            if isinstance(term, int):
                return term
            if term.startswith("$"):
                if term[1:] not in values:
                    values[term[1:]] = d(st.sampled_from(choices))
                return values[term[1:]]
            return None
        for r in mine:  # free columns first: members, alignments of plain columns, names
            if isinstance(r, Member):
                cols[col(r.column)] = np.array(d(st.lists(st.sampled_from(sorted(r.values)), min_size=n, max_size=n)),
                                               dtype=np.uint64)
            elif isinstance(r, Unique):
                cols[col(r.column)] = d(st.lists(st.text("abcxyz._", min_size=1, max_size=6), min_size=n, max_size=n,
                                                 unique=True))
        for r in mine:
            if isinstance(r, Aligned) and col(r.column) not in offset:
                k = value(r.n)
                if k is None:  # another column: one alignment per row
                    per = cols.setdefault(col(r.n), np.array(d(st.lists(st.sampled_from([1, 32, 256]), min_size=n,
                                                                        max_size=n)), dtype=np.uint64))
                else:
                    per = np.full(n, k, dtype=np.uint64)
                cols[col(r.column)] = per * np.array(d(st.lists(st.integers(0, 4), min_size=n, max_size=n)),
                                                     dtype=np.uint64)
            elif isinstance(r, NBytes):
                shapes = d(st.lists(st.lists(st.integers(0, 5), max_size=3), min_size=n, max_size=n))
                codes = sorted(r.itemsize) if r.itemsize else [0]
                dt = d(st.lists(st.sampled_from(codes), min_size=n, max_size=n))
                if r.dtype is not None:
                    cols[col(r.dtype)] = np.array(dt, dtype=np.uint64)
                cols[col(r.dims)] = (np.array([len(s) for s in shapes], dtype=np.int64),
                                     np.array([x for s in shapes for x in s], dtype=np.uint64))
                cols[col(r.length)] = np.array([math.prod(s) * (r.itemsize[c] if r.itemsize else 1)
                                                for s, c in zip(shapes, dt)], dtype=np.uint64)
        if regions:
            (off,), (ln,) = offset, length
            if ln not in cols:
                cols[ln] = np.array(d(st.lists(st.integers(0, 40), min_size=n, max_size=n)), dtype=np.uint64)
            align = 1
            for r in mine:
                if isinstance(r, Aligned) and col(r.column) == off:
                    align = value(r.n)
            tiles = next((r for r in regions if isinstance(r, Tiles)), None)
            lo = [value(r.lo) for r in regions if isinstance(r, Region) and r.lo is not None]
            if None in lo:
                raise TypeError(f"{table}: a region bound by another table is not drawn here")
            pos = max([tiles.start if tiles else 0, *lo])
            at = np.zeros(n, dtype=np.uint64)
            for i in d(st.permutations(range(n))):
                pos += 0 if tiles else d(st.integers(0, 16))
                pos = align_up(pos, align)
                at[i] = pos
                pos += int(cols[ln][i])
            cols[off] = at
            his = [r.hi for r in regions if isinstance(r, Region)] + ([tiles.end] if tiles else [])
            end = pos + (0 if tiles else d(st.integers(0, 16)))
            size = end
            for hi in his:
                if isinstance(hi, str) and hi.startswith("$"):
                    values[hi[1:]] = end
            return Drawn(table, cols, n, values, size)
        return Drawn(table, cols, n, values, d(st.integers(0, 64)))
    return draw()
