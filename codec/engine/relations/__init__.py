"""Relations between fields, evaluated from their declarations (``schemas.dsl``: Table,
DeclaresSize, Ordered, Region, Unique, NBytes) over one file's header and tables.

Format-blind: a reader builds a :class:`Context` (the header it parsed, the tables it viewed,
the file's size), then :func:`check` evaluates every relation its schema declares, vectorised
over whole columns -- Python runs per row only for the rows that break a rule -- and returns the
findings (typed errors with the absolute offset of the field, its path, the rule id and the
two values compared as ``expected`` / ``actual``) and, per table, the rows that cannot be read.
"""
from __future__ import annotations

from ...schemas.dsl import Aligned, Bound, Clear, DeclaresSize, Disjoint, Equal, Extents, Fits, Known, Member, NBytes, Ordered, Present, Records, RefersTo, Region, Size, Table, Text, Tiles, Unique, Zeroed, Zeros

from .context import LIMIT, Context, Findings, by_row
from .describe import describe_relation
from .layout import _declares_size, _disjoint, _fits, _ordered, _records, _region, _size, _tiles, _zeros
from .rows import _aligned, _extents, _member, _nbytes, _presence, _refers_to, _row_rule, _text, _unique, _zeroed

__all__ = ["LIMIT", "Context", "Findings", "by_row", "check", "describe_relation"]


def _table(r: Table, ctx: Context, buf, out: Findings) -> bool:
    _, err = ctx.open_table(r, buf)
    if err is not None:
        out.errors.append(err)
    return err is None


def _on_rows(evaluate):
    """An evaluator of ``(relation, ctx, findings)``: one that does not read the buffer."""
    return lambda r, ctx, buf, out: evaluate(r, ctx, out)


#: relation kind -> its evaluator ``(relation, ctx, buf, findings)``; one that returns False
#: ends the check (a table that does not fit: nothing after it can be read)
_EVALUATE = {
    Table: _table,
    Records: _records,
    Fits: _on_rows(_fits),
    Ordered: lambda r, ctx, buf, out: _ordered(r, ctx, out) or not r.fatal,
    Size: lambda r, ctx, buf, out: _size(r, ctx),
    Zeros: _zeros,
    **{kind: _on_rows(f) for kind, f in (
        (DeclaresSize, _declares_size), (Disjoint, _disjoint), (RefersTo, _refers_to), (Tiles, _tiles),
        (Aligned, _aligned), (Region, _region), (Unique, _unique), (NBytes, _nbytes), (Bound, _row_rule),
        (Equal, _row_rule), (Clear, _row_rule), (Member, _member), (Zeroed, _zeroed), (Extents, _extents),
        (Present, _presence), (Known, _presence), (Text, _text))},
}


def check(relations, ctx: Context, buf) -> Findings:
    """Evaluate ``relations`` in order over ``buf``; a :class:`Table` is opened (a zero-copy
    view in ``ctx.tables``) where it is declared, and one that does not fit ends the check."""
    out = Findings()
    for r in relations:
        evaluate = _EVALUATE.get(type(r))
        if evaluate is None:
            raise TypeError(f"not a relation: {r!r}")
        if evaluate(r, ctx, buf, out) is False:
            out.stopped = True
            return out
    return out
