"""What a declared constraint means, wherever it is evaluated.

The constraint objects of :mod:`schemas.dsl` (Eq, Zero, OneOf, Range, Multiple, KnownFlags,
Chars) are pure declarations; this module gives them their one meaning:

* :func:`describe` -- how docs, error messages and the generated C++ header say it;
* :func:`error_class` -- the typed error a violation raises (:mod:`codec.errors`);
* :func:`holds` on one value, :func:`column_holds` on a whole numpy column (vectorised);
* :func:`violation` -- the error of one value that breaks it (rule id, offset, field path);
* :class:`RecordChecks` -- the checks of a declared record (one record, many parsed records,
  a numpy table of fixed-size records), the base of :class:`codec.engine.records.Record`.

Nothing in here knows any particular format.
"""
from __future__ import annotations

import operator
from functools import cached_property, lru_cache, partial
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..schemas.dsl import Chars, Eq, KnownFlags, Multiple, OneOf, Range, Zero

from .. import errors as E

if TYPE_CHECKING:
    from .records import Field

#: how many violations of one rule on one table column are reported individually
MAX_PER_RULE = 20


def describe(c) -> str:
    """Human text of one constraint (docs, error messages)."""
    if isinstance(c, Eq):
        v = c.value
        return f"= {v!r}" if isinstance(v, bytes) else f"= {v}"
    if isinstance(c, Zero):
        return "zero (reserved)"
    if isinstance(c, OneOf):
        ch = c.choices
        if isinstance(ch, type):
            return "one of " + ch.__name__
        return "one of " + ", ".join(map(str, ch))
    if isinstance(c, Range):
        if c.limit:
            return f"<= {c.limit} ({c.hi})" if c.lo in (None, 0) else f"{c.lo}..{c.limit} ({c.hi})"
        if c.lo is not None and c.hi is not None:
            return f"{c.lo}..{'2^64-1' if c.hi == 2**64 - 1 else c.hi}"
        return f">= {c.lo}" if c.lo is not None else f"<= {c.hi}"
    if isinstance(c, Multiple):
        return f"a multiple of {c.n}"
    if isinstance(c, KnownFlags):
        return f"only {c.flags.__name__} bits (mask 0x{c.mask():x})"
    if isinstance(c, Chars):
        return f"chars {c.label or repr(c.chars)}"
    return repr(c)


def error_class(c) -> type[E.FormatError]:
    if isinstance(c, Eq):
        return {"magic": E.MagicError, "version": E.UnsupportedVersionError}.get(c.kind, E.ConstraintError)
    if isinstance(c, (Zero, KnownFlags)):
        return E.ReservedError
    if isinstance(c, OneOf):
        return E.EnumError
    if isinstance(c, Range):
        return E.LimitError if c.limit else E.RangeError
    if isinstance(c, Multiple):
        return E.AlignmentError
    return E.ConstraintError


@lru_cache(maxsize=None)
def _mask(c: KnownFlags) -> int:
    return c.mask()


def _zero(v) -> bool:
    return not any(v) if isinstance(v, (bytes, bytearray, memoryview)) else v == 0


@lru_cache(maxsize=None)
def predicate(c) -> Callable[[object], bool]:
    """:func:`holds` for one constraint, as a function of the value built once per constraint
    (records are checked by the thousand)."""
    if isinstance(c, Eq):
        return partial(operator.eq, c.value)
    if isinstance(c, Zero):
        return _zero
    if isinstance(c, OneOf):
        return frozenset(_choices(c)).__contains__
    if isinstance(c, Range):
        lo, hi = c.lo, c.hi
        if lo is None:
            return (lambda v: True) if hi is None else partial(operator.ge, hi)  # hi >= v
        return partial(operator.le, lo) if hi is None else (lambda v: lo <= v <= hi)  # lo <= v
    if isinstance(c, Multiple):
        n = c.n
        return lambda v: v % n == 0
    if isinstance(c, KnownFlags):
        unknown = ~_mask(c)
        return lambda v: v & unknown == 0
    if isinstance(c, Chars):
        allowed = c.chars.encode("ascii")

        def chars(v) -> bool:
            try:
                return not bytes(v).translate(None, allowed)
            except TypeError:
                return False
        return chars
    raise TypeError(c)


def holds(c, v) -> bool:
    """Does the scalar value ``v`` satisfy constraint ``c``?"""
    return predicate(c)(v)


def _show(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        return repr(bytes(v)) if len(v) <= 16 else f"{bytes(v[:16])!r}..."
    if isinstance(v, np.ndarray):
        return _show(v.tobytes())
    return str(v)


@lru_cache(maxsize=None)
def _requirement(c) -> tuple[str, type[E.FormatError]]:
    """What a violation of ``c`` says before the value it got, and its error class (a hostile
    table breaks one constraint in many rows: worked out once per constraint)."""
    want = describe(c)
    msg = f"must be {want[2:] if want.startswith('= ') else want}"
    if isinstance(c, Eq) and c.kind == "version":
        msg = "unsupported version: " + msg
    return msg, error_class(c)


def violation(fmt: str, c, value, offset: int | None, path: str) -> E.FormatError:
    msg, cls = _requirement(c)
    return cls(fmt, offset, path, c.rule, f"{msg} (got {_show(value)})")


@lru_cache(maxsize=None)
def _byte_members(values: tuple, dtype: str) -> np.ndarray:
    """For a one-byte column type: which of the 256 bytes are one of ``values``."""
    ok = np.zeros(256, dtype=bool)
    lo, hi = (-128, 127) if np.dtype(dtype).kind == "i" else (0, 255)
    ok[[v & 0xFF for v in values if lo <= v <= hi]] = True
    return ok


def _choices(c: OneOf) -> tuple:
    """``c.values()``, computed once per declaration (choices in a list: each time)."""
    try:
        return _cached_choices(c)
    except TypeError:
        return c.values()


@lru_cache(maxsize=None)
def _cached_choices(c: OneOf) -> tuple:
    return c.values()


@lru_cache(maxsize=None)
def _small_members(values: tuple) -> np.ndarray | None:
    """Which of 0..max(values) are one of ``values`` (small non-negative codes), else None."""
    if not values or min(values) < 0 or max(values) > 4095:
        return None
    ok = np.zeros(max(values) + 1, dtype=bool)
    ok[list(values)] = True
    return ok


@lru_cache(maxsize=None)
def _int_limits(dtype: np.dtype) -> np.iinfo:
    return np.iinfo(dtype)


def column_holds(c, col: np.ndarray, f: Field | None = None) -> np.ndarray:
    """Boolean mask: which entries of a numpy column satisfy ``c``."""
    if col.ndim == 2:  # bytes field: u1 subarray per record
        if isinstance(c, Zero):
            return ~col.any(axis=1)
        if isinstance(c, Eq):
            return (col == np.frombuffer(c.value, dtype=np.uint8)).all(axis=1)
        raise TypeError(f"constraint {c!r} on a bytes column")
    if isinstance(c, Eq):
        return col == c.value
    if isinstance(c, Zero):
        return col == 0
    if isinstance(c, OneOf):
        values = _choices(c)
        if col.dtype.itemsize == 1:  # (a byte: one lookup, far cheaper than isin on small tables)
            return _byte_members(values, col.dtype.str)[col.view(np.uint8)]
        table = _small_members(values)
        if table is not None and col.dtype.kind in "iu":  # (small codes: one lookup too)
            inside = (col >= 0) & (col < len(table)) if col.dtype.kind == "i" else col < len(table)
            return table[np.where(inside, col, 0)] & inside
        if len(values) <= 16:  # (a few large codes: compared one by one, far cheaper than isin's sort)
            hit = np.zeros(col.shape, dtype=bool)
            for v in values:
                hit |= col == v
            return hit
        return np.isin(col, np.array(values, dtype=col.dtype))
    if isinstance(c, Range):
        ok = np.ones(col.shape, dtype=bool)
        info = _int_limits(col.dtype) if col.dtype.kind in "iu" else None
        if c.lo is not None and (info is None or c.lo > info.min):
            ok &= col >= c.lo
        if c.hi is not None and (info is None or c.hi < info.max):
            ok &= col <= c.hi
        return ok
    if isinstance(c, Multiple):
        return col % col.dtype.type(c.n) == 0
    if isinstance(c, KnownFlags):
        inv = (~c.mask()) & ((1 << (8 * col.dtype.itemsize)) - 1)
        return (col & col.dtype.type(inv)) == 0
    raise TypeError(c)


class RecordChecks:
    """The declared constraints of a record, evaluated: the base class of
    :class:`codec.engine.records.Record`, whose ``fields``, ``format``, ``name``, ``size`` and
    ``field_offsets`` these checks use."""

    def check(self, rec: dict, offset: int = 0, path: str | None = None) -> list[E.FormatError]:
        """Every violated constraint of one parsed record."""
        names, oks = self._flat
        if all(map(operator.call, oks, map(rec.get, names))):  # (the common case: nothing to report)
            return []
        path = path or self.name
        out = []
        offs = None
        for name, checks in self._checks:
            v = rec.get(name)
            for c, ok in checks:
                if not ok(v):
                    if offs is None:
                        offs = self.field_offsets(rec)
                    out.append(violation(self.format, c, v, offset + offs[name], f"{path}.{name}"))
        return out

    @cached_property
    def _checks(self) -> tuple:
        """(field name, ((constraint, its predicate), ...)) of each constrained field."""
        return tuple((f.name, tuple((c, predicate(c)) for c in f.valid)) for f in self.fields if f.valid)

    @cached_property
    def _flat(self) -> tuple[tuple, tuple]:
        """(field name, predicate) of every constraint, as two parallel tuples (one pass in C)."""
        pairs = [(name, ok) for name, checks in self._checks for _, ok in checks]
        return tuple(n for n, _ in pairs), tuple(ok for _, ok in pairs)

    def check_rows(self, rows: list[tuple[int, dict]], path: str) -> list[E.FormatError]:
        """Every violated constraint of many parsed records ``(offset, record)``: each
        constrained scalar field is checked as one numpy column; only the records of a failing
        column go through the exact per-record :meth:`check` (same errors, same order)."""
        if len(rows) < 32:
            return [e for i, (off, r) in enumerate(rows) for e in self.check(r, off, f"{path}[{i}]")]
        suspects: set[int] = set()
        for f in self.fields:
            if not f.valid:
                continue
            col = [r[f.name] for _, r in rows]
            try:
                if f.kind == "int":
                    arr = np.array(col, dtype=np.int64 if f.int_bounds()[0] < 0 else np.uint64)
                    ok = np.ones(len(col), dtype=bool)
                    for c in f.valid:
                        ok &= column_holds(c, arr, f)
                    suspects.update(np.flatnonzero(~ok).tolist())
                    continue
            except (OverflowError, TypeError, ValueError):
                pass
            for i, v in enumerate(col):  # bytes, chars, padding: per value, still no record walk
                if not all(holds(c, v) for c in f.valid):
                    suspects.add(i)
        out = []
        for i in sorted(suspects):
            off, r = rows[i]
            out.extend(self.check(r, off, f"{path}[{i}]"))
        return out

    def check_table(self, arr: np.ndarray, base_offset: int, path: str) -> list[E.FormatError]:
        """Vectorised constraint check over a whole table of records."""
        out = []
        for f in self.fields:
            if not f.valid:
                continue
            col = arr[f.name]
            for c in f.valid:
                bad = ~column_holds(c, col, f)
                if not bad.any():
                    continue
                idx = np.flatnonzero(bad)
                for i in idx[:MAX_PER_RULE]:
                    i = int(i)
                    v = col[i]
                    v = bytes(v) if f.kind == "bytes" else int(v) if f.kind == "int" else float(v)
                    out.append(violation(self.format, c, v, base_offset + i * self.size + f.offset,
                                         f"{path}[{i}].{f.name}"))
                if len(idx) > MAX_PER_RULE:
                    first = out[-1]
                    out.append(type(first)(self.format, None, f"{path}[].{f.name}", c.rule,
                                           f"{len(idx) - MAX_PER_RULE} more entries break this rule"))
        return out

