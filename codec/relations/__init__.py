"""Relations between fields, evaluated from their declarations (``schemas.dsl``: Table,
DeclaresSize, Ordered, Region, Unique, NBytes) over one file's header and tables.

Format-blind: a reader builds a :class:`Context` (the header it parsed, the tables it viewed,
the file's size), then :func:`check` evaluates every relation its schema declares, vectorised
over whole columns -- Python runs per row only for the rows that break a rule -- and returns the
findings (typed errors with the absolute offset of the field, its path, the rule id and the
two values compared as ``expected`` / ``actual``) and, per table, the rows that cannot be read.
"""
from __future__ import annotations

from schemas.dsl import (Aligned, Bound, Clear, DeclaresSize, Disjoint, Equal, Extents, Fits, Known, Member,
                         NBytes, Ordered, Present, Records, RefersTo, Region, Size, Table, Text, Tiles, Unique,
                         Zeroed, Zeros)

from .context import LIMIT, Context, Findings, by_row
from .describe import describe_relation
from .layout import _declares_size, _disjoint, _fits, _ordered, _records, _region, _size, _tiles, _zeros
from .rows import (_aligned, _extents, _member, _nbytes, _presence, _refers_to, _row_rule, _text, _unique,
                   _zeroed)

__all__ = ["LIMIT", "Context", "Findings", "by_row", "check", "describe_relation"]


_MORE = {Zeroed: _zeroed, Extents: _extents, Present: _presence, Known: _presence, Text: _text}


def check(relations, ctx: Context, buf) -> Findings:
    """Evaluate ``relations`` in order over ``buf``; a :class:`Table` is opened (a zero-copy
    view in ``ctx.tables``) where it is declared, and one that does not fit ends the check."""
    out = Findings()
    for r in relations:
        if isinstance(r, Table):
            _, err = ctx.open_table(r, buf)
            if err is not None:
                out.errors.append(err)
                out.stopped = True
                return out
        elif isinstance(r, Records):
            if not _records(r, ctx, buf, out):
                out.stopped = True
                return out
        elif isinstance(r, Fits):
            if not _fits(r, ctx, out):
                out.stopped = True
                return out
        elif isinstance(r, DeclaresSize):
            _declares_size(r, ctx, out)
        elif isinstance(r, Size):
            _size(r, ctx)
        elif isinstance(r, Disjoint):
            _disjoint(r, ctx, out)
        elif isinstance(r, RefersTo):
            _refers_to(r, ctx, out)
        elif isinstance(r, Tiles):
            _tiles(r, ctx, out)
        elif isinstance(r, Aligned):
            _aligned(r, ctx, out)
        elif isinstance(r, Ordered):
            if not _ordered(r, ctx, out) and r.fatal:
                out.stopped = True
                return out
        elif isinstance(r, Zeros):
            _zeros(r, ctx, buf, out)
        elif isinstance(r, Region):
            _region(r, ctx, out)
        elif isinstance(r, Unique):
            _unique(r, ctx, out)
        elif isinstance(r, NBytes):
            _nbytes(r, ctx, out)
        elif isinstance(r, (Bound, Equal, Clear)):
            _row_rule(r, ctx, out)
        elif isinstance(r, Member):
            _member(r, ctx, out)
        elif type(r) in _MORE:
            _MORE[type(r)](r, ctx, out)
        else:
            raise TypeError(f"not a relation: {r!r}")
    return out
