"""AERO reader: structure checked at open (header, TOC, string table, MMSG, TIDX), tensors handed
out as read-only zero-copy views."""
from __future__ import annotations

from binascii import unhexlify
from typing import Any

import numpy as np
import zstandard

from ...schemas import aero as S
from ...schemas.aero import DType, FourCC, Rule
from ...schemas.dsl import Present, RefersTo, Region, Unique

from ... import errors as E
from ...engine import payload, relations, table
from ...engine.records import first_error
from ...io.bounded import BoundedReader
from ...io.integrity import SMALL, blake3_bytes, blake3_range, new_hasher
from ...io.writer_io import PIECE
from ...io.sources import frozen_view
from ...model import Checksum, StopCheck, TensorInfo, checks_open, closed_error
from .chunks import (B3, FMT, HEADER, NP_DTYPES, TOC_ENTRY, TOC_HEADER, Chunk, _err, _ulen_error, _zstd_bounded,
                     _zstd_frame_ok)
from .validate import AeroValidation


#: pieces of a big compressed index inflated ahead of its decoding (see chunk_reader)
_AHEAD = 4 << 20


#: a TIDX of at most this many entries has the columns a read takes made lists on the first read
#: (~2 ms at most); a bigger one is read an item at a time
_LISTED = 16384


class AeroReader(AeroValidation):
    """Reads one AERO file from a path (mmap) or a buffer.

    Structure is checked at open; a broken file raises the first :class:`codec.FormatError`.
    Tensors are read-only zero-copy numpy views; hash_b3 is verified on a tensor's first read.
    """
    format = "aero"
    FMT = FMT

    def __init__(self, source, *, strict: bool = True, _collect: bool = False):
        self.strict = strict
        self._verified: set[str] = set()
        self._plain: dict[str, tuple] = {}  # name -> (dtype, shape, offset, nbytes, hash_b3) of a plain tensor read
        self._rows: tuple | bool | None = None  # (see _fast_rows)
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

    def _header(self, v):
        h = self._read_header(v, HEADER, Rule.TRUNCATED)
        # the TOC and the string table inside the file, apart: declared in schemas.aero.HEADER_RELATIONS
        found = relations.check(S.HEADER_RELATIONS, relations.Context(FMT, self._src.size, h, HEADER), self._src.buf)
        if found.errors:
            v.extend(found.errors)
            raise StopCheck

    def _toc(self, v):
        buf, size, h = self._src.buf, self._src.size, self.header
        toc_off, toc_len = h["toc_offset"], h["toc_length"]
        if not (self._src.has(toc_off, toc_len) and
                self._src.has(h["string_table_offset"], h["string_table_length"])):
            # a partial (remote) source reads the control region only when the header is sane
            if first_error(v, self.strict) is None:
                v.append(_err(E.TruncatedError, toc_off, "toc", Rule.TOC_BOUNDS, "the TOC was not read"))
            raise StopCheck
        th = TOC_HEADER.parse(buf, toc_off, "TocHeader")
        bad = TOC_HEADER.check(th, toc_off, "TocHeader")
        v.extend(bad)
        if any(isinstance(b, E.LimitError) for b in bad):
            raise StopCheck
        n = th["entry_count"]
        # toc_length against entry_count, declared in schemas.aero.TOC_HEADER_RELATIONS (both
        # headers as tables of one row): the entries are not viewed unless it holds
        hctx = relations.Context(FMT, size)
        for rec, row, at in ((HEADER, h, 0), (TOC_HEADER, th, toc_off)):
            hctx.add_table(rec.name, rec.name, _OneRow(row), 1, at + rec.size,
                           lambda i, f, rec=rec, at=at: at + rec.by_name[f].offset,
                           row_path=lambda i, rec=rec: rec.name)
        found = relations.check(S.TOC_HEADER_RELATIONS, hctx, buf)
        if found.errors:
            v.extend(found.errors)
            raise StopCheck
        base = toc_off + S.TOC_HEADER_SIZE
        tab = TOC_ENTRY.view(buf, base, n)
        v.extend(TOC_ENTRY.check_table(tab, base, "toc"))

        st_off, st_len = h["string_table_offset"], h["string_table_length"]
        # names first (a name outside the string table is not decoded: its relation reports it)
        name_bad = (tab["name_off"].astype(np.uint64) + tab["name_len"].astype(np.uint64)) > st_len
        strtab = buf[st_off:st_off + st_len]
        name_off = tab["name_off"].tolist()
        raw = [None if bad else bytes(strtab[o:o + ln]) for bad, o, ln in
               zip(name_bad.tolist(), name_off, tab["name_len"].tolist())]
        # names are UTF-8 text without NUL: declared in schemas.aero.NAME_RELATIONS, decoded there
        nctx = relations.Context(FMT, size)
        nctx.add_table("ChunkName", "toc", {"bytes": raw}, n, st_off + st_len, lambda i, f: st_off + name_off[i])
        v.extend(relations.check(S.NAME_RELATIONS, nctx, buf).errors)
        names = nctx.value("ChunkName.name")
        # (whole columns as Python values: one conversion per column, not one per field of each row)
        fourccs, digests = tab["fourcc"].tobytes(), tab[S.CHUNK_CHECKSUM.field].tobytes()
        chunks = [Chunk(i, fourccs[4 * i:4 * i + 4], f"<bad name {i}>" if name is None else name, flags, off, ln, ulen,
                        digests[32 * i:32 * i + 32], base + i * S.TOC_ENTRY_SIZE)
                  for i, (name, flags, off, ln, ulen) in enumerate(zip(
                      names, *(tab[f].tolist() for f in ("chunk_flags", "chunk_offset", "chunk_length", "chunk_ulen"))))]
        # the rules between the entries' fields, declared in schemas.aero.TOC_RELATIONS
        ctx = relations.Context(FMT, size, h, HEADER, 0)
        ctx.add_table("TocEntry", "toc", {**{f: tab[f] for f in tab.dtype.names},
                                          "key": [(c.fourcc, c.name) for c in chunks]}, n, base + n * S.TOC_ENTRY_SIZE,
                      lambda i, f: base + i * S.TOC_ENTRY_SIZE + (TOC_ENTRY.by_name[f].offset if f in TOC_ENTRY.by_name
                                                                  else 0),
                      row_path=lambda i: chunks[i].path())
        ctx.values["control_end"] = max(toc_off + toc_len, st_off + st_len)
        self._toc_ctx = ctx  # (schemas.aero.CHUNK_RELATIONS are evaluated over it later)
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
            raise E.NotLocalError(f"{self.source}: {c.path()} was not read (a remote file: only its "
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
        """``got``, the digest of the payload, against the one the TOC holds (schemas.aero.CHUNK_CHECKSUM)."""
        self._digests[c.index] = got
        if got != c.blake3:
            d = S.CHUNK_CHECKSUM
            raise E.IntegrityError(FMT, c.toc_offset_field + TOC_ENTRY.by_name[d.field].offset,
                                   f"{c.path()}.{d.field}", d.rule,
                                   f"{d.algorithm.upper()} of the payload is {got.hex()[:16]}..., the TOC says "
                                   f"{c.blake3.hex()[:16]}...", algorithm=d.algorithm, expected=c.blake3.hex(),
                                   actual=got.hex())

    def chunk_reader(self, c: Chunk, *, verify: bool = True) -> BoundedReader:
        """A chunk's uncompressed payload as a stream (never more than chunk_ulen bytes): big
        indexes are decoded as they inflate, never held whole.  :meth:`chunk_done` drains it and
        checks its size and (``verify``) BLAKE3."""
        self._usable(c)
        raw = self._src.buf[c.offset:c.offset + c.length]
        # (BLAKE3's own threads only for a big payload: on a small one they cost more than they give)
        h = None if not verify else new_hasher() if max(c.length, c.ulen) >= SMALL else new_hasher(1)
        if not c.compressed:
            return BoundedReader(raw, c.length, h)
        if c.ulen < _AHEAD:  # (a small payload inflates in one call: a stream costs more to set up)
            return BoundedReader(_zstd_bounded(raw, c), c.ulen, h)
        _zstd_frame_ok(raw, c)
        src = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, read_size=PIECE)
        # a big index inflates and hashes on a worker thread, a piece ahead of its decoding
        ahead = _AHEAD if c.ulen >= 2 * _AHEAD else 0
        if ahead and h is not None:
            h = new_hasher(1)  # (the worker's one thread: the decoder has the other core)
        return BoundedReader(src, c.ulen, h, ahead=ahead, on_error=lambda e: _err(
            E.CompressionError, c.offset, f"{c.path()}.payload", Rule.ZSTD, f"zstd: {e}"))

    def chunk_done(self, c: Chunk, rd: BoundedReader) -> None:
        """The payload read through ``rd`` was whole and (when hashed) intact."""
        rd.drain()
        if c.compressed and rd.count != c.ulen:
            raise _ulen_error(c, rd.count)
        if rd.hasher is not None:
            self._check_chunk_hash(c, rd.hasher.digest())

    def _decode_msgpack(self, c: Chunk, decl, *, trailing_zeros=False, verify=True):
        data = self.chunk_bytes(c, verify=verify)
        return payload.unpack_msgpack(data, fmt=FMT, offset=c.offset, path=c.fourcc.decode(),
                                      rule=Rule.PAYLOAD, allow_trailing_zeros=trailing_zeros, stored=c.length,
                                      limit_rule=Rule.LIMIT_DECODE,
                                      per_byte=S.TIDX_OBJECTS_PER_BYTE if decl is S.Tidx else None)

    def _tidx(self, v):
        # 10^5 entries make ~10^6 small objects: the cyclic GC would re-scan them many times
        with payload.gc_paused():
            self._tidx_unpaused(v)

    def _tidx_unpaused(self, v):
        # the file has a tensor index: declared in schemas.aero.CHUNK_RELATIONS (Present)
        missing = relations.check([r for r in S.CHUNK_RELATIONS if isinstance(r, Present)], self._toc_ctx,
                                  self._src.buf).errors
        if missing:
            v.extend(missing)
            raise StopCheck
        c = self.chunk(FourCC.TIDX)
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
        ids = [int(sid[0])] if sid.min() == sid.max() else np.unique(sid).tolist()  # (one shard: no sort)
        shards = {int(u): self.chunk(FourCC.WTSH, S.ChunkName.shard(int(u))) for u in ids}
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
        try:
            obj = self._decode_msgpack(c, S.Mmsg)
        except E.FormatError as e:  # a damaged manifest: reported, and the index is still checked
            v.append(e)
            return
        bad = payload.check(S.Mmsg, obj, fmt=FMT, offset=c.offset, path="MMSG")
        v.extend(bad)
        if not bad:
            self.manifest = obj

    # ------------------------------------------------------------------ public reading
    @property
    def uuid(self) -> bytes:
        return self.header["uuid"]

    @property
    def raw_metadata(self) -> dict:
        """The MJSN JSON object (model_name, architecture, ...), or MMSG's model map."""
        if self._mjsn is None:
            if self._closed:  # (read when first asked for: not after the file is closed)
                raise closed_error(self, "metadata", call=False)
            c = self.chunk(FourCC.MJSN)
            self._mjsn = {}
            if c is not None:
                # Most reference-written files have an all-zero MJSN hash (a reference bug): validate() says so
                obj = self._json(c, verify=False)
                self._mjsn = obj if isinstance(obj, dict) else {}
            elif isinstance(self.manifest.get("model"), dict):
                # (MMSG's model map in the common vocabulary, without the "" it holds for what
                # its writer was not given: the file never named them)
                self._mjsn = {("model_name" if k == "name" else k): v for k, v in self.manifest["model"].items()
                              if v != ""}
        return self._mjsn

    def _json(self, c: Chunk, verify: bool):
        return payload.loads_json(self.chunk_bytes(c, verify=verify), fmt=FMT, offset=c.offset, path="MJSN",
                                  rule=Rule.PAYLOAD, stored=c.length, limit_rule=Rule.LIMIT_DECODE)

    @property
    def quant_descriptors(self) -> list:
        q = self.manifest.get("quant_descriptors")
        if q is None:
            q = self.raw_metadata.get("quant_descriptors")
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

    @checks_open
    def tensor(self, name: str, *, verify: bool = True) -> np.ndarray:
        """Read-only zero-copy view.  PACKED tensors come back as raw uint8 bytes (see
        ``tensors[name].extra`` for quant_id/quant_params).  hash_b3 is checked on first read."""
        if self._closed:
            raise closed_error(self, "tensor")
        a = self._plain_view(name, verify)
        if a is not None:
            return a
        t = self.tensors[name]
        if t.offset is None:
            raise E.NotLocalError(f"{self.source}: {name!r} is listed by this index-only AERO file (no WTSH "
                                  "chunk); its bytes live in the AEROSET parts")
        if not self._src.has(t.offset, t.nbytes):
            raise E.NotLocalError(f"{self.source}: the bytes of {name!r} are not here (a remote file is read "
                                  "through its AeroSet)")
        if verify and "hash_b3" in t.extra and name not in self._verified:
            self._check_hash_b3(t, raise_=True)
            self._verified.add(name)
        if t.nbytes and t.extra["dtype_code"] != DType.PACKED:
            return self._src.view(t.dtype, t.shape, t.offset, t.nbytes)
        return tensor_view(t, self._src.buf, t.offset)

    def _plain_view(self, name: str, verify: bool) -> np.ndarray | None:
        """The view of a tensor when all is in order -- its entry checked, its shard usable, its
        bytes here (and matching its hash_b3 when verified): a plain, non-empty array -- from
        the tensor's row of :meth:`_fast_rows` (kept per name after the first read: then a dict
        hit), without a TensorInfo; None otherwise: then :meth:`tensor`'s full path decides, and
        raises what it finds."""
        p = self._plain.get(name)
        if p is None:
            p = self._plain_row(name)
            if p is None:
                return None
        dt, shape, start, n, want = p
        if want is not None and verify:
            if blake3_range(self._src, start, n, keep=True) != want:
                return None
            self._plain[name] = (dt, shape, start, n, None)  # (checked once: never again)
        return self._src.view(dt, shape, start, n)

    def _plain_row(self, name: str) -> tuple | None:
        """(numpy dtype, shape, start, nbytes, hash_b3 as bytes or None) of a plain tensor, kept
        for its next reads; None for any other (or no) tensor."""
        rows = self._rows
        if rows is None:
            rows = self._rows = self._fast_rows()
        i = self._index.get(name) if rows else None
        if i is None:
            return None
        starts, nbytes, codes, ranks, firsts, flat, hashes = rows
        if type(starts) is list:  # (a small table: its columns made lists once, :meth:`_fast_rows`)
            start, n, first, rank, code, want = starts[i], nbytes[i], firsts[i], ranks[i], codes[i], hashes[i]
            shape = flat[first:first + rank]
        else:
            start, n, first, rank, code, want = (starts.item(i), nbytes.item(i), firsts.item(i), ranks.item(i),
                                                 codes.item(i), hashes.item(i))
            shape = flat[first:first + rank].tolist()
        if start < 0 or not self._src.has(start, n):
            return None
        # (want: b"" where there is no hash_b3)
        p = self._plain[name] = (NP_DTYPES[code], tuple(shape), start, n, unhexlify(want) if want else None)
        return p

    def _fast_rows(self) -> tuple | bool:
        """Once, vectorised, on the first read (its entries checked): the TIDX columns a read
        takes -- where each tensor starts in the file (-1 for one the full path reads: packed,
        empty, in no usable shard), nbytes, dtype codes, ranks, where each shape begins in the
        flat shape column, that column, and hash_b3; False when the entries are not in order
        (the full path raises why)."""
        if self._entry_violations():
            return False
        t = self._entries
        codes, sid, off, nbytes = (t.column(k) for k in ("dtype", "shard_id", "data_off", "data_len"))
        ranks, flat, firsts = t.ragged("shape")
        hashes = t.column("hash_b3")
        if any(c.dtype.kind not in "iu" for c in (codes, sid, off, nbytes, flat)) or hashes.dtype.kind != "S":
            return False
        ids = sorted(self._shards)  # (every shard_id the entries name)
        base = np.array([-1 if sh is None or sh.index in self._unusable else sh.offset
                         for sh in map(self._shards.get, ids)], dtype=np.int64)[
            np.searchsorted(np.array(ids, dtype=np.uint64), sid)]
        plain = (base >= 0) & (nbytes > 0) & (codes != DType.PACKED)
        starts = np.where(plain, base + np.where(plain, off, 0).astype(np.int64), -1)
        cols = starts, nbytes, codes, ranks, firsts, flat, hashes
        if len(starts) <= _LISTED:  # (one conversion, then each first read is list indexing)
            return tuple(c.tolist() for c in cols)
        return cols

    def close(self) -> None:
        super().close()
        ctx = getattr(self, "_toc_ctx", None)
        if ctx is not None:
            ctx.detach()  # (as a format's ``_layout`` is: see Reader.close)

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

    # ------------------------------------------------------------------ for the files that use this one
    @property
    def entries(self) -> table.Table:
        """The tensor index as columns (``column(field)``, ``value(row, field)``, ``ok``, and
        ``kept``: the row of each listed tensor, in listing order)."""
        return self._entries

    @property
    def entries_checked(self) -> bool:
        """Whether every TIDX entry passed its relations (dtype x shape = data_len, its shard, its
        bytes inside the shard; run once): then each row's values are what they say."""
        return not self._entry_violations()

    @property
    def rows(self) -> dict[str, int]:
        """Tensor name -> its row of :attr:`entries`."""
        return self._index

    @property
    def size(self) -> int:
        """The file's length in bytes."""
        return self._src.size

    def held(self, offset: int, n: int):
        """The bytes [offset, offset + n) when this reader holds them (a remote file's reader holds
        only what was read), else None."""
        return self._src.buf[offset:offset + n] if self._src.has(offset, n) else None

    def check_hash_b3(self, name: str, got: str) -> None:
        """Raise the tensor's IntegrityError when ``got`` (hex BLAKE3 of bytes read elsewhere) is
        not its hash_b3."""
        self._check_hash_b3(self.tensors[name], raise_=True, got=got)

    # ------------------------------------------------------------------ misc
    def inspect_notes(self, t: TensorInfo) -> dict:
        return {"shard": t.extra["shard_id"]}

    def _regions(self) -> list:
        """The TOC, the string table and every chunk the TOC lists."""
        h, out = self.header, []
        if "toc_offset" in h:
            out += [("table", "toc", h["toc_offset"], h["toc_length"], {}),
                    ("strings", "string table", h["string_table_offset"], h["string_table_length"], {})]
        for c in getattr(self, "chunks", ()):
            out.append(("chunk", f"{c.fourcc.decode('ascii', 'replace')} {c.name}", c.offset, c.length,
                        {"index": c.index}))
        return out

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


class _OneRow:
    """A parsed record as a table of one row (its fields' columns made as the relations ask)."""

    def __init__(self, row: dict):
        self.row = row

    def __getitem__(self, name: str):
        return np.array([self.row[name]], dtype=np.uint64)


class _TidxColumns:
    """The TIDX entry table's columns as the relations engine reads them."""

    def __init__(self, t: table.Table):
        self.t = t

    def __getitem__(self, name: str):
        if name == "shape":
            lens, flat, _ = self.t.ragged("shape")
            return lens, flat
        return self.t.column(name)
