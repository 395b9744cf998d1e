"""GGUF (v2, v3): reader (zero-copy views; quantized tensors as their packed bytes) and
validation.  Writing GGUF is not implemented yet.

The header, the value types, the ggml type traits and the rules between the tensor infos are
declared in :mod:`schemas.gguf`.  What is left here: the typed key/value section and the tensor
infos, read through a cursor that checks every length and count against the bytes left before
it reads or allocates anything.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from schemas import gguf as S
from schemas.gguf import Rule, ValueType

from .. import errors as E
from .. import relations
from ..engine import record_of
from ..model import Reader, Report, StopCheck, TensorInfo, numpy_can_hold
from ..registry import FormatDescriptor

FMT = S.FORMAT
HEADER = record_of(S.Header)
NP_VALUE = {t: np.dtype(c) for t, c in S.VALUE_NUMPY.items()}
NP_TENSOR = {code: np.dtype(ml_dtypes.bfloat16) if np_name == "bfloat16" else np.dtype(np_name).newbyteorder("<")
             for code, (_, _, _, np_name) in S.GGML_TYPES.items() if np_name}


def _err(cls, offset, path, rule, msg) -> E.FormatError:
    return cls(FMT, offset, path, rule, msg)


class _Cursor:
    """Reads little-endian values from ``buf[pos:end]``; every length and count is checked
    against the bytes left before anything is read or allocated (TruncatedError)."""

    def __init__(self, buf, pos: int, end: int):
        self.buf, self.pos, self.end = buf, pos, end

    def need(self, n: int, path: str) -> None:
        if n > self.end - self.pos:
            raise _err(E.TruncatedError, self.pos, path, Rule.TRUNCATED,
                       f"needs {E.show_int(n)} bytes, {self.end - self.pos} are left in the file")

    def scalar(self, dt: np.dtype, path: str):
        self.need(dt.itemsize, path)
        v = np.frombuffer(self.buf, dt, 1, self.pos)[0]
        self.pos += dt.itemsize
        return v.item()

    def string(self, path: str) -> str:
        n = self.scalar(NP_VALUE[ValueType.UINT64], f"{path}.length")
        at = self.pos
        self.need(n, path)
        raw = bytes(self.buf[at:at + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _err(E.DecodeError, at + e.start, path, Rule.STRING, f"not UTF-8: {e.reason}") from None

    def value(self, t: int, path: str, depth: int = 0):
        if t in NP_VALUE:
            return self.scalar(NP_VALUE[t], path)
        if t == ValueType.STRING:
            return self.string(path)
        if t == ValueType.ARRAY:
            if depth >= S.MAX_ARRAY_DEPTH:
                raise _err(E.LimitError, self.pos, path, Rule.VALUE_TYPE,
                           f"arrays nest deeper than MAX_ARRAY_DEPTH ({S.MAX_ARRAY_DEPTH})")
            et = self.scalar(NP_VALUE[ValueType.UINT32], f"{path}.type")
            n = self.scalar(NP_VALUE[ValueType.UINT64], f"{path}.count")
            if et in NP_VALUE:  # numbers: one zero-copy read, bounded first
                dt = NP_VALUE[et]
                self.need(n * dt.itemsize, path)
                a = np.frombuffer(self.buf, dt, n, self.pos)
                self.pos += n * dt.itemsize
                return a
            if et not in (ValueType.STRING, ValueType.ARRAY):
                raise _err(E.EnumError, self.pos - 12, f"{path}.type", Rule.VALUE_TYPE, f"unknown value type {et}")
            self.need(n * 8, path)  # every string or array element takes at least 8 bytes
            return [self.value(et, f"{path}[{i}]", depth + 1) for i in range(n)]
        raise _err(E.EnumError, self.pos - 4, f"{path}.type", Rule.VALUE_TYPE, f"unknown value type {t}")


class GgufReader(Reader):
    """Reads a GGUF v2/v3 file from a path (mmap) or a buffer.  ``metadata``: key -> value
    (numbers, text, numpy arrays for arrays of numbers, lists otherwise); tensors of plain
    types come back as zero-copy numpy views (numpy's shape: GGUF's dims reversed), quantized
    ones as their packed bytes (``extra``: ggml type, block size, bytes per block)."""
    format = "gguf"
    FMT = FMT

    def __init__(self, source, *, strict: bool = True, _collect: bool = False):
        self.strict = strict
        self.header: dict = {}
        self._meta: dict = {}
        self.meta_types: dict[str, str] = {}
        self._rows: list[tuple] = []  # (name, type code, dims, offset, nbytes, info offset)
        self._bad: set[int] = set()
        self._index: dict[str, int] = {}
        self.alignment = S.DEFAULT_ALIGNMENT
        self.data_start = 0
        self._open(source, _collect)

    def _parse(self, v):
        buf, size = self._src.buf, self._src.size
        h = self._read_header(v, HEADER, Rule.TRUNCATED, fatal=(E.MagicError, E.UnsupportedVersionError, E.EnumError))
        cur = _Cursor(buf, S.HEADER_SIZE, size)
        try:
            # counts bounded by the bytes that exist before anything is read for them
            cur.need(h["kv_count"] * 13 + h["tensor_count"] * 32, "Header.kv_count")
            for i in range(h["kv_count"]):
                at = cur.pos
                key = cur.string(f"kv[{i}].key")
                t = cur.scalar(NP_VALUE[ValueType.UINT32], f"kv[{i}].type")
                val = cur.value(t, f"kv[{key!r}]")
                if key in self._meta:
                    v.append(_err(E.StructureError, at, f"kv[{i}].key", Rule.KEY, f"the key {key!r} appears twice"))
                    continue
                self._meta[key] = val
                self.meta_types[key] = ValueType(t).name.lower()
            self._alignment(v)
            rows = []
            for i in range(h["tensor_count"]):
                at = cur.pos
                name = cur.string(f"tensors[{i}].name")
                nd = cur.scalar(NP_VALUE[ValueType.UINT32], f"tensors[{i}].n_dims")
                if not 1 <= nd <= S.MAX_DIMS:
                    raise _err(E.RangeError, cur.pos - 4, f"tensors[{i}].n_dims", Rule.DIMS,
                               f"must be 1..{S.MAX_DIMS} (got {nd})")
                cur.need(8 * nd, f"tensors[{i}].dims")
                dims = tuple(int(d) for d in np.frombuffer(buf, "<u8", nd, cur.pos))
                cur.pos += 8 * nd
                t = cur.scalar(NP_VALUE[ValueType.UINT32], f"tensors[{i}].type")
                off = cur.scalar(NP_VALUE[ValueType.UINT64], f"tensors[{i}].offset")
                rows.append((name, t, dims, off, at))
        except E.FormatError as e:
            v.append(e)
            raise StopCheck
        self.data_start = -(-cur.pos // self.alignment) * self.alignment
        self._tensor_rows(v, rows, size)

    def _alignment(self, v) -> None:
        a = self._meta.get(S.ALIGNMENT_KEY)
        if a is None:
            return
        if self.meta_types[S.ALIGNMENT_KEY] != "uint32" or a <= 0 or a & (a - 1):
            v.append(_err(E.ConstraintError, None, f"kv[{S.ALIGNMENT_KEY!r}]", Rule.ALIGNMENT,
                          f"must be a u32 power of two (got {a!r} as {self.meta_types[S.ALIGNMENT_KEY]})"))
            return
        self.alignment = a

    def _tensor_rows(self, v, rows, size: int) -> None:
        out = []
        for i, (name, t, dims, off, at) in enumerate(rows):
            traits = S.GGML_TYPES.get(t)
            numel = math.prod(dims)
            if traits is None:
                v.append(_err(E.EnumError, at, f"tensors[{i}].type", Rule.TENSOR_TYPE, f"unknown ggml type {t}"))
                nbytes, ok = 0, False
            elif dims[0] % traits[1] or not numpy_can_hold(dims, traits[2]):
                v.append(_err(E.RangeError, at, f"tensors[{i}].dims", Rule.DIMS,
                              f"{traits[0]}{list(dims)}: the first extent must be a multiple of {traits[1]} and the "
                              f"shape one an array can have"))
                nbytes, ok = 0, False
            else:
                nbytes, ok = numel // traits[1] * traits[2], True
            out.append((name, t, dims, off, nbytes, at, ok))
        self._rows = out
        # the rules between the tensor infos, declared in schemas.gguf.RELATIONS
        ctx = relations.Context(FMT, size)
        cols = {"name": [r[0] for r in out], "offset": np.array([r[3] for r in out], dtype=np.uint64),
                "nbytes": np.array([r[4] for r in out], dtype=np.uint64)}
        ctx.add_table("Tensor", "tensors", cols, len(out), 0, lambda i, f: out[i][5])
        ctx.values.update(alignment=self.alignment, data_length=max(size - self.data_start, 0))
        found = relations.check(S.RELATIONS, ctx, self._src.buf)
        v.extend(found.errors)
        self._bad = set(found.bad.get("Tensor", ())) | {i for i, r in enumerate(out) if not r[6]}
        for i, r in enumerate(out):
            self._index.setdefault(r[0], i)

    @property
    def metadata(self) -> dict:
        return dict(self._meta)

    def _info(self, i: int) -> TensorInfo:
        name, t, dims, off, nbytes, at, _ = self._rows[i]
        if i in self._bad:
            raise _err(E.StructureError, at, f"tensors[{i}]", Rule.BOUNDS,
                       f"tensor {name!r} is unreadable (see validate)").with_source(self.source)
        tname, block, per, np_name = S.GGML_TYPES[t]
        extra = {"dtype_name": tname, "ggml_type": t, "block": block, "block_bytes": per, "dims": list(dims)}
        if np_name is None:
            extra["packed"] = True
        dt = NP_TENSOR.get(t, np.dtype("u1"))
        return TensorInfo(name, dt, tuple(reversed(dims)), self.data_start + off, nbytes, extra)

    def tensor(self, name: str) -> np.ndarray:
        """A read-only zero-copy view; a quantized tensor as its packed bytes (uint8)."""
        t = self.tensors[name]
        if t.extra.get("packed"):
            return self._src.array(np.dtype("u1"), t.nbytes, t.offset)
        return self._src.array(t.dtype, math.prod(t.shape), t.offset).reshape(t.shape)

    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        rep = self._report("full" if full else "structure")
        rep.checked.append(f"header, {len(self._meta)} key/value pairs and {len(self._rows)} tensor infos")
        if full:
            rep.notes.append("GGUF stores no checksum: the data cannot be verified")
        return self._finish(rep)

    def describe(self) -> dict:
        d = super().describe()
        d.update({"version": str(self.header.get("version")), "file_size": self._src.size,
                  "metadata_types": dict(self.meta_types)})
        return d


validate_file = GgufReader.validate_file


def write_gguf(path, tensors, **options) -> str:
    raise E.UsageError("writing GGUF is not implemented yet (reading is): convert from GGUF to another format")


DESCRIPTOR = FormatDescriptor("gguf", S, GgufReader, write_gguf, magic=S.MAGIC,
                              summary="llama.cpp's GGUF v2/v3 (read only, for now)")
