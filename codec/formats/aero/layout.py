"""AERO layout: where header, TOC, string table and payloads go; an in-memory container builder."""
from __future__ import annotations

from dataclasses import dataclass

import msgpack
import zstandard

from ...schemas import aero as S

from ...io.integrity import blake3_bytes
from ...engine.relations.plan import after
from .chunks import HEADER, TOC_ENTRY, TOC_HEADER, _align, chunk_at

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
        st_off = after(S.TOC_RELATIONS, "FileHeader.string_table_offset", S.HEADER_SIZE + toc_len, records=S.RECORDS)
        pos = chunk_at(st_off + len(strtab))
        entries, name_off = [], 0
        for (fc, _, flags, length, ulen, b3), nm in zip(specs, names):
            entries.append({"fourcc": fc, "chunk_flags": flags, "chunk_offset": pos, "chunk_length": length,
                            "chunk_ulen": ulen, "name_off": name_off, "name_len": len(nm), "blake3_256": b3})
            name_off += len(nm) + 1
            pos = chunk_at(pos + length)
        header = {"toc_offset": S.HEADER_SIZE, "toc_length": toc_len, "string_table_offset": st_off,
                  "string_table_length": len(strtab), "uuid": bytes(uuid)}
        return cls(header, entries, strtab, st_off)

    @property
    def payloads_start(self) -> int:
        return chunk_at(self.st_off + len(self.strtab))

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
