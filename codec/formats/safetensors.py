"""safetensors: reader (zero-copy views), validation and a streaming writer.

The header record, the entries, the metadata and the rules between the entries (sizes, the
tiling of the data) are declared in :mod:`schemas.safetensors` and checked by the engine.
What is left here: the JSON header's place in the file, its entries as rows, and the writer.
"""
from __future__ import annotations

import json
import os
from itertools import chain
from typing import Iterable, Mapping

import numpy as np

from ..schemas import safetensors as S
from ..schemas.dsl import ListOf
from ..schemas.safetensors import Rule

from .. import errors as E
from ..engine import payload
from .hooks import Standard
from ..engine.dtypes import DTypeTable
from ..engine.records import record_of
from ..model import StopCheck
from ..registry import Capabilities, FormatDescriptor
from ..io.sources import read_head
from ..engine.relations.plan import place
from .multifile import one_or_several, parse_size
from .safetensors_sharded import ShardedSafetensors, claims, index_for, index_target, write_shards
from .tensor_rows import RowsReader, TensorRows
from ..io.tensor_writer import admit, write_placed

FMT = S.FORMAT
HEADER = record_of(S.Header)
DTYPES = DTypeTable(S.DTYPES, FMT)
_err = E.for_format(FMT)


class SafetensorsReader(RowsReader):
    """Reads a safetensors file from a path (mmap) or a buffer.  ``metadata`` is the header's
    ``__metadata__``; tensors are listed in the order of their bytes and come back as read-only
    zero-copy views."""
    format = "safetensors"
    FMT = FMT
    numpy, dtype_names = DTYPES.numpy, DTYPES.names
    BOOL_RULE = Rule.BOOL

    def __init__(self, source, *, strict: bool = True, _collect: bool = False):
        self.strict = strict
        self.header: dict = {}
        self.rows = TensorRows([], [], [], [], [])
        self.data_start = 0
        self._open(source, _collect)

    def _parse(self, v):
        buf, size = self._src.buf, self._src.size
        n = self._read_header(v, HEADER, Rule.HEADER_LENGTH, fatal=(E.LimitError, E.RangeError))["header_length"]
        if 8 + n > size:
            raise _err(E.TruncatedError, 0, "Header.header_length", Rule.HEADER_LENGTH,
                       f"the header [8, +{n}) extends past the end of the file ({size} bytes)")
        self.data_start = 8 + n
        try:
            obj, dups = payload.json_object(bytes(buf[8:8 + n]), fmt=FMT, offset=8, path="header",
                                            rule=Rule.HEADER_JSON, bytes_per_container=S.HEADER_BYTES_PER_CONTAINER)
        except E.FormatError as e:
            v.append(e)
            raise StopCheck
        v.extend(_err(E.StructureError, 8, f"header[{k!r}]", Rule.DUPLICATE, f"the key {k!r} appears twice")
                 for k in dups[:50])
        md = obj.pop(S.METADATA_KEY, {})
        bad = payload.check(S.Metadata, md, fmt=FMT, offset=8, path=f"header[{S.METADATA_KEY!r}]")
        v.extend(bad)
        self._meta = {} if bad else md
        # every entry at once through the vectorised check derived from the declaration (then
        # its columns are the rows); the exact walk (precise findings) only when that says no
        cols = payload.fast_columns(ListOf(S.Entry), list(obj.values()))
        names_ok = all(map(str.isascii, obj))
        if cols is not None and names_ok:
            rows = self.rows = _in_byte_order(list(obj), cols, self.data_start)
        else:
            ok = []
            for name, e in obj.items():
                bad = [] if cols is not None else payload.check(S.Entry, e, fmt=FMT, offset=8, path=f"header[{name!r}]")
                v.extend(bad)
                why = None if names_ok else payload.text_error(name)
                if why:  # (one rule for text: a name no writer can encode is reported, its entry still read)
                    v.append(_err(E.DecodeError, 8, f"header[{name!r}]", Rule.ENTRY, f"the tensor name {why}"))
                if not bad:
                    ok.append((e["data_offsets"], name, e))
            ok.sort(key=lambda r: r[0])  # the order of their bytes
            rows = self.rows = TensorRows([r[1] for r in ok], [S.DTYPES.codes[r[2]["dtype"]] for r in ok],
                                          [tuple(r[2]["shape"]) for r in ok], [r[0][0] for r in ok],
                                          [r[0][1] - r[0][0] for r in ok], self.data_start)
        # the rules between the entries, declared in schemas.safetensors.RELATIONS
        v.extend(rows.check(S.RELATIONS, FMT, size, buf, "Entry", "header", lambda i, f: 8,
                            label=lambda i: repr(rows.names[i]), values={"data_length": size - self.data_start},
                            called={"begin": "data_offsets", "nbytes": "data_offsets"}))

    def _where(self, i: int) -> tuple:
        return 8, f"header[{self.rows.names[i]!r}]", Rule.ENTRY

    def _extra(self, i: int) -> dict:
        return {"data_offsets": [self.rows.begins[i], self.rows.begins[i] + self.rows.nbytes[i]]}

    def _regions(self) -> list:
        """The JSON header after its length, then the data section the tensors tile."""
        if not self.data_start:
            return []
        return [("metadata", "JSON header", 8, self.data_start - 8, {}),
                ("section", "data", self.data_start, self._src.size - self.data_start, {})]

    def _checked(self) -> str:
        return f"header ({self.data_start - 8} bytes) and {len(self.rows)} tensors tiling the data"

    def describe(self) -> dict:
        d = super().describe()
        d.update({"file_size": self._src.size, "header_length": self.data_start - 8 if self.data_start else None})
        return d


validate_file = SafetensorsReader.validate_file


def _in_byte_order(names: list, cols: dict, base: int) -> TensorRows:
    """The rows of entries the vectorised check passed (``cols``: its columns, in the order of
    ``names``), in the order of their bytes ([begin, end); ties in the header's order)."""
    n = len(names)
    offs = np.fromiter(chain.from_iterable(cols["data_offsets"]), np.uint64, 2 * n).reshape(n, 2)
    order = np.lexsort((offs[:, 1], offs[:, 0]))  # (stable)
    begins, ends = offs[order, 0], offs[order, 1]
    order = order.tolist()
    dtypes, shapes, codes = cols["dtype"], cols["shape"], S.DTYPES.codes
    return TensorRows([names[i] for i in order], [codes[dtypes[i]] for i in order],
                      [tuple(shapes[i]) for i in order], begins.tolist(), (ends - begins).tolist(), base)


def open_ranges(name: str, size: int, read, *, strict: bool = True, _collect: bool = False) -> SafetensorsReader:
    """Open a safetensors file that is not here (a URL) with ``read([(start, length)]) ->
    [bytes]``: its first 64 KiB, then the rest of its header (when its length is in bounds:
    else the reader reports it).  Tensor bytes are not read."""
    def need(src):
        n = int.from_bytes(bytes(src.buf[:8]), "little") if src.has(0, 8) else S.MAX_HEADER_BYTES + 1
        return 8 + n if n <= S.MAX_HEADER_BYTES else None
    return SafetensorsReader(read_head(name, size, read, 64 * 1024, need, exact=True), strict=strict, _collect=_collect)


class ShardedReader(ShardedSafetensors):
    """A sharded model (Hugging Face's index and shards), each shard read by :class:`SafetensorsReader`."""
    part_reader = SafetensorsReader


#: the reader of a safetensors file, or of a sharded model named by its index
#: (``*.safetensors.index.json``) or the directory holding it; ``validate`` of either (a sharded
#: model: every shard, and the index)
open_safetensors, validate_safetensors = one_or_several(SafetensorsReader, ShardedReader, claims)


# =============================================================================== writer
def write_safetensors(path, tensors: Mapping | Iterable, *, metadata: Mapping[str, str] | None = None,
                      progress: bool | None = None, max_shard_size: int | str | None = None) -> str:
    """Write a safetensors file: atomic, deterministic (input order), streamed (tensor bytes go
    from the arrays to the file in pieces), the header padded with spaces to a multiple of 8.
    ``tensors``: a mapping or pairs of name -> array; ``metadata``: text -> text.

    A sharded model as Hugging Face writes it, when ``path`` names an index
    (``model.safetensors.index.json``) or a directory, or when ``max_shard_size`` (bytes, or
    Hugging Face's text: "5GB", "500MB", "2GiB") is given and the tensors take more: shards of at
    most that size (a bigger tensor alone in its shard) named ``model-00001-of-00003.safetensors``
    ... after the index (``x.safetensors`` -> ``x-0000i-of-0000N.safetensors`` and
    ``x.safetensors.index.json``), each with the metadata, then the index
    (``metadata.total_size``, ``weight_map``).  Returns the path of the file written (the index)."""
    header: dict = {}
    if metadata:
        md = dict(metadata) if isinstance(metadata, Mapping) else None
        bad = payload.check(S.Metadata, md, fmt=FMT, offset=None, path="metadata", limit=1)
        if md is None or bad:
            raise E.UsageError("safetensors metadata is text -> text" + (f": {bad[0].path} {bad[0].message}" if bad else ""))
        header[S.METADATA_KEY] = md
    limit = None if max_shard_size is None else parse_size(max_shard_size)
    index = index_target(os.fspath(path))
    arrays = admit(tensors, DESCRIPTOR.capabilities, DTYPES)
    if index is None and (limit is None or sum(a.nbytes for *_, a in arrays) <= limit):
        return _write_file(path, arrays, header.get(S.METADATA_KEY), progress)
    return write_shards(index or index_for(os.fspath(path)), arrays, limit, header.get(S.METADATA_KEY), _write_file,
                        progress)


def _write_file(path, arrays: list, metadata: dict | None, progress: bool | None) -> str:
    """One safetensors file of the admitted ``arrays`` ((name, code, array))."""
    header: dict = {S.METADATA_KEY: metadata} if metadata else {}
    offsets, end = place(S.RELATIONS, "Entry.begin", [a.nbytes for *_, a in arrays], 0)
    for (name, code, a), at in zip(arrays, offsets):
        header[name] = {"dtype": DTYPES.names[code], "shape": list(a.shape), "data_offsets": [at, at + a.nbytes]}
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-(8 + len(text)) % S.HEADER_ALIGN)
    if len(text) > S.MAX_HEADER_BYTES:
        raise E.UsageError(f"the header would be {len(text):,} bytes, over {S.MAX_HEADER_BYTES:,}")
    start = 8 + len(text)
    return write_placed(path, len(text).to_bytes(8, "little") + text,
                        [(start + at, a, name) for (name, _, a), at in zip(arrays, offsets)], start + end,
                        progress=progress)


# =============================================================================== registry
def _sniff(head: bytes) -> bool:
    """No magic: an 8-byte header length in range, then a JSON object."""
    return len(head) >= 9 and 2 <= int.from_bytes(head[:8], "little") <= S.MAX_HEADER_BYTES and head[8:9] == b"{"


DESCRIPTOR = FormatDescriptor(
    "safetensors", S, open_safetensors, write_safetensors, validate=validate_safetensors, sniff=_sniff,
    open_ranges=open_ranges, claims=claims,
    claims_doc=f"a sharded model's `*{S.INDEX_SUFFIX}` or its directory", suffixes=(".safetensors", S.INDEX_SUFFIX),
    demo=Standard({"format": "np", "source": "modelcodec demo"}),
    capabilities=Capabilities(DTYPES.array_names, max_rank=S.MAX_RANK,
                              names=f"(?!{S.METADATA_KEY}$).+", names_doc=f"non-empty, not {S.METADATA_KEY!r}",
                              metadata="text", lazy=True),
    summary="Hugging Face safetensors: a JSON header, then the tensors' bytes; a sharded model: an index and its "
            "shards")
