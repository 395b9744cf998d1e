"""STB v0.1: reader (strict by default), validation and writer.

Records are declared in :mod:`schemas.stb`; the descriptor table is one zero-copy numpy view
checked with the engine's vectorised rules.  This module adds the relations of section 7
(data_offset bounds, every tensor inside the file without u64 wrap-around, after data_offset),
the tensor-id and size rules of DECISIONS.md, and shape resolution: rank <= 3 from dims, rank >
3 through a caller-supplied shape table (dims[0] is the index), COL_MAJOR as a Fortran view.

``strict=False`` exists for files the KHANARY reference writer produces (tensors packed back to
back): it turns STB-7.4c (64-aligned tensor offsets) and unknown layouts into warnings.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..schemas import stb as S
from ..schemas.stb import DType, Layout, Rule

from .. import errors as E
from ..engine import relations
from ..engine.dtypes import DTypeTable
from ..engine.records import record_of
from ..io.writer_io import LazyTensor, as_array
from ..model import Reader, Report, StopCheck, TensorInfo, checks_open, closed_error, numpy_can_hold
from ..engine.relations.plan import after, place
from ..io.tensor_writer import write_placed

FMT = S.FORMAT
HEADER = record_of(S.Header)
DESC = record_of(S.Descriptor)
DTYPES = DTypeTable(S.DTYPES, FMT)
NP_DTYPES = DTYPES.numpy
_LAYOUTS = frozenset(Layout)
_DTYPE_CODES = np.array(sorted(NP_DTYPES), dtype=np.uint64)


_err = E.for_format(FMT)

#: the one rule for a tensor's name, read and written: its tensor_id 0..255 in canonical
#: decimal ("0", "7", "255"; no sign, no leading zero).  The reader names tensors so; the
#: writer takes such a name or the int itself.
ID_NAME = "0|[1-9][0-9]?|1[0-9][0-9]|2[0-4][0-9]|25[0-5]"
_ID_NAME = re.compile(ID_NAME)


def tensor_id(key) -> int:
    """The tensor_id a writer's key names: an int 0..255, or its canonical decimal text."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
        return int(key)
    if isinstance(key, str) and _ID_NAME.fullmatch(key):
        return int(key)
    raise E.UsageError(f"STB tensors are named by tensor_id: an int 0..255 or its decimal text "
                       f"('0'..'255', as the reader names them), not {key!r}")


def _shape_table(table) -> dict[int, tuple]:
    """Accepts {index: shape}, [shape, ...] or the manifest's [{"index", "dims"}, ...]."""
    if table is None:
        return {}
    if isinstance(table, Mapping):
        items = table.items()
    else:
        items = []
        for i, entry in enumerate(table):
            if isinstance(entry, Mapping):
                items.append((entry["index"], entry["dims"]))
            else:
                items.append((i, entry))
    out = {}
    for k, shape in items:
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise E.UsageError(f"shape table entry {k}: negative extent in {shape}")
        out[int(k)] = shape
    return out


class StbReader(Reader):
    """Reads an STB file from a path (mmap) or a buffer.  Tensors are keyed by their
    tensor_id as a string ("0".."255"); ``tensor(3)`` also works."""
    format = "stb"
    FMT = FMT

    def __init__(self, source, *, strict: bool = True, shape_table=None, _collect: bool = False):
        self.strict = strict
        self.shape_table = _shape_table(shape_table)
        self.header: dict = {}
        self._table: np.ndarray | None = None
        self._index: dict[str, int] = {}
        self._bad: set[int] = set()
        self._open(source, _collect)

    # ------------------------------------------------------------------ structure
    def _parse(self, v):
        buf, size = self._src.buf, self._src.size
        h = self._read_header(v, HEADER, Rule.TRUNCATED, fatal=(E.MagicError, E.UnsupportedVersionError, E.LimitError))
        # the rules between fields are declared in schemas.stb.RELATIONS
        ctx = self._layout = relations.Context(FMT, size, h, HEADER)
        found = relations.check(S.RELATIONS, ctx, buf)
        if found.stopped:
            v.extend(found.errors)
            raise StopCheck
        # (a copy: at most 256 descriptors, and no view keeps the file mapped after close)
        t = self._table = ctx.tables[DESC.name].view.copy()
        v.extend(DESC.check_table(t, S.HEADER_SIZE, "tensors"))
        v.extend(found.errors)
        self._bad = set(found.bad.get(DESC.name, ()))
        rank = t["rank"]
        readable = np.isin(t["dtype"], _DTYPE_CODES) & (rank <= S.MAX_RANK)
        self._bad.update(np.flatnonzero(~readable).tolist())  # (their field constraints report it)
        if self.shape_table:
            for i in np.flatnonzero(readable & (rank > S.DIRECT_RANK)).tolist():
                e = self._shape_problem(i)
                if e is not None:
                    v.append(e)
        for i, tid in enumerate(t["tensor_id"].tolist()):
            self._index.setdefault(str(tid), i)  # (a repeated id: the first row)

    def _shape_problem(self, i: int) -> E.FormatError | None:
        t = self._table[i]
        rank, key = int(t["rank"]), int(t["dims"][0])
        base = S.HEADER_SIZE + i * S.DESCRIPTOR_SIZE
        shape = self.shape_table.get(key)
        if shape is None or len(shape) != rank:
            have = "no entry" if shape is None else f"an entry of rank {len(shape)}"
            return _err(E.StructureError, base + DESC.by_name["dims"].offset, f"tensors[{i}].dims[0]", Rule.SHAPE,
                        f"rank {rank} tensor {int(t['tensor_id'])} needs shape table entry {key}; the table has {have}")
        want = math.prod(shape) * S.DTYPE_ITEMSIZE[int(t["dtype"])]
        if not numpy_can_hold(shape, S.DTYPE_ITEMSIZE[int(t["dtype"])]):
            return _err(E.RangeError, base + DESC.by_name["dims"].offset, f"tensors[{i}].dims[0]", Rule.SIZE,
                        f"shape table entry {key} {list(shape)} is no array shape for {S.DTYPE_NAMES[int(t['dtype'])]}")
        if want != int(t["size_bytes"]):
            return _err(E.StructureError, base + DESC.by_name["size_bytes"].offset, f"tensors[{i}].size_bytes", Rule.SIZE,
                        f"shape {list(shape)} needs {E.show_int(want)} bytes (got {int(t['size_bytes'])})")
        return None

    # ------------------------------------------------------------------ reading
    def _key(self, name) -> str:
        return str(int(name)) if isinstance(name, (int, np.integer)) else name

    def shape_of(self, i: int) -> tuple:
        t = self._table[i]
        rank = int(t["rank"])
        if rank <= S.DIRECT_RANK:
            return tuple(int(d) for d in t["dims"][:rank])
        e = self._shape_problem(i)
        if e is not None:
            raise e.with_source(self.source)
        return self.shape_table[int(t["dims"][0])]

    def _info(self, i: int) -> TensorInfo:
        t = self._table[i]
        tid = int(t["tensor_id"])
        if i in self._bad:
            raise self._unreadable(str(tid), S.HEADER_SIZE + i * S.DESCRIPTOR_SIZE, f"tensors[{i}]", Rule.TENSOR_BOUNDS)
        dt, layout = int(t["dtype"]), int(t["layout"])
        shape = self.shape_of(i)
        return TensorInfo(str(tid), NP_DTYPES[DType(dt)], shape, int(t["offset"]), int(t["size_bytes"]),
                          {"dtype_name": S.DTYPE_NAMES[DType(dt)], "tensor_id": tid, "layout": layout,
                           "rank": int(t["rank"]), "dims": [int(d) for d in t["dims"]]})

    def __contains__(self, name) -> bool:
        return self._key(name) in self._index

    @checks_open
    def tensor(self, name) -> np.ndarray:
        """Read-only zero-copy view; COL_MAJOR comes back as a Fortran-ordered array of the
        stored shape.  Raises a typed error for a rank > 3 tensor without a shape table entry
        and for an unknown layout."""
        if self._closed:
            raise closed_error(self, "tensor")
        info = self.tensors[self._key(name)]
        layout = info.extra["layout"]
        if layout not in _LAYOUTS:
            i = self._index[info.name]
            raise _err(E.EnumError, S.HEADER_SIZE + i * S.DESCRIPTOR_SIZE + DESC.by_name["layout"].offset,
                       f"tensors[{i}].layout", Rule.LAYOUT, f"layout {layout} is unsupported").with_source(self.source)
        if info.nbytes and layout != Layout.COL_MAJOR:
            return self._src.view(info.dtype, info.shape, info.offset, info.nbytes)
        a = self._src.array(info.dtype, info.nbytes // info.dtype.itemsize, info.offset)
        return a.reshape(info.shape, order="F" if layout == Layout.COL_MAJOR else "C")

    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        rep = self._report("full" if full else "structure")
        if self._table is not None:
            rep.checked.append(f"header and {len(self._table)} descriptors (section 7{'' if self.strict else ', relaxed'})")
            deep = [i for i in self._index.values() if int(self._table[i]["rank"]) > S.DIRECT_RANK]
            if deep and not self.shape_table:
                rep.notes.append(f"{len(deep)} tensor(s) of rank > 3 need a shape table to be read (shape_table=)")
        if full:
            rep.notes.append("STB stores no checksum: the data region cannot be verified")
        return self._finish(rep)

    UNRESOLVED_SHAPE_RULES = (Rule.SHAPE,)

    def inspect_notes(self, t: TensorInfo) -> dict:
        lay = t.extra["layout"]
        return {"layout": Layout(lay).name.lower() if lay in _LAYOUTS else f"unknown({lay})"}

    def describe(self) -> dict:
        d = super().describe()
        d.update({"version": str(self.header.get("version")), "file_size": self._src.size,
                  "data_offset": self.header.get("data_offset"), "strict": self.strict})
        return d


validate_file = StbReader.validate_file


# =============================================================================== writer
@dataclass
class StbTensor:
    """A tensor with its STB layout; ``tensor_id`` defaults to its position."""
    array: Any
    layout: int = Layout.ROW_MAJOR
    tensor_id: int | None = None


class StbWritten(str):
    """The path written -- a ``str``, as every writer returns -- with ``shape_table``: the shape
    table entries of the rank > 3 tensors (dims[0] of such a tensor is its index here), which
    a reader needs (``StbReader(path, shape_table=...)``)."""
    shape_table: list

    def __new__(cls, path: str, shape_table: list | None = None):
        self = super().__new__(cls, path)
        self.shape_table = list(shape_table or [])
        return self

    def __reduce__(self):
        return StbWritten, (str(self), self.shape_table)

    @property
    def path(self) -> str:
        return str(self)


def write_stb(path, tensors: Mapping | Sequence, *, progress: bool | None = None) -> StbWritten:
    """Write an STB v0.1 file: deterministic, atomic, streamed, every tensor 64-aligned.

    ``tensors``: a sequence (tensor_id = position) or a mapping tensor_id -> array/StbTensor,
    the tensor_id an int 0..255 or its decimal text (the names the reader gives: ``ID_NAME``).
    Arrays must be float32, float16, int8 or int32 (big-endian input is converted), rank 0..8; a
    :class:`codec.io.writer_io.LazyTensor` is loaded when it is written, and dropped after.
    COL_MAJOR tensors are stored in Fortran order and read back as the same array.  Returns the
    shape table for tensors of rank > 3 (give it to the reader as ``shape_table=``).
    """
    if isinstance(tensors, Mapping):
        items = [(tensor_id(k), t) for k, t in tensors.items()]
    elif isinstance(tensors, (list, tuple)):
        items = [(i, t) for i, t in enumerate(tensors)]
    else:
        raise E.UsageError(f"STB tensors are a list (tensor_id = position) or a mapping tensor_id -> array "
                           f"(got {type(tensors).__name__})")
    if len(items) > S.MAX_TENSORS:
        raise E.UsageError(f"STB holds at most {S.MAX_TENSORS} tensors (unique u8 ids); got {len(items)}")
    prepared, ids = [], set()
    shape_table: list[tuple] = []
    for key, t in items:
        spec = t if isinstance(t, StbTensor) else StbTensor(t)
        tid = spec.tensor_id if spec.tensor_id is not None else key
        if not isinstance(tid, (int, np.integer)) or isinstance(tid, bool):
            raise E.UsageError(f"tensor_id must be an int 0..255 (got {type(tid).__name__} {tid!r})")
        tid = int(tid)
        if not 0 <= tid <= 255 or tid in ids:
            raise E.UsageError(f"tensor_id {tid} is out of 0..255 or used twice")
        ids.add(tid)
        a = spec.array if isinstance(spec.array, LazyTensor) else as_array(f"tensor {tid}", spec.array)
        code = DTYPES.code_of(a.dtype)
        if code is None:
            raise E.UsageError(f"tensor {tid}: STB stores float32, float16, int8 and int32 (got {a.dtype})")
        if a.ndim > S.MAX_RANK:
            raise E.UsageError(f"tensor {tid}: STB rank is at most {S.MAX_RANK} (got {a.ndim})")
        if spec.layout not in _LAYOUTS or isinstance(spec.layout, bool):
            raise E.UsageError(f"tensor {tid}: layout must be one of {', '.join(f'{int(v)} ({v.name})' for v in Layout)}"
                               f" (got {spec.layout!r})")
        layout = Layout(spec.layout)
        if a.ndim <= S.DIRECT_RANK:
            if any(d > 0xFFFFFFFF for d in a.shape):
                raise E.UsageError(f"tensor {tid}: extents must fit u32")
            dims = list(a.shape) + [0] * (3 - a.ndim)
        else:
            dims = [len(shape_table), 0, 0]
            shape_table.append(tuple(a.shape))
        stored = a  # (COL_MAJOR: Fortran order, the C order of the transpose; a LazyTensor's when loaded)
        if layout == Layout.COL_MAJOR:
            stored = a.T if not isinstance(a, LazyTensor) else \
                LazyTensor(a.dtype, a.shape[::-1], lambda a=a, tid=tid: a.materialise(f"tensor {tid}").T)
        prepared.append((tid, code, a.ndim, layout, dims, a.nbytes, stored))
    n = len(prepared)
    data_offset = after(S.RELATIONS, "Header.data_offset", S.HEADER_SIZE + S.DESCRIPTOR_SIZE * n, records=S.RECORDS)
    offsets, file_size = place(S.RELATIONS, "Descriptor.offset", [p[5] for p in prepared], data_offset)
    descs = [{"tensor_id": tid, "dtype": int(code), "rank": rank, "layout": int(layout), "offset": off,
              "size_bytes": nbytes, "dims": dims}
             for (tid, code, rank, layout, dims, nbytes, _), off in zip(prepared, offsets)]
    head = HEADER.build({"tensor_count": n, "data_offset": data_offset, "file_size": file_size})
    table = b"".join(DESC.build(d) for d in descs)
    write_placed(path, head + table, [(off, p[6], str(p[0])) for p, off in zip(prepared, offsets)], file_size,
                 progress=progress)
    return StbWritten(os.fspath(path), shape_table)


# =============================================================================== registry
from ..registry import Capabilities, FormatDescriptor  # noqa: E402

def _demo(out_dir: str, model: dict) -> list:
    """The sample as STB holds it (float32, float16, int8, int32; ids are positions), the head
    stored column-major to show the layout flag."""
    import ml_dtypes
    from .hooks import show
    out = []
    for n, a in model.items():
        if a.dtype in (ml_dtypes.bfloat16, np.float64):
            a = a.astype(np.float32)
        elif a.dtype in (np.int64, np.bool_):
            a = a.astype(np.int32)
        out.append(StbTensor(a, layout=1 if n == "head.weight" else 0))
    p = os.path.join(out_dir, "tiny-mlp.stb")
    write_stb(p, out)
    return show(p)


DESCRIPTOR = FormatDescriptor("stb", S, StbReader, write_stb, magic=S.MAGIC, demo=_demo,
                              # (a rank above 3 needs a shape table the file does not hold)
                              capabilities=Capabilities(DTYPES.array_names,
                                                        max_rank=S.DIRECT_RANK,
                                                        names=ID_NAME,
                                                        names_doc="a tensor id 0..255", ids=True,
                                                        max_tensors=S.MAX_TENSORS, metadata="none", lazy=True),
                              summary="SVG-Tensor Binary v0.1 (with its KHANARY glyph wiring)")
