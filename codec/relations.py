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

from schemas.dsl import (FILE_END, Affine, Aligned, Bound, Clear, DeclaresSize, Disjoint, Equal, Fits, Has, In, Lacks,
                         Member, NBytes, Ordered, Records, RefersTo, Region, Size, Table, Tiles, Unique, Zeros)
from schemas.dsl import Gaps, Known, Present, Text

from . import errors as E
from .engine import Record, record_of
from .model import numpy_can_hold

#: findings per relation and kind are capped like every per-row rule
LIMIT = 50


class _Cols:
    """The columns of a table: a numpy view of fixed-size records (its integer fields as
    uint64), or a dict of columns; derived columns are added on top."""

    def __init__(self, base):
        self.base, self.extra = base, {}

    def __getitem__(self, name: str):
        if name in self.extra:
            return self.extra[name]
        col = self.base[name]
        if isinstance(col, np.ndarray) and col.dtype.kind in "iu" and col.ndim == 1:
            return col.astype(np.uint64, copy=False)
        return col

    def __setitem__(self, name: str, col) -> None:
        self.extra[name] = col


@dataclass
class _Tab:
    name: str
    path: str
    cols: _Cols
    n: int
    end: int
    #: (row, field) -> absolute offset of that field
    field_at: object
    #: the parsed records (offset, record dict) of a :class:`Records` table
    rows: list = field(default_factory=list)

    @property
    def view(self):
        """The columns as given (a numpy view of the records, for a declared Table)."""
        return self.cols.base


@dataclass
class Findings:
    errors: list = field(default_factory=list)
    #: table record name -> rows that cannot be read
    bad: dict = field(default_factory=dict)
    #: a declared table does not fit in the file: nothing after it could be checked
    stopped: bool = False
    #: where parsing stopped when it did (the records before it were read)
    stopped_at: int | None = None
    #: (table record name, row) -> the first finding that made the row unreadable
    why: dict = field(default_factory=dict)


class Context:
    """What the relations of one file are evaluated over."""

    def __init__(self, fmt: str, size: int, header: dict | None = None, header_rec: Record | None = None,
                 header_at: int = 0):
        self.fmt, self.size = fmt, size
        self.header, self.hrec, self.hat = header or {}, header_rec, header_at
        self.tables: dict[str, _Tab] = {}
        self.declared: int | None = None
        #: RefersTo targets: target name -> {value: (offset, length) or None}
        self.targets: dict[str, dict] = {}
        #: values the reader derives, named "$name" in the relations
        self.values: dict[str, int] = {}
        #: table -> how findings name a row (default: its index)
        self.labels: dict = {}
        #: table -> the whole path of a row (``toc[3](WTSH 'weights.shard0')``), when the reader names rows so
        self.row_paths: dict = {}

    # ------------------------------------------------------------------ terms
    def end(self) -> int:
        """FILE_END: the bytes that exist, or fewer when the header declares fewer."""
        return self.size if self.declared is None else min(self.size, self.declared)

    def value(self, term):
        """An int (a constant, a header field, an end) or a column."""
        if isinstance(term, int):
            return term
        if isinstance(term, Affine):
            v = self.value(term.term)
            return np.uint64(term.base) + np.uint64(term.per) * v if isinstance(v, np.ndarray) else \
                term.base + term.per * v
        if term == FILE_END:
            return self.end()
        if term.startswith("$"):
            return self.values[term[1:]]
        rec, _, name = term.partition(".")
        if self.hrec is not None and rec == self.hrec.name:
            return int(self.header[name])
        t = self.tables[rec]
        return t.end if name == "END" else t.cols[name]

    def offset_of(self, term, row: int | None = None) -> int | None:
        """Absolute offset of the field a term names (of row ``row`` for a column)."""
        if not isinstance(term, str) or term == FILE_END or term.endswith(".END") or term.startswith("$"):
            return None
        rec, _, name = term.partition(".")
        if self.hrec is not None and rec == self.hrec.name:
            return self.hat + self.hrec.by_name[name].offset
        try:
            return self.tables[rec].field_at(row or 0, name)
        except KeyError:  # a derived column: the row's start
            return self.tables[rec].field_at(row or 0, None)

    def path_of(self, term, row: int | None = None) -> str:
        if not isinstance(term, str):
            return str(term)
        rec, _, name = term.partition(".")
        if rec in self.row_paths and row is not None:
            return f"{self.row_paths[rec](row)}.{name}"
        if rec in self.tables and row is not None:
            label = self.labels.get(rec)
            return f"{self.tables[rec].path}[{label(row) if label else row}].{name}"
        return term

    def words(self, term) -> str:
        """How a message names a term."""
        if isinstance(term, int):
            return "the limit"
        if isinstance(term, Affine):
            return f"{term.base} + {term.per} x {self.words(term.term)}"
        if term == FILE_END:
            return "the end of the file"
        if isinstance(term, str) and term.endswith(".END"):
            return f"the end of the {term[:-4]} table"
        if isinstance(term, str) and term.startswith("$"):
            return "the " + term[1:].replace("_", " ")
        if isinstance(term, str) and self.hrec is not None and term.startswith(self.hrec.name + "."):
            return term.partition(".")[2]
        return str(term)

    # ------------------------------------------------------------------ tables
    def add_table(self, name: str, path: str, columns, n: int, end: int, field_at, label=None,
                  row_path=None) -> None:
        """A table the reader parsed itself (variable-size records): ``columns`` maps field
        names to numpy columns (or lists); ``field_at(row, field)`` gives a field's absolute
        offset (``field`` None: the row's start); ``end`` is where the table ends; ``label(row)``
        how findings name a row (default its index)."""
        self.tables[name] = _Tab(name, path, _Cols(columns), n, end, field_at)
        if label is not None:
            self.labels[name] = label
        if row_path is not None:
            self.row_paths[name] = row_path

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
        self.tables[rec.name] = _Tab(rec.name, decl.path, _Cols(view), n, end,
                                     lambda i, f, at=at, rec=rec: at + i * rec.size + (rec.by_name[f].offset if f else 0))
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
        elif isinstance(r, (Present, Known)):
            _presence(r, ctx, out)
        elif isinstance(r, Gaps):
            _gaps(r, ctx, buf, out)
        elif isinstance(r, Text):
            _text(r, ctx, out)
        else:
            raise TypeError(f"not a relation: {r!r}")
    return out


def _bad(out: Findings, term: str, rows) -> None:
    out.bad.setdefault(term.partition(".")[0], set()).update(int(i) for i in rows)


def _row_error(out: Findings, term: str, row: int, err: E.FormatError) -> None:
    """A finding about one row, which that row cannot be read past."""
    out.errors.append(err)
    out.why.setdefault((term.partition(".")[0], int(row)), err)


def _where(cond, ctx: Context, n: int) -> np.ndarray:
    """The rows where a condition (In, Has, Lacks or None) holds."""
    if cond is None:
        return np.ones(n, dtype=bool)
    col = ctx.value(cond.column)
    if isinstance(cond, In):
        if isinstance(col, np.ndarray) and col.ndim == 2 and col.dtype == np.uint8:  # fixed bytes (a fourcc)
            hit = np.zeros(n, dtype=bool)  # (a few values: compared row-wise, cheaper than isin over bytes)
            for v in cond.values:
                hit |= (col == np.frombuffer(v, np.uint8)).all(axis=1) if len(v) == col.shape[1] else False
            return hit
        return np.isin(col, list(cond.values))
    bits = np.uint64(cond.bits)
    return (col & bits) == bits if isinstance(cond, Has) else (col & bits) == 0


def _row_rule(r, ctx: Context, out: Findings) -> None:
    """Bound, Equal and Clear: one comparison per row, where ``when`` holds, rows already
    unreadable left out (their values are not to be trusted)."""
    col = ctx.value(r.column)
    n = len(col)
    hit = _where(r.when, ctx, n)
    gone = out.bad.get(r.column.partition(".")[0])
    if gone:
        hit[list(gone)] = False
    if isinstance(r, Clear):
        bad = hit & ((col & np.uint64(r.bits)) != 0)
    else:
        other = ctx.value(r.most if isinstance(r, Bound) else r.other)
        other = other if isinstance(other, np.ndarray) else np.uint64(other)
        bad = hit & ((col > other) if isinstance(r, Bound) else (col != other))
    rows = np.flatnonzero(bad)
    for i in rows[:LIMIT].tolist():
        got = int(col[i])
        at, path = ctx.offset_of(r.column, i), ctx.path_of(r.column, i)
        if isinstance(r, Clear):
            err = E.ConstraintError(ctx.fmt, at, path, r.rule, f"must not have the bits 0x{r.bits:x} set here "
                                    f"(got 0x{got:x})", expected=0, actual=got & r.bits)
        else:
            want = int(other[i]) if isinstance(other, np.ndarray) and other.ndim else int(other)
            words = ctx.words(r.most if isinstance(r, Bound) else r.other)
            if isinstance(r, Bound):
                err = E.LimitError(ctx.fmt, at, path, r.rule, f"must be <= {want} ({words}) (got {got})",
                                   expected=want, actual=got)
            else:
                err = E.StructureError(ctx.fmt, at, path, r.rule, f"must equal {words} {want} (got {got})",
                                       expected=want, actual=got)
        _row_error(out, r.column, i, err)
    _bad(out, r.column, rows)


def _records(r: Records, ctx: Context, buf, out: Findings) -> bool:
    rec = record_of(r.record)
    n, at = int(ctx.header[r.count]), ctx.value(r.at)
    if r.end is not None:  # the section they must lie in: counts bounded by it first
        end = ctx.value(r.end)
        if n * rec.min_size() > end - at:
            term = f"{ctx.hrec.name}.{r.count}"
            out.errors.append(E.TruncatedError(ctx.fmt, ctx.offset_of(term), term, r.rule,
                                               f"{n} {r.path} entries need at least {n * rec.min_size()} bytes, the "
                                               f"section has {end - at}", expected=end - at, actual=n * rec.min_size()))
            out.stopped_at = at
            return False
        buf = memoryview(buf)[:end] if not isinstance(buf, memoryview) else buf[:end]
    rows: list = []
    pos = at
    failed = None
    try:
        for off, row in rec.iter_parse(buf, at, n, r.path):
            rows.append((off, row))
            pos = off + rec.size_of(row)
    except E.FormatError as e:  # the rows before it are still there to be checked
        failed = e
    cols: dict = {}
    for f in rec.fields:
        vals = [row[f.name] for _, row in rows]
        cols[f.name] = (np.array(vals, dtype=np.uint64) if f.kind == "int" else vals)
    offsets = [rec.field_offsets(row) for _, row in rows]
    ctx.tables[rec.name] = _Tab(rec.name, r.path, _Cols(cols), len(rows), pos,
                                lambda i, f: rows[i][0] + (offsets[i][f] if f else 0), rows)
    if failed is not None:
        out.errors.append(failed)
        out.stopped_at = failed.offset if failed.offset is not None else pos
        return False
    return True


def _fits(r: Fits, ctx: Context, out: Findings) -> bool:
    at = ctx.value(r.at)
    need = sum(int(ctx.header[c]) * record_of(rec).min_size() for c, rec in r.counts)
    if need <= ctx.size - at:
        return True
    first = f"{ctx.hrec.name}.{r.counts[-1][0]}"
    counts = " + ".join(f"{int(ctx.header[c])} {record_of(rec).name}" for c, rec in r.counts)
    out.errors.append(E.TruncatedError(ctx.fmt, ctx.offset_of(first), first, r.rule,
                                       f"{counts} records need at least {need} bytes, the file has {ctx.size - at} "
                                       f"after offset {at}", expected=ctx.size - at, actual=need))
    return False


def _size(r: Size, ctx: Context) -> None:
    tab, _, name = r.name.partition(".")
    count, dtype = ctx.value(r.count), ctx.value(r.dtype)
    codes = np.array(sorted(r.itemsize), dtype=np.uint64)
    sizes = np.array([0] + [r.itemsize[c] for c in sorted(r.itemsize)], dtype=object)
    pos = np.searchsorted(codes, dtype)
    hit = (pos < len(codes)) & (codes[np.minimum(pos, len(codes) - 1)] == dtype)
    item = sizes[np.where(hit, pos + 1, 0)]
    # exact (Python ints), then uint64 where it fits: counts up to 2^63 x 8 bytes do not
    total = [int(c) * int(i) for c, i in zip(count.tolist(), item.tolist())]
    ctx.tables[tab].cols[name] = np.array(total, dtype=np.uint64) if all(t < 2**64 for t in total) else \
        np.array(total, dtype=object)


def _refers_to(r: RefersTo, ctx: Context, out: Findings) -> None:
    tab = r.column.partition(".")[0]
    col = ctx.value(r.column)
    known = ctx.targets.get(r.target, {})
    uniq, inv = np.unique(col, return_inverse=True)
    found = [known.get(int(u)) for u in uniq]
    missing = np.array([f is None for f in found], dtype=bool)[inv]
    length = np.array([0 if f is None else f[1] for f in found], dtype=np.uint64)[inv]
    ctx.tables[tab].cols[r.length_as] = length
    rows = np.flatnonzero(missing)
    for i in rows[:LIMIT].tolist():
        out.errors.append(E.StructureError(ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.column, i), r.rule,
                                           f"no {r.target} {int(col[i])}", actual=int(col[i])))
    _bad(out, r.column, rows)


def _aligned(r: Aligned, ctx: Context, out: Findings) -> None:
    col, n = ctx.value(r.column), ctx.value(r.n)
    if not len(col):
        return
    if isinstance(n, np.ndarray):  # each row its own (rows already unreadable left out)
        n = n.astype(np.uint64)
        hit = (col % np.maximum(n, np.uint64(1))) != 0
        gone = out.bad.get(r.column.partition(".")[0])
        if gone:
            hit[list(gone)] = False
        off = np.flatnonzero(hit)
    else:
        n = int(n)
        if n <= 1:
            return
        off = np.flatnonzero(col % np.uint64(n))
    for i in off[:LIMIT].tolist():
        want = int(n[i]) if isinstance(n, np.ndarray) else n
        _row_error(out, r.column, i, E.AlignmentError(ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.column, i),
                                                      r.rule, f"must be a multiple of {want} (got {int(col[i])})",
                                                      expected=want, actual=int(col[i])))
    _bad(out, r.column, off)


def _member(r: Member, ctx: Context, out: Findings) -> None:
    col = ctx.value(r.column)
    if not len(col):
        return
    rows = np.flatnonzero(~np.isin(col, np.array(r.values, dtype=col.dtype)))
    known = ", ".join(str((r.names or {}).get(v, v)) for v in r.values)
    for i in rows[:LIMIT].tolist():
        got = col[i].item()
        _row_error(out, r.column, i, E.EnumError(ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.column, i), r.rule,
                                                 f"unknown value {got} (known: {known})", actual=got))
    _bad(out, r.column, rows)


def _tiles(r: Tiles, ctx: Context, out: Findings) -> None:
    tab = r.offset.partition(".")[0]
    off, ln = ctx.value(r.offset), ctx.value(r.length)
    start, end = ctx.value(r.start), ctx.value(r.end)
    n = len(off)
    if not n:
        if end is not None and end != start:
            out.errors.append(E.StructureError(ctx.fmt, None, tab, r.rule, f"no tensor covers the {end - start} "
                                               f"bytes of data", expected=start, actual=end))
        return
    order = np.lexsort((np.arange(n), off))
    o = off[order].astype(object) if ln.dtype == object else off[order]
    e = o + ln[order]
    want = np.concatenate(([start], e[:-1])).astype(o.dtype) if o.dtype != object else \
        np.array([start] + list(e[:-1]), dtype=object)
    where = np.flatnonzero(o != want)
    for k in where[:LIMIT].tolist():
        i = int(order[k])
        prev = "the data's start" if k == 0 else f"{ctx.tables[tab].path}[{int(order[k - 1])}] ends"
        what = "overlaps" if int(o[k]) < int(want[k]) else "leaves a gap after"
        out.errors.append(E.StructureError(ctx.fmt, ctx.offset_of(r.offset, i), ctx.path_of(r.offset, i), r.rule,
                                           f"begins at {int(o[k])}: it {what} {prev} ({int(want[k])})",
                                           expected=int(want[k]), actual=int(o[k])))
    if end is not None and int(e[-1]) != end:
        i = int(order[-1])
        out.errors.append(E.StructureError(ctx.fmt, ctx.offset_of(r.length, i), ctx.path_of(r.length, i), r.rule,
                                           f"the last tensor ends at {int(e[-1])}, the data at {end}"
                                           + (f" ({end - int(e[-1])} bytes after it)" if end > int(e[-1]) else ""),
                                           expected=end, actual=int(e[-1])))


def _disjoint(r: Disjoint, ctx: Context, out: Findings) -> None:
    tab = r.offset.partition(".")[0]
    off, ln = ctx.value(r.offset), ctx.value(r.length)
    keep = np.array([int(x) > 0 for x in ln.tolist()], dtype=bool) if ln.dtype == object else ln > 0
    gone = out.bad.get(tab)
    if gone:  # (rows already unreadable: their extent is not to be trusted)
        keep[list(gone)] = False
    idx = np.flatnonzero(keep)
    if len(idx) < 2:
        return
    order = idx[np.lexsort((idx, off[idx]))]  # by offset, then by row
    start = off[order]
    end = start + ln[order]
    reach = np.maximum.accumulate(end)  # the furthest end so far
    hits = np.flatnonzero(start[1:] < reach[:-1]) + 1  # starts before an earlier row ends
    for k in hits[:LIMIT].tolist():
        i = int(order[k])
        j = int(order[int(np.argmax(end[:k]))])  # the earlier row reaching furthest
        a, b = int(start[k]), int(end[k])
        out.errors.append(E.OverlapError(ctx.fmt, ctx.offset_of(r.offset, i), ctx.path_of(r.offset, i), r.rule,
                                         f"data [{a}, {b}) overlaps {ctx.tables[tab].path}[{j}] "
                                         f"[{int(off[j])}, {int(off[j]) + int(ln[j])})"))


def _declares_size(r: DeclaresSize, ctx: Context, out: Findings) -> None:
    term = f"{ctx.hrec.name}.{r.field}"
    declared = ctx.value(term)
    ctx.declared = declared
    if declared != ctx.size:  # shorter than it says: truncated (one finding with what follows)
        cls = E.TruncatedError if declared > ctx.size else E.StructureError
        out.errors.append(cls(ctx.fmt, ctx.offset_of(term), term, r.rule,
                              f"says {declared} bytes, the file has {ctx.size}", expected=ctx.size, actual=declared))


def _ordered(r: Ordered, ctx: Context, out: Findings) -> bool:
    vals = [ctx.value(t) for t in r.terms]
    pairs = list(zip(vals, vals[1:]))
    if all(a <= b for a, b in pairs):
        return True
    k = next(i for i, (a, b) in enumerate(pairs) if a > b)
    field_term = (lambda t: isinstance(t, str) and ctx.hrec is not None and t.startswith(ctx.hrec.name + ".")
                  and not t.endswith(".END"))
    blame = r.blame or (r.terms[k] if field_term(r.terms[k]) else r.terms[k + 1])
    i = r.terms.index(blame)
    lo, hi = (vals[i - 1] if i else None), (vals[i + 1] if i + 1 < len(vals) else None)
    # in order once the end is what the header declares: the data was cut short
    cut = (FILE_END in r.terms and ctx.declared is not None and ctx.declared > ctx.size and
           all(a <= b for a, b in zip(*(lambda w: (w, w[1:]))([ctx.declared if t == FILE_END else v
                                                                 for t, v in zip(r.terms, vals)]))))
    cls = E.TruncatedError if cut else (E.StructureError if r.error == "structure" else E.BoundsError)
    order = " <= ".join(f"{ctx.words(t)}={v}" for t, v in zip(r.terms, vals))
    out.errors.append(cls(ctx.fmt, ctx.offset_of(blame), blame, r.rule,
                          f"must be within [{lo if lo is not None else ''}, {hi if hi is not None else ''}] "
                          f"(got {vals[i]}): {order} does not hold", expected=[lo, hi], actual=vals[i]))
    return False


def _zeros(r: Zeros, ctx: Context, buf, out: Findings) -> None:
    a, b = ctx.value(r.start), min(ctx.value(r.end), ctx.size)
    if b <= a:
        return
    nz = np.flatnonzero(np.frombuffer(buf, np.uint8, b - a, a))
    if nz.size:
        out.errors.append(E.ReservedError(ctx.fmt, a + int(nz[0]), f"{r.start.partition('.')[0]} {r.what}", r.rule,
                                          f"bytes [{a}, {b}) must be zero ({nz.size} are not)"))


def _region(r: Region, ctx: Context, out: Findings) -> None:
    off, ln = ctx.value(r.offset), ctx.value(r.length)
    hi = ctx.value(r.hi)
    skip = np.zeros(len(off), dtype=bool)  # rows already unreadable: their bounds would be a cascade
    gone = out.bad.get(r.offset.partition(".")[0])
    if gone:
        skip[list(gone)] = True
    if ln.dtype == object:  # lengths past 2^64 (derived sizes): exact, row by row
        his = hi.tolist() if isinstance(hi, np.ndarray) else [hi] * len(off)
        past = np.array([int(o) + int(n) > int(h) for o, n, h in zip(off.tolist(), ln.tolist(), his)], dtype=bool)
    else:
        h = hi if isinstance(hi, np.ndarray) else np.uint64(hi)
        past = (off > h) | (ln > h - np.minimum(off, h))  # end > hi, without wrap-around
    past &= ~skip
    for i in np.flatnonzero(past)[:LIMIT].tolist():
        o, n = int(off[i]), int(ln[i])
        hi_i = int(hi[i]) if isinstance(hi, np.ndarray) else hi
        # past the end of what exists, inside what the file says it holds: the file was cut
        at_end = r.hi == FILE_END or r.hi_is_end
        cut = at_end and (ctx.declared is None or o + n <= ctx.declared)
        where = f"the end of the file ({hi_i} bytes)" if r.hi == FILE_END else f"{ctx.words(r.hi)} ({hi_i})"
        term = r.offset if ctx.offset_of(r.length, i) is None else r.length
        _row_error(out, r.offset, i, (E.TruncatedError if cut else E.BoundsError)(
            ctx.fmt, ctx.offset_of(term, i), ctx.path_of(term, i), r.rule,
            f"data [{o}, +{E.show_int(n)}) extends past {where}", expected=hi_i, actual=o + n))
    _bad(out, r.offset, np.flatnonzero(past))
    if r.lo is not None:
        lo = ctx.value(r.lo)
        below = (off < np.uint64(lo)) & ~skip
        if r.empty_anywhere:
            below &= np.array([int(n) > 0 for n in ln.tolist()], dtype=bool)
        inside = r.lo_is_end or (isinstance(r.lo, str) and r.lo.endswith(".END"))  # data inside a region
        for i in np.flatnonzero(below)[:LIMIT].tolist():
            msg = (f"data at {int(off[i])} starts inside {ctx.words(r.lo)} (it ends at {lo})" if inside else
                   f"must be >= {ctx.words(r.lo)} {lo} (got {int(off[i])})")
            _row_error(out, r.offset, i, (E.OverlapError if inside else E.BoundsError)(
                ctx.fmt, ctx.offset_of(r.offset, i), ctx.path_of(r.offset, i), r.rule_lo or r.rule, msg,
                expected=lo, actual=int(off[i])))
        _bad(out, r.offset, np.flatnonzero(below))


def _unique(r: Unique, ctx: Context, out: Findings) -> None:
    col = ctx.value(r.column)
    tab, _, name = r.column.partition(".")
    first: dict = {}
    dup = []
    if isinstance(col, np.ndarray) and col.dtype != object:
        if len(col) < 2:
            return
        order = np.argsort(col, kind="stable")
        s = col[order]
        dup = np.sort(order[1:][s[1:] == s[:-1]]).tolist()  # every later occurrence of a value
        if not dup:
            return
        for i in order.tolist():
            first.setdefault(col[i].item(), i)
    else:  # Python values (keys); None: a value its own rule already refused
        for i, v in enumerate(col):
            if v is None:
                continue
            if v in first:
                dup.append(i)
            else:
                first[v] = i
    for i in dup[:LIMIT]:
        v = col[i].item() if isinstance(col, np.ndarray) and col.dtype != object else col[i]
        _row_error(out, r.column, i, E.StructureError(
            ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.column, i), r.rule,
            f"{name} {v!r} already used by {ctx.tables[tab].path}[{first[v]}]",
            actual=v if isinstance(v, (int, str)) else None))
    _bad(out, r.column, dup)


def _nbytes_ragged(r: NBytes, ctx: Context, out: Findings, length, dims) -> None:
    """One list of extents per row (variable ranks): exact integers, row by row."""
    dtype = ctx.value(r.dtype) if r.dtype is not None else None
    found = 0
    for i, shape in enumerate(dims):
        if found >= LIMIT:
            break
        item = 1
        if dtype is not None:
            code = int(dtype[i])
            if code not in r.itemsize:
                continue
            item = r.itemsize[code]
        if r.max_rank is not None and len(shape) > r.max_rank:
            continue
        want = math.prod(shape) * item
        if want != int(length[i]):
            what = f"{r.names[code]}{list(shape)} needs {E.show_int(want)} bytes" if dtype is not None else \
                f"must equal the product of shape {list(shape)} = {E.show_int(want)}"
            out.errors.append(E.StructureError(ctx.fmt, ctx.offset_of(r.length, i), ctx.path_of(r.length, i), r.rule,
                                               f"{what} (got {int(length[i])})", expected=want, actual=int(length[i])))
            found += 1
            _bad(out, r.length, [i])


def _nbytes_flat(r: NBytes, ctx: Context, out: Findings, length, dims) -> None:
    """Extents as one flat array and a length per row: products vectorised (float pre-check,
    exact integers only for the rows it doubts)."""
    lens, flat = dims
    n = len(length)
    starts = np.zeros(n, dtype=np.int64)
    if n > 1:
        np.cumsum(lens[:-1], out=starts[1:])
    dtype = ctx.value(r.dtype)
    codes = np.array(sorted(r.itemsize), dtype=np.uint64)
    sizes = np.array([r.itemsize[c] for c in sorted(r.itemsize)], dtype=np.float64)
    pos = np.minimum(np.searchsorted(codes, dtype), len(codes) - 1)
    known = codes[pos] == dtype
    isz = np.where(known, sizes[pos], 0.0)
    numel = np.ones(n, dtype=np.float64)
    ranked = lens > 0
    if ranked.any():
        numel[ranked] = np.multiply.reduceat(flat.astype(np.float64), starts[ranked])
    got = length.astype(np.float64)
    suspect = known & ((numel * isz != got) | (got >= 2.0**53) | (numel * isz >= 2.0**53))
    zero = np.zeros(n, dtype=bool)
    if len(flat):
        zero[np.repeat(np.arange(n), lens)[flat == 0]] = True  # numpy's shape limit holds with a 0 extent too
    found = 0
    for i in np.flatnonzero(suspect | (known & ((numel * isz >= 2.0**62) | zero))).tolist():
        if found >= LIMIT:
            break
        shape = [int(x) for x in flat[starts[i]:starts[i] + lens[i]]]
        code = int(dtype[i])
        item = r.itemsize[code]
        name = r.names[code] if r.names else str(code)
        if not numpy_can_hold(shape, item):
            out.errors.append(E.RangeError(ctx.fmt, ctx.offset_of(r.dims, i), ctx.path_of(r.dims, i), r.rule_shape or r.rule,
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


def _nbytes(r: NBytes, ctx: Context, out: Findings) -> None:
    length, dims = ctx.value(r.length), ctx.value(r.dims)
    n = len(length)
    if not n:
        return
    if isinstance(dims, tuple):  # (lengths, flat extents): a ragged numpy column
        _nbytes_flat(r, ctx, out, length, dims)
        return
    if not (isinstance(dims, np.ndarray) and dims.ndim == 2):
        _nbytes_ragged(r, ctx, out, length, dims)
        return
    dtype = ctx.value(r.dtype)
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
            out.errors.append(E.RangeError(ctx.fmt, ctx.offset_of(r.dims, i), ctx.path_of(r.dims, i),
                                           r.rule_shape or r.rule, f"no array has the shape {shape}"))
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
    if isinstance(r, Records):
        inside = f"the section ending at `{r.end}`" if r.end is not None else "the file"
        return (f"`{r.count}` {record_of(r.record).name} records (variable size) follow back to back from "
                f"`{r.at}`; each parses inside {inside}")
    if isinstance(r, Zeros):
        return f"the bytes [`{r.start}`, `{r.end}`) are zero ({r.what})"
    if isinstance(r, Fits):
        counts = " + ".join(f"`{c}` x smallest {record_of(rec).name} ({record_of(rec).min_size()} bytes)"
                            for c, rec in r.counts)
        return f"{counts} <= the bytes after `{r.at}` (checked before anything is parsed)"
    if isinstance(r, Size):
        return f"`{r.name}` = `{r.count}` x element size of `{r.dtype}` (derived)"
    if isinstance(r, Disjoint):
        return f"no two rows' [`{r.offset}`, `{r.offset}` + `{r.length}`) overlap"
    if isinstance(r, RefersTo):
        return f"every `{r.column}` names an existing {r.target} (its length: `{r.length_as}`)"
    if isinstance(r, Aligned):
        return f"every `{r.column}` is a multiple of `{r.n}`"
    if isinstance(r, Tiles):
        return (f"in offset order the rows' [`{r.offset}`, + `{r.length}`) tile [`{r.start}`, `{r.end}`) exactly "
                "(no gap, no overlap, nothing after)")
    if isinstance(r, DeclaresSize):
        return f"`{r.field}` equals the file's length (a shorter file is truncated)"
    if isinstance(r, Ordered):
        return " <= ".join(f"`{t}`" for t in r.terms)
    if isinstance(r, Region):
        lo = f"`{r.lo}` <= " if r.lo is not None else ""
        return (f"every row: {lo}`{r.offset}` and `{r.offset}` + `{r.length}` <= `{r.hi}` (no wrap-around)"
                + (" (an empty row may start anywhere)" if r.empty_anywhere else "")
                + (f"; the start rule is `{r.rule_lo}`" if r.rule_lo else ""))
    if isinstance(r, Unique):
        return f"no two rows share `{r.column}`"
    if isinstance(r, Member):
        return f"every `{r.column}` is one of {', '.join(str((r.names or {}).get(v, v)) for v in r.values)}"
    if isinstance(r, (Bound, Equal, Clear)):
        when = "" if r.when is None else f" where {_describe_condition(r.when)}"
        if isinstance(r, Clear):
            return f"every row{when}: `{r.column}` has none of the bits 0x{r.bits:x}"
        other = r.most if isinstance(r, Bound) else r.other
        other = (f"{other.base} + {other.per} x `{other.term}`" if isinstance(other, Affine) else
                 f"{other:,}" if isinstance(other, int) else f"`{other}`")
        return f"every row{when}: `{r.column}` {'<=' if isinstance(r, Bound) else '='} {other}"
    if isinstance(r, NBytes):
        dims = f"`{r.dims}`[:`{r.rank}`]" if r.rank else f"`{r.dims}`"
        skip = f" (rows of rank <= {r.max_rank})" if r.max_rank is not None else ""
        item = f" x element size of `{r.dtype}`" if r.dtype is not None else ""
        return f"`{r.length}` = product({dims}){item}{skip}"
    return _describe_presence(r)


def _describe_condition(c) -> str:
    if isinstance(c, In):
        vals = ", ".join(v.decode("ascii", "replace") if isinstance(v, bytes) else str(v) for v in c.values)
        return f"`{c.column}` is one of {vals}"
    return f"`{c.column}` {'has' if isinstance(c, Has) else 'lacks'} the bits 0x{c.bits:x}"


def _presence(r, ctx: Context, out: Findings) -> None:
    """Present (some row has the value) and Known (every row's value is known, else a warning)."""
    tab = r.column.partition(".")[0]
    n = ctx.tables[tab].n
    if isinstance(r, Present):
        if not _where(In(r.column, (r.value,)), ctx, n).any():
            out.errors.append(E.StructureError(ctx.fmt, ctx.value(r.at) if r.at is not None else None,
                                               ctx.tables[tab].path, r.rule,
                                               f"no {r.what}" if r.what else f"no row has {r.column} {r.value!r}"))
        return
    for i in np.flatnonzero(~_where(In(r.column, r.values), ctx, n)).tolist():
        out.errors.append(E.StructureError(ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.column, i), r.rule,
                                           f"unknown {r.column.partition('.')[2]}: readers skip it",
                                           severity="warning"))


def _describe_presence(r) -> str:
    def show(v):
        return v.decode("ascii", "replace") if isinstance(v, bytes) else str(v)
    if isinstance(r, Present):
        return f"some row's `{r.column}` is {show(r.value)}"
    if isinstance(r, Known):
        return (f"every `{r.column}` is one of {', '.join(show(v) for v in r.values)} (else a warning: readers "
                "skip the row)")
    if isinstance(r, Text):
        return f"every `{r.column}` is UTF-8 text without NUL (decoded as `{r.name}`)"
    if isinstance(r, Gaps):
        return (f"the bytes of [`{r.start}`, `{r.end}`) outside every row's [`{r.offset}`, + `{r.length}`) are zero "
                f"(every row counts, readable or not)")
    return repr(r)


def _gaps(r: Gaps, ctx: Context, buf, out: Findings) -> None:
    """Gaps: the uncovered bytes of [start, end) are zero (rows in offset order, exact integers)."""
    tab = r.offset.partition(".")[0]
    off, ln = ctx.value(r.offset), ctx.value(r.length)
    start, end = int(ctx.value(r.start)), int(ctx.value(r.end))
    name = ctx.row_paths.get(tab, lambda i: f"{ctx.tables[tab].path}[{i}]")
    regions, pos = [], start
    for i, o, n in sorted(zip(range(len(off)), off.tolist(), ln.tolist()), key=lambda x: x[1]):
        if o > pos:
            regions.append((pos, o, f"gap before {name(i)}"))
        pos = max(pos, o + n)
    regions.append((pos, end, r.tail))
    covered = getattr(ctx, "covered", None) or (lambda a, b: [(a, b)] if a < b else [])
    unread = 0
    for a0, b0, what in regions:
        a0, b0 = min(a0, ctx.size), min(b0, ctx.size)
        here = covered(a0, b0)
        unread += max(b0 - a0, 0) - sum(b - a for a, b in here)
        for a, b in here:
            nz = np.flatnonzero(np.frombuffer(buf, np.uint8, b - a, a))
            if nz.size:
                out.errors.append(E.ReservedError(ctx.fmt, a + int(nz[0]), what, r.rule,
                                                  f"{nz.size} non-zero byte(s) in [{a}, {b}); padding must be zero"))
    ctx.values["unchecked_padding"] = ctx.values.get("unchecked_padding", 0) + unread


def _text(r: Text, ctx: Context, out: Findings) -> None:
    """Text: decode every row's bytes (UTF-8, no NUL) into the derived column; report the rest."""
    tab = r.column.partition(".")[0]
    col = ctx.value(r.column)
    text = []
    for i, raw in enumerate(col):
        if raw is None:
            text.append(None)
            continue
        try:
            s = raw.decode("utf-8")
            if "\x00" in s:
                raise UnicodeError("NUL inside the text")
        except UnicodeError as ex:
            out.errors.append(E.DecodeError(ctx.fmt, ctx.offset_of(r.column, i), ctx.path_of(r.name, i), r.rule,
                                            f"not valid UTF-8 text: {ex}"))
            s = raw.decode("utf-8", "replace")
        text.append(s)
    ctx.tables[tab].cols[r.name.partition(".")[2]] = text
