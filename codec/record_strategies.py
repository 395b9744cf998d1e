"""Hypothesis strategies for whole tables of binary records, derived from their declarations
(the records' own strategies are :mod:`codec.strategies`):

* ``record_tables(RELATIONS, record, at=, header=, known=)`` draws the rows of a table of binary
  records declared by a ``Table`` (fixed size) or ``Records`` (variable size) as a
  :class:`DrawnRecords`: every row a dict that satisfies the record's field constraints
  (from ``records``) and builds with the engine's record (``data()``), the header fields the
  relations tie to the table (its count, the section bounds it lies in, a ``DeclaresSize``
  file size), the derived columns, each row's data region and the file size.  Held by
  construction over the table, one small handler per kind (``_KINDS``):

  - values: Member (a declared code its field allows), Unique (distinct values: repeats
    replaced by the next one the field allows), Text (UTF-8 text; without NUL when it names a
    decoded column;
    unique too when declared so), Extents (every extent in its bounds);
  - shapes: NBytes (a small shape per row within the rank bounds of its field and
    the relation's ``max_rank``, a dtype that has an element size and that a Member over it
    allows, the length they make, where ``when`` holds), Size (the derived column);
  - per row, once the columns their conditions read are final: Clear (the bits cleared where
    ``when`` holds), Bound (clamped to its most), Equal (set to the other term), Zeroed (zero
    where ``when`` holds, before and after the layout);
  - layout: Ordered (free header terms drawn in order, aligned as their field must be; terms
    that are where another declared table starts or ends are left to that table's draw, which
    gets them as ``known=``), Zeros (a padding end at or after the table; the bytes are the file
    builder's zeros), Aligned (by a constant or a drawn term), Region, Disjoint, Tiles
    (each row's bytes, in a random order, after the table and every lower bound, aligned,
    non-overlapping, contiguous for Tiles; FILE_END after the last).

  Fits, Table and Records hold for a file that holds the drawn table.  A relation over the
  table of any other kind (RefersTo, Zeros between rows, Present, Known, Agrees, ...) is refused with a
  ValueError naming the kind, as is a combination a draw cannot keep (two regions per row, an
  alignment per row, an Ordered chain fixed out of order): nothing silently draws an invalid
  table.  Limits: rows of a rank over ``max_rank`` are not drawn (their shape lives elsewhere);
  the rows' bytes are placed after the table, so a table whose data section follows later
  tables is drawn with rows only once those are drawn (until then: ``max_rows=0``).
"""
from __future__ import annotations

import itertools
import math

from hypothesis import strategies as st

from schemas.dsl import Chars, Multiple, Range

from .engine import Field, record_of
from .strategies import _count_bounds, _clip, _sized, field_strategy, records
from .tensor_writer import align_up

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
        self.text: set = set()       # bytes columns that hold text (Text)
        self.nul_free: set = set()   # ... without NUL (Text)
        self.unique: set = set()
        self.members: dict = {}      # column -> the values a Member relation allows
        self.align: dict = {}        # column -> alignment (Aligned relations)
        self.region: tuple | None = None
        self.regions: list = []      # Region / Tiles / Disjoint relations (layout)
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
        """Does the condition (None, In, Has, Lacks, Aligned, or a tuple of them) hold for row i."""
        from schemas.dsl import Aligned, Has, In, Lacks
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
            if isinstance(c, Aligned) and v % c.n:
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
    if r.name is not None:  # (a decoded column: no NUL either)
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
    """NBytes: a shape per row of small extents, a dtype that has an element size,
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
    ``end`` comes at or after the table (zeros between the rows' bytes are not drawn)."""
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
    def bound(x) -> int:
        return s.known(x) if s.known(x) is not None else s.free(x, s.end())
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
    "Member": (0, _h_member), "Text": (0, _h_text),
    "Unique": (0, _h_unique), "Extents": (0, _h_extents),
    "NBytes": (1, _h_shape),
    "Size": (2, _h_size),
    "Clear": (3, _h_clear), "Bound": (3, _h_bound), "Equal": (3, _h_equal), "Zeroed": (3, _h_zeroed),
    "Aligned": (4, _h_aligned), "Ordered": (4, _h_ordered), "Zeros": (4, _h_zeros),
    "Region": (4, _h_region), "Disjoint": (4, _h_region), "Tiles": (4, _h_region),
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
        if type(r).__name__ not in _KINDS or (type(r).__name__ == "Zeros" and r.offset is not None):
            what = "Zeros between the rows" if type(r).__name__ == "Zeros" else type(r).__name__
            raise ValueError(f"no record-table strategy for {what} over {rec.name} (rule {getattr(r, 'rule', '?')})")
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
