"""Relations between fields, evaluated from their declarations (``schemas.dsl``: Table,
DeclaresSize, Ordered, Region, Unique, NBytes) over one file's header and tables.

Format-blind: a reader builds a :class:`Context` (the header it parsed, the tables it viewed,
the file's size), then :func:`check` evaluates every relation its schema declares, vectorised
over whole columns -- Python runs per row only for the rows that break a rule -- and returns the
findings (typed errors with the absolute offset of the field, its path, the rule id and the
two values compared as ``expected`` / ``actual``) and, per table, the rows that cannot be read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from schemas.dsl import FILE_END, DeclaresSize, NBytes, Ordered, Region, Table, Unique

from . import errors as E
from .engine import Record, record_of
from .model import numpy_can_hold

#: findings per relation and kind are capped like every per-row rule
LIMIT = 50


@dataclass
class _Tab:
    rec: Record
    view: np.ndarray
    at: int
    path: str


@dataclass
class Findings:
    errors: list = field(default_factory=list)
    #: table record name -> rows that cannot be read
    bad: dict = field(default_factory=dict)
    #: a declared table does not fit in the file: nothing after it could be checked
    stopped: bool = False


class Context:
    """What the relations of one file are evaluated over."""

    def __init__(self, fmt: str, size: int, header: dict, header_rec: Record, header_at: int = 0):
        self.fmt, self.size = fmt, size
        self.header, self.hrec, self.hat = header, header_rec, header_at
        self.tables: dict[str, _Tab] = {}
        self.declared: int | None = None

    # ------------------------------------------------------------------ terms
    def end(self) -> int:
        """FILE_END: the bytes that exist, or fewer when the header declares fewer."""
        return self.size if self.declared is None else min(self.size, self.declared)

    def value(self, term):
        """An int (a constant, a header field, an end) or a uint64 column."""
        if isinstance(term, int):
            return term
        if term == FILE_END:
            return self.end()
        rec, _, name = term.partition(".")
        if rec == self.hrec.name:
            return int(self.header[name])
        t = self.tables[rec]
        if name == "END":
            return t.at + len(t.view) * t.rec.size
        col = t.view[name]
        return col.astype(np.uint64) if col.dtype.kind in "iu" else col

    def offset_of(self, term, row: int | None = None) -> int | None:
        """Absolute offset of the field a term names (of row ``row`` for a column)."""
        if not isinstance(term, str) or term == FILE_END or term.endswith(".END"):
            return None
        rec, _, name = term.partition(".")
        if rec == self.hrec.name:
            return self.hat + self.hrec.by_name[name].offset
        t = self.tables[rec]
        return t.at + (row or 0) * t.rec.size + t.rec.by_name[name].offset

    def path_of(self, term, row: int | None = None) -> str:
        if not isinstance(term, str):
            return str(term)
        rec, _, name = term.partition(".")
        if rec in self.tables and row is not None:
            return f"{self.tables[rec].path}[{row}].{name}"
        return term

    def words(self, term) -> str:
        """How a message names a term."""
        if term == FILE_END:
            return "the end of the file"
        if isinstance(term, str) and term.endswith(".END"):
            return f"the end of the {term[:-4]} table"
        return str(term).partition(".")[2] if isinstance(term, str) and term.startswith(self.hrec.name) else str(term)

    # ------------------------------------------------------------------ tables
    def open_table(self, decl: Table, buf) -> tuple[np.ndarray | None, E.FormatError | None]:
        """The table a :class:`Table` declares, as a zero-copy view; or the finding that it
        does not fit in the file (the caller cannot go on)."""
        rec = record_of(decl.record)
        n, at = int(self.header[decl.count]), self.value(decl.at)
        end = at + n * rec.size
        if end > self.size:
            return None, E.TruncatedError(self.fmt, self.offset_of(f"{self.hrec.name}.{decl.count}"),
                                          f"{self.hrec.name}.{decl.count}", decl.rule,
                                          f"{n} {decl.path} entries end at {end}, the file has {self.size} bytes",
                                          expected=self.size, actual=end)
        view = rec.view(buf, at, n)
        self.tables[rec.name] = _Tab(rec, view, at, decl.path)
        return view, None


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
        elif isinstance(r, DeclaresSize):
            _declares_size(r, ctx, out)
        elif isinstance(r, Ordered):
            _ordered(r, ctx, out)
        elif isinstance(r, Region):
            _region(r, ctx, out)
        elif isinstance(r, Unique):
            _unique(r, ctx, out)
        elif isinstance(r, NBytes):
            _nbytes(r, ctx, out)
        else:
            raise TypeError(f"not a relation: {r!r}")
    return out


def _bad(out: Findings, term: str, rows) -> None:
    out.bad.setdefault(term.partition(".")[0], set()).update(int(i) for i in rows)


def _declares_size(r: DeclaresSize, ctx: Context, out: Findings) -> None:
    term = f"{ctx.hrec.name}.{r.field}"
    declared = ctx.value(term)
    ctx.declared = declared
    if declared != ctx.size:  # shorter than it says: truncated (one finding with what follows)
        cls = E.TruncatedError if declared > ctx.size else E.StructureError
        out.errors.append(cls(ctx.fmt, ctx.offset_of(term), term, r.rule,
                              f"says {declared} bytes, the file has {ctx.size}", expected=ctx.size, actual=declared))


def _ordered(r: Ordered, ctx: Context, out: Findings) -> None:
    vals = [ctx.value(t) for t in r.terms]
    if all(a <= b for a, b in zip(vals, vals[1:])):
        return
    blame = r.blame or next((t for t in r.terms if isinstance(t, str) and t.startswith(ctx.hrec.name + ".")
                             and not t.endswith(".END")), r.terms[0])
    i = r.terms.index(blame)
    lo, hi = (vals[i - 1] if i else None), (vals[i + 1] if i + 1 < len(vals) else None)
    bounds = " .. ".join(ctx.words(t) for t in r.terms if t != blame)
    out.errors.append(E.BoundsError(ctx.fmt, ctx.offset_of(blame), blame, r.rule,
                                    f"must be within [{lo if lo is not None else ''}, {hi if hi is not None else ''}] "
                                    f"({bounds}) (got {vals[i]})", expected=[lo, hi], actual=vals[i]))


def _region(r: Region, ctx: Context, out: Findings) -> None:
    off, ln = ctx.value(r.offset), ctx.value(r.length)
    hi = np.uint64(ctx.value(r.hi))
    past = (off > hi) | (ln > hi - np.minimum(off, hi))  # end > hi, without wrap-around
    for i in np.flatnonzero(past)[:LIMIT].tolist():
        o, n = int(off[i]), int(ln[i])
        cut = r.hi == FILE_END and ctx.declared is not None and o + n <= ctx.declared  # the file was cut
        where = f"the end of the file ({int(hi)} bytes)" if r.hi == FILE_END else f"{ctx.words(r.hi)} ({int(hi)})"
        out.errors.append((E.TruncatedError if cut else E.BoundsError)(
            ctx.fmt, ctx.offset_of(r.length, i), ctx.path_of(r.length, i), r.rule,
            f"data [{o}, +{n}) extends past {where}", expected=int(hi), actual=o + n))
    _bad(out, r.offset, np.flatnonzero(past))
    if r.lo is not None:
        lo = ctx.value(r.lo)
        below = off < np.uint64(lo) if not isinstance(lo, np.ndarray) else off < lo
        for i in np.flatnonzero(below)[:LIMIT].tolist():
            out.errors.append(E.BoundsError(ctx.fmt, ctx.offset_of(r.offset, i), ctx.path_of(r.offset, i),
                                            r.rule_lo or r.rule, f"must be >= {ctx.words(r.lo)} {int(lo)} "
                                            f"(got {int(off[i])})", expected=int(lo), actual=int(off[i])))
        _bad(out, r.offset, np.flatnonzero(below))


def _unique(r: Unique, ctx: Context, out: Findings) -> None:
    col = ctx.value(r.column)
    if len(col) < 2:
        return
    order = np.argsort(col, kind="stable")
    s = col[order]
    dup = order[1:][s[1:] == s[:-1]]  # every later occurrence of a value
    if not len(dup):
        return
    first: dict = {}
    for i in order.tolist():
        first.setdefault(col[i].item(), i)
    name = r.column.partition(".")[2]
    for i in np.sort(dup)[:LIMIT].tolist():
        v = col[i].item()
        out.errors.append(E.StructureError(ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.column, i), r.rule,
                                           f"{name} {v} already used by {ctx.tables[r.column.partition('.')[0]].path}"
                                           f"[{first[v]}]", actual=v))
    _bad(out, r.column, dup)


def _nbytes(r: NBytes, ctx: Context, out: Findings) -> None:
    length, dtype, dims = ctx.value(r.length), ctx.value(r.dtype), ctx.value(r.dims)
    n = len(length)
    if not n:
        return
    rank = ctx.value(r.rank) if r.rank is not None else np.full(n, dims.shape[1], dtype=np.uint64)
    codes = np.array(sorted(r.itemsize), dtype=np.uint64)
    sizes = np.array([r.itemsize[c] for c in sorted(r.itemsize)], dtype=np.float64)
    known = np.isin(dtype, codes)
    keep = known & (rank <= np.uint64(min(r.max_rank if r.max_rank is not None else dims.shape[1], dims.shape[1])))
    rows = np.flatnonzero(keep)
    if not len(rows):
        return
    isz = sizes[np.searchsorted(codes, dtype[rows])]
    d = dims[rows].astype(np.float64)
    d[np.arange(d.shape[1])[None, :] >= rank[rows][:, None].astype(np.int64)] = 1.0  # extents past the rank
    numel = d.prod(axis=1)
    suspect = rows[(numel * isz != length[rows].astype(np.float64)) | (numel * isz >= 2.0**53)]
    zero = rows[(d == 0).any(axis=1)]  # (numpy's limit on shapes applies when another extent is 0)
    found = 0
    for i in np.union1d(suspect, zero).tolist():
        if found >= LIMIT:
            break
        k, code = int(rank[i]), int(dtype[i])
        shape = [int(x) for x in dims[i][:k]]
        item = r.itemsize[code]
        name = r.names[code] if r.names else str(code)
        if not numpy_can_hold(shape, item):
            out.errors.append(E.RangeError(ctx.fmt, ctx.offset_of(r.dims, i), ctx.path_of(r.dims, i), r.rule,
                                           f"no array has the shape {shape}"))
        elif math.prod(shape) * item != int(length[i]):
            want = math.prod(shape) * item
            out.errors.append(E.StructureError(ctx.fmt, ctx.offset_of(r.length, i), ctx.path_of(r.length, i), r.rule,
                                               f"{name}{shape} needs {E.show_int(want)} bytes (got {int(length[i])})",
                                               expected=want, actual=int(length[i])))
        else:
            continue
        found += 1
        _bad(out, r.length, [i])


def describe_relation(r) -> str:
    """One sentence per relation, for the format reference."""
    if isinstance(r, Table):
        return (f"`{r.count}` {record_of(r.record).name} records ({record_of(r.record).size} bytes each) start at "
                f"{r.at} and lie inside the file")
    if isinstance(r, DeclaresSize):
        return f"`{r.field}` equals the file's length (a shorter file is truncated)"
    if isinstance(r, Ordered):
        return " <= ".join(f"`{t}`" for t in r.terms)
    if isinstance(r, Region):
        lo = f"`{r.lo}` <= " if r.lo is not None else ""
        return (f"every row: {lo}`{r.offset}` and `{r.offset}` + `{r.length}` <= `{r.hi}` (no wrap-around)"
                + (f"; the start rule is `{r.rule_lo}`" if r.rule_lo else ""))
    if isinstance(r, Unique):
        return f"no two rows share `{r.column}`"
    if isinstance(r, NBytes):
        dims = f"`{r.dims}`[:`{r.rank}`]" if r.rank else f"`{r.dims}`"
        skip = f" (rows of rank <= {r.max_rank})" if r.max_rank is not None else ""
        return f"`{r.length}` = product({dims}) x element size of `{r.dtype}`{skip}"
    return repr(r)
