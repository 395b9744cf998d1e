"""Hypothesis strategies for whole tables of binary records, derived from their declarations
(the records' own strategies are :mod:`codec.testing.strategies`):

* ``record_tables(RELATIONS, record, at=, header=, known=, derived=, contents=)`` draws the rows
  of a table of binary records declared by a ``Table`` (fixed size) or ``Records`` (variable
  size) as a :class:`DrawnRecords`: every row a dict that satisfies the record's field
  constraints (from ``records``) and builds with the engine's record (``data()``), the header
  fields the relations tie to the table (its count, the section bounds it lies in, a
  ``DeclaresSize`` file size), the derived columns, each row's data region and the file size.
  Held by construction over the table, one small handler per kind (``_KINDS``):

  - values: Member and Known (one of its values the field allows), Present (then one
    drawn row holds its value; the table has a row), Unique (distinct values: repeats replaced
    by the next one the field allows; over a column the reader derives, given as ``derived=``:
    a repeat gets a suffix on the row's contents), Text (UTF-8 text; without NUL when it names a
    decoded column; unique too when declared so), Extents (every extent in its bounds);
  - shapes: NBytes (a small shape per row within the rank bounds of its field and
    the relation's ``max_rank``, a dtype that has an element size and that a Member over it
    allows, the length they make, where ``when`` holds), Size (the derived column); region
    lengths no relation sets: at most ``max_length``;
  - per row: Clear (the bits cleared where ``when`` holds), then, once the columns their
    conditions read are final: Bound (clamped to its most, a constant or an Affine), Equal (set
    to the other term), Zeroed (zero where ``when`` holds, before and after the layout); then
    the caller's ``derived`` columns (functions of a row's fields and contents);
  - layout (:mod:`codec.testing.record_layout_strategies`): Ordered (free header terms drawn in order,
    aligned as their field must be; terms that are where another declared table starts or ends
    are left to that table's draw, which gets them as ``known=``), Zeros (a padding end at or
    after the table, or the gaps between the rows' bytes from their lower bound: the file
    builder's zeros), Aligned (by a constant or a drawn term), Region, Disjoint, Tiles (each
    row's bytes, in a random order, after the table and every lower bound, aligned,
    non-overlapping, contiguous for Tiles; FILE_END after the last); a second region per row
    whose bytes live in a space of their own (``contents=``: drawn as UTF-8 text without NUL,
    e.g. names) inside ``[lo, hi]`` bounds; ``$`` values the caller derives (``derived=``)
    computed once those are laid out, the others drawn free.

  Fits, Table and Records hold for a file that holds the drawn table.  A relation over the
  table of any other kind (RefersTo, Agrees, ...) is refused with a ValueError naming the kind,
  as is a combination a draw cannot keep (Zeros between the rows from elsewhere than their lower
  bound, a Unique over a derived column with no ``derived=``, Present over a unique column, two
  file regions per row, an alignment per row, an Ordered chain fixed out of order): nothing
  silently draws an invalid table.  Limits: rows of a rank over ``max_rank`` are not drawn (their
  shape lives elsewhere); the rows' bytes are placed after the table, so a table whose data
  section follows later tables is drawn with rows only once those are drawn (until then:
  ``max_rows=0``).
"""
from __future__ import annotations

import itertools
import math

from hypothesis import strategies as st

from ..schemas.dsl import FILE_END, Chars, Range

from . import record_layout_strategies as lay
from ..engine.records import Field, record_of
from ..engine.relations.plan import alignment
from .strategies import _clip, _count_bounds, _sized, field_strategy, records
from ..io.tensor_writer import align_up


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
        self.present: list = []      # Present relations (one row each holds its value)
        self.spaces: dict = {}       # (offset, length) whose bytes live in a space of their own -> its relations
        self.contents: dict = {}     # column -> (offset, length): the bytes drawn for that space
        self.hooks: dict = {}        # term -> the caller's function for a column or "$" value it derives
        self.unique_derived: set = set()
        self.free_lengths: set = set()  # region lengths no NBytes or Size sets (drawn small)
        self.max_length = 64

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
        if term in self.hooks and term.startswith("$"):  # (a value the caller derives from the fixed terms)
            v = self.env[term] = self.hooks[term](dict(self.env, **{f"{self.rec.name}.END": self.end()}))
            return v
        return None

    def row(self, i: int) -> dict:
        """Row ``i``: its fields and its derived columns."""
        return dict(self.rows[i], **{k: v[i] for k, v in self.derived.items()})

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
        from ..schemas.dsl import Aligned, Has, In, Lacks
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
            step = alignment((), term, records=(self.hrec.struct,))
        elif isinstance(term, str) and term.startswith("$"):
            step = self.d(st.sampled_from((1, 8, 64)))
        v = self.env[term] = align_up(lo + self.d(st.integers(0, 16)), step)
        return v

    def extent_strategy(self, dims: str) -> st.SearchStrategy:
        lo, hi = self.extents.get(dims, (0, None))
        return st.integers(lo, lo + self.max_extent if hi is None else min(hi, lo + self.max_extent))


def _field_choices(f: Field, values) -> list:
    """The values of ``values`` the field's own constraints allow."""
    from ..engine.constraints import holds
    return [v for v in sorted(values) if all(holds(c, v) for c in f.valid)]


# the handlers: one small entry per relation kind (the kinds' names may change: keep them small)
def _h_member(r, s: _State) -> None:
    """Member, Known: every row's value one of the relation's (and its field allows)."""
    name = s.col(r.column)
    ok = _field_choices(s.rec.by_name[name], r.values) if name in s.rec.by_name else sorted(r.values)
    if name in s.members:
        ok = [v for v in ok if v in s.members[name]]
    if not ok:
        raise ValueError(f"{type(r).__name__} over {r.column}: no value its field allows")
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
    name = s.col(r.column)
    (s.unique if name in s.rec.by_name else s.unique_derived).add(name)


def _h_present(r, s: _State) -> None:
    s.present.append(r)


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
    for col, (_, ln) in s.contents.items():  # (the bytes of another space: UTF-8 text without NUL)
        one = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8).map(str.encode)
        for i, v in enumerate(s.d(st.lists(one, min_size=n, max_size=n))):
            s.put(i, col, v)
            s.put(i, ln, len(v))
    for r in s.present:  # (one row, drawn, holds the value)
        name = s.col(r.column)
        if r.value not in s.members.get(name, (r.value,)):
            raise ValueError(f"Present {r.column}: {r.value!r} is not a value the other relations allow")
        s.put(s.d(st.integers(0, n - 1)), name, r.value)
    for name in sorted(s.free_lengths):  # (small, as their field allows)
        ok = _field_choices(s.rec.by_name[name], range(s.max_length + 1))
        for i in range(n):
            s.put(i, name, s.d(st.sampled_from(ok)))


def _derive(s: _State) -> None:
    """The columns the caller derives (``derived=``: a function of a row's fields and drawn
    contents), distinct where a Unique asks it: a row whose value repeats gets a suffix on its
    contents (as a repeated unique text does) until it does not."""
    for term, fn in s.hooks.items():
        if term.startswith("$"):
            continue
        name, seen, col = s.col(term), set(), []
        for i in range(len(s.rows)):
            v, base, k = fn(s.row(i)), {c: s.get(i, c) for c in s.contents}, 0
            while name in s.unique_derived and v in seen:
                k += 1
                if not s.contents or k > 10_000:
                    raise ValueError(f"Unique {term}: varying the contents does not make its values distinct")
                for c, (_, ln) in s.contents.items():
                    s.put(i, c, base[c] + _tail(k, b"abcdefghijklmnopqrstuvwxyz0123456789"))
                    s.put(i, ln, len(s.get(i, c)))
                v = fn(s.row(i))
            seen.add(v)
            col.append(v)
        s.derived[name] = col


def _tail(k: int, alphabet: bytes) -> bytes:
    """The k-th (k >= 1) string over ``alphabet`` (shortest first)."""
    tail = b""
    while k:
        k, r = divmod(k - 1, len(alphabet))
        tail = alphabet[r:r + 1] + tail
    return tail


def _distinct(vals: list, f: Field, rec, count: str | None, text: bool) -> list:
    """``vals`` with every repeat replaced by the next value its field allows that is not taken
    (by construction: a filter for uniqueness gives up on short drawn keys)."""
    from ..engine.constraints import holds
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
                    tail = _tail(k, alphabet)
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


#: relation kind name -> (phase, handler).  Phases: 0 field values (members and known values,
#: text and unique columns, extent bounds; then the drawn values, contents, Present rows and
#: small free lengths), 1 shapes and the lengths they make (a dtype among the members too),
#: 2 derived sizes, 3 cleared flags, 4 per-row rules under conditions (bounds, equalities, zeroed
#: columns: once the columns their conditions read are final; then the caller's derived
#: columns), 5 the layout (order, alignment, regions).  Kinds are looked up by name,
#: so a kind renamed or merged in schemas.dsl needs only its entry here.
_KINDS = {
    "Member": (0, _h_member), "Known": (0, _h_member), "Text": (0, _h_text), "Present": (0, _h_present),
    "Unique": (0, _h_unique), "Extents": (0, _h_extents),
    "NBytes": (1, _h_shape),
    "Size": (2, _h_size),
    "Clear": (3, _h_clear), "Bound": (4, _h_bound), "Equal": (4, _h_equal), "Zeroed": (4, _h_zeroed),
    "Aligned": (5, lay._h_aligned), "Ordered": (5, lay._h_ordered), "Zeros": (5, lay._h_zeros),
    "Region": (5, lay._h_region), "Disjoint": (5, lay._h_region), "Tiles": (5, lay._h_region),
}
#: kinds that hold by construction of a file that holds the drawn table (nothing to draw)
_HOLD = {"Fits", "Table", "Records"}


def _refusal(r, mine: list, rec, spaces: set, derived: dict) -> str | None:
    """Why a relation over the table cannot be drawn by construction (None: it can)."""
    kind = type(r).__name__
    if kind not in _KINDS:
        return kind
    def pair(x) -> tuple:
        return x.offset, x.length
    if kind == "Zeros" and r.offset is not None and not any(
            pair(g) == pair(r) and (r.start == getattr(g, "lo", None) or r.start == getattr(g, "start", None))
            and r.end in (FILE_END, getattr(g, "hi", None), getattr(g, "end", None))
            for g in mine if type(g).__name__ in ("Region", "Tiles") and pair(g) not in spaces):
        return f"Zeros between the rows from {r.start} (not a lower bound of their bytes)"
    if kind == "Unique" and r.column.partition(".")[2] not in rec.by_name and r.column not in derived:
        return f"Unique over {r.column}, a column the reader derives (give derived=)"
    if kind == "Present" and any(type(u).__name__ == "Unique" and u.column == r.column for u in mine):
        return f"Present over the unique column {r.column}"
    return None


def record_tables(relations, record, *, at: int | None = None, header=None, known: dict | None = None,
                  derived: dict | None = None, contents: dict | None = None, max_rows: int = 6,
                  max_extent: int = 4, max_length: int = 64) -> st.SearchStrategy:
    """Tables of binary ``record`` rows (declared by a ``Table`` or ``Records`` of
    ``relations``) that satisfy, by construction, every field constraint of the record and every
    relation of ``relations`` over it (a strategy of :class:`DrawnRecords`).  ``at`` is where
    the table starts (default: the declaration's, when it is a constant); ``header`` the header
    record whose fields the relations name (their own constraints hold for the values drawn);
    ``known`` header fields fixed already.  ``contents``: column -> (offset term, length term),
    rows whose bytes live in a space of their own (drawn as UTF-8 text without NUL, the column
    holds them); ``derived``: term -> how the reader derives it, a column (a function of the
    row's fields and contents) or a ``$`` value (a function of the terms fixed by then, once
    the contents are laid out).  Region lengths no relation sets are drawn up to ``max_length``.
    A relation over the table of a kind not drawn here is a ValueError naming the kind."""
    from ..schemas.dsl import DeclaresSize
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
    derived, contents = dict(derived or {}), dict(contents or {})
    spaces = set(map(tuple, contents.values()))
    for r in mine:
        why = _refusal(r, mine, rec, spaces, derived)
        if why is not None:
            raise ValueError(f"no record-table strategy for {why} over {rec.name} (rule {getattr(r, 'rule', '?')})")
    sets = {x.partition(".")[2] for r in mine for x in (getattr(r, "length", None) if type(r).__name__ == "NBytes"
                                                        else getattr(r, "name", None) if type(r).__name__ == "Size"
                                                        else None,) if x}
    free_lengths = {r.length.partition(".")[2] for r in mine if type(r).__name__ in ("Region", "Disjoint", "Tiles")
                    and (r.offset, r.length) not in spaces} - sets
    hrec = record_of(header) if header is not None else None
    cnt_lo, cnt_hi = 0, max_rows
    if hrec is not None and decl.count in hrec.by_name:
        for c in hrec.by_name[decl.count].valid:
            if isinstance(c, Range):
                cnt_lo, cnt_hi = max(cnt_lo, c.lo or 0), min(cnt_hi, c.hi) if c.hi is not None else cnt_hi
    if any(type(r).__name__ == "Present" for r in mine):  # (some row holds its value)
        cnt_lo = max(cnt_lo, 1)
    size_field = next((r.field for r in relations if isinstance(r, DeclaresSize)), None)

    @st.composite
    def draw(d):
        n = d(st.integers(cnt_lo, max(cnt_lo, cnt_hi)))
        t = DrawnRecords(rec, decl.path, at, d(st.lists(records(record), min_size=n, max_size=n)), {}, {}, {}, 0,
                         None)
        s = _State(d, t, hrec, max_extent)
        s.hooks, s.max_length, s.free_lengths = derived, max_length, free_lengths
        s.spaces = {(s.col(o), s.col(ln)): [] for o, ln in contents.values()}
        s.contents = {s.col(c): (s.col(o), s.col(ln)) for c, (o, ln) in contents.items()}
        if hrec is not None:
            s.env.update({f"{hrec.name}.{k}": v for k, v in (known or {}).items()})
        if isinstance(decl.at, str):
            s.env[decl.at] = at
        if isinstance(getattr(decl, "end", None), str):
            s.after.append(decl.end)
        s.others = {x for r in relations if type(r).__name__ in ("Table", "Records") and r is not decl
                    for x in (r.at, getattr(r, "end", None)) if isinstance(x, str)}
        for phase in range(6):
            if phase == 5:
                _derive(s)
            for r in mine:
                if _KINDS[type(r).__name__][0] == phase:
                    _KINDS[type(r).__name__][1](r, s)
            if phase == 0:
                _draw_values(s)
        lay._layout(s)
        for r in s.late:
            _zero(r, s)
        lay._check_order(s)
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
