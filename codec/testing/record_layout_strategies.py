"""The layout part of :func:`codec.testing.record_strategies.record_tables`: where the drawn rows' bytes
go (format-blind, one small handler per kind, called with the draw's state):

* the rows' file region (one ``offset``/``length`` pair per row: Region, Disjoint, Tiles),
  laid out after the table and every lower bound, in a random order, aligned, non-overlapping,
  contiguous for Tiles; FILE_END after the last;
* the rows' other regions (``contents=``: a pair whose bytes live in a space of their own, e.g.
  a table of names; bounds only: ``[lo or 0, hi]``, ``hi`` a constant or a term), laid out back
  to back with small gaps in a random order, ``hi`` at or after their end;
* Ordered (free terms drawn in order), Aligned (by a constant or a drawn term), Zeros after
  the table or between the rows' bytes (from a lower bound of their region to its upper
  bound: the file builder's zeros).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hypothesis import strategies as st

from ..schemas.dsl import FILE_END

from ..engine.relations.plan import alignment
from ..io.tensor_writer import align_up

if TYPE_CHECKING:
    from .record_strategies import _State


def _h_aligned(r, s: _State) -> None:
    if isinstance(r.n, str) and r.n.startswith(s.rec.name + "."):
        raise ValueError(f"Aligned {r.column}: an alignment per row ({r.n}) is not drawn")
    s.align.setdefault(s.col(r.column), []).append(r.n)


def _h_ordered(r, s: _State) -> None:
    s.ordered.append(r)


def _h_zeros(r, s: _State) -> None:
    """Zeros from the table's end: the bytes up to ``end`` are the file builder's zero padding;
    ``end`` comes at or after the table.  Zeros between the rows' bytes (``offset``: checked by
    ``record_tables`` to run from a lower bound of their region to its upper bound) are the
    file builder's zeros around the bytes it places."""
    if r.offset is not None:
        return
    if r.start != f"{s.rec.name}.END":
        raise ValueError(f"Zeros from {r.start}: only padding after the drawn table is drawn")
    s.after.append(r.end)


def _h_region(r, s: _State) -> None:
    pair = (s.col(r.offset), s.col(r.length))
    if pair in s.spaces:  # (bytes in a space of their own: bounds only)
        if type(r).__name__ == "Tiles" or (type(r).__name__ == "Region" and (
                r.hi == FILE_END or not isinstance(r.lo or 0, int))):
            raise ValueError(f"{type(r).__name__} {r.offset}: only [constant, term] bounds are drawn for "
                             "the bytes of another space")
        s.spaces[pair].append(r)
        return
    if s.rows:  # (the bounds of no row's bytes are left to the table whose rows need them)
        s.after += [x for x in (getattr(r, "lo", None), getattr(r, "start", None)) if isinstance(x, str)]
    if s.region not in (None, pair):
        raise ValueError(f"{s.rec.name}: one region per row is drawn ({s.region} and {pair})")
    s.region = pair
    s.regions.append(r)


def _lay_spaces(s: _State) -> None:
    """Each row's bytes in a space of their own (``contents=``): back to back from the lower
    bound with small gaps, in a random order, aligned as the offset field must be; every upper
    bound at or after the last (a free term drawn there)."""
    for (off, ln), regions in s.spaces.items():
        lo = max([0] + [r.lo for r in regions if isinstance(getattr(r, "lo", None), int)])
        step = alignment((), f"{s.rec.name}.{off}", records=(s.rec.struct,))
        pos = lo
        for i in s.d(st.permutations(range(len(s.rows)))):
            pos = align_up(pos + s.d(st.integers(0, 4)), step)
            s.put(i, off, pos)
            pos += int(s.get(i, ln))
        for hi in dict.fromkeys(r.hi for r in regions if type(r).__name__ == "Region"):
            v = s.known(hi)
            if v is None:
                s.free(hi, pos)
            elif v < pos:
                raise ValueError(f"{s.rec.name}: the bytes of {off} end at {pos}, after {hi} = {v}")


def _layout(s: _State) -> None:
    """The header terms the table needs (where it must end, the lower bounds of its rows' bytes)
    at or after its end and after every value an Ordered relation puts before them; the free
    terms an Ordered relation puts between fixed ones; then every row's region, in a random
    order, aligned, inside the bounds, disjoint, tiling when a Tiles relation asks for it;
    FILE_END after everything.  The terms of an Ordered chain from the first that is where
    another declared table starts or ends stay free (that table's draw fixes them: ``known=``)."""
    from ..schemas.dsl import Tiles

    _lay_spaces(s)

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
    # the offset field's own constraints (as a writer places it), and the Aligned relations on it
    # by a constant or a drawn term
    step = math.lcm(alignment((), f"{s.rec.name}.{off}", records=(s.rec.struct,)),
                    *[s.known(n) if s.known(n) is not None else s.free(n, 1) for n in s.align.get(off, ())])
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
    for r in s.ordered:
        vals = [s.size if t == FILE_END else s.known(t) for t in r.terms]
        vals = [v for v in vals if v is not None]
        if vals != sorted(vals):
            raise ValueError(f"Ordered {r.terms}: the values drawn, {vals}, are out of order")


