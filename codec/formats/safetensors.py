"""safetensors: reader (zero-copy views), validation and a streaming writer.

The header's record and entry shape are declared in :mod:`schemas.safetensors`, and so are the
rules between the entries (sizes, the tiling of the data), which the engine checks over the
columns this module derives from the JSON header.  What is left here: decoding the JSON header
within its budget (duplicate keys found as it is decoded), and reading and writing.
"""
from __future__ import annotations

import json
import os
from typing import Iterable, Mapping

import numpy as np

from schemas import safetensors as S
from schemas.dsl import ListOf
from schemas.safetensors import Rule

from .. import errors as E
from .. import payload, relations
from ..dtypes import DTypeTable
from ..engine import record_of
from ..io import as_array
from ..model import Reader, Report, StopCheck, TensorInfo, numpy_can_hold
from ..registry import Capabilities, FormatDescriptor
from ..sources import read_head
from ..tensor_writer import place, write_placed

FMT = S.FORMAT
HEADER = record_of(S.Header)
DTYPES = DTypeTable(S.DTYPES, FMT)
#: the header's entries as a list, for the vectorised check
ENTRIES = ListOf(S.Entry)
_err = E.for_format(FMT)


class SafetensorsReader(Reader):
    """Reads a safetensors file from a path (mmap) or a buffer.  ``metadata`` is the header's
    ``__metadata__``; tensors are listed in the order of their bytes and come back as read-only
    zero-copy views."""
    format = "safetensors"
    FMT = FMT

    def __init__(self, source, *, strict: bool = True, _collect: bool = False):
        self.strict = strict
        self.header: dict = {}
        self._meta: dict[str, str] = {}
        self._rows: list[tuple[str, str, tuple, int, int]] = []  # (name, dtype, shape, begin, end)
        self._bad: set[int] = set()
        self._index: dict[str, int] = {}
        self.data_start = 0
        self._open(source, _collect)

    def _parse(self, v):
        buf, size = self._src.buf, self._src.size
        h = self._read_header(v, HEADER, Rule.HEADER_LENGTH, fatal=(E.LimitError, E.RangeError))
        n = h["header_length"]
        if 8 + n > size:
            v.append(_err(E.TruncatedError, 0, "Header.header_length", Rule.HEADER_LENGTH,
                          f"the header [8, +{n}) extends past the end of the file ({size} bytes)"))
            raise StopCheck
        self.data_start = 8 + n
        try:
            obj, dups = payload.json_object(bytes(buf[8:8 + n]), fmt=FMT, offset=8, path="header", rule=Rule.HEADER_JSON)
        except E.FormatError as e:
            v.append(e)
            raise StopCheck
        for k in dups[:50]:
            v.append(_err(E.StructureError, 8, f"header[{k!r}]", Rule.DUPLICATE, f"the key {k!r} appears twice"))
        md = obj.pop(S.METADATA_KEY, {})
        if not isinstance(md, dict) or not all(isinstance(x, str) for x in md.values()):
            v.append(_err(E.SchemaError, 8, f"header[{S.METADATA_KEY!r}]", Rule.METADATA,
                          "must be an object of text to text"))
        else:
            self._meta = md
        rows = []
        # every entry at once through the vectorised check derived from the declaration; the
        # exact walk (precise findings) only when that says no
        all_ok = payload.fast_ok(ENTRIES, list(obj.values()))
        codes = S.DTYPES.codes
        for name, e in obj.items():
            bad = [] if all_ok else payload.check(S.Entry, e, fmt=FMT, offset=8, path=f"header[{name!r}]")
            if not bad and e["dtype"] not in codes:
                bad = [_err(E.EnumError, 8, f"header[{name!r}].dtype", Rule.DTYPE,
                            f"unknown dtype {e['dtype']!r} (known: {', '.join(codes)})")]
            if not bad and e["data_offsets"][0] > e["data_offsets"][1]:
                bad = [_err(E.StructureError, 8, f"header[{name!r}].data_offsets", Rule.ENTRY,
                            f"begin {e['data_offsets'][0]} is after end {e['data_offsets'][1]}")]
            if bad:
                v.extend(bad)
                continue
            rows.append((name, codes[e["dtype"]], tuple(e["shape"]), *e["data_offsets"]))
        rows.sort(key=lambda r: (r[3], r[4]))  # the order of their bytes
        self._rows = rows
        # the rules between the entries, declared in schemas.safetensors.RELATIONS
        ctx = relations.Context(FMT, size)
        cols = {"dtype": np.array([r[1] for r in rows], dtype=np.uint64),
                "shape": (np.array([len(r[2]) for r in rows], dtype=np.int64),
                          np.array([d for r in rows for d in r[2]], dtype=np.uint64)),
                "begin": np.array([r[3] for r in rows], dtype=np.uint64),
                "nbytes": np.array([r[4] - r[3] for r in rows], dtype=np.uint64)}
        ctx.add_table("Entry", "header", cols, len(rows), 0, lambda i, f: 8, label=lambda i: repr(rows[i][0]))
        ctx.values["data_length"] = size - self.data_start
        found = relations.check(S.RELATIONS, ctx, buf)
        v.extend(found.errors)
        self._bad = set(found.bad.get("Entry", ()))
        for i, r in enumerate(rows):
            if not numpy_can_hold(r[2], DTYPES.itemsize[r[1]]):
                v.append(_err(E.RangeError, 8, f"header[{r[0]!r}].shape", Rule.ENTRY,
                              f"no array has the shape {list(r[2])}"))
                self._bad.add(i)
            elif self.data_start + r[4] > size:
                self._bad.add(i)  # (the tiling reports where the data ends)
            self._index[r[0]] = i

    @property
    def metadata(self) -> dict:
        return dict(self._meta)

    def _info(self, i: int) -> TensorInfo:
        name, dt, shape, begin, end = self._rows[i]
        if i in self._bad:
            raise _err(E.StructureError, 8, f"header[{name!r}]", Rule.ENTRY,
                       f"tensor {name!r} is unreadable (see validate)").with_source(self.source)
        return TensorInfo(name, DTYPES.numpy[dt], shape, self.data_start + begin, end - begin,
                          {"dtype_name": DTYPES.names[dt], "data_offsets": [begin, end]})

    def tensor(self, name: str) -> np.ndarray:
        """A read-only zero-copy view."""
        i = self._index.get(name)
        if i is None or i in self._bad:
            self.tensors[name]  # (the NotFoundError, or why the tensor cannot be read)
        _, dt, shape, begin, end = self._rows[i]  # (straight from the row: no TensorInfo for a read)
        d = DTYPES.numpy[dt]
        return self._src.array(d, (end - begin) // d.itemsize, self.data_start + begin).reshape(shape)

    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        rep = self._report("full" if full else "structure")
        rep.checked.append(f"header ({self.data_start - 8} bytes) and {len(self._rows)} tensors tiling the data")
        if full:
            rep.notes.append("safetensors stores no checksum: the data cannot be verified")
        return self._finish(rep)

    def describe(self) -> dict:
        d = super().describe()
        d.update({"file_size": self._src.size, "header_length": self.data_start - 8 if self.data_start else None})
        return d


validate_file = SafetensorsReader.validate_file


def open_ranges(name: str, size: int, read, *, strict: bool = True, _collect: bool = False) -> SafetensorsReader:
    """Open a safetensors file that is not here (a URL) with ``read([(start, length)]) ->
    [bytes]``: its first 64 KiB, then the rest of its header (when its length is in bounds:
    else the reader reports it).  Tensor bytes are not read."""
    def need(src):
        n = int.from_bytes(bytes(src.buf[:8]), "little") if src.has(0, 8) else S.MAX_HEADER_BYTES + 1
        return 8 + n if n <= S.MAX_HEADER_BYTES else None
    return SafetensorsReader(read_head(name, size, read, 64 * 1024, need, exact=True), strict=strict, _collect=_collect)


# =============================================================================== writer
def write_safetensors(path, tensors: Mapping | Iterable, *, metadata: Mapping[str, str] | None = None,
                      progress: bool | None = None) -> str:
    """Write a safetensors file: atomic, deterministic (input order), streamed (tensor bytes go
    from the arrays to the file in pieces), the header padded with spaces to a multiple of 8.
    ``tensors``: a mapping or pairs of name -> array; ``metadata``: text -> text."""
    header, arrays = {}, []
    if metadata:
        if not isinstance(metadata, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                        for k, v in metadata.items()):
            raise E.UsageError("safetensors metadata is text -> text")
        header[S.METADATA_KEY] = dict(metadata)
    for name, a in (tensors.items() if isinstance(tensors, Mapping) else tensors):
        if not isinstance(name, str) or not name or name == S.METADATA_KEY:
            raise E.UsageError(f"tensor name {name!r}: a non-empty text other than {S.METADATA_KEY!r}")
        if name in header:
            raise E.UsageError(f"duplicate tensor name {name!r}")
        a = as_array(name, a)
        code = DTYPES.code_for(name, a)
        if a.ndim > S.MAX_RANK:
            raise E.UsageError(f"{name}: rank {a.ndim} is over {S.MAX_RANK}")
        header[name] = {"dtype": DTYPES.names[code], "shape": list(a.shape)}
        arrays.append((name, DTYPES.stored(a, code)))
    offsets, end = place([a.nbytes for _, a in arrays], 0, 1)
    for (name, a), at in zip(arrays, offsets):
        header[name]["data_offsets"] = [at, at + a.nbytes]
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-(8 + len(text)) % S.HEADER_ALIGN)
    if len(text) > S.MAX_HEADER_BYTES:
        raise E.UsageError(f"the header would be {len(text):,} bytes, over {S.MAX_HEADER_BYTES:,}")
    start = 8 + len(text)
    return write_placed(path, len(text).to_bytes(8, "little") + text,
                        [(start + at, a, name) for (name, a), at in zip(arrays, offsets)], start + end,
                        progress=progress)


# =============================================================================== registry
def _sniff(head: bytes) -> bool:
    """No magic: an 8-byte header length in range, then a JSON object."""
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    return 2 <= n <= S.MAX_HEADER_BYTES and head[8:9] == b"{"


def _demo(out_dir: str, model: dict) -> list:
    """The sample as it is (safetensors holds every dtype of it), with ``__metadata__``."""
    from ..demo import show
    p = os.path.join(out_dir, "tiny-mlp.safetensors")
    write_safetensors(p, model, metadata={"format": "np", "source": "modelcodec demo"})
    return show(p)


DESCRIPTOR = FormatDescriptor(
    "safetensors", S, SafetensorsReader, write_safetensors, sniff=_sniff, demo=_demo, open_ranges=open_ranges,
    capabilities=Capabilities(DTYPES.array_names, max_rank=S.MAX_RANK,
                              names=f"(?!{S.METADATA_KEY}$).+", names_doc=f"non-empty, not {S.METADATA_KEY!r}",
                              metadata="text"),
    summary="Hugging Face safetensors: a JSON header, then the tensors' bytes")
