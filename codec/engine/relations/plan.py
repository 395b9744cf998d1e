"""Where a writer puts things, derived from the declarations a reader checks.

A writer asks the schema, not a constant of its own, where a region may start:

* :func:`alignment` -- the step every declared rule on an offset accepts: the field's
  ``Multiple`` constraints, the ``Aligned`` relations on the column (their ``n`` an int or a term
  the writer knows, e.g. an alignment the file declares) and the ``Aligned`` conditions a
  ``Region`` puts on the rows it reads (an unaligned row would be unreadable);
* :func:`after` -- the first value at or after a position that a field's declarations accept
  (where a section starts after the previous one ends);
* :func:`place` -- the offsets of regions laid in order from a start: each at the next aligned
  position after the previous one's end (which satisfies every ``Disjoint``), or, where a
  ``Tiles`` is declared on the column, each exactly where the previous one ends.

``terms`` gives the values of the terms the declarations name (``{"$alignment": 32}``). A
writer's own choice beyond the rules (an alignment readers do not require) is its own, combined
with :func:`alignment` (a multiple of both), never written into the declarations.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping

from ...schemas.dsl import Aligned, Multiple, Records, Region, Table, Tiles

from ..records import record_of


def _records(relations, records) -> dict:
    """The declared records by name: those ``relations`` open, and ``records``."""
    structs = [r.record for r in relations if isinstance(r, (Table, Records))] + list(records)
    return {rec.name: rec for rec in map(record_of, structs)}


def _value(n, terms: Mapping, column: str) -> int:
    if isinstance(n, int):
        return n
    if n not in terms:
        raise TypeError(f"{column}: the declarations align it to {n!r}; give that term's value")
    return int(terms[n])


def alignment(relations, column: str, *, records=(), terms: Mapping | None = None) -> int:
    """The least step that every declaration on ``column`` ("Record.field") accepts."""
    terms = terms or {}
    steps = []
    rec, _, name = column.partition(".")
    r = _records(relations, records).get(rec)
    if r is not None and name in r.by_name:
        steps += [c.n for c in r.by_name[name].valid if isinstance(c, Multiple)]
    for d in relations:
        if isinstance(d, Aligned) and d.column == column and d.rule is not None:
            steps.append(_value(d.n, terms, column))
        elif isinstance(d, Region) and d.offset == column:
            when = d.when if isinstance(d.when, tuple) else (d.when,)
            steps += [_value(c.n, terms, column) for c in when if isinstance(c, Aligned) and c.column == column]
    return math.lcm(1, *steps)


def after(relations, column: str, at: int, *, records=(), terms: Mapping | None = None) -> int:
    """The first value at or after ``at`` that ``column``'s declarations accept."""
    step = alignment(relations, column, records=records, terms=terms)
    return -(-at // step) * step


def place(relations, column: str, sizes: Iterable[int], start: int, *, records=(),
          terms: Mapping | None = None, pad_end: bool = False) -> tuple[list[int], int]:
    """Offsets for regions of ``sizes`` laid in order from ``start`` as ``column``'s
    declarations require, and where the last one ends (rounded up to the step with
    ``pad_end``)."""
    step = alignment(relations, column, records=records, terms=terms)
    tiles = any(isinstance(d, Tiles) and d.offset == column for d in relations)
    if tiles and step != 1:
        raise ValueError(f"{column}: declared to tile its range, and aligned to {step}")
    offsets, pos = [], start
    for n in sizes:
        pos = -(-pos // step) * step
        offsets.append(pos)
        pos += n
    return offsets, (-(-pos // step) * step if pad_end else pos)
