"""The relations vocabulary: rules *between* fields, declared beside the records they relate
(``RELATIONS`` tuples in ``schemas/<fmt>.py``) and evaluated by ``codec.engine.relations`` over whole
tables -- where rows live, regions inside bounds, overlaps, tiling, sizes from shapes, unique
keys, references, per-row comparisons, and relations between the files of a multi-file model.
Re-exported by :mod:`schemas.dsl`, so schemas import everything from there."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any as _Any

# --------------------------------------------------------------------------- relations
# Rules between fields, declared beside the records they relate and evaluated by the engine
# (``codec.engine.relations``), vectorised over whole tables.  A *term* names a value:
#
# * ``"Header.data_offset"`` -- a field of the format's header record (one value);
# * ``"Descriptor.offset"``  -- a column of a table of records (one value per row);
# * ``"Descriptor.END"``     -- where that table ends (its start + rows x record size);
# * ``FILE_END``             -- the end of the bytes that exist: the file's length, or the
#   length a :class:`DeclaresSize` field gives when that is smaller;
# * ``"$name"``              -- a value the reader derives and names (``"$data_length"``);
# * an ``int``               -- a constant.

#: the end of the data (see above)
FILE_END = "FILE_END"


@dataclass(frozen=True)
class Table:
    """``count`` rows of ``record`` (a fixed-size record) from offset ``at`` (an int or a
    term): the table must lie inside the file (else the file cannot be read further).
    ``path`` is how findings name a row (``tensors[3].offset``)."""
    record: _Any
    count: str
    at: _Any
    path: str
    rule: str


@dataclass(frozen=True)
class Records:
    """``count`` variable-size records of ``record`` back to back from ``at`` (an int or a
    term, e.g. the end of the previous table): parsed by the engine one by one, bounded by the
    bytes that exist; the first that cannot be parsed ends the check."""
    record: _Any
    count: str
    at: _Any
    path: str
    #: the end of the section they must lie in (a term; default the end of the file), and the
    #: rule of a count that cannot fit in it
    end: _Any = None
    rule: str | None = None


@dataclass(frozen=True)
class Zeros:
    """The bytes of ``[start, end)`` (terms; nothing when end <= start) that no row's
    ``[offset, offset + length)`` covers are zero: padding between a table and the next section
    (no rows: the whole range), or before, between and after the rows of a table (every row
    counts, readable or not: its bytes are not padding).  One finding per gap, at its first
    non-zero byte, naming the row it precedes (``gap before <row>``), or ``tail`` for the bytes
    after the last row (default ``<start's table> padding``).  Only the bytes the reader holds
    are checked (``Context.covered``, a remote file); the others are counted in the context's
    value ``unchecked_padding``.
    (One kind for "these bytes are zero": it replaces ``Gaps``, which was this kind with rows;
    a range with no rows is the plain case, so the plainer name stays.)"""
    start: _Any
    end: _Any
    rule: str
    offset: str | None = None
    length: str | None = None
    tail: str | None = None


@dataclass(frozen=True)
class Fits:
    """Before anything is parsed: ``count`` records of each ``(count field, record)`` pair, at
    their smallest size, fit in the bytes after ``at`` (counts are bounded by the bytes that
    exist before anything is allocated for them)."""
    counts: tuple
    at: _Any
    rule: str


@dataclass(frozen=True)
class DeclaresSize:
    """The header field ``field`` gives the file's length: it must equal the bytes that exist.
    A file shorter than it says is truncated: regions past its end are consequences of that."""
    field: str
    rule: str


@dataclass(frozen=True)
class Ordered:
    """``terms[0] <= terms[1] <= ...`` (offsets in order, a field between two bounds; a term
    between two equal constants must equal them).  A finding names ``blame`` (default: the
    header field where the order first breaks); ``error`` is "bounds" or "structure" (the
    finding's class); ``fatal``: nothing after it can be checked."""
    terms: tuple
    rule: str
    blame: str | None = None
    error: str = "bounds"
    fatal: bool = False


@dataclass(frozen=True)
class Region:
    """For every row where ``when`` holds (a condition, or a tuple of conditions that must all
    hold; None: every row), rows already unreadable left out: the bytes ``[offset, offset +
    length)`` lie inside ``[lo, hi]``, computed without wrap-around.  A row that breaks it cannot
    be read; past ``hi`` (``FILE_END``, or ``hi_is_end``) and inside what the header declares,
    it is a TruncatedError: the file was cut.  Findings: without ``what``, an end past ``hi``
    breaks ``rule`` (naming the length) and a start before ``lo`` breaks ``rule_lo`` (naming the
    offset); with ``what`` (how a message names the bytes: "blob"), one finding per row naming
    the offset.  ``clear_of`` (an (offset, length) pair of terms): the bytes do not overlap that
    region of the same row either (an OverlapError under ``rule_lo`` or ``rule``, naming the
    offset; an empty region overlaps nothing).  The terms may be header fields: a region of one
    row.
    (One kind for "a row's bytes lie inside bounds": it replaces ``Within``, which was this kind
    with ``what`` and ``when``; "Region" is the name the C++ reader and the other formats use.)"""
    offset: str
    length: str
    rule: str
    hi: _Any = FILE_END
    lo: _Any = None
    rule_lo: str | None = None
    #: an empty row may start anywhere (it has no bytes to misplace)
    empty_anywhere: bool = False
    #: ``hi`` is where the file's bytes end (as FILE_END is): a row past it means the file was cut
    hi_is_end: bool = False
    #: ``lo`` is where a region ends (a table, the control region): a row starting before it
    #: overlaps that region (an OverlapError, not a BoundsError)
    lo_is_end: bool = False
    when: _Any = None
    what: str | None = None
    clear_of: _Any = None


@dataclass(frozen=True)
class Size:
    """A derived column ``name`` (a term, ``"TensorRecord.nbytes"``): ``count`` x element size
    of ``dtype`` (0 for a dtype not in ``itemsize``; its own constraint reports it)."""
    name: str
    count: str
    dtype: str
    itemsize: _Any


@dataclass(frozen=True)
class RefersTo:
    """Every value of ``column`` names an existing ``target`` (a region the reader knows, e.g.
    a chunk); the target's length becomes the derived column ``length_as``.  A row whose
    target does not exist is the finding, and cannot be read."""
    column: str
    target: str
    rule: str
    length_as: str


@dataclass(frozen=True)
class Disjoint:
    """No two readable rows' bytes ``[offset, offset + length)`` overlap (empty ones never do);
    the later of two (by offset) is the finding."""
    offset: str
    length: str
    rule: str


@dataclass(frozen=True)
class Aligned:
    """Every value of ``column`` is a multiple of ``n`` (an int or a term, e.g. an alignment
    the file declares, or a column: each row its own); a row that is not cannot be read.
    Without ``rule`` it is a condition (in a ``when``: the rows whose ``column`` is a multiple of
    ``n``, an int; a row whose offset its own alignment rule refuses is not checked further).
    (One kind for "a multiple of": it replaces the condition ``MultipleOf``.)"""
    column: str
    n: _Any
    rule: str | None = None


@dataclass(frozen=True)
class Tiles:
    """In offset order the rows' bytes ``[offset, offset + length)`` tile ``[start, end)``
    exactly: the first begins at ``start``, each where the previous ends, the last ends at
    ``end`` (no gap, no overlap, nothing after)."""
    offset: str
    length: str
    rule: str
    start: _Any = 0
    end: _Any = None


@dataclass(frozen=True)
class Unique:
    """No two rows have the same value in ``column`` (the later one is the finding, and cannot
    be read)."""
    column: str
    rule: str


@dataclass(frozen=True)
class NBytes:
    """``length == product(dims) x itemsize[dtype]`` for every row where ``when`` holds (a
    condition, or a tuple of conditions that must all hold; None: every row): ``dims`` is a
    column of extents (fixed-width, of which the first ``rank`` count, or one list per row),
    ``dtype`` and ``itemsize`` None for a plain element count.  A shape no array can have is a
    finding too (``rule_shape``, default ``rule``; a RangeError naming ``dims``; not for a plain
    element count).  Rows whose rank is over ``max_rank`` (their shape comes from elsewhere) or
    whose dtype is not in ``itemsize`` (a constraint of its own reports it) are not sized; with
    one list of extents per row they cannot be read.  ``names`` gives dtype names for messages.
    At most LIMIT findings; with a dtype and one list of extents per row every broken row cannot
    be read, otherwise the check stops at the cap (the rows after it are not examined).
    (One kind for "a length is the size of a shape": it replaces ``ShapeSize``, which was this
    kind over one list of extents per row with ``when``; "NBytes" is what the C++ reader and
    three formats already call it.)"""
    length: str
    dtype: str | None
    dims: str
    itemsize: _Any
    rule: str
    rank: str | None = None
    max_rank: int | None = None
    names: _Any = None
    #: the rule of a shape no array can have (default ``rule``)
    rule_shape: str | None = None
    when: _Any = None


# --- rules on each row, optionally only where a condition holds
@dataclass(frozen=True)
class In:
    """Condition: the row's ``column`` is one of ``values`` (e.g. a fourcc among some kinds)."""
    column: str
    values: tuple


@dataclass(frozen=True)
class Has:
    """Condition: the row's ``column`` has every bit of ``bits`` set."""
    column: str
    bits: int


@dataclass(frozen=True)
class Lacks:
    """Condition: the row's ``column`` has none of the bits of ``bits`` set."""
    column: str
    bits: int


@dataclass(frozen=True)
class Affine:
    """The value ``base + per x term`` (a budget that grows with a length)."""
    base: int
    per: int
    term: str


@dataclass(frozen=True)
class Bound:
    """For every row where ``when`` holds (None: every row): ``column <= most`` (an int, a
    term or an :class:`Affine`); a row over it cannot be read (a LimitError: a safety limit)."""
    column: str
    most: _Any
    rule: str
    when: _Any = None


@dataclass(frozen=True)
class Equal:
    """For every row where ``when`` holds: ``column == other`` (a term, an int or an
    :class:`Affine`); a row where it does not cannot be read (a StructureError)."""
    column: str
    other: _Any
    rule: str
    when: _Any = None


@dataclass(frozen=True)
class Clear:
    """For every row where ``when`` holds: none of the bits of ``bits`` is set in ``column``
    (a flag that kind of row never has); a row with one cannot be read (a ConstraintError)."""
    column: str
    bits: int
    rule: str
    when: _Any = None


@dataclass(frozen=True)
class Member:
    """Every row's ``column`` is one of ``values`` (a code the format knows); a row whose value
    is not cannot be read (an EnumError).  ``names``: value -> name, for messages."""
    column: str
    values: tuple
    rule: str
    names: _Any = None


# --------------------------------------------------------------------------- relations between files
@dataclass(frozen=True)
class Linked:
    """Files a document lists (a multi-file model's index): every entry at one of ``at`` (key
    paths into the document; ``[]`` steps into every item of a list) names a file by its
    ``path`` key.  That file exists and is a regular file (``rule_missing``); its size equals
    the entry's ``size`` key and its ``algorithm`` digest (hex) the entry's ``digest`` key,
    when the entry has them (``rule``; a file of another size is that one finding, its digest
    not compared)."""
    at: tuple
    path: str
    size: str | None
    digest: str | None
    algorithm: str
    rule_missing: str
    rule: str


@dataclass(frozen=True)
class Agrees:
    """A record listed in two files says the same in both: for every ``source`` record, the
    ``target`` record of the same ``key`` exists and has equal ``fields`` (hex text compared
    case-insensitively; a field the source record lacks is not compared)."""
    source: str
    target: str
    key: str
    fields: tuple
    rule: str


RELATION_KINDS = (Table, Records, Fits, Zeros, RefersTo, Tiles, Aligned, DeclaresSize, Ordered, Size, Region, Disjoint,
                  Unique, NBytes, Bound, Equal, Clear, Member, Linked, Agrees)


# --- rules of variable-size tables, appended
@dataclass(frozen=True)
class Zeroed:
    """For every row where ``when`` holds (a condition, or a tuple of conditions that must all
    hold): every column of ``columns`` is 0 (fields that kind of row does not use).  A row
    where one is not cannot be read: one StructureError naming ``blame`` (default the first
    column).  Rows already unreadable are checked too."""
    columns: tuple
    rule: str
    when: _Any = None
    blame: str | None = None


@dataclass(frozen=True)
class Extents:
    """Every extent of ``dims`` (one list per row, ``width`` bytes each) lies in ``[lo, hi]``:
    each one outside is a finding (a RangeError naming ``dims[k]``); a row with one cannot be
    read."""
    dims: str
    lo: int
    hi: int
    rule: str
    width: int = 8


RELATION_KINDS += (Zeroed, Extents)


@dataclass(frozen=True)
class Present:
    """Some row's ``column`` is ``value`` (the table holds a row of that kind, e.g. the chunk every
    reader needs); when none is, the finding names the table, at offset ``at`` (an int or a
    term).  ``what`` says in words what is missing."""
    column: str
    value: _Any
    rule: str
    at: _Any = None
    what: str = ""


@dataclass(frozen=True)
class Known:
    """(A warning.) Every row's ``column`` is one of ``values`` (a kind this version knows); a row
    whose value is not is reported as a warning -- readers skip it -- and stays readable.  Every
    such row is reported (no cap: each is a part of the file the reader leaves out)."""
    column: str
    values: tuple
    rule: str
    #: (not a field) findings of this kind are warnings
    warns = True


@dataclass(frozen=True)
class Text:
    """Every row's ``column`` (bytes; None for a row whose bytes are not there: its own rule
    reports it) is UTF-8 text: a row that is not is a finding (a DecodeError) and cannot be read.
    Without ``name`` (a key): the finding is at the first byte that does not decode, naming
    ``column``.  With ``name`` (a term): the rows are decoded into the derived column ``name``
    (bytes that are not UTF-8 replaced), the text must also be free of NUL, and the finding is
    at the start of the bytes, naming ``name``; every such row is reported.
    (One kind for "a bytes column is UTF-8 text": it replaces ``Utf8``, which was this kind
    without ``name``; "Text" is the better-known word and says what the bytes are.)"""
    column: str
    rule: str
    name: str | None = None


RELATION_KINDS += (Present, Known, Text)


__all__ = [
    "FILE_END", "RELATION_KINDS", "Table", "Records", "Zeros", "Fits", "DeclaresSize", "Ordered", "Region",
    "Size", "RefersTo", "Disjoint", "Aligned", "Tiles", "Unique", "NBytes", "In", "Has", "Lacks", "Affine",
    "Bound", "Equal", "Clear", "Member", "Linked", "Agrees", "Zeroed",
    "Extents", "Present", "Known", "Text",
]
