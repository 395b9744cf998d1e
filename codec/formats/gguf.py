"""GGUF (v2, v3): reader (zero-copy views; quantized tensors as their packed bytes),
validation and a streaming writer.

The header, the records of the key/value section (a pair's key and type, a string, an array's
head), the tensor info record, the value types, the ggml type traits and the rules between the
tensor infos are declared in :mod:`schemas.gguf`; the engine reads the tensor infos and the
writer builds every record from its declaration.  What is left here: walking the typed
key/value section (nested arrays of any type) with a cursor that reads those records' numbers
by the struct formats their declarations give, and checks every length and count against the
bytes left before it reads or allocates anything.
"""
from __future__ import annotations

import math
import os
import struct
from typing import Iterable, Mapping

import numpy as np

from ..schemas import gguf as S
from ..schemas.gguf import Rule, ValueType

from .. import errors as E
from ..engine import payload, relations, values
from ..engine.nesting import refuse_nesting
from .hooks import Standard
from .ggml_quants import packed_codec
from ..engine.dtypes import numpy_dtype
from ..engine.constraints import holds, violation
from ..engine.records import record_of, struct_of
from ..io.writer_io import LazyTensor, as_array, mapping_arg, named_pairs
from ..model import Packed, StopCheck, numpy_can_hold
from ..registry import Capabilities, FormatDescriptor
from ..io.sources import read_head
from .gguf_split import GgufSplits, claims, named_count, write_splits
from .multifile import one_or_several, parse_size
from .tensor_rows import RowsReader, TensorRows
from ..engine.relations.plan import place
from ..io.tensor_writer import align_up, write_placed

FMT = S.FORMAT
HEADER = record_of(S.Header)
INFO = record_of(S.TensorInfo)
KV, STRING, ARRAY = record_of(S.KeyValue), record_of(S.String), record_of(S.ArrayHead)
NP_VALUE = {t: np.dtype(c) for t, c in S.VALUE_NUMPY.items()}
#: each value type's name in codec.engine.values' vocabulary (uint8 ... float64, bool, string)
TYPE_NAME = {t: t.name.lower() for t in ValueType}
NP_TENSOR = {code: numpy_dtype(np_name) for code, (_, _, _, np_name) in S.GGML_TYPES.items() if np_name}


_err = E.for_format(FMT)


#: each fixed-size value type (schemas.gguf.VALUE_NUMPY) as a struct, for reading one value
_ST = {t: struct_of(dt) for t, dt in NP_VALUE.items()}


#: a string's length (keys and tensor names are strings of the same declaration); an array's count
_LEN, _ACOUNT = STRING.by_name["text_length"].number, ARRAY.by_name["count"].number
#: a pair's value type and an array's element type: (how it is read, its declared constraint)
_TYPE_FIELD = {rec: (rec.by_name[name].number, rec.by_name[name].valid[0]) for rec, name in ((KV, "value_type"),
                                                                                     (ARRAY, "type"))}
#: the fewest bytes a key/value pair takes (an empty key, a one-byte number), and an element of
#: an array of strings or of arrays (an empty string, or an array's head)
_MIN_KV = KV.min_size() + min(dt.itemsize for dt in NP_VALUE.values())
_MIN_ELEMENT = min(STRING.min_size(), ARRAY.min_size())


#: what findings call a derived column: the tensor-info field it comes from
_CALLED = {"nbytes": "dims", "dim0": "dims[0]"}


def data_start(infos_end: int, alignment: int) -> int:
    """Where the data starts: the first multiple of the alignment at or after the end of the
    tensor infos (the reader's and the writer's one rule)."""
    return align_up(infos_end, alignment)


def inner_array_budget(file_size: int) -> int:
    """How many arrays the key/values of a file of ``file_size`` bytes may hold inside arrays
    (the reader's decode budget; the writer keeps to it)."""
    return payload.container_budget(file_size - S.HEADER_SIZE, S.BYTES_PER_INNER_ARRAY)


class _Cursor:
    """Reads little-endian values from ``buf[pos:end]``; every length and count is checked
    against the bytes left before anything is read or allocated (TruncatedError)."""

    def __init__(self, buf, pos: int, end: int, size: int):
        self.buf, self.pos, self.end = buf, pos, end
        # the decode budget: inner arrays (each a list built) allowed for the file's bytes
        self.size, self.inner_left = size, inner_array_budget(size)

    def need(self, n: int, path: str) -> None:
        if n > self.end - self.pos:
            raise E.TruncatedError(FMT, self.pos, path, Rule.TRUNCATED,
                                   f"needs {E.show_int(n)} bytes, {self.end - self.pos} "
                                   f"{'is' if self.end - self.pos == 1 else 'are'} left in the file",
                                   expected=n, actual=self.end - self.pos)

    def scalar(self, t: int, path: str):
        return self.number(_ST[t], path)

    def number(self, st: struct.Struct, path: str):
        if st.size > self.end - self.pos:
            self.need(st.size, path)
        v = st.unpack_from(self.buf, self.pos)[0]
        self.pos += st.size
        return v

    def string(self, path: str) -> str:
        return self.strings(1, path, single=True)[0]

    def strings(self, n: int, path: str, single: bool = False) -> list[str]:
        """``n`` strings back to back (a tight loop: vocabularies hold 10^5 of them)."""
        buf, pos, end, unpack, width = self.buf, self.pos, self.end, _LEN.unpack_from, _LEN.size
        out = []
        append = out.append
        try:
            for i in range(n):
                if end - pos < width:
                    self.pos = pos
                    self.need(width, f"{path}.length" if single else f"{path}[{i}].length")
                k = unpack(buf, pos)[0]
                pos += width
                if k > end - pos:
                    self.pos = pos
                    self.need(k, path if single else f"{path}[{i}]")
                append(str(buf[pos:pos + k], "utf-8"))
                pos += k
        except UnicodeDecodeError as e:
            raise _err(E.DecodeError, pos + e.start, path if single else f"{path}[{len(out)}]", Rule.STRING,
                       f"not UTF-8: {e.reason}") from None
        self.pos = pos
        return out

    def value_type(self, rec, path: str) -> int:
        """A value type (a pair's, or an array's elements'), checked against its declaration."""
        at, (st, c) = self.pos, _TYPE_FIELD[rec]
        t = self.number(st, path)
        if not holds(c, t):
            raise violation(FMT, c, t, at, path)
        return t

    def value(self, t: int, path: str, depth: int = 0):
        """(value, its type description in :mod:`codec.engine.values`' vocabulary)."""
        if t in _ST:
            at = self.pos
            v = self.scalar(t, path)
            if v != v:  # a NaN: its own type's numpy scalar, every payload bit kept (a float would quiet it)
                v = np.frombuffer(self.buf, NP_VALUE[t], 1, at)[0]
            return v, TYPE_NAME[t]
        if t == ValueType.STRING:
            return self.string(path), "string"
        if t == ValueType.ARRAY:
            if depth >= S.MAX_ARRAY_DEPTH:
                raise _err(E.LimitError, self.pos, path, Rule.VALUE_TYPE,
                           f"arrays nest deeper than MAX_ARRAY_DEPTH ({S.MAX_ARRAY_DEPTH})")
            et = self.value_type(ARRAY, f"{path}.type")
            n = self.number(_ACOUNT, f"{path}.count")
            if et in NP_VALUE:  # numbers: one zero-copy read, bounded first
                dt = NP_VALUE[et]
                self.need(n * dt.itemsize, path)
                a = np.frombuffer(self.buf, dt, n, self.pos)
                self.pos += n * dt.itemsize
                return a, f"array[{TYPE_NAME[et]}]"
            self.need(n * _MIN_ELEMENT, path)  # (bounded before anything is read for them)
            if et == ValueType.STRING:
                return self.strings(n, path), "array[string]"
            if et == ValueType.ARRAY:
                self.inner_left -= n
                if self.inner_left < 0:
                    raise _err(E.LimitError, self.pos, path, Rule.VALUE_TYPE,
                               f"{E.show_int(n)} more arrays go over the decode budget of the key/values "
                               f"({E.show_int(inner_array_budget(self.size))} inner arrays for a file of "
                               f"{E.show_int(self.size)} bytes: "
                               f"one per BYTES_PER_INNER_ARRAY ({S.BYTES_PER_INNER_ARRAY}) beyond the allowance)")
            items = [self.value(et, f"{path}[{i}]", depth + 1) for i in range(n)]
            kinds = {d for _, d in items}
            desc = ("array[string]" if et == ValueType.STRING else "array" if not items else
                    f"array[{kinds.pop()}]" if len(kinds) == 1 else "array(" + ",".join(d for _, d in items) + ")")
            return [x for x, _ in items], desc
        raise AssertionError(f"value type {t} passed value_type()")  # (unreachable: checked when read)


class GgufReader(RowsReader):
    """Reads a GGUF v2/v3 file from a path (mmap) or a buffer.  ``metadata``: key -> value
    (numbers, text, numpy arrays for arrays of numbers, lists otherwise; a NaN is a numpy
    scalar of its type, its payload bits kept); tensors of plain
    types come back as zero-copy numpy views (numpy's shape: GGUF's dims reversed), quantized
    ones as their packed bytes (``extra``: ggml type, block size, bytes per block)."""
    format = "gguf"
    FMT = FMT
    NATIVE_DTYPES = True  # (inspect names tensor types as GGUF's users know them: Q4_1, F16)
    numpy, dtype_names = NP_TENSOR, {code: t[0] for code, t in S.GGML_TYPES.items()}

    def __init__(self, source, *, strict: bool = True, _collect: bool = False):
        self.strict = strict
        self.header: dict = {}
        self._meta: dict = {}
        self.meta_types: dict[str, str] = {}
        self.rows = TensorRows([], [], [], [], [])
        self._infos = None  # the tensor infos as the engine read them (a relations table)
        self.alignment = S.DEFAULT_ALIGNMENT
        self.data_start = 0
        self._open(source, _collect)

    def _parse(self, v):
        buf, size = self._src.buf, self._src.size
        h = self._read_header(v, HEADER, Rule.TRUNCATED, fatal=(E.MagicError, E.UnsupportedVersionError, E.EnumError))
        cur = _Cursor(buf, S.HEADER_SIZE, self._src.prefix_end, size)  # (a remote file: what was read of it)
        try:
            # counts bounded by the bytes that exist before anything is read for them
            cur.need(h["kv_count"] * _MIN_KV, "Header.kv_count")
            cur.need(h["kv_count"] * _MIN_KV + h["tensor_count"] * INFO.min_size(), "Header.tensor_count")
            keys, key_at = [], []
            for i in range(h["kv_count"]):
                key_at.append(cur.pos)
                key = cur.string(f"kv[{i}].key")
                keys.append(key)
                t = cur.value_type(KV, f"kv[{key!r}].type")
                val, desc = cur.value(t, f"kv[{key!r}]")
                if key not in self._meta:  # (a key twice: the first one counts; KV_RELATIONS reports it)
                    self._meta[key] = val
                    self.meta_types[key] = desc
            ctx = relations.Context(FMT, size)
            ctx.add_table("KeyValue", "kv", {"key": keys}, len(keys), 0, lambda i, f: key_at[i])
            v.extend(relations.check(S.KV_RELATIONS, ctx, buf).errors)
            self._alignment(v)
        except E.FormatError as e:
            v.append(e)
            raise StopCheck
        self._infos = self._tensor_infos(v, h, cur.pos)
        self.data_start = data_start(self._infos.end, self.alignment)
        self._tensor_rows(v, size)

    def _tensor_infos(self, v, h: dict, at: int):
        """The tensor infos, read by the engine (schemas.gguf.INFO_RELATIONS: the records, their
        names UTF-8; then each record's own constraints): the first finding in file order ends
        the check (what follows a broken info cannot be delimited)."""
        ctx = relations.Context(FMT, self._src.size, h, HEADER)
        ctx.values["infos_at"] = at
        buf, end = self._src.buf, self._src.prefix_end  # (a remote file: what was read of it)
        view = buf if end >= len(buf) else memoryview(buf)[:end]
        try:
            found = relations.check(S.INFO_RELATIONS, ctx, view)
        finally:
            if view is not buf:
                view.release()
        infos = ctx.tables[INFO.name]
        bad = found.errors + INFO.check_rows(infos.rows, "tensors")
        if bad:
            v.append(min(bad, key=lambda e: e.offset if e.offset is not None else at))
            raise StopCheck
        return infos

    def _alignment(self, v) -> None:
        a = self._meta.get(S.ALIGNMENT_KEY)
        if a is None:
            return
        if self.meta_types[S.ALIGNMENT_KEY] != "uint32" or a <= 0 or a & (a - 1):
            v.append(_err(E.ConstraintError, None, f"kv[{S.ALIGNMENT_KEY!r}]", Rule.ALIGNMENT,
                          f"must be a u32 power of two (got {a!r} as {self.meta_types[S.ALIGNMENT_KEY]})"))
            return
        self.alignment = a

    def _tensor_rows(self, v, size: int) -> None:
        infos = self._infos
        cols = ([t.decode("utf-8") for t in infos.cols["name"]], infos.cols["type"].tolist(),
                [tuple(reversed(d)) for d in infos.cols["dims"]], infos.cols["offset"].tolist(), [])
        unfit = set()
        for i, (t, dims) in enumerate(zip(cols[1], infos.cols["dims"])):
            traits = S.GGML_TYPES.get(t)
            ok = traits is not None and not dims[0] % traits[1]  # (else a relation below reports it)
            if ok and not numpy_can_hold(dims, traits[2]):
                v.append(_err(E.RangeError, infos.field_at(i, None), f"tensors[{i}].dims", Rule.DIMS,
                              f"{traits[0]}{list(dims)}: not a shape an array can have"))
                ok = False
            if not ok:
                unfit.add(i)
            cols[4].append(math.prod(dims) // traits[1] * traits[2] if ok else 0)
        tab = self.rows = TensorRows(*cols, self.data_start)
        # the rules between the tensor infos, declared in schemas.gguf.RELATIONS
        v.extend(tab.check(S.RELATIONS, FMT, size, self._src.buf, "Tensor", "tensors", self._field_at,
                           named={"dtype": "type", "begin": "offset"}, called=_CALLED,
                           values=dict(alignment=self.alignment, data_length=max(size - self.data_start, 0)),
                           columns={"dim0": np.array([d[0] for d in infos.cols["dims"]], dtype=np.uint64),
                                    "block": np.array([S.GGML_TYPES.get(t, (0, 1))[1] for t in tab.codes],
                                                      dtype=np.uint64)}))
        tab.bad |= unfit

    def _own_types(self) -> dict[str, str]:
        return dict(self.meta_types)

    @property
    def value_types(self) -> dict[str, str]:
        return dict(self.meta_types)

    def _field_at(self, i: int, f: str | None) -> int:
        """Where a field of tensor info ``i`` is (its size and first extent: its dims; a field
        the info does not have: where the info starts)."""
        f = _CALLED.get(f, f or "").partition("[")[0]
        return self._infos.field_at(i, f if f in INFO.by_name else None)

    def _where(self, i: int) -> tuple:
        return self._infos.field_at(i, None), f"tensors[{i}]", Rule.BOUNDS

    def _extra(self, i: int) -> dict:
        t = self.rows.codes[i]
        _, block, per, np_name = S.GGML_TYPES[t]
        extra = {"ggml_type": t, "block": block, "block_bytes": per, "dims": list(self._infos.cols["dims"][i])}
        if np_name is None:
            extra.update(packed=True, quant_params={S.QUANT_TYPE_KEY: t})
        return extra

    def _regions(self) -> list:
        """The key/value pairs, the tensor infos and the aligned data section."""
        infos = getattr(self, "_infos", None)
        if infos is None:
            return []
        a, b = infos.span() or (infos.end, infos.end)
        out = [("metadata", "kv", S.HEADER_SIZE, a - S.HEADER_SIZE, {}), ("table", "tensors", a, b - a, {})]
        if self.data_start:
            out.append(("section", "data", self.data_start, max(self._src.size - self.data_start, 0), {}))
        return out

    def _checked(self) -> str:
        return f"header, {len(self._meta)} key/value pairs and {len(self.rows)} tensor infos"

    def describe(self) -> dict:
        d = super().describe()
        d.update({"version": str(self.header.get("version")), "file_size": self._src.size,
                  "metadata_types": dict(self.meta_types)})
        return d


validate_file = GgufReader.validate_file


def open_ranges(name: str, size: int, read, *, strict: bool = True, _collect: bool = False) -> GgufReader:
    """Open a GGUF file that is not here (a URL) with ``read([(start, length)]) -> [bytes]``:
    its first REMOTE_FIRST_READ bytes, then more (at least doubling) while the key/values and
    tensor infos go on past what was read -- never more than the file's truncation says is
    needed, nor past REMOTE_HEADER_LIMIT.  Tensor bytes are not read."""
    cut = None

    def need(src):
        nonlocal cut
        trial = GgufReader(src, strict=strict, _collect=True)  # (collecting: it neither raises nor closes src)
        cut = next((e for e in trial._structure if isinstance(e, E.TruncatedError) and e.rule == Rule.TRUNCATED
                    and e.expected is not None), None)
        return None if cut is None else (cut.offset or 0) + cut.expected

    def too_big(n):
        if n > S.REMOTE_HEADER_LIMIT:
            return _err(E.LimitError, cut.offset, cut.path, Rule.HEADER_LIMIT,
                        f"the header goes on past {E.show_int(n)} bytes, over REMOTE_HEADER_LIMIT "
                        f"({S.REMOTE_HEADER_LIMIT}) for a file read over HTTP")
    src = read_head(name, size, read, S.REMOTE_FIRST_READ, need, too_big)
    return GgufReader(src, strict=strict, _collect=_collect)


# =============================================================================== writer
_TYPE_OF_NAME = {name: t for t, name in TYPE_NAME.items()}
#: numpy dtype -> ggml type code, for the plain types
GGML_OF = {dt: code for code, dt in NP_TENSOR.items()}


def _utf8(s: str, what: str) -> bytes:
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise E.UsageError(f"{what}: {s!r} is not encodable as UTF-8 ({e.reason})") from None


def _string(s: str, what: str) -> bytes:
    raw = _utf8(s, what)
    return _LEN.pack(len(raw)) + raw


def _type_code(tree) -> int:
    return ValueType.ARRAY if isinstance(tree, tuple) else _TYPE_OF_NAME[tree]


def _encode(v, tree, what: str) -> bytes:
    """The bytes of value ``v`` (already typed by :func:`codec.engine.values.typed`) of type ``tree``,
    without its own type code."""
    if isinstance(tree, str):
        return _string(v, what) if tree == "string" else np.array(v, NP_VALUE[_TYPE_OF_NAME[tree]]).tobytes()
    _, inner = tree
    if inner is None:
        return ARRAY.build({"type": ValueType.ARRAY, "count": 0})
    if isinstance(inner, list):  # arrays of arrays of different types
        head = ARRAY.build({"type": ValueType.ARRAY, "count": len(v)})
        return head + b"".join(_encode(x, t, what)
                               for x, t in zip(v, inner))
    head = ARRAY.build({"type": _type_code(inner), "count": len(v)})
    if isinstance(inner, str) and inner not in ("string",):
        return head + np.ascontiguousarray(v, NP_VALUE[_TYPE_OF_NAME[inner]]).tobytes()
    return head + b"".join(_encode(x, inner, what) for x in v)


def _inner_arrays(v) -> int:
    """How many arrays value ``v`` holds inside arrays (what the reader's decode budget counts)."""
    n, todo = 0, [v]
    while todo:
        x = todo.pop()
        if isinstance(x, (list, tuple)) or (isinstance(x, np.ndarray) and x.dtype == object):
            inner = [y for y in x if isinstance(y, (list, tuple, np.ndarray))]
            n += len(inner)
            todo.extend(inner)
    return n


def encode_metadata(metadata: Mapping) -> tuple[bytes, int, int]:
    """The key/value section: (bytes, number of pairs, alignment).  Each value keeps the type it
    has (numpy scalars and arrays) or gets the smallest lossless one (see codec.engine.values); the
    alignment is ``general.alignment``'s (a u32 power of two), else 32."""
    out, alignment = [], S.DEFAULT_ALIGNMENT
    kept = values.types_of(metadata)
    for key, v in metadata.items():
        if not isinstance(key, str) or not key:
            raise E.UsageError(f"GGUF metadata keys are non-empty text, not {key!r}")
        refuse_nesting(v, f"GGUF metadata {key!r}", S.MAX_ARRAY_DEPTH)  # (what its reader takes)
        with E.about(f"GGUF metadata {key!r}"):
            desc = values.kept_type_of(v, kept.get(key))
            v = values.typed(v, desc)
            tree = values.parse(desc)
        if key == S.ALIGNMENT_KEY:
            if desc != "uint32" or v <= 0 or v & (v - 1):
                raise E.UsageError(f"{S.ALIGNMENT_KEY} must be a uint32 power of two (got {v!r} as {desc}; "
                                   "numpy.uint32(64) says so)")
            alignment = int(v)
        out.append(KV.build({"key": _utf8(key, "metadata key"), "value_type": _type_code(tree)})
                   + _encode(v, tree, f"metadata {key!r}"))
    return b"".join(out), len(out), alignment


def _tensor_item(name, t) -> tuple[int, tuple, np.ndarray]:
    """(ggml type, dims as GGUF lists them, the bytes as a flat uint8 or typed array)."""
    if isinstance(t, Packed):
        q = (t.quant_params or {}).get(S.QUANT_TYPE_KEY)
        traits = S.GGML_TYPES.get(q) if isinstance(q, (int, np.integer)) and not isinstance(q, bool) else None
        if traits is None:
            raise E.UsageError(f"{name}: a packed tensor for GGUF names its ggml type in quant_params "
                               f"({{{S.QUANT_TYPE_KEY!r}: code}}; got {t.quant_params!r})")
        why = _packing_refusal(tuple(t.shape), t.nbytes, t.quant_params)
        if why:
            raise E.UsageError(f"{name}: {why}")
        return int(q), tuple(reversed(t.shape)), np.ascontiguousarray(t.data).reshape(-1).view(np.uint8)
    a = t if isinstance(t, LazyTensor) else as_array(name, t)
    dt = a.dtype.newbyteorder("<") if a.dtype.byteorder in "<>=|" else a.dtype
    code = GGML_OF.get(dt)
    if code is None:
        raise E.UsageError(f"{name}: GGUF has no tensor type for {a.dtype} "
                           f"({', '.join(sorted(d.name for d in GGML_OF))}, or packed bytes)")
    if not 1 <= a.ndim <= S.MAX_DIMS:
        raise E.UsageError(f"{name}: rank {a.ndim} is outside 1..{S.MAX_DIMS}")
    if isinstance(a, LazyTensor):  # (loaded when written)
        return code, tuple(reversed(a.shape)), a if a.dtype == dt else LazyTensor(
            dt, a.shape, lambda: a.materialise(name).astype(dt, copy=False))
    return code, tuple(reversed(a.shape)), a.astype(dt, copy=False)


def _packing_refusal(shape: tuple, nbytes: int, quant_params: dict | None) -> str | None:
    """Why GGUF cannot hold packed bytes of this shape and codec (None: it can)."""
    q = (quant_params or {}).get(S.QUANT_TYPE_KEY)
    traits = S.GGML_TYPES.get(q) if isinstance(q, (int, np.integer)) and not isinstance(q, bool) else None
    if traits is None:
        return f"its quant_params name no ggml type ({{{S.QUANT_TYPE_KEY!r}: code}}; got {quant_params!r})"
    tname, block, per, _ = traits
    if not 1 <= len(shape) <= S.MAX_DIMS or not shape or shape[-1] % block:
        return f"{tname}{list(shape)}: the last extent must be a multiple of {block} and the rank 1..{S.MAX_DIMS}"
    if math.prod(shape) // block * per != nbytes:
        return f"{tname}{list(shape)} takes {math.prod(shape) // block * per} bytes, the data has {nbytes}"
    return None


def write_gguf(path, tensors: Mapping | Iterable, *, metadata: Mapping | None = None, version: int = 3,
               progress: bool | None = None, max_shard_size: int | str | None = None) -> str:
    """Write a GGUF file (v3, or v2): atomic, deterministic (input order), streamed.

    ``tensors``: a mapping or pairs of name -> array (float32, float16, bfloat16, float64,
    int8..int64; rank 1..4) or :class:`codec.model.Packed` (quantized bytes whose
    ``quant_params`` name the ggml type: ``{"ggml_type": 2}``).  ``metadata``: key -> value,
    typed by numpy scalars and arrays (``numpy.uint8(3)``, ``numpy.float32(...)``), plain
    Python values taking the smallest lossless type (see :mod:`codec.engine.values`) -- but a
    reader's ``metadata`` given back keeps the type each value was read with;
    ``general.alignment`` (a uint32) sets the alignment of the data (default 32).

    ``max_shard_size`` (bytes, or text: "2GB", "500MB", "2GiB"): when the tensors take more, a
    split model as gguf-split writes it -- ``NAME-00001-of-0000N.gguf`` ... beside ``path``
    (``NAME.gguf``), each split's tensors at most that size (a bigger tensor alone), the
    metadata in the first, and ``split.no``, ``split.count``, ``split.tensors.count`` in every
    one; returns the first split's path.  A ``path`` named as a first split
    (``NAME-00001-of-0000N.gguf``) is always written as splits, N of them (else a UsageError)."""
    if version not in S.VERSIONS:
        raise E.UsageError(f"GGUF version {version!r}: {', '.join(map(str, S.VERSIONS))} can be written")
    kept = values.types_of(metadata)  # (a reader's metadata: each value keeps the type it was read with)
    metadata = mapping_arg(metadata)
    for k in kept.keys() & metadata.keys():  # (typed now: the splits' metadata are copies of it)
        try:
            metadata[k] = values.typed(metadata[k], values.kept_type_of(metadata[k], kept[k]))
        except E.UsageError:
            pass  # (encode_metadata says what is wrong with it)
    limit = None if max_shard_size is None else parse_size(max_shard_size)
    items, seen = [], set()
    for name, t in named_pairs(tensors):
        if not isinstance(name, str) or not name:
            raise E.UsageError(f"tensor name {name!r}: a non-empty text")
        if len(name.encode("utf-8", "surrogatepass")) > S.MAX_NAME_BYTES:
            raise E.UsageError(f"tensor name {name!r}: over {S.MAX_NAME_BYTES} bytes (llama.cpp's limit)")
        if name in seen:
            raise E.UsageError(f"duplicate tensor name {name!r}")
        seen.add(name)
        items.append((name, *_tensor_item(name, t)))
    if named_count(os.fspath(path)) is None and (limit is None or sum(data.nbytes for *_, data in items) <= limit):
        return _write_file(path, items, metadata, version, progress)
    return write_splits(os.fspath(path), items, limit, metadata,
                        lambda p, part, md: _write_file(p, part, md, version, progress))


def _write_file(path, items: list, metadata: Mapping, version: int, progress: bool | None) -> str:
    """One GGUF file of ``items`` ((name, ggml type, dims, data), checked) and ``metadata``."""
    kv, n_kv, alignment = encode_metadata(metadata)
    inner = sum(_inner_arrays(v) for v in metadata.values())
    offsets, end = place(S.RELATIONS, "Tensor.offset", [data.nbytes for *_, data in items], 0,
                        terms={"$alignment": alignment}, pad_end=True)
    infos = [INFO.build({"name": _utf8(name, "tensor name"), "dims": list(dims), "type": code, "offset": off})
             for (name, code, dims, _), off in zip(items, offsets)]
    head = HEADER.build({"magic": S.MAGIC, "version": version, "tensor_count": len(infos), "kv_count": n_kv}) \
        + kv + b"".join(infos)
    if infos:  # (with no tensors there is no data: the gguf package pads nothing)
        head += bytes(data_start(len(head), alignment) - len(head))
    start = len(head)
    if inner > inner_array_budget(start + end):  # (what its reader would refuse)
        raise E.UsageError(f"GGUF metadata holds {inner:,} arrays inside arrays: a file of {start + end:,} bytes may "
                           f"hold {inner_array_budget(start + end):,} (its reader's decode budget)")
    return write_placed(path, head, [(start + off, data, name) for (name, _, _, data), off in zip(items, offsets)],
                        start + end, progress=progress)


class SplitReader(GgufSplits):
    """A split model, each split read by :class:`GgufReader`."""
    part_reader = GgufReader


#: the reader of a GGUF file, or of a split model named by its first split (``NAME-00001-of-0000N.gguf``);
#: ``validate`` of either (a split model: every split, and how they agree)
open_gguf, validate_gguf = one_or_several(GgufReader, SplitReader, claims)


DESCRIPTOR = FormatDescriptor(
    "gguf", S, open_gguf, write_gguf, validate=validate_gguf, magic=S.MAGIC, open_ranges=open_ranges, claims=claims,
    claims_doc="a split model's first split (`NAME-00001-of-0000N.gguf`)",
    demo=Standard({"general.architecture": "mlp", "general.name": "tiny-mlp", "mlp.block_count": np.uint32(2),
                   "mlp.learning_rate": np.float32(3e-4)}),
    capabilities=Capabilities(frozenset({d.name for d in GGML_OF} | {"packed"}), min_rank=1, max_rank=S.MAX_DIMS,
                              names="(?s).+", max_name_bytes=S.MAX_NAME_BYTES,
                              names_doc=f"1..{S.MAX_NAME_BYTES} bytes of UTF-8",
                              metadata="typed-arrays", packed=_packing_refusal, lazy=True,
                              common_keys=S.COMMON_KEYS),
    packed_codec=packed_codec,
    summary="llama.cpp's GGUF v2/v3: typed key/values, tensor infos, aligned data")
