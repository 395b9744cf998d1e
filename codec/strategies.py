"""Hypothesis strategies derived from the schema declarations (no per-field hand-written ones).

``records(struct)`` draws dicts that satisfy every declared constraint of a binary record;
``records(struct, valid=False)`` draws any value of each field's type (for byte-level round
trips and negative tests); ``payloads(map_decl)`` draws values of a declared payload map.

Whole tables, whose declared relations (``RELATIONS`` in ``schemas/<fmt>.py``) hold by
construction -- generated files satisfy them:

* ``tables(RELATIONS, table)`` draws the columns of a table the reader builds itself
  (safetensors entries, GGUF tensor infos): Member, Unique, Aligned, NBytes, Region, Disjoint
  and Tiles hold.
* ``record_tables(RELATIONS, record, at=, header=, known=)`` draws the rows of a table of binary
  records declared by a ``Table`` (fixed size) or ``Records`` (variable size) -- MAG, STB, OINF
  -- as a :class:`DrawnRecords`: every row a dict that satisfies the record's field constraints
  (from ``records``) and builds with the engine's record (``data()``), the header fields the
  relations tie to the table (its count, the section bounds it lies in, a ``DeclaresSize``
  file size), the derived columns, each row's data region and the file size.  Held by
  construction over the table, one small handler per kind (``_KINDS``):

  - values: Member (a declared code its field allows), Unique (distinct values: repeats
    replaced by the next one the field allows), Utf8 and Text (UTF-8 text; Text without NUL;
    unique too when declared so), Extents (every extent in its bounds);
  - shapes: NBytes and ShapeSize (a small shape per row within the rank bounds of its field and
    the relation's ``max_rank``, a dtype that has an element size and that a Member over it
    allows, the length they make, where ``when`` holds), Size (the derived column);
  - per row, once the columns their conditions read are final: Clear (the bits cleared where
    ``when`` holds), Bound (clamped to its most), Equal (set to the other term), Zeroed (zero
    where ``when`` holds, before and after the layout);
  - layout: Ordered (free header terms drawn in order, aligned as their field must be; terms
    that are where another declared table starts or ends are left to that table's draw, which
    gets them as ``known=``), Zeros (a padding end at or after the table; the bytes are the file
    builder's zeros), Aligned (by a constant or a drawn term), Region, Within, Disjoint, Tiles
    (each row's bytes, in a random order, after the table and every lower bound, aligned,
    non-overlapping, contiguous for Tiles; FILE_END after the last).

  Fits, Table and Records hold for a file that holds the drawn table.  A relation over the
  table of any other kind (RefersTo, Gaps, Present, Known, Agrees, ...) is refused with a
  ValueError naming the kind, as is a combination a draw cannot keep (two regions per row, an
  alignment per row, an Ordered chain fixed out of order): nothing silently draws an invalid
  table.  Limits: rows of a rank over ``max_rank`` are not drawn (their shape lives elsewhere);
  the rows' bytes are placed after the table, so a table whose data section follows later
  tables is drawn with rows only once those are drawn (OINF metadata: ``max_rows=0``).
"""
from __future__ import annotations

import itertools
import math

import construct as cs
import numpy as np

try:
    from hypothesis import strategies as st
except ImportError:  # not a runtime dependency
    raise ImportError("codec.strategies needs hypothesis: pip install 'modelcodec[testing]'") from None

from schemas.dsl import (
    AnyValue, Bin, Bool, Chars, Eq, Int, KnownFlags, ListOf, Map, MapOf, Multiple, OneOf, Range, Str, Zero,
)

from .engine import Field, record_of
from .tensor_writer import align_up


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
        from .relations import Context
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
    from schemas.dsl import Aligned, Disjoint, Member, NBytes, Region, Tiles, Unique
    mine = [r for r in relations if any(t.split(".")[0] == table for t in _terms(r))]
    for r in mine:
        if not isinstance(r, (Aligned, Disjoint, Member, NBytes, Region, Tiles, Unique)):
            raise TypeError(f"no table strategy for {type(r).__name__} over {table}")
    col = lambda term: term.split(".", 1)[1]
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


# --------------------------------------------------------------------------- tables of binary records
def _names(x) -> list[str]:
    """Every term a relation (or a condition, an Affine, a tuple of them) names."""
    if isinstance(x, str):
        return [x] if "." in x else []
    if isinstance(x, tuple):
        return [t for v in x for t in _names(v)]
    if hasattr(x, "__dataclass_fields__"):
        return [t for v in vars(x).values() for t in _names(v)]
    return []


def _count_of(rec, name: str) -> str | None:
    """The count field that sizes the variable field ``name`` (None: fixed)."""
    return next((c for c, data in rec.derived.items() if data == name), None)


class DrawnRecords:
    """A table of binary records drawn so that the relations declared on it hold: ``rows`` (one
    dict per record, every field; :meth:`data` builds them with the engine's record), the table's
    start ``at``, the derived columns (``derived``: column -> one value per row, e.g. a ``Size``),
    the ``header`` fields the relations tie to the table (its count, the bounds it lies in, a
    declared file size), the ``$`` ``values`` and the file ``size`` (FILE_END).  Each row's data
    region is ``region(i)``: its ``(offset, length)``, or None when the table has none."""

    def __init__(self, record, path: str, at: int, rows: list, derived: dict, header: dict, values: dict,
                 size: int, region_cols: tuple | None):
        self.record, self.path, self.at, self.rows = record, path, at, rows
        self.derived, self.header, self.values, self.size = derived, header, values, size
        self.region_cols = region_cols

    @property
    def n(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list:
        return list(self.derived[name]) if name in self.derived else [r[name] for r in self.rows]

    def data(self) -> bytes:
        """The table's bytes (every row built by the record the schema declares)."""
        return b"".join(self.record.build(r) for r in self.rows)

    @property
    def end(self) -> int:
        return self.at + sum(self.record.size_of(r) for r in self.rows)

    def offsets(self) -> list[int]:
        """Where each row starts."""
        out, pos = [], self.at
        for r in self.rows:
            out.append(pos)
            pos += self.record.size_of(r)
        return out

    def region(self, i: int) -> tuple[int, int] | None:
        if self.region_cols is None:
            return None
        off, ln = self.region_cols
        return int(self.column(off)[i]), int(self.column(ln)[i])

    def set(self, i: int, name: str, v) -> None:
        """Set row ``i``'s ``name`` (a field or a derived column); the count field that sizes it
        and zero padding whose length follows from it follow."""
        if name in self.derived or name not in self.record.by_name:
            self.derived.setdefault(name, [0] * self.n)[i] = v
            return
        row = self.rows[i]
        row[name] = v
        count = _count_of(self.record, name)
        if count is not None:
            row[count] = len(v)
        for f in self.record.zero_fill:
            row[f.name] = bytes(f.subcon.length(row))

    def copy(self) -> DrawnRecords:
        import copy
        return DrawnRecords(self.record, self.path, self.at, copy.deepcopy(self.rows), copy.deepcopy(self.derived),
                            dict(self.header), dict(self.values), self.size, self.region_cols)


class _State:
    """What one draw of a record table works on (the handlers below read and write it)."""

    def __init__(self, d, table: DrawnRecords, header_rec, max_extent):
        self.d, self.t, self.rec, self.rows, self.at = d, table, table.record, table.rows, table.at
        self.hrec, self.max_extent = header_rec, max_extent
        self.derived: dict = table.derived
        self.env: dict = {}          # term -> value (header fields, ends, "$" values)
        self.extents: dict = {}      # dims column -> (lo, hi) of every extent
        self.text: set = set()       # bytes columns that hold text (Utf8, Text)
        self.nul_free: set = set()   # ... without NUL (Text)
        self.unique: set = set()
        self.members: dict = {}      # column -> the values a Member relation allows
        self.align: dict = {}        # column -> alignment (Aligned relations)
        self.region: tuple | None = None
        self.regions: list = []      # Region / Within / Tiles / Disjoint relations (layout)
        self.ordered: list = []
        self.after: list = []        # header terms at or after the table's end (its own end, lower bounds)
        self.others: set = set()     # where the other declared tables start and end
        self.late: list = []         # applied after the layout (Zeroed)

    # terms -------------------------------------------------------------------------------
    def col(self, term: str) -> str:
        rec, _, name = term.partition(".")
        if rec != self.rec.name:
            raise ValueError(f"{term}: a column of another table ({self.rec.name} is drawn)")
        return name

    def get(self, i: int, name: str):
        return self.derived[name][i] if name in self.derived else self.rows[i][name]

    def put(self, i: int, name: str, v) -> None:
        self.t.set(i, name, v)

    def end(self) -> int:
        return self.t.end

    def known(self, term):
        """A term's value if it is fixed by now (None: it is still free)."""
        if isinstance(term, int):
            return term
        if term in self.env:
            return self.env[term]
        if term == f"{self.rec.name}.END":
            return self.end()
        return None

    def row_value(self, i: int, term):
        """A term's value for row ``i`` (a constant, a fixed term, an Affine, or a column)."""
        if isinstance(term, int):
            return term
        if hasattr(term, "per"):  # Affine
            return term.base + term.per * self.row_value(i, term.term)
        v = self.known(term)
        if v is not None:
            return v
        if isinstance(term, str) and term.startswith(self.rec.name + "."):
            return self.get(i, self.col(term))
        raise ValueError(f"{term}: no value is drawn for it")

    def when(self, i: int, cond) -> bool:
        """Does the condition (None, In, Has, Lacks, MultipleOf, or a tuple of them) hold for row i."""
        from schemas.dsl import Has, In, Lacks, MultipleOf
        for c in (cond if isinstance(cond, tuple) else (cond,)):
            if c is None:
                continue
            v = self.get(i, self.col(c.column))
            if isinstance(c, In) and v not in c.values:
                return False
            if isinstance(c, Has) and v & c.bits != c.bits:
                return False
            if isinstance(c, Lacks) and v & c.bits:
                return False
            if isinstance(c, MultipleOf) and v % c.n:
                return False
        return True

    def free(self, term, lo: int) -> int:
        """Draw a value for a free header term, at or after ``lo`` (its field's own constraints
        hold: a multiple of what it must be a multiple of)."""
        step = 1
        if self.hrec is not None and isinstance(term, str) and term.startswith(self.hrec.name + "."):
            f = self.hrec.by_name[term.partition(".")[2]]
            step = math.lcm(1, *[c.n for c in f.valid if isinstance(c, Multiple)])
        elif isinstance(term, str) and term.startswith("$"):
            step = self.d(st.sampled_from((1, 8, 64)))
        v = self.env[term] = align_up(lo + self.d(st.integers(0, 16)), step)
        return v

    def extent_strategy(self, dims: str) -> st.SearchStrategy:
        lo, hi = self.extents.get(dims, (0, None))
        return st.integers(lo, lo + self.max_extent if hi is None else min(hi, lo + self.max_extent))


def _field_choices(f: Field, values) -> list:
    """The values of ``values`` the field's own constraints allow."""
    from .constraints import holds
    return [v for v in sorted(values) if all(holds(c, v) for c in f.valid)]


# the handlers: one small entry per relation kind (the kinds' names may change: keep them small)
def _h_member(r, s: _State) -> None:
    name = s.col(r.column)
    ok = _field_choices(s.rec.by_name[name], r.values) if name in s.rec.by_name else sorted(r.values)
    if not ok:
        raise ValueError(f"Member over {r.column}: no value its field allows")
    s.members[name] = ok
    for i in range(len(s.rows)):
        s.put(i, name, s.d(st.sampled_from(ok)))


def _h_clear(r, s: _State) -> None:
    name = s.col(r.column)
    for i in range(len(s.rows)):
        if s.when(i, r.when):
            s.put(i, name, s.get(i, name) & ~r.bits)


def _h_text(r, s: _State) -> None:
    s.text.add(s.col(r.column))
    if type(r).__name__ == "Text":
        s.nul_free.add(s.col(r.column))


def _h_unique(r, s: _State) -> None:
    s.unique.add(s.col(r.column))


def _h_extents(r, s: _State) -> None:
    s.extents[s.col(r.dims)] = (r.lo, r.hi)


def _draw_values(s: _State) -> None:
    """Text columns (unique or not) and unique columns, drawn whole."""
    n = len(s.rows)
    for name in sorted(s.text | s.unique):
        f = s.rec.by_name[name]
        count = _count_of(s.rec, name)
        alphabet = st.characters(codec="utf-8", exclude_characters="\x00" if name in s.nul_free else "")
        if count is not None:
            one = _sized(s.rec, f, count, True, alphabet if name in s.text else None)
        elif name in s.text:
            raise ValueError(f"{s.rec.name}.{name}: text in a fixed-size field is not drawn")
        else:
            one = field_strategy(f)
        vals = s.d(st.lists(one, min_size=n, max_size=n))
        if name in s.unique:
            vals = _distinct(vals, f, s.rec, count, name in s.text)
        for i, v in enumerate(vals):
            s.put(i, name, v)


def _distinct(vals: list, f: Field, rec, count: str | None, text: bool) -> list:
    """``vals`` with every repeat replaced by the next value its field allows that is not taken
    (by construction: a filter for uniqueness gives up on short drawn keys)."""
    from .constraints import holds
    seen: set = set()
    out = []
    if count is not None:
        lo, hi = _count_bounds(rec, count, True)
        chars = next((c.chars for c in f.valid if isinstance(c, Chars)), None)
        alphabet = (chars or "abcdefghijklmnopqrstuvwxyz0123456789").encode() if (chars or text) else bytes(range(256))
    for v in vals:
        if v in seen:
            if f.kind == "int":  # (the next one up, wrapping round)
                lo, top = f.int_bounds()
                v = next((x for x in itertools.chain(range(v + 1, top + 1), range(lo, v))
                          if x not in seen and all(holds(c, x) for c in f.valid)), None)
                if v is None:
                    raise ValueError(f"{rec.name}.{f.name}: {len(vals)} distinct values are more than it allows")
            elif count is not None:
                k = 0
                while v in seen or len(v) < lo:
                    k += 1
                    tail, m = b"", k
                    while m:
                        m, r = divmod(m - 1, len(alphabet))
                        tail = alphabet[r:r + 1] + tail
                    if len(tail) > hi:
                        raise ValueError(f"{rec.name}.{f.name}: {len(vals)} distinct values do not fit in {hi} bytes")
                    v = (vals[len(out)] if not text else _clip(vals[len(out)].decode(), hi - len(tail)))
                    v = v[:hi - len(tail)] + tail
            else:
                raise ValueError(f"{rec.name}.{f.name}: distinct values of {f.type_name} are not drawn")
        seen.add(v)
        out.append(v)
    return out


def _h_shape(r, s: _State) -> None:
    """NBytes and ShapeSize: a shape per row of small extents, a dtype that has an element size,
    and the length they make."""
    dims = s.col(r.dims)
    f = s.rec.by_name[dims]
    count = _count_of(s.rec, dims)
    rank = s.col(r.rank) if r.rank else None
    dt = s.col(r.dtype) if r.dtype else None
    codes = _field_choices(s.rec.by_name[dt], r.itemsize) if dt and dt in s.rec.by_name else \
        sorted(r.itemsize) if dt else None
    if dt in s.members:
        codes = [c for c in codes if c in s.members[dt]]
    if codes == []:
        raise ValueError(f"{type(r).__name__} over {r.dims}: no dtype its field allows has an element size")
    cap = r.max_rank if r.max_rank is not None else 4
    if count is not None:  # the extents are a list sized by a count field
        lo, hi = _count_bounds(s.rec, count, True)
        ranks = (lo, min(hi, cap, 4))
    elif f.kind == "array":  # fixed-width: the first `rank` count
        lo, hi = s.rec.by_name[rank].int_bounds() if rank else (f.subcon.count, f.subcon.count)
        for c in (s.rec.by_name[rank].valid if rank else ()):
            if isinstance(c, Range):
                lo, hi = max(lo, c.lo or 0), min(hi, c.hi) if c.hi is not None else hi
        ranks = (lo, min(hi, cap, f.subcon.count))
    else:
        raise ValueError(f"{type(r).__name__} over {r.dims}: a dims field of {f.type_name} is not drawn")
    if ranks[0] > ranks[1]:
        raise ValueError(f"{type(r).__name__} over {r.dims}: no rank both its field and the relation allow")
    when = getattr(r, "when", None)
    for i in range(len(s.rows)):
        k = s.d(st.integers(*ranks))
        ext = s.d(st.lists(s.extent_strategy(dims), min_size=k, max_size=k))
        if count is not None:
            s.put(i, dims, ext)
        else:
            s.put(i, dims, ext + list(s.get(i, dims))[k:])
        if rank and rank != count:
            s.put(i, rank, k)
        if dt:
            s.put(i, dt, s.d(st.sampled_from(codes)))
        if s.when(i, when):
            s.put(i, s.col(r.length), math.prod(ext) * (r.itemsize[s.get(i, dt)] if dt else 1))


def _h_size(r, s: _State) -> None:
    name, count, dt = s.col(r.name), s.col(r.count), s.col(r.dtype)
    for i in range(len(s.rows)):
        s.put(i, name, s.get(i, count) * r.itemsize.get(s.get(i, dt), 0))


def _h_bound(r, s: _State) -> None:
    name = s.col(r.column)
    for i in range(len(s.rows)):
        if s.when(i, r.when):
            s.put(i, name, min(s.get(i, name), s.row_value(i, r.most)))


def _h_equal(r, s: _State) -> None:
    name = s.col(r.column)
    for i in range(len(s.rows)):
        if s.when(i, r.when):
            s.put(i, name, s.row_value(i, r.other))


def _h_zeroed(r, s: _State) -> None:
    s.late.append(r)
    _zero(r, s)


def _zero(r, s: _State) -> None:
    for i in range(len(s.rows)):
        if s.when(i, r.when):
            for c in r.columns:
                s.put(i, s.col(c), 0)


def _h_aligned(r, s: _State) -> None:
    if isinstance(r.n, str) and r.n.startswith(s.rec.name + "."):
        raise ValueError(f"Aligned {r.column}: an alignment per row ({r.n}) is not drawn")
    s.align.setdefault(s.col(r.column), []).append(r.n)


def _h_ordered(r, s: _State) -> None:
    s.ordered.append(r)


def _h_zeros(r, s: _State) -> None:
    """Zeros from the table's end: the bytes up to ``end`` are the file builder's zero padding;
    ``end`` comes at or after the table."""
    if r.start != f"{s.rec.name}.END":
        raise ValueError(f"Zeros from {r.start}: only padding after the drawn table is drawn")
    s.after.append(r.end)


def _h_region(r, s: _State) -> None:
    if s.rows:  # (the bounds of no row's bytes are left to the table whose rows need them)
        s.after += [x for x in (getattr(r, "lo", None), getattr(r, "start", None)) if isinstance(x, str)]
    pair = (s.col(r.offset), s.col(r.length))
    if s.region not in (None, pair):
        raise ValueError(f"{s.rec.name}: one region per row is drawn ({s.region} and {pair})")
    s.region = pair
    s.regions.append(r)


def _layout(s: _State) -> None:
    """The header terms the table needs (where it must end, the lower bounds of its rows' bytes)
    at or after its end and after every value an Ordered relation puts before them; the free
    terms an Ordered relation puts between fixed ones; then every row's region, in a random
    order, aligned, inside the bounds, disjoint, tiling when a Tiles relation asks for it;
    FILE_END after everything.  The terms of an Ordered chain from the first that is where
    another declared table starts or ends stay free (that table's draw fixes them: ``known=``)."""
    from schemas.dsl import FILE_END, Tiles

    def floor(term) -> int:
        lo = s.end()
        for r in s.ordered:
            if term in r.terms:
                lo = max([lo] + [s.known(t) for t in r.terms[:r.terms.index(term)] if s.known(t) is not None])
        return lo
    for t in s.after:
        if s.known(t) is None:
            s.free(t, floor(t))
        elif s.known(t) < s.end():
            raise ValueError(f"{s.rec.name} ends at {s.end()}, after {t} = {s.known(t)}")
    for r in s.ordered:
        lo = 0
        for t in r.terms:
            v = s.known(t)
            if t == FILE_END:
                continue
            if v is None and t in s.others:  # another table's start or end: its draw fixes it
                break
            if v is None:
                v = s.free(t, lo)
            elif v < lo:
                raise ValueError(f"Ordered {r.terms}: {t} = {v} is fixed before {lo}")
            lo = v
    for name, ns in s.align.items():  # plain columns (not a region's offset): rounded down
        if s.region and name == s.region[0]:
            continue
        for i in range(len(s.rows)):
            k = math.lcm(*[s.row_value(i, n) if s.known(n) is not None else s.free(n, 1) for n in ns])
            s.put(i, name, s.get(i, name) // k * k)
    if s.region is None or not s.rows:  # (no bytes after the last row where rows must tile)
        tiled = any(isinstance(r, Tiles) for r in s.regions)
        s.size = max([s.end(), *s.env.values()]) + (0 if tiled else s.d(st.integers(0, 16)))
        return
    off, ln = s.region
    steps = list(s.align.get(off, ()))
    if off in s.rec.by_name:
        steps += [c.n for c in s.rec.by_name[off].valid if isinstance(c, Multiple)]
    step = math.lcm(1, *[s.known(n) if s.known(n) is not None else s.free(n, 1) for n in steps])
    tiles = next((r for r in s.regions if isinstance(r, Tiles)), None)
    if tiles is not None and step > 1:
        raise ValueError(f"Tiles {tiles.offset}: rows aligned to {step} are not drawn to tile")
    # the rows' bytes come after the table (the file holds both): after every lower bound
    bound = lambda x: s.known(x) if s.known(x) is not None else s.free(x, s.end())
    pos = max([s.end()] + [bound(x) for r in s.regions for x in (getattr(r, "lo", None), getattr(r, "start", None))
                           if x is not None])
    if tiles is not None and pos != bound(tiles.start):
        raise ValueError(f"Tiles {tiles.offset}: rows cannot tile from {tiles.start} (they start at {pos})")
    for i in s.d(st.permutations(range(len(s.rows)))):
        pos = align_up(pos + (0 if tiles else s.d(st.integers(0, 16))), step)
        s.put(i, off, pos)
        pos += int(s.get(i, ln))
    s.size = max(pos, s.end(), *s.env.values()) + (0 if tiles else s.d(st.integers(0, 16)))
    for h in [x for r in s.regions for x in (getattr(r, "hi", None), getattr(r, "end", None)) if x is not None]:
        if h == FILE_END:
            continue
        v = s.known(h)
        if v is None:
            s.env[h] = pos if tiles else s.size
        elif v < pos:
            raise ValueError(f"{s.rec.name}: the regions end at {pos}, after {h} = {v}")


def _check_order(s: _State) -> None:
    """Every Ordered chain holds over the terms fixed by now (a draw that cannot keep one is a
    ValueError, never a table that breaks it)."""
    from schemas.dsl import FILE_END
    for r in s.ordered:
        vals = [s.size if t == FILE_END else s.known(t) for t in r.terms]
        vals = [v for v in vals if v is not None]
        if vals != sorted(vals):
            raise ValueError(f"Ordered {r.terms}: the values drawn, {vals}, are out of order")


#: relation kind name -> (phase, handler).  Phases: 0 field values (members, text and unique
#: columns, extent bounds), 1 shapes and the lengths they make (a dtype among the members too),
#: 2 derived sizes, 3 per-row rules under conditions (cleared flags, bounds, equalities, zeroed
#: columns: once the columns their conditions read are final), 4 the layout (order, alignment,
#: regions).  Kinds are looked up by name,
#: so a kind renamed or merged in schemas.dsl needs only its entry here.
_KINDS = {
    "Member": (0, _h_member), "Utf8": (0, _h_text), "Text": (0, _h_text),
    "Unique": (0, _h_unique), "Extents": (0, _h_extents),
    "NBytes": (1, _h_shape), "ShapeSize": (1, _h_shape),
    "Size": (2, _h_size),
    "Clear": (3, _h_clear), "Bound": (3, _h_bound), "Equal": (3, _h_equal), "Zeroed": (3, _h_zeroed),
    "Aligned": (4, _h_aligned), "Ordered": (4, _h_ordered), "Zeros": (4, _h_zeros),
    "Region": (4, _h_region), "Within": (4, _h_region), "Disjoint": (4, _h_region), "Tiles": (4, _h_region),
}
#: kinds that hold by construction of a file that holds the drawn table (nothing to draw)
_HOLD = {"Fits", "Table", "Records"}


def record_tables(relations, record, *, at: int | None = None, header=None, known: dict | None = None,
                  max_rows: int = 6, max_extent: int = 4) -> st.SearchStrategy:
    """Tables of binary ``record`` rows (declared by a ``Table`` or ``Records`` of
    ``relations``) that satisfy, by construction, every field constraint of the record and every
    relation of ``relations`` over it (a strategy of :class:`DrawnRecords`).  ``at`` is where
    the table starts (default: the declaration's, when it is a constant); ``header`` the header
    record whose fields the relations name (their own constraints hold for the values drawn).
    A relation over the table of a kind not drawn here is a ValueError naming the kind."""
    from schemas.dsl import DeclaresSize
    rec = record_of(record)
    decl = next((r for r in relations if type(r).__name__ in ("Table", "Records") and r.record is record), None)
    if decl is None:
        raise ValueError(f"{rec.name}: no Table or Records declares it")
    if at is None:
        if not isinstance(decl.at, int):
            raise ValueError(f"{rec.name} starts at {decl.at}: give at=")
        at = decl.at
    mine = [r for r in relations if r is not decl and type(r).__name__ not in _HOLD
            and any(t.partition(".")[0] == rec.name for t in _names(r))]
    for r in mine:
        if type(r).__name__ not in _KINDS:
            raise ValueError(f"no record-table strategy for {type(r).__name__} over {rec.name} "
                             f"(rule {getattr(r, 'rule', '?')})")
    hrec = record_of(header) if header is not None else None
    cnt_lo, cnt_hi = 0, max_rows
    if hrec is not None and decl.count in hrec.by_name:
        for c in hrec.by_name[decl.count].valid:
            if isinstance(c, Range):
                cnt_lo, cnt_hi = max(cnt_lo, c.lo or 0), min(cnt_hi, c.hi) if c.hi is not None else cnt_hi
    size_field = next((r.field for r in relations if isinstance(r, DeclaresSize)), None)

    @st.composite
    def draw(d):
        n = d(st.integers(cnt_lo, max(cnt_lo, cnt_hi)))
        t = DrawnRecords(rec, decl.path, at, d(st.lists(records(record), min_size=n, max_size=n)), {}, {}, {}, 0,
                         None)
        s = _State(d, t, hrec, max_extent)
        if hrec is not None:
            s.env.update({f"{hrec.name}.{k}": v for k, v in (known or {}).items()})
        if isinstance(decl.at, str):
            s.env[decl.at] = at
        if isinstance(getattr(decl, "end", None), str):
            s.after.append(decl.end)
        s.others = {x for r in relations if type(r).__name__ in ("Table", "Records") and r is not decl
                    for x in (r.at, getattr(r, "end", None)) if isinstance(x, str)}
        for phase in range(5):
            for r in mine:
                if _KINDS[type(r).__name__][0] == phase:
                    _KINDS[type(r).__name__][1](r, s)
            if phase == 0:
                _draw_values(s)
        _layout(s)
        for r in s.late:
            _zero(r, s)
        _check_order(s)
        t.header[decl.count] = n
        if hrec is not None:
            t.header.update({k.partition(".")[2]: v for k, v in s.env.items() if k.startswith(hrec.name + ".")
                             and k.partition(".")[2] not in (known or {})})
            if size_field is not None:
                t.header[size_field] = s.size
        t.values.update({k[1:]: v for k, v in s.env.items() if k.startswith("$")})
        t.size, t.region_cols = s.size, s.region
        return t
    return draw()
