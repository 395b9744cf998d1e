"""What relations are evaluated over: a file's header and tables (:class:`Context`), what
they find (:class:`Findings`), and the helpers every evaluator shares (conditions, rows that
cannot be read)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ...schemas.dsl import FILE_END, Affine, Aligned, Has, In, Table

from ... import errors as E
from ..records import Record, record_of

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

    def span(self) -> tuple[int, int] | None:
        """[start, end) of the table's bytes: from its first row to where it ends (None: no row)."""
        return (int(self.field_at(0, None)), int(self.end)) if self.n else None


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


@lru_cache(maxsize=None)
def _field_named(term: str) -> tuple[str, str] | None:
    """(record, field) of a term that names a field; None for FILE_END, an ``.END`` or a
    ``$value`` (a finding names the field of each bad row: split once per term)."""
    if term == FILE_END or term.endswith(".END") or term.startswith("$"):
        return None
    rec, _, name = term.partition(".")
    return rec, name


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
        #: table -> {column: what findings call it}: a derived column named by the field it comes from
        self.called: dict = {}

    def detach(self) -> None:
        """Copies of the tables' columns in place of views of the file's bytes: a closed
        reader keeps what the tables say, not the file's mapping."""
        def own(c):
            return c.copy() if isinstance(c, np.ndarray) and c.base is not None else c
        for t in self.tables.values():
            b = t.cols.base  # (a record view, or a dict of columns)
            t.cols.base = {k: own(c) for k, c in b.items()} if isinstance(b, dict) else own(b)
            t.cols.extra = {k: own(c) for k, c in t.cols.extra.items()}

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
            return self.hat + self.hrec.size if name == "END" else int(self.header[name])
        t = self.tables[rec]
        return t.end if name == "END" else t.cols[name]

    def offset_of(self, term, row: int | None = None) -> int | None:
        """Absolute offset of the field a term names (of row ``row`` for a column)."""
        named = _field_named(term) if isinstance(term, str) else None
        if named is None:
            return None
        rec, name = named
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
        name = self.called.get(rec, {}).get(name, name)
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
            return f"the {term[:-4]}" if self.hrec is not None and term[:-4] == self.hrec.name else \
                f"the end of the {term[:-4]} table"
        if isinstance(term, str) and term.startswith("$"):
            return "the " + term[1:].replace("_", " ")
        if isinstance(term, str) and self.hrec is not None and term.startswith(self.hrec.name + "."):
            return term.partition(".")[2]
        return str(term)

    # ------------------------------------------------------------------ tables
    def add_table(self, name: str, path: str, columns, n: int, end: int, field_at, label=None,
                  row_path=None, called: dict | None = None) -> None:
        """A table the reader parsed itself (variable-size records): ``columns`` maps field
        names to numpy columns (or lists); ``field_at(row, field)`` gives a field's absolute
        offset (``field`` None: the row's start); ``end`` is where the table ends; ``label(row)``
        how findings name a row (default its index); ``called``: what findings call a column
        the file does not have by that name (a length derived from ``data_offsets``)."""
        self.tables[name] = _Tab(name, path, _Cols(columns), n, end, field_at)
        if called:
            self.called[name] = called
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


def _left_out(out: Findings, total: int) -> None:
    """After a check listed the first LIMIT of its ``total`` findings (one per row, the last
    one last): that one says how many more there are, so that counts stay exact."""
    if total > LIMIT and out.errors:
        out.errors[-1].left_out(total - LIMIT)


def _bad(out: Findings, term: str, rows) -> None:
    out.bad.setdefault(term.partition(".")[0], set()).update(int(i) for i in rows)


#: id(itemsize table) -> (the table, its codes sorted, their sizes): built once per table
_SIZE_TABLES: dict = {}


def element_sizes(itemsize: dict, dtype: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's element size under a dtype -> size table (a schema's ``DTYPE_ITEMSIZE``):
    (known: the row's dtype is in the table, sizes as float64, 0 where it is not)."""
    hit = _SIZE_TABLES.get(id(itemsize))
    if hit is None or hit[0] is not itemsize:
        codes = sorted(itemsize)
        hit = _SIZE_TABLES[id(itemsize)] = (itemsize, np.array(codes, dtype=np.uint64),
                                            np.array([itemsize[c] for c in codes], dtype=np.float64))
    _, codes, sizes = hit
    pos = np.minimum(np.searchsorted(codes, dtype), len(codes) - 1)
    known = codes[pos] == dtype
    return known, np.where(known, sizes[pos], 0.0)


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


# --------------------------------------------------------------------------- appended kinds
# conditions of rules of variable-size tables (Zeroed, Region, NBytes)
def _where_all(when, ctx: Context, n: int) -> np.ndarray:
    """The rows where every condition of ``when`` (one, a tuple, or None) holds."""
    hit = np.ones(n, dtype=bool)
    for c in (when if isinstance(when, tuple) else (when,)):
        if isinstance(c, Aligned):  # (a condition: no rule)
            hit &= (ctx.value(c.column) % np.uint64(c.n)) == 0
        elif c is not None:
            hit &= _where(c, ctx, n)
    return hit


def by_row(found: Findings) -> dict:
    """The findings of relations over rows, by (table path, row): ``{("tensors", 3): [...]}``,
    each row's in the order they were found (a reader reports them with that row's others)."""
    out: dict = {}
    for e in found.errors:
        table, _, rest = e.path.partition("[")
        out.setdefault((table, int(rest.partition("]")[0])), []).append(e)
    return out
