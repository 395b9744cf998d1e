"""AERO v0.1: what cannot be declarative — chunk semantics, payload decoding, reader, writer.

The layout is declared once in :mod:`schemas.aero`; records go through :mod:`codec.engine`
(header, TOC header) or its numpy path (the TOC entry table); msgpack payloads are checked by
:mod:`codec.payload` against the declarations of the same module.

Reading has two levels (DECISIONS.md): *structure* is checked at open (cheap: header, TOC,
string table, TIDX/MMSG decoded and hash-verified, tensor names) and, once and vectorised,
before the first tensor is handed out (every TIDX entry: types, ranges, dtype x shape, bytes
inside the shard); *integrity* (``validate(full=True)``) adds every chunk's BLAKE3 streamed,
hash_b3, IHSH and PHSH.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Callable, Iterable, Mapping

import ml_dtypes
import msgpack
import numpy as np
import zstandard

from schemas import aero as S
from schemas.aero import DType, FourCC, Rule
from schemas.dsl import RefersTo, Region, Unique

from .. import errors as E
from .. import payload, relations, table
from ..engine import record_of
from ..integrity import (BackgroundFeed, PageHasher, blake3_bytes, blake3_hasher, blake3_range, hash_many, new_hasher,
                         scan_hashes,
                         range_pieces)
from ..io import (
    PIECE, PartialSource, Source, Writeback, array_pieces, as_array, as_le_bytes, atomic_write, common_metadata,
    frozen_view, name_bytes, write_all,
)
from ..model import Checksum, Packed, Reader, Report, StopCheck, TensorInfo, numpy_can_hold
from ..progress import Progress

FMT = S.FORMAT
HEADER = record_of(S.FileHeader)
TOC_HEADER = record_of(S.TocHeader)
TOC_ENTRY = record_of(S.TocEntry)

#: AERO dtype code -> numpy dtype of the array tensor() returns
NP_DTYPES: dict[int, np.dtype] = {
    DType.F16: np.dtype("<f2"), DType.F32: np.dtype("<f4"), DType.BF16: np.dtype(ml_dtypes.bfloat16),
    DType.F64: np.dtype("<f8"), DType.I8: np.dtype("i1"), DType.U8: np.dtype("u1"),
    DType.I16: np.dtype("<i2"), DType.U16: np.dtype("<u2"), DType.I32: np.dtype("<i4"),
    DType.U32: np.dtype("<u4"), DType.I64: np.dtype("<i8"), DType.U64: np.dtype("<u8"),
    DType.BOOL: np.dtype("?"), DType.PACKED: np.dtype("u1"),
}
for _code, _dt in NP_DTYPES.items():
    assert _dt.itemsize == S.DTYPE_ITEMSIZE[_code]
#: numpy dtype (byte order ignored) -> AERO dtype code
CODE_OF: dict[np.dtype, int] = {dt.newbyteorder("<"): c for c, dt in NP_DTYPES.items() if c != DType.PACKED}


#: the hash every AERO digest uses, as reports name it
B3 = "blake3-256"


def _err(cls, offset, path, rule, msg) -> E.FormatError:
    return cls(FMT, offset, path, rule, msg)


@dataclass
class Chunk:
    index: int
    fourcc: bytes
    name: str
    flags: int
    offset: int
    length: int
    ulen: int
    blake3: bytes
    toc_offset_field: int  # absolute offset of this chunk's TOC entry

    @property
    def compressed(self) -> bool:
        return bool(self.flags & S.ChunkFlags.COMPRESSED_ZSTD)

    def path(self) -> str:
        return f"toc[{self.index}]({self.fourcc.decode('ascii', 'replace')} {self.name!r})"


# =============================================================================== reader
class AeroReader(Reader):
    """Reads one AERO file from a path (mmap) or a buffer.

    Structure is checked at open; a broken file raises the first :class:`codec.FormatError`.
    Tensors are read-only zero-copy numpy views; hash_b3 is verified on a tensor's first read.
    """
    format = "aero"
    FMT = FMT

    def __init__(self, source, *, strict: bool = True, _collect: bool = False):
        self.strict = strict
        self._verified: set[str] = set()
        self._mjsn: Any = None
        self.chunks: list[Chunk] = []
        self.header: dict = {}
        self.manifest: dict = {}
        self._entries = table.Table(S.TidxEntry)
        self._index: dict[str, int] = {}
        self._shards: dict = {}
        self._unusable: set[int] = set()
        self._unusable_why: dict[int, E.FormatError] = {}
        self._entry_check: list | None = None
        self._digests: dict[int, bytes] = {}  # chunk index -> BLAKE3 computed over its payload
        self._tidx_chunk: Chunk | None = None
        self._toc_ok = False
        self.index_only = False
        self._open(source, _collect)

    # ------------------------------------------------------------------ structure
    def _parse(self, v) -> None:
        self._header(v)
        self._toc(v)
        self._mmsg(v)
        self._tidx(v)

    def _fatal(self, v, err):
        v.append(err)
        raise StopCheck

    def _header(self, v):
        size = self._src.size
        h = self._read_header(v, HEADER, Rule.TRUNCATED)
        toc_off, toc_len = h["toc_offset"], h["toc_length"]
        if toc_off + toc_len > size:
            self._fatal(v, _err(E.BoundsError, HEADER.by_name["toc_length"].offset, "FileHeader.toc_length",
                                Rule.TOC_BOUNDS, f"TOC [{toc_off}, +{toc_len}) extends past the end of the "
                                f"file ({size} bytes)"))
        if toc_len < S.TOC_HEADER_SIZE:
            self._fatal(v, _err(E.StructureError, HEADER.by_name["toc_length"].offset, "FileHeader.toc_length",
                                Rule.TOC_LENGTH, f"must be at least {S.TOC_HEADER_SIZE} (got {toc_len})"))
        st_off, st_len = h["string_table_offset"], h["string_table_length"]
        if st_off + st_len > size:
            self._fatal(v, _err(E.BoundsError, HEADER.by_name["string_table_length"].offset,
                                "FileHeader.string_table_length", Rule.STRTAB_BOUNDS,
                                f"string table [{st_off}, +{st_len}) extends past the end of the file ({size} bytes)"))
        if st_off < toc_off + toc_len and toc_off < st_off + st_len:
            v.append(_err(E.OverlapError, HEADER.by_name["string_table_offset"].offset,
                          "FileHeader.string_table_offset", Rule.STRTAB_BOUNDS,
                          f"string table [{st_off}, +{st_len}) overlaps the TOC [{toc_off}, +{toc_len})"))
        if st_off < S.HEADER_SIZE:
            self._fatal(v, _err(E.OverlapError, HEADER.by_name["string_table_offset"].offset,
                                "FileHeader.string_table_offset", Rule.STRTAB_BOUNDS,
                                f"string table at {st_off} overlaps the header"))

    def _toc(self, v):
        buf, size, h = self._src.buf, self._src.size, self.header
        toc_off, toc_len = h["toc_offset"], h["toc_length"]
        if not (self._src.has(toc_off, toc_len) and
                self._src.has(h["string_table_offset"], h["string_table_length"])):
            # a partial (remote) source reads the control region only when the header is sane
            if not any(x.severity == "error" for x in v):
                v.append(_err(E.TruncatedError, toc_off, "toc", Rule.TOC_BOUNDS, "the TOC was not read"))
            raise StopCheck
        th = TOC_HEADER.parse(buf, toc_off, "TocHeader")
        bad = TOC_HEADER.check(th, toc_off, "TocHeader")
        v.extend(bad)
        if any(isinstance(b, E.LimitError) for b in bad):
            raise StopCheck
        n = th["entry_count"]
        if toc_len != S.TOC_HEADER_SIZE + S.TOC_ENTRY_SIZE * n:
            self._fatal(v, _err(E.StructureError, HEADER.by_name["toc_length"].offset, "FileHeader.toc_length",
                                Rule.TOC_LENGTH, f"must be 16 + 80 x entry_count = "
                                f"{S.TOC_HEADER_SIZE + S.TOC_ENTRY_SIZE * n} (got {toc_len})"))
        base = toc_off + S.TOC_HEADER_SIZE
        tab = TOC_ENTRY.view(buf, base, n)
        v.extend(TOC_ENTRY.check_table(tab, base, "toc"))

        st_off, st_len = h["string_table_offset"], h["string_table_length"]
        # names first (a name outside the string table is not decoded: its relation reports it)
        name_bad = (tab["name_off"].astype(np.uint64) + tab["name_len"].astype(np.uint64)) > st_len
        strtab = buf[st_off:st_off + st_len]
        chunks: list[Chunk] = []
        for i in range(n):
            e = tab[i]
            fourcc = bytes(e["fourcc"])
            eoff = base + i * S.TOC_ENTRY_SIZE
            if name_bad[i]:
                name = f"<bad name {i}>"
            else:
                raw = bytes(strtab[int(e["name_off"]):int(e["name_off"]) + int(e["name_len"])])
                try:
                    name = raw.decode("utf-8")
                    if "\x00" in name:
                        raise UnicodeError("NUL inside a name")
                except UnicodeError as ex:
                    v.append(_err(E.DecodeError, st_off + int(e["name_off"]), f"toc[{i}].name", Rule.NAME_UTF8,
                                  f"chunk name is not valid UTF-8 text: {ex}"))
                    name = raw.decode("utf-8", "replace")
            chunks.append(Chunk(i, fourcc, name, int(e["chunk_flags"]), int(e["chunk_offset"]), int(e["chunk_length"]),
                                int(e["chunk_ulen"]), bytes(e["blake3_256"]), eoff))
        # the rules between the entries' fields, declared in schemas.aero.TOC_RELATIONS
        ctx = relations.Context(FMT, size, h, HEADER, 0)
        ctx.add_table("TocEntry", "toc", {**{f: tab[f] for f in tab.dtype.names},
                                          "key": [(c.fourcc, c.name) for c in chunks]}, n, base + n * S.TOC_ENTRY_SIZE,
                      lambda i, f: base + i * S.TOC_ENTRY_SIZE + (TOC_ENTRY.by_name[f].offset if f in TOC_ENTRY.by_name
                                                                  else 0),
                      row_path=lambda i: chunks[i].path())
        ctx.values["control_end"] = max(toc_off + toc_len, st_off + st_len)
        found = relations.check(S.TOC_RELATIONS, ctx, buf)
        v.extend(found.errors)
        unusable = set(found.bad.get("TocEntry", ()))
        why = {i: err for (t, i), err in found.why.items() if t == "TocEntry"}
        # --- directory (a second chunk of the same kind and name was refused above)
        self._by_key: dict[tuple[bytes, str], Chunk] = {}
        for c in chunks:
            self._by_key.setdefault((c.fourcc, c.name), c)
        self.chunks = chunks
        self._unusable = unusable
        self._unusable_why = why
        self._toc_ok = True

    def chunk(self, fourcc: bytes | FourCC, name: str | None = None) -> Chunk | None:
        """The first chunk of this type (and name, when given)."""
        fc = fourcc.value if isinstance(fourcc, FourCC) else fourcc
        if name is not None:
            return self._by_key.get((fc, name))
        return next((c for c in self.chunks if c.fourcc == fc), None)

    def find_chunks(self, fourcc: bytes | FourCC) -> list[Chunk]:
        fc = fourcc.value if isinstance(fourcc, FourCC) else fourcc
        return [c for c in self.chunks if c.fourcc == fc]

    def _usable(self, c: Chunk) -> None:
        """A chunk whose payload can be read here (size bound checked before decompressing)."""
        if c.index in self._unusable:
            raise _err(E.StructureError, c.toc_offset_field, c.path(), Rule.CHUNK_BOUNDS,
                       "chunk is unusable (see validate)")
        if not self._src.has(c.offset, c.length):
            raise E.NotFoundError(f"{self.source}: {c.path()} was not read (a remote file: only its "
                                  "control region and metadata chunks are here)")
        if c.compressed and c.ulen > S.MAX_METADATA_ULEN:
            raise _err(E.LimitError, c.toc_offset_field + 24, f"{c.path()}.chunk_ulen",
                       Rule.LIMIT_METADATA_ULEN, f"must be <= {S.MAX_METADATA_ULEN} (got {c.ulen})")

    def chunk_bytes(self, c: Chunk, *, verify: bool = True) -> bytes | memoryview:
        """A chunk's uncompressed payload (size bound checked before decompressing)."""
        self._usable(c)
        raw = self._src.buf[c.offset:c.offset + c.length]
        data = _zstd_bounded(raw, c) if c.compressed else raw
        if verify:
            self._check_chunk_hash(c, blake3_bytes(data))
        return data

    def _check_chunk_hash(self, c: Chunk, got: bytes) -> None:
        self._digests[c.index] = got
        if got != c.blake3:
            raise E.IntegrityError(FMT, c.toc_offset_field + TOC_ENTRY.by_name["blake3_256"].offset,
                                   f"{c.path()}.blake3_256", Rule.CHUNK_HASH,
                                   f"BLAKE3 of the payload is {got.hex()[:16]}..., the TOC says "
                                   f"{c.blake3.hex()[:16]}...", algorithm=B3, expected=c.blake3.hex(),
                                   actual=got.hex())

    def chunk_reader(self, c: Chunk, *, verify: bool = True) -> payload.BoundedReader:
        """A chunk's uncompressed payload as a stream (never more than chunk_ulen bytes): big
        indexes are decoded as they inflate, never held whole.  :meth:`chunk_done` drains it and
        checks its size and (``verify``) BLAKE3."""
        self._usable(c)
        raw = self._src.buf[c.offset:c.offset + c.length]
        h = new_hasher() if verify else None
        if not c.compressed:
            return payload.BoundedReader(raw, c.length, h)
        _zstd_frame_ok(raw, c)
        src = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, read_size=PIECE)
        return payload.BoundedReader(src, c.ulen, h, on_error=lambda e: _err(
            E.CompressionError, c.offset, f"{c.path()}.payload", Rule.ZSTD, f"zstd: {e}"))

    def chunk_done(self, c: Chunk, rd: payload.BoundedReader) -> None:
        """The payload read through ``rd`` was whole and (when hashed) intact."""
        rd.drain()
        if c.compressed and rd.count != c.ulen:
            raise _ulen_error(c, rd.count)
        if rd.hasher is not None:
            self._check_chunk_hash(c, rd.hasher.digest())

    def _decode_msgpack(self, c: Chunk, decl, *, trailing_zeros=False, verify=True):
        data = self.chunk_bytes(c, verify=verify)
        obj = payload.unpack_msgpack(data, fmt=FMT, offset=c.offset, path=c.fourcc.decode(),
                                     rule=Rule.PAYLOAD, allow_trailing_zeros=trailing_zeros, stored=c.length,
                                     limit_rule=Rule.LIMIT_DECODE,
                                     per_byte=S.TIDX_OBJECTS_PER_BYTE if decl is S.Tidx else None)
        return obj

    def _tidx(self, v):
        # 10^5 entries make ~10^6 small objects: the cyclic GC would re-scan them many times
        with payload.gc_paused():
            self._tidx_unpaused(v)

    def _tidx_unpaused(self, v):
        c = self.chunk(FourCC.TIDX)
        if c is None:
            self._fatal(v, _err(E.StructureError, S.HEADER_SIZE, "toc", Rule.MISSING_CHUNK,
                                "no TIDX chunk: the file has no tensor index"))
        # decoded as it inflates, straight into columns (never one dict per tensor)
        rd = self.chunk_reader(c)
        try:
            t = table.unpack_table(rd, c.ulen if c.compressed else c.length, S.Tidx, "tensors",
                                   whole=lambda: self.chunk_bytes(c, verify=False), fmt=FMT, offset=c.offset,
                                   path="TIDX", rule=Rule.PAYLOAD, stored=c.length, limit_rule=Rule.LIMIT_DECODE,
                                   per_byte=S.TIDX_OBJECTS_PER_BYTE, keep="name")
        except E.FormatError:
            self.chunk_done(c, rd)  # a damaged payload is reported as such, before what decoding it found
            raise
        self.chunk_done(c, rd)
        names = t.kept
        if (not t.ok and not names) or not (set(map(type, names)) <= {str} and all(names)):
            # the index itself is malformed: say exactly where, now
            v.extend(t.errors or [_err(E.SchemaError, c.offset, "TIDX.tensors", Rule.PAYLOAD,
                                       "malformed tensor index")])
            raise StopCheck
        self._tidx_chunk = c
        self._entries = t
        # an AEROSET index.aero: no WTSH, and its manifest says so (a file whose WTSH fourcc
        # was corrupted still lists its shards in MMSG, and is reported as missing them)
        self.index_only = (not self.find_chunks(FourCC.WTSH) and self.manifest.get("shards") == []
                           and not any(isinstance(ch, dict) and ch.get("fourcc") == "WTSH"
                                       for ch in self.manifest.get("chunks", [])))
        index = table.name_index(names)
        if index is None:  # repeated names: the declared uniqueness reports them; the first one wins
            ctx = self._tidx_context(c, {"name": names}, len(names))
            v.extend(relations.check([r for r in S.RELATIONS if isinstance(r, Unique)], ctx, self._src.buf).errors)
            index = {}
            for i, name in enumerate(names):
                index.setdefault(name, i)
        self._index = index

    def _entry_violations(self) -> list[E.FormatError]:
        """Every TIDX entry against its declaration and the file (types, ranges, dtype x shape =
        data_len, shard exists, bytes inside the shard).  The declaration was checked as the
        index was decoded; the relations run once, vectorised, before the first tensor is handed
        out (listing names does not need them) and in every validate()."""
        if self._entry_check is None:
            v = list(self._entries.errors)
            if not v:
                self._shards = self._tidx_relations(v, self._tidx_chunk, self._entries)
            self._entry_check = [e.with_source(self.source) for e in v]
        return self._entry_check

    def _entries_ok(self) -> None:
        bad = self._entry_violations()
        if bad:
            raise bad[0]

    def _tidx_context(self, c: Chunk, columns, n: int) -> relations.Context:
        """The TIDX entries as a table the declared relations run over (findings point at the
        TIDX chunk: its entries have no byte offsets of their own)."""
        ctx = relations.Context(FMT, self._src.size)
        ctx.add_table("TidxEntry", "TIDX.tensors", columns, n, 0, lambda i, f: c.offset)
        return ctx

    def _tidx_relations(self, v, c: Chunk, t: table.Table):
        """dtype x shape = data_len, shard exists, range inside the shard (declared in
        schemas.aero.RELATIONS; names were checked as the index opened)."""
        n = len(t)
        if not n:
            return {}
        sid = t.column("shard_id")
        shards = {int(u): self.chunk(FourCC.WTSH, S.ChunkName.shard(int(u))) for u in np.unique(sid)}
        cols = _TidxColumns(t)
        ctx = self._tidx_context(c, cols, n)
        ctx.targets["WTSH chunk weights.shard"] = {u: (sh.offset, sh.length) for u, sh in shards.items()
                                                   if sh is not None}
        rels = [r for r in S.RELATIONS if not isinstance(r, Unique)
                and not (self.index_only and isinstance(r, (RefersTo, Region)))]
        v.extend(relations.check(rels, ctx, self._src.buf).errors)
        # (tensors in an unusable shard are not findings of their own: reading one raises
        # what made the shard unusable, see _info)
        return shards

    def _mmsg(self, v):
        c = self.chunk(FourCC.MMSG)
        if c is None:
            return
        obj = self._decode_msgpack(c, S.Mmsg)
        bad = payload.check(S.Mmsg, obj, fmt=FMT, offset=c.offset, path="MMSG")
        v.extend(bad)
        if not bad:
            self.manifest = obj

    # ------------------------------------------------------------------ public reading
    @property
    def uuid(self) -> bytes:
        return self.header["uuid"]

    @property
    def metadata(self) -> dict:
        """The MJSN JSON object (model_name, architecture, ...), or MMSG's model map."""
        if self._mjsn is None:
            c = self.chunk(FourCC.MJSN)
            self._mjsn = {}
            if c is not None:
                # Most reference-written files have an all-zero MJSN hash (a reference bug):
                # reading still works; validate() reports the mismatch.
                obj = self._json(c, verify=False)
                if isinstance(obj, dict):
                    self._mjsn = obj
            elif isinstance(self.manifest.get("model"), dict):
                self._mjsn = dict(self.manifest["model"])
        return self._mjsn

    def _json(self, c: Chunk, verify: bool):
        return payload.loads_json(self.chunk_bytes(c, verify=verify), fmt=FMT, offset=c.offset, path="MJSN",
                                  rule=Rule.PAYLOAD, stored=c.length, limit_rule=Rule.LIMIT_DECODE)

    @property
    def quant_descriptors(self) -> list:
        q = self.manifest.get("quant_descriptors")
        if q is None:
            q = self.metadata.get("quant_descriptors")
        return q if isinstance(q, list) else []

    def _info(self, i: int) -> TensorInfo:
        self._entries_ok()
        e = self._entries[i]
        sh = self._shards.get(e["shard_id"])
        if sh is not None and sh.index in self._unusable:
            raise self._unusable_why.get(sh.index, _err(E.StructureError, sh.toc_offset_field, sh.path(),
                                                         Rule.CHUNK_BOUNDS, "chunk is unusable (see validate)")
                                         ).with_source(self.source)
        dt = e["dtype"]
        extra = {"dtype_name": S.DTYPE_NAMES[dt], "dtype_code": dt, "shard_id": e["shard_id"],
                 "data_off": e["data_off"], "flags": e.get("flags", 0)}
        if dt == DType.PACKED:
            extra["packed"] = True
        for k in ("hash_b3", "quant_id", "quant_params"):
            if k in e:
                extra[k] = e[k]
        shape = tuple(e["shape"])
        offset = None if sh is None else sh.offset + e["data_off"]
        if offset is None:  # (an index-only file: what `verify` says of where the bytes are)
            extra["elsewhere"] = "index-only AERO: it lives in the AEROSET parts"
        return TensorInfo(e["name"], NP_DTYPES[dt], shape, offset, e["data_len"], extra)

    def tensor(self, name: str, *, verify: bool = True) -> np.ndarray:
        """Read-only zero-copy view.  PACKED tensors come back as raw uint8 bytes (see
        ``tensors[name].extra`` for quant_id/quant_params).  hash_b3 is checked on first read."""
        t = self.tensors[name]
        if t.offset is None:
            raise E.NotFoundError(f"{self.source}: {name!r} is listed by this index-only AERO file (no WTSH "
                                  "chunk); its bytes live in the AEROSET parts")
        if not self._src.has(t.offset, t.nbytes):
            raise E.NotFoundError(f"{self.source}: the bytes of {name!r} are not here (a remote file is read "
                                  "through its AeroSet)")
        if verify and "hash_b3" in t.extra and name not in self._verified:
            self._check_hash_b3(t, raise_=True)
            self._verified.add(name)
        return tensor_view(t, self._src.buf, t.offset)

    def _check_hash_b3(self, t: TensorInfo, raise_: bool, got: str | None = None) -> E.FormatError | None:
        want = t.extra["hash_b3"].lower()
        if got is None:
            # on a read (raise_) the caller touches these pages next: keep them mapped
            got = blake3_range(self._src, t.offset, t.nbytes, keep=raise_).hex()
        if got == want:
            return None
        i = self._index[t.name]
        err = E.IntegrityError(FMT, t.offset, f"TIDX.tensors[{i}].hash_b3", Rule.HASH_B3,
                               f"tensor {t.name!r}: BLAKE3 of its bytes is {got[:16]}..., hash_b3 says {want[:16]}...",
                               algorithm=B3, expected=want, actual=got)
        if raise_:
            raise err.with_source(self.source)
        return err

    # ------------------------------------------------------------------ validation
    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        """Structure always; ``full`` adds every chunk BLAKE3 (streamed), hash_b3, IHSH, PHSH.
        ``control`` checks only the IHSH control-region digest."""
        level = "control" if control else ("full" if full else "structure")
        rep = Report("aero", self.source, level)
        if not self._toc_ok:  # no usable TOC (or not AERO 0.1 at all): nothing else can be checked
            rep.add(list(self._structure))
            rep.notes.append("the TOC could not be read: chunk-level checks were skipped")
            return self._finish(rep)
        if control:
            self._validate_ihsh(rep, required=True)
            return self._finish(rep)
        rep.add(list(self._structure))
        if self._tidx_chunk is not None:
            rep.add(self._entry_violations())
        rep.checked.append(f"structure: header, TOC ({len(self.chunks)} chunks), string table, "
                           f"TIDX ({len(self._index)} tensors), MMSG")
        self._check_padding(rep)
        known = {f.value for f in FourCC}
        for c in self.chunks:
            if c.fourcc not in known:
                rep.add(E.StructureError(FMT, c.toc_offset_field, f"{c.path()}.fourcc", Rule.UNKNOWN_CHUNK,
                                         "unknown chunk type: readers skip it", severity="warning"))
        # metadata chunks are small: their hashes are part of the structure check
        for c in self.chunks:
            if c.fourcc == FourCC.MJSN and c.index not in self._unusable:
                try:
                    self._json(c, verify=True)
                except E.FormatError as e:
                    rep.add(e)
        if not full:
            self._chunk_checksums(rep)
            return self._finish(rep)
        if not self._src.has(0, self._src.size):
            raise E.UsageError(f"{self.source}: full validation needs the whole file (a remote set downloads "
                               "each part for it: AeroSet.validate(full=True))")
        big = [c for c in self.chunks if c.index not in self._unusable and c.fourcc not in
               (FourCC.MJSN, FourCC.TIDX, FourCC.MMSG)]
        entries_ok = self._tidx_chunk is not None and not self._entry_violations() and not self.index_only
        has = self._entries.present("hash_b3") if entries_ok else None
        if entries_ok:  # (a tensor in an unusable shard: that shard's finding says it all)
            lost = [sid for sid, sh in self._shards.items() if sh is not None and sh.index in self._unusable]
            has = has & ~np.isin(self._entries.column("shard_id"), np.array(lost, dtype=np.uint64))
        rows = np.flatnonzero(has) if entries_ok else np.zeros(0, dtype=np.int64)  # the tensors with a hash_b3
        # (columns, not one TensorInfo per tensor: 10^5 tensors cost no Python objects here)
        sid, start, size = ((self._entries.column(k)[rows] for k in ("shard_id", "data_off", "data_len")) if len(rows)
                            else (np.zeros(0, dtype=np.uint64),) * 3)
        total = sum(c.length for c in big) + int(size.sum())
        with Progress(total, f"validate {os.path.basename(self.source)}", enabled=progress) as bar:
            got = np.zeros(len(rows), dtype="S64")  # hex digest of each tensor in `rows` (b"": not hashed yet)
            shard_of = {sh.index: s_id for s_id, sh in self._shards.items() if sh is not None}
            for c in big:
                try:
                    if c.compressed:
                        self.chunk_bytes(c, verify=True)
                        bar.update(c.length)
                    else:  # each byte read once, for the chunk hash and the hashes of the tensors in it
                        mine = np.flatnonzero(sid == shard_of[c.index]) if c.index in shard_of else np.zeros(0, int)
                        digest, hexes = scan_hashes(self._src, c.offset, c.length,
                                                    list(zip((c.offset + start[mine]).tolist(), size[mine].tolist())),
                                                    bar.update)
                        got[mine] = np.array(hexes, dtype="S64")
                        self._check_chunk_hash(c, digest)
                except E.FormatError as e:
                    rep.add(e)
            rep.checked.append(f"BLAKE3 of {len(self.chunks)} chunks")
            rest = np.flatnonzero(got == b"").tolist()  # (a shard whose pass failed: hashed alone)
            if rest:
                ts = [self._info(int(rows[k])) for k in rest]
                got[rest] = np.array(hash_many([(t.nbytes, range_pieces(self._src, t.offset, t.nbytes)) for t in ts],
                                               bar.update), dtype="S64")
            bad = 0
            if len(rows):
                want = np.char.lower(self._entries.column("hash_b3")[rows])
                for k in np.flatnonzero(want != got).tolist():
                    e = self._check_hash_b3(self._info(int(rows[k])), raise_=False, got=got[k].decode("ascii"))
                    if e is not None:
                        rep.add(e)
                        bad += 1
            if len(rows):
                rep.checked.append(f"hash_b3 of {len(rows)} tensors")
                rep.checksum(B3, "every tensor's bytes (TIDX hash_b3)", count=len(rows), mismatches=bad)
            elif entries_ok:
                rep.checked.append("hash_b3: no tensor carries one")
        self._validate_ihsh(rep, required=False)
        self._validate_phsh(rep)
        self._chunk_checksums(rep)
        return self._finish(rep)

    def _chunk_checksums(self, rep: Report) -> None:
        """One checksum entry per chunk whose payload was hashed (at open or by this validation)."""
        for c in self.chunks:
            got = self._digests.get(c.index)
            if got is not None:
                rep.checksum(B3, f"chunk {c.index} {c.fourcc.decode('ascii', 'replace')} {c.name!r} payload",
                             c.blake3, got)

    def _check_padding(self, rep: Report) -> None:
        """Bytes no hash covers must be zero: string-table padding, gaps between chunks, tail."""
        h, size = self.header, self._src.size
        st_off, st_len = h["string_table_offset"], h["string_table_length"]
        # every chunk's name and bytes count, usable or not: they are not padding (an unusable
        # chunk is already a finding; its bytes are not a second one)
        ok_chunks = self.chunks
        names_end = max([c_end for c_end in (self._name_end(c) for c in ok_chunks) if c_end is not None],
                        default=0)
        regions = [(st_off + min(names_end, st_len), st_off + st_len, "string table padding")]
        pos = max(h["toc_offset"] + h["toc_length"], st_off + st_len)
        for c in sorted(ok_chunks, key=lambda c: c.offset):
            if c.offset > pos:
                regions.append((pos, c.offset, f"gap before {c.path()}"))
            pos = max(pos, c.offset + c.length)
        regions.append((pos, size, "bytes after the last chunk"))
        unread = 0
        for a0, b0, what in regions:
            a0, b0 = min(a0, size), min(b0, size)
            here = self._src.covered(a0, b0)
            unread += max(b0 - a0, 0) - sum(b - a for a, b in here)
            for a, b in here:
                nz = np.flatnonzero(np.frombuffer(self._src.buf, np.uint8, b - a, a))
                if nz.size:
                    rep.add(_err(E.ReservedError, a + int(nz[0]), what, Rule.PADDING,
                                 f"{nz.size} non-zero byte(s) in [{a}, {b}); padding must be zero"))
        if unread:
            rep.notes.append(f"{unread} padding bytes outside the ranges read were not checked (remote file)")

    def _name_end(self, c: Chunk) -> int | None:
        """End of a chunk's name in the string table, its NUL included."""
        e = TOC_ENTRY.view(self._src.buf, c.toc_offset_field, 1)[0]
        return int(e["name_off"]) + int(e["name_len"]) + 1

    def _validate_ihsh(self, rep: Report, required: bool) -> None:
        c = self.chunk(FourCC.IHSH)
        if c is None:
            rep.notes.append("no IHSH chunk: the control region (header, TOC, string table) carries no digest")
            return
        try:
            obj = self._decode_msgpack(c, S.Ihsh, trailing_zeros=True)
            bad = payload.check(S.Ihsh, obj, fmt=FMT, offset=c.offset, path="IHSH")
            if bad:
                rep.add(bad)
                return
            end = self.payloads_start()
            ranges = obj["covered_ranges"]
            if ranges != [[0, end]]:
                rep.add(_err(E.IntegrityError, c.offset, "IHSH.covered_ranges", Rule.IHSH,
                             f"must be [[0, {end}]] (got {ranges})"))
                return
            got = self.control_digest(end)
            rep.checksum(B3, f"control region [0, {end}), TOC hashes zeroed (IHSH)", obj["digest"], got)
            if got != obj["digest"]:
                rep.add(E.IntegrityError(FMT, c.offset, "IHSH.digest", Rule.IHSH,
                                         f"control region digest is {got.hex()[:16]}..., IHSH says "
                                         f"{obj['digest'].hex()[:16]}...", algorithm=B3, expected=obj["digest"].hex(),
                                         actual=got.hex()))
            rep.checked.append(f"IHSH control-region digest over [0, {end})")
        except E.FormatError as e:
            rep.add(e)

    def payloads_start(self) -> int:
        h = self.header
        end = max(h["toc_offset"] + h["toc_length"], h["string_table_offset"] + h["string_table_length"])
        return _align(end, S.CHUNK_ALIGN)

    def control_digest(self, end: int) -> bytes:
        """AIP-0001: BLAKE3 of [0, end) with the hash field of every TOC entry zeroed."""
        if not self._src.has(0, min(end, self._src.size)):
            raise E.UsageError(f"{self.source}: the control region was not read whole (a remote file): "
                               "its IHSH digest is checked by the set's full validation")
        region = bytearray(self._src.buf[:min(end, self._src.size)])
        hoff = TOC_ENTRY.by_name["blake3_256"].offset
        for c in self.chunks:
            p = c.toc_offset_field + hoff
            region[p:p + 32] = bytes(32)
        return blake3_bytes(region)

    def _validate_phsh(self, rep: Report) -> None:
        n = 0
        for c in self.find_chunks(FourCC.PHSH):
            try:
                obj = self._decode_msgpack(c, S.Phsh)
                bad = payload.check(S.Phsh, obj, fmt=FMT, offset=c.offset, path=f"PHSH({c.name})")
                if bad:
                    rep.add(bad)
                    continue
                sh = self.chunk(FourCC.WTSH, obj["shard_name"])
                if sh is None or sh.index in self._unusable:
                    rep.add(_err(E.StructureError, c.offset, f"PHSH({c.name}).shard_name", Rule.PHSH,
                                 f"no usable WTSH chunk named {obj['shard_name']!r}"))
                    continue
                ps = obj["page_size"]
                want_n = -(-sh.length // ps)
                if len(obj["digests"]) != want_n:
                    rep.add(_err(E.IntegrityError, c.offset, f"PHSH({c.name}).digests", Rule.PHSH,
                                 f"{sh.name} has {want_n} pages of {ps} bytes, PHSH lists {len(obj['digests'])}"))
                    continue
                got = _pages(self._src, sh.offset, sh.length, ps)
                bad = 0
                for k, (g, w) in enumerate(zip(got, obj["digests"])):
                    if g != w:
                        bad += 1
                        rep.add(E.IntegrityError(FMT, sh.offset + k * ps, f"PHSH({c.name}).digests[{k}]", Rule.PHSH,
                                                 f"page {k} of {sh.name} hashes to {g.hex()[:16]}..., PHSH says "
                                                 f"{w.hex()[:16]}...", algorithm=B3, expected=w.hex(), actual=g.hex()))
                rep.checksum(B3, f"pages of {sh.name}, {ps} bytes each (PHSH)", count=len(got), mismatches=bad)
                n += 1
            except E.FormatError as e:
                rep.add(e)
        if n:
            rep.checked.append(f"PHSH page digests of {n} shards")

    # ------------------------------------------------------------------ misc
    def inspect_notes(self, t: TensorInfo) -> dict:
        return {"shard": t.extra["shard_id"]}

    def describe(self) -> dict:
        d = super().describe()
        d.update({
            "version": f"{self.header['version_major']}.{self.header['version_minor']}",
            "uuid": self.uuid.hex(),
            "file_size": self._src.size,
            "chunks": [{"index": c.index, "fourcc": c.fourcc.decode("ascii", "replace"), "name": c.name,
                        "flags": c.flags, "offset": c.offset, "length": c.length, "ulen": c.ulen}
                       for c in self.chunks],
            # every chunk's digest; "actual" for those hashed at open (the metadata chunks)
            "checksums": [Checksum(B3, f"chunk {c.index} {c.fourcc.decode('ascii', 'replace')} {c.name!r} payload",
                                   c.blake3.hex(), self._digests[c.index].hex() if c.index in self._digests else None
                                   ).as_dict() for c in self.chunks],
        })
        return d


validate_file = AeroReader.validate_file


def tensor_view(t: TensorInfo, buf, offset: int) -> np.ndarray:
    """The read-only array of tensor ``t`` whose bytes start at ``offset`` in ``buf`` (PACKED
    tensors as their raw uint8 bytes)."""
    if t.extra["dtype_code"] == DType.PACKED:
        dt, count, shape = np.dtype(np.uint8), t.nbytes, (t.nbytes,)
    else:
        dt, count, shape = t.dtype, t.nbytes // t.dtype.itemsize, t.shape
    return frozen_view(buf, dt, count, offset).reshape(shape)


#: a file that is not here (remote) is opened by reading its first OPEN_PREFIX bytes: header,
#: TOC, string table and, for models of up to a few thousand tensors, the metadata chunks too
OPEN_PREFIX = 256 * 1024
#: ranges the opener needs that are closer than this are read as one
_OPEN_GAP = 64 * 1024
#: the chunks a reader decodes at open (MJSN: for metadata)
_OPEN_CHUNKS = (FourCC.MMSG, FourCC.TIDX, FourCC.MJSN)


def open_partial(name: str, size: int, read: Callable[[list[tuple[int, int]]], list], *, strict: bool = True,
                 prefix: int = OPEN_PREFIX, _collect: bool = False) -> AeroReader:
    """Open an AERO file of ``size`` bytes that is not here, reading only what the structure
    check needs, with ``read([(start, length), ...]) -> [bytes, ...]`` (at most three calls):
    the first ``prefix`` bytes; then, only if they were not in it, the TOC and the string
    table; then the first MMSG, TIDX and MJSN chunks the TOC lists — exactly what the reader
    reads at open, so both give the same tensors or the same error.  A range is read only when
    it lies inside the file and within the limits the header and TOC declare, so a hostile
    header cannot make the opener download (or hold) more than those limits.  Tensor bytes
    are not read: ``tensors[name].offset`` says where they are."""
    src = PartialSource(name, size)
    first = min(size, max(prefix, S.HEADER_SIZE))
    src.add(0, read([(0, first)])[0])
    try:
        if first >= S.HEADER_SIZE:
            h = HEADER.parse(src.buf, 0, "FileHeader")
            if not _stops(HEADER.check(h, 0, "FileHeader")):
                toc_off, toc_len = h["toc_offset"], h["toc_length"]
                st_off, st_len = h["string_table_offset"], h["string_table_length"]
                want = [(a, a + n) for a, n in ((toc_off, toc_len), (st_off, st_len))
                        if a + n <= size and n <= _MAX_TOC_BYTES]
                _read_into(src, read, want)
                if want and want[0][0] == toc_off:
                    _read_into(src, read, _metadata_spans(src, toc_off, size))
    except E.FormatError:
        pass  # the reader reports it, from what is here
    return AeroReader(src, strict=strict, _collect=_collect)


#: the largest TOC a header may make the opener read (MAX_ENTRY_COUNT entries)
_MAX_TOC_BYTES = S.TOC_HEADER_SIZE + S.TOC_ENTRY_SIZE * S.MAX_ENTRY_COUNT


def _read_into(src: PartialSource, read, spans: list[tuple[int, int]]) -> None:
    """Read the parts of ``spans`` that ``src`` does not hold yet (near ones as one range)."""
    todo: list[list[int]] = []
    for a, b in sorted(spans):
        for x, y in src.missing(a, b):
            if todo and x <= todo[-1][1] + _OPEN_GAP:
                todo[-1][1] = max(todo[-1][1], y)
            else:
                todo.append([x, y])
    if todo:
        for (a, _), data in zip(todo, read([(a, b - a) for a, b in todo])):
            src.add(a, data)


def _stops(violations) -> bool:
    """Violations after which the reader reads no further (so neither does the opener)."""
    return any(isinstance(v, (E.MagicError, E.UnsupportedVersionError, E.LimitError)) for v in violations)


def _metadata_spans(src: PartialSource, toc_off: int, size: int) -> list[tuple[int, int]]:
    """Where the first chunk of each type the reader decodes at open lies (when it is sane)."""
    th = TOC_HEADER.parse(src.buf, toc_off, "TocHeader")
    n = th["entry_count"]
    if _stops(TOC_HEADER.check(th, toc_off, "TocHeader")) or \
            not src.has(toc_off + S.TOC_HEADER_SIZE, n * S.TOC_ENTRY_SIZE):
        return []
    tab = TOC_ENTRY.view(src.buf, toc_off + S.TOC_HEADER_SIZE, n)
    spans, seen = [], set()
    for fourcc, off, ln in zip(tab["fourcc"], tab["chunk_offset"].tolist(), tab["chunk_length"].tolist()):
        fc = bytes(fourcc)
        if fc in _OPEN_CHUNKS and fc not in seen:
            seen.add(fc)
            if 0 < ln <= S.MAX_METADATA_ULEN and off + ln <= size:
                spans.append((off, off + ln))
    return spans


def _pages(src: Source, start: int, length: int, page_size: int) -> list[bytes]:
    ph = PageHasher(page_size)
    pos, end = start, start + length
    while pos < end:
        n = min(PIECE, end - pos)
        ph.update(src.buf[pos:pos + n])
        src.release(pos, n)
        pos += n
    return ph.finish()


class _TidxColumns:
    """The TIDX entry table's columns as the relations engine reads them."""

    def __init__(self, t: table.Table):
        self.t = t

    def __getitem__(self, name: str):
        if name == "shape":
            lens, flat, _ = self.t.ragged("shape")
            return lens, flat
        return self.t.column(name)


def _zstd_frame_ok(raw, c: Chunk) -> None:
    """The frame header is zstd and does not contradict chunk_ulen (checked before inflating)."""
    try:
        params = zstandard.get_frame_parameters(raw)
    except zstandard.ZstdError as e:
        raise _err(E.CompressionError, c.offset, f"{c.path()}.payload", Rule.ZSTD, f"not a zstd frame: {e}") from None
    declared = params.content_size
    if declared != zstandard.CONTENTSIZE_UNKNOWN and declared != c.ulen:
        where = c.toc_offset_field + TOC_ENTRY.by_name["chunk_ulen"].offset
        raise _err(E.CompressionError, where, f"{c.path()}.chunk_ulen", Rule.ZSTD,
                   f"zstd frame declares {declared} bytes, chunk_ulen says {c.ulen} (refused before decompressing)")


def _ulen_error(c: Chunk, got: int) -> E.FormatError:
    where = c.toc_offset_field + TOC_ENTRY.by_name["chunk_ulen"].offset
    return _err(E.CompressionError, where, f"{c.path()}.chunk_ulen", Rule.ZSTD,
                f"payload decompresses to {'more than ' if got > c.ulen else ''}{got} bytes, chunk_ulen says {c.ulen}")


def _zstd_bounded(raw, c: Chunk) -> bytes:
    """Decompress a metadata chunk without ever producing more than chunk_ulen bytes."""
    _zstd_frame_ok(raw, c)
    try:
        if zstandard.get_frame_parameters(raw).content_size == c.ulen:  # size known and checked: one bounded call
            out = zstandard.ZstdDecompressor().decompress(raw, max_output_size=c.ulen)
            if len(out) != c.ulen:
                raise zstandard.ZstdError(f"frame decoded to {len(out)} bytes")
            return out
        with zstandard.ZstdDecompressor().stream_reader(bytes(raw), read_across_frames=True) as r:
            parts, got = [], 0
            while got <= c.ulen:
                b = r.read(min(PIECE, c.ulen + 1 - got))
                if not b:
                    break
                parts.append(b)
                got += len(b)
    except zstandard.ZstdError as e:
        raise _err(E.CompressionError, c.offset, f"{c.path()}.payload", Rule.ZSTD, f"zstd: {e}") from None
    if got != c.ulen:
        raise _ulen_error(c, got)
    return b"".join(parts)


# =============================================================================== writer
@dataclass
class TensorSpec:
    """A tensor to write when it is not a plain numpy array.

    ``data`` is a numpy array, a bytes-like object, or a callable returning an iterable of
    bytes-like pieces (streamed; called once per pass).  ``dtype`` is a numpy dtype or "packed".
    """
    data: Any
    dtype: Any = None
    shape: tuple | None = None
    quant_id: int | None = None
    quant_params: dict | None = None


@dataclass
class _Item:
    name: str
    code: int
    shape: tuple
    nbytes: int
    pieces: Callable[[], Iterable]  # yields little-endian C-order bytes-like pieces
    quant_id: int | None = None
    quant_params: dict | None = None
    hash_b3: str | None = None
    shard: int = 0
    data_off: int = 0
    whole: Any = None  # all the bytes in one small piece (a small in-memory array): no generator


def _callable_pieces(fn: Callable[[], Iterable]) -> Callable[[], Iterable]:
    return lambda: map(as_le_bytes, fn())


def _item(name: str, t) -> _Item:
    name_bytes(name)
    if isinstance(t, Packed):  # quantized bytes from another format: PACKED, its codec in quant_params
        raw = np.ascontiguousarray(t.data).reshape(-1).view(np.uint8)
        return _Item(name, DType.PACKED, tuple(int(s) for s in t.shape), raw.nbytes, array_pieces(raw), None,
                     dict(t.quant_params) if t.quant_params else None)
    if isinstance(t, TensorSpec):
        if isinstance(t.dtype, str) and t.dtype == "packed":
            if callable(t.data):
                raise E.UsageError(f"{name}: a streamed packed tensor needs its byte length; pass bytes or an array")
            raw = np.frombuffer(memoryview(t.data).cast("B"), dtype=np.uint8) if not isinstance(t.data, np.ndarray) \
                else t.data.reshape(-1).view(np.uint8)
            shape = tuple(int(s) for s in (t.shape if t.shape is not None else (raw.size,)))
            return _Item(name, DType.PACKED, shape, raw.nbytes, array_pieces(raw), t.quant_id, t.quant_params)
        if callable(t.data):
            if t.dtype is None or t.shape is None:
                raise E.UsageError(f"{name}: a streamed tensor needs dtype and shape")
            code = _code(name, np.dtype(t.dtype))
            shape = tuple(int(s) for s in t.shape)
            return _Item(name, code, shape, math.prod(shape) * S.DTYPE_ITEMSIZE[code], _callable_pieces(t.data),
                         t.quant_id, t.quant_params)
        arr = as_array(name, t.data) if t.dtype is None else as_array(name, t.data).view(np.dtype(t.dtype))
        if t.shape is not None:
            arr = arr.reshape(t.shape)
        return _item(name, arr)
    t = as_array(name, t)
    code = _code(name, t.dtype)
    whole = memoryview(t.reshape(-1).view(np.uint8)) \
        if 0 < t.nbytes < _SMALL_PIECE and t.flags.c_contiguous and t.dtype.byteorder != ">" else None
    return _Item(name, code, tuple(map(int, t.shape)), t.nbytes, array_pieces(t), whole=whole)


_CODE_SEEN: dict = {}


def _code(name: str, dt: np.dtype) -> int:
    c = _CODE_SEEN.get(dt)  # (10^5 tiny tensors: one dtype lookup each, not a new dtype each)
    if c is None:
        c = CODE_OF.get(dt.newbyteorder("<") if dt.byteorder in "<>=|" else dt)
        if c is not None:
            _CODE_SEEN[dt] = c
    if c is None:
        raise E.UsageError(f"{name}: AERO has no dtype for {dt} (supported: "
                           f"{', '.join(S.DTYPE_NAMES[k] for k in NP_DTYPES if k != DType.PACKED)}, packed)")
    return c


def _align(x: int, a: int) -> int:
    return -(-x // a) * a


def plan_shards(items: list[_Item], max_shard_bytes: int | None, align: int = S.TENSOR_ALIGN) -> list[int]:
    """Assign shard ids and in-shard offsets; returns each shard's byte size.  A tensor larger
    than the cap gets a shard of its own; an empty tensor never starts a shard (where alignment
    would push it past the cap, it sits unaligned at the end of the current one)."""
    sizes = [0]
    for it in items:
        start = _align(sizes[-1], align)
        if max_shard_bytes is not None and sizes[-1] > 0 and start + it.nbytes > max_shard_bytes:
            if not it.nbytes:
                it.shard, it.data_off = len(sizes) - 1, sizes[-1]
                continue
            sizes.append(0)
            start = 0
        it.shard = len(sizes) - 1
        it.data_off = start
        sizes[-1] = start + it.nbytes
    return sizes


@dataclass
class Layout:
    """Where everything goes: header, TOC, string table, 16-aligned payloads (DECISIONS.md)."""
    header: dict
    entries: list[dict]
    strtab: bytes
    st_off: int

    @classmethod
    def plan(cls, specs: list[tuple], uuid: bytes) -> "Layout":
        """``specs``: (fourcc, name, flags, stored length, ulen, blake3) per chunk, in file order."""
        names = [sp[1].encode("utf-8") for sp in specs]
        strtab = b"".join(n + b"\0" for n in names)
        strtab += bytes(_align(len(strtab), S.STRTAB_ALIGN) - len(strtab))
        toc_len = S.TOC_HEADER_SIZE + S.TOC_ENTRY_SIZE * len(specs)
        st_off = _align(S.HEADER_SIZE + toc_len, S.STRTAB_ALIGN)
        pos = _align(st_off + len(strtab), S.CHUNK_ALIGN)
        entries, name_off = [], 0
        for (fc, _, flags, length, ulen, b3), nm in zip(specs, names):
            entries.append({"fourcc": fc, "chunk_flags": flags, "chunk_offset": pos, "chunk_length": length,
                            "chunk_ulen": ulen, "name_off": name_off, "name_len": len(nm), "blake3_256": b3})
            name_off += len(nm) + 1
            pos = _align(pos + length, S.CHUNK_ALIGN)
        header = {"toc_offset": S.HEADER_SIZE, "toc_length": toc_len, "string_table_offset": st_off,
                  "string_table_length": len(strtab), "uuid": bytes(uuid)}
        return cls(header, entries, strtab, st_off)

    @property
    def payloads_start(self) -> int:
        return _align(self.st_off + len(self.strtab), S.CHUNK_ALIGN)

    @property
    def file_end(self) -> int:
        if not self.entries:
            return self.payloads_start
        e = self.entries[-1]
        return e["chunk_offset"] + e["chunk_length"]

    def control(self, with_hashes: bool = True) -> bytes:
        """Header + TOC + string table (TOC hashes zeroed when ``with_hashes`` is False: AIP-0001)."""
        out = bytearray(HEADER.build(self.header))
        out += TOC_HEADER.build({"entry_count": len(self.entries)})
        for e in self.entries:
            out += TOC_ENTRY.build(e if with_hashes else dict(e, blake3_256=bytes(32)))
        out += bytes(self.st_off - len(out))
        out += self.strtab
        return bytes(out)


def build_container(chunks: list[tuple], uuid: bytes = bytes(16)) -> bytes:
    """Assemble an AERO file in memory from ``(fourcc, name, flags, stored_payload[, ulen[, blake3]])``
    exactly as given — no checks, so tests and fuzz seeds can build any (even broken) file.
    ``blake3`` defaults to the hash of the payload (decompressed when flagged and valid)."""
    specs, payloads = [], []
    for ch in chunks:
        fc, name, flags, data = ch[:4]
        ulen = ch[4] if len(ch) > 4 else len(data)
        if len(ch) > 5:
            b3 = ch[5]
        else:
            raw = data
            if flags & S.ChunkFlags.COMPRESSED_ZSTD:
                try:
                    raw = zstandard.ZstdDecompressor().decompress(data)
                except zstandard.ZstdError:
                    pass
            b3 = blake3_bytes(raw)
        specs.append((fc, name, flags, len(data), ulen, b3))
        payloads.append(data)
    lay = Layout.plan(specs, uuid)
    out = bytearray(lay.control())
    for e, data in zip(lay.entries, payloads):
        out += bytes(e["chunk_offset"] - len(out))
        out += data
    return bytes(out)


def _pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3, write_content_size=True, write_checksum=False).compress(data)


def write_aero(path, tensors: Mapping | Iterable, *, uuid: bytes | None = None, model_name: str = "",
               architecture: str = "", metadata: dict | None = None, max_shard_bytes: int | None = None,
               compress: bool = True, control_integrity: bool = False, page_hashes: bool = False,
               page_size: int = S.DEFAULT_PAGE_SIZE, tensor_hash: bool = True,
               quant_descriptors: list | None = None, progress: bool | None = None, first_shard: int = 0) -> str:
    """Write an AERO v0.1 file, streaming, deterministically and atomically.

    ``tensors``: mapping or iterable of (name, numpy array | TensorSpec), written in that order.
    ``uuid``: 16 bytes; when None it is derived from the content (still deterministic).
    ``max_shard_bytes``: split weights into several WTSH shards.  ``compress``: zstd for MMSG and
    TIDX.  ``control_integrity``: IHSH.  ``page_hashes``: a PHSH per shard of ``page_size``.
    ``tensor_hash``: hash_b3 per tensor in TIDX.  ``first_shard``: the id of the first shard (an
    AEROSET part names its shards with global ids).
    """
    pairs = list(tensors.items()) if isinstance(tensors, Mapping) else list(tensors)
    items = [_item(n, t) for n, t in pairs]
    names = [it.name for it in items]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise E.UsageError(f"duplicate tensor name {dup!r}")
    if uuid is not None and (not isinstance(uuid, (bytes, bytearray)) or len(uuid) != 16):
        raise E.UsageError("uuid must be 16 bytes")
    if page_size < 1:
        raise E.UsageError("page_size must be positive")
    if max_shard_bytes is not None and max_shard_bytes < 1:
        raise E.UsageError("max_shard_bytes must be positive")
    total = sum(it.nbytes for it in items)
    shard_sizes = plan_shards(items, max_shard_bytes)
    with Progress(total * (2 if tensor_hash else 1), f"write {os.path.basename(os.fspath(path))}",
                  enabled=progress) as bar:
        # pass 1: the hashes TIDX and the TOC hold (TIDX precedes the weights, so they are needed
        # before the first byte of a shard is written): each tensor's hash_b3 on this thread and
        # its shard's BLAKE3 (and page digests) on a worker, from the same pieces; pass 2 then
        # only writes (no hashing while the bytes go out)
        shard_digests = _hash_shards(items, page_size if page_hashes else None, bar) if tensor_hash else {}
        return _write(path, items, shard_sizes, bar, uuid=uuid, model_name=model_name,
                      architecture=architecture, metadata=metadata, compress=compress,
                      control_integrity=control_integrity, page_hashes=page_hashes, page_size=page_size,
                      quant_descriptors=quant_descriptors, first_shard=first_shard, shard_digests=shard_digests)


#: pieces smaller than this are written together (10^5 tiny tensors: not one syscall each)
_GATHER = 1 << 20
#: a tensor of one piece smaller than this is hashed at once and its bytes fed to the shard's
#: hashers together with its neighbours' (one hand-over per _GATHER bytes, not per tensor)
_SMALL_PIECE = 64 << 10


def _shard_pieces(its: list[_Item]):
    """(item or None for padding, piece) of one shard's bytes, in order; raises UsageError when
    a source gives another number of bytes than it said."""
    filled = 0
    for it in its:
        if it.data_off > filled:
            yield None, bytes(it.data_off - filled)
        if it.whole is not None:
            yield it, it.whole
            filled = it.data_off + it.nbytes
            continue
        got = 0
        for p in it.pieces():
            got += len(p)
            yield it, p
        if got != it.nbytes:
            raise E.UsageError(f"{it.name}: source gave {got} bytes, expected {it.nbytes}")
        filled = it.data_off + it.nbytes


def _by_shard(items: list[_Item]) -> dict[int, list[_Item]]:
    out: dict[int, list[_Item]] = {}
    for it in items:
        out.setdefault(it.shard, []).append(it)
    return out


def _hash_shards(items: list[_Item], page_size: int | None, bar) -> dict[int, tuple[bytes, list | None]]:
    """Every tensor's hash_b3 (set on the item) and every shard's (BLAKE3, page digests), in one
    read of the sources: the shard's hashers run on a worker thread while this one hashes the
    same piece for its tensor (one thread each: measured, that splits the two cores best)."""
    out = {}
    for sid, its in _by_shard(items).items():
        whole, ph = new_hasher(max_threads=1), (PageHasher(page_size) if page_size else None)
        h, cur = None, None
        small = bytearray()  # whole small tensors and padding, copied, fed to the shard's hashers together
        with BackgroundFeed(whole, ph) as feed:
            for it, p in _shard_pieces(its):
                if it is None or (len(p) == it.nbytes and len(p) < _SMALL_PIECE):
                    if it is not None:  # a whole tensor in one small piece: hashed here at once
                        if cur is not None:
                            cur.hash_b3, cur = h.hexdigest(), None
                        it.hash_b3 = blake3_hasher(p).hexdigest()
                        bar.update(len(p))
                    small += p
                    if len(small) >= _GATHER:
                        feed.update(small)
                        feed.drain()
                        small = bytearray()
                    continue
                if small:
                    feed.update(small)
                    feed.drain()
                    small = bytearray()
                feed.update(p)
                if it is not None:
                    if it is not cur:
                        if cur is not None:
                            cur.hash_b3 = h.hexdigest()
                        cur, h = it, blake3_hasher()
                    h.update(p)
                    bar.update(len(p))
                # both hashers are done with p before the source moves on: a streamed source may
                # refill p's buffer next, a mapped one drops p's pages (were the worker still
                # reading them, it would fault them back in: resident memory would grow)
                feed.drain()
            if small:
                feed.update(small)
            if cur is not None:
                cur.hash_b3 = h.hexdigest()
        for it in its:  # (an empty tensor yields no piece)
            if it.hash_b3 is None:
                it.hash_b3 = blake3_hasher().hexdigest()
        out[sid] = (whole.digest(), ph.finish() if ph else None)
    return out


def _write(path, items, shard_sizes, bar, *, uuid, model_name, architecture, metadata, compress,
           control_integrity, page_hashes, page_size, quant_descriptors, first_shard=0,
           shard_digests: dict | None = None) -> str:
    # ---------------------------------------------------------------- payloads
    tidx = {"tensors": []}
    for it in items:
        e = {"name": it.name, "dtype": int(it.code), "shape": list(it.shape), "shard_id": first_shard + it.shard,
             "data_off": it.data_off, "data_len": it.nbytes, "flags": 0}
        if it.hash_b3 is not None:
            e["hash_b3"] = it.hash_b3
        if it.quant_id is not None:
            e["quant_id"] = int(it.quant_id)
        if it.quant_params is not None:
            e["quant_params"] = it.quant_params
        tidx["tensors"].append(e)
    tidx_raw = _pack(tidx)
    mjsn_obj = {"architecture": "", "model_name": ""}
    mjsn_obj.update(common_metadata(metadata, model_name=model_name, architecture=architecture))
    try:
        mjsn_raw = json.dumps(mjsn_obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as e:
        raise E.UsageError(f"metadata must be JSON-serialisable: {e}") from None

    # chunk list: [fourcc, name, raw payload (None: streamed or filled in later), local shard index]
    # (shards are named and numbered first_shard + local index: an AEROSET part uses global ids)
    n_shards = len(shard_sizes)
    plan: list[list] = []
    if control_integrity:
        plan.append([FourCC.IHSH, S.ChunkName.IHSH, None, None])
    plan.append([FourCC.MJSN, S.ChunkName.MJSN, mjsn_raw, None])
    plan.append([FourCC.MMSG, S.ChunkName.MMSG, None, None])
    plan.append([FourCC.TIDX, S.ChunkName.TIDX, tidx_raw, None])
    for s in range(n_shards):
        plan.append([FourCC.WTSH, S.ChunkName.shard(first_shard + s), None, s])
        if page_hashes:
            plan.append([FourCC.PHSH, S.ChunkName.phsh(first_shard + s), None, s])
    roles = {FourCC.IHSH: "control_integrity", FourCC.MJSN: "json", FourCC.MMSG: "manifest",
             FourCC.TIDX: "tensors", FourCC.WTSH: "weights", FourCC.PHSH: "page_hashes"}
    chunks_desc, shards_desc = [], []
    counts = [0] * n_shards
    for it in items:
        counts[it.shard] += 1
    for i, (fc, name, _, s) in enumerate(plan):
        d = {"role": roles[fc], "fourcc": fc.value.decode(), "toc_index": i}
        if s is not None:
            d["shard_id"] = first_shard + s
            if fc == FourCC.WTSH:
                shards_desc.append({"shard_id": first_shard + s, "toc_index": i, "size_bytes": shard_sizes[s],
                                    "tensor_count": counts[s], "mmap_critical": True})
        chunks_desc.append(d)
    mmsg = {"format": {"name": "AERO", "version": list(S.VERSION)},
            "model": {"name": mjsn_obj["model_name"], "architecture": mjsn_obj["architecture"]},
            "chunks": chunks_desc, "shards": shards_desc}
    if quant_descriptors:
        mmsg["quant_descriptors"] = quant_descriptors
    mmsg_raw = _pack(mmsg)
    for p in plan:
        if p[0] == FourCC.MMSG:
            p[2] = mmsg_raw
    if uuid is None:
        uuid = blake3_bytes(tidx_raw + mmsg_raw + mjsn_raw)[:16]

    # ---------------------------------------------------------------- layout
    specs = []  # (fourcc, name, flags, stored length, ulen, blake3 of the raw payload)
    stored: list[bytes | None] = []
    for fc, name, raw, sid in plan:
        flags = int(S.WRITER_FLAGS[fc])
        if fc == FourCC.IHSH:
            ulen, data = S.IHSH_PAYLOAD_SIZE, None
        elif fc == FourCC.WTSH:
            ulen, data = shard_sizes[sid], None
        elif fc == FourCC.PHSH:
            n_pages = -(-shard_sizes[sid] // page_size)
            ulen = len(_pack({"shard_name": S.ChunkName.shard(first_shard + sid), "page_size": page_size,
                              "digests": [bytes(32)] * n_pages}))
            data = None
        else:
            ulen = len(raw)
            if compress and flags & S.ChunkFlags.COMPRESSED_ZSTD:
                data = _zstd(raw)
            else:
                flags &= ~int(S.ChunkFlags.COMPRESSED_ZSTD)
                data = raw
        specs.append((fc.value, name, flags, ulen if data is None else len(data), ulen,
                      blake3_bytes(raw) if raw is not None else bytes(32)))
        stored.append(data)
    lay = Layout.plan(specs, uuid)
    entries = lay.entries
    file_end = lay.file_end
    control_region = lay.control

    # ---------------------------------------------------------------- stream
    with atomic_write(path) as f, Writeback(f) as wb:
        f.seek(lay.payloads_start)
        at = f.tell()
        shard_items = _by_shard(items)
        phsh_digests: dict[int, list[bytes]] = {}
        for i, e in enumerate(entries):
            fc = plan[i][0]
            if e["chunk_offset"] > at:
                write_all(f, bytes(e["chunk_offset"] - at))
            if fc == FourCC.IHSH:
                write_all(f, bytes(S.IHSH_PAYLOAD_SIZE))  # patched once the TOC is final
            elif fc == FourCC.WTSH:
                sid = plan[i][3]
                known = (shard_digests or {}).get(sid)
                if known is not None:  # hashed in pass 1: only write (small pieces gathered first)
                    pending, held = [], 0
                    for it, p in _shard_pieces(shard_items.get(sid, [])):
                        if len(p) < _GATHER:
                            pending.append(p)
                            held += len(p)
                            if held < _GATHER:
                                if it is not None:
                                    bar.update(len(p))
                                continue
                            p = b"".join(pending)
                            pending, held = [], 0
                        elif pending:
                            write_all(f, b"".join(pending))
                            pending, held = [], 0
                        write_all(f, p)
                        wb.wrote(len(p))
                        if it is not None:
                            bar.update(len(p))
                    if pending:
                        write_all(f, b"".join(pending))
                    e["blake3_256"], pages = known
                    if page_hashes:
                        phsh_digests[sid] = pages
                    at = e["chunk_offset"] + e["chunk_length"]
                    continue
                h = new_hasher()
                ph = PageHasher(page_size) if page_hashes else None
                # the shard (and page) hashes run on a worker thread while the same pieces are written
                with BackgroundFeed(h, ph) as feed:
                    for it, p in _shard_pieces(shard_items.get(sid, [])):
                        feed.update(p)
                        write_all(f, p)
                        wb.wrote(len(p))
                        feed.drain()  # before the source refills p's buffer or drops its pages
                        if it is not None:
                            bar.update(len(p))
                e["blake3_256"] = h.digest()
                if ph:
                    phsh_digests[sid] = ph.finish()
            elif fc == FourCC.PHSH:
                sid = plan[i][3]
                raw = _pack({"shard_name": S.ChunkName.shard(first_shard + sid), "page_size": page_size,
                             "digests": phsh_digests[sid]})
                assert len(raw) == e["chunk_ulen"]
                e["blake3_256"] = blake3_bytes(raw)
                write_all(f, raw)
            else:
                write_all(f, stored[i])
            at = e["chunk_offset"] + e["chunk_length"]
        assert at == file_end
        if control_integrity:
            i = next(k for k, p in enumerate(plan) if p[0] == FourCC.IHSH)
            start = lay.payloads_start
            region = control_region(with_hashes=False)
            digest = blake3_bytes(region + bytes(start - len(region)))
            raw = _pack({"algo": "blake3-256", "covered_ranges": [[0, start]], "digest": digest})
            raw += bytes(S.IHSH_PAYLOAD_SIZE - len(raw))
            entries[i]["blake3_256"] = blake3_bytes(raw)
            f.seek(entries[i]["chunk_offset"])
            write_all(f, raw)
        f.seek(0)
        write_all(f, control_region(with_hashes=True))
    return os.fspath(path)


# =============================================================================== registry
from ..registry import Capabilities, FormatDescriptor  # noqa: E402

def _demo(out_dir: str, model: dict) -> list:
    """Two AERO files (plain; sharded with control-region and page hashes) and a copy of the
    first with one bit flipped in a tensor, which validate reports."""
    from ..demo import flip_bit, show
    plain, sharded = os.path.join(out_dir, "tiny-mlp.aero"), os.path.join(out_dir, "tiny-mlp-sharded.aero")
    write_aero(plain, model, uuid=bytes(16), model_name="tiny-mlp", architecture="mlp",
               metadata={"license": "CC0", "note": "modelcodec demo"})
    write_aero(sharded, model, uuid=bytes(range(16)), model_name="tiny-mlp", architecture="mlp",
               max_shard_bytes=32 * 1024, control_integrity=True, page_hashes=True, page_size=16 * 1024)
    bad = os.path.join(out_dir, "corrupted.aero")
    with AeroReader(plain) as r:
        flip_bit(plain, bad, r.tensors["layer.0.weight"].offset + 5)
    return [*show(plain), *show(sharded), *show(bad, expect=1, note="   # one flipped bit in layer.0.weight")[1:]]


CAPABILITIES = Capabilities(frozenset({dt.name for c, dt in NP_DTYPES.items() if c != DType.PACKED} | {"packed"}),
                            max_rank=S.MAX_RANK, metadata="json")


def _cgen() -> list:
    """The C++ reader's generated header (cpp/include/aero/generated.hpp): this schema, plus the
    element type names the reader gives (``TensorInfo.common_dtype``, the ``dtype`` of
    ``inspect --json``) for each dtype code."""
    from ..cgen import CgenSpec
    common = {int(c): ("packed" if c == DType.PACKED else dt.name) for c, dt in NP_DTYPES.items()}
    array = {int(c): dt.name for c, dt in NP_DTYPES.items()}  # (the element type of the array tensor() gives)
    return [CgenSpec("cpp/include/aero/generated.hpp", "schema_aero", S,
                     {"DTYPE_COMMON_NAMES": common, "DTYPE_ARRAY_NAMES": array}, order=0)]


DESCRIPTOR = FormatDescriptor("aero", S, AeroReader, write_aero, magic=S.MAGIC, capabilities=CAPABILITIES, demo=_demo,
                              open_ranges=open_partial, cgen=lambda: _cgen(),
                              summary="chunked container: BLAKE3, zstd, msgpack tensor index")
