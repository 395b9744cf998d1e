"""MAG (magnetron storage v1): reader, validation and writer.

The records and the relations between them (numel = product of shape, keys unique and UTF-8,
dimensions 1..2^63-1, data 64-aligned inside the file and not overlapping) are declared in
:mod:`schemas.mag` and evaluated by the engine; this module adds what is not declarative: the
header checksum's range (CRC-32C over [12, end of the last tensor record), DECISIONS.md),
metadata value decoding, and the streaming writer.

A checksum mismatch is reported before anything it covers: when the records cannot be parsed
(a corrupt key length, say), the CRC over the part that could be delimited is compared, so a
flipped byte inside the checksummed range always surfaces as MAG-CHECKSUM first.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from ..schemas import mag as S
from ..schemas.mag import MetaType, Rule

from .. import errors as E
from .hooks import Standard
from ..engine.dtypes import DTypeTable
from ..engine.records import record_of
from ..engine import relations
from ..io.integrity import checksum
from ..io.writer_io import name_bytes, mapping_arg, named_pairs
from ..model import Checksum, Report, StopCheck
from .tensor_rows import RowsReader, TensorRows
from ..engine.relations.plan import place
from ..io.tensor_writer import admit, write_placed

FMT = S.FORMAT
HEADER = record_of(S.FileHeader)
META = record_of(S.MetadataRecord)
TENSOR = record_of(S.TensorRecord)
CSUM_FIELD = HEADER.by_name[S.HEADER_CHECKSUM.field].offset
CRC = S.HEADER_CHECKSUM.algorithm

DTYPES = DTypeTable(S.DTYPES, FMT)
NP_DTYPES = DTYPES.numpy


_err = E.for_format(FMT)


def _u64_to_value(t: int, bits: int):
    raw = np.array([bits], dtype="<u8")
    return int(raw.view("<i8")[0]) if t == MetaType.I64 else float(raw.view("<f8")[0])


def _value_to_u64(v) -> tuple[int, int]:
    if isinstance(v, (bool, np.bool_)):
        return MetaType.I64, int(v)
    if isinstance(v, (int, np.integer)):
        if not -(2**63) <= int(v) < 2**63:
            raise E.UsageError(f"metadata int {v} does not fit in i64")
        return MetaType.I64, int(np.array([int(v)], dtype="<i8").view("<u8")[0])
    if isinstance(v, (float, np.floating)):
        return MetaType.F64, int(np.array([float(v)], dtype="<f8").view("<u8")[0])
    raise E.UsageError(f"MAG metadata holds int, float and bool only (got {type(v).__name__})")


def _text(key: bytes) -> str | None:
    """A record's key as text; None when it is not UTF-8 (RECORD_RELATIONS reports that)."""
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return None


class MagReader(RowsReader):
    """Reads a MAG v1 file from a path (mmap) or a buffer; tensors are zero-copy views."""
    format = "mag"
    FMT = FMT
    numpy, dtype_names = NP_DTYPES, S.DTYPE_NAMES
    BOOL_RULE = Rule.BOOL

    def __init__(self, source, *, strict: bool = True, _collect: bool = False):
        self.strict = strict
        self.header: dict = {}
        self._meta: dict[str, Any] = {}
        self.meta_types: dict[str, str] = {}
        self.rows = TensorRows([], [], [], [], [])
        self._at: list[tuple] = []  # each listed tensor's record: (offset, index)
        self.records_end: int | None = None
        self.checksum_ok: bool | None = None
        self._crc: Checksum | None = None
        self._open(source, _collect)

    # ------------------------------------------------------------------ structure
    def _parse(self, v):
        buf, size = self._src.buf, self._src.size
        try:
            h = self._read_header(v, HEADER, Rule.TRUNCATED, collect_only=True)
        except StopCheck:
            if self.header.get("magic") == S.MAGIC and self.header.get("version") == S.VERSION_NEWER:
                v[:] = [_err(E.UnsupportedVersionError, HEADER.by_name["version"].offset, "FileHeader.version",
                             Rule.VERSION, f"version {S.VERSION_NEWER} is a newer, different magnetron format; "
                             f"this reads storage v{S.VERSION}")]
            raise
        header_bad = self._header_bad
        # counts bounded by the bytes that exist, the records, keys, sizes, bounds and overlaps:
        # the rules between fields are declared in schemas.mag.RELATIONS
        ctx = self._layout = relations.Context(FMT, size, h, HEADER)
        found = relations.check(S.RELATIONS, ctx, buf)
        tens = ctx.tables.get(TENSOR.name)
        if tens is not None and not found.stopped:  # (all the records delimited)
            self.records_end = tens.end
        # the checksum first: a flipped byte in its range must be reported as what it is
        end = self.records_end if self.records_end is not None else \
            max(min(found.stopped_at or HEADER.size, size), S.HEADER_CHECKSUM.start)
        got = checksum(S.HEADER_CHECKSUM, buf, end)
        self.checksum_ok = got == h["checksum"]
        self._crc = Checksum(CRC, f"header records [{S.HEADER_CHECKSUM.start}, {end})", f"{h['checksum']:08x}",
                             f"{got:08x}")
        if not self.checksum_ok:
            where = "" if self.records_end is not None else " (records could not be delimited; CRC over the part read)"
            v.append(E.IntegrityError(FMT, CSUM_FIELD, "FileHeader.checksum", Rule.CHECKSUM,
                                      f"CRC-32C of [{S.HEADER_CHECKSUM.start}, {end}) is 0x{got:08x}, the header says "
                                      f"0x{h['checksum']:08x}{where}", algorithm=CRC, expected=self._crc.expected,
                                      actual=self._crc.actual))
        v.extend(header_bad)
        if found.stopped:
            v.extend(found.errors)
            raise StopCheck
        # keys UTF-8, every dimension 1..2^63-1: declared in schemas.mag.RECORD_RELATIONS; each
        # row's findings are reported with that row's other findings
        recs = relations.check(S.RECORD_RELATIONS, ctx, buf)
        rows_of = relations.by_row(recs)
        self._check_meta(v, ctx.tables[META.name].rows, rows_of)
        self._check_tensors(v, tens.rows, tens.cols["nbytes"], found.bad.get(TENSOR.name, set()), rows_of,
                            recs.bad.get(TENSOR.name, set()))
        v.extend(found.errors)

    def _check_meta(self, v, metas, rows_of: dict):
        for i, (off, r) in enumerate(metas):
            p = f"meta[{i}]"
            v.extend(META.check(r, off, p))
            v.extend(rows_of.get(("meta", i), ()))  # its key
            key = _text(r["key"])
            if key is None or key in self._meta:  # (a repeated key: the relations report it)
                continue
            if r["type"] in (MetaType.I64, MetaType.F64):
                self._meta[key] = _u64_to_value(r["type"], r["payload"])
                self.meta_types[key] = MetaType(r["type"]).name.lower()

    def _check_tensors(self, v, tens, nbytes, bad: set, rows_of: dict, bad_record: set):
        names, codes, shapes, begins, sizes, unfit, self._at, seen = [], [], [], [], [], set(), [], set()
        for i, (off, r) in enumerate(tens):
            v.extend(TENSOR.check(r, off, f"tensors[{i}]"))
            v.extend(rows_of.get(("tensors", i), ()))  # its key, its dimensions
            key = _text(r["key"])
            if key is None or key in seen:  # (a repeated key: the relations report it)
                continue
            seen.add(key)
            if i in bad or i in bad_record or r["dtype"] not in NP_DTYPES or r["rank"] < S.MIN_RANK:
                unfit.add(len(names))
            for col, x in zip((names, codes, shapes, begins, sizes, self._at),
                              (key, r["dtype"], tuple(r["shape"]), r["offset"], int(nbytes[i]), (off, i))):
                col.append(x)
        self.rows = TensorRows(names, codes, shapes, begins, sizes)
        self.rows.bad |= unfit

    # ------------------------------------------------------------------ public reading
    def _where(self, i: int) -> tuple:
        return self._at[i][0], f"tensors[{self._at[i][1]}]", Rule.BOUNDS

    def _extra(self, i: int) -> dict:
        return {"record_offset": self._at[i][0]}

    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        """Everything is checked at open (the checksum covers only the records); ``full``
        has nothing more to hash: MAG stores no digest of the tensor data."""
        rep = self._report("full" if full else "structure")
        if self.records_end is not None:
            rep.checked.append(f"header, {len(self._meta)} metadata and {len(self.rows)} tensor records; "
                               f"CRC-32C of [12, {self.records_end})")
        if self._crc is not None:
            rep.checksums.append(self._crc)
        if full:
            rep.notes.append("MAG has no checksum over tensor data: only the records are covered")
            rep.add(self._odd_bools())
        return self._finish(rep)

    def describe(self) -> dict:
        d = super().describe()
        d.update({"version": str(self.header.get("version")), "file_size": self._src.size,
                  "checksums": [self._crc.as_dict()] if self._crc is not None else [],
                  "metadata_types": dict(self.meta_types)})
        return d


validate_file = MagReader.validate_file


# =============================================================================== writer
def write_mag(path, tensors: Mapping | Iterable, *, metadata: Mapping[str, Any] | None = None,
              progress: bool | None = None) -> str:
    """Write a MAG v1 file: streaming, deterministic (input order kept), atomic.

    ``tensors``: name -> numpy array of float32, float16, bool or int32 (rank 1..255, every
    dimension >= 1; big-endian input is converted), or a :class:`codec.io.writer_io.LazyTensor`
    of one (loaded when it is written, dropped after).  ``metadata``: name -> int, float or bool
    (bools are stored as i64, as magnetron does).
    """
    pairs = list(named_pairs(tensors))
    metas = []
    metadata = mapping_arg(metadata)
    for k, val in metadata.items():
        with E.about(f"MAG metadata {k!r}"):
            t, bits = _value_to_u64(val)
        metas.append(META.build({"type": int(t), "payload": bits, "key": _key_bytes(k)}))
    recs = []
    arrays = [(name, a, code) for name, code, a in admit(pairs, DESCRIPTOR.capabilities, DTYPES)]
    meta_keys = list(metadata)
    if len(set(meta_keys)) != len(meta_keys):
        raise E.UsageError("duplicate metadata key")
    # layout: records first (their size is known), then the data, placed as the schema declares
    sizes = [TENSOR.min_size() - 8 + 8 * a.ndim + len(_key_bytes(n)) for n, a, _ in arrays]
    records_end = HEADER.size + sum(map(len, metas)) + sum(sizes)
    offsets, end = place(S.RELATIONS, "TensorRecord.offset", [a.nbytes for _, a, _ in arrays], records_end)
    for (name, a, code), off in zip(arrays, offsets):
        recs.append(TENSOR.build({"dtype": int(code), "rank": a.ndim, "numel": a.size, "offset": off,
                                  "shape": list(a.shape), "key": _key_bytes(name)}))
    body = b"".join(metas) + b"".join(recs)
    assert HEADER.size + len(body) == records_end
    head = {"magic": S.MAGIC, "version": S.VERSION, "checksum": 0, "num_tensors": len(arrays),
            "num_meta_kv": len(metas)}
    blob = HEADER.build(head) + body
    head["checksum"] = checksum(S.HEADER_CHECKSUM, blob, len(blob))  # placeholder, then patch
    blob = HEADER.build(head) + body
    return write_placed(path, blob, [(off, a, name) for (name, a, _), off in zip(arrays, offsets)], end,
                        progress=progress)


def _key_bytes(k) -> bytes:
    b = name_bytes(k, "metadata key", empty_ok=True)
    if len(b) > S.MAX_KEY_LENGTH:
        raise E.UsageError(f"key of {len(b)} bytes is over MAX_KEY_LENGTH ({S.MAX_KEY_LENGTH})")
    return b


# =============================================================================== registry
from ..registry import Capabilities, FormatDescriptor  # noqa: E402

DESCRIPTOR = FormatDescriptor("mag", S, MagReader, write_mag, magic=S.MAGIC,
                              demo=Standard({"n_layers": 2, "lr": 3e-4, "tied": False}),
                              capabilities=Capabilities(DTYPES.array_names, names="(?s).*", names_doc="any text",
                                                        min_rank=S.MIN_RANK, max_rank=S.MAX_RANK,
                                                        zero_extents=False, metadata="scalars", lazy=True),
                              summary="magnetron storage v1: CRC-32C header, typed metadata")
