"""AERO integrity checks (``validate``): chunk hashes streamed, hash_b3, padding, IHSH, PHSH, and
the warning of a bool byte other than 0 or 1."""
from __future__ import annotations

import os

import numpy as np

from ...schemas import aero as S
from ...schemas.aero import FourCC, Rule
from ...schemas.dsl import Known

from ... import errors as E
from ...engine import payload, relations
from ...io.integrity import (BLAKE3, PageHasher, blake3_bytes, first_odd_bool, hash_many, odd_bool_message,
                             range_pieces, scan_hashes)
from ...io.writer_io import PIECE
from ...io.sources import Source
from ...model import Reader, Report
from ...ui.progress import Progress
from ...ui.display import plural
from .chunks import B3, FMT, TOC_ENTRY, _err, chunk_at

class AeroValidation(Reader):
    """What ``validate`` checks beyond the structure the reader checked at open (the base of
    :class:`AeroReader`)."""

    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        """Structure always; ``full`` adds every chunk BLAKE3 (streamed), hash_b3, IHSH, PHSH and
        the bool bytes (a warning when one is not 0 or 1).
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
        rep.checked.append(f"structure: header, TOC ({plural(len(self.chunks), 'chunk')}), string table, "
                           f"TIDX ({plural(len(self._index), 'tensor')}), MMSG")
        self._check_padding(rep)
        # chunk types this version does not know: warnings, declared in schemas.aero.CHUNK_RELATIONS (Known)
        rep.add(relations.check([r for r in S.CHUNK_RELATIONS if isinstance(r, Known)], self._toc_ctx,
                                self._src.buf).errors)
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
            rep.checked.append(f"BLAKE3 of {plural(len(self.chunks), 'chunk')}")
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
                rep.checked.append(f"hash_b3 of {plural(len(rows), 'tensor')}")
                rep.checksum(B3, "every tensor's bytes (TIDX hash_b3)", count=len(rows), mismatches=bad)
            elif entries_ok:
                rep.checked.append("hash_b3: no tensor carries one")
        if entries_ok:
            rep.add(self._odd_bools())
        self._validate_ihsh(rep, required=False)
        self._validate_phsh(rep)
        self._chunk_checksums(rep)
        return self._finish(rep)

    def digest_spans(self, full: bool = False) -> list[tuple[str, int, int]]:
        """Each tensor's bytes with a hash_b3 (in a usable shard) and, ``full``, each uncompressed
        chunk that validate hashes whole (:meth:`codec.model.Reader.digest_spans`)."""
        if not self._toc_ok or self._tidx_chunk is None or self.index_only or self._entry_violations():
            return []
        t = self._entries
        rows = np.flatnonzero(t.present("hash_b3"))
        usable = {s_id: sh.offset for s_id, sh in self._shards.items()
                  if sh is not None and sh.index not in self._unusable}
        out = [(BLAKE3, usable[s_id] + off, n) for s_id, off, n in zip(
            *(t.column(k)[rows].tolist() for k in ("shard_id", "data_off", "data_len"))) if s_id in usable]
        if full:
            out += [(BLAKE3, c.offset, c.length) for c in self.chunks if c.index not in self._unusable
                    and not c.compressed and c.fourcc not in (FourCC.MJSN, FourCC.TIDX, FourCC.MMSG)]
        return out

    def _odd_bools(self) -> list[E.FormatError]:
        """A warning (Rule.BOOL, declared in schemas.aero.WARNINGS) for each bool tensor holding a
        byte other than 0 or 1, at the first one: AERO holds any byte (a non-zero one reads as
        True), formats that require 0 or 1 refuse it.  Each tensor's bytes are scanned a PIECE at
        a time, their pages released behind (WTSH is never compressed: the bytes are the file's)."""
        t, out = self._entries, []
        for i in np.flatnonzero(t.column("dtype") == S.DType.BOOL).tolist():
            name, shard, off, n = t.values(i, ("name", "shard_id", "data_off", "data_len"))
            sh = self._shards.get(shard)
            if self._index.get(name) != i or sh is None or sh.index in self._unusable:
                continue  # (a repeated name: its first row is the tensor; an unusable shard: its own finding)
            odd = first_odd_bool(range_pieces(self._src, sh.offset + off, n)())
            if odd is not None:
                out.append(E.ConstraintError(FMT, sh.offset + off + odd[0], f"TIDX.tensors[{i}].data", Rule.BOOL,
                                             f"tensor {name!r}: {odd_bool_message(*odd)}"))
        return out

    def _chunk_checksums(self, rep: Report) -> None:
        """One checksum entry per chunk whose payload was hashed (at open or by this validation)."""
        for c in self.chunks:
            got = self._digests.get(c.index)
            if got is not None:
                rep.checksum(B3, f"chunk {c.index} {c.fourcc.decode('ascii', 'replace')} {c.name!r} payload",
                             c.blake3, got)

    def _check_padding(self, rep: Report) -> None:
        """Bytes no hash covers must be zero: string-table padding, gaps between chunks, tail
        (declared in schemas.aero.PADDING_RELATIONS; a remote file: the bytes read)."""
        h, ctx = self.header, self._toc_ctx
        st_off, st_len = h["string_table_offset"], h["string_table_length"]
        # every chunk's name counts, usable or not: it is not padding
        ends = ctx.value("TocEntry.name_off") + ctx.value("TocEntry.name_len") + np.uint64(1)
        names_end = int(ends.max()) if len(ends) else 0
        ctx.add_table("StringTable", "string table", {"offset": np.array([st_off], dtype=np.uint64),
                                                      "names_length": np.array([min(names_end, st_len)], np.uint64)},
                      1, st_off + st_len, lambda i, f: st_off)
        ctx.values["string_table_end"] = st_off + st_len
        ctx.values["unchecked_padding"] = 0
        ctx.covered = self._src.covered
        rep.add(relations.check(S.PADDING_RELATIONS, ctx, self._src.buf).errors)
        unread = ctx.values["unchecked_padding"]
        if unread:
            rep.notes.append(f"{unread} padding bytes outside the ranges read were not checked (remote file)")

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
        return chunk_at(end)

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
            rep.checked.append(f"PHSH page digests of {plural(n, 'shard')}")


def _pages(src: Source, start: int, length: int, page_size: int) -> list[bytes]:
    ph = PageHasher(page_size)
    pos, end = start, start + length
    while pos < end:
        n = min(PIECE, end - pos)
        ph.update(src.buf[pos:pos + n])
        src.release(pos, n)
        pos += n
    return ph.finish()
