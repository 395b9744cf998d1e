"""The small vocabulary every schema module is written in.

Pure declarations: construct objects, constraint values and payload shapes. Nothing here reads
a file or checks a value; the engine in ``codec`` interprets these declarations to parse,
build, validate, document and generate test data.

A binary record is a construct ``Struct`` built with :func:`record` from :func:`field` entries.
Each field may carry constraints (:class:`Eq`, :class:`Zero`, :class:`OneOf`, :class:`Range`,
:class:`Multiple`, :class:`KnownFlags`); each constraint names the rule id that errors, docs
and tests use.  construct itself is never trusted to check bytes (``Padding``/``Enum`` accept
anything), so reserved bytes are plain ``Bytes`` with a :class:`Zero` constraint and enums are
plain integers with :class:`OneOf`.

Structured payloads that are not binary records (msgpack maps, JSON documents) are declared
with :class:`Map`, :class:`Key`, :class:`ListOf`, :class:`Int`, :class:`Str`, :class:`Bin`,
:class:`Any` so the same engine checks them and reports field paths.
"""
from __future__ import annotations

import enum
from functools import cached_property
from dataclasses import dataclass, field as _dc_field
from typing import Any as _Any

import construct as cs

__all__ = [
    "RuleId", "Checksum", "Chars", "Eq", "Zero", "OneOf", "Range", "Multiple", "KnownFlags",
    "field", "record", "constraints_of",
    "Int", "Str", "Bin", "Bool", "AnyValue", "ListOf", "Map", "MapOf", "Key", "ElementTypes",
]


# --------------------------------------------------------------------------- constraints
@dataclass(frozen=True)
class Eq:
    """The field must equal ``value`` (magic numbers, versions, fixed sizes).  ``kind`` says
    what a mismatch means: "magic", "version" or "" (a plain constraint)."""
    value: _Any
    rule: str
    kind: str = ""


@dataclass(frozen=True)
class Zero:
    """Reserved: every byte of the field must be zero."""
    rule: str


@dataclass(frozen=True)
class OneOf:
    """The value must be a member of ``choices`` (an ``enum.IntEnum`` or a tuple)."""
    choices: _Any
    rule: str

    def values(self) -> tuple:
        if isinstance(self.choices, type) and issubclass(self.choices, enum.Enum):
            return tuple(int(m.value) for m in self.choices)
        return tuple(self.choices)


@dataclass(frozen=True)
class Range:
    """``lo <= value <= hi`` (either bound may be None).  ``limit`` names the constant of a
    declared limit (``MAX_ENTRY_COUNT``) so docs and errors say which cap was hit."""
    lo: _Any = None
    hi: _Any = None
    rule: str = ""
    limit: str | None = None


@dataclass(frozen=True)
class Multiple:
    """The value (an absolute file offset) must be a multiple of ``n``."""
    n: int
    rule: str


@dataclass(frozen=True)
class Chars:
    """Every byte of a bytes field is one of ``chars`` (``label`` is how docs show the set)."""
    chars: str
    rule: str
    label: str = ""


@dataclass(frozen=True)
class KnownFlags:
    """Only bits of the ``enum.IntFlag`` ``flags`` may be set."""
    flags: type
    rule: str

    def mask(self) -> int:
        m = 0
        for f in self.flags:
            m |= int(f.value)
        return m


Constraint = (Eq, Zero, OneOf, Range, Multiple, KnownFlags, Chars)


class RuleId(enum.StrEnum):
    """Base of each format's ``Rule`` enum: ``NAME = "FMT-RULE", "what it requires"``.
    Members are plain strings (the id) with a ``doc`` attribute."""

    def __new__(cls, value: str, doc: str = ""):
        obj = str.__new__(cls, value)
        obj._value_ = value
        obj.doc = doc
        return obj


# --------------------------------------------------------------------------- binary records
def field(name: str, subcon: cs.Construct, doc: str = "", *valid) -> cs.Renamed:
    """A named record field with its description and constraints."""
    for v in valid:
        if not isinstance(v, Constraint):
            raise TypeError(f"field {name!r}: {v!r} is not a constraint")
    r = cs.Renamed(subcon, newname=name, newdocs=doc)
    r.mc_valid = tuple(valid)
    return r


def constraints_of(subcon: cs.Construct) -> tuple:
    return getattr(subcon, "mc_valid", ())


def record(name: str, *fields: cs.Renamed, fmt: str, size: int | None = None, doc: str = "") -> cs.Struct:
    """A binary record.  ``size`` asserts, at import, the spec's size of a fixed record."""
    st = cs.Struct(*fields)
    st.mc_name = name
    st.mc_format = fmt
    st.mc_doc = doc
    if size is not None:
        got = st.sizeof()
        if got != size:
            raise AssertionError(f"{fmt} {name}: declared {got} bytes, spec says {size}")
    return st


@dataclass(frozen=True)
class Checksum:
    """A checksum stored in ``record.field``, computed with ``algorithm`` over the bytes
    [start, end); ``end`` names a position the format module knows (e.g. "end of records")."""
    record: _Any
    field: str
    algorithm: str
    start: int
    end: str
    rule: str


# --------------------------------------------------------------------------- structured payloads
@dataclass(frozen=True)
class Int:
    """An integer (msgpack int; bool is not an int here)."""
    valid: tuple = ()


@dataclass(frozen=True)
class Str:
    """A text string.  ``charset``: the only characters allowed (checked vectorised over whole
    columns); ``pattern``: a regular expression the whole string must match; ``one_of``: the
    only values allowed (names of a closed set, e.g. element types: an EnumError otherwise)."""
    min_len: int = 0
    max_len: int | None = None
    pattern: str | None = None
    pattern_doc: str = ""
    rule: str = ""
    charset: str | None = None
    one_of: tuple | None = None


@dataclass(frozen=True)
class Bin:
    """A byte string, optionally of an exact length."""
    length: int | None = None
    rule: str = ""


@dataclass(frozen=True)
class Bool:
    pass


@dataclass(frozen=True)
class AnyValue:
    """Anything (opaque, passed through)."""
    map_only: bool = False


@dataclass(frozen=True)
class ListOf:
    """A list of ``item``: ``min_len``..``max_len`` items; ``ascending``: each item >= the one
    before (a range's ``[begin, end]``: a StructureError otherwise)."""
    item: _Any
    min_len: int = 0
    max_len: int | None = None
    rule: str = ""
    ascending: bool = False


@dataclass(frozen=True)
class Key:
    name: str
    type: _Any
    required: bool = True
    doc: str = ""


@dataclass(frozen=True)
class Map:
    """A map with declared keys.  Unknown keys are tolerated (forward compatibility)."""
    name: str
    keys: tuple = _dc_field(default_factory=tuple)
    rule: str = ""
    doc: str = ""

    def __init__(self, name: str, *keys: Key, rule: str = "", doc: str = ""):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "keys", tuple(keys))
        object.__setattr__(self, "rule", rule)
        object.__setattr__(self, "doc", doc)


@dataclass(frozen=True)
class MapOf:
    """A map of any text keys, each to a value of ``value`` (a free-form object, e.g. text ->
    text metadata)."""
    name: str
    value: _Any
    rule: str = ""
    doc: str = ""


# --------------------------------------------------------------------------- element types
@dataclass(frozen=True, eq=False)
class ElementTypes:
    """A format's element types, declared once: ``{code: (name, array type, size in bytes)}``.
    ``name`` is the format's own name for the type (what docs and errors print); ``array type``
    is the numpy / ml_dtypes type name of the array a reader returns ("" for opaque bytes that
    have no array type, e.g. packed quantized blocks); ``size`` is the element size the spec
    gives.  The size and name tables the relations use (``itemsize``, ``names``) and the
    engine's numpy dtypes (``codec.engine.dtypes``) are derived from this one table."""
    table: _Any

    def __post_init__(self):
        for code, entry in self.table.items():
            if len(entry) != 3 or not isinstance(entry[0], str) or not isinstance(entry[2], int) or entry[2] < 1:
                raise TypeError(f"element type {code!r}: {entry!r} is not (name, array type, size)")
        names = [e[0] for e in self.table.values()]
        if len(set(names)) != len(names):
            raise TypeError("element type names must be unique")

    @cached_property
    def itemsize(self) -> dict:
        """code -> element size in bytes."""
        return {c: e[2] for c, e in self.table.items()}

    @cached_property
    def names(self) -> dict:
        """code -> the format's name of the type."""
        return {c: e[0] for c, e in self.table.items()}

    @cached_property
    def codes(self) -> dict:
        """the format's name of the type -> code."""
        return {e[0]: c for c, e in self.table.items()}

    def arrays(self) -> dict:
        """code -> (array type name, size) of every type that has an array type."""
        return {c: (e[1], e[2]) for c, e in self.table.items() if e[1]}


# --------------------------------------------------------------------------- relations
from . import dsl_relations as _relations  # noqa: E402  (the vocabulary's second half)
from .dsl_relations import *  # noqa: E402,F401,F403

__all__ += _relations.__all__
