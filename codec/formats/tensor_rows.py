"""The tensors of a format whose header lists them in a form the reader decodes itself (a JSON
object, key/value records): one row per tensor -- name, element type code, shape, where its
bytes begin and how many there are -- as the columns the relation engine checks, the rows it
leaves readable, and the lookup by name.  Format-blind: a format gives its table's name, its
declared relations and how its findings name a row."""
from __future__ import annotations

from itertools import chain
from typing import Callable, Sequence

import numpy as np

from ..engine import relations
from ..model import NUMPY_MAX_DIMS, Reader, Report, TensorInfo, checks_open, closed_error, numpy_shape
from ..io.integrity import first_odd_bool, odd_bool_message
from ..io.writer_io import PIECE

_U8 = np.dtype("u1")


def _u64(xs: list) -> np.ndarray:
    return np.fromiter(xs, dtype=np.uint64, count=len(xs))


def ragged(shapes: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """A column of shapes of any ranks: (rank of each row, every extent back to back)."""
    lens = np.fromiter(map(len, shapes), dtype=np.int64, count=len(shapes))
    flat = np.fromiter(chain.from_iterable(shapes), dtype=np.uint64, count=int(lens.sum()))
    return lens, flat


class TensorRows:
    """The rows (``names``, element type ``codes``, ``shapes``, ``begins``, ``nbytes``) of a
    tensor table; ``begins`` are relative to ``base`` (where the data starts in the file).
    :meth:`check` evaluates the declared relations over them; ``bad`` are then the rows that
    cannot be read and ``index`` maps each name to its first row."""

    def __init__(self, names: list, codes: list, shapes: list, begins: list, nbytes: list, base: int = 0):
        self.names, self.codes, self.shapes, self.begins, self.nbytes = names, codes, shapes, begins, nbytes
        self.base = base
        self.bad: set[int] = set()
        self.index: dict[str, int] = dict(zip(names, range(len(names))))
        if len(self.index) != len(names):  # (a name listed twice: its first row)
            self.index = {}
            for i, name in enumerate(names):
                self.index.setdefault(name, i)

    def __len__(self) -> int:
        return len(self.names)

    def columns(self, named: dict | None = None) -> dict:
        """``name``, ``dtype``, ``shape`` (ragged), ``begin`` and ``nbytes`` (terms
        ``<table>.<column>``), each under the name ``named`` gives it (a format's own word)."""
        named = named or {}
        cols = {"name": self.names, "dtype": _u64(self.codes), "shape": ragged(self.shapes),
                "begin": _u64(self.begins), "nbytes": _u64(self.nbytes)}
        return {named.get(k, k): v for k, v in cols.items()}

    def check(self, decls, fmt: str, size: int, buf, table: str, path: str, at: Callable[[int, str | None], int],
              *, label: Callable[[int], str] | None = None, values: dict | None = None,
              columns: dict | None = None, named: dict | None = None, called: dict | None = None) -> list:
        """The findings of the relations ``decls`` over this table (named ``table``, its rows
        ``path[label(i)]``, at ``at(row, field)``; its columns renamed by ``named``), with the
        ``$`` ``values`` they use and any more ``columns``; ``called``: what findings call a
        column the file has under another name (the field it is derived from); the rows a finding makes unreadable
        join ``bad``, and so do the rows whose bytes are not all in the file (the relations say
        why)."""
        cols = self.columns(named)
        ctx = relations.Context(fmt, size)
        ctx.add_table(table, path, {**cols, **(columns or {})}, len(self), 0, at, label=label, called=called)
        ctx.values.update(values or {})
        found = relations.check(decls, ctx, buf)
        self.bad |= found.bad.get(table, set())
        named = named or {}
        begin, nbytes = cols[named.get("begin", "begin")], cols[named.get("nbytes", "nbytes")]
        room = np.uint64(max(size - self.base, 0))
        self.bad.update(np.flatnonzero((begin > room) | (nbytes > room - np.minimum(begin, room))).tolist())
        return found.errors


class RowsReader(Reader):
    """The base of a reader whose tensors are the rows of one :class:`TensorRows`
    (``self.rows``, set and checked by the subclass's ``_parse``): it lists them, describes each
    one, and returns each as a read-only zero-copy view.  Class attributes: ``numpy``, element
    type code -> numpy dtype (a code without one is packed: its bytes come back as uint8);
    ``dtype_names``, code -> the format's name of it.  Subclasses say where a row is
    (:meth:`_where`) and may add facts about it (:meth:`_extra`)."""
    numpy: dict = {}
    dtype_names: dict = {}
    rows: TensorRows

    @property
    def _index(self) -> dict:
        return self.rows.index

    def _where(self, i: int) -> tuple[int | None, str, str]:  # pragma: no cover - overridden
        """(offset, path, rule) of row ``i``: where the error of an unreadable row points."""
        raise NotImplementedError

    def _extra(self, i: int) -> dict:
        """Format facts about row ``i`` (``TensorInfo.extra``) beside its dtype name."""
        return {}

    def _checked(self) -> str:  # pragma: no cover - overridden
        """What a structure check verified, in words (the report's ``checked`` line)."""
        raise NotImplementedError

    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        """Everything is checked at open; ``full`` has nothing more to verify: these formats
        store no checksum of the data (the report says so)."""
        rep = self._report("full" if full else "structure")
        rep.checked.append(self._checked())
        if full:
            rep.notes.append(f"{self.FMT} stores no checksum: the data cannot be verified")
            if self.BOOL_RULE is not None:
                rep.add(self._odd_bools())
        return self._finish(rep)

    #: the rule (a warning) of a bool element that is not the byte 0 or 1, for a format that
    #: allows any byte; None: not checked
    BOOL_RULE: str | None = None

    def _odd_bools(self) -> list:
        """A finding for each bool tensor holding a byte other than 0 or 1, at the first one."""
        from .. import errors as E
        r, out = self.rows, []
        for i, name in enumerate(r.names):
            if i in r.bad or self.numpy.get(r.codes[i]) != np.bool_:
                continue
            flat = self._src.array(_U8, r.nbytes[i], r.base + r.begins[i])
            odd = first_odd_bool(flat[s:s + PIECE] for s in range(0, flat.size, PIECE))
            if odd is not None:
                out.append(E.ConstraintError(self.FMT, r.base + r.begins[i] + odd[0], f"{self._where(i)[1]}.data",
                                             self.BOOL_RULE, odd_bool_message(*odd)))
        return out

    def _info(self, i: int) -> TensorInfo:
        r = self.rows
        if i in r.bad:
            raise self._unreadable(repr(r.names[i]), *self._where(i))
        return TensorInfo(r.names[i], self.numpy.get(r.codes[i], _U8), r.shapes[i], r.base + r.begins[i], r.nbytes[i],
                          {"dtype_name": self.dtype_names[r.codes[i]], **self._extra(i)})

    @checks_open
    def tensor(self, name: str) -> np.ndarray:
        """A read-only zero-copy view (a packed tensor: its bytes, uint8).  Past numpy's 64
        dimensions its size-1 axes are dropped, or it comes back flat (the same bytes;
        ``tensors[name].shape`` keeps the file's shape)."""
        if self._closed:
            raise closed_error(self, "tensor")
        r = self.rows
        i = r.index.get(name)
        if i is None or i in r.bad:
            self.tensors[name]  # (the NotFoundError, or why the tensor cannot be read)
        dt = self.numpy.get(r.codes[i])  # (straight from the row: no TensorInfo for a read)
        n = r.nbytes[i]
        if dt is None:
            return self._src.array(_U8, n, r.base + r.begins[i])
        shape = r.shapes[i]
        if n and len(shape) <= NUMPY_MAX_DIMS:  # (the relations hold: nbytes is the shape's)
            return self._src.view(dt, shape, r.base + r.begins[i], n)
        return self._src.array(dt, n // dt.itemsize, r.base + r.begins[i]).reshape(numpy_shape(shape))
